/*
 * test_avx512_simde.c — kernels_avx512.c's hooks, run on any CPU: the file
 * is compiled here against SIMDe (libsimde-dev), a C model of the x86
 * intrinsics, and each hook is compared with the portable one:
 *   - f32 / bf16 dots and axpy agree to 1e-5 of the magnitudes;
 *   - q8_0 / q4_0 dots agree to 1e-5 for 1..19 blocks (pairs and an odd
 *     last block; q4_0 whole groups and a tail), on edge values (-128
 *     weights, +-127 activations);
 *   - dot4 and dot1 give a row the same bits; quantize_q8 the portable bits.
 * This checks the code's logic, not the CPU: the AVX-512 instructions have
 * not run (README, "ISAs").  On a CPU with AVX-512 the native table is
 * checked the same way, and test_kernels / test_quant run it end to end.
 * SIMDe 0.7.4 lacks two of the intrinsics used and the __mmask64 alias,
 * and misdeclares the alias of a third; the shims below model them lane
 * by lane from Intel's definitions or call SIMDe's own function.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "kernels.h"

/* 512-bit vectors passed between static functions without -mavx512f:
 * clang warns that the ABI differs from an AVX-512 build; irrelevant here */
#pragma GCC diagnostic ignored "-Wpsabi"
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>

static inline simde__m512 shim_cvtepi32_ps(simde__m512i a) {
  int32_t i[16];
  float f[16];
  simde__m512 r;
  memcpy(i, &a, 64);
  for (int k = 0; k < 16; k++) f[k] = (float)i[k]; /* exact below 2^24, as here */
  memcpy(&r, f, 64);
  return r;
}
static inline simde__m512i shim_cvtepu16_epi32(simde__m256i a) {
  uint16_t h[16];
  uint32_t u[16];
  simde__m512i r;
  memcpy(h, &a, 32);
  for (int k = 0; k < 16; k++) u[k] = h[k];
  memcpy(&r, u, 64);
  return r;
}
#ifndef _mm512_cvtepi32_ps
#define _mm512_cvtepi32_ps shim_cvtepi32_ps
#endif
#ifndef _mm512_cvtepu16_epi32
#define _mm512_cvtepu16_epi32 shim_cvtepu16_epi32
#endif

/* SIMDe names the mask type but gives it no native alias (a repeated
 * typedef of the same type is valid C11, should a later SIMDe add one) */
typedef simde__mmask64 __mmask64;

#undef _mm512_madd_epi16 /* SIMDe 0.7.4's alias takes 4 arguments */
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)

#define SC_AVX512_SIMDE 1
#define SC_AVX512_OPS sc_kern_avx512_simde
#include "../../runtime/kernels_avx512.c"

static uint64_t rng_state = 0x452821e638d01377ull;
static float frand(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}
static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

enum { MAXC = 300, NBMAX = 19 }; /* q4_0: up to two whole groups and a tail */

