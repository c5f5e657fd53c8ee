#!/usr/bin/env bash
# peers_qwen3tts.sh — speechc against two Qwen3-TTS peers on the same random
# Qwen3-TTS-0.6B checkpoint, same thread count, language model only:
#   speechc   `speechc tts` (talker + code predictor; no codec decoder exists)
#   qwen3-tts gabriele-mastrapasqua/qwen3-tts, a C engine (bf16 mmapped, --int8,
#             --int4), built from a source tree you give it, never committed
#   torch     the official qwen-tts package on CPU (bf16 and f32)
#
# Everything third-party lives outside the repository:
#   QWEN3TTS_SRC  the qwen3-tts source tree (default /tmp/peers/qwen3-tts); it is
#                 built there with its own Makefile (`make blas SIMD=...`: gcc,
#                 OpenBLAS, and on x86 the best of its SIMD options this CPU
#                 runs, read from /proc/cpuinfo: avx512bf16, avx512vnni,
#                 avx512, else its AVX2+FMA baseline; QWEN3TTS_SIMD overrides;
#                 its `--caps` must then list the features, or the script stops)
#   PEERS         where the peer model directory goes (default /tmp/peers)
#   PY            a python with torch + qwen-tts 0.1.1 (default /work/venv/bin/python)
#
# The checkpoint is bench/make_random_ckpt.py qwen3-tts-0.6b (CKPT, default
# /tmp/tts06b when it exists, else WORK/tts06b, made on demand).  The C peer
# also needs a text tokenizer and a speech tokenizer (codec decoder) with
# weights: bench/make_peer_files.py writes random ones of the published shapes.
#
# Prompt: the same 12 text tokens for everyone, all text in the prompt
# (speechc --non-streaming; the C peer has only that layout; torch
# non_streaming_mode=True), the official sampling defaults (top-k 50,
# temperature 0.9, repetition penalty 1.05), seed 1.  The C peer decodes audio
# after generation (QWEN_NO_OVERLAP=1: no decoder thread competing with the
# LM for the cores); its decoder time is not counted.
#
# Per-frame times, each engine's own clocks:
#   talker_ms     talker decode steps + codec head + c0 sampling
#                 (qwen3-tts: "Talker step" + "Codec head+sampling")
#   predictor_ms  code predictor, 15 codes + codec-sum embedding
#                 (qwen3-tts: "Code Predictor" + "Embed")
#   frames/s      frames / (talker + predictor seconds); RTF = those seconds per
#                 second of audio (12.5 frames/s).  Prompt/prefill not counted.
# speechc_x = speechc (gcc) frames/s at the same band / the engine's frames/s,
# paired within a round, median over rounds (torch f32 against speechc f32).
# SUMMARY=FILE skips the runs and prints the table of an earlier raw file.
#
# Each run is one `flock /tmp/speechc-bench.lock` call; rounds interleave the
# engines; the table shows medians over ROUNDS.
#
#   bench/peers_qwen3tts.sh
#   ROUNDS=3 FRAMES=48 TORCH_FRAMES=8 THREADS=2 bench/peers_qwen3tts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SRC=${QWEN3TTS_SRC:-/tmp/peers/qwen3-tts}
PEERS=${PEERS:-/tmp/peers}
WORK=${WORK:-/tmp/speechc-bench}
PY=${PY:-/work/venv/bin/python}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
FRAMES=${FRAMES:-48}
TORCH_FRAMES=${TORCH_FRAMES:-8}
BANDS=${BANDS:-"bf16 q8_0 q4_0 f32"}
CCS=${CCS:-"gcc tcc"}
ENGINES=${ENGINES:-"speechc qwen3-tts torch"}
LOCK=${LOCK:-/tmp/speechc-bench.lock}
bin=$ROOT/build/speechc

if [ -z "${CKPT:-}" ]; then
  if [ -f /tmp/tts06b/model.safetensors ]; then CKPT=/tmp/tts06b; else CKPT=$WORK/tts06b; fi
fi
[ -x "$bin" ] || { echo "peers_qwen3tts.sh: build speechc first ($bin)" >&2; exit 2; }
mkdir -p "$WORK" "$PEERS"
[ -f "$CKPT/model.safetensors" ] || "$PY" bench/make_random_ckpt.py qwen3-tts-0.6b "$CKPT"

has() { case " $ENGINES " in *" $1 "*) return 0;; esac; return 1; }

