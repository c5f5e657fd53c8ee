#!/usr/bin/env bash
# streams.sh — batched steps of B streams against one stream, in
# interleaved rounds (the machine may be shared: medians, not single runs).
# Not a test: it prints the rows behind docs/PERFORMANCE.md's tables.
#
# Each MODELS entry is an artifact: a Qwen3-TTS one is timed in frames/s
# (speechc bench --frames), a Qwen3 / Llama one in tokens/s (--steps).
# For each round, model and B: one `speechc bench --streams B` run, which
# times one stream and then B streams stepped together.  Then, per model
# and B, the medians over the rounds: one stream, all B together, per
# stream, and the ratio of the aggregate to one stream's.
#
#   MODELS="/tmp/tb/tts_q4_0.so /tmp/tb/tts_q8_0.so" bench/streams.sh
#   MODELS=m.so STREAMS="2 8" ROUNDS=5 THREADS=2 bench/streams.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SPEECHC:-$PWD/build/speechc}
MODELS=${MODELS:?MODELS: the artifacts to time (speechc build ... --max-batch 16, the default)}
STREAMS=${STREAMS:-"2 4 8 16"}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
PROBE_MB=${PROBE_MB:-512}
[ -x "$bin" ] || { echo "streams.sh: build first (cmake --build build): $bin" >&2; exit 2; }
raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg); THREADS=$THREADS ROUNDS=$ROUNDS"
for r in $(seq 1 "$ROUNDS"); do
  for m in $MODELS; do
    for B in $STREAMS; do
      out=$("$bin" bench "$m" --streams "$B" --threads "$THREADS" --probe-mb "$PROBE_MB" --frames 24 --steps 16 2>&1) || {
        echo "streams.sh: $m --streams $B failed:" >&2; echo "$out" >&2; exit 1; }
      # one stream: frames_s (TTS) or tok_s (LM); together: agg_* and stream_*
      one=$(echo "$out" | sed -n 's/^bench: band=.* \(frames_s\|tok_s\)=\([0-9.]*\) .*/\2/p')
      agg=$(echo "$out" | sed -n 's/^bench: streams=.* agg_[a-z_]*=\([0-9.]*\) .*/\1/p')
      per=$(echo "$out" | sed -n 's/^bench: streams=.* stream_[a-z_]*=\([0-9.]*\) .*/\1/p')
      echo "round=$r model=$m B=$B one=$one together=$agg per_stream=$per" | tee -a "$raw"
    done
  done
done
median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'; }
echo "# medians over $ROUNDS rounds: model B one together per_stream together/one"
for m in $MODELS; do
  for B in $STREAMS; do
    sel=$(grep " model=$m B=$B " "$raw")
    one=$(echo "$sel" | sed 's/.* one=\([0-9.]*\).*/\1/' | median)
    agg=$(echo "$sel" | sed 's/.* together=\([0-9.]*\).*/\1/' | median)
    per=$(echo "$sel" | sed 's/.* per_stream=\([0-9.]*\).*/\1/' | median)
    echo "$m $B $one $agg $per $(awk -v a="$agg" -v o="$one" 'BEGIN {printf "%.2f", a / o}')"
  done
done
