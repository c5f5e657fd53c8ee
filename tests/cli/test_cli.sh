#!/usr/bin/env bash
# test_cli.sh — the speechc command line against bad flags, bad checkpoints
# and damaged artifacts, plus one good build/inspect/run.
#
#   usage: tests/cli/test_cli.sh path/to/speechc      (cwd: the repository root)
#
# Every case checks the exit code (0 ok, 1 usage, 2 bad input, 3 runtime),
# that stderr names the file or flag and the problem, and that nothing
# crashed: no exit status >= 128 and no sanitizer report.  Needs bash,
# coreutils, sed, dd and a C compiler (cc) for the foreign-ABI artifact;
# no Python.
set -u
. "$(dirname "$0")/lib.sh"

# ---------------------------------------------------------------- build flags
FO=$W/failed_out          # every failing build writes here; must stay empty
mkdir -p "$FO"
expect build-no-model-dir 1 "missing MODEL_DIR" -- "$BIN" build -o "$FO/m.so"
expect build-no-output 1 "missing -o" -- "$BIN" build "$QWEN"
expect build-unknown-flag 1 "unknown option '--bogus'" -- "$BIN" build "$QWEN" -o "$FO/m.so" --bogus
expect build-cc-foo 1 "--cc expects tcc, gcc or clang" "'foo'" -- "$BIN" build "$QWEN" -o "$FO/m.so" --cc foo
expect build-weights-q9 1 "--weights expects" "'q9'" -- "$BIN" build "$QWEN" -o "$FO/m.so" --weights q9
mkdir -p "$W/q8"   # q8_0 / q4_0 are implemented: a good build, outside $FO
expect build-weights-q8_0 0 -- "$BIN" build -q "$QWEN" -o "$W/q8/m.so" --weights q8_0
expect build-max-context-0 1 "--max-context expects an integer" "'0'" -- \
  "$BIN" build "$QWEN" -o "$FO/m.so" --max-context 0
expect build-max-context-abc 1 "--max-context expects an integer" "'abc'" -- \
  "$BIN" build "$QWEN" -o "$FO/m.so" --max-context abc
expect build-target-vulkan 1 "--target expects cpu, cuda or metal" "'vulkan'" -- "$BIN" build "$QWEN" -o "$FO/m.so" --target vulkan
mkdir -p "$W/mt"   # --target metal builds anywhere (the MSL is compiled where it runs)
expect build-target-metal 0 -- "$BIN" build -q "$QWEN" -o "$W/mt/m.so" --target metal --emit-dir "$W/mt/src"
expect build-target-metal-source 0 "out:kernel void decode_" -- grep -m1 "kernel void decode_" "$W/mt/src/model.metal"
expect run-metal-no-device 3 "no Metal device" "--target cpu" -- env -u SPEECHC_LIBMETAL "$BIN" run "$W/mt/m.so" --ids 1,2 -n 1
# bench on a device model names the device and claims no CPU probe (ctest
# names the Metal stand-in; x86-64 builds have it)
if [ -n "${SPEECHC_METAL_EMU:-}" ]; then
  expect bench-metal 0 "out:device        speechc Metal emulator (--target metal" "out:target=metal" -- \
    env SPEECHC_LIBMETAL="$SPEECHC_METAL_EMU" "$BIN" bench "$W/mt/m.so" --steps 2 --prompt 2
  if grep -q "^read probe\|^fraction\|^paired" "$W/out"; then fail_case bench-metal-no-probe "$(cat "$W/out")"; else n_pass=$((n_pass + 1)); fi
else
  echo "note: no Metal stand-in here (SPEECHC_METAL_EMU); bench-metal is not run"
fi
expect build-cuda-arch 1 "--cuda-arch sm_x" "sm_XX or compute_XX" -- "$BIN" build "$QWEN" -o "$FO/m.so" --target cuda --cuda-arch sm_x
expect build-cuda-no-nvrtc 3 "NVRTC not found" "--target cpu" -- env SPEECHC_NVRTC=/nonexistent/libnvrtc.so "$BIN" build "$QWEN" -o "$FO/m.so" --target cuda
expect build-dump-ir-nonsense 1 "--dump-ir expects" "'nonsense'" -- \
  "$BIN" build "$QWEN" -o "$FO/m.so" --dump-ir=nonsense
expect build-help 0 "out:usage: speechc build MODEL_DIR" "out:--max-context" -- "$BIN" build --help

# ---------------------------------------------------------------- bench
# the q8_0 build above: a short run prints its table and the one-line
# summary (prefill timed warm, the cold first pass reported beside it)
expect bench-q8_0 0 "out:prefill       4 tokens in" "out:the first, mapping the weights" \
  "out:bench: band=q8_0 tok_s=" "out:prompt=4 prefill_tok_s=" "out:state_rw_bytes=0 " \
  "out:median over 1 windows: 8 steps against a probe pass" "out: frac_paired=" -- \
  "$BIN" bench "$W/q8/m.so" --prompt 4 --steps 2 --threads 1 --probe-mb 16
if grep -q "^state r+w" "$W/out"; then fail_case bench-q8_0-no-state "$(cat "$W/out")"; else n_pass=$((n_pass + 1)); fi
# the probe names the loop it kept, one of those it tries
if grep -Eq "^read probe    [0-9.]+ GB/s best, [0-9.]+ median \(16 MB buffer, 1 thread, 5 passes; (baseline vectors|32-byte AVX2 loads|64-byte AVX-512 loads)(, prefetch 4 KB ahead( into L2)?)?, the fastest of the loops this CPU runs\)$" "$W/out"; then
  n_pass=$((n_pass + 1))
