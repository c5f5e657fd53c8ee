/*
 * wav.h — a streaming writer of decoded audio: a RIFF/WAVE file, or bare
 * PCM for pipes.
 *
 *   sc_wav_open -> sc_wav_write ... -> sc_wav_close
 *
 * Every sc_wav_write converts its samples and hands them to the kernel
 * before it returns (nothing is held back between calls), so a player
 * reading a pipe hears frame N while frame N+1 is being decoded.
 *
 * Containers:
 *   RIFF  a 44-byte canonical header for 16-bit PCM (WAVE_FORMAT_PCM, the
 *         bytes Python's `wave` writes); for float32 a 58-byte header:
 *         WAVE_FORMAT_IEEE_FLOAT, an 18-byte fmt chunk (cbSize 0) and a
 *         `fact` chunk, as the WAVE spec asks of non-PCM data.  The header
 *         is written at open with the sizes set to 0xFFFFFFFF ("unknown
 *         length", which players read to the end of the data); at close,
 *         when the output can seek (a regular file), the RIFF, fact and data
 *         sizes are patched in.  A pipe or FIFO keeps the 0xFFFFFFFF sizes.
 *         The data may not exceed 4 GiB (the sizes are 32-bit; 24.8 hours
 *         of 24 kHz mono s16): a write past it fails.
 *   raw   no header: the samples alone, little-endian, interleaved.  The
 *         convention for `-o -` (stdout) and *.raw / *.pcm names is raw s16le
 *         (sc_wav_opts_for): `speechc ... -o - | aplay -f S16_LE -r 24000 -c 1`.
 *
 * Samples come in as float, interleaved [frames, channels].  s16: each is
 * clipped to [-1, 1], scaled by 32767 and rounded to nearest, ties to even
 * (in double, so exactly); NaN becomes 0.  Symmetric (±1 -> ±32767) and
 * unbiased.  libsndfile 1.2.2 (python soundfile, which qwen-tts saves its
 * WAVs with) scales by 32768 and rounds down instead: its samples differ from
 * these by at most 2 LSB (tests/parity/make_wav.py measures it).
 * f32: written as given, NaN and values beyond ±1 included.
 *
 * Errors (SC_EINPUT, the message starts with the path, or "stdout") are
 * returned, never fatal: a full disk is "PATH: write failed: No space left
 * on device".  After a failure the writer refuses further writes with the
 * same message; sc_wav_close still releases everything.  The partial file is
 * left in place.  A write to a pipe whose reader has gone raises SIGPIPE as
 * for any program (EPIPE when the caller ignores SIGPIPE).  No globals: any
 * number of writers may be open, each used by one thread at a time.
 */
#ifndef SC_WAV_H
#define SC_WAV_H

#include <stddef.h>
#include <stdint.h>

#include "speechc.h"

typedef enum sc_wav_format {
  SC_WAV_S16 = 0, /* 16-bit signed PCM (default) */
  SC_WAV_F32 = 1, /* IEEE float32 */
  /* read only (sc_wav_audio.format): the writer takes the two above */
  SC_WAV_U8 = 2,  /* 8-bit unsigned PCM */
  SC_WAV_S24 = 3, /* 24-bit signed PCM */
  SC_WAV_S32 = 4, /* 32-bit signed PCM */
  SC_WAV_F64 = 5, /* IEEE float64 */
} sc_wav_format;

typedef struct sc_wav_opts {
  int sample_rate;      /* Hz; 0: 24000 (the 12 Hz codec's output rate) */
  int channels;         /* 0: 1 (mono) */
  sc_wav_format format; /* SC_WAV_S16 or SC_WAV_F32 */
  int raw;              /* 1: no header, bare little-endian samples */
} sc_wav_opts;

typedef struct sc_wav sc_wav;

/* The conventional options for an output path: "-" (stdout), *.raw and
 * *.pcm are raw s16le; anything else is a RIFF/WAVE s16 file.  24 kHz mono. */
sc_wav_opts sc_wav_opts_for(const char *path);

/* Create (or truncate) path for writing, "-" meaning stdout (which is
 * flushed, never closed), and write the header unless raw.  o may be NULL
 * (a RIFF s16 24 kHz mono file).  SC_EUSAGE for bad options (rate, channels
 * or format out of range), SC_EINPUT when the file cannot be opened or the
 * header not written. */
int sc_wav_open(const char *path, const sc_wav_opts *o, sc_wav **out, sc_error *err);

/* The same on a descriptor open for writing; name is used in messages
 * (copied).  The writer does not close fd. */
int sc_wav_open_fd(int fd, const char *name, const sc_wav_opts *o, sc_wav **out,
                   sc_error *err);

/* Append n_frames frames (n_frames * channels floats, interleaved). */
int sc_wav_write(sc_wav *w, const float *pcm, size_t n_frames, sc_error *err);

/* Frames written so far. */
uint64_t sc_wav_frames(const sc_wav *w);

/* Patch the sizes (RIFF output that can seek), close the file (not stdout
 * or a caller's fd), free w.  Returns the first error of the writer's life
 * if there was one, else that of the patch or close.  w may be NULL. */
int sc_wav_close(sc_wav *w, sc_error *err);

/* The pieces of the writer, for callers that hold the bytes themselves
 * (speechc serve's HTTP bodies): the RIFF header sc_wav_open writes for
 * o (sample_rate and channels set; raw ignored) and `frames` sample frames,
 * or the 0xFFFFFFFF "unknown length" sizes when frames < 0; returns its
 * length (44 for s16, 58 for f32).  And n samples converted to s16le as
 * sc_wav_write converts them, 2n bytes into out. */
#define SC_WAV_HEADER_MAX 58
unsigned sc_wav_header(const sc_wav_opts *o, int64_t frames, unsigned char h[SC_WAV_HEADER_MAX]);
void sc_wav_s16le(const float *pcm, size_t n, unsigned char *out);

/* ---- reading (wav_read.c) ---------------------------------------------------
 * A whole RIFF/WAVE file of PCM (8-bit unsigned, 16, 24, 32-bit) or float
 * (32, 64-bit) samples, also as WAVE_FORMAT_EXTENSIBLE, to interleaved
 * floats as libsndfile reads them: integers scaled to [-1, 1] (s16 as
 * s / 32768), f64 rounded to float.
 * The file's rate and channel count are reported; sc_wav_expect refuses
 * other ones by name (speechc neither resamples nor mixes down).  A
 * truncated or malformed file is SC_EINPUT with a message starting with
 * the name; out is zeroed on failure. */
#define SC_WAV_MAX_CHANNELS 16
#define SC_WAV_MAX_RATE 1000000
#define SC_WAV_MAX_BYTES (1ULL << 32)

typedef struct sc_wav_audio {
  float *pcm;           /* [frames, channels] interleaved, malloc'd */
  size_t frames;
  int channels, sample_rate;
  sc_wav_format format; /* the file's encoding */
} sc_wav_audio;

/* Parse len bytes of a WAV file held in memory; name is for messages. */
int sc_wav_parse(const void *buf, size_t len, const char *name, sc_wav_audio *out, sc_error *err);
/* Read and parse path (a regular file of at most 4 GiB). */
int sc_wav_read(const char *path, sc_wav_audio *out, sc_error *err);
/* SC_EINPUT naming the file unless a has this rate and channel count and
 * at least one frame. */
int sc_wav_expect(const sc_wav_audio *a, const char *name, int rate, int channels, sc_error *err);
void sc_wav_audio_free(sc_wav_audio *a);
/* Bytes of one sample of f in a file. */
size_t sc_wav_sample_bytes(sc_wav_format f);

#endif
