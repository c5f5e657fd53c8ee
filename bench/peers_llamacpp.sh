#!/usr/bin/env bash
# peers_llamacpp.sh — llama.cpp on the same random Qwen3-0.6B checkpoint as
# bench/run_qwen3_06b.sh: build it from source (CPU only, native, Release),
# convert the checkpoint with its own convert_hf_to_gguf.py at bf16,
# quantize to q8_0 and q4_0 with llama-quantize (--pure: every tensor in the
# band, as speechc does; the default mix would keep the tied output table in
# q6_K / q8_0), and run llama-bench -p 0 -n 64 at each band.
#
# Everything lives outside the repository, under $PEERS (default
# /tmp/peers); nothing here is ever committed.  The llama.cpp source is
# expected at $PEERS/llama.cpp (a checkout of ggml-org/llama.cpp, or the
# copy vendored in the llama-cpp-python sdist:
#   pip download llama-cpp-python==0.3.36 --no-binary :all: --no-deps
#   tar xzf llama_cpp_python-0.3.36.tar.gz
#   mv llama_cpp_python-0.3.36/vendor/llama.cpp $PEERS/llama.cpp).
#
# The random checkpoint has no tokenizer.  llama.cpp needs one in the GGUF,
# so this writes a minimal byte-level BPE (256 byte tokens and one merge;
# the converter pads the vocabulary to 151936 with [PAD] tokens) and tells
# the converter its pre-tokenizer is qwen2 (the hash check cannot know a
# made-up tokenizer).  llama-bench feeds token ids, so the tokenizer only
# has to load.
#
#   bench/peers_llamacpp.sh                 # everything
#   THREADS=2 REPS=5 bench/peers_llamacpp.sh
#
# Prints one `llamacpp:` line per band (median tokens/s of the repetitions).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${PEERS:-/tmp/peers}
LLAMA=${LLAMA:-$PEERS/llama.cpp}
PY=${PY:-/work/venv/bin/python}
CKPT=${CKPT:-/tmp/speechc-bench/qwen3-0.6b}   # shared with run_qwen3_06b.sh
THREADS=${THREADS:-2}
REPS=${REPS:-5}
BANDS=${BANDS:-"bf16 q8_0 q4_0"}
JOBS=${JOBS:-2}

[ -d "$LLAMA" ] || { echo "peers_llamacpp.sh: no llama.cpp source at $LLAMA (see the header)" >&2; exit 2; }

# 1. build: CPU only, -march=native through GGML_NATIVE, no network pieces.
# On a CPU with AMX, the native build's AMX matrix path (q8_0 / q4_0
# prompts) died with SIGILL in tileloadd on the one AMX machine we had (a
# KVM Xeon, 2026-12-06; speechc's own AMX tiles run there): without AMX
# (-mno-amx-*) is its best build that runs.  LLAMA_AMX=1 keeps it.
nflags=""
if [ "${LLAMA_AMX:-0}" != 1 ] && grep -qw amx_int8 /proc/cpuinfo 2>/dev/null; then
  nflags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  echo "peers_llamacpp.sh: this CPU has AMX; building llama.cpp without its AMX path (LLAMA_AMX=1 keeps it)" >&2
fi
if [ ! -x "$LLAMA/build/bin/llama-bench" ] || [ ! -x "$LLAMA/build/bin/llama-quantize" ]; then
  cmake -S "$LLAMA" -B "$LLAMA/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DCMAKE_C_FLAGS="$nflags" -DCMAKE_CXX_FLAGS="$nflags" \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >/dev/null
  cmake --build "$LLAMA/build" -j"$JOBS" --target llama-bench llama-quantize
fi

# 2. python deps of the converter: its own gguf-py, torch, transformers
"$PY" -c "import gguf" 2>/dev/null || "$PY" -m pip install -q "$LLAMA/gguf-py"
"$PY" -c "import sentencepiece" 2>/dev/null || "$PY" -m pip install -q sentencepiece
"$PY" -c "import torch, transformers, tokenizers" || { echo "peers_llamacpp.sh: $PY needs torch and transformers" >&2; exit 2; }

# 3. the checkpoint, as speechc's bench makes it
[ -f "$CKPT/model.safetensors" ] || "$PY" "$ROOT/bench/make_random_ckpt.py" qwen3-0.6b "$CKPT"

# 4. a converter input: the same weights (symlinked), config + architectures,
#    and the minimal tokenizer
HF=$PEERS/qwen3-0.6b-hf
mkdir -p "$HF"
ln -sf "$CKPT/model.safetensors" "$HF/model.safetensors"
"$PY" - "$CKPT" "$HF" <<'EOF'
import json, sys
from tokenizers import Tokenizer, models, pre_tokenizers, decoders
src, dst = sys.argv[1], sys.argv[2]
cfg = json.load(open(f"{src}/config.json"))
cfg.setdefault("architectures", ["Qwen3ForCausalLM"])
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
json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 40960},
          open(f"{dst}/tokenizer_config.json", "w"))
EOF

# 5. convert (bf16) and quantize
GG=$PEERS/gguf
mkdir -p "$GG"
if [ ! -f "$GG/qwen3-0.6b-bf16.gguf" ]; then
  (cd "$LLAMA" && "$PY" - "$HF" "$GG/qwen3-0.6b-bf16.gguf" <<'EOF'
import sys
sys.path.insert(0, ".")
sys.path.insert(0, "gguf-py")
import conversion.base as base
# a made-up tokenizer has no known pre-tokenizer hash: say it is Qwen2's
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
import convert_hf_to_gguf
sys.argv = ["convert_hf_to_gguf.py", sys.argv[1], "--outtype", "bf16", "--outfile", sys.argv[2]]
convert_hf_to_gguf.main()
EOF
  ) 2>"$GG/convert.log" || { tail -20 "$GG/convert.log" >&2; exit 1; }
fi
for q in q8_0 q4_0; do
  [ -f "$GG/qwen3-0.6b-$q.gguf" ] || "$LLAMA/build/bin/llama-quantize" --pure \
    "$GG/qwen3-0.6b-bf16.gguf" "$GG/qwen3-0.6b-$q.gguf" "$(echo $q | tr a-z A-Z)" >/dev/null
done

# 6. decode speed: 64 generated tokens, no prompt, $THREADS threads; the
#    median of the -r repetitions (llama-bench itself prints mean +- sd)
for band in $BANDS; do
  "$LLAMA/build/bin/llama-bench" -m "$GG/qwen3-0.6b-$band.gguf" -p 0 -n 64 -t "$THREADS" \
    -r "$REPS" -o json 2>"$GG/bench-$band.log" >"$GG/bench-$band.json" ||
    { tail -5 "$GG/bench-$band.log" >&2; exit 1; }
  "$PY" - "$GG/bench-$band.json" "$band" <<'EOF'
import json, statistics, sys
r = json.load(open(sys.argv[1]))[0]
s = r["samples_ts"]
print(f"llamacpp: band={sys.argv[2]} tok_s={statistics.median(s):.3f} mean={r['avg_ts']:.3f} "
      f"sd={r['stddev_ts']:.3f} threads={r['n_threads']} reps={len(s)} type={r['model_type']!r}")
EOF
done