else fail_case bench-probe-loop "$(cat "$W/out")"; fi
expect bench-unknown-flag 1 "unknown option '--bogus'" -- "$BIN" bench "$W/q8/m.so" --bogus
expect bench-no-model 1 "missing model.so" -- "$BIN" bench
expect bench-probe-mb-8 1 "--probe-mb expects an integer in [16, 65536]" "'8'" -- \
  "$BIN" bench "$W/q8/m.so" --probe-mb 8
expect bench-too-long 1 "exceed the model's max context" "--max-context" -- \
  "$BIN" bench "$W/q8/m.so" --prompt 100000 --steps 2 --probe-mb 16

# ------------------------------------------------------------ bad checkpoints
expect build-nonexistent-dir 2 "$W/nonexistent" "No such file or directory" -- \
  "$BIN" build "$W/nonexistent" -o "$FO/m.so"

mkdir -p "$W/noconfig" && cp "$QWEN/model.safetensors" "$W/noconfig/"
expect build-no-config 2 "$W/noconfig/config.json: not found" -- "$BIN" build "$W/noconfig" -o "$FO/m.so"

if setup config-not-json ck notjson; then
  printf '{"model_type": "qwen3",\n "hidden_size": ]\n}\n' >"$W/notjson/config.json"
  expect build-config-not-json 2 "$W/notjson/config.json: not valid JSON" "line 2" -- \
    "$BIN" build "$W/notjson" -o "$FO/m.so"
fi

if setup config-no-hidden ck nohidden; then
  sed -i '/"hidden_size"/d' "$W/nohidden/config.json"
  expect build-config-no-hidden-size 2 "config.json" "'hidden_size' is missing" -- \
    "$BIN" build "$W/nohidden" -o "$FO/m.so"
fi

if setup config-hidden-string ck hiddenstr; then
  sed -i 's/"hidden_size": 64/"hidden_size": "64"/' "$W/hiddenstr/config.json"
  expect build-config-hidden-size-string 2 "config.json" "'hidden_size' must be an integer, found string" -- \
    "$BIN" build "$W/hiddenstr" -o "$FO/m.so"
fi

if setup config-model-type ck gpt2; then
  sed -i 's/"model_type": "qwen3"/"model_type": "gpt2"/' "$W/gpt2/config.json"
  expect build-unsupported-model-type 2 "$W/gpt2/config.json" "model_type 'gpt2' is not supported" -- \
    "$BIN" build "$W/gpt2" -o "$FO/m.so"
fi

# A tensor renamed in the safetensors JSON header (same length, so the
# header size and every offset stay valid): the checkpoint now lacks it.
if setup missing-tensor ck notensor; then
  LC_ALL=C sed -i 's/"model\.norm\.weight"/"model.norm.weighX"/' "$W/notensor/model.safetensors"
  if [ "$(wc -c <"$W/notensor/model.safetensors")" -ne "$(wc -c <"$QWEN/model.safetensors")" ] ||
     cmp -s "$QWEN/model.safetensors" "$W/notensor/model.safetensors"; then
    fail_case build-missing-tensor "setup: the header rename did not apply cleanly"
  else
    expect build-missing-tensor 2 "$W/notensor" "tensor 'model.norm.weight' is missing" -- \
      "$BIN" build "$W/notensor" -o "$FO/m.so"
  fi
fi

# config.json disagrees with the tensors: expected and found shape.
if setup shape-mismatch ck badshape; then
  sed -i 's/"intermediate_size": 128/"intermediate_size": 256/' "$W/badshape/config.json"
  expect build-shape-mismatch 2 "$W/badshape/model.safetensors" \
    "'model.layers.0.mlp.gate_proj.weight' has shape [128, 64], expected [256, 64]" -- \
    "$BIN" build "$W/badshape" -o "$FO/m.so"
fi

if setup truncated-data ck trunc; then
  head -c 100000 "$QWEN/model.safetensors" >"$W/trunc/model.safetensors"
  expect build-truncated-data 2 "$W/trunc/model.safetensors" "truncated" -- \
    "$BIN" build "$W/trunc" -o "$FO/m.so"
fi

if setup truncated-header ck trunchdr; then
  head -c 100 "$QWEN/model.safetensors" >"$W/trunchdr/model.safetensors"
  expect build-truncated-header 2 "$W/trunchdr/model.safetensors" "runs past the end of the file" -- \
    "$BIN" build "$W/trunchdr" -o "$FO/m.so"
fi

if setup missing-shard cp -r "$SHARDED" "$W/noshard"; then
  rm -f "$W/noshard/model-00002-of-00002.safetensors"
  expect build-missing-shard 2 "$W/noshard/model.safetensors.index.json" \
    "shard 'model-00002-of-00002.safetensors'" "is missing" -- "$BIN" build "$W/noshard" -o "$FO/m.so"
fi

# Fails after the weights were packed: the temporary weight file must go too.
: >"$W/not_a_dir"
expect build-emit-dir-is-file 2 "$W/not_a_dir/" "Not a directory" -- \
  "$BIN" build "$QWEN" -o "$FO/m.so" --emit-dir "$W/not_a_dir"

expect build-output-dir-missing 2 "$W/no_such_dir" "cannot open the directory" -- \
  "$BIN" build "$QWEN" -o "$W/no_such_dir/m.so"

left=$(ls -A "$FO")
if [ -n "$left" ]; then
  : >"$W/err"
  fail_case build-failures-leave-nothing "left behind in the output directory: $(echo $left)"
else
  n_pass=$((n_pass + 1))
fi

# ------------------------------------------------------------ good artifacts
mkdir -p "$W/a" "$W/b" "$W/p" "$W/dump"
expect build-ok 0 -- "$BIN" build -q "$QWEN" -o "$W/a/m.so"
expect build-ok-max-context 0 -- "$BIN" build -q "$QWEN" -o "$W/b/m.so" --max-context 256
expect build-ok-prefill-chunk 0 -- "$BIN" build -q "$QWEN" -o "$W/p/m.so" --prefill-chunk 16
# each model names its weight file, m.<id>.weights beside it
for d in a b p; do
  [ -f "$W/$d/m.so" ] && [ "$(ls "$W/$d" | grep -c '^m\.[0-9a-f]\{16\}\.weights$')" -eq 1 ] ||
    { : >"$W/err"; fail_case build-outputs "$W/$d: not m.so and one m.<id>.weights: $(ls "$W/$d")"; }
