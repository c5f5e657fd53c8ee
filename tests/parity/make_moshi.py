#!/usr/bin/env python3
"""Reference fixtures for Moshi's RQ-Transformer (the `moshi` package's LMModel).

Run:  /work/venv-moshi/bin/python tests/parity/make_moshi.py [--check] [NAME...]
      (a venv with `pip install moshi==0.2.13`; see tests/parity/README.md)

For each switch set this writes tests/data/moshi/<name>/:
  config.json        the LM keyword arguments plus moshi_name / mimi_name /
                     tokenizer_name / model_type, as moshi.models.loaders'
                     CheckpointInfo reads a checkpoint's config.json
  model.safetensors  float32, LMModel.state_dict() (the package's names)
  codes.i32          int32 [K, T]: the teacher-forced codes (K = 1 + n_q, text first)
  logits.f32         float32 [dep_q, T, card]: LMModel.forward(codes).logits
                     (NaN where the delays leave no prediction, as the package fills them)
  text_logits.f32    float32 [T, text_card_out]: LMModel.forward(codes).text_logits
  mask.u8 / text_mask.u8   the forward's masks [dep_q, T] and [T]
  user.i32           int32 [S, n_q - dep_q]: random user codes fed to LMGen
  gen.i32            int32 [R, 1 + dep_q]: every row LMGen.step (greedy) returned, in order
  trace.json         dims, seeds, versions

Four switch sets:
  moshi7b_tiny  the 7B's switches (rms_norm_f32, silu gating, interleaved RoPE,
                multi-linear per-step depformer without a schedule, no depformer
                positions, 17 streams with the 7B's delay pattern), tiny widths
  family_tiny   layer_norm, ungated GELU FFN, sinusoidal positions (scaled),
                LayerScale, GQA (kv_repeat 2), a depformer weights schedule,
                low-rank depformer embeddings, GELU gating, other delays
  bands_tiny    moshi7b_tiny's switches at widths whose matrices quantize
                whole (columns multiples of 32), for the bf16 / q8_0 / q4_0 gates
  dq1_tiny      moshi7b_tiny's switches with one depformer step (dep_q 1),
                and depformer_causal false in config.json (the loader drops it);
                LMGen's rows only (the package's forward fails on dep_q 1)
Also tests/data/moshi/defaults_7b.json: the package's loaders._lm_kwargs and
the file names CheckpointInfo assumes without a config.json (MOSHI_NAME,
MIMI_NAME, TEXT_TOKENIZER_NAME), which a config-less directory gets.
Every switch set has a context shorter than the run, so the temporal KV ring wraps.
Every parameter is drawn from a fixed seed (norm weights and biases too), so
reruns give identical files.  Nothing here reimplements the model: every
number is the package's.
"""

import json
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file

import moshi
from moshi.models import lm

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "moshi")

SPECS = {
    "moshi7b_tiny": dict(
        seed=1, steps=12, gen_steps=10,
        lm=dict(dim=16, text_card=40, existing_text_padding_id=3, n_q=16, dep_q=8, card=24,
                num_heads=2, num_layers=2, hidden_scale=4.125, causal=True, layer_scale=None,
                context=5, max_period=10000, gating="silu", norm="rms_norm_f32",
                positional_embedding="rope", depformer_dim=8,
                depformer_dim_feedforward=int(4.125 * 8), depformer_num_heads=2,
                depformer_num_layers=1, depformer_layer_scale=None, depformer_multi_linear=True,
                depformer_context=8, depformer_max_period=10000, depformer_gating="silu",
                depformer_pos_emb="none", depformer_weights_per_step=True,
                delays=[0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1])),
    "family_tiny": dict(
        seed=2, steps=11, gen_steps=10,
        lm=dict(dim=16, text_card=30, text_card_out=28, n_q=6, dep_q=4, card=20, num_heads=2,
                kv_repeat=2, num_layers=2, hidden_scale=2, norm="layer_norm", gating="none",
                positional_embedding="sin", max_period=500, positional_scale=0.7, layer_scale=0.1,
                context=4, depformer_dim=8, depformer_num_heads=2, depformer_num_layers=2,
                depformer_multi_linear=True, depformer_weights_per_step=True,
                depformer_weights_per_step_schedule=[0, 1, 1, 2], depformer_low_rank_embeddings=6,
                depformer_gating="gelu", depformer_pos_emb="sin", depformer_max_period=300,
                delays=[0, 2, 0, 1, 3, 1, 2])),
    # the 7B's switches at widths the quantized bands take whole (every
    # matrix's columns a multiple of 32: dim 64, gated FFN 2*288//3 = 192,
    # depformer 32 with FFN 2*96//3 = 64), for test_moshi's band gates
    "bands_tiny": dict(
        seed=3, steps=12, gen_steps=10,
        lm=dict(dim=64, text_card=64, existing_text_padding_id=3, n_q=16, dep_q=8, card=32,
                num_heads=2, num_layers=2, hidden_scale=4.5, causal=True, layer_scale=None,
                context=5, max_period=10000, gating="silu", norm="rms_norm_f32",
                positional_embedding="rope", depformer_dim=32,
                depformer_dim_feedforward=96, depformer_num_heads=2,
                depformer_num_layers=1, depformer_layer_scale=None, depformer_multi_linear=True,
                depformer_context=8, depformer_max_period=10000, depformer_gating="silu",
                depformer_pos_emb="none", depformer_weights_per_step=True,
                delays=[0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1])),
}


