#!/usr/bin/env bash
# tests/gpu/run.sh — everything that needs an NVIDIA GPU, in one call
# (about 6-8 minutes on an H200; BUDGET_S bounds the benchmarks):
#
#   0. the host: GPU, driver, nvcc, the CPU's model and ISA flags (avx512*:
#      the AVX-512 CPU kernels can only be verified on such a host);
#   1. build speechc (Release) into build-gpu/;
#   2. the CPU kernel tests on this host (ctest -R 'kernels|quant'), so
#      that AVX-512 kernels run where the CPU has them;
#   3. parity on the GPU: test_parity and test_tts with SPEECHC_TEST_TARGET=cuda
#      (every tiny checkpoint of tests/data built --target cuda, against the
#      committed HF transformers / qwen-tts traces: logits within 1e-4
#      relative for f32 and for the bf16-stored checkpoint, whose values are
#      exact; greedy tokens and TTS codes identical), test_gdn (the Qwen3.5 /
#      Qwen3.5-MoE / Qwen3-Next hybrids: logits, prefill == decode, the GDN
#      states after the prompt, every band), test_rows (rows of two
#      sessions placed in one call equal separate calls, bit for bit: ABI 6's
#      row_pos / row_state on the real kernels), and test_cuda (golden
#      .cu, ptxas sm_80/sm_90, kernel cache, every band against the CPU,
#      device sampling: TTS codes and sc_generate tokens equal to the CPU's
#      with penalties and seeded draws, the prompt GEMM on a wide checkpoint);
#   4. benchmarks on random checkpoints with the exact shapes of Qwen3-0.6B
#      and Qwen3-TTS-0.6B (bench/make_random_ckpt, no Python needed)
#      (bench/bench_cuda): device-to-device copy bandwidth; the decode GEMV
#      kernels alone (per-layer matrices and lm_head / codec_head) as a
#      fraction of the copy; decode tokens/s per weight band (bf16, f32,
#      q8_0, q4_0) with kernels per step, sc_generate (token picked on the
#      device) and its host round trips; prefill tokens/s (512-token
#      prompt, the tiled prompt GEMM); decode without CUDA graphs; TTS
#      frames/s and x real time, greedy and with the default sampling
#      (talker c0 drawn on the device), kernels and round trips per frame;
#   5. one summary table (also in $OUT_DIR/summary.txt).
#
#   tests/gpu/run.sh            # from the repository root or anywhere
#   OUT_DIR=/tmp/gpu tests/gpu/run.sh
#   SKIP_BENCH=1 tests/gpu/run.sh   # build, CPU kernels and parity only
#   BUDGET_S=420 tests/gpu/run.sh   # benchmarks start only before this many s
#
# Needs cmake, a C compiler, speechc's build dependencies (scripts/deps.sh,
# or a .gpudeps/ folder next to this checkout: libtcc, cJSON and the tcc
# runtime copied from a dev machine, not part of the repository, whose
# install.sh adds only what is missing), the CUDA toolkit (NVRTC, ptxas)
# and an NVIDIA driver with a GPU.  Logs go to $OUT_DIR (default
# build-gpu/gpu-logs); the exit status is non-zero if any step failed.
# Each step has a time limit, so one hang cannot eat a whole session.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
B=${BUILD_DIR:-$ROOT/build-gpu}
OUT_DIR=${OUT_DIR:-$B/gpu-logs}
WORK=${WORK:-/tmp/speechc-gpu}
JOBS=${JOBS:-$(nproc)}
BUDGET_S=${BUDGET_S:-420}
mkdir -p "$OUT_DIR" "$WORK"
SUMMARY=$OUT_DIR/summary.txt
STEPS=$OUT_DIR/steps.txt
: >"$SUMMARY"
: >"$STEPS"
rm -f "$OUT_DIR"/bench_*.log
fails=0
t_start=$(date +%s)

note() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(( $(date +%s) - t_start )); }
# step NAME LIMIT_S CMD...: run, log to $OUT_DIR/NAME.log, record the result
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s)
  echo "=== $name: $*"
  timeout "$limit" "$@" >"$OUT_DIR/$name.log" 2>&1
  rc=$?
  tail -n 25 "$OUT_DIR/$name.log"
  if [ $rc -eq 0 ]; then echo "PASS $name $(( $(date +%s) - t0 ))s" >>"$STEPS"
  else echo "FAIL $name $(( $(date +%s) - t0 ))s exit=$rc$([ $rc -eq 124 ] && echo ',timed-out') log=$OUT_DIR/$name.log" >>"$STEPS"
       fails=$((fails + 1)); fi
  return $rc
}
# bench steps start only while the budget lasts
bench() {
  if [ "$(elapsed)" -ge "$BUDGET_S" ]; then
    echo "SKIP $1 (budget of ${BUDGET_S}s spent)" >>"$STEPS"
    return 1
  fi
  step "$@"
}

# 0. the host
note "speechc GPU run, $(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
if command -v nvidia-smi >/dev/null; then
  note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
