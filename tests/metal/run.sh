#!/usr/bin/env bash
# tests/metal/run.sh — everything that needs an Apple GPU, in one call, on
# a Mac (Apple silicon, macOS 13 or later):
#
#   0. the host: macOS version, chip, GPU cores, memory;
#   1. build speechc (Release) into build-metal/, with runtime/metal_rt.m
#      (the Objective-C host over the Metal framework: this is the first
#      place it compiles and runs);
#   2. the generated MSL under regression (test_golden) and the dialect
#      (test_ir), as on every machine;
#   3. parity on the GPU: test_parity, test_tts, test_rows and test_gdn
#      with SPEECHC_TEST_TARGET=metal and no stand-in (every tiny checkpoint
#      of tests/data built --target metal, compiled by the Metal framework,
#      against the committed HF transformers / qwen-tts traces, with the
#      tolerances the CUDA target is held to);
#   4. benchmarks on random checkpoints with the exact shapes of Qwen3-0.6B
#      and Qwen3-TTS-0.6B (bench/make_random_ckpt): `speechc bench` decode
#      tokens/s per band (bf16, q8_0, q4_0) and TTS frames/s, --target metal
#      next to --target cpu (gcc, this Mac's CPU) in the same run;
#   5. one summary (also in $OUT_DIR/summary.txt).
#
#   tests/metal/run.sh                 # from anywhere in the checkout
#   SKIP_BENCH=1 tests/metal/run.sh    # build and parity only
#
# Needs Xcode's command-line tools (clang, the Metal framework), cmake and
# speechc's build dependencies (Homebrew: tcc, cjson, openblas, pcre2,
# utf8proc, libmicrohttpd, sentencepiece).  Logs go to $OUT_DIR (default
# build-metal/metal-logs); the exit status is non-zero if any step failed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
B=${BUILD_DIR:-$ROOT/build-metal}
OUT_DIR=${OUT_DIR:-$B/metal-logs}
WORK=${WORK:-/tmp/speechc-metal}
JOBS=${JOBS:-$(sysctl -n hw.ncpu 2>/dev/null || nproc)}
mkdir -p "$OUT_DIR" "$WORK"
SUMMARY=$OUT_DIR/summary.txt
STEPS=$OUT_DIR/steps.txt
: >"$SUMMARY"
: >"$STEPS"
fails=0
t_start=$(date +%s)
LIMIT=$(command -v timeout || command -v gtimeout || true)

note() { echo "$*" | tee -a "$SUMMARY"; }
# step NAME LIMIT_S CMD...: run, log to $OUT_DIR/NAME.log, record the result
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo "=== $name: $*"
  if [ -n "$LIMIT" ]; then "$LIMIT" "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1; else "$@" >"$OUT_DIR/$name.log" 2>&1; fi
  rc=$?
  tail -n 25 "$OUT_DIR/$name.log"
  if [ $rc -eq 0 ]; then echo "PASS $name $(( $(date +%s) - t0 ))s" >>"$STEPS"
  else echo "FAIL $name $(( $(date +%s) - t0 ))s exit=$rc log=$OUT_DIR/$name.log" >>"$STEPS"; fails=$((fails + 1)); fi
  return $rc
}

# 0. the host
note "speechc Metal run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
note "macOS: $(sw_vers -productVersion 2>/dev/null || uname -sr)"
note "chip: $(sysctl -n machdep.cpu.brand_string 2>/dev/null || uname -m), memory $(( $(sysctl -n hw.memsize 2>/dev/null || echo 0) >> 30 )) GiB"
note "gpu: $(system_profiler SPDisplaysDataType 2>/dev/null | grep -E 'Chipset Model|Total Number of Cores' | sed 's/^ *//' | tr '\n' ' ')"
[ "$(uname -s)" = Darwin ] || note "warning: not macOS: the Metal steps below will fail (no Metal framework)"

# 1. build
step build 600 bash -c "cmake -S '$ROOT' -B '$B' -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build '$B' -j$JOBS" || {
  note "build failed: nothing else can run"; cat "$STEPS" | tee -a "$SUMMARY"; exit 1; }

# 2. generated code
step golden 120 bash -c "cd '$ROOT' && '$B/test_golden' && '$B/test_ir'"

# 3. parity on the GPU (SPEECHC_LIBMETAL unset: the real framework)
export SPEECHC_BIN=$B/speechc
unset SPEECHC_LIBMETAL
step parity_llm 600 env SPEECHC_TEST_TARGET=metal "$B/test_parity"
step parity_tts 600 env SPEECHC_TEST_TARGET=metal "$B/test_tts"
step rows 300 env SPEECHC_TEST_TARGET=metal "$B/test_rows"
step parity_gdn 600 env SPEECHC_TEST_TARGET=metal "$B/test_gdn"

# 4. benchmarks: Metal and this Mac's CPU side by side
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  LM=$WORK/qwen3-0.6b TTS=$WORK/qwen3-tts-0.6b
  [ -f "$LM/model.safetensors" ] || step ckpt_lm 300 "$B/make_random_ckpt" qwen3-0.6b "$LM"
  [ -f "$TTS/model.safetensors" ] || step ckpt_tts 300 "$B/make_random_ckpt" qwen3-tts-0.6b "$TTS"
  for band in bf16 q8_0 q4_0; do
    for target in metal cpu; do
      cc=tcc; [ $target = cpu ] && cc=clang
      step build_lm_${band}_$target 300 "$B/speechc" build "$LM" --target $target --cc $cc --weights $band \
        --max-context 1024 -q -o "$WORK/lm_${band}_$target.so" &&
        step bench_lm_${band}_$target 300 "$B/speechc" bench "$WORK/lm_${band}_$target.so"
    done
  done
  for target in metal cpu; do
    cc=tcc; [ $target = cpu ] && cc=clang
    step build_tts_$target 300 "$B/speechc" build "$TTS" --target $target --cc $cc --weights bf16 \
      --max-context 1024 -q -o "$WORK/tts_$target.so" &&
      step bench_tts_$target 300 "$B/speechc" bench "$WORK/tts_$target.so" --frames 64
  done
fi

# 5. summary
{
  echo ""
  echo "steps:"
  sed 's/^/  /' "$STEPS"
  echo ""
  echo "benchmarks (speechc bench, last lines of each):"
  for f in "$OUT_DIR"/bench_*.log; do
    [ -f "$f" ] || continue
    echo "  $(basename "$f" .log):"
    tail -n 6 "$f" | sed 's/^/    /'
  done
  echo ""
  echo "$fails step(s) failed; $(( $(date +%s) - t_start )) s in all"
} | tee -a "$SUMMARY"
[ "$fails" -eq 0 ]
