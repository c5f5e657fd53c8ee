/*
 * fuzz_util.h — what the libFuzzer targets share: scratch files, and the
 * oracle macro.
 *
 * A target is LLVMFuzzerTestOneInput (plus LLVMFuzzerInitialize when it
 * needs set-up); it is linked either with libFuzzer (SPEECHC_FUZZ=ON,
 * scripts/fuzz.sh) or with replay.c, a main() that feeds it the files of
 * tests/fuzz/regress/<target>/ so that every build replays the inputs that
 * once crashed.  Beyond the sanitizers, each target checks the contract of
 * the code under it (FUZZ_CHECK): a refused input is refused with
 * SC_EINPUT and a message naming the file.
 */
#ifndef SC_FUZZ_UTIL_H
#define SC_FUZZ_UTIL_H
/* first include of every fuzz file: memfd_create, memmem, nftw */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <unistd.h>

/* An oracle failure is a crash: libFuzzer keeps the input. */
#define FUZZ_CHECK(cond, ...)                                                \
  do {                                                                       \
    if (!(cond)) {                                                           \
      fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s: ", __FILE__, __LINE__,  \
              #cond);                                                        \
      fprintf(stderr, __VA_ARGS__);                                          \
      fputc('\n', stderr);                                                   \
      abort();                                                               \
    }                                                                        \
  } while (0)

/* Replace path with n bytes of data; 0 on success. */
static inline int fuzz_write(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = n ? fwrite(data, 1, n, f) : 0;
  return (fclose(f) != 0 || w != n) ? -1 : 0;
}

/* malloc'd contents of path, *n its size; NULL when unreadable. */
static inline unsigned char *fuzz_slurp(const char *path, size_t *n) {
  *n = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, len = 0;
  unsigned char *buf = malloc(cap);
  while (buf) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap) break;
    unsigned char *nb = realloc(buf, cap *= 2);
    if (!nb) free(buf);
    buf = nb;
  }
  fclose(f);
  *n = len;
  return buf;
}

static inline int fuzz_copy(const char *from, const char *to) {
  size_t n;
  unsigned char *d = fuzz_slurp(from, &n);
  int rc = d ? fuzz_write(to, d, n) : -1;
  free(d);
  return rc;
}

/* A private scratch directory (under $TMPDIR or /tmp); the caller removes
 * it with fuzz_rm_tree (from an atexit handler). */
static inline const char *fuzz_tmpdir(char *buf, size_t cap, const char *tag) {
  const char *base = getenv("TMPDIR");
  snprintf(buf, cap, "%s/speechc-fuzz-%s-XXXXXX", base && *base ? base : "/tmp", tag);
  if (!mkdtemp(buf)) {
    perror(buf);
    abort();
  }
  return buf;
}

static inline int fuzz_rm_one(const char *path, const struct stat *sb, int type,
                              struct FTW *ftw) {
  (void)sb, (void)type, (void)ftw;
  return remove(path);
}

/* rm -rf dir (files and directories only; links are not followed). */
static inline void fuzz_rm_tree(const char *dir) {
  if (dir && *dir) nftw(dir, fuzz_rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

#endif
