#!/usr/bin/env python3
"""Tiny random Qwen3.5 / Qwen3.5-MoE / Qwen3-Next checkpoints (Gated DeltaNet
hybrids, dense and mixture of experts) and reference traces from HF
transformers 5.x, for tests/unit/test_gdn.c.

Run:  /work/venv-gdn/bin/python tests/parity/make_gdn.py [--check] [name ...]

For every model in MODELS this writes tests/data/gdn/<name>/:
  config.json          as the published checkpoints have it (`qwen35_dense_tiny`,
                       `qwen35_moe_tiny`: model_type qwen3_5 / qwen3_5_moe with
                       text_config / vision_config) or as the CausalLM classes'
                       save_pretrained writes it (`qwen35_text_flat`:
                       qwen3_5_text; `qwen3_next_moe_tiny`: qwen3_next)
  model.safetensors    the text model's tensors, float32, under the prefix the
                       layout uses (model.language_model.* / model.*); the
                       experts fused as the modules hold them
                       (mlp.experts.gate_up_proj [E, 2I, H], down_proj [E, H, I]:
                       qwen35_moe_tiny) or one tensor per expert as
                       save_pretrained writes them and Qwen3-Next is published
                       (mlp.experts.E.{gate,up,down}_proj.weight)
  trace.json           prompt, greedy continuation, dims, state files
  logits.f32           [n_rows, vocab] logits of one forward over
                       prompt + greedy[:15] (use_cache=False)
  conv_state.L.f32     [conv_dim, K] the reference cache's conv state of GDN
                       layer L after a forward over the prompt (use_cache=True):
                       the last K inputs of the conv, oldest first
  recurrent_state.L.f32  [nv, dk, dv] its delta-rule state after the prompt

The reference is Qwen3_5ForCausalLM loaded from the written directory
(float32, eager attention, one CPU thread; transformers' torch fallbacks of
the conv and the delta rule, since neither causal_conv1d nor
flash-linear-attention is installed).  The script asserts that every
official loader accepts each directory with nothing missing or unexpected
(Qwen3_5ForConditionalGeneration: only the vision tower, which a text-only
checkpoint lacks), and that they give the same logits; that a cached decode
(the recurrent form of the delta rule, token by token) agrees with the
full forward (the chunked form) within 2e-5; and that every greedy step has
a top1-top2 margin above 1e-3; for the MoE models, that every router
choice has a margin above 1e-4 between the k-th and the (k+1)-th
probability (so no routing is decided by rounding).  --check recomputes everything from the
committed files and compares (exit 1 on a mismatch).  Everything is seeded:
reruns write byte-identical files.
"""

import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import (
    AutoModelForCausalLM,
    Qwen3_5Config,
    Qwen3_5ForCausalLM,
    Qwen3_5ForConditionalGeneration,
    Qwen3_5MoeConfig,
    Qwen3_5MoeForCausalLM,
    Qwen3_5MoeForConditionalGeneration,
    Qwen3_5MoeTextConfig,
    Qwen3_5TextConfig,
    Qwen3NextConfig,
    Qwen3NextForCausalLM,
)

# arch -> (text config, causal LM, nested config, conditional generation)
ARCH = {
    "qwen3_5": (Qwen3_5TextConfig, Qwen3_5ForCausalLM, Qwen3_5Config, Qwen3_5ForConditionalGeneration),
    "qwen3_5_moe": (Qwen3_5MoeTextConfig, Qwen3_5MoeForCausalLM, Qwen3_5MoeConfig,
                    Qwen3_5MoeForConditionalGeneration),
    "qwen3_next": (Qwen3NextConfig, Qwen3NextForCausalLM, None, None),
}
MIN_ROUTE_MARGIN = 1e-4

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT_DIR = os.path.join(ROOT, "tests", "data", "gdn")

N_PROMPT = 8
N_NEW = 16
N_ROWS = N_PROMPT + N_NEW - 1
MIN_MARGIN = 1e-3
MAX_BYTES = 1 << 20

# A tiny vision tower config for the published (nested) layout: the
# checkpoint holds no vision tensors; Qwen3_5ForConditionalGeneration then
# reports exactly model.visual.* as missing.
VISION = dict(depth=1, hidden_size=16, intermediate_size=32, num_heads=2, out_hidden_size=48,
              patch_size=4, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16)