done
WA=$(cd "$W/a" && echo m.*.weights)   # a/m.so's weight file, by name

expect inspect-ok 0 "out:family       llm (model_type qwen3)" "out:(verified)" "out:layer0.qkv" -- \
  "$BIN" inspect "$W/a/m.so"

# a Qwen3.5 text build says which checkpoint tensors it left out (the
# dense fixture carries an mtp.* tensor, as published checkpoints do)
mkdir -p "$W/q35"
if setup q35-build "$BIN" build tests/data/gdn/qwen35_dense_tiny -o "$W/q35/m.so" --max-context 64 -q; then
  expect inspect-notes 0 "out:notes        ignored: mtp.* (1 tensor, the multi-token-prediction head)" \
    "out:only the text model is compiled" "out:layer0.qkv" -- "$BIN" inspect "$W/q35/m.so"
  # bench counts the GDN state a step reads and writes: 3 linear-attention
  # layers x (6 v-heads x 16 x 12 recurrent + 3 x (2 x 2 x 16 + 6 x 12)
  # conv) floats x 4 bytes = 18720, twice
  expect bench-gdn-state 0 "out:state r+w     0.0 MB per step" "out:state_rw_bytes=37440 " \
    "out:(the weights alone" -- "$BIN" bench "$W/q35/m.so" --prompt 4 --steps 2 --threads 1 --probe-mb 16
fi

# trace.json is pretty-printed by Python's json: flatten it and pick arrays.
trace=$(tr -d ' \n\t\r' <"$QWEN/trace.json")
prompt=$(echo "$trace" | grep -o '"prompt":\[[0-9,]*\]' | grep -o '[0-9,]*\]' | tr -d ']')
greedy=$(echo "$trace" | grep -o '"greedy":\[[0-9,]*\]' | grep -o '[0-9,]*\]' | tr -d ']' | tr ',' ' ')
n_greedy=$(echo "$greedy" | wc -w)
if [ -z "$prompt" ] || [ "$n_greedy" -ne 16 ]; then
  : >"$W/err"
  fail_case run-greedy-trace "setup: cannot read prompt/greedy from $QWEN/trace.json"
else
  expect run-greedy-trace 0 "out:$greedy" -- "$BIN" run "$W/a/m.so" --ids "$prompt" -n 16 --greedy
  if [ "$(cat "$W/out")" != "$greedy" ]; then
    fail_case run-greedy-trace-exact "got '$(cat "$W/out")', expected '$greedy'"
  else
    n_pass=$((n_pass + 1))
  fi
fi

# several prompts in one run (sc_generate_batch): each line is that prompt's
# run alone, the first the trace's greedy tokens
if [ -n "$prompt" ] && [ "$n_greedy" -eq 16 ]; then
  if setup run-many-alone "$BIN" run "$W/a/m.so" --ids 9,8,7 -n 16 --greedy; then
    alone=$(cat "$W/out")
    expect run-many 0 -- "$BIN" run "$W/a/m.so" --ids "$prompt" --ids 9,8,7 -n 16 --greedy
    if [ "$(sed -n 1p "$W/out")" != "$greedy" ] || [ "$(sed -n 2p "$W/out")" != "$alone" ] ||
       [ "$(wc -l <"$W/out")" -ne 2 ]; then
      fail_case run-many-lines "got '$(tr '\n' '|' <"$W/out")', expected '$greedy|$alone|'"
    else
      n_pass=$((n_pass + 1))
    fi
  fi
fi
expect run-many-bad-ids 1 "--ids expects comma-separated integers" "'1,x'" -- \
  "$BIN" run "$W/a/m.so" --ids 1,2 --ids 1,x
expect run-many-out-of-vocab 1 "outside the vocabulary" "(request 1)" -- \
  "$BIN" run "$W/a/m.so" --ids 1,2 --ids 3,256

expect build-dump-ir-fuse 0 "out:NORM_LINEAR" "out:LINEAR_SWIGLU" "out:; after fuse" -- \
  "$BIN" build -q "$QWEN" -o "$W/dump/m.so" --dump-ir=fuse

# -------------------------------------------------------- damaged artifacts
mkdir -p "$W/c"
cp "$W/a/m.so" "$W/c/"
expect weights-missing 2 "$W/c/$WA: weight file of $W/c/m.so is missing" -- "$BIN" inspect "$W/c/m.so"

: >"$W/c/$WA"
expect weights-empty 2 "$W/c/$WA: truncated: 0 bytes" -- "$BIN" inspect "$W/c/m.so"
head -c "$(wc -c <"$W/a/$WA")" /dev/zero >"$W/c/$WA"
expect weights-bad-magic 2 "$W/c/$WA: not a speechc weight file" -- "$BIN" inspect "$W/c/m.so"

cp "$W/a/$WA" "$W/c/"
truncate -s -100 "$W/c/$WA"
expect weights-truncated 2 "$W/c/$WA" "expected" "truncated" -- "$BIN" inspect "$W/c/m.so"

cp "$W/a/$WA" "$W/c/"
# one byte of the data section (the header is 4096 bytes), inverted
orig=$(od -An -tu1 -j 5000 -N 1 "$W/c/$WA" | tr -d ' ')
printf "\\$(printf '%03o' $((255 - orig)))" | dd of="$W/c/$WA" bs=1 seek=5000 conv=notrunc 2>/dev/null
if cmp -s "$W/a/$WA" "$W/c/$WA"; then
  : >"$W/err"
  fail_case weights-modified "setup: the byte flip did not change the file"
