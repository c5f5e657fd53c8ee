/*
 * test_avx512_simde.c — kernels_avx512.c's hooks, run on any CPU: the file
 * is compiled here against SIMDe (libsimde-dev), a C model of the x86
 * intrinsics, and each hook is compared with the portable one:
 *   - f32 / bf16 dots and axpy agree to 1e-5 of the magnitudes;
 *   - q8_0 / q4_0 dots agree to 1e-5 for 1..19 blocks (whole groups and
 *     a tail, the rows in the CPU's groups), on edge values (-128
 *     weights, +-127 activations);
 *   - dot4 and dot1 give a row the same bits; quantize_q8 the portable bits;
 *   - every element of the GEMM hooks has its own dot1's bits (check_gemm);
 *   - snake_row agrees with sc_snake1 to 1e-6, past the polynomial's
 *     range too, and in place (check_snake).
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
typedef simde__mmask16 __mmask16;

#undef _mm512_madd_epi16 /* SIMDe 0.7.4's alias takes 4 arguments */
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)

#define SC_AVX512_SIMDE 1
#if defined(SC_TEST_VNNI) && defined(SC_TEST_GEMV_256) /* test_avx512vnni256_simde */
#define SC_VNNI 1
#define SC_GEMV_256 1
#define SC_AVX512_OPS sc_kern_avx512_simde
#define SC_AVX512_NAME "avx512-vnni-256 (SIMDe)"
#define NATIVE_ISA "avx512-vnni-256"
#elif defined(SC_TEST_VNNI) /* test_avx512vnni_simde: the same file with VPDPBUSD */
#define SC_VNNI 1
#define SC_AVX512_OPS sc_kern_avx512_simde
#define SC_AVX512_NAME "avx512-vnni (SIMDe)"
#define NATIVE_ISA "avx512-vnni"
#else
#define SC_AVX512_OPS sc_kern_avx512_simde
#define SC_AVX512_NAME "avx512 (SIMDe)"
#define NATIVE_ISA "avx512"
#endif
#include "../../runtime/kernels_avx512.c"

static uint64_t rng_state = 0x452821e638d01377ull;
static float frand(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}
static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

enum { MAXC = 300, NBMAX = 19 }; /* q4_0: up to two whole groups and a tail */

/* Four rows of nbmax quantized blocks each: q8_0 with -128 / -127 weights,
 * q4_0 read as groups or GGML blocks depending on nb (kernels.h), so no
 * byte may make an f16 Inf or NaN, wherever a scale is read. */
static void make_qweights(unsigned char *w8, unsigned char *w4, int nbmax) {
  for (int i = 0; i < 4 * nbmax * SC_Q8_0_BLOCK; i++)
    w8[i] = (unsigned char)(i % 5 == 0 ? 0x80 : i % 5 == 1 ? 0x81 : (int)(frand() * 127));
  for (int i = 0; i < 4 * nbmax * SC_Q4_0_BLOCK; i++) {
    unsigned char v;
    do v = (unsigned char)((frand() + 1) * 128); while ((v & 0x7c) == 0x7c);
    w4[i] = v;
  }
  for (int b = 0; b < 4 * nbmax; b++) { /* scales: +-2^-4 .. 2^-1, sane f16 */
    uint16_t h8 = (uint16_t)(0x2c00 + (b % 4) * 0x400 + (b & 1 ? 0x8000 : 0));
    memcpy(w8 + b * SC_Q8_0_BLOCK, &h8, 2);
  }
}

/* n random f32 weights and the same values truncated to bf16. */
static void make_fweights(float *wf, uint16_t *wb, int n) {
  for (int i = 0; i < n; i++) {
    wf[i] = frand();
    uint32_t u;
    memcpy(&u, &wf[i], 4);
    wb[i] = (uint16_t)(u >> 16);
  }
}

