#!/usr/bin/env bash
# outputs.sh — issue 12 (the output side): what `speechc build -o OUT` may write.
#
#   usage: tests/cli/hostile/outputs.sh path/to/speechc   (cwd: the repository root)
#
#   1. an -o that is an input of the build, or not a regular file, is refused
#      and nothing is written (the checkpoint compares equal afterwards);
#   2. symlinks planted at the temporary names the old code used are never
#      followed;
#   3. concurrent builds to one -o leave a pair that loads, and a reader
#      meanwhile loads the old or the new pair; a refused or interrupted build
#      (SIGINT, SIGTERM) leaves nothing behind, in the output directory nor
#      in $TMPDIR;
#   4. file names with quotes, backslashes, control bytes and non-UTF-8 bytes
#      build and run (they never reach the generated C unescaped).
# Every hostile file is made under $W; no case writes outside it.
set -u
. "$(dirname "$0")/../lib.sh"

ROOT=$(pwd)
QWEN_ABS=$ROOT/$QWEN
IDS=1,2,3

# pass NAME / check NAME WHY CONDITION...: a case that is not a command's exit
pass() { n_pass=$((n_pass + 1)); }
check() {
  local name=$1 why=$2
  shift 2
  if "$@"; then pass; else : >"$W/err"; fail_case "$name" "$why"; fi
}
same_listing() { [ "$(ls -A "$1")" = "$2" ]; }
# weights_of DIR STEM: the weight files of DIR/STEM.so, one per line
weights_of() { (cd "$1" && ls -A | grep -aE "^$2\..*weights\$"); }

# Reference outputs of the two models.
mkdir -p "$W/ref"
setup ref-qwen "$BIN" build -q "$QWEN" -o "$W/ref/q.so" || exit 1
setup ref-llama "$BIN" build -q "$SHARDED" -o "$W/ref/l.so" || exit 1
setup ref-qwen-run "$BIN" run "$W/ref/q.so" --ids $IDS -n 8 --greedy && REF_Q=$(cat "$W/out")
setup ref-llama-run "$BIN" run "$W/ref/l.so" --ids $IDS -n 8 --greedy && REF_L=$(cat "$W/out")
if [ -z "${REF_Q:-}" ] || [ "$REF_Q" = "${REF_L:-}" ]; then
  : >"$W/err"; fail_case reference "the two models give no output, or the same one"; finish; exit
fi

# runs_as NAME SO REF...: SO loads and its greedy output is one of REF...
runs_as() {
  local name=$1 so=$2 r
  shift 2
  expect "$name" 0 -- "$BIN" run "$so" --ids $IDS -n 8 --greedy || return 1
  for r in "$@"; do [ "$(cat "$W/out")" = "$r" ] && { pass; return 0; }; done
  fail_case "$name-output" "got '$(cat "$W/out")', expected one of the reference models"
  return 1
}

# ------------------------------------- 1. -o is an input, or not a regular file
ck in
cp -r "$SHARDED" "$W/shard"
snap=$(ls -A "$W/in")
expect out-is-safetensors 2 "$W/in/model.safetensors" "input of the build" -- \
  "$BIN" build -q "$W/in" -o "$W/in/model.safetensors"
expect out-is-config 2 "$W/in/config.json" "input of the build" -- \
  "$BIN" build -q "$W/in" -o "$W/in/config.json"
ln -s "$W/in/config.json" "$W/cfglink.so"
expect out-is-symlink-to-config 2 "$W/cfglink.so" "input of the build" -- \
  "$BIN" build -q "$W/in" -o "$W/cfglink.so"
ln "$W/in/model.safetensors" "$W/stlink.so"
expect out-is-hardlink-to-safetensors 2 "$W/stlink.so" "input of the build" -- \
  "$BIN" build -q "$W/in" -o "$W/stlink.so"
check out-inputs-unchanged "the checkpoint changed, or files were added to it" \
  eval 'cmp -s "$QWEN/model.safetensors" "$W/in/model.safetensors" &&
        cmp -s "$QWEN/config.json" "$W/in/config.json" && same_listing "$W/in" "$snap" &&
        [ -L "$W/cfglink.so" ] && cmp -s "$QWEN/model.safetensors" "$W/stlink.so"'