else
  expect weights-modified-inspect 2 "$W/c/$WA" "modified" "checksum" -- "$BIN" inspect "$W/c/m.so"
  expect weights-modified-run 2 "$W/c/$WA" "modified" "checksum" -- "$BIN" run "$W/c/m.so" --ids 1 -n 1
fi

# another build's weight file under this model's weight file name
cp "$W"/b/m.*.weights "$W/c/$WA"
expect weights-other-build-max-context 2 "$W/c/$WA" "$W/c/m.so" "from another build" -- \
  "$BIN" inspect "$W/c/m.so"
cp "$W"/p/m.*.weights "$W/c/$WA"
expect weights-other-build-prefill-chunk 2 "$W/c/$WA" "$W/c/m.so" "from another build: build" -- \
  "$BIN" run "$W/c/m.so" --ids 1 -n 1

# An artifact from the previous ABI version: the generated source with the
# descriptor's version field changed, compiled by the system compiler.  It
# is refused with both versions and the rebuild hint.
abi=$("$BIN" --version | sed -n 's/.*artifact ABI \([0-9]*\).*/\1/p')
old_abi=$((${abi:-1} - 1))
mkdir -p "$W/abi"
if setup abi-emit "$BIN" build -q "$QWEN" -o "$W/abi/m.so" --emit-dir "$W/emit"; then
  cp "$W/emit/model.c" "$W/emit/pristine.c"
  sed -i "s/SC_DESC_MAGIC, SC_ABI_VERSION,/SC_DESC_MAGIC, $old_abi,/" "$W/emit/model.c"
  if [ -z "$abi" ] || ! grep -q "SC_DESC_MAGIC, $old_abi," "$W/emit/model.c"; then
    : >"$W/err"
    fail_case abi-other-version "setup: no ABI version from --version, or the descriptor edit did not apply"
  elif setup abi-compile "${CC:-cc}" -shared -fPIC -I "$W/emit" -o "$W/abi/other.so" "$W/emit/model.c"; then
    expect abi-other-version-inspect 2 "$W/abi/other.so" "ABI version $old_abi" "reads version $abi" \
      "hint: rebuild the model with this speechc" -- "$BIN" inspect "$W/abi/other.so"
    expect abi-other-version-run 2 "$W/abi/other.so" "ABI version $old_abi" "reads version $abi" \
      "hint: rebuild the model with this speechc" -- "$BIN" run "$W/abi/other.so" --ids 1 -n 1
  fi
  # an entry table the runtime cannot size buffers from: no ids per row,
  # or an LM prompt entry reading 16 ids per row
  for ids in 0 16; do
    sed "s/\(entry_prefill, SC_IN_IDS, [0-9]*\), 1,/\1, $ids,/" "$W/emit/pristine.c" >"$W/emit/ids$ids.c"
    if ! grep -q "entry_prefill, SC_IN_IDS, [0-9]*, $ids," "$W/emit/ids$ids.c"; then
      : >"$W/err"
      fail_case entry-ids-cols-$ids "setup: the entry table edit did not apply"
    elif setup entry-compile-$ids "${CC:-cc}" -shared -fPIC -I "$W/emit" -o "$W/abi/ids$ids.so" "$W/emit/ids$ids.c"; then
      case $ids in 0) want="ids_cols 0" ;; *) want="reads 16 ids per row" ;; esac
      expect entry-ids-cols-$ids 2 "$W/abi/ids$ids.so" "entry prefill" "$want" "hint: rebuild" -- \
        "$BIN" run "$W/abi/ids$ids.so" --ids 1 -n 1
    fi
  done
fi

head -c 4096 /dev/urandom >"$W/x.so"
expect not-elf-inspect 2 "$W/x.so: not a loadable model" -- "$BIN" inspect "$W/x.so"
expect not-elf-run 2 "$W/x.so: not a loadable model" -- "$BIN" run "$W/x.so" --ids 1

# ------------------------------------------------------------------ run flags
expect run-token-out-of-vocab 1 "token 256" "outside the vocabulary [0, 256)" -- \
  "$BIN" run "$W/a/m.so" --ids 1,256
expect run-token-negative 1 "token -3" "outside the vocabulary" -- "$BIN" run "$W/a/m.so" --ids 1,-3
expect run-no-ids 1 "missing --ids" -- "$BIN" run "$W/a/m.so"
expect run-bad-ids 1 "--ids expects comma-separated integers" "'1,x'" -- "$BIN" run "$W/a/m.so" --ids 1,x
expect run-top-p-2 1 "--top-p expects a number" "'2'" -- "$BIN" run "$W/a/m.so" --ids 1 --top-p 2
expect run-temperature-neg 1 "--temperature expects a number" "'-1'" -- \
  "$BIN" run "$W/a/m.so" --ids 1 --temperature -1
expect run-n-x 1 "-n expects an integer" "'x'" -- "$BIN" run "$W/a/m.so" --ids 1 -n x
mkdir -p "$W/small"
# a context of 8 holds 6 new tokens after 3: -n 20 is refused before any
# work; without -n the 16 default is lowered to them, with a note
if setup run-context-full "$BIN" build -q "$QWEN" -o "$W/small/m.so" --max-context 8; then
  expect run-context-full 1 "n_new 20: the prompt's 3 tokens leave room for 6 new tokens in max_context 8" \
    "--max-context" -- "$BIN" run "$W/small/m.so" --ids 1,2,3 -n 20 --greedy
  expect run-context-default 0 "note: -n lowered to 6, what max_context 8 holds after the prompt's 3 tokens" -- \
    "$BIN" run "$W/small/m.so" --ids 1,2,3 --greedy
  expect run-context-default-count 0 -- \
    bash -c "test \$('$BIN' run '$W/small/m.so' --ids 1,2,3 --greedy 2>/dev/null | wc -w) -eq 6"
  expect run-context-exact 0 -- \
    bash -c "test \$('$BIN' run '$W/small/m.so' --ids 1,2,3 -n 6 --greedy | wc -w) -eq 6"
