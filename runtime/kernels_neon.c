/*
 * kernels_neon.c — AArch64 NEON inner loops for kernels.c.  NEON (ASIMD)
 * is baseline on AArch64, so this file needs no flags; it builds a second
 * time as kernels_neon_dotprod.c with -march=armv8.2-a+dotprod, where the
 * integer dots use SDOT (vdotq_s32).  kernels.c picks "neon-dotprod" when
 * the CPU reports ASIMDDP (getauxval(AT_HWCAP)), else "neon".  Both give
 * the same bits: the integer dots are exact and feed the same lanes.
 *
 * Per-row accumulation order, fixed by `cols` alone (f32 and bf16):
 *   four 4-float FMA accumulators a0..a3 take the 16-float blocks (block
 *   at i..i+16 feeds a_k with i+4k..i+4k+4); the 4-float blocks left after
 *   that go into a0; then (a0+a1)+(a2+a3), a horizontal sum (lanes
 *   (0+2)+(1+3)), and the last cols%4 products by scalar fmaf in index
 *   order.  dot4 runs four rows through that same sequence sharing each x
 *   load, so a row gives the same bits whichever call computes it.
 *
 * Quantized bands (q8_0, q4_0 against 8-bit activations, rows in the
 * CPU's groups of eight blocks, kernels.h), one row at a time: whole
 * groups alternately into two pairs of 4-float accumulators against the
 * view xp, each block's exact integer dot in its own int32 lane (q4_0:
 * nibbles 0..15 as int8, minus the view's offsets), converted, fma by
 * d_w * d_x; the last nb % 8 blocks one by one, block b into acc(b % 2):
 * the block's exact integer dot as 4 int32 lanes (lane k: products
 * 4k..4k+3 of each 16-byte half), converted, then fused-multiply-added by
 * the scalar d_w * d_x (q4_0's nibbles made q - 8 in int8 first); the
 * groups' horizontal sum plus the tail's.
 * Without dotprod the lanes come from SMULL (int16 products, |w*x| <=
 * 128*127, so a pair sums without overflow), a pairwise add and SADALP.
 *
 * GEMM (T > 1, the gemm_* hooks): tiles of rows x tokens (f32 and bf16 up
 * to 4 x 4, q8_0 and q4_0 2 x 2) that give every element exactly the
 * dot's operations in the dot's order, so T = 1 and T > 1 agree bit for
 * bit, while each weight vector is loaded (and converted or unpacked) once
 * for the tile's tokens.  attn_row: one query row's attention over the
 * ring cache, four keys at a time sharing the loads of q, the driver's
 * softmax, then the values in column blocks (see the attention section;
 * no bit contract with the other hooks).
 */
#include "kernels.h"

#ifndef SC_NEON_OPS /* the plain build; kernels_neon_dotprod.c sets these */
#define SC_NEON_OPS sc_kern_neon
#define SC_NEON_NAME "neon"
#define SC_NEON_DOT 0
#endif

#if defined(__aarch64__) && defined(__ARM_NEON) && (!SC_NEON_DOT || defined(__ARM_FEATURE_DOTPROD))
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE float32x4_t load4_f32(const float *p) { return vld1q_f32(p); }

/* 4 bf16 -> 4 f32: widen to 32 bits, move into the high half. */
ALWAYS_INLINE float32x4_t load4_bf16(const uint16_t *p) {
  return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}

ALWAYS_INLINE float scalar_f32(const float *p) { return *p; }
ALWAYS_INLINE float scalar_bf16(const uint16_t *p) { return sc_bf16_to_f32(*p); }

/* (v0 + v2) + (v1 + v3) */
ALWAYS_INLINE float hsum4(float32x4_t v) {
  float32x2_t p = vadd_f32(vget_low_f32(v), vget_high_f32(v));
  return vget_lane_f32(p, 0) + vget_lane_f32(p, 1);
}

/* The one dot routine, instantiated for N = 1 and 4 rows and both bands.
 * N is a compile-time constant after inlining, so a[][] (16 registers of
 * the 32) stays in registers.  The 4-row loop prefetches the same bytes of
 * the next group of rows, as kernels_avx2.c does. */
