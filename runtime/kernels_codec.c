/*
 * kernels_codec.c — the kernels behind the codec ops of ops.def: IM2COL,
 * DWCONV, OVERLAP_ADD, SNAKE and LAYERNORM (sc_abi.h has their contracts),
 * and the conv weight layouts they read (kernels.h).
 *
 * At audio rates these run over thousands of rows of up to ~1500
 * channels, so every loop walks rows in memory order, keeps the channel
 * loop innermost (unit stride, which the compiler vectorizes), and reads
 * each input row while it is in cache.  The conv arithmetic proper is the
 * LINEAR that follows IM2COL or precedes OVERLAP_ADD (the GEMM kernels or
 * OpenBLAS); what is here is copying, a few adds per element, and
 * SnakeBeta's sine, the one transcendental per element at 24 kHz, which
 * each ISA table may vectorize (sc_kern_ops.snake_row).
 *
 * Threads: SnakeBeta, DWCONV, LAYERNORM and IM2COL cut their rows into
 * chunks on the context's pool (each row is computed by the same code
 * whichever thread runs it, so the thread count changes no bit), then
 * update the conv state on the caller.  OVERLAP_ADD, a few adds per
 * output, runs on the caller.
 *
 * Streaming: a call over rows [0, R) and a later call over [R, R') give
 * the bits one call over [0, R') gives: the state rows are exact copies,
 * and OVERLAP_ADD adds the taps landing on an output in the order of
 * their input rows, oldest first, the bias last (so a carry is a prefix
 * of the same sum).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "pool.h"

/* ---- weight layouts ----------------------------------------------------- */

size_t sc_conv_weight_src(int kind, int dim0, int dim1, int k, size_t row, size_t col) {
  if (kind == SC_CONV_IM2COL) { /* [cout, k*cin] <- [cout, cin, k] */
    const size_t cin = (size_t)dim1, j = col / cin, c = col % cin;
    return (row * cin + c) * (size_t)k + j;
  }
  /* [k*cout, cin] <- [cin, cout, k] */
  const size_t cout = (size_t)dim1, j = row / cout, o = row % cout;
  return (col * cout + o) * (size_t)k + j;
}

void sc_conv_weight_im2col(const float *w, int cout, int cin, int k, float *out) {
  for (int o = 0; o < cout; o++)
    for (int j = 0; j < k; j++)
      for (int c = 0; c < cin; c++)
        out[((size_t)o * k + j) * cin + c] = w[((size_t)o * cin + c) * k + j];
}

void sc_convt_weight_linear(const float *w, int cin, int cout, int k, float *out) {
  for (int j = 0; j < k; j++)
    for (int o = 0; o < cout; o++)
      for (int c = 0; c < cin; c++)
        out[((size_t)j * cout + o) * cin + c] = w[((size_t)c * cout + o) * k + j];
}

/* ---- shared pieces ------------------------------------------------------ */

static sc_pool *pool_of(void *ctx) { return ctx ? ((sc_kernel_ctx *)ctx)->pool : NULL; }

/* Chunks for R rows of `row_work` elements each: four per thread, none
 * smaller than ~16k elements (a pool dispatch costs microseconds). */
static int row_chunks(void *ctx, int R, long long row_work) {
  sc_pool *pool = pool_of(ctx);
  const int threads = sc_pool_threads(pool);
  if (threads <= 1) return 1;
  long long by_work = (long long)R * row_work / 16384;
  int n = 4 * threads;
  if (by_work < n) n = by_work < 1 ? 1 : (int)by_work;
  return n < R ? n : R;
}

/* Row t of xx = the S state rows, then the rows of x. */
static inline const float *xx_row(const float *state, int S, int C, const float *x, int ldx, int t) {
  return t < S ? state + (size_t)t * C : x + (size_t)(t - S) * ldx;
}

/* state = the last S rows of xx = [state; x] (R rows of x). */
void sc_conv_state_push(float *state, int S, int C, const float *x, int ldx, int R) {
  if (!S) return;
  const size_t row = (size_t)C * sizeof(float);
  if (R < S) memmove(state, state + (size_t)R * C, (size_t)(S - R) * row);
  const int keep = R < S ? S - R : 0; /* old rows kept at the top */
  for (int t = keep; t < S; t++) memcpy(state + (size_t)t * C, x + (size_t)(R - S + t) * ldx, row);
}

