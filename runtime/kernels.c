/*
 * kernels.c — the sc_kernels table: drivers for linear, linear_swiglu and
 * attention, the portable inner loops, libm wrappers and the error slot.
 *
 * The drivers are ISA-neutral: they walk rows in blocks of four and call an
 * sc_kern_ops (portable here, AVX2 in kernels_avx2.c) for the dot products,
 * then add bias / accumulate / apply SwiGLU in plain C.  For T > 1 each block
 * of rows is reused across all T inputs while it is still in cache; the
 * arithmetic per output is the T = 1 arithmetic (see kernels.h).
 */
#include "kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- error slot --------------------------------------------------------- */

/* Keep the first error of a call: later ones are usually its consequences. */
static void kern_error(void *ctx, const char *msg, int value) {
  sc_kernel_ctx *c = ctx;
  if (!c || c->failed) return;
  snprintf(c->err, sizeof c->err, "%s (value %d)", msg, value);
  c->failed = 1;
}

void sc_kernel_ctx_clear(sc_kernel_ctx *c) {
  c->err[0] = '\0';
  c->failed = 0;
}

/* ---- portable inner loops ----------------------------------------------- */

/* Per-row order: eight running sums s[k] over x[i+k] for 8-float blocks,
 * combined as ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)), then the last cols%8
 * products in index order.  The eight independent lanes let the compiler
 * use SIMD without reassociating anything. */
ALWAYS_INLINE float bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

#define DEFINE_DOT(NAME, WT, CVT)                                            \
  ALWAYS_INLINE void NAME##_n(const WT *w, const float *x, int cols,       \
                              float *out, const int N) {                   \
    float s[4][8] = {{0}};                                                 \
    int i = 0;                                                             \
    for (; i + 8 <= cols; i += 8)                                          \
      for (int r = 0; r < N; r++)                                          \
        for (int k = 0; k < 8; k++)                                        \
          s[r][k] += CVT(w[(size_t)r * cols + i + k]) * x[i + k];          \
    for (int r = 0; r < N; r++) {                                          \
      float d = ((s[r][0] + s[r][4]) + (s[r][1] + s[r][5])) +              \
                ((s[r][2] + s[r][6]) + (s[r][3] + s[r][7]));               \
      for (int j = i; j < cols; j++) d += CVT(w[(size_t)r * cols + j]) * x[j]; \
      out[r] = d;                                                          \
    }                                                                      \
  }                                                                        \
  static void NAME##4(const WT *w, const float *x, int cols, float *out) { \
    NAME##_n(w, x, cols, out, 4);                                          \
  }                                                                        \
  static void NAME##1(const WT *w, const float *x, int cols, float *out) { \
    NAME##_n(w, x, cols, out, 1);                                          \
  }

#define IDENT(v) (v)
DEFINE_DOT(pdot_f32_, float, IDENT)
DEFINE_DOT(pdot_bf16_, uint16_t, bf16_to_f32)

