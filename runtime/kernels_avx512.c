/*
 * kernels_avx512.c — AVX-512 (F, BW, VL) inner loops for kernels.c, built
 * with -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c.
 *
 * Three tables come from this file: "avx512" (this build; only when
 * SPEECHC_ISA names it), "avx512-vnni" (kernels_avx512vnni.c, the default
 * on CPUs with AVX512-VNNI) and "avx512-vnni-256" (kernels_avx512vnni256.c:
 * SC_GEMV_256, the bf16 one-token dot at 256-bit width with the same
 * bits, the default where 512-bit operations are split in two).
 * test_kernels and test_quant compare them with the portable kernels on a
 * CPU that runs them, and test_avx512_simde runs this file's code on any
 * CPU through SIMDe's C model of the intrinsics (QEMU's TCG has no AVX-512).
 *
 * Per-row accumulation order, fixed by `cols` alone (f32 and bf16):
 *   four 16-float FMA accumulators a0..a3 take the 64-float blocks (block
 *   at i..i+64 feeds a_k with i+16k..i+16k+16); the 16-float blocks left
 *   after that go into a0; then (a0+a1)+(a2+a3), a horizontal sum (high 256
 *   + low 256, high 128 + low 128, then pairs, then the last two), and the
 *   last cols%16 products by scalar fmaf in index order.  dot4 runs its
 *   four rows through that same sequence one after the other.
 *
 * Quantized bands (rows in the CPU's groups of eight blocks, kernels.h).
 * q8_0: kernels_avx2.c's float operations in its order, so the avx2
 * table's bits (see dot_q8_0_row).  q4_0, one row at a time: whole groups
 * alternately into two 8-float accumulators g0, g1 against the
 * activation view; the last nb % 8 blocks in pairs into two 16-float
 * accumulators (blocks (2p, 2p+1) to acc(p % 2), lanes 0-7 from block 2p,
 * 8-15 from 2p+1, lane k of a block the exact int32 sum of its products
 * 4k..4k+3 minus 8 * (the x they meet), converted, times d_x, then
 * fused-multiply-added by d_w; an odd last block alone into acc1); the
 * result is hsum(g0 + g1) + hsum(acc0 + acc1).  The activations are
 * quantized by the AVX2 code (every AVX-512 CPU has AVX2, and
 * sc_kernels_init requires it): the same bits.
 *
 * GEMM (T > 1), as kernels_avx2.c's: tiles of rows x tokens that give
 * every element exactly the dot's operations in the dot's order, loading
 * each weight vector once for several tokens (see the gemm_* section);
 * test_avx512_simde checks every element against dot1 bit for bit.
 */
#include "kernels.h"

#ifndef SC_AVX512_OPS
#define SC_AVX512_OPS sc_kern_avx512
#endif
#ifndef SC_AVX512_NAME
#define SC_AVX512_NAME "avx512"
#endif

#if ((defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && \
      defined(__F16C__) && defined(__AVX2__)) &&                                                     \
     (!defined(SC_VNNI) || defined(__AVX512VNNI__))) ||                                              \
    defined(SC_AVX512_SIMDE)
#ifndef SC_AVX512_SIMDE
#include <immintrin.h>
#endif
#include <math.h>
#include <string.h>


#define ALWAYS_INLINE static inline __attribute__((always_inline))
#define PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)
/* GEMV rows stream from DRAM: their bytes sc_gemv_ahead ahead (kernels.h:
 * 1 KB, 4 KB on Intel) are asked for early (as kernels_avx2.c's), which the
 * decode's read rate needs on Zen 5 and Intel; the f32, bf16 and q8_0 rows
 * only where sc_gemv_prefetch_on (kernels.h: off on Zen 4, where it
 * measured slower) */

ALWAYS_INLINE __m512 load16_f32(const float *p) { return _mm512_loadu_ps(p); }

