/*
 * wav.c — the streaming WAV / raw PCM writer of wav.h.
 *
 * Plain write(2) on a descriptor, no stdio: every call's bytes reach the
 * kernel before it returns (streaming), partial writes and EINTR are
 * retried, and the sizes are patched with pwrite at the offset where the
 * header began (stdout may already hold other bytes).  All integers are
 * stored byte by byte, so the files are little-endian on any host.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wav.h"

#define WAV_RATE_DEFAULT 24000
#define WAV_RATE_MAX 1000000
#define WAV_CHANNELS_MAX 64
#define WAV_UNKNOWN 0xFFFFFFFFu /* size fields of a header that cannot be patched */
#define CHUNK_SAMPLES 4096       /* samples converted per write(2) */

struct sc_wav {
  int fd;
  int own_fd;            /* opened here: close it */
  int seekable;          /* a regular file, not O_APPEND: sizes can be patched */
  off_t start;           /* offset of the header (or of the first sample, raw) */
  sc_wav_opts o;
  int bps;               /* bytes per sample: 2 or 4 */
  unsigned header_bytes; /* 0 (raw), 44 (s16) or 58 (f32) */
  uint64_t frames, data_bytes;
  int failed;            /* a write failed: first holds its error */
  sc_error first;
  char *name;            /* the path, "stdout", or the caller's name */
  unsigned char buf[CHUNK_SAMPLES * 4];
};

static void put16(unsigned char *p, unsigned v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static int has_suffix(const char *s, const char *suf) {
  size_t n = strlen(s), k = strlen(suf);
  return n > k && !strcasecmp(s + n - k, suf);
}

sc_wav_opts sc_wav_opts_for(const char *path) {
  sc_wav_opts o = {WAV_RATE_DEFAULT, 1, SC_WAV_S16, 0};
  o.raw = path && (!strcmp(path, "-") || has_suffix(path, ".raw") || has_suffix(path, ".pcm"));
  return o;
}

/* Remember the first failure; every later call reports it again. */
static int wav_fail(sc_wav *w, sc_error *err, const char *what, int e) {
  if (!w->failed) {
    w->failed = 1;
    sc_fail(&w->first, SC_EINPUT, "%s: %s: %s", w->name, what, strerror(e));
  }
  if (err) *err = w->first;
  return SC_EINPUT;
}

/* All n bytes, retrying partial writes and EINTR; 0, or -1 with errno. */
static int write_all(int fd, const unsigned char *p, size_t n) {
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (k == 0) {
      errno = EIO;
      return -1;
    }
    p += k, n -= (size_t)k;
  }
  return 0;
}

static int pwrite_all(int fd, const unsigned char *p, size_t n, off_t at) {
  while (n) {
    ssize_t k = pwrite(fd, p, n, at);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (k == 0) {
      errno = EIO;
      return -1;
    }
    p += k, n -= (size_t)k, at += k;
  }
  return 0;
}

unsigned sc_wav_header(const sc_wav_opts *o, int64_t frames, unsigned char h[SC_WAV_HEADER_MAX]) {
  int f32 = o->format == SC_WAV_F32;
  unsigned bps = f32 ? 4 : 2, align = (unsigned)o->channels * bps, hb = f32 ? 58 : 44;
  uint64_t data_bytes = frames < 0 ? 0 : (uint64_t)frames * align;
  uint32_t data = frames >= 0 ? (uint32_t)data_bytes : WAV_UNKNOWN;
  uint32_t riff = frames >= 0 ? (uint32_t)(hb - 8 + data_bytes) : WAV_UNKNOWN;
  memcpy(h, "RIFF", 4);
  put32(h + 4, riff);
  memcpy(h + 8, "WAVEfmt ", 8);
  put32(h + 16, f32 ? 18 : 16);               /* fmt chunk size */
  put16(h + 20, f32 ? 3 : 1);                 /* WAVE_FORMAT_IEEE_FLOAT / _PCM */
  put16(h + 22, (unsigned)o->channels);
  put32(h + 24, (uint32_t)o->sample_rate);
  put32(h + 28, (uint32_t)o->sample_rate * align); /* bytes per second */
  put16(h + 32, align);                       /* block align */
  put16(h + 34, 8 * bps);                     /* bits per sample */
  unsigned at = 36;
  if (f32) {
    put16(h + 36, 0);                         /* cbSize: no extension */
    memcpy(h + 38, "fact", 4);
    put32(h + 42, 4);
    put32(h + 46, frames >= 0 ? (uint32_t)frames : WAV_UNKNOWN); /* sample frames */
    at = 50;
  }
  memcpy(h + at, "data", 4);
  put32(h + at + 4, data);
  return at + 8;
}

/* The header for the sizes known now (or WAV_UNKNOWN); its length. */
static unsigned make_header(const sc_wav *w, unsigned char *h, int known) {
  return sc_wav_header(&w->o, known ? (int64_t)w->frames : -1, h);
}

static int check_opts(const sc_wav_opts *o, const char *name, sc_error *err) {
  if (o->sample_rate < 1 || o->sample_rate > WAV_RATE_MAX)
    return sc_fail(err, SC_EUSAGE, "%s: sample rate %d Hz: expected 1..%d", name, o->sample_rate,
                   WAV_RATE_MAX);
  if (o->channels < 1 || o->channels > WAV_CHANNELS_MAX)
    return sc_fail(err, SC_EUSAGE, "%s: %d channels: expected 1..%d", name, o->channels,
                   WAV_CHANNELS_MAX);
  if (o->format != SC_WAV_S16 && o->format != SC_WAV_F32)
    return sc_fail(err, SC_EUSAGE, "%s: unknown sample format %d (expected s16 or f32)", name,
                   (int)o->format);
  return SC_OK;
}

