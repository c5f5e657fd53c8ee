/*
 * gemm_ab.c — two builds of runtime/kernels_avx2.c's GEMMs (f32, bf16,
 * q8_0, q4_0) in one program, called alternately on the same rows, for
 * deciding a tile setting (FL_SEG, FL_NT, Q_NT, ...) on a noisy shared
 * machine: the two sides
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
 *   /tmp/gemm_ab ROWS COLS T REPS [bf16|f32|q8_0|q4_0]
 *
 * (the flags are the runtime's for kernels_avx2.c: CMakeLists.txt.  For
 * a modified copy of kernels_avx2.c in folder D, that side's line starts
 * `gcc -ID $F`: the folder must come before -Iruntime.)  Each rep runs A's GEMM over every
 * block of four rows and every 64 tokens (24 for q8_0 / q4_0), as
 * kernels.c's driver calls it on one thread, then B's; prints the best and
 * median GFLOP/s of each side, the ratio of the medians (B / A), and
 * whether the two sides gave the same bits.  Run A against an identical
 * A first: that ratio is the noise floor.  docs/PERFORMANCE.md *Zen 3
 * again* has its figures.
 */
#ifdef VAR
/* one side: the kernels' file with its external names renamed */
#define GAB_CAT2(a, b) a##b
#define GAB_CAT(a, b) GAB_CAT2(a, b)
#define sc_kern_avx2 GAB_CAT(sc_kern_avx2_, VAR)
#define sc_attn_row_avx2 GAB_CAT(sc_attn_row_avx2_, VAR)
#define sc_attn_rows_avx2 GAB_CAT(sc_attn_rows_avx2_, VAR)
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

/* the quantized bands: every block of four rows against every call of
 * Q_CALL_T tokens (kernels.c's GEMM_TOKENS for q8_0 / q4_0), the
 * activations quantized once by side A's quantize_q8 (both sides read the
 * same view); the last call's outputs stay in out */
enum { Q_CALL_T = 24 };
static void run_q(const sc_kern_ops *o, int q4, const uint8_t *w, size_t rb, int rows, int cols,
                  const int8_t *xq, const float *xd, const unsigned char *xp, int T, float *out) {
  const int nb = cols / 32;
  for (int r = 0; r < rows; r += 4)
    for (int t = 0; t < T; t += Q_CALL_T) {
      const int nt = T - t < Q_CALL_T ? T - t : Q_CALL_T;
      (q4 ? o->gemm_q4_0 : o->gemm_q8_0)(w + (size_t)r * rb, rb, 4, xq + (size_t)t * cols, xd + (size_t)t * nb,
                                          xp + (size_t)t * cols * 2, nb, nt, out, 4);
    }
}

static void report(const char *band, int rows, int cols, int T, int reps, double *ta, double *tb, int same) {
  qsort(ta, (size_t)reps, sizeof *ta, cmp_d);
  qsort(tb, (size_t)reps, sizeof *tb, cmp_d);
  const double gf = 2.0 * rows * cols * T / 1e9;
  printf("gemm_ab: %s %dx%d T=%d reps=%d  A best %.1f median %.1f GFLOP/s  B best %.1f median %.1f  "
         "B/A %.3f  bits %s\n",
         band, rows, cols, T, reps, gf / ta[0], gf / ta[reps / 2], gf / tb[0], gf / tb[reps / 2],
         ta[reps / 2] / tb[reps / 2], same ? "same" : "DIFFER");
}

/* q8_0 / q4_0: random rows in the CPU's grouped order (any bytes are valid
 * quants; the scales random f16 in [1/256, 1/16)), random activations */
static int main_q(int rows, int cols, int T, int reps, int q4) {
  if (cols % 32) {
    fprintf(stderr, "gemm_ab: COLS must be a multiple of 32 for q8_0 / q4_0\n");
    return 2;
  }
  const int nb = cols / 32;
  const size_t bb = q4 ? 18 : 34, rb = (size_t)nb * bb; /* a GGML block's bytes; a row's */
  uint8_t *w = malloc((size_t)rows * rb);
  float *x = malloc((size_t)T * cols * 4), *xd = malloc((size_t)T * nb * 4);
  int8_t *xq = malloc((size_t)T * cols);
  unsigned char *xp = malloc((size_t)T * cols * 2);
  double *ta = malloc((size_t)reps * sizeof *ta), *tb = malloc((size_t)reps * sizeof *tb);
  if (!w || !x || !xd || !xq || !xp || !ta || !tb) {
    fprintf(stderr, "gemm_ab: out of memory\n");
    return 1;
  }
  srand(1);
  for (size_t i = 0; i < (size_t)rows * rb; i++) w[i] = (uint8_t)rand();
  /* the scales: both layouts put a group's eight f16 at its start, the
   * last nb % 8 blocks' at theirs */
  const size_t gbytes = 8 * bb;
  for (int r = 0; r < rows; r++)
    for (int b = 0; b < nb; b++) {
      uint8_t *d = w + (size_t)r * rb + (b < nb / 8 * 8 ? (size_t)(b / 8) * gbytes + 2 * (b % 8) : (size_t)b * bb);
      const uint16_t h = (uint16_t)(0x1c00 + rand() % 0x1000);
      memcpy(d, &h, 2);
    }
  for (size_t i = 0; i < (size_t)T * cols; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
  for (int t = 0; t < T; t++)
    sc_kern_avx2_A.quantize_q8(x + (size_t)t * cols, nb, xq + (size_t)t * cols, xd + (size_t)t * nb,
                               xp + (size_t)t * cols * 2);
  float oa[Q_CALL_T * 4] = {0}, ob[Q_CALL_T * 4] = {0};
  for (int r = 0; r < reps; r++) {
    const double t0 = now_s();
    run_q(&sc_kern_avx2_A, q4, w, rb, rows, cols, xq, xd, xp, T, oa);
    const double t1 = now_s();
    run_q(&sc_kern_avx2_B, q4, w, rb, rows, cols, xq, xd, xp, T, ob);
    ta[r] = t1 - t0, tb[r] = now_s() - t1;
  }
  report(q4 ? "q4_0" : "q8_0", rows, cols, T, reps, ta, tb, !memcmp(oa, ob, sizeof oa));
  free(w), free(x), free(xd), free(xq), free(xp), free(ta), free(tb);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: gemm_ab ROWS COLS T REPS [bf16|f32|q8_0|q4_0]  (ROWS a multiple of 4)\n");
    return 2;
  }
  const int rows = atoi(argv[1]), cols = atoi(argv[2]), T = atoi(argv[3]), reps = atoi(argv[4]);
  const char *band = argc < 6 ? "bf16" : argv[5];
  if (rows < 4 || rows % 4 || cols < 1 || T < 1 || reps < 1) {
    fprintf(stderr, "gemm_ab: ROWS (a multiple of 4), COLS, T and REPS must be positive\n");
    return 2;
  }
  if (!strcmp(band, "q8_0") || !strcmp(band, "q4_0")) return main_q(rows, cols, T, reps, !strcmp(band, "q4_0"));
  if (strcmp(band, "bf16") && strcmp(band, "f32")) {
    fprintf(stderr, "gemm_ab: band '%s': expected bf16, f32, q8_0 or q4_0\n", band);
    return 2;
  }
  const int bf16 = !strcmp(band, "bf16");
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
  report(band, rows, cols, T, reps, ta, tb, !memcmp(oa, ob, sizeof oa));
  free(w), free(x), free(xo), free(ta), free(tb);
  return 0;
}
#endif