/* The common checks: sizes positive, the state there when it has rows. */
int sc_conv_bad(void *ctx, const char *what, int R, int C, int k, int d, int S, const float *state) {
  char msg[96];
  if (R < 1 || C < 1) {
    snprintf(msg, sizeof msg, "%s: empty shape (rows or channels)", what);
    sc_kernel_error(ctx, msg, R < 1 ? R : C);
    return 1;
  }
  if (k < 1 || d < 1) {
    snprintf(msg, sizeof msg, "%s: kernel size and dilation/stride must be >= 1", what);
    sc_kernel_error(ctx, msg, k < 1 ? k : d);
    return 1;
  }
  if (S > 0 && !state) {
    snprintf(msg, sizeof msg, "%s: the conv needs a state of that many rows", what);
    sc_kernel_error(ctx, msg, S);
    return 1;
  }
  return 0;
}

/* ---- IM2COL ------------------------------------------------------------- */

typedef struct ConvJob {
  const float *x, *w, *b, *state;
  float *y;
  int ldx, ldy, R, C, k, d, S;
} ConvJob;

static void im2col_chunk(void *arg, int c, int n) {
  const ConvJob *j = arg;
  const int t0 = (int)((long long)j->R * c / n), t1 = (int)((long long)j->R * (c + 1) / n);
  const size_t row = (size_t)j->C * sizeof(float);
  for (int t = t0; t < t1; t++) {
    float *yt = j->y + (size_t)t * j->ldy;
    for (int q = 0; q < j->k; q++)
      memcpy(yt + (size_t)q * j->C, xx_row(j->state, j->S, j->C, j->x, j->ldx, t + q * j->d), row);
  }
}

void sc_im2col(void *ctx, const float *x, int ldx, float *state, float *y, int ldy, int R, int C, int k,
               int d) {
  const int S = (k - 1) * d;
  if (sc_conv_bad(ctx, "im2col", R, C, k, d, S, state)) return;
  ConvJob j = {.x = x, .state = state, .y = y, .ldx = ldx, .ldy = ldy, .R = R, .C = C, .k = k, .d = d, .S = S};
  sc_pool_run(pool_of(ctx), im2col_chunk, &j, row_chunks(ctx, R, (long long)k * C));
  sc_conv_state_push(state, S, C, x, ldx, R);
}

/* ---- IM2COL_STRIDED ------------------------------------------------------ */

typedef struct StridedJob {
  const float *x, *state;
  float *y;
  int ldx, ldy, Ro, C, k, d, s, P;
} StridedJob;

static void im2col_strided_chunk(void *arg, int c, int n) {
  const StridedJob *j = arg;
  const int t0 = (int)((long long)j->Ro * c / n), t1 = (int)((long long)j->Ro * (c + 1) / n);
  const size_t row = (size_t)j->C * sizeof(float);
  for (int t = t0; t < t1; t++) {
    float *yt = j->y + (size_t)t * j->ldy;
    for (int q = 0; q < j->k; q++)
      memcpy(yt + (size_t)q * j->C, xx_row(j->state, j->P, j->C, j->x, j->ldx, t * j->s + q * j->d), row);
  }
}

/* P = (k-1)*d + 1 - s state rows; with replicate one more, whose first
 * value says whether the session has seen input (the package's
 * `first`). */
static void k_im2col_strided(void *ctx, const float *x, int ldx, float *state, float *y, int ldy, int R, int C,
                             int k, int d, int s, int replicate) {
  const int P = (k - 1) * d + 1 - s;
  char msg[96];
  if (s < 1 || P < 0 || R % s) {
    snprintf(msg, sizeof msg, "im2col_strided: stride %d with kernel %d dilation %d, rows not a multiple", s, k, d);
    sc_kernel_error(ctx, msg, R);
    return;
  }
  if (sc_conv_bad(ctx, "im2col_strided", R, C, k, d, P, state)) return;
  if (replicate && P > 0 && state[(size_t)P * C] == 0.0f) { /* a fresh session: pad with x's first row */
    for (int q = 0; q < P; q++) memcpy(state + (size_t)q * C, x, (size_t)C * sizeof(float));
    state[(size_t)P * C] = 1.0f;
  }
  StridedJob j = {.x = x, .state = state, .y = y, .ldx = ldx, .ldy = ldy, .Ro = R / s, .C = C, .k = k, .d = d,
                  .s = s, .P = P};
  sc_pool_run(pool_of(ctx), im2col_strided_chunk, &j, row_chunks(ctx, R / s, (long long)k * C));
  sc_conv_state_push(state, P, C, x, ldx, R);
}