#define DEFINE_DOT(NAME, WT, LOAD4, SCALAR)                                  \
  ALWAYS_INLINE void NAME##_n(const WT *w, const float *x, int cols,       \
                              float *out, const int N) {                   \
    float32x4_t a[4][4];                                                   \
    for (int r = 0; r < N; r++)                                            \
      for (int k = 0; k < 4; k++) a[r][k] = vdupq_n_f32(0.0f);             \
    int i = 0;                                                             \
    for (; i + 16 <= cols; i += 16) {                                      \
      if (N == 4)                                                          \
        for (int r = 0; r < N; r++)                                        \
          __builtin_prefetch(w + (size_t)(r + 4) * cols + i);              \
      for (int k = 0; k < 4; k++) {                                        \
        float32x4_t xv = vld1q_f32(x + i + 4 * k);                         \
        for (int r = 0; r < N; r++)                                        \
          a[r][k] = vfmaq_f32(a[r][k], LOAD4(w + (size_t)r * cols + i + 4 * k), xv); \
      }                                                                    \
    }                                                                      \
    for (; i + 4 <= cols; i += 4) {                                        \
      float32x4_t xv = vld1q_f32(x + i);                                   \
      for (int r = 0; r < N; r++)                                          \
        a[r][0] = vfmaq_f32(a[r][0], LOAD4(w + (size_t)r * cols + i), xv); \
    }                                                                      \
    for (int r = 0; r < N; r++) {                                          \
      float s = hsum4(vaddq_f32(vaddq_f32(a[r][0], a[r][1]),               \
                                vaddq_f32(a[r][2], a[r][3])));             \
      const WT *wr = w + (size_t)r * cols;                                 \
      for (int j = i; j < cols; j++) s = fmaf(SCALAR(wr + j), x[j], s);    \
      out[r] = s;                                                          \
    }                                                                      \
  }                                                                        \
  static void NAME##4(const WT *w, const float *x, int cols, float *out) { \
    NAME##_n(w, x, cols, out, 4);                                          \
  }                                                                        \
  static void NAME##1(const WT *w, const float *x, int cols, float *out) { \
    NAME##_n(w, x, cols, out, 1);                                          \
  }

DEFINE_DOT(dot_f32_, float, load4_f32, scalar_f32)
DEFINE_DOT(dot_bf16_, uint16_t, load4_bf16, scalar_bf16)

static void axpy(float *y, float a, const float *x, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
  for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

/* Same bits as kernels.c's pquantize_q8: the exact max (FMAXNM, which
 * like fmaxf ignores a NaN), one division, the same product, FCVTNS
 * rounding to nearest even as nearbyintf does; |q| <= 127, so the
 * saturating narrows are plain narrows. */
static void quantize_q8(const float *x, int nb, int8_t *xq, float *xd, unsigned char *xp) {
  int8_t *q = xq;
  for (int b = 0; b < nb; b++, x += 32, q += 32) {
    float32x4_t v[8];
    for (int k = 0; k < 8; k++) v[k] = vld1q_f32(x + 4 * k);
    float32x4_t m = vabsq_f32(v[0]);
    for (int k = 1; k < 8; k++) m = vmaxnmq_f32(m, vabsq_f32(v[k]));
    const float amax = fmaxf(0.0f, vmaxnmvq_f32(m));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    xd[b] = amax / 127.0f;
    int32x4_t i[8];
    for (int k = 0; k < 8; k++) i[k] = vcvtnq_s32_f32(vmulq_n_f32(v[k], id));
    for (int h = 0; h < 2; h++) {
      const int16x8_t s0 = vcombine_s16(vqmovn_s32(i[4 * h]), vqmovn_s32(i[4 * h + 1]));
      const int16x8_t s1 = vcombine_s16(vqmovn_s32(i[4 * h + 2]), vqmovn_s32(i[4 * h + 3]));
      vst1q_s8(q + 16 * h, vcombine_s8(vqmovn_s16(s0), vqmovn_s16(s1)));
    }
  }
  /* the q4_0 view, group by group (kernels.h) */
  for (int g = 0; g < nb / 8; g++, xp += SC_Q4_VIEW_GROUP) {
    const int8_t *xg = xq + 256 * g;
    int32_t s[8];
    for (int h = 0; h < 2; h++)
      for (int c = 0; c < 4; c++)
        for (int j = 0; j < 8; j++) memcpy(xp + 128 * h + 32 * c + 4 * j, xg + 32 * j + 16 * h + 4 * c, 4);
    for (int j = 0; j < 8; j++)
      s[j] = 8 * vaddlvq_s16(vaddq_s16(vpaddlq_s8(vld1q_s8(xg + 32 * j)), vpaddlq_s8(vld1q_s8(xg + 32 * j + 16))));
    memcpy(xp + 256, s, 32);
    memcpy(xp + 288, xd + 8 * g, 32);
  }
}

/* The exact dot of 32 int8 pairs (w0|w1 against y0|y1) as 4 int32 lanes,
 * lane k the products 4k..4k+3 of both 16-byte halves. */
#if SC_NEON_DOT
ALWAYS_INLINE int32x4_t idot32(int8x16_t w0, int8x16_t w1, int8x16_t y0, int8x16_t y1) {
  return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, y0), w1, y1);
}
/* acc lane k += the products of bytes 4k..4k+3. */
ALWAYS_INLINE int32x4_t idot4(int32x4_t acc, int8x16_t w, int8x16_t y) { return vdotq_s32(acc, w, y); }
#else
/* int16 products 0..7 and 8..15, adjacent pairs summed (products 2j, 2j+1
 * in lane j), then pairs of those widened into int32 lanes. */
ALWAYS_INLINE int16x8_t pair_sums16(int8x16_t w, int8x16_t y) {
  return vpaddq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(y)), vmull_high_s8(w, y));
}
ALWAYS_INLINE int32x4_t idot32(int8x16_t w0, int8x16_t w1, int8x16_t y0, int8x16_t y1) {
  return vpadalq_s16(vpaddlq_s16(pair_sums16(w0, y0)), pair_sums16(w1, y1));
}
ALWAYS_INLINE int32x4_t idot4(int32x4_t acc, int8x16_t w, int8x16_t y) {
  return vpadalq_s16(acc, pair_sums16(w, y));
}
#endif

