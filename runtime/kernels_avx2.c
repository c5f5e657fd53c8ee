/*
 * kernels_avx2.c — AVX2+FMA+F16C inner loops for kernels.c (built with
 * -mavx2 -mfma -mf16c because of the _avx2.c suffix; chosen at run time only
 * when the CPU has all three).
 *
 * Per-row accumulation order, fixed by `cols` alone:
 *   four 8-float FMA accumulators a0..a3 take the 32-float blocks (block b
 *   at i..i+32 feeds a_k with i+8k..i+8k+8); the 8-float blocks left after
 *   that go into a0; then (a0+a1)+(a2+a3), a horizontal sum (high 128 + low
 *   128, then pairs, then the last two), and the last cols%8 products by
 *   scalar fmaf in index order.
 * dot4 runs its four rows through that same sequence one after the other
 * (one stream through their bytes: faster from DRAM than four interleaved
 * ones), so a row gives the same bits whichever call computes it.
 *
 * Quantized bands (q8_0, q4_0 against 8-bit activations, rows in the
 * CPU's groups of eight blocks, kernels.h), one row at a time.  q8_0: the
 * whole groups in turn into one 8-float accumulator, lane j the exact
 * integer dot of block 8g+j (|w| x sign(x, w) through maddubs and madd,
 * chunk by chunk), converted, fma by d_w * d_x (eight scales from one F16C
 * conversion); then the last nb % 8 blocks one by one into the same one
 * (lane k: the products 4k..4k+3, converted, times d_x, fma by d_w); then
 * the horizontal sum.  q4_0: whole groups go to acc(g % 2) as q8_0's, the
 * last nb % 8 blocks one by one into acc1, then acc0 + acc1 and the
 * horizontal sum; nibbles 0..15 through maddubs, minus 8 * (the x they
 * meet).  (llama.cpp's tricks.)
 *
 * GEMM (T > 1): tiles of rows x tokens that give every element exactly the
 * dot's operations in the dot's order (see the gemm_* section).
 */
#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Software prefetch, sc_gemv_ahead bytes ahead of a row's stream
 * (kernels.h: 1 KB, 4 KB on Intel; rows are contiguous, so past a row's
 * end is the next row; past the matrix, a prefetch is harmless): each
 * chunk of rows starts cold and the hardware prefetcher ramps up late.
 * The f32, bf16 and q8_0 one-row dots do it only where
 * sc_gemv_prefetch_on (kernels.h: off on Zen 4, where it measured
 * slower); q4_0's always.  Measured on Zen 3 (q4_0 and q8_0 dots,
 * Qwen3-0.6B shapes): decode 54.6 -> 60.6 and 31.9 -> 34.8 tokens/s
 * (medians of 6 alternated runs); 2048 bytes did the same as 1024.  On
 * Zen 4 the q4_0 dot still gains from it end to end (0.866 against 0.843
 * of the paired probe without), the q8_0 dot loses (0.80 against 0.92). */
/* Keeps v in a register here: gcc otherwise reassociates a tile's
 * integer sums (exact, so it may) into one tree over all of a group's
 * products, and spills those products to the stack. */
#define REG_BARRIER(v) __asm__("" : "+x"(v))
#define PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)

ALWAYS_INLINE __m256 load8_f32(const float *p) { return _mm256_loadu_ps(p); }

/* 8 bf16 -> 8 f32: widen to 32 bits, move into the high half. */
ALWAYS_INLINE __m256 load8_bf16(const uint16_t *p) {
  __m128i h = _mm_loadu_si128((const __m128i *)p);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

ALWAYS_INLINE float scalar_f32(const float *p) { return *p; }
ALWAYS_INLINE float scalar_bf16(const uint16_t *p) { return sc_bf16_to_f32(*p); }

ALWAYS_INLINE float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The one dot routine, instantiated for N = 1 and 4 rows and both bands.
 * N is a compile-time constant after inlining, so a[][] lives in registers. */
#define DEFINE_DOT(NAME, WT, LOAD8, SCALAR)                                  \
  ALWAYS_INLINE void NAME##_n(const WT *w, const float *x, int cols,       \
                              float *out, const int N, const int PF) {     \
    const size_t ahead = PF ? sc_gemv_ahead_bytes() : 0;                   \
    const int l2 = sc_gemv_into_l2();                                      \
    __m256 a[4][4];                                                        \
    for (int r = 0; r < N; r++)                                            \
      for (int k = 0; k < 4; k++) a[r][k] = _mm256_setzero_ps();           \
    int i = 0;                                                             \
    for (; i + 32 <= cols; i += 32)                                        \
      for (int k = 0; k < 4; k++) {                                        \
        if (PF && (k * 8 * sizeof(WT)) % 64 == 0)                          \
          for (int r = 0; r < N; r++)                                      \
            SC_GEMV_PREFETCH((const char *)(w + (size_t)r * cols + i + 8 * k) + ahead, l2); \
        __m256 xv = _mm256_loadu_ps(x + i + 8 * k);                        \
        for (int r = 0; r < N; r++)                                        \
          a[r][k] = _mm256_fmadd_ps(LOAD8(w + (size_t)r * cols + i + 8 * k), \
                                    xv, a[r][k]);                          \
      }                                                                    \
    for (; i + 8 <= cols; i += 8) {                                        \
      __m256 xv = _mm256_loadu_ps(x + i);                                  \
      for (int r = 0; r < N; r++)                                          \
        a[r][0] = _mm256_fmadd_ps(LOAD8(w + (size_t)r * cols + i), xv,     \
                                  a[r][0]);                                \
    }                                                                      \
    for (int r = 0; r < N; r++) {                                          \
      __m256 v = _mm256_add_ps(_mm256_add_ps(a[r][0], a[r][1]),            \
                               _mm256_add_ps(a[r][2], a[r][3]));           \
      float s = hsum8(v);                                                  \
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

DEFINE_DOT(dot_f32_, float, load8_f32, scalar_f32)
DEFINE_DOT(dot_bf16_, uint16_t, load8_bf16, scalar_bf16)

static void axpy(float *y, float a, const float *x, int n) {
  __m256 av = _mm256_set1_ps(a);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i),
                                            _mm256_loadu_ps(y + i)));
  for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

/* Same bits as kernels.c's pquantize_q8: exact max, one division, the
 * same product, round to nearest even. */
