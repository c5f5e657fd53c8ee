#!/usr/bin/env bash
# codec_side_by_side.sh — the 12 Hz codec decoder alone (codes -> 24 kHz PCM),
# published shapes, f32, same codes and thread count for every engine, runs
# interleaved round by round (issue 14, section 3):
#
#   speechc    `speechc decode`, libtcc and gcc artifacts, --prefill-chunk 1 and
#              8 (frames per call), on CKPT (build/make_random_ckpt codec-12hz);
#              a config ending in -bf16 (gcc-pc8-bf16) is built --weights bf16
#              (AMX tiles where the CPU has them);
#              and the gcc, 8-frame artifact of PUB (the bridge: same weights as
#              the two peers)
#   qwen3-tts  gabriele-mastrapasqua/qwen3-tts, a C engine: its one-shot decode
#              (all frames in one forward) and its exact streaming decode, 8
#              frames per call, timed by bench/peer_qwen3tts_decode.c linked
#              against its objects; built from a source tree you give it with
#              its best SIMD level for this CPU (`make blas SIMD=avx512bf16` when
#              /proc/cpuinfo has avx512_bf16, else its AVX2 default), never
#              committed
#   torch      the official qwen-tts 0.1.1 Qwen3TTSTokenizerV2Model.decode,
#              torch CPU (bench/peer_torch_codec.py)
#
# PUB is an official random decoder of the published shapes
# (tests/parity/make_codec.py --published, the codec_pub_layout directory);
# the C peer needs a whole Qwen3-TTS directory to load, so PEER_MODEL is a
# random Qwen3-TTS-0.6B (build/make_random_ckpt + bench/make_peer_files.py)
# whose speech_tokenizer/ links to PUB.
#
# Each run is one process, under `flock LOCK`; model loading is not timed
# (every engine prints its own decode time).  Per run the script also records
# the load average and the CPU time other processes took while it ran
# (/proc/stat busy time less the run's own user+sys, in cores), so noisy runs
# can be seen.  The table shows medians over ROUNDS.  CHECK=1 also writes
# every engine's PCM on PUB once and prints its difference from torch's.
#
#   ROUNDS=5 THREADS=2 FRAMES=250 bench/codec_side_by_side.sh
#   SUMMARY="RAW1 RAW2" MAX_OTHER=0.1 bench/codec_side_by_side.sh
#        # re-print the table of earlier raw files, pooled, leaving out the runs
#        # during which other processes took more than 0.1 core
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${WORK:-/tmp/speechc-codec-bench}
PY=${PY:-/work/venv/bin/python}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-5}
FRAMES=${FRAMES:-250}
SRC=${QWEN3TTS_SRC:-/tmp/peers/qwen3-tts}
PUB=${PUB:-/work/codec_pub/codec_pub_layout}
CKPT=${CKPT:-$WORK/codec}
PEER_MODEL=${PEER_MODEL:-$WORK/peer-model}
ENGINES=${ENGINES:-"speechc qwen3-tts torch"}
CONFIGS=${CONFIGS:-"gcc-pc8 tcc-pc8 gcc-pc1 tcc-pc1"}
LOCK=${LOCK:-/tmp/speechc-bench.lock}
SPEECHC=${SPEECHC:-$ROOT/build/speechc}
GMAC=$(python3 bench/codec_macs.py | awk '$1 == "total" { print $2 }')   # per second of audio
PEAK=${PEAK_GFLOPS:-}    # f32 FMA peak of THREADS cores (bench/fma_peak.c), for "% of peak"
has() { case " $ENGINES " in *" $1 "*) return 0;; esac; return 1; }

# summary RAWFILE...: medians per engine and config over every run of the
# files whose other_cores <= MAX_OTHER (default: all runs); n counts them.
summary() {
  python3 - "$GMAC" "${PEAK:-0}" "${MAX_OTHER:-1e9}" "$@" <<'EOF'
import statistics as st, sys
gmac, peak, max_other = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
rows, dropped = {}, 0
for raw in sys.argv[4:]:
    for line in open(raw):
        if line.startswith("#"):
            continue
        eng, cfg, fps, rtf, first, other, load = line.split()
        if float(other) > max_other:
            dropped += 1
            continue
        rows.setdefault((eng, cfg), []).append((float(fps), float(rtf), float(first), float(other), float(load)))
if dropped:
    print(f"# {dropped} runs left out: other processes took more than {max_other} cores during them")
print(f"{'engine':<10} {'config':<22} {'n':>2} {'frames/s':>9} {'RTF':>7} {'RTF range':>13} "
      f"{'first audio s':>13} {'GFLOP/s':>8} {'% peak':>7} {'others cores':>12}")
for (eng, cfg), v in rows.items():
    rtf = st.median(x[1] for x in v)
    gf = 2 * gmac / rtf
    pk = f"{100 * gf / peak:.1f}" if peak else "-"
    print(f"{eng:<10} {cfg:<22} {len(v):>2} {st.median(x[0] for x in v):>9.1f} {rtf:>7.3f} "
          f"{min(x[1] for x in v):>6.3f}-{max(x[1] for x in v):<6.3f} {st.median(x[2] for x in v):>13.3f} "
          f"{gf:>8.1f} {pk:>7} {st.median(x[3] for x in v):>12.2f}")
print(f"# GFLOP/s = 2 x {gmac:.3f} GMAC per second of audio (bench/codec_macs.py) / RTF"
      + (f"; % peak of {peak:.0f} GFLOP/s" if peak else ""))
EOF
}
# shellcheck disable=SC2086  # SUMMARY is a list of files
if [ -n "${SUMMARY:-}" ]; then summary $SUMMARY; exit 0; fi

