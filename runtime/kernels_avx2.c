/*
 * kernels_avx2.c — AVX2+FMA inner loops for kernels.c (built with -mavx2
 * -mfma -mf16c because of the _avx2.c suffix; chosen at run time only when
 * the CPU has AVX2 and FMA).
 *
 * Per-row accumulation order, fixed by `cols` alone:
 *   four 8-float FMA accumulators a0..a3 take the 32-float blocks (block b
 *   at i..i+32 feeds a_k with i+8k..i+8k+8); the 8-float blocks left after
 *   that go into a0; then (a0+a1)+(a2+a3), a horizontal sum (high 128 + low
 *   128, then pairs, then the last two), and the last cols%8 products by
 *   scalar fmaf in index order.
 * dot4 runs four rows through that same sequence sharing each x load, so a
 * row gives the same bits whichever call computes it.
 */
#include "kernels.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE __m256 load8_f32(const float *p) { return _mm256_loadu_ps(p); }

/* 8 bf16 -> 8 f32: widen to 32 bits, move into the high half. */
ALWAYS_INLINE __m256 load8_bf16(const uint16_t *p) {
  __m128i h = _mm_loadu_si128((const __m128i *)p);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

ALWAYS_INLINE float scalar_f32(const float *p) { return *p; }
ALWAYS_INLINE float scalar_bf16(const uint16_t *p) {
  uint32_t u = (uint32_t)*p << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

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
                              float *out, const int N) {                   \
    __m256 a[4][4];                                                        \
    for (int r = 0; r < N; r++)                                            \
      for (int k = 0; k < 4; k++) a[r][k] = _mm256_setzero_ps();           \
    int i = 0;                                                             \
    for (; i + 32 <= cols; i += 32)                                        \
      for (int k = 0; k < 4; k++) {                                        \
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
  static void NAME##4(const WT *w, const float *x, int cols, float *out) { \
    NAME##_n(w, x, cols, out, 4);                                          \
  }                                                                        \
  static void NAME##1(const WT *w, const float *x, int cols, float *out) { \
    NAME##_n(w, x, cols, out, 1);                                          \
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

const sc_kern_ops sc_kern_avx2 = {
    .name = "avx2",
    .dot4_f32 = dot_f32_4,
    .dot1_f32 = dot_f32_1,
    .dot4_bf16 = dot_bf16_4,
    .dot1_bf16 = dot_bf16_1,
    .axpy = axpy,
};

#else /* built without -mavx2 -mfma: nothing to offer */
const sc_kern_ops sc_kern_avx2 = {0};
#endif
