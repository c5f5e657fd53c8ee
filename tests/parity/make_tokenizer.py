#!/usr/bin/env python3
"""Reference fixtures for compiler/tokenizer.c, made by HF `tokenizers`.

Trains a small byte-level BPE with exactly the Qwen2 pipeline (NFC
normalizer; Split on the Qwen2 regex, behavior isolated; ByteLevel without
prefix space or regex; ByteLevel decoder) plus the Qwen special tokens, and
writes into tests/data/tokenizer/tiny_bpe/:
  vocab.json, merges.txt, tokenizer_config.json   (the checkpoint form)
  tokenizer.json                                  (the single-file form)
  cases.json   [{"text": ..., "ids": [...]}, ...]  HF's ids per string
  big.json     {"bytes", "n_ids", "fnv1a64"}      HF's ids for the 1 MB text
               (the case strings joined by "\n" with a final "\n", repeated,
               cut to the first "bytes" bytes: 1 MiB less a split character); fnv1a64 is
               over the ids as little-endian int32.
The vocabulary is trained here, so no licence question arises.

  python3 -m venv /work/venv-tok && /work/venv-tok/bin/pip install tokenizers==0.21.1
  /work/venv-tok/bin/python tests/parity/make_tokenizer.py
"""
import json, os, sys, time

from tokenizers import Tokenizer, Regex, models, normalizers, pre_tokenizers, decoders, trainers
from tokenizers import AddedToken