static void quantize_q8(const float *x, int nb, int8_t *xq, float *xd, unsigned char *xp) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int8_t *q = xq;
  for (int b = 0; b < nb; b++, x += 32, q += 32) {
    __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    xd[b] = amax / 127.0f;
    const __m256 mul = _mm256_set1_ps(id);
    enum { rnd = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }; /* a constant expression: clang requires one */
    __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, mul), rnd));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, mul), rnd));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, mul), rnd));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, mul), rnd));
    i0 = _mm256_packs_epi32(i0, i1); /* 0-3 8-11 4-7 12-15 */
    i2 = _mm256_packs_epi32(i2, i3); /* 16-19 24-27 20-23 28-31 */
    i0 = _mm256_packs_epi16(i0, i2); /* lane-interleaved groups of four */
    _mm256_storeu_si256((__m256i *)q, _mm256_permutevar8x32_epi32(i0, perm));
  }
  /* the q4_0 view, group by group (kernels.h): register (c, h) gathers
   * dword 4h + c of each of the eight blocks */
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  const __m256i idx = _mm256_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56);
  for (int g = 0; g < nb / 8; g++, xp += SC_Q4_VIEW_GROUP) {
    const int *xg = (const int *)(const void *)(xq + 256 * g);
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++)
      for (int h = 0; h < 2; h++) {
        const __m256i v = _mm256_i32gather_epi32(xg + 4 * h + c, idx, 4);
        _mm256_storeu_si256((__m256i *)(xp + 128 * h + 32 * c), v);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), ones16));
      }
    _mm256_storeu_si256((__m256i *)(xp + 256), _mm256_slli_epi32(sum, 3));
    _mm256_storeu_ps((float *)(xp + 288), _mm256_loadu_ps(xd + 8 * g));
  }
}

/* The block scale broadcast from sc_f16_table: a load, where a conversion
 * would cost three vector operations of the ~11 a q4_0 block takes. */
ALWAYS_INLINE __m256 blk_scale8(const uint8_t *blk) {
  uint16_t h;
  memcpy(&h, blk, 2);
  return _mm256_broadcast_ss(&sc_f16_table[h]);
}

/* One GGML block of q8_0 (a row's last nb % 8) against the quantized
 * activations: acc += d_w * (d_x * the 8 int32 partial sums). */
ALWAYS_INLINE __m256 q8_0_block(const uint8_t *blk, const int8_t *y32, const float *dx, __m256 acc) {
  const __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 2));
  const __m256i y = _mm256_loadu_si256((const __m256i *)y32);
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
  const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1))),
                                 _mm256_broadcast_ss(dx));
  return _mm256_fmadd_ps(blk_scale8(blk), s, acc);
}

/* One q4_0 block alone (the last of an odd count). */
ALWAYS_INLINE __m256 q4_0_block(const uint8_t *blk, const int8_t *y32, const float *dx, __m256 acc) {
  const __m256i y = _mm256_loadu_si256((const __m256i *)y32);
  /* 8 * (y[2i] + y[2i+1]): the -8 offset of every nibble, per pair */
  const __m256i y8 = _mm256_slli_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), y), 3);
  /* the 16 bytes in both halves; the high half shifted right by 4 */
  const __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + 2)));
  const __m256i q = _mm256_and_si256(_mm256_srlv_epi64(raw, _mm256_setr_epi64x(0, 0, 4, 4)),
                                     _mm256_set1_epi8(0x0f));
  const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), y8);
  const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, _mm256_set1_epi16(1))),
                                 _mm256_broadcast_ss(dx));
  return _mm256_fmadd_ps(blk_scale8(blk), s, acc);
}

/* One whole q4_0 group (kernels.h) of one row against the view of one
 * token: the eight blocks' exact integer dots, lane j block j.  Each
 * maddubs lane is at most 2 x 15 x 127 and eight of them are summed, so
 * the int16 sums cannot overflow. */
ALWAYS_INLINE __m256i q4_group_lo(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
ALWAYS_INLINE __m256i q4_group_hi(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f));
}
ALWAYS_INLINE __m256i q4_chunk(__m256i lo, __m256i hi, const unsigned char *xc) {
  return _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)xc)),
                          _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xc + 128))));
}
/* ... then minus the nibble offsets, acc += (d_w * d_x) * dot. */
ALWAYS_INLINE __m256 q4_group_end(__m256i sum16, __m256 dw, const unsigned char *xv, __m256 acc) {
  const __m256i dot = _mm256_sub_epi32(_mm256_madd_epi16(sum16, _mm256_set1_epi16(1)),
                                       _mm256_loadu_si256((const __m256i *)(xv + 256)));
  return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_loadu_ps((const float *)(xv + 288))),
                         _mm256_cvtepi32_ps(dot), acc);
}
ALWAYS_INLINE __m256 q4_0_group(const uint8_t *wg, const unsigned char *xv, __m256 acc) {
  __m256i t[4];
  for (int c = 0; c < 4; c++) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(wg + 16 + 32 * c));
    t[c] = q4_chunk(q4_group_lo(v), q4_group_hi(v), xv + 32 * c);
  }
  const __m256i sum16 = _mm256_add_epi16(_mm256_add_epi16(t[0], t[1]), _mm256_add_epi16(t[2], t[3]));
  return q4_group_end(sum16, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wg)), xv, acc);
}

/* q8_0 in the grouped order (kernels.h): one whole group of one row
 * against the view of one token, lane j the exact integer dot of block
 * 8g+j (each chunk's maddubs pairs and madd quads are exact, and the
 * int32 sums cannot overflow: 32 x 128 x 127).  aq(k) = |w| of chunk k:
 * the GEMM computes it once for all its tokens. */
ALWAYS_INLINE __m256i q8g_chunk(__m256i q, __m256i aq, const unsigned char *xc, __m256i sum) {
  const __m256i y = _mm256_loadu_si256((const __m256i *)xc);
  return _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(aq, _mm256_sign_epi8(y, q)),
                                                 _mm256_set1_epi16(1)));
}
/* ... then acc += (d_w * d_x) * dot, lane by lane. */
ALWAYS_INLINE __m256 q8g_end(__m256i dot, __m256 dw, const unsigned char *xv, __m256 acc) {
  return _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_loadu_ps((const float *)(xv + 288))),
                         _mm256_cvtepi32_ps(dot), acc);
}

