#!/usr/bin/env python3
"""Re-verify the codec fixtures written by make_codec.py.  Exit 1 on mismatch.

Run:  /work/venv/bin/python tests/parity/check_codec.py                  # tests/data/codec/codec_tiny
      /work/venv/bin/python tests/parity/check_codec.py --published /work/codec_pub
      (needs `pip install qwen-tts==0.1.1`)

Checks, per fixture directory:
  * size (< 1,000,000 bytes for committed fixtures); config.json: model_type
    qwen3_tts_tokenizer_12hz, decoder_config equal to the spec, and
    decode_upsample_rate = prod(upsample_rates) * prod(upsampling_ratios);
  * model.safetensors: float32 only, exactly "decoder." + the official
    Qwen3TTSTokenizerV2Decoder.state_dict() names and shapes, no encoder
    tensors, and every tensor byte-equal to a fresh draw from the recorded
    seeds (so the weights are what make_codec.py says they are);
  * reloading with the official Qwen3TTSTokenizerV2Model.from_pretrained and
    recomputing everything make_codec.py computes reproduces codes.i32
    exactly, every .f32 file to 1e-5 x max(1, |ref|), and trace.json (floats
    to 1e-4 relative; package versions differing only warn);
  * independently of torch, numpy recomputes from the stored tensors and
    stage files: the split-RVQ decode, pre_conv (causal k 3), the first
    upsample transposed conv (k = stride), the last SnakeBeta and the final
    causal conv + clamp -- i.e. the semantics README.md states.
"""

import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_codec as M  # noqa: E402

FAILS = []


def fail(msg):
    FAILS.append(msg)
    print("FAIL:", msg)


def cmp_json(a, b, where):
    if where.startswith("trace.versions"):
        if a != b:
            print(f"warning: {where}: {a!r} (stored) != {b!r} (installed)")
        return
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            fail(f"{where}: keys differ: {sorted(set(a) ^ set(b))}")
        for k in sorted(set(a) & set(b)):
            cmp_json(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            fail(f"{where}: length {len(a)} != {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b)):
            cmp_json(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))
                and math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-5)):
            fail(f"{where}: {a} != {b}")
    elif a != b:
        fail(f"{where}: {a!r} != {b!r}")


def f32(path, fn):
    return np.fromfile(os.path.join(path, fn), dtype="<f4")


def check_static(path, spec, limit):
    import torch
    from safetensors import safe_open
    total = M.dir_bytes(path)
    if limit and total >= M.MAX_DIR_BYTES:
        fail(f"{path}: {total} bytes >= {M.MAX_DIR_BYTES}")
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "qwen3_tts_tokenizer_12hz":
        fail(f"{path}: model_type {cfg.get('model_type')}")
    dc = cfg.get("decoder_config", {})
    for k, v in spec["decoder"].items():
        if dc.get(k) != v:
            fail(f"{path}: decoder_config.{k} = {dc.get(k)!r}, spec {v!r}")
    up = M.total_upsample(spec["decoder"])
    if cfg.get("decode_upsample_rate") != up or cfg.get("output_sample_rate") != 24000:
        fail(f"{path}: decode_upsample_rate {cfg.get('decode_upsample_rate')} != {up} "
             f"or output_sample_rate {cfg.get('output_sample_rate')} != 24000")

    fresh, small = M.build_decoder(spec)
    want = M.published_state(fresh)
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
        names = set(f.keys())
        if names != set(want):
            fail(f"{path}: tensor names differ: missing {sorted(set(want) - names)[:5]} "
                 f"extra {sorted(names - set(want))[:5]}")
        for n in sorted(names & set(want)):
            t = f.get_tensor(n)
            if t.dtype != torch.float32:
                fail(f"{path}: {n} is {t.dtype}, want float32")
            elif tuple(t.shape) != tuple(want[n].shape):
                fail(f"{path}: {n} shape {tuple(t.shape)} != {tuple(want[n].shape)}")
            elif not torch.equal(t, want[n]):
                fail(f"{path}: {n} differs from a fresh draw with seed "
                     f"{spec['seeds']['weights']}")
    if any(n.startswith("encoder.") for n in names):
        fail(f"{path}: encoder tensors present")
    return small


def causal_conv(x, w, b, dilation=1):
    """x [Cin, L], w [Cout, Cin, k]: left-pad (k-1)*dilation zeros, stride 1."""
    cout, cin, k = w.shape
    L = x.shape[1]
    pad = (k - 1) * dilation
    xp = np.concatenate([np.zeros((cin, pad), np.float64), x], axis=1)
    y = np.tile(b[:, None], (1, L)).astype(np.float64)
    for j in range(k):
        y += w[:, :, j] @ xp[:, j * dilation: j * dilation + L]
    return y


