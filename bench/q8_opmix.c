/*
 * q8_opmix.c — what the AVX2 q8_0 prefill tile's instruction mix costs on
 * this core, and what two other float orders would cost, from L1.
 *
 *   build/q8_opmix   (CMake builds it on x86-64; or by hand:
 *   gcc -O2 -mavx2 -mfma -mf16c bench/q8_opmix.c -o q8_opmix)
 *
 * Each loop is a 2-row x 3-token tile (runtime/kernels_avx2.c, q8_tile)
 * over 64 blocks of 32 int8 weights, in L1, repeated; printed as core
 * cycles per (row, token, block), the clock measured by a chain of
 * dependent integer adds (as bench/fma_peak.c):
 *
 *   shipped   acc += d_w * (d_x * cvt(partial sums))  — per row, token and
 *             block: sign, maddubs, madd, convert, multiply, FMA (the order
 *             the AVX2 q8_0 dot and tile share today)
 *   products  acc += (d_w * d_x) * cvt(partial sums), the products made
 *             eight at a time before the blocks and broadcast from memory:
 *             no multiply per block, but one broadcast load
 *   grouped   eight blocks transposed so that 32-bit lane j of every
 *             32-byte chunk belongs to block j (as the q4_0 groups,
 *             runtime/kernels.h): per row, token and block sign, maddubs,
 *             madd and an integer add; per eight blocks one convert, one
 *             multiply (d_w * d_x for eight blocks) and one FMA.  Lane j
 *             then holds block j's exact integer dot.  A layout change for
 *             every ISA's q8_0 kernels (and the dot, which must keep the
 *             tile's order); not built.
 *
 * Nothing is checked (the sums are printed so the loops are not removed);
 * the numbers say what a change of order or layout could gain before
 * anyone writes one.  x86-64 with AVX2 only.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NB 64  /* blocks a row */
#define REPS 200000

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Core clock in Hz: a chain of dependent adds runs one a cycle (eight a
 * loop, so that the loop's own branch is not what is timed). */
static double clock_hz(void) {
  double best = 0;
  for (int pass = 0; pass < 5; pass++) {
    uint64_t x = 1;
    const long n = 50000000;
    const double t = now_s();
    for (long i = 0; i < n; i++)
      __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                       "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                       : "+r"(x));
    const double hz = 8.0 * n / (now_s() - t);
    if (hz > best) best = hz;
  }
  return best;
}

static int8_t w8[2][NB][32] __attribute__((aligned(32)));
static int8_t x8[3][NB][32] __attribute__((aligned(32)));
static float dw[2][NB], dx[3][NB], prod[2][3][NB] __attribute__((aligned(32)));

static float hsum(__m256 v) {
  float f[8], s = 0;
  _mm256_storeu_ps(f, v);
  for (int i = 0; i < 8; i++) s += f[i];
  return s;
}

static float run_shipped(void) {
  const __m256i one = _mm256_set1_epi16(1);
  __m256 a[2][3];
  for (int r = 0; r < 2; r++)
    for (int t = 0; t < 3; t++) a[r][t] = _mm256_setzero_ps();
  for (int b = 0; b < NB; b++) {
    __m256i q[2], aq[2];
    __m256 sw[2];
    for (int r = 0; r < 2; r++) {
      q[r] = _mm256_load_si256((const __m256i *)w8[r][b]);
      aq[r] = _mm256_sign_epi8(q[r], q[r]);
      sw[r] = _mm256_broadcast_ss(&dw[r][b]);
    }
    for (int t = 0; t < 3; t++) {
      const __m256i y = _mm256_load_si256((const __m256i *)x8[t][b]);
      const __m256 sx = _mm256_broadcast_ss(&dx[t][b]);
      for (int r = 0; r < 2; r++) {
        const __m256i p = _mm256_maddubs_epi16(aq[r], _mm256_sign_epi8(y, q[r]));
        const __m256 s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(p, one)), sx);
        a[r][t] = _mm256_fmadd_ps(sw[r], s, a[r][t]);
      }
    }
  }
  float s = 0;
  for (int r = 0; r < 2; r++)
    for (int t = 0; t < 3; t++) s += hsum(a[r][t]);
  return s;
}

