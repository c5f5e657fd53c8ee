/*
 * test_row_kernels.c — the row-wise kernels of sc_kernels (rmsnorm, rope,
 * store_rows; runtime/kernels_rows.c), which the generated CPU code calls
 * for RMSNORM, the norm of NORM_LINEAR / LINEAR_SWIGLU, ROPE, NORM_ROPE and
 * the cache stores:
 *   - rmsnorm within 4 ulp-ish (2e-6 relative) of a double reference, plain
 *     and (1 + w) weights, whole rows and groups, groups that are not a
 *     multiple of eight (the partial sums' tail), row strides, in place,
 *     a zero row (0, not NaN), more groups than run side by side (eight);
 *     and the bits of the loops the generated code had before it called
 *     the kernel (sums in index order), the same on every CPU;
 *   - rope against a double reference of the HF rotation, NeoX pairs and
 *     interleaved ones, all of the head and a partial rotary part (the
 *     rest copied), with the QK-norm in front or not, positions pos + t or
 *     from row_pos, in place; the rotation's bits are those of its float
 *     expression (x0 c - x1 s, x1 c + x0 s);
 *   - store_rows at positions past the cache's rows (ring), from row_pos,
 *     into row_state blocks; nothing else written;
 *   - bad shapes are reported, not computed; every ISA's table has the
 *     same kernels.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "isa_tables.h"
#include "kernels.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static float frand(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

/* The generated loops' order: index order, one product rounded, then
 * added. */
static float spec_sum_squares(const float *x, int n) {
  float s = 0.0f;
  for (int c = 0; c < n; c++) {
    const volatile float p = x[c] * x[c]; /* no fused multiply-add here either */
    s += p;
  }
  return s;
}

static void test_rmsnorm(const sc_kernels *K, sc_kernel_ctx *ctx) {
  enum { R = 3, C = 300, LDX = 311, LDY = 305 };
  static float x[R * LDX], y[R * LDY], w[C];
  static const int groups[] = {300, 60, 75, 12, 5, 1};
  for (int i = 0; i < R * LDX; i++) x[i] = 4.0f * frand();
  for (int c = 0; c < 5; c++) x[LDX + c] = 0.0f; /* row 1, group of 5: all zero */
  double worst = 0;
  int bad_bits = 0;
  for (int gi = 0; gi < (int)(sizeof groups / sizeof *groups); gi++)
    for (int one_plus = 0; one_plus < 2; one_plus++) {
      const int g = groups[gi];
      const float eps = gi % 2 ? 1e-6f : 1e-5f;
      for (int c = 0; c < g; c++) w[c] = one_plus ? 0.3f * frand() : 1.0f + 0.5f * frand();
      for (int i = 0; i < R * LDY; i++) y[i] = 1234.5f; /* past C: must stay */
      K->rmsnorm(K->ctx, x, LDX, w, one_plus, eps, y, LDY, R, C, g);
      for (int t = 0; t < R; t++) {
        for (int h = 0; h < C / g; h++) {
          const float *xr = x + t * LDX + h * g;
          const float *yr = y + t * LDY + h * g;
          double ss = 0;
          for (int c = 0; c < g; c++) ss += (double)xr[c] * xr[c];
          const double r = 1.0 / sqrt(ss / g + eps);
          const float rf = 1.0f / sqrtf(spec_sum_squares(xr, g) / (float)g + eps);
          for (int c = 0; c < g; c++) {
            const double wc = one_plus ? 1.0 + w[c] : w[c], want = xr[c] * r * wc;
            const double e = fabs(yr[c] - want) / (fabs(want) + 1e-30);
            if (want != 0 && e > worst) worst = e;
            CHECK_MSG(!isnan(yr[c]), "rmsnorm: NaN at row %d col %d (g %d)", t, h * g + c, g);
            const float wf = one_plus ? 1.0f + w[c] : w[c];
            bad_bits += !same_bits(yr[c], (xr[c] * rf) * wf);
          }
        }
        for (int c = C; c < LDY; c++) CHECK(y[t * LDY + c] == 1234.5f);
      }
    }
  printf("  rmsnorm: rel err <= %.2g of double\n", worst);
  CHECK_MSG(worst < 2e-6, "rmsnorm: %g off the double reference", worst);
  CHECK_MSG(!bad_bits, "rmsnorm: %d values differ from sums in index order", bad_bits);
  CHECK(y[LDY] == 0.0f); /* the zero group: x * (1 / sqrt(eps)) */
  /* in place gives the same bits */
  static float z[R * LDX];
  memcpy(z, x, sizeof z);
  for (int c = 0; c < 60; c++) w[c] = 1.0f + 0.5f * frand();
  K->rmsnorm(K->ctx, x, LDX, w, 0, 1e-6f, y, LDY, R, C, 60);
  K->rmsnorm(K->ctx, z, LDX, w, 0, 1e-6f, z, LDX, R, C, 60);
  int moved = 0;
  for (int t = 0; t < R; t++)
    for (int c = 0; c < C; c++) moved += !same_bits(z[t * LDX + c], y[t * LDY + c]);
  CHECK_MSG(!moved, "rmsnorm in place: %d values differ", moved);
  CHECK(!ctx->failed);
}