fi
note "nvcc: $(command -v nvcc >/dev/null && nvcc --version | tail -2 | head -1 || echo none)"
note "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //') ($(nproc) threads)"
AVX512=$(grep -o -w 'avx512[a-z0-9_]*' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')
note "cpu ISA: avx2 $(grep -q -w avx2 /proc/cpuinfo && echo yes || echo no), fma $(grep -q -w fma /proc/cpuinfo && echo yes || echo no); avx512: ${AVX512:-none}"

# deps on a bare GPU machine (see above)
if [ -f "$ROOT/.gpudeps/install.sh" ]; then
  step deps 120 sh "$ROOT/.gpudeps/install.sh" || { note "dependencies failed: nothing else can run"; cat "$STEPS"; exit 1; }
fi

# 1. build
step build 300 bash -c "cmake -S '$ROOT' -B '$B' -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build '$B' -j$JOBS" || {
  note "build failed: nothing else can run"; cat "$STEPS" | tee -a "$SUMMARY"; exit 1; }

# 2. the CPU kernels on this host's ISA
# (test_kernels and test_quant compare every ISA this CPU runs against the
# portable kernels; where the CPU has AVX-512 F/BW/VL, SPEECHC_TEST_ISAS
# makes them fail unless the AVX-512 kernels really ran)
ISAS=avx2
case " $AVX512 " in *" avx512f "*) case " $AVX512 " in *" avx512bw "*) case " $AVX512 " in *" avx512vl "*)
  ISAS=avx2,avx512 ;; esac ;; esac ;; esac
note "cpu kernel tests must run: $ISAS"
step cpu_kernels 120 env SPEECHC_TEST_ISAS=$ISAS bash -c "cd '$B' && ctest -R 'kernels|quant' --output-on-failure"

# 3. parity on the GPU
export SPEECHC_BIN=$B/speechc
step parity_llm 180 env SPEECHC_TEST_TARGET=cuda "$B/test_parity"
step parity_tts 180 env SPEECHC_TEST_TARGET=cuda "$B/test_tts"
step rows 120 env SPEECHC_TEST_TARGET=cuda "$B/test_rows"
step parity_gdn 180 env SPEECHC_TEST_TARGET=cuda "$B/test_gdn"
step test_cuda 300 "$B/test_cuda"

# 4. benchmarks (SKIP_BENCH=1: not)
if [ "${SKIP_BENCH:-0}" != 1 ]; then
  LM=$WORK/qwen3-0.6b TTS=$WORK/qwen3-tts-0.6b
  [ -f "$LM/model.safetensors" ] || step ckpt_lm 180 "$B/make_random_ckpt" qwen3-0.6b "$LM"
  for band in bf16 q8_0 q4_0 f32; do
    bench build_lm_$band 180 "$B/speechc" build "$LM" --target cuda --weights $band --max-context 1024 -q \
      -o "$WORK/lm_$band.so" || continue
    if [ $band = bf16 ]; then
      bench bench_lm_bf16 180 "$B/bench_cuda" "$WORK/lm_bf16.so" --prompt 64 --prefill 512 --steps 256
    else
      bench bench_lm_$band 120 "$B/bench_cuda" "$WORK/lm_$band.so" --prompt 64 --prefill 512 --steps 128
    fi
  done
  [ -f "$TTS/model.safetensors" ] || bench ckpt_tts 180 "$B/make_random_ckpt" qwen3-tts-0.6b "$TTS"
  bench build_tts 180 "$B/speechc" build "$TTS" --target cuda --weights bf16 --max-context 1024 -q \
    -o "$WORK/tts_bf16.so" &&
    bench bench_tts_bf16 180 "$B/bench_cuda" "$WORK/tts_bf16.so" --frames 128
  [ -f "$WORK/lm_bf16.so" ] &&
    bench bench_lm_nographs 120 env SPEECHC_CUDA_GRAPHS=0 "$B/bench_cuda" "$WORK/lm_bf16.so" --prompt 64 \
      --steps 64 --no-gemv
fi

# 5. the summary table
{
  echo ""
  echo "steps:"
  sed 's/^/  /' "$STEPS"
  echo ""
  echo "benchmarks (bench: lines of $OUT_DIR/bench_*.log; frac: share of the device-to-device copy bandwidth;"
  echo "kernels, trips: per decode step, or per TTS frame with the prompt's share included):"
  printf '  %-18s %-11s %-26s %10s %9s %9s %8s %6s %8s %7s\n' run what kernel/size "tok/s|fps" "x-RT" ms GB/s frac kernels trips
  for f in "$OUT_DIR"/bench_*.log; do
    [ -f "$f" ] || continue
    run=$(basename "$f" .log)
    run=${run#bench_}
    grep -h '^bench:' "$f" | sed 's/^bench: //' | awk -v run="$run" '
      { delete v; for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
      { rate = v["tok_s"] != "" ? v["tok_s"] : v["fps"]
        size = v["kernel"] != "" ? v["kernel"] " " v["rows"] "x" v["cols"] : (v["tokens"] != "" ? v["tokens"] " tokens" : (v["frames"] != "" ? v["frames"] " frames" : ""))
        if (v["what"] == "copy") rate = ""
        ms = v["ms"] != "" ? v["ms"] : (v["us"] != "" ? sprintf("%.4f", v["us"] / 1000) : "")
        printf "  %-18s %-11s %-26s %10s %9s %9s %8s %6s %8s %7s\n", run, v["what"], size, rate, v["rtf"], ms, v["gbps"], v["frac"], v["kernels"], v["trips"] }'
  done
  echo ""
  echo "$fails step(s) failed; $(elapsed) s in all"
} | tee -a "$SUMMARY"
[ "$fails" -eq 0 ]