MODELS = [
    dict(
        # the published layout; head counts and dims all distinct
        name="qwen35_dense_tiny",
        layout="nested",
        text=dict(
            vocab_size=256, hidden_size=48, intermediate_size=80, num_hidden_layers=4,
            layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"],
            num_attention_heads=4, num_key_value_heads=1, head_dim=24,
            linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=16,
            linear_value_head_dim=12, linear_conv_kernel_dim=4,
            rms_norm_eps=1e-6, max_position_embeddings=512, tie_word_embeddings=True,
            rope_parameters=dict(rope_type="default", rope_theta=1e6, partial_rotary_factor=0.25,
                                 mrope_section=[1, 1, 1], mrope_interleaved=True),
            hidden_act="silu", attention_bias=False,
        ),
        mtp=True,  # one mtp.* tensor, as published checkpoints carry (the loaders ignore it)
        seeds=dict(weights=3161, prompt=3201),
    ),
    dict(
        # what Qwen3_5ForCausalLM.save_pretrained writes, with the layer
        # kinds from full_attention_interval instead of layer_types
        name="qwen35_text_flat",
        layout="flat",
        text=dict(
            vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
            num_attention_heads=2, num_key_value_heads=2, head_dim=32,
            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
            linear_value_head_dim=16, linear_conv_kernel_dim=3,
            rms_norm_eps=1e-5, max_position_embeddings=512, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="default", rope_theta=1e4, partial_rotary_factor=0.5),
            hidden_act="silu", attention_bias=False,
        ),
        interval=3,  # layer_types dropped from config.json: [lin, lin, full]
        mtp=False,
        seeds=dict(weights=3112, prompt=3202),
    ),
    dict(
        # Qwen3.5-MoE, the published layout with the experts fused as the
        # modules hold them (gate_up_proj [E, 2I, H]); every layer a MoE
        # block with the gated shared expert; the router renormalises
        name="qwen35_moe_tiny",
        arch="qwen3_5_moe",
        layout="nested",
        experts="fused",
        text=dict(
            vocab_size=128, hidden_size=32, num_hidden_layers=3,
            layer_types=["linear_attention", "full_attention", "linear_attention"],
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
            linear_value_head_dim=12, linear_conv_kernel_dim=4,
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32,
            rms_norm_eps=1e-6, max_position_embeddings=512, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="default", rope_theta=1e6, partial_rotary_factor=0.25,
                                 mrope_section=[1, 1, 0], mrope_interleaved=True),
            hidden_act="silu", attention_bias=False,
        ),
        mtp=True,
        seeds=dict(weights=3501, prompt=3502),
    ),
    dict(
        # Qwen3-Next as save_pretrained writes it: grouped GDN projections
        # (in_proj_qkvz, in_proj_ba), one tensor per expert, a dense MLP
        # layer (mlp_only_layers), the router's top-k not renormalised
        name="qwen3_next_moe_tiny",
        arch="qwen3_next",
        layout="flat",
        experts="per_expert",
        text=dict(
            vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
            layer_types=["linear_attention", "linear_attention", "full_attention"],
            num_attention_heads=4, num_key_value_heads=1, head_dim=16,
            linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=8,
            linear_value_head_dim=8, linear_conv_kernel_dim=4,
            num_experts=6, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64,
            norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[1],
            rms_norm_eps=1e-6, max_position_embeddings=512, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="default", rope_theta=1e4, partial_rotary_factor=0.5),
            hidden_act="silu", attention_bias=False,
        ),
        mtp=False,
        seeds=dict(weights=3601, prompt=3602),
    ),
    dict(
        # Qwen3-Next with shared_expert_intermediate_size 0: the official
        # block keeps an empty shared expert (tensors [0, H], [H, 0]) and its
        # gate, whose product is zero; the experts alone
        name="qwen3_next_moe_noshared_tiny",
        arch="qwen3_next",
        layout="flat",
        experts="per_expert",
        text=dict(
            vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            layer_types=["linear_attention", "full_attention"],
            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
            linear_value_head_dim=8, linear_conv_kernel_dim=4,
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=0,
            norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
            rms_norm_eps=1e-6, max_position_embeddings=512, tie_word_embeddings=False,
            rope_parameters=dict(rope_type="default", rope_theta=1e4, partial_rotary_factor=0.5),
            hidden_act="silu", attention_bias=False,
        ),
        mtp=False,
        seeds=dict(weights=3791, prompt=3702),
    ),
]