def check_numpy(path, trace):
    """Recompute a few stages from the stored tensors with numpy (float64)."""
    from safetensors.numpy import load_file
    W = {k: v.astype(np.float64) for k, v in load_file(os.path.join(path, "model.safetensors")).items()}
    st = {s["name"]: f32(path, s["file"]).reshape(s["shape"]).astype(np.float64)
          for s in trace["stages"]}
    T, Q = trace["frames"], trace["dims"]["num_quantizers"]
    codes = np.fromfile(os.path.join(path, "codes.i32"), dtype="<i4").reshape(T, Q)

    def close(name, got, ref, tol=1e-4):
        err = float(np.abs(got - ref).max() / max(1.0, np.abs(ref).max()))
        if err > tol:
            fail(f"{path}: numpy {name}: rel max err {err:.2e} > {tol}")
        return err

    # split RVQ: codebook = embedding_sum / max(cluster_usage, 1e-5); rvq_first
    # decodes c0, rvq_rest c1..c15; each group summed, then its own output_proj
    # (1x1 conv, no bias); the two results added.
    def group(prefix, qs):
        acc = 0
        for i, q in enumerate(qs):
            cb = f"{prefix}.vq.layers.{i}._codebook"
            emb = W[cb + ".embedding_sum"] / np.maximum(W[cb + ".cluster_usage"], 1e-5)[:, None]
            acc = acc + emb[codes[:, q]].T                           # [D, T]
        return W[prefix + ".output_proj.weight"][:, :, 0] @ acc
    rvq = group("decoder.quantizer.rvq_first", [0]) + group("decoder.quantizer.rvq_rest", range(1, Q))
    close("rvq", rvq, st["rvq"])
    close("pre_conv", causal_conv(st["rvq"], W["decoder.pre_conv.conv.weight"],
                                  W["decoder.pre_conv.conv.bias"]), st["pre_conv"])

    # ConvTranspose1d with k == stride: each input frame writes stride samples.
    w = W["decoder.upsample.0.0.conv.weight"]                       # [in, out, k]
    x = st["pre_transformer"]
    k = w.shape[2]
    y = np.einsum("it,iok->otk", x, w).reshape(w.shape[1], -1) + W["decoder.upsample.0.0.conv.bias"][:, None]
    close("upsample.0.transconv", y, st["upsample.0.transconv"])

    # last SnakeBeta: x + 1/(exp(beta) + 1e-9) * sin(exp(alpha) x)^2, then the
    # causal conv k 7 to one channel and the clamp.
    names = [s["name"] for s in trace["stages"]]
    snake, last = names[-2], names[-1]
    idx = snake.split(".")[1]
    a, b = W[f"decoder.decoder.{idx}.alpha"], W[f"decoder.decoder.{idx}.beta"]
    x = st[names[-3]]
    sn = x + 1.0 / (np.exp(b)[:, None] + 1e-9) * np.sin(np.exp(a)[:, None] * x) ** 2
    close("snake", sn, st[snake])
    li = last.split(".")[1]
    y = causal_conv(st[snake], W[f"decoder.decoder.{li}.conv.weight"], W[f"decoder.decoder.{li}.conv.bias"])
    close("final conv", y, st[last])
    pcm = f32(path, "pcm.f32").astype(np.float64)
    close("clamp", np.clip(st[last][0], -1, 1), pcm, tol=0)


def check(name, out_dir, limit):
    spec = dict(M.SPECS[name], name=name)
    path = os.path.join(out_dir, name)
    if not os.path.isdir(path):
        fail(f"{path}: missing")
        return
    n0 = len(FAILS)
    small = check_static(path, spec, limit)
    with open(os.path.join(path, "trace.json")) as f:
        stored = json.load(f)
    model = M.load_reference(path)
    trace, arrays, codes = M.compute(model, spec, small)
    cmp_json(stored, json.loads(json.dumps(trace)), "trace")
    got = np.fromfile(os.path.join(path, "codes.i32"), dtype="<i4")
    if not np.array_equal(got, codes.numpy().astype("<i4").ravel()):
        fail(f"{path}: codes.i32 differs")
    for fn, t in sorted(arrays.items()):
        ref = f32(path, fn)
        new = M.to_f32(t).ravel()
        if ref.shape != new.shape:
            fail(f"{path}/{fn}: {ref.size} values, recomputed {new.size}")
            continue
        err = float(np.abs(ref - new).max())
        if err > 1e-5 * max(1.0, float(np.abs(ref).max())):
            fail(f"{path}/{fn}: max abs diff {err:.3g}")
    listed = {"config.json", "model.safetensors", "trace.json", "codes.i32"} | set(arrays)
    extra = set(os.listdir(path)) - listed
    if extra:
        fail(f"{path}: unexpected files {sorted(extra)}")
    check_numpy(path, stored)
    st = stored["pcm_stats"]
    print(f"{name}: {'ok' if len(FAILS) == n0 else 'FAILED'} ({M.dir_bytes(path)} bytes, "
          f"clamped {st['clamped_fraction']}, chunked diff {stored['chunked']['max_abs_diff_vs_pcm']:.3g})")


def main():
    M.setup_torch()
    args = sys.argv[1:]
    if "--published" in args:
        i = args.index("--published")
        check("codec_pub_layout", os.path.abspath(args[i + 1]), limit=False)
    else:
        check("codec_tiny", M.OUT_DIR, limit=True)
    if FAILS:
        print(f"{len(FAILS)} failure(s)")
        sys.exit(1)


if __name__ == "__main__":
    main()
