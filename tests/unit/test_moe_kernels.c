/*
 * test_moe_kernels.c — the mixture-of-experts kernels of sc_kernels
 * (topk_route, moe; runtime/kernels_moe.c) against double-precision
 * references of what transformers computes (modeling_qwen3_next.py:
 * Qwen3NextTopKRouter, Qwen3NextExperts, the shared expert of
 * Qwen3NextSparseMoeBlock), on the table of every ISA this build and CPU
 * run, for every band the experts may be stored in (f32, bf16, q8_0,
 * q4_0):
 *   - topk_route: the same experts in the same order as a double softmax
 *     and selection, weights within 1e-6, with and without renormalising,
 *     k = 1 and k = E;
 *   - moe: within 2e-5 of the double reference (f32, bf16 weights: the
 *     reference reads the same rounded weights; q8_0, q4_0: within 2e-2,
 *     the kernels quantize the activations to 8 bits), with and without
 *     the gated shared expert, strided rows;
 *   - moe gives exactly the bits of linear_swiglu and linear run on each
 *     (token, expert) alone and summed in rank order: grouping tokens by
 *     expert changes nothing, so a call of T rows equals T calls of one
 *     row, bit for bit; a pool of 3 threads gives one thread's bits;
 *   - only the chosen experts are read: NaN in every other expert's
 *     weights changes no bit of the output;
 *   - a route naming no expert, and bad shapes, are reported.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
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

/* max |got - want| / max |want| over rows of n, got strided */
static double rel_rows(const float *got, int ldg, const double *want, int rows, int n) {
  double num = 0, den = 1e-30;
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < n; c++) {
      const double w = want[(size_t)r * n + c], d = fabs(got[(size_t)r * ldg + c] - w);
      if (d > num || d != d) num = d != d ? INFINITY : d;
      if (fabs(w) > den) den = fabs(w);
    }
  return num / den;
}

static const int bands[] = {SC_W_F32, SC_W_BF16, SC_W_Q8_0, SC_W_Q4_0};

/* f32 rows [rows, cols] stored in band (q4_0 in the CPU's groups); *deq
 * gets what the stored rows mean, as f32. */
static void *store(int band, const float *w, int rows, int cols, float **deq) {
  const size_t rb = sc_band_row_bytes(band, cols);
  unsigned char *out = malloc(rows * rb + 64), tmp[4096];
  *deq = malloc((size_t)rows * cols * sizeof **deq);
  for (int r = 0; r < rows; r++) {
    const float *x = w + (size_t)r * cols;
    unsigned char *o = out + r * rb;
    if (band == SC_W_F32) memcpy(o, x, (size_t)cols * 4);
    else if (band == SC_W_BF16)
      for (int c = 0; c < cols; c++) {
        uint32_t u;
        memcpy(&u, &x[c], 4);
        const uint16_t b = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
        memcpy(o + 2 * c, &b, 2);
      }
    else if (band == SC_W_Q8_0) {
      sc_quantize_row_q8_0(x, cols, tmp);
      sc_pack_row_q8_0(tmp, cols, o);
    } else {
      sc_quantize_row_q4_0(x, cols, tmp);
      sc_pack_row_q4_0(tmp, cols, o);
    }
    sc_dequantize_row(band, o, cols, *deq + (size_t)r * cols);
  }
  return out;
}

/* ---- topk_route ---------------------------------------------------------- */

static void test_route(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static const int shapes[][3] = {/* T, E, k */ {1, 8, 2}, {5, 6, 1}, {3, 5, 5}, {4, 64, 10}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int T = shapes[si][0], E = shapes[si][1], k = shapes[si][2], ldl = E + 3, ldy = 2 * k + 1;
    float *l = rnd((size_t)T * ldl, 4), *y = rnd((size_t)T * ldy, 1);
    for (int renorm = 0; renorm < 2; renorm++) {
      K->topk_route(K->ctx, l, ldl, y, ldy, T, E, k, renorm);
      for (int t = 0; t < T; t++) {
        const float *lt = l + (size_t)t * ldl;
        double m = lt[0], s = 0, p[64], chosen = 0;
        int taken[64] = {0};
        for (int e = 1; e < E; e++) m = lt[e] > m ? lt[e] : m;
        for (int e = 0; e < E; e++) s += p[e] = exp((double)lt[e] - m);
        int want[16];
        for (int j = 0; j < k; j++) {
          int b = -1;
          for (int e = 0; e < E; e++)
            if (!taken[e] && (b < 0 || p[e] > p[b])) b = e;
          taken[b] = 1, want[j] = b, chosen += p[b] / s;
        }
        for (int j = 0; j < k; j++) {
          const float *yt = y + (size_t)t * ldy;
          const double w = p[want[j]] / s / (renorm ? chosen : 1.0);
          CHECK_MSG(yt[k + j] == (float)want[j], "route T%d E%d k%d row %d rank %d: expert %g, expected %d", T, E,
                    k, t, j, yt[k + j], want[j]);
          CHECK_MSG(fabs(yt[j] - w) <= 1e-6, "route row %d rank %d: weight %.9g, expected %.9g", t, j, yt[j], w);
        }
      }
    }
    free(l), free(y);
  }
  CHECK(!ctx->failed);
}