# 1. the C peer: build (not under the lock) and its model directory
if has qwen3-tts; then
  [ -f "$SRC/qwen_tts.c" ] || { echo "peers_qwen3tts.sh: no qwen3-tts source at $SRC" >&2; exit 2; }
  # the peer at its best on this CPU: its fastest SIMD build that runs here
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  hasf() { for f in "$@"; do case "$flags" in *" $f "*) ;; *) return 1;; esac; done; }
  simd=${QWEN3TTS_SIMD:-}
  if [ -z "$simd" ]; then
    if hasf avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16; then simd=avx512bf16
    elif hasf avx512f avx512bw avx512vl avx512dq avx512_vnni; then simd=avx512vnni
    elif hasf avx512f avx512bw avx512vl; then simd=avx512
    else simd=auto; fi
  fi
  # rebuilt when the SIMD option changes (the Makefile does not track it)
  if [ ! -x "$SRC/qwen_tts" ] || [ "$(cat "$SRC/.speechc-simd" 2>/dev/null)" != "$simd" ]; then
    make -C "$SRC" clean >/dev/null 2>&1 || true
    make -C "$SRC" blas SIMD="$simd" -j2 >"$PEERS/qwen3-tts-build.log" 2>&1 ||
      { echo "peers_qwen3tts.sh: qwen3-tts build (SIMD=$simd) failed, see $PEERS/qwen3-tts-build.log" >&2; exit 1; }
    echo "$simd" >"$SRC/.speechc-simd"
  fi
  caps=$("$SRC/qwen_tts" --caps 2>&1 || true)
  need=""
  case $simd in
    avx512bf16) need="avx512vnni avx512bf16" ;;
    avx512vnni) need="avx512vnni" ;;
    avx512) need="avx512f" ;;
  esac
  for f in $need; do
    echo "$caps" | grep -q "runtime cpu:.* $f" ||
      { echo "peers_qwen3tts.sh: qwen3-tts SIMD=$simd: its --caps does not list $f at run time" >&2; exit 1; }
  done
  echo "qwen3-tts: built with SIMD=$simd ($(echo "$caps" | sed -n 's/^ *matvec + attn: *//p'))" >&2
fi
MDIR=$PEERS/qwen3tts-06b
if has qwen3-tts || has torch; then
  # its log only on failure (it needs numpy and qwen-tts 0.1.1 in $PY)
  peer_log=$("$PY" bench/make_peer_files.py "$CKPT" "$MDIR" 2>&1) ||
    { echo "peers_qwen3tts.sh: bench/make_peer_files.py failed (with $PY):" >&2; echo "$peer_log" | tail -5 >&2; exit 1; }
  echo "$peer_log" | tail -1
fi

# 2. speechc artifacts, one per cc and band (not under the lock)
if has speechc; then
  for band in $BANDS; do
    for cc in $CCS; do
      so=$WORK/peers-tts-$cc-$band.so
      [ -f "$so" ] && [ "$so" -nt "$bin" ] || "$bin" build "$CKPT" -o "$so" --cc "$cc" --weights "$band" --max-context 512 -q
    done
  done
fi

# "<|im_start|>assistant\n" + 12 text tokens + "<|im_end|>\n<|im_start|>assistant\n"
ids=151644,77091,198,9707,11,1879,1246,525,498,3351,30,1096,374,264,1273,151645,198,151644,77091,198
res=${SUMMARY:-$WORK/peers_qwen3tts.$$.txt}
[ -n "${SUMMARY:-}" ] && ROUNDS=0 || : >"$res"
locked() { flock "$LOCK" "$@"; }

run_speechc() { # cc band
  local log line
  log=$(locked "$bin" tts "$WORK/peers-tts-$1-$2.so" --text-ids "$ids" --speaker random_speaker \
          --language english --non-streaming --max-frames "$FRAMES" --seed 1 -o /dev/null \
          --threads "$THREADS" 2>&1 | tr '\r' '\n')
  line=$(grep 'frames/s' <<<"$log") || { echo "$log" >&2; return 1; }
  sed -E "s/.* ([0-9]+) frames in .*talker ([0-9.]+) ms.*predictor ([0-9.]+) ms.*/speechc-$1 $2 \1 \2 \3/" <<<"$line" >>"$res"
}

