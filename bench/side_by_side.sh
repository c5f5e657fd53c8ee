#!/usr/bin/env bash
# side_by_side.sh — speechc (gcc and tcc builds) and llama.cpp, interleaved,
# on the random Qwen3-0.6B checkpoint: ROUNDS rounds, each running every
# engine once per band, then the median per cell.  Interleaving spreads the
# load of a shared machine over all engines alike.  Run
# bench/run_qwen3_06b.sh and bench/peers_llamacpp.sh once first (they build
# the artifacts and GGUF files this reuses).
#
#   ROUNDS=5 THREADS=2 bench/side_by_side.sh
#   DEPTH=256 BANDS=q4_0 bench/side_by_side.sh   # decode after DEPTH tokens
#                                                 # of context (attention)
#   PREFILL=64 bench/side_by_side.sh              # prompt processing instead:
#       speechc bench --prompt 64 (its second, warm prefill) against
#       llama-bench -p 64 -n 0 (after its warm-up run); tok/s = prompt tokens/s
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SPEECHC=${SPEECHC:-$ROOT/build/speechc}
OUT=${OUT:-/tmp/speechc-bench}
PEERS=${PEERS:-/tmp/peers}
LLAMA_BENCH=${LLAMA_BENCH:-$PEERS/llama.cpp/build/bin/llama-bench}
PY=${PY:-/work/venv/bin/python}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-2}
STEPS=${STEPS:-32}
BANDS=${BANDS:-"bf16 q8_0 q4_0"}
DEPTH=${DEPTH:-0} # 0: speechc prefills its default 16 tokens, llama-bench none
PREFILL=${PREFILL:-0}
if [ "$PREFILL" -gt 0 ]; then
  sc_args="--prompt $PREFILL --steps 4" llama_args="-p $PREFILL -n 0"
  # report the prompt's tokens/s in the tok_s column
  sc_fix() { sed -E 's/tok_s=[0-9.]+ (.*)prefill_tok_s=([0-9.]+)/tok_s=\2 \1/'; }
else
  sc_args="" llama_args="-p 0 -n 64 -d $DEPTH"
  if [ "$DEPTH" -gt 0 ]; then sc_args="--prompt $DEPTH"; fi
  sc_fix() { cat; }
fi
LOG=$OUT/side_by_side.log

: >"$LOG"
for round in $(seq "$ROUNDS"); do
  for band in $BANDS; do
    for cc in gcc tcc; do
      # shellcheck disable=SC2086
      "$SPEECHC" bench "$OUT/${cc}_${band}.so" --steps "$STEPS" --threads "$THREADS" --probe-mb 512 $sc_args |
        sed -n "s/^bench: /speechc-$cc: round=$round /p" | sc_fix | tee -a "$LOG"
    done
    # shellcheck disable=SC2086
    lb_out=$("$LLAMA_BENCH" -m "$PEERS/gguf/qwen3-0.6b-$band.gguf" $llama_args -t "$THREADS" -r 1 -o json 2>/dev/null) ||
      { echo "side_by_side.sh: llama-bench failed (exit $?) on $band: $LLAMA_BENCH $llama_args" >&2; exit 1; }
    echo "$lb_out" |
      "$PY" -c 'import json, sys; r = json.load(sys.stdin)[0]; print("llamacpp: round=%s band=%s tok_s=%.3f" % (sys.argv[1], sys.argv[2], r["avg_ts"]))' \
        "$round" "$band" | tee -a "$LOG"
  done
done

# medians; llama.cpp's GB/s counts the same bytes per step as speechc's
# bench (same shapes, same band) against the probe medians of that band
PREFILL=$PREFILL "$PY" - "$LOG" <<'EOF'
import os, re, statistics, sys
prefill = os.environ.get("PREFILL", "0") != "0"
rows = {}
for line in open(sys.argv[1]):
    eng, rest = line.split(":", 1)
    kv = dict(re.findall(r"(\w+)=(\S+)", rest))
    rows.setdefault((kv["band"], eng), []).append(kv)
med = lambda xs: statistics.median(float(x) for x in xs)
n = max(len(v) for v in rows.values())
print(f"{'band':5} {'engine':12} {'tok/s':>7} {'GB/s':>6} {'%probe':>7} {'vs llama.cpp':>12}   (medians of {n} rounds)")
for band in dict.fromkeys(b for b, _ in rows):
    sc = rows.get((band, "speechc-gcc"), []) + rows.get((band, "speechc-tcc"), [])
    step_bytes = float(sc[0]["bytes"]) if sc else float("nan")
    probe = med(r["probe_gbps"] for r in sc) if sc else float("nan")
    ref = med(r["tok_s"] for r in rows[(band, "llamacpp")]) if (band, "llamacpp") in rows else float("nan")
    for eng in ("speechc-gcc", "speechc-tcc", "llamacpp"):
        rs = rows.get((band, eng))
        if not rs:
            continue
        tok = med(r["tok_s"] for r in rs)
        gbs = tok * step_bytes / 1e9
        if prefill:  # prompt tokens/s: no bandwidth to speak of
            print(f"{band:5} {eng:12} {tok:7.2f} {'-':>6} {'-':>7} {tok / ref:11.2f}x")
        else:
            print(f"{band:5} {eng:12} {tok:7.2f} {gbs:6.2f} {100 * gbs / probe:6.1f}% {tok / ref:11.2f}x")
EOF