/* One head's rotation in double: NeoX pairs (i, i + rot/2) or interleaved
 * (2i, 2i + 1) over the first rot columns, the rest as they are. */
static void ref_rope(const double *a, const float *cs, int hd, int rot, int inter, double *b) {
  const int half = rot / 2;
  for (int c = 0; c < hd; c++) b[c] = a[c];
  for (int i = 0; i < half; i++) {
    const int i0 = inter ? 2 * i : i, i1 = inter ? 2 * i + 1 : i + half;
    b[i0] = a[i0] * cs[i] - a[i1] * cs[half + i];
    b[i1] = a[i1] * cs[i] + a[i0] * cs[half + i];
  }
}

static void test_rope(const sc_kernels *K, sc_kernel_ctx *ctx) {
  enum { T = 4, HEADS = 11, HD = 24, LDX = HEADS * HD + 5, LDY = HEADS * HD + 3, NPOS = 40 };
  static float x[T * LDX], y[T * LDY], z[T * LDX], nw[HD];
  static const int rots[] = {HD, 8, 2};
  static const int row_pos[T] = {37, 3, 3, 0};
  for (int i = 0; i < T * LDX; i++) x[i] = 2.0f * frand();
  double worst = 0;
  int bad_bits = 0;
  for (int ri = 0; ri < 3; ri++)
    for (int inter = 0; inter < 2; inter++)
      for (int norm = 0; norm < 3; norm++) /* none, w, 1 + w */
        for (int rp = 0; rp < 2; rp++) {
          const int rot = rots[ri], half = rot / 2, pos = 5;
          static float table[NPOS * HD];
          for (int p = 0; p < NPOS; p++)
            for (int i = 0; i < half; i++) {
              const double th = p * pow(1e4, -2.0 * i / rot);
              table[p * rot + i] = (float)cos(th);
              table[p * rot + half + i] = (float)sin(th);
            }
          for (int c = 0; c < HD; c++) nw[c] = norm == 2 ? 0.3f * frand() : 1.0f + 0.5f * frand();
          for (int i = 0; i < T * LDY; i++) y[i] = -777.0f;
          const float eps = 1e-6f;
          K->rope(K->ctx, table, x, LDX, y, LDY, T, pos, rp ? row_pos : NULL, HEADS, HD, rot, inter,
                  norm ? nw : NULL, norm == 2, eps);
          /* in place: the same bits */
          memcpy(z, x, sizeof z);
          K->rope(K->ctx, table, z, LDX, z, LDX, T, pos, rp ? row_pos : NULL, HEADS, HD, rot, inter,
                  norm ? nw : NULL, norm == 2, eps);
          for (int t = 0; t < T; t++) {
            const int p = rp ? row_pos[t] : pos + t;
            const float *cs = table + p * rot;
            for (int h = 0; h < HEADS; h++) {
              const float *a = x + t * LDX + h * HD;
              double ad[HD], want[HD];
              float af[HD];
              if (norm) {
                double ss = 0;
                for (int c = 0; c < HD; c++) ss += (double)a[c] * a[c];
                const double r = 1.0 / sqrt(ss / HD + eps);
                const float rf = 1.0f / sqrtf(spec_sum_squares(a, HD) / (float)HD + eps);
                for (int c = 0; c < HD; c++) {
                  const float wf = norm == 2 ? 1.0f + nw[c] : nw[c];
                  ad[c] = a[c] * r * (norm == 2 ? 1.0 + nw[c] : nw[c]);
                  af[c] = (a[c] * rf) * wf;
                }
              } else {
                for (int c = 0; c < HD; c++) ad[c] = a[c], af[c] = a[c];
              }
              ref_rope(ad, cs, HD, rot, inter, want);
              const float *b = y + t * LDY + h * HD;
              for (int c = 0; c < HD; c++) {
                const double e = fabs(b[c] - want[c]);
                if (e > worst) worst = e;
                CHECK(same_bits(b[c], z[t * LDX + h * HD + c]));
              }
              /* the float expression's bits */
              for (int i = 0; i < half; i++) {
                const int i0 = inter ? 2 * i : i, i1 = inter ? 2 * i + 1 : i + half;
                const float c = cs[i], s = cs[half + i];
                const volatile float p00 = af[i0] * c, p01 = af[i1] * s, p10 = af[i1] * c, p11 = af[i0] * s;
                bad_bits += !same_bits(b[i0], p00 - p01) + !same_bits(b[i1], p10 + p11);
              }
              for (int c = rot; c < HD; c++) bad_bits += !same_bits(b[c], af[c]);
            }
            for (int c = HEADS * HD; c < LDY; c++) CHECK(y[t * LDY + c] == -777.0f);
          }
        }
  printf("  rope: abs err <= %.2g of double\n", worst);
  CHECK_MSG(worst < 4e-6, "rope: %g off the double reference", worst);
  CHECK_MSG(!bad_bits, "rope: %d values differ from the float expression", bad_bits);
  CHECK(!ctx->failed);
}