/* ---- moe ----------------------------------------------------------------- */

typedef struct Experts {
  int band, E, I, H;
  void *gu, *d;     /* stored [E*2I, H], [E*H, I] */
  float *gu_f, *d_f; /* what they mean */
} Experts;

static void make_experts(Experts *x, int band, int E, int I, int H) {
  x->band = band, x->E = E, x->I = I, x->H = H;
  float *a = rnd((size_t)E * 2 * I * H, 0.25f), *b = rnd((size_t)E * H * I, 0.25f);
  x->gu = store(band, a, E * 2 * I, H, &x->gu_f);
  x->d = store(band, b, E * H, I, &x->d_f);
  free(a), free(b);
}
static void free_experts(Experts *x) { free(x->gu), free(x->d), free(x->gu_f), free(x->d_f); }

/* The double reference of one call (route as given). */
static void ref_moe(const Experts *x, const float *in, int ldx, const float *route, int ldr, const float *sh,
                    int lds, const float *sg, int ldg, int T, int k, double *y) {
  const int I = x->I, H = x->H;
  double *act = malloc((size_t)I * sizeof *act);
  for (int t = 0; t < T; t++) {
    const float *xt = in + (size_t)t * ldx;
    double *yt = y + (size_t)t * H;
    for (int c = 0; c < H; c++) yt[c] = 0;
    for (int j = 0; j < k; j++) {
      const int e = (int)route[(size_t)t * ldr + k + j];
      const double w = route[(size_t)t * ldr + j];
      for (int r = 0; r < I; r++) {
        double gg = 0, uu = 0;
        const float *wg = x->gu_f + ((size_t)e * 2 * I + r) * H, *wu = wg + (size_t)I * H;
        for (int c = 0; c < H; c++) gg += (double)wg[c] * xt[c], uu += (double)wu[c] * xt[c];
        act[r] = gg / (1 + exp(-gg)) * uu;
      }
      for (int c = 0; c < H; c++) {
        const float *wd = x->d_f + ((size_t)e * H + c) * I;
        double dd = 0;
        for (int r = 0; r < I; r++) dd += (double)wd[r] * act[r];
        yt[c] += w * dd;
      }
    }
    if (sh) {
      const double gate = 1 / (1 + exp(-(double)sg[(size_t)t * ldg]));
      for (int c = 0; c < H; c++) yt[c] += gate * sh[(size_t)t * lds + c];
    }
  }
  free(act);
}

/* What the contract says moe's bits are: linear_swiglu and linear on each
 * (token, expert) alone, summed in rank order in float. */
static void composed(const sc_kernels *K, const Experts *x, const float *in, int ldx, const float *route, int ldr,
                     const float *sh, int lds, const float *sg, int ldg, int T, int k, float *y, int ldy) {
  const int I = x->I, H = x->H;
  const size_t rgu = sc_band_row_bytes(x->band, H), rd = sc_band_row_bytes(x->band, I);
  float *act = malloc((size_t)I * 4), *o = malloc((size_t)H * 4);
  for (int t = 0; t < T; t++) {
    float *yt = y + (size_t)t * ldy;
    for (int c = 0; c < H; c++) yt[c] = 0.0f;
    for (int j = 0; j < k; j++) {
      const int e = (int)route[(size_t)t * ldr + k + j];
      K->linear_swiglu(K->ctx, x->band, (const unsigned char *)x->gu + (size_t)e * 2 * I * rgu, in + (size_t)t * ldx,
                       ldx, act, I, 1, I, H);
      K->linear(K->ctx, x->band, (const unsigned char *)x->d + (size_t)e * H * rd, NULL, act, I, o, H, 1, H, I, 0);
      const float w = route[(size_t)t * ldr + j];
      for (int c = 0; c < H; c++) yt[c] += w * o[c];
    }
    if (sh) {
      const float g = 1.0f / (1.0f + expf(-sg[(size_t)t * ldg]));
      for (int c = 0; c < H; c++) yt[c] += g * sh[(size_t)t * lds + c];
    }
  }
  free(act), free(o);
}

