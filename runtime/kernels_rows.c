/*
 * kernels_rows.c — the row-wise ops the generated CPU code calls instead of
 * spelling them out: RMSNORM (also the norm in front of NORM_LINEAR and
 * LINEAR_SWIGLU), ROPE and NORM_ROPE, and the copy of new rows into a
 * cache (sc_abi.h has their contracts).
 *
 * They were loops in the generated C; libtcc, the default compiler,
 * compiles those without optimisation, and a prompt spent a fifth of its
 * time in them (docs/PERFORMANCE.md).  Here they are compiled once, with
 * the runtime's -O3, for the baseline ISA of the machine (SSE2 / NEON);
 * that is enough for a few thousand elements a token.
 *
 * Numbers: the generated loops' own, bit for bit (built with
 * -ffp-contract=off, as the generated code is): a group's sum of squares
 * in index order, r = 1 / sqrt(ss / g + eps), y = (x * r) * w (or
 * (1 + w)); RoPE the official rotation on f32 (cos and sin from the
 * table), pairs (i, i + R/2) (NeoX, the HF layout) or (2i, 2i + 1)
 * (interleaved), the columns past R copied.  A sum in index order is a
 * chain of dependent adds, so the sums of up to eight groups (rows, or a
 * row's heads) run side by side, each still in its own order.  Every row
 * is computed alone, so a row gives the same bits whichever call, chunk
 * or batch it comes in.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

/* Groups whose sums run side by side. */
#define NORM_LANES 8

/* ss[j] = the sum of x[j][c]^2 over c < g in index order, for j < k <=
 * NORM_LANES: eight independent chains of adds (unused ones repeat x[0]). */
static void sum_squares(const float *const *x, int k, int g, float *ss) {
  const float *p[NORM_LANES];
  for (int j = 0; j < NORM_LANES; j++) p[j] = x[j < k ? j : 0];
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, s4 = 0.0f, s5 = 0.0f, s6 = 0.0f, s7 = 0.0f;
  for (int c = 0; c < g; c++) {
    s0 += p[0][c] * p[0][c];
    s1 += p[1][c] * p[1][c];
    s2 += p[2][c] * p[2][c];
    s3 += p[3][c] * p[3][c];
    s4 += p[4][c] * p[4][c];
    s5 += p[5][c] * p[5][c];
    s6 += p[6][c] * p[6][c];
    s7 += p[7][c] * p[7][c];
  }
  const float all[NORM_LANES] = {s0, s1, s2, s3, s4, s5, s6, s7};
  for (int j = 0; j < k; j++) ss[j] = all[j];
}

/* y[j][c] = (x[j][c] * r_j) * w'[c] for k <= NORM_LANES groups of g
 * values; every sum is taken before anything is written, so y[j] may be
 * x[j]. */
static void norm_groups(const float *const *x, float *const *y, int k, const float *w, int one_plus, float eps,
                        int g) {
  float ss[NORM_LANES];
  sum_squares(x, k, g, ss);
  for (int j = 0; j < k; j++) {
    const float r = 1.0f / sqrtf(ss[j] / (float)g + eps);
    const float *xr = x[j];
    float *yr = y[j];
    if (one_plus)
      for (int c = 0; c < g; c++) yr[c] = (xr[c] * r) * (1.0f + w[c]);
    else
      for (int c = 0; c < g; c++) yr[c] = (xr[c] * r) * w[c];
  }
}

