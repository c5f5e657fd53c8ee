"""speechc.Model against the command-line tool of the same build."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import speechc
from conftest import PROMPT, QWEN, read_wav, run_cli

SAY = dict(speaker="tiny_speaker", language="english", max_frames=12)


def test_library_is_the_bundled_one():
    """scripts/pytest.sh installs the package with build/libspeechc.so in it
    and no SPEECHC_LIBRARY: the copy in the package must be the one used."""
    if os.environ.get("SPEECHC_EXPECT_BUNDLED") != "1":
        pytest.skip("not run by scripts/pytest.sh")
    assert "SPEECHC_LIBRARY" not in os.environ
    assert Path(speechc.library_path()).parent == Path(speechc.__file__).parent
    assert speechc.version() == run_cli("--version").stdout.strip()


def test_info(llm_model, tts_model):
    i = llm_model.info
    assert (i.family, i.model_type, i.target) == ("llm", "qwen3", "cpu")
    assert i.vocab == json.loads((QWEN / "config.json").read_text())["vocab_size"]
    assert i.config["model_type"] == "qwen3" and i.sample_rate is None
    t = tts_model.info
    assert t.family == "qwen3_tts" and t.codebooks == 16 and t.has_tokenizer
    assert t.speakers == ("tiny_dialect", "tiny_speaker") and "english" in t.languages
    assert (t.sample_rate, t.samples_per_frame) == (24000, 1920)


# ---- generate ---------------------------------------------------------------
def test_generate_greedy_is_transformers_trace(llm_model):
    """The tiny Qwen3's greedy tokens as HF transformers made them
    (tests/data/llm/.../trace.json, the quickstart's line)."""
    assert llm_model.generate(PROMPT, 16, greedy=True) == \
        [111, 17, 145, 233, 252, 95, 92, 171, 131, 226, 124, 167, 128, 54, 160, 205]


@pytest.mark.parametrize("opts,flags", [
    (dict(greedy=True), ["--greedy"]),
    (dict(seed=5, temperature=0.8, top_k=20), ["--seed", "5", "--temperature", "0.8", "--top-k", "20"]),
    (dict(seed=9, top_p=0.9, repetition_penalty=1.3), ["--seed", "9", "--top-p", "0.9", "--repetition-penalty", "1.3"]),
])
def test_generate_matches_cli(llm_so, llm_model, opts, flags):
    cli = run_cli("run", llm_so, "--ids", ",".join(map(str, PROMPT)), "-n", 24, *flags).stdout.split()
    assert llm_model.generate(PROMPT, 24, **opts) == [int(x) for x in cli]


def test_generate_eos_and_sampling_varies(llm_model):
    full = llm_model.generate(PROMPT, 16, greedy=True)
    assert llm_model.generate(PROMPT, 16, greedy=True, eos=full[3]) == full[:4]
    a, b = llm_model.generate(PROMPT, 24, seed=1), llm_model.generate(PROMPT, 24, seed=2)
    assert a != b and a == llm_model.generate(PROMPT, 24, seed=1)


def test_generate_batch_is_each_alone(llm_so, llm_model):
    """Several prompts stepped together: each gets generate's tokens alone,
    greedy and seeded, an eos stopping one while the others go on; the
    CLI's several --ids give the same lines."""
    prompts = [PROMPT, [9, 8, 7], [3], PROMPT[:3]]
    assert llm_model.generate_batch(prompts, 16, greedy=True) == \
        [llm_model.generate(p, 16, greedy=True) for p in prompts]
    assert llm_model.generate_batch(prompts, 12, seed=4, top_k=30) == \
        [llm_model.generate(p, 12, seed=4, top_k=30) for p in prompts]
    full = llm_model.generate(PROMPT, 16, greedy=True)
    got = llm_model.generate_batch([PROMPT, [9, 8, 7]], 16, greedy=True, eos=full[3])
    assert got[0] == full[:full.index(full[3]) + 1]
    assert got[1] == llm_model.generate([9, 8, 7], 16, greedy=True, eos=full[3])
    cli = run_cli("run", llm_so, *sum((["--ids", ",".join(map(str, p))] for p in prompts), []), "-n", 16,
                  "--greedy").stdout.strip().split("\n")
    assert [[int(x) for x in line.split()] for line in cli] == llm_model.generate_batch(prompts, 16, greedy=True)
    assert llm_model.generate_batch([], 4) == []
    with pytest.raises(speechc.Error, match="outside the vocabulary"):
        llm_model.generate_batch([[1, 2], [3, 999999]], 4)


# ---- tokenizer --------------------------------------------------------------
def test_tokenize_matches_cli(tts_so, tts_model):
    text = "Hi there, <|im_start|>héllo\n"
    ids = tts_model.tokenize(text)
    assert ids == [int(x) for x in run_cli("tokenize", tts_so, text).stdout.strip().split(",")]
    assert tts_model.detokenize(ids) == text
    assert tts_model.tokenize("") == []


# ---- tts ----------------------------------------------------------------------
def cli_wav(tts_so, tmp_path, text, *flags):
    out = tmp_path / "cli.wav"
    run_cli("tts", tts_so, "--text", text, "-o", out, "-q", *flags)
    return read_wav(out)


def test_tts_matches_cli_wav(tts_so, tts_model, tmp_path):
    """Frame-by-frame decoding (decoder_batch=1) gives the bits of
    `speechc tts --decoder-batch 1 --f32`; and the 16-bit WAV is those
    samples clipped and rounded (x 32767, ties to even: runtime/wav.c)."""
    pcm, rate = tts_model.tts("Hello there", seed=3, decoder_batch=1, **SAY)
    ref, ref_rate = cli_wav(tts_so, tmp_path, "Hello there", "--speaker", "tiny_speaker", "--language", "english",
                            "--max-frames", 12, "--seed", 3, "--decoder-batch", 1, "--f32")
    assert rate == ref_rate == 24000 and pcm.dtype == np.float32
    assert pcm.shape == ref.shape and pcm.size % 1920 == 0 and pcm.size > 0
    np.testing.assert_array_equal(pcm, ref)
    s16, _ = cli_wav(tts_so, tmp_path, "Hello there", "--speaker", "tiny_speaker", "--language", "english",
                     "--max-frames", 12, "--seed", 3, "--decoder-batch", 1)
    np.testing.assert_array_equal(s16, np.rint(np.clip(pcm.astype(np.float64), -1, 1) * 32767).astype(np.int16))


def test_tts_options_match_cli(tts_so, tts_model, tmp_path):
    """instruct, non-streaming text, sampling and sequential decoding reach
    the C call as the CLI's flags do."""
    kw = dict(speaker="tiny_dialect", language="chinese", instruct="calm", seed=11, temperature=0.7, top_k=30,
              sub_temperature=0.6, sub_top_k=20, non_streaming=True, max_frames=9, sequential=True)
    pcm, _ = tts_model.tts("Ni hao", **kw)
    ref, _ = cli_wav(tts_so, tmp_path, "Ni hao", "--speaker", "tiny_dialect", "--language", "chinese",
                     "--instruct", "calm", "--seed", 11, "--temperature", 0.7, "--top-k", 30,
                     "--sub-temperature", 0.6, "--sub-top-k", 20, "--non-streaming", "--max-frames", 9,
                     "--sequential", "--f32")
    np.testing.assert_array_equal(pcm, ref)
    other, _ = tts_model.tts("Ni hao", **dict(kw, seed=12))
    assert other.shape != pcm.shape or not np.array_equal(other, pcm)


def test_tts_generation_config_defaults(work, tts_so, tts_model):
    """A checkpoint's generation_config.json sets the defaults, as qwen-tts
    reads it: do_sample false is greedy unless greedy=False says sample;
    max_new_tokens caps the frames."""
    import shutil
    from conftest import TTS
    ckpt = work / "tts-gen-ckpt"
    shutil.copytree(TTS, ckpt)
    (ckpt / "generation_config.json").write_text(json.dumps(
        {"do_sample": False, "subtalker_dosample": False, "max_new_tokens": 5, "temperature": 1.5}))
    (work / "tts-gen").mkdir()
    so = speechc.build(ckpt, work / "tts-gen" / "m.so")
    for f in tts_so.parent.glob("m.codec.*"):  # the decoder and its weight file
        shutil.copy(f, work / "tts-gen" / f.name)
    shutil.copytree(tts_so.parent / "m.tokenizer", work / "tts-gen" / "m.tokenizer")
    kw = dict(speaker="tiny_speaker", language="english", seed=3, decoder_batch=1)
    with speechc.Model(so, threads=1) as g:
        pcm, _ = g.tts("Hello there", **kw)
        assert pcm.size == 5 * 1920
        greedy, _ = tts_model.tts("Hello there", greedy=True, max_frames=5, **kw)
        np.testing.assert_array_equal(pcm, greedy)
        sampled, _ = g.tts("Hello there", greedy=False, temperature=0.9, max_frames=6, **kw)
        plain, _ = tts_model.tts("Hello there", max_frames=6, **kw)
        np.testing.assert_array_equal(sampled, plain)
        # the server's parser starts from the same defaults; "greedy": false samples over them
        o = g.parse_speech_request('{"input": "hi"}').options
        assert o["greedy"] and o["temperature"] == 1.5 and o["sub_temperature"] == pytest.approx(0.9)
        assert not g.parse_speech_request('{"input": "hi", "greedy": false}').options["greedy"]
        assert not tts_model.parse_speech_request('{"input": "hi"}').options["greedy"]


def test_stream_concatenates_to_tts(tts_model):
    pcm, _ = tts_model.tts("Streaming", seed=4, decoder_batch=1, **SAY)
    chunks = list(tts_model.tts_stream("Streaming", seed=4, decoder_batch=1, **SAY))
    assert len(chunks) == pcm.size // 1920 and all(c.shape == (1920,) and c.dtype == np.float32 for c in chunks)
    np.testing.assert_array_equal(np.concatenate(chunks), pcm)


def test_stream_break_early(tts_model):
    """Leaving the loop stops the generation: close() returns once the C
    call has ended (a few frames past the two read: the queue and the
    decoder's lead, not the 2000 asked for) and given its stream back, and
    the model speaks as before."""
    before, _ = tts_model.tts("Again", seed=5, decoder_batch=1, **SAY)
    long = dict(seed=5, speaker="tiny_speaker", decoder_batch=1)
    full = tts_model.tts_stream("A long one", min_frames=60, max_frames=60, **long)
    assert sum(1 for _ in full) == 60 and full.frames == 60  # min_frames holds EOS back
    got = []
    with tts_model.tts_stream("A long one", min_frames=2000, max_frames=2000, **long) as it:
        for c in it:
            got.append(c)
            if len(got) == 2:
                break
    assert len(got) == 2 and it.frames is not None and it.frames <= 2 + it.QUEUE + 8
    assert not [t for t in threading.enumerate() if t.name == "speechc-tts"]
    assert len(tts_model._streams) >= 1  # given back to the pool, not leaked
    after, _ = tts_model.tts("Again", seed=5, decoder_batch=1, **SAY)
    np.testing.assert_array_equal(before, after)


def test_stream_consumer_exception_stops(tts_model):
    with pytest.raises(KeyError):
        with tts_model.tts_stream("Raise", seed=1, speaker="tiny_speaker", min_frames=500, max_frames=500) as it:
            for i, _ in enumerate(it):
                if i == 1:
                    raise KeyError("consumer")
    assert it.frames is not None and it.frames < 500
    assert not [t for t in threading.enumerate() if t.name == "speechc-tts"]


def test_concurrent_calls_match_serial(tts_model, llm_model):
    """One Model, several threads: each call has its own session."""
    texts = ["one", "two two", "three three three"]
    serial = [tts_model.tts(t, seed=i, decoder_batch=1, **SAY)[0] for i, t in enumerate(texts)]
    gen_serial = llm_model.generate(PROMPT, 20, seed=3)
    results, errors = {}, []

    def work(i, t):
        try:
            results[i] = tts_model.tts(t, seed=i, decoder_batch=1, **SAY)[0]
            results[("g", i)] = llm_model.generate(PROMPT, 20, seed=3)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i, t)) for i, t in enumerate(texts)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    for i in range(len(texts)):
        np.testing.assert_array_equal(results[i], serial[i])
        assert results[("g", i)] == gen_serial


