#!/usr/bin/env bash
# peers_llamacpp_gdn.sh — speechc against llama.cpp on a random checkpoint
# with Qwen3.5-0.8B's exact text shapes (issue 16, "Speed"): decode tokens/s,
# GB/s and the fraction of the bandwidth probe, at bf16, q8_0 and q4_0.
#
# Preparation (each step skipped when its output is already there):
#   1. the checkpoint: bench/make_random_ckpt.py qwen3.5-0.8b into $CKPT
#      (dense qwen3_5_text, tensors model.*, tied embeddings, ~1.5 GB bf16);
#   2. speechc artifacts: `speechc build --cc gcc --weights BAND` per band;
#   3. llama.cpp's own converter (convert_hf_to_gguf.py; Qwen3.5 is its
#      Qwen3_5TextModel, arch qwen35) at bf16, then `llama-quantize --pure`
#      to q8_0 and q4_0 (every tensor in the band, as speechc does; the
#      default mix keeps the tied output table in q6_K / q8_0).
# Then (unless PREP_ONLY=1) ROUNDS interleaved rounds of
#   speechc bench ART --threads $THREADS --probe-mb 512
#   llama-bench -m GGUF -p 0 -n 64 -t $THREADS -r 1 -o json
# per band, and a table of medians as bench/side_by_side.sh prints it
# (llama.cpp's GB/s counts the bytes per step speechc's bench reports).
#
# The converter input beside the checkpoint ($PEERS/qwen3.5-0.8b-hf):
# the same weights (symlinked), the config with architectures
# [Qwen3_5ForCausalLM], and the minimal byte-level BPE tokenizer of
# bench/peers_llamacpp.sh (the converter pads the vocabulary to 248320;
# the pre-tokenizer is declared qwen2, the hash check cannot know a made-up
# tokenizer; llama-bench feeds token ids, so the tokenizer only has to
# load).  --no-mtp: the random checkpoint has no MTP block (the published
# one has one layer, which speechc does not run either).
#
# llama.cpp must be built already (bench/peers_llamacpp.sh builds it);
# everything outside the repository lives under $OUT and $PEERS.
#
#   bench/peers_llamacpp_gdn.sh                        # prepare, then 5 rounds
#   PREP_ONLY=1 bench/peers_llamacpp_gdn.sh            # preparation only
#   ROUNDS=5 THREADS=2 BANDS="bf16 q4_0" bench/peers_llamacpp_gdn.sh
#   CCS="gcc tcc" bench/peers_llamacpp_gdn.sh           # also the tcc builds
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SPEECHC=${SPEECHC:-$ROOT/build/speechc}
OUT=${OUT:-/tmp/speechc-bench}
PEERS=${PEERS:-/tmp/peers}
LLAMA=${LLAMA:-$PEERS/llama.cpp}
LLAMA_BENCH=${LLAMA_BENCH:-$LLAMA/build/bin/llama-bench}
LLAMA_QUANTIZE=${LLAMA_QUANTIZE:-$LLAMA/build/bin/llama-quantize}
PY=${PY:-/work/venv/bin/python}
CKPT=${CKPT:-$OUT/qwen3.5-0.8b}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-2}
STEPS=${STEPS:-32}
PROBE_MB=${PROBE_MB:-512}
NGEN=${NGEN:-64}
BANDS=${BANDS:-"bf16 q8_0 q4_0"}
CCS=${CCS:-gcc}
PREP_ONLY=${PREP_ONLY:-0}
NAME=qwen3.5-0.8b
GG=$PEERS/gguf
HF=$PEERS/$NAME-hf

[ -x "$SPEECHC" ] || { echo "peers_llamacpp_gdn.sh: no speechc at $SPEECHC (build it, or set SPEECHC)" >&2; exit 2; }
[ -d "$LLAMA" ] || { echo "peers_llamacpp_gdn.sh: no llama.cpp source at $LLAMA (see bench/peers_llamacpp.sh)" >&2; exit 2; }
[ -x "$LLAMA_BENCH" ] && [ -x "$LLAMA_QUANTIZE" ] ||
  { echo "peers_llamacpp_gdn.sh: build llama.cpp first (bench/peers_llamacpp.sh)" >&2; exit 2; }
"$PY" -c "import gguf" 2>/dev/null || "$PY" -m pip install -q "$LLAMA/gguf-py"
"$PY" -c "import torch, tokenizers" || { echo "peers_llamacpp_gdn.sh: $PY needs torch and tokenizers" >&2; exit 2; }

# 1. the checkpoint
mkdir -p "$OUT" "$GG" "$HF"
[ -f "$CKPT/model.safetensors" ] || "$PY" "$ROOT/bench/make_random_ckpt.py" "$NAME" "$CKPT"

# 2. speechc artifacts, one per compiler and band
for band in $BANDS; do
  for cc in $CCS; do
    so=$OUT/$NAME-${cc}_$band.so
    if [ ! -f "$so" ] || [ "$so" -ot "$CKPT/model.safetensors" ]; then
      "$SPEECHC" build "$CKPT" -o "$so" --cc "$cc" --weights "$band" --max-context 512 -q
    fi
  done
done

# 3. the converter input: same weights, config + architectures, a tokenizer
ln -sf "$CKPT/model.safetensors" "$HF/model.safetensors"
"$PY" - "$CKPT" "$HF" <<'EOF'
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
src, dst = sys.argv[1], sys.argv[2]
cfg = json.load(open(f"{src}/config.json"))
cfg.setdefault("architectures", ["Qwen3_5ForCausalLM"])
cfg.setdefault("torch_dtype", "bfloat16")
cfg.setdefault("bos_token_id", 256)
cfg.setdefault("eos_token_id", 256)
json.dump(cfg, open(f"{dst}/config.json", "w"), indent=1)
alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
vocab = {ch: i for i, ch in enumerate(alphabet)}
vocab["\u0120t"] = len(vocab)                       # "Ġt": one merge
tok = Tokenizer(models.BPE(vocab=vocab, merges=[("\u0120", "t")]))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.save(f"{dst}/tokenizer.json")
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 262144},
          open(f"{dst}/tokenizer_config.json", "w"))