STD = 0.2  # matrices and embeddings

# Seeds: weights seeds were picked among base + 10k (k = 0..11) for the
# largest smallest greedy margin (0.11 and 0.030; 1e-3 is the floor the
# script asserts); qwen3_next_moe_noshared_tiny's (3791: margin 0.054)
# among 3701..3791 also for test_gdn's bf16 greedy and q8_0 cosine gates
# (0.9984), which smaller-margin seeds missed.


def setup_torch():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_grad_enabled(False)


def randomize(model, seed):
    """Every parameter from one private generator, in sorted-name order.

    Matrices and embeddings N(0, 0.2); zero-centred norms (input, post,
    final, q/k: applied as 1 + w) w = 0.1 N; the gated norm (plain w)
    1 + 0.1 N; conv taps N(0, 0.4); A_log = -1 + 0.5 N (decay rates
    exp(A_log) ~ 0.2 .. 0.6); dt_bias 0.5 N; the experts' 3-D tensors,
    the router and the shared expert's gate like the matrices.  Defaults (zeros, ones) would
    hide a missing or misplaced weight."""
    g = torch.Generator().manual_seed(seed)
    for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
        if name.endswith("linear_attn.norm.weight"):
            p.copy_(1.0 + 0.1 * noise)
        elif name.endswith("norm.weight"):
            p.copy_(0.1 * noise)
        elif name.endswith("conv1d.weight"):
            p.copy_(0.4 * noise)
        elif name.endswith("A_log"):
            p.copy_(-1.0 + 0.5 * noise)
        elif name.endswith("dt_bias"):
            p.copy_(0.5 * noise)
        elif name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):
            p.copy_(STD * noise)
        else:
            assert name.endswith(".weight") and p.dim() == 2, name
            p.copy_(STD * noise)


def layer_types(spec):
    t = spec["text"]
    if "layer_types" in t:
        return t["layer_types"]
    k = spec["interval"]
    return ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(t["num_hidden_layers"])]


def arch(spec):
    return ARCH[spec.get("arch", "qwen3_5")]


def text_config(spec):
    t = dict(spec["text"])
    if "interval" in spec:
        t["full_attention_interval"] = spec["interval"]
    return arch(spec)[0](**t)


def moe(spec):
    return spec["text"].get("num_experts", 0) > 0


def per_expert(tensors, spec):
    """The fused expert tensors as one tensor per expert, as
    save_pretrained writes them (the loaders merge them back)."""
    if spec.get("experts") != "per_expert":
        return tensors
    out = {}
    for k, v in tensors.items():
        if k.endswith("mlp.experts.gate_up_proj"):
            base, inter = k[: -len("gate_up_proj")], v.shape[1] // 2
            for e in range(v.shape[0]):
                out[f"{base}{e}.gate_proj.weight"] = v[e, :inter].contiguous()
                out[f"{base}{e}.up_proj.weight"] = v[e, inter:].contiguous()
        elif k.endswith("mlp.experts.down_proj"):
            base = k[: -len("down_proj")]
            for e in range(v.shape[0]):
                out[f"{base}{e}.down_proj.weight"] = v[e].contiguous()
        else:
            out[k] = v
    return out