static int same_rows(const float *a, const float *b, int ld, int rows, int n) {
  for (int r = 0; r < rows; r++)
    if (memcmp(a + (size_t)r * ld, b + (size_t)r * ld, (size_t)n * 4)) return 0;
  return 1;
}

static void *tmp_for(int T, int k, int E, int I, int H) {
  void *p = NULL;
  return posix_memalign(&p, 64, (size_t)SC_MOE_TMP_WORDS(T, k, E, I, H) * 4) ? NULL : p;
}

static void test_moe(const sc_kernels *K, sc_kernel_ctx *ctx, const sc_kernels *K3) {
  static const int shapes[][5] = {/* T, E, k, I, H */ {1, 6, 2, 32, 64}, {7, 6, 2, 32, 64}, {30, 5, 5, 64, 32},
                                  {9, 8, 1, 32, 96}, {26, 4, 3, 96, 64}};
  for (size_t bi = 0; bi < sizeof bands / sizeof *bands; bi++)
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
      const int T = shapes[si][0], E = shapes[si][1], k = shapes[si][2], I = shapes[si][3], H = shapes[si][4];
      const int band = bands[bi], ldx = H + 3, ldr = 2 * k + 2, lds = H + 5, ldg = 2, ldy = H + 1;
      Experts ex;
      make_experts(&ex, band, E, I, H);
      float *x = rnd((size_t)T * ldx, 1), *logits = rnd((size_t)T * E, 3), *route = rnd((size_t)T * ldr, 1);
      float *sh = rnd((size_t)T * lds, 1), *sg = rnd((size_t)T * ldg, 2);
      float *y = rnd((size_t)T * ldy, 1), *yc = rnd((size_t)T * ldy, 1), *y1 = rnd((size_t)T * ldy, 1);
      double *want = malloc((size_t)T * H * sizeof *want);
      void *tmp = tmp_for(T, k, E, I, H);
      K->topk_route(K->ctx, logits, E, route, ldr, T, E, k, 1);
      const double tol = band == SC_W_F32 || band == SC_W_BF16 ? 2e-5 : 2e-2;
      for (int shared = 0; shared < 2; shared++) {
        const float *s = shared ? sh : NULL;
        K->moe(K->ctx, band, ex.gu, band, ex.d, x, ldx, route, ldr, s, lds, sg, ldg, y, ldy, tmp, T, E, k, I, H);
        CHECK_MSG(!ctx->failed, "%s", ctx->err);
        ref_moe(&ex, x, ldx, route, ldr, s, lds, sg, ldg, T, k, want);
        const double e = rel_rows(y, ldy, want, T, H);
        CHECK_MSG(e <= tol, "moe %s T%d E%d k%d I%d H%d%s: rel err %g (tolerance %g)", sc_band(band)->name, T, E, k,
                  I, H, shared ? " shared" : "", e, tol);
        composed(K, &ex, x, ldx, route, ldr, s, lds, sg, ldg, T, k, yc, ldy);
        CHECK_MSG(same_rows(y, yc, ldy, T, H), "moe %s T%d: not the bits of each expert's GEMVs", sc_band(band)->name,
                  T);
        /* row by row: the bits of the whole call */
        void *tmp1 = tmp_for(1, k, E, I, H);
        for (int t = 0; t < T; t++)
          K->moe(K->ctx, band, ex.gu, band, ex.d, x + (size_t)t * ldx, ldx, route + (size_t)t * ldr, ldr,
                 s ? s + (size_t)t * lds : NULL, lds, sg + (size_t)t * ldg, ldg, y1 + (size_t)t * ldy, ldy, tmp1, 1,
                 E, k, I, H);
        free(tmp1);
        CHECK_MSG(same_rows(y, y1, ldy, T, H), "moe %s T%d: rows alone differ from one call", sc_band(band)->name, T);
        if (K3) {
          K3->moe(K3->ctx, band, ex.gu, band, ex.d, x, ldx, route, ldr, s, lds, sg, ldg, y1, ldy, tmp, T, E, k, I, H);
          CHECK_MSG(same_rows(y, y1, ldy, T, H), "moe %s T%d: 3 threads differ from 1", sc_band(band)->name, T);
        }
      }
      /* poison every expert no token chose: the output keeps its bits */
      int chosen[64] = {0};
      for (int t = 0; t < T; t++)
        for (int j = 0; j < k; j++) chosen[(int)route[(size_t)t * ldr + k + j]] = 1;
      int poisoned = 0;
      const size_t rgu = sc_band_row_bytes(band, H), rd = sc_band_row_bytes(band, I);
      for (int e = 0; e < E; e++) {
        if (chosen[e]) continue;
        poisoned++;
        memset((unsigned char *)ex.gu + (size_t)e * 2 * I * rgu, 0xff, 2 * I * rgu); /* NaN in every band */
        memset((unsigned char *)ex.d + (size_t)e * H * rd, 0xff, H * rd);
      }
      K->moe(K->ctx, band, ex.gu, band, ex.d, x, ldx, route, ldr, sh, lds, sg, ldg, y1, ldy, tmp, T, E, k, I, H);
      CHECK_MSG(same_rows(y, y1, ldy, T, H), "moe %s T%d: an expert nobody chose was read (%d poisoned)",
                sc_band(band)->name, T, poisoned);
      if (T == 1) CHECK(poisoned == E - k); /* the check above had something to find */
      free(x), free(logits), free(route), free(sh), free(sg), free(y), free(yc), free(y1), free(want), free(tmp);
      free_experts(&ex);
    }
}

