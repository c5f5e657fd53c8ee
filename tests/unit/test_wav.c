/* test_wav.c — runtime/wav.c against WAV files written by Python.
 *
 * tests/data/wav/ was made by tests/parity/make_wav.py: signal.f32 (the
 * input, special values first: ±inf, NaN, ±1.5, values that rounding and
 * truncation map differently) and the files Python's `wave` module writes
 * for it (16-bit mono 24 kHz, stereo 16 kHz, empty), plus float32 files with
 * the header the WAVE spec gives non-PCM data (read back by libsndfile).
 * Every file written here, in uneven pieces, must equal those byte for byte;
 * raw output must equal their data chunks; a pipe and an O_APPEND file keep
 * the "unknown" sizes; stdout after other output is patched at the right
 * offset.  Then the failures: a full disk (/dev/full), a partial write
 * (RLIMIT_FSIZE), a closed pipe, a directory, bad options — each returned
 * with a message naming the output, never fatal, and repeated by later
 * calls. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "file.h"
#include "wav.h"

#define DATA "tests/data/wav/"

static unsigned char *slurp(const char *path, size_t *len) {
  char *buf;
  sc_error err = {0};
  if (sc_read_regular(path, NULL, 0, &buf, len, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
  }
  return (unsigned char *)buf;
}

static float *signal_;
static size_t n_signal;

/* Write frames [0, n) of pcm in pieces of 1, 7, 1000, then the rest. */
static int write_pieces(sc_wav *w, const float *pcm, size_t n, int ch, sc_error *err) {
  static const size_t piece[] = {1, 7, 1000};
  size_t at = 0;
  for (int i = 0; at < n; i++) {
    size_t k = i < 3 ? piece[i] : n - at;
    if (k > n - at) k = n - at;
    int rc = sc_wav_write(w, pcm + at * ch, k, err);
    if (rc) return rc;
    at += k;
  }
  return SC_OK;
}

static void check_bytes(const char *what, const unsigned char *got, size_t n_got,
                        const unsigned char *want, size_t n_want) {
  CHECK_MSG(n_got == n_want, "%s: %zu bytes, want %zu", what, n_got, n_want);
  if (n_got != n_want) return;
  for (size_t i = 0; i < n_got; i++)
    if (got[i] != want[i]) {
      CHECK_MSG(0, "%s: byte %zu is 0x%02x, want 0x%02x", what, i, got[i], want[i]);
      return;
    }
}

/* Our file for (opts, frames) vs the fixture. */
static void file_case(const char *fixture, sc_wav_opts o, size_t frames) {
  sc_error err = {0};
  sc_wav *w;
  const char *out = P("out.wav");
  int rc = sc_wav_open(out, &o, &w, &err);
  CHECK_MSG(rc == 0, "%s: %s", fixture, err.msg);
  if (rc) return;
  CHECK_MSG(write_pieces(w, signal_, frames, o.channels, &err) == 0, "%s", err.msg);
  CHECK(sc_wav_frames(w) == frames);
  CHECK_MSG(sc_wav_close(w, &err) == 0, "%s", err.msg);
  size_t n_got, n_want;
  unsigned char *got = slurp(out, &n_got), *want = slurp(fixture, &n_want);
  check_bytes(fixture, got, n_got, want, n_want);
  free(got);
  free(want);
}

