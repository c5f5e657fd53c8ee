#!/usr/bin/env python3
"""Reference fixtures for runtime/spm.cc: SentencePiece DecodeIds, as Moshi's
inner monologue text is decoded (its checkpoint's tokenizer_name, a
SentencePiece .model file).

Trains two tiny SentencePiece models with the `sentencepiece` package on a
small text written here (several languages, emoji, digits; no licence
question), and records what the package's DecodeIds gives for many id
sequences, into tests/data/spm/:
  <name>.model   the trained model (the ModelProto file DecodeIds reads)
  <name>.json    {"version", "pieces", "cases": [{"ids": [...],
                   "hex": UTF-8 bytes of DecodeIds(ids) in hex,
                   "text": the same string, for humans} ...,
                 {"ids": [...], "error": "out of range"} ...]}
                 ("hex" because DecodeIds may return U+0000, which a JSON
                 string read by cJSON would cut)

                 unigram_bf.json also holds "moshi_transcripts": what
                 `speechc moshi --greedy --text-out` must write with this
                 model for the greedy rows of tests/data/moshi/*/gen.i32
                 (DecodeIds of the text tokens but 0 and 3, a newline)

  unigram_bf   unigram, byte_fallback, Moshi's special ids (unk 0, bos 1,
               eos 2, pad 3), user-defined and control symbols,
               character_coverage < 1 so that rare characters and emoji
               take the byte pieces
  bpe_nodummy  BPE, byte_fallback, add_dummy_prefix off and
               remove_extra_whitespaces off (the leading-space rule's other
               side), identity normalization (no 240 kB NFKC table: a small
               file), no pad, a control symbol

Id sequences: the encodings of the training text and of unseen text (emoji,
other scripts: byte pieces), every single id, random ids over the whole
vocabulary (control, unknown, user-defined and byte pieces included), runs
of byte pieces that are invalid UTF-8 (lone continuation bytes, truncated
and overlong sequences, surrogates, bytes >= 0xF5) alone, between words and
at the ends; and ids outside the vocabulary, which DecodeIds refuses.

  python3 -m venv /work/venv-spm && /work/venv-spm/bin/pip install sentencepiece
  /work/venv-spm/bin/python tests/parity/make_spm.py           # -> tests/data/spm/
  /work/venv-spm/bin/python tests/parity/make_spm.py --check   # recompute, compare, write nothing
"""
import io
import json
import os
import random
import sys

import sentencepiece as spm

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "spm")

TEXT = [
    "The quick brown fox jumps over the lazy dog. It's what they'll do, isn't it?",
    "Hello world! I'm Moshi, a speech model; we are testing its inner monologue.",
    "Bonjour le monde ! C'est l'été, où êtes-vous ? Ça va très bien, merci beaucoup.",
    "Guten Tag! Die Straße ist schön, und die Bäume blühen. Größe, Übung, Öl.",
    "¡Hola, mundo! ¿Cómo estás? El niño come piñas en España.",
    "Привет, мир! Сегодня хорошая погода. Синтез речи — это интересно.",
    "你好，世界！今天天气很好，我们去公园散步吧。",
    "こんにちは、世界。今日はいい天気ですね。",
    "Numbers 0123456789 and 2024-06-01, 3.14159, 1,000,000 and 42.",
    "Emoji: 😀 🎉 👍🏽 ❤️ 🇫🇷 and a family 👨‍👩‍👧.",
    "[laughs] okay, so um, yeah. <music> well... right?",
]

# Decoded but never trained on: scripts and emoji the vocabulary lacks.
UNSEEN = [
    "Ελληνικά και ελληνικά γράμματα",
    "שלום עולם",
    "مرحبا بالعالم",
    "🦜🦀🧠 ok 🤖",
    "x\u00a0y\u2003z",           # NBSP and EM SPACE (normalized by NFKC)
    "  leading and  double  spaces  ",
    "tab\tnewline\ncarriage\r",
    "ﬁ ligature ① ｆｕｌｌ",       # NFKC changes these
]

MODELS = {
    "unigram_bf": dict(model_type="unigram", vocab_size=420, byte_fallback=True,
                       character_coverage=0.98, unk_id=0, bos_id=1, eos_id=2, pad_id=3,
                       user_defined_symbols=["[laughs]", "<music>", "42"],
                       control_symbols=["<ctl_a>", "<ctl_b>"]),
    "bpe_nodummy": dict(model_type="bpe", vocab_size=520, byte_fallback=True,
                        normalization_rule_name="identity",
                        character_coverage=0.98, add_dummy_prefix=False,
                        remove_extra_whitespaces=False, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
                        user_defined_symbols=["[laughs]"], control_symbols=["<ctl>"]),
}


def train(name, kw):
    buf = io.BytesIO()
    text = TEXT * 3 + [t.lower() for t in TEXT] + [t.upper() for t in TEXT]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=buf,
                                   hard_vocab_limit=False, num_threads=1, minloglevel=2,
                                   **kw)
    return buf.getvalue()