rm -f "$W/cfglink.so" "$W/stlink.so"

snap=$(ls -A "$W/shard")
expect out-is-index 2 "$W/shard/model.safetensors.index.json" "input of the build" -- \
  "$BIN" build -q "$W/shard" -o "$W/shard/model.safetensors.index.json"
expect out-is-shard 2 "$W/shard/model-00002-of-00002.safetensors" "input of the build" -- \
  "$BIN" build -q "$W/shard" -o "$W/shard/model-00002-of-00002.safetensors"
check out-shards-unchanged "the sharded checkpoint changed" \
  eval 'diff -r "$SHARDED" "$W/shard" >/dev/null && same_listing "$W/shard" "$snap"'

mkdir -p "$W/nr"
mkfifo "$W/nr/fifo.so"
ln -s "$W/nr/fifo.so" "$W/nr/tofifo.so"
ln -s /dev/null "$W/nr/devnull.so"
mkdir "$W/nr/dir.so"
snap=$(ls -A "$W/nr")
expect out-fifo 2 "$W/nr/fifo.so" "not a regular file" -- "$BIN" build -q "$QWEN" -o "$W/nr/fifo.so"
expect out-symlink-to-fifo 2 "$W/nr/tofifo.so" "not a regular file" -- "$BIN" build -q "$QWEN" -o "$W/nr/tofifo.so"
expect out-symlink-to-devnull 2 "$W/nr/devnull.so" "not a regular file" -- \
  "$BIN" build -q "$QWEN" -o "$W/nr/devnull.so"
expect out-existing-dir 2 "$W/nr/dir.so" "is a directory" -- "$BIN" build -q "$QWEN" -o "$W/nr/dir.so"
expect out-trailing-slash 2 "$W/nr/" "names a directory" -- "$BIN" build -q "$QWEN" -o "$W/nr/"
check out-non-regular-untouched "a refused -o left something behind or replaced a special file" \
  eval 'same_listing "$W/nr" "$snap" && [ -p "$W/nr/fifo.so" ] && [ -L "$W/nr/tofifo.so" ] &&
        [ -L "$W/nr/devnull.so" ] && [ -d "$W/nr/dir.so" ] && [ -z "$(ls -A "$W/nr/dir.so")" ] &&
        [ -c /dev/null ]'

mkdir -p "$W/cwd"
expect out-empty 1 "-o ''" -- bash -c 'cd "$1" && shift && exec "$@"' _ "$W/cwd" \
  "$BIN" build -q "$QWEN_ABS" -o ''
check out-empty-nothing-left "-o '' left '$(ls -A "$W/cwd")' in the working directory" \
  same_listing "$W/cwd" ""

# The weight file's name, taken by a FIFO or a directory: refused, nothing left.
mkdir -p "$W/wn"
if setup wn-build "$BIN" build -q "$QWEN" -o "$W/wn/m.so"; then
  wname=$(weights_of "$W/wn" m)
  rm -f "$W/wn/m.so" "$W/wn/$wname"
  mkfifo "$W/wn/$wname"
  expect weights-name-fifo 2 "$W/wn/$wname" "not a regular file" -- "$BIN" build -q "$QWEN" -o "$W/wn/m.so"
  check weights-name-fifo-untouched "left '$(ls -A "$W/wn")'" \
    eval '[ "$(ls -A "$W/wn")" = "$wname" ] && [ -p "$W/wn/$wname" ]'
  rm -f "$W/wn/$wname"
  mkdir "$W/wn/$wname"
  expect weights-name-dir 2 "$W/wn/$wname" "is a directory" -- "$BIN" build -q "$QWEN" -o "$W/wn/m.so"
  check weights-name-dir-untouched "left '$(ls -A "$W/wn")'" eval '[ "$(ls -A "$W/wn")" = "$wname" ]'
fi