/* ---- DWCONV ------------------------------------------------------------- */

/* Each output row: b, then the k taps in order j = 0..k-1, the channel
 * loop innermost over the taps' weights transposed to [k, C] (j->w). */
static void dwconv_chunk(void *arg, int c, int n) {
  const ConvJob *j = arg;
  const int t0 = (int)((long long)j->R * c / n), t1 = (int)((long long)j->R * (c + 1) / n);
  const int C = j->C;
  for (int t = t0; t < t1; t++) {
    float *restrict yt = j->y + (size_t)t * j->ldy;
    if (j->b) memcpy(yt, j->b, (size_t)C * sizeof *yt);
    else memset(yt, 0, (size_t)C * sizeof *yt);
    for (int q = 0; q < j->k; q++) {
      const float *restrict xr = xx_row(j->state, j->S, C, j->x, j->ldx, t + q * j->d);
      const float *restrict wq = j->w + (size_t)q * C;
      for (int ch = 0; ch < C; ch++) yt[ch] += wq[ch] * xr[ch];
    }
  }
}

/* Rows below DWCONV_DIRECT_ROWS with at most DWCONV_DIRECT_TAPS taps go
 * through dwconv_direct. */
#define DWCONV_DIRECT_ROWS 4
#define DWCONV_DIRECT_TAPS 8

/* A few rows (decode): each channel's taps straight from w [C, k], in
 * the same order from the same start as dwconv_chunk's, so the same bits
 * without transposing the taps (which cost more than the rows here). */
static void dwconv_direct(const ConvJob *j, const float *w) {
  const int C = j->C, k = j->k;
  for (int t = 0; t < j->R; t++) {
    const float *xr[DWCONV_DIRECT_TAPS];
    for (int q = 0; q < k; q++) xr[q] = xx_row(j->state, j->S, C, j->x, j->ldx, t + q * j->d);
    float *restrict yt = j->y + (size_t)t * j->ldy;
    for (int ch = 0; ch < C; ch++) {
      const float *wc = w + (size_t)ch * k;
      float acc = j->b ? j->b[ch] : 0.0f;
      for (int q = 0; q < k; q++) acc += wc[q] * xr[q][ch];
      yt[ch] = acc;
    }
  }
}

static void k_dwconv(void *ctx, const float *x, int ldx, const float *w, const float *b, float *state,
                     float *y, int ldy, int R, int C, int k, int d) {
  const int S = (k - 1) * d;
  if (sc_conv_bad(ctx, "dwconv", R, C, k, d, S, state)) return;
  if (R < DWCONV_DIRECT_ROWS && k <= DWCONV_DIRECT_TAPS) {
    ConvJob j = {.x = x, .b = b, .state = state, .y = y, .ldx = ldx, .ldy = ldy, .R = R, .C = C, .k = k,
                 .d = d, .S = S};
    dwconv_direct(&j, w);
    sc_conv_state_push(state, S, C, x, ldx, R);
    return;
  }
  void *owned = NULL;
  float *wt = sc_kernel_scratch(ctx, (size_t)k * C * sizeof *wt, &owned);
  if (!wt) {
    sc_kernel_error(ctx, "dwconv: out of memory for the transposed taps", k * C);
    return;
  }
  for (int ch = 0; ch < C; ch++)
    for (int q = 0; q < k; q++) wt[(size_t)q * C + ch] = w[(size_t)ch * k + q];
  ConvJob j = {.x = x, .w = wt, .b = b, .state = state, .y = y, .ldx = ldx, .ldy = ldy, .R = R, .C = C,
               .k = k, .d = d, .S = S};
  sc_pool_run(pool_of(ctx), dwconv_chunk, &j, row_chunks(ctx, R, (long long)k * C));
  free(owned);
  sc_conv_state_push(state, S, C, x, ldx, R);
}

/* ---- OVERLAP_ADD -------------------------------------------------------- */

/* Output p = i*s + m of this call gets the taps j = m + q*s of input rows
 * i - q (q = 0, 1, ... while j < k): those with i - q < 0 came from
 * earlier calls and are in the carry row p.  Sum order: carry (or 0),
 * then the taps from the oldest input row to the newest, then b. */
