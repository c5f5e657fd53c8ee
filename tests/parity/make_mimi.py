#!/usr/bin/env python3
"""Reference fixtures for Mimi, Kyutai's codec (the `moshi` package 0.2.13).

Run:  /work/venv-moshi/bin/python tests/parity/make_mimi.py          # -> tests/data/mimi/
      /work/venv-moshi/bin/python tests/parity/make_mimi.py --check  # recompute, compare, write nothing

For each spec this writes tests/data/mimi/<name>/:
  config.json        {"model_type": "mimi", "num_codebooks": K} plus the Mimi
                     config exactly as moshi.models.loaders.get_mimi takes it
                     (sample_rate, channels, frame_rate, seanet, quantizer,
                     transformer)
  model.safetensors  the package's MimiModel.state_dict() names, every tensor
                     drawn from a fixed seed and stored as bfloat16 (small files;
                     the package runs on those same rounded values in float32)
  codes.i32          raw little-endian int32 [T, K], frame-major
  pcm.f32            raw little-endian float32 [T * 1920]: the package's
                     streaming decode, one frame per call inside
                     `mimi.streaming(1)`, as Moshi's own loop runs it
  pcm_whole.f32      the package's non-streaming `mimi.decode(codes)` of the whole
                     utterance, for the record (see trace.json "whole_vs_stream")
  trace.json         dims, seeds, versions, stats

Streaming and non-streaming decode differ once the decoder transformer's
context fills: streaming, the RingKVCache holds `context` positions and
takes the two 25 Hz steps of a frame before either attends, so the first
step of each frame sees context - 1 earlier steps; non-streaming, every
step sees context.  speechc computes the streaming form (ATTENTION's
p.align = 2), the one the package uses for Moshi and for `decode` in
streaming mode; trace.json records how far apart the two are.

Nothing is reimplemented: every number comes from the package's modules,
float32 on CPU, loaded back from the saved files through get_mimi.
"""

import json
import os
import sys

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "mimi")

SPECS = {
    # The published switches (causal SEANet with ELU, constant padding,
    # compress 2, true skips; LayerNorm + RoPE + LayerScale transformer with
    # a plain GELU FFN; split RVQ) at tiny widths, hop 960 and 1920 samples
    # a frame as published.  Two residual layers per block (dilations 1, 2),
    # a decoder transformer context of 5 steps (odd: the ring wraps inside
    # the run and the frame's two steps straddle it), 4 of 6 codebooks.
    "mimi_tiny": dict(
        seed=11, frames=6, num_codebooks=4,
        mimi=dict(
            sample_rate=24000, channels=1, frame_rate=12.5,
            seanet=dict(channels=1, dimension=16, causal=True, n_filters=2, n_residual_layers=2,
                        activation="ELU", compress=2, dilation_base=2, disable_norm_outer_blocks=0,
                        kernel_size=7, residual_kernel_size=3, last_kernel_size=3, norm="none",
                        pad_mode="constant", ratios=[8, 6, 5, 4], true_skip=True),
            quantizer=dict(dimension=8, n_q=6, bins=32, input_dimension=16, output_dimension=16),
            transformer=dict(d_model=16, num_heads=2, num_layers=2, causal=True, layer_scale=0.01,
                             context=5, conv_layout=True, max_period=10000, gating="none",
                             norm="layer_norm", positional_embedding="rope", dim_feedforward=24,
                             input_dimension=16, output_dimensions=[16]))),
}


