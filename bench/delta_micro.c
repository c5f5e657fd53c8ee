/*
 * delta_micro.c — the Gated DeltaNet delta rule alone: one prompt of T
 * tokens through sc_kernels.delta_rule in the chunkwise form (one call,
 * --delta-chunk's path) against the token-by-token form (calls of 8
 * tokens, below the chunkwise threshold), at Qwen3.5-0.8B's GDN shapes by
 * default (16 heads of 128), one thread.  Median of 5 rounds of 5 calls.
 *
 *   delta_micro [T] [heads] [head_dim] [chunk]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  const int T = argc > 1 ? atoi(argv[1]) : 128, nv = argc > 2 ? atoi(argv[2]) : 16;
  const int d = argc > 3 ? atoi(argv[3]) : 128, chunk = argc > 4 ? atoi(argv[4]) : 64;
  if (T < 16 || nv < 1 || d < 1 || chunk < 1 || chunk > 256) {
    fprintf(stderr, "usage: delta_micro [T >= 16] [heads] [head_dim] [chunk 1..256]\n");
    return 2;
  }
  sc_kernel_ctx c = {0};
  sc_kernels K;
  sc_kernels_init(&K, &c);
  const size_t w = (size_t)nv * d;
  float *q = malloc(T * w * 4), *k = malloc(T * w * 4), *v = malloc(T * w * 4), *y = malloc(T * w * 4);
  float *g = malloc((size_t)T * nv * 4), *b = malloc((size_t)T * nv * 4), *s = calloc(w * d, 4);
  srand(1);
  for (size_t i = 0; i < T * w; i++)
    q[i] = (rand() % 200 - 100) / 1000.f, k[i] = (rand() % 200 - 100) / 1000.f, v[i] = (rand() % 200 - 100) / 100.f;
  for (int i = 0; i < T * nv; i++) g[i] = -0.1f, b[i] = 0.5f;
  double tc[5], tr[5];
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
    for (int it = 0; it < 5; it++)
      K.delta_rule(K.ctx, q, (int)w, k, (int)w, v, (int)w, g, nv, b, nv, s, y, (int)w, T, nv, nv, d, d, 0.088f, chunk);
    double t1 = now();
    for (int it = 0; it < 5; it++)
      for (int t = 0; t < T; t += 8) {
        const int n = T - t < 8 ? T - t : 8;
        K.delta_rule(K.ctx, q + t * w, (int)w, k + t * w, (int)w, v + t * w, (int)w, g + t * nv, nv, b + t * nv, nv,
                     s, y + t * w, (int)w, n, nv, nv, d, d, 0.088f, 0);
      }
    tc[rep] = (t1 - t0) / 5, tr[rep] = (now() - t1) / 5;
  }
  qsort(tc, 5, sizeof *tc, cmp);
  qsort(tr, 5, sizeof *tr, cmp);
  printf("delta rule, T %d, %d heads of %d, kernels %s, 1 thread: chunkwise (chunk %d) %.2f ms, token by token "
         "%.2f ms (medians)\n", T, nv, d, sc_kernels_isa(&K), chunk, tc[2] * 1e3, tr[2] * 1e3);
  return c.failed;
}
