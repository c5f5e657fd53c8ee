/*
 * kernels.c — the sc_kernels table: drivers for linear, linear_swiglu and
 * attention, the portable inner loops, the q8_0/q4_0 band definitions, libm
 * wrappers and the error slot.
 *
 * The drivers are ISA-neutral: they walk rows in blocks of four and call an
 * sc_kern_ops (portable here; kernels_avx2.c, kernels_avx512.c,
 * kernels_neon.c) for the dot products, GEMM tiles and attention rows,
 * then add bias / accumulate / apply SwiGLU in plain C.  Each call is one
 * job on the context's thread pool: the blocks of rows (attention: the
 * (token, head) pairs) are cut into four chunks per thread, which the
 * threads claim.  For T > 1 each block of rows is reused across all T
 * inputs while it is still in cache (the ops' GEMM tiles, or their dots
 * once per token); the arithmetic per output is the T = 1 arithmetic (see
 * kernels.h).
 */
#include "kernels.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SC_HAVE_OPENBLAS /* CMake's SPEECHC_OPENBLAS (default ON) sets it */
#define SC_HAVE_OPENBLAS 0
#endif
#if SC_HAVE_OPENBLAS
#include <cblas.h>
#endif

#include "cpu.h"
#include "kernels_amx.h"
#include "pool.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20) /* the kernel's uapi asm/hwcap.h */
#endif
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- error slot --------------------------------------------------------- */

/* Keep the first error of a call: later ones are usually its consequences. */
static void kern_error(void *ctx, const char *msg, int value) {
  sc_kernel_ctx *c = ctx;
  if (!c || c->failed) return;
  snprintf(c->err, sizeof c->err, "%s (value %d)", msg, value);
  c->failed = 1;
}

void sc_kernel_error(void *ctx, const char *msg, int value) { kern_error(ctx, msg, value); }

void sc_kernel_ctx_clear(sc_kernel_ctx *c) {
  c->err[0] = '\0';
  c->failed = 0;
}

/* ---- portable inner loops ----------------------------------------------- */

/* Per-row order: eight running sums s[k] over x[i+k] for 8-float blocks,
 * combined as ((s0+s4)+(s1+s5)) + ((s2+s6)+(s3+s7)), then the last cols%8
 * products in index order.  The eight independent lanes let the compiler
 * use SIMD without reassociating anything. */
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
DEFINE_DOT(pdot_bf16_, uint16_t, sc_bf16_to_f32)

static void paxpy(float *y, float a, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* ---- scratch ------------------------------------------------------------ */

/* n bytes of 64-byte-aligned kernel scratch, kept in the context between
 * calls.  Without a context the block is malloc'd and *owned is set: the
 * caller frees it.  NULL when out of memory. */
static void *get_scratch(void *ctx, size_t n, void **owned) {
  sc_kernel_ctx *c = ctx;
  *owned = NULL;
  if (!c) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64)) return NULL;
    return *owned = p;
  }
  if (c->scratch_bytes < n) {
    void *p = NULL;
    size_t want = n + n / 4;
    if (posix_memalign(&p, 64, want)) return NULL;
    free(c->scratch);
    c->scratch = p;
    c->scratch_bytes = want;
  }
  return c->scratch;
}

void *sc_kernel_scratch(void *ctx, size_t n, void **owned) { return get_scratch(ctx, n, owned); }

void sc_kernel_ctx_free(sc_kernel_ctx *c) {
  if (!c) return;
  free(c->scratch);
  c->scratch = NULL;
  c->scratch_bytes = 0;
}

static sc_pool *pool_of(void *ctx) {
  return ctx ? ((sc_kernel_ctx *)ctx)->pool : NULL;
}

/* Chunks for a job of `units` equal pieces of work: four per thread, so
 * that the threads that run balance one that the OS delays, at two atomic
 * operations per chunk. */
static int chunks_for(sc_pool *pool, int units) {
  int n = 4 * sc_pool_threads(pool);
  if (sc_pool_threads(pool) == 1) n = 1;
  return units < n ? units : n;
}

/* ---- the quantized bands: f16, GGML's reference quantizers ------------- */

ALWAYS_INLINE uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
ALWAYS_INLINE float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Round to nearest even, with subnormals, overflow to inf and quiet NaNs:
 * the FP16 library's conversion that GGML uses without F16C. */
