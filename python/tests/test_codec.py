"""Codec artifacts from Python (Model.decode, Model.encode): Mimi's tiny
fixture against the `moshi` package's streaming decode and encode, the
same bytes as `speechc decode` / `speechc encode`, and the errors."""
import numpy as np
import pytest

import speechc
from conftest import REPO, read_wav, run_cli

MIMI = REPO / "tests/data/mimi/mimi_tiny"


@pytest.fixture(scope="module")
def mimi_so(work):
    (work / "mimi").mkdir()
    return speechc.build(MIMI, work / "mimi" / "m.so")


@pytest.fixture(scope="module")
def mimi_model(mimi_so):
    with speechc.Model(mimi_so, threads=1) as m:
        yield m


def test_info(mimi_model):
    i = mimi_model.info
    assert i.family == "codec" and i.model_type == "mimi"
    assert (i.codebooks, i.sample_rate, i.samples_per_frame) == (4, 24000, 1920)


def test_decode_is_the_package_and_the_cli(mimi_so, mimi_model, tmp_path):
    codes = np.fromfile(MIMI / "codes.i32", dtype="<i4").reshape(-1, 4)
    want = np.fromfile(MIMI / "pcm.f32", dtype="<f4")
    got = mimi_model.decode(codes)
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    run_cli("decode", mimi_so, MIMI / "codes.i32", "-o", tmp_path / "pcm.raw", "--f32", "-q")
    assert got.tobytes() == (tmp_path / "pcm.raw").read_bytes()
    assert mimi_model.decode(codes).tobytes() == got.tobytes()  # each call a new stream


def test_encode_is_the_package_and_the_cli(mimi_so, mimi_model, tmp_path):
    pcm, rate = read_wav(MIMI / "enc_in.wav")
    assert rate == 24000 and pcm.dtype == np.int16
    want = np.fromfile(MIMI / "enc_codes.i32", dtype="<i4").reshape(-1, 4)
    got = mimi_model.encode(pcm)
    assert got.dtype == np.int32 and np.array_equal(got, want)
    assert np.array_equal(mimi_model.encode(pcm.astype(np.float32) / 32768), want)
    run_cli("encode", mimi_so, MIMI / "enc_in.wav", "-o", tmp_path / "codes.bin", "-q")
    assert got.tobytes() == (tmp_path / "codes.bin").read_bytes()


def test_errors(mimi_model, llm_model, tts_so):
    with pytest.raises(speechc.Error, match="not a codec"):
        llm_model.decode(np.zeros((1, 4), dtype=np.int32))
    with pytest.raises(speechc.Error, match=r"expected an integer array \[frames, 4\]"):
        mimi_model.decode(np.zeros((2, 3), dtype=np.int32))
    with pytest.raises(speechc.Error, match=r"in \[0, 32\)"):
        mimi_model.decode(np.full((1, 4), 32))
    with pytest.raises(speechc.Error, match="partial frame"):
        mimi_model.encode(np.zeros(1920 + 5, dtype=np.float32))
    with pytest.raises(speechc.Error, match="non-finite|NaN|nan"):
        mimi_model.encode(np.full(1920, np.nan, dtype=np.float32))
    with speechc.Model(tts_so.with_suffix(".codec.so"), threads=1) as dec:
        assert dec.info.family == "codec" and dec.info.codebooks == 16
        assert dec.decode(np.zeros((2, 16), dtype=np.int32)).shape == (2 * dec.info.samples_per_frame,)
        with pytest.raises(speechc.Error, match="no encoder"):
            dec.encode(np.zeros(dec.info.samples_per_frame, dtype=np.float32))
