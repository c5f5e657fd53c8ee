/*
 * test_codec_kernels.c — the codec kernels of sc_kernels (IM2COL, DWCONV,
 * OVERLAP_ADD, SNAKE, LAYERNORM) against double-precision references of
 * the PyTorch modules they implement, for the portable table and every
 * ISA this build and CPU run:
 *   - a causal Conv1d (PyTorch weight [cout, cin, k], left zero padding
 *     (k-1)*d, dilations 1..9) as LINEAR(IM2COL(x), sc_conv_weight_im2col
 *     (W)) + bias, whole and streamed in chunks of 1, 2, 3, 7 and odd
 *     sizes, including chunks shorter than the state;
 *   - a causal ConvTranspose1d ([cin, cout, k], output trimmed by k - s)
 *     as OVERLAP_ADD(LINEAR(x, sc_convt_weight_linear(W))), for k == s,
 *     k == 2s and k > 2s, whole and streamed (a carry spanning several
 *     calls);
 *   - the depthwise conv, SnakeBeta (small, large and non-finite inputs,
 *     the sin^2 polynomial's error bound, in place), LayerNorm (constant
 *     rows, in place);
 *   - streaming gives the whole call's bits for the ops themselves; the
 *     thread count changes no bit (overlap_add too); bad shapes are
 *     reported, not computed;
 *   - the weight layouts: sc_conv_weight_src agrees with both permutations.
 * (bench/conv_micro.c times them on the published decoder's shapes.)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "isa_tables.h"
#include "kernels.h"
#include "pool.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static float frand(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}
static float *rnd(size_t n, float scale) {
  float *p = malloc(n * sizeof *p + 64);
  for (size_t i = 0; i < n; i++) p[i] = frand() * scale;
  return p;
}
static float *zeros(size_t n) { return calloc(n + 16, sizeof(float)); }
static int same(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

/* ---- references (double) ---------------------------------------------- */

/* Causal Conv1d over the whole sequence: x [R, cin] (ld ldx), W [cout,
 * cin, k], left zero padding (k-1)*d; y [R, cout] and the sum of |terms|. */
static void ref_conv(const float *x, int ldx, const float *W, const float *b, int R, int cin, int cout, int k,
                     int d, double *y, double *mag) {
  const int S = (k - 1) * d;
  for (int t = 0; t < R; t++)
    for (int o = 0; o < cout; o++) {
      double s = b ? b[o] : 0, m = b ? fabs(b[o]) : 0;
      for (int j = 0; j < k; j++) {
        const int src = t + j * d - S;
        if (src < 0) continue;
        for (int c = 0; c < cin; c++) {
          const double p = (double)W[((size_t)o * cin + c) * k + j] * x[(size_t)src * ldx + c];
          s += p;
          m += fabs(p);
        }
      }
      y[(size_t)t * cout + o] = s;
      mag[(size_t)t * cout + o] = m;
    }
}

/* ConvTranspose1d, output trimmed to R*s: W [cin, cout, k]. */
static void ref_convt(const float *x, const float *W, const float *b, int R, int cin, int cout, int k, int s,
                      double *y, double *mag) {
  for (size_t i = 0; i < (size_t)R * s * cout; i++) y[i] = mag[i] = 0;
  for (int p = 0; p < R * s; p++)
    for (int o = 0; o < cout; o++) {
      y[(size_t)p * cout + o] = b ? b[o] : 0;
      mag[(size_t)p * cout + o] = b ? fabs(b[o]) : 0;
    }
  for (int i = 0; i < R; i++)
    for (int j = 0; j < k; j++) {
      const int p = i * s + j;
      if (p >= R * s) continue;
      for (int o = 0; o < cout; o++)
        for (int c = 0; c < cin; c++) {
          const double v = (double)x[(size_t)i * cin + c] * W[((size_t)c * cout + o) * k + j];
          y[(size_t)p * cout + o] += v;
          mag[(size_t)p * cout + o] += fabs(v);
        }
    }
}

/* Chunk sizes that cover R: a pattern repeated, the last one cut. */
static int next_chunk(const int *pat, int npat, int *k, int left) {
  int n = pat[(*k)++ % npat];
  return n < left ? n : left;
}

static const int patterns[][4] = {{1}, {2}, {3}, {7}, {5, 1, 2, 9}, {64}};
enum { NPAT = sizeof patterns / sizeof patterns[0] };
static int pat_len(int p) {
  int n = 0;
  while (n < 4 && patterns[p][n]) n++;
  return n;
}

/* ---- IM2COL_STRIDED ------------------------------------------------------ */

/* torch.nn.Conv1d(stride s, dilation d) over the package's StreamingConv1d
 * padding, in double: P = (k-1)*d + 1 - s rows before x, zeros or (pad_mode
 * replicate) copies of x's first row; y [R/s, cout]. */