def randomize(model, seed):
    """Every parameter and buffer from the seed: convs by fan-in, norms
    around 1, LayerScale around 0.5, codebook usages spread over decades
    with a few under the 1e-5 clamp."""
    g = torch.Generator().manual_seed(seed)
    state = model.state_dict()
    new = {}
    # usages first: the sums are drawn against them
    names = sorted(state, key=lambda n: not n.endswith("cluster_usage"))
    for name in names:
        t = state[name]
        shape = t.shape
        if name.endswith("_initialized"):
            v = torch.ones(shape)
        elif name.endswith("cluster_usage"):
            v = 10.0 ** (torch.rand(shape, generator=g) * 2 - 1)
            v[::7] = 1e-7 * torch.rand(v[::7].shape, generator=g)
        elif name.endswith("embedding_sum"):
            # embedding = embedding_sum / max(usage, 1e-5): O(1) rows, and
            # the clamped ones (usage 1e-7) come out 100x smaller than
            # dividing by the usage itself would make them
            usage = new[name.replace("embedding_sum", "cluster_usage")].float()
            v = torch.randn(shape, generator=g) * usage[:, None]
        elif name.endswith("scale"):
            v = 0.5 + 0.3 * torch.randn(shape, generator=g)
        elif name.endswith("bias"):
            v = 0.1 * torch.randn(shape, generator=g)
        elif len(shape) == 1:
            v = 1.0 + 0.3 * torch.randn(shape, generator=g)
        else:
            # a transposed conv's output sums cin inputs times k / stride = 2 taps
            fan_in = int(np.prod(shape[1:])) if "convtr" not in name else shape[0] * 2
            v = torch.randn(shape, generator=g) / max(fan_in, 1) ** 0.5
        new[name] = v.to(torch.bfloat16).contiguous()
    return new


def load(path, cfg, k):
    from moshi.models import loaders
    return loaders.get_mimi(os.path.join(path, "model.safetensors"), cfg, num_codebooks=k)


def compute(mimi, codes):
    """codes [1, K, T] -> (streaming PCM, non-streaming PCM), float32 [T*1920]."""
    with torch.no_grad():
        whole = mimi.decode(codes)[0, 0].numpy()
        outs = []
        with mimi.streaming(1):
            for t in range(codes.shape[-1]):
                outs.append(mimi.decode(codes[:, :, t:t + 1])[0, 0].numpy())
    return np.concatenate(outs).astype("<f4"), whole.astype("<f4")


def make(name, spec, check):
    from moshi.models import loaders
    from safetensors.torch import save_file
    import moshi

    torch.manual_seed(spec["seed"])
    cfg, K = spec["mimi"], spec["num_codebooks"]
    d = os.path.join(OUT, name)
    if not check:
        os.makedirs(d, exist_ok=True)
        fresh = loaders.get_mimi(None, cfg, num_codebooks=K)
        save_file(randomize(fresh, spec["seed"] + 100), os.path.join(d, "model.safetensors"))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(dict(model_type="mimi", num_codebooks=K, **cfg), f, indent=1)
    mimi = load(d, cfg, K).eval()
    g = torch.Generator().manual_seed(spec["seed"] + 200)
    T = spec["frames"]
    codes = torch.randint(0, cfg["quantizer"]["bins"], (1, K, T), generator=g)
    stream, whole = compute(mimi, codes)
    assert stream.shape == whole.shape == (T * 1920,), (stream.shape, whole.shape)
    peak = float(np.abs(stream).max())
    diff = np.abs(stream - whole)
    # where the two first differ: the first step whose window the ring cuts
    first = int(np.argmax(diff > 1e-6 * peak)) if (diff > 1e-6 * peak).any() else -1
    trace = dict(moshi_version=moshi.__version__, torch_version=torch.__version__, frames=T,
                 num_codebooks=K, samples_per_frame=1920, pcm_peak=peak,
                 pcm_std=float(stream.std()),
                 whole_vs_stream=dict(max_abs=float(diff.max()), rel_to_peak=float(diff.max() / peak),
                                      first_sample=first,
                                      first_frame=first // 1920 if first >= 0 else -1))
    files = {"codes.i32": codes[0].T.numpy().astype("<i4"), "pcm.f32": stream, "pcm_whole.f32": whole}
    if check:
        for fn, arr in files.items():
            old = np.fromfile(os.path.join(d, fn), dtype=arr.dtype)
            if not np.array_equal(old, arr.reshape(-1)):
                sys.exit(f"{name}/{fn}: differs from the committed fixture")
        print(f"{name}: fixtures reproduce")
        return
    for fn, arr in files.items():
        arr.reshape(-1).tofile(os.path.join(d, fn))
    with open(os.path.join(d, "trace.json"), "w") as f:
        json.dump(trace, f, indent=1)
    print(name, json.dumps(trace))


def main():
    check = "--check" in sys.argv[1:]
    torch.set_num_threads(1)
    for name, spec in SPECS.items():
        make(name, spec, check)


if __name__ == "__main__":
    main()