EOF

# 4. convert (bf16) and quantize (--pure)
if [ ! -f "$GG/$NAME-bf16.gguf" ] || [ "$GG/$NAME-bf16.gguf" -ot "$CKPT/model.safetensors" ]; then
  (cd "$LLAMA" && "$PY" - "$HF" "$GG/$NAME-bf16.gguf" <<'EOF'
import sys
sys.path.insert(0, ".")
sys.path.insert(0, "gguf-py")
import conversion.base as base
# a made-up tokenizer has no known pre-tokenizer hash: say it is Qwen2's
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
import convert_hf_to_gguf
sys.argv = ["convert_hf_to_gguf.py", sys.argv[1], "--outtype", "bf16", "--no-mtp", "--outfile", sys.argv[2]]
convert_hf_to_gguf.main()
EOF
  ) 2>"$GG/$NAME-convert.log" || { tail -20 "$GG/$NAME-convert.log" >&2; exit 1; }
fi
for q in q8_0 q4_0; do
  case " $BANDS " in *" $q "*) ;; *) continue ;; esac
  if [ ! -f "$GG/$NAME-$q.gguf" ] || [ "$GG/$NAME-$q.gguf" -ot "$GG/$NAME-bf16.gguf" ]; then
    "$LLAMA_QUANTIZE" --pure "$GG/$NAME-bf16.gguf" "$GG/$NAME-$q.gguf" "$(echo $q | tr a-z A-Z)" \
      >"$GG/$NAME-quantize-$q.log" 2>&1 || { tail -20 "$GG/$NAME-quantize-$q.log" >&2; exit 1; }
  fi
done

if [ "$PREP_ONLY" = 1 ]; then
  echo "prepared: $CKPT, $OUT/$NAME-{$(echo $CCS | tr ' ' ,)}_{$(echo $BANDS | tr ' ' ,)}.so, $GG/$NAME-*.gguf"
  exit 0
fi

# 5. interleaved rounds: every engine once per band per round
LOG=$OUT/$NAME-side_by_side.log
: >"$LOG"
for round in $(seq "$ROUNDS"); do
  for band in $BANDS; do
    for cc in $CCS; do
      "$SPEECHC" bench "$OUT/$NAME-${cc}_$band.so" --steps "$STEPS" --threads "$THREADS" --probe-mb "$PROBE_MB" |
        sed -n "s/^bench: /speechc-$cc: round=$round /p" | tee -a "$LOG"
    done
    "$LLAMA_BENCH" -m "$GG/$NAME-$band.gguf" -p 0 -n "$NGEN" -t "$THREADS" -r 1 -o json 2>/dev/null |
      "$PY" -c 'import json, sys; r = json.load(sys.stdin)[0]; print("llamacpp: round=%s band=%s tok_s=%.3f" % (sys.argv[1], sys.argv[2], r["avg_ts"]))' \
        "$round" "$band" | tee -a "$LOG"
  done
done

# medians; llama.cpp's GB/s counts the same bytes per step as speechc's
# bench (same shapes, same band: the weights and the GDN state read and
# written) against the probe medians of that band; "w %probe" the weights
# alone; "paired" speechc's own figure against a probe pass before every 8
# steps (speechc bench's frac_paired, median over the rounds)
"$PY" - "$LOG" <<'EOF'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    eng, rest = line.split(":", 1)
    kv = dict(re.findall(r"(\w+)=(\S+)", rest))
    rows.setdefault((kv["band"], eng), []).append(kv)
med = lambda xs: statistics.median(float(x) for x in xs)
n = max(len(v) for v in rows.values())
engines = sorted({e for _, e in rows if e != "llamacpp"}) + ["llamacpp"]
print(f"Qwen3.5-0.8B shapes (random weights)   (medians of {n} rounds)")
print(f"{'band':5} {'engine':12} {'tok/s':>7} {'GB/s':>6} {'%probe':>7} {'w %probe':>8} {'paired':>7} {'vs llama.cpp':>12}")
for band in dict.fromkeys(b for b, _ in rows):
    sc = [r for e in engines if e != "llamacpp" for r in rows.get((band, e), [])]
    weight_bytes = float(sc[0]["bytes"]) if sc else float("nan")
    step_bytes = weight_bytes + float(sc[0].get("state_rw_bytes", 0)) if sc else float("nan")
    probe = med(r["probe_gbps"] for r in sc) if sc else float("nan")
    ref = med(r["tok_s"] for r in rows[(band, "llamacpp")]) if (band, "llamacpp") in rows else float("nan")
    for eng in engines:
        rs = rows.get((band, eng))
        if not rs:
            continue
        tok = med(r["tok_s"] for r in rs)
        gbs = tok * step_bytes / 1e9
        wfrac = 100 * tok * weight_bytes / 1e9 / probe
        pair = f"{100 * med(r['frac_paired'] for r in rs):6.1f}%" if "frac_paired" in rs[0] else f"{'-':>7}"
        print(f"{band:5} {eng:12} {tok:7.2f} {gbs:6.2f} {100 * gbs / probe:6.1f}% {wfrac:7.1f}% {pair} {tok / ref:11.2f}x")
EOF
