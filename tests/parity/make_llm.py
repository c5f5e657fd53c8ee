#!/usr/bin/env python3
"""Generate tiny random HF checkpoints + reference traces for LLM parity tests.

Run:  /work/venv/bin/python tests/parity/make_llm.py

For every model in MODELS this writes tests/data/llm/<name>/:
  config.json                  HF config (generation_config.json is removed)
  model.safetensors            (or model-0000X-of-00002.safetensors + index)
  trace.json                   prompt, greedy continuation, metadata
  logits.f32                   raw little-endian float32 logits, [n_rows, vocab]

The reference is the official transformers implementation (eager attention,
float32 compute; bf16 checkpoints are loaded as bf16 and upcast with .float()).
Everything is seeded, so rerunning produces byte-identical files.
"""

import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT_DIR = os.path.join(ROOT, "tests", "data", "llm")

N_PROMPT = 8
N_NEW = 16
N_ROWS = N_PROMPT + N_NEW - 1  # one forward over prompt + greedy[:15]
MIN_MARGIN = 1e-3

# Seeds: "weights" seeds the parameter init, "prompt" seeds the prompt ids.
# They were picked (from weights seeds 10*k + base, k = 0..11) so that every
# greedy step has a top1-top2 logit margin well above MIN_MARGIN (>= 0.05;
# the script asserts > MIN_MARGIN).
MODELS = [
    dict(
        name="qwen3_gqa2_hd32_tied",
        cls=Qwen3ForCausalLM,
        cfg_cls=Qwen3Config,
        cfg=dict(
            hidden_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=32,
            intermediate_size=128,
            num_hidden_layers=2,
            vocab_size=256,
            tie_word_embeddings=True,
            rms_norm_eps=1e-6,
            rope_theta=1e6,
            max_position_embeddings=512,
            initializer_range=0.2,
            attention_bias=False,
            use_sliding_window=False,
            hidden_act="silu",
        ),
        dtype=torch.float32,
        shard=None,
        seeds=dict(weights=1031, prompt=2001),
    ),
    dict(
        name="qwen3_gqa4_hd16_bf16",
        cls=Qwen3ForCausalLM,
        cfg_cls=Qwen3Config,
        cfg=dict(
            hidden_size=96,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=16,
            intermediate_size=160,
            num_hidden_layers=3,
            vocab_size=300,
            tie_word_embeddings=False,
            rms_norm_eps=1e-6,
            rope_theta=10000.0,
            max_position_embeddings=512,
            initializer_range=0.2,
            attention_bias=False,
            use_sliding_window=False,
            hidden_act="silu",
        ),
        dtype=torch.bfloat16,
        shard=None,
        seeds=dict(weights=1062, prompt=2002),
    ),
    # sliding-window attention in the layers from max_window_layers on
    # (Qwen3Config writes them into layer_types): a window of 5 positions
    # in layers 1 and 2, well inside the 23 rows of the trace
    dict(
        name="qwen3_sliding",
        cls=Qwen3ForCausalLM,
        cfg_cls=Qwen3Config,
        cfg=dict(
            hidden_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            intermediate_size=96,
            num_hidden_layers=3,
            vocab_size=128,
            tie_word_embeddings=False,
            rms_norm_eps=1e-6,
            rope_theta=10000.0,
            max_position_embeddings=512,
            initializer_range=0.2,
            attention_bias=False,
            use_sliding_window=True,
            sliding_window=5,
            max_window_layers=1,
            hidden_act="silu",
        ),
        dtype=torch.float32,
        shard=None,
        seeds=dict(weights=1044, prompt=2004),
    ),
    dict(
        name="llama_gqa4_sharded",
        cls=LlamaForCausalLM,
        cfg_cls=LlamaConfig,
        cfg=dict(
            hidden_size=64,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=16,
            intermediate_size=96,
            num_hidden_layers=2,
            vocab_size=200,
            tie_word_embeddings=False,
            attention_bias=False,
            mlp_bias=False,
            rms_norm_eps=1e-5,
            rope_theta=10000.0,
            max_position_embeddings=512,
            initializer_range=0.2,
            hidden_act="silu",
        ),
        dtype=torch.float32,
        shard="200KB",  # must give exactly 2 shards (asserted below)
        seeds=dict(weights=1023, prompt=2003),
    ),
]


def setup_torch():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_grad_enabled(False)


def randomize(model, seed, std):
    """Re-initialize every parameter from a private generator.

    Linear/embedding weights ~ N(0, std); RMSNorm weights ~ 1 + 0.1*N(0,1)
    (the default all-ones would hide missing/misplaced norm weights).
    """
    g = torch.Generator().manual_seed(seed)
    for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
        if "norm" in name:
            assert name.endswith("norm.weight"), name
            p.copy_(1.0 + 0.1 * noise)
        else:
            assert name.endswith(".weight") and p.dim() == 2, name
            p.copy_(std * noise)