# An existing model is replaced; a symlink at -o to a regular file is
# replaced by the new model, not written through.
mkdir -p "$W/re"
echo "not a model" >"$W/victim_re"
cp "$W/victim_re" "$W/victim_re.orig"
ln -s "$W/victim_re" "$W/re/m.so"
expect out-symlink-to-file 0 -- "$BIN" build -q "$QWEN" -o "$W/re/m.so"
check out-symlink-to-file-victim "the symlink's target was written" \
  eval 'cmp -s "$W/victim_re" "$W/victim_re.orig" && [ ! -L "$W/re/m.so" ] && [ -f "$W/re/m.so" ]'
expect out-rebuild-other-model 0 -- "$BIN" build -q "$SHARDED" -o "$W/re/m.so"
runs_as out-rebuild-runs "$W/re/m.so" "$REF_L"
check out-rebuild-one-weight-file "the directory holds '$(ls -A "$W/re" | tr '\n' ' ')'" \
  eval '[ "$(weights_of "$W/re" m | wc -l)" -eq 1 ] && [ "$(ls -A "$W/re" | wc -l)" -eq 2 ]'

# ------------------------------------------- 2. symlinks at the temporary names
mkdir -p "$W/t"
head -c 1000 /dev/urandom >"$W/victim"
cp "$W/victim" "$W/victim.orig"
for n in m.weights.tmp m.so.tmp m.weights m.weights.tmp.XXXXXX; do ln -s "$W/victim" "$W/t/$n"; done
expect tmp-symlinks-build 0 -- "$BIN" build -q "$QWEN" -o "$W/t/m.so"
check tmp-symlinks-victim "the victim file was written through a symlink" cmp -s "$W/victim" "$W/victim.orig"
check tmp-symlinks-outputs "the outputs are not regular files" \
  eval 'w=$(weights_of "$W/t" m | grep -v "^m.weights") && [ -n "$w" ] && [ -f "$W/t/$w" ] &&
        [ ! -L "$W/t/$w" ] && [ -f "$W/t/m.so" ] && [ ! -L "$W/t/m.so" ]'
runs_as tmp-symlinks-run "$W/t/m.so" "$REF_Q"

# ------------------------------------------------- 3. concurrent builds, cleanup
mkdir -p "$W/cc"
for i in 1 2 3 4 5 6 7 8 9 10; do
  "$BIN" build -q "$QWEN" -o "$W/cc/m.so" 2>"$W/cc_err1" & p1=$!
  "$BIN" build -q "$SHARDED" -o "$W/cc/m.so" 2>"$W/cc_err2" & p2=$!
  wait $p1; r1=$?
  wait $p2; r2=$?
  if [ $r1 -ne 0 ] || [ $r2 -ne 0 ]; then
    cat "$W/cc_err1" "$W/cc_err2" >"$W/err"
    fail_case "concurrent-$i" "builds exited $r1 and $r2"; break
  fi
  runs_as "concurrent-$i-runs" "$W/cc/m.so" "$REF_Q" "$REF_L" || break
  if [ "$(ls -A "$W/cc" | wc -l)" -ne 2 ]; then
    : >"$W/err"; fail_case "concurrent-$i-files" "left '$(ls -A "$W/cc" | tr '\n' ' ')'"; break
  fi
done

# A reader that loaded the model just before a rebuild installed another
# one and removed the old weight file (the model here is the generated
# source with a constructor that sleeps 1 s, built by the system compiler:
# the rebuild happens while the reader is inside dlopen): it opens the new
# model instead, and never fails on the missing file nor loads a mix.
mkdir -p "$W/rd"
if setup reader-emit "$BIN" build -q "$QWEN" -o "$W/rd/m.so" --emit-dir "$W/rdsrc"; then
  printf '%s\n' 'extern unsigned int sleep(unsigned int);' \
    '__attribute__((constructor)) static void slow_load(void) { sleep(1); }' >>"$W/rdsrc/model.c"
  if setup reader-slow-so "${CC:-cc}" -shared -fPIC -I "$W/rdsrc" -o "$W/rd/slow.so" "$W/rdsrc/model.c"; then
    mv "$W/rd/slow.so" "$W/rd/m.so"
    "$BIN" inspect "$W/rd/m.so" >"$W/rd_out" 2>"$W/rd_err" & reader=$!
    sleep 0.3
    expect reader-rebuild 0 -- "$BIN" build -q "$SHARDED" -o "$W/rd/m.so"
    wait $reader; rc=$?
    cp "$W/rd_err" "$W/err"
    if [ $rc -ne 0 ]; then fail_case reader-during-rebuild "exit $rc"
    elif ! grep -q "model_type llama" "$W/rd_out"; then fail_case reader-during-rebuild "did not load the new model"
    else pass; fi
  fi
