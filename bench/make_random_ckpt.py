#!/usr/bin/env python3
"""Write a random checkpoint with the exact shapes of a published model,
for benchmarks (speed only: the weights are noise).  Needs numpy only.

    python3 bench/make_random_ckpt.py qwen3-0.6b|qwen3-tts-0.6b|qwen3.5-0.8b|qwen3.5-35b-a3b|moshi-7b OUT_DIR
        [--dtype bf16|f32] [--layers N]

qwen3.5-0.8b: the text model of Qwen3.5-0.8B, dense (qwen3_5_text, what
Qwen3_5ForCausalLM writes: tensors model.*): hidden 1024, 24 layers (three
GDN then one full-attention layer, six times), GDN 16/16 heads of 128,
conv 4, attention 8/2 heads of 256 (gated q_proj), SwiGLU FFN of 3584,
partial rotary 0.25 with theta 1e7, vocab 248320, tied embeddings
(~1.5 GB in bf16).  The published checkpoint nests this under
text_config with tensors model.language_model.*; speechc reads both.

qwen3.5-35b-a3b: the per-layer shapes of Qwen3.5-35B-A3B (hidden 2048,
GDN 16/32 heads of 128, attention 16/2 heads of 256, 256 experts of 512,
8 per token, a shared expert of 512, vocab 248320) as the text model
(qwen3_5_moe_text, fused experts), three GDN layers then one full-attention
layer; --layers N keeps the first N (the published model has 40, ~70 GB
in bf16).

moshi-7b: Moshi's RQ-Transformer with the 7B's shapes (the moshi package's
loaders._lm_kwargs: temporal d4096, 32 heads, 32 layers, gated SiLU FFN of
11264, RMSNorm; depformer d1024 x 6 layers with a weight set per step of
the 8, FFN 2816; text card 32000, card 2048, 16 streams) under the
package's state-dict names and config.json (model_type moshi, no Mimi:
build it with --no-codec); --layers N keeps N temporal layers (the whole
7B is ~15 GB in bf16).  The names and shapes are those of
LMModel(**_lm_kwargs).state_dict() (checked against the package 0.2.x).
"""
import argparse, json, os, struct
import numpy as np

SHAPES = {
    "qwen3-0.6b": dict(model_type="qwen3", hidden_size=1024, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                       intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True,
                       rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=40960),
}

TTS_06B = dict(
    model_type="qwen3_tts", tts_model_type="custom_voice", tts_model_size="0b6",
    tts_pad_token_id=151671, tts_bos_token_id=151672, tts_eos_token_id=151673,
    im_start_token_id=151644, im_end_token_id=151645, assistant_token_id=77091,
    talker_config=dict(
        hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, vocab_size=3072, text_vocab_size=151936,
        text_hidden_size=2048, num_code_groups=16, rms_norm_eps=1e-6, rope_theta=1000000.0,
        max_position_embeddings=32768, hidden_act="silu",
        codec_pad_id=2148, codec_bos_id=2149, codec_eos_token_id=2150, codec_think_id=2154,
        codec_nothink_id=2155, codec_think_bos_id=2156, codec_think_eos_id=2157,
        codec_language_id={"english": 2050, "chinese": 2055},
        spk_id={"random_speaker": 3000}, spk_is_dialect={"random_speaker": False},
        code_predictor_config=dict(
            hidden_size=1024, intermediate_size=3072, num_hidden_layers=5, num_attention_heads=16,
            num_key_value_heads=8, head_dim=128, vocab_size=2048, num_code_groups=16,
            rms_norm_eps=1e-6, rope_theta=1000000.0, hidden_act="silu")))
SHAPES["qwen3-tts-0.6b"] = TTS_06B
SHAPES["qwen3.5-35b-a3b"] = dict(
    model_type="qwen3_5_moe_text", hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
    num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=32,
    linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4, num_experts=256,
    num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512,
    vocab_size=248320, tie_word_embeddings=False, rms_norm_eps=1e-6, max_position_embeddings=262144,
    full_attention_interval=4, hidden_act="silu",
    rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25))

SHAPES["qwen3.5-0.8b"] = dict(
    model_type="qwen3_5_text", hidden_size=1024, num_hidden_layers=24, num_attention_heads=8,
    num_key_value_heads=2, head_dim=256, linear_num_key_heads=16, linear_num_value_heads=16,
    linear_key_head_dim=128, linear_value_head_dim=128, linear_conv_kernel_dim=4,
    intermediate_size=3584, vocab_size=248320, tie_word_embeddings=True, rms_norm_eps=1e-6,
    max_position_embeddings=262144, full_attention_interval=4, hidden_act="silu",
    attention_bias=False, attn_output_gate=True,
    layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 6,
    rope_parameters=dict(rope_type="default", rope_theta=10000000.0, partial_rotary_factor=0.25,
                         mrope_interleaved=True, mrope_section=[11, 11, 10]))