/* Raw output must be the fixture's data chunk (header_bytes skipped). */
static void raw_case(const char *fixture, sc_wav_format fmt, unsigned header_bytes) {
  sc_error err = {0};
  sc_wav *w;
  const char *out = P("out.raw");
  sc_wav_opts o = sc_wav_opts_for(out);
  CHECK(o.raw == 1 && o.format == SC_WAV_S16 && o.sample_rate == 24000 && o.channels == 1);
  o.format = fmt;
  CHECK_MSG(sc_wav_open(out, &o, &w, &err) == 0, "%s", err.msg);
  CHECK_MSG(write_pieces(w, signal_, n_signal, 1, &err) == 0, "%s", err.msg);
  CHECK_MSG(sc_wav_close(w, &err) == 0, "%s", err.msg);
  size_t n_got, n_want;
  unsigned char *got = slurp(out, &n_got), *want = slurp(fixture, &n_want);
  check_bytes("raw", got, n_got, want + header_bytes, n_want - header_bytes);
  free(got);
  free(want);
}

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A header that cannot be patched keeps 0xFFFFFFFF sizes; all else equal. */
static void check_unpatched(const char *what, unsigned char *got, size_t n_got,
                            const char *fixture, int f32) {
  size_t n_want;
  unsigned char *want = slurp(fixture, &n_want);
  CHECK_MSG(n_got == n_want, "%s: %zu bytes, want %zu", what, n_got, n_want);
  if (n_got == n_want) {
    unsigned offs[3] = {4, f32 ? 54u : 40u, 46}; /* RIFF, data, fact (f32 only) */
    for (int i = 0; i < (f32 ? 3 : 2); i++) {
      CHECK_MSG(get32(got + offs[i]) == 0xFFFFFFFFu, "%s: size at %u is %u", what, offs[i],
                get32(got + offs[i]));
      memcpy(got + offs[i], want + offs[i], 4);
    }
    check_bytes(what, got, n_got, want, n_want);
  }
  free(want);
}

static void test_pipe(void) {
  int fds[2];
  CHECK(pipe(fds) == 0);
  sc_error err = {0};
  sc_wav *w;
  sc_wav_opts o = sc_wav_opts_for("x.wav");
  CHECK(o.raw == 0 && o.format == SC_WAV_S16);
  CHECK_MSG(sc_wav_open_fd(fds[1], "the pipe", &o, &w, &err) == 0, "%s", err.msg);
  /* 4844 bytes: within the pipe's buffer, so no reader is needed yet */
  CHECK_MSG(write_pieces(w, signal_, n_signal, 1, &err) == 0, "%s", err.msg);
  CHECK_MSG(sc_wav_close(w, &err) == 0, "%s", err.msg);
  CHECK(fcntl(fds[1], F_GETFD) != -1); /* not closed by the writer */
  close(fds[1]);
  unsigned char buf[8192];
  size_t n = 0;
  ssize_t k;
  while ((k = read(fds[0], buf + n, sizeof buf - n)) > 0) n += (size_t)k;
  close(fds[0]);
  check_unpatched("pipe", buf, n, DATA "s16_mono_24k.wav", 0);
}

static void test_append(void) {
  const char *out = P("append.wav");
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
  CHECK(fd >= 0);
  sc_error err = {0};
  sc_wav *w;
  sc_wav_opts o = {24000, 1, SC_WAV_F32, 0};
  CHECK_MSG(sc_wav_open_fd(fd, out, &o, &w, &err) == 0, "%s", err.msg);
  CHECK_MSG(write_pieces(w, signal_, n_signal, 1, &err) == 0, "%s", err.msg);
  CHECK_MSG(sc_wav_close(w, &err) == 0, "%s", err.msg);
  close(fd);
  size_t n;
  unsigned char *got = slurp(out, &n);
  check_unpatched("O_APPEND", got, n, DATA "f32_mono_24k.wav", 1);
  free(got);
}

/* "-" with stdout on a regular file that already holds printf'd text: the
 * text is flushed first and the header patched where it began. */
static void test_stdout(void) {
  const char *out = P("stdout.wav");
  fflush(stdout);
  int saved = dup(STDOUT_FILENO);
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(saved >= 0 && fd >= 0 && dup2(fd, STDOUT_FILENO) == STDOUT_FILENO);
  close(fd);
  printf("before");
  sc_error err = {0};
  sc_wav *w;
  sc_wav_opts o = {16000, 2, SC_WAV_S16, 0};
  int rc = sc_wav_open("-", &o, &w, &err);
  if (!rc) rc = write_pieces(w, signal_, n_signal / 2, 2, &err);
  if (!rc) rc = sc_wav_close(w, &err);
  fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  CHECK_MSG(rc == 0, "%s", err.msg);
  size_t n_got, n_want;
  unsigned char *got = slurp(out, &n_got), *want = slurp(DATA "s16_stereo_16k.wav", &n_want);
  CHECK(n_got >= 6 && !memcmp(got, "before", 6));
  if (n_got >= 6) check_bytes("stdout", got + 6, n_got - 6, want, n_want);
  free(got);
  free(want);
  sc_wav_opts d = sc_wav_opts_for("-");
  CHECK(d.raw == 1 && d.format == SC_WAV_S16 && d.sample_rate == 24000 && d.channels == 1);
}

