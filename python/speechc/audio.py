"""Audio bytes as speechc writes them: the RIFF/WAVE header and the 16-bit
conversion of ``speechc tts`` and ``speechc serve`` (runtime/wav.h), so a
Python server answers with the same bytes."""
from __future__ import annotations

import ctypes

import numpy as np

from . import _lib


def s16le(pcm: np.ndarray) -> bytes:
    """Float samples to little-endian 16-bit PCM: clipped to [-1, 1], times
    32767, rounded to nearest (ties to even), NaN to 0."""
    a = np.ascontiguousarray(pcm, dtype=np.float32).ravel()
    out = ctypes.create_string_buffer(2 * a.size)
    if a.size:
        _lib.lib().sc_wav_s16le(a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), a.size, out)
    return out.raw


def wav_header(sample_rate: int, frames: int = -1, *, f32: bool = False, channels: int = 1) -> bytes:
    """The WAV header for ``frames`` sample frames (44 bytes for 16-bit,
    58 for float32); ``frames < 0`` writes the 0xFFFFFFFF "unknown length"
    sizes of a stream."""
    o = _lib.sc_wav_opts(sample_rate=sample_rate, channels=channels, format=1 if f32 else 0, raw=0)
    h = (ctypes.c_ubyte * _lib.SC_WAV_HEADER_MAX)()
    n = _lib.lib().sc_wav_header(ctypes.byref(o), frames, h)
    return bytes(h[:n])


def wav_bytes(pcm: np.ndarray, sample_rate: int, *, f32: bool = False) -> bytes:
    """A whole mono WAV file: what ``speechc tts -o x.wav`` (``--f32``)
    writes for these samples."""
    a = np.ascontiguousarray(pcm, dtype=np.float32).ravel()
    body = a.astype("<f4").tobytes() if f32 else s16le(a)
    return wav_header(sample_rate, a.size, f32=f32) + body