def is_full_attention(c, L):
    if c.get("layer_types"):
        return c["layer_types"][L] == "full_attention"
    return (L + 1) % c["full_attention_interval"] == 0

def gdn_layers(prefix, c):
    """Qwen3.5 layers: GDN or gated full attention, then the MoE block
    (num_experts in c) or a dense SwiGLU FFN."""
    H, hd = c["hidden_size"], c["head_dim"]
    nk, nv, dk, dv = (c["linear_num_key_heads"], c["linear_num_value_heads"], c["linear_key_head_dim"],
                      c["linear_value_head_dim"])
    conv = 2 * nk * dk + nv * dv
    for L in range(c["num_hidden_layers"]):
        p = f"{prefix}{L}."
        yield p + "input_layernorm.weight", (H,)
        yield p + "post_attention_layernorm.weight", (H,)
        if not is_full_attention(c, L):
            a = p + "linear_attn."
            yield a + "in_proj_qkv.weight", (conv, H)
            yield a + "in_proj_z.weight", (nv * dv, H)
            yield a + "in_proj_b.weight", (nv, H)
            yield a + "in_proj_a.weight", (nv, H)
            yield a + "conv1d.weight", (conv, 1, c["linear_conv_kernel_dim"])
            yield a + "A_log", (nv,)
            yield a + "dt_bias", (nv,)
            yield a + "norm.weight", (dv,)
            yield a + "out_proj.weight", (H, nv * dv)
        else:
            q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
            yield p + "self_attn.q_proj.weight", (2 * q, H)
            yield p + "self_attn.k_proj.weight", (kv, H)
            yield p + "self_attn.v_proj.weight", (kv, H)
            yield p + "self_attn.o_proj.weight", (H, q)
            yield p + "self_attn.q_norm.weight", (hd,)
            yield p + "self_attn.k_norm.weight", (hd,)
        if "num_experts" not in c:
            I = c["intermediate_size"]
            yield p + "mlp.gate_proj.weight", (I, H)
            yield p + "mlp.up_proj.weight", (I, H)
            yield p + "mlp.down_proj.weight", (H, I)
            continue
        E, I, Is = c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
        yield p + "mlp.gate.weight", (E, H)
        yield p + "mlp.experts.gate_up_proj", (E, 2 * I, H)
        yield p + "mlp.experts.down_proj", (E, H, I)
        yield p + "mlp.shared_expert.gate_proj.weight", (Is, H)
        yield p + "mlp.shared_expert.up_proj.weight", (Is, H)
        yield p + "mlp.shared_expert.down_proj.weight", (H, Is)
        yield p + "mlp.shared_expert_gate.weight", (1, H)

def qwen3_layers(prefix, c):
    H, I, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    for L in range(c["num_hidden_layers"]):
        p = f"{prefix}{L}."
        yield p + "input_layernorm.weight", (H,)
        yield p + "post_attention_layernorm.weight", (H,)
        yield p + "self_attn.q_proj.weight", (q, H)
        yield p + "self_attn.k_proj.weight", (kv, H)
        yield p + "self_attn.v_proj.weight", (kv, H)
        yield p + "self_attn.o_proj.weight", (H, q)
        yield p + "self_attn.q_norm.weight", (hd,)
        yield p + "self_attn.k_norm.weight", (hd,)
        yield p + "mlp.gate_proj.weight", (I, H)
        yield p + "mlp.up_proj.weight", (I, H)
        yield p + "mlp.down_proj.weight", (H, I)

def tts_tensors(c):
    t, p = c["talker_config"], c["talker_config"]["code_predictor_config"]
    H, TH, Hp = t["hidden_size"], t["text_hidden_size"], p["hidden_size"]
    yield "talker.model.text_embedding.weight", (t["text_vocab_size"], TH)
    yield "talker.text_projection.linear_fc1.weight", (TH, TH)
    yield "talker.text_projection.linear_fc1.bias", (TH,)
    yield "talker.text_projection.linear_fc2.weight", (H, TH)
    yield "talker.text_projection.linear_fc2.bias", (H,)
    yield "talker.model.codec_embedding.weight", (t["vocab_size"], H)
    yield "talker.codec_head.weight", (t["vocab_size"], H)
    yield from qwen3_layers("talker.model.layers.", t)
    yield "talker.model.norm.weight", (H,)
    yield from qwen3_layers("talker.code_predictor.model.layers.", p)
    yield "talker.code_predictor.model.norm.weight", (Hp,)
    for i in range(t["num_code_groups"] - 1):
        yield f"talker.code_predictor.model.codec_embedding.{i}.weight", (p["vocab_size"], H)
        yield f"talker.code_predictor.lm_head.{i}.weight", (p["vocab_size"], Hp)
    if Hp != H:
        yield "talker.code_predictor.small_to_mtp_projection.weight", (Hp, H)
        yield "talker.code_predictor.small_to_mtp_projection.bias", (Hp,)

