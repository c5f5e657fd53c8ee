#!/usr/bin/env bash
# tests/gpu/run.sh — everything that needs an NVIDIA GPU, in one call:
#
#   1. build speechc (Release) into build-gpu/;
#   2. parity on the GPU: test_parity and test_tts with SPEECHC_TEST_TARGET=cuda
#      (every tiny checkpoint of tests/data built --target cuda, against the
#      committed HF transformers / qwen-tts traces: logits within 1e-4
#      relative for f32 and for the bf16-stored checkpoint, whose values are
#      exact; greedy tokens and TTS codes identical), and test_cuda (golden
#      .cu, ptxas sm_80/sm_90, kernel cache);
#   3. benchmarks on random checkpoints with the exact shapes of Qwen3-0.6B
#      and Qwen3-TTS-0.6B (bench/make_random_ckpt, no Python needed), bf16:
#      device-to-device copy bandwidth, the decode GEMV kernels alone,
#      decode tokens/s (sc_decode; and sc_generate, whose greedy steps pick
#      the token on the device) and TTS frames/s with effective GB/s, the
#      fraction of the copy bandwidth, kernels and host round trips per
#      step or frame (bench/bench_cuda).
#
#   tests/gpu/run.sh            # from the repository root or anywhere
#   OUT_DIR=/tmp/gpu tests/gpu/run.sh
#   SKIP_BENCH=1 tests/gpu/run.sh   # build and parity only
#
# Needs cmake, a C compiler, speechc's build dependencies (scripts/deps.sh,
# or a .gpudeps/ folder next to this checkout: libtcc, cJSON and the tcc
# runtime copied from a dev machine, not part of the repository, whose
# install.sh adds only what is missing), the CUDA toolkit (NVRTC, ptxas)
# and an NVIDIA driver with a GPU.  Logs go
# to $OUT_DIR (default build-gpu/gpu-logs); the exit status is non-zero if
# any step failed.  Each step has a time limit, so one hang cannot eat a
# whole session.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
B=${BUILD_DIR:-$ROOT/build-gpu}
OUT_DIR=${OUT_DIR:-$B/gpu-logs}
WORK=${WORK:-/tmp/speechc-gpu}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$OUT_DIR" "$WORK"
SUMMARY=$OUT_DIR/summary.txt
: >"$SUMMARY"
fails=0
t_start=$(date +%s)

note() { echo "$*" | tee -a "$SUMMARY"; }
# step NAME LIMIT_S CMD...: run, log to $OUT_DIR/NAME.log, record the result
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo "=== $name: $*"
  timeout "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1
  rc=$?
  tail -n 25 "$OUT_DIR/$name.log"
  if [ $rc -eq 0 ]; then note "PASS $name ($(( $(date +%s) - t0 )) s)"
  else note "FAIL $name (exit $rc$([ $rc -eq 124 ] && echo ', timed out'), $(( $(date +%s) - t0 )) s; log $OUT_DIR/$name.log)"; fails=$((fails + 1)); fi
  return $rc
}

note "speechc GPU run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname)"
if command -v nvidia-smi >/dev/null; then
  note "$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
fi
note "nvcc: $(command -v nvcc >/dev/null && nvcc --version | tail -2 | head -1 || echo none)"

# 0. build dependencies on a bare GPU machine (see above)
if [ -f "$ROOT/.gpudeps/install.sh" ]; then
  step deps 120 sh "$ROOT/.gpudeps/install.sh" || { note "dependencies failed: nothing else can run"; exit 1; }
fi

# 1. build
step build 600 bash -c "cmake -S '$ROOT' -B '$B' -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build '$B' -j$JOBS" || {
  note "build failed: nothing else can run"; exit 1; }

# 2. parity on the GPU
export SPEECHC_BIN=$B/speechc
step parity_llm 300 env SPEECHC_TEST_TARGET=cuda "$B/test_parity"
step parity_tts 300 env SPEECHC_TEST_TARGET=cuda "$B/test_tts"
step test_cuda 300 "$B/test_cuda"

# 3. benchmarks (SKIP_BENCH=1: not)
if [ "${SKIP_BENCH:-0}" != 1 ]; then
LM=$WORK/qwen3-0.6b TTS=$WORK/qwen3-tts-0.6b
[ -f "$LM/model.safetensors" ] || step ckpt_lm 300 "$B/make_random_ckpt" qwen3-0.6b "$LM"
step build_lm 300 "$B/speechc" build "$LM" --target cuda --weights bf16 --max-context 1024 -q -o "$WORK/lm_bf16.so"
step bench_lm 300 "$B/bench_cuda" "$WORK/lm_bf16.so" --prompt 64 --steps 256
step bench_lm_nographs 300 env SPEECHC_CUDA_GRAPHS=0 "$B/bench_cuda" "$WORK/lm_bf16.so" --prompt 64 --steps 64 --no-gemv
[ -f "$TTS/model.safetensors" ] || step ckpt_tts 300 "$B/make_random_ckpt" qwen3-tts-0.6b "$TTS"
step build_tts 300 "$B/speechc" build "$TTS" --target cuda --weights bf16 --max-context 1024 -q -o "$WORK/tts_bf16.so"
step bench_tts 300 "$B/bench_cuda" "$WORK/tts_bf16.so" --frames 128
fi

note ""
note "benchmarks (bench: lines):"
grep -h '^bench:\|^gemv \|^decode \|^generate \|^tts \|^gpu ' "$OUT_DIR"/bench_*.log 2>/dev/null | tee -a "$SUMMARY"
note ""
note "$fails step(s) failed; $(( $(date +%s) - t_start )) s in all"
[ "$fails" -eq 0 ]