/* The block scale from sc_f16_table: a load, not a conversion. */
ALWAYS_INLINE float blk_scale(const uint8_t *blk) { return sc_f16_table[blk[0] | blk[1] << 8]; }

/* A block's 32 weights as two int8x16 (elements 0-15, 16-31).  q8_0:
 * the bytes.  q4_0: byte k holds element k (low nibble) and k + 16 (high
 * nibble), made q - 8. */
ALWAYS_INLINE void q8_0_w(const uint8_t *blk, int8x16_t w[2]) {
  w[0] = vld1q_s8((const int8_t *)blk + 2);
  w[1] = vld1q_s8((const int8_t *)blk + 2 + SC_QK / 2);
}
ALWAYS_INLINE void q4_0_w(const uint8_t *blk, int8x16_t w[2]) {
  const uint8x16_t v = vld1q_u8(blk + 2);
  const int8x16_t eight = vdupq_n_s8(8);
  w[0] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))), eight);
  w[1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
}

/* One block against one token: acc += (d_w * d_x) * the exact dot.  The
 * weight side (above) stays apart so that the GEMM tiles share it between
 * tokens with the very same operations. */
ALWAYS_INLINE float32x4_t blk_tok(const int8x16_t w[2], float dw, const int8_t *y, float dx,
                                  float32x4_t acc) {
  const int32x4_t s = idot32(w[0], w[1], vld1q_s8(y), vld1q_s8(y + 16));
  return vfmaq_n_f32(acc, vcvtq_f32_s32(s), dw * dx);
}

ALWAYS_INLINE float32x4_t q8_0_block(const uint8_t *blk, const int8_t *y, float dx, float32x4_t acc) {
  int8x16_t w[2];
  q8_0_w(blk, w);
  return blk_tok(w, blk_scale(blk), y, dx, acc);
}
ALWAYS_INLINE float32x4_t q4_0_block(const uint8_t *blk, const int8_t *y, float dx, float32x4_t acc) {
  int8x16_t w[2];
  q4_0_w(blk, w);
  return blk_tok(w, blk_scale(blk), y, dx, acc);
}

#define DEFINE_QROW(NAME, BLOCK, BYTES)                                      \
  ALWAYS_INLINE float32x4_t NAME(const uint8_t *w, const int8_t *xq, const float *xd, int nb) { \
    float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);             \
    int b = 0;                                                              \
    for (; b + 2 <= nb; b += 2) {                                           \
      a0 = BLOCK(w + (size_t)b * BYTES, xq + 32 * b, xd[b], a0);            \
      a1 = BLOCK(w + (size_t)(b + 1) * BYTES, xq + 32 * (b + 1), xd[b + 1], a1); \
    }                                                                       \
    if (b < nb) a0 = BLOCK(w + (size_t)b * BYTES, xq + 32 * b, xd[b], a0);  \
    return vaddq_f32(a0, a1);                                               \
  }
DEFINE_QROW(q8_0_blocks, q8_0_block, SC_Q8_0_BLOCK)
DEFINE_QROW(q4_0_blocks, q4_0_block, SC_Q4_0_BLOCK)

/* One whole q4_0 group (kernels.h): 16 bytes of a chunk hold blocks 0-3
 * (4 bytes each), the next 16 blocks 4-7, so idot4 gives each block its
 * own int32 lane; minus the nibble offsets, exact; then acc += (d_w * d_x)
 * * dot, blocks 0-3 into acc[0], 4-7 into acc[1].  In pieces, which the
 * GEMM tile shares: the nibbles, the scales and the float step of half k
 * (blocks 4k..4k+3). */