static void ref_strided(const float *x, const float *W, const float *b, int R, int cin, int cout, int k, int d,
                        int s, int replicate, double *y) {
  const int P = (k - 1) * d + 1 - s;
  for (int t = 0; t < R / s; t++)
    for (int o = 0; o < cout; o++) {
      double acc = b[o];
      for (int c = 0; c < cin; c++)
        for (int j = 0; j < k; j++) {
          const int q = t * s + j * d - P; /* index into x; < 0: padding */
          const double v = q >= 0 ? x[(size_t)q * cin + c] : replicate ? x[c] : 0.0;
          acc += (double)W[((size_t)o * cin + c) * k + j] * v;
        }
      y[(size_t)t * cout + o] = acc;
    }
}

/* The op's rows times the conv's im2col weight (in double) against the
 * reference, with the input fed whole and in pieces of s, 3s and the rest
 * (a session's streaming calls): the same rows bit for bit, the same conv. */
static void test_im2col_strided(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static const int shapes[][7] = {/* R, C, k, d, s, replicate, cout */
                                  {16, 3, 8, 1, 4, 0, 5}, {24, 4, 4, 1, 2, 1, 3}, {30, 2, 10, 1, 5, 0, 4},
                                  {12, 5, 3, 2, 3, 1, 2}, {8, 3, 2, 1, 2, 0, 3}, {6, 2, 7, 1, 1, 1, 2},
                                  {9, 2, 3, 1, 3, 1, 2}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int R = shapes[si][0], C = shapes[si][1], k = shapes[si][2], d = shapes[si][3], s = shapes[si][4];
    const int rep = shapes[si][5], cout = shapes[si][6], P = (k - 1) * d + 1 - s, Ro = R / s, kc = k * C;
    const int st_rows = P + (rep ? 1 : 0);
    float *x = rnd((size_t)R * C, 1), *W = rnd((size_t)cout * C * k, 1), *b = rnd((size_t)cout, 1);
    float *Wp = zeros((size_t)cout * kc), *y1 = zeros((size_t)Ro * kc), *y2 = zeros((size_t)Ro * kc);
    float *st1 = zeros((size_t)st_rows * C), *st2 = zeros((size_t)st_rows * C);
    double *want = calloc((size_t)Ro * cout, sizeof *want);
    sc_conv_weight_im2col(W, cout, C, k, Wp);
    ref_strided(x, W, b, R, C, cout, k, d, s, rep, want);
    K->im2col_strided(K->ctx, x, C, st_rows ? st1 : NULL, y1, kc, R, C, k, d, s, rep);
    const int piece[] = {s, 3 * s};
    for (int at = 0, i = 0; at < R; i++) {
      int n = i < 2 ? piece[i] : R - at;
      if (n > R - at) n = R - at;
      K->im2col_strided(K->ctx, x + (size_t)at * C, C, st_rows ? st2 : NULL, y2 + (size_t)(at / s) * kc, kc, n,
                        C, k, d, s, rep);
      at += n;
    }
    CHECK_MSG(!ctx->failed, "%s", ctx->err);
    CHECK_MSG(same(y1, y2, (size_t)Ro * kc) && same(st1, st2, (size_t)st_rows * C),
              "%s im2col_strided case %zu: pieces differ from one call", sc_kernels_isa(K), si);
    double worst = 0;
    for (int t = 0; t < Ro; t++)
      for (int o = 0; o < cout; o++) {
        double acc = b[o];
        for (int q = 0; q < kc; q++) acc += (double)Wp[(size_t)o * kc + q] * y1[(size_t)t * kc + q];
        const double e = fabs(acc - want[(size_t)t * cout + o]);
        if (e > worst) worst = e;
      }
    CHECK_MSG(worst < 1e-12, "%s im2col_strided case %zu: conv off by %g", sc_kernels_isa(K), si, worst);
    for (int q = 0; q < P; q++) /* the state: the last P input rows */
      CHECK(same(st1 + (size_t)q * C, x + (size_t)(R - P + q) * C, (size_t)C));
    free(x), free(W), free(b), free(Wp), free(y1), free(y2), free(st1), free(st2), free(want);
  }
  /* refusals: rows not a multiple of the stride; a kernel shorter than it */
  float x[16] = {0}, y[64], st[16] = {0};
  ctx->failed = 0;
  K->im2col_strided(K->ctx, x, 2, st, y, 8, 3, 2, 4, 1, 2, 0);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "im2col_strided: stride 2 with kernel 4");
  ctx->failed = 0;
  K->im2col_strided(K->ctx, x, 2, st, y, 8, 4, 2, 1, 1, 2, 0);
  CHECK(ctx->failed);
  ctx->failed = 0;
}

/* ---- IM2COL ------------------------------------------------------------ */

/* The op alone: every element against xx, the state afterwards, R below,
 * at and above the state's rows; streamed == whole bit for bit. */