# ---- errors -----------------------------------------------------------------
def test_open_errors(tmp_path, tts_so):
    with pytest.raises(speechc.Error) as e:
        speechc.Model(tmp_path / "missing.so")
    assert e.value.code == 2 and "missing.so" in str(e.value)
    bad = tmp_path / "bad.so"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(speechc.Error) as e:
        speechc.Model(bad)
    assert e.value.code == 2 and "bad.so" in e.value.message
    with pytest.raises(speechc.Error) as e:
        speechc.Model(tts_so, tokenizer=tmp_path / "no-tokenizer")
    assert "no-tokenizer" in str(e.value)


def test_tts_errors(tts_model, llm_model):
    with pytest.raises(speechc.Error) as e:
        tts_model.tts("x", speaker="nobody")
    assert e.value.code == 1 and "nobody" in str(e.value) and "tiny_speaker" in str(e.value)
    with pytest.raises(speechc.Error, match="klingon"):
        tts_model.tts("x", language="klingon")
    # as qwen-tts validates a language: a dialect comes with its speaker
    assert "sichuan_dialect" not in tts_model.info.languages
    with pytest.raises(speechc.Error, match="language sichuan_dialect: unknown.*comes with its speaker"):
        tts_model.tts("x", language="sichuan_dialect")
    assert tts_model.info.drops_instruct  # a 0.6B CustomVoice model
    with pytest.raises(speechc.Error, match="not UTF-8|UTF-8"):
        tts_model.tts("bad \ud800 text")
    with pytest.raises(speechc.Error, match="temperature"):
        tts_model.tts("x", temperature=-1.0)
    with pytest.raises(speechc.Error, match="max_frames"):
        tts_model.tts("x", max_frames=0)
    with pytest.raises(speechc.Error, match="unknown option 'volume'"):
        tts_model.tts_stream("x", volume=3)
    with pytest.raises(speechc.Error, match="not a Qwen3-TTS model"):
        llm_model.tts("x")
    with pytest.raises(speechc.Error, match="no tokenizer"):
        llm_model.tokenize("x")