static void k_rmsnorm(void *ctx, const float *x, int ldx, const float *w, int one_plus, float eps, float *y,
                      int ldy, int R, int C, int g) {
  if (R < 0 || C < 1 || g < 1 || C % g) {
    sc_kernel_error(ctx, "rmsnorm: bad shape (rows, cols, or a group that does not divide the cols)",
                    R < 0 ? R : C < 1 ? C : g);
    return;
  }
  const float *xs[NORM_LANES];
  float *ys[NORM_LANES];
  int k = 0;
  for (int t = 0; t < R; t++)
    for (int h = 0; h < C / g; h++) {
      xs[k] = x + (size_t)t * ldx + (size_t)h * g;
      ys[k] = y + (size_t)t * ldy + (size_t)h * g;
      if (++k == NORM_LANES) norm_groups(xs, ys, k, w, one_plus, eps, g), k = 0;
    }
  if (k) norm_groups(xs, ys, k, w, one_plus, eps, g);
}

static void k_rope(void *ctx, const float *table, const float *x, int ldx, float *y, int ldy, int T, int pos,
                   const int *row_pos, int heads, int head_dim, int rot, int interleaved, const float *norm_w,
                   int one_plus, float eps) {
  const int half = rot / 2;
  if (T < 0 || heads < 1 || rot < 2 || rot % 2 || rot > head_dim) {
    sc_kernel_error(ctx, "rope: bad shape (rows, heads, or rotary dims that are odd or past the head)",
                    T < 0 ? T : heads < 1 ? heads : rot);
    return;
  }
  for (int t = 0; t < T; t++) {
    const float *cs = table + (size_t)(row_pos ? row_pos[t] : pos + t) * rot; /* cos | sin */
    const float *xrow = x + (size_t)t * ldx;
    float *yrow = y + (size_t)t * ldy;
    if (norm_w) /* QK-norm first, each head into y, NORM_LANES heads at a time */
      for (int h0 = 0; h0 < heads; h0 += NORM_LANES) {
        const int k = heads - h0 < NORM_LANES ? heads - h0 : NORM_LANES;
        const float *xs[NORM_LANES];
        float *ys[NORM_LANES];
        for (int j = 0; j < k; j++) {
          xs[j] = xrow + (size_t)(h0 + j) * head_dim;
          ys[j] = yrow + (size_t)(h0 + j) * head_dim;
        }
        norm_groups(xs, ys, k, norm_w, one_plus, eps, head_dim);
      }
    for (int h = 0; h < heads; h++) {
      const float *a = norm_w ? yrow + (size_t)h * head_dim : xrow + (size_t)h * head_dim;
      float *b = yrow + (size_t)h * head_dim;
      if (a != b) memmove(b + rot, a + rot, (size_t)(head_dim - rot) * sizeof *b);
      /* each pair is read before it is written, so b may be a */
      if (interleaved) {
        for (int i = 0; i < half; i++) {
          const float x0 = a[2 * i], x1 = a[2 * i + 1], c = cs[i], s = cs[half + i];
          b[2 * i] = x0 * c - x1 * s;
          b[2 * i + 1] = x1 * c + x0 * s;
        }
      } else {
        for (int i = 0; i < half; i++) {
          const float x0 = a[i], x1 = a[i + half], c = cs[i], s = cs[half + i];
          b[i] = x0 * c - x1 * s;
          b[i + half] = x1 * c + x0 * s;
        }
      }
    }
  }
}

static void k_store_rows(void *ctx, const float *x, int ldx, float *cache, int cap, int cols, int T, int pos,
                         const int *row_pos, const long long *row_state) {
  if (T < 0 || cap < 1 || cols < 0) {
    sc_kernel_error(ctx, "store_rows: bad shape (rows, cache rows or cols)", T < 0 ? T : cap < 1 ? cap : cols);
    return;
  }
  for (int t = 0; t < T; t++) {
    float *dst = cache + (size_t)((row_pos ? row_pos[t] : pos + t) % cap) * cols;
    if (row_state) dst = (float *)((unsigned char *)dst + row_state[t]);
    memcpy(dst, x + (size_t)t * ldx, (size_t)cols * sizeof *dst);
  }
}

void sc_kernels_rows_fill(sc_kernels *K) {
  K->rmsnorm = k_rmsnorm;
  K->rope = k_rope;
  K->store_rows = k_store_rows;
}