static void test_im2col(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static const int shapes[][4] = {/* R, C, k, d */
                                  {1, 3, 2, 1}, {5, 4, 3, 1}, {2, 8, 7, 1}, {6, 5, 7, 3},
                                  {40, 16, 7, 9}, {17, 9, 1, 1}, {3, 2, 3, 4}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int R = shapes[si][0], C = shapes[si][1], k = shapes[si][2], d = shapes[si][3], S = (k - 1) * d;
    const int ldx = C + 3, ldy = k * C + 2;
    float *x = rnd((size_t)R * ldx, 1), *st0 = rnd((size_t)S * C + 1, 1), *st = zeros((size_t)S * C);
    float *y = zeros((size_t)R * ldy);
    memcpy(st, st0, (size_t)S * C * sizeof *st);
    K->im2col(K->ctx, x, ldx, S ? st : NULL, y, ldy, R, C, k, d);
    CHECK_MSG(!ctx->failed, "%s", ctx->err);
    int bad = 0;
    for (int t = 0; t < R; t++)
      for (int j = 0; j < k; j++)
        for (int c = 0; c < C; c++) {
          const int q = t + j * d;
          const float want = q < S ? st0[(size_t)q * C + c] : x[(size_t)(q - S) * ldx + c];
          bad += y[(size_t)t * ldy + j * C + c] != want;
        }
    CHECK_MSG(!bad, "%s im2col R %d C %d k %d d %d: %d wrong", sc_kernels_isa(K), R, C, k, d, bad);
    for (int q = 0; q < S; q++) { /* the last S rows of [state0; x] */
      const int src = R + q;
      for (int c = 0; c < C; c++) {
        const float want = src < S ? st0[(size_t)src * C + c] : x[(size_t)(src - S) * ldx + c];
        bad += st[(size_t)q * C + c] != want;
      }
    }
    CHECK_MSG(!bad, "%s im2col state R %d S %d", sc_kernels_isa(K), R, S);
    free(x), free(st0), free(st), free(y);
  }
}

/* A causal Conv1d as LINEAR(IM2COL(x), W') + b against the double conv,
 * whole (zero state) and streamed in chunks; the streamed rows equal the
 * whole call's to rounding (bits when LINEAR's order does not depend on
 * the token count: below OpenBLAS's 16 tokens, or portable). */
static void test_conv(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static const int shapes[][5] = {/* R, cin, cout, k, d */
                                  {12, 5, 3, 3, 1},  {30, 16, 8, 7, 1}, {50, 8, 12, 7, 3},
                                  {90, 6, 6, 7, 9},  {20, 7, 5, 1, 1},  {3, 4, 4, 7, 9},
                                  {40, 33, 17, 2, 1}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int R = shapes[si][0], cin = shapes[si][1], cout = shapes[si][2], k = shapes[si][3],
              d = shapes[si][4], S = (k - 1) * d, kc = k * cin;
    float *x = rnd((size_t)R * cin, 1), *W = rnd((size_t)cout * kc, 0.5f), *b = rnd(cout, 0.5f);
    float *Wp = zeros((size_t)cout * kc), *st = zeros((size_t)S * cin), *col = zeros((size_t)R * kc);
    float *y = zeros((size_t)R * cout), *ys = zeros((size_t)R * cout);
    double *ref = malloc((size_t)R * cout * sizeof *ref), *mag = malloc((size_t)R * cout * sizeof *mag);
    sc_conv_weight_im2col(W, cout, cin, k, Wp);
    ref_conv(x, cin, W, b, R, cin, cout, k, d, ref, mag);
    K->im2col(K->ctx, x, cin, S ? st : NULL, col, kc, R, cin, k, d);
    K->linear(K->ctx, SC_W_F32, Wp, b, col, kc, y, cout, R, cout, kc, 0);
    CHECK_MSG(!ctx->failed, "%s", ctx->err);
    double worst = 0;
    for (size_t i = 0; i < (size_t)R * cout; i++) {
      const double e = fabs(y[i] - ref[i]) / (mag[i] + 1e-30);
      if (e > worst) worst = e;
    }
    CHECK_MSG(worst <= 2e-6, "%s conv R %d cin %d cout %d k %d d %d: relative error %g", sc_kernels_isa(K), R,
              cin, cout, k, d, worst);
    for (int p = 0; p < NPAT; p++) {
      memset(st, 0, (size_t)S * cin * sizeof *st);
      int at = 0, ci = 0, exact = 1;
      while (at < R) {
        const int n = next_chunk(patterns[p], pat_len(p), &ci, R - at);
        K->im2col(K->ctx, x + (size_t)at * cin, cin, S ? st : NULL, col, kc, n, cin, k, d);
        K->linear(K->ctx, SC_W_F32, Wp, b, col, kc, ys + (size_t)at * cout, cout, n, cout, kc, 0);
        exact &= n < 16;
        at += n;
      }
      double diff = 0;
      for (size_t i = 0; i < (size_t)R * cout; i++) {
        const double e = fabs(ys[i] - y[i]) / (mag[i] + 1e-30);
        if (e > diff) diff = e;
      }
      CHECK_MSG(diff <= 2e-6, "%s conv streamed (pattern %d) vs whole: %g", sc_kernels_isa(K), p, diff);
      if (exact && R < 16)
        CHECK_MSG(same(ys, y, (size_t)R * cout), "%s conv streamed (pattern %d): not the whole call's bits",
                  sc_kernels_isa(K), p);
    }
    free(x), free(W), free(b), free(Wp), free(st), free(col), free(y), free(ys), free(ref), free(mag);
  }
}