typedef struct OlaJob {
  const float *z, *b, *state;
  float *y;
  int ldz, ldy, R, C, k, s, S;
} OlaJob;

/* Input rows i0..i1 of a chunk: their s output rows each, which read the
 * carry but do not write it (the new carry is made after every chunk). */
static void ola_chunk(void *arg, int c, int n) {
  const OlaJob *j = arg;
  const float *z = j->z, *b = j->b, *state = j->state;
  const int C = j->C, k = j->k, s = j->s, S = j->S, ldz = j->ldz;
  const int taps = (k + s - 1) / s; /* most input rows one output sums */
  const int i0 = (int)((long long)j->R * c / n), i1 = (int)((long long)j->R * (c + 1) / n);
  for (int i = i0; i < i1; i++)
    for (int m = 0; m < s; m++) {
      const int p = i * s + m;
      float *restrict yp = j->y + (size_t)p * j->ldy;
      if (p < S) memcpy(yp, state + (size_t)p * C, (size_t)C * sizeof *yp);
      else memset(yp, 0, (size_t)C * sizeof *yp);
      for (int q = taps - 1; q >= 0; q--) { /* oldest input row first */
        const int jj = m + q * s;
        if (jj >= k || i - q < 0) continue;
        const float *restrict zr = z + (size_t)(i - q) * ldz + (size_t)jj * C;
        for (int ch = 0; ch < C; ch++) yp[ch] += zr[ch];
      }
      if (b)
        for (int ch = 0; ch < C; ch++) yp[ch] += b[ch];
    }
}

static void k_overlap_add(void *ctx, const float *z, int ldz, const float *b, float *state, float *y,
                          int ldy, int R, int C, int k, int s) {
  if (k < s) {
    sc_kernel_error(ctx, "overlap_add: kernel size below the stride", k);
    return;
  }
  const int S = k - s;
  if (sc_conv_bad(ctx, "overlap_add", R, C, k, s, S, state)) return;
  OlaJob j = {.z = z, .b = b, .state = state, .y = y, .ldz = ldz, .ldy = ldy, .R = R, .C = C, .k = k, .s = s,
              .S = S};
  sc_pool_run(pool_of(ctx), ola_chunk, &j, row_chunks(ctx, R, (long long)s * C * ((k + s - 1) / s + 1)));
  /* the new carry: position R*s + m of this call is row m; in place in
   * increasing m (row m reads old row R*s + m > m, not yet written) */
  for (int m = 0; m < S; m++) {
    const int p = R * s + m;
    float *restrict sm = state + (size_t)m * C;
    if (p < S) memcpy(sm, state + (size_t)p * C, (size_t)C * sizeof *sm);
    else memset(sm, 0, (size_t)C * sizeof *sm);
    int i0 = (p - k) / s + 1; /* oldest input row with a tap here: p - i*s < k */
    if (p - k < 0) i0 = 0;
    for (int i = i0; i < R; i++) {
      const int jj = p - i * s;
      const float *restrict zr = z + (size_t)i * ldz + (size_t)jj * C;
      for (int c = 0; c < C; c++) sm[c] += zr[c];
    }
  }
}

/* ---- SNAKE -------------------------------------------------------------- */

/* The portable row: sc_sin2 over blocks of 64 into a buffer (the loop
 * vectorizes), sinf for |u| beyond SC_SIN2_MAX or inf, then y = x + ib *
 * that; x is read before y is written, so y may be x. */
static void psnake_row(const float *x, const float *a, const float *ib, float *y, int n) {
  float s2[64];
  for (int i0 = 0; i0 < n; i0 += 64) {
    const int m = n - i0 < 64 ? n - i0 : 64;
    int big = 0;
    for (int i = 0; i < m; i++) {
      const float u = x[i0 + i] * a[i0 + i];
      s2[i] = sc_sin2(u);
      big |= fabsf(u) > SC_SIN2_MAX;
    }
    if (big)
      for (int i = 0; i < m; i++) {
        const float u = x[i0 + i] * a[i0 + i];
        if (fabsf(u) > SC_SIN2_MAX) {
          const float sn = sinf(u);
          s2[i] = sn * sn;
        }
      }
    for (int i = 0; i < m; i++) y[i0 + i] = x[i0 + i] + ib[i0 + i] * s2[i];
  }
}