def write_checkpoint(spec, path, model):
    """config.json and model.safetensors in the spec's layout."""
    t = dict(spec["text"])
    a = arch(spec)
    if spec["layout"] == "nested":
        cfg = a[2](text_config=t, vision_config=VISION, tie_word_embeddings=t["tie_word_embeddings"])
        cfg.architectures = [a[3].__name__]
        prefix = "model.language_model."
    else:
        cfg = text_config(spec)
        cfg.architectures = [a[1].__name__]
        prefix = "model."
    cfg.save_pretrained(path)
    cfg_path = os.path.join(path, "config.json")
    with open(cfg_path) as f:
        j = json.load(f)
    if "interval" in spec:  # the layer kinds come from the interval alone
        del j["layer_types"]
        j["full_attention_interval"] = spec["interval"]
    j.pop("transformers_version", None)  # byte-identical reruns across versions
    if "text_config" in j:
        j["text_config"].pop("transformers_version", None)
    j["dtype"] = "float32"
    with open(cfg_path, "w") as f:
        json.dump(j, f, indent=2, sort_keys=True)
        f.write("\n")
    tensors = {}
    for k, v in model.state_dict().items():
        if k == "lm_head.weight":
            if t["tie_word_embeddings"]:
                continue
            tensors[k] = v.contiguous()
        else:
            assert k.startswith("model."), k
            tensors[prefix + k[len("model."):]] = v.contiguous()
    if spec["mtp"]:
        g = torch.Generator().manual_seed(spec["seeds"]["weights"] + 7)
        H = t["hidden_size"]
        tensors["mtp.fc.weight"] = (STD * torch.randn(H, 2 * H, generator=g)).contiguous()
    tensors = per_expert(tensors, spec)
    save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})


def load(path, cls):
    model, info = cls.from_pretrained(path, dtype=torch.float32, attn_implementation="eager",
                                      output_loading_info=True)
    return model.eval(), info


def check_loaders(spec, path, ref, ids):
    """Every official loader takes the directory and computes the same logits."""
    a = arch(spec)
    _, info = load(path, a[1])
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    assert ref.config.layer_types == layer_types(spec), ref.config.layer_types
    want = ref(ids, use_cache=False).logits
    auto = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager").eval()
    assert type(auto).__name__ == a[1].__name__, type(auto)
    assert torch.equal(auto(ids, use_cache=False).logits, want)
    if spec["layout"] == "nested":
        cg, info = load(path, a[3])
        missing = sorted(info["missing_keys"])
        assert missing and all(k.startswith("model.visual.") for k in missing), missing
        assert not info["unexpected_keys"], info["unexpected_keys"]
        got = cg(input_ids=ids, use_cache=False).logits
        assert torch.equal(got, want), float((got - want).abs().max())


def greedy_decode(model, prompt, n_new):
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


def cached_states(model, prompt, gdn):
    """Conv and recurrent states of each GDN layer after a cached forward
    over the prompt (the prefill path: the chunked delta rule)."""
    out = model(torch.tensor([prompt]), use_cache=True)
    cache = out.cache
    conv, rec = {}, {}
    for L in gdn:
        conv[L] = cache.get_conv_state(L)[0].float().contiguous().numpy().astype("<f4")
        rec[L] = cache.get_recurrent_state(L)[0].float().contiguous().numpy().astype("<f4")
    return conv, rec, cache, out.logits[0, -1]


def cached_decode_logits(model, tokens):
    """Prefill the first token, then decode token by token with the cache:
    the recurrent form of the delta rule and causal_conv1d_update."""
    rows = []
    out = model(torch.tensor([tokens[:1]]), use_cache=True)
    cache = out.cache
    rows.append(out.logits[0, -1])
    for i in range(1, len(tokens)):
        out = model(torch.tensor([[tokens[i]]]), cache=cache, use_cache=True)
        cache = out.cache
        rows.append(out.logits[0, -1])
    return torch.stack(rows).numpy()


def route_margin(model, tokens, k):
    """The smallest gap between the k-th and (k+1)-th router probability
    over every MoE layer and token of a forward over tokens."""
    logits = []
    hooks = [m.register_forward_hook(lambda mod, inp, out: logits.append(out[0].detach()))
             for n, m in model.named_modules() if n.endswith("mlp.gate")]
    model(torch.tensor([tokens]), use_cache=False)
    for h in hooks:
        h.remove()
    assert logits, "no router ran"
    margin = float("inf")
    for rl in logits:
        p = torch.softmax(rl.float(), dim=-1).sort(dim=-1, descending=True).values
        margin = min(margin, float((p[:, k - 1] - p[:, k]).min()) if p.shape[-1] > k else float("inf"))
    return margin


