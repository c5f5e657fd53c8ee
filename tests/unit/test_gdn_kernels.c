/*
 * test_gdn_kernels.c — the Gated DeltaNet kernels of sc_kernels (L2NORM,
 * GATED_RMSNORM, DELTA_RULE; runtime/kernels_gdn.c) against double-
 * precision references of what transformers computes
 * (modeling_qwen3_5.py: l2norm, Qwen3_5RMSNormGated,
 * torch_recurrent_gated_delta_rule), on the table of every ISA this build
 * and CPU run:
 *   - both norms per group, with row strides, in place, tiny and large
 *     groups, a zero group (l2norm: 0, not NaN);
 *   - the delta rule for nv == nk and grouped heads (v-head h reads k-head
 *     h / (nv / nk)), dk != dv, one token and many, from a non-zero state:
 *     every output and the final state within 2e-5 of the reference;
 *     decays from 0 (exp(0) = 1, the state only grows) to strong, beta 0
 *     (no write: the state only decays) and 1;
 *   - a sequence fed in pieces (1, 2, 3, 5 tokens) gives one call's bits,
 *     the state being the whole carry;
 *   - the chunkwise form (chunk 64, 16 and 37, calls of 16 tokens or more;
 *     up to 100 tokens, partial last chunks, head size 128), in one call
 *     and in pieces of 20: within 2e-5 of the reference and 1e-5 of token
 *     by token;
 *   - a pool of 3 threads gives one thread's bits, either form;
 *   - bad shapes are reported, not computed; every ISA's table has them.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "isa_tables.h"
#include "kernels.h"
#include "pool.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}
static float *rnd(size_t n, float scale) {
  float *p = malloc(n * sizeof *p + 64);
  for (size_t i = 0; i < n; i++) p[i] = frand() * scale;
  return p;
}
static int same(const float *a, const float *b, size_t n) { return !memcmp(a, b, n * sizeof *a); }

/* max |got - want| / max(1e-30, max |want|) */
static double rel(const float *got, const double *want, size_t n) {
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < n; i++) {
    const double d = fabs(got[i] - want[i]);
    if (d > num || d != d) num = d != d ? INFINITY : d;
    if (fabs(want[i]) > den) den = fabs(want[i]);
  }
  return num / den;
}

/* ---- the norms ----------------------------------------------------------- */

static void test_norms(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static const int shapes[][3] = {/* R, C, g */ {1, 16, 16}, {3, 32, 16}, {5, 72, 12}, {2, 6, 1}, {4, 768, 128}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
    const int R = shapes[si][0], C = shapes[si][1], g = shapes[si][2], ldx = C + 3, ldz = C + 5, ldy = C + 1;
    float *x = rnd((size_t)R * ldx, 2), *z = rnd((size_t)R * ldz, 3), *w = rnd((size_t)g, 1);
    float *y = rnd((size_t)R * ldy, 1), *yi = malloc((size_t)R * ldx * sizeof *yi);
    for (int c = 0; c < g; c++) x[c] = 0; /* a zero group: l2norm gives 0 (eps), gated norm 0 */
    double *want = calloc((size_t)R * C, sizeof *want);
    float *got = malloc((size_t)R * C * sizeof *got);
    for (int pass = 0; pass < 2; pass++) {
      const float eps = pass ? 1e-5f : 1e-6f;
      for (int t = 0; t < R; t++)
        for (int h = 0; h < C / g; h++) {
          double ss = 0;
          for (int c = 0; c < g; c++) ss += (double)x[t * ldx + h * g + c] * x[t * ldx + h * g + c];
          for (int c = 0; c < g; c++) {
            const double xv = x[t * ldx + h * g + c], zv = z[t * ldz + h * g + c];
            want[(size_t)t * C + h * g + c] =
                pass ? w[c] * (xv / sqrt(ss / g + eps)) * (zv / (1 + exp(-zv))) : xv / sqrt(ss + eps);
          }
        }
      if (pass) K->gated_rmsnorm(K->ctx, x, ldx, z, ldz, w, eps, y, ldy, R, C, g);
      else K->l2norm(K->ctx, x, ldx, y, ldy, R, C, g, eps);
      CHECK_MSG(!ctx->failed, "%s", ctx->err);
      for (int t = 0; t < R; t++) memcpy(got + (size_t)t * C, y + (size_t)t * ldy, (size_t)C * sizeof *got);
      const double e = rel(got, want, (size_t)R * C);
      CHECK_MSG(e < 2e-6, "%s [%d, %d] group %d: rel err %g", pass ? "gated_rmsnorm" : "l2norm", R, C, g, e);
      /* the zero group is exactly zero, not NaN */
      for (int c = 0; c < g; c++) CHECK(got[c] == 0.0f);
      /* in place: the same bits */
      memcpy(yi, x, (size_t)R * ldx * sizeof *yi);
      if (pass) K->gated_rmsnorm(K->ctx, yi, ldx, z, ldz, w, eps, yi, ldx, R, C, g);
      else K->l2norm(K->ctx, yi, ldx, yi, ldx, R, C, g, eps);
      int diff = 0;
      for (int t = 0; t < R; t++) diff += !same(yi + (size_t)t * ldx, y + (size_t)t * ldy, (size_t)C);
      CHECK_MSG(!diff, "%s in place differs", pass ? "gated_rmsnorm" : "l2norm");
    }
    free(x), free(z), free(w), free(y), free(yi), free(want), free(got);
  }
}

