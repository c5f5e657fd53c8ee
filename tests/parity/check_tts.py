#!/usr/bin/env python3
"""Re-run the official Qwen3-TTS code on tests/data/tts/* and verify the
saved traces.  Exit status 1 on any mismatch.

Run:  /work/venv/bin/python tests/parity/check_tts.py [names...]
      (needs `pip install qwen-tts==0.1.1`)

Checks, per checkpoint directory:
  * directory < 2,000,000 bytes; config.json has model_type qwen3_tts and the
    remapped special ids; model.safetensors is all bf16 with exactly the
    tensor names the official model expects (published names), with
    talker.code_predictor.small_to_mtp_projection.* present iff the
    predictor hidden differs from the talker hidden;
  * reloading with the official classes (clean loading info) and recomputing
    everything make_tts.py computes (generate() in both text modes with
    hooks, the layout / per-frame-input / logits-processor cross-checks,
    teacher-forced logits) reproduces trace.json (integers exactly, floats to
    1e-4 relative) and every .f32 file (max abs diff <= 1e-5 x max(1, |ref|));
  * every greedy margin > MIN_MARGIN, codes in range, EOS semantics.
"""

import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_tts as M  # noqa: E402

FAILS = []


def fail(msg):
    FAILS.append(msg)
    print("FAIL:", msg)


def cmp_json(a, b, where):
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
                and math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)):
            fail(f"{where}: {a} != {b}")
    elif a != b:
        fail(f"{where}: {a!r} != {b!r}")


def check_static(path, spec, trace):
    import torch
    from safetensors import safe_open
    total = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    if total >= M.MAX_DIR_BYTES:
        fail(f"{path}: {total} bytes >= {M.MAX_DIR_BYTES}")
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "qwen3_tts":
        fail(f"{path}: model_type {cfg.get('model_type')}")
    for k in ("im_start", "im_end", "tts_pad", "tts_bos", "tts_eos"):
        if cfg.get(f"{k}_token_id") != M.TEXT_IDS[k]:
            fail(f"{path}: {k}_token_id {cfg.get(f'{k}_token_id')} != {M.TEXT_IDS[k]}")
    tc = cfg["talker_config"]
    for k, v in M.CODEC_IDS.items():
        if tc.get(k) != v:
            fail(f"{path}: talker_config.{k} {tc.get(k)} != {v}")
    if tc.get("spk_id") != M.SPK_ID or tc.get("codec_language_id") != M.LANGUAGE_IDS:
        fail(f"{path}: spk_id / codec_language_id differ")

    model = M.build_model(spec, trace["seed"])   # random weights; only names/shapes used
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
        have = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
        dtypes = {f.get_slice(k).get_dtype() for k in f.keys()}
    if have != want:
        fail(f"{path}: tensor names/shapes differ: {sorted(set(have.items()) ^ set(want.items()))[:8]}")
    if dtypes != {"BF16"}:
        fail(f"{path}: stored dtypes {dtypes}")
    prefixes = ("talker.model.", "talker.code_predictor.", "talker.text_projection.",
                "talker.codec_head.")
    odd = [k for k in have if not k.startswith(prefixes)]
    if odd:
        fail(f"{path}: unexpected tensors {odd}")
    proj = any(k.startswith("talker.code_predictor.small_to_mtp_projection.") for k in have)
    differs = spec["talker"]["hidden_size"] != spec["predictor"]["hidden_size"]
    if proj != differs:
        fail(f"{path}: small_to_mtp_projection present={proj}, hidden sizes differ={differs}")
    del model, torch