# transformers' Qwen2Tokenizer PRETOKENIZE_REGEX and the "Split" pattern of
# the Qwen2/Qwen3 tokenizer.json, character for character.
QWEN2_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"""
                 r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>",
           "<|object_ref_end|>", "<|box_start|>", "<|box_end|>", "<|quad_start|>",
           "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
           "<|image_pad|>", "<|video_pad|>"]

# Training text: the ten Qwen3-TTS languages, mixed scripts, so that merges
# cross the byte ranges of several scripts.
TRAIN = [
    "The quick brown fox jumps over the lazy dog. It's what they'll do, isn't it?",
    "Hello world! Speech synthesis turns text into audio; we're testing it.",
    "你好，世界！今天天气很好，我们去公园散步吧。语音合成技术正在快速发展。",
    "こんにちは、世界。今日はいい天気ですね。音声合成のテストです。カタカナもひらがなも。",
    "안녕하세요, 세계! 오늘 날씨가 좋네요. 음성 합성 테스트입니다.",
    "Guten Tag! Die Straße ist schön, und die Bäume blühen. Größe, Übung, Öl.",
    "Bonjour le monde ! C'est l'été, où êtes-vous ? Ça va très bien, merci.",
    "Привет, мир! Сегодня хорошая погода. Синтез речи — это интересно.",
    "Olá, mundo! A informação é importante; não é? Ação, coração, pão.",
    "¡Hola, mundo! ¿Cómo estás? El niño come piñas en España.",
    "Ciao, mondo! Perché è così bello? Città, più, università.",
    "Numbers 0123456789 and 2024-06-01, 3.14159, 1,000,000.",
    "Mixed: English中文日本語한국어Русский123abc!",
    "    indented line\n\ttabbed\n\n\nblank lines  \r\n",
]

# The test strings: partly outside the training text.
CASES = [
    "",
    "Hello world",
    "hello, world! HELLO WORLD.",
    "The speech model speaks ten languages.",
    "我爱自然语言处理。北京是中国的首都。",
    "東京は日本の首都です。ありがとうございます！",
    "한국어 음성 합성은 재미있습니다.",
    "Die Übergrößenträger lieben Käsespätzle.",
    "Les élèves étudient à l'université; qu'est-ce que c'est?",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "O pássaro voou sobre as montanhas e os rios.",
    "El pingüino María comió jamón ibérico.",
    "La ragazza più bella della città è qui.",
    "12345678901234567890123456789012345678901234567890",
    "pi=3.14159265358979 e=2.718281828 year 1999, phone +1-555-0100",
    "٣٤٥ ①②③ ½ Ⅻ",
    "!!!??? ... --- *** ((())) [[]] {{}} ,,,;;; ''' \"\"\" ~~~ ```",
    "Wait... what?!?! No way!!! (really) [sure] {ok} <tag/>",
    "😀😃😄 👍🏽👍🏿 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇺🇸🇯🇵",
    "mixed中文and English和日本語テキストwith한국어!",
    "Кириллица и Latin вместе: Москва2024",
    "  leading spaces",
    "trailing spaces   ",
    "tabs\tand\t\ttabs\t",
    "line1\nline2\r\nline3\n\n\nline4\r\r\n",
    "   \n   \n\t \n ",
    " ",
    "\n",
    "a  b   c    d",
    "It's I'm you're they've we'll he'd",
    "IT'S I'M YOU'RE THEY'VE WE'LL HE'D",
    "It'S John'Ll Don'T we'Ve",
    "'s 's's 'll'll",
    "Cafe\u0301 na\u0308ive re\u0301sume\u0301 A\u030a \u1100\u1161\u11a8",
    "e\u0301\u0301 \u0041\u0323\u0307",
    "<|im_start|>assistant\nHello there<|im_end|>\n",
    "<|endoftext|>",
    "text<|endoftext|>more text<|im_start|><|im_end|>",
    "<|im_start|>user\n你好<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start <|im_end| |>",
    "\u00a0non\u00a0breaking\u2003em\u3000ideographic",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "Ω≈ç√∫˜µ≤≥÷ åß∂ƒ©˙∆˚¬…æ",
    "𝕳𝖊𝖑𝖑𝖔 𝒲ℴ𝓇𝓁𝒹 𠀀𠀁",
    # White_Space as HF's Oniguruma has it: U+180E is not a space, U+0085 is
    "\u180e'll a\u180e b \u0085x\u0085 \u2028'S\u000b\u000c\u001c end\u180e",
    "\u017f's K'K \u212a's \u0130'LL",
    "x" * 300,
    "ab" * 150 + "中文" * 100,
]


def build(vocab_size):
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=1, show_progress=False,
        special_tokens=[], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TRAIN * 4 + CASES[:10], trainer=trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIAL])
    return tok


def big_text():
    unit = "\n".join(CASES) + "\n"
    text = unit * ((1 << 20) // len(unit.encode()) + 1)
    b = text.encode()[: 1 << 20]
    return b.decode("utf-8", errors="ignore")  # cut at a character boundary


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for byte in int(i).to_bytes(4, "little", signed=True):
            h ^= byte
            h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = os.path.join(root, "tests", "data", "tokenizer", "tiny_bpe")
    os.makedirs(out, exist_ok=True)
    tok = build(1500)
    tok.save(os.path.join(out, "tokenizer.json"))
    tok.model.save(out)  # vocab.json, merges.txt
    base = tok.get_vocab_size(with_added_tokens=False)
    decoder = {}
    for s in SPECIAL:
        decoder[str(tok.token_to_id(s))] = {
            "content": s, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": True}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"add_prefix_space": False, "added_tokens_decoder": decoder,
                   "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "errors": "replace", "model_max_length": 32768,
                   "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}, f, indent=2,
                  ensure_ascii=False)
        f.write("\n")
    cases = []
    for t in CASES:
        ids = tok.encode(t, add_special_tokens=False).ids
        cases.append({"text": t, "ids": ids})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, ensure_ascii=False, indent=0)
        f.write("\n")
    text = big_text()
    t0 = time.perf_counter()
    ids = tok.encode(text, add_special_tokens=False).ids
    dt = time.perf_counter() - t0
    with open(os.path.join(out, "big.json"), "w") as f:
        json.dump({"bytes": len(text.encode()), "n_ids": len(ids),
                   "fnv1a64": "%016x" % fnv1a64(ids)}, f)
        f.write("\n")
    print("base vocab %d, %d cases, 1 MB: %d ids in %.3f s (%.0f tokens/s, one thread of HF)"
          % (base, len(cases), len(ids), dt, len(ids) / dt), file=sys.stderr)


if __name__ == "__main__":
    main()