/* ---- the delta rule -------------------------------------------------------- */

typedef struct Case {
  int T, nv, nk, dk, dv;
  float glo, ghi, blo, bhi; /* g uniform in [glo, ghi] (log decay <= 0), beta in [blo, bhi] */
} Case;

typedef struct Data {
  float *q, *k, *v, *g, *beta, *s0;
  int ldq, ldk, ldv, ldg, ldb;
} Data;

static void make_data(const Case *c, Data *d) {
  const int kd = c->nk * c->dk, vd = c->nv * c->dv;
  d->ldq = kd + 2, d->ldk = kd + 7, d->ldv = vd + 3, d->ldg = c->nv + 1, d->ldb = c->nv + 4;
  d->q = rnd((size_t)c->T * d->ldq, 1), d->k = rnd((size_t)c->T * d->ldk, 1), d->v = rnd((size_t)c->T * d->ldv, 2);
  d->g = rnd((size_t)c->T * d->ldg, 1), d->beta = rnd((size_t)c->T * d->ldb, 1);
  d->s0 = rnd((size_t)c->nv * c->dk * c->dv, 0.5f);
  /* q, k unit vectors per head, as the l2norm before the rule makes them */
  for (int t = 0; t < c->T; t++)
    for (int h = 0; h < c->nk; h++)
      for (int pass = 0; pass < 2; pass++) {
        float *x = (pass ? d->k + (size_t)t * d->ldk : d->q + (size_t)t * d->ldq) + h * c->dk;
        double ss = 0;
        for (int i = 0; i < c->dk; i++) ss += (double)x[i] * x[i];
        for (int i = 0; i < c->dk; i++) x[i] = (float)(x[i] / sqrt(ss));
      }
  for (int t = 0; t < c->T; t++)
    for (int h = 0; h < c->nv; h++) {
      float *g = &d->g[(size_t)t * d->ldg + h], *b = &d->beta[(size_t)t * d->ldb + h];
      *g = c->glo + (c->ghi - c->glo) * (*g * 0.5f + 0.5f);
      *b = c->blo + (c->bhi - c->blo) * (*b * 0.5f + 0.5f);
    }
}

static void free_data(Data *d) { free(d->q), free(d->k), free(d->v), free(d->g), free(d->beta), free(d->s0); }

