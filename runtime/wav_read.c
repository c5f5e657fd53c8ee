/*
 * wav_read.c — the WAV reader (wav.h): a RIFF/WAVE file of 16-bit PCM or
 * float32 samples to floats, for `speechc encode` and the Moshi input.
 *
 * What is read: the chunk list of a RIFF/WAVE file; `fmt ` (WAVE_FORMAT_PCM
 * with 16 bits, WAVE_FORMAT_IEEE_FLOAT with 32 bits, or
 * WAVE_FORMAT_EXTENSIBLE whose sub-format is one of those two) before
 * `data`; other chunks (LIST, fact, ...) skipped, odd sizes padded as the
 * RIFF spec says.  A data size of 0xFFFFFFFF is the "unknown length" a
 * streaming writer (wav.c on a pipe) leaves: the data runs to the end of the
 * file.  The RIFF size itself is not trusted (writers often get it wrong);
 * every chunk must lie inside the file.
 *
 * What is refused (SC_EINPUT, the message starts with the name): not RIFF or
 * WAVE, a chunk running past the end (a truncated file), no fmt or no data
 * chunk, a data chunk that is not whole frames, an encoding other than the
 * two above (8/24/32-bit integer PCM, A-law, ...), 0 channels or more than
 * SC_WAV_MAX_CHANNELS, a block_align that disagrees with the channels and
 * bits, a sample rate of 0.  The rate and channel count are reported, not
 * judged: the caller refuses what it cannot take (sc_wav_expect).
 *
 * s16 samples become s / 32768.0f (exact); f32 samples are taken as they
 * are, NaN and values beyond ±1 included.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "wav.h"

static uint32_t get16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t get32(const unsigned char *p) { return get16(p) | get16(p + 2) << 16; }

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
                     "PCM or float (speechc reads 16-bit PCM and 32-bit float)", name, g[3], g[2], g[1], g[0]);
    tag = get16(fmt + 24);
  }
  if (!((tag == 1 && bits == 16) || (tag == 3 && bits == 32)))
    return sc_fail(err, SC_EINPUT, "%s: format %u with %u bits per sample: speechc reads 16-bit PCM (format 1) "
                   "and 32-bit float (format 3) (hint: sox in.wav -b 16 out.wav)", name, tag, bits);
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
    if (bits == 16) {
      pcm[i] = (float)(int16_t)get16(data + 2 * i) / 32768.0f;
    } else {
      const uint32_t u = get32(data + 4 * i);
      memcpy(&pcm[i], &u, 4);
    }
  }
  out->pcm = pcm;
  out->frames = frames;
  out->channels = (int)channels;
  out->sample_rate = (int)rate;
  out->format = tag == 1 ? SC_WAV_S16 : SC_WAV_F32;
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