/* One q8_0 row in the grouped order: the whole groups in turn into one
 * accumulator (a group's eight chunks are long enough to hide the FMA's
 * latency), then the last nb % 8 blocks as GGML blocks into the same one
 * (q8_0_block: partial sums x d_x, fma by d_w), then the horizontal sum. */
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
    __m256i sum = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++) {
      const __m256i q = _mm256_loadu_si256((const __m256i *)(wg + 16 + 32 * k));
      sum = q8g_chunk(q, _mm256_sign_epi8(q, q), xv + 32 * k, sum);
    }
    acc = q8g_end(sum, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)wg)), xv, acc);
  }
  for (int b = SC_Q8_GROUP * ng; b < nb; b++)
    acc = q8_0_block(w + (size_t)b * SC_Q8_0_BLOCK, xq + 32 * b, xd + b, acc);
  return hsum8(acc);
}

/* q4_0 by whole groups, one row at a time like q8_0: group g goes to
 * a[g % 2], the last nb % 8 blocks one by one into a1.  (Four rows sharing
 * each group's activation loads saved no time in L3 and lost a third of
 * the decode speed from DRAM: four interleaved streams defeat the hardware
 * prefetcher.) */
ALWAYS_INLINE float dot_q4_0_row(const uint8_t *w, const int8_t *xq, const float *xd,
                                 const unsigned char *xp, int nb) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  const size_t ahead = sc_gemv_ahead_bytes();
  const int l2 = sc_gemv_into_l2();
  const int ng = nb / 8;
  int g = 0;
  for (; g + 2 <= ng; g += 2) {
    const uint8_t *next = w + (size_t)g * SC_Q4_GROUP_BYTES + ahead; /* 288 bytes a step */
    for (int l = 0; l < 5; l++) SC_GEMV_PREFETCH(next + 64 * l, l2);
    a0 = q4_0_group(w + (size_t)g * SC_Q4_GROUP_BYTES, xp + (size_t)g * SC_Q4_VIEW_GROUP, a0);
    a1 = q4_0_group(w + (size_t)(g + 1) * SC_Q4_GROUP_BYTES, xp + (size_t)(g + 1) * SC_Q4_VIEW_GROUP, a1);
  }
  if (g < ng) a0 = q4_0_group(w + (size_t)g * SC_Q4_GROUP_BYTES, xp + (size_t)g * SC_Q4_VIEW_GROUP, a0);
  for (int b = 8 * ng; b < nb; b++) a1 = q4_0_block(w + (size_t)b * SC_Q4_0_BLOCK, xq + 32 * b, xd + b, a1);
  return hsum8(_mm256_add_ps(a0, a1));
}

ALWAYS_INLINE void dot_q4_0_n(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd,
                              const unsigned char *xp, int nb, float *out, const int N) {
  for (int r = 0; r < N; r++) out[r] = dot_q4_0_row(w + r * rb, xq, xd, xp, nb);
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
ALWAYS_INLINE void dot_q8_0_n(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd,
                               const unsigned char *xp, int nb, float *out, const int N) {
  if (atomic_load_explicit(&sc_gemv_prefetch_on, memory_order_relaxed))
    for (int r = 0; r < N; r++) out[r] = dot_q8_0_row(w + r * rb, xq, xd, xp, nb, 1);
  else
    for (int r = 0; r < N; r++) out[r] = dot_q8_0_row(w + r * rb, xq, xd, xp, nb, 0);
}

DEFINE_QDOT(dot_q4_0_)
DEFINE_QDOT(dot_q8_0_)

/* ---- attention: one query row (kernels.h attn_row) ------------------- */

/* The four sums of a[0..3] (each the sum of its two halves' vectors), in
 * one order whatever the key: pairs, then pairs of pairs, then halves. */
ALWAYS_INLINE __m128 sum4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* Four keys at a time share each load of q; two accumulators per key
 * (even and odd 8-column blocks) keep eight FMA chains in flight.  A key
 * of a short last group runs the same code with empty neighbours, so a
 * score does not depend on which keys share its group.  Columns past the
 * last multiple of 8 are added one by one (fmaf). */

/* The keys of the group of nk <= 4 from ring row `row` into k[0..3] (empty
 * neighbours repeat the last key); returns the row after the group. */
ALWAYS_INLINE int attn_group(const float *kc, size_t ld, int row, int cap, int nk, const float *k[4]) {
  for (int i = 0; i < 4; i++) {
    k[i] = kc + (size_t)row * ld;
    if (i + 1 < nk && ++row == cap) row = 0;
  }
  return ++row == cap ? 0 : row;
}

/* Query q's scaled scores against the group's first nk keys into s[0..nk). */
ALWAYS_INLINE void attn_scores4(const float *q, const float *const k[4], int nk, int hd, float scale, float *s) {
  const int h8 = hd & ~7, h16 = hd & ~15;
  __m256 a[4][2];
  for (int i = 0; i < 4; i++) a[i][0] = a[i][1] = _mm256_setzero_ps();
  int c = 0;
  for (; c < h16; c += 16) {
    const __m256 q0 = _mm256_loadu_ps(q + c), q1 = _mm256_loadu_ps(q + c + 8);
    for (int i = 0; i < 4; i++) {
      a[i][0] = _mm256_fmadd_ps(_mm256_loadu_ps(k[i] + c), q0, a[i][0]);
      a[i][1] = _mm256_fmadd_ps(_mm256_loadu_ps(k[i] + c + 8), q1, a[i][1]);
    }
  }
  if (c < h8) {
    const __m256 q0 = _mm256_loadu_ps(q + c);
    for (int i = 0; i < 4; i++) a[i][0] = _mm256_fmadd_ps(_mm256_loadu_ps(k[i] + c), q0, a[i][0]);
  }
  const __m128 sum = sum4x8(_mm256_add_ps(a[0][0], a[0][1]), _mm256_add_ps(a[1][0], a[1][1]),
                            _mm256_add_ps(a[2][0], a[2][1]), _mm256_add_ps(a[3][0], a[3][1]));
  if (nk == 4 && h8 == hd) { /* the four products at once, not through the stack */
    _mm_storeu_ps(s, _mm_mul_ps(sum, _mm_set1_ps(scale)));
    return;
  }
  float d[4];
  _mm_storeu_ps(d, sum);
  for (int i = 0; i < nk; i++) {
    for (int cc = h8; cc < hd; cc++) d[i] = fmaf(q[cc], k[i][cc], d[i]);
    s[i] = d[i] * scale;
  }
}

/* acc[0..nv) += s[j] * V_j's columns c0 + 8r.. for keys j = j0..j1 in
 * order, key j0 at ring row `row`.  Eight column blocks (nv == 8) in
 * their own function: with a variable count in the same loop gcc kept
 * all eight accumulators on the stack. */
ALWAYS_INLINE void attn_values8(const float *s, const float *vc, size_t ld, int row, int cap, int j0, int j1,
                                int c0, __m256 acc[8]) {
  __m256 a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3], a4 = acc[4], a5 = acc[5], a6 = acc[6], a7 = acc[7];
  for (int j = j0; j < j1; j++) {
    const float *v = vc + (size_t)row * ld + c0;
    const __m256 p = _mm256_broadcast_ss(s + j);
    a0 = _mm256_fmadd_ps(p, _mm256_loadu_ps(v), a0);
    a1 = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 8), a1);
    a2 = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 16), a2);
    a3 = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 24), a3);
    a4 = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 32), a4);
    a5 = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 40), a5);
    a6 = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 48), a6);
    a7 = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 56), a7);
    if (++row == cap) row = 0;
  }
  acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3, acc[4] = a4, acc[5] = a5, acc[6] = a6, acc[7] = a7;
}
ALWAYS_INLINE void attn_values(const float *s, const float *vc, size_t ld, int row, int cap, int j0, int j1,
                               int c0, int nv, __m256 acc[8]) {
  if (nv == 8) {
    attn_values8(s, vc, ld, row, cap, j0, j1, c0, acc);
    return;
  }
  for (int j = j0; j < j1; j++) {
    const float *v = vc + (size_t)row * ld + c0;
    const __m256 p = _mm256_broadcast_ss(s + j);
    for (int r = 0; r < nv; r++) acc[r] = _mm256_fmadd_ps(p, _mm256_loadu_ps(v + 8 * r), acc[r]);
    if (++row == cap) row = 0;
  }
}