static void test_store_rows(const sc_kernels *K, sc_kernel_ctx *ctx) {
  enum { T = 3, COLS = 13, LDX = 17, CAP = 5, BLOCK = CAP * COLS + 7 };
  static float x[T * LDX], cache[3 * BLOCK];
  for (int i = 0; i < T * LDX; i++) x[i] = frand();
  /* pos + t, past the ring's end: rows 3, 4, 0 */
  for (int i = 0; i < 3 * BLOCK; i++) cache[i] = -1.0f;
  K->store_rows(K->ctx, x, LDX, cache, CAP, COLS, T, 8, NULL, NULL);
  for (int r = 0; r < CAP; r++) {
    const int t = r == 3 ? 0 : r == 4 ? 1 : r == 0 ? 2 : -1;
    for (int c = 0; c < COLS; c++) CHECK(cache[r * COLS + c] == (t < 0 ? -1.0f : x[t * LDX + c]));
  }
  for (int i = CAP * COLS; i < 3 * BLOCK; i++) CHECK(cache[i] == -1.0f);
  /* each row at its own position, in its own state block */
  static const int row_pos[T] = {12, 0, 4};
  static const long long row_state[T] = {2 * BLOCK * 4, 0, BLOCK * 4};
  for (int i = 0; i < 3 * BLOCK; i++) cache[i] = -1.0f;
  K->store_rows(K->ctx, x, LDX, cache, CAP, COLS, T, 99, row_pos, row_state);
  int written = 0;
  for (int i = 0; i < 3 * BLOCK; i++) written += cache[i] != -1.0f;
  CHECK(written == T * COLS);
  for (int c = 0; c < COLS; c++) {
    CHECK(cache[2 * BLOCK + 2 * COLS + c] == x[c]);     /* 12 % 5 = 2, block 2 */
    CHECK(cache[c] == x[LDX + c]);                      /* 0, block 0 */
    CHECK(cache[BLOCK + 4 * COLS + c] == x[2 * LDX + c]); /* 4, block 1 */
  }
  CHECK(!ctx->failed);
}

static void test_errors(const sc_kernels *K, sc_kernel_ctx *ctx) {
  float x[64] = {0}, y[64], w[16] = {0}, table[64] = {0};
  y[0] = 5.0f;
  K->rmsnorm(K->ctx, x, 16, w, 0, 1e-6f, y, 16, 2, 16, 5); /* 5 does not divide 16 */
  CHECK(ctx->failed && strstr(ctx->err, "rmsnorm: bad shape"));
  CHECK(y[0] == 5.0f);
  sc_kernel_ctx_clear(ctx);
  K->rope(K->ctx, table, x, 16, y, 16, 1, 0, NULL, 2, 8, 3, 0, NULL, 0, 0.0f); /* odd rotary dims */
  CHECK(ctx->failed && strstr(ctx->err, "rope: bad shape"));
  sc_kernel_ctx_clear(ctx);
  K->rope(K->ctx, table, x, 16, y, 16, 1, 0, NULL, 2, 8, 10, 0, NULL, 0, 0.0f); /* past the head */
  CHECK(ctx->failed && strstr(ctx->err, "rope: bad shape"));
  CHECK(y[0] == 5.0f);
  sc_kernel_ctx_clear(ctx);
  K->store_rows(K->ctx, x, 16, y, 0, 16, 1, 0, NULL, NULL); /* a cache of no rows */
  CHECK(ctx->failed && strstr(ctx->err, "store_rows: bad shape"));
  sc_kernel_ctx_clear(ctx);
}

static sc_kernels P; /* the portable table: every ISA's holds the same three */

static void run_table(sc_kernels *K, sc_kernel_ctx *c, const char *isa) {
  CHECK(K->rmsnorm && K->rmsnorm == P.rmsnorm && K->rope == P.rope && K->store_rows == P.store_rows);
  test_rmsnorm(K, c);
  test_rope(K, c);
  test_store_rows(K, c);
  CHECK_MSG(!c->failed, "%s: %s", isa, c->err);
  test_errors(K, c);
}

int main(void) {
  sc_kernels_init_portable(&P, NULL);
  each_isa_table("row kernels", run_table);
  CHECK_DONE();
}
