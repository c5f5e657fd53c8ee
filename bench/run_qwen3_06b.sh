#!/usr/bin/env bash
# run_qwen3_06b.sh — speechc decode speed on a random checkpoint with the
# exact shapes of Qwen3-0.6B: build it at each band with the system compiler
# (gcc) and with the embedded libtcc, and run `speechc bench` on each.
#
#   bench/run_qwen3_06b.sh                  # bf16 q8_0 q4_0 x gcc tcc
#   BANDS=q4_0 CCS=gcc STEPS=64 bench/run_qwen3_06b.sh
#
# Needs a built speechc ($SPEECHC, default build/speechc) and, for the
# checkpoint, a Python with numpy ($PY, default /work/venv/bin/python).
# Outputs (about 2.2 GB per toolchain) go to $OUT (default
# /tmp/speechc-bench), never into the repository; bench/peers_llamacpp.sh
# reads the same checkpoint.  Each run's full output is kept as
# $OUT/<cc>_<band>.txt; the summary table at the end is built from the
# `bench:` lines.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SPEECHC=${SPEECHC:-$ROOT/build/speechc}
PY=${PY:-/work/venv/bin/python}
OUT=${OUT:-/tmp/speechc-bench}
STEPS=${STEPS:-32}
THREADS=${THREADS:-0}
PROMPT=${PROMPT:-16}
BANDS=${BANDS:-"bf16 q8_0 q4_0"}
CCS=${CCS:-"gcc tcc"}

[ -x "$SPEECHC" ] || { echo "run_qwen3_06b.sh: no speechc at $SPEECHC (build it, or set SPEECHC)" >&2; exit 2; }
mkdir -p "$OUT"
CKPT=$OUT/qwen3-0.6b
[ -f "$CKPT/model.safetensors" ] || "$PY" "$ROOT/bench/make_random_ckpt.py" qwen3-0.6b "$CKPT"

for cc in $CCS; do
  for band in $BANDS; do
    so=$OUT/${cc}_${band}.so
    if [ ! -f "$so" ] || [ "$SPEECHC" -nt "$so" ]; then
      "$SPEECHC" build "$CKPT" -o "$so" --cc "$cc" --weights "$band" --max-context 512 -q
    fi
    echo "== speechc $cc $band"
    "$SPEECHC" bench "$so" --steps "$STEPS" --threads "$THREADS" --prompt "$PROMPT" | tee "$OUT/${cc}_${band}.txt"
  done
done

echo
printf '%-5s %-5s %10s %10s %10s %8s\n' cc band tokens/s GB/s probe %probe
for cc in $CCS; do
  for band in $BANDS; do
    line=$(grep '^bench:' "$OUT/${cc}_${band}.txt") || continue
    get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
    printf '%-5s %-5s %10.2f %10.2f %10.2f %7.1f%%\n' "$cc" "$band" "$(get tok_s)" "$(get gbps)" \
      "$(get probe_gbps)" "$(awk -v f="$(get frac)" 'BEGIN { print f * 100 }')"
  done
done