ALWAYS_INLINE int8x16_t q4_lo(uint8x16_t v) { return vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f))); }
ALWAYS_INLINE int8x16_t q4_hi(uint8x16_t v) { return vreinterpretq_s8_u8(vshrq_n_u8(v, 4)); }
ALWAYS_INLINE float32x4_t q4_scales(const uint8_t *wg, int k) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)wg + 4 * k)));
}
ALWAYS_INLINE float32x4_t q4_half_end(int32x4_t d, float32x4_t dw, const unsigned char *xv, int k,
                                      float32x4_t acc) {
  const int32x4_t dot = vsubq_s32(d, vld1q_s32((const int32_t *)(const void *)(xv + 256) + 4 * k));
  const float32x4_t sc = vmulq_f32(dw, vld1q_f32((const float *)(const void *)(xv + 288) + 4 * k));
  return vfmaq_f32(acc, sc, vcvtq_f32_s32(dot));
}
ALWAYS_INLINE void q4_0_group(const uint8_t *wg, const unsigned char *xv, float32x4_t acc[2]) {
  int32x4_t d[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
  for (int c = 0; c < 4; c++)
    for (int k = 0; k < 2; k++) {
      const uint8x16_t v = vld1q_u8(wg + 16 + 32 * c + 16 * k);
      d[k] = idot4(d[k], q4_lo(v), vld1q_s8((const int8_t *)xv + 32 * c + 16 * k));
      d[k] = idot4(d[k], q4_hi(v), vld1q_s8((const int8_t *)xv + 128 + 32 * c + 16 * k));
    }
  for (int k = 0; k < 2; k++) acc[k] = q4_half_end(d[k], q4_scales(wg, k), xv, k, acc[k]);
}

/* q4_0: whole groups alternately into a[0] and a[1], the last nb % 8
 * blocks as q8_0's; hsum(a[0][0] + a[0][1] + a[1][0] + a[1][1]) + hsum(tail). */
ALWAYS_INLINE float dot_q4_0_row(const uint8_t *w, const int8_t *xq, const float *xd,
                                 const unsigned char *xp, int nb) {
  float32x4_t a[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
  const int ng = nb / 8;
  for (int g = 0; g < ng; g++)
    q4_0_group(w + (size_t)g * SC_Q4_GROUP_BYTES, xp + (size_t)g * SC_Q4_VIEW_GROUP, a[g & 1]);
  const int b = 8 * ng;
  const float tail = b < nb ? hsum4(q4_0_blocks(w + (size_t)b * SC_Q4_0_BLOCK, xq + 32 * b, xd + b, nb - b)) : 0.0f;
  return hsum4(vaddq_f32(vaddq_f32(a[0][0], a[0][1]), vaddq_f32(a[1][0], a[1][1]))) + tail;
}

#define DEFINE_QDOT(NAME, ROW)                                               \
  static void NAME##4(const uint8_t *w, size_t rb, const int8_t *xq,        \
                      const float *xd, const unsigned char *xp, int nb, float *out) { \
    for (int r = 0; r < 4; r++) out[r] = ROW(w + r * rb, xq, xd, xp, nb);   \
  }                                                                         \
  static void NAME##1(const uint8_t *w, size_t rb, const int8_t *xq,        \
                      const float *xd, const unsigned char *xp, int nb, float *out) { \
    (void)rb;                                                               \
    out[0] = ROW(w, xq, xd, xp, nb);                                        \
  }
/* q8_0 (rows in the CPU's groups, kernels.h), as q4_0's groups without
 * the nibbles: the
 * first 16 bytes of a chunk hold blocks 0-3, the next 16 blocks 4-7, so
 * idot4 gives each block its own int32 lane (exact: SMULL pairs of at
 * most 128 x 127); then acc += (d_w * d_x) * dot, blocks 0-3 into acc[0],
 * 4-7 into acc[1].  In pieces, which the GEMM tile shares. */
