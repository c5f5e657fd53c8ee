/*
 * wav_read.c — the WAV reader (wav.h): a RIFF/WAVE file of PCM or float
 * samples to floats, for `speechc encode` and the Moshi input.
 *
 * What is read: the chunk list of a RIFF/WAVE file; `fmt ` (WAVE_FORMAT_PCM
 * with 8 (unsigned), 16, 24 or 32 bits, WAVE_FORMAT_IEEE_FLOAT with 32 or
 * 64 bits, or WAVE_FORMAT_EXTENSIBLE whose sub-format is one of those) before
 * `data`; other chunks (LIST, fact, ...) skipped, odd sizes padded as the
 * RIFF spec says.  A data size of 0xFFFFFFFF is the "unknown length" a
 * streaming writer (wav.c on a pipe) leaves: the data runs to the end of the
 * file.  The RIFF size itself is not trusted (writers often get it wrong);
 * every chunk must lie inside the file.
 *
 * What is refused (SC_EINPUT, the message starts with the name): not RIFF or
 * WAVE, a chunk running past the end (a truncated file), no fmt or no data
 * chunk, a data chunk that is not whole frames, an encoding other than
 * those above (A-law, mu-law, ADPCM, 12 or 20 bits, ...), 0 channels or more than
 * SC_WAV_MAX_CHANNELS, a block_align that disagrees with the channels and
 * bits, a sample rate of 0.  The rate and channel count are reported, not
 * judged: the caller refuses what it cannot take (sc_wav_expect).
 *
 * Integer samples become floats as libsndfile reads them (sf_read_float,
 * the library soundfile and qwen-tts use): u8 (u - 128) / 128, s16 s /
 * 32768, s24 s / 2^23 (all exact), s32 s / 2^31 (rounded to float's 24
 * bits); f32 samples are taken as they are and f64 rounded to the nearest
 * float, NaN and values beyond ±1 included.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "wav.h"

static uint32_t get16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get32(const unsigned char *p) { return get16(p) | get16(p + 2) << 16; }

size_t sc_wav_sample_bytes(sc_wav_format f) {
  return f == SC_WAV_U8 ? 1 : f == SC_WAV_S16 ? 2 : f == SC_WAV_S24 ? 3 : f == SC_WAV_F64 ? 8 : 4;
}

int sc_wav_parse(const void *buf, size_t len, const char *name, sc_wav_audio *out, sc_error *err) {
  const unsigned char *b = buf;
  memset(out, 0, sizeof *out);
  if (len < 12 || memcmp(b, "RIFF", 4) || memcmp(b + 8, "WAVE", 4))
    return sc_fail(err, SC_EINPUT, "%s: not a WAV file (no RIFF/WAVE header)", name);
  const unsigned char *fmt = NULL, *data = NULL;
  uint32_t fmt_size = 0;
  size_t data_size = 0, at = 12;
  while (!data) {
    if (at == len) break;
    if (len - at < 8)
      return sc_fail(err, SC_EINPUT, "%s: truncated: a chunk header at byte %zu runs past the end (%zu bytes)",
                     name, at, len);
    const uint32_t size = get32(b + at + 4);
    const size_t body = at + 8, left = len - body;
    if (!memcmp(b + at, "data", 4)) {
      if (!fmt) return sc_fail(err, SC_EINPUT, "%s: the data chunk comes before any fmt chunk", name);
      if (size == 0xFFFFFFFFu) {
        data_size = left; /* unknown length: to the end of the file */
      } else if (size > left) {
        return sc_fail(err, SC_EINPUT, "%s: truncated: the data chunk says %u bytes, the file holds %zu", name,
                       size, left);
      } else {
        data_size = size;
      }
      data = b + body;
      break;
    }
    if (size > left)
      return sc_fail(err, SC_EINPUT, "%s: truncated: chunk '%.4s' at byte %zu says %u bytes, the file holds %zu",
                     name, (const char *)(b + at), at, size, left);
    if (!memcmp(b + at, "fmt ", 4)) {
      if (fmt) return sc_fail(err, SC_EINPUT, "%s: two fmt chunks", name);
      fmt = b + body;
      fmt_size = size;
    }
    at = body + size + (size & 1);
    if (at > len) at = len; /* a missing pad byte after the last chunk */
  }
  if (!fmt) return sc_fail(err, SC_EINPUT, "%s: no fmt chunk", name);
  if (fmt_size < 16) return sc_fail(err, SC_EINPUT, "%s: the fmt chunk is %u bytes, expected at least 16", name,
                                    fmt_size);
  uint32_t tag = get16(fmt);
  const uint32_t channels = get16(fmt + 2), rate = get32(fmt + 4), align = get16(fmt + 12), bits = get16(fmt + 14);
  if (tag == 0xFFFE) { /* WAVE_FORMAT_EXTENSIBLE: the sub-format GUID */
    if (fmt_size < 40 || get16(fmt + 16) < 22)
      return sc_fail(err, SC_EINPUT, "%s: WAVE_FORMAT_EXTENSIBLE with a short fmt chunk (%u bytes)", name,
                     fmt_size);
    /* {0000XXXX-0000-0010-8000-00AA00389B71}: the format tag XXXX (or the
     * Ambisonic {0000XXXX-0721-11D3-8644-C8C1CA000000}, which libsndfile
     * also reads); any other GUID is not PCM or float, whatever its first
     * bytes say */
    static const unsigned char ksdata[12] = {0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
    static const unsigned char ambi[12] = {0x21, 0x07, 0xD3, 0x11, 0x86, 0x44, 0xC8, 0xC1, 0xCA, 0x00, 0x00, 0x00};
    const unsigned char *g = (const unsigned char *)fmt + 24;
    if (get16(fmt + 26) || (memcmp(g + 4, ksdata, 12) && memcmp(g + 4, ambi, 12)))
      return sc_fail(err, SC_EINPUT, "%s: WAVE_FORMAT_EXTENSIBLE with sub-format GUID %02x%02x%02x%02x-...: not "
                     "PCM or float", name, g[3], g[2], g[1], g[0]);
    tag = get16(fmt + 24);
  }
  sc_wav_format kind;
  if (tag == 1 && (bits == 8 || bits == 16 || bits == 24 || bits == 32))
    kind = bits == 8 ? SC_WAV_U8 : bits == 16 ? SC_WAV_S16 : bits == 24 ? SC_WAV_S24 : SC_WAV_S32;
  else if (tag == 3 && (bits == 32 || bits == 64))
    kind = bits == 32 ? SC_WAV_F32 : SC_WAV_F64;
  else
    return sc_fail(err, SC_EINPUT, "%s: format %u with %u bits per sample: speechc reads PCM (format 1) of 8, "
                   "16, 24 or 32 bits and float (format 3) of 32 or 64 bits (hint: sox in.wav -b 16 out.wav)",
                   name, tag, bits);
  if (channels < 1 || channels > SC_WAV_MAX_CHANNELS)
    return sc_fail(err, SC_EINPUT, "%s: %u channels, expected 1..%d", name, channels, SC_WAV_MAX_CHANNELS);
  if (align != channels * bits / 8)
    return sc_fail(err, SC_EINPUT, "%s: block_align %u, but %u channels of %u bits make %u", name, align,
                   channels, bits, channels * bits / 8);
  if (rate == 0 || rate > SC_WAV_MAX_RATE)
    return sc_fail(err, SC_EINPUT, "%s: sample rate %u Hz, expected 1..%d", name, rate, SC_WAV_MAX_RATE);
  if (!data) return sc_fail(err, SC_EINPUT, "%s: no data chunk", name);
  if (data_size % align)
    return sc_fail(err, SC_EINPUT, "%s: the data chunk is %zu bytes, not whole frames of %u", name,
                   data_size, align);
  const size_t frames = data_size / align, n = frames * channels;
  float *pcm = malloc(n ? n * sizeof *pcm : 1);
  if (!pcm) return sc_fail(err, SC_ERUNTIME, "%s: out of memory for %zu samples", name, n);
  for (size_t i = 0; i < n; i++) {
    const unsigned char *q = data + i * (bits / 8);
    switch (kind) {
      case SC_WAV_U8: pcm[i] = (float)((int)q[0] - 128) / 128.0f; break;
      case SC_WAV_S16: pcm[i] = (float)(int16_t)get16(q) / 32768.0f; break;
      case SC_WAV_S24: /* sign-extended from bit 23 */
        pcm[i] = (float)((int32_t)(get16(q) << 8 | (uint32_t)q[2] << 24) >> 8) / 8388608.0f;
        break;
      case SC_WAV_S32: pcm[i] = (float)(int32_t)get32(q) / 2147483648.0f; break;
      case SC_WAV_F32: {
        const uint32_t u = get32(q);
        memcpy(&pcm[i], &u, 4);
        break;
      }
      case SC_WAV_F64: {
        const uint64_t u = (uint64_t)get32(q) | (uint64_t)get32(q + 4) << 32;
        double d;
        memcpy(&d, &u, 8);
        pcm[i] = (float)d;
        break;
      }
    }
  }
  out->pcm = pcm;
  out->frames = frames;
  out->channels = (int)channels;
  out->sample_rate = (int)rate;
  out->format = kind;
  return SC_OK;
}