/* ---- DWCONV ------------------------------------------------------------ */

static void test_dwconv(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static const int shapes[][4] = {{10, 4, 7, 1}, {33, 17, 7, 1}, {25, 9, 3, 3}, {6, 40, 7, 2}, {8, 5, 1, 1}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int R = shapes[si][0], C = shapes[si][1], k = shapes[si][2], d = shapes[si][3], S = (k - 1) * d;
    const int ldx = C + 1, ldy = C + 2;
    float *x = rnd((size_t)R * ldx, 1), *w = rnd((size_t)C * k, 1), *b = rnd(C, 1);
    float *st = zeros((size_t)S * C), *y = zeros((size_t)R * ldy), *ys = zeros((size_t)R * ldy);
    for (int wb = 0; wb < 2; wb++) {
      const float *bias = wb ? b : NULL;
      memset(st, 0, (size_t)S * C * sizeof *st);
      K->dwconv(K->ctx, x, ldx, w, bias, S ? st : NULL, y, ldy, R, C, k, d);
      CHECK_MSG(!ctx->failed, "%s", ctx->err);
      double worst = 0;
      for (int t = 0; t < R; t++)
        for (int c = 0; c < C; c++) {
          double s = bias ? bias[c] : 0, m = bias ? fabs(bias[c]) : 0;
          for (int j = 0; j < k; j++) {
            const int src = t + j * d - S;
            if (src < 0) continue;
            const double p = (double)w[(size_t)c * k + j] * x[(size_t)src * ldx + c];
            s += p;
            m += fabs(p);
          }
          const double e = fabs(y[(size_t)t * ldy + c] - s) / (m + 1e-30);
          if (e > worst) worst = e;
        }
      CHECK_MSG(worst <= 1e-6, "%s dwconv R %d C %d k %d d %d: %g", sc_kernels_isa(K), R, C, k, d, worst);
      for (int p = 0; p < NPAT; p++) {
        memset(st, 0, (size_t)S * C * sizeof *st);
        int at = 0, ci = 0;
        while (at < R) {
          const int n = next_chunk(patterns[p], pat_len(p), &ci, R - at);
          K->dwconv(K->ctx, x + (size_t)at * ldx, ldx, w, bias, S ? st : NULL, ys + (size_t)at * ldy, ldy, n, C,
                    k, d);
          at += n;
        }
        int bad = 0;
        for (int t = 0; t < R; t++) bad += !same(ys + (size_t)t * ldy, y + (size_t)t * ldy, C);
        CHECK_MSG(!bad, "%s dwconv streamed (pattern %d): %d rows differ from the whole call", sc_kernels_isa(K), p,
                  bad);
      }
    }
    free(x), free(w), free(b), free(st), free(y), free(ys);
  }
}

/* ---- OVERLAP_ADD ------------------------------------------------------- */

/* ConvTranspose1d as OVERLAP_ADD(LINEAR(x, W''), b) against the double
 * reference; streamed == whole bit for bit for the overlap-add given the
 * same z rows (z from one LINEAR over all rows). */
