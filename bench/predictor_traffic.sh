#!/usr/bin/env bash
# predictor_traffic.sh — DRAM traffic of the Qwen3-TTS talker and code
# predictor per frame, simulated: callgrind's cache model (LRU, here a
# 32 MiB 16-way last level like this machine's L3) counts last-level read
# misses inside the talker entry points and, in a second run, inside the
# predictor's.  Misses x 64 bytes / frames = bytes read from DRAM per frame.
# One thread (the simulator serializes threads anyway); slow: ~15 min for
# 6 frames of the 0.6B shapes at q4_0.
#
#   bench/predictor_traffic.sh MODEL.so [FRAMES] [LL_BYTES]
set -euo pipefail
so=${1:?usage: predictor_traffic.sh MODEL.so [FRAMES] [LL_BYTES]}
frames=${2:-6}
ll=${3:-33554432}
speechc=${SPEECHC:-$(dirname "$0")/../build/speechc}
ids=151644,77091,198,100,200,300,400,151645,198,151644,77091,198
out=$(mktemp -d)
for part in talker predictor; do
  valgrind --tool=callgrind --cache-sim=yes --LL="$ll,16,64" --D1=32768,8,64 --I1=32768,8,64 \
    --toggle-collect="entry_${part}_*" --callgrind-out-file="$out/$part.out" \
    "$speechc" tts "$so" --text-ids "$ids" -o "$out/codes.json" --max-frames "$frames" \
    --threads 1 --greedy -q >"$out/$part.log" 2>&1 &
done
wait
for part in talker predictor; do
  misses=$(sed -n 's/.*LL misses: *\([0-9,]*\) *( *\([0-9,]*\) rd.*/\2/p' "$out/$part.log" | tr -d ,)
  awk -v p="$part" -v m="$misses" -v f="$frames" \
    'BEGIN { printf "%-9s LL read misses %d = %.1f MB per frame (%d frames)\n", p, m, m * 64 / f / 1e6, f }'
done
rm -rf "$out"