def test_generate_errors(llm_model, tts_model):
    with pytest.raises(speechc.Error) as e:
        llm_model.generate([0, 10**6], 4)
    assert e.value.code in (1, 2) and "1000000" in str(e.value)
    with pytest.raises(speechc.Error, match="ids"):
        llm_model.generate([[1, 2]], 4)
    with pytest.raises(speechc.Error, match="n_new"):
        llm_model.generate(PROMPT, -1)
    with pytest.raises(speechc.Error, match="top_k"):
        llm_model.generate(PROMPT, 4, top_k=1.5)
    with pytest.raises(speechc.Error, match="Qwen3-TTS"):
        tts_model.generate(PROMPT, 4)
    with pytest.raises(speechc.Error, match="outside|vocab"):
        tts_model.detokenize([10**6])


def test_closed_model(llm_so):
    m = speechc.Model(llm_so)
    assert m.generate(PROMPT, 2, greedy=True) == [111, 17]
    m.close()
    m.close()
    with pytest.raises(speechc.Error, match="closed"):
        m.generate(PROMPT, 2)


# ---- build ------------------------------------------------------------------
def test_build_options_and_errors(tmp_path):
    out = speechc.build(QWEN, tmp_path / "q8.so", weights="q8_0", max_context=64)
    with speechc.Model(out) as m:
        assert m.info.max_context == 64
        assert len(m.generate(PROMPT, 8, greedy=True)) == 8
    assert "q8_0" in run_cli("inspect", out).stdout
    with pytest.raises(speechc.Error) as e:
        speechc.build(QWEN, tmp_path / "x.so", weights="q9")
    assert e.value.code == 1 and "--weights expects" in str(e.value) and "'q9'" in str(e.value)
    with pytest.raises(speechc.Error) as e:
        speechc.build(tmp_path / "nonexistent", tmp_path / "x.so")
    assert e.value.code == 2 and "nonexistent" in str(e.value)
    with pytest.raises(speechc.Error, match="--max-context expects an integer"):
        speechc.build(QWEN, tmp_path / "x.so", max_context=0)
    assert not (tmp_path / "x.so").exists()


