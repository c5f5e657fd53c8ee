"""speechc.Model: a compiled model, opened once, driven from Python."""
from __future__ import annotations

import ctypes
import json
import os
import queue
import threading
import weakref
from ctypes import POINTER, byref, c_int, c_int32, c_size_t, c_void_p
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _lib
from ._lib import SC_EUSAGE, check
from .errors import Error

PathLike = Union[str, "os.PathLike[str]"]

_TTS_FAMILY = "qwen3_tts"
_MOSHI_FAMILY = "moshi"
_CODEC_FAMILY = "codec"
_END = object()


@dataclass(frozen=True)
class SpeechRequest:
    """A ``POST /v1/audio/speech`` body as ``speechc serve`` reads it
    (:meth:`Model.parse_speech_request`).

    ``options`` are the keyword arguments of :meth:`Model.tts` /
    :meth:`Model.tts_stream` the body asks for (speaker from ``voice``,
    language, instruct, seed, sampling, max_frames, clamp_frames).
    """

    input: str
    format: str  # "wav" or "pcm" (bare s16le)
    stream: bool
    model: Optional[str]
    options: Dict[str, Any]
    sse: bool = False  # stream_format "sse": server-sent events (stream is True then)


@dataclass(frozen=True)
class ModelInfo:
    """What a compiled model is (``speechc inspect`` prints the same).

    The TTS fields are set for a Qwen3-TTS model only: ``speakers`` and
    ``languages`` are the names ``tts`` accepts (any case; dialects come
    with their speakers), ``sample_rate`` and ``samples_per_frame`` those
    of its codec decoder (``None`` without one), and ``drops_instruct``
    is True for a 0.6B CustomVoice model, whose instructions are dropped
    as qwen-tts' ``generate_custom_voice`` drops them.
    """

    path: str
    family: str
    model_type: str
    target: str
    compiler_version: str
    weight_file: str
    vocab: int
    hidden: int
    n_layers: int
    max_context: int
    weight_bytes: int
    state_bytes: int
    config_hash: int
    config: Dict[str, Any] = field(repr=False)
    has_tokenizer: bool = False
    speakers: Tuple[str, ...] = ()
    languages: Tuple[str, ...] = ()
    codebooks: Optional[int] = None
    sample_rate: Optional[int] = None
    samples_per_frame: Optional[int] = None
    drops_instruct: bool = False


def _s(b: Optional[bytes]) -> str:
    return b.decode("utf-8", "replace") if b is not None else ""


def _py(v: Any) -> Any:
    """A numpy scalar (np.int64(16), np.float32(.5)) as the Python number it
    holds, so that options take it as they take int and float."""
    return v.item() if isinstance(v, np.generic) else v


def _int32_array(what: str, ids: Sequence[int]) -> "ctypes.Array[c_int32]":
    try:
        a = np.asarray(ids)
    except Exception as e:  # ragged, not numbers
        raise Error(SC_EUSAGE, f"{what}: expected a sequence of token ids ({e})") from None
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise Error(SC_EUSAGE, f"{what}: expected a flat sequence of integer token ids, got shape {a.shape} "
                               f"of {a.dtype}")
    if a.size and (a.min() < -2**31 or a.max() >= 2**31):
        raise Error(SC_EUSAGE, f"{what}: ids must fit in int32")
    a = np.ascontiguousarray(a, dtype=np.int32)
    return (c_int32 * len(a)).from_buffer_copy(a.tobytes()) if a.size else (c_int32 * 1)()


def _sampling(base: "_lib.sc_sample_params", what: str, greedy: Optional[bool], temperature: Optional[float],
              top_k: Optional[int], top_p: Optional[float], repetition_penalty: Optional[float],
              seed: Optional[int]) -> None:
    """Overwrite the fields of base that are not None (validated by C)."""
    if greedy is not None:
        base.greedy = 1 if greedy else 0
    for name, v, kind in (("temperature", temperature, float), ("top_k", top_k, int), ("top_p", top_p, float),
                          ("repetition_penalty", repetition_penalty, float)):
        if v is None:
            continue
        v = _py(v)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (kind is int and not isinstance(v, int)):
            raise Error(SC_EUSAGE, f"{what}{name}: expected {'an integer' if kind is int else 'a number'}, "
                                   f"got {v!r}")
        if kind is int and not -2**31 <= v < 2**31:
            raise Error(SC_EUSAGE, f"{what}{name}: {v} is out of range")
        setattr(base, name, kind(v))
    if seed is not None:
        seed = _py(seed)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise Error(SC_EUSAGE, f"seed: expected an integer in [0, 2**64), got {seed!r}")
        base.seed = seed


