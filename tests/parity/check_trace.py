#!/usr/bin/env python3
"""Self-check of the data written by make_llm.py.

Run:  /work/venv/bin/python tests/parity/check_trace.py [name ...]

For every tests/data/llm/<name>/ (or just the names given) it reloads the
checkpoint with transformers (eager attention, float32 compute), recomputes
the greedy continuation and the full-sequence logits, and compares them with
trace.json / logits.f32 (max abs diff < 1e-5). It also checks the stored
tensor dtypes, the shard index and the checkpoint size. Exits non-zero on
any mismatch.
"""

import json
import os
import struct
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA_DIR = os.path.join(ROOT, "tests", "data", "llm")
TOL = 1e-5
MIN_MARGIN = 1e-3
MAX_BYTES = 1 << 20

ST_DTYPE = {"float32": "F32", "bfloat16": "BF16"}
TORCH_DTYPE = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def safetensors_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def check_files(path, trace, errors):
    files = os.listdir(path)
    total = sum(os.path.getsize(os.path.join(path, f)) for f in files)
    if total >= MAX_BYTES:
        errors.append(f"directory is {total} bytes (>= 1 MiB)")
    if "generation_config.json" in files:
        errors.append("generation_config.json present")

    idx_path = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(idx_path):
        with open(idx_path) as f:
            weight_map = json.load(f)["weight_map"]
        shards = sorted(set(weight_map.values()))
    else:
        shards, weight_map = ["model.safetensors"], None
    st_files = sorted(f for f in files if f.endswith(".safetensors"))
    if st_files != shards:
        errors.append(f"safetensors files {st_files} != expected {shards}")
        return

    want = ST_DTYPE[trace["dtype_stored"]]
    seen = {}
    for shard in shards:
        hdr = safetensors_header(os.path.join(path, shard))
        for name, info in hdr.items():
            if name == "__metadata__":
                continue
            if info["dtype"] != want:
                errors.append(f"{shard}:{name} dtype {info['dtype']} != {want}")
            seen[name] = shard
    if weight_map is not None and seen != weight_map:
        errors.append("index weight_map does not match shard contents")

    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("tie_word_embeddings") and "lm_head.weight" in seen:
        errors.append("tied model stores lm_head.weight")
    if not cfg.get("tie_word_embeddings") and "lm_head.weight" not in seen:
        errors.append("untied model lacks lm_head.weight")
    for key in ("dtype", "torch_dtype"):
        if cfg.get(key) != trace["dtype_stored"]:
            errors.append(f"config {key}={cfg.get(key)} != {trace['dtype_stored']}")


def check_model(name):
    path = os.path.join(DATA_DIR, name)
    errors = []
    with open(os.path.join(path, "trace.json")) as f:
        trace = json.load(f)
    if trace["model"] != name:
        errors.append(f"trace model {trace['model']} != {name}")
    prompt, greedy = trace["prompt"], trace["greedy"]
    n_rows, vocab = trace["n_rows"], trace["vocab"]
    if n_rows != len(prompt) + len(greedy) - 1:
        errors.append("n_rows != len(prompt) + len(greedy) - 1")

    check_files(path, trace, errors)

    ref = np.fromfile(os.path.join(path, trace["logits_file"]), dtype="<f4")
    if ref.size != n_rows * vocab:
        errors.append(f"logits has {ref.size} floats, want {n_rows * vocab}")
        return errors, None
    ref = ref.reshape(n_rows, vocab)

    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=TORCH_DTYPE[trace["dtype_stored"]], attn_implementation="eager"
    ).float().eval()
    cls = type(model).__name__
    want_src = f"transformers {transformers.__version__} {cls}"
    if trace["source"] != want_src:
        errors.append(f"source {trace['source']!r} != {want_src!r}")
    if model.config.vocab_size != vocab:
        errors.append(f"config vocab {model.config.vocab_size} != {vocab}")

    # Greedy continuation.
    ids = list(prompt)
    for i, tok in enumerate(greedy):
        logits = model(torch.tensor([ids]), use_cache=False).logits[0, -1]
        got = int(torch.argmax(logits))
        if got != tok:
            errors.append(f"greedy[{i}] = {got}, trace has {tok}")
            break
        ids.append(got)

    # Full forward.
    full = model(torch.tensor([prompt + greedy[:-1]]), use_cache=False).logits[0]
    full = full.float().numpy()
    diff = float(np.abs(full - ref).max())
    if not diff < TOL:
        errors.append(f"logits max abs diff {diff:.3g} >= {TOL}")

    margin = float("inf")
    for i, tok in enumerate(greedy):
        row = ref[len(prompt) - 1 + i]
        if int(np.argmax(row)) != tok:
            errors.append(f"argmax(logits row {len(prompt) - 1 + i}) != greedy[{i}]")
        s = np.sort(row)
        margin = min(margin, float(s[-1] - s[-2]))
    if not margin > MIN_MARGIN:
        errors.append(f"min top1-top2 margin {margin:.3g} <= {MIN_MARGIN}")
    return errors, (diff, margin)


def main():
    torch.set_num_threads(1)
    torch.set_grad_enabled(False)
    names = sys.argv[1:] or sorted(
        d for d in os.listdir(DATA_DIR)
        if os.path.exists(os.path.join(DATA_DIR, d, "trace.json"))
    )
    if not names:
        print("no traces found under", DATA_DIR)
        return 1
    failed = 0
    for name in names:
        errors, stats = check_model(name)
        if errors:
            failed += 1
            print(f"FAIL {name}")
            for e in errors:
                print("   ", e)
        else:
            print(f"ok   {name}: max|diff|={stats[0]:.3g} min_margin={stats[1]:.4f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