/* 16 bf16 -> 16 f32: widen to 32 bits, move into the high half. */
ALWAYS_INLINE __m512 load16_bf16(const uint16_t *p) {
  __m256i h = _mm256_loadu_si256((const __m256i *)p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

ALWAYS_INLINE float scalar_f32(const float *p) { return *p; }
ALWAYS_INLINE float scalar_bf16(const uint16_t *p) { return sc_bf16_to_f32(*p); }

ALWAYS_INLINE float hsum16(__m512 v) {
  __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

ALWAYS_INLINE float hsum8(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

#define DEFINE_DOT(NAME, WT, LOAD16, SCALAR)                                 \
  ALWAYS_INLINE void NAME##_n(const WT *w, const float *x, int cols,       \
                              float *out, const int N, const int PF) {     \
    const size_t ahead = PF ? sc_gemv_ahead_bytes() : 0;                   \
    const int l2 = sc_gemv_into_l2();                                      \
    __m512 a[4][4];                                                        \
    for (int r = 0; r < N; r++)                                            \
      for (int k = 0; k < 4; k++) a[r][k] = _mm512_setzero_ps();           \
    int i = 0;                                                             \
    for (; i + 64 <= cols; i += 64)                                        \
      for (int k = 0; k < 4; k++) {                                        \
        if (PF && (k * 16 * sizeof(WT)) % 64 == 0)                         \
          for (int r = 0; r < N; r++)                                      \
            SC_GEMV_PREFETCH((const char *)(w + (size_t)r * cols + i + 16 * k) + ahead, l2); \
        __m512 xv = _mm512_loadu_ps(x + i + 16 * k);                       \
        for (int r = 0; r < N; r++)                                        \
          a[r][k] = _mm512_fmadd_ps(LOAD16(w + (size_t)r * cols + i + 16 * k), \
                                    xv, a[r][k]);                          \
      }                                                                    \
    for (; i + 16 <= cols; i += 16) {                                      \
      __m512 xv = _mm512_loadu_ps(x + i);                                  \
      for (int r = 0; r < N; r++)                                          \
        a[r][0] = _mm512_fmadd_ps(LOAD16(w + (size_t)r * cols + i), xv,    \
                                  a[r][0]);                                \
    }                                                                      \
    for (int r = 0; r < N; r++) {                                          \
      __m512 v = _mm512_add_ps(_mm512_add_ps(a[r][0], a[r][1]),            \
                               _mm512_add_ps(a[r][2], a[r][3]));           \
      float s = hsum16(v);                                                 \
      const WT *wr = w + (size_t)r * cols;                                 \
      for (int j = i; j < cols; j++) s = fmaf(SCALAR(wr + j), x[j], s);    \
      out[r] = s;                                                          \
    }                                                                      \
  }                                                                        \
  /* four rows one after the other: one stream through their contiguous \
   * bytes reads DRAM faster than four interleaved streams (the bits are  \
   * the same: each row's order is fixed by cols alone) */               \
  static void NAME##4(const WT *w, const float *x, int cols, float *out) { \
    if (atomic_load_explicit(&sc_gemv_prefetch_on, memory_order_relaxed))  \
      for (int r = 0; r < 4; r++) NAME##_n(w + (size_t)r * cols, x, cols, out + r, 1, 1); \
    else                                                                   \
      for (int r = 0; r < 4; r++) NAME##_n(w + (size_t)r * cols, x, cols, out + r, 1, 0); \
  }                                                                        \
  static void NAME##1(const WT *w, const float *x, int cols, float *out) { \
    if (atomic_load_explicit(&sc_gemv_prefetch_on, memory_order_relaxed))  \
      NAME##_n(w, x, cols, out, 1, 1);                                     \
    else                                                                   \
      NAME##_n(w, x, cols, out, 1, 0);                                     \
  }

DEFINE_DOT(dot_f32_, float, load16_f32, scalar_f32)
#ifndef SC_GEMV_256
DEFINE_DOT(dot_bf16_, uint16_t, load16_bf16, scalar_bf16)
#else
/* The bf16 dot at 256-bit width (kernels_avx512vnni256.c): each 16-float
 * accumulator above as its two halves lo, hi, which see the same lanes'
 * operations in the same order; hsum16's first step is lo + hi.  The same
 * bits as DEFINE_DOT's.  No software prefetch: on Zen 4 the hardware's
 * alone reads the rows faster (Qwen3-0.6B bf16 decode 0.98 of the paired
 * probe against 0.93 with the 1 KB prefetch, docs/PERFORMANCE.md). */
ALWAYS_INLINE __m256 load8_bf16(const uint16_t *p) {
  const __m128i h = _mm_loadu_si128((const __m128i *)p);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
ALWAYS_INLINE float dot_bf16_row(const uint16_t *w, const float *x, int cols) {
  __m256 lo[4], hi[4];
  for (int k = 0; k < 4; k++) lo[k] = hi[k] = _mm256_setzero_ps();
  int i = 0;
  for (; i + 64 <= cols; i += 64)
    for (int k = 0; k < 4; k++) {
      lo[k] = _mm256_fmadd_ps(load8_bf16(w + i + 16 * k), _mm256_loadu_ps(x + i + 16 * k), lo[k]);
      hi[k] = _mm256_fmadd_ps(load8_bf16(w + i + 16 * k + 8), _mm256_loadu_ps(x + i + 16 * k + 8), hi[k]);
    }
  for (; i + 16 <= cols; i += 16) {
    lo[0] = _mm256_fmadd_ps(load8_bf16(w + i), _mm256_loadu_ps(x + i), lo[0]);
    hi[0] = _mm256_fmadd_ps(load8_bf16(w + i + 8), _mm256_loadu_ps(x + i + 8), hi[0]);
  }
  const __m256 l = _mm256_add_ps(_mm256_add_ps(lo[0], lo[1]), _mm256_add_ps(lo[2], lo[3]));
  const __m256 h = _mm256_add_ps(_mm256_add_ps(hi[0], hi[1]), _mm256_add_ps(hi[2], hi[3]));
  float s = hsum8(_mm256_add_ps(l, h));
  for (int j = i; j < cols; j++) s = fmaf(scalar_bf16(w + j), x[j], s);
  return s;
}
static void dot_bf16_4(const uint16_t *w, const float *x, int cols, float *out) {
  for (int r = 0; r < 4; r++) out[r] = dot_bf16_row(w + (size_t)r * cols, x, cols);
}
static void dot_bf16_1(const uint16_t *w, const float *x, int cols, float *out) { out[0] = dot_bf16_row(w, x, cols); }
#endif

static void axpy(float *y, float a, const float *x, int n) {
  __m512 av = _mm512_set1_ps(a);
  int i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

static void quantize_q8(const float *x, int nb, int8_t *xq, float *xd, unsigned char *xp) {
  sc_kern_avx2.quantize_q8(x, nb, xq, xd, xp);
}

/* Lanes 0-7 = f(block 0), 8-15 = f(block 1). */
ALWAYS_INLINE __m512 two_scales(float lo, float hi) {
  return _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(lo), _mm512_set1_ps(hi));
}

ALWAYS_INLINE __m512i two_halves(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

ALWAYS_INLINE float blk_scale(const uint8_t *blk) { return sc_f16_table[blk[0] | blk[1] << 8]; }

/* int16 pair sums p -> 16 int32 lanes, converted, times d_x, fma by d_w. */
ALWAYS_INLINE __m512 finish(__m512i p, __m512 dx, __m512 dw, __m512 acc) {
  const __m512 s = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(p, _mm512_set1_epi16(1))), dx);
  return _mm512_fmadd_ps(dw, s, acc);
}

/* A pair of q4_0 blocks' weight side (the last nb % 8 of a row), split
 * from the token side (below) so that the GEMM unpacks it once for
 * several tokens and still runs the dot's exact operations: q the
 * nibbles, dw the two scales (two_scales). */
typedef struct qpair {
  __m512i q;
  __m512 dw;
} qpair;

/* 64 (two = 0: 32, upper lanes zero) activation bytes at y. */
ALWAYS_INLINE __m512i y_pair(const int8_t *y, const int two) {
  /* one 64-byte load for a pair (a 256-bit load and an insert cost a
   * shuffle more a token and pair; Zen 4's q8_0 tile runs 1.14x faster) */
  if (two) return _mm512_loadu_si512(y);
  return two_halves(_mm256_loadu_si256((const __m256i *)y), _mm256_setzero_si256());
}

#ifdef SC_VNNI
/* VPDPBUSD: int32 lane k = the sum of byte products 4k..4k+3 at once, the
 * value maddubs + madd reach in two steps, so the same bits in one
 * instruction. */
ALWAYS_INLINE __m512 finish32(__m512i s32, __m512 dx, __m512 dw, __m512 acc) {
  return _mm512_fmadd_ps(dw, _mm512_mul_ps(_mm512_cvtepi32_ps(s32), dx), acc);
}
#endif

/* q4_0 blocks b0 and b1 (b1 NULL: one block): each block's 16 bytes in both
 * 128-bit lanes of its half, the second lane shifted right by 4, so that
 * low nibbles meet x[0..16) and high nibbles x[16..32). */
ALWAYS_INLINE qpair q4_0_wpair(const uint8_t *b0, const uint8_t *b1) {
  const __m512i raw = two_halves(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b0 + 2))),
                                 b1 ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b1 + 2)))
                                    : _mm256_setzero_si256());
  const qpair p = {.q = _mm512_and_si512(_mm512_srlv_epi64(raw, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)),
                                         _mm512_set1_epi8(0x0f)),
                   .dw = two_scales(blk_scale(b0), b1 ? blk_scale(b1) : 0.0f)};
  return p;
}
ALWAYS_INLINE __m512 q4_0_tok(qpair w, const int8_t *y, const float *dx, const int two, __m512 acc) {
  const __m512i yv = y_pair(y, two);
#ifdef SC_VNNI
  const __m512i y8 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), yv);
  const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q, yv), y8);
  return finish32(p, two_scales(dx[0], two ? dx[1] : 0.0f), w.dw, acc);
