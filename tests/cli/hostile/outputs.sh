#!/usr/bin/env bash
# outputs.sh — issue 12 (the output side): what `speechc build -o OUT` may write.
#
#   usage: tests/cli/hostile/outputs.sh path/to/speechc   (cwd: the repository root)
#
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