# one depformer step (dep_q 1) with per-step weights: the package's
# depformer FFN is still a one-element ModuleList (gating.0.*); and
# depformer_causal, which the loader drops, only in config.json.
# moshi7b_tiny's switches otherwise.
SPECS["dq1_tiny"] = dict(
    seed=4, steps=10, gen_steps=12, config_only=dict(depformer_causal=False),
    lm=dict(SPECS["moshi7b_tiny"]["lm"], n_q=6, dep_q=1, delays=[0, 0, 1, 1, 0, 1, 1]))


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("alpha") or (name.endswith("weight") and p.dim() == 1):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))      # norm gains
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("scale"):
                p.copy_(0.5 + 0.3 * torch.randn(p.shape, generator=g))      # LayerScale
            else:
                fan_in = p.shape[-1]
                p.copy_(torch.randn(p.shape, generator=g) / fan_in ** 0.5)


def make(name, spec, check):
    torch.manual_seed(spec["seed"])
    kw = dict(spec["lm"])
    model = lm.LMModel(**kw).eval()
    randomize(model, spec["seed"] + 100)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if not check:
        save_file(state, os.path.join(d, "model.safetensors"))
        cfg = dict(kw, **spec.get("config_only", {}), moshi_name="model.safetensors",
                   mimi_name="mimi.safetensors", tokenizer_name="tokenizer.model", model_type="moshi")
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
    # load back from the files, as a user's checkpoint would be
    model2 = lm.LMModel(**kw).eval()
    model2.load_state_dict(load_file(os.path.join(d, "model.safetensors")))
    model = model2

    g = torch.Generator().manual_seed(spec["seed"] + 200)
    K, T = model.num_codebooks, spec["steps"]
    files = {}
    text_out = None
    if model.dep_q > 1:  # the package's training forward asserts depformer_emb, empty for dep_q 1
        codes = torch.empty(1, K, T, dtype=torch.long)
        codes[:, 0] = torch.randint(0, model.text_card, (1, T), generator=g)
        codes[:, 1:] = torch.randint(0, model.card, (1, K - 1, T), generator=g)
        codes[0, 2, 3] = -1   # a zero token: an exact zero embedding, masked out
        with torch.no_grad():
            out = model(codes)
        text_out = out.text_logits.shape[-1]
        files = {
            "codes.i32": codes[0].numpy().astype("<i4"),
            "logits.f32": out.logits[0].numpy().astype("<f4"),
            "text_logits.f32": out.text_logits[0, 0].numpy().astype("<f4"),
            "mask.u8": out.mask[0].numpy().astype("u1"),
            "text_mask.u8": out.text_mask[0, 0].numpy().astype("u1"),
        }

    # greedy LMGen over random user codes
    n_user = model.n_q - model.dep_q
    S = spec["gen_steps"]
    user = torch.randint(0, model.card, (S, n_user), generator=g)
    gen = lm.LMGen(model, use_sampling=False)
    rows = []
    with gen.streaming(1):
        for s in range(S):
            o = gen.step(user[s].view(1, n_user, 1))
            if o is not None:
                rows.append(o[0, :, 0].numpy())
    files["user.i32"] = user.numpy().astype("<i4")
    files["gen.i32"] = np.stack(rows).astype("<i4")

    trace = dict(name=name, seed=spec["seed"], moshi_version=moshi.__version__,
                 torch_version=torch.__version__, K=K, T=T, n_q=model.n_q, dep_q=model.dep_q,
                 card=model.card, text_card_out=text_out, gen_steps=S,
                 gen_rows=len(rows), user_codebooks=n_user, delays=model.delays)
    bad = 0
    for fn, arr in files.items():
        p = os.path.join(d, fn)
        if check:
            old = np.fromfile(p, dtype=arr.dtype).reshape(arr.shape)
            same = np.array_equal(old, arr, equal_nan=arr.dtype.kind == "f")
            print(f"{name}/{fn}: {'same' if same else 'DIFFERS'}")
            bad += not same
        else:
            arr.tofile(p)
    if not check:
        with open(os.path.join(d, "trace.json"), "w") as f:
            json.dump(trace, f, indent=1)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        print(f"{name}: {size} bytes, {len(rows)} LMGen rows")
    return bad


def defaults_7b(check):
    from moshi.models import loaders
    d = dict(loaders._lm_kwargs, moshi_name=loaders.MOSHI_NAME, mimi_name=loaders.MIMI_NAME,
             tokenizer_name=loaders.TEXT_TOKENIZER_NAME, model_type="moshi")
    p = os.path.join(OUT, "defaults_7b.json")
    text = json.dumps(d, indent=1) + "\n"
    if check:
        same = open(p).read() == text
        print(f"defaults_7b.json: {'same' if same else 'DIFFERS'}")
        return not same
    with open(p, "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    check = "--check" in sys.argv
    only = [a for a in sys.argv[1:] if not a.startswith("--")]  # fixture names (default: all)
    bad = sum(make(n, s, check) for n, s in SPECS.items() if not only or n in only)
    bad += defaults_7b(check) if not only else 0
    sys.exit(1 if bad else 0)
