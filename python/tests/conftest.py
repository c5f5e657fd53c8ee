"""Fixtures: the repository's tiny checkpoints, built with speechc.build.

The tests compare the package with the command-line tool of the same build
(SPEECHC_BIN, default <repo>/build/speechc) and use the repository's
build/make_random_ckpt for the tiny codec decoder (SPEECHC_BUILD_DIR moves
both).  scripts/pytest.sh runs them against the installed package.
"""
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import speechc

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SPEECHC_BUILD_DIR", REPO / "build"))
BIN = Path(os.environ.get("SPEECHC_BIN", BUILD / "speechc"))
QWEN = REPO / "tests/data/llm/qwen3_gqa2_hd32_tied"
TTS = REPO / "tests/data/tts/tts_tiny_06b_layout"
PROMPT = [0, 4, 134, 16, 186, 230, 101, 208]


def run_cli(*args, check=True):
    """`speechc ARGS...`: the CompletedProcess (text)."""
    r = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True)
    if check and r.returncode:
        raise AssertionError(f"speechc {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}")
    return r


def byte_tokenizer(d: Path) -> None:
    """A byte-level BPE tokenizer (no merges) whose ids fit the tiny TTS
    model's 512-entry text vocabulary: GPT-2's byte order, so "\\n" is 198 as
    in Qwen's, plus "assistant" 300, <|im_start|> 480, <|im_end|> 481 (the
    one tests/cli/test_cli.sh makes)."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    (d / "vocab.json").write_text(json.dumps({chr(c): i for i, c in enumerate(cs)}))
    (d / "merges.txt").write_text("")
    (d / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": {
        "300": {"content": "assistant"}, "480": {"content": "<|im_start|>"}, "481": {"content": "<|im_end|>"}}}))


def read_wav(path: Path):
    """(samples, rate) of a mono WAV, read chunk by chunk: int16 for 16-bit
    PCM, float32 for 32-bit float."""
    data = Path(path).read_bytes()
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE", f"{path}: not a WAV file"
    pos, fmt, pcm = 12, None, None
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack_from("<I", data, pos + 4)[0]
        body = data[pos + 8:pos + 8 + size]
        if cid == b"fmt ":
            fmt = struct.unpack_from("<HHIIHH", body)
        elif cid == b"data":
            pcm = body
        pos += 8 + size + (size & 1)
    tag, channels, rate, _, _, bits = fmt
    assert channels == 1
    if tag == 3 and bits == 32:
        return np.frombuffer(pcm, dtype="<f4").astype(np.float32), rate
    assert tag == 1 and bits == 16, f"{path}: format {tag}/{bits}"
    return np.frombuffer(pcm, dtype="<i2").astype(np.int16), rate


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("speechc")


@pytest.fixture(scope="session")
def llm_so(work):
    """The tiny Qwen3 (HF transformers' trace beside it), built in-process."""
    (work / "llm").mkdir()
    return speechc.build(QWEN, work / "llm" / "m.so")


def build_tiny_tts(work: Path) -> Path:
    """The tiny Qwen3-TTS checkpoint with a random 12 Hz codec decoder in its
    speech_tokenizer/ and a tokenizer that fits it, built in-process: the
    talker, m.codec.so and m.tokenizer/ in one call, under work/tts/."""
    ckpt = work / "tts-ckpt"
    shutil.copytree(TTS, ckpt)
    subprocess.run([str(BUILD / "make_random_ckpt"), "codec-tiny", str(ckpt / "speech_tokenizer"), "--dtype", "f32"],
                   check=True, capture_output=True)
    byte_tokenizer(ckpt)
    (work / "tts").mkdir()
    out = speechc.build(ckpt, work / "tts" / "m.so")
    assert (work / "tts" / "m.codec.so").is_file()
    assert (work / "tts" / "m.tokenizer" / "vocab.json").is_file()
    return out


@pytest.fixture(scope="session")
def tts_so(work):
    return build_tiny_tts(work)


@pytest.fixture(scope="session")
def tts_model(tts_so):
    with speechc.Model(tts_so, threads=1) as m:
        yield m


@pytest.fixture(scope="session")
def llm_model(llm_so):
    with speechc.Model(llm_so, threads=1) as m:
        yield m