static void paxpy(float *y, float a, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

static const sc_kern_ops kern_portable = {
    .name = "portable",
    .dot4_f32 = pdot_f32_4,
    .dot1_f32 = pdot_f32_1,
    .dot4_bf16 = pdot_bf16_4,
    .dot1_bf16 = pdot_bf16_1,
    .axpy = paxpy,
};

/* ---- drivers ------------------------------------------------------------ */

static int band_supported(int wtype) {
  return wtype == SC_W_F32 || wtype == SC_W_BF16;
}

/* out[0..n) = W[r0+i]·x for n <= 4 rows of a band-`wtype` matrix. */
static void dot_rows(const sc_kern_ops *ops, int wtype, const void *w,
                     size_t r0, int n, const float *x, int cols, float *out) {
  if (wtype == SC_W_F32) {
    const float *wr = (const float *)w + r0 * (size_t)cols;
    if (n == 4) ops->dot4_f32(wr, x, cols, out);
    else
      for (int i = 0; i < n; i++) ops->dot1_f32(wr + (size_t)i * cols, x, cols, out + i);
  } else {
    const uint16_t *wr = (const uint16_t *)w + r0 * (size_t)cols;
    if (n == 4) ops->dot4_bf16(wr, x, cols, out);
    else
      for (int i = 0; i < n; i++) ops->dot1_bf16(wr + (size_t)i * cols, x, cols, out + i);
  }
}

static void linear_impl(const sc_kern_ops *ops, void *ctx, int wtype,
                        const void *w, const float *bias, const float *x,
                        int ldx, float *y, int ldy, int T, int rows, int cols,
                        int acc) {
  if (!band_supported(wtype)) {
    kern_error(ctx, "linear: unsupported weight band", wtype);
    return;
  }
  for (int r = 0; r < rows; r += 4) {
    int n = rows - r < 4 ? rows - r : 4;
    for (int t = 0; t < T; t++) {
      float d[4];
      dot_rows(ops, wtype, w, (size_t)r, n, x + (size_t)t * ldx, cols, d);
      float *yt = y + (size_t)t * ldy + r;
      for (int i = 0; i < n; i++) {
        float v = d[i];
        if (bias) v += bias[r + i];
        yt[i] = acc ? yt[i] + v : v;
      }
    }
  }
}

/* Gate rows are w[0..rows), up rows w[rows..2*rows): each g and u is the
 * exact value linear() would produce for that row. */
static void swiglu_impl(const sc_kern_ops *ops, void *ctx, int wtype,
                        const void *w, const float *x, int ldx, float *y,
                        int ldy, int T, int rows, int cols) {
  if (!band_supported(wtype)) {
    kern_error(ctx, "linear_swiglu: unsupported weight band", wtype);
    return;
  }
  for (int r = 0; r < rows; r += 4) {
    int n = rows - r < 4 ? rows - r : 4;
    for (int t = 0; t < T; t++) {
      const float *xt = x + (size_t)t * ldx;
      float g[4], u[4];
      dot_rows(ops, wtype, w, (size_t)r, n, xt, cols, g);
      dot_rows(ops, wtype, w, (size_t)rows + r, n, xt, cols, u);
      float *yt = y + (size_t)t * ldy + r;
      for (int i = 0; i < n; i++) yt[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
  }
}

/* Scores up to this many keys live on the stack; longer spans use malloc. */
#define ATTN_STACK_KEYS 2048

/* Causal attention, one (query, head) at a time: scores over the visible
 * keys, float softmax with the max subtracted, weighted sum of values.
 * y must not overlap q or the caches. */
static void attention_impl(const sc_kern_ops *ops, void *ctx, const float *q,
                           int ldq, const float *kc, const float *vc, int ldkv,
                           int cap, float *y, int ldy, int T, int pos,
                           int heads, int kv_heads, int hd, float scale,
                           int window) {
  if (kv_heads <= 0 || heads % kv_heads != 0) {
    kern_error(ctx, "attention: heads is not a multiple of kv_heads", kv_heads);
    return;
  }
  if (cap <= 0 || pos < 0 || window < 0) {
    kern_error(ctx, "attention: bad cache capacity, position or window",
               cap <= 0 ? cap : pos < 0 ? pos : window);
    return;
  }
  int group = heads / kv_heads;
  int span = pos + T; /* most keys any one query sees */
  if (window > 0 && window < span) span = window;
  /* The caller has written all T new rows before this call, so the rows
   * from the first query's first key to the last position must all still
   * be in the ring; otherwise an early query would read overwritten keys. */
  int first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
  int live = pos + T - first;
  if (live > cap) {
    kern_error(ctx, "attention: keys visible to the queries exceed the cache rows",
               live);
    return;
  }
  float stack[ATTN_STACK_KEYS];
  float *s = stack;
  if (span > ATTN_STACK_KEYS && !(s = malloc((size_t)span * sizeof *s))) {
    kern_error(ctx, "attention: out of memory for scores", span);
    return;
  }
  for (int t = 0; t < T; t++) {
    int p = pos + t;
    int lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    int n = p - lo + 1;
    for (int h = 0; h < heads; h++) {
      const float *qh = q + (size_t)t * ldq + (size_t)h * hd;
      size_t koff = (size_t)(h / group) * hd;
      float m = -INFINITY;
      for (int j = 0; j < n; j++) {
        const float *k = kc + (size_t)((lo + j) % cap) * ldkv + koff;
        float d;
        ops->dot1_f32(qh, k, hd, &d);
        s[j] = d * scale;
        if (s[j] > m) m = s[j];
      }
      float sum = 0.0f;
      for (int j = 0; j < n; j++) {
        s[j] = expf(s[j] - m);
        sum += s[j];
      }
      float *yh = y + (size_t)t * ldy + (size_t)h * hd;
      memset(yh, 0, (size_t)hd * sizeof *yh);
      for (int j = 0; j < n; j++)
        ops->axpy(yh, s[j], vc + (size_t)((lo + j) % cap) * ldkv + koff, hd);
      float inv = 1.0f / sum;
      for (int i = 0; i < hd; i++) yh[i] *= inv;
    }
  }
  if (s != stack) free(s);
}

/* ---- the table ---------------------------------------------------------- */

/* One set of table entries per ISA; each binds its ops to the drivers. */
#define DEFINE_ENTRIES(SUFFIX, OPS)                                          \
  static void linear_##SUFFIX(void *ctx, int wtype, const void *w,         \
                              const float *bias, const float *x, int ldx,  \
                              float *y, int ldy, int T, int rows, int cols, \
                              int acc) {                                   \
    linear_impl(OPS, ctx, wtype, w, bias, x, ldx, y, ldy, T, rows, cols,   \
                acc);                                                      \
  }                                                                        \
  static void swiglu_##SUFFIX(void *ctx, int wtype, const void *w,         \
                              const float *x, int ldx, float *y, int ldy,  \
                              int T, int rows, int cols) {                 \
    swiglu_impl(OPS, ctx, wtype, w, x, ldx, y, ldy, T, rows, cols);        \
  }                                                                        \
  static void attention_##SUFFIX(void *ctx, const float *q, int ldq,       \
                                 const float *kc, const float *vc,         \
                                 int ldkv, int cap, float *y, int ldy,     \
                                 int T, int pos, int heads, int kv_heads,  \
                                 int hd, float scale, int window) {        \
    attention_impl(OPS, ctx, q, ldq, kc, vc, ldkv, cap, y, ldy, T, pos,    \
                   heads, kv_heads, hd, scale, window);                    \
  }