static void check_ops(const sc_kern_ops *A) {
  const sc_kern_ops *P = &sc_kern_portable;
  static float wf[4 * MAXC], x[MAXC];
  static uint16_t wb[4 * MAXC];
  for (int i = 0; i < 4 * MAXC; i++) {
    wf[i] = frand();
    uint32_t u;
    memcpy(&u, &wf[i], 4);
    wb[i] = (uint16_t)(u >> 16);
  }
  for (int i = 0; i < MAXC; i++) x[i] = frand();
  static const int colss[] = {1, 15, 16, 17, 63, 64, 65, 100, 128, 200, 255, 300};
  for (size_t ci = 0; ci < sizeof colss / sizeof *colss; ci++) {
    const int cols = colss[ci];
    for (int band = 0; band < 2; band++) {
      float a4[4], p4[4], a1;
      if (band) A->dot4_bf16(wb, x, cols, a4), P->dot4_bf16(wb, x, cols, p4);
      else A->dot4_f32(wf, x, cols, a4), P->dot4_f32(wf, x, cols, p4);
      for (int r = 0; r < 4; r++) {
        double m = 0;
        for (int c = 0; c < cols; c++) m += fabs((double)wf[r * cols + c] * x[c]);
        CHECK_MSG(fabs(a4[r] - p4[r]) <= 1e-5 * m + 1e-30, "%s band %d cols %d r %d: %g vs portable %g",
                  A->name, band, cols, r, a4[r], p4[r]);
        if (band) A->dot1_bf16(wb + r * cols, x, cols, &a1);
        else A->dot1_f32(wf + r * cols, x, cols, &a1);
        CHECK_MSG(same_bits(a1, a4[r]), "%s band %d cols %d r %d: dot1 %g, dot4 %g", A->name, band, cols, r,
                  a1, a4[r]);
      }
    }
    float ya[MAXC], yp[MAXC];
    memcpy(ya, wf, sizeof ya);
    memcpy(yp, wf, sizeof yp);
    A->axpy(ya, 0.75f, x, cols);
    P->axpy(yp, 0.75f, x, cols);
    for (int i = 0; i < cols; i++)
      CHECK_MSG(fabsf(ya[i] - yp[i]) <= 1e-6f * (fabsf(wf[i]) + 1), "%s axpy %d", A->name, i);
  }

  /* quantized: activations with +-max values, weights with -128 / -127 */
  enum { RB8 = NBMAX * SC_Q8_0_BLOCK, RB4 = NBMAX * SC_Q4_0_BLOCK };
  static unsigned char w8[4 * RB8], w4[4 * RB4], xp[NBMAX * 64], xpa[NBMAX * 64];
  float xs[NBMAX * 32], xd[NBMAX], xda[NBMAX];
  int8_t xq[NBMAX * 32], xqa[NBMAX * 32];
  for (int i = 0; i < NBMAX * 32; i++) xs[i] = i % 7 == 0 ? (i & 1 ? -2.0f : 2.0f) : frand();
  for (int i = 0; i < 4 * RB8; i++) w8[i] = (unsigned char)(i % 5 == 0 ? 0x80 : i % 5 == 1 ? 0x81 : (int)(frand() * 127));
  /* q4_0 rows are read as groups or GGML blocks depending on nb (kernels.h):
   * no byte may make an f16 Inf or NaN, wherever a scale is read */
  for (int i = 0; i < 4 * RB4; i++) {
    unsigned char v;
    do v = (unsigned char)((frand() + 1) * 128); while ((v & 0x7c) == 0x7c);
    w4[i] = v;
  }
  for (int b = 0; b < 4 * NBMAX; b++) { /* scales: +-2^-4 .. 2^-1, sane f16 */
    uint16_t h8 = (uint16_t)(0x2c00 + (b % 4) * 0x400 + (b & 1 ? 0x8000 : 0));
    memcpy(w8 + b * SC_Q8_0_BLOCK, &h8, 2);
  }
  P->quantize_q8(xs, NBMAX, xq, xd, xp);
  if (sc_kern_ops_isa("avx2")) { /* the AVX-512 table quantizes with AVX2's code */
    A->quantize_q8(xs, NBMAX, xqa, xda, xpa);
    CHECK_MSG(!memcmp(xq, xqa, sizeof xq) && !memcmp(xd, xda, sizeof xd) &&
                  !memcmp(xp, xpa, (NBMAX / 8) * SC_Q4_VIEW_GROUP),
              "%s quantize_q8 differs from portable", A->name);
  }
  for (int nb = 1; nb <= NBMAX; nb++)
    for (int band = 0; band < 2; band++) {
      const unsigned char *w = band ? w4 : w8;
      const size_t rb = band ? RB4 : RB8;
      float a4[4], p4[4], a1;
      if (band) A->dot4_q4_0(w, rb, xq, xd, xp, nb, a4), P->dot4_q4_0(w, rb, xq, xd, xp, nb, p4);
      else A->dot4_q8_0(w, rb, xq, xd, xp, nb, a4), P->dot4_q8_0(w, rb, xq, xd, xp, nb, p4);
      for (int r = 0; r < 4; r++) {
        float wr[NBMAX * 32];
        sc_dequantize_row(band ? SC_W_Q4_0 : SC_W_Q8_0, w + r * rb, nb * 32, wr);
        double m = 0;
        for (int c = 0; c < nb * 32; c++) m += fabs((double)wr[c] * xd[c / 32] * xq[c]);
        CHECK_MSG(fabs(a4[r] - p4[r]) <= 1e-5 * m + 1e-30, "%s %s nb %d r %d: %g vs portable %g", A->name,
                  band ? "q4_0" : "q8_0", nb, r, a4[r], p4[r]);
        if (band) A->dot1_q4_0(w + r * rb, rb, xq, xd, xp, nb, &a1);
        else A->dot1_q8_0(w + r * rb, rb, xq, xd, xp, nb, &a1);
        CHECK_MSG(same_bits(a1, a4[r]), "%s %s nb %d r %d: dot1 %g, dot4 %g", A->name, band ? "q4_0" : "q8_0",
                  nb, r, a1, a4[r]);
      }
    }
}

int main(void) {
  sc_kernels K;
  sc_kernels_init_portable(&K, NULL); /* fills sc_f16_table */
  check_ops(&sc_kern_avx512_simde);
  printf("avx512 (SIMDe model) agrees with portable\n");
  const sc_kern_ops *native = sc_kern_ops_isa("avx512");
  if (native) {
    check_ops(native);
    printf("avx512 (this CPU) agrees with portable\n");
  }
  CHECK_DONE();
}
