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
 * vectorizes).
 *
 * Asked to (chunk > 0), calls of DELTA_CHUNK_MIN_T tokens or more
 * (prompts) take the chunkwise form instead, as flash-linear-attention's
 * chunk kernels and transformers' torch_chunk_gated_delta_rule compute it:
 * per chunk of L = chunk tokens with the state S0 at its start and the
 * decay summed within it, G_t = g_1 + .. + g_t,
 *     delta_t = beta_t (v_t - e^{G_t} S0^T k_t)
 *               - sum_{s<t} beta_t e^{G_t - G_s} (k_t . k_s) delta_s
 *     o_t     = e^{G_t} S0^T q_t + sum_{s<=t} e^{G_t - G_s} (q_t . k_s) delta_s
 *     S_L     = e^{G_L} S0 + sum_s e^{G_L - G_s} k_s delta_s^T
 * (the recurrence unrolled: delta_t is beta_t (v_t - u_t), a lower
 * triangular system solved by forward substitution).  It reads and writes
 * S once per chunk instead of twice per token, the same function to
 * rounding (test_gdn_kernels: within 1e-5 of token by token).  On the CPU
 * it does as many multiply-adds per token as the recurrence (3 dk dv +
 * L (dk + dv) against 4 dk dv) and measured slower here (docs/
 * PERFORMANCE.md), so the frontends leave it off (chunk 0).
 *
 * Each head is independent of the others, so heads are cut into chunks
 * on the context's pool; a head's arithmetic is the same whichever thread
 * runs it, so the thread count changes no bit.  Token by token, a
 * sequence fed in pieces gives the bits of one call over all of it (the
 * state is the whole carry).  Sums run in index order.
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

#define GATE_PIECE 128

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
      for (int c0 = 0; c0 < g; c0 += GATE_PIECE) { /* e^-z through sc_expf_n */
        const int m = g - c0 < GATE_PIECE ? g - c0 : GATE_PIECE;
        float e[GATE_PIECE];
        for (int c = 0; c < m; c++) e[c] = -zr[c0 + c];
        sc_expf_n(e, e, m);
        for (int c = c0; c < c0 + m; c++) yr[c] = w[c] * (xr[c] * r) * (zr[c] / (1.0f + e[c - c0]));
      }
    }
}

/* ---- DELTA_RULE --------------------------------------------------------- */

/* Calls of this many tokens or more take the chunkwise form when asked
 * to (chunk > 0), in chunks of at most DELTA_CHUNK_MAX tokens (the last
 * one shorter). */
#define DELTA_CHUNK_MIN_T 16
#define DELTA_CHUNK_MAX 256