/* torch_recurrent_gated_delta_rule in double: y [T, nv*dv], s [nv, dk*dv]. */
static void ref_delta(const Case *c, const Data *d, float scale, double *y, double *s) {
  const int dk = c->dk, dv = c->dv, r = c->nv / c->nk;
  for (size_t i = 0; i < (size_t)c->nv * dk * dv; i++) s[i] = d->s0[i];
  double *u = malloc((size_t)dv * sizeof *u);
  for (int t = 0; t < c->T; t++)
    for (int h = 0; h < c->nv; h++) {
      double *S = s + (size_t)h * dk * dv;
      const float *q = d->q + (size_t)t * d->ldq + (h / r) * dk, *k = d->k + (size_t)t * d->ldk + (h / r) * dk;
      const float *v = d->v + (size_t)t * d->ldv + h * dv;
      const double decay = exp(d->g[(size_t)t * d->ldg + h]), b = d->beta[(size_t)t * d->ldb + h];
      for (int i = 0; i < dk * dv; i++) S[i] *= decay;
      for (int j = 0; j < dv; j++) {
        u[j] = 0;
        for (int i = 0; i < dk; i++) u[j] += S[i * dv + j] * k[i];
      }
      for (int j = 0; j < dv; j++) {
        const double delta = (v[j] - u[j]) * b;
        for (int i = 0; i < dk; i++) S[i * dv + j] += k[i] * delta;
      }
      for (int j = 0; j < dv; j++) {
        double o = 0;
        for (int i = 0; i < dk; i++) o += S[i * dv + j] * ((double)q[i] * scale);
        y[(size_t)t * c->nv * dv + h * dv + j] = o;
      }
    }
  free(u);
}

/* Run the kernel over tokens [t0, t0 + n) of the data. */
static void run_delta_chunk(const sc_kernels *K, const Case *c, const Data *d, float scale, float *state, float *y,
                            int ldy, int t0, int n, int chunk) {
  K->delta_rule(K->ctx, d->q + (size_t)t0 * d->ldq, d->ldq, d->k + (size_t)t0 * d->ldk, d->ldk,
                d->v + (size_t)t0 * d->ldv, d->ldv, d->g + (size_t)t0 * d->ldg, d->ldg, d->beta + (size_t)t0 * d->ldb,
                d->ldb, state, y + (size_t)t0 * ldy, ldy, n, c->nv, c->nk, c->dk, c->dv, scale, chunk);
}
static void run_delta(const sc_kernels *K, const Case *c, const Data *d, float scale, float *state, float *y,
                      int ldy, int t0, int n) {
  run_delta_chunk(K, c, d, scale, state, y, ldy, t0, n, 0);
}

static const Case cases[] = {
    /* T, nv, nk, dk, dv, g range, beta range */
    {1, 1, 1, 4, 4, -1.0f, -0.1f, 0.1f, 0.9f},
    {9, 4, 4, 8, 8, -1.0f, -0.01f, 0.0f, 1.0f},
    {13, 6, 2, 16, 12, -2.0f, 0.0f, 0.05f, 0.95f},   /* the fixture's GDN heads: r = 3, dk != dv */
    {7, 4, 2, 8, 16, -0.5f, -0.5f, 0.5f, 0.5f},      /* dv > dk, constant gates */
    {5, 3, 1, 5, 7, 0.0f, 0.0f, 1.0f, 1.0f},         /* no decay, full writes */
    {6, 2, 2, 6, 3, -8.0f, -4.0f, 0.0f, 0.0f},       /* strong decay, no writes */
    {24, 8, 4, 64, 32, -1.5f, -0.05f, 0.0f, 1.0f},   /* wider heads, longer: the chunkwise form */
    /* the chunkwise form (16 tokens or more): chunks of 64, a partial last one */
    {40, 4, 2, 32, 24, -1.0f, -0.01f, 0.0f, 1.0f},
    {65, 3, 3, 8, 8, 0.0f, 0.0f, 1.0f, 1.0f},        /* no decay, full writes, one token past a chunk */
    {100, 6, 3, 16, 16, -8.0f, -2.0f, 0.0f, 1.0f},   /* strong decay */
    {33, 2, 2, 12, 20, -0.2f, -0.2f, 0.0f, 0.0f},    /* no writes */
    {70, 2, 1, 128, 128, -0.3f, -0.01f, 0.0f, 1.0f}, /* Qwen3.5's head size */
};
#define CHUNKED_MIN_T 16 /* kernels_gdn.c's DELTA_CHUNK_MIN_T */
static const int chunks[] = {64, 16, 37}; /* FLA's 64, and others the algebra must not care about */

static double worst_chunked; /* chunkwise against token by token, reported */