#else
  const __m512i y8 = _mm512_slli_epi16(_mm512_maddubs_epi16(_mm512_set1_epi8(1), yv), 3);
  const __m512i p = _mm512_sub_epi16(_mm512_maddubs_epi16(w.q, yv), y8);
  return finish(p, two_scales(dx[0], two ? dx[1] : 0.0f), w.dw, acc);
#endif
}

#define DEFINE_QROW(NAME, WPAIR, TOK, BYTES)                                 \
  ALWAYS_INLINE __m512 NAME(const uint8_t *w, const int8_t *xq, const float *xd, int nb, \
                            __m512 a1) {                                    \
    __m512 a0 = _mm512_setzero_ps();                                        \
    const size_t ahead = sc_gemv_ahead_bytes();                             \
    const int l2 = sc_gemv_into_l2();                                       \
    const int np = nb / 2;                                                  \
    int p = 0;                                                              \
    for (; p + 2 <= np; p += 2) {                                           \
      const uint8_t *b = w + (size_t)(2 * p) * BYTES;                       \
      for (int l = 0; l < (4 * BYTES + 63) / 64; l++) SC_GEMV_PREFETCH(b + ahead + 64 * l, l2);     \
      a0 = TOK(WPAIR(b, b + BYTES), xq + 64 * p, xd + 2 * p, 1, a0);        \
      a1 = TOK(WPAIR(b + 2 * BYTES, b + 3 * BYTES), xq + 64 * (p + 1), xd + 2 * p + 2, 1, a1); \
    }                                                                       \
    if (p < np) {                                                           \
      const uint8_t *b = w + (size_t)(2 * p) * BYTES;                       \
      a0 = TOK(WPAIR(b, b + BYTES), xq + 64 * p, xd + 2 * p, 1, a0);        \
    }                                                                       \
    if (nb & 1)                                                             \
      a1 = TOK(WPAIR(w + (size_t)(nb - 1) * BYTES, NULL), xq + 32 * (nb - 1), xd + nb - 1, 0, a1); \
    return _mm512_add_ps(a0, a1);                                           \
  }
DEFINE_QROW(q4_0_blocks, q4_0_wpair, q4_0_tok, SC_Q4_0_BLOCK)

/* One whole q4_0 group (kernels.h) of one row, its weight side: chunks
 * 2k, 2k+1 in one register, low nibbles lo[k], high nibbles hi[k]; dw the
 * eight scales. */
typedef struct q4grp {
  __m512i lo[2], hi[2];
  __m256 dw;
} q4grp;

ALWAYS_INLINE q4grp q4_group_w(const uint8_t *wg) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  q4grp g;
  for (int k = 0; k < 2; k++) {
    const __m512i v = _mm512_loadu_si512(wg + 16 + 64 * k);
    g.lo[k] = _mm512_and_si512(v, m4);
    g.hi[k] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
  g.dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wg));
  return g;
}

/* ... against the view xv of one token: low nibbles against x[0][2k..2k+1],
 * high against x[1][2k..2k+1]; the two 256-bit halves added, so int16
 * lanes 2j, 2j+1 hold block j (exact: eight maddubs lanes of at most 2 x
 * 15 x 127); minus the nibble offsets, acc += (d_w * d_x) * dot. */
ALWAYS_INLINE __m256 q4_group_tok(const q4grp *g, const unsigned char *xv, __m256 acc) {
#ifdef SC_VNNI
  /* int32 lanes j and j + 8 hold block j's byte products: the same exact
   * integer the int16 route below reaches */
  __m512i t[2];
  for (int k = 0; k < 2; k++) /* two short chains: VPDPBUSD's latency */
    t[k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), g->lo[k], _mm512_loadu_si512(xv + 64 * k)),
                               g->hi[k], _mm512_loadu_si512(xv + 128 + 64 * k));
  const __m512i ts = _mm512_add_epi32(t[0], t[1]);
  const __m256i dot = _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(ts), _mm512_extracti64x4_epi64(ts, 1)),
                                       _mm256_loadu_si256((const __m256i *)(xv + 256)));
#else
  __m512i t = _mm512_setzero_si512();
  for (int k = 0; k < 2; k++) {
    const __m512i lo = _mm512_maddubs_epi16(g->lo[k], _mm512_loadu_si512(xv + 64 * k));
    const __m512i hi = _mm512_maddubs_epi16(g->hi[k], _mm512_loadu_si512(xv + 128 + 64 * k));
    t = _mm512_add_epi16(t, _mm512_add_epi16(lo, hi));
  }
  const __m256i sum16 = _mm256_add_epi16(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
  const __m256i dot = _mm256_sub_epi32(_mm256_madd_epi16(sum16, _mm256_set1_epi16(1)),
                                       _mm256_loadu_si256((const __m256i *)(xv + 256)));
#endif
  const __m256 s = _mm256_mul_ps(g->dw, _mm256_loadu_ps((const float *)(xv + 288)));
  return _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(dot), acc);
}

ALWAYS_INLINE __m256 q4_0_group(const uint8_t *wg, const unsigned char *xv, __m256 acc) {
  const q4grp g = q4_group_w(wg);
  return q4_group_tok(&g, xv, acc);
}

/* q4_0: whole groups alternately into g0 and g1 (8 lanes), the last
 * nb % 8 blocks in pairs as q8_0's; then hsum(g0 + g1) + hsum(pairs). */