mkdir -p "$WORK"
[ -x "$SPEECHC" ] || { echo "codec_side_by_side.sh: build speechc first ($SPEECHC)" >&2; exit 2; }
[ -f "$PUB/model.safetensors" ] || "$PY" tests/parity/make_codec.py --published "$(dirname "$PUB")"

# 1. the codes: FRAMES frames of 16 codes, uniform in [0, 2048), fixed seed
codes=$WORK/codes$FRAMES.i32
python3 -c "
import random, struct, sys
r = random.Random(14); n = int(sys.argv[2])
open(sys.argv[1], 'wb').write(struct.pack('<%di' % (16 * n), *(r.randrange(2048) for _ in range(16 * n))))
" "$codes" "$FRAMES"

# 2. speechc artifacts (not under the lock)
if has speechc; then
  [ -f "$CKPT/model.safetensors" ] || build/make_random_ckpt codec-12hz "$CKPT" --dtype f32
  for cfg in $CONFIGS; do
    so=$WORK/codec-$cfg.so
    IFS=- read -r cc pc band <<<"$cfg"
    [ -f "$so" ] && [ "$so" -nt "$SPEECHC" ] ||
      "$SPEECHC" build "$CKPT" -o "$so" --cc "$cc" --prefill-chunk "${pc#pc}" --weights "${band:-f32}" -q
  done
  so=$WORK/pub-gcc-pc8.so
  [ -f "$so" ] && [ "$so" -nt "$SPEECHC" ] || "$SPEECHC" build "$PUB" -o "$so" --cc gcc --prefill-chunk 8 -q
fi

# 3. the C peer, its model directory and the timing harness
peer=$WORK/peer_qwen3tts_decode
if has qwen3-tts; then
  [ -f "$SRC/qwen_tts.c" ] || { echo "codec_side_by_side.sh: no qwen3-tts source at $SRC" >&2; exit 2; }
  simd=; grep -qw avx512_bf16 /proc/cpuinfo && simd=SIMD=avx512bf16
  if [ ! -x "$SRC/qwen_tts" ]; then
    make -C "$SRC" blas $simd -j2 >"$WORK/qwen3-tts-build.log" 2>&1 ||
      { echo "codec_side_by_side.sh: qwen3-tts build failed, see $WORK/qwen3-tts-build.log" >&2; exit 1; }
  fi
  objs=()
  for o in "$SRC"/*.o; do [ "${o##*/}" = main.o ] || objs+=("$o"); done
  gcc -O2 -I"$SRC" -I"$SRC/vendor" -I"$SRC/third_party/ingot/include" bench/peer_qwen3tts_decode.c \
    "${objs[@]}" "$SRC/vendor/lz4.o" "$SRC/third_party/ingot/libingot.a" -lopenblas -lm -lpthread -o "$peer"
  if [ ! -d "$PEER_MODEL/speech_tokenizer" ]; then
    [ -f "$WORK/tts06b/model.safetensors" ] || build/make_random_ckpt qwen3-tts-0.6b "$WORK/tts06b"
    "$PY" bench/make_peer_files.py "$WORK/tts06b" "$PEER_MODEL" 2>/dev/null | tail -1
    # hard links, not symlinks: speechc refuses a checkpoint whose files lead
    # out of its directory, and bench/tts_pipeline.sh builds speechc from this one
    ln -f "$(readlink -f "$PEER_MODEL/model.safetensors")" "$PEER_MODEL/model.safetensors"
    rm -rf "$PEER_MODEL/speech_tokenizer" && mkdir -p "$PEER_MODEL/speech_tokenizer"
    ln "$PUB/config.json" "$PUB/model.safetensors" "$PEER_MODEL/speech_tokenizer/"
  fi
fi