static void test_errors(void) {
  sc_error err = {0};
  sc_wav *w = (sc_wav *)1;
  /* a full disk at the header */
  CHECK(sc_wav_open("/dev/full", NULL, &w, &err) == SC_EINPUT && w == NULL);
  CHECK_CONTAINS(err.msg, "/dev/full: cannot write the WAV header: No space left on device");
  /* ... and at the samples (raw: no header); later calls repeat the error */
  sc_wav_opts raw = {24000, 1, SC_WAV_S16, 1};
  CHECK_MSG(sc_wav_open("/dev/full", &raw, &w, &err) == 0, "%s", err.msg);
  memset(&err, 0, sizeof err);
  CHECK(sc_wav_write(w, signal_, 10, &err) == SC_EINPUT && err.code == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "/dev/full: write failed: No space left on device");
  memset(&err, 0, sizeof err);
  CHECK(sc_wav_write(w, signal_, 10, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "/dev/full: write failed: No space left on device");
  CHECK(sc_wav_frames(w) == 0);
  memset(&err, 0, sizeof err);
  CHECK(sc_wav_close(w, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "No space left on device");

  /* a partial write: the file size limit cuts the second write short */
  struct rlimit old, lim;
  CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old;
  lim.rlim_cur = 1000;
  const char *out = P("cut.wav");
  CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  int rc1 = sc_wav_open(out, NULL, &w, &err);
  int rc2 = rc1 ? rc1 : sc_wav_write(w, signal_, 400, &err);   /* 44 + 800 bytes */
  int rc3 = rc2 ? rc2 : sc_wav_write(w, signal_, 400, &err);   /* crosses 1000 */
  int rc4 = rc1 ? rc1 : sc_wav_close(w, NULL);
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  CHECK(rc1 == 0 && rc2 == 0 && rc3 == SC_EINPUT && rc4 == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "cut.wav: write failed: File too large");
  struct stat sb;
  CHECK(stat(out, &sb) == 0 && sb.st_size == 1000); /* left as it is, unpatched */

  /* a pipe without a reader, SIGPIPE ignored: EPIPE */
  int fds[2];
  CHECK(pipe(fds) == 0);
  close(fds[0]);
  prev = signal(SIGPIPE, SIG_IGN);
  CHECK(sc_wav_open_fd(fds[1], "the pipe", &raw, &w, &err) == 0);
  CHECK(sc_wav_write(w, signal_, 100, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "the pipe: write failed: Broken pipe");
  CHECK(sc_wav_close(w, NULL) == SC_EINPUT);
  signal(SIGPIPE, prev);
  close(fds[1]);

  /* cannot open */
  CHECK(sc_wav_open(root, NULL, &w, &err) == SC_EINPUT && w == NULL);
  CHECK_CONTAINS(err.msg, ": cannot write: Is a directory");
  CHECK(sc_wav_open(P("no/such/dir.wav"), NULL, &w, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "no/such/dir.wav: cannot write: No such file or directory");
  CHECK(sc_wav_open("", NULL, &w, &err) == SC_EUSAGE);

  /* bad options, refused before the file is created */
  const char *opt_out = P("opts.wav");
  sc_wav_opts bad[] = {{-1, 1, SC_WAV_S16, 0}, {2000000, 1, SC_WAV_S16, 0},
                       {24000, 65, SC_WAV_S16, 0}, {24000, -2, SC_WAV_S16, 0},
                       {24000, 1, (sc_wav_format)7, 0}};
  const char *why[] = {"sample rate -1 Hz", "sample rate 2000000 Hz", "65 channels",
                       "-2 channels", "unknown sample format 7"};
  for (int i = 0; i < 5; i++) {
    memset(&err, 0, sizeof err);
    CHECK(sc_wav_open_fd(1, "opts", &bad[i], &w, &err) == SC_EUSAGE && w == NULL);
    CHECK_CONTAINS(err.msg, why[i]);
  }
  CHECK(sc_wav_open(opt_out, &bad[0], &w, &err) == SC_EUSAGE);
  /* zeros are the defaults: 24 kHz mono */
  sc_wav_opts zero = {0, 0, SC_WAV_S16, 0};
  CHECK(sc_wav_open(opt_out, &zero, &w, &err) == 0);
  CHECK(sc_wav_close(w, &err) == 0);
  size_t n_got, n_want;
  unsigned char *got = slurp(opt_out, &n_got), *want = slurp(DATA "s16_empty.wav", &n_want);
  check_bytes("defaults", got, n_got, want, n_want);
  free(got);
  free(want);
  CHECK(sc_wav_close(NULL, &err) == 0);
}

/* ---- the reader (wav_read.c) ---------------------------------------------
 * The fixtures Python wrote, read back: s16 data as s / 32768 of the bytes,
 * f32 bit for bit as signal.f32; then every refusal names the file. */
static void read_case(const char *fixture, int rate, int channels, sc_wav_format fmt, size_t frames) {
  sc_wav_audio a;
  sc_error err = {0};
  CHECK_MSG(sc_wav_read(fixture, &a, &err) == 0, "%s", err.msg);
  CHECK(a.sample_rate == rate && a.channels == channels && a.format == fmt && a.frames == frames);
  size_t n;
  unsigned char *b = slurp(fixture, &n);
  const unsigned hdr = fmt == SC_WAV_S16 ? 44 : 58;
  CHECK(n == hdr + frames * channels * (fmt == SC_WAV_S16 ? 2 : 4));
  for (size_t i = 0; i < frames * channels; i++) {
    if (fmt == SC_WAV_S16) {
      const int16_t v = (int16_t)(b[hdr + 2 * i] | b[hdr + 2 * i + 1] << 8);
      CHECK_MSG(a.pcm[i] == v / 32768.0f, "%s: sample %zu %g, bytes say %d", fixture, i, a.pcm[i], v);
    } else {
      CHECK_MSG(!memcmp(&a.pcm[i], &signal_[i], 4), "%s: sample %zu not bit-exact", fixture, i);
    }
  }
  free(b);
  sc_wav_audio_free(&a);
}

/* A file of another encoding that libsndfile wrote (make_wav.py), read to
 * the float32 samples libsndfile reads from it (NAME.ref.f32), bit for bit
 * (NaN as NaN). */
static void sndfile_case(const char *name, int rate, int channels, sc_wav_format fmt) {
  char path[256], ref_path[256];
  snprintf(path, sizeof path, DATA "%s.wav", name);
  snprintf(ref_path, sizeof ref_path, DATA "%s.ref.f32", name);
  sc_wav_audio a;
  sc_error err = {0};
  CHECK_MSG(sc_wav_read(path, &a, &err) == 0, "%s", err.msg);
  size_t n;
  float *ref = (float *)slurp(ref_path, &n);
  n /= 4;
  CHECK_MSG(a.sample_rate == rate && a.channels == channels && a.format == fmt && a.frames * channels == n &&
            n == 600, "%s: %d Hz, %d channels, format %d, %zu frames", name, a.sample_rate, a.channels,
            (int)a.format, a.frames);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n && a.pcm && i < a.frames * channels; i++)
    if (memcmp(&a.pcm[i], &ref[i], 4) && !(a.pcm[i] != a.pcm[i] && ref[i] != ref[i])) first = bad++ ? first : i;
  CHECK_MSG(!bad, "%s: %zu samples differ from libsndfile's, the first %zu: %.9g vs %.9g", name, bad, first,
            a.pcm[first], ref[first]);
  free(ref);
  sc_wav_audio_free(&a);
}

/* Parse the bytes; expect rc and a message with `want`, starting "name:". */
static void refuse(const unsigned char *b, size_t n, const char *want) {
  sc_wav_audio a = {(float *)1, 1, 1, 1, 0};
  sc_error err = {0};
  CHECK_MSG(sc_wav_parse(b, n, "in.wav", &a, &err) == SC_EINPUT, "accepted, want: %s", want);
  CHECK_MSG(!strncmp(err.msg, "in.wav: ", 8), "%s", err.msg);
  CHECK_CONTAINS(err.msg, want);
  CHECK(a.pcm == NULL && a.frames == 0);
}

static void test_read(void) {
  read_case(DATA "s16_mono_24k.wav", 24000, 1, SC_WAV_S16, n_signal);
  read_case(DATA "s16_stereo_16k.wav", 16000, 2, SC_WAV_S16, n_signal / 2);
  read_case(DATA "f32_mono_24k.wav", 24000, 1, SC_WAV_F32, n_signal);
  read_case(DATA "s16_empty.wav", 24000, 1, SC_WAV_S16, 0);
  sndfile_case("u8_mono_24k", 24000, 1, SC_WAV_U8);
  sndfile_case("s24_mono_24k", 24000, 1, SC_WAV_S24);
  sndfile_case("s32_stereo_16k", 16000, 2, SC_WAV_S32);
  sndfile_case("s24_ext_mono_24k", 24000, 1, SC_WAV_S24);
  sndfile_case("f64_mono_24k", 24000, 1, SC_WAV_F64);
  sc_wav_audio a;
  sc_error err = {0};
  /* the rate and channel count are the caller's to refuse, by name */
  CHECK(sc_wav_read(DATA "s16_stereo_16k.wav", &a, &err) == 0);
  CHECK(sc_wav_expect(&a, "st.wav", 16000, 1, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "st.wav: 2 channels, the model takes 1");
  CHECK(sc_wav_expect(&a, "st.wav", 24000, 2, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "st.wav: 16000 Hz, the model takes 24000 Hz (speechc does not resample");
  CHECK(sc_wav_expect(&a, "st.wav", 16000, 2, &err) == 0);
  sc_wav_audio_free(&a);
  CHECK(sc_wav_read(DATA "s16_empty.wav", &a, &err) == 0);
  CHECK(sc_wav_expect(&a, "e.wav", 24000, 1, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "e.wav: no samples");
  sc_wav_audio_free(&a);

  size_t n;
  unsigned char *b = slurp(DATA "s16_mono_24k.wav", &n);
  refuse(b, n - 1, "truncated: the data chunk says 4800 bytes, the file holds 4799");
  refuse(b, 40, "truncated: a chunk header at byte 36");
  refuse(b, 30, "truncated: chunk 'fmt ' at byte 12 says 16 bytes");
  refuse((const unsigned char *)"not a wav file at all", 21, "not a WAV file");
  refuse(b, 8, "not a WAV file");
  unsigned char *c = malloc(n);
  memcpy(c, b, n);
  c[36 + 4] = 0xFF, c[37 + 4] = 0xFF, c[38 + 4] = 0xFF, c[39 + 4] = 0xFF; /* unknown length: to the end */
  CHECK(sc_wav_parse(c, n - 1, "in.wav", &a, &err) == SC_EINPUT); /* half a sample left over */
  CHECK_CONTAINS(err.msg, "not whole frames");
  CHECK_MSG(sc_wav_parse(c, n, "in.wav", &a, &err) == 0 && a.frames == n_signal, "%s", err.msg);
  sc_wav_audio_free(&a);
  memcpy(c, b, n);
  c[34] = 12;                               /* 12-bit PCM */
  refuse(c, n, "format 1 with 12 bits per sample");
  memcpy(c, b, n);
  c[20] = 6;                                /* A-law */
  refuse(c, n, "format 6 with 16 bits per sample");
  memcpy(c, b, n);
  c[20] = 3;                                /* float of 16 bits */
  refuse(c, n, "format 3 with 16 bits per sample");
  memcpy(c, b, n);
  c[22] = 3;                                /* 3 channels of 16 bits in a 2-byte block */
  refuse(c, n, "block_align 2, but 3 channels of 16 bits make 6");
  memcpy(c, b, n);
  memset(c + 24, 0, 4);
  refuse(c, n, "sample rate 0 Hz");
  memcpy(c, b, n);
  memcpy(c + 12, "junk", 4);
  refuse(c, n, "the data chunk comes before any fmt chunk");
  free(c);
  /* WAVE_FORMAT_EXTENSIBLE: the PCM sub-format GUID (and the Ambisonic
   * one libsndfile reads) give the plain file's samples; a GUID that only
   * starts like PCM's is another format, refused */
  {
    const size_t data = n - 44;
    unsigned char *x = malloc(68 + data);
    static const unsigned char pcm_guid[16] = {1, 0, 0, 0, 0x00, 0x00, 0x10, 0x00,
                                               0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
    static const unsigned char ambi_guid[16] = {1, 0, 0, 0, 0x21, 0x07, 0xD3, 0x11,
                                                0x86, 0x44, 0xC8, 0xC1, 0xCA, 0x00, 0x00, 0x00};
    static const unsigned char odd_guid[16] = {1, 0, 0, 0, 0xEA, 0x0C, 0x10, 0x00,
                                               0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
    const unsigned char *guids[3] = {pcm_guid, ambi_guid, odd_guid};
    sc_wav_audio plain = {0};
    CHECK(sc_wav_parse(b, n, "plain.wav", &plain, &err) == 0);
    for (int k = 0; k < 3; k++) {
      memcpy(x, b, 12);                       /* RIFF, size (patched), WAVE */
      const uint32_t riff = (uint32_t)(60 + data);
      memcpy(x + 4, (unsigned char[4]){riff & 255, riff >> 8 & 255, riff >> 16 & 255, riff >> 24}, 4);
      memcpy(x + 12, "fmt \x28\0\0\0", 8);  /* 40 bytes */
      memcpy(x + 20, b + 20, 16);             /* channels, rate, byte rate, align, bits */
      x[20] = 0xFE, x[21] = 0xFF;             /* WAVE_FORMAT_EXTENSIBLE */
      memcpy(x + 36, (unsigned char[8]){22, 0, 16, 0, 4, 0, 0, 0}, 8); /* cbSize, valid bits, mask */
      memcpy(x + 44, guids[k], 16);
      memcpy(x + 60, b + 36, 8 + data);       /* "data", its size, the samples */
      if (k < 2) {
        CHECK_MSG(sc_wav_parse(x, 68 + data, "ext.wav", &a, &err) == 0, "%s", err.msg);
        CHECK(a.frames == plain.frames && a.pcm && !memcmp(a.pcm, plain.pcm, plain.frames * sizeof *a.pcm));
        sc_wav_audio_free(&a);
      } else {
        refuse(x, 68 + data, "WAVE_FORMAT_EXTENSIBLE with sub-format GUID 00000001-...: not PCM or float");
      }
    }
    sc_wav_audio_free(&plain);
    free(x);
  }
  free(b);
}

int main(void) {
  (void)write_text; /* scratch.h's, unused here */
  strcpy(root, "/tmp/sc-wav-XXXXXX");
  if (!mkdtemp(root)) return 1;
  size_t n;
  signal_ = (float *)slurp(DATA "signal.f32", &n);
  n_signal = n / 4;
  CHECK(n_signal == 2400);

  file_case(DATA "s16_mono_24k.wav", (sc_wav_opts){24000, 1, SC_WAV_S16, 0}, n_signal);
  file_case(DATA "s16_stereo_16k.wav", (sc_wav_opts){16000, 2, SC_WAV_S16, 0}, n_signal / 2);
  file_case(DATA "s16_empty.wav", (sc_wav_opts){24000, 1, SC_WAV_S16, 0}, 0);
  file_case(DATA "f32_mono_24k.wav", (sc_wav_opts){24000, 1, SC_WAV_F32, 0}, n_signal);
  file_case(DATA "f32_empty.wav", (sc_wav_opts){24000, 1, SC_WAV_F32, 0}, 0);
  raw_case(DATA "s16_mono_24k.wav", SC_WAV_S16, 44);
  raw_case(DATA "f32_mono_24k.wav", SC_WAV_F32, 58);
  test_pipe();
  test_append();
  test_stdout();
  test_errors();
  test_read();

  free(signal_);
  const char *files[] = {"out.wav", "out.raw", "append.wav", "stdout.wav", "cut.wav", "opts.wav"};
  for (int i = 0; i < 6; i++) unlink(P(files[i]));
  rmdir(root);
  CHECK_DONE();
}
