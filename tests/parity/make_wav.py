#!/usr/bin/env python3
"""Reference WAV files for runtime/wav.c (tests/unit/test_wav.c).

Run:  /work/venv/bin/python tests/parity/make_wav.py           # (re)write tests/data/wav/
      /work/venv/bin/python tests/parity/make_wav.py --check   # compare, exit 1 on mismatch
      (numpy; soundfile, if installed, for the cross-checks)

Writes tests/data/wav/:
  signal.f32          little-endian float32 [N]: the input; special values
                      first (0, -0, +-1, +-1.5, +-0.5, +-inf, NaN, values
                      that rounding and truncation map differently), then a
                      sweep with noise
  s16_mono_24k.wav    Python's `wave` module: 24000 Hz, 1 channel, 16-bit, the
                      samples converted by the rule of runtime/wav.h (clip to
                      [-1, 1], x 32767, round half to even, NaN -> 0)
  s16_stereo_16k.wav  the same signal as 2 interleaved channels at 16000 Hz
  s16_empty.wav       `wave` with no frames (44-byte header, sizes 36 / 0)
  f32_mono_24k.wav    float32, header built here by hand as the WAVE spec has
                      it for non-PCM data (and as scipy.io.wavfile writes it):
                      fmt chunk of 18 bytes (format 3, cbSize 0), a `fact`
                      chunk with the frame count, then data; 58-byte header
  f32_empty.wav       the same with no frames

and, with soundfile (libsndfile; required for these), the encodings the
reader also takes, each of the first 600 samples (NEW_N) and beside it the
float32 samples libsndfile reads from it (sf.read(dtype="float32"), the
reference the reader is held to bit for bit):
  u8_mono_24k.wav     PCM_U8, written by libsndfile from the clipped finite
                      samples
  s24_mono_24k.wav    PCM_24, likewise
  s32_stereo_16k.wav  PCM_32, 2 interleaved channels at 16000 Hz
  s24_ext_mono_24k.wav PCM_24 as WAVE_FORMAT_EXTENSIBLE (libsndfile's WAVEX)
  f64_mono_24k.wav    float64 of every sample (NaN and infinities included),
                      the header built here as for f32 (libsndfile would add
                      a PEAK chunk with the time in it)
  NAME.ref.f32        for each of the five: libsndfile's float32 samples

Cross-checks when soundfile (libsndfile) is installed: it reads both f32
files back (format WAV, subtype FLOAT, the same bits, NaN included); its own
PCM_16 WAV of the clipped samples has the same 44-byte header as
s16_mono_24k.wav and samples within 2 LSB (libsndfile 1.2.2, which qwen-tts
saves its WAVs with, scales by 32768 and rounds down: floor(x * 32768) for
most x, clipped; the rule here is symmetric and rounds to nearest).
"""

import io
import os
import struct
import sys
import wave

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "wav")
N = 2400  # 0.1 s at 24 kHz; even, so the stereo file has N/2 frames
NEW_N = 600  # the other encodings: the special values and the start of the sweep


def signal():
    special = [0.0, -0.0, 1.0, -1.0, 1.5, -1.5, 0.5, -0.5, np.inf, -np.inf, np.nan,
               0.9 / 32767, -0.9 / 32767, 1.6 / 32767, -1.6 / 32767, 32766.6 / 32767,
               1e-30, -1e-30, 1.0000001, -1.0000001]
    rng = np.random.default_rng(20240611)
    t = np.arange(N - len(special)) / 24000.0
    sweep = 0.8 * np.sin(2 * np.pi * (200 + 4000 * t) * t) + 0.05 * rng.standard_normal(t.size)
    return np.concatenate([np.array(special), sweep]).astype("<f4")


def to_s16(x):
    """The conversion of runtime/wav.h, in float64 (exact, as in C)."""
    x = x.astype(np.float64)
    nan = np.isnan(x)
    y = np.rint(np.clip(np.where(nan, 0.0, x), -1.0, 1.0) * 32767.0)  # rint: half to even
    return y.astype("<i2")


def wave_bytes(pcm16, rate, channels):
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16.tobytes())
    return buf.getvalue()