def test_bad_library_path(tmp_path):
    """SPEECHC_LIBRARY naming nothing is an Error, raised at first use."""
    code = "import speechc\ntry:\n  speechc.version()\nexcept speechc.Error as e:\n  print('ERR', e.code, e)\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, SPEECHC_LIBRARY=str(tmp_path / "nolib.so")))
    assert r.returncode == 0 and r.stdout.startswith("ERR 2") and "nolib.so" in r.stdout, r.stdout + r.stderr


# ---- the speech request and the audio bytes of a server -----------------------
def test_wav_bytes_are_the_cli_file(tts_so, tts_model, tmp_path):
    pcm, rate = tts_model.tts("Bytes", seed=2, decoder_batch=1, **SAY)
    for flags, f32 in (([], False), (["--f32"], True)):
        out = tmp_path / "b.wav"
        run_cli("tts", tts_so, "--text", "Bytes", "--seed", 2, "--speaker", "tiny_speaker", "--language", "english",
                "--max-frames", 12, "--decoder-batch", 1, "-q", "-o", out, *flags)
        assert speechc.wav_bytes(pcm, rate, f32=f32) == out.read_bytes()
    raw = tmp_path / "b.raw"
    run_cli("tts", tts_so, "--text", "Bytes", "--seed", 2, "--speaker", "tiny_speaker", "--language", "english",
            "--max-frames", 12, "--decoder-batch", 1, "-q", "-o", raw)
    assert speechc.s16le(pcm) == raw.read_bytes()
    assert len(speechc.wav_header(24000)) == 44 and speechc.wav_header(24000)[40:44] == b"\xff\xff\xff\xff"