uint16_t sc_f32_to_f16(float f) {
  const float scale_to_inf = 0x1.0p+112f, scale_to_zero = 0x1.0p-110f;
  float base = (fabsf(f) * scale_to_inf) * scale_to_zero;
  const uint32_t w = f32_bits(f), shl1_w = w + w, sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xff000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = bits_f32((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = f32_bits(base);
  const uint32_t nonsign = ((bits >> 13) & 0x7c00u) + (bits & 0x0fffu);
  return (uint16_t)((sign >> 16) | (shl1_w > 0xff000000u ? 0x7e00u : nonsign));
}

float sc_f16_to_f32(uint16_t h) {
  const uint32_t w = (uint32_t)h << 16, sign = w & 0x80000000u, two_w = w + w;
  const float normalized = bits_f32((two_w >> 4) + (0xe0u << 23)) * 0x1.0p-112f;
  const float denormalized = bits_f32((two_w >> 17) | (126u << 23)) - 0.5f;
  return bits_f32(sign | (two_w < (1u << 27) ? f32_bits(denormalized) : f32_bits(normalized)));
}

float sc_f16_table[65536];

static void fill_f16_table(void) {
  for (uint32_t h = 0; h < 65536; h++) sc_f16_table[h] = sc_f16_to_f32((uint16_t)h);
}

static void f16_table_once(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fill_f16_table);
}

ALWAYS_INLINE float blk_d(const uint8_t *blk) {
  return sc_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
}

/* The scale of a block in the kernels: through the table. */
ALWAYS_INLINE float blk_d_fast(const uint8_t *blk) {
  return sc_f16_table[blk[0] | blk[1] << 8];
}
ALWAYS_INLINE void put_d(uint8_t *blk, float d) {
  uint16_t h = sc_f32_to_f16(d);
  blk[0] = (uint8_t)h;
  blk[1] = (uint8_t)(h >> 8);
}

/* quantize_row_q8_0_ref: d = amax/127, q = roundf(x / d) (ties away). */
void sc_quantize_row_q8_0(const float *x, int cols, void *out) {
  uint8_t *o = out;
  for (int b = 0; b < cols / SC_QK; b++, x += SC_QK, o += SC_Q8_0_BLOCK) {
    float amax = 0.0f;
    for (int j = 0; j < SC_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
    put_d(o, d);
    for (int j = 0; j < SC_QK; j++) o[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
  }
}

/* quantize_row_q4_0_ref: m = the value of largest magnitude, d = m / -8,
 * q = min(15, (int8)(x / d + 8.5)); byte k = q[k] | q[k+16] << 4. */
void sc_quantize_row_q4_0(const float *x, int cols, void *out) {
  uint8_t *o = out;
  for (int b = 0; b < cols / SC_QK; b++, x += SC_QK, o += SC_Q4_0_BLOCK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < SC_QK; j++)
      if (amax < fabsf(x[j])) {
        amax = fabsf(x[j]);
        max = x[j];
      }
    const float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
    put_d(o, d);
    for (int j = 0; j < SC_QK / 2; j++) {
      int8_t q0 = (int8_t)(x[j] * id + 8.5f), q1 = (int8_t)(x[SC_QK / 2 + j] * id + 8.5f);
      if (q0 > 15) q0 = 15;
      if (q1 > 15) q1 = 15;
      o[2 + j] = (uint8_t)(q0 | q1 << 4);
    }
  }
}

/* Where block b of a row in the CPU's groups of eight (kernels.h; q8_0
 * and q4_0, blocks of bb bytes: a 2-byte scale and bb - 2 GGML bytes)
 * keeps its scale and its bytes: *d, then byte k at q + (k / 4) * qstep +
 * k % 4. */
ALWAYS_INLINE const uint8_t *grouped_block(const uint8_t *row, int nb, int b, int bb, const uint8_t **d,
                                           size_t *qstep) {
  _Static_assert(SC_Q8_GROUP == 8 && SC_Q4_GROUP == 8, "one group size for both bands");
  const int whole = nb / 8 * 8;
  if (b < whole) {
    const uint8_t *g = row + (size_t)(b / 8) * 8 * bb;
    *d = g + 2 * (b % 8);
    *qstep = 32;
    return g + 16 + 4 * (b % 8);
  }
  const uint8_t *blk = row + (size_t)b * bb; /* where GGML has it */
  *d = blk;
  *qstep = 4;
  return blk + 2;
}
static const uint8_t *q4_block(const uint8_t *row, int nb, int b, const uint8_t **d, size_t *qstep) {
  return grouped_block(row, nb, b, SC_Q4_0_BLOCK, d, qstep);
}
static const uint8_t *q8g_block(const uint8_t *row, int nb, int b, const uint8_t **d, size_t *qstep) {
  return grouped_block(row, nb, b, SC_Q8_0_BLOCK, d, qstep);
}

/* A row of GGML blocks of bb bytes -> the CPU's groups. */
static void pack_grouped(const uint8_t *src, int cols, int bb, uint8_t *row) {
  const int nb = cols / SC_QK;
  for (int b = 0; b < nb; b++) {
    const uint8_t *blk = src + (size_t)b * bb, *d;
    size_t step;
    uint8_t *q = (uint8_t *)grouped_block(row, nb, b, bb, &d, &step);
    memcpy((uint8_t *)d, blk, 2);
    for (int k = 0; k < bb - 2; k++) q[(k / 4) * step + k % 4] = blk[2 + k];
  }
}
void sc_pack_row_q4_0(const void *ggml, int cols, void *out) { pack_grouped(ggml, cols, SC_Q4_0_BLOCK, out); }
void sc_pack_row_q8_0(const void *ggml, int cols, void *out) { pack_grouped(ggml, cols, SC_Q8_0_BLOCK, out); }

void sc_unpack_row_q8_0(const void *grouped, int cols, void *ggml) {
  const uint8_t *row = grouped;
  uint8_t *dst = ggml;
  const int nb = cols / SC_QK;
  for (int b = 0; b < nb; b++) {
    uint8_t *blk = dst + (size_t)b * SC_Q8_0_BLOCK;
    const uint8_t *d;
    size_t step;
    const uint8_t *q = q8g_block(row, nb, b, &d, &step);
    memcpy(blk, d, 2);
    for (int e = 0; e < SC_QK; e++) blk[2 + e] = q[(e / 4) * step + e % 4];
  }
}

void sc_dequantize_row(int wtype, const void *row, int cols, float *y) {
  const uint8_t *p = row;
  switch (wtype) {
  case SC_W_F32: memcpy(y, row, (size_t)cols * 4); return;
  case SC_W_BF16:
    for (int c = 0; c < cols; c++) y[c] = bits_f32((uint32_t)(p[2 * c] | p[2 * c + 1] << 8) << 16);
    return;
  case SC_W_F16:
    for (int c = 0; c < cols; c++) y[c] = sc_f16_to_f32((uint16_t)(p[2 * c] | p[2 * c + 1] << 8));
    return;
  case SC_W_Q8_0:
    for (int b = 0; b < cols / SC_QK; b++, y += SC_QK) {
      const uint8_t *dp;
      size_t step;
      const uint8_t *q = q8g_block(p, cols / SC_QK, b, &dp, &step);
      const float d = blk_d(dp);
      for (int e = 0; e < SC_QK; e++) y[e] = d * (float)(int8_t)q[(e / 4) * step + e % 4];
    }
    return;
  case SC_W_Q4_0:
    for (int b = 0; b < cols / SC_QK; b++, y += SC_QK) {
      const uint8_t *dp;
      size_t step;
      const uint8_t *q = q4_block(p, cols / SC_QK, b, &dp, &step);
      const float d = blk_d(dp);
      for (int k = 0; k < SC_QK / 2; k++) {
        const uint8_t v = q[(k / 4) * step + k % 4];
        y[k] = d * (float)((v & 15) - 8);
        y[k + SC_QK / 2] = d * (float)((v >> 4) - 8);
      }
    }
    return;
  default:
    return;
  }
}

/* ---- portable quantized inner loops ------------------------------------ */

/* Activations: the same bits as the AVX2 version (see kernels.h). */
static void pquantize_q8(const float *x, int nb, int8_t *xq, float *xd, unsigned char *xp) {
  for (int b = 0; b < nb; b++) {
    const float *xb = x + b * SC_QK;
    float amax = 0.0f;
    for (int j = 0; j < SC_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    xd[b] = amax / 127.0f;
    for (int j = 0; j < SC_QK; j++) xq[b * SC_QK + j] = (int8_t)nearbyintf(xb[j] * id);
  }
  for (int g = 0; g < nb / SC_Q4_GROUP; g++) {
    unsigned char *o = xp + (size_t)g * SC_Q4_VIEW_GROUP;
    const int8_t *xg = xq + (size_t)g * SC_Q4_GROUP * SC_QK;
    int32_t s[8];
    float d[8];
    for (int c = 0; c < 4; c++)
      for (int h = 0; h < 2; h++)
        for (int j = 0; j < 8; j++)
          for (int i = 0; i < 4; i++) o[128 * h + 32 * c + 4 * j + i] = (unsigned char)xg[32 * j + 16 * h + 4 * c + i];
    for (int j = 0; j < 8; j++) {
      s[j] = 0;
      for (int k = 0; k < SC_QK; k++) s[j] += xg[32 * j + k];
      s[j] *= 8;
      d[j] = xd[g * SC_Q4_GROUP + j];
    }
    memcpy(o + 256, s, 32);
    memcpy(o + 288, d, 32);
  }
}

ALWAYS_INLINE void pdot_q4_0_n(const uint8_t *w, size_t rb, const int8_t *xq,
                               const float *xd, const unsigned char *xp, int nb, float *out,
                               const int N) {
  (void)xp;
  float acc[4] = {0};
  for (int b = 0; b < nb; b++) {
    const int8_t *y = xq + b * SC_QK;
    for (int r = 0; r < N; r++) {
      const uint8_t *dp;
      size_t step;
      const uint8_t *q = q4_block(w + r * rb, nb, b, &dp, &step);
      int s = 0;
      for (int k = 0; k < SC_QK / 2; k++) {
        const uint8_t v = q[(k / 4) * step + k % 4];
        s += ((v & 15) - 8) * y[k] + ((v >> 4) - 8) * y[k + SC_QK / 2];
      }
      acc[r] += (blk_d_fast(dp) * xd[b]) * (float)s;
    }
  }
  for (int r = 0; r < N; r++) out[r] = acc[r];
}

/* Per row: acc += (d_w * d_x) * isum, block by block, in block order (the
 * bytes where the grouped order has them). */
ALWAYS_INLINE void pdot_q8_0_n(const uint8_t *w, size_t rb, const int8_t *xq,
                                const float *xd, const unsigned char *xp, int nb, float *out,
                                const int N) {
  (void)xp;
  float acc[4] = {0};
  for (int b = 0; b < nb; b++) {
    const int8_t *y = xq + b * SC_QK;
    for (int r = 0; r < N; r++) {
      const uint8_t *dp;
      size_t step;
      const uint8_t *q = q8g_block(w + r * rb, nb, b, &dp, &step);
      int s = 0;
      for (int e = 0; e < SC_QK; e++) s += (int8_t)q[(e / 4) * step + e % 4] * y[e];
      acc[r] += (blk_d_fast(dp) * xd[b]) * (float)s;
    }
  }
  for (int r = 0; r < N; r++) out[r] = acc[r];
}

#define DEFINE_QDOT(NAME)                                                    \
  static void NAME##4(const uint8_t *w, size_t rb, const int8_t *xq,        \
                      const float *xd, const unsigned char *xp, int nb, float *out) { \
    NAME##n(w, rb, xq, xd, xp, nb, out, 4);                                 \
  }                                                                         \
  static void NAME##1(const uint8_t *w, size_t rb, const int8_t *xq,        \
                      const float *xd, const unsigned char *xp, int nb, float *out) { \
    NAME##n(w, rb, xq, xd, xp, nb, out, 1);                                 \
  }
DEFINE_QDOT(pdot_q8_0_)
DEFINE_QDOT(pdot_q4_0_)

const sc_kern_ops sc_kern_portable = {
    .name = "portable",
    .dot4_f32 = pdot_f32_4,
    .dot1_f32 = pdot_f32_1,
    .dot4_bf16 = pdot_bf16_4,
    .dot1_bf16 = pdot_bf16_1,
    .axpy = paxpy,
    .quantize_q8 = pquantize_q8,
    .dot4_q8_0 = pdot_q8_0_4,
    .dot1_q8_0 = pdot_q8_0_1,
    .dot4_q4_0 = pdot_q4_0_4,
    .dot1_q4_0 = pdot_q4_0_1,
};

/* ---- drivers ------------------------------------------------------------ */

/* The bands the drivers multiply (sc_bands.h), the quantized ones
 * against 8-bit activations. */
static int band_supported(int wtype) {
  return sc_band(wtype) && sc_band(wtype)->linear;
}

/* One linear or linear_swiglu call, as every thread's share sees it. */
typedef struct LinJob {
  const sc_kern_ops *ops;
  int wtype, T, rows, cols, acc, swiglu;
  size_t rb;             /* bytes of one weight row (sc_band_row_bytes) */
  const void *w;
  const float *bias, *x; /* x [T, ldx] */
  int ldx, ldy;
  float *y;              /* y [T, ldy] */
  const int8_t *xq;      /* quantized x [T, cols] (quantized bands) */
  const float *xd;       /* its block scales [T, cols/32] */
  const unsigned char *xp; /* its q4_0 view [T, 2*cols bytes] (kernels.h) */
  const float *xo;       /* f32 / bf16: x laid out by ops->gemm_x_order [T, cols], or NULL */
} LinJob;

/* out[0..n) = W[r0+i]·x[t] for n <= 4 rows. */
static void job_dot(const LinJob *j, size_t r0, int n, int t, float *out) {
  const sc_kern_ops *ops = j->ops;
  const int cols = j->cols;
  if (j->wtype == SC_W_F32 || j->wtype == SC_W_BF16) {
    const float *x = j->x + (size_t)t * j->ldx;
    if (j->wtype == SC_W_F32) {
      const float *wr = (const float *)j->w + r0 * (size_t)cols;
      if (n == 4) ops->dot4_f32(wr, x, cols, out);
      else
        for (int i = 0; i < n; i++) ops->dot1_f32(wr + (size_t)i * cols, x, cols, out + i);
    } else {
      const uint16_t *wr = (const uint16_t *)j->w + r0 * (size_t)cols;
      if (n == 4) ops->dot4_bf16(wr, x, cols, out);
      else
        for (int i = 0; i < n; i++) ops->dot1_bf16(wr + (size_t)i * cols, x, cols, out + i);
    }
    return;
  }
  const int nb = cols / SC_QK;
  const size_t rb = j->rb;
  const uint8_t *wr = (const uint8_t *)j->w + r0 * rb;
  const int8_t *xq = j->xq + (size_t)t * cols;
  const float *xd = j->xd + (size_t)t * nb;
  const unsigned char *xp = j->xp + (size_t)t * cols * 2;
  if (j->wtype == SC_W_Q8_0) {
    if (n == 4) ops->dot4_q8_0(wr, rb, xq, xd, xp, nb, out);
    else
      for (int i = 0; i < n; i++) ops->dot1_q8_0(wr + i * rb, rb, xq, xd, xp, nb, out + i);
  } else {
    if (n == 4) ops->dot4_q4_0(wr, rb, xq, xd, xp, nb, out);
    else
      for (int i = 0; i < n; i++) ops->dot1_q4_0(wr + i * rb, rb, xq, xd, xp, nb, out + i);
  }
}

/* The blocked form of job_dot, out[t * 4 + i] for tokens t0..t0+nt, or 0
 * when the ops have none for this band. */
static int job_gemm(const LinJob *j, size_t r0, int n, int t0, int nt, float *out) {
  const sc_kern_ops *ops = j->ops;
  const int cols = j->cols;
  switch (j->wtype) {
  case SC_W_F32:
    if (j->xo)
      ops->gemm_f32_ordered((const float *)j->w + r0 * (size_t)cols, n, j->xo + (size_t)t0 * cols, cols, nt,
                            cols, out, 4);
    else if (ops->gemm_f32)
      ops->gemm_f32((const float *)j->w + r0 * (size_t)cols, n, j->x + (size_t)t0 * j->ldx, j->ldx, nt, cols,
                    out, 4);
    else return 0;
    return 1;
  case SC_W_BF16:
    if (j->xo)
      ops->gemm_bf16_ordered((const uint16_t *)j->w + r0 * (size_t)cols, n, j->xo + (size_t)t0 * cols, cols,
                             nt, cols, out, 4);
    else if (ops->gemm_bf16)
      ops->gemm_bf16((const uint16_t *)j->w + r0 * (size_t)cols, n, j->x + (size_t)t0 * j->ldx, j->ldx, nt,
                     cols, out, 4);
    else return 0;
    return 1;
  default: {
    void (*g)(const uint8_t *, size_t, int, const int8_t *, const float *, const unsigned char *,
              int, int, float *, int) = j->wtype == SC_W_Q8_0 ? ops->gemm_q8_0 : ops->gemm_q4_0;
    if (!g) return 0;
    const int nb = cols / SC_QK;
    const size_t rb = j->rb;
    g((const uint8_t *)j->w + r0 * rb, rb, n, j->xq + (size_t)t0 * cols, j->xd + (size_t)t0 * nb,
      j->xp + (size_t)t0 * cols * 2, nb, nt, out, 4);
    return 1;
  }
  }
}

/* ---- the attention rows' shared ends (kernels.h) ------------------------ */

float sc_softmax_row(float *s, int n) {
  float m = -INFINITY, sum = 0.0f;
  for (int j = 0; j < n; j++)
    if (s[j] > m) m = s[j];
  for (int j = 0; j < n; j++) s[j] -= m;
  sc_expf_n(s, s, n);
  for (int j = 0; j < n; j++) sum += s[j];
  return sum;
}

void sc_attn_value_cols(const float *s, const float *vc, size_t ld, int lo, int n, int cap, int c0, int hd,
                        float inv, float *y) {
  for (int cc = c0; cc < hd; cc++) {
    float o = 0.0f;
    int row = lo % cap;
    for (int j = 0; j < n; j++) {
      o = fmaf(s[j], vc[(size_t)row * ld + cc], o);
      if (++row == cap) row = 0;
    }
    y[cc] = o * inv;
  }
}

/* SiLU's pieces (e^-x through sc_expf_n on the stack). */
#define SILU_PIECE 128

/* y[i] = x[i] / (1 + e^-x[i]) for m <= SILU_PIECE values (y may be x): the
 * one SiLU of the kernels, the bits of the generated code's scalar form
 * over K->expf. */
static void silu_piece(const float *x, float *y, int m) {
  float e[SILU_PIECE];
  if (m < 1) return;
  for (int i = 0; i < m; i++) e[i] = -x[i];
  sc_expf_n(e, e, m);
  for (int i = 0; i < m; i++) y[i] = x[i] / (1.0f + e[i]);
}

/* y[i] = silu(g[i]) * u[i] (y may be g or u). */
static void swiglu_n(const float *g, const float *u, float *y, int n) {
  for (int i0 = 0; i0 < n; i0 += SILU_PIECE) {
    const int m = n - i0 < SILU_PIECE ? n - i0 : SILU_PIECE;
    float sg[SILU_PIECE];
    silu_piece(g + i0, sg, m);
    for (int i = 0; i < m; i++) y[i0 + i] = sg[i] * u[i0 + i];
  }
}

/* Rows r..r+n of token t from their dots d (and, for SwiGLU, the up rows'
 * dots u): + bias, accumulate or SwiGLU. */
static void store_rows(const LinJob *j, int r, int n, int t, const float *d, const float *u) {
  float *yt = j->y + (size_t)t * j->ldy + r;
  if (j->swiglu) {
    swiglu_n(d, u, yt, n);
    return;
  }
  for (int i = 0; i < n; i++) {
    float v = d[i];
    if (j->bias) v += j->bias[r + i];
    yt[i] = j->acc ? yt[i] + v : v;
  }
}

/* Tokens per blocked call (a multiple of the tiles' token counts: AVX2 3,
 * AVX-512 6 and 4, NEON 4 and 2): the block of rows stays in L1 for all of
 * them.  A table may ask for up to GEMM_TOKENS_MAX a call for f32 / bf16
 * (ops->gemm_fl_tokens). */
#define GEMM_TOKENS 24
#define GEMM_TOKENS_MAX 64

/* Tokens a blocked call of this job takes at most. */
static int gemm_run(const LinJob *j) {
  const int ft = j->ops->gemm_fl_tokens;
  if ((j->wtype == SC_W_F32 || j->wtype == SC_W_BF16) && ft > 0 && ft <= GEMM_TOKENS_MAX) return ft;
  return GEMM_TOKENS;
}

/* Tokens t..t+nt (nt <= gemm_run(j)) of block b through the blocked form,
 * or 0 when the ops have none for this band. */
static int block_gemm(const LinJob *j, int b, int t, int nt) {
  const int r = 4 * b, n = j->rows - r < 4 ? j->rows - r : 4;
  float d[GEMM_TOKENS_MAX * 4], u[GEMM_TOKENS_MAX * 4];
  if (!job_gemm(j, (size_t)r, n, t, nt, d)) return 0;
  if (j->swiglu) job_gemm(j, (size_t)j->rows + r, n, t, nt, u);
  if (j->swiglu && n == 4) { /* one pass over the block's gates */
    swiglu_n(d, u, d, 4 * nt);
    for (int i = 0; i < nt; i++) memcpy(j->y + (size_t)(t + i) * j->ldy + r, d + 4 * i, 4 * sizeof *d);
    return 1;
  }
  for (int i = 0; i < nt; i++) store_rows(j, r, n, t + i, d + 4 * i, u + 4 * i);
  return 1;
}

/* Chunk c of n: an even share of the blocks of four rows.  For T > 1 each
 * block is reused across all T inputs while it is still in cache, through
 * the ops' blocked form when they have one.  SwiGLU: gate rows
 * w[0..rows), up rows w[rows..2*rows); each g and u is the exact value
 * linear() would produce for that row. */
static void lin_block(const LinJob *j, int b) {
  const int r = 4 * b, n = j->rows - r < 4 ? j->rows - r : 4;
  const int run = gemm_run(j);
  int t = 0;
  if (j->T > 1)
    for (; t < j->T; t += run)
      if (!block_gemm(j, b, t, j->T - t < run ? j->T - t : run)) break;
  for (; t < j->T; t++) {
    float d[4], u[4];
    job_dot(j, (size_t)r, n, t, d);
    if (j->swiglu) job_dot(j, (size_t)j->rows + r, n, t, u);
    store_rows(j, r, n, t, d, u);
  }
}

/* Blocks of rows that one run of tokens meets in turn: those tokens'
 * activations stay in L2 (L1 for q4_0's short runs) while the blocks'
 * rows (GEMM_GROUP x 4 of them, in L2 after the first run) pass. */
#define GEMM_GROUP 16

/* The tokens of a run that a group of blocks meets in turn, or 0 when
 * each block takes all of the job's tokens: q4_0 prompts with ops that
 * ask for runs of gemm_q4_0_tokens; f32 / bf16 prompts longer than one
 * call with ops that set gemm_fl_groups (the AVX2 table): there a
 * 500-token prompt's activations (2-6 MB) came from L3 once per block of
 * four rows, now once per GEMM_GROUP blocks (Zen 3, a 500-token bf16
 * prompt 1.06x on one thread, 1.05-1.19x on two, paired medians;
 * docs/PERFORMANCE.md).  Every output is the same tile's either way. */
static int group_run(const LinJob *j) {
  const sc_kern_ops *o = j->ops;
  if (j->T < 2) return 0;
  if (j->wtype == SC_W_Q4_0)
    return o->gemm_q4_0 && o->gemm_q4_0_tokens > 0 && o->gemm_q4_0_tokens <= GEMM_TOKENS ? o->gemm_q4_0_tokens : 0;
  if ((j->wtype == SC_W_F32 && o->gemm_f32) || (j->wtype == SC_W_BF16 && o->gemm_bf16))
    return o->gemm_fl_groups && j->T > gemm_run(j) ? gemm_run(j) : 0;
  return 0;
}

/* Blocks b0..b1 of the job: each by lin_block, or GEMM_GROUP blocks at a
 * time against each run of group_run(j) tokens. */
static void lin_blocks(const LinJob *j, int b0, int b1) {
  const int tc = group_run(j);
  if (tc > 0) {
    for (int g = b0; g < b1; g += GEMM_GROUP) {
      const int ge = b1 - g < GEMM_GROUP ? b1 : g + GEMM_GROUP;
      for (int t = 0; t < j->T; t += tc)
        for (int b = g; b < ge; b++) block_gemm(j, b, t, j->T - t < tc ? j->T - t : tc);
    }
    return;
  }
  for (int b = b0; b < b1; b++) lin_block(j, b);
}

/* Tokens from which a linear quantizes its activations on the pool (each
 * token's bits do not depend on the thread). */
#define QUANT_POOL_T 8

/* Chunk c of n of the tokens' activations, laid out by ops->gemm_x_order
 * into the linear's scratch (j->xo, which the job only reads after). */
static void order_chunk(void *arg, int c, int n) {
  const LinJob *j = arg;
  const int t0 = (int)((long long)j->T * c / n), t1 = (int)((long long)j->T * (c + 1) / n);
  for (int t = t0; t < t1; t++)
    j->ops->gemm_x_order(j->x + (size_t)t * j->ldx, j->cols, (float *)j->xo + (size_t)t * j->cols);
}

/* Chunk c of n of the tokens' activations, quantized into j->xq, xd, xp
 * (the linear's scratch, which the job's pointers only read after). */
static void quant_chunk(void *arg, int c, int n) {
  const LinJob *j = arg;
  const int nb = j->cols / SC_QK;
  const int t0 = (int)((long long)j->T * c / n), t1 = (int)((long long)j->T * (c + 1) / n);
  for (int t = t0; t < t1; t++)
    j->ops->quantize_q8(j->x + (size_t)t * j->ldx, nb, (int8_t *)j->xq + (size_t)t * j->cols,
                        (float *)j->xd + (size_t)t * nb, (unsigned char *)j->xp + (size_t)t * j->cols * 2);
}

/* Blocks of four rows whose gates one swiglu_n call takes (one token). */
#define SWIGLU_BLOCKS 16

static void lin_chunk(void *arg, int c, int n) {
  const LinJob *j = arg;
  const int nblk = (j->rows + 3) / 4;
  const int b0 = (int)((long long)nblk * c / n);
  const int b1 = (int)((long long)nblk * (c + 1) / n);
  if (j->swiglu && j->T == 1) { /* the dots of several blocks, then their SwiGLU at once */
    for (int b = b0; b < b1; b += SWIGLU_BLOCKS) {
      const int be = b1 - b < SWIGLU_BLOCKS ? b1 : b + SWIGLU_BLOCKS;
      const int r = 4 * b, nr = (4 * be < j->rows ? 4 * be : j->rows) - r;
      float d[4 * SWIGLU_BLOCKS], u[4 * SWIGLU_BLOCKS];
      for (int k = b; k < be; k++) {
        const int rk = 4 * k, nk = j->rows - rk < 4 ? j->rows - rk : 4;
        job_dot(j, (size_t)rk, nk, 0, d + (rk - r));
        job_dot(j, (size_t)j->rows + rk, nk, 0, u + (rk - r));
      }
      swiglu_n(d, u, j->y + r, nr);
    }
    return;
  }
  lin_blocks(j, b0, b1);
}

#if SC_HAVE_OPENBLAS
/* f32 weights with at least this many tokens go through OpenBLAS's sgemm,
 * in panels of BLAS_PANEL rows: a panel's rows are fixed by `rows` alone,
 * so the thread count changes nothing; OpenBLAS's own threads stay off
 * (ours split the panels).  Below it, and for the other bands, the ops'
 * blocked kernels keep T > 1 bit-identical to T = 1. */
#define BLAS_MIN_T 16
#define BLAS_PANEL 64

typedef struct BlasJob {
  const LinJob *j;
  float *tmp; /* [chunks][2][T * BLAS_PANEL] */
  int panels;
} BlasJob;

static void blas_chunk(void *arg, int c, int n) {
  const BlasJob *bj = arg;
  const LinJob *j = bj->j;
  const float *w = j->w;
  float *d = bj->tmp + (size_t)c * 2 * j->T * BLAS_PANEL, *u = d + (size_t)j->T * BLAS_PANEL;
  const int p0 = (int)((long long)bj->panels * c / n), p1 = (int)((long long)bj->panels * (c + 1) / n);
  for (int p = p0; p < p1; p++) {
    const int r = p * BLAS_PANEL, nr = j->rows - r < BLAS_PANEL ? j->rows - r : BLAS_PANEL;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->T, nr, j->cols, 1.0f, j->x, j->ldx,
                w + (size_t)r * j->cols, j->cols, 0.0f, d, nr);
    if (j->swiglu)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->T, nr, j->cols, 1.0f, j->x, j->ldx,
                  w + (size_t)(j->rows + r) * j->cols, j->cols, 0.0f, u, nr);
    for (int t = 0; t < j->T; t++) store_rows(j, r, nr, t, d + (size_t)t * nr, u + (size_t)t * nr);
  }
}