ALWAYS_INLINE float32x4_t q8g_half_end(int32x4_t d, float32x4_t dw, const unsigned char *xv, int k,
                                       float32x4_t acc) {
  const float32x4_t sc = vmulq_f32(dw, vld1q_f32((const float *)(const void *)(xv + 288) + 4 * k));
  return vfmaq_f32(acc, sc, vcvtq_f32_s32(d));
}
ALWAYS_INLINE void q8_0_group(const uint8_t *wg, const unsigned char *xv, float32x4_t acc[2]) {
  int32x4_t d[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
  for (int c = 0; c < 8; c++)
    for (int k = 0; k < 2; k++)
      d[k] = idot4(d[k], vld1q_s8((const int8_t *)wg + 16 + 32 * c + 16 * k),
                   vld1q_s8((const int8_t *)xv + 32 * c + 16 * k));
  for (int k = 0; k < 2; k++) acc[k] = q8g_half_end(d[k], q4_scales(wg, k), xv, k, acc[k]);
}

/* q8_0 grouped: whole groups alternately into a[0] and a[1], the last nb
 * % 8 blocks as GGML-order q8_0's; sums as dot_q4_0_row's. */
ALWAYS_INLINE float dot_q8_0_row(const uint8_t *w, const int8_t *xq, const float *xd,
                                  const unsigned char *xp, int nb) {
  float32x4_t a[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
  const int ng = nb / 8;
  for (int g = 0; g < ng; g++)
    q8_0_group(w + (size_t)g * SC_Q8_GROUP_BYTES, xp + (size_t)g * SC_Q4_VIEW_GROUP, a[g & 1]);
  const int b = 8 * ng;
  const float tail = b < nb ? hsum4(q8_0_blocks(w + (size_t)b * SC_Q8_0_BLOCK, xq + 32 * b, xd + b, nb - b)) : 0.0f;
  return hsum4(vaddq_f32(vaddq_f32(a[0][0], a[0][1]), vaddq_f32(a[1][0], a[1][1]))) + tail;
}

DEFINE_QDOT(dot_q4_0_, dot_q4_0_row)
DEFINE_QDOT(dot_q8_0_, dot_q8_0_row)

/* ---- attention: one query row (kernels.h attn_row) ------------------- */

/* The values of columns c0..c0+4*NV for every key: NV accumulators, one
 * pass over the keys, then times 1/sum. */
ALWAYS_INLINE void attn_values(const float *vc, size_t ld, int lo, int n, int cap, const float *s,
                               float inv, int c0, float *y, const int NV) {
  float32x4_t acc[16];
  for (int r = 0; r < NV; r++) acc[r] = vdupq_n_f32(0.0f);
  int row = lo % cap;
  for (int j = 0; j < n; j++) {
    const float *v = vc + (size_t)row * ld + c0;
    for (int r = 0; r < NV; r++) acc[r] = vfmaq_n_f32(acc[r], vld1q_f32(v + 4 * r), s[j]);
    if (++row == cap) row = 0;
  }
  for (int r = 0; r < NV; r++) vst1q_f32(y + c0 + 4 * r, vmulq_n_f32(acc[r], inv));
}

/* As sc_attn_row_avx2: four keys at a time share each load of q; two
 * accumulators per key (even and odd 4-column steps) keep eight FMA
 * chains in flight; a key of a short last group runs the same code with
 * empty neighbours (the last key again), so a score does not depend on
 * which keys share its group.  Each key's sum: (a0 + a1), then pairwise
 * (lanes (0+1)+(2+3)), then the columns past the last multiple of 4 by
 * fmaf.  Softmax as the driver's; values 64 columns (16 accumulators) per
 * pass over the keys, then 16, then 4, then single columns. */
static void attn_row(const float *q, const float *kc, const float *vc, size_t ld, int lo, int n, int cap,
                     int hd, float scale, float *s, float *y) {
  const int h4 = hd & ~3, h8 = hd & ~7;
  const float *k[4];
  int row = lo % cap;
  for (int j = 0; j < n; j += 4) {
    const int nk = n - j < 4 ? n - j : 4;
    for (int i = 0; i < 4; i++) {
      k[i] = kc + (size_t)row * ld;
      if (i + 1 < nk && ++row == cap) row = 0;
    }
    if (++row == cap) row = 0;
    float32x4_t a[4][2];
    for (int i = 0; i < 4; i++) a[i][0] = a[i][1] = vdupq_n_f32(0.0f);
    int c = 0;
    for (; c < h8; c += 8) {
      const float32x4_t q0 = vld1q_f32(q + c), q1 = vld1q_f32(q + c + 4);
      for (int i = 0; i < 4; i++) {
        a[i][0] = vfmaq_f32(a[i][0], vld1q_f32(k[i] + c), q0);
        a[i][1] = vfmaq_f32(a[i][1], vld1q_f32(k[i] + c + 4), q1);
      }
    }
    if (c < h4) {
      const float32x4_t q0 = vld1q_f32(q + c);
      for (int i = 0; i < 4; i++) a[i][0] = vfmaq_f32(a[i][0], vld1q_f32(k[i] + c), q0);
    }
    float d[4];
    vst1q_f32(d, vpaddq_f32(vpaddq_f32(vaddq_f32(a[0][0], a[0][1]), vaddq_f32(a[1][0], a[1][1])),
                            vpaddq_f32(vaddq_f32(a[2][0], a[2][1]), vaddq_f32(a[3][0], a[3][1]))));
    for (int i = 0; i < nk; i++) {
      for (int cc = h4; cc < hd; cc++) d[i] = fmaf(q[cc], k[i][cc], d[i]);
      s[j + i] = d[i] * scale;
    }
  }
  const float sum = sc_softmax_row(s, n);
  const float inv = 1.0f / sum;
  int c0 = 0;
  for (; c0 + 64 <= h4; c0 += 64) attn_values(vc, ld, lo, n, cap, s, inv, c0, y, 16);
  for (; c0 + 16 <= h4; c0 += 16) attn_values(vc, ld, lo, n, cap, s, inv, c0, y, 4);
  for (; c0 < h4; c0 += 4) attn_values(vc, ld, lo, n, cap, s, inv, c0, y, 1);
  sc_attn_value_cols(s, vc, ld, lo, n, cap, h4, hd, inv, y);
}

/* ---- GEMM: tiles of R rows x NT tokens, same bits as the dots ------- */

/* As kernels_avx2.c's: each output's accumulators are independent sums
 * (the float dot's a0..a3, the quantized dots' even and odd steps), and a
 * tile gives every element the dot's exact operations in the dot's order
 * while each weight vector is loaded (and converted or unpacked) once for
 * NT tokens and each activation vector once for R rows.  The tile sizes
 * are chosen by register count (32 q registers), not timed: no ARM
 * machine has run them. */

/* f32 / bf16: up to 4 x 4 outputs, one accumulator a_k of each at a time
 * (16 registers, 4 weight vectors and one of x), over segments of FL_SEG
 * columns that keep the rows and tokens in L1 across the four passes;
 * each a_k still runs in column order.  The finished a_k wait on the
 * stack; the 4-float steps past the last 16 go into a0, then the dot's
 * sums and its scalar tail. */
#define FL_NT 4
#define FL_SEG 256
#define DEFINE_GEMM_FL(NAME, WT, LOAD4, SCALAR)                                \
  ALWAYS_INLINE void NAME##tile(const WT *w, int cols, const float *x, int ldx, \
                                float *out, int ldo, const int R, const int NT) { \
    float32x4_t part[4][4][FL_NT];                                            \
    const int n16 = cols & ~15, n4 = cols & ~3;                               \
    for (int k = 0; k < 4; k++)                                               \
      for (int r = 0; r < R; r++)                                             \
        for (int t = 0; t < NT; t++) part[k][r][t] = vdupq_n_f32(0.0f);       \
    for (int i0 = 0; i0 < n16; i0 += FL_SEG) {                                \
      const int i1 = n16 - i0 < FL_SEG ? n16 : i0 + FL_SEG;                   \
      for (int k = 0; k < 4; k++) {                                           \
        float32x4_t a[4][FL_NT];                                              \
        for (int r = 0; r < R; r++)                                           \
          for (int t = 0; t < NT; t++) a[r][t] = part[k][r][t];               \
        for (int i = i0 + 4 * k; i < i1; i += 16) {                           \
          float32x4_t wv[4];                                                  \
          for (int r = 0; r < R; r++) wv[r] = LOAD4(w + (size_t)r * cols + i); \
          for (int t = 0; t < NT; t++) {                                      \
            const float32x4_t xv = vld1q_f32(x + (size_t)t * ldx + i);        \
            for (int r = 0; r < R; r++) a[r][t] = vfmaq_f32(a[r][t], wv[r], xv); \
          }                                                                   \
        }                                                                     \
        for (int r = 0; r < R; r++)                                           \
          for (int t = 0; t < NT; t++) part[k][r][t] = a[r][t];               \
      }                                                                       \
    }                                                                         \
    for (int i = n16; i < n4; i += 4)                                         \
      for (int t = 0; t < NT; t++) {                                          \
        const float32x4_t xv = vld1q_f32(x + (size_t)t * ldx + i);            \
        for (int r = 0; r < R; r++)                                           \
          part[0][r][t] = vfmaq_f32(part[0][r][t], LOAD4(w + (size_t)r * cols + i), xv); \
      }                                                                       \
    for (int r = 0; r < R; r++)                                               \
      for (int t = 0; t < NT; t++) {                                          \
        float sum = hsum4(vaddq_f32(vaddq_f32(part[0][r][t], part[1][r][t]),  \
                                    vaddq_f32(part[2][r][t], part[3][r][t]))); \
        const WT *wr = w + (size_t)r * cols;                                  \
        const float *xt = x + (size_t)t * ldx;                                \
        for (int j = n4; j < cols; j++) sum = fmaf(SCALAR(wr + j), xt[j], sum); \
        out[(size_t)t * ldo + r] = sum;                                       \
      }                                                                       \
  }                                                                           \
  static void NAME##r(const WT *w, int cols, const float *x, int ldx, int nt, \
                      float *out, int ldo, const int R) {                     \
    int t = 0;                                                                \
    for (; t + FL_NT <= nt; t += FL_NT)                                       \
      NAME##tile(w, cols, x + (size_t)t * ldx, ldx, out + (size_t)t * ldo, ldo, R, FL_NT); \
    x += (size_t)t * ldx, out += (size_t)t * ldo;                             \
    switch (nt - t) {                                                         \
    case 3: NAME##tile(w, cols, x, ldx, out, ldo, R, 3); break;               \
    case 2: NAME##tile(w, cols, x, ldx, out, ldo, R, 2); break;               \
    case 1: NAME##tile(w, cols, x, ldx, out, ldo, R, 1); break;               \
    }                                                                         \
  }                                                                           \
  static void NAME(const WT *w, int nr, const float *x, int ldx, int nt, int cols, \
                   float *out, int ldo) {                                     \
    switch (nr) {                                                             \
    case 4: NAME##r(w, cols, x, ldx, nt, out, ldo, 4); break;                 \
    case 3: NAME##r(w, cols, x, ldx, nt, out, ldo, 3); break;                 \
    case 2: NAME##r(w, cols, x, ldx, nt, out, ldo, 2); break;                 \
    default: NAME##r(w, cols, x, ldx, nt, out, ldo, 1); break;                \
    }                                                                         \
  }