int sc_wav_read(const char *path, sc_wav_audio *out, sc_error *err) {
  char *buf;
  size_t len;
  memset(out, 0, sizeof *out);
  if (sc_read_regular(path, "WAV file", SC_WAV_MAX_BYTES, &buf, &len, err)) return err->code;
  int rc = sc_wav_parse(buf, len, path, out, err);
  free(buf);
  return rc;
}

int sc_wav_expect(const sc_wav_audio *a, const char *name, int rate, int channels, sc_error *err) {
  if (a->channels != channels)
    return sc_fail(err, SC_EINPUT, "%s: %d channels, the model takes %d (speechc does not mix channels down; "
                   "hint: sox %s mono.wav remix 1 keeps the first channel, as moshi's run_inference does, or "
                   "sox %s -c %d mono.wav averages them)", name, a->channels, channels, name, name, channels);
  if (a->sample_rate != rate)
    return sc_fail(err, SC_EINPUT, "%s: %d Hz, the model takes %d Hz (speechc does not resample; hint: sox %s "
                   "-r %d out.wav)", name, a->sample_rate, rate, name, rate);
  if (a->frames == 0) return sc_fail(err, SC_EINPUT, "%s: no samples", name);
  return SC_OK;
}

void sc_wav_audio_free(sc_wav_audio *a) {
  if (!a) return;
  free(a->pcm);
  memset(a, 0, sizeof *a);
}
