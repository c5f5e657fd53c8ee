#!/usr/bin/env bash
# ab.sh — one artifact under several settings, in interleaved rounds, for
# deciding a per-CPU default (the GEMV prefetch, the kernel table) on the
# machine at hand.  Each round runs `speechc bench MODEL ARGS` once per
# variant, in turn, so that a shared machine's load falls on all of them
# alike; then prints, per variant, the median of FIELD over the rounds, its
# range, and the ratio of the median to the first variant's.  Not a test:
# it prints the rows behind docs/PERFORMANCE.md's A/B tables.
#
# A variant is LABEL=SETTINGS, SETTINGS being space-separated VAR=VALUE
# pairs put in the environment of that variant's runs (empty: as is):
#
#   MODEL=/tmp/speechc-bench/gcc_bf16.so bench/ab.sh default= \
#       l2="SPEECHC_GEMV_PREFETCH_CACHE=l2" 4k="SPEECHC_GEMV_PREFETCH=4096"
#   MODEL=m.so FIELD=prefill_tok_s ARGS="--prompt 64 --steps 2" bench/ab.sh \
#       default= avx2="SPEECHC_ISA=avx2"
#   MODEL=tts.so FIELD=agg_frames_s ARGS="--frames 16 --streams 8" bench/ab.sh ...
#
# FIELD is any key of the `bench:` lines speechc bench prints (tok_s,
# prefill_tok_s, frac_paired, frames_s, agg_tok_s, agg_frames_s, ...).
# SPEECHC names another binary (default build/speechc).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${SPEECHC:-$PWD/build/speechc}
MODEL=${MODEL:?MODEL: the artifact to time (speechc build ...)}
FIELD=${FIELD:-tok_s}
ROUNDS=${ROUNDS:-5}
ARGS=${ARGS:-"--threads 2 --steps 32 --probe-mb 512"}

usage() {
  echo "usage: MODEL=m.so [FIELD=tok_s] [ROUNDS=5] [ARGS='...'] $0 LABEL=[VAR=VALUE ...] LABEL=... (two or more variants)" >&2
  exit 2
}
[ $# -ge 2 ] || usage
[ -x "$bin" ] || { echo "ab.sh: build first (cmake --build build): $bin" >&2; exit 2; }
[ -f "$MODEL" ] || { echo "ab.sh: MODEL: no such artifact: $MODEL" >&2; exit 2; }
case $ROUNDS in '' | *[!0-9]* | 0) echo "ab.sh: ROUNDS: expected a positive number, got '$ROUNDS'" >&2; exit 2 ;; esac
case $FIELD in '' | *[!a-z0-9_]*) echo "ab.sh: FIELD: expected a bench key such as tok_s, got '$FIELD'" >&2; exit 2 ;; esac

labels=() settings=()
for v in "$@"; do
  case $v in *=*) ;; *) echo "ab.sh: variant '$v': expected LABEL=[VAR=VALUE ...]" >&2; usage ;; esac
  label=${v%%=*} set=${v#*=}
  case $label in '' | *[!A-Za-z0-9_.-]*) echo "ab.sh: variant '$v': the label must be letters, digits, '_', '.' or '-'" >&2; exit 2 ;; esac
  for kv in $set; do
    [[ $kv =~ ^[A-Za-z_][A-Za-z0-9_]*=.*$ ]] || { echo "ab.sh: variant '$label': '$kv' is not VAR=VALUE" >&2; exit 2; }
  done
  for l in "${labels[@]}"; do [ "$l" != "$label" ] || { echo "ab.sh: variant label '$label' given twice" >&2; exit 2; }; done
  labels+=("$label") settings+=("$set")
done

raw=$(mktemp)
out=$(mktemp)
trap 'rm -f "$raw" "$out"' EXIT
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg); $MODEL $ARGS; FIELD=$FIELD ROUNDS=$ROUNDS"
for r in $(seq 1 "$ROUNDS"); do
  for i in "${!labels[@]}"; do
    # shellcheck disable=SC2086 # ARGS and the settings are word lists
    if ! env ${settings[$i]} "$bin" bench "$MODEL" $ARGS > "$out" 2>&1; then
      echo "ab.sh: variant '${labels[$i]}' failed in round $r:" >&2
      tail -5 "$out" >&2
      exit 1
    fi
    val=$(grep '^bench:' "$out" | tr ' ' '\n' | sed -n "s/^$FIELD=//p" | head -1)
    [ -n "$val" ] || { echo "ab.sh: variant '${labels[$i]}': no '$FIELD=' in speechc bench's output" >&2; exit 1; }
    echo "round $r ${labels[$i]} $val"
    echo "${labels[$i]} $val" >> "$raw"
  done
done

printf '%-12s %10s %21s %8s\n' variant median range "vs ${labels[0]}"
base=""
for l in "${labels[@]}"; do
  read -r med lo hi < <(awk -v l="$l" '$1 == l { print $2 }' "$raw" | sort -g |
    awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2), a[1], a[NR] }')
  [ -n "$base" ] || base=$med
  printf '%-12s %10.3f %10.3f-%-10.3f %7.3fx\n' "$l" "$med" "$lo" "$hi" "$(awk -v m="$med" -v b="$base" 'BEGIN { print (b > 0 ? m / b : 0) }')"
done