void sc_attn_row_avx2(const float *q, const float *kc, const float *vc, size_t ld, int lo, int n, int cap,
                      int hd, float scale, float *s, float *y) {
  const int h8 = hd & ~7;
  const float *k[4];
  int row = lo % cap;
  for (int j = 0; j < n; j += 4) {
    const int nk = n - j < 4 ? n - j : 4;
    row = attn_group(kc, ld, row, cap, nk, k);
    attn_scores4(q, k, nk, hd, scale, s + j);
  }
  const float sum = sc_softmax_row(s, n);
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  /* values: 64 columns (eight accumulators) per pass over the keys */
  for (int c0 = 0; c0 < h8; c0 += 64) {
    const int nv = (h8 - c0 < 64 ? h8 - c0 : 64) / 8;
    __m256 acc[8];
    for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();
    attn_values(s, vc, ld, lo % cap, cap, 0, n, c0, nv, acc);
    for (int r = 0; r < nv; r++) _mm256_storeu_ps(y + c0 + 8 * r, _mm256_mul_ps(acc[r], inv));
  }
  sc_attn_value_cols(s, vc, ld, lo, n, cap, h8, hd, 1.0f / sum, y);
}

/* sc_softmax_row of the nq <= SC_ATTN_ROWS rows s + i * lds (n[i]
 * scores each), 1 / sum into inv[i], with its bits: the maximum eight
 * lanes at a time (exact in any order; a NaN skipped, as there), the same
 * sc_expf_n, and each row's sum in its own order, the rows' additions side
 * by side so that their chains overlap (one row's chain alone was ~750
 * cycles of 250 keys' latency). */
static void softmax_rows(float *s, int lds, const int *n, int nq, float *inv) {
  float sum[SC_ATTN_ROWS];
  int nmin = n[0];
  for (int i = 0; i < nq; i++) {
    float *r = s + (size_t)i * lds;
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 8 <= n[i]; j += 8) mv = _mm256_max_ps(_mm256_loadu_ps(r + j), mv); /* s > m ? s : m */
    float mx[8], m = -INFINITY;
    _mm256_storeu_ps(mx, mv);
    for (int l = 0; l < 8; l++)
      if (mx[l] > m) m = mx[l];
    for (; j < n[i]; j++)
      if (r[j] > m) m = r[j];
    for (j = 0; j < n[i]; j++) r[j] -= m;
    sc_expf_n(r, r, n[i]);
    sum[i] = 0.0f;
    if (n[i] < nmin) nmin = n[i];
  }
  for (int j = 0; j < nmin; j++)
    for (int i = 0; i < nq; i++) sum[i] += s[(size_t)i * lds + j];
  for (int i = 0; i < nq; i++) {
    for (int j = nmin; j < n[i]; j++) sum[i] += s[(size_t)i * lds + j];
    inv[i] = 1.0f / sum[i];
  }
}

/* Several queries of one head (a prompt's rows), each with
 * sc_attn_row_avx2's operations in its order, so its bits: the loops
 * over keys and queries are swapped, so that a group of four keys (2 KB
 * at 128 columns) and a block of ATTN_VKEYS values' columns stay in L1
 * while every query takes them, where one query at a time streamed all
 * its keys and values from L2 or L3.  The queries' value accumulators
 * wait in acc between blocks.  The queries (up to ATTN_QPACK columns) and
 * each block of values' columns are first copied side by side: a head's
 * rows in the cache and in the activations lie a multiple of 4 KB apart
 * (8 heads x 128 floats), so they all fell in the same few L1 sets and
 * pushed one another out.  Zen 3, 500 queries of 128 columns: 1.46-1.51x
 * with the vector score stores and softmax_rows (docs/PERFORMANCE.md). */
