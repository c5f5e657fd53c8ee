#!/usr/bin/env python3
"""speechc's tokenizer on the real Qwen vocabulary, against HF `tokenizers`
and `tiktoken`.  Not run by ctest: it needs the vocabulary, which stays out
of the repository.

The `dashscope` SDK ships Qwen's BPE as qwen.tiktoken (base64 token bytes
and rank; rank order is merge order).  This script turns it into
vocab.json + merges.txt + tokenizer_config.json (with Qwen's special
tokens) in OUT_DIR and tokenizer.json in OUT_DIR/single, the same way transformers'
TikTokenConverter does, and requires the ids of speechc, of HF tokenizers
with Qwen2's pipeline, and of tiktoken (on the NFC text: tiktoken does no
normalization) to be identical, for both file forms, on every string of make_tokenizer.py's
corpus and on its 1 MB text.

  python3 -m venv /work/venv-tok
  /work/venv-tok/bin/pip install tokenizers==0.21.1 dashscope tiktoken
  /work/venv-tok/bin/python tests/parity/check_qwen_vocab.py build/speechc /tmp/qwen_vocab
"""
import base64, json, os, subprocess, sys, tempfile, time, unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tokenizer import CASES, QWEN2_PATTERN, SPECIAL, big_text  # noqa: E402

import dashscope
import tiktoken
from tokenizers import Tokenizer, Regex, models, normalizers, pre_tokenizers, decoders
from tokenizers import AddedToken

QWEN_EXTRA = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_qwen_vocab.py path/to/speechc OUT_DIR")
    speechc, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    path = os.path.join(os.path.dirname(dashscope.__file__), "resources", "qwen.tiktoken")
    ranks = {}
    for line in open(path, "rb"):
        if line.strip():
            tok, rank = line.split()
            ranks[base64.b64decode(tok)] = int(rank)
    b2u = bytes_to_unicode()
    enc = lambda b: "".join(b2u[x] for x in b)
    vocab = {enc(b): r for b, r in ranks.items()}
    merges = []
    for b, r in ranks.items():
        if len(b) == 1:
            continue
        local = [(b[:i], b[i:], r) for i in range(1, len(b)) if b[:i] in ranks and b[i:] in ranks]
        local.sort(key=lambda m: (ranks[m[0]], ranks[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2])
    n = len(ranks)
    special = {s: n + i for i, s in enumerate(SPECIAL)}  # 151643 <|endoftext|>, ...
    with open(os.path.join(out, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w") as f:
        f.write("#version: 0.2\n")
        for a, b, _ in merges:
            f.write(enc(a) + " " + enc(b) + "\n")
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"added_tokens_decoder": {str(i): {"content": s, "special": True, "normalized": False,
                                                     "lstrip": False, "rstrip": False, "single_word": False}
                                            for s, i in special.items()}}, f)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[(enc(a), enc(b)) for a, b, _ in merges],
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL])
    assert all(tok.token_to_id(s) == i for s, i in special.items())
    os.makedirs(os.path.join(out, "single"), exist_ok=True)
    tok.save(os.path.join(out, "single", "tokenizer.json"))  # the one-file form
    tt = tiktoken.Encoding("qwen", pat_str=QWEN2_PATTERN, mergeable_ranks=ranks, special_tokens=special)
    texts = CASES + [big_text()]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for k, t in enumerate(texts):
            fn = os.path.join(tmp, "t.txt")
            with open(fn, "w") as f:
                f.write(t)
            t0 = time.perf_counter()
            hf = tok.encode(t, add_special_tokens=False).ids
            dt_hf = time.perf_counter() - t0
            ti = tt.encode(unicodedata.normalize("NFC", t), allowed_special="all")
            t0 = time.perf_counter()
            r = subprocess.run([speechc, "tokenize", out, "--file", fn], capture_output=True, text=True)
            dt_c = time.perf_counter() - t0
            c = [int(x) for x in r.stdout.strip().split(",")] if r.stdout.strip() else []
            r1 = subprocess.run([speechc, "tokenize", os.path.join(out, "single"), "--file", fn],
                                capture_output=True, text=True)
            c1 = [int(x) for x in r1.stdout.strip().split(",")] if r1.stdout.strip() else []
            if r.returncode or r1.returncode or c != hf or c1 != hf or ti != hf:
                bad += 1
                print("DIFF case %d %r\n  HF %s\n  tiktoken %s\n  speechc %s %s" %
                      (k, t[:60], hf[:20], ti[:20], c[:20], r.stderr.strip()))
            if k == len(texts) - 1:
                print("1 MB text: %d ids; HF tokenizers %.3f s (%.0f tokens/s); speechc tokenize "
                      "(process, load included) %.3f s" % (len(hf), dt_hf, len(hf) / dt_hf, dt_c))
    print("%d strings, %d differ (vocabulary of %d tokens, %d merges)" %
          (len(texts), bad, len(vocab), len(merges)))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