fi
expect inspect-missing-path 2 "$W/nope.so: cannot open" "No such file" -- "$BIN" inspect "$W/nope.so"
expect inspect-no-arg 1 "missing model.so" -- "$BIN" inspect

# ------------------------------------------------- non-finite numbers (issue 6)
# A checkpoint whose final norm weight holds NaN: every logit becomes NaN.
# The float's bytes are found through the safetensors header (8-byte length,
# then JSON; data_offsets count from the end of the header).
if setup nan-ckpt ck nanw; then
  f=$W/nanw/model.safetensors
  hlen=$(od -An -tu8 -N8 "$f" | tr -d ' ')
  begin=$(head -c $((8 + hlen)) "$f" | tail -c "$hlen" | grep -o '"model.norm.weight":{[^}]*}' |
          grep -o '"data_offsets":\[[0-9]*' | grep -o '[0-9]*$')
  if [ -z "$begin" ]; then
    : >"$W/err"
    fail_case nan-weights "setup: model.norm.weight not found in the header of $f"
  else
    # f32 quiet NaN, little-endian, into element 0
    printf '\x00\x00\xc0\x7f' | dd of="$f" bs=1 seek=$((8 + hlen + begin)) conv=notrunc 2>/dev/null
    mkdir -p "$W/nan" "$W/nanck"
    if setup nan-build "$BIN" build -q "$W/nanw" -o "$W/nan/m.so" &&
       setup nan-build-checked "$BIN" build -q "$W/nanw" -o "$W/nanck/m.so" --check-numerics; then
      # without the flag the sampler refuses the logits (sc_generate: SC_ERUNTIME)
      expect nan-sample-greedy 3 "logits contain NaN at index 0" -- "$BIN" run "$W/nan/m.so" --ids 1,2,3 -n 4 --greedy
      expect nan-sample-topk 3 "logits contain NaN" -- \
        "$BIN" run "$W/nan/m.so" --ids 1,2,3 -n 4 --temperature 0.7 --top-k 5 --seed 1
      # with it the entry point itself fails, naming itself and the index
      expect nan-check-numerics 3 "prefill: --check-numerics: NaN in the logits at index (value 0)" -- \
        "$BIN" run "$W/nanck/m.so" --ids 1,2,3 -n 4 --greedy
    fi
  fi
fi

# The same element set to +inf: one infinite hidden value makes every logit
# +-inf, which both checks name as inf.
if setup inf-ckpt ck infw; then
  f=$W/infw/model.safetensors
  hlen=$(od -An -tu8 -N8 "$f" | tr -d ' ')
  begin=$(head -c $((8 + hlen)) "$f" | tail -c "$hlen" | grep -o '"model.norm.weight":{[^}]*}' |
          grep -o '"data_offsets":\[[0-9]*' | grep -o '[0-9]*$')
  mkdir -p "$W/inf" "$W/infck"
  if [ -n "$begin" ]; then
    printf '\x00\x00\x80\x7f' | dd of="$f" bs=1 seek=$((8 + hlen + begin)) conv=notrunc 2>/dev/null
    if setup inf-build "$BIN" build -q "$W/infw" -o "$W/inf/m.so" &&
       setup inf-build-checked "$BIN" build -q "$W/infw" -o "$W/infck/m.so" --check-numerics; then
      expect inf-sample 3 "logits contain inf at index 0" -- "$BIN" run "$W/inf/m.so" --ids 1,2,3 -n 4
      expect inf-check-numerics 3 "prefill: --check-numerics: inf in the logits at index (value 0)" -- \
        "$BIN" run "$W/infck/m.so" --ids 1,2,3 -n 4
    fi
  fi
fi

# The decode entry: the untied llama checkpoint with NaN in the embedding row
# of the first token its greedy trace generates (not in the prompt), so the
# prefill is sound and the first decode step is not.
ltrace=$(tr -d ' \n\t\r' <"$SHARDED/trace.json")
lprompt=$(echo "$ltrace" | grep -o '"prompt":\[[0-9,]*\]' | grep -o '[0-9,]*\]' | tr -d ']')
lfirst=$(echo "$ltrace" | grep -o '"greedy":\[[0-9]*' | grep -o '[0-9]*$')
lhidden=$(grep -o '"hidden_size": *[0-9]*' "$SHARDED/config.json" | grep -o '[0-9]*$')
mkdir -p "$W/nanl" "$W/nanlck"
if [ -z "$lprompt" ] || [ -z "$lfirst" ] || [ -z "$lhidden" ] || echo ",$lprompt," | grep -q ",$lfirst,"; then
  : >"$W/err"
  fail_case nan-decode "setup: cannot read prompt/greedy/hidden_size of $SHARDED, or its first token is in the prompt"
