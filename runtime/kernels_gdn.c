/*
 * kernels_gdn.c — the kernels behind the Gated DeltaNet ops of ops.def:
 * L2NORM, GATED_RMSNORM and DELTA_RULE (sc_abi.h has their contracts).
 *
 * The delta rule is the recurrent form, one token after the other, as
 * transformers' torch_recurrent_gated_delta_rule and FLA's
 * fused_recurrent kernel compute it: per v-head h, with S_h [dk, dv] in
 * f32,
 *     S *= exp(g_t);  u = S^T k_t;  S += k_t (x) beta_t (v_t - u);
 *     o_t = S^T (scale q_t)
 * in two passes over S per token (decay and read, then write and read
 * out), the v dimension innermost (unit stride, which the compiler
 * vectorizes).  Each head is independent of the others, so heads are cut
 * into chunks on the context's pool; a head's arithmetic is the same
 * whichever thread runs it, so the thread count changes no bit, and a
 * sequence fed in pieces gives the bits of one call over all of it (the
 * state is the whole carry).  Sums run over i in order.
 *
 * The norms are per (row, group) loops in f32, summing in order; each
 * group is read whole before it is written, so y may be x.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "pool.h"

static sc_pool *pool_of(void *ctx) { return ctx ? ((sc_kernel_ctx *)ctx)->pool : NULL; }

static int bad_shape(void *ctx, const char *what, int R, int C, int g) {
  char msg[96];
  if (R < 1 || C < 1 || g < 1 || C % g) {
    snprintf(msg, sizeof msg, "%s: bad shape (rows, cols, or a group that does not divide the cols)", what);
    sc_kernel_error(ctx, msg, R < 1 ? R : C < 1 ? C : g);
    return 1;
  }
  return 0;
}

/* ---- L2NORM ------------------------------------------------------------- */

static void k_l2norm(void *ctx, const float *x, int ldx, float *y, int ldy, int R, int C, int g, float eps) {
  if (bad_shape(ctx, "l2norm", R, C, g)) return;
  for (int t = 0; t < R; t++)
    for (int h = 0; h < C / g; h++) {
      const float *xr = x + (size_t)t * ldx + (size_t)h * g;
      float *yr = y + (size_t)t * ldy + (size_t)h * g;
      float ss = 0.0f;
      for (int c = 0; c < g; c++) ss += xr[c] * xr[c];
      const float r = 1.0f / sqrtf(ss + eps);
      for (int c = 0; c < g; c++) yr[c] = xr[c] * r;
    }
}

/* ---- GATED_RMSNORM ------------------------------------------------------ */

static void k_gated_rmsnorm(void *ctx, const float *x, int ldx, const float *z, int ldz, const float *w,
                            float eps, float *y, int ldy, int R, int C, int g) {
  if (bad_shape(ctx, "gated_rmsnorm", R, C, g)) return;
  for (int t = 0; t < R; t++)
    for (int h = 0; h < C / g; h++) {
      const float *xr = x + (size_t)t * ldx + (size_t)h * g, *zr = z + (size_t)t * ldz + (size_t)h * g;
      float *yr = y + (size_t)t * ldy + (size_t)h * g;
      float ss = 0.0f;
      for (int c = 0; c < g; c++) ss += xr[c] * xr[c];
      const float r = 1.0f / sqrtf(ss / (float)g + eps);
      for (int c = 0; c < g; c++) {
        const float zc = zr[c];
        yr[c] = w[c] * (xr[c] * r) * (zc / (1.0f + expf(-zc)));
      }
    }
}

/* ---- DELTA_RULE --------------------------------------------------------- */

typedef struct DeltaJob {
  const float *q, *k, *v, *g, *beta;
  float *state, *y;
  int ldq, ldk, ldv, ldg, ldb, ldy, T, nv, nk, dk, dv;
  float scale;
  float *tmp; /* per chunk: u [dv] and the scaled q [dk] */
} DeltaJob;