static void test_convt(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static const int shapes[][5] = {/* R, cin, cout, k, s */
                                  {9, 6, 4, 2, 2},  {7, 8, 5, 16, 8}, {11, 5, 7, 10, 5}, {13, 4, 3, 7, 3},
                                  {5, 3, 6, 6, 3},  {20, 12, 9, 4, 2}, {4, 5, 2, 9, 2}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int R = shapes[si][0], cin = shapes[si][1], cout = shapes[si][2], k = shapes[si][3],
              s = shapes[si][4], S = k - s, kc = k * cout;
    float *x = rnd((size_t)R * cin, 1), *W = rnd((size_t)cin * kc, 0.5f), *b = rnd(cout, 0.5f);
    float *Wp = zeros((size_t)kc * cin), *z = zeros((size_t)R * kc), *st = zeros((size_t)S * cout);
    float *y = zeros((size_t)R * s * cout), *ys = zeros((size_t)R * s * cout);
    double *ref = malloc((size_t)R * s * cout * sizeof *ref), *mag = malloc((size_t)R * s * cout * sizeof *mag);
    sc_convt_weight_linear(W, cin, cout, k, Wp);
    ref_convt(x, W, b, R, cin, cout, k, s, ref, mag);
    K->linear(K->ctx, SC_W_F32, Wp, NULL, x, cin, z, kc, R, kc, cin, 0);
    K->overlap_add(K->ctx, z, kc, b, S ? st : NULL, y, cout, R, cout, k, s);
    CHECK_MSG(!ctx->failed, "%s", ctx->err);
    double worst = 0;
    for (size_t i = 0; i < (size_t)R * s * cout; i++) {
      const double e = fabs(y[i] - ref[i]) / (mag[i] + 1e-30);
      if (e > worst) worst = e;
    }
    CHECK_MSG(worst <= 2e-6, "%s convT R %d cin %d cout %d k %d s %d: %g", sc_kernels_isa(K), R, cin, cout, k, s,
              worst);
    for (int p = 0; p < NPAT; p++) {
      memset(st, 0, (size_t)S * cout * sizeof *st);
      int at = 0, ci = 0;
      while (at < R) {
        const int n = next_chunk(patterns[p], pat_len(p), &ci, R - at);
        K->overlap_add(K->ctx, z + (size_t)at * kc, kc, b, S ? st : NULL, ys + (size_t)at * s * cout, cout, n,
                       cout, k, s);
        at += n;
      }
      CHECK_MSG(same(ys, y, (size_t)R * s * cout), "%s convT k %d s %d streamed (pattern %d): not the whole call's bits",
                sc_kernels_isa(K), k, s, p);
    }
    /* the carry holds what lands past the end, without the bias: a
     * zero-input call after the whole sequence emits it plus b */
    if (S) {
      float *z0 = zeros((size_t)kc), *tail = zeros((size_t)s * cout);
      memset(st, 0, (size_t)S * cout * sizeof *st);
      K->overlap_add(K->ctx, z, kc, NULL, st, y, cout, R, cout, k, s);
      K->overlap_add(K->ctx, z0, kc, NULL, st, tail, cout, 1, cout, k, s);
      double e = 0;
      for (int m = 0; m < s && m < S; m++)
        for (int o = 0; o < cout; o++) { /* the untrimmed output at R*s + m */
          double want = 0;
          for (int i = 0; i < R; i++) {
            const int j = R * s + m - i * s;
            if (j < 0 || j >= k) continue;
            for (int c = 0; c < cin; c++) want += (double)x[(size_t)i * cin + c] * W[((size_t)c * cout + o) * k + j];
          }
          const double d = fabs(tail[(size_t)m * cout + o] - want);
          if (d > e) e = d;
        }
      CHECK_MSG(e <= 1e-5, "%s convT k %d s %d: carry past the end off by %g", sc_kernels_isa(K), k, s, e);
      free(z0), free(tail);
    }
    free(x), free(W), free(b), free(Wp), free(z), free(st), free(y), free(ys), free(ref), free(mag);
  }
}

/* ---- SNAKE ------------------------------------------------------------- */

static double ref_snake(double x, double alpha, double beta) {
  const double s = sin(x * exp(alpha));
  return x + 1.0 / (exp(beta) + 1e-9) * s * s;
}

static void test_snake(const sc_kernels *K, sc_kernel_ctx *ctx) {
  /* the polynomial alone, over its whole range */
  double worst = 0;
  for (int i = 0; i <= 200000; i++) {
    const float u = (float)((i - 100000) * (SC_SIN2_MAX / 100000.0));
    const double s = sin((double)u), e = fabs(sc_sin2(u) - s * s);
    if (e > worst) worst = e;
  }
  for (int i = 0; i < 100000; i++) {
    const float u = frand() * 4.0f;
    const double s = sin((double)u), e = fabs(sc_sin2(u) - s * s);
    if (e > worst) worst = e;
  }
  CHECK_MSG(worst <= 1.5e-7, "sc_sin2: error %g", worst);

  static const int shapes[][2] = {{1, 1}, {3, 7}, {5, 8}, {4, 15}, {6, 16}, {7, 17}, {9, 96}, {3, 100}, {2, 1536}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int R = shapes[si][0], C = shapes[si][1], ld = C + 3;
    float *x = rnd((size_t)R * ld, 3), *al = rnd(C, 1.5f), *be = rnd(C, 1.5f), *y = zeros((size_t)R * ld);
    /* edge inputs: zero, past the polynomial's range, large */
    x[0] = 0.0f;
    if (R * C > 3) x[1] = 9000.0f, x[2] = -1e5f, x[3] = 4000.0f;
    K->snake(K->ctx, x, ld, al, be, y, ld, R, C);
    CHECK_MSG(!ctx->failed, "%s", ctx->err);
    double e = 0;
    for (int t = 0; t < R; t++)
      for (int c = 0; c < C; c++) {
        const double xv = x[(size_t)t * ld + c], want = ref_snake(xv, al[c], be[c]);
        /* the error of x*exp(alpha) in f32 moves sin^2 by up to |u| ulps */
        const double u = fabs(xv * exp(al[c])), ib = 1.0 / exp(be[c]);
        const double tol = 2e-7 * fabs(want) + ib * (3e-7 + 2 * u * 6e-8);
        const double d = fabs(y[(size_t)t * ld + c] - want) / tol;
        if (d > e) e = d;
      }
    CHECK_MSG(e <= 1.0, "%s snake R %d C %d: error %g of the bound", sc_kernels_isa(K), R, C, e);
    /* in place gives the same bits */
    float *z = malloc((size_t)R * ld * sizeof *z);
    memcpy(z, x, (size_t)R * ld * sizeof *z);
    K->snake(K->ctx, z, ld, al, be, z, ld, R, C);
    int bad = 0;
    for (int t = 0; t < R; t++) bad += !same(z + (size_t)t * ld, y + (size_t)t * ld, C);
    CHECK_MSG(!bad, "%s snake in place: %d rows differ", sc_kernels_isa(K), bad);
    free(x), free(al), free(be), free(y), free(z);
  }
  /* non-finite inputs stay non-finite, as in PyTorch */
  float x[20], al[20] = {0}, be[20] = {0}, y[20];
  for (int i = 0; i < 20; i++) x[i] = 0.25f * i;
  x[3] = NAN, x[5] = INFINITY, x[17] = -INFINITY;
  K->snake(K->ctx, x, 20, al, be, y, 20, 1, 20);
  CHECK(isnan(y[3]) && isnan(y[5]) && isnan(y[17]) && isfinite(y[4]) && isfinite(y[16]));
}