elif setup nan-decode-ckpt cp -r "$SHARDED" "$W/nanlw"; then
  f=$W/nanlw/model-00001-of-00002.safetensors
  hlen=$(od -An -tu8 -N8 "$f" | tr -d ' ')
  begin=$(head -c $((8 + hlen)) "$f" | tail -c "$hlen" | grep -o '"model.embed_tokens.weight":{[^}]*}' |
          grep -o '"data_offsets":\[[0-9]*' | grep -o '[0-9]*$')
  if [ -z "$begin" ]; then
    : >"$W/err"
    fail_case nan-decode "setup: model.embed_tokens.weight not found in the header of $f"
  else
    printf '\x00\x00\xc0\x7f' | dd of="$f" bs=1 seek=$((8 + hlen + begin + lfirst * lhidden * 4)) conv=notrunc 2>/dev/null
    if setup nan-decode-build "$BIN" build -q "$W/nanlw" -o "$W/nanl/m.so" &&
       setup nan-decode-build-checked "$BIN" build -q "$W/nanlw" -o "$W/nanlck/m.so" --check-numerics; then
      expect nan-decode-sample 3 "logits contain NaN" -- "$BIN" run "$W/nanl/m.so" --ids "$lprompt" -n 4 --greedy
      expect nan-decode-check-numerics 3 "decode: --check-numerics: NaN in the logits at index (value 0)" -- \
        "$BIN" run "$W/nanlck/m.so" --ids "$lprompt" -n 4 --greedy
    fi
  fi
fi

# --check-numerics on a sound checkpoint changes nothing: same greedy tokens.
mkdir -p "$W/ck"
if [ -n "${prompt:-}" ] && setup check-numerics-build "$BIN" build -q "$QWEN" -o "$W/ck/m.so" --check-numerics; then
  expect check-numerics-greedy-trace 0 "out:$greedy" -- "$BIN" run "$W/ck/m.so" --ids "$prompt" -n 16 --greedy
fi

# ------------------------------------------------------ CPU features (issue 6)
# The emitted source with the descriptor's feature string replaced, built by
# the system compiler next to the real weight file.
mkdir -p "$W/cpu"
if setup cpu-emit "$BIN" build -q "$QWEN" -o "$W/cpu/m.so" --emit-dir "$W/cpuemit"; then
  cpu_variant() {  # NAME FEATURES -> $W/cpu/NAME.so
    sed "s/^\(  \"[^\"]*\", \"cpu\", \)\"\",\$/\1\"$2\",/" "$W/cpuemit/model.c" >"$W/cpuemit/$1.c"
    if ! grep -q "\"cpu\", \"$2\"," "$W/cpuemit/$1.c"; then
      : >"$W/err"
      fail_case "cpu-$1" "setup: the descriptor edit did not apply"
      return 1
    fi
    setup "cpu-$1-compile" "${CC:-cc}" -shared -fPIC -I "$W/cpuemit" -o "$W/cpu/$1.so" "$W/cpuemit/$1.c"
  }
  if grep -qw avx512f /proc/cpuinfo; then
    echo "note: this CPU has avx512f; cpu-lacks-avx512f is not run"
  elif cpu_variant avx512 'avx512f,sse4.2'; then
    expect cpu-lacks-avx512f-run 2 "$W/cpu/avx512.so" "built for CPU features 'avx512f,sse4.2'" \
      "this CPU lacks 'avx512f'" "hint: rebuild on this machine" -- "$BIN" run "$W/cpu/avx512.so" --ids 1 -n 1
    expect cpu-lacks-avx512f-inspect 2 "this CPU lacks 'avx512f'" -- "$BIN" inspect "$W/cpu/avx512.so"
  fi
  if cpu_variant unknown 'sse4.2,avx1024'; then
    expect cpu-unknown-feature 2 "$W/cpu/unknown.so" "'avx1024' is not a feature this runtime knows" \
      "known: sse4.2,avx" -- "$BIN" run "$W/cpu/unknown.so" --ids 1 -n 1
  fi
  if cpu_variant present 'sse4.2'; then  # the same edit with a feature this CPU has: runs
    expect cpu-present-feature 0 -- "$BIN" run "$W/cpu/present.so" --ids 1 -n 1 --greedy
  fi
fi

# ------------------------------------ config values found by fuzzing (issue 6)
# Each was accepted and failed later: an "internal error" from the IR
# verifier, a UBSan overflow, or generated C that does not compile.
cfgcase() {  # NAME RC 'sed expression' PATTERN...
  local name=$1 rc=$2 expr=$3
  shift 3
  ck "cfg-$name" && sed -i "$expr" "$W/cfg-$name/config.json"
  if cmp -s "$QWEN/config.json" "$W/cfg-$name/config.json"; then
    : >"$W/err"
    fail_case "config-$name" "setup: the config edit did not apply"
    return
  fi
  mkdir -p "$W/cfgout-$name"
  expect "config-$name" "$rc" "$@" -- "$BIN" build -q "$W/cfg-$name" -o "$W/cfgout-$name/m.so"
}
cfgcase max-pos-0 2 's/"max_position_embeddings": [0-9]*/"max_position_embeddings": 0/' \
  "max_position_embeddings must be positive, found 0"
cfgcase eps-inf-f32 2 's/"rms_norm_eps": [-0-9.e]*/"rms_norm_eps": 1e39/' "rms_norm_eps 1e+39 is outside the f32 range"
cfgcase eps-zero-f32 2 's/"rms_norm_eps": [-0-9.e]*/"rms_norm_eps": 1e-50/' "rms_norm_eps 1e-50 is outside the f32 range"
cfgcase eps-one 0 's/"rms_norm_eps": [-0-9.e]*/"rms_norm_eps": 1/'   # "1f" is not C; "1.0f" is
cfgcase huge-heads 2 's/"num_attention_heads": [0-9]*/"num_attention_heads": 4503599627370496/; s/"head_dim": [0-9]*/"head_dim": 4503599627370496/' \
  "num_attention_heads 4503599627370496" "at most 1048576"
cfgcase huge-layers 2 's/"num_hidden_layers": [0-9]*/"num_hidden_layers": 9007199254740992/' \
  "num_hidden_layers 9007199254740992: at most 4096"