typedef struct DeltaJob {
  const float *q, *k, *v, *g, *beta;
  float *state, *y;
  int ldq, ldk, ldv, ldg, ldb, ldy, T, nv, nk, dk, dv;
  int chunk;      /* > 0: the chunkwise form, this many tokens a chunk */
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

/* Floats of one pool chunk's temporaries for the chunkwise form. */
static size_t chunked_floats(int L_, int dk, int dv) {
  const size_t L = (size_t)L_;
  return L * (3 * (size_t)dk + 4 * (size_t)dv) + 2 * L * L + 3 * L;
}

/* One v-head over every token, j->chunk tokens at a time (the file
 * comment has the algebra). */
static void delta_head_chunked(const DeltaJob *j, int h, float *restrict buf) {
  const int dk = j->dk, dv = j->dv, kh = h / (j->nv / j->nk), L = j->chunk;
  float *restrict S = j->state + (size_t)h * dk * dv;
  float *restrict K = buf, *restrict Q = K + (size_t)L * dk;         /* [L, dk]: k, scale * q */
  float *restrict W = Q + (size_t)L * dk, *restrict P = W + (size_t)L * dv; /* [L, dv]: S0^T k, S0^T q */
  float *restrict D = P + (size_t)L * dv, *restrict V = D + (size_t)L * dv; /* [L, dv]: delta, v */
  float *restrict KK = V + (size_t)L * dv, *restrict QK = KK + (size_t)L * L; /* [L, L] */
  float *restrict G = QK + (size_t)L * L, *restrict B = G + L, *restrict E = B + L; /* [L]: G_t, beta, e^{G_t} */
  float *restrict Kt = E + L;                                        /* [dk, L]: k transposed */
  for (int t0 = 0; t0 < j->T; t0 += L) {
    const int n = j->T - t0 < L ? j->T - t0 : L;
    float acc = 0.0f;
    for (int t = 0; t < n; t++) {
      const size_t r = (size_t)(t0 + t);
      const float *q = j->q + r * j->ldq + (size_t)kh * dk, *k = j->k + r * j->ldk + (size_t)kh * dk;
      const float *v = j->v + r * j->ldv + (size_t)h * dv;
      for (int i = 0; i < dk; i++) K[(size_t)t * dk + i] = k[i], Q[(size_t)t * dk + i] = q[i] * j->scale;
      for (int c = 0; c < dv; c++) V[(size_t)t * dv + c] = v[c];
      acc += j->g[r * j->ldg + h];
      G[t] = acc, E[t] = expf(acc), B[t] = j->beta[r * j->ldb + h];
    }
    /* the dot products within the chunk, over k transposed so that the
     * inner loop runs along s with unit stride */
    for (int i = 0; i < dk; i++)
      for (int s = 0; s < n; s++) Kt[(size_t)i * L + s] = K[(size_t)s * dk + i];
    for (int t = 0; t < n; t++) {
      float *restrict kk = KK + (size_t)t * L, *restrict qk = QK + (size_t)t * L;
      for (int s = 0; s <= t; s++) kk[s] = 0.0f, qk[s] = 0.0f;
      for (int i = 0; i < dk; i++) {
        const float kti = K[(size_t)t * dk + i], qti = Q[(size_t)t * dk + i];
        const float *restrict row = Kt + (size_t)i * L;
        for (int s = 0; s <= t; s++) kk[s] += kti * row[s], qk[s] += qti * row[s];
      }
      for (int s = 0; s <= t; s++) {
        const float dec = expf(G[t] - G[s]);
        kk[s] *= B[t] * dec;
        qk[s] *= dec;
      }
    }
    /* W = K S0, P = Q S0: one pass over the state's rows */
    for (int t = 0; t < n; t++)
      for (int c = 0; c < dv; c++) W[(size_t)t * dv + c] = 0.0f, P[(size_t)t * dv + c] = 0.0f;
    for (int i = 0; i < dk; i++) {
      const float *restrict Si = S + (size_t)i * dv;
      for (int t = 0; t < n; t++) {
        const float ki = K[(size_t)t * dk + i], qi = Q[(size_t)t * dk + i];
        float *restrict w = W + (size_t)t * dv, *restrict p = P + (size_t)t * dv;
        for (int c = 0; c < dv; c++) w[c] += Si[c] * ki, p[c] += Si[c] * qi;
      }
    }
    /* delta by forward substitution, then the outputs */
    for (int t = 0; t < n; t++) {
      float *restrict d = D + (size_t)t * dv;
      const float *restrict v = V + (size_t)t * dv, *restrict w = W + (size_t)t * dv;
      for (int c = 0; c < dv; c++) d[c] = B[t] * (v[c] - E[t] * w[c]);
      for (int s = 0; s < t; s++) {
        const float a = KK[(size_t)t * L + s];
        const float *restrict ds = D + (size_t)s * dv;
        for (int c = 0; c < dv; c++) d[c] -= a * ds[c];
      }
      float *restrict o = j->y + (size_t)(t0 + t) * j->ldy + (size_t)h * dv;
      const float *restrict p = P + (size_t)t * dv;
      for (int c = 0; c < dv; c++) o[c] = E[t] * p[c];
      for (int s = 0; s <= t; s++) {
        const float a = QK[(size_t)t * L + s];
        const float *restrict ds = D + (size_t)s * dv;
        for (int c = 0; c < dv; c++) o[c] += a * ds[c];
      }
    }
    /* the state at the chunk's end */
    for (int s = 0; s < n; s++) G[s] = expf(G[n - 1] - G[s]); /* reused: e^{G_L - G_s} */
    const float eL = E[n - 1];
    for (int i = 0; i < dk; i++) {
      float *restrict Si = S + (size_t)i * dv;
      for (int c = 0; c < dv; c++) Si[c] *= eL;
      for (int s = 0; s < n; s++) {
        const float a = G[s] * K[(size_t)s * dk + i];
        const float *restrict ds = D + (size_t)s * dv;
        for (int c = 0; c < dv; c++) Si[c] += a * ds[c];
      }
    }
  }
}

static void delta_chunk(void *arg, int c, int n) {
  const DeltaJob *j = arg;
  const int h0 = (int)((long long)j->nv * c / n), h1 = (int)((long long)j->nv * (c + 1) / n);
  if (j->chunk) {
    float *buf = j->tmp + (size_t)c * chunked_floats(j->chunk, j->dk, j->dv);
    for (int h = h0; h < h1; h++) delta_head_chunked(j, h, buf);
    return;
  }
  float *u = j->tmp + (size_t)c * (j->dv + j->dk), *qs = u + j->dv;
  for (int h = h0; h < h1; h++) delta_head(j, h, u, qs);
}

static void k_delta_rule(void *ctx, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                         const float *g, int ldg, const float *beta, int ldb, float *state, float *y, int ldy,
                         int T, int nv, int nk, int dk, int dv, float scale, int chunk) {
  if (T < 1 || nk < 1 || nv < nk || nv % nk || dk < 1 || dv < 1 || !state || chunk < 0 || chunk > DELTA_CHUNK_MAX) {
    sc_kernel_error(ctx, "delta_rule: bad shape (tokens, heads, head dims), chunk or no state",
                    T < 1 ? T : nk < 1 || nv < nk || nv % nk ? nv : dk < 1 ? dk : dv < 1 ? dv : chunk);
    return;
  }
  if (T < DELTA_CHUNK_MIN_T) chunk = 0;
  sc_pool *pool = pool_of(ctx);
  /* a head is dk*dv*T*~6 flops: one chunk per head when it is big enough
   * to pay for a dispatch, else one chunk */
  int chunks = sc_pool_threads(pool) > 1 && (long long)dk * dv * T >= 4096 ? nv : 1;
  void *owned = NULL;
  const size_t per = chunk ? chunked_floats(chunk, dk, dv) : (size_t)(dv + dk);
  float *tmp = sc_kernel_scratch(ctx, (size_t)chunks * per * sizeof *tmp, &owned);
  if (!tmp) {
    sc_kernel_error(ctx, "delta_rule: out of memory for the per-head temporaries", dv + dk);
    return;
  }
  DeltaJob j = {.q = q, .k = k, .v = v, .g = g, .beta = beta, .state = state, .y = y, .ldq = ldq, .ldk = ldk,
                .ldv = ldv, .ldg = ldg, .ldb = ldb, .ldy = ldy, .T = T, .nv = nv, .nk = nk, .dk = dk, .dv = dv,
                .chunk = chunk, .scale = scale, .tmp = tmp};
  sc_pool_run(pool, delta_chunk, &j, chunks);
  free(owned);
}

/* ---- the table ---------------------------------------------------------- */

void sc_kernels_gdn_fill(sc_kernels *K) {
  K->l2norm = k_l2norm;
  K->gated_rmsnorm = k_gated_rmsnorm;
  K->delta_rule = k_delta_rule;
}