def f32_bytes(x, rate, channels, width=4):
    data = x.astype("<f4" if width == 4 else "<f8").tobytes()
    frames = x.size // channels
    fmt = struct.pack("<HHIIHHH", 3, channels, rate, rate * channels * width, channels * width, 8 * width, 0)
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt +
            b"fact" + struct.pack("<II", 4, frames) +
            b"data" + struct.pack("<I", len(data)) + data)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def sndfile_files():
    """The other encodings (libsndfile writes the integer ones) and the
    float32 samples libsndfile reads from each."""
    import soundfile as sf
    x = signal()[:NEW_N]
    finite = np.clip(np.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0), -1, 1).astype("<f4")
    out = {}
    for name, data, rate, channels, fmt, subtype in (
            ("u8_mono_24k.wav", finite, 24000, 1, "WAV", "PCM_U8"),
            ("s24_mono_24k.wav", finite, 24000, 1, "WAV", "PCM_24"),
            ("s32_stereo_16k.wav", finite.reshape(-1, 2), 16000, 2, "WAV", "PCM_32"),
            ("s24_ext_mono_24k.wav", finite, 24000, 1, "WAVEX", "PCM_24")):
        buf = io.BytesIO()
        sf.write(buf, data, rate, subtype=subtype, format=fmt)
        out[name] = buf.getvalue()
    out["f64_mono_24k.wav"] = f32_bytes(x.astype(np.float64), 24000, 1, width=8)
    for name in list(out):
        y, _ = sf.read(io.BytesIO(out[name]), dtype="float32", always_2d=False)
        out[name.replace(".wav", ".ref.f32")] = np.ascontiguousarray(y).astype("<f4").tobytes()
    return out


def files():
    x = signal()
    s16 = to_s16(x)
    return {
        **sndfile_files(),
        "signal.f32": x.tobytes(),
        "s16_mono_24k.wav": wave_bytes(s16, 24000, 1),
        "s16_stereo_16k.wav": wave_bytes(s16, 16000, 2),
        "s16_empty.wav": wave_bytes(s16[:0], 24000, 1),
        "f32_mono_24k.wav": f32_bytes(x, 24000, 1),
        "f32_empty.wav": f32_bytes(x[:0], 24000, 1),
    }


def cross_check(fs):
    try:
        import soundfile as sf
    except ImportError:
        print("soundfile not installed: cross-checks skipped")
        return []
    bad = []
    x = signal()
    for name in ("f32_mono_24k.wav", "f32_empty.wav"):
        info = sf.info(io.BytesIO(fs[name]))
        y, rate = sf.read(io.BytesIO(fs[name]), dtype="float32", always_2d=False)
        if (info.format, info.subtype, rate) != ("WAV", "FLOAT", 24000):
            bad.append(f"{name}: soundfile sees {info.format}/{info.subtype}/{rate}")
        want = x if "mono" in name else x[:0]
        if y.astype("<f4").tobytes() != want.tobytes():
            bad.append(f"{name}: soundfile reads other samples")
    # libsndfile's own PCM_16 file of the in-range, finite samples
    finite = np.clip(np.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0), -1, 1).astype("<f4")
    buf = io.BytesIO()
    sf.write(buf, finite, 24000, subtype="PCM_16", format="WAV")
    ours, theirs = fs["s16_mono_24k.wav"], buf.getvalue()
    a = np.frombuffer(theirs[44:], "<i2").astype(np.int32)
    b = np.frombuffer(ours[44:], "<i2").astype(np.int32)
    if theirs[:44] != ours[:44] or a.size != b.size:
        bad.append("soundfile's PCM_16 WAV header or length differs from s16_mono_24k.wav")
    else:
        d = np.abs(a - b)
        print(f"libsndfile {sf.__libsndfile_version__} PCM_16: same header; samples differ in "
              f"{int((d > 0).sum())}/{d.size}, by at most {int(d.max())} LSB (it scales by "
              f"32768 and rounds down)")
        if d.max() > 2:
            bad.append(f"soundfile's PCM_16 samples differ by {int(d.max())} LSB (> 2)")
    return bad


def main():
    fs = files()
    bad = cross_check(fs)
    if "--check" in sys.argv[1:]:
        for name, data in sorted(fs.items()):
            path = os.path.join(OUT, name)
            if not os.path.exists(path) or open(path, "rb").read() != data:
                bad.append(f"{path}: differs from a fresh build")
    else:
        os.makedirs(OUT, exist_ok=True)
        for name, data in sorted(fs.items()):
            with open(os.path.join(OUT, name), "wb") as f:
                f.write(data)
            print(f"{name}: {len(data)} bytes")
    for b in bad:
        print("FAIL:", b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
