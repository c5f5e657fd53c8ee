/*
 * gemm_ab.c — two builds of runtime/kernels_avx2.c's f32/bf16 GEMM in one
 * program, called alternately on the same rows, for deciding a tile
 * setting (FL_SEG, FL_NT, ...) on a noisy shared machine: the two sides
 * meet the same load within milliseconds, where two binaries run one
 * after the other meet different minutes.  Not a test; x86-64 with AVX2.
 *
 * This file is compiled three times: twice as a side (VAR=A, VAR=B, each
 * with its own -D settings or its own copy of kernels_avx2.c first on the
 * include path; both sides and the driver must share runtime/kernels.h,
 * whose sc_kern_ops they all read), once as the driver:
 *
 *   F="-O3 -fno-semantic-interposition -std=gnu11 -mavx2 -mfma -mf16c -Iruntime"
 *   gcc $F -DVAR=A -c bench/gemm_ab.c -o /tmp/gemm_ab_A.o
 *   gcc $F -DVAR=B -DFL_SEG=256 -c bench/gemm_ab.c -o /tmp/gemm_ab_B.o
 *   gcc -O2 -Iruntime bench/gemm_ab.c /tmp/gemm_ab_A.o /tmp/gemm_ab_B.o \
 *       build/libspeechc_rt.a -lcjson -lopenblas -ldl -lm -lpthread -o /tmp/gemm_ab
 *   /tmp/gemm_ab ROWS COLS T REPS [bf16|f32]
 *
 * (the flags are the runtime's for kernels_avx2.c: CMakeLists.txt.)  Each
 * rep runs A's GEMM over every block of four rows and every 64 tokens, as
 * kernels.c's driver calls it on one thread, then B's; prints the best and
 * median GFLOP/s of each side, the ratio of the medians (B / A), and
 * whether the two sides gave the same bits.  Run A against an identical
 * A first: that ratio is the noise floor.  docs/PERFORMANCE.md *Zen 3
 * again* has its figures.
 */
#ifdef VAR
/* one side: the kernels' file with its two external names renamed */
#define GAB_CAT2(a, b) a##b
#define GAB_CAT(a, b) GAB_CAT2(a, b)
#define sc_kern_avx2 GAB_CAT(sc_kern_avx2_, VAR)
#define sc_attn_row_avx2 GAB_CAT(sc_attn_row_avx2_, VAR)
#include "kernels_avx2.c"
#else
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

extern const sc_kern_ops sc_kern_avx2_A, sc_kern_avx2_B;

enum { CALL_T = 64 }; /* tokens a driver call hands the AVX2 GEMM (gemm_fl_tokens) */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* every block of four rows against every call of CALL_T tokens, as the
 * driver makes them: with the side's gemm_x_order, its tokens laid out
 * once into xo (timed with the rest) and its _ordered GEMMs; the last
 * call's outputs stay in out */
static void run(const sc_kern_ops *o, int bf16, const void *w, int rows, int cols, const float *x, float *xo,
                int T, float *out) {
  if (o->gemm_x_order) {
    for (int t = 0; t < T; t++) o->gemm_x_order(x + (size_t)t * cols, cols, xo + (size_t)t * cols);
    x = xo;
  }
  for (int r = 0; r < rows; r += 4)
    for (int t = 0; t < T; t += CALL_T) {
      const int nt = T - t < CALL_T ? T - t : CALL_T;
      const uint16_t *wb = (const uint16_t *)w + (size_t)r * cols;
      const float *wf = (const float *)w + (size_t)r * cols, *xt = x + (size_t)t * cols;
      if (bf16 && o->gemm_x_order) o->gemm_bf16_ordered(wb, 4, xt, cols, nt, cols, out, 4);
      else if (bf16) o->gemm_bf16(wb, 4, xt, cols, nt, cols, out, 4);
      else if (o->gemm_x_order) o->gemm_f32_ordered(wf, 4, xt, cols, nt, cols, out, 4);
      else o->gemm_f32(wf, 4, xt, cols, nt, cols, out, 4);
    }
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: gemm_ab ROWS COLS T REPS [bf16|f32]  (ROWS a multiple of 4)\n");
    return 2;
  }
  const int rows = atoi(argv[1]), cols = atoi(argv[2]), T = atoi(argv[3]), reps = atoi(argv[4]);
  const int bf16 = argc < 6 || strcmp(argv[5], "f32") != 0;
  if (rows < 4 || rows % 4 || cols < 1 || T < 1 || reps < 1) {
    fprintf(stderr, "gemm_ab: ROWS (a multiple of 4), COLS, T and REPS must be positive\n");
    return 2;
  }
  const size_t n = (size_t)rows * cols;
  void *w = aligned_alloc(64, (n * (bf16 ? 2 : 4) + 63) & ~(size_t)63);
  float *x = aligned_alloc(64, ((size_t)T * cols * 4 + 63) & ~(size_t)63);
  float *xo = aligned_alloc(64, ((size_t)T * cols * 4 + 63) & ~(size_t)63);
  double *ta = malloc((size_t)reps * sizeof *ta), *tb = malloc((size_t)reps * sizeof *tb);
  if (!w || !x || !xo || !ta || !tb) {
    fprintf(stderr, "gemm_ab: out of memory\n");
    return 1;
  }
  srand(1);
  for (size_t i = 0; i < n; i++) {
    const float f = (float)rand() / RAND_MAX - 0.5f;
    if (bf16) {
      uint32_t u;
      memcpy(&u, &f, 4);
      ((uint16_t *)w)[i] = (uint16_t)(u >> 16);
    } else ((float *)w)[i] = f;
  }
  for (size_t i = 0; i < (size_t)T * cols; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
  float oa[CALL_T * 4] = {0}, ob[CALL_T * 4] = {0};
  for (int r = 0; r < reps; r++) {
    const double t0 = now_s();
    run(&sc_kern_avx2_A, bf16, w, rows, cols, x, xo, T, oa);
    const double t1 = now_s();
    run(&sc_kern_avx2_B, bf16, w, rows, cols, x, xo, T, ob);
    ta[r] = t1 - t0, tb[r] = now_s() - t1;
  }
  const int same = !memcmp(oa, ob, sizeof oa);
  qsort(ta, (size_t)reps, sizeof *ta, cmp_d);
  qsort(tb, (size_t)reps, sizeof *tb, cmp_d);
  const double gf = 2.0 * rows * cols * T / 1e9;
  printf("gemm_ab: %s %dx%d T=%d reps=%d  A best %.1f median %.1f GFLOP/s  B best %.1f median %.1f  "
         "B/A %.3f  bits %s\n",
         bf16 ? "bf16" : "f32", rows, cols, T, reps, gf / ta[0], gf / ta[reps / 2], gf / tb[0], gf / tb[reps / 2],
         ta[reps / 2] / tb[reps / 2], same ? "same" : "DIFFER");
  free(w), free(x), free(xo), free(ta), free(tb);
  return 0;
}
#endif
