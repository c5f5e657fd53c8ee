#!/usr/bin/env bash
# Qwen3-TTS-0.6B shapes on this machine: frames/s and real-time factor of
# `speechc tts` for each toolchain and weight band, plus resident memory.
# The checkpoint is random (speed only), made by bench/make_random_ckpt.py.
#   bench/run_tts_06b.sh [WORKDIR] [FRAMES]    (needs python3 + numpy once)
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-/tmp/speechc-bench}
frames=${2:-24}
bin=build/speechc
mkdir -p "$work"
py=${PYTHON:-python3}
[ -f "$work/tts06b/model.safetensors" ] || "$py" bench/make_random_ckpt.py qwen3-tts-0.6b "$work/tts06b"
# "<|im_start|>assistant\n" + 12 text tokens + "<|im_end|>\n<|im_start|>assistant\n"
ids=151644,77091,198,9707,11,1879,1246,525,498,3351,30,1096,374,264,1273,151645,198,151644,77091,198
printf '%-6s %-6s %8s %8s %10s %12s %12s %9s\n' cc band frames/s RTF talker_ms predictor_ms build_s rss_MB
for band in ${BANDS:-bf16}; do
  for cc in ${CCS:-tcc gcc}; do
    so="$work/tts-$cc-$band.so"
    t0=$(date +%s.%N)
    "$bin" build "$work/tts06b" -o "$so" --cc "$cc" --weights "$band" --max-context 512 -q
    t1=$(date +%s.%N)
    log=$( { /usr/bin/time -f 'rss %M' "$bin" tts "$so" --text-ids "$ids" --speaker random_speaker \
             --language english --max-frames "$frames" --seed 1 -o /dev/null ${THREADS:+--threads $THREADS}; } 2>&1 )
    line=$(grep 'frames/s' <<<"$log")
    fps=$(sed -E 's/.*: ([0-9.]+) frames\/s.*/\1/' <<<"$line")
    rtf=$(sed -E 's/.*real-time factor ([0-9.]+).*/\1/' <<<"$line")
    tms=$(sed -E 's/.*talker ([0-9.]+) ms.*/\1/' <<<"$line")
    pms=$(sed -E 's/.*predictor ([0-9.]+) ms.*/\1/' <<<"$line")
    rss=$(grep -o 'rss [0-9]*' <<<"$log" | awk '{print int($2/1024)}')
    printf '%-6s %-6s %8s %8s %10s %12s %12.1f %9s\n' "$cc" "$band" "$fps" "$rtf" "$tms" "$pms" \
      "$(echo "$t1 - $t0" | bc)" "$rss"
  done
done