def test_parse_speech_request(tts_model):
    r = tts_model.parse_speech_request(b'{"model": "tts-1", "input": "Hi", "voice": "TINY_SPEAKER", '
                                       b'"response_format": "pcm", "seed": 7, "language": "english", '
                                       b'"instructions": "calm", "temperature": 0.5, "sub_top_k": 9, "stream": true}')
    assert (r.input, r.format, r.stream, r.model) == ("Hi", "pcm", True, "tts-1")
    o = r.options
    assert (o["speaker"], o["language"], o["instruct"], o["seed"], o["sub_top_k"]) == \
        ("tiny_speaker", "english", "calm", 7, 9)
    assert o["temperature"] == pytest.approx(0.5) and o["top_k"] == 50 and o["max_frames"] == 2048
    # the options are tts()'s keywords: the same audio as the call written out
    np.testing.assert_array_equal(tts_model.tts(r.input, **dict(o, max_frames=5), decoder_batch=1)[0],
                                  tts_model.tts("Hi", speaker="tiny_speaker", language="english", instruct="calm",
                                                seed=7, temperature=0.5, sub_top_k=9, max_frames=5,
                                                decoder_batch=1)[0])
    d = tts_model.parse_speech_request('{"input": "x"}')
    assert d.format == "wav" and not d.stream and not d.sse and d.options["speaker"] is None
    d = tts_model.parse_speech_request('{"input": "x", "stream_format": "sse"}')
    assert d.stream and d.sse
    for body, msg in ((b'{"input": "x", "speed": 2}', "speed"), (b'{"input": "x", "voice": "bob"}', "tiny_speaker"),
                      (b'{"input": ""}', "input"), (b"{", "JSON"), (b'{"input": "x", "temprature": 1}', "temprature"),
                      (b'{"input": "x", "response_format": "mp3"}', "mp3"),
                      (b'{"input": "x", "max_frames": 99}', "max_frames"),
                      (b'{"input": "x", "stream_format": "sse", "stream": false}', "server-sent events are streamed")):
        with pytest.raises(speechc.Error, match=msg) as e:
            tts_model.parse_speech_request(body, max_frames=50)
        assert e.value.code == 1