static void test_delta(const sc_kernels *K, sc_kernel_ctx *ctx) {
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
    const Case *c = &cases[ci];
    Data d;
    make_data(c, &d);
    const size_t ns = (size_t)c->nv * c->dk * c->dv, vd = (size_t)c->nv * c->dv;
    const int ldy = (int)vd + 2;
    const float scale = (float)(1.0 / sqrt((double)c->dk));
    float *s = malloc(ns * sizeof *s), *y = rnd((size_t)c->T * ldy, 1), *got = malloc((size_t)c->T * vd * sizeof *got);
    double *ys = malloc((size_t)c->T * vd * sizeof *ys), *ss = malloc(ns * sizeof *ss);
    memcpy(s, d.s0, ns * sizeof *s);
    run_delta(K, c, &d, scale, s, y, ldy, 0, c->T);
    CHECK_MSG(!ctx->failed, "%s", ctx->err);
    ref_delta(c, &d, scale, ys, ss);
    for (int t = 0; t < c->T; t++) memcpy(got + (size_t)t * vd, y + (size_t)t * ldy, vd * sizeof *got);
    const double ey = rel(got, ys, (size_t)c->T * vd), es = rel(s, ss, ns);
    CHECK_MSG(ey < 2e-5 && es < 2e-5, "delta rule T %d nv %d nk %d dk %d dv %d: rel err y %g state %g", c->T, c->nv,
              c->nk, c->dk, c->dv, ey, es);
    /* in pieces, token by token: the state carries everything, one call's bits */
    static const int pieces[] = {1, 2, 3, 5};
    for (size_t pi = 0; pi < sizeof pieces / sizeof *pieces; pi++) {
      float *s2 = malloc(ns * sizeof *s2), *y2 = rnd((size_t)c->T * ldy, 1);
      memcpy(s2, d.s0, ns * sizeof *s2);
      for (int t0 = 0; t0 < c->T; t0 += pieces[pi])
        run_delta(K, c, &d, scale, s2, y2, ldy, t0, t0 + pieces[pi] <= c->T ? pieces[pi] : c->T - t0);
      int diff = !same(s, s2, ns);
      for (int t = 0; t < c->T; t++) diff += !same(y + (size_t)t * ldy, y2 + (size_t)t * ldy, vd);
      CHECK_MSG(!diff, "delta rule case %zu in pieces of %d: not the bits of one call", ci, pieces[pi]);
      free(s2), free(y2);
    }
    /* the chunkwise form (calls of CHUNKED_MIN_T tokens or more): against
     * the reference and token by token, in one call and in pieces of 20 */
    for (size_t k = 0; k < sizeof chunks / sizeof *chunks; k++)
      for (int piece = c->T; piece >= 20; piece = piece == 20 ? 0 : 20) {
        float *s2 = malloc(ns * sizeof *s2), *y2 = rnd((size_t)c->T * ldy, 1);
        double *ys2 = malloc((size_t)c->T * vd * sizeof *ys2), *ss2 = malloc(ns * sizeof *ss2);
        memcpy(s2, d.s0, ns * sizeof *s2);
        for (int t0 = 0; t0 < c->T; t0 += piece)
          run_delta_chunk(K, c, &d, scale, s2, y2, ldy, t0, t0 + piece <= c->T ? piece : c->T - t0, chunks[k]);
        CHECK_MSG(!ctx->failed, "%s", ctx->err);
        for (int t = 0; t < c->T; t++)
          for (size_t j = 0; j < vd; j++) ys2[(size_t)t * vd + j] = y2[(size_t)t * ldy + j];
        for (size_t j = 0; j < ns; j++) ss2[j] = s2[j];
        const double r1 = rel(got, ys2, (size_t)c->T * vd), r2 = rel(s, ss2, ns); /* token by token */
        float *yc = malloc((size_t)c->T * vd * sizeof *yc);
        for (int t = 0; t < c->T; t++) memcpy(yc + (size_t)t * vd, y2 + (size_t)t * ldy, vd * sizeof *yc);
        const double e1 = rel(yc, ys, (size_t)c->T * vd), e2 = rel(s2, ss, ns); /* the double reference */
        CHECK_MSG(r1 <= 1e-5 && r2 <= 1e-5 && e1 < 2e-5 && e2 < 2e-5,
                  "delta rule case %zu (T %d) chunkwise by %d in pieces of %d: rel err against token by token y %g "
                  "state %g, against the reference y %g state %g", ci, c->T, chunks[k], piece, r1, r2, e1, e2);
        if (r1 > worst_chunked) worst_chunked = r1;
        if (r2 > worst_chunked) worst_chunked = r2;
        free(s2), free(y2), free(ys2), free(ss2), free(yc);
      }
    free(s), free(y), free(got), free(ys), free(ss);
    free_data(&d);
  }
}