static void blas_single_thread(void) { openblas_set_num_threads(1); }

static int blas_run(LinJob *j, void *ctx) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, blas_single_thread);
  sc_pool *pool = pool_of(ctx);
  BlasJob bj = {.j = j, .panels = (j->rows + BLAS_PANEL - 1) / BLAS_PANEL};
  const int chunks = chunks_for(pool, bj.panels);
  void *owned = NULL;
  bj.tmp = get_scratch(ctx, (size_t)chunks * 2 * j->T * BLAS_PANEL * sizeof(float), &owned);
  if (!bj.tmp) {
    kern_error(ctx, "linear: out of memory for the f32 GEMM", j->T);
    return 0;
  }
  sc_pool_run(pool, blas_chunk, &bj, chunks);
  free(owned);
  return 1;
}
#endif

/* ---- bf16 activations on AMX tiles or AVX512-BF16 (kernels.h) -------- */

/* A bf16 linear whose caller allows bf16 activations (sc_kernel_ctx.
 * bf16_act) goes to the engine that setting resolves to (kernels_amx.c)
 * whatever its token count, when the rows are whole 32-column blocks:
 * every element is then the same arithmetic, so a stream decoded a frame
 * at a time gives the bits of one call over all of it (a few tokens waste
 * most of a tile, but such calls are bound by the weights' bytes, which
 * are the same).  Both engines read the same packed activations and write
 * the same 32 x 32 block of c. */