static void test_errors(const sc_kernels *K, sc_kernel_ctx *ctx) {
  Experts ex;
  make_experts(&ex, SC_W_F32, 4, 32, 32);
  float x[64] = {0}, y[64], route[4] = {1.0f, 0.0f, 4.0f, 0.0f}; /* k = 2: experts 4 (none) and 0 */
  void *tmp = tmp_for(1, 2, 4, 32, 32);
  K->moe(K->ctx, SC_W_F32, ex.gu, SC_W_F32, ex.d, x, 32, route, 4, NULL, 0, NULL, 0, y, 32, tmp, 1, 4, 2, 32, 32);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "moe: a route names no expert");
  sc_kernel_ctx_clear(ctx);
  route[2] = 1.5f;
  K->moe(K->ctx, SC_W_F32, ex.gu, SC_W_F32, ex.d, x, 32, route, 4, NULL, 0, NULL, 0, y, 32, tmp, 1, 4, 2, 32, 32);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "(value 1)");
  sc_kernel_ctx_clear(ctx);
  K->moe(K->ctx, SC_W_F32, ex.gu, SC_W_F32, ex.d, x, 32, route, 4, NULL, 0, NULL, 0, y, 32, tmp, 1, 4, 5, 32, 32);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "moe: bad shape");
  sc_kernel_ctx_clear(ctx);
  route[2] = 1.0f;
  K->moe(K->ctx, SC_W_Q8_0, ex.gu, SC_W_F32, ex.d, x, 32, route, 4, NULL, 0, NULL, 0, y, 32, tmp, 1, 4, 2, 32, 20);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "cols a multiple of 32");
  sc_kernel_ctx_clear(ctx);
  K->topk_route(K->ctx, x, 4, y, 4, 1, 4, 5, 1);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "topk_route: bad shape");
  sc_kernel_ctx_clear(ctx);
  free(tmp);
  free_experts(&ex);
}

int main(void) {
  sc_kernels P;
  sc_kernels_init_portable(&P, NULL);
  char all[] = SC_KERNEL_ISAS;
  for (char *n = strtok(all, ","); n; n = strtok(NULL, ",")) {
    if (!sc_kern_ops_isa(n)) continue;
    sc_kernel_ctx c = {0}, c3 = {0};
    sc_kernels K, K3;
    CHECK(sc_kernels_init_isa(&K, &c, n) == 0);
    c3.pool = sc_pool_new(3);
    CHECK(c3.pool && sc_kernels_init_isa(&K3, &c3, n) == 0);
    printf("moe kernels: %s\n", n);
    CHECK(K.topk_route && K.topk_route == P.topk_route && K.moe);
    test_route(&K, &c);
    test_moe(&K, &c, c3.pool ? &K3 : NULL);
    CHECK_MSG(!c.failed && !c3.failed, "%s: %s %s", n, c.err, c3.err);
    test_errors(&K, &c);
    sc_kernel_ctx_free(&c);
    sc_kernel_ctx_free(&c3);
    sc_pool_free(c3.pool);
  }
  CHECK_DONE();
}