ALWAYS_INLINE float dot_q4_0_row(const uint8_t *w, const int8_t *xq, const float *xd,
                                 const unsigned char *xp, int nb) {
  __m256 g0 = _mm256_setzero_ps(), g1 = _mm256_setzero_ps();
  const size_t ahead = sc_gemv_ahead_bytes();
  const int l2 = sc_gemv_into_l2();
  const int ng = nb / 8;
  int g = 0;
  for (; g + 2 <= ng; g += 2) {
    const uint8_t *next = w + (size_t)g * SC_Q4_GROUP_BYTES + ahead; /* 288 bytes a step */
    for (int l = 0; l < 5; l++) SC_GEMV_PREFETCH(next + 64 * l, l2);
    g0 = q4_0_group(w + (size_t)g * SC_Q4_GROUP_BYTES, xp + (size_t)g * SC_Q4_VIEW_GROUP, g0);
    g1 = q4_0_group(w + (size_t)(g + 1) * SC_Q4_GROUP_BYTES, xp + (size_t)(g + 1) * SC_Q4_VIEW_GROUP, g1);
  }
  if (g < ng) g0 = q4_0_group(w + (size_t)g * SC_Q4_GROUP_BYTES, xp + (size_t)g * SC_Q4_VIEW_GROUP, g0);
  const int b = 8 * ng;
  const float tail =
      b < nb ? hsum16(q4_0_blocks(w + (size_t)b * SC_Q4_0_BLOCK, xq + 32 * b, xd + b, nb - b, _mm512_setzero_ps()))
             : 0.0f;
  return hsum8(_mm256_add_ps(g0, g1)) + tail;
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
/* q8_0 (rows in the CPU's groups, kernels.h), with kernels_avx2.c's
 * float operations in its order, so the same bits as the avx2 table: per
 * whole group the eight blocks' exact integer dots in the lanes of one int32 vector, converted,
 * fma by d_w * d_x (eight scales from one F16C conversion) into one
 * 8-float accumulator; the last nb % 8 blocks one by one into the same
 * one (lane k their products 4k..4k+3, converted, times d_x, fma by d_w);
 * then hsum8.  The integer part two chunks to a register: |w| against x
 * negated where w < 0 (VPDPBUSD, or maddubs and madd: neither saturates,
 * pairs of at most 128 x 127), lanes j and j + 8 block j, the halves
 * added at the end. */
ALWAYS_INLINE __m512i q8g_chunk2(__m512i aq, __mmask64 neg, const unsigned char *xc, __m512i sum) {
  const __m512i y = _mm512_loadu_si512(xc);
  const __m512i ys = _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y);
#ifdef SC_VNNI
  return _mm512_dpbusd_epi32(sum, aq, ys);
#else
  return _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(aq, ys), _mm512_set1_epi16(1)));
#endif
}
ALWAYS_INLINE __m256 q8g_end(__m512i sum, __m256 dw, const unsigned char *xv, __m256 acc) {
  const __m256i dot = _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
  return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_loadu_ps((const float *)(xv + 288))),
                         _mm256_cvtepi32_ps(dot), acc);
}
/* One GGML block after the groups: kernels_avx2.c's q8_0_block. */
ALWAYS_INLINE __m256 q8g_tail(const uint8_t *blk, const int8_t *y, const float *dx, __m256 acc) {
  const __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 2));
  const __m256i ys = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y), q);
#ifdef SC_VNNI
  const __m256i s32 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(q, q), ys);
#else
  const __m256i s32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q, q), ys), _mm256_set1_epi16(1));
#endif
  const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(s32), _mm256_broadcast_ss(dx));
  return _mm256_fmadd_ps(_mm256_set1_ps(blk_scale(blk)), s, acc);
}
/* The one-token dot.  The same exact integers and float steps either
 * way, so the same bits as the tile.  512-bit: two chunks to a register,
 * as the tile.  SC_GEMV_256 (avx512-vnni-256): a chunk at a time at
 * 256-bit width, as kernels_avx2.c's with VPDPBUSD: on Zen 4 the 512-bit
 * form decoded from DRAM at 0.73 of the paired probe against 0.82 for
 * GGML's blocks, this one as fast as those. */
#ifndef SC_GEMV_256
ALWAYS_INLINE __m256i q8g_row_group(const uint8_t *wg, const unsigned char *xv) {
  __m512i s[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}; /* two short chains */
  for (int k = 0; k < 4; k++) {
    const __m512i q = _mm512_loadu_si512(wg + 16 + 64 * k);
    s[k & 1] = q8g_chunk2(_mm512_abs_epi8(q), _mm512_movepi8_mask(q), xv + 64 * k, s[k & 1]);
  }
  const __m512i t = _mm512_add_epi32(s[0], s[1]);
  return _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
}
#else
ALWAYS_INLINE __m256i q8g_chunk1(const unsigned char *wc, const unsigned char *xc, __m256i sum) {
  const __m256i q = _mm256_loadu_si256((const __m256i *)wc);
  const __m256i ys = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xc), q);
#ifdef SC_VNNI
  return _mm256_dpbusd_epi32(sum, _mm256_sign_epi8(q, q), ys);
#else
  return _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(q, q), ys),
                                                 _mm256_set1_epi16(1)));
#endif
}
ALWAYS_INLINE __m256i q8g_row_group(const uint8_t *wg, const unsigned char *xv) {
  __m256i s[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}; /* two short chains */
  for (int k = 0; k < 8; k++) s[k & 1] = q8g_chunk1(wg + 16 + 32 * k, xv + 32 * k, s[k & 1]);
  return _mm256_add_epi32(s[0], s[1]);
}
#endif
ALWAYS_INLINE float dot_q8_0_row(const uint8_t *w, const int8_t *xq, const float *xd,
                                  const unsigned char *xp, int nb, const int PF) {
  __m256 acc = _mm256_setzero_ps();
  const size_t ahead = PF ? sc_gemv_ahead_bytes() : 0;
  const int l2 = sc_gemv_into_l2();
  const int ng = nb / SC_Q8_GROUP;
  for (int g = 0; g < ng; g++) {
    const uint8_t *wg = w + (size_t)g * SC_Q8_GROUP_BYTES;
    const unsigned char *xv = xp + (size_t)g * SC_Q4_VIEW_GROUP;
    /* five lines sc_gemv_ahead bytes ahead where sc_gemv_prefetch_on (kernels.h) */
    if (PF)
      for (int l = 0; l < 5; l++) SC_GEMV_PREFETCH(wg + ahead + 64 * l, l2);
    const __m256i dot = q8g_row_group(wg, xv);
    acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wg)),
                                        _mm256_loadu_ps((const float *)(xv + 288))),
                          _mm256_cvtepi32_ps(dot), acc);
  }
  for (int b = SC_Q8_GROUP * ng; b < nb; b++)
    acc = q8g_tail(w + (size_t)b * SC_Q8_0_BLOCK, xq + 32 * b, xd + b, acc);
  return hsum8(acc);
}

DEFINE_QDOT(dot_q4_0_, dot_q4_0_row)
static void dot_q8_0_4(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd, const unsigned char *xp,
                       int nb, float *out) {
  if (atomic_load_explicit(&sc_gemv_prefetch_on, memory_order_relaxed))
    for (int r = 0; r < 4; r++) out[r] = dot_q8_0_row(w + r * rb, xq, xd, xp, nb, 1);
  else
    for (int r = 0; r < 4; r++) out[r] = dot_q8_0_row(w + r * rb, xq, xd, xp, nb, 0);
}
static void dot_q8_0_1(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd, const unsigned char *xp,
                       int nb, float *out) {
  (void)rb;
  out[0] = atomic_load_explicit(&sc_gemv_prefetch_on, memory_order_relaxed) ? dot_q8_0_row(w, xq, xd, xp, nb, 1)
                                                                             : dot_q8_0_row(w, xq, xd, xp, nb, 0);
}

/* ---- attention: one query row (kernels.h attn_row) ------------------- */