int sc_bf16act_engine(int bf16_act) {
  switch (bf16_act) {
  case SC_BF16ACT_BEST:
    return sc_amx_usable() ? SC_BF16ACT_AMX : sc_bf16dp_usable() ? SC_BF16ACT_DP : SC_BF16ACT_OFF;
  case SC_BF16ACT_AMX: return sc_amx_usable() ? SC_BF16ACT_AMX : SC_BF16ACT_OFF;
  case SC_BF16ACT_DP: return sc_bf16dp_usable() ? SC_BF16ACT_DP : SC_BF16ACT_OFF;
  default: return SC_BF16ACT_OFF;
  }
}

int sc_bf16act_setting(const char *e) {
  if (!e || !*e || !strcmp(e, "auto")) return SC_BF16ACT_BEST;
  if (!strcmp(e, "off") || !strcmp(e, "0")) return SC_BF16ACT_OFF;
  if (!strcmp(e, "amx")) return SC_BF16ACT_AMX;
  if (!strcmp(e, "avx512bf16")) return SC_BF16ACT_DP;
  return -1;
}

/* Weight rows per panel: a panel's bytes stay under this, so that it is
 * reused from L2 across the token blocks a thread runs against it. */
#define AMX_PANEL_BYTES (512 * 1024)

/* A causal conv's source (sc_kernels.conv1d): the im2col rows r0.. of
 * [state; x], packed without being made. */
typedef struct AmxConv {
  const float *x, *state;
  int ldx, S, C, k, d, r0;
} AmxConv;

typedef struct AmxJob {
  const LinJob *j;
  const AmxConv *conv;   /* NULL: the activations are j->x */
  uint16_t *xp;          /* the packed activations (sc_amx_pack) */
  const uint16_t *wlast; /* the last row block padded to 32 rows, or NULL */
  int nkb;               /* 32-column blocks */
  int ntb;               /* blocks of 32 tokens */
  int nrb;               /* blocks of 32 rows */
  int prb;               /* row blocks per panel */
  int items;             /* panels x token blocks */
  int engine;            /* SC_BF16ACT_AMX or SC_BF16ACT_DP */
  uint32_t *xt;          /* DP and a conv: its source transposed */
  int ldt, nsrc;         /* (sc_bf16dp_pack_convt), tokens per row, rows */
} AmxJob;

static void amx_pack_chunk(void *arg, int c, int n) {
  const AmxJob *a = arg;
  const int blocks = 2 * a->ntb; /* of 16 tokens */
  const int b0 = (int)((long long)blocks * c / n), b1 = (int)((long long)blocks * (c + 1) / n);
  const AmxConv *v = a->conv;
  if (a->xt) { /* units of 16 channel pairs x 16 tokens, pair-block major */
    const int nsb = a->ldt / 16, units = v->C / 32 * nsb;
    const int u0 = (int)((long long)units * c / n), u1 = (int)((long long)units * (c + 1) / n);
    for (int u = u0; u < u1;) {
      const int cb = u / nsb, sb0 = u % nsb, sb1 = u1 - cb * nsb < nsb ? u1 - cb * nsb : nsb;
      sc_bf16dp_pack_convt(v->state, v->S, v->x, v->ldx, v->r0, a->nsrc, v->C, 16 * cb, 16 * cb + 16, 16 * sb0,
                           16 * sb1, a->xt, a->ldt);
      u += sb1 - sb0;
    }
    return;
  }
  if (v) sc_amx_pack_conv(v->state, v->S, v->x, v->ldx, v->r0, a->j->T, v->C, v->k, v->d, b0, b1, a->xp);
  else sc_amx_pack(a->j->x, a->j->ldx, a->j->T, a->j->cols, b0, b1, a->xp);
}

/* Items in panel-major order: item i is token block i % ntb of panel
 * i / ntb, so a thread's consecutive items share the panel's rows. */
static void amx_chunk(void *arg, int c, int n) {
  const AmxJob *a = arg;
  const LinJob *j = a->j;
  const int i0 = (int)((long long)a->items * c / n), i1 = (int)((long long)a->items * (c + 1) / n);
  _Alignas(64) float tile[32 * 32];
  const int amx = a->engine == SC_BF16ACT_AMX;
  if (amx) sc_amx_begin();
  for (int i = i0; i < i1; i++) {
    const int p = i / a->ntb, tb = i % a->ntb;
    const int rb1 = (p + 1) * a->prb < a->nrb ? (p + 1) * a->prb : a->nrb;
    const uint16_t *b0 = a->xp + (size_t)(2 * tb) * a->nkb * 512, *b1 = b0 + (size_t)a->nkb * 512;
    const int t0 = 32 * tb, nt = j->T - t0 < 32 ? j->T - t0 : 32;
    for (int rb = p * a->prb; rb < rb1; rb++) {
      const int r0 = 32 * rb, nr = j->rows - r0 < 32 ? j->rows - r0 : 32;
      const uint16_t *w = nr < 32 ? a->wlast : (const uint16_t *)j->w + (size_t)r0 * j->cols;
      if (a->xt)
        sc_bf16dp_conv_tile(w, (size_t)j->cols, a->xt, (size_t)a->ldt, t0, a->conv->C, a->conv->k, a->conv->d, nr,
                            nt, tile);
      else sc_amx_tile(w, (size_t)j->cols, b0, b1, a->nkb, tile);
      sc_amx_store(tile, nr, nt, j->bias ? j->bias + r0 : NULL, j->acc, j->y + (size_t)t0 * j->ldy + r0,
                   (size_t)j->ldy);
    }
  }
  if (amx) sc_amx_end();
}

static int amx_applies(const LinJob *j, void *ctx) {
  const sc_kernel_ctx *c = ctx;
  return c && c->bf16_act && j->wtype == SC_W_BF16 && j->cols % 32 == 0 && j->ops != &sc_kern_portable &&
         (!j->swiglu || c->bf16_act_min_t) && j->T >= c->bf16_act_min_t && !c->rowwise &&
         sc_bf16act_engine(c->bf16_act);
}

/* AVX512-BF16: the tokens per pass whose transposed source fits this
 * (packed, then read by the tiles while it is still in L2). */
#define DP_SOURCE_BYTES (512 * 1024)

static void amx_run_one(LinJob *j, void *ctx, const AmxConv *conv);

static void amx_run_rows(LinJob *j, void *ctx, const AmxConv *conv);

/* SwiGLU (an LM's prefill): the gate and up rows as one linear of 2 * rows
 * into a buffer, in passes of SWIGLU_PASS tokens, then silu(g) * u as
 * store_rows computes it. */