fi

# Interrupted builds: the TTS model with gcc takes long enough to be caught
# at several points; each must end with 128+signal and leave nothing in the
# output directory nor in its private $TMPDIR (or, when the signal came too
# late, leave a pair that loads).
TTS=tests/data/tts/tts_tiny_17b_layout
interrupted=0
k=0
for sig in INT TERM; do
  for d in 0.05 0.15 0.3 0.45 0.6 0.8; do
    k=$((k + 1))
    mkdir -p "$W/sig$k/out" "$W/sig$k/tmp"
    TMPDIR=$W/sig$k/tmp timeout -s $sig --preserve-status "$d" "$BIN" build -q "$TTS" \
      -o "$W/sig$k/out/m.so" --cc gcc >/dev/null 2>"$W/err"
    rc=$?
    if [ $rc -eq 0 ]; then
      check "signal-$sig-$d-late" "finished build left '$(ls -A "$W/sig$k/out" | tr '\n' ' ')'" \
        eval '[ "$(ls -A "$W/sig$k/out" | wc -l)" -eq 2 ] && [ -z "$(ls -A "$W/sig$k/tmp")" ]' &&
        expect "signal-$sig-$d-late-loads" 0 "out:(verified)" -- "$BIN" inspect "$W/sig$k/out/m.so"
      continue
    fi
    want=130; [ $sig = TERM ] && want=143
    if [ $rc -ne $want ]; then fail_case "signal-$sig-$d" "exit $rc, expected $want"; continue; fi
    if [ "$(ls -A "$W/sig$k/out" | wc -l)" -eq 2 ] && [ -n "$(weights_of "$W/sig$k/out" m)" ]; then
      # the signal came between the build's last step and its exit
      expect "signal-$sig-$d-after-install" 0 "out:(verified)" -- "$BIN" inspect "$W/sig$k/out/m.so"
      continue
    fi
    interrupted=$((interrupted + 1))
    check "signal-$sig-$d-clean" \
      "left '$(ls -A "$W/sig$k/out" | tr '\n' ' ')' in the output directory and '$(ls -A "$W/sig$k/tmp" | tr '\n' ' ')' in TMPDIR" \
      eval '[ -z "$(ls -A "$W/sig$k/out")" ] && [ -z "$(ls -A "$W/sig$k/tmp")" ]'
  done
done
check signal-some-interrupted "no build was interrupted (too fast a machine?)" [ $interrupted -gt 0 ]

# ------------------------------------------------ 4. hostile names build and run
k=0
for name in 'q"x.so' 'back\tslash.so' $'tab\there.so' $'new\nline.so' 'pct%s%n%%.so' \
            $'\xff\xfe-latin\xe9.so' 'tri??=graph??(.so' 'end*.so' ' spaced .so' '$(touch pwned).so' \
            'noext'; do
  k=$((k + 1))
  mkdir -p "$W/n$k"
  expect "name-$k-build" 0 -- "$BIN" build -q "$QWEN" -o "$W/n$k/$name" &&
    runs_as "name-$k-run" "$W/n$k/$name" "$REF_Q"
done
mkdir -p "$W/x*" "$W/x*/y"
expect name-comment-close-build 0 -- "$BIN" build -q "$QWEN" -o "$W/x*/y/*.so" &&
  runs_as name-comment-close-run "$W/x*/y/*.so" "$REF_Q"
check names-no-injection "a name ran a command" eval '[ ! -e "$ROOT/pwned" ] && [ ! -e "$W/pwned" ]'

finish