#ifndef SC_AVX512_SIMDE
/* sc_attn_row_avx2's bits at twice the width.  Its two 8-float
 * accumulators per key (even and odd 8-column blocks) are the two halves
 * of one 16-float accumulator here, so each FMA does both of its FMAs;
 * eight keys at a time keep eight chains in flight (a key's score does not
 * depend on its neighbours: a short last group repeats its last key); the
 * halves are added and reduced by the same sum4x8, an odd last 8-column
 * block goes into the low half, the columns past the last multiple of 8
 * one by one (fmaf).  The values: every column its own chain of FMAs over
 * the keys in order, 128 columns a pass (the same per column as AVX2's 64). */
ALWAYS_INLINE __m128 sum4x8_512(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
#define HALVES(a) _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)))
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(HALVES(a0), HALVES(a1)), _mm256_hadd_ps(HALVES(a2), HALVES(a3)));
#undef HALVES
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

static void attn_row(const float *q, const float *kc, const float *vc, size_t ld, int lo, int n, int cap, int hd,
                     float scale, float *s, float *y) {
  const int h8 = hd & ~7, h16 = hd & ~15;
  const float *k[8];
  int row = lo % cap;
  for (int j = 0; j < n; j += 8) {
    const int nk = n - j < 8 ? n - j : 8;
    for (int i = 0; i < 8; i++) {
      k[i] = kc + (size_t)row * ld; /* empty neighbours repeat the last key */
      if (i + 1 < nk && ++row == cap) row = 0;
    }
    if (++row == cap) row = 0;
    __m512 a[8];
    for (int i = 0; i < 8; i++) a[i] = _mm512_setzero_ps();
    for (int c = 0; c < h16; c += 16) {
      const __m512 q0 = _mm512_loadu_ps(q + c);
      for (int i = 0; i < 8; i++) a[i] = _mm512_fmadd_ps(_mm512_loadu_ps(k[i] + c), q0, a[i]);
    }
    if (h16 < h8) { /* an odd last 8-column block: AVX2's even accumulator */
      const __m512 q0 = _mm512_castps256_ps512(_mm256_loadu_ps(q + h16));
      for (int i = 0; i < 8; i++)
        a[i] = _mm512_mask3_fmadd_ps(_mm512_castps256_ps512(_mm256_loadu_ps(k[i] + h16)), q0, a[i], 0x00ff);
    }
    float d[8];
    _mm_storeu_ps(d, sum4x8_512(a[0], a[1], a[2], a[3]));
    _mm_storeu_ps(d + 4, sum4x8_512(a[4], a[5], a[6], a[7]));
    for (int i = 0; i < nk; i++) {
      for (int cc = h8; cc < hd; cc++) d[i] = fmaf(q[cc], k[i][cc], d[i]);
      s[j + i] = d[i] * scale;
    }
  }
  const float sum = sc_softmax_row(s, n);
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (int c0 = 0; c0 < h8; c0 += 128) {
    const int nc = h8 - c0 < 128 ? h8 - c0 : 128, nv = nc / 16, half = nc % 16; /* half: 0 or 8 */
    __m512 acc[9];
    for (int r = 0; r < 9; r++) acc[r] = _mm512_setzero_ps();
    row = lo % cap;
    for (int j = 0; j < n; j++) {
      const float *v = vc + (size_t)row * ld + c0;
      const __m512 p = _mm512_set1_ps(s[j]);
      if (nv == 8)
        for (int r = 0; r < 8; r++) acc[r] = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 16 * r), acc[r]);
      else
        for (int r = 0; r < nv; r++) acc[r] = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + 16 * r), acc[r]);
      if (half)
        acc[8] = _mm512_castps256_ps512(_mm256_fmadd_ps(_mm512_castps512_ps256(p), _mm256_loadu_ps(v + 16 * nv),
                                                        _mm512_castps512_ps256(acc[8])));
      if (++row == cap) row = 0;
    }
    for (int r = 0; r < nv; r++) _mm512_storeu_ps(y + c0 + 16 * r, _mm512_mul_ps(acc[r], inv));
    if (half)
      _mm256_storeu_ps(y + c0 + 16 * nv, _mm256_mul_ps(_mm512_castps512_ps256(acc[8]), _mm512_castps512_ps256(inv)));
  }
  sc_attn_value_cols(s, vc, ld, lo, n, cap, h8, hd, 1.0f / sum, y);
}
#endif

/* ---- GEMM: tiles of R rows x NT tokens, same bits as the dots ------- */

/* As kernels_avx2.c's: each output's accumulators are independent sums
 * (the float dot's a0..a3, the quantized dots' even and odd pairs, q4_0's
 * even and odd groups), so a tile computes them one after the other, each
 * over R x NT outputs in registers, keeps the finished ones on the stack
 * and combines them as the dot does: every element gets the dot's exact
 * operations in the dot's order, while each weight vector is loaded (and
 * converted or unpacked) once for NT tokens and each activation vector
 * once for R rows.  The tile sizes fill the 32 registers by count (the
 * code has not been timed: no AVX-512 machine here); tokens that do not
 * fill a whole tile go in at most one tile each of 3, 2 and 1. */