typedef struct SnakeJob {
  void (*row)(const float *x, const float *a, const float *ib, float *y, int n);
  const float *x, *a, *ib;
  float *y;
  int ldx, ldy, R, C;
} SnakeJob;

static void snake_chunk(void *arg, int c, int n) {
  const SnakeJob *j = arg;
  const int t0 = (int)((long long)j->R * c / n), t1 = (int)((long long)j->R * (c + 1) / n);
  for (int t = t0; t < t1; t++) j->row(j->x + (size_t)t * j->ldx, j->a, j->ib, j->y + (size_t)t * j->ldy, j->C);
}

static void snake_impl(const sc_kern_ops *ops, void *ctx, const float *x, int ldx, const float *alpha,
                       const float *beta, float *y, int ldy, int R, int C) {
  if (R < 1 || C < 1) {
    sc_kernel_error(ctx, "snake: empty shape (rows or channels)", R < 1 ? R : C);
    return;
  }
  void *owned = NULL;
  float *a = sc_kernel_scratch(ctx, 2 * (size_t)C * sizeof *a, &owned);
  if (!a) {
    sc_kernel_error(ctx, "snake: out of memory for the channel factors", C);
    return;
  }
  float *ib = a + C;
  for (int c = 0; c < C; c++) {
    a[c] = expf(alpha[c]);
    ib[c] = 1.0f / (expf(beta[c]) + 1e-9f);
  }
  SnakeJob j = {.row = ops->snake_row ? ops->snake_row : psnake_row, .x = x, .a = a, .ib = ib, .y = y,
                .ldx = ldx, .ldy = ldy, .R = R, .C = C};
  sc_pool_run(pool_of(ctx), snake_chunk, &j, row_chunks(ctx, R, 8LL * C));
  free(owned);
}

#define DEFINE_SNAKE(SUFFIX, OPS)                                                                 \
  static void snake_##SUFFIX(void *ctx, const float *x, int ldx, const float *alpha,             \
                             const float *beta, float *y, int ldy, int R, int C) {                \
    snake_impl(OPS, ctx, x, ldx, alpha, beta, y, ldy, R, C);                                      \
  }
DEFINE_SNAKE(portable, &sc_kern_portable)
DEFINE_SNAKE(avx2, &sc_kern_avx2)
DEFINE_SNAKE(avx512, &sc_kern_avx512)
DEFINE_SNAKE(avx512vnni, &sc_kern_avx512vnni)
DEFINE_SNAKE(avx512vnni256, &sc_kern_avx512vnni256)
DEFINE_SNAKE(neon, &sc_kern_neon)
DEFINE_SNAKE(neon_dotprod, &sc_kern_neon_dotprod)

/* ---- LAYERNORM ---------------------------------------------------------- */

typedef struct NormJob {
  const float *x, *w, *b;
  float *y;
  float eps;
  int ldx, ldy, R, C;
} NormJob;

/* Sum of n floats in eight running lanes, combined pairwise, then the
 * tail in order: a fixed order that vectorizes without reassociation. */
static inline float sum8(const float *v, int n) {
  float s[8] = {0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int q = 0; q < 8; q++) s[q] += v[i + q];
  float r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; i++) r += v[i];
  return r;
}

static inline float sumsq8(const float *v, float mean, int n) {
  float s[8] = {0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int q = 0; q < 8; q++) {
      const float e = v[i + q] - mean;
      s[q] += e * e;
    }
  float r = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
  for (; i < n; i++) r += (v[i] - mean) * (v[i] - mean);
  return r;
}

/* Two passes over the row (mean, then the centred sum of squares), then
 * y = (x - mean) * rstd * w + b; the row is read whole before it is
 * written, so y may be x. */
static void layernorm_chunk(void *arg, int c, int n) {
  const NormJob *j = arg;
  const int t0 = (int)((long long)j->R * c / n), t1 = (int)((long long)j->R * (c + 1) / n);
  const int C = j->C;
  for (int t = t0; t < t1; t++) {
    const float *xr = j->x + (size_t)t * j->ldx;
    float *yr = j->y + (size_t)t * j->ldy;
    const float mean = sum8(xr, C) / (float)C;
    const float var = sumsq8(xr, mean, C) / (float)C;
    const float rstd = 1.0f / sqrtf(var + j->eps);
    for (int ch = 0; ch < C; ch++) yr[ch] = (xr[ch] - mean) * rstd * j->w[ch] + j->b[ch];
  }
}

