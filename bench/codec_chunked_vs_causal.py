#!/usr/bin/env python3
"""What the official chunked decode changes past 300 frames, and whether
speechc equals the full causal forward there (issue 14, section 2).

    /work/venv/bin/python bench/codec_chunked_vs_causal.py DIR \
        [--frames 400] [--seed 400] [--threads 2] \
        [--speechc build/speechc --artifact codec.so [--chunk N ...]]

DIR: an official-layout speech tokenizer directory with the published shapes
(tests/parity/make_codec.py --published writes codec_pub_layout: random
weights drawn so every stage carries signal).  FRAMES random frames (uniform
codes from --seed) are decoded three ways:

  chunked   Qwen3TTSTokenizerV2Model.decode(codes): the official entry point,
            Qwen3TTSTokenizerV2Decoder.chunked_decode with chunks of 300 frames
            and 25 frames of left context (each chunk decoded from scratch: zero
            conv state, attention sees only the chunk)
  full      Qwen3TTSTokenizerV2Decoder.forward over all frames at once: every
            frame sees its whole causal past (what speechc computes)
  speechc   `speechc decode ARTIFACT codes --f32` (an artifact built from DIR),
            once per --chunk (frames per call; default the artifact's largest)

and compared: max abs and RMS difference, overall, before frame 300 and
after it (and in bands of frames after it), with the signal's RMS and the
SNR in dB; speechc against full also as max abs diff / max |full| (the
issue's "1e-4 relative").  float32, CPU, eager attention.
"""
import argparse, os, subprocess, sys, tempfile, warnings

import numpy as np


def stats(a, b):
    d = a.astype(np.float64) - b.astype(np.float64)
    rms_d = float(np.sqrt(np.mean(d ** 2))) if d.size else 0.0
    rms_s = float(np.sqrt(np.mean(b.astype(np.float64) ** 2))) if b.size else 0.0
    snr = 10 * np.log10(rms_s ** 2 / rms_d ** 2) if rms_d > 0 else float("inf")
    return float(np.abs(d).max()) if d.size else 0.0, rms_d, rms_s, snr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--frames", type=int, default=400)
    ap.add_argument("--seed", type=int, default=400)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--speechc")
    ap.add_argument("--artifact")
    ap.add_argument("--chunk", type=int, action="append")
    a = ap.parse_args()

    import torch
    torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    warnings.filterwarnings("ignore")
    import transformers
    transformers.logging.set_verbosity_error()
    from qwen_tts.core.tokenizer_12hz import modeling_qwen3_tts_tokenizer_v2 as M

    model = M.Qwen3TTSTokenizerV2Model.from_pretrained(
        a.dir, dtype=torch.float32, attn_implementation="eager").eval()
    dec = model.decoder
    up = int(dec.total_upsample)
    rng = np.random.default_rng(a.seed)
    codes = rng.integers(0, dec.config.codebook_size, size=(a.frames, 16)).astype(np.int32)
    ct = torch.from_numpy(codes.astype(np.int64))

    chunked = model.decode(ct[None], return_dict=True).audio_values[0].numpy()
    full = dec(ct.T[None])[0, 0].numpy()
    assert chunked.shape == full.shape == (a.frames * up,), (chunked.shape, full.shape)
    cut = 300 * up
    print(f"# {a.dir}: {a.frames} random frames (seed {a.seed}), {up} samples per frame, "
          f"torch {torch.__version__}, {a.threads} threads")
    print("chunked (official decode: 300 + 25 left context) vs full forward:")
    print(f"  {'samples':<22} {'max abs diff':>12} {'RMS diff':>10} {'signal RMS':>10} {'SNR dB':>8}")
    spans = [("all", 0, a.frames), ("frames 0-299", 0, 300), ("frames 300-end", 300, a.frames)]
    spans += [(f"frames {s}-{e - 1}", s, e) for s, e in
              ((300, 301), (300, 310), (310, 325), (325, 350), (350, 375), (375, a.frames)) if e <= a.frames]
    for name, s, e in spans:
        m, r, sig, snr = stats(chunked[s * up:e * up], full[s * up:e * up])
        print(f"  {name:<22} {m:>12.4g} {r:>10.4g} {sig:>10.4g} {snr:>8.1f}")

    if a.speechc and a.artifact:
        with tempfile.TemporaryDirectory() as tmp:
            cp = os.path.join(tmp, "codes.i32")
            codes.astype("<i4").tofile(cp)
            for chunk in a.chunk or [0]:
                out = os.path.join(tmp, "out.raw")
                cmd = [a.speechc, "decode", a.artifact, cp, "-o", out, "--f32", "-q",
                       "--threads", str(a.threads)] + (["--chunk", str(chunk)] if chunk else [])
                subprocess.run(cmd, check=True)
                pcm = np.fromfile(out, "<f4")
                assert pcm.shape == full.shape, pcm.shape
                label = f"speechc --chunk {chunk}" if chunk else "speechc (artifact's chunk)"
                for ref_name, ref in (("full", full), ("chunked", chunked)):
                    for name, s, e in spans[:3]:
                        m, r, sig, snr = stats(pcm[s * up:e * up], ref[s * up:e * up])
                        rel = m / float(np.abs(ref[s * up:e * up]).max())
                        print(f"{label} vs {ref_name:<7} {name:<16} max abs {m:.3g} "
                              f"(relative to max |{ref_name}| {rel:.3g}), RMS {r:.3g}, SNR {snr:.1f} dB")


if __name__ == "__main__":
    sys.exit(main())