#ifndef FL_NT
#define FL_NT 6 /* 4 x 6 accumulators, 4 weight vectors, x */
#endif
#ifndef FL_SEG
#define FL_SEG 512 /* a multiple of 64 */
#endif
#define DEFINE_GEMM_FL(NAME, WT, LOAD16, SCALAR)                               \
  ALWAYS_INLINE void NAME##tile(const WT *w, int cols, const float *x, int ldx, \
                                float *out, int ldo, const int R, const int NT) { \
    __m512 part[4][4][FL_NT];                                                 \
    const int n64 = cols & ~63, n16 = cols & ~15;                             \
    for (int k = 0; k < 4; k++)                                               \
      for (int r = 0; r < R; r++)                                             \
        for (int t = 0; t < NT; t++) part[k][r][t] = _mm512_setzero_ps();     \
    /* segments of FL_SEG columns keep the rows and tokens in L1 across    \
     * the four passes; each accumulator still runs in column order */     \
    for (int i0 = 0; i0 < n64; i0 += FL_SEG) {                                \
      const int i1 = n64 - i0 < FL_SEG ? n64 : i0 + FL_SEG;                   \
      for (int k = 0; k < 4; k++) {                                           \
        __m512 a[4][FL_NT];                                                   \
        for (int r = 0; r < R; r++)                                           \
          for (int t = 0; t < NT; t++) a[r][t] = part[k][r][t];               \
        for (int i = i0 + 16 * k; i < i1; i += 64) {                          \
          __m512 wv[4];                                                       \
          for (int r = 0; r < R; r++) wv[r] = LOAD16(w + (size_t)r * cols + i); \
          for (int t = 0; t < NT; t++) {                                      \
            const __m512 xv = _mm512_loadu_ps(x + (size_t)t * ldx + i);       \
            for (int r = 0; r < R; r++) a[r][t] = _mm512_fmadd_ps(wv[r], xv, a[r][t]); \
          }                                                                   \
        }                                                                     \
        for (int r = 0; r < R; r++)                                           \
          for (int t = 0; t < NT; t++) part[k][r][t] = a[r][t];               \
      }                                                                       \
    }                                                                         \
    for (int i = n64; i < n16; i += 16) { /* the dot's 16-float blocks: a0 */ \
      __m512 wv[4];                                                           \
      for (int r = 0; r < R; r++) wv[r] = LOAD16(w + (size_t)r * cols + i);   \
      for (int t = 0; t < NT; t++) {                                          \
        const __m512 xv = _mm512_loadu_ps(x + (size_t)t * ldx + i);           \
        for (int r = 0; r < R; r++) part[0][r][t] = _mm512_fmadd_ps(wv[r], xv, part[0][r][t]); \
      }                                                                       \
    }                                                                         \
    for (int r = 0; r < R; r++)                                               \
      for (int t = 0; t < NT; t++) {                                          \
        const __m512 v = _mm512_add_ps(_mm512_add_ps(part[0][r][t], part[1][r][t]), \
                                       _mm512_add_ps(part[2][r][t], part[3][r][t])); \
        float sum = hsum16(v);                                                \
        const WT *wr = w + (size_t)r * cols;                                  \
        const float *xt = x + (size_t)t * ldx;                                \
        for (int j = n16; j < cols; j++) sum = fmaf(SCALAR(wr + j), xt[j], sum); \
        out[(size_t)t * ldo + r] = sum;                                       \
      }                                                                       \
  }                                                                           \
  static void NAME##r(const WT *w, int cols, const float *x, int ldx, int nt, \
                      float *out, int ldo, const int R) {                     \
    int t = 0;                                                                \
    for (; t + FL_NT <= nt; t += FL_NT)                                       \
      NAME##tile(w, cols, x + (size_t)t * ldx, ldx, out + (size_t)t * ldo, ldo, R, FL_NT); \
    if (nt - t >= 3) {                                                        \
      NAME##tile(w, cols, x + (size_t)t * ldx, ldx, out + (size_t)t * ldo, ldo, R, 3); \
      t += 3;                                                                 \
    }                                                                         \
    if (nt - t >= 2) {                                                        \
      NAME##tile(w, cols, x + (size_t)t * ldx, ldx, out + (size_t)t * ldo, ldo, R, 2); \
      t += 2;                                                                 \
    }                                                                         \
    if (t < nt) NAME##tile(w, cols, x + (size_t)t * ldx, ldx, out + (size_t)t * ldo, ldo, R, 1); \
  }                                                                           \
  static void NAME(const WT *w, int nr, const float *x, int ldx, int nt, int cols, \
                   float *out, int ldo) {                                     \
    /* the next block of four rows while this one computes, into L2 (T1): \
     * 8-24 KB into L1 (T0) pushed out the activations the tiles reuse;   \
     * Zen 4, T1 against T0: 64-token prompt 5-6 % faster, T = 2 and 8    \
     * from DRAM 9-16 % (docs/PERFORMANCE.md) */                          \
    for (size_t l = 0; l < (size_t)4 * cols * sizeof(WT); l += 64)            \
      _mm_prefetch((const char *)(w + (size_t)4 * cols) + l, _MM_HINT_T1);   \
    switch (nr) {                                                             \
    case 4: NAME##r(w, cols, x, ldx, nt, out, ldo, 4); break;                 \
    case 3: NAME##r(w, cols, x, ldx, nt, out, ldo, 3); break;                 \
    case 2: NAME##r(w, cols, x, ldx, nt, out, ldo, 2); break;                 \
    default: NAME##r(w, cols, x, ldx, nt, out, ldo, 1); break;                \
    }                                                                         \
  }

DEFINE_GEMM_FL(gemm_f32, float, load16_f32, scalar_f32)
DEFINE_GEMM_FL(gemm_bf16, uint16_t, load16_bf16, scalar_bf16)

/* Quantized tiles: R <= 2 rows, row r at w + r * rb; token t's
 * activations at xq + t * 32 * nb, xd + t * nb, xp + t * 64 * nb. */
#ifndef Q8_NT
#define Q8_NT 6 /* 2 x 6 accumulators, 2 x (weights, scales), temporaries */
#endif
#ifndef Q4_NT
#define Q4_NT 8 /* tokens a tile, two to a register */
#endif
#define Q_NTMAX (Q8_NT > Q4_NT ? Q8_NT : Q4_NT)

/* n blocks of pairs as DEFINE_QROW (blocks 0..n of each row; token t's
 * at xq + t * 32 * nbt, xd + t * nbt): the even pairs (a0), then the odd
 * pairs and an odd last block (a1); dst[t * ldd + r] = hsum16(a0 + a1). */
#define DEFINE_QPAIRS(NAME, WPAIR, TOK, BYTES)                                 \
  ALWAYS_INLINE void NAME(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd, \
                          int nbt, int n, float *dst, int ldd, const int R, const int NT) { \
    __m512 part[2][2][Q_NTMAX];                                               \
    const int np = n / 2;                                                     \
    for (int par = 0; par < 2; par++) {                                       \
      __m512 a[2][Q_NTMAX];                                                   \
      for (int r = 0; r < R; r++)                                             \
        for (int t = 0; t < NT; t++) a[r][t] = _mm512_setzero_ps();           \
      for (int p = par; p < np; p += 2) {                                     \
        qpair q[2];                                                           \
        for (int r = 0; r < R; r++) {                                         \
          const uint8_t *b = w + r * rb + (size_t)(2 * p) * BYTES;            \
          q[r] = WPAIR(b, b + BYTES);                                         \
        }                                                                     \
        for (int t = 0; t < NT; t++)                                          \
          for (int r = 0; r < R; r++)                                         \
            a[r][t] = TOK(q[r], xq + (size_t)t * 32 * nbt + 64 * p, xd + (size_t)t * nbt + 2 * p, 1, \
                          a[r][t]);                                           \
      }                                                                       \
      if (par == 1 && (n & 1)) {                                              \
        qpair q[2];                                                           \
        for (int r = 0; r < R; r++) q[r] = WPAIR(w + r * rb + (size_t)(n - 1) * BYTES, NULL); \
        for (int t = 0; t < NT; t++)                                          \
          for (int r = 0; r < R; r++)                                         \
            a[r][t] = TOK(q[r], xq + (size_t)t * 32 * nbt + 32 * (n - 1), xd + (size_t)t * nbt + n - 1, 0, \
                          a[r][t]);                                           \
      }                                                                       \
      for (int r = 0; r < R; r++)                                             \
        for (int t = 0; t < NT; t++) part[par][r][t] = a[r][t];               \
    }                                                                         \
    for (int r = 0; r < R; r++)                                               \
      for (int t = 0; t < NT; t++)                                            \
        dst[(size_t)t * ldd + r] = hsum16(_mm512_add_ps(part[0][r][t], part[1][r][t])); \
  }
