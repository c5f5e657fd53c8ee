#!/usr/bin/env python3
"""Reference fixtures for Mimi, Kyutai's codec (the `moshi` package 0.2.13).

Run:  /work/venv-moshi/bin/python tests/parity/make_mimi.py          # -> tests/data/mimi/
      /work/venv-moshi/bin/python tests/parity/make_mimi.py --check  # recompute, compare, write nothing
      /work/venv-moshi/bin/python tests/parity/make_mimi.py --only mimi_wide  # one fixture
      /work/venv-moshi/bin/python tests/parity/make_mimi.py --encode-only
          # (re)write only the encode fixtures, from the committed model
      /work/venv-moshi/bin/python tests/parity/make_mimi.py --published DIR
          # a random Mimi at the published shapes (get_mimi's defaults, 8
          # codebooks of 2048) in DIR, outside the repository, with in.wav
          # (6 frames) and the package's streaming codes codes.i32, for a
          # check by hand:
          #   speechc build DIR -o m.so && speechc encode m.so DIR/in.wav -o c.bin
          #   cmp c.bin DIR/codes.i32

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
  enc_in.wav         a short test signal (enc_frames = 8 whole 1920-sample frames,
                     16-bit mono at 24 kHz: every sample is k / 32768, so the
                     floats the package encodes are the WAV's exactly)
  enc_codes.i32      raw little-endian int32 [enc_frames, K]: the package's
                     streaming encode of it, one 1920-sample frame per
                     `mimi.encode` call inside `mimi.streaming(1)`, as
                     moshi.run_inference feeds Mimi
  enc_codes_whole.i32  the package's non-streaming `mimi.encode` of the whole
                     signal, for the record: its encoder transformer sees
                     `context` steps at every step, the streaming ring
                     context - 1 at a frame's first (trace.json
                     "encode_whole_vs_stream" says from which frame they differ)
  trace.json         dims, seeds, versions, stats; "encode_margin": the
                     smallest gap, over every frame and codebook, between the
                     nearest and the second nearest codebook entry (squared
                     distances in float64 of the package's own residuals,
                     relative to the nearest): the package's torch.cdist takes
                     a matmul formula above 25 entries, so a C encode can
                     only disagree on a near-tie, and this says how far the
                     fixture is from one; "encode_margin_abs": the smallest
                     absolute gap of the squared distances

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
        seed=11, frames=6, num_codebooks=4, enc_frames=8,
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
    # The same switches wide enough that most matrices quantize whole
    # (their columns, C_in x kernel for a conv, multiples of 32): the
    # q8_0 / q4_0 bands are gated on it (test_mimi).  4 of 6 codebooks.
    "mimi_wide": dict(
        seed=29, frames=4, num_codebooks=4, enc_frames=6,
        mimi=dict(
            sample_rate=24000, channels=1, frame_rate=12.5,
            seanet=dict(channels=1, dimension=64, causal=True, n_filters=4, n_residual_layers=1,
                        activation="ELU", compress=2, dilation_base=2, disable_norm_outer_blocks=0,
                        kernel_size=7, residual_kernel_size=3, last_kernel_size=3, norm="none",
                        pad_mode="constant", ratios=[8, 6, 5, 4], true_skip=True),
            quantizer=dict(dimension=32, n_q=6, bins=32, input_dimension=64, output_dimension=64),
            transformer=dict(d_model=64, num_heads=4, num_layers=2, causal=True, layer_scale=0.01,
                             context=5, conv_layout=True, max_period=10000, gating="none",
                             norm="layer_norm", positional_embedding="rope", dim_feedforward=128,
                             input_dimension=64, output_dimensions=[64]))),
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


def test_signal(T, seed):
    """T frames of 1920 samples: two chirping tones, a click train and noise,
    clipped and rounded to 16-bit steps (k / 32768) so a 16-bit WAV holds it
    exactly."""
    g = torch.Generator().manual_seed(seed)
    n = T * 1920
    t = np.arange(n) / 24000.0
    # loud (2.6 % of the samples clip): at half this level the tiny model's
    # semantic codebook gives one code for every frame
    x = 0.6 * np.sin(2 * np.pi * (220 + 400 * t) * t) + 0.4 * np.sin(2 * np.pi * 1375 * t + 0.3)
    x[::997] += 1.0
    x += 0.1 * torch.randn(n, generator=g, dtype=torch.float64).numpy()
    q = np.clip(np.round(x * 32768), -32768, 32767).astype(np.int16)
    return q


def write_wav16(path, q):
    import wave
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(24000)
        w.writeframes(q.astype("<i2").tobytes())


def encode_stream(mimi, x):
    """x float32 [n] (whole frames) -> codes [T, K] of the streaming encode
    and the smallest relative nearest-vs-second margin of its decisions."""
    T = x.shape[0] // 1920
    q = mimi.quantizer
    codes, margin, margin_abs = [], float("inf"), float("inf")
    with torch.no_grad(), mimi.streaming(1):
        for t in range(T):
            frame = torch.from_numpy(x[t * 1920:(t + 1) * 1920])[None, None]
            c = mimi.encode(frame)  # [1, K, 1]
            codes.append(c[0, :, 0].numpy())
    # the margins, from the package's own latents and residuals
    with torch.no_grad(), mimi.streaming(1):
        for t in range(T):
            frame = torch.from_numpy(x[t * 1920:(t + 1) * 1920])[None, None]
            emb = mimi._encode_to_unquantized_latent(frame)  # [1, D, 1]
            k = 0
            for rvq, n in ((q.rvq_first, q.n_q_semantic), (q.rvq_rest, q.n_q - q.n_q_semantic)):
                if n == 0:
                    continue
                res = rvq.input_proj(emb)[0, :, 0]
                for layer in rvq.vq.layers[:n]:
                    e = layer._codebook.embedding
                    d = ((res.double()[None] - e.double()) ** 2).sum(-1)
                    s, i = torch.sort(d)
                    assert int(i[0]) == int(codes[t][k]), (t, k, int(i[0]), int(codes[t][k]))
                    margin = min(margin, float((s[1] - s[0]) / max(float(s[0]), 1e-30)))
                    margin_abs = min(margin_abs, float(s[1] - s[0]))
                    res = res - e[i[0]]
                    k += 1
    return np.stack(codes).astype("<i4"), margin, margin_abs


def encode_fixtures(mimi, spec):
    """The encode half: (signal int16, files, trace keys)."""
    q16 = test_signal(spec["enc_frames"], spec["seed"] + 300)
    x = q16.astype(np.float32) / 32768
    enc_codes, margin, margin_abs = encode_stream(mimi, x)
    assert margin > 1e-4, f"a near-tie in the encode (relative margin {margin}): change the seed"
    with torch.no_grad():
        whole = mimi.encode(torch.from_numpy(x)[None, None])[0].T.numpy().astype("<i4")
    assert whole.shape == enc_codes.shape, (whole.shape, enc_codes.shape)
    differ = np.nonzero((whole != enc_codes).any(axis=1))[0]
    keys = dict(enc_frames=spec["enc_frames"], encode_margin=margin, encode_margin_abs=margin_abs,
                encode_whole_vs_stream=dict(first_frame=int(differ[0]) if len(differ) else -1,
                                            frames_differing=int(len(differ))))
    return q16, {"enc_codes.i32": enc_codes, "enc_codes_whole.i32": whole}, keys


def encode_only(name, spec):
    """Rewrite the encode fixtures from the committed model, nothing else."""
    d = os.path.join(OUT, name)
    mimi = load(d, spec["mimi"], spec["num_codebooks"]).eval()
    q16, files, keys = encode_fixtures(mimi, spec)
    write_wav16(os.path.join(d, "enc_in.wav"), q16)
    for fn, arr in files.items():
        arr.reshape(-1).tofile(os.path.join(d, fn))
    with open(os.path.join(d, "trace.json")) as f:
        trace = json.load(f)
    trace.update(keys)
    trace["encode_torch_version"] = torch.__version__
    with open(os.path.join(d, "trace.json"), "w") as f:
        json.dump(trace, f, indent=1)
    print(name, json.dumps(keys))


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
    q16, enc_files, keys = encode_fixtures(mimi, spec)
    trace.update(keys)
    files = {"codes.i32": codes[0].T.numpy().astype("<i4"), "pcm.f32": stream, "pcm_whole.f32": whole,
             **enc_files}
    if not check:
        write_wav16(os.path.join(d, "enc_in.wav"), q16)
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


def published(d):
    """A random Mimi at the published shapes and its streaming codes (see --published)."""
    from moshi.models import loaders
    from safetensors.torch import save_file
    os.makedirs(d, exist_ok=True)
    K = 8
    save_file(randomize(loaders.get_mimi(None, None, num_codebooks=K), 5), os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(dict(model_type="mimi", num_codebooks=K), f)
    mimi = loaders.get_mimi(os.path.join(d, "model.safetensors"), None, num_codebooks=K).eval()
    q16 = test_signal(6, 7)
    write_wav16(os.path.join(d, "in.wav"), q16)
    codes, margin, margin_abs = encode_stream(mimi, q16.astype(np.float32) / 32768)
    codes.reshape(-1).tofile(os.path.join(d, "codes.i32"))
    print(f"{d}: codes.i32 [6, {K}], smallest margin {margin:.3g} relative, {margin_abs:.3g} absolute")


def main():
    check = "--check" in sys.argv[1:]
    torch.set_num_threads(1)
    if "--published" in sys.argv[1:]:
        i = sys.argv.index("--published")
        if i + 1 >= len(sys.argv) or os.path.abspath(sys.argv[i + 1]).startswith(ROOT):
            raise SystemExit("--published needs an output directory outside the repository")
        published(sys.argv[i + 1])
        return
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv[1:] else None
    for name, spec in SPECS.items():
        if only and name != only:
            continue
        if "--encode-only" in sys.argv[1:]:
            encode_only(name, spec)
        else:
            make(name, spec, check)


if __name__ == "__main__":
    main()