/* Shared by both opens: fd is open for writing; takes ownership when own. */
static int wav_start(int fd, int own, const char *name, const sc_wav_opts *opts, sc_wav **out,
                     sc_error *err) {
  *out = NULL;
  sc_wav_opts o = opts ? *opts : sc_wav_opts_for(NULL);
  if (!o.sample_rate) o.sample_rate = WAV_RATE_DEFAULT;
  if (!o.channels) o.channels = 1;
  int rc = check_opts(&o, name, err);
  sc_wav *w = rc ? NULL : calloc(1, sizeof *w);
  if (!rc && (!w || !(w->name = strdup(name)))) rc = sc_fail(err, SC_ERUNTIME, "out of memory");
  if (rc) {
    if (w) free(w);
    if (own) close(fd);
    return rc;
  }
  w->fd = fd;
  w->own_fd = own;
  w->o = o;
  w->bps = o.format == SC_WAV_F32 ? 4 : 2;
  w->header_bytes = o.raw ? 0 : o.format == SC_WAV_F32 ? 58 : 44;
  struct stat sb;
  int fl = fcntl(fd, F_GETFL);
  w->start = lseek(fd, 0, SEEK_CUR);
  /* pwrite on an O_APPEND descriptor appends on Linux: such a file cannot
   * be patched */
  w->seekable = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && w->start >= 0 && fl >= 0 &&
                !(fl & O_APPEND);
  if (!o.raw) {
    unsigned char h[64];
    unsigned n = make_header(w, h, 0);
    if (write_all(fd, h, n)) {
      int e = errno;
      wav_fail(w, err, "cannot write the WAV header", e);
      int code = w->first.code;
      sc_wav_close(w, NULL);
      return code;
    }
  }
  *out = w;
  return SC_OK;
}

int sc_wav_open_fd(int fd, const char *name, const sc_wav_opts *o, sc_wav **out, sc_error *err) {
  return wav_start(fd, 0, name ? name : "(output)", o, out, err);
}

int sc_wav_open(const char *path, const sc_wav_opts *o, sc_wav **out, sc_error *err) {
  *out = NULL;
  if (!path || !*path) return sc_fail(err, SC_EUSAGE, "-o '': expected a file path or - (stdout)");
  if (!strcmp(path, "-")) {
    fflush(stdout); /* what the program printed before comes first */
    return wav_start(STDOUT_FILENO, 0, "stdout", o, out, err);
  }
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0) return sc_fail(err, SC_EINPUT, "%s: cannot write: %s", path, strerror(errno));
  return wav_start(fd, 1, path, o, out, err);
}

/* Round to nearest, ties to even, after the clip; exact in double. */
static int16_t to_s16(float x) {
  if (x != x) return 0;
  double v = x > 1.0f ? 1.0 : x < -1.0f ? -1.0 : (double)x;
  return (int16_t)nearbyint(v * 32767.0);
}

void sc_wav_s16le(const float *pcm, size_t n, unsigned char *out) {
  for (size_t i = 0; i < n; i++, out += 2) put16(out, (uint16_t)to_s16(pcm[i]));
}

int sc_wav_write(sc_wav *w, const float *pcm, size_t n_frames, sc_error *err) {
  if (w->failed) {
    if (err) *err = w->first;
    return w->first.code;
  }
  size_t ch = (size_t)w->o.channels;
  if (n_frames > SIZE_MAX / (ch * 4))
    return sc_fail(err, SC_EUSAGE, "%s: %zu frames in one write", w->name, n_frames);
  uint64_t add = (uint64_t)n_frames * ch * (uint64_t)w->bps;
  if (w->header_bytes && w->data_bytes + add > (uint64_t)UINT32_MAX - (w->header_bytes - 8)) {
    w->failed = 1;
    sc_fail(&w->first, SC_EINPUT, "%s: more than 4 GiB of samples, the most a WAV file can "
            "hold (hint: write raw PCM: a .raw name, or -)", w->name);
    if (err) *err = w->first;
    return SC_EINPUT;
  }
  size_t chunk = CHUNK_SAMPLES / ch;
  while (n_frames) {
    size_t k = n_frames < chunk ? n_frames : chunk, n = k * ch;
    unsigned char *p = w->buf;
    if (w->o.format == SC_WAV_S16) {
      sc_wav_s16le(pcm, n, p);
      p += 2 * n;
    } else {
      for (size_t i = 0; i < n; i++, p += 4) {
        uint32_t u;
        memcpy(&u, &pcm[i], 4);
        put32(p, u);
      }
    }
    if (write_all(w->fd, w->buf, (size_t)(p - w->buf))) return wav_fail(w, err, "write failed", errno);
    w->frames += k;
    w->data_bytes += (uint64_t)(p - w->buf);
    pcm += n, n_frames -= k;
  }
  return SC_OK;
}

uint64_t sc_wav_frames(const sc_wav *w) { return w->frames; }

int sc_wav_close(sc_wav *w, sc_error *err) {
  if (!w) return SC_OK;
  int rc = w->failed ? w->first.code : SC_OK;
  if (rc && err) *err = w->first;
  if (!rc && w->header_bytes && w->seekable) {
    unsigned char h[64];
    unsigned n = make_header(w, h, 1);
    if (pwrite_all(w->fd, h, n, w->start)) rc = wav_fail(w, err, "cannot patch the WAV header", errno);
  }
  if (w->own_fd && close(w->fd) && !rc) rc = wav_fail(w, err, "write failed", errno);
  free(w->name);
  free(w);
  return rc;
}
