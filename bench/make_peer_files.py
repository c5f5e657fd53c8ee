#!/usr/bin/env python3
"""Turn a random Qwen3-TTS checkpoint (bench/make_random_ckpt.py qwen3-tts-0.6b)
into a model directory that a Qwen3-TTS engine laid out like the published
release can open: the talker checkpoint itself (symlinked), a byte-level
text tokenizer, and a speech tokenizer (codec decoder) with random float32
weights of the published 12 Hz shapes.  Speed only: every weight is noise.

    /work/venv/bin/python bench/make_peer_files.py CKPT_DIR OUT_DIR

OUT_DIR gets
  model.safetensors                symlink to CKPT_DIR's
  config.json                      CKPT_DIR's, plus the published talker
                                   rope_scaling (qwen-tts needs the key)
  vocab.json, merges.txt           byte-level BPE: the 256 byte symbols as
                                   ids 0..255 and no merges, so a text of N
                                   ASCII characters is exactly N tokens
  speech_tokenizer/config.json     the 12 Hz codec config (decoder part)
  speech_tokenizer/model.safetensors
                                   decoder.* tensors, float32; names and shapes
                                   are read off the official qwen-tts module
                                   (built on the meta device, no init cost)

Needs torch and qwen-tts (the official package) for the decoder's shapes,
numpy for the weights.  Deterministic (fixed seed).
"""
import json, os, struct, sys

import numpy as np

# Published 12 Hz speech tokenizer, decoder half (Qwen3-TTS-Tokenizer-12Hz).
DECODER_CONFIG = dict(
    attention_bias=False, attention_dropout=0.0, latent_dim=1024, codebook_dim=512,
    codebook_size=2048, decoder_dim=1536, hidden_act="silu", hidden_size=512,
    intermediate_size=1024, layer_scale_initial_scale=0.01, max_position_embeddings=8000,
    head_dim=64, num_attention_heads=16, num_hidden_layers=8, num_key_value_heads=16,
    num_quantizers=16, num_semantic_quantizers=1, rms_norm_eps=1e-5, rope_theta=10000,
    semantic_codebook_size=4096, sliding_window=72, upsample_rates=[8, 5, 4, 3],
    upsampling_ratios=[2, 2], vector_quantization_hidden_dimension=512)


def byte_alphabet():
    """GPT-2 byte-level mapping: byte -> printable unicode character."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + \
        list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def decoder_shapes():
    import torch
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import \
        Qwen3TTSTokenizerV2DecoderConfig
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import \
        Qwen3TTSTokenizerV2Decoder
    cfg = Qwen3TTSTokenizerV2DecoderConfig(**DECODER_CONFIG)
    with torch.device("meta"):
        dec = Qwen3TTSTokenizerV2Decoder(cfg)
    shapes = [(n, tuple(p.shape)) for n, p in dec.named_parameters()]
    shapes += [(n, tuple(b.shape)) for n, b in dec.named_buffers()
               if "_codebook" in n]          # EMA codebooks: embedding_sum, cluster_usage
    return [("decoder." + n, s) for n, s in shapes]


def value(name, shape, rng):
    if name.endswith("cluster_usage"):
        return np.ones(shape, np.float32)
    if name.endswith(".scale"):              # LayerScale
        return np.full(shape, 0.01, np.float32)
    if len(shape) == 1:                       # norms, biases, snake alpha/beta
        return np.ones(shape, np.float32) if "norm" in name else \
            np.zeros(shape, np.float32)
    return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)


def write_safetensors(path, items):
    header, off = {}, 0
    for name, arr in items:
        n = arr.nbytes
        header[name] = dict(dtype="F32", shape=list(arr.shape), data_offsets=[off, off + n])
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, arr in items:
            f.write(np.ascontiguousarray(arr).tobytes())


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_peer_files.py CKPT_DIR OUT_DIR")
    ckpt, out = (os.path.abspath(a) for a in sys.argv[1:])
    for f in ("config.json", "model.safetensors"):
        if not os.path.isfile(os.path.join(ckpt, f)):
            sys.exit(f"make_peer_files.py: {ckpt}/{f} missing")
    os.makedirs(os.path.join(out, "speech_tokenizer"), exist_ok=True)
    dst = os.path.join(out, "model.safetensors")
    if os.path.lexists(dst):
        os.remove(dst)
    os.symlink(os.path.join(ckpt, "model.safetensors"), dst)
    # config.json: a copy, plus the published talker rope_scaling when absent
    # (qwen-tts indexes it; all three position rows are equal for TTS, so it is
    # plain RoPE and changes no result)
    with open(os.path.join(ckpt, "config.json")) as f:
        cfg = json.load(f)
    cfg["talker_config"].setdefault("rope_scaling", dict(
        interleaved=True, mrope_section=[24, 20, 20], rope_type="default", type="default"))
    dst = os.path.join(out, "config.json")
    if os.path.lexists(dst):
        os.remove(dst)
    with open(dst, "w") as f:
        json.dump(cfg, f, indent=1)

    alpha = byte_alphabet()
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({alpha[b]: b for b in range(256)}, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")

    st = os.path.join(out, "speech_tokenizer")
    with open(os.path.join(st, "config.json"), "w") as f:
        json.dump(dict(architectures=["Qwen3TTSTokenizerV2Model"],
                       model_type="qwen3_tts_tokenizer_12hz",
                       encoder_valid_num_quantizers=16, input_sample_rate=24000,
                       output_sample_rate=24000, decode_upsample_rate=1920,
                       encode_downsample_rate=1920, decoder_config=DECODER_CONFIG), f, indent=1)
    wpath = os.path.join(st, "model.safetensors")
    if not os.path.isfile(wpath):
        rng = np.random.default_rng(20261130)
        items = [(n, value(n, s, rng)) for n, s in decoder_shapes()]
        write_safetensors(wpath + ".tmp", items)
        os.replace(wpath + ".tmp", wpath)
    print(f"make_peer_files.py: {out} ready")


if __name__ == "__main__":
    main()