static void k_layernorm(void *ctx, const float *x, int ldx, const float *w, const float *b, float eps,
                        float *y, int ldy, int R, int C) {
  if (R < 1 || C < 1) {
    sc_kernel_error(ctx, "layernorm: empty shape (rows or channels)", R < 1 ? R : C);
    return;
  }
  NormJob j = {.x = x, .w = w, .b = b, .y = y, .eps = eps, .ldx = ldx, .ldy = ldy, .R = R, .C = C};
  sc_pool_run(pool_of(ctx), layernorm_chunk, &j, row_chunks(ctx, R, 4LL * C));
}

/* ---- VQ_NEAREST ------------------------------------------------------------ */

typedef struct VqJob {
  const float *x, *table, *codes;
  float *y;
  int ldx, ldc, ldy, N, D, P, R;
} VqJob;

/* Rows of the call, each against every entry: the distance as
 * torch.cdist's matrix form computes it ([-2x, |x|^2, 1] . [e, 1, |e|^2]),
 * every sum in f32 in index order; '<' keeps the first of equal ones. */
static void vq_chunk(void *arg, int c, int n) {
  const VqJob *j = arg;
  const int t0 = (int)((long long)j->R * c / n), t1 = (int)((long long)j->R * (c + 1) / n);
  for (int t = t0; t < t1; t++) {
    const float *x = j->x + (size_t)t * j->ldx;
    float *y = j->y + (size_t)t * j->ldy;
    float xx = 0.0f;
    for (int k = 0; k < j->D; k++) xx += x[k] * x[k];
    int best = 0;
    float best_d = 0.0f;
    for (int e = 0; e < j->N; e++) {
      const float *row = j->table + (size_t)e * j->D;
      float dot = 0.0f, ee = 0.0f;
      for (int k = 0; k < j->D; k++) {
        dot += (-2.0f * x[k]) * row[k];
        ee += row[k] * row[k];
      }
      float d2 = dot + xx + ee;
      d2 = d2 > 0.0f ? d2 : 0.0f; /* clamp_min(0); a NaN stays NaN and never wins */
      const float d = sqrtf(d2);
      if (e == 0 || d < best_d) best = e, best_d = d;
    }
    for (int k = 0; k < j->P; k++) y[k] = j->codes[(size_t)t * j->ldc + k];
    y[j->P] = (float)best;
    const float *row = j->table + (size_t)best * j->D;
    for (int k = 0; k < j->D; k++) y[j->P + 1 + k] = x[k] - row[k];
  }
}

static void k_vq_nearest(void *ctx, const float *x, int ldx, const float *table, int N, const float *codes, int ldc,
                         int P, float *y, int ldy, int R, int D) {
  if (R < 1 || D < 1 || N < 1 || N >= 1 << 24 || P < 0 || (P > 0 && !codes)) {
    sc_kernel_error(ctx, "vq_nearest: bad shape (rows, dimension, entries below 2^24, earlier codes)",
                    R < 1 ? R : D < 1 ? D : N);
    return;
  }
  VqJob j = {.x = x, .table = table, .codes = codes, .y = y, .ldx = ldx, .ldc = ldc, .ldy = ldy, .N = N, .D = D,
             .P = P, .R = R};
  sc_pool_run(pool_of(ctx), vq_chunk, &j, row_chunks(ctx, R, 2LL * N * D));
}

/* ---- the table ---------------------------------------------------------- */

void sc_kernels_codec_fill(sc_kernels *K, const sc_kern_ops *ops) {
  K->im2col = sc_im2col;
  K->im2col_strided = k_im2col_strided;
  K->dwconv = k_dwconv;
  K->overlap_add = k_overlap_add;
  K->layernorm = k_layernorm;
  K->vq_nearest = k_vq_nearest;
  K->snake = ops == &sc_kern_avx2             ? snake_avx2
             : ops == &sc_kern_avx512         ? snake_avx512
             : ops == &sc_kern_avx512vnni     ? snake_avx512vnni
             : ops == &sc_kern_avx512vnni256  ? snake_avx512vnni256
             : ops == &sc_kern_neon           ? snake_neon
             : ops == &sc_kern_neon_dotprod   ? snake_neon_dotprod
                                              : snake_portable;
}