# 4. one timed run: "ENGINE CONFIG frames/s RTF first_audio_s other_cores load1" to $res
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }   # user nice system irq softirq, jiffies
hz=$(getconf CLK_TCK)
timed() { # engine config command...
  local eng=$1 cfg=$2 log b0 b1 own load line fps rtf first
  shift 2
  load=$(cut -d' ' -f1 /proc/loadavg)
  b0=$(busy)
  log=$(flock "$LOCK" /usr/bin/time -f 'cpu %U %S' "$@" 2>&1 | tr '\r' '\n')
  b1=$(busy)
  own=$(sed -nE 's/^cpu ([0-9.]+) ([0-9.]+)$/\1 \2/p' <<<"$log" | awk '{ print $1 + $2 }')
  line=$(grep -E 'frames/s' <<<"$log" | tail -1) || { echo "$log" | tail -20 >&2; return 1; }
  fps=$(sed -E 's/.*[(; ]([0-9.]+) frames\/s.*/\1/' <<<"$line")
  rtf=$(sed -E 's/.*real-time factor ([0-9.]+).*/\1/' <<<"$line")
  first=$(sed -nE 's/.*first audio after ([0-9.]+) s.*/\1/p' <<<"$line")
  [ -n "$first" ] || first=$(sed -E 's/.* in ([0-9.]+) s.*/\1/' <<<"$line")   # one-shot: all at once
  # other processes' CPU while this ran, averaged over the run's decode time
  awk -v e="$eng" -v c="$cfg" -v f="$fps" -v r="$rtf" -v t="$first" -v b="$((b1 - b0))" -v hz="$hz" \
      -v own="$own" -v l="$load" -v fr="$FRAMES" \
      'BEGIN { wall = fr / f; o = (b / hz - own) / wall; if (o < 0) o = 0;
               printf "%s %s %s %s %s %.2f %s\n", e, c, f, r, t, o, l }' >>"$res"
}
# (other_cores divides the foreign CPU seconds over the whole process lifetime,
# loading included, by the decode time alone: an upper bound, good for spotting
# noisy runs, not for correcting them.)

res=$WORK/codec_side_by_side.$(date -u +%Y%m%dT%H%M).txt
{
  echo "# $(date -u +%Y-%m-%dT%H:%MZ) speechc $(git rev-parse --short HEAD), threads $THREADS, $FRAMES frames,"
  echo "# $ROUNDS rounds; $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cpus"
} >"$res"
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  if has speechc; then
    for cfg in $CONFIGS; do
      timed speechc "$cfg" "$SPEECHC" decode "$WORK/codec-$cfg.so" "$codes" -o "$WORK/out.wav" --threads "$THREADS"
    done
    timed speechc gcc-pc8-pubweights "$SPEECHC" decode "$WORK/pub-gcc-pc8.so" "$codes" -o "$WORK/out.wav" \
      --threads "$THREADS"
  fi
  if has qwen3-tts; then
    timed qwen3-tts one-shot "$peer" "$PEER_MODEL" "$codes" "$THREADS" 0
    timed qwen3-tts stream-8 "$peer" "$PEER_MODEL" "$codes" "$THREADS" 8
  fi
  if has torch; then
    timed torch decode "$PY" bench/peer_torch_codec.py "$PUB" "$codes" --threads "$THREADS"
  fi
done
echo "# raw: $res"
summary "$res"

if [ "${CHECK:-0}" = 1 ]; then
  "$SPEECHC" decode "$WORK/pub-gcc-pc8.so" "$codes" -o "$WORK/check-speechc.raw" --f32 -q --threads "$THREADS"
  "$peer" "$PEER_MODEL" "$codes" "$THREADS" 0 "$WORK/check-peer.f32" >/dev/null 2>&1
  "$peer" "$PEER_MODEL" "$codes" "$THREADS" 8 "$WORK/check-peer-s8.f32" >/dev/null 2>&1
  "$PY" bench/peer_torch_codec.py "$PUB" "$codes" --threads "$THREADS" --out "$WORK/check-torch.f32" >/dev/null 2>&1
  "$PY" - "$WORK" <<'EOF'
import sys, numpy as np
w = sys.argv[1]
ref = np.fromfile(f"{w}/check-torch.f32", "<f4")
for name in ("check-speechc.raw", "check-peer.f32", "check-peer-s8.f32"):
    x = np.fromfile(f"{w}/{name}", "<f4")
    d = np.abs(x[: ref.size] - ref) if x.size >= ref.size else np.full(1, np.inf)
    print(f"check: {name:<20} vs torch: {x.size} samples, max abs diff {d.max():.3g}, "
          f"RMS diff {np.sqrt((d ** 2).mean()):.3g} (torch RMS {np.sqrt((ref ** 2).mean()):.3g})")
EOF
fi