class Model:
    """A model built by ``speechc build`` (or :func:`speechc.build`): the
    ``.so``, its weight file, and what was built beside it (the tokenizer
    ``X.tokenizer/``, the codec decoder ``X.codec.so``).

    ``info`` (:class:`ModelInfo`) says what it is.  Use it as a context
    manager, or call :meth:`close`::

        with speechc.Model("tts.so") as m:
            pcm, rate = m.tts("Hello", speaker="ryan", language="english", seed=1)

    Threads: a Model may be shared by threads.  Every call (``generate``,
    ``tts``, ``tts_stream``) runs on a session of its own, taken from a pool
    of idle sessions kept by the Model (a new one opened when none is idle),
    so concurrent calls run in parallel, each with its own KV caches and
    kernel threads (``threads`` of them; 0 = one per physical core: give
    each concurrent caller ``threads=cores // callers``).  ``tokenize`` and
    ``detokenize`` take a lock.  :meth:`close` must not race with calls in
    progress.
    """

    def __init__(self, path: PathLike, *, threads: int = 0, decoder_threads: int = 0, verify_weights: bool = True,
                 tokenizer: Optional[PathLike] = None, codec: Optional[PathLike] = None):
        """Open ``path`` and its weight file.

        Args:
            path: the model ``.so``.
            threads: kernel threads per session (0: one per physical core).
            decoder_threads: the codec decoder's, for ``tts`` (0: ``threads``).
            verify_weights: recompute the weight file's checksum at open.
            tokenizer: a tokenizer directory (default: ``X.tokenizer/``
                beside ``X.so``, when there).
            codec: the codec decoder of a Qwen3-TTS model (default:
                ``X.codec.so`` beside it, when there).

        Raises:
            Error: the file is missing or not a speechc artifact, its weight
                file does not match, ... (the C message says which).
        """
        self._L = _lib.lib()
        self._path = os.fspath(path)
        self._threads = int(threads)
        self._lock = threading.Lock()
        self._closed = False
        self._m = c_void_p()
        self._tt = c_void_p()
        self._tok = c_void_p()
        self._tok_lock = threading.Lock()
        self._sessions: List[c_void_p] = []
        self._streams: List[c_void_p] = []
        # Moshi's batches and conversations hold sessions: closed with the model
        self._moshi_batches: "weakref.WeakSet[MoshiBatch]" = weakref.WeakSet()
        self._moshi_convs: "weakref.WeakSet[MoshiConversation]" = weakref.WeakSet()
        # conversations whose audio this (Mimi) model encodes and decodes
        self._moshi_audio: "weakref.WeakSet[MoshiConversation]" = weakref.WeakSet()
        # tts_stream iterators whose generation has started: stopped by close
        self._live_streams: "weakref.WeakSet[TtsStream]" = weakref.WeakSet()
        # handles that conversations and batches hold on this model: handle
        # -> (order, closer).  Model.close frees what is still here before
        # the model, so that an object it could not reach (its weak set
        # already cleared, as the garbage collector does with cycles and at
        # exit) never frees its handle after the model is gone
        self._lent: Dict[int, Tuple[int, Callable[[c_void_p], None]]] = {}
        L, err = self._L, _lib.sc_error()
        opts = _lib.sc_open_opts(verify_weights=1 if verify_weights else 0, threads=self._threads)
        check(L.sc_model_open(self._path.encode(), byref(opts), byref(self._m), byref(err)), err)
        try:
            self._open_rest(tokenizer, codec, decoder_threads, verify_weights)
        except BaseException:
            self.close()
            raise

    def _open_rest(self, tokenizer: Optional[PathLike], codec: Optional[PathLike], decoder_threads: int,
                   verify_weights: bool) -> None:
        L, err = self._L, _lib.sc_error()
        mi = _lib.sc_model_info()
        L.sc_model_get_info(self._m, byref(mi))
        # the tokenizer: the one given, else X.tokenizer/ when it is there
        tokdir = None
        if tokenizer is not None:
            tokdir = os.fspath(tokenizer)
        else:
            buf = ctypes.create_string_buffer(4096)
            if L.tok_dir_of(self._path.encode(), buf, len(buf)) == 0 and os.path.isdir(buf.value.decode()):
                tokdir = buf.value.decode()
        if tokdir is not None:
            check(L.tok_load(tokdir.encode(), byref(self._tok), byref(err)), err)
        kw: Dict[str, Any] = {}
        family = _s(mi.family)
        if family == _TTS_FAMILY:
            o = L.tts_text_defaults()
            o.threads, o.decoder_threads = self._threads, int(decoder_threads)
            o.verify_weights = 1 if verify_weights else 0
            keep = []
            if tokdir is not None:
                keep.append(tokdir.encode())
                o.tokenizer = keep[-1]
            if codec is not None:
                keep.append(os.fspath(codec).encode())
                o.codec = keep[-1]
            tokbuf, codecbuf = ctypes.create_string_buffer(4096), ctypes.create_string_buffer(4096)
            L.tts_text_resolve(self._path.encode(), byref(o), tokbuf, codecbuf)
            check(L.tts_text_open(self._path.encode(), byref(o), byref(self._tt), byref(err)), err)
            ti = L.tts_text_info(self._tt).contents
            kw = dict(speakers=tuple(_s(ti.speakers[i]) for i in range(ti.n_speakers)),
                      languages=tuple(_s(ti.languages[i]) for i in range(ti.n_languages)),
                      codebooks=ti.codebooks, has_tokenizer=bool(ti.has_tokenizer),
                      drops_instruct=bool(ti.drops_instruct))
            if ti.has_codec:
                kw.update(sample_rate=ti.sample_rate, samples_per_frame=ti.samples_per_frame)
        else:
            kw["has_tokenizer"] = bool(self._tok)
        self._can_encode = False
        if family == _CODEC_FAMILY:
            ci = _lib.sc_codec_info()
            check(L.sc_codec_get_info(self._m, byref(ci), byref(err)), err)
            kw.update(codebooks=ci.n_codebooks, sample_rate=ci.sample_rate, samples_per_frame=ci.samples_per_frame)
            self._codebook_size, self._can_encode = ci.codebook_size, bool(ci.can_encode)
        self.info = ModelInfo(
            path=self._path, family=family, model_type=_s(mi.model_type), target=_s(mi.target),
            compiler_version=_s(mi.compiler_version), weight_file=_s(mi.weight_file), vocab=mi.vocab,
            hidden=mi.hidden, n_layers=mi.n_layers, max_context=mi.max_context, weight_bytes=mi.weight_bytes,
            state_bytes=mi.state_bytes, config_hash=mi.config_hash,
            config=json.loads(_s(mi.config_json) or "{}"), **kw)

    # ---- life cycle -------------------------------------------------------
    def close(self) -> None:
        """Close the sessions, the model and what was opened with it.
        Idempotent.  Running tts_stream iterators are stopped first (their
        next() then ends); other calls in progress must not race with it."""
        L = self._L
        with self._lock:
            if self._closed:
                return
            self._closed = True
            moshi = list(self._moshi_batches) + list(self._moshi_convs)
            audio = list(self._moshi_audio)
            streams = list(self._live_streams)
        for st in streams:  # each returns its TTS stream to the pool, closed now
            st.close()
        for o in moshi:  # batches first: closing one takes its conversations out
            o.close()
        for c in audio:  # conversations of another model lose their Mimi stream
            c._drop_codec()
        with self._lock:  # what the loops above could not reach
            left, self._lent = sorted(self._lent.items(), key=lambda kv: kv[1][0]), {}
        for h, (_, closer) in left:
            closer(c_void_p(h))
        with self._lock:
            for s in self._sessions:
                L.sc_session_close(s)
            for s in self._streams:
                L.tts_stream_close(s)
            self._sessions, self._streams = [], []
        if self._tt:
            L.tts_text_close(self._tt)
            self._tt = c_void_p()
        if self._tok:
            L.tok_free(self._tok)
            self._tok = c_void_p()
        if self._m:
            L.sc_model_close(self._m)
            self._m = c_void_p()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"speechc.Model({self._path!r}{', closed' if self._closed else ''})"

    def _check_open(self) -> None:
        if self._closed:
            raise Error(SC_EUSAGE, f"{self._path}: the model is closed")

    # handles lent to conversations and batches (order: batches 0, Moshi
    # generators 1, sessions 2: the order Model.close frees leftovers in)
    def _lend(self, h: c_void_p, order: int, closer: Callable[[c_void_p], None]) -> None:
        with self._lock:
            self._lent[h.value] = (order, closer)

    def _release(self, h: c_void_p) -> None:
        """Free h unless Model.close already has."""
        with self._lock:
            entry = self._lent.pop(h.value, None) if h else None
        if entry:
            entry[1](h)

    # pools of idle sessions / TTS streams: one per call in flight
    def _take(self, pool: List[c_void_p], opener: Callable[[], c_void_p]) -> c_void_p:
        with self._lock:
            self._check_open()
            if pool:
                return pool.pop()
        return opener()

    def _give(self, pool: List[c_void_p], s: c_void_p, closer: Callable[[c_void_p], None]) -> None:
        with self._lock:
            if not self._closed:
                pool.append(s)
                return
        closer(s)

    def _open_session(self) -> c_void_p:
        s, err = c_void_p(), _lib.sc_error()
        check(self._L.sc_session_open(self._m, byref(s), byref(err)), err)
        return s

    def _open_stream(self) -> c_void_p:
        s, err = c_void_p(), _lib.sc_error()
        check(self._L.tts_stream_open(self._tt, byref(s), byref(err)), err)
        return s

    # ---- language models --------------------------------------------------
    def generate(self, ids: Sequence[int], n_new: int = 16, *, greedy: Optional[bool] = None,
                 temperature: Optional[float] = None, top_k: Optional[int] = None, top_p: Optional[float] = None,
                 repetition_penalty: Optional[float] = None, seed: Optional[int] = None,
                 eos: Optional[int] = None) -> List[int]:
        """Prefill ``ids`` and generate up to ``n_new`` tokens (a plain LM:
        Qwen3, Llama, Qwen3.5), as ``speechc run`` does with the same
        options.

        Sampling: ``greedy`` (argmax), else ``temperature`` (1.0), ``top_k``
        (0: off), ``top_p`` (1.0: off), ``repetition_penalty`` (1.0: off),
        ``seed`` (0): ``None`` keeps those defaults.  Stops after ``eos``
        when given.  Same seed, same tokens.

        Returns:
            The new token ids (``eos`` included when it stopped there).

        Raises:
            Error: not an LM, an id outside the vocabulary, a prompt or
                ``n_new`` past the context (refused before any work), a bad
                sampling value.
        """
        self._check_open()
        n_new = _py(n_new)
        if isinstance(n_new, bool) or not isinstance(n_new, int) or not 0 <= n_new < 2**24:
            raise Error(SC_EUSAGE, f"n_new: expected an integer in [0, 2**24), got {n_new!r}")
        eos = _py(eos)
        if eos is not None and (isinstance(eos, bool) or not isinstance(eos, int) or not 0 <= eos < 2**31):
            raise Error(SC_EUSAGE, f"eos: expected a token id, got {eos!r}")
        if self.info.family == _TTS_FAMILY:
            raise Error(SC_EUSAGE, f"{self._path} is a Qwen3-TTS model; use Model.tts")
        prompt = _int32_array("ids", ids)
        n_prompt = len(ids)
        sp = self._L.sc_sample_defaults()
        _sampling(sp, "", greedy, temperature, top_k, top_p, repetition_penalty, seed)
        out = (c_int32 * (n_new + 1))()
        n_out, err = c_int(0), _lib.sc_error()
        s = self._take(self._sessions, self._open_session)
        try:
            self._L.sc_session_reset(s)  # a pooled session holds its last call's tokens
            rc = self._L.sc_generate(s, prompt, n_prompt, n_new, byref(sp), -1 if eos is None else eos, out,
                                     byref(n_out), _lib.TOKEN_CB(), None, byref(err))
        finally:
            self._give(self._sessions, s, self._L.sc_session_close)
        check(rc, err)
        return list(out[:n_out.value])

    def generate_batch(self, prompts: Sequence[Sequence[int]], n_new: int = 16, *, greedy: Optional[bool] = None,
                       temperature: Optional[float] = None, top_k: Optional[int] = None,
                       top_p: Optional[float] = None, repetition_penalty: Optional[float] = None,
                       seed: Optional[int] = None, eos: Optional[int] = None) -> List[List[int]]:
        """``generate`` for several prompts at once: one batched step
        advances all of them, each weight read once per step
        (``sc_generate_batch``; the artifact needs its batch entry, built by
        default).  Each prompt gets exactly the tokens ``generate`` gives it
        alone with the same options and seed; one that meets ``eos`` stops
        while the others go on.  As ``speechc run`` with several ``--ids``.

        Returns:
            One list of new token ids per prompt, in order.
        """
        self._check_open()
        n_new = _py(n_new)
        if isinstance(n_new, bool) or not isinstance(n_new, int) or not 0 <= n_new < 2**24:
            raise Error(SC_EUSAGE, f"n_new: expected an integer in [0, 2**24), got {n_new!r}")
        eos = _py(eos)
        if eos is not None and (isinstance(eos, bool) or not isinstance(eos, int) or not 0 <= eos < 2**31):
            raise Error(SC_EUSAGE, f"eos: expected a token id, got {eos!r}")
        if self.info.family == _TTS_FAMILY:
            raise Error(SC_EUSAGE, f"{self._path} is a Qwen3-TTS model; use Model.tts")
        if isinstance(prompts, (str, bytes)) or not isinstance(prompts, Sequence):
            raise Error(SC_EUSAGE, f"prompts: expected a list of token id lists, got {type(prompts).__name__}")
        if not prompts:
            return []
        sp = self._L.sc_sample_defaults()
        _sampling(sp, "", greedy, temperature, top_k, top_p, repetition_penalty, seed)
        n = len(prompts)
        reqs = (_lib.sc_gen_request * n)()
        keep = []  # the arrays the requests point into
        for i, ids in enumerate(prompts):
            prompt = _int32_array(f"prompts[{i}]", ids)
            out = (c_int32 * (n_new + 1))()
            keep.append((prompt, out))
            reqs[i].prompt, reqs[i].n_prompt, reqs[i].n_new = prompt, len(ids), n_new
            reqs[i].params, reqs[i].eos, reqs[i].out = sp, -1 if eos is None else eos, out
        sessions = []
        err = _lib.sc_error()
        try:
            for i in range(n):
                s = self._take(self._sessions, self._open_session)
                sessions.append(s)
                self._L.sc_session_reset(s)  # a pooled session holds its last call's tokens
                reqs[i].session = s
            rc = self._L.sc_generate_batch(self._m, reqs, n, byref(err))
        finally:
            for s in sessions:
                self._give(self._sessions, s, self._L.sc_session_close)
        check(rc, err)
        return [list(keep[i][1][:reqs[i].n_out]) for i in range(n)]

    # ---- codecs ---------------------------------------------------------------
    def _codec(self, what: str) -> None:
        self._check_open()
        if self.info.family != _CODEC_FAMILY:
            raise Error(SC_EUSAGE, f"{what}: {self._path} is a {self.info.family} model, not a codec (build the "
                                   f"checkpoint's speech_tokenizer/ or a Mimi)")

    def _codec_call(self, fn: Callable[..., int], src: Any, frames: int, dst: Any) -> None:
        """fn (sc_codec_decode or sc_codec_encode) over frames, on a pooled
        session reset first: each call is a new stream."""
        err = _lib.sc_error()
        s = self._take(self._sessions, self._open_session)
        try:
            self._L.sc_session_reset(s)
            rc = fn(s, src, frames, dst, byref(err))
        finally:
            self._give(self._sessions, s, self._L.sc_session_close)
        check(rc, err)

    def decode(self, codes: Any) -> np.ndarray:
        """Codes to audio with a codec artifact (the Qwen3-TTS 12 Hz decoder
        or Mimi): ``codes`` ``[frames, codebooks]`` (ints in ``[0,
        codebook_size)``), one stream from its start; float32 samples at
        ``info.sample_rate``, ``info.samples_per_frame`` per frame, those
        of ``speechc decode --f32``.

        Raises:
            Error: not a codec, the wrong number of codebooks, a code
                outside its codebook, more frames than the context.
        """
        self._codec("decode")
        a = np.asarray(codes)
        K = self.info.codebooks
        if a.ndim != 2 or a.shape[1] != K or not np.issubdtype(a.dtype, np.integer):
            raise Error(SC_EUSAGE, f"codes: expected an integer array [frames, {K}], got shape {a.shape} "
                                   f"({a.dtype})")
        if a.size and (a.min() < 0 or a.max() >= self._codebook_size):
            raise Error(SC_EUSAGE, f"codes: every code must be in [0, {self._codebook_size}), found "
                                   f"{int(a.min())}..{int(a.max())}")
        frames = a.shape[0]
        c = np.ascontiguousarray(a, dtype=np.int32)
        out = np.zeros(frames * self.info.samples_per_frame, dtype=np.float32)
        if not frames:
            return out
        self._codec_call(self._L.sc_codec_decode, c.ctypes.data_as(POINTER(c_int32)), frames,
                         out.ctypes.data_as(POINTER(ctypes.c_float)))
        return out

    def encode(self, pcm: Any) -> np.ndarray:
        """Audio to codes with a Mimi artifact: mono samples at
        ``info.sample_rate`` (floats; int16 is taken as ``s / 32768``), whole
        frames of ``info.samples_per_frame`` (a partial frame is refused:
        hold it back until it is whole, as the package asks), one stream
        from its start; int32 codes ``[frames, codebooks]``, those of
        ``speechc encode``.

        Raises:
            Error: not a codec with an encoder, a partial frame, a
                non-finite sample, more frames than the context.
        """
        self._codec("encode")
        if not self._can_encode:
            raise Error(SC_EUSAGE, f"encode: {self._path} has no encoder (a Mimi has one; the 12 Hz decoder "
                                   f"does not)")
        spf = self.info.samples_per_frame
        x = _whole_frames(pcm, spf)
        frames = x.size // spf
        out = np.zeros((frames, self.info.codebooks), dtype=np.int32)
        if not frames:
            return out
        self._codec_call(self._L.sc_codec_encode, x.ctypes.data_as(POINTER(ctypes.c_float)), frames,
                         out.ctypes.data_as(POINTER(c_int32)))
        return out

    # ---- Moshi ----------------------------------------------------------------
    def _moshi_only(self) -> None:
        self._check_open()
        if self.info.family != _MOSHI_FAMILY:
            raise Error(SC_EUSAGE, f"{self._path} is a {self.info.family} model, not a Moshi model")

    def moshi(self, *, greedy: Optional[bool] = None, temp: Optional[float] = None,
              temp_text: Optional[float] = None, top_k: Optional[int] = None, top_k_text: Optional[int] = None,
              seed: Optional[int] = None) -> "MoshiConversation":
        """A new Moshi conversation (the ``moshi`` package's ``LMGen`` loop)
        on a session of its own: :meth:`MoshiConversation.step` takes the
        user's audio codes of one 80 ms step and returns Moshi's row once
        the delays have passed, exactly as ``speechc moshi --user-codes``.

        Sampling: LMGen's (audio ``temp`` 0.8 / ``top_k`` 250, text
        ``temp_text`` 0.7 / ``top_k_text`` 25, or the checkpoint's
        ``lm_gen_config``), ``greedy`` for argmax, ``seed`` (4242): ``None``
        keeps those.  Same seed, same rows.

        Raises:
            Error: not a Moshi model, a bad sampling value.
        """
        self._moshi_only()
        L, err = self._L, _lib.sc_error()
        p = _lib.sc_moshi_params()
        check(L.sc_moshi_defaults(self._m, byref(p), byref(err)), err)
        if greedy is not None:
            p.greedy = 1 if greedy else 0
        for name, v, lo, hi, integer in (("temp", temp, 0.0, 100.0, False), ("temp_text", temp_text, 0.0, 100.0, False),
                                         ("top_k", top_k, 0, 2**31 - 1, True),
                                         ("top_k_text", top_k_text, 0, 2**31 - 1, True),
                                         ("seed", seed, 0, 2**63 - 1, True)):
            if v is None:
                continue
            v = _py(v)
            ok = isinstance(v, int) if integer else isinstance(v, (int, float))
            if isinstance(v, bool) or not ok or not lo <= v <= hi:
                raise Error(SC_EUSAGE, f"{name}: expected {'an integer' if integer else 'a number'} in "
                                       f"[{lo}, {hi}], got {v!r}")
            setattr(p, name, v)
        s = self._open_session()
        g, info = c_void_p(), _lib.sc_moshi_info()
        rc = L.sc_moshi_open(s, byref(p), byref(g), byref(info), byref(err))
        if rc:
            L.sc_session_close(s)
            check(rc, err)
        self._lend(s, 2, L.sc_session_close)
        self._lend(g, 1, L.sc_moshi_close)
        conv = MoshiConversation(self, s, g, info)
        self._moshi_convs.add(conv)
        return conv

    def moshi_batch(self) -> "MoshiBatch":
        """An empty batch of Moshi conversations of this model: each
        :meth:`MoshiBatch.step` advances all of them at once, each weight
        read once per step for all (``sc_moshi_batch_step``; the artifact
        needs its batch entries, built by default), each conversation's
        rows exactly those of stepping it alone."""
        self._moshi_only()
        b, err = c_void_p(), _lib.sc_error()
        check(self._L.sc_moshi_batch_new(self._m, byref(b), byref(err)), err)
        self._lend(b, 0, self._L.sc_moshi_batch_free)
        batch = MoshiBatch(self, b)
        self._moshi_batches.add(batch)
        return batch

    # ---- tokenizer ----------------------------------------------------------
    def _tokenizer(self) -> c_void_p:
        self._check_open()
        if not self._tok:
            raise Error(SC_EUSAGE, f"{self._path}: no tokenizer (hint: speechc build copies the checkpoint's "
                                   f"into {os.path.splitext(self._path)[0]}.tokenizer/; or pass tokenizer=DIR)")
        return self._tok

    def tokenize(self, text: str) -> List[int]:
        """The token ids of ``text`` (the Qwen byte-level BPE, exactly as
        HF ``tokenizers``; special tokens such as ``<|im_start|>`` are
        matched first)."""
        if not isinstance(text, str):
            raise Error(SC_EUSAGE, f"tokenize: expected a str, got {type(text).__name__}")
        data = text.encode("utf-8", "surrogatepass")
        ids, n, err = POINTER(c_int32)(), c_size_t(0), _lib.sc_error()
        with self._tok_lock:
            rc = self._L.tok_encode(self._tokenizer(), data, len(data), b"text", byref(ids), byref(n), byref(err))
        check(rc, err)
        try:
            return list(ids[:n.value]) if n.value else []
        finally:
            self._L.sc_free(ids)

    def detokenize(self, ids: Sequence[int]) -> str:
        """The text of ``ids`` (special tokens included); bytes that are not
        UTF-8 (a character cut in two) become U+FFFD."""
        arr = _int32_array("ids", ids)
        text, n, err = c_void_p(), c_size_t(0), _lib.sc_error()
        with self._tok_lock:
            rc = self._L.tok_decode(self._tokenizer(), arr, len(ids), byref(text), byref(n), byref(err))
        check(rc, err)
        try:
            return ctypes.string_at(text, n.value).decode("utf-8", "replace")
        finally:
            self._L.sc_free(text)

    # ---- Qwen3-TTS ------------------------------------------------------------
    def _request(self, text: str, speaker: Optional[str], language: Optional[str], instruct: Optional[str],
                 seed: Optional[int], greedy: Optional[bool], temperature: Optional[float], top_k: Optional[int],
                 top_p: Optional[float], repetition_penalty: Optional[float], sub_temperature: Optional[float],
                 sub_top_k: Optional[int], sub_top_p: Optional[float], non_streaming: bool,
                 max_frames: Optional[int], decoder_batch: int, sequential: bool, min_frames: Optional[int] = None,
                 clamp_frames: Optional[bool] = None) -> Tuple["_lib.TtsTextRequest", list]:
        self._check_open()
        if self.info.family != _TTS_FAMILY:
            raise Error(SC_EUSAGE, f"{self._path} is a {self.info.family} model, not a Qwen3-TTS model "
                                   f"(hint: Model.generate drives plain LMs)")
        keep: list = []

        def cstr(what: str, v: Optional[str]) -> Optional[bytes]:
            if v is None:
                return None
            if not isinstance(v, str):
                raise Error(SC_EUSAGE, f"{what}: expected a str, got {type(v).__name__}")
            b = v.encode("utf-8", "surrogatepass")
            if b"\0" in b:
                raise Error(SC_EUSAGE, f"{what}: contains a NUL character")
            keep.append(b)
            return b

        r = _lib.TtsTextRequest()
        if text is None:
            raise Error(SC_EUSAGE, "text: expected a str, got None")
        r.text = cstr("text", text)
        r.instruct = cstr("instruct", instruct)
        # the model's defaults: its generation_config.json over qwen-tts' (sc_tts_model_defaults)
        d = self._L.tts_text_info(self._tt).contents.defaults
        p = type(d).from_buffer_copy(d)
        p.speaker = cstr("speaker", speaker)
        p.language = cstr("language", language)
        err = _lib.sc_error()
        check(self._L.tts_text_language(self._tt, b"language", p.language, byref(err)), err)
        p.non_streaming = 1 if non_streaming else 0
        if max_frames is not None:
            max_frames = _py(max_frames)
            if isinstance(max_frames, bool) or not isinstance(max_frames, int) or not 1 <= max_frames < 2**24:
                raise Error(SC_EUSAGE, f"max_frames: expected an integer in [1, 2**24), got {max_frames!r}")
            p.max_frames = max_frames
        if clamp_frames is None:
            clamp_frames = max_frames is None
        elif not isinstance(clamp_frames, (bool, np.bool_)):
            raise Error(SC_EUSAGE, f"clamp_frames: expected True, False or None, got {clamp_frames!r}")
        r.frames_to_context = 1 if clamp_frames else 0
        if min_frames is not None:
            min_frames = _py(min_frames)
            if isinstance(min_frames, bool) or not isinstance(min_frames, int) or not 0 <= min_frames < 2**24:
                raise Error(SC_EUSAGE, f"min_frames: expected an integer in [0, 2**24), got {min_frames!r}")
            p.min_frames = min_frames
        _sampling(p.talker, "", greedy, temperature, top_k, top_p, repetition_penalty, seed)
        _sampling(p.predictor, "sub_", greedy, sub_temperature, sub_top_k, sub_top_p, None, seed)
        decoder_batch = _py(decoder_batch)
        if isinstance(decoder_batch, bool) or not isinstance(decoder_batch, int) or not 0 <= decoder_batch < 2**20:
            raise Error(SC_EUSAGE, f"decoder_batch: expected an integer in [0, 2**20), got {decoder_batch!r}")
        p.audio_batch = decoder_batch
        p.audio_sequential = 1 if sequential else 0
        r.params = p
        return r, keep

    def _speak(self, r: "_lib.TtsTextRequest", on_pcm: Callable[[np.ndarray], bool]) -> int:
        """Run request r on a pooled stream; on_pcm gets each frame's samples
        (a copy) on the decoder thread and returns True to stop."""
        failure: List[BaseException] = []

        def cb(user: Any, pcm: Any, n: int, frame: int) -> int:
            try:
                return 1 if on_pcm(np.ctypeslib.as_array(pcm, (n,)).copy()) else 0
            except BaseException as e:  # raised again by the caller
                failure.append(e)
                return 1

        r.on_pcm = _lib.PCM_CB(cb)
        n_frames, err = c_int(0), _lib.sc_error()
        s = self._take(self._streams, self._open_stream)
        try:
            rc = self._L.tts_text_speak(s, byref(r), byref(n_frames), byref(err))
        finally:
            self._give(self._streams, s, self._L.tts_stream_close)
        if failure:
            raise failure[0]
        check(rc, err)
        return n_frames.value

    def tts(self, text: str, *, speaker: Optional[str] = None, language: Optional[str] = None,
            instruct: Optional[str] = None, seed: Optional[int] = None, greedy: Optional[bool] = None,
            temperature: Optional[float] = None, top_k: Optional[int] = None, top_p: Optional[float] = None,
            repetition_penalty: Optional[float] = None, sub_temperature: Optional[float] = None,
            sub_top_k: Optional[int] = None, sub_top_p: Optional[float] = None, non_streaming: bool = False,
            max_frames: Optional[int] = None, min_frames: Optional[int] = None, decoder_batch: int = 0,
            sequential: bool = False, clamp_frames: Optional[bool] = None) -> Tuple[np.ndarray, int]:
        """Speak ``text`` with a Qwen3-TTS model, as ``speechc tts --text``
        does with the same options: the official chat template, the
        official sampling defaults (talker top-k 50, temperature 0.9,
        repetition penalty 1.05; code predictor top-k 50, temperature 0.9;
        what the checkpoint's generation_config.json sets instead, as
        qwen-tts reads it; ``None`` keeps a default, ``greedy=False``
        samples where the file says ``do_sample: false``), and the codec
        decoder built beside the model.

        Args:
            text: what to say (UTF-8).
            speaker: a name of ``info.speakers``.
            language: a name of ``info.languages``, or ``"auto"``.
            instruct: an instruction (its own chat template).
            seed: the samplers' seed (default 0): same seed, same audio.
            greedy: argmax for talker and code predictor.
            temperature, top_k, top_p, repetition_penalty: the talker's.
            sub_temperature, sub_top_k, sub_top_p: the code predictor's.
            non_streaming: all text in the prompt (``--non-streaming``).
            max_frames: stop after this many frames (default 2048, or as
                many as the model's context holds after the prompt).
            clamp_frames: a ``max_frames`` the context cannot hold after
                the prompt is lowered to what it holds (True; the default
                when ``max_frames`` is None) or refused before anything
                runs (False; the default when it is given).
            min_frames: the codec EOS is suppressed for this many frames
                (default 2, the official value).
            decoder_batch: frames per codec call at most (0: the codec's
                build-time maximum; 1: frame by frame, the same bits as
                ``sequential``).
            sequential: decode each frame on the calling thread before the
                next is generated (no decoder thread).

        Returns:
            ``(samples, sample_rate)``: mono float32 samples in [-1, 1].

        Raises:
            Error: no tokenizer or codec decoder, an unknown speaker or
                language (the message lists the valid ones), a bad value.
        """
        r, keep = self._request(text, speaker, language, instruct, seed, greedy, temperature, top_k, top_p,
                                repetition_penalty, sub_temperature, sub_top_k, sub_top_p, non_streaming,
                                max_frames, decoder_batch, sequential, min_frames, clamp_frames)
        chunks: List[np.ndarray] = []
        self._speak(r, lambda pcm: chunks.append(pcm) is not None)
        pcm = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
        return pcm, int(self.info.sample_rate or 0)

    def parse_speech_request(self, body: Union[bytes, str], max_frames: int = 2048) -> SpeechRequest:
        """Read an OpenAI-shaped speech request (``input``, ``voice``,
        ``response_format`` wav|pcm, ``speed`` 1.0 only, and speechc's
        extras: ``language``, ``instruct``, ``seed``, sampling,
        ``max_frames``, ``stream``, ``stream_format`` audio|sse) with the parser ``speechc serve`` uses
        (compiler/serve_request.h), against this model's speakers and
        languages, so that both servers accept and refuse the same bodies.

        Args:
            body: the JSON body.
            max_frames: the most a request may ask for, and its default
                (then with ``clamp_frames``: lowered to what the model's
                context holds after the prompt, as ``speechc serve`` does).

        Raises:
            Error: (code 1) a body that is not such a request; the message
                names the field and, for a value outside a set, the values
                accepted.
        """
        self._check_open()
        if self.info.family != _TTS_FAMILY:
            raise Error(SC_EUSAGE, f"{self._path} is a {self.info.family} model, not a Qwen3-TTS model")
        data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else bytes(body)
        voices = [v.encode() for v in self.info.speakers]
        langs = [x.encode() for x in self.info.languages]
        lim = _lib.ServeLimits(max_frames=max_frames, n_voices=len(voices), n_languages=len(langs))
        lim.defaults = ctypes.pointer(self._L.tts_text_info(self._tt).contents.defaults)
        lim.voices = (ctypes.c_char_p * max(1, len(voices)))(*voices)
        lim.languages = (ctypes.c_char_p * max(1, len(langs)))(*langs)
        r, err = _lib.ServeRequest(), _lib.sc_error()
        check(self._L.serve_request_parse(data, len(data), byref(lim), byref(r), byref(err)), err)
        try:
            p = r.params
            t, q = p.talker, p.predictor
            options: Dict[str, Any] = dict(
                speaker=None if r.voice is None else _s(r.voice),
                language=None if r.language is None else _s(r.language),
                instruct=None if r.instruct is None else _s(r.instruct),
                seed=int(t.seed), greedy=bool(t.greedy), temperature=float(t.temperature), top_k=int(t.top_k),
                top_p=float(t.top_p), repetition_penalty=float(t.repetition_penalty),
                sub_temperature=float(q.temperature), sub_top_k=int(q.top_k), sub_top_p=float(q.top_p),
                max_frames=int(p.max_frames), clamp_frames=not r.max_frames_given)
            return SpeechRequest(input=_s(r.input), format="pcm" if r.format == 1 else "wav", stream=bool(r.stream),
                                 model=None if r.model is None else _s(r.model), options=options,
                                 sse=bool(r.sse))
        finally:
            self._L.serve_request_free(byref(r))

    def tts_stream(self, text: str, **options: Any) -> "TtsStream":
        """Speak ``text`` as :meth:`tts` does (same options), yielding each
        frame's samples (float32, ``info.samples_per_frame`` of them) as
        soon as the codec has decoded it, while later frames are generated.

        The chunks concatenate to exactly what :meth:`tts` returns with the
        same options.  Generation runs on a thread of its own, started by
        the first ``next()``, at most :attr:`TtsStream.QUEUE` frames ahead
        of the reader.  To leave early, ``close()`` the iterator (or use it
        in a ``with`` block, or drop it): that stops the generation before
        its next frame and waits for the C call to end, so its session is
        free again.  An error in the middle is raised after the chunks made
        before it::

            with m.tts_stream("Hello", speaker="ryan") as chunks:
                for pcm in chunks:
                    play(pcm)
        """
        for k in options:
            if k not in _TTS_OPTIONS:
                raise Error(SC_EUSAGE, f"tts_stream: unknown option '{k}' (accepted: {', '.join(_TTS_OPTIONS)})")
        o = dict(_TTS_DEFAULTS, **options)
        r, keep = self._request(text, **o)
        return self._stream(r, keep)

    def _stream(self, r: "_lib.TtsTextRequest", keep: list) -> "TtsStream":
        return TtsStream(self, r, keep)