DEFINE_QPAIRS(q4_0_pairs, q4_0_wpair, q4_0_tok, SC_Q4_0_BLOCK)

/* One q4_0 group of one row against one token's view x[4] (its four
 * 64-byte pieces), the integer part before its halves meet: VNNI, int32
 * lanes j and j + 8 (block j's byte products); otherwise int16 lanes
 * whose pairs (2j, 2j+1) and (2j+16, 2j+17) hold block j's (at most 4 x
 * 2 x 15 x 127, and twice that once the halves meet: no lane
 * saturates). */
ALWAYS_INLINE __m512i q4_group_raw(const q4grp *g, const __m512i x[4]) {
#ifdef SC_VNNI
  const __m512i z = _mm512_setzero_si512();
  return _mm512_add_epi32(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, g->lo[0], x[0]), g->hi[0], x[2]),
                          _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, g->lo[1], x[1]), g->hi[1], x[3]));
#else
  return _mm512_add_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(g->lo[0], x[0]), _mm512_maddubs_epi16(g->hi[0], x[2])),
                          _mm512_add_epi16(_mm512_maddubs_epi16(g->lo[1], x[1]), _mm512_maddubs_epi16(g->hi[1], x[3])));
#endif
}

/* Two tokens' raw sums a, b -> int32 [a's eight block dots | b's]: the
 * halves of each added (exact), the int16 lanes' pairs summed, minus the
 * nibble offsets s = [s_a | s_b]: lane for lane the integer q4_group_tok
 * reaches. */
ALWAYS_INLINE __m512i q4_pair_dots(__m512i a, __m512i b, __m512i s) {
  const __m512i h = _mm512_shuffle_i32x4(a, b, 0x44), l = _mm512_shuffle_i32x4(a, b, 0xee);
#ifdef SC_VNNI
  return _mm512_sub_epi32(_mm512_add_epi32(h, l), s);
#else
  return _mm512_sub_epi32(_mm512_madd_epi16(_mm512_add_epi16(h, l), _mm512_set1_epi16(1)), s);
#endif
}

ALWAYS_INLINE __m512 pair256(const void *a, const void *b) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd((const double *)a)),
                                             _mm256_loadu_pd((const double *)b), 1));
}

/* q4_0: the tail blocks' sums first (tail[t][r]), then the even groups
 * (g0), the odd groups (g1), and hsum8(g0 + g1) + tail as the dot.  Two
 * tokens share a register: lanes 0..7 one token's eight blocks, 8..15
 * the other's (an odd last token is paired with itself), so the float
 * finish (acc += (d_w d_x) dot) runs sixteen lanes wide with the very
 * operations q4_group_tok does on eight: the bits of dot_q4_0_row. */
ALWAYS_INLINE void q4_tile(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd,
                           const unsigned char *xp, int nb, float *out, int ldo, const int R,
                           const int NT) {
  const int ng = nb / 8, b = 8 * ng, NP = (NT + 1) / 2;
  float tail[Q_NTMAX][2];
  if (b < nb)
    q4_0_pairs(w + (size_t)b * SC_Q4_0_BLOCK, rb, xq + 32 * b, xd + b, nb, nb - b, &tail[0][0], 2, R, NT);
  else
    for (int t = 0; t < NT; t++) tail[t][0] = tail[t][1] = 0.0f; /* the dot adds 0.0f */
  __m512 part[2][2][(Q_NTMAX + 1) / 2];
  for (int par = 0; par < 2; par++) {
    __m512 a[2][(Q_NTMAX + 1) / 2];
    for (int r = 0; r < R; r++)
      for (int p = 0; p < NP; p++) a[r][p] = _mm512_setzero_ps();
    for (int g = par; g < ng; g += 2) {
      q4grp q[2];
      __m512 dw[2];
      for (int r = 0; r < R; r++) {
        const uint8_t *wg = w + r * rb + (size_t)g * SC_Q4_GROUP_BYTES;
        q[r] = q4_group_w(wg);
        dw[r] = _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(q[r].dw))); /* both halves */
      }
      for (int p = 0; p < NP; p++) {
        const int t1 = 2 * p + 1 < NT ? 2 * p + 1 : 2 * p;
        const unsigned char *x0 = xp + (size_t)(2 * p) * 64 * nb + (size_t)g * SC_Q4_VIEW_GROUP,
                            *x1 = xp + (size_t)t1 * 64 * nb + (size_t)g * SC_Q4_VIEW_GROUP;
        __m512i xa[4], xb[4];
        for (int k = 0; k < 4; k++) {
          xa[k] = _mm512_loadu_si512(x0 + 64 * k);
          xb[k] = _mm512_loadu_si512(x1 + 64 * k);
        }
        const __m512i s = _mm512_castps_si512(pair256(x0 + 256, x1 + 256));
        const __m512 dx = pair256(x0 + 288, x1 + 288);
        for (int r = 0; r < R; r++) {
          const __m512i d = q4_pair_dots(q4_group_raw(&q[r], xa), q4_group_raw(&q[r], xb), s);
          a[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw[r], dx), _mm512_cvtepi32_ps(d), a[r][p]);
        }
      }
    }
    for (int r = 0; r < R; r++)
      for (int p = 0; p < NP; p++) part[par][r][p] = a[r][p];
  }
  for (int r = 0; r < R; r++)
    for (int p = 0; p < NP; p++) {
      const __m512 v = _mm512_add_ps(part[0][r][p], part[1][r][p]);
      out[(size_t)(2 * p) * ldo + r] = hsum8(_mm512_castps512_ps256(v)) + tail[2 * p][r];
      if (2 * p + 1 < NT)
        out[(size_t)(2 * p + 1) * ldo + r] =
            hsum8(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))) + tail[2 * p + 1][r];
    }
}

/* Tokens in tiles of NT, then 6, 4, 2, 1, each against every row
 * (SC_DEFINE_GEMM_Q_ROWS, kernels.h: rows first would stream all nt
 * tokens' activations from L2 once per pair of rows). */
#define DEFINE_GEMM_Q(NAME, TILE, NT)                                            \
  SC_DEFINE_GEMM_Q_ROWS(NAME, TILE)                                              \
  static void NAME(const uint8_t *w, size_t rb, int nr, const int8_t *xq, const float *xd, \
                   const unsigned char *xp, int nb, int nt, float *out, int ldo) { \
    int t = 0;                                                                   \
    _Static_assert(NT <= 8, "the tails below cover fewer than 8 tokens");        \
    while (t + NT <= nt) SC_GEMM_Q_TOKENS(NAME, NT);                             \
    if (nt - t >= 6) SC_GEMM_Q_TOKENS(NAME, 6);                                  \
    if (nt - t >= 4) SC_GEMM_Q_TOKENS(NAME, 4);                                  \
    if (nt - t >= 2) SC_GEMM_Q_TOKENS(NAME, 2);                                  \
    if (nt - t >= 1) SC_GEMM_Q_TOKENS(NAME, 1);                                  \
  }