#define ATTN_VKEYS 32
#define ATTN_QPACK 256
void sc_attn_rows_avx2(const float *q, int ldq, int nq, const float *kc, const float *vc, size_t ld, int lo,
                       const int *n, int cap, int hd, float scale, float *s, int lds, float *y, int ldy) {
  float qp[SC_ATTN_ROWS * ATTN_QPACK] __attribute__((aligned(32)));
  float vp[ATTN_VKEYS * 64] __attribute__((aligned(32)));
  const int h8 = hd & ~7;
  int nmax = 0;
  for (int i = 0; i < nq; i++)
    if (n[i] > nmax) nmax = n[i];
  if (hd <= ATTN_QPACK) {
    for (int i = 0; i < nq; i++) memcpy(qp + i * hd, q + (size_t)i * ldq, (size_t)hd * sizeof *q);
    q = qp, ldq = hd;
  }
  const float *k[4];
  int row = lo % cap;
  for (int j = 0; j < nmax; j += 4) {
    const int nk = nmax - j < 4 ? nmax - j : 4;
    row = attn_group(kc, ld, row, cap, nk, k);
    for (int i = 0; i < nq; i++)
      if (n[i] > j) attn_scores4(q + (size_t)i * ldq, k, n[i] - j < nk ? n[i] - j : nk, hd, scale, s + (size_t)i * lds + j);
  }
  float inv[SC_ATTN_ROWS];
  softmax_rows(s, lds, n, nq, inv);
  for (int c0 = 0; c0 < h8; c0 += 64) {
    const int nv = (h8 - c0 < 64 ? h8 - c0 : 64) / 8;
    __m256 acc[SC_ATTN_ROWS][8];
    for (int i = 0; i < nq; i++)
      for (int r = 0; r < 8; r++) acc[i][r] = _mm256_setzero_ps();
    for (int j0 = 0; j0 < nmax; j0 += ATTN_VKEYS) {
      const int nj = nmax - j0 < ATTN_VKEYS ? nmax - j0 : ATTN_VKEYS; /* the block's keys */
      int r = (int)(((long long)lo + j0) % cap);
      for (int jj = 0; jj < nj; jj++) { /* their columns c0.. at vp + 64 jj */
        for (int b = 0; b < nv; b++) _mm256_store_ps(vp + 64 * jj + 8 * b, _mm256_loadu_ps(vc + (size_t)r * ld + c0 + 8 * b));
        if (++r == cap) r = 0;
      }
      for (int i = 0; i < nq; i++) {
        const int j1 = n[i] < j0 + nj ? n[i] : j0 + nj;
        if (j1 <= j0) continue;
        __m256 a[8]; /* all eight, so that they live in registers */
        for (int b = 0; b < 8; b++) a[b] = acc[i][b];
        attn_values(s + (size_t)i * lds, vp, 64, 0, ATTN_VKEYS, j0, j1, 0, nv, a);
        for (int b = 0; b < 8; b++) acc[i][b] = a[b];
      }
    }
    for (int i = 0; i < nq; i++)
      for (int b = 0; b < nv; b++)
        _mm256_storeu_ps(y + (size_t)i * ldy + c0 + 8 * b, _mm256_mul_ps(acc[i][b], _mm256_set1_ps(inv[i])));
  }
  for (int i = 0; i < nq; i++)
    sc_attn_value_cols(s + (size_t)i * lds, vc, ld, lo, n[i], cap, h8, hd, inv[i], y + (size_t)i * ldy);
}

/* ---- GEMM: tiles of R rows x NT tokens, same bits as the dots ------- */

/* Each output's accumulators are independent sums (the float dot's a0..a3,
 * the q8_0 / q4_0 dots' even and odd steps), so a tile computes them one
 * after the other, each over R x NT outputs in registers, keeps the
 * finished ones on the stack and combines them as the dot does: every
 * element gets the dot's exact operations in the dot's order, while each
 * weight vector is loaded (and converted or unpacked) once for NT tokens
 * and each activation vector once for R rows. */

/* f32 / bf16: the columns in segments of FL_SEG, and within a segment
 * every tile of FL_NT tokens in turn, so the rows' segment stays in L1 for
 * all the call's tokens; bf16 calls of FL_WIDE_T tokens or more widen the
 * segment to f32 once (on the stack) rather than once a tile.  R = 4 rows
 * x FL_NT = 2 tokens: 8 accumulators, the 4 rows' vectors and one
 * activation vector fit the 16 registers (4 x 3 spilled an accumulator,
 * and its store-to-load forward sat in an FMA chain).  Zen 4 under
 * SPEECHC_ISA=avx2, bench/kern_micro bf16 64 2 8: 3.6 -> 2.9 ms; T = 4
 * and 8 from DRAM 5-11 % faster, T = 2 the same.  The partial sums are
 * token-major, so a call of few tokens touches few of their lines.
 * Segments of 1024 columns, not 256: a tile's pass over its segment is
 * 32 steps, not 8, so the partial sums' loads and stores between passes
 * cost a quarter as much.  On Zen 3, the CPU this table is the default
 * for: the bf16 GEMM at Qwen3-0.6B's shapes 1.09-1.13x faster (T = 64,
 * weights in L3) and 1.00-1.21x (T = 2-16, from DRAM), a 64-token bf16
 * prompt 1.15x; 2048 was slower at 3072 columns, and Zen 4 had put 512
 * and 1024 within 3 % of 256 (docs/PERFORMANCE.md). */
#ifndef FL_NT
#define FL_NT 2
#endif
#ifndef FL_SEG
#define FL_SEG 1024
#endif
_Static_assert(FL_SEG > 0 && FL_SEG % 32 == 0, "FL_SEG: whole 32-column blocks (gemm_x_order's quarters)");
/* Tokens whose partial sums a call keeps at once (32 KB of them on the
 * stack), and the tokens the driver hands a call (gemm_fl_tokens): the
 * widening and the next rows' prefetch, once per call, are paid once for
 * a 64-token prompt rather than three times.  Zen 3, Qwen3-0.6B bf16, a
 * 64-token prompt: 1.17x on one thread, 1.16x on two against 24 (paired
 * medians; docs/PERFORMANCE.md). */
#define FL_MAXT 64
#define FL_WIDE_T 4 /* bf16 calls of this many tokens widen their rows once */

