#!/usr/bin/env python3
"""Write a random checkpoint with the exact shapes of a published model,
for benchmarks (speed only: the weights are noise).  Needs numpy only.

    python3 bench/make_random_ckpt.py qwen3-0.6b OUT_DIR [--dtype bf16|f32]
"""
import argparse, json, os, struct
import numpy as np

SHAPES = {
    "qwen3-0.6b": dict(model_type="qwen3", hidden_size=1024, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                       intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True,
                       rms_norm_eps=1e-6, rope_theta=1000000.0, max_position_embeddings=40960),
}

def tensors(c):
    H, I, hd = c["hidden_size"], c["intermediate_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    yield "model.embed_tokens.weight", (c["vocab_size"], H)
    for L in range(c["num_hidden_layers"]):
        p = f"model.layers.{L}."
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
    yield "model.norm.weight", (H,)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    a = ap.parse_args()
    c = dict(SHAPES[a.shape])
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
            x = rng.standard_normal(shape, dtype=np.float32) * (0.02 if len(shape) == 2 else 0.1)
            if len(shape) == 1:
                x += 1.0
            if a.dtype == "bf16":
                f.write((x.view(np.uint32) >> 16).astype(np.uint16).tobytes())
            else:
                f.write(x.tobytes())
    print(f"wrote {a.out} ({off / 2**20:.0f} MB of weights)")

if __name__ == "__main__":
    main()