SHAPES["moshi-7b"] = dict(
    dim=4096, text_card=32000, existing_text_padding_id=3, n_q=16, dep_q=8, card=2048, num_heads=32,
    num_layers=32, hidden_scale=4.125, causal=True, layer_scale=None, context=3000, max_period=10000,
    gating="silu", norm="rms_norm_f32", positional_embedding="rope", depformer_dim=1024,
    depformer_dim_feedforward=4224, depformer_num_heads=16, depformer_num_layers=6,
    depformer_layer_scale=None, depformer_multi_linear=True, depformer_context=8,
    depformer_max_period=10000, depformer_gating="silu", depformer_pos_emb="none",
    depformer_weights_per_step=True, delays=[0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1],
    moshi_name="model.safetensors", model_type="moshi")

def moshi_tensors(c):
    D, DD, Q = c["dim"], c["depformer_dim"], c["dep_q"]
    hid = 2 * int(c["hidden_scale"] * D) // 3           # the gated FFN's hidden width
    dhid = 2 * c["depformer_dim_feedforward"] // 3
    for i in range(c["n_q"]):
        yield f"emb.{i}.weight", (c["card"] + 1, D)
    yield "text_emb.weight", (c["text_card"] + 1, D)
    for L in range(c["num_layers"]):
        p = f"transformer.layers.{L}."
        yield p + "norm1.alpha", (1, 1, D)
        yield p + "self_attn.in_projs.0.weight", (3 * D, D)
        yield p + "self_attn.out_projs.0.weight", (D, D)
        yield p + "norm2.alpha", (1, 1, D)
        yield p + "gating.linear_in.weight", (2 * hid, D)
        yield p + "gating.linear_out.weight", (D, hid)
    yield "out_norm.alpha", (1, 1, D)
    yield "text_linear.weight", (c["text_card"], D)
    for k in range(Q):
        yield f"depformer_in.{k}.weight", (DD, D)
    yield "depformer_text_emb.weight", (c["text_card"] + 1, DD)
    for k in range(Q - 1):
        yield f"depformer_emb.{k}.weight", (c["card"] + 1, DD)
    for L in range(c["depformer_num_layers"]):
        p = f"depformer.layers.{L}."
        yield p + "norm1.alpha", (1, 1, DD)
        for k in range(Q):
            yield p + f"self_attn.in_projs.{k}.weight", (3 * DD, DD)
        for k in range(Q):
            yield p + f"self_attn.out_projs.{k}.weight", (DD, DD)
        yield p + "norm2.alpha", (1, 1, DD)
        for k in range(Q):
            yield p + f"gating.{k}.linear_in.weight", (2 * dhid, DD)
            yield p + f"gating.{k}.linear_out.weight", (DD, dhid)
    for k in range(Q):
        yield f"linears.{k}.weight", (c["card"], DD)

def tensors(c):
    if c["model_type"] == "moshi":
        yield from moshi_tensors(c)
        return
    if c["model_type"] == "qwen3_tts":
        yield from tts_tensors(c)
        return
    H = c["hidden_size"]
    yield "model.embed_tokens.weight", (c["vocab_size"], H)
    if c["model_type"] in ("qwen3_5_text", "qwen3_5_moe_text"):
        yield from gdn_layers("model.layers.", c)
        yield "model.norm.weight", (H,)
        if not c["tie_word_embeddings"]:
            yield "lm_head.weight", (c["vocab_size"], H)
        return
    yield from qwen3_layers("model.layers.", c)
    yield "model.norm.weight", (H,)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--layers", type=int, default=0)
    a = ap.parse_args()
    c = dict(SHAPES[a.shape])
    if a.layers and c["model_type"] == "moshi":
        c["num_layers"] = a.layers
    elif a.layers:
        c["num_hidden_layers"] = a.layers
        if "layer_types" in c:
            c["layer_types"] = c["layer_types"][:a.layers]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    rng = np.random.default_rng(0)
    esize = 2 if a.dtype == "bf16" else 4
    header, off, specs = {}, 0, list(tensors(c))
    for name, shape in specs:
        n = int(np.prod(shape)) * esize
        header[name] = {"dtype": "BF16" if a.dtype == "bf16" else "F32", "shape": list(shape),
                        "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, shape in specs:
            x = rng.standard_normal(shape, dtype=np.float32) * (0.02 if len(shape) >= 2 and not name.endswith(".alpha") else 0.1)
            if (len(shape) == 1 or name.endswith(".alpha")) and not name.endswith(".bias"):
                x += 1.0
            if a.dtype == "bf16":
                f.write((x.view(np.uint32) >> 16).astype(np.uint16).tobytes())
            else:
                f.write(x.tobytes())
    print(f"wrote {a.out} ({off / 2**20:.0f} MB of weights)")

if __name__ == "__main__":
    main()