/* ---- LAYERNORM --------------------------------------------------------- */

static void test_layernorm(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static const int shapes[][2] = {{1, 1}, {3, 7}, {4, 8}, {5, 33}, {2, 1024}, {6, 100}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int R = shapes[si][0], C = shapes[si][1], ld = C + 2;
    float *x = rnd((size_t)R * ld, 2), *w = rnd(C, 1), *b = rnd(C, 1), *y = zeros((size_t)R * ld);
    for (int c = 0; c < C; c++) x[c] = 3.0f + x[c] * 1e-3f; /* row 0: a large mean, small spread */
    if (R > 2)
      for (int c = 0; c < C; c++) x[(size_t)2 * ld + c] = 0.75f; /* constant: var 0 */
    const float eps = 1e-6f;
    K->layernorm(K->ctx, x, ld, w, b, eps, y, ld, R, C);
    CHECK_MSG(!ctx->failed, "%s", ctx->err);
    double e = 0;
    for (int t = 0; t < R; t++) {
      const float *xr = x + (size_t)t * ld;
      double mean = 0, var = 0;
      for (int c = 0; c < C; c++) mean += xr[c];
      mean /= C;
      for (int c = 0; c < C; c++) var += (xr[c] - mean) * (xr[c] - mean);
      var /= C;
      const double rstd = 1.0 / sqrt(var + eps);
      for (int c = 0; c < C; c++) {
        const double n = (xr[c] - mean) * rstd, want = n * w[c] + b[c];
        /* f32 centring of values near |mean| costs ulp(mean) * rstd */
        const double tol = 1e-5 * (fabs(n * w[c]) + fabs(b[c])) + 2e-7 * fabs(mean) * rstd * fabs(w[c]) + 1e-6;
        const double d = fabs(y[(size_t)t * ld + c] - want) / tol;
        if (d > e) e = d;
      }
    }
    CHECK_MSG(e <= 1.0, "%s layernorm R %d C %d: error %g of the bound", sc_kernels_isa(K), R, C, e);
    float *z = malloc((size_t)R * ld * sizeof *z);
    memcpy(z, x, (size_t)R * ld * sizeof *z);
    K->layernorm(K->ctx, z, ld, w, b, eps, z, ld, R, C);
    int bad = 0;
    for (int t = 0; t < R; t++) bad += !same(z + (size_t)t * ld, y + (size_t)t * ld, C);
    CHECK_MSG(!bad, "%s layernorm in place: %d rows differ", sc_kernels_isa(K), bad);
    free(x), free(w), free(b), free(y), free(z);
  }
}

/* ---- errors, threads, layouts ------------------------------------------ */

static void test_errors(const sc_kernels *K, sc_kernel_ctx *ctx) {
  float x[64] = {0}, y[256], st[64] = {0};
  K->im2col(K->ctx, x, 4, NULL, y, 12, 2, 4, 3, 1); /* needs a state of 2 rows */
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "im2col: the conv needs a state of that many rows (value 2)");
  sc_kernel_ctx_clear(ctx);
  K->dwconv(K->ctx, x, 4, x, NULL, st, y, 4, 0, 4, 3, 1);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "dwconv: empty shape (rows or channels) (value 0)");
  sc_kernel_ctx_clear(ctx);
  K->overlap_add(K->ctx, x, 8, NULL, st, y, 4, 1, 4, 2, 3);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "overlap_add: kernel size below the stride (value 2)");
  sc_kernel_ctx_clear(ctx);
  K->im2col(K->ctx, x, 4, st, y, 12, 1, 4, 3, 0);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "im2col: kernel size and dilation/stride must be >= 1 (value 0)");
  sc_kernel_ctx_clear(ctx);
  K->snake(K->ctx, x, 4, x, x, y, 4, 1, 0);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "snake: empty shape");
  sc_kernel_ctx_clear(ctx);
  K->layernorm(K->ctx, x, 4, x, x, 1e-5f, y, 4, -1, 4);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "layernorm: empty shape");
  sc_kernel_ctx_clear(ctx);
}

