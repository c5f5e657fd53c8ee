/*
 * cache_probe.c — single-thread read bandwidth of a buffer read over and
 * over (a cyclic working set), to see how much of the last-level cache one
 * core can hold on to.  The Qwen3-TTS code predictor reads the same ~44 MB
 * (0.6B shapes, q4_0) 15 times per frame; this tells whether any ordering
 * could keep part of that in cache on a given machine.
 *
 *   cc -O2 -mavx2 bench/cache_probe.c -o /tmp/cache_probe
 *   /tmp/cache_probe MB [KEEP_MB HINT]
 *
 * Reads MB megabytes with 32-byte loads, repeatedly for ~3 s, and prints
 * the median and best GB/s.  With KEEP_MB and HINT=1 the first KEEP_MB are
 * read plainly and the rest with PREFETCHNTA ahead of the loads (an attempt
 * to stream the part that cannot fit without evicting the part that can).
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float read_region(const char *p, size_t n, int nta) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    if (nta) {
      _mm_prefetch(p + i + 1024, _MM_HINT_NTA);
      _mm_prefetch(p + i + 1024 + 64, _MM_HINT_NTA);
    }
    a0 = _mm256_add_ps(a0, _mm256_load_ps((const float *)(p + i)));
    a1 = _mm256_add_ps(a1, _mm256_load_ps((const float *)(p + i + 32)));
    a2 = _mm256_add_ps(a2, _mm256_load_ps((const float *)(p + i + 64)));
    a3 = _mm256_add_ps(a3, _mm256_load_ps((const float *)(p + i + 96)));
  }
  float f[8];
  _mm256_storeu_ps(f, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  return f[0];
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc != 2 && argc != 4) {
    fprintf(stderr, "usage: %s MB [KEEP_MB HINT]\n", argv[0]);
    return 2;
  }
  size_t n = (size_t)atol(argv[1]) << 20, keep = argc == 4 ? (size_t)atol(argv[2]) << 20 : 0;
  int nta = argc == 4 ? atoi(argv[3]) : 0;
  if (n == 0 || keep > n) {
    fprintf(stderr, "cache_probe: need 0 < KEEP_MB <= MB\n");
    return 2;
  }
  char *p = aligned_alloc(64, n);
  if (!p) return 1;
  memset(p, 1, n);
  enum { MAX_REPS = 64 };
  double ts[MAX_REPS], t0 = now();
  float sink = 0;
  int reps = 0;
  while (reps < MAX_REPS && (reps < 8 || now() - t0 < 3.0)) {
    double a = now();
    sink += read_region(p, keep, 0) + read_region(p + keep, n - keep, nta);
    ts[reps++] = now() - a;
  }
  qsort(ts, (size_t)reps, sizeof *ts, cmp_double);
  printf("ws=%zuMB keep=%zuMB nta=%d reps=%d median %.2f GB/s best %.2f GB/s%s\n", n >> 20, keep >> 20,
         nta, reps, (double)n / ts[reps / 2] / 1e9, (double)n / ts[0] / 1e9, sink == 12345.f ? " " : "");
  free(p);
  return 0;
}