DEFINE_ENTRIES(portable, &kern_portable)
DEFINE_ENTRIES(avx2, &sc_kern_avx2)

static float k_expf(float v) { return expf(v); }
static float k_sqrtf(float v) { return sqrtf(v); }
static float k_logf(float v) { return logf(v); }
static float k_erff(float v) { return erff(v); }

static void fill_common(sc_kernels *K, void *ctx) {
  memset(K, 0, sizeof *K);
  K->abi_version = SC_ABI_VERSION;
  K->ctx = ctx;
  K->expf = k_expf;
  K->sqrtf = k_sqrtf;
  K->logf = k_logf;
  K->erff = k_erff;
  K->error = kern_error;
}

void sc_kernels_init_portable(sc_kernels *K, void *ctx) {
  fill_common(K, ctx);
  K->linear = linear_portable;
  K->linear_swiglu = swiglu_portable;
  K->attention = attention_portable;
}

static int cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
  return sc_kern_avx2.dot4_f32 && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

void sc_kernels_init(sc_kernels *K, void *ctx) {
  sc_kernels_init_portable(K, ctx);
  if (cpu_has_avx2()) {
    K->linear = linear_avx2;
    K->linear_swiglu = swiglu_avx2;
    K->attention = attention_avx2;
  }
}

const char *sc_kernels_isa(const sc_kernels *K) {
  if (K->linear == linear_avx2) return "avx2";
  if (K->linear == linear_portable) return "portable";
  return "unknown";
}