static void check_ops(const sc_kern_ops *A) {
  const sc_kern_ops *P = &sc_kern_portable;
  static float wf[4 * MAXC], x[MAXC];
  static uint16_t wb[4 * MAXC];
  make_fweights(wf, wb, 4 * MAXC);
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
  make_qweights(w8, w4, NBMAX);
  P->quantize_q8(xs, NBMAX, xq, xd, xp);
  if (sc_kern_ops_isa("avx2")) { /* the AVX-512 table quantizes with AVX2's code */
    A->quantize_q8(xs, NBMAX, xqa, xda, xpa);
    CHECK_MSG(!memcmp(xq, xqa, sizeof xq) && !memcmp(xd, xda, sizeof xd) &&
                  !memcmp(xp, xpa, (NBMAX / 8) * SC_Q4_VIEW_GROUP),
              "%s quantize_q8 differs from portable", A->name);
  }
  static unsigned char wg8[4 * RB8];
  for (int nb = 1; nb <= NBMAX; nb++) {
    for (int r = 0; r < 4; r++) /* q8_0: the CPU's groups for this row length (kernels.h) */
      sc_pack_row_q8_0(w8 + r * RB8, nb * 32, wg8 + r * RB8);
    for (int band = 0; band < 2; band++) {
      const unsigned char *w = band ? w4 : wg8;
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
}

/* The GEMM hooks: every element out[t * GLDO + r] has the bits of A's own
 * dot1 for row r and token t (so T = 1 and T > 1 agree), for nr = 1..4
 * and nt = 1..GT; nothing else in out is written.  Float columns cross
 * the 64-float blocks, the 16-float blocks, the scalar tail and the tile's
 * 512-column segments; block counts odd and even, q4_0 with no, one, two
 * and four whole groups, with and without a tail.  Tokens are GLDX
 * floats apart, an odd stride, and GLDO > 4 catches a wrong row stride. */
enum { GT = 13, GLDO = 5, GC = 1093, GLDX = GC + 3, GNB = 35 };
static const char *gband_name[] = {"f32", "bf16", "q8_0", "q4_0"};

static int untouched(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u == 0xffffffffu; /* the memset below */
}

static void check_gemm_out(const sc_kern_ops *A, int band, int size, int nr, int nt, const float *out,
                           const float *ref /* [GT][4]: dot1 */) {
  for (int t = 0; t < GT; t++)
    for (int r = 0; r < GLDO; r++) {
      const float o = out[t * GLDO + r];
      if (t < nt && r < nr)
        CHECK_MSG(same_bits(o, ref[t * 4 + r]), "%s gemm_%s size %d nr %d nt %d t %d r %d: %.9g, dot1 %.9g",
                  A->name, gband_name[band], size, nr, nt, t, r, o, ref[t * 4 + r]);
      else
        CHECK_MSG(untouched(o), "%s gemm_%s size %d nr %d nt %d wrote t %d r %d", A->name, gband_name[band],
                  size, nr, nt, t, r);
    }
}

static void check_gemm(const sc_kern_ops *A) {
  const sc_kern_ops *P = &sc_kern_portable;
  CHECK_MSG(A->gemm_f32 && A->gemm_bf16 && A->gemm_q8_0 && A->gemm_q4_0, "%s lacks a gemm hook", A->name);
  if (!(A->gemm_f32 && A->gemm_bf16 && A->gemm_q8_0 && A->gemm_q4_0)) return;
  static float wf[4 * GC], x[GT * GLDX], out[GT * GLDO], ref[GT * 4];
  static uint16_t wb[4 * GC];
  make_fweights(wf, wb, 4 * GC);
  for (int i = 0; i < GT * GLDX; i++) x[i] = frand();
  static const int colss[] = {1, 15, 16, 17, 32, 63, 64, 65, 100, 300, 577, 1093};
  for (size_t ci = 0; ci < sizeof colss / sizeof *colss; ci++)
    for (int band = 0; band < 2; band++) {
      const int cols = colss[ci];
      for (int t = 0; t < GT; t++)
        for (int r = 0; r < 4; r++) {
          if (band) A->dot1_bf16(wb + r * cols, x + t * GLDX, cols, &ref[t * 4 + r]);
          else A->dot1_f32(wf + r * cols, x + t * GLDX, cols, &ref[t * 4 + r]);
        }
      for (int nr = 1; nr <= 4; nr++)
        for (int nt = 1; nt <= GT; nt++) {
          memset(out, 0xff, sizeof out);
          if (band) A->gemm_bf16(wb, nr, x, GLDX, nt, cols, out, GLDO);
          else A->gemm_f32(wf, nr, x, GLDX, nt, cols, out, GLDO);
          check_gemm_out(A, band, cols, nr, nt, out, ref);
        }
    }

  enum { RB8 = GNB * SC_Q8_0_BLOCK, RB4 = GNB * SC_Q4_0_BLOCK };
  static unsigned char w8[4 * RB8], w4[4 * RB4], wg8[4 * RB8], xp[GT * GNB * 64];
  static float xs[GT * GNB * 32], xd[GT * GNB];
  static int8_t xq[GT * GNB * 32];
  make_qweights(w8, w4, GNB);
  for (int i = 0; i < GT * GNB * 32; i++) xs[i] = i % 7 == 0 ? (i & 1 ? -2.0f : 2.0f) : frand();
  static const int nbs[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 19, 35};
  for (size_t ni = 0; ni < sizeof nbs / sizeof *nbs; ni++) {
    const int nb = nbs[ni];
    for (int t = 0; t < GT; t++) /* token t's activations where the hooks look for them */
      P->quantize_q8(xs + t * 32 * nb, nb, xq + t * 32 * nb, xd + t * nb, xp + (size_t)t * 64 * nb);
    for (int r = 0; r < 4; r++) /* q8_0: the CPU's groups for this row length (kernels.h) */
      sc_pack_row_q8_0(w8 + r * RB8, nb * 32, wg8 + r * RB8);
    for (int band = 2; band < 4; band++) {
      const unsigned char *w = band == 3 ? w4 : wg8;
      const size_t rb = band == 3 ? RB4 : RB8;
      for (int t = 0; t < GT; t++)
        for (int r = 0; r < 4; r++) {
          const int8_t *q = xq + t * 32 * nb;
          const float *d = xd + t * nb;
          const unsigned char *v = xp + (size_t)t * 64 * nb;
          if (band == 3) A->dot1_q4_0(w + r * rb, rb, q, d, v, nb, &ref[t * 4 + r]);
          else A->dot1_q8_0(w + r * rb, rb, q, d, v, nb, &ref[t * 4 + r]);
        }
      for (int nr = 1; nr <= 4; nr++)
        for (int nt = 1; nt <= GT; nt++) {
          memset(out, 0xff, sizeof out);
          if (band == 3) A->gemm_q4_0(w, rb, nr, xq, xd, xp, nb, nt, out, GLDO);
          else A->gemm_q8_0(w, rb, nr, xq, xd, xp, nb, nt, out, GLDO);
          check_gemm_out(A, band, nb, nr, nt, out, ref);
        }
    }
  }
}

/* snake_row against sc_snake1, the scalar form of the same steps: whole
 * vectors and a tail, lanes past the polynomial's range, in place. */
static void check_snake(const sc_kern_ops *A) {
  enum { N = 37 };
  float x[N], a[N], ib[N], y[N];
  for (int i = 0; i < N; i++) {
    x[i] = frand() * 6.0f;
    a[i] = 0.2f + 3.0f * (frand() + 1.0f);
    ib[i] = 0.5f + (frand() + 1.0f);
  }
  x[4] = 9000.0f, x[20] = -3e4f, x[35] = 1e5f; /* lanes of two vectors, and the tail */
  for (int n = 1; n <= N; n += 6) {
    A->snake_row(x, a, ib, y, n);
    for (int i = 0; i < n; i++) {
      const float want = sc_snake1(x[i], a[i], ib[i]);
      CHECK_MSG(fabsf(y[i] - want) <= 1e-6f * (fabsf(x[i]) + ib[i]), "%s snake_row n %d i %d: %g vs %g", A->name,
                n, i, y[i], want);
    }
  }
  float z[N];
  memcpy(z, x, sizeof z);
  A->snake_row(z, a, ib, z, N);
  CHECK(!memcmp(z, y, sizeof z));
}

/* Every dot and GEMM element of A has the bits of B's: the quantized
 * bands, and the float dots (avx512-vnni-256's bf16 dot is its own code). */
static void check_same_bits(const sc_kern_ops *A, const sc_kern_ops *B) {
  enum { NB = GNB, RB8 = NB * SC_Q8_0_BLOCK, RB4 = NB * SC_Q4_0_BLOCK, NT = 9, FC = 1093 };
  static float wf[4 * FC], xf[FC];
  static uint16_t wb[4 * FC];
  make_fweights(wf, wb, 4 * FC);
  for (int i = 0; i < FC; i++) xf[i] = frand();
  static const int colss[] = {1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 577, 1093};
  for (size_t ci = 0; ci < sizeof colss / sizeof *colss; ci++) {
    const int cols = colss[ci];
    float a[4], b[4];
    A->dot4_bf16(wb, xf, cols, a), B->dot4_bf16(wb, xf, cols, b);
    CHECK_MSG(!memcmp(a, b, sizeof a), "%s bf16 cols %d: dot4 differs from %s", A->name, cols, B->name);
    A->dot1_bf16(wb, xf, cols, a), B->dot1_bf16(wb, xf, cols, b);
    CHECK_MSG(!memcmp(a, b, sizeof a[0]), "%s bf16 cols %d: dot1 differs from %s", A->name, cols, B->name);
    A->dot4_f32(wf, xf, cols, a), B->dot4_f32(wf, xf, cols, b);
    CHECK_MSG(!memcmp(a, b, sizeof a), "%s f32 cols %d: dot4 differs from %s", A->name, cols, B->name);
  }
  static unsigned char w8[4 * RB8], w4[4 * RB4], xp[NT * NB * 64];
  static float xs[NT * NB * 32], xd[NT * NB];
  static int8_t xq[NT * NB * 32];
  for (int i = 0; i < NT * NB * 32; i++) xs[i] = i % 7 == 0 ? (i & 1 ? -2.0f : 2.0f) : frand();
  make_qweights(w8, w4, NB);
  for (int t = 0; t < NT; t++)
    sc_kern_portable.quantize_q8(xs + t * NB * 32, NB, xq + t * NB * 32, xd + t * NB, xp + t * NB * 64);
  static unsigned char wg8[4 * RB8];
  for (int nb = 1; nb <= NB; nb++) {
    for (int r = 0; r < 4; r++) /* q8_0: the CPU's groups for this row length (kernels.h) */
      sc_pack_row_q8_0(w8 + r * RB8, nb * 32, wg8 + r * RB8);
    for (int band = 0; band < 2; band++) {
      const unsigned char *w = band ? w4 : wg8;
      const size_t rb = band ? RB4 : RB8;
      float a[4], b[4], ga[NT * 4], gb[NT * 4];
      if (band) A->dot4_q4_0(w, rb, xq, xd, xp, nb, a), B->dot4_q4_0(w, rb, xq, xd, xp, nb, b);
      else A->dot4_q8_0(w, rb, xq, xd, xp, nb, a), B->dot4_q8_0(w, rb, xq, xd, xp, nb, b);
      CHECK_MSG(!memcmp(a, b, sizeof a), "%s %s nb %d: dot4 differs from %s", A->name, band ? "q4_0" : "q8_0",
                nb, B->name);
      /* tokens quantized for nb blocks each: one quantize per token of NB
       * blocks gives the first nb blocks' bytes but a stride of NB */
      if (nb != NB) continue;
      if (band) A->gemm_q4_0(w, rb, 4, xq, xd, xp, nb, NT, ga, 4), B->gemm_q4_0(w, rb, 4, xq, xd, xp, nb, NT, gb, 4);
      else A->gemm_q8_0(w, rb, 4, xq, xd, xp, nb, NT, ga, 4), B->gemm_q8_0(w, rb, 4, xq, xd, xp, nb, NT, gb, 4);
      CHECK_MSG(!memcmp(ga, gb, sizeof ga), "%s gemm_%s differs from %s", A->name, band ? "q4_0" : "q8_0",
                B->name);
    }
  }
}

int main(void) {
  sc_kernels K;
  sc_kernels_init_portable(&K, NULL); /* fills sc_f16_table */
  check_ops(&sc_kern_avx512_simde);
  check_gemm(&sc_kern_avx512_simde);
  check_snake(&sc_kern_avx512_simde);
  printf("%s agrees with portable\n", SC_AVX512_NAME);
  const sc_kern_ops *native = sc_kern_ops_isa(NATIVE_ISA);
  if (native) {
    check_ops(native);
    check_gemm(native);
    check_snake(native);
    printf("%s (this CPU) agrees with portable\n", NATIVE_ISA);
  }
  /* The VNNI table promises the plain AVX-512 table's bits, checked where
   * the CPU runs both.  (Not the model against the CPU: SIMDe's float
   * FMA without -mfma rounds twice, so no model has the CPU's bits.) */
  const sc_kern_ops *plain = sc_kern_ops_isa("avx512");
  if (plain && native && plain != native) {
    check_same_bits(native, plain);
    printf("%s has the bits of avx512 on this CPU\n", NATIVE_ISA);
  }
  CHECK_DONE();
}