def compute(spec, path):
    """Everything the trace holds, from the directory as written."""
    ref, _ = load(path, arch(spec)[1])
    vocab = spec["text"]["vocab_size"]
    g = torch.Generator().manual_seed(spec["seeds"]["prompt"])
    prompt = torch.randint(0, vocab, (N_PROMPT,), generator=g).tolist()
    greedy, step_margins = greedy_decode(ref, prompt, N_NEW)
    tokens = prompt + greedy[:-1]
    logits = ref(torch.tensor([tokens]), use_cache=False).logits[0].contiguous().numpy().astype("<f4")
    assert logits.shape == (N_ROWS, vocab), logits.shape
    margin = min(step_margins)
    for i, tok in enumerate(greedy):
        row = logits[N_PROMPT - 1 + i]
        assert int(np.argmax(row)) == tok, (i, int(np.argmax(row)), tok)
        s = np.sort(row)
        margin = min(margin, float(s[-1] - s[-2]))
    gdn = [i for i, t in enumerate(layer_types(spec)) if t == "linear_attention"]
    conv, rec, _, last = cached_states(ref, prompt, gdn)
    # the cached prefill's last row is the full forward's row N_PROMPT-1
    d_prefill = float(np.abs(last.numpy() - logits[N_PROMPT - 1]).max())
    dec = cached_decode_logits(ref, tokens)
    d_decode = float(np.abs(dec - logits).max() / np.abs(logits).max())
    check_loaders(spec, path, ref, torch.tensor([tokens]))
    rmargin = route_margin(ref, tokens, spec["text"]["num_experts_per_tok"]) if moe(spec) else None
    return dict(ref=ref, prompt=prompt, greedy=greedy, logits=logits, margin=margin, gdn=gdn, conv=conv,
                rec=rec, d_prefill=d_prefill, d_decode=d_decode, route_margin=rmargin)


def dims(spec):
    t = spec["text"]
    hd = t["head_dim"]
    return dict(
        hidden=t["hidden_size"], layers=t["num_hidden_layers"], layer_types=layer_types(spec),
        heads=t["num_attention_heads"], kv_heads=t["num_key_value_heads"], head_dim=hd,
        rot_dims=int(hd * t["rope_parameters"]["partial_rotary_factor"]),
        nk=t["linear_num_key_heads"], nv=t["linear_num_value_heads"], dk=t["linear_key_head_dim"],
        dv=t["linear_value_head_dim"], conv_kernel=t["linear_conv_kernel_dim"],
        conv_dim=2 * t["linear_num_key_heads"] * t["linear_key_head_dim"]
        + t["linear_num_value_heads"] * t["linear_value_head_dim"],
        intermediate=t.get("intermediate_size"), vocab=t["vocab_size"], tied=t["tie_word_embeddings"],
        eps=t["rms_norm_eps"], experts=t.get("num_experts", 0), top_k=t.get("num_experts_per_tok", 0),
        moe_intermediate=t.get("moe_intermediate_size", 0),
        shared_intermediate=t.get("shared_expert_intermediate_size", 0),
        norm_topk_prob=t.get("norm_topk_prob", True) if moe(spec) else None,
        mlp_only_layers=t.get("mlp_only_layers", []), expert_layout=spec.get("experts"),
    )


def trace_json(spec, r):
    d = dims(spec)
    states = []
    for L in r["gdn"]:
        states.append(dict(layer=L, conv_file=f"conv_state.{L}.f32", conv_shape=[d["conv_dim"], d["conv_kernel"]],
                           recurrent_file=f"recurrent_state.{L}.f32",
                           recurrent_shape=[d["nv"], d["dk"], d["dv"]]))
    return {
        "model": spec["name"],
        "prompt": r["prompt"],
        "greedy": r["greedy"],
        "n_rows": N_ROWS,
        "vocab": spec["text"]["vocab_size"],
        "logits_file": "logits.f32",
        "source": f"transformers {transformers.__version__} {arch(spec)[1].__name__}, torch {torch.__version__}",
        "dtype_stored": "float32",
        "layout": spec["layout"],
        "dims": d,
        "seeds": spec["seeds"],
        "states_after_prompt": states,
        "min_margin": round(r["margin"], 6),
        "min_route_margin": None if r["route_margin"] is None else round(r["route_margin"], 6),
        "cached_decode_max_rel_diff": float(f"{r['d_decode']:.3g}"),
    }


