#!/usr/bin/env python3
"""Multiply-accumulates of the 12 Hz codec decoder per second of audio, from
its decoder_config, counted layer by layer the way the official
Qwen3TTSTokenizerV2Decoder computes them (qwen-tts 0.1.1), steady state (the
attention sees a full window of keys).

    python3 bench/codec_macs.py [CONFIG.json]          # default: the published config
    /work/venv/bin/python bench/codec_macs.py DIR --check [--frames 40]

Counts: Conv1d = Cin/groups * Cout * k per output position; ConvTranspose1d =
Cin * Cout * k per input position (the work of the un-trimmed transposed
conv, which is also what a GEMM to k*Cout columns + overlap-add does);
Linear = in * out per row; attention = 2 * heads * head_dim * window per
query (scores and the weighted sum).  Elementwise work (SnakeBeta, norms,
GELU, softmax, codebook lookups) is not counted.

--check runs the official decoder in DIR (torch, CPU) on FRAMES random frames
with hooks on every Conv1d / ConvTranspose1d / Linear, counts the MACs of the
shapes it actually sees, and compares them per frame with the analytic
count (the attention's own matmuls are not hooked; they are the analytic
term, and the first frames of a call see fewer keys).
"""
import argparse, json, sys

PUBLISHED = dict(codebook_dim=512, codebook_size=2048, latent_dim=1024, decoder_dim=1536,
                 hidden_size=512, intermediate_size=1024, num_attention_heads=16,
                 num_key_value_heads=16, head_dim=64, num_hidden_layers=8, sliding_window=72,
                 upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], num_quantizers=16)
FRAME_RATE = 12.5


def count(c):
    """[(group, name, MACs per frame)]"""
    rows = []
    add = lambda g, n, m: rows.append((g, n, m))
    cd, lat, dd = c["codebook_dim"], c["latent_dim"], c["decoder_dim"]
    h, inter = c["hidden_size"], c["intermediate_size"]
    nh, nkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    win = c["sliding_window"]
    # split RVQ: two output projections (Conv1d k1, codebook_dim/2 -> codebook_dim)
    add("rvq + pre_conv", "rvq output_proj x2", 2 * (cd // 2) * cd)
    add("rvq + pre_conv", "pre_conv k3", cd * lat * 3)
    # pre-transformer
    add("pre_transformer", "input_proj", lat * h)
    per = h * nh * hd + 2 * h * nkv * hd + nh * hd * h + 3 * h * inter
    add("pre_transformer", f"{c['num_hidden_layers']} layers: q,k,v,o, gate,up,down",
        c["num_hidden_layers"] * per)
    add("pre_transformer", f"attention (window {win})", c["num_hidden_layers"] * 2 * nh * hd * win)
    add("pre_transformer", "output_proj", h * lat)
    # upsampling: ConvTranspose(f) + ConvNeXt at each ratio
    pos = 1
    for i, f in enumerate(c["upsampling_ratios"]):
        add("upsample + ConvNeXt", f"upsample.{i} convT k{f}/{f}", pos * lat * lat * f)
        pos *= f
        add("upsample + ConvNeXt", f"upsample.{i} ConvNeXt (dw7 + 2 x {lat}x{4 * lat})",
            pos * (lat * 7 + 2 * lat * 4 * lat))
    # conv stack
    add("conv stack", f"decoder.0 conv7 {lat}->{dd}", pos * lat * dd * 7)
    cin = dd
    for i, r in enumerate(c["upsample_rates"]):
        cout = cin // 2
        add("conv stack", f"block {i} convT k{2 * r}/{r} {cin}->{cout}", pos * cin * cout * 2 * r)
        pos *= r
        add("conv stack", f"block {i} 3 residual units (conv7 + conv1, {cout} ch)",
            pos * 3 * (cout * cout * 7 + cout * cout))
        cin = cout
    add("conv stack", f"final conv7 {cin}->1", pos * cin * 7)
    return rows, pos


def check(d, frames, analytic_per_frame, attention_per_frame):
    import warnings
    import numpy as np
    import torch
    warnings.filterwarnings("ignore")
    import transformers
    transformers.logging.set_verbosity_error()
    from qwen_tts.core.tokenizer_12hz import modeling_qwen3_tts_tokenizer_v2 as M
    torch.set_grad_enabled(False)
    model = M.Qwen3TTSTokenizerV2Model.from_pretrained(d, dtype=torch.float32).eval()
    dec = model.decoder
    total = [0]

    def hook(mod, inp, out):
        x = inp[0]
        if isinstance(mod, torch.nn.Conv1d):
            total[0] += out.shape[-1] * mod.out_channels * (mod.in_channels // mod.groups) * mod.kernel_size[0]
        elif isinstance(mod, torch.nn.ConvTranspose1d):
            total[0] += x.shape[-1] * mod.in_channels * mod.out_channels * mod.kernel_size[0]
        elif isinstance(mod, torch.nn.Linear):
            total[0] += x.numel() // x.shape[-1] * mod.in_features * mod.out_features

    for m in dec.modules():
        if isinstance(m, (torch.nn.Conv1d, torch.nn.ConvTranspose1d, torch.nn.Linear)):
            m.register_forward_hook(hook)
    rng = np.random.default_rng(0)
    codes = torch.from_numpy(rng.integers(0, 2048, size=(1, 16, frames)))
    dec(codes)
    hooked = total[0] / frames
    expect = analytic_per_frame - attention_per_frame
    print(f"check: hooked Conv1d/ConvTranspose1d/Linear MACs over {frames} frames: "
          f"{hooked / 1e6:.3f} M per frame; analytic without attention {expect / 1e6:.3f} M "
          f"(ratio {hooked / expect:.6f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config", nargs="?", help="config.json or a directory holding one")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--frames", type=int, default=40)
    a = ap.parse_args()
    c = dict(PUBLISHED)
    if a.config:
        path = a.config if a.config.endswith(".json") else a.config.rstrip("/") + "/config.json"
        cfg = json.load(open(path))
        c.update({k: v for k, v in cfg.get("decoder_config", cfg).items() if k in PUBLISHED})
    rows, samples_per_frame = count(c)
    per_frame = sum(m for _, _, m in rows)
    print(f"# MACs per second of audio ({FRAME_RATE} frames, {samples_per_frame} samples per frame)")
    print(f"{'part':<58} {'GMAC/s audio':>13}")
    groups = {}
    for g, n, m in rows:
        groups[g] = groups.get(g, 0) + m
        print(f"  {n:<56} {m * FRAME_RATE / 1e9:>13.4f}")
    for g, m in groups.items():
        print(f"{g:<58} {m * FRAME_RATE / 1e9:>13.3f}")
    print(f"{'total':<58} {per_frame * FRAME_RATE / 1e9:>13.3f}   "
          f"(= {2 * per_frame * FRAME_RATE / 1e9:.2f} GFLOP per second of audio)")
    if a.check:
        att = sum(m for g, n, m in rows if n.startswith("attention"))
        check(a.config, a.frames, per_frame, att)


if __name__ == "__main__":
    sys.exit(main())
