#!/usr/bin/env python3
"""Time the official PyTorch 12 Hz codec decoder (qwen-tts 0.1.1,
Qwen3TTSTokenizerV2Model) on CPU on a fixed code sequence, the way
`speechc decode` times ours.  Speed only when the weights are random.

    /work/venv/bin/python bench/peer_torch_codec.py DIR CODES.i32 \
        [--threads 2] [--mode decode|forward] [--warmup 4] [--out OUT.f32]

DIR        a speech tokenizer directory the official class loads
           (tests/parity/make_codec.py --published writes one)
CODES.i32  raw little-endian int32 [frames, 16]
--mode     decode: Qwen3TTSTokenizerV2Model.decode (the official entry point:
           chunks of 300 frames with 25 frames of left context; for <= 300
           frames that is one forward); forward: the decoder's forward over
           all frames at once (full causal state)
--warmup   frames of a first untimed call (0: none), so one-time costs
           (allocator, oneDNN primitive creation) are not counted

Prints one line:
  torch decode: N frames -> S s of audio in W s (F frames/s; real-time factor R) ...
Model loading is not timed.  Attention: the class's default implementation
(printed), float32, torch.set_num_threads(--threads).
"""
import argparse, sys, time, warnings

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("codes")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mode", choices=["decode", "forward"], default="decode")
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--out")
    a = ap.parse_args()

    import torch
    torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    warnings.filterwarnings("ignore")
    import transformers
    transformers.logging.set_verbosity_error()
    from qwen_tts.core.tokenizer_12hz import modeling_qwen3_tts_tokenizer_v2 as M

    model = M.Qwen3TTSTokenizerV2Model.from_pretrained(a.dir, dtype=torch.float32).eval()
    attn = model.decoder.pre_transformer.config._attn_implementation
    codes = torch.from_numpy(np.fromfile(a.codes, dtype="<i4").reshape(-1, 16).astype(np.int64))
    rate = int(model.decoder.total_upsample)

    def run(c):
        if a.mode == "decode":
            return model.decode(c[None], return_dict=True).audio_values[0]
        return model.decoder(c.T[None])[0, 0]

    if a.warmup:
        run(codes[: a.warmup])
    t0 = time.perf_counter()
    wav = run(codes)
    secs = time.perf_counter() - t0
    n = codes.shape[0]
    audio = n * rate / 24000.0
    print(f"torch decode: {n} frames -> {audio:.2f} s of audio in {secs:.3f} s "
          f"({n / secs:.1f} frames/s; real-time factor {secs / audio:.3f}) mode {a.mode} "
          f"threads {torch.get_num_threads()} attn {attn} torch {torch.__version__}")
    if a.out:
        wav.float().numpy().astype("<f4").tofile(a.out)


if __name__ == "__main__":
    sys.exit(main())