DEFINE_GEMM_FL(gemm_f32, float, load4_f32, scalar_f32)
DEFINE_GEMM_FL(gemm_bf16, uint16_t, load4_bf16, scalar_bf16)

/* Quantized tiles: 2 rows x 2 tokens (one for an odd last row or token).
 * Three tokens spilled accumulators to the stack (GCC 12, -O3: the
 * scheduler interleaves blocks, and the SMULL dots take temporaries).
 * Token t's activations: xq + t*32*nb, xd + t*nb, xp + t*64*nb
 * (kernels.h). */
#define Q_NT 2

/* Block b of R rows against NT tokens into a[r][t]: each row's weights
 * unpacked once, each token's activations loaded once (in blk_tok). */
#define DEFINE_QSTEP(NAME, WLOAD, BYTES)                                       \
  ALWAYS_INLINE void NAME(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd, int nb, \
                          int b, float32x4_t a[2][Q_NT], const int R, const int NT) { \
    int8x16_t wv[2][2];                                                        \
    float dw[2];                                                               \
    for (int r = 0; r < R; r++) {                                              \
      const uint8_t *blk = w + r * rb + (size_t)b * BYTES;                     \
      WLOAD(blk, wv[r]);                                                       \
      dw[r] = blk_scale(blk);                                                  \
    }                                                                          \
    for (int t = 0; t < NT; t++)                                               \
      for (int r = 0; r < R; r++)                                              \
        a[r][t] = blk_tok(wv[r], dw[r], xq + (size_t)t * 32 * nb + 32 * b, xd[(size_t)t * nb + b], a[r][t]); \
  }
