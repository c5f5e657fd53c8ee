/*
 * kern_micro.c — times sc_kernels.linear alone on Qwen3-0.6B's MLP shapes
 * (rows x cols = 3072 x 1024 and 1024 x 3072), for one band and T tokens.
 *
 *   kern_micro BAND T THREADS [MB] [REPS]
 *
 * BAND is f32, bf16, q8_0 or q4_0.  MB (default 2) is the bytes of weights
 * the calls cycle through: 2 keeps them in L3, so the GEMV's compute
 * ceiling shows; 256 or more makes every call stream from DRAM.  Prints the
 * best and median ms per call and the weight GB/s (T=1) or tokens/s (T>1)
 * of the best.  Weights and activations are random; nothing is checked
 * (tests/unit/test_kernels.c does that).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"
#include "pool.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: kern_micro f32|bf16|q8_0|q4_0 T THREADS [MB] [REPS]\n");
    return 2;
  }
  const char *band = argv[1];
  const int T = atoi(argv[2]), threads = atoi(argv[3]);
  const double mb = argc > 4 ? atof(argv[4]) : 2.0;
  const int reps = argc > 5 ? atoi(argv[5]) : 200;
  int wtype = !strcmp(band, "f32")    ? SC_W_F32
              : !strcmp(band, "bf16") ? SC_W_BF16
              : !strcmp(band, "q8_0") ? SC_W_Q8_0
              : !strcmp(band, "q4_0") ? SC_W_Q4_0
                                      : -1;
  if (wtype < 0 || T < 1 || threads < 1) {
    fprintf(stderr, "kern_micro: bad band, T or THREADS\n");
    return 2;
  }
  const int shapes[2][2] = {{3072, 1024}, {1024, 3072}};
  size_t mat_bytes = sc_band_row_bytes(wtype, 1024) * 3072; /* both shapes */
  int nmat = (int)(mb * 1e6 / (double)mat_bytes);
  if (nmat < 2) nmat = 2;
  nmat &= ~1;
  unsigned char **w = calloc((size_t)nmat, sizeof *w);
  float *row = malloc(3072 * sizeof *row);
  srand(1);
  for (int m = 0; m < nmat; m++) {
    const int rows = shapes[m & 1][0], cols = shapes[m & 1][1];
    const size_t rb = sc_band_row_bytes(wtype, cols);
    w[m] = aligned_alloc(64, (rb * rows + 63) & ~(size_t)63);
    for (int r = 0; r < rows; r++) {
      for (int c = 0; c < cols; c++) row[c] = (float)rand() / RAND_MAX - 0.5f;
      unsigned char *dst = w[m] + rb * r;
      if (wtype == SC_W_F32) memcpy(dst, row, rb);
      else if (wtype == SC_W_BF16)
        for (int c = 0; c < cols; c++) {
          uint32_t u;
          memcpy(&u, &row[c], 4);
          uint16_t h = (uint16_t)(u >> 16);
          memcpy(dst + 2 * c, &h, 2);
        }
      else if (wtype == SC_W_Q8_0) { /* GGML's blocks, then the CPU's groups, as the packer does */
        unsigned char ggml[3072 / 32 * SC_Q8_0_BLOCK];
        sc_quantize_row_q8_0(row, cols, ggml);
        sc_pack_row_q8_0(ggml, cols, dst);
      } else {
        unsigned char ggml[3072 / 32 * SC_Q4_0_BLOCK];
        sc_quantize_row_q4_0(row, cols, ggml);
        sc_pack_row_q4_0(ggml, cols, dst);
      }
    }
  }
  float *x = malloc((size_t)T * 3072 * sizeof *x), *y = malloc((size_t)T * 3072 * sizeof *y);
  for (int i = 0; i < T * 3072; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
  sc_kernel_ctx ctx = {0};
  ctx.pool = sc_pool_new(threads);
  sc_kernels K;
  sc_kernels_init(&K, &ctx);
  double *t = malloc((size_t)reps * sizeof *t);
  for (int rep = -3; rep < reps; rep++) {
    double t0 = now_s();
    for (int m = 0; m < nmat; m++) {
      const int rows = shapes[m & 1][0], cols = shapes[m & 1][1];
      K.linear(&ctx, wtype, w[m], NULL, x, cols, y, rows, T, rows, cols, 0);
    }
    if (rep >= 0) t[rep] = (now_s() - t0) / nmat;
  }
  if (ctx.failed) {
    fprintf(stderr, "kern_micro: %s\n", ctx.err);
    return 1;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_d);
  const double flop_rows = 3072.0 * 1024.0;
  printf("kern_micro: band=%s isa=%s T=%d threads=%d mb=%.0f best_ms=%.4f median_ms=%.4f "
         "gbps=%.2f tok_s=%.1f gflops=%.2f\n",
         band, sc_kernels_isa(&K), T, threads, nmat * mat_bytes / 1e6, t[0] * 1e3,
         t[reps / 2] * 1e3, mat_bytes / t[0] / 1e9, T / t[0],
         2.0 * flop_rows * T / t[0] / 1e9);
  sc_pool_free(ctx.pool);
  sc_kernel_ctx_free(&ctx);
  return 0;
}