static void test_errors(const sc_kernels *K, sc_kernel_ctx *ctx) {
  float x[64] = {0}, y[64], st[64] = {0};
  K->l2norm(K->ctx, x, 8, y, 8, 1, 8, 3, 1e-6f); /* 3 does not divide 8 */
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "l2norm: bad shape");
  sc_kernel_ctx_clear(ctx);
  K->gated_rmsnorm(K->ctx, x, 8, x, 8, x, 1e-6f, y, 8, 0, 8, 8);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "gated_rmsnorm: bad shape");
  sc_kernel_ctx_clear(ctx);
  K->delta_rule(K->ctx, x, 4, x, 4, x, 4, x, 3, x, 3, st, y, 4, 1, 3, 2, 2, 2, 1.0f, 0); /* nv 3, nk 2 */
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "delta_rule: bad shape");
  sc_kernel_ctx_clear(ctx);
  K->delta_rule(K->ctx, x, 4, x, 4, x, 4, x, 2, x, 2, NULL, y, 4, 1, 2, 2, 2, 2, 1.0f, 0);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "or no state");
  sc_kernel_ctx_clear(ctx);
}

/* A pool of 3 threads gives the single thread's bits. */
static void test_threads(const sc_kernels *K1) {
  sc_kernel_ctx c3 = {0};
  c3.pool = sc_pool_new(3);
  if (!c3.pool) {
    CHECK(!"sc_pool_new(3)");
    return;
  }
  sc_kernels K;
  CHECK(sc_kernels_init_isa(&K, &c3, sc_kernels_isa(K1)) == 0);
  const Case c = {40, 16, 4, 32, 24, -1.0f, -0.01f, 0.0f, 1.0f};
  Data d;
  make_data(&c, &d);
  const size_t ns = (size_t)c.nv * c.dk * c.dv, vd = (size_t)c.nv * c.dv;
  float *s1 = malloc(ns * sizeof *s1), *s3 = malloc(ns * sizeof *s3);
  float *y1 = calloc((size_t)c.T * vd, sizeof *y1), *y3 = calloc((size_t)c.T * vd, sizeof *y3);
  memcpy(s1, d.s0, ns * sizeof *s1);
  memcpy(s3, d.s0, ns * sizeof *s3);
  for (int chunk = 0; chunk <= 64; chunk += 64) {
    memcpy(s1, d.s0, ns * sizeof *s1);
    memcpy(s3, d.s0, ns * sizeof *s3);
    run_delta_chunk(K1, &c, &d, 0.125f, s1, y1, (int)vd, 0, c.T, chunk);
    run_delta_chunk(&K, &c, &d, 0.125f, s3, y3, (int)vd, 0, c.T, chunk);
    CHECK_MSG(same(s1, s3, ns) && same(y1, y3, (size_t)c.T * vd), "delta rule chunk %d: 3 threads differ", chunk);
  }
  CHECK(!c3.failed);
  free(s1), free(s3), free(y1), free(y3);
  free_data(&d);
  sc_kernel_ctx_free(&c3);
  sc_pool_free(c3.pool);
}

static sc_kernels P; /* the portable table: every ISA's holds the same three */

static void run_table(sc_kernels *K, sc_kernel_ctx *c, const char *isa) {
  CHECK(K->l2norm && K->l2norm == P.l2norm && K->gated_rmsnorm == P.gated_rmsnorm && K->delta_rule == P.delta_rule);
  test_norms(K, c);
  test_delta(K, c);
  printf("  chunkwise delta rule against token by token: rel err <= %.2g\n", worst_chunked);
  CHECK_MSG(!c->failed, "%s: %s", isa, c->err);
  test_errors(K, c);
  test_threads(K);
}

int main(void) {
  sc_kernels_init_portable(&P, NULL);
  each_isa_table("gdn kernels", run_table);
  CHECK_DONE();
}