DEFINE_QSTEP(q8_0_step, q8_0_w, SC_Q8_0_BLOCK)
DEFINE_QSTEP(q4_0_step, q4_0_w, SC_Q4_0_BLOCK)

/* Blocks b0..nb as DEFINE_QROW runs them for each (row, token): pairs
 * into a0 and a1, an odd last block into a0; s = a0 + a1.  One pass with
 * both accumulators of the 2 x 2 outputs in registers. */
#define DEFINE_QBLOCKS(NAME, STEP)                                             \
  ALWAYS_INLINE void NAME(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd, int nb, \
                          int b0, float32x4_t s[2][Q_NT], const int R, const int NT) { \
    float32x4_t a0[2][Q_NT], a1[2][Q_NT];                                      \
    for (int r = 0; r < R; r++)                                                \
      for (int t = 0; t < NT; t++) a0[r][t] = a1[r][t] = vdupq_n_f32(0.0f);    \
    int b = b0;                                                                \
    for (; b + 2 <= nb; b += 2) {                                              \
      STEP(w, rb, xq, xd, nb, b, a0, R, NT);                                   \
      STEP(w, rb, xq, xd, nb, b + 1, a1, R, NT);                               \
    }                                                                          \
    if (b < nb) STEP(w, rb, xq, xd, nb, b, a0, R, NT);                         \
    for (int r = 0; r < R; r++)                                                \
      for (int t = 0; t < NT; t++) s[r][t] = vaddq_f32(a0[r][t], a1[r][t]);    \
  }
DEFINE_QBLOCKS(q8_0_tile_blocks, q8_0_step)
DEFINE_QBLOCKS(q4_0_tile_blocks, q4_0_step)

/* q4_0: even groups, then odd groups (as kernels_avx2.c: both parities
 * would hold 16 float accumulators besides the integer sums), each
 * group's half k = 0, 1 in turn; then the last nb % 8 blocks as the dot's
 * tail, and the dot's sums.  The integer sums are exact, so their order
 * does not matter; the float operations are the dot's. */
ALWAYS_INLINE void q4_tile(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd,
                           const unsigned char *xp, int nb, float *out, int ldo, const int R, const int NT) {
  float32x4_t part[2][2][2][Q_NT]; /* [parity][half][row][token] */
  const int ng = nb / 8;
  for (int par = 0; par < 2; par++) {
    float32x4_t a[2][2][Q_NT];
    for (int k = 0; k < 2; k++)
      for (int r = 0; r < R; r++)
        for (int t = 0; t < NT; t++) a[k][r][t] = vdupq_n_f32(0.0f);
    for (int g = par; g < ng; g += 2) {
      const size_t wo = (size_t)g * SC_Q4_GROUP_BYTES, xo = (size_t)g * SC_Q4_VIEW_GROUP;
      for (int k = 0; k < 2; k++) {
        int32x4_t d[2][Q_NT];
        for (int r = 0; r < R; r++)
          for (int t = 0; t < NT; t++) d[r][t] = vdupq_n_s32(0);
        for (int c = 0; c < 4; c++) {
          int8x16_t lo[2], hi[2];
          for (int r = 0; r < R; r++) {
            const uint8x16_t v = vld1q_u8(w + r * rb + wo + 16 + 32 * c + 16 * k);
            lo[r] = q4_lo(v);
            hi[r] = q4_hi(v);
          }
          for (int t = 0; t < NT; t++) {
            const int8_t *xc = (const int8_t *)xp + (size_t)t * 64 * nb + xo + 32 * c + 16 * k;
            const int8x16_t xl = vld1q_s8(xc), xh = vld1q_s8(xc + 128);
            for (int r = 0; r < R; r++) d[r][t] = idot4(idot4(d[r][t], lo[r], xl), hi[r], xh);
          }
        }
        for (int r = 0; r < R; r++) {
          const float32x4_t dw = q4_scales(w + r * rb + wo, k);
          for (int t = 0; t < NT; t++)
            a[k][r][t] = q4_half_end(d[r][t], dw, xp + (size_t)t * 64 * nb + xo, k, a[k][r][t]);
        }
      }
    }
    for (int k = 0; k < 2; k++)
      for (int r = 0; r < R; r++)
        for (int t = 0; t < NT; t++) part[par][k][r][t] = a[k][r][t];
  }
  float32x4_t tail[2][Q_NT];
  const int b = 8 * ng;
  if (b < nb) q4_0_tile_blocks(w, rb, xq, xd, nb, b, tail, R, NT);
  for (int r = 0; r < R; r++)
    for (int t = 0; t < NT; t++) {
      const float tl = b < nb ? hsum4(tail[r][t]) : 0.0f;
      out[(size_t)t * ldo + r] = hsum4(vaddq_f32(vaddq_f32(part[0][0][r][t], part[0][1][r][t]),
                                                 vaddq_f32(part[1][0][r][t], part[1][1][r][t]))) + tl;
    }
}