#define SWIGLU_PASS 128

typedef struct SwigluJob {
  const LinJob *j;
  const float *gu; /* [T][2 * rows]: gate, then up */
  int t0, T;
} SwigluJob;

static void swiglu_chunk(void *arg, int c, int n) {
  const SwigluJob *s = arg;
  const int a = (int)((long long)s->T * c / n), b = (int)((long long)s->T * (c + 1) / n);
  for (int t = a; t < b; t++) {
    const float *d = s->gu + (size_t)t * 2 * s->j->rows;
    store_rows(s->j, 0, s->j->rows, s->t0 + t, d, d + s->j->rows);
  }
}

static void amx_run(LinJob *j, void *ctx, const AmxConv *conv) {
  if (!j->swiglu) {
    amx_run_rows(j, ctx, conv);
    return;
  }
  const int pass = j->T < SWIGLU_PASS ? j->T : SWIGLU_PASS;
  float *gu = NULL;
  if (posix_memalign((void **)&gu, 64, (size_t)pass * 2 * j->rows * sizeof(float))) {
    kern_error(ctx, "linear_swiglu: out of memory for the bf16 activations' gate and up", j->T);
    return;
  }
  for (int t0 = 0; t0 < j->T; t0 += pass) {
    LinJob g = *j;
    g.swiglu = 0;
    g.rows = 2 * j->rows;
    g.T = j->T - t0 < pass ? j->T - t0 : pass;
    g.x = j->x + (size_t)t0 * j->ldx;
    g.y = gu;
    g.ldy = 2 * j->rows;
    g.bias = NULL;
    g.acc = 0;
    amx_run_rows(&g, ctx, NULL);
    if (((const sc_kernel_ctx *)ctx)->failed) break;
    SwigluJob sj = {.j = j, .gu = gu, .t0 = t0, .T = g.T};
    sc_pool *pool = pool_of(ctx);
    sc_pool_run(pool, swiglu_chunk, &sj, chunks_for(pool, g.T));
  }
  free(gu);
}

static void amx_run_rows(LinJob *j, void *ctx, const AmxConv *conv) {
  if (sc_bf16act_engine(((const sc_kernel_ctx *)ctx)->bf16_act) != SC_BF16ACT_DP) {
    amx_run_one(j, ctx, conv);
    return;
  }
  /* on AVX512-BF16 a linear is a conv of one tap without a state, and
   * long calls go in passes of whole 32-token blocks (the bits do not
   * depend on where a pass starts) */
  const AmxConv one = {.x = j->x, .ldx = j->ldx, .C = j->cols, .k = 1, .d = 1};
  if (!conv) conv = &one;
  int pass = (int)(DP_SOURCE_BYTES / ((size_t)conv->C * 2) / 32 * 32);
  if (pass < 256) pass = 256;
  const int T = j->T;
  for (int t0 = 0; t0 < T; t0 += pass) {
    LinJob jp = *j;
    AmxConv vp = *conv;
    jp.T = T - t0 < pass ? T - t0 : pass;
    jp.y = j->y + (size_t)t0 * j->ldy;
    vp.r0 += t0;
    amx_run_one(&jp, ctx, &vp);
  }
}

static void amx_run_one(LinJob *j, void *ctx, const AmxConv *conv) {
  AmxJob a = {.j = j, .conv = conv, .nkb = j->cols / 32, .ntb = (j->T + 31) / 32, .nrb = (j->rows + 31) / 32,
              .engine = sc_bf16act_engine(((const sc_kernel_ctx *)ctx)->bf16_act)};
  const size_t rowblock_bytes = (size_t)32 * j->cols * sizeof(uint16_t);
  a.prb = (int)(AMX_PANEL_BYTES / rowblock_bytes);
  if (a.prb < 1) a.prb = 1;
  a.items = (a.nrb + a.prb - 1) / a.prb * a.ntb;
  size_t xp_bytes = (size_t)a.ntb * 32 * j->cols * sizeof(uint16_t);
  if (conv && a.engine == SC_BF16ACT_DP) { /* the source once, not k times */
    a.nsrc = j->T + conv->S;
    a.ldt = (32 * a.ntb + conv->S + 15) / 16 * 16;
    xp_bytes = (size_t)conv->C / 2 * a.ldt * sizeof(uint32_t);
  }
  const int rlast = j->rows % 32;
  void *owned = NULL;
  unsigned char *buf = get_scratch(ctx, xp_bytes + (rlast ? rowblock_bytes : 0), &owned);
  if (!buf) {
    kern_error(ctx, "linear: out of memory for the bf16 activations", j->T);
    return;
  }
  a.xp = (uint16_t *)buf;
  if (a.nsrc) a.xt = (uint32_t *)buf;
  if (rlast) {
    uint16_t *wl = (uint16_t *)(buf + xp_bytes);
    memcpy(wl, (const uint16_t *)j->w + (size_t)(j->rows - rlast) * j->cols,
           (size_t)rlast * j->cols * sizeof(uint16_t));
    memset(wl + (size_t)rlast * j->cols, 0, (size_t)(32 - rlast) * j->cols * sizeof(uint16_t));
    a.wlast = wl;
  }
  sc_pool *pool = pool_of(ctx);
  sc_pool_run(pool, amx_pack_chunk, &a, chunks_for(pool, a.xt ? conv->C / 32 * (a.ldt / 16) : 2 * a.ntb));
  sc_pool_run(pool, amx_chunk, &a, chunks_for(pool, a.items));
  free(owned);
}

static void linear_run(const char *what, LinJob *j, void *ctx) {
  if (!band_supported(j->wtype)) {
    char msg[64];
    snprintf(msg, sizeof msg, "%s: unsupported weight band", what);
    kern_error(ctx, msg, j->wtype);
    return;
  }
  j->rb = sc_band_row_bytes(j->wtype, j->cols);
  if (amx_applies(j, ctx)) {
    amx_run(j, ctx, NULL);
    return;
  }
#if SC_HAVE_OPENBLAS
  if (j->wtype == SC_W_F32 && j->T >= BLAS_MIN_T && j->ops != &sc_kern_portable &&
      !(ctx && ((const sc_kernel_ctx *)ctx)->rowwise)) {
    blas_run(j, ctx);
    return;
  }
#endif
  void *owned = NULL;
  if (sc_band_quantized(j->wtype)) {
    if (j->cols % SC_QK) {
      char msg[96];
      snprintf(msg, sizeof msg, "%s: q8_0/q4_0 rows need cols a multiple of 32", what);
      kern_error(ctx, msg, j->cols);
      return;
    }
    /* the activations, quantized once for every thread: scales, q, then
     * the q4_0 view (64-byte aligned pieces; cols is a multiple of 32) */
    const int nb = j->cols / SC_QK;
    size_t dbytes = ((size_t)j->T * nb * sizeof(float) + 63) & ~(size_t)63;
    size_t qbytes = (size_t)j->T * j->cols;
    unsigned char *buf = get_scratch(ctx, dbytes + 3 * qbytes, &owned);
    if (!buf) {
      kern_error(ctx, "linear: out of memory for quantized activations", j->T * j->cols);
      return;
    }
    float *xd = (float *)buf;
    int8_t *xq = (int8_t *)(buf + dbytes);
    unsigned char *xp = buf + dbytes + qbytes;
    j->xq = xq;
    j->xd = xd;
    j->xp = xp;
    sc_pool *pool = pool_of(ctx);
    if (j->T >= QUANT_POOL_T && sc_pool_threads(pool) > 1) /* a prompt's tokens on every thread */
      sc_pool_run(pool, quant_chunk, j, chunks_for(pool, j->T));
    else
      quant_chunk(j, 0, 1);
  } else if (j->T > 1 && j->ops->gemm_x_order &&
             ((j->wtype == SC_W_BF16 && j->ops->gemm_bf16_ordered) ||
              (j->wtype == SC_W_F32 && j->ops->gemm_f32_ordered))) {
    /* a prompt's activations in the order the table's GEMM reads them,
     * once for all the rows */
    float *xo = get_scratch(ctx, (size_t)j->T * j->cols * sizeof(float), &owned);
    if (!xo) {
      kern_error(ctx, "linear: out of memory for the prompt's activations", j->T * j->cols);
      return;
    }
    j->xo = xo;
    sc_pool *pool = pool_of(ctx);
    if (j->T >= QUANT_POOL_T && sc_pool_threads(pool) > 1)
      sc_pool_run(pool, order_chunk, j, chunks_for(pool, j->T));
    else
      order_chunk(j, 0, 1);
  }
  sc_pool *pool = pool_of(ctx);
  sc_pool_run(pool, lin_chunk, j, chunks_for(pool, (j->rows + 3) / 4));
  free(owned);
}

/* ---- a batch of linear calls in one pool job (the experts of MoE) ------ */

/* The batch as the threads see it: every task's blocks of four rows in
 * one numbering, task i's from first[i]. */
typedef struct BatchJob {
  LinJob *jobs;
  const int *first; /* [n + 1] */
  int n;
} BatchJob;

static void batch_chunk(void *arg, int c, int nc) {
  const BatchJob *bj = arg;
  const int units = bj->first[bj->n];
  const int u0 = (int)((long long)units * c / nc), u1 = (int)((long long)units * (c + 1) / nc);
  int i = 0;
  for (int u = u0; u < u1; u++) {
    while (u >= bj->first[i + 1]) i++;
    lin_block(&bj->jobs[i], u - bj->first[i]);
  }
}

