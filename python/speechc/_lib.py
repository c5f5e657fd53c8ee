"""ctypes declarations of libspeechc.so: the structs Python mirrors and the
prototypes of the functions it calls.

The library is found, in order: ``SPEECHC_LIBRARY`` (a path), the copy
bundled in this package at install time (``speechc/libspeechc.so``), then
the system's library path (``ctypes.util.find_library("speechc")``).  It
is loaded on first use, so ``import speechc`` works without it.

Every mirrored struct is checked against the library's own ``sizeof`` at
load (``sc_sizeof``), so a library from another version is refused by name
instead of being called with a wrong layout.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_float, c_int, c_int32,
                    c_size_t, c_uint64, c_void_p)
from pathlib import Path
from typing import Optional

from .errors import Error

LIB_NAME = "libspeechc.so"

# error codes (speechc.h)
SC_OK, SC_EUSAGE, SC_EINPUT, SC_ERUNTIME = 0, 1, 2, 3


class sc_error(Structure):
    _fields_ = [("code", c_int), ("msg", c_char * 1024)]


class sc_open_opts(Structure):
    _fields_ = [("verify_weights", c_int), ("threads", c_int)]


class sc_model_info(Structure):
    _fields_ = [
        ("family", c_char_p), ("model_type", c_char_p), ("target", c_char_p),
        ("compiler_version", c_char_p), ("weight_file", c_char_p), ("config_json", c_char_p),
        ("vocab", c_int), ("hidden", c_int), ("n_layers", c_int), ("max_context", c_int),
        ("weight_bytes", c_uint64), ("state_bytes", c_uint64), ("config_hash", c_uint64),
    ]


class sc_sample_params(Structure):
    _fields_ = [
        ("greedy", c_int), ("temperature", c_float), ("top_k", c_int), ("top_p", c_float),
        ("repetition_penalty", c_float), ("seed", c_uint64),
    ]


class sc_gen_request(Structure):
    _fields_ = [
        ("session", c_void_p), ("prompt", POINTER(c_int32)), ("n_prompt", c_int), ("n_new", c_int),
        ("params", sc_sample_params), ("eos", c_int32), ("out", POINTER(c_int32)), ("n_out", c_int),
    ]


class sc_codec_info(Structure):
    _fields_ = [
        ("n_codebooks", c_int), ("codebook_size", c_int), ("samples_per_frame", c_int),
        ("sample_rate", c_int), ("max_frames", c_int), ("can_encode", c_int),
    ]


class sc_moshi_info(Structure):
    _fields_ = [("n_q", c_int), ("dep_q", c_int), ("card", c_int), ("text_card", c_int),
                ("user_codebooks", c_int), ("max_delay", c_int)]


class sc_moshi_params(Structure):
    _fields_ = [("greedy", c_int), ("temp", c_float), ("temp_text", c_float), ("top_k", c_int),
                ("top_k_text", c_int), ("seed", c_uint64)]


# int (*on_audio)(void *user, const int32_t *codes, int n_codebooks, const float *pcm, int n_samples, int frame)
AUDIO_CB = CFUNCTYPE(c_int, c_void_p, POINTER(c_int32), c_int, POINTER(c_float), c_int, c_int)
# int (*sc_frame_cb)(void *user, const int32_t *codes, int n_codebooks, int frame)
FRAME_CB = CFUNCTYPE(c_int, c_void_p, POINTER(c_int32), c_int, c_int)
# int (*sc_token_cb)(void *user, int32_t token, int index)
TOKEN_CB = CFUNCTYPE(c_int, c_void_p, c_int32, c_int)
# int (*on_pcm)(void *user, const float *pcm, int n_samples, int frame)
PCM_CB = CFUNCTYPE(c_int, c_void_p, POINTER(c_float), c_int, c_int)
# int (*on_start)(void *user, sc_error *err)
START_CB = CFUNCTYPE(c_int, c_void_p, c_void_p)


class sc_tts_params(Structure):
    _fields_ = [
        ("text_ids", POINTER(c_int32)), ("n_text", c_int),
        ("instruct_ids", POINTER(c_int32)), ("n_instruct", c_int),
        ("speaker", c_char_p), ("language", c_char_p),
        ("non_streaming", c_int), ("max_frames", c_int), ("min_frames", c_int),
        ("talker", sc_sample_params), ("predictor", sc_sample_params),
        ("stats", c_void_p),
        ("codec", c_void_p),
        ("on_audio", AUDIO_CB), ("audio_user", c_void_p),
        ("audio_batch", c_int), ("audio_sequential", c_int), ("audio_no_share", c_int),
    ]


class TtsTextOpts(Structure):
    _fields_ = [
        ("tokenizer", c_char_p), ("codec", c_char_p),
        ("threads", c_int), ("decoder_threads", c_int), ("verify_weights", c_int),
    ]


class TtsTextInfo(Structure):
    _fields_ = [
        ("codebooks", c_int), ("has_tokenizer", c_int), ("has_codec", c_int),
        ("sample_rate", c_int), ("samples_per_frame", c_int),
        ("n_speakers", c_int), ("n_languages", c_int),
        ("speakers", POINTER(c_char_p)), ("languages", POINTER(c_char_p)),
        ("drops_instruct", c_int), ("defaults", sc_tts_params),
    ]


class TtsTextRequest(Structure):
    _fields_ = [
        ("text", c_char_p), ("instruct", c_char_p),
        ("text_what", c_char_p), ("instruct_what", c_char_p),
        ("params", sc_tts_params),
        ("on_pcm", PCM_CB), ("on_frame", FRAME_CB), ("user", c_void_p),
        ("frames_to_context", c_int), ("on_start", START_CB),
    ]


class ServeLimits(Structure):
    _fields_ = [
        ("max_frames", c_int), ("voices", POINTER(c_char_p)), ("n_voices", c_int),
        ("languages", POINTER(c_char_p)), ("n_languages", c_int),
        ("defaults", POINTER(sc_tts_params)),
    ]


class ServeRequest(Structure):
    _fields_ = [
        ("model", c_char_p), ("input", c_char_p), ("voice", c_char_p), ("language", c_char_p),
        ("instruct", c_char_p), ("format", c_int), ("stream", c_int), ("max_frames_given", c_int),
        ("sse", c_int), ("params", sc_tts_params),
    ]


class sc_wav_opts(Structure):
    _fields_ = [("sample_rate", c_int), ("channels", c_int), ("format", c_int), ("raw", c_int)]


SC_WAV_HEADER_MAX = 58

# name in sc_sizeof -> the ctypes mirror
_MIRRORS = {
    "sc_error": sc_error, "sc_open_opts": sc_open_opts, "sc_model_info": sc_model_info,
    "sc_sample_params": sc_sample_params, "sc_gen_request": sc_gen_request, "sc_codec_info": sc_codec_info, "sc_tts_params": sc_tts_params,
    "TtsTextOpts": TtsTextOpts, "TtsTextInfo": TtsTextInfo, "TtsTextRequest": TtsTextRequest,
    "ServeLimits": ServeLimits, "ServeRequest": ServeRequest, "sc_wav_opts": sc_wav_opts,
    "sc_moshi_info": sc_moshi_info, "sc_moshi_params": sc_moshi_params,
}

# function name -> (restype, argtypes)
_PROTOS = {
    "sc_library_version": (c_char_p, []),
    "sc_sizeof": (c_size_t, [c_char_p]),
    "sc_free": (None, [c_void_p]),
    "sc_model_open": (c_int, [c_char_p, POINTER(sc_open_opts), POINTER(c_void_p), POINTER(sc_error)]),
    "sc_model_close": (None, [c_void_p]),
    "sc_model_get_info": (None, [c_void_p, POINTER(sc_model_info)]),
    "sc_session_open": (c_int, [c_void_p, POINTER(c_void_p), POINTER(sc_error)]),
    "sc_session_close": (None, [c_void_p]),
    "sc_session_reset": (None, [c_void_p]),
    "sc_sample_defaults": (sc_sample_params, []),
    "sc_generate": (c_int, [c_void_p, POINTER(c_int32), c_int, c_int, POINTER(sc_sample_params), c_int32,
                            POINTER(c_int32), POINTER(c_int), TOKEN_CB, c_void_p, POINTER(sc_error)]),
    "sc_generate_batch": (c_int, [c_void_p, POINTER(sc_gen_request), c_int, POINTER(sc_error)]),
    "sc_tts_defaults": (sc_tts_params, []),
    "sc_codec_get_info": (c_int, [c_void_p, POINTER(sc_codec_info), POINTER(sc_error)]),
    "sc_codec_decode": (c_int, [c_void_p, POINTER(c_int32), c_int, POINTER(c_float), POINTER(sc_error)]),
    "sc_codec_encode": (c_int, [c_void_p, POINTER(c_float), c_int, POINTER(c_int32), POINTER(sc_error)]),
    "sc_moshi_defaults": (c_int, [c_void_p, POINTER(sc_moshi_params), POINTER(sc_error)]),
    "sc_moshi_open": (c_int, [c_void_p, POINTER(sc_moshi_params), POINTER(c_void_p), POINTER(sc_moshi_info),
                              POINTER(sc_error)]),
    "sc_moshi_close": (None, [c_void_p]),
    "sc_moshi_step": (c_int, [c_void_p, POINTER(c_int32), POINTER(c_int32), POINTER(c_int), POINTER(sc_error)]),
    "sc_moshi_push_pcm": (c_int, [c_void_p, c_void_p, POINTER(c_float), c_int, AUDIO_CB, c_void_p, POINTER(c_int),
                                  POINTER(sc_error)]),
    "sc_moshi_batch_new": (c_int, [c_void_p, POINTER(c_void_p), POINTER(sc_error)]),
    "sc_moshi_batch_free": (None, [c_void_p]),
    "sc_moshi_batch_add": (c_int, [c_void_p, c_void_p, POINTER(sc_error)]),
    "sc_moshi_batch_remove": (c_int, [c_void_p, c_void_p]),
    "sc_moshi_batch_step": (c_int, [c_void_p, POINTER(c_int32), POINTER(c_int32), POINTER(c_int),
                                    POINTER(sc_error)]),
    "tok_load": (c_int, [c_char_p, POINTER(c_void_p), POINTER(sc_error)]),
    "tok_free": (None, [c_void_p]),
    "tok_vocab_size": (c_int, [c_void_p]),
    "tok_encode": (c_int, [c_void_p, c_char_p, c_size_t, c_char_p, POINTER(POINTER(c_int32)), POINTER(c_size_t),
                           POINTER(sc_error)]),
    "tok_decode": (c_int, [c_void_p, POINTER(c_int32), c_size_t, POINTER(c_void_p), POINTER(c_size_t),
                           POINTER(sc_error)]),
    "tok_dir_of": (c_int, [c_char_p, c_char_p, c_size_t]),
    "sc_build_argv": (c_int, [c_int, POINTER(c_char_p), POINTER(sc_error)]),
    "tts_text_defaults": (TtsTextOpts, []),
    "tts_text_resolve": (None, [c_char_p, POINTER(TtsTextOpts), c_char_p, c_char_p]),
    "tts_text_open": (c_int, [c_char_p, POINTER(TtsTextOpts), POINTER(c_void_p), POINTER(sc_error)]),
    "tts_text_close": (None, [c_void_p]),
    "tts_text_info": (POINTER(TtsTextInfo), [c_void_p]),
    "tts_text_language": (c_int, [c_void_p, c_char_p, c_char_p, POINTER(sc_error)]),
    "tts_stream_open": (c_int, [c_void_p, POINTER(c_void_p), POINTER(sc_error)]),
    "tts_stream_close": (None, [c_void_p]),
    "tts_text_speak": (c_int, [c_void_p, POINTER(TtsTextRequest), POINTER(c_int), POINTER(sc_error)]),
    "serve_request_parse": (c_int, [c_char_p, c_size_t, POINTER(ServeLimits), POINTER(ServeRequest),
                                    POINTER(sc_error)]),
    "serve_request_free": (None, [POINTER(ServeRequest)]),
    "sc_wav_header": (ctypes.c_uint, [POINTER(sc_wav_opts), ctypes.c_int64, POINTER(ctypes.c_ubyte)]),
    "sc_wav_s16le": (None, [POINTER(c_float), c_size_t, c_void_p]),
}

_lib: Optional[ctypes.CDLL] = None
_lib_lock = threading.Lock()


def library_path() -> str:
    """The libspeechc.so that :func:`lib` loads (see the module docstring)."""
    env = os.environ.get("SPEECHC_LIBRARY")
    if env:
        if not Path(env).is_file():
            raise Error(SC_EINPUT, f"SPEECHC_LIBRARY={env}: no such file "
                                   f"(hint: cmake --build build makes build/{LIB_NAME})")
        return env
    bundled = Path(__file__).resolve().parent / LIB_NAME
    if bundled.is_file():
        return str(bundled)
    found = ctypes.util.find_library("speechc")
    if found:
        return found
    raise Error(SC_EINPUT, f"{LIB_NAME} not found: set SPEECHC_LIBRARY to its path (cmake --build build makes "
                           f"build/{LIB_NAME}), or install the package after building it so that it is bundled")


def lib() -> ctypes.CDLL:
    """The loaded library, its prototypes set and its structs checked."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = library_path()
        try:
            L = ctypes.CDLL(path)
        except OSError as e:
            raise Error(SC_EINPUT, f"{path}: cannot load: {e}") from None
        for name, (res, args) in _PROTOS.items():
            try:
                f = getattr(L, name)
            except AttributeError:
                raise Error(SC_EINPUT, f"{path}: does not export {name} (a library from another speechc "
                                       f"version? rebuild it: cmake --build build)") from None
            f.restype, f.argtypes = res, args
        for name, mirror in _MIRRORS.items():
            n = L.sc_sizeof(name.encode())
            if n != ctypes.sizeof(mirror):
                raise Error(SC_EINPUT, f"{path}: struct {name} is {n} bytes there, {ctypes.sizeof(mirror)} in "
                                       f"this package (versions differ: install the package from the same "
                                       f"tree as the library)")
        _lib = L
        return L


def check(rc: int, err: sc_error) -> None:
    """Raise :class:`Error` with the C message when rc is not SC_OK."""
    if rc != SC_OK:
        raise Error(rc, err.msg.decode("utf-8", "replace"))
