#!/usr/bin/env bash
# tts_pipeline.sh — speech out end to end (issue 14, section 3): `speechc tts`
# on a random Qwen3-TTS-0.6B with its speech tokenizer (build/make_random_ckpt
# qwen3-tts-0.6b --with-codec), gcc artifacts, talker in each band of BANDS and
# the codec decoder in f32 (as `speechc build` makes it), writing a WAV as it
# generates.  Rounds interleave the bands; each run is one process under
# `flock LOCK`; the table shows medians over ROUNDS of what `speechc tts`
# prints: time to first audio, and the real-time factors of talker,
# predictor, decoder (each timed on its own thread) and the whole pipeline
# (the wall clock, the decoder overlapped with generation; prompt excluded;
# with it, in the last column).  Same 12-token prompt as bench/peers_qwen3tts.sh, streaming
# text (the default), official sampling defaults, seed 1, FRAMES frames (no
# EOS is expected from random weights; the frames column says if one came).
#
# PEER=1 also runs the pure-C qwen3-tts engine's whole pipeline
# (gabriele-mastrapasqua/qwen3-tts, source tree QWEN3TTS_SRC, built as
# bench/codec_side_by_side.sh builds it) next to each band, on PEER_MODEL (a
# directory both engines load, e.g. bench/codec_side_by_side.sh's peer-model:
# CKPT=PEER_MODEL builds speechc from the same talker and decoder weights): its bf16 talker next to f32, --int8 next to
# q8_0, --int4 next to q4_0, same text ("Hello world!", 12 tokens, its only
# layout: all text in the prompt, so use NONSTREAM=1 to give speechc
# --non-streaming), -m FRAMES, its default decoder thread (the decoder runs
# while the LM generates, sharing the cores; its whole RTF is then less than
# the sum of its parts).  Its own printout gives the columns: Talker step +
# Codec head, Code Predictor + Embed, Speech decoder total, TTFA (first
# 10-frame chunk) and RTF (prompt included, so both "whole" columns).
#
# CODEC_WEIGHTS=bf16 builds the decoder in bf16 (`--codec-weights bf16`:
# bf16 activations on AMX or AVX512-BF16 where the CPU has them).
#
# VARIANTS="NAME:FLAGS ..." runs each band once per variant with FLAGS added
# to `speechc tts` (commas for spaces), rows named BAND.NAME; e.g. the decoder
# thread's kernel threads against the old sequential order:
#   VARIANTS="seq:--sequential d2: d1:--decoder-threads,1 t1d1:--threads,1,--decoder-threads,1"
#
#   ROUNDS=5 FRAMES=100 THREADS=2 BANDS="f32 q8_0 q4_0" bench/tts_pipeline.sh
#   PEER=1 NONSTREAM=1 CKPT=/tmp/peers/pub BANDS="q8_0 q4_0" bench/tts_pipeline.sh
#   SUMMARY="RAW1 RAW2" MAX_OTHER=0.1 bench/tts_pipeline.sh   # pooled, quiet runs only
# Each run also records the CPU other processes took while it ran (in cores,
# from /proc/stat less the run's own user+sys), to spot and leave out noisy runs.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=${WORK:-/tmp/speechc-codec-bench}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
FRAMES=${FRAMES:-100}
BANDS=${BANDS:-"f32 q8_0 q4_0"}
LOCK=${LOCK:-/tmp/speechc-bench.lock}
SPEECHC=${SPEECHC:-$PWD/build/speechc}
CKPT=${CKPT:-$WORK/tts06b}
SRC=${QWEN3TTS_SRC:-/tmp/peers/qwen3-tts}
PEER_MODEL=${PEER_MODEL:-$CKPT}
tag=$(basename "$CKPT")
CODEC_WEIGHTS=${CODEC_WEIGHTS:-f32}   # the decoder's band (--codec-weights)
ctag=; [ "$CODEC_WEIGHTS" = f32 ] || ctag=-codec-$CODEC_WEIGHTS

# summary RAWFILE...: medians per band over the runs of the files during which
# other processes took at most MAX_OTHER cores (default: all runs)
summary() {
  python3 - "${MAX_OTHER:-1e9}" "$@" <<'EOF'
import statistics as st, sys
rows, dropped, max_other = {}, 0, float(sys.argv[1])
for raw in sys.argv[2:]:
    for line in open(raw):
        if line.startswith("#"):
            continue
        band, *v = line.split()
        if float(v[-1]) > max_other:
            dropped += 1
            continue
        rows.setdefault(band, []).append([float(x) for x in v])
if dropped:
    print(f"# {dropped} runs left out: other processes took more than {max_other} cores during them")
cols = ["frames", "first audio s", "talker", "predictor", "decoder", "decoder ms/frame", "whole", "whole+prompt",
        "others cores"]
print(f"{'band':<15} {'n':>2} " + " ".join(f"{c:>16}" for c in cols))
for band, v in rows.items():
    med = [st.median(x[i] for x in v) for i in range(len(cols))]
    print(f"{band:<15} {len(v):>2} " + " ".join(f"{m:>16.3f}" if i else f"{m:>16.0f}" for i, m in enumerate(med)))
print("# talker, predictor, decoder, whole: real-time factors (seconds per second of audio), medians")
EOF
}
# shellcheck disable=SC2086  # SUMMARY is a list of files
if [ -n "${SUMMARY:-}" ]; then summary $SUMMARY; exit 0; fi