int sc_linear_batch(const sc_kern_ops *ops, void *ctx, const sc_lin_task *t, int n, const char *what) {
  if (n < 1) return 0;
  /* scratch: the jobs, the block numbering, then each quantized task's
   * activations (scales, q, q4_0 view; 64-byte aligned pieces) */
  size_t head = ((size_t)n * sizeof(LinJob) + (size_t)(n + 1) * sizeof(int) + 63) & ~(size_t)63, bytes = head;
  for (int i = 0; i < n; i++) {
    if (!band_supported(t[i].wtype) || t[i].T < 1 || t[i].rows < 1 || t[i].cols < 1 ||
        (sc_band_quantized(t[i].wtype) && t[i].cols % SC_QK)) {
      char msg[96];
      snprintf(msg, sizeof msg, "%s: unsupported band or shape (q8_0/q4_0 need cols a multiple of 32)", what);
      kern_error(ctx, msg, t[i].cols);
      return -1;
    }
    if (sc_band_quantized(t[i].wtype))
      bytes += (((size_t)t[i].T * (t[i].cols / SC_QK) * sizeof(float) + 63) & ~(size_t)63) +
               3 * (size_t)t[i].T * t[i].cols;
  }
  void *owned = NULL;
  unsigned char *buf = get_scratch(ctx, bytes, &owned);
  if (!buf) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s: out of memory for the batch's activations", what);
    kern_error(ctx, msg, n);
    return -1;
  }
  LinJob *jobs = (LinJob *)buf;
  int *first = (int *)(buf + (size_t)n * sizeof(LinJob));
  unsigned char *q = buf + head;
  first[0] = 0;
  for (int i = 0; i < n; i++) {
    LinJob *j = &jobs[i];
    *j = (LinJob){.ops = ops, .wtype = t[i].wtype, .T = t[i].T, .rows = t[i].rows, .cols = t[i].cols,
                  .swiglu = t[i].swiglu, .w = t[i].w, .x = t[i].x, .ldx = t[i].ldx, .ldy = t[i].ldy, .y = t[i].y,
                  .rb = sc_band_row_bytes(t[i].wtype, t[i].cols)};
    if (sc_band_quantized(j->wtype)) {
      const int nb = j->cols / SC_QK;
      const size_t dbytes = ((size_t)j->T * nb * sizeof(float) + 63) & ~(size_t)63, qbytes = (size_t)j->T * j->cols;
      float *xd = (float *)q;
      int8_t *xq = (int8_t *)(q + dbytes);
      unsigned char *xp = q + dbytes + qbytes;
      for (int r = 0; r < j->T; r++)
        ops->quantize_q8(j->x + (size_t)r * j->ldx, nb, xq + (size_t)r * j->cols, xd + (size_t)r * nb,
                         xp + (size_t)r * j->cols * 2);
      j->xq = xq, j->xd = xd, j->xp = xp;
      q += dbytes + 3 * qbytes;
    }
    first[i + 1] = first[i] + (j->rows + 3) / 4;
  }
  sc_pool *pool = pool_of(ctx);
  BatchJob bj = {.jobs = jobs, .first = first, .n = n};
  sc_pool_run(pool, batch_chunk, &bj, chunks_for(pool, first[n]));
  free(owned);
  return 0;
}

static void linear_impl(const sc_kern_ops *ops, void *ctx, int wtype,
                        const void *w, const float *bias, const float *x,
                        int ldx, float *y, int ldy, int T, int rows, int cols,
                        int acc) {
  LinJob j = {.ops = ops, .wtype = wtype, .T = T, .rows = rows, .cols = cols,
              .acc = acc, .w = w, .bias = bias, .x = x, .ldx = ldx, .ldy = ldy,
              .y = y};
  linear_run("linear", &j, ctx);
}

/* The fused causal conv, piece rows at a time (the last piece up to
 * 2*piece - 1): on AMX tiles the pieces are packed straight from [state;
 * x] (the bits of packing the im2col rows), on AVX512-BF16 the whole call
 * at once from its transposed source; otherwise each piece's im2col rows
 * go to col and through linear(). */
static void conv1d_impl(const sc_kern_ops *ops, void *ctx, int wtype, const void *w, const float *bias,
                        const float *x, int ldx, float *state, float *col, int piece, float *y, int ldy, int R,
                        int C, int k, int d, int O) {
  const int S = (k - 1) * d, kc = k * C;
  if (sc_conv_bad(ctx, "conv1d", R, C, k, d, S, state)) return;
  if (piece < 1 || O < 1) {
    kern_error(ctx, "conv1d: the piece and the output channels must be >= 1", piece < 1 ? piece : O);
    return;
  }
  LinJob j = {.ops = ops, .wtype = wtype, .rows = O, .cols = kc, .w = w, .bias = bias, .x = col, .ldx = kc,
              .ldy = ldy};
  const int amx = C % 32 == 0 && amx_applies(&j, ctx);
  if (amx) j.rb = sc_band_row_bytes(wtype, kc);
  /* AVX512-BF16 packs the source, not the im2col rows: no pieces, so
   * the weights (8 MB for a 768-channel conv7) are read once per call */
  if (amx && sc_bf16act_engine(((const sc_kernel_ctx *)ctx)->bf16_act) == SC_BF16ACT_DP) piece = R;
  for (int r0 = 0; r0 < R;) {
    const int nr = R - r0 < 2 * piece ? R - r0 : piece;
    j.T = nr;
    j.y = y + (size_t)r0 * ldy;
    if (amx) {
      const AmxConv v = {.x = x, .state = state, .ldx = ldx, .S = S, .C = C, .k = k, .d = d, .r0 = r0};
      amx_run(&j, ctx, &v);
    } else {
      sc_im2col(ctx, x + (size_t)r0 * ldx, ldx, state, col, kc, nr, C, k, d);
      linear_impl(ops, ctx, wtype, w, bias, col, kc, j.y, ldy, nr, O, kc, 0);
    }
    r0 += nr;
  }
  if (amx) sc_conv_state_push(state, S, C, x, ldx, R);
}

static void swiglu_impl(const sc_kern_ops *ops, void *ctx, int wtype,
                        const void *w, const float *x, int ldx, float *y,
                        int ldy, int T, int rows, int cols) {
  LinJob j = {.ops = ops, .wtype = wtype, .T = T, .rows = rows, .cols = cols,
              .swiglu = 1, .w = w, .x = x, .ldx = ldx, .ldy = ldy, .y = y};
  linear_run("linear_swiglu", &j, ctx);
}

/* Scores up to this many keys live on the stack; longer spans use the
 * context's scratch, one row per chunk. */
#define ATTN_STACK_KEYS 2048

typedef struct AttnJob {
  const sc_kern_ops *ops;
  const float *q, *kc, *vc;
  float *y;
  int ldq, ldkv, cap, ldy, T, pos, heads, group, hd, window, span;
  const int *row_pos;          /* [T] or NULL (sc_kernels.attention) */
  const long long *row_state;  /* [T] or NULL */
  float scale;
  float *spill; /* [chunks, span] when span > ATTN_STACK_KEYS; [chunks, SC_ATTN_ROWS, span] for rows */
  int blocks;   /* > 0: the ops' attn_rows, on blocks of SC_ATTN_ROWS queries of a head */
} AttnJob;

/* Query t's position, and the first key it sees. */
static int attn_pos(const AttnJob *j, int t) { return j->row_pos ? j->row_pos[t] : j->pos + t; }
static int attn_lo(int p, int window) { return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0; }

/* Chunk c of nc of a prompt's (head, block of SC_ATTN_ROWS queries) pairs,
 * head by head, through ops->attn_rows: each run of queries in a block
 * that start at the same key in one call (all of them, unless a window
 * slides), so the head's keys and values are read once per call rather
 * than once per query. */
static void attn_rows_chunk(const AttnJob *j, int c, int nc) {
  const int units = j->heads * j->blocks, hd = j->hd;
  const int u0 = (int)((long long)units * c / nc);
  const int u1 = (int)((long long)units * (c + 1) / nc);
  float *s = j->spill + (size_t)c * SC_ATTN_ROWS * j->span;
  for (int u = u0; u < u1; u++) {
    const int h = u / j->blocks, b = u % j->blocks;
    const int te = j->T - b * SC_ATTN_ROWS < SC_ATTN_ROWS ? j->T : (b + 1) * SC_ATTN_ROWS;
    const float *kc = j->kc + (size_t)(h / j->group) * hd, *vc = j->vc + (size_t)(h / j->group) * hd;
    for (int t0 = b * SC_ATTN_ROWS; t0 < te;) {
      const int lo = attn_lo(attn_pos(j, t0), j->window);
      int n[SC_ATTN_ROWS], t1 = t0;
      for (; t1 < te && attn_lo(attn_pos(j, t1), j->window) == lo; t1++) n[t1 - t0] = attn_pos(j, t1) - lo + 1;
      j->ops->attn_rows(j->q + (size_t)t0 * j->ldq + (size_t)h * hd, j->ldq, t1 - t0, kc, vc, (size_t)j->ldkv, lo,
                        n, j->cap, hd, j->scale, s, j->span, j->y + (size_t)t0 * j->ldy + (size_t)h * hd, j->ldy);
      t0 = t1;
    }
  }
}

/* One (query, head) at a time: scores over the visible keys, float softmax
 * with the max subtracted, weighted sum of values.  Chunk c of n is an even
 * share of the T*heads pairs (a prompt's blocks: attn_rows_chunk). */
static void attn_chunk(void *arg, int c, int nc) {
  const AttnJob *j = arg;
  if (j->blocks) {
    attn_rows_chunk(j, c, nc);
    return;
  }
  float stack[ATTN_STACK_KEYS];
  float *s = j->span > ATTN_STACK_KEYS ? j->spill + (size_t)c * j->span : stack;
  const int units = j->T * j->heads, hd = j->hd;
  const int u0 = (int)((long long)units * c / nc);
  const int u1 = (int)((long long)units * (c + 1) / nc);
  for (int u = u0; u < u1; u++) {
    const int t = u / j->heads, h = u % j->heads, p = attn_pos(j, t);
    const int lo = attn_lo(p, j->window);
    const int n = p - lo + 1;
    const float *qh = j->q + (size_t)t * j->ldq + (size_t)h * hd;
    const ptrdiff_t sb = j->row_state ? (ptrdiff_t)j->row_state[t] : 0; /* its state block */
    const float *kc = (const float *)((const char *)j->kc + sb) + (size_t)(h / j->group) * hd;
    const float *vc = (const float *)((const char *)j->vc + sb) + (size_t)(h / j->group) * hd;
    float *yh = j->y + (size_t)t * j->ldy + (size_t)h * hd;
    if (j->ops->attn_row) {
      j->ops->attn_row(qh, kc, vc, (size_t)j->ldkv, lo, n, j->cap, hd, j->scale, s, yh);
      continue;
    }
    for (int k = 0; k < n; k++) {
      const float *kr = kc + (size_t)((lo + k) % j->cap) * j->ldkv;
      float d;
      j->ops->dot1_f32(qh, kr, hd, &d);
      s[k] = d * j->scale;
    }
    const float sum = sc_softmax_row(s, n);
    memset(yh, 0, (size_t)hd * sizeof *yh);
    for (int k = 0; k < n; k++)
      j->ops->axpy(yh, s[k], vc + (size_t)((lo + k) % j->cap) * j->ldkv, hd);
    const float inv = 1.0f / sum;
    for (int i = 0; i < hd; i++) yh[i] *= inv;
  }
}