def check_semantics(path, trace):
    G = trace["dims"]["num_code_groups"]
    Vp = trace["dims"]["predictor_vocab"]
    V = trace["dims"]["codec_vocab"]
    eos = M.CODEC_IDS["codec_eos_token_id"]
    for r in trace["runs"]:
        codes = r["codes"]
        if any(len(c) != G for c in codes):
            fail(f"{path}/{r['name']}: frame width != {G}")
        if any(not (0 <= c[0] < V - 1024) for c in codes):
            fail(f"{path}/{r['name']}: c0 outside [0, {V - 1024})")
        if any(not (0 <= x < Vp) for c in codes for x in c[1:]):
            fail(f"{path}/{r['name']}: c1..c15 outside [0, {Vp})")
        if r["n_frames"] != r["n_talker_steps"] - 1 or len(codes) != r["n_frames"]:
            fail(f"{path}/{r['name']}: frames {r['n_frames']} vs steps {r['n_talker_steps']}")
        if r["stopped_on_eos"] != (r["c0_steps"][-1] == eos):
            fail(f"{path}/{r['name']}: stopped_on_eos inconsistent")
        if not r["stopped_on_eos"] and r["n_frames"] < 12:
            fail(f"{path}/{r['name']}: only {r['n_frames']} frames")
        if min(r["min_margin_c0"], r["min_margin_predictor"]) <= M.MIN_MARGIN:
            fail(f"{path}/{r['name']}: margin <= {M.MIN_MARGIN}")
    if not any(r["stopped_on_eos"] for r in trace["runs"]):
        fail(f"{path}: no run stops on EOS")
    if trace["rep_penalty_flips"] < M.MIN_REP_FLIPS:
        fail(f"{path}: only {trace['rep_penalty_flips']} repetition-penalty flips")


def check_dir(name):
    path = os.path.join(M.OUT_DIR, name)
    spec = next((s for s in M.MODELS if s["name"] == name), None)
    if spec is None:
        fail(f"{name}: no spec in make_tts.MODELS")
        return
    with open(os.path.join(path, "trace.json")) as f:
        trace = json.load(f)
    n0 = len(FAILS)
    check_static(path, spec, trace)
    check_semantics(path, trace)

    ref = M.load_reference(path)
    new_trace, arrays = M.compute(ref, dict(spec, seed=trace["seed"]))
    cmp_json(new_trace, trace, name)
    stored = sorted(f for f in os.listdir(path) if f.endswith(".f32"))
    if stored != sorted(arrays):
        fail(f"{name}: .f32 files {stored} != {sorted(arrays)}")
    worst = 0.0
    for fn, t in sorted(arrays.items()):
        fp = os.path.join(path, fn)
        if not os.path.exists(fp):
            continue
        want = M.to_f32(t).reshape(-1)
        have = np.fromfile(fp, dtype="<f4")
        if have.shape != want.shape:
            fail(f"{name}/{fn}: {have.size} floats, expected {want.size}")
            continue
        tol = 1e-5 * max(1.0, float(np.abs(want).max()))
        d = float(np.abs(have - want).max()) if want.size else 0.0
        worst = max(worst, d)
        if not d <= tol:
            fail(f"{name}/{fn}: max abs diff {d} > {tol}")
    status = "ok" if len(FAILS) == n0 else "MISMATCH"
    print(f"{name}: {status} (runs {len(trace['runs'])}, worst f32 diff {worst:.2e}, "
          f"min margin c0 {trace['min_margin_c0']:.4f} predictor {trace['min_margin_predictor']:.4f})")
    return len(FAILS) == n0


def main():
    M.setup_torch()
    only = sys.argv[1:]
    names = only or sorted(d for d in os.listdir(M.OUT_DIR)
                           if os.path.isdir(os.path.join(M.OUT_DIR, d)))
    if not names:
        fail("no checkpoints found")
    passed = 0
    for name in names:
        try:
            passed += bool(check_dir(name))
        except (Exception, SystemExit) as e:  # noqa: BLE001
            fail(f"{name}: {type(e).__name__}: {e}")
    print(f"{passed} passed, {len(names) - passed} failed")
    sys.exit(1 if FAILS or passed != len(names) else 0)


if __name__ == "__main__":
    main()