#define DEFINE_GEMM_FL(NAME, WT, LOAD8, SCALAR)                                \
  /* One tile's four passes over the segment [i0, i1) of the 32-column     \
   * blocks: pass k feeds accumulator k of every output (columns i0+8k..   \
   * step 32), from and back to part[t0 + t][k][r].  The rows are w (row   \
   * stride cols), or with WIDE their segment widened to f32 in wf (row    \
   * stride FL_SEG).  With ORD the tokens are laid out by gemm_x_order:    \
   * pass k's columns of the segment are the k-th quarter of it. */        \
  ALWAYS_INLINE void NAME##tile(const WT *w, int cols, const float *wf, const float *x, int ldx, \
                                int i0, int i1, __m256 part[FL_MAXT][4][4], int t0, const int R, \
                                const int NT, const int WIDE, const int ORD) { \
    for (int k = 0; k < 4; k++) {                                             \
      __m256 a[4][FL_NT];                                                     \
      for (int r = 0; r < R; r++)                                             \
        for (int t = 0; t < NT; t++) a[r][t] = i0 ? part[t0 + t][k][r] : _mm256_setzero_ps(); \
      /* token t's vector for column i at xk + t * ldx + (ORD ? (i - i0 - 8k) / 4 : i - i0 - 8k) */ \
      const float *xk = x + (size_t)t0 * ldx + i0 + (ORD ? k * ((i1 - i0) / 4) : 8 * k); \
      for (int i = i0 + 8 * k; i < i1; i += 32, xk += ORD ? 8 : 32) {         \
        __m256 wv[4];                                                         \
        for (int r = 0; r < R; r++)                                           \
          if (WIDE) { /* a register, not a load folded into every FMA */     \
            wv[r] = _mm256_load_ps(wf + r * FL_SEG + (i - i0));               \
            __asm__("" : "+x"(wv[r]));                                        \
          } else                                                              \
            wv[r] = LOAD8(w + (size_t)r * cols + i);                          \
        for (int t = 0; t < NT; t++) {                                        \
          const __m256 xv = _mm256_loadu_ps(xk + (size_t)t * ldx);            \
          for (int r = 0; r < R; r++) a[r][t] = _mm256_fmadd_ps(wv[r], xv, a[r][t]); \
        }                                                                     \
      }                                                                       \
      for (int r = 0; r < R; r++)                                             \
        for (int t = 0; t < NT; t++) part[t0 + t][k][r] = a[r][t];            \
    }                                                                         \
  }                                                                           \
  /* tokens 0..nt (nt <= FL_MAXT) against R rows */                          \
  ALWAYS_INLINE void NAME##chunk(const WT *w, int cols, const float *x, int ldx, int nt, \
                                 float *out, int ldo, const int R, float *wf, const int WIDE, \
                                 const int ORD) {                             \
    __m256 part[FL_MAXT][4][4];                                               \
    const int n32 = cols & ~31, n8 = cols & ~7;                               \
    if (n32 == 0)                                                             \
      for (int k = 0; k < 4; k++)                                             \
        for (int r = 0; r < R; r++)                                           \
          for (int t = 0; t < nt; t++) part[t][k][r] = _mm256_setzero_ps();   \
    for (int i0 = 0; i0 < n32; i0 += FL_SEG) {                                \
      const int i1 = n32 - i0 < FL_SEG ? n32 : i0 + FL_SEG;                   \
      if (WIDE)                                                               \
        for (int r = 0; r < R; r++)                                           \
          for (int i = i0; i < i1; i += 8)                                    \
            _mm256_store_ps(wf + r * FL_SEG + (i - i0), LOAD8(w + (size_t)r * cols + i)); \
      int t = 0;                                                              \
      for (; t + FL_NT <= nt; t += FL_NT)                                     \
        NAME##tile(w, cols, wf, x, ldx, i0, i1, part, t, R, FL_NT, WIDE, ORD); \
      for (; t < nt; t++) NAME##tile(w, cols, wf, x, ldx, i0, i1, part, t, R, 1, WIDE, ORD); \
    }                                                                         \
    for (int i = n32; i < n8; i += 8)                                         \
      for (int t = 0; t < nt; t++) {                                          \
        const __m256 xv = _mm256_loadu_ps(x + (size_t)t * ldx + i);           \
        for (int r = 0; r < R; r++)                                           \
          part[t][0][r] = _mm256_fmadd_ps(LOAD8(w + (size_t)r * cols + i), xv, part[t][0][r]); \
      }                                                                       \
    for (int r = 0; r < R; r++)                                               \
      for (int t = 0; t < nt; t++) {                                          \
        const __m256 v = _mm256_add_ps(_mm256_add_ps(part[t][0][r], part[t][1][r]), \
                                       _mm256_add_ps(part[t][2][r], part[t][3][r])); \
        float sum = hsum8(v);                                                 \
        const WT *wr = w + (size_t)r * cols;                                  \
        const float *xt = x + (size_t)t * ldx;                                \
        for (int j = n8; j < cols; j++) sum = fmaf(SCALAR(wr + j), xt[j], sum); \
        out[(size_t)t * ldo + r] = sum;                                       \
      }                                                                       \
  }                                                                           \
  ALWAYS_INLINE void NAME##r(const WT *w, int cols, const float *x, int ldx, int nt, \
                             float *out, int ldo, const int R, const int ORD) { \
    for (int t = 0; t < nt; t += FL_MAXT) {                                   \
      const int n = nt - t < FL_MAXT ? nt - t : FL_MAXT;                      \
      if (sizeof(WT) < 4 && n >= FL_WIDE_T) {                                 \
        float wf[4 * FL_SEG] __attribute__((aligned(32)));                    \
        NAME##chunk(w, cols, x + (size_t)t * ldx, ldx, n, out + (size_t)t * ldo, ldo, R, wf, 1, ORD); \
      } else                                                                  \
        NAME##chunk(w, cols, x + (size_t)t * ldx, ldx, n, out + (size_t)t * ldo, ldo, R, NULL, 0, ORD); \
    }                                                                         \
  }                                                                           \
  /* one function for each order, each cloned for each R by the compiler */ \
  static void NAME##r_nat(const WT *w, int cols, const float *x, int ldx, int nt, \
                          float *out, int ldo, const int R) {                 \
    NAME##r(w, cols, x, ldx, nt, out, ldo, R, 0);                             \
  }                                                                           \
  static void NAME##r_ord(const WT *w, int cols, const float *x, int ldx, int nt, \
                          float *out, int ldo, const int R) {                 \
    NAME##r(w, cols, x, ldx, nt, out, ldo, R, 1);                             \
  }                                                                           \
  ALWAYS_INLINE void NAME##rows(const WT *w, int nr, const float *x, int ldx, int nt, int cols, \
                                float *out, int ldo, const int ORD) {         \
    void (*const f)(const WT *, int, const float *, int, int, float *, int, const int) = \
        ORD ? NAME##r_ord : NAME##r_nat;                                      \
    /* the next block of four rows while this one computes, into L2 (T1): \
     * 8-24 KB into L1 (T0) pushed out the activations the tiles reuse;   \
     * Zen 4, T1 against T0: 64-token prompt 5-6 % faster, T = 2 and 8    \
     * from DRAM 9-16 % (docs/PERFORMANCE.md) */                          \
    for (size_t l = 0; l < (size_t)4 * cols * sizeof(WT); l += 64)            \
      _mm_prefetch((const char *)(w + (size_t)4 * cols) + l, _MM_HINT_T1);   \
    switch (nr) {                                                             \
    case 4: f(w, cols, x, ldx, nt, out, ldo, 4); break;                        \
    case 3: f(w, cols, x, ldx, nt, out, ldo, 3); break;                        \
    case 2: f(w, cols, x, ldx, nt, out, ldo, 2); break;                        \
    default: f(w, cols, x, ldx, nt, out, ldo, 1); break;                       \
    }                                                                         \
  }                                                                           \
  static void NAME(const WT *w, int nr, const float *x, int ldx, int nt, int cols, \
                   float *out, int ldo) {                                     \
    NAME##rows(w, nr, x, ldx, nt, cols, out, ldo, 0);                         \
  }                                                                           \
  static void NAME##_ordered(const WT *w, int nr, const float *x, int ldx, int nt, int cols, \
                             float *out, int ldo) {                           \
    NAME##rows(w, nr, x, ldx, nt, cols, out, ldo, 1);                         \
  }