/* The most keys any query of j sees (its score row), or -1 after an error
 * is recorded: a position below 0, or keys the ring no longer holds.  The
 * caller has written all new rows before the call, so the rows from a
 * query's first key to the last new position of its state block must
 * still be in the ring, or it would read overwritten keys.  Rows placed
 * one by one (row_pos) are checked each against its own keys: which of
 * them share a state block is the caller's contract (sc_io). */
static int attn_span(const AttnJob *j, void *ctx) {
  int span = 0, live = 0;
  if (!j->row_pos) {
    if (j->pos < 0) {
      kern_error(ctx, "attention: bad cache capacity, position or window", j->pos);
      return -1;
    }
    span = j->pos + j->T;
    live = span - attn_lo(j->pos, j->window);
  }
  for (int t = 0; j->row_pos && t < j->T; t++) {
    const int p = j->row_pos[t];
    if (p < 0) {
      kern_error(ctx, "attention: a row's position is negative", p);
      return -1;
    }
    if (p + 1 > span) span = p + 1;
    if (p + 1 - attn_lo(p, j->window) > live) live = p + 1 - attn_lo(p, j->window);
  }
  if (live > j->cap) {
    kern_error(ctx, "attention: keys visible to the queries exceed the cache rows", live);
    return -1;
  }
  return j->window > 0 && j->window < span ? j->window : span;
}

/* Causal attention; y must not overlap q or the caches. */
static void attention_impl(const sc_kern_ops *ops, void *ctx, const float *q,
                           int ldq, const float *kc, const float *vc, int ldkv,
                           int cap, float *y, int ldy, int T, int pos,
                           const int *row_pos, const long long *row_state,
                           int heads, int kv_heads, int hd, float scale,
                           int window) {
  if (kv_heads <= 0 || heads % kv_heads != 0) {
    kern_error(ctx, "attention: heads is not a multiple of kv_heads", kv_heads);
    return;
  }
  if (cap <= 0 || window < 0) {
    kern_error(ctx, "attention: bad cache capacity, position or window", cap <= 0 ? cap : window);
    return;
  }
  AttnJob j = {.ops = ops, .q = q, .kc = kc, .vc = vc, .y = y, .ldq = ldq,
               .ldkv = ldkv, .cap = cap, .ldy = ldy, .T = T, .pos = pos,
               .heads = heads, .group = heads / kv_heads, .hd = hd,
               .window = window, .row_pos = row_pos, .row_state = row_state,
               .scale = scale};
  if ((j.span = attn_span(&j, ctx)) < 0) return;
  const int span = j.span;
  sc_pool *pool = pool_of(ctx);
  /* a prompt's queries in blocks (attn_rows) when all share one cache
   * (not rows of several sessions, row_state) in order (not row_pos) */
  if (ops->attn_rows && T > 1 && !row_pos && !row_state) j.blocks = (T + SC_ATTN_ROWS - 1) / SC_ATTN_ROWS;
  const int chunks = chunks_for(pool, j.blocks ? heads * j.blocks : T * heads);
  void *owned = NULL;
  if (j.blocks || span > ATTN_STACK_KEYS) {
    size_t n = (size_t)chunks * (size_t)span * sizeof(float) * (j.blocks ? SC_ATTN_ROWS : 1);
    if (!(j.spill = get_scratch(ctx, n, &owned))) {
      kern_error(ctx, "attention: out of memory for scores", span);
      return;
    }
  }
  sc_pool_run(pool, attn_chunk, &j, chunks);
  free(owned);
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
                                 int T, int pos, const int *row_pos,       \
                                 const long long *row_state, int heads,    \
                                 int kv_heads, int hd, float scale,        \
                                 int window) {                             \
    attention_impl(OPS, ctx, q, ldq, kc, vc, ldkv, cap, y, ldy, T, pos,    \
                   row_pos, row_state, heads, kv_heads, hd, scale, window); \
  }                                                                        \
  static void moe_##SUFFIX(void *ctx, int wt_gu, const void *wgu,          \
                           int wt_d, const void *wd, const float *x,       \
                           int ldx, const float *route, int ldr,           \
                           const float *sh, int lds, const float *sg,      \
                           int ldg, float *y, int ldy, void *tmp, int T,   \
                           int E, int k, int inter, int H) {               \
    sc_moe_impl(OPS, ctx, wt_gu, wgu, wt_d, wd, x, ldx, route, ldr, sh,    \
                lds, sg, ldg, y, ldy, tmp, T, E, k, inter, H);             \
  }                                                                        \
  static void conv1d_##SUFFIX(void *ctx, int wtype, const void *w,         \
                              const float *bias, const float *x, int ldx,  \
                              float *state, float *col, int piece,         \
                              float *y, int ldy, int R, int C, int k,      \
                              int d, int O) {                              \
    conv1d_impl(OPS, ctx, wtype, w, bias, x, ldx, state, col, piece, y,    \
                ldy, R, C, k, d, O);                                       \
  }

DEFINE_ENTRIES(portable, &sc_kern_portable)
DEFINE_ENTRIES(avx2, &sc_kern_avx2)
DEFINE_ENTRIES(avx512, &sc_kern_avx512)
DEFINE_ENTRIES(avx512vnni, &sc_kern_avx512vnni)
DEFINE_ENTRIES(avx512vnni256, &sc_kern_avx512vnni256)
DEFINE_ENTRIES(neon, &sc_kern_neon)
DEFINE_ENTRIES(neon_dotprod, &sc_kern_neon_dotprod)

static float k_sqrtf(float v) { return sqrtf(v); }
static float k_logf(float v) { return logf(v); }
static float k_erff(float v) { return erff(v); }

/* sc_kernels.silu: the generated code's SILU, vectorized; the same
 * expression as its scalar form over K->expf (sc_expf1), so the same bits. */
static void k_silu(void *ctx, const float *x, int ldx, float *y, int ldy, int R, int C) {
  (void)ctx;
  for (int t = 0; t < R; t++)
    for (int c0 = 0; c0 < C; c0 += SILU_PIECE)
      silu_piece(x + (size_t)t * ldx + c0, y + (size_t)t * ldy + c0, C - c0 < SILU_PIECE ? C - c0 : SILU_PIECE);
}

static void fill_common(sc_kernels *K, void *ctx) {
  memset(K, 0, sizeof *K);
  K->abi_version = SC_ABI_VERSION;
  K->ctx = ctx;
  K->expf = sc_expf1;
  K->silu = k_silu;
  K->sqrtf = k_sqrtf;
  K->logf = k_logf;
  K->erff = k_erff;
  K->error = kern_error;
  sc_kernels_rows_fill(K);
}

void sc_kernels_init_portable(sc_kernels *K, void *ctx) {
  f16_table_once();
  fill_common(K, ctx);
  K->linear = linear_portable;
  K->linear_swiglu = swiglu_portable;
  K->attention = attention_portable;
  K->moe = moe_portable;
  K->conv1d = conv1d_portable;
  sc_kernels_codec_fill(K, &sc_kern_portable);
  sc_kernels_gdn_fill(K);
  sc_kernels_moe_fill(K);
}

/* ---- ISA selection ------------------------------------------------------ */

/* Whether this CPU runs an ISA's kernels: the features each file was
 * compiled for (its table is empty when they were not). */
static int cpu_has_avx2(void) {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         sc_cpu_has("f16c") > 0; /* cpu.c: clang < 16 */
#else
  return 0;
#endif
}

/* kernels_avx512.c also uses AVX2, FMA and F16C, which every AVX-512 CPU
 * has; the builtin checks that the OS saves the zmm state. */
static int cpu_has_avx512(void) {
  return cpu_has_avx2() && sc_cpu_has("avx512f") > 0 && sc_cpu_has("avx512bw") > 0 &&
         sc_cpu_has("avx512vl") > 0;
}

static int cpu_has_avx512vnni(void) { return cpu_has_avx512() && sc_cpu_has("avx512vnni") > 0; }

static int cpu_has_neon(void) {
#if defined(__aarch64__)
  return 1; /* ASIMD is baseline on AArch64 */
#else
  return 0;
#endif
}

static int cpu_has_dotprod(void) {
#if defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD)
  return 1; /* the whole build already requires it */
#elif defined(__aarch64__) && defined(__linux__)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#else
  return 0; /* no query here: the plain NEON kernels */
#endif
}

typedef struct IsaEntry {
  const char *name;
  const sc_kern_ops *ops;
  int (*cpu_has)(void);
  int by_default; /* 0: only when SPEECHC_ISA names it */
  int (*prefer)(void); /* NULL, or the CPU property that makes it the default */
  const char *why; /* why the default is (or is not) this one, as measured */
  __typeof__(((sc_kernels *)0)->linear) linear;
  __typeof__(((sc_kernels *)0)->linear_swiglu) linear_swiglu;
  __typeof__(((sc_kernels *)0)->attention) attention;
  __typeof__(((sc_kernels *)0)->moe) moe;
  __typeof__(((sc_kernels *)0)->conv1d) conv1d;
} IsaEntry;

