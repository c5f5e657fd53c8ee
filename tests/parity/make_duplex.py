#!/usr/bin/env python3
"""A tiny Moshi checkpoint with its Mimi, and what the moshi package's
run_inference loop makes of a short WAV with it: the reference of
`speechc moshi model.so --input in.wav -o reply.wav --greedy`.

    /work/venv-moshi/bin/python tests/parity/make_duplex.py          # write
    /work/venv-moshi/bin/python tests/parity/make_duplex.py --check  # recompute, compare

tests/data/moshi/duplex_tiny/ gets
  config.json        the LM's arguments (the 7B's switches, tiny widths, 4 + 4
                     audio streams of card 32) plus moshi_name, mimi_name,
                     mimi_config_name, model_type, as CheckpointInfo reads them
  model.safetensors  the LM (every parameter random, make_moshi.randomize)
  mimi.safetensors   tests/data/mimi/mimi_tiny's weights (32-entry codebooks)
  mimi_config.json   that Mimi's config, as get_mimi takes it
  in.wav             tests/data/mimi/mimi_tiny/enc_in.wav (8 frames, 24 kHz)
  tokens.i32         int32 [R, 1 + dep_q]: every row LMGen.step returned (greedy)
  reply.f32          float32 [R * 1920]: mimi.decode of each row's audio codes
  trace.json         dims, versions

The loop is moshi.run_inference's InferenceState.run: Mimi and LMGen
streaming, one 1920-sample frame encoded per step, the first frame stepped
twice, every returned row's audio decoded by the same streaming Mimi.
Nothing here reimplements the model: every number is the package's.
"""

import json
import os
import shutil
import sys

import numpy as np
import torch
from safetensors.torch import save_file

import moshi
from moshi.models import lm, loaders

sys.path.insert(0, os.path.dirname(__file__))
from make_moshi import randomize  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MIMI = os.path.join(ROOT, "tests", "data", "mimi", "mimi_tiny")
OUT = os.path.join(ROOT, "tests", "data", "moshi", "duplex_tiny")

LM = dict(dim=16, text_card=40, existing_text_padding_id=3, n_q=8, dep_q=4, card=32,
          num_heads=2, num_layers=2, hidden_scale=4.125, causal=True, layer_scale=None,
          context=6, max_period=10000, gating="silu", norm="rms_norm_f32",
          positional_embedding="rope", depformer_dim=8, depformer_dim_feedforward=int(4.125 * 8),
          depformer_num_heads=2, depformer_num_layers=1, depformer_layer_scale=None,
          depformer_multi_linear=True, depformer_context=8, depformer_max_period=10000,
          depformer_gating="silu", depformer_pos_emb="none", depformer_weights_per_step=True,
          delays=[0, 0, 1, 1, 1, 0, 1, 1, 1])
SEED = 5


def read_wav16(path):
    import wave
    with wave.open(path, "rb") as w:
        assert w.getframerate() == 24000 and w.getnchannels() == 1 and w.getsampwidth() == 2
        q = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return torch.from_numpy(q.astype(np.float32) / 32768.0)


def run(model, mimi, pcm):
    """run_inference's loop, greedy: (rows [R, 1 + dep_q], reply PCM)."""
    gen = lm.LMGen(model, use_sampling=False)
    mimi.streaming_forever(1)
    gen.streaming_forever(1)
    frame = int(mimi.sample_rate / mimi.frame_rate)
    rows, out = [], []
    first = True
    with torch.no_grad():
        for chunk in pcm.view(1, 1, -1).split(frame, dim=2):
            if chunk.shape[-1] != frame:
                continue
            codes = mimi.encode(chunk)
            if first:
                tokens = gen.step(codes)
                assert tokens is None
                first = False
            tokens = gen.step(codes)
            if tokens is None:
                continue
            rows.append(tokens[0, :, 0].tolist())
            out.append(mimi.decode(tokens[:, 1:])[0, 0])
    return np.array(rows, dtype=np.int32), torch.cat(out).numpy().astype(np.float32)


def main():
    check = "--check" in sys.argv
    torch.manual_seed(SEED)
    model = lm.LMModel(**LM).eval()
    randomize(model, SEED + 100)
    with open(os.path.join(MIMI, "config.json")) as f:
        mcfg = json.load(f)
    mimi_cfg = {k: v for k, v in mcfg.items() if k not in ("model_type", "num_codebooks")}
    K = max(LM["dep_q"], LM["n_q"] - LM["dep_q"])
    mimi = loaders.get_mimi(os.path.join(MIMI, "model.safetensors"), mimi_cfg, num_codebooks=K).eval()
    assert mimi.cardinality == LM["card"], (mimi.cardinality, LM["card"])
    pcm = read_wav16(os.path.join(MIMI, "enc_in.wav"))
    rows, reply = run(model, mimi, pcm)
    if check:
        want_rows = np.fromfile(os.path.join(OUT, "tokens.i32"), dtype=np.int32).reshape(rows.shape)
        want = np.fromfile(os.path.join(OUT, "reply.f32"), dtype=np.float32)
        ok = (rows == want_rows).all() and np.abs(reply - want).max() <= 1e-6
        print("duplex_tiny:", "same" if ok else "DIFFERENT")
        return 0 if ok else 1
    os.makedirs(OUT, exist_ok=True)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(OUT, "model.safetensors"))
    shutil.copyfile(os.path.join(MIMI, "model.safetensors"), os.path.join(OUT, "mimi.safetensors"))
    shutil.copyfile(os.path.join(MIMI, "enc_in.wav"), os.path.join(OUT, "in.wav"))
    with open(os.path.join(OUT, "mimi_config.json"), "w") as f:
        json.dump(mimi_cfg, f, indent=1)
    cfg = dict(LM, model_type="moshi", moshi_name="model.safetensors", mimi_name="mimi.safetensors",
               mimi_config_name="mimi_config.json")
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    rows.tofile(os.path.join(OUT, "tokens.i32"))
    reply.tofile(os.path.join(OUT, "reply.f32"))
    trace = dict(moshi_version=moshi.__version__, torch_version=torch.__version__, rows=int(rows.shape[0]),
                 cols=int(rows.shape[1]), samples=int(reply.shape[0]), frames_in=int(pcm.shape[0] // 1920),
                 seed=SEED)
    with open(os.path.join(OUT, "trace.json"), "w") as f:
        json.dump(trace, f, indent=1)
    print(f"duplex_tiny: {rows.shape[0]} rows, {reply.shape[0]} samples, text {rows[:, 0].tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