DEFINE_GEMM_FL(gemm_f32, float, load8_f32, scalar_f32)
DEFINE_GEMM_FL(gemm_bf16, uint16_t, load8_bf16, scalar_bf16)

/* One token's activations in the order the _ordered GEMMs read them: in
 * each FL_SEG-column segment of the whole 32-column blocks, the columns
 * pass k takes (8k..8k+8 of every block) are the segment's k-th quarter,
 * so a pass reads whole lines in turn where it read 32 bytes of every
 * 128; the columns after the blocks stay in place.  One copy a token,
 * made once for all of a linear's rows.  Zen 3, Qwen3-0.6B, a 64-token
 * bf16 prompt: 1.11x on one thread, 1.10x on two (paired medians, same
 * bits; docs/PERFORMANCE.md). */
static void gemm_x_order(const float *x, int cols, float *xo) {
  const int n32 = cols & ~31;
  for (int i0 = 0; i0 < n32; i0 += FL_SEG) {
    const int len = n32 - i0 < FL_SEG ? n32 - i0 : FL_SEG;
    for (int k = 0; k < 4; k++)
      for (int j = 0; j < len / 32; j++)
        _mm256_storeu_ps(xo + i0 + k * (len / 4) + 8 * j, _mm256_loadu_ps(x + i0 + 32 * j + 8 * k));
  }
  memcpy(xo + n32, x + n32, (size_t)(cols - n32) * sizeof *x);
}

/* q4_0: even groups, then odd groups and the last nb % 8 blocks, then
 * hsum(even + odd) as the dot.  The int16 sums are exact, so their order
 * does not matter; the float operations are the dot's.  REG_BARRIER after
 * each chunk: without it gcc 12 sums a group's 48 products (2 x 3 tile) as
 * one tree and spills 36 of them; with it, Zen 3, Qwen3-0.6B's shapes at
 * 64 tokens: 1.30-1.43x (bench/gemm_ab.c), a 64-token q4_0 prompt 1.31x
 * on one thread, 1.36x on two (docs/PERFORMANCE.md).  Unpacking the
 * rows' nibbles once a call instead of per three tokens gained nothing
 * (0.96x): the maddubs bound the tile (a loop of nothing else ran 3.0 G
 * of them a second on a core here; the tile now runs ~2.0 G), not the
 * unpacking beside them. */
ALWAYS_INLINE void q4_tile(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd,
                           const unsigned char *xp, int nb, float *out, int ldo, const int R,
                           const int NT) {
  __m256 part[2][2][4];
  const int ng = nb / 8;
  for (int par = 0; par < 2; par++) {
    __m256 a[2][4];
    for (int r = 0; r < R; r++)
      for (int t = 0; t < NT; t++) a[r][t] = _mm256_setzero_ps();
    for (int g = par; g < ng; g += 2) {
      __m256i sum[2][4];
      for (int r = 0; r < R; r++)
        for (int t = 0; t < NT; t++) sum[r][t] = _mm256_setzero_si256();
      for (int c = 0; c < 4; c++) {
        __m256i lo[2], hi[2];
        for (int r = 0; r < R; r++) {
          const __m256i v = _mm256_loadu_si256(
              (const __m256i *)(w + r * rb + (size_t)g * SC_Q4_GROUP_BYTES + 16 + 32 * c));
          lo[r] = q4_group_lo(v);
          hi[r] = q4_group_hi(v);
        }
        for (int t = 0; t < NT; t++) {
          const unsigned char *xc = xp + (size_t)t * 64 * nb + (size_t)g * SC_Q4_VIEW_GROUP + 32 * c;
          for (int r = 0; r < R; r++) sum[r][t] = _mm256_add_epi16(sum[r][t], q4_chunk(lo[r], hi[r], xc));
        }
        for (int r = 0; r < R; r++)
          for (int t = 0; t < NT; t++) REG_BARRIER(sum[r][t]);
      }
      for (int r = 0; r < R; r++) {
        const __m256 dw =
            _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + r * rb + (size_t)g * SC_Q4_GROUP_BYTES)));
        for (int t = 0; t < NT; t++)
          a[r][t] = q4_group_end(sum[r][t], dw, xp + (size_t)t * 64 * nb + (size_t)g * SC_Q4_VIEW_GROUP,
                                 a[r][t]);
      }
    }
    if (par == 1)
      for (int b = 8 * ng; b < nb; b++)
        for (int r = 0; r < R; r++)
          for (int t = 0; t < NT; t++)
            a[r][t] = q4_0_block(w + r * rb + (size_t)b * SC_Q4_0_BLOCK, xq + (size_t)t * 32 * nb + 32 * b,
                                 xd + (size_t)t * nb + b, a[r][t]);
    for (int r = 0; r < R; r++)
      for (int t = 0; t < NT; t++) part[par][r][t] = a[r][t];
  }
  for (int r = 0; r < R; r++)
    for (int t = 0; t < NT; t++)
      out[(size_t)t * ldo + r] = hsum8(_mm256_add_ps(part[0][r][t], part[1][r][t]));
}

/* q8_0 in the grouped order: every whole group into each output's one
 * float accumulator, then the last nb % 8 blocks, then the horizontal
 * sum, as the dot.  The integer sums of a group sit in registers (R x NT
 * of them, with the rows' chunks and their |w|); the float accumulators
 * are touched once a group. */