run_peer() { # band flag
  local log fr ts cp em hd
  log=$(cd "$SRC" && locked env OPENBLAS_NUM_THREADS="$THREADS" QWEN_NO_OVERLAP=1 ./qwen_tts -d "$MDIR" \
          -t "Hello world!" -l English -j "$THREADS" --seed 1 -m "$FRAMES" $2 \
          -o "$WORK/peers-qwen3tts.wav" 2>&1 | tr '\r' '\n')
  fr=$(sed -nE 's/.*Generated ([0-9]+) frames.*/\1/p' <<<"$log")
  ts=$(sed -nE 's/.*Talker step: ([0-9]+) ms.*/\1/p' <<<"$log")
  cp=$(sed -nE 's/.*Code Predictor: ([0-9]+) ms.*/\1/p' <<<"$log")
  em=$(sed -nE 's/.*Embed: ([0-9]+) ms.*/\1/p' <<<"$log")
  hd=$(sed -nE 's/.*Codec head\+sampling: ([0-9]+) ms.*/\1/p' <<<"$log")
  [ -n "$fr" ] && [ "$fr" -gt 0 ] && [ -n "$ts" ] && [ -n "$cp" ] && [ -n "$em" ] && [ -n "$hd" ] ||
    { echo "$log" | tail -20 >&2; echo "peers_qwen3tts.sh: qwen3-tts $1 gave no timings" >&2; return 1; }
  awk -v b="$1" -v f="$fr" -v t="$ts" -v c="$cp" -v e="$em" -v h="$hd" \
    'BEGIN { printf "qwen3-tts %s %d %.2f %.2f\n", b, f, (t + h) / f, (c + e) / f }' >>"$res"
}

run_torch() { # band
  local line
  line=$(locked "$PY" bench/peer_torch_tts.py "$MDIR" --dtype "$1" --frames "$TORCH_FRAMES" \
           --threads "$THREADS" --seed 1 2>/dev/null | grep '^torch:') ||
    { echo "peers_qwen3tts.sh: torch $1 failed" >&2; return 1; }
  sed -E 's/torch: dtype ([a-z0-9_]+) frames ([0-9]+) .*talker_ms ([0-9.]+) predictor_ms ([0-9.]+).*/torch \1 \2 \3 \4/' \
    <<<"$line" >>"$res"
}

peer_flag() { case $1 in bf16) echo "";; q8_0) echo "--int8";; q4_0) echo "--int4";; *) return 1;; esac; }

for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  for band in $BANDS; do
    if has speechc; then for cc in $CCS; do run_speechc "$cc" "$band"; done; fi
    if has qwen3-tts && flag=$(peer_flag "$band"); then run_peer "$band" "$flag"; fi
    if has torch && { [ "$band" = bf16 ] || [ "$band" = f32 ]; }; then run_torch "$band"; fi
  done
done

[ -n "${SUMMARY:-}" ] && echo "# summary of $res" ||
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) speechc $(git -C "$ROOT" rev-parse --short HEAD), threads $THREADS," \
       "$ROUNDS rounds (medians), frames: speechc/qwen3-tts $FRAMES, torch $TORCH_FRAMES; raw: $res"
python3 - "$res" <<'EOF'
import statistics as st, sys
rows = {}                      # (engine, band) -> one (frames, talker, pred) per round, in order
for line in open(sys.argv[1]):
    eng, band, fr, t, p = line.split()
    rows.setdefault((eng, band), []).append((int(fr), float(t), float(p)))
fps = {k: [1e3 / (t + p) for _, t, p in v] for k, v in rows.items()}
print(f"{'engine':<12} {'band':<5} {'frames':>6} {'talker_ms':>10} {'pred_ms':>9} "
      f"{'frames/s':>9} {'RTF':>6} {'speechc_x':>9}")
order = {"bf16": 0, "q8_0": 1, "q4_0": 2, "f32": 3}
for (eng, band), v in sorted(rows.items(), key=lambda kv: (order.get(kv[0][1], 9), kv[0][0])):
    t, p = st.median(x[1] for x in v), st.median(x[2] for x in v)
    f = st.median(fps[(eng, band)])
    ref = fps.get(("speechc-gcc", band))
    # speechc_x: speechc (gcc) frames/s over this engine's, paired within each
    # round (the runs next to each other), median over the rounds
    ratio = f"{st.median(r / e for r, e in zip(ref, fps[(eng, band)])):.2f}" if ref else "-"
    frames = "/".join(str(x[0]) for x in v) if len({x[0] for x in v}) > 1 else str(v[0][0])
    print(f"{eng:<12} {band:<5} {frames:>6} {t:>10.1f} {p:>9.1f} {f:>9.2f} {12.5 / f:>6.2f} {ratio:>9}")
EOF