# A TTS talker context shorter than the predictor's G + 1 positions: the two
# share a RoPE table, which aborted on an assertion instead of growing.
mkdir -p "$W/ttsctx"
expect tts-short-context 0 -- "$BIN" build -q tests/data/tts/tts_tiny_06b_layout -o "$W/ttsctx/m.so" --max-context 4
# ... which can make no frame: its code predictor steps 16 positions a frame
expect tts-short-context-refused 1 "max_context 4 is less than the 16 positions the code predictor steps" -- \
  "$BIN" tts "$W/ttsctx/m.so" --text-ids 480,300,198,5,481,198,480,300,198 -o "$W/ttsctx/c.json"

# ---------------------------------------------------------------- Qwen3-TTS
# tensors renamed in the header (same length): a predictor head, and the
# 1.7B layout's projection
ttsck() {
  mkdir -p "$W/$2" && cp "$1/config.json" "$1/model.safetensors" "$W/$2/" &&
    LC_ALL=C sed -i "s/\"$3\"/\"$4\"/" "$W/$2/model.safetensors" &&
    ! cmp -s "$1/model.safetensors" "$W/$2/model.safetensors"
}
if setup tts-missing-head ttsck "$TTS6" nohead 'talker\.code_predictor\.lm_head\.3\.weight' 'talker.code_predictor.lm_head.3.weighX'; then
  expect tts-missing-predictor-head 2 "tensor 'talker.code_predictor.lm_head.3.weight' is missing" -- \
    "$BIN" build "$W/nohead" -o "$FO/m.so"
fi
if setup tts-missing-proj ttsck "$TTS17" noproj 'talker\.code_predictor\.small_to_mtp_projection\.weight' 'talker.code_predictor.small_to_mtp_projection.weighX'; then
  expect tts-17b-without-projection 2 "small_to_mtp_projection.weight' is missing" "1.7B layout" -- \
    "$BIN" build "$W/noproj" -o "$FO/m.so"
fi
mkdir -p "$W/tts"
if setup tts-build "$BIN" build -q "$TTS6" -o "$W/tts/m.so"; then
  ids=480,300,198,118,14,98,93,149,124,481,198,480,300,198
  expect tts-greedy 0 'out:[897, 25, 1, 47, 41, 37, 51, 51, 3, 13, 43, 31, 5, 4, 45, 46]' "frames/s" -- \
    "$BIN" tts "$W/tts/m.so" --text-ids "$ids" --speaker tiny_speaker --language english --greedy --max-frames 2 -o -
  expect tts-unknown-speaker 1 "--speaker nobody: unknown" "tiny_speaker" -- \
    "$BIN" tts "$W/tts/m.so" --text-ids "$ids" --speaker nobody -o -
  expect tts-unknown-language 1 "--language klingon: unknown" "english" -- \
    "$BIN" tts "$W/tts/m.so" --text-ids "$ids" --language klingon -o -
  expect tts-text-out-of-range 1 "outside the text vocabulary" -- \
    "$BIN" tts "$W/tts/m.so" --text-ids 480,300,198,99999,14,98,93,149,124,481,198,480,300,198 -o -
  expect tts-text-too-short 1 "text ids: 4 tokens" -- "$BIN" tts "$W/tts/m.so" --text-ids 1,2,3,4 -o -
  expect tts-no-text 1 "missing --text-ids" -- "$BIN" tts "$W/tts/m.so" -o -
  expect tts-on-llm 1 "not a Qwen3-TTS model" -- "$BIN" tts "$W/a/m.so" --text-ids "$ids" -o -
  printf '%s\n' "480 300 198 118 14 98" "93 149 124 481 198 480 300 198" > "$W/ids.txt"
  expect tts-ids-file 0 "frames/s" -- "$BIN" tts "$W/tts/m.so" --text-ids "$W/ids.txt" --max-frames 2 -o "$W/codes.bin"
  [ "$(wc -c <"$W/codes.bin")" -eq 128 ] && n_pass=$((n_pass + 1)) || fail_case tts-bin-size "codes.bin is not 2 x 16 int32"
  expect tts-help 0 "out:usage: speechc tts" "out:--non-streaming" -- "$BIN" tts --help
  # --text: a tokenizer whose ids fit the tiny model (GPT-2's byte order, so
  # "\n" is 198 as in Qwen's; "assistant" 300, <|im_start|> 480, <|im_end|>
  # 481 added) must give the frames of the same ids passed as --text-ids
  mkdir -p "$W/tok"
  { printf '{'; id=0; extra=0
    for b in $(seq 0 255); do
      if { [ $b -ge 33 ] && [ $b -le 126 ]; } || { [ $b -ge 161 ] && [ $b -le 172 ]; } || [ $b -ge 174 ]; then :; else continue; fi
      printf '"\\u%04x": %d,' $b $id; id=$((id + 1))
    done
    for b in $(seq 0 255); do
      if { [ $b -ge 33 ] && [ $b -le 126 ]; } || { [ $b -ge 161 ] && [ $b -le 172 ]; } || [ $b -ge 174 ]; then continue; fi
      printf '"\\u%04x": %d' $((256 + extra)) $id; id=$((id + 1)); extra=$((extra + 1))
      [ $id -lt 256 ] && printf ','
    done
    printf '}\n'; } > "$W/tok/vocab.json"
  : > "$W/tok/merges.txt"
  printf '{"added_tokens_decoder": {"300": {"content": "assistant"}, "480": {"content": "<|im_start|>"}, "481": {"content": "<|im_end|>"}}}\n' > "$W/tok/tokenizer_config.json"
  expect tts-text-tokenized 0 "out:480,300,198,39,72,481,198,480,300,198" -- \
    "$BIN" tokenize "$W/tok" "<|im_start|>assistant