ALWAYS_INLINE void q8_tile(const uint8_t *w, size_t rb, const int8_t *xq, const float *xd,
                            const unsigned char *xp, int nb, float *out, int ldo, const int R,
                            const int NT) {
  __m256 a[2][4];
  for (int r = 0; r < R; r++)
    for (int t = 0; t < NT; t++) a[r][t] = _mm256_setzero_ps();
  const int ng = nb / SC_Q8_GROUP;
  for (int g = 0; g < ng; g++) {
    __m256i sum[2][4];
    for (int r = 0; r < R; r++)
      for (int t = 0; t < NT; t++) sum[r][t] = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++) {
      __m256i q[2], aq[2];
      for (int r = 0; r < R; r++) {
        q[r] = _mm256_loadu_si256((const __m256i *)(w + r * rb + (size_t)g * SC_Q8_GROUP_BYTES + 16 + 32 * k));
        aq[r] = _mm256_sign_epi8(q[r], q[r]);
      }
      for (int t = 0; t < NT; t++) {
        const unsigned char *xc = xp + (size_t)t * 64 * nb + (size_t)g * SC_Q4_VIEW_GROUP + 32 * k;
        for (int r = 0; r < R; r++) sum[r][t] = q8g_chunk(q[r], aq[r], xc, sum[r][t]);
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
        a[r][t] = q8_0_block(w + r * rb + (size_t)b * SC_Q8_0_BLOCK, xq + (size_t)t * 32 * nb + 32 * b,
                             xd + (size_t)t * nb + b, a[r][t]);
  for (int r = 0; r < R; r++)
    for (int t = 0; t < NT; t++) out[(size_t)t * ldo + r] = hsum8(a[r][t]);
}

/* Tokens in tiles of Q_NT (2 x 3 accumulators, the weights of two rows
 * and the constants fit the 16 registers; 2 x 4 spilled accumulators to
 * the stack, which put a store-to-load forward into their FMA chains),
 * then 2, 1, each against every row (SC_DEFINE_GEMM_Q_ROWS, kernels.h). */
#ifndef Q_NT
#define Q_NT 3
#endif
#define DEFINE_GEMM_Q(NAME, TILE)                                                \
  SC_DEFINE_GEMM_Q_ROWS(NAME, TILE)                                              \
  static void NAME(const uint8_t *w, size_t rb, int nr, const int8_t *xq, const float *xd, \
                   const unsigned char *xp, int nb, int nt, float *out, int ldo) { \
    int t = 0;                                                                   \
    while (t + Q_NT <= nt) SC_GEMM_Q_TOKENS(NAME, Q_NT);                         \
    while (t + 2 <= nt) SC_GEMM_Q_TOKENS(NAME, 2);                               \
    if (t < nt) SC_GEMM_Q_TOKENS(NAME, 1);                                       \
  }

DEFINE_GEMM_Q(gemm_q4_0, q4_tile)
#define Q8_TILE(w, rb, xq, xd, xp, nb, out, ldo, R, NT) q8_tile(w, rb, xq, xd, xp, nb, out, ldo, R, NT)
DEFINE_GEMM_Q(gemm_q8_0, Q8_TILE)

/* ---- SnakeBeta ------------------------------------------------------------
 * sc_sin2 (kernels.h) on eight lanes: the same steps, the products fused
 * into the subtractions and the polynomial (FMA); the parity of n is the
 * low bit of u*2/pi + 1.5*2^23 (whose ulp is 1), moved to the sign bit to
 * pick s^2 or 1 - s^2.  Lanes with |u| above
 * SC_SIN2_MAX (or inf) are redone with sinf; the tail is sc_snake1. */
static void snake_row(const float *x, const float *a, const float *ib, float *y, int n) {
  const __m256 twoopi = _mm256_set1_ps(SC_SIN2_2OPI), rnd = _mm256_set1_ps(SC_SIN2_RND);
  const __m256 dp1 = _mm256_set1_ps(SC_SIN2_DP1), dp2 = _mm256_set1_ps(SC_SIN2_DP2),
               dp3 = _mm256_set1_ps(SC_SIN2_DP3);
  const __m256 s1 = _mm256_set1_ps(SC_SIN2_S1), s2c = _mm256_set1_ps(SC_SIN2_S2),
               s3 = _mm256_set1_ps(SC_SIN2_S3), one = _mm256_set1_ps(1.0f);
  const __m256 big = _mm256_set1_ps(SC_SIN2_MAX), abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xv = _mm256_loadu_ps(x + i), u = _mm256_mul_ps(xv, _mm256_loadu_ps(a + i));
    const __m256 k = _mm256_fmadd_ps(u, twoopi, rnd), nn = _mm256_sub_ps(k, rnd);
    __m256 r = _mm256_fnmadd_ps(nn, dp1, u);
    r = _mm256_fnmadd_ps(nn, dp2, r);
    r = _mm256_fnmadd_ps(nn, dp3, r);
    const __m256 z = _mm256_mul_ps(r, r);
    const __m256 p = _mm256_fmadd_ps(z, _mm256_fmadd_ps(z, s3, s2c), s1);
    const __m256 s = _mm256_fmadd_ps(_mm256_mul_ps(r, z), p, r);
    const __m256 sq = _mm256_mul_ps(s, s);
    const __m256 odd = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(k), 31));
    __m256 t = _mm256_blendv_ps(sq, _mm256_sub_ps(one, sq), odd);
    const __m256 far = _mm256_cmp_ps(_mm256_and_ps(u, abs), big, _CMP_GT_OQ);
    if (_mm256_movemask_ps(far)) {
      float tv[8], uv[8];
      _mm256_storeu_ps(tv, t);
      _mm256_storeu_ps(uv, u);
      for (int q = 0; q < 8; q++)
        if (fabsf(uv[q]) > SC_SIN2_MAX) {
          const float sn = sinf(uv[q]);
          tv[q] = sn * sn;
        }
      t = _mm256_loadu_ps(tv);
    }
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm256_loadu_ps(ib + i), t, xv));
  }
  for (; i < n; i++) y[i] = sc_snake1(x[i], a[i], ib[i]);
}

const sc_kern_ops sc_kern_avx2 = {
    .name = "avx2",
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
    .attn_row = sc_attn_row_avx2,
    .attn_rows = sc_attn_rows_avx2,
    .gemm_f32 = gemm_f32,
    .gemm_bf16 = gemm_bf16,
    .gemm_x_order = gemm_x_order,
    .gemm_f32_ordered = gemm_f32_ordered,
    .gemm_bf16_ordered = gemm_bf16_ordered,
    .gemm_fl_tokens = FL_MAXT,
    .gemm_fl_groups = 1,
    .gemm_q8_0 = gemm_q8_0,
    .gemm_q4_0 = gemm_q4_0,
    .snake_row = snake_row,
};

#else /* built without -mavx2 -mfma -mf16c: nothing to offer */
const sc_kern_ops sc_kern_avx2 = {0};
#endif