/* The same calls on a pool of 3 threads give the single thread's bits. */
static void test_threads(const sc_kernels *K1) {
  sc_kernel_ctx c3 = {0};
  c3.pool = sc_pool_new(3);
  if (!c3.pool) {
    CHECK(!"sc_pool_new(3)");
    return;
  }
  sc_kernels K;
  CHECK(sc_kernels_init_isa(&K, &c3, sc_kernels_isa(K1)) == 0);
  const int R = 300, C = 96, k = 7, d = 3, S = (k - 1) * d;
  float *x = rnd((size_t)R * C, 2), *w = rnd((size_t)C * k, 1), *b = rnd(C, 1), *al = rnd(C, 1), *be = rnd(C, 1);
  float *s1 = zeros((size_t)S * C), *s3 = zeros((size_t)S * C);
  float *y1 = zeros((size_t)R * k * C), *y3 = zeros((size_t)R * k * C);
  K1->im2col(K1->ctx, x, C, s1, y1, k * C, R, C, k, d);
  K.im2col(K.ctx, x, C, s3, y3, k * C, R, C, k, d);
  CHECK(same(y1, y3, (size_t)R * k * C) && same(s1, s3, (size_t)S * C));
  K1->dwconv(K1->ctx, x, C, w, b, s1, y1, C, R, C, k, d);
  K.dwconv(K.ctx, x, C, w, b, s3, y3, C, R, C, k, d);
  CHECK(same(y1, y3, (size_t)R * C) && same(s1, s3, (size_t)S * C));
  K1->snake(K1->ctx, x, C, al, be, y1, C, R, C);
  K.snake(K.ctx, x, C, al, be, y3, C, R, C);
  CHECK(same(y1, y3, (size_t)R * C));
  K1->layernorm(K1->ctx, x, C, w, b, 1e-6f, y1, C, R, C);
  K.layernorm(K.ctx, x, C, w, b, 1e-6f, y3, C, R, C);
  CHECK(same(y1, y3, (size_t)R * C));
  /* overlap_add of a transposed conv (kernel 10, stride 4: a carry of 6
   * rows, 3 taps per output) over 200 input rows, twice: rows split
   * across the threads, the carry left for the next call */
  {
    enum { KT = 10, ST = 4, CT = 64, RT = 200 };
    float *z = rnd((size_t)RT * KT * CT, 3), *c1 = zeros((size_t)(KT - ST) * CT), *cc = zeros((size_t)(KT - ST) * CT);
    float *o1 = zeros((size_t)RT * ST * CT), *o3 = zeros((size_t)RT * ST * CT);
    for (int call = 0; call < 2; call++) {
      K1->overlap_add(K1->ctx, z, KT * CT, b, c1, o1, CT, RT, CT, KT, ST);
      K.overlap_add(K.ctx, z, KT * CT, b, cc, o3, CT, RT, CT, KT, ST);
      CHECK(same(o1, o3, (size_t)RT * ST * CT) && same(c1, cc, (size_t)(KT - ST) * CT));
    }
    free(z), free(c1), free(cc), free(o1), free(o3);
  }
  CHECK(!c3.failed);
  free(x), free(w), free(b), free(al), free(be), free(s1), free(s3), free(y1), free(y3);
  sc_kernel_ctx_free(&c3);
  sc_pool_free(c3.pool);
}

/* ---- VQ_NEAREST ------------------------------------------------------------ */

/* Residual VQ encode in double: each stage the nearest entry by the exact
 * squared distance (first index on ties), the residual minus it.  Stage
 * by stage through the kernel (the earlier codes carried in front) gives
 * the same codes, the residual within f32 rounding; a table with a
 * duplicated entry takes the first; an entry equal to the input wins
 * outright (the clamp at 0). */