def cases(sp, seed):
    n = sp.get_piece_size()
    rng = random.Random(seed)
    byte_id = {}
    for i in range(n):
        if sp.is_byte(i):
            byte_id[int(sp.id_to_piece(i)[3:5], 16)] = i
    special = [i for i in range(n) if sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i)]
    words = [i for i in range(n) if not sp.is_byte(i) and i not in special]
    seqs = [[]]
    seqs += [sp.encode(t) for t in TEXT + UNSEEN]
    seqs += [[i] for i in range(n)]
    for _ in range(300):
        seqs.append([rng.randrange(n) for _ in range(rng.randrange(1, 24))])
    for _ in range(100):  # mostly pieces, some specials and bytes
        pool = words * 4 + special + list(byte_id.values())
        seqs.append([rng.choice(pool) for _ in range(rng.randrange(1, 16))])

    def b(*vals):
        return [byte_id[v] for v in vals]
    bad = [(0x80,), (0xbf, 0x80), (0xc3,), (0xe2, 0x82), (0xf0, 0x9f, 0x98), (0xc0, 0xaf),
           (0xe0, 0x80, 0xaf), (0xed, 0xa0, 0x80), (0xf5, 0x80, 0x80, 0x80), (0xff,), (0xfe, 0xff),
           (0xf4, 0x90, 0x80, 0x80), (0xc3, 0xa9, 0xa9), (0x00,), (0xe2, 0x82, 0xac),
           (0xf0, 0x9f, 0x98, 0x80), (0xc3, 0x28), (0xe2, 0x28, 0xa1)]
    hello = sp.encode("hello")
    for v in bad:
        seqs.append(b(*v))
        seqs.append(hello + b(*v))
        seqs.append(b(*v) + hello)
        seqs.append(hello + b(*v) + hello)
        seqs.append(b(*v) + special[:1] + b(*v))
    for _ in range(60):
        seqs.append([byte_id[rng.randrange(256)] for _ in range(rng.randrange(1, 10))])
    out = []
    for ids in seqs:
        s = sp.decode_ids(ids)
        out.append({"ids": ids, "hex": s.encode("utf-8").hex(), "text": s})
    for ids in ([n], [-1], [5, n + 7], [2**31 - 1], hello + [-5]):
        try:
            sp.decode_ids(ids)
        except (IndexError, RuntimeError, ValueError):
            out.append({"ids": ids, "error": "out of range"})
        else:
            sys.exit(f"DecodeIds({ids}) did not refuse an id outside [0, {n})")
    return out


def transcripts(sp):
    """What `speechc moshi --text-out` must write for the greedy rows of
    tests/data/moshi/<name>/gen.i32 (make_moshi.py: LMGen's rows) with this
    model as the tokenizer: DecodeIds of the text tokens that run_inference
    prints (all but 0 and 3), then a newline."""
    import struct
    out = {}
    for name in ("family_tiny", "moshi7b_tiny"):
        d = os.path.join(OUT, "..", "moshi", name)
        with open(os.path.join(d, "trace.json")) as f:
            tr = json.load(f)
        R, Q = tr["gen_rows"], tr["dep_q"]
        with open(os.path.join(d, "gen.i32"), "rb") as f:
            rows = struct.unpack(f"<{R * (1 + Q)}i", f.read())
        ids = [rows[r * (1 + Q)] for r in range(R) if rows[r * (1 + Q)] not in (0, 3)]
        out[name] = {"ids": ids, "hex": (sp.decode_ids(ids) + "\n").encode("utf-8").hex()}
    return out


def main():
    check = "--check" in sys.argv[1:]
    os.makedirs(OUT, exist_ok=True)
    bad = 0
    for seed, (name, kw) in enumerate(MODELS.items()):
        blob = train(name, kw)
        sp = spm.SentencePieceProcessor(model_proto=blob)
        doc = {"version": spm.__version__, "pieces": sp.get_piece_size(), "cases": cases(sp, 1234 + seed)}
        if name == "unigram_bf":
            doc["moshi_transcripts"] = transcripts(sp)
        text = json.dumps(doc, ensure_ascii=False, indent=None, separators=(",", ":"))
        text = text.replace('},{"ids"', '},\n{"ids"') + "\n"
        mpath, jpath = os.path.join(OUT, name + ".model"), os.path.join(OUT, name + ".json")
        if check:
            for path, data in ((mpath, blob), (jpath, text.encode())):
                with open(path, "rb") as f:
                    if f.read() != data:
                        print(f"{path}: differs from a fresh run", file=sys.stderr)
                        bad += 1
            continue
        with open(mpath, "wb") as f:
            f.write(blob)
        with open(jpath, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"{name}: {sp.get_piece_size()} pieces, {len(doc['cases'])} cases, {len(blob)} bytes")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