static float run_products(void) {
  const __m256i one = _mm256_set1_epi16(1);
  for (int r = 0; r < 2; r++)
    for (int t = 0; t < 3; t++)
      for (int b = 0; b < NB; b += 8)
        _mm256_store_ps(&prod[r][t][b],
                        _mm256_mul_ps(_mm256_loadu_ps(&dw[r][b]), _mm256_loadu_ps(&dx[t][b])));
  __m256 a[2][3];
  for (int r = 0; r < 2; r++)
    for (int t = 0; t < 3; t++) a[r][t] = _mm256_setzero_ps();
  for (int b = 0; b < NB; b++) {
    __m256i q[2], aq[2];
    for (int r = 0; r < 2; r++) {
      q[r] = _mm256_load_si256((const __m256i *)w8[r][b]);
      aq[r] = _mm256_sign_epi8(q[r], q[r]);
    }
    for (int t = 0; t < 3; t++) {
      const __m256i y = _mm256_load_si256((const __m256i *)x8[t][b]);
      for (int r = 0; r < 2; r++) {
        const __m256i p = _mm256_maddubs_epi16(aq[r], _mm256_sign_epi8(y, q[r]));
        a[r][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&prod[r][t][b]),
                                  _mm256_cvtepi32_ps(_mm256_madd_epi16(p, one)), a[r][t]);
      }
    }
  }
  float s = 0;
  for (int r = 0; r < 2; r++)
    for (int t = 0; t < 3; t++) s += hsum(a[r][t]);
  return s;
}

/* The same bytes read as groups: chunk c of group g is w8[r][8g + c]
 * (taken as already transposed; the cost of the loop does not depend on
 * which bytes sit where). */
static float run_grouped(void) {
  const __m256i one = _mm256_set1_epi16(1);
  __m256 a[2][3];
  for (int r = 0; r < 2; r++)
    for (int t = 0; t < 3; t++) a[r][t] = _mm256_setzero_ps();
  for (int g = 0; g < NB / 8; g++) {
    __m256i acc[2][3];
    for (int r = 0; r < 2; r++)
      for (int t = 0; t < 3; t++) acc[r][t] = _mm256_setzero_si256();
    for (int c = 0; c < 8; c++) {
      __m256i q[2], aq[2];
      for (int r = 0; r < 2; r++) {
        q[r] = _mm256_load_si256((const __m256i *)w8[r][8 * g + c]);
        aq[r] = _mm256_sign_epi8(q[r], q[r]);
      }
      for (int t = 0; t < 3; t++) {
        const __m256i y = _mm256_load_si256((const __m256i *)x8[t][8 * g + c]);
        for (int r = 0; r < 2; r++)
          acc[r][t] = _mm256_add_epi32(
              acc[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(aq[r], _mm256_sign_epi8(y, q[r])), one));
      }
    }
    for (int r = 0; r < 2; r++) {
      const __m256 sw = _mm256_loadu_ps(&dw[r][8 * g]);
      for (int t = 0; t < 3; t++)
        a[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(sw, _mm256_loadu_ps(&dx[t][8 * g])),
                                  _mm256_cvtepi32_ps(acc[r][t]), a[r][t]);
    }
  }
  float s = 0;
  for (int r = 0; r < 2; r++)
    for (int t = 0; t < 3; t++) s += hsum(a[r][t]);
  return s;
}

static double cycles_per_block(float (*fn)(void), double hz, float *sink) {
  double best = 1e30;
  for (int pass = 0; pass < 5; pass++) {
    const double t = now_s();
    for (int i = 0; i < REPS; i++) *sink += fn();
    const double dt = now_s() - t;
    if (dt < best) best = dt;
  }
  return best * hz / ((double)REPS * 2 * 3 * NB);
}

int main(void) {
  uint32_t s = 12345;
  for (size_t i = 0; i < sizeof w8; i++) ((int8_t *)w8)[i] = (int8_t)((s = s * 1103515245u + 12345u) >> 24);
  for (size_t i = 0; i < sizeof x8; i++) ((int8_t *)x8)[i] = (int8_t)((s = s * 1103515245u + 12345u) >> 24);
  for (int b = 0; b < NB; b++) {
    dw[0][b] = 1e-3f * (b + 1), dw[1][b] = 2e-3f * (b + 1);
    for (int t = 0; t < 3; t++) dx[t][b] = 1e-2f / (b + t + 1);
  }
  const double hz = clock_hz();
  float sink = 0;
  const double c_ship = cycles_per_block(run_shipped, hz, &sink);
  const double c_prod = cycles_per_block(run_products, hz, &sink);
  const double c_grp = cycles_per_block(run_grouped, hz, &sink);
  printf("clock     %.2f GHz\n", hz * 1e-9);
  printf("shipped   %.2f cycles per row, token and block\n", c_ship);
  printf("products  %.2f (%.2fx shipped)\n", c_prod, c_ship / c_prod);
  printf("grouped   %.2f (%.2fx shipped)\n", c_grp, c_ship / c_grp);
  printf("(sums %g)\n", sink);
  return 0;
}
