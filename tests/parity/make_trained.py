#!/usr/bin/env python3
"""A tiny *trained* Qwen3 checkpoint + reference trace, for the accuracy gates.

Run:  /work/venv/bin/python tests/parity/make_trained.py

The random checkpoints of make_llm.py are chaotic on purpose (init std 0.2:
every weight matters, so parity tests catch any misplaced tensor), which makes
them a poor judge of quantization: nothing in their logits dominates the
weight noise of a 4-bit band.  Real checkpoints are trained, and their logits
are peaked.  This script trains a tiny Qwen3 (HF transformers, float32, one
CPU thread, deterministic) for a few hundred steps on sequences of a fixed
random Markov chain over 256 tokens (each token has a few likely
successors), then writes tests/data/llm/qwen3_trained_tiny/ in the same
format as make_llm.py (config.json, model.safetensors, trace.json,
logits.f32): the official implementation's logits of one forward over the
prompt and its greedy continuation.
"""

import os
import sys

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_llm  # noqa: E402

V = 256
SEQ = 64
BATCH = 32
STEPS = int(os.environ.get("TRAIN_STEPS", "300"))

SPEC = dict(
    name="qwen3_trained_tiny",
    cls=Qwen3ForCausalLM,
    cfg_cls=Qwen3Config,
    cfg=dict(
        hidden_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=128,
        num_hidden_layers=2,
        vocab_size=V,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        rope_theta=1e6,
        max_position_embeddings=512,
        initializer_range=0.02,
        attention_bias=False,
        use_sliding_window=False,
        hidden_act="silu",
    ),
    dtype=torch.float32,
    shard=None,
    seeds=dict(weights=7, prompt=2004),
)


def markov_chain(g):
    """Transition matrix: each token has 3 successors with probabilities
    0.7 / 0.2 / 0.1."""
    succ = torch.randint(0, V, (V, 3), generator=g)
    return succ, torch.tensor([0.7, 0.2, 0.1])


def sample_batch(g, succ, probs, n, length):
    out = torch.empty(n, length, dtype=torch.long)
    out[:, 0] = torch.randint(0, V, (n,), generator=g)
    for t in range(1, length):
        k = torch.multinomial(probs.expand(n, 3), 1, generator=g)[:, 0]
        out[:, t] = succ[out[:, t - 1], k]
    return out


def train(model, seed):
    g = torch.Generator().manual_seed(seed)
    succ, probs = markov_chain(g)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    model.train()
    with torch.enable_grad():
        for step in range(STEPS):
            x = sample_batch(g, succ, probs, BATCH, SEQ)
            loss = model(x, labels=x).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 50 == 0 or step == STEPS - 1:
                print(f"step {step}: loss {loss.item():.4f}", flush=True)
    model.eval()
    return succ, probs


def main():
    make_llm.setup_torch()
    spec = SPEC
    torch.manual_seed(spec["seeds"]["weights"])
    model = Qwen3ForCausalLM(Qwen3Config(**spec["cfg"]))
    succ, probs = train(model, spec["seeds"]["weights"])
    # make_llm.build saves, reloads and traces; hand it the trained model
    # and a prompt drawn from the chain instead of uniform ids.
    g = torch.Generator().manual_seed(spec["seeds"]["prompt"])
    prompt = sample_batch(g, succ, probs, 1, make_llm.N_PROMPT)[0].tolist()
    make_llm.build(spec, model=model, prompt=prompt)


if __name__ == "__main__":
    main()