static void test_vq_nearest(const sc_kernels *K, sc_kernel_ctx *ctx) {
  enum { R = 5, D = 7, N = 40, S = 3 };
  float *x = rnd((size_t)R * D, 1), *tab = rnd((size_t)S * N * D, 1);
  /* stage 1's entry 9 duplicates entry 30, nearer than every other to row 0 */
  float *t1 = tab + (size_t)N * D;
  double res[R][D];
  int want[R][S];
  for (int t = 0; t < R; t++)
    for (int c = 0; c < D; c++) res[t][c] = x[t * D + c];
  double margin = 1e300;
  for (int st = 0; st < S; st++) {
    const float *T = tab + (size_t)st * N * D;
    if (st == 1) { /* row 0's residual nearly equals entry 30; entry 9 is its copy */
      for (int c = 0; c < D; c++) t1[30 * D + c] = (float)res[0][c] + 1e-3f, t1[9 * D + c] = t1[30 * D + c];
    }
    for (int t = 0; t < R; t++) {
      double best = 1e300, second = 1e300;
      int bj = 0;
      for (int j = 0; j < N; j++) {
        double d = 0;
        for (int c = 0; c < D; c++) d += (res[t][c] - T[j * D + c]) * (res[t][c] - T[j * D + c]);
        if (d < best) second = best, best = d, bj = j;
        else if (d < second && !(st == 1 && j == 30)) second = d; /* 30 copies 9 */
      }
      if (!(st == 1 && t == 0) && second - best < margin) margin = second - best;
      want[t][st] = bj;
      for (int c = 0; c < D; c++) res[t][c] -= T[bj * D + c];
    }
  }
  CHECK_MSG(margin > 1e-4, "vq test: the random data has a near-tie (%g): change the seed", margin);
  CHECK(want[0][1] == 9);
  /* the kernel, stage by stage: y [R, st + 1 + D] */
  float *cur = zeros((size_t)R * D), *codes = NULL;
  memcpy(cur, x, (size_t)R * D * sizeof *cur);
  for (int st = 0; st < S; st++) {
    const int P = st, W = P + 1 + D;
    float *y = zeros((size_t)R * W);
    K->vq_nearest(K->ctx, cur, D, tab + (size_t)st * N * D, N, codes, P, P, y, W, R, D);
    CHECK_MSG(!ctx->failed, "%s", ctx->err);
    free(codes);
    codes = zeros((size_t)R * (P + 1));
    for (int t = 0; t < R; t++) {
      memcpy(codes + (size_t)t * (P + 1), y + (size_t)t * W, (size_t)(P + 1) * sizeof *codes);
      memcpy(cur + (size_t)t * D, y + (size_t)t * W + P + 1, D * sizeof *cur);
    }
    free(y);
  }
  int bad = 0;
  double worst = 0;
  for (int t = 0; t < R; t++) {
    for (int st = 0; st < S; st++) bad += codes[t * S + st] != (float)want[t][st];
    for (int c = 0; c < D; c++) {
      const double e = fabs(cur[t * D + c] - res[t][c]);
      if (e > worst) worst = e;
    }
  }
  CHECK_MSG(!bad, "%s vq_nearest: %d codes differ from the double reference", sc_kernels_isa(K), bad);
  CHECK_MSG(worst < 1e-5, "%s vq_nearest: residual off by %g", sc_kernels_isa(K), worst);
  /* an entry equal to the row: distance 0 after the clamp, chosen */
  float e0[2 * 3] = {0.5f, -1.0f, 2.0f, 0.25f, 0.125f, 3.0f}, xr[3] = {0.25f, 0.125f, 3.0f}, y1[4];
  K->vq_nearest(K->ctx, xr, 3, e0, 2, NULL, 0, 0, y1, 4, 1, 3);
  CHECK(y1[0] == 1.0f && y1[1] == 0.0f && y1[2] == 0.0f && y1[3] == 0.0f);
  /* refusals */
  ctx->failed = 0;
  K->vq_nearest(K->ctx, xr, 3, e0, 0, NULL, 0, 0, y1, 4, 1, 3);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "vq_nearest: bad shape");
  ctx->failed = 0;
  K->vq_nearest(K->ctx, xr, 3, e0, 2, NULL, 0, 1, y1, 4, 1, 3); /* earlier codes promised, none given */
  CHECK(ctx->failed);
  ctx->failed = 0;
  free(x), free(tab), free(cur), free(codes);
}

static void test_layouts(void) {
  const int a = 5, bdim = 3, k = 4;
  float *w = rnd((size_t)a * bdim * k, 1), *o1 = zeros((size_t)a * bdim * k), *o2 = zeros((size_t)a * bdim * k);
  sc_conv_weight_im2col(w, a, bdim, k, o1);  /* [a=cout, k*cin] */
  sc_convt_weight_linear(w, a, bdim, k, o2); /* [k*cout, cin=a] */
  int bad = 0;
  for (int r = 0; r < a; r++)
    for (int c = 0; c < k * bdim; c++) bad += o1[r * k * bdim + c] != w[sc_conv_weight_src(SC_CONV_IM2COL, a, bdim, k, r, c)];
  for (int r = 0; r < k * bdim; r++)
    for (int c = 0; c < a; c++) bad += o2[r * a + c] != w[sc_conv_weight_src(SC_CONV_TRANSPOSED, a, bdim, k, r, c)];
  /* and the documented formulas */
  for (int o = 0; o < a; o++)
    for (int c = 0; c < bdim; c++)
      for (int j = 0; j < k; j++) bad += o1[o * k * bdim + j * bdim + c] != w[(o * bdim + c) * k + j];
  for (int c = 0; c < a; c++)
    for (int o = 0; o < bdim; o++)
      for (int j = 0; j < k; j++) bad += o2[(j * bdim + o) * a + c] != w[(c * bdim + o) * k + j];
  CHECK_MSG(!bad, "conv weight layouts: %d elements misplaced", bad);
  free(w), free(o1), free(o2);
}

static void run_all(const sc_kernels *K, sc_kernel_ctx *ctx) {
  test_im2col(K, ctx);
  test_im2col_strided(K, ctx);
  test_vq_nearest(K, ctx);
  test_conv(K, ctx);
  test_dwconv(K, ctx);
  test_convt(K, ctx);
  test_snake(K, ctx);
  test_layernorm(K, ctx);
  CHECK_MSG(!ctx->failed, "%s: %s", sc_kernels_isa(K), ctx->err);
  test_errors(K, ctx);
  test_threads(K);
}

static void run_table(sc_kernels *K, sc_kernel_ctx *c, const char *isa) {
  (void)isa;
  run_all(K, c);
}

int main(void) {
  test_layouts();
  each_isa_table("codec kernels", run_table);
  CHECK_DONE();
}