def test_tts_stream_stopped_by_close_and_by_dropping(tts_so):
    """Model.close stops a running stream (its next() then ends), and a
    stream left or dropped mid-way ends its thread: run in a child, where
    either used to crash or leave a thread per stream."""
    code = (
        "import gc, threading, time, speechc\n"
        f"m = speechc.Model({str(tts_so)!r}, threads=1)\n"
        "s = m.tts_stream('Hello there.', speaker='tiny_speaker', max_frames=200, min_frames=150)\n"
        "next(s); m.close()\n"
        "assert list(s) == []\n"
        f"m = speechc.Model({str(tts_so)!r}, threads=1)\n"
        "base = threading.active_count()\n"
        "for k in range(10):\n"
        "    for i, pcm in enumerate(m.tts_stream('Hello.', max_frames=2000, min_frames=1900)):\n"
        "        if i == 1: break\n"
        "gc.collect(); time.sleep(0.3)\n"
        "assert threading.active_count() == base, threading.active_count() - base\n"
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


def test_numpy_scalars_are_numbers(tts_model, llm_model):
    """np.int64(16) and np.float32(.5) are taken as 16 and 0.5, as any
    numpy user passes them (they were refused as 'not an integer')."""
    a = llm_model.generate(PROMPT, np.int64(4), temperature=np.float32(0.5), seed=np.uint64(3))
    b = llm_model.generate(PROMPT, 4, temperature=0.5, seed=3)
    assert a == b
    x = tts_model.tts("Hi", **dict(SAY, max_frames=np.int64(2)), seed=np.int32(1))
    y = tts_model.tts("Hi", **dict(SAY, max_frames=2), seed=1)
    assert np.array_equal(x[0], y[0])


def test_tts_to_the_context_end(work, tts_so):
    """A talker built with a context of 30: without max_frames a request
    that makes no EOS ends at the context's end (30 - 8 prompt rows + 1 =
    23 frames), as the CLI and the server do; a max_frames beyond it is
    refused before anything runs unless clamp_frames; a parsed request
    without max_frames asks for the clamp."""
    (work / "ctx30").mkdir()
    so = speechc.build(work / "tts-ckpt", work / "ctx30" / "m.so", max_context=30)
    noeos = dict(seed=5, temperature=100.0, top_k=0, decoder_batch=1)
    with speechc.Model(so, threads=1) as m:
        pcm, _ = m.tts("Hello world", **noeos)
        assert len(pcm) == 23 * 1920
        with pytest.raises(speechc.Error, match="max_frames 24: the prompt's 8 rows leave room for 23 frames"):
            m.tts("Hello world", max_frames=24, **noeos)
        np.testing.assert_array_equal(m.tts("Hello world", max_frames=24, clamp_frames=True, **noeos)[0], pcm)
        np.testing.assert_array_equal(m.tts("Hello world", max_frames=23, **noeos)[0], pcm)
        assert len(m.tts("Hello world", max_frames=5, clamp_frames=True, **noeos)[0]) == 5 * 1920
        with pytest.raises(speechc.Error, match="clamp_frames"):
            m.tts("Hello world", clamp_frames=1, **noeos)
        o = m.parse_speech_request('{"input": "x"}').options
        assert o["clamp_frames"] is True and o["max_frames"] == 2048
        o = m.parse_speech_request('{"input": "x", "max_frames": 24, "speed": null}').options
        assert o["clamp_frames"] is False and o["max_frames"] == 24
        chunks = list(m.tts_stream("Hello world", **noeos))
        np.testing.assert_array_equal(np.concatenate(chunks), pcm)


def test_generate_room(work):
    """n_new beyond what the context holds after the prompt is refused
    before any work (sc_generate's check); exactly that many are made."""
    (work / "room").mkdir()
    so = speechc.build(QWEN, work / "room" / "m.so", max_context=8)
    with speechc.Model(so, threads=1) as m:
        with pytest.raises(speechc.Error, match="n_new 7: the prompt's 3 tokens leave room for 6 new tokens"):
            m.generate([1, 2, 3], 7, greedy=True)
        assert len(m.generate([1, 2, 3], 6, greedy=True)) == 6
        with pytest.raises(speechc.Error, match=r"leave room for 6 new tokens.*\(request 1\)"):
            m.generate_batch([[1], [1, 2, 3]], 7, greedy=True)


def test_parse_speech_request_default_is_the_limit(tts_model):
    """Without max_frames a request gets the server's limit (to be lowered
    to what the context holds), not the 2048 of sc_tts_defaults."""
    o = tts_model.parse_speech_request('{"input": "x"}', max_frames=4000).options
    assert o["max_frames"] == 4000 and o["clamp_frames"] is True
    o = tts_model.parse_speech_request('{"input": "x"}', max_frames=7).options
    assert o["max_frames"] == 7