#define ISA(NAME, SUFFIX, HAS, DEFAULT, PREFER, WHY)                                                           \
  {NAME, &sc_kern_##SUFFIX, HAS, DEFAULT, PREFER, WHY, linear_##SUFFIX, swiglu_##SUFFIX, attention_##SUFFIX,         \
   moe_##SUFFIX, conv1d_##SUFFIX}

/* In order of preference (SC_KERNEL_ISAS): the default is the first one
 * marked by_default that runs here and whose `prefer` (if any) holds, a
 * choice made by measurement (docs/PERFORMANCE.md, "AVX-512 with VNNI and
 * BF16" and "Zen 4"); `why` says which. */
static const IsaEntry isas[] = {
    ISA("avx512-vnni-256", avx512vnni256, cpu_has_avx512vnni, 1, sc_cpu_avx512_split,
        "the default where 512-bit operations run as two 256-bit halves (AMD Zen 4): avx512-vnni's bits with "
        "its bf16 and q8_0 decode loops at 256-bit width, bf16 decode 1.4x avx512-vnni's (docs/PERFORMANCE.md)"),
    ISA("avx512-vnni", avx512vnni, cpu_has_avx512vnni, 1, NULL,
        "the default where the CPU has AVX512-VNNI and whole 512-bit operations: its q8_0/q4_0 prefill GEMMs run "
        "1.6-1.8x avx2's, bf16 decode 1.06x, q8_0/q4_0 decode at the same rate (AMD Zen 5; on an AMX Xeon "
        "1.7x / 1.9x, decode alike: docs/PERFORMANCE.md)"),
    ISA("avx512", avx512, cpu_has_avx512, 0, NULL,
        "only when SPEECHC_ISA names it: on a CPU with VNNI avx512-vnni has its bits and is faster; not measured "
        "on AVX-512 CPUs without VNNI, where avx2 stays the default"),
    ISA("avx2", avx2, cpu_has_avx2, 1, NULL, "the default on x86-64 CPUs without AVX512-VNNI"),
    ISA("neon-dotprod", neon_dotprod, cpu_has_dotprod, 1, NULL, "the default on AArch64 CPUs with the dot product"),
    ISA("neon", neon, cpu_has_neon, 1, NULL, "the default on AArch64 CPUs without the dot product"),
};

static const IsaEntry *isa_find(const char *name) {
  for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
    if (!strcmp(isas[i].name, name)) return &isas[i];
  return NULL;
}

static int isa_runs(const IsaEntry *e) { return e->ops->dot4_f32 && e->cpu_has(); }
static int isa_default(const IsaEntry *e) { return e->by_default && isa_runs(e) && (!e->prefer || e->prefer()); }

const sc_kern_ops *sc_kern_ops_isa(const char *isa) {
  if (!strcmp(isa, "portable")) return &sc_kern_portable;
  const IsaEntry *e = isa_find(isa);
  return e && isa_runs(e) ? e->ops : NULL;
}

/* The ISAs that run here, comma-separated, for messages. */
static void isas_here(char *buf, size_t n) {
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
    if (isa_runs(&isas[i])) {
      size_t l = strlen(buf);
      snprintf(buf + l, n - l, "%s,", isas[i].name);
    }
  size_t l = strlen(buf);
  snprintf(buf + l, n - l, "portable");
}

/* sc_gemv_prefetch_on and sc_gemv_ahead (kernels.h): on, 1 KB until
 * sc_kernels_init decides; then the setting measured on the CPUs the
 * prefetch was written for. */
_Atomic int sc_gemv_prefetch_on = 1;
_Atomic int sc_gemv_ahead = 1024;
_Atomic int sc_gemv_l2 = 0;
#if defined(__x86_64__) || defined(__i386__)
#define SC_X86 1
#else
#define SC_X86 0
#endif
static const char *gemv_prefetch_why_s = "on: 1 KB ahead (not yet decided for this CPU)";
static char gemv_prefetch_why_buf[160];
static const char *gemv_prefetch_env_bad; /* SPEECHC_GEMV_PREFETCH's value when not valid */
static const char *gemv_cache_env_bad;    /* SPEECHC_GEMV_PREFETCH_CACHE's, likewise */
static char gemv_prefetch_why_full[224];
static pthread_once_t gemv_prefetch_once = PTHREAD_ONCE_INIT;

/* SPEECHC_GEMV_PREFETCH's byte distance: a multiple of 64 in [64, 65536],
 * else 0. */
static int gemv_ahead_setting(const char *e) {
  char *end;
  errno = 0;
  const long v = strtol(e, &end, 10);
  return !*end && !errno && e[0] >= '0' && e[0] <= '9' && v >= 64 && v <= 65536 && v % 64 == 0 ? (int)v : 0;
}

static void gemv_prefetch_decide(void) {
  const char *e = getenv("SPEECHC_GEMV_PREFETCH");
  int on = 1, ahead = 1024;
  if (e && *e) {
    if (!strcmp(e, "0") || !strcmp(e, "1")) {
      on = *e == '1';
      ahead = SC_X86 && sc_cpu_intel() ? 4096 : 1024;
      if (SC_X86)
        snprintf(gemv_prefetch_why_buf, sizeof gemv_prefetch_why_buf, "%s: named by SPEECHC_GEMV_PREFETCH=%s (%s%d "
                 "KB ahead)", on ? "on" : "off", e, on ? "" : "q4_0 rows still ", ahead / 1024);
      else
        snprintf(gemv_prefetch_why_buf, sizeof gemv_prefetch_why_buf, "%s: named by SPEECHC_GEMV_PREFETCH=%s (the "
                 "NEON and portable kernels ask for no bytes ahead)", on ? "on" : "off", e);
    } else if ((ahead = gemv_ahead_setting(e))) {
      snprintf(gemv_prefetch_why_buf, sizeof gemv_prefetch_why_buf, "on: %d bytes ahead, named by "
               "SPEECHC_GEMV_PREFETCH=%s%s", ahead, e,
               SC_X86 ? "" : " (the NEON and portable kernels ask for no bytes ahead)");
    } else {
      gemv_prefetch_env_bad = e;
      return; /* every sc_kernels_init fails with the message */
    }
    gemv_prefetch_why_s = gemv_prefetch_why_buf;
  } else if (!SC_X86) {
    gemv_prefetch_why_s = "none: the NEON and portable kernels ask for no bytes ahead";
  } else if (sc_cpu_avx512_split()) {
    on = 0;
    gemv_prefetch_why_s = "off: AMD Zen 4's hardware prefetcher alone reads the f32, bf16 and q8_0 rows faster "
                          "(q4_0 rows 1 KB ahead; docs/PERFORMANCE.md)";
  } else if (sc_cpu_intel()) {
    ahead = 4096;
    gemv_prefetch_why_s = "on: the rows ask for their bytes 4 KB ahead (on an AMX Xeon 1.16-1.4x faster GEMVs "
                          "from DRAM than 1 KB ahead, docs/PERFORMANCE.md)";
  } else {
    gemv_prefetch_why_s = "on: the rows ask for their bytes 1 KB ahead (measured faster on Zen 3 and Zen 5, "
                          "docs/PERFORMANCE.md)";
  }
  /* the cache the prefetches fill: L2 on Intel, L1 elsewhere (kernels.h) */
  const char *c = getenv("SPEECHC_GEMV_PREFETCH_CACHE");
  int l2 = SC_X86 && sc_cpu_intel();
  const char *cache_why = l2 ? "into L2 (Intel: an AMX Xeon decodes bf16 1.08-1.14x faster than into L1)" : "into L1";
  if (c && *c) {
    if (strcmp(c, "l1") && strcmp(c, "l2")) {
      gemv_cache_env_bad = c;
      return;
    }
    l2 = c[1] == '2';
    cache_why = l2 ? "into L2, named by SPEECHC_GEMV_PREFETCH_CACHE" : "into L1, named by SPEECHC_GEMV_PREFETCH_CACHE";
  }
  if (SC_X86 && strncmp(gemv_prefetch_why_s, "none", 4)) {
    snprintf(gemv_prefetch_why_full, sizeof gemv_prefetch_why_full, "%s; %s", gemv_prefetch_why_s, cache_why);
    gemv_prefetch_why_s = gemv_prefetch_why_full;
  }
  atomic_store_explicit(&sc_gemv_ahead, ahead, memory_order_relaxed);
  atomic_store_explicit(&sc_gemv_prefetch_on, on, memory_order_relaxed);
  atomic_store_explicit(&sc_gemv_l2, l2, memory_order_relaxed);
}

const char *sc_gemv_prefetch_why(void) {
  pthread_once(&gemv_prefetch_once, gemv_prefetch_decide);
  return gemv_prefetch_why_s;
}

/* Bind K to the named ISA; `who` starts the message when it cannot run. */
static int init_isa(sc_kernels *K, void *ctx, const char *isa, const char *who) {
  sc_kernels_init_portable(K, ctx);
  pthread_once(&gemv_prefetch_once, gemv_prefetch_decide);
  if (gemv_prefetch_env_bad) {
    sc_kernel_ctx *c = ctx;
    if (c) {
      snprintf(c->err, sizeof c->err, "SPEECHC_GEMV_PREFETCH: expected 0, 1 or a byte distance (a multiple of 64 "
               "from 64 to 65536), got '%.64s'",
               gemv_prefetch_env_bad);
      c->failed = 1;
    }
    return -1;
  }
  if (gemv_cache_env_bad) {
    sc_kernel_ctx *c = ctx;
    if (c) {
      snprintf(c->err, sizeof c->err, "SPEECHC_GEMV_PREFETCH_CACHE: expected l1 or l2, got '%.64s'",
               gemv_cache_env_bad);
      c->failed = 1;
    }
    return -1;
  }
  if (!strcmp(isa, "portable")) return 0;
  const IsaEntry *e = isa_find(isa);
  if (!e || !isa_runs(e)) {
    sc_kernel_ctx *c = ctx;
    char here[96];
    isas_here(here, sizeof here);
    if (c) {
      snprintf(c->err, sizeof c->err, "%s: %s '%s' (hint: one of %s runs here)", who,
               !e ? "unknown ISA" : !e->ops->dot4_f32 ? "this build has no kernels for ISA"
                                                      : "this CPU cannot run ISA",
               isa, here);
      c->failed = 1;
    }
    return -1;
  }
  K->linear = e->linear;
  K->linear_swiglu = e->linear_swiglu;
  K->attention = e->attention;
  K->moe = e->moe;
  K->conv1d = e->conv1d;
  sc_kernels_codec_fill(K, e->ops);
  sc_kernels_gdn_fill(K);
  sc_kernels_moe_fill(K);
  return 0;
}

int sc_kernels_init_isa(sc_kernels *K, void *ctx, const char *isa) {
  return init_isa(K, ctx, isa, "kernels");
}

int sc_kernels_init(sc_kernels *K, void *ctx) {
  const char *want = getenv("SPEECHC_ISA");
  if (want && *want) return init_isa(K, ctx, want, "SPEECHC_ISA");
  for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
    if (isa_default(&isas[i])) return init_isa(K, ctx, isas[i].name, "kernels");
  sc_kernels_init_portable(K, ctx);
  return 0;
}

const char *sc_kernels_reason(const sc_kernels *K) {
  const char *want = getenv("SPEECHC_ISA");
  if (want && *want) return "named by SPEECHC_ISA";
  for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
    if (K->linear == isas[i].linear) return isas[i].why;
  return "no SIMD kernels of this build run on this CPU";
}

const char *sc_kernels_isa(const sc_kernels *K) {
  if (K->linear == linear_portable) return "portable";
  for (size_t i = 0; i < sizeof isas / sizeof *isas; i++)
    if (K->linear == isas[i].linear) return isas[i].name;
  return "unknown";
}