def build(spec):
    name = spec["name"]
    path = os.path.join(OUT_DIR, name)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    torch.manual_seed(spec["seeds"]["weights"])
    cfg = text_config(spec)
    cfg._attn_implementation = "eager"  # as the reference loads it
    model = arch(spec)[1](cfg).eval()
    randomize(model, spec["seeds"]["weights"])
    write_checkpoint(spec, path, model)
    r = compute(spec, path)
    # the written files are the model: same logits as the one in memory
    a = model(torch.tensor([r["prompt"]]), use_cache=False).logits
    b = r["ref"](torch.tensor([r["prompt"]]), use_cache=False).logits
    assert torch.equal(a, b), float((a - b).abs().max())
    if not r["margin"] > MIN_MARGIN:
        raise SystemExit(f"{name}: min top1-top2 margin {r['margin']} <= {MIN_MARGIN}; change seeds")
    if r["route_margin"] is not None and not r["route_margin"] > MIN_ROUTE_MARGIN:
        raise SystemExit(f"{name}: min router margin {r['route_margin']} <= {MIN_ROUTE_MARGIN}; change seeds")
    if not r["d_decode"] < 2e-5 or not r["d_prefill"] < 1e-4:
        raise SystemExit(f"{name}: cached paths differ from the full forward: {r['d_decode']} {r['d_prefill']}")
    r["logits"].tofile(os.path.join(path, "logits.f32"))
    for L in r["gdn"]:
        r["conv"][L].tofile(os.path.join(path, f"conv_state.{L}.f32"))
        r["rec"][L].tofile(os.path.join(path, f"recurrent_state.{L}.f32"))
    with open(os.path.join(path, "trace.json"), "w") as f:
        json.dump(trace_json(spec, r), f, indent=1)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    assert total < MAX_BYTES, total
    print(f"{name}: bytes={total} min_margin={r['margin']:.4f} logit_std={float(r['logits'].std()):.3f} "
          f"route_margin={r['route_margin']} cached decode rel diff {r['d_decode']:.2e} greedy={r['greedy']}")


def check(spec):
    """Recompute from the committed files; 1e-5 abs (logits, states)."""
    name = spec["name"]
    path = os.path.join(OUT_DIR, name)
    errors = []
    with open(os.path.join(path, "trace.json")) as f:
        trace = json.load(f)
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
        keys = list(f.keys())
        if any(f.get_slice(k).get_dtype() != "F32" for k in keys):
            errors.append("a tensor is not F32")
    prefix = "model.language_model." if spec["layout"] == "nested" else "model."
    if not all(k.startswith(prefix) or k.startswith("mtp.") or k == "lm_head.weight" for k in keys):
        errors.append(f"tensor names outside {prefix}")
    r = compute(spec, path)
    if trace["prompt"] != r["prompt"] or trace["greedy"] != r["greedy"]:
        errors.append("prompt or greedy tokens differ")
    stored = np.fromfile(os.path.join(path, "logits.f32"), dtype="<f4").reshape(N_ROWS, -1)
    if float(np.abs(stored - r["logits"]).max()) > 1e-5:
        errors.append("logits differ")
    for L in r["gdn"]:
        for what, arr in (("conv_state", r["conv"][L]), ("recurrent_state", r["rec"][L])):
            got = np.fromfile(os.path.join(path, f"{what}.{L}.f32"), dtype="<f4").reshape(arr.shape)
            if float(np.abs(got - arr).max()) > 1e-5:
                errors.append(f"{what}.{L} differs")
    if trace["dims"] != dims(spec):
        errors.append("dims differ")
    total = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    if total >= MAX_BYTES:
        errors.append(f"{total} bytes")
    print(f"{name}: {'ok' if not errors else '; '.join(errors)}")
    return not errors


def main():
    setup_torch()
    args = sys.argv[1:]
    checking = "--check" in args
    only = set(a for a in args if a != "--check")
    ok = True
    for spec in MODELS:
        if only and spec["name"] not in only:
            continue
        if checking:
            ok &= check(spec)
        else:
            build(spec)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