/* q8_0 in the grouped order: R <= 2 rows x NT tokens, each output's
 * integer sums of a group in a register (its chunks' |w| and sign masks
 * loaded once for all the tokens), then the dot's float steps. */
ALWAYS_INLINE void q8_tile(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd,
                            const unsigned char *xp, int nb, float *out, int ldo, const int R,
                            const int NT) {
  __m256 a[2][Q8_NT];
  for (int r = 0; r < R; r++)
    for (int t = 0; t < NT; t++) a[r][t] = _mm256_setzero_ps();
  const int ng = nb / SC_Q8_GROUP;
  for (int g = 0; g < ng; g++) {
    __m512i sum[2][Q8_NT];
    for (int r = 0; r < R; r++)
      for (int t = 0; t < NT; t++) sum[r][t] = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++) {
      __m512i aq[2];
      __mmask64 neg[2];
      for (int r = 0; r < R; r++) {
        const __m512i q = _mm512_loadu_si512(w + r * rb + (size_t)g * SC_Q8_GROUP_BYTES + 16 + 64 * k);
        aq[r] = _mm512_abs_epi8(q);
        neg[r] = _mm512_movepi8_mask(q);
      }
      for (int t = 0; t < NT; t++) {
        const unsigned char *xc = xp + (size_t)t * 64 * nb + (size_t)g * SC_Q4_VIEW_GROUP + 64 * k;
        for (int r = 0; r < R; r++) sum[r][t] = q8g_chunk2(aq[r], neg[r], xc, sum[r][t]);
      }
    }
    for (int r = 0; r < R; r++) {
      const __m256 dw =
          _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + r * rb + (size_t)g * SC_Q8_GROUP_BYTES)));
      for (int t = 0; t < NT; t++)
        a[r][t] = q8g_end(sum[r][t], dw, xp + (size_t)t * 64 * nb + (size_t)g * SC_Q4_VIEW_GROUP, a[r][t]);
    }
  }
  for (int b = SC_Q8_GROUP * ng; b < nb; b++)
    for (int r = 0; r < R; r++)
      for (int t = 0; t < NT; t++)
        a[r][t] = q8g_tail(w + r * rb + (size_t)b * SC_Q8_0_BLOCK, xq + (size_t)t * 32 * nb + 32 * b,
                           xd + (size_t)t * nb + b, a[r][t]);
  for (int r = 0; r < R; r++)
    for (int t = 0; t < NT; t++) out[(size_t)t * ldo + r] = hsum8(a[r][t]);
}

DEFINE_GEMM_Q(gemm_q8_0, q8_tile, Q8_NT)
DEFINE_GEMM_Q(gemm_q4_0, q4_tile, Q4_NT)

/* ---- SnakeBeta ------------------------------------------------------------
 * sc_sin2 (kernels.h) on sixteen lanes, as kernels_avx2.c's snake_row:
 * products fused; the parity of n is the low bit of u*2/pi + 1.5*2^23
 * (whose ulp is 1), a mask that picks s^2 or 1 - s^2; lanes with |u|
 * above SC_SIN2_MAX (or inf) redone with sinf; the tail is sc_snake1. */
static void snake_row(const float *x, const float *a, const float *ib, float *y, int n) {
  const __m512 twoopi = _mm512_set1_ps(SC_SIN2_2OPI), rnd = _mm512_set1_ps(SC_SIN2_RND);
  const __m512 dp1 = _mm512_set1_ps(SC_SIN2_DP1), dp2 = _mm512_set1_ps(SC_SIN2_DP2),
               dp3 = _mm512_set1_ps(SC_SIN2_DP3);
  const __m512 s1 = _mm512_set1_ps(SC_SIN2_S1), s2c = _mm512_set1_ps(SC_SIN2_S2),
               s3 = _mm512_set1_ps(SC_SIN2_S3), one = _mm512_set1_ps(1.0f);
  const __m512 big = _mm512_set1_ps(SC_SIN2_MAX);
  const __m512i abs = _mm512_set1_epi32(0x7fffffff), lsb = _mm512_set1_epi32(1);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 xv = _mm512_loadu_ps(x + i), u = _mm512_mul_ps(xv, _mm512_loadu_ps(a + i));
    const __m512 k = _mm512_fmadd_ps(u, twoopi, rnd), nn = _mm512_sub_ps(k, rnd);
    __m512 r = _mm512_fnmadd_ps(nn, dp1, u);
    r = _mm512_fnmadd_ps(nn, dp2, r);
    r = _mm512_fnmadd_ps(nn, dp3, r);
    const __m512 z = _mm512_mul_ps(r, r);
    const __m512 p = _mm512_fmadd_ps(z, _mm512_fmadd_ps(z, s3, s2c), s1);
    const __m512 s = _mm512_fmadd_ps(_mm512_mul_ps(r, z), p, r);
    const __m512 sq = _mm512_mul_ps(s, s);
    const __mmask16 odd = _mm512_test_epi32_mask(_mm512_castps_si512(k), lsb);
    __m512 t = _mm512_mask_blend_ps(odd, sq, _mm512_sub_ps(one, sq));
    const __m512 au = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(u), abs));
    const __mmask16 far = _mm512_cmp_ps_mask(au, big, _CMP_GT_OQ);
    if (far) {
      float tv[16], uv[16];
      _mm512_storeu_ps(tv, t);
      _mm512_storeu_ps(uv, u);
      for (int q = 0; q < 16; q++)
        if (far >> q & 1) {
          const float sn = sinf(uv[q]);
          tv[q] = sn * sn;
        }
      t = _mm512_loadu_ps(tv);
    }
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(_mm512_loadu_ps(ib + i), t, xv));
  }
  for (; i < n; i++) y[i] = sc_snake1(x[i], a[i], ib[i]);
}

const sc_kern_ops SC_AVX512_OPS = {
    .name = SC_AVX512_NAME,
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
#ifndef SC_AVX512_SIMDE
    .attn_row = attn_row,
#endif
    .gemm_f32 = gemm_f32,
    .gemm_bf16 = gemm_bf16,
    .gemm_q8_0 = gemm_q8_0,
    .gemm_q4_0 = gemm_q4_0,
    .gemm_q4_0_tokens = Q4_NT,
    .snake_row = snake_row,
};

#else /* built without AVX-512 (or VNNI): nothing to offer */
const sc_kern_ops SC_AVX512_OPS = {0};
#endif