def load_reference(path, spec):
    model = spec["cls"].from_pretrained(
        path, dtype=spec["dtype"], attn_implementation="eager"
    )
    model = model.float().eval()
    for p in model.parameters():
        assert p.dtype == torch.float32
    return model


def make_prompt(seed, vocab):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (N_PROMPT,), generator=g).tolist()


def greedy_decode(model, prompt, n_new):
    """Manual greedy loop, full recompute each step. Returns (tokens, margins)."""
    ids = list(prompt)
    out, margins = [], []
    for _ in range(n_new):
        logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1]
        top2 = torch.topk(logits, 2).values
        margins.append(float(top2[0] - top2[1]))
        tok = int(torch.argmax(logits))
        out.append(tok)
        ids.append(tok)
    return out, margins


def full_logits(model, tokens):
    logits = model(torch.tensor([tokens]), use_cache=False).logits[0]
    return logits.float().contiguous().numpy().astype("<f4")


def check_against(logits, greedy):
    """argmax of row N_PROMPT-1+i must be greedy[i]; returns min margin."""
    min_margin = float("inf")
    for i, tok in enumerate(greedy):
        row = logits[N_PROMPT - 1 + i]
        am = int(np.argmax(row))
        if am != tok:
            raise SystemExit(f"row {N_PROMPT - 1 + i}: argmax {am} != greedy {tok}")
        s = np.sort(row)
        min_margin = min(min_margin, float(s[-1] - s[-2]))
    return min_margin


def build(spec, model=None, prompt=None):
    """Save `model` (default: a fresh one randomized from the spec's seed)
    and write its trace for `prompt` (default: uniform ids from the seed)."""
    name = spec["name"]
    path = os.path.join(OUT_DIR, name)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)

    if model is None:
        torch.manual_seed(spec["seeds"]["weights"])
        config = spec["cfg_cls"](**spec["cfg"])
        model = spec["cls"](config).eval()
        randomize(model, spec["seeds"]["weights"], spec["cfg"]["initializer_range"])
    if spec["cfg"]["tie_word_embeddings"]:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    model = model.to(spec["dtype"])

    kw = dict(safe_serialization=True)
    if spec["shard"]:
        kw["max_shard_size"] = spec["shard"]
    model.save_pretrained(path, **kw)
    gen = os.path.join(path, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)

    # transformers 4.57 writes the stored dtype as "dtype"; checkpoints made
    # with older versions (e.g. the released Qwen3 ones) use "torch_dtype".
    # Write both so either spelling is present.
    cfg_path = os.path.join(path, "config.json")
    with open(cfg_path) as f:
        cfg_json = json.load(f)
    want = {torch.float32: "float32", torch.bfloat16: "bfloat16"}[spec["dtype"]]
    assert cfg_json.get("dtype") == want, cfg_json.get("dtype")
    cfg_json["torch_dtype"] = want
    with open(cfg_path, "w") as f:
        json.dump(cfg_json, f, indent=2, sort_keys=True)
        f.write("\n")

    # Shard layout checks.
    st = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
    if spec["shard"]:
        assert st == ["model-00001-of-00002.safetensors",
                      "model-00002-of-00002.safetensors"], st
        assert os.path.exists(os.path.join(path, "model.safetensors.index.json"))
    else:
        assert st == ["model.safetensors"], st

    # Reference from the saved files (exactly what the compiler will read).
    ref = load_reference(path, spec)
    vocab = spec["cfg"]["vocab_size"]
    if prompt is None:
        prompt = make_prompt(spec["seeds"]["prompt"], vocab)
    greedy, step_margins = greedy_decode(ref, prompt, N_NEW)
    logits = full_logits(ref, prompt + greedy[:-1])
    assert logits.shape == (N_ROWS, vocab), logits.shape
    full_margin = check_against(logits, greedy)
    min_margin = min(min(step_margins), full_margin)
    if not min_margin > MIN_MARGIN:
        raise SystemExit(f"{name}: min top1-top2 margin {min_margin} <= {MIN_MARGIN}; change seeds")

    logits.tofile(os.path.join(path, "logits.f32"))
    trace = {
        "model": name,
        "prompt": prompt,
        "greedy": greedy,
        "n_rows": N_ROWS,
        "vocab": vocab,
        "logits_file": "logits.f32",
        "source": f"transformers {transformers.__version__} {spec['cls'].__name__}",
        "dtype_stored": {torch.float32: "float32", torch.bfloat16: "bfloat16"}[spec["dtype"]],
    }
    with open(os.path.join(path, "trace.json"), "w") as f:
        json.dump(trace, f, indent=1)
        f.write("\n")

    total = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    print(f"{name}: seeds={spec['seeds']} files={sorted(os.listdir(path))} "
          f"bytes={total} min_margin={min_margin:.4f} "
          f"logit_std={float(logits.std()):.3f}")
    return min_margin


def main():
    setup_torch()
    only = set(sys.argv[1:])
    for spec in MODELS:
        if only and spec["name"] not in only:
            continue
        build(spec)


if __name__ == "__main__":
    main()
