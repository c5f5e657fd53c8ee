/*
 * vexp.c — sc_expf_n (kernels.h): e^x over an array, the one exponential
 * of the runtime's hot loops (softmax, SiLU, the sigmoid gates).
 *
 * Cody-Waite reduction x = n ln2 + r (n the nearest integer to x log2 e,
 * ln2 in two parts), Cephes' polynomial for e^r on |r| <= ln2/2, then the
 * exponent applied in two exact halves (2^(n>>1), then 2^(n-(n>>1))) so
 * that a subnormal result rounds once.  Within 1 ulp of the correctly
 * rounded value over every float (checked exhaustively when it was
 * written; test_kernels checks a sample of the range and the edges).
 *
 * The loop is branch-free so that it vectorizes, and it is compiled three
 * times: for the baseline, and with AVX2 and AVX-512 where the CPU has
 * them.  This file is built with -ffp-contract=off (no fused multiply-add
 * on any of them) and -fno-trapping-math (which lets the selects
 * vectorize; it changes no value), so every variant computes each element
 * with the same operations: the same bits whichever runs.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

static inline float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#define EXPF_BODY(a, out)                                                          \
  do {                                                                             \
    float v = a > 88.8f ? 88.8f : a;                                               \
    v = v < -104.0f ? -104.0f : v;                                                 \
    v = v == v ? v : 0.0f; /* NaN: a finite n below (the result is NaN) */         \
    const float nf = (v * 1.44269504f + 12582912.0f) - 12582912.0f; /* rint */     \
    const float r = (v - nf * 0.693359375f) - nf * -2.12194440e-4f;                \
    float p = 1.9875691500e-4f;                                                    \
    p = p * r + 1.3981999507e-3f;                                                  \
    p = p * r + 8.3334519073e-3f;                                                  \
    p = p * r + 4.1665795894e-2f;                                                  \
    p = p * r + 1.6666665459e-1f;                                                  \
    p = p * r + 5.0000001201e-1f;                                                  \
    p = p * (r * r) + r + 1.0f;                                                    \
    const int32_t ni = (int32_t)nf, n1 = ni >> 1, n2 = ni - n1;                    \
    float e = (p * from_bits((uint32_t)(n1 + 127) << 23)) * from_bits((uint32_t)(n2 + 127) << 23); \
    e = a > 88.7228394f ? INFINITY : e;  /* above ln(FLT_MAX) */                  \
    e = a < -103.972084f ? 0.0f : e;     /* below ln of half the least subnormal */ \
    out = a != a ? a : e;                                                          \
  } while (0)
#define EXPF_LOOP                                                                  \
  for (int i = 0; i < n; i++) EXPF_BODY(x[i], y[i]);

float sc_expf1(float x) {
  float y;
  EXPF_BODY(x, y);
  return y;
}

static void expf_base(const float *restrict x, float *restrict y, int n) { EXPF_LOOP }

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define SC_VEXP_X86 1
__attribute__((target("avx2"))) static void expf_avx2(const float *restrict x, float *restrict y, int n) {
  EXPF_LOOP
}
__attribute__((target("avx512f"))) static void expf_avx512(const float *restrict x, float *restrict y, int n) {
  EXPF_LOOP
}
#endif

sc_expf_fn sc_expf_variant(int v) {
  switch (v) {
  case 0: return expf_base;
#ifdef SC_VEXP_X86
  case 1: return __builtin_cpu_supports("avx2") ? expf_avx2 : NULL;
  case 2: return __builtin_cpu_supports("avx512f") ? expf_avx512 : NULL;
#endif
  default: return NULL;
  }
}

/* Pieces on the stack, so that y may be x (the variants take restrict). */
#define EXPF_PIECE 256

void sc_expf_n(const float *x, float *y, int n) {
  static sc_expf_fn best; /* a benign race: every thread stores the same */
  sc_expf_fn f = __atomic_load_n(&best, __ATOMIC_RELAXED);
  if (!f) {
    for (int v = 2; v >= 0 && !f; v--) f = sc_expf_variant(v);
    __atomic_store_n(&best, f, __ATOMIC_RELAXED);
  }
  if (y + n <= x || x + n <= y) {
    f(x, y, n);
    return;
  }
  float tmp[EXPF_PIECE];
  for (int i = 0; i < n; i += EXPF_PIECE) {
    const int m = n - i < EXPF_PIECE ? n - i : EXPF_PIECE;
    f(x + i, tmp, m);
    memcpy(y + i, tmp, (size_t)m * sizeof *y);
  }
}