Hi<|im_end|>
<|im_start|>assistant
"
  "$BIN" tts "$W/tts/m.so" --text Hi --tokenizer "$W/tok" --greedy --max-frames 2 -q -o "$W/by_text.json" 2>"$W/err" &&
    "$BIN" tts "$W/tts/m.so" --text-ids 480,300,198,39,72,481,198,480,300,198 --greedy --max-frames 2 -q \
      -o "$W/by_ids.json" 2>>"$W/err" && cmp -s "$W/by_text.json" "$W/by_ids.json" &&
    n_pass=$((n_pass + 1)) || fail_case tts-text "--text Hi gives other frames than its ids"
  # qwen-tts' rules for instructions: a 0.6B CustomVoice model (this one:
  # tts_model_size 0b6) drops any, with a note here; the 1.7B keeps it, and
  # "" is none
  expect tts-instruct-0b6 0 "the instruction is dropped" "0.6B CustomVoice" -- \
    "$BIN" tts "$W/tts/m.so" --text Hi --tokenizer "$W/tok" --instruct 'be glad' --greedy --max-frames 2 \
    -o "$W/by_0b6.json"
  cmp -s "$W/by_text.json" "$W/by_0b6.json" && n_pass=$((n_pass + 1)) ||
    fail_case tts-instruct-0b6-frames "the 0.6B model's frames changed with an instruction"
  mkdir -p "$W/tts17"
  if setup tts17-build "$BIN" build -q "$TTS17" -o "$W/tts17/m.so"; then
    "$BIN" tts "$W/tts17/m.so" --text Hi --tokenizer "$W/tok" --greedy --max-frames 4 -q -o "$W/a17.json" &&
      "$BIN" tts "$W/tts17/m.so" --text Hi --tokenizer "$W/tok" --instruct 'be glad' --greedy --max-frames 4 \
        -o "$W/b17.json" 2>"$W/err" && ! grep -q "dropped" "$W/err" && ! cmp -s "$W/a17.json" "$W/b17.json" &&
      n_pass=$((n_pass + 1)) || fail_case tts-instruct-1b7 "the 1.7B model's instruction was not used"
    "$BIN" tts "$W/tts17/m.so" --text Hi --tokenizer "$W/tok" --instruct '' --greedy --max-frames 4 -q \
      -o "$W/e17.json" && cmp -s "$W/a17.json" "$W/e17.json" &&
      n_pass=$((n_pass + 1)) || fail_case tts-instruct-empty "--instruct '' gives other frames than none"
  fi
  # a Base model clones a voice from reference audio, which speechc does not do
  mkdir -p "$W/tbase" "$W/tbase-out" && cp "$TTS6"/config.json "$TTS6"/model.safetensors "$W/tbase/" &&
    sed -i 's/"tts_model_type": "custom_voice"/"tts_model_type": "base"/' "$W/tbase/config.json"
  if setup tbase-build "$BIN" build -q "$W/tbase" -o "$W/tbase-out/m.so"; then
    expect tts-base-model 1 "a Base model (tts_model_type base)" "voice cloned from reference audio" -- \
      "$BIN" tts "$W/tbase-out/m.so" --text-ids "$ids" -o -
  fi
  # languages as qwen-tts validates them: a dialect comes with its speaker
  expect tts-language-dialect 1 "--language sichuan_dialect: unknown" "comes with its speaker" -- \
    "$BIN" tts "$W/tts/m.so" --text-ids "$ids" --language sichuan_dialect -o -
  expect tts-language-empty 1 "--language '': unknown" -- "$BIN" tts "$W/tts/m.so" --text-ids "$ids" --language '' -o -
  expect tts-language-case 0 'out:[897, 25, 1, 47, 41, 37, 51, 51, 3, 13, 43, 31, 5, 4, 45, 46]' -- \
    "$BIN" tts "$W/tts/m.so" --text-ids "$ids" --speaker tiny_speaker --language English --greedy --max-frames 2 -q -o -
  expect tts-text-no-tokenizer 1 "--text and --instruct need --tokenizer DIR" -- \
    "$BIN" tts "$W/tts/m.so" --text Hi -o -
  expect tts-text-and-ids 1 "give one of --text and --text-ids" -- \
    "$BIN" tts "$W/tts/m.so" --text Hi --text-ids "$ids" --tokenizer "$W/tok" -o -
  expect tts-text-bad-utf8 1 "--text: not valid UTF-8 at byte 1" -- \
    "$BIN" tts "$W/tts/m.so" --text $'H\xffi' --tokenizer "$W/tok" -o -
fi

# speechc tokenize on the HF-trained tiny BPE (tests/parity/make_tokenizer.py):
# the ids are HF tokenizers' for the same strings
TOK=tests/data/tokenizer/tiny_bpe
expect tok-ids 0 "out:403,401,1054,594,6,50,220,779" -- \
  "$BIN" tokenize "$TOK" "Hello world<|im_end|> It'S 你好"
expect tok-decode 0 "out:Hello world<|im_end|> It'S 你好" -- \
  "$BIN" tokenize "$TOK" --decode 403,401,1054,594,6,50,220,779
expect tok-dash-text 0 "out:" -- "$BIN" tokenize "$TOK" -- "-x"
printf 'ab\x80cd' > "$W/bad.txt"
expect tok-bad-utf8 2 "bad.txt: not valid UTF-8 at byte 2" -- "$BIN" tokenize "$TOK" --file "$W/bad.txt"
expect tok-bad-id 1 "id 99999 (at position 0) is not in the vocabulary" -- \
  "$BIN" tokenize "$TOK" --decode 99999
expect tok-no-dir 2 "tokenizer.json: not found" "hint:" -- "$BIN" tokenize "$W" "hi"
expect tok-two-inputs 1 "give exactly one of" -- "$BIN" tokenize "$TOK" "hi" --decode 1
expect tok-unknown-flag 1 "unknown option '--bogus'" -- "$BIN" tokenize "$TOK" --bogus
expect tok-help 0 "out:usage: speechc tokenize" -- "$BIN" tokenize --help
expect tok-help-cmd 0 "out:usage: speechc tokenize" -- "$BIN" help tokenize

finish