class _StreamState:
    """A TtsStream's queue, stop flag, failure and frame count, shared with
    its generation thread."""

    def __init__(self, size: int):
        self.q: "queue.Queue[Any]" = queue.Queue(maxsize=size)
        self.stop = threading.Event()
        self.failure: List[BaseException] = []
        self.frames: Optional[int] = None

    def put(self, item: Any) -> bool:
        """Queue item unless the consumer has gone: False then."""
        while not self.stop.is_set():
            try:
                self.q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False


def _stream_run(model: "Model", r: "_lib.TtsTextRequest", keep: list, st: _StreamState) -> None:
    """A TtsStream's generation thread (keep: what r points into)."""
    try:
        st.frames = model._speak(r, lambda pcm: not st.put(pcm))
    except BaseException as e:
        st.failure.append(e)
    finally:
        st.put(_END)
    del keep


class TtsStream(Iterator[np.ndarray]):
    """The iterator :meth:`Model.tts_stream` returns: each frame's PCM as
    the codec decodes it.

    Generation runs on a thread of its own from the first ``next()``.  At
    most ``QUEUE`` chunks wait for the consumer: a slower consumer holds
    the decoder, and through it the generation (``sc_tts_generate`` waits
    when it is two decoder batches ahead), so a stream never runs far
    ahead of its reader.  :meth:`close` (called by ``with`` at the end of
    its block, when the iterator is dropped, and when it is exhausted)
    stops the generation before its next frame and waits for the C call to
    return.  ``frames`` is the number of frames generated, set
    once the call has returned.
    """

    QUEUE = 8

    def __init__(self, model: Model, r: "_lib.TtsTextRequest", keep: list):
        self._model, self._r, self._keep = model, r, keep
        # what the generation thread shares with the iterator: never the
        # iterator itself, so that dropping it runs __del__ (and close)
        self._st = _StreamState(self.QUEUE)
        self._thread: Optional[threading.Thread] = None
        self._done = False

    @property
    def frames(self) -> Optional[int]:
        return self._st.frames

    def __iter__(self) -> "TtsStream":
        return self

    def __next__(self) -> np.ndarray:
        if self._done:
            raise StopIteration
        if self._thread is None:
            self._model._check_open()
            self._model._live_streams.add(self)
            self._thread = threading.Thread(target=_stream_run, args=(self._model, self._r, self._keep, self._st),
                                            name="speechc-tts", daemon=True)
            self._thread.start()
        try:
            item = self._st.q.get()
        except BaseException:
            self.close()
            raise
        if item is _END:
            self.close()
            if self._st.failure:
                raise self._st.failure[0]
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the generation (if it runs) and wait for it to end."""
        self._done = True
        self._st.stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def __enter__(self) -> "TtsStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


_TTS_DEFAULTS: Dict[str, Any] = dict(
    speaker=None, language=None, instruct=None, seed=None, greedy=None, temperature=None, top_k=None, top_p=None,
    repetition_penalty=None, sub_temperature=None, sub_top_k=None, sub_top_p=None, non_streaming=False,
    max_frames=None, min_frames=None, decoder_batch=0, sequential=False, clamp_frames=None)
_TTS_OPTIONS = tuple(_TTS_DEFAULTS)


def _whole_frames(pcm: Any, spf: int) -> np.ndarray:
    """Mono samples as float32 (int16 as s / 32768) in whole frames of spf."""
    a = np.asarray(pcm)
    if a.ndim != 1:
        raise Error(SC_EUSAGE, f"pcm: expected mono samples (one dimension), got shape {a.shape}")
    x = a.astype(np.float32) / 32768 if a.dtype == np.int16 else np.ascontiguousarray(a, dtype=np.float32)
    if x.size % spf:
        raise Error(SC_EUSAGE, f"pcm: {x.size} samples are not whole frames of {spf} (the last "
                               f"{x.size % spf} are a partial frame)")
    return x


def _user_codes(what: str, codes: Sequence[int], n: int, card: int) -> "ctypes.Array[c_int32]":
    if isinstance(codes, (str, bytes)) or not isinstance(codes, (Sequence, np.ndarray)) or len(codes) != n:
        raise Error(SC_EUSAGE, f"{what}: expected {n} user codes (the model's user codebooks), got {codes!r}")
    return _int32_array(what, list(codes))  # integers only: 0.5 or "1" are refused, not truncated


class MoshiConversation:
    """One Moshi conversation (:meth:`Model.moshi`): a generator on a session
    of its own.  ``info`` holds ``n_q``, ``dep_q``, ``card``, ``text_card``,
    ``user_codebooks`` and ``max_delay``.  One thread at a time; different
    conversations run in parallel.  Close it (or use it as a context
    manager) to free its session; closing removes it from its batches."""

    def __init__(self, model: Model, s: c_void_p, g: c_void_p, info: "_lib.sc_moshi_info"):
        self._model, self._s, self._g = model, s, g
        self.info = {k: getattr(info, k) for k, _ in _lib.sc_moshi_info._fields_}
        self._row = (c_int32 * (1 + info.dep_q))()
        self._batches: List["MoshiBatch"] = []
        self._cm: Optional[Model] = None  # the Mimi of push_pcm, and its session
        self._cs = c_void_p()

    def _check(self) -> None:
        if not self._g:
            raise Error(SC_EUSAGE, "the Moshi conversation is closed")

    def step(self, codes: Sequence[int]) -> Optional[List[int]]:
        """One 80 ms step: the user's ``user_codebooks`` codes in; Moshi's
        row ``[text, audio_1..audio_dep_q]`` out, or ``None`` while the
        delays leave nothing to return (the first ``max_delay`` steps).

        Raises:
            Error: a code outside ``[0, card)`` (the stream is left as it
                was), the wrong number of codes, a full context.
        """
        self._check()
        u = _user_codes("codes", codes, self.info["user_codebooks"], self.info["card"])
        has, err = c_int(0), _lib.sc_error()
        check(self._model._L.sc_moshi_step(self._g, u, self._row, byref(has), byref(err)), err)
        return list(self._row) if has.value else None

    def push(self, frames: Sequence[Sequence[int]]) -> List[List[int]]:
        """:meth:`step` over several steps' codes; the rows returned, in order."""
        rows = []
        for codes in frames:
            r = self.step(codes)
            if r is not None:
                rows.append(r)
        return rows

    def push_pcm(self, pcm: Any, mimi: Model) -> Tuple[List[List[int]], np.ndarray]:
        """The user's audio in, Moshi's out (``sc_moshi_push_pcm``, the
        package's ``run_inference`` loop, as ``speechc moshi --input``):
        mono samples at 24 kHz in whole frames of 1920 (float, or int16 as
        ``s / 32768``), encoded by ``mimi`` (the model's Mimi, a codec
        :class:`Model`), stepped (the stream's first frame twice), and
        each returned row's audio decoded.  The Mimi stream lives with the
        conversation, so audio may come in pieces; every call must pass
        the same ``mimi``.

        Returns:
            (the rows, Moshi's reply samples: 1920 float32 per row).
        """
        self._check()
        mimi._codec("push_pcm")
        if self._cm is not None and self._cm is not mimi:
            raise Error(SC_EUSAGE, "push_pcm: this conversation's audio goes through another Mimi model")
        spf = mimi.info.samples_per_frame
        x = _whole_frames(pcm, spf)
        L, err = self._model._L, _lib.sc_error()
        if self._cm is None:
            cs = c_void_p()
            check(L.sc_session_open(mimi._m, byref(cs), byref(err)), err)
            mimi._lend(cs, 2, L.sc_session_close)
            self._cm, self._cs = mimi, cs
            mimi._moshi_audio.add(self)
        rows: List[List[int]] = []
        out: List[np.ndarray] = []
        failure: List[BaseException] = []

        def cb(user: Any, row: Any, n_row: int, p: Any, n: int, step: int) -> int:
            try:
                rows.append(list(row[:n_row]))
                out.append(np.ctypeslib.as_array(p, shape=(n,)).copy())
                return 0
            except BaseException as e:  # never unwind through C
                failure.append(e)
                return 1

        fn = _lib.AUDIO_CB(cb)
        pushed = c_int(0)
        rc = L.sc_moshi_push_pcm(self._g, self._cs, x.ctypes.data_as(POINTER(ctypes.c_float)), x.size // spf, fn,
                                 None, byref(pushed), byref(err))
        if failure:
            raise failure[0]
        check(rc, err)
        return rows, (np.concatenate(out) if out else np.zeros(0, dtype=np.float32))

    def _drop_codec(self) -> None:
        if self._cs:
            self._cm._release(self._cs)
        self._cs, self._cm = c_void_p(), None

    def close(self) -> None:
        """Free the conversation and its session.  Idempotent."""
        for b in list(self._batches):
            b.remove(self)
        if self._cm is not None:
            self._cm._moshi_audio.discard(self)
            self._drop_codec()
        if self._g:
            self._model._release(self._g)
            self._g = c_void_p()
        if self._s:
            self._model._release(self._s)
            self._s = c_void_p()

    def __enter__(self) -> "MoshiConversation":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class MoshiBatch:
    """Conversations of one Moshi model stepped together
    (:meth:`Model.moshi_batch`, ``sc_moshi_batch_*``).  Conversations join
    (:meth:`add`) and leave (:meth:`remove`) between steps and may be at
    different steps.  One thread at a time, its conversations included."""

    def __init__(self, model: Model, b: c_void_p):
        self._model, self._b = model, b
        self._convs: List[MoshiConversation] = []

    def _check(self) -> None:
        if not self._b:
            raise Error(SC_EUSAGE, "the Moshi batch is closed")

    @property
    def conversations(self) -> List[MoshiConversation]:
        """The conversations, in the order :meth:`step` takes their codes."""
        return list(self._convs)

    def add(self, conv: MoshiConversation) -> None:
        self._check()
        conv._check()
        if conv._model is not self._model:
            raise Error(SC_EUSAGE, "the conversation is of another Model")
        err = _lib.sc_error()
        check(self._model._L.sc_moshi_batch_add(self._b, conv._g, byref(err)), err)
        self._convs.append(conv)
        conv._batches.append(self)

    def remove(self, conv: MoshiConversation) -> None:
        if conv not in self._convs:
            raise Error(SC_EUSAGE, "the conversation is not in the batch")
        self._model._L.sc_moshi_batch_remove(self._b, conv._g)
        self._convs.remove(conv)
        conv._batches.remove(self)

    def step(self, codes: Sequence[Sequence[int]]) -> List[Optional[List[int]]]:
        """One step of every conversation: ``codes[i]`` the user codes of
        ``conversations[i]``; its row (or ``None``) at ``i`` of the result,
        as :meth:`MoshiConversation.step` would return it.  The codes are
        checked for all before any conversation moves."""
        self._check()
        n = len(self._convs)
        if isinstance(codes, (str, bytes)) or len(codes) != n:
            raise Error(SC_EUSAGE, f"codes: expected one list of user codes per conversation ({n}), got {codes!r}")
        if not n:
            return []
        info = self._convs[0].info
        U, W = info["user_codebooks"], 1 + info["dep_q"]
        user = (c_int32 * (n * U if U else 1))()
        for i, c in enumerate(codes):
            user[i * U:(i + 1) * U] = list(_user_codes(f"codes[{i}]", c, U, info["card"]))
        rows, has, err = (c_int32 * (n * W))(), (c_int * n)(), _lib.sc_error()
        check(self._model._L.sc_moshi_batch_step(self._b, user, rows, has, byref(err)), err)
        return [list(rows[i * W:(i + 1) * W]) if has[i] else None for i in range(n)]

    def close(self) -> None:
        """Free the batch (its conversations stay open).  Idempotent."""
        for c in list(self._convs):
            self.remove(c)
        if self._b:
            self._model._release(self._b)
            self._b = c_void_p()

    def __enter__(self) -> "MoshiBatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