/* One v-head over every token. */
static void delta_head(const DeltaJob *j, int h, float *restrict u, float *restrict qs) {
  const int dk = j->dk, dv = j->dv, kh = h / (j->nv / j->nk);
  float *restrict S = j->state + (size_t)h * dk * dv;
  for (int t = 0; t < j->T; t++) {
    const float *restrict q = j->q + (size_t)t * j->ldq + (size_t)kh * dk;
    const float *restrict k = j->k + (size_t)t * j->ldk + (size_t)kh * dk;
    const float *restrict v = j->v + (size_t)t * j->ldv + (size_t)h * dv;
    float *restrict o = j->y + (size_t)t * j->ldy + (size_t)h * dv;
    const float decay = expf(j->g[(size_t)t * j->ldg + h]), b = j->beta[(size_t)t * j->ldb + h];
    for (int i = 0; i < dk; i++) qs[i] = q[i] * j->scale;
    /* S *= decay, u = S^T k */
    for (int c = 0; c < dv; c++) u[c] = 0.0f;
    for (int i = 0; i < dk; i++) {
      float *restrict Si = S + (size_t)i * dv;
      const float ki = k[i];
      for (int c = 0; c < dv; c++) {
        Si[c] *= decay;
        u[c] += Si[c] * ki;
      }
    }
    /* delta = beta (v - u); S += k (x) delta; o = S^T q */
    for (int c = 0; c < dv; c++) {
      u[c] = (v[c] - u[c]) * b;
      o[c] = 0.0f;
    }
    for (int i = 0; i < dk; i++) {
      float *restrict Si = S + (size_t)i * dv;
      const float ki = k[i], qi = qs[i];
      for (int c = 0; c < dv; c++) {
        Si[c] += ki * u[c];
        o[c] += Si[c] * qi;
      }
    }
  }
}

static void delta_chunk(void *arg, int c, int n) {
  const DeltaJob *j = arg;
  const int h0 = (int)((long long)j->nv * c / n), h1 = (int)((long long)j->nv * (c + 1) / n);
  float *u = j->tmp + (size_t)c * (j->dv + j->dk), *qs = u + j->dv;
  for (int h = h0; h < h1; h++) delta_head(j, h, u, qs);
}

static void k_delta_rule(void *ctx, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                         const float *g, int ldg, const float *beta, int ldb, float *state, float *y, int ldy,
                         int T, int nv, int nk, int dk, int dv, float scale) {
  if (T < 1 || nk < 1 || nv < nk || nv % nk || dk < 1 || dv < 1 || !state) {
    sc_kernel_error(ctx, "delta_rule: bad shape (tokens, heads, head dims) or no state",
                    T < 1 ? T : nk < 1 || nv < nk || nv % nk ? nv : dk < 1 ? dk : dv);
    return;
  }
  sc_pool *pool = pool_of(ctx);
  /* a head is dk*dv*T*~6 flops: one chunk per head when it is big enough
   * to pay for a dispatch, else one chunk */
  int chunks = sc_pool_threads(pool) > 1 && (long long)dk * dv * T >= 4096 ? nv : 1;
  void *owned = NULL;
  float *tmp = sc_kernel_scratch(ctx, (size_t)chunks * (dv + dk) * sizeof *tmp, &owned);
  if (!tmp) {
    sc_kernel_error(ctx, "delta_rule: out of memory for the per-head temporaries", dv + dk);
    return;
  }
  DeltaJob j = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .state = state, .y = y, .ldq = ldq, .ldk = ldk,
                .ldv = ldv, .ldg = ldg, .ldb = ldb, .ldy = ldy, .T = T, .nv = nv, .nk = nk, .dk = dk, .dv = dv,
                .scale = scale, .tmp = tmp};
  sc_pool_run(pool, delta_chunk, &j, chunks);
  free(owned);
}

/* ---- the table ---------------------------------------------------------- */

void sc_kernels_gdn_fill(sc_kernels *K) {
  K->l2norm = k_l2norm;
  K->gated_rmsnorm = k_gated_rmsnorm;
  K->delta_rule = k_delta_rule;
}