/* q8_0 grouped: as q4_tile, the chunks' bytes as they are. */
ALWAYS_INLINE void q8_tile(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd,
                            const unsigned char *xp, int nb, float *out, int ldo, const int R, const int NT) {
  float32x4_t part[2][2][2][Q_NT]; /* [parity][half][row][token] */
  const int ng = nb / 8;
  for (int par = 0; par < 2; par++) {
    float32x4_t a[2][2][Q_NT];
    for (int k = 0; k < 2; k++)
      for (int r = 0; r < R; r++)
        for (int t = 0; t < NT; t++) a[k][r][t] = vdupq_n_f32(0.0f);
    for (int g = par; g < ng; g += 2) {
      const size_t wo = (size_t)g * SC_Q8_GROUP_BYTES, xo = (size_t)g * SC_Q4_VIEW_GROUP;
      for (int k = 0; k < 2; k++) {
        int32x4_t d[2][Q_NT];
        for (int r = 0; r < R; r++)
          for (int t = 0; t < NT; t++) d[r][t] = vdupq_n_s32(0);
        for (int c = 0; c < 8; c++) {
          int8x16_t wv[2];
          for (int r = 0; r < R; r++) wv[r] = vld1q_s8((const int8_t *)w + r * rb + wo + 16 + 32 * c + 16 * k);
          for (int t = 0; t < NT; t++) {
            const int8x16_t xv = vld1q_s8((const int8_t *)xp + (size_t)t * 64 * nb + xo + 32 * c + 16 * k);
            for (int r = 0; r < R; r++) d[r][t] = idot4(d[r][t], wv[r], xv);
          }
        }
        for (int r = 0; r < R; r++) {
          const float32x4_t dw = q4_scales(w + r * rb + wo, k);
          for (int t = 0; t < NT; t++)
            a[k][r][t] = q8g_half_end(d[r][t], dw, xp + (size_t)t * 64 * nb + xo, k, a[k][r][t]);
        }
      }
    }
    for (int k = 0; k < 2; k++)
      for (int r = 0; r < R; r++)
        for (int t = 0; t < NT; t++) part[par][k][r][t] = a[k][r][t];
  }
  float32x4_t tail[2][Q_NT];
  const int b = 8 * ng;
  if (b < nb) q8_0_tile_blocks(w, rb, xq, xd, nb, b, tail, R, NT);
  for (int r = 0; r < R; r++)
    for (int t = 0; t < NT; t++) {
      const float tl = b < nb ? hsum4(tail[r][t]) : 0.0f;
      out[(size_t)t * ldo + r] = hsum4(vaddq_f32(vaddq_f32(part[0][0][r][t], part[0][1][r][t]),
                                                 vaddq_f32(part[1][0][r][t], part[1][1][r][t]))) + tl;
    }
}

#define DEFINE_GEMM_Q(NAME, TILE)                                                \
  static void NAME##r(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd, \
                      const unsigned char *xp, int nb, int nt, float *out, int ldo, const int R) { \
    int t = 0;                                                                   \
    for (; t + Q_NT <= nt; t += Q_NT)                                            \
      TILE(w, rb, xq + (size_t)t * 32 * nb, xd + (size_t)t * nb, xp + (size_t)t * 64 * nb, nb, \
           out + (size_t)t * ldo, ldo, R, Q_NT);                                 \
    xq += (size_t)t * 32 * nb, xd += (size_t)t * nb, xp += (size_t)t * 64 * nb;  \
    out += (size_t)t * ldo;                                                      \
    if (t < nt) TILE(w, rb, xq, xd, xp, nb, out, ldo, R, 1);                     \
  }                                                                              \
  static void NAME(const uint8_t *w, size_t rb, int nr, const int8_t *xq, const float *xd, \
                   const unsigned char *xp, int nb, int nt, float *out, int ldo) { \
    int r = 0;                                                                   \
    for (; r + 2 <= nr; r += 2) NAME##r(w + r * rb, rb, xq, xd, xp, nb, nt, out + r, ldo, 2); \
    if (r < nr) NAME##r(w + r * rb, rb, xq, xd, xp, nb, nt, out + r, ldo, 1);    \
  }
DEFINE_GEMM_Q(gemm_q8_0, q8_tile)
DEFINE_GEMM_Q(gemm_q4_0, q4_tile)

const sc_kern_ops SC_NEON_OPS = {
    .name = SC_NEON_NAME,
    .dot4_f32 = dot_f32_4,
    .dot1_f32 = dot_f32_1,
    .dot4_bf16 = dot_bf16_4,
    .dot1_bf16 = dot_bf16_1,
    .axpy = axpy,
    .quantize_q8 = quantize_q8,
    .dot4_q8_0 = dot_q8_0_4,
    .dot1_q8_0 = dot_q8_0_1,
    .dot4_q4_0 = dot_q4_0_4,
    .dot1_q4_0 = dot_q4_0_1,
    .attn_row = attn_row,
    .gemm_f32 = gemm_f32,
    .gemm_bf16 = gemm_bf16,
    .gemm_q8_0 = gemm_q8_0,
    .gemm_q4_0 = gemm_q4_0,
};

#else /* not AArch64, or the dotprod build without dotprod: nothing to offer */
const sc_kern_ops SC_NEON_OPS = {0};
#endif