mkdir -p "$WORK"
[ -f "$CKPT/speech_tokenizer/model.safetensors" ] || build/make_random_ckpt qwen3-tts-0.6b "$CKPT" --with-codec
for band in $BANDS; do
  so=$WORK/tts-$tag-gcc-$band$ctag.so
  [ -f "$so" ] && [ "$so" -nt "$SPEECHC" ] ||
    "$SPEECHC" build "$CKPT" -o "$so" --cc gcc --weights "$band" --codec-weights "$CODEC_WEIGHTS" \
      --max-context 512 -q
done
# "<|im_start|>assistant\n" + 12 text tokens + "<|im_end|>\n<|im_start|>assistant\n"
ids=151644,77091,198,9707,11,1879,1246,525,498,3351,30,1096,374,264,1273,151645,198,151644,77091,198
# the C peer's whole pipeline next to band $1; appends a line like speechc's
run_peer() {
  local flag name log b0 b1 t0 t1 own
  case $1 in f32) flag=; name=qwen3-tts-bf16;; q8_0) flag=--int8; name=qwen3-tts-int8;;
             q4_0) flag=--int4; name=qwen3-tts-int4;; *) return 0;; esac
  b0=$(busy); t0=$(date +%s.%N)
  log=$(cd "$SRC" && flock "$LOCK" /usr/bin/time -f 'cpu %U %S' ./qwen_tts -d "$PEER_MODEL" -t "Hello world!" \
          -l English -j "$THREADS" --seed 1 -m "$FRAMES" $flag -o "$WORK/peer-tts.wav" 2>&1 | tr '\r' '\n')
  b1=$(busy); t1=$(date +%s.%N)
  own=$(sed -nE 's/^cpu ([0-9.]+) ([0-9.]+)$/\1 \2/p' <<<"$log" | awk '{ print $1 + $2 }')
  awk -v n="$name" -v b="$((b1 - b0))" -v hz="$hz" -v own="$own" -v t0="$t0" -v t1="$t1" '
    /Generated [0-9]+ frames/ { match($0, /Generated [0-9]+/); fr = substr($0, RSTART + 10, RLENGTH - 10) }
    /Talker step:/ { split($0, a, /[:(]/); ts = a[2] + 0; cp = a[4] + 0 }
    /Codec head\+sampling:/ { split($0, a, /:/); em = a[2] + 0; hd = a[3] + 0 }
    /Speech decoder:/ { split($0, a, /:/); dec = a[2] + 0 }
    /^Audio:/ { match($0, /RTF [0-9.]+/); rtf = substr($0, RSTART + 4, RLENGTH - 4) }
    /TTFA:/ { split($0, a, /:/); ttfa = a[2] / 1000 }
    END {
      if (!fr || !rtf) { print "tts_pipeline.sh: no timings from qwen3-tts" > "/dev/stderr"; exit 1 }
      au = fr / 12.5; o = (b / hz - own) / (t1 - t0)
      printf "%s %d %.3f %.3f %.3f %.3f %.1f %s %s %.2f\n", n, fr, ttfa, (ts + hd) / 1e3 / au,
             (cp + em) / 1e3 / au, dec / 1e3 / au, dec / fr, rtf, rtf, o < 0 ? 0 : o
    }' <<<"$log" >>"$res"
}
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }   # jiffies
hz=$(getconf CLK_TCK)
res=$WORK/tts_pipeline.$(date -u +%Y%m%dT%H%M).txt
echo "# $(date -u +%Y-%m-%dT%H:%MZ) threads $THREADS, $FRAMES frames, $ROUNDS rounds; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')" >"$res"
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  for band in $BANDS; do
   for variant in ${VARIANTS:-:}; do
    name=$band${VARIANTS:+.${variant%%:*}}
    IFS=, read -r -a flags <<<"${variant#*:}"
    b0=$(busy); t0=$(date +%s.%N)
    log=$(flock "$LOCK" /usr/bin/time -f 'cpu %U %S' "$SPEECHC" tts "$WORK/tts-$tag-gcc-$band$ctag.so" --text-ids "$ids" \
            --speaker random_speaker --language english --max-frames "$FRAMES" --seed 1 -o "$WORK/tts.wav" \
            --threads "$THREADS" ${NONSTREAM:+--non-streaming} "${flags[@]}" 2>&1 | tr '\r' '\n')
    b1=$(busy); t1=$(date +%s.%N)
    line=$(grep 'whole pipeline' <<<"$log") || { echo "$log" | tail -5 >&2; exit 1; }
    fr=$(sed -nE 's/.* ([0-9]+) frames in .*/\1/p' <<<"$log")
    own=$(sed -nE 's/^cpu ([0-9.]+) ([0-9.]+)$/\1 \2/p' <<<"$log" | awk '{ print $1 + $2 }')
    # other processes' CPU (cores) averaged over the run, loading included
    other=$(awk -v b="$((b1 - b0))" -v hz="$hz" -v own="$own" -v t0="$t0" -v t1="$t1" \
              'BEGIN { o = (b / hz - own) / (t1 - t0); printf "%.2f", o < 0 ? 0 : o }')
    sed -E "s/.*first audio ([0-9.]+) s; .*talker ([0-9.]+), predictor ([0-9.]+), decoder ([0-9.]+) \(([0-9.]+) ms\/frame\); whole pipeline real-time factor ([0-9.]+) \(prompt included: ([0-9.]+)\).*/$name $fr \1 \2 \3 \4 \5 \6 \7 $other/" \
      <<<"$line" >>"$res"
   done
    if [ "${PEER:-0}" = 1 ]; then run_peer "$band"; fi
  done
done
echo "# raw: $res"
summary "$res"
