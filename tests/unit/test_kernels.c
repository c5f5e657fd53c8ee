/*
 * test_kernels.c — the CPU kernels against naive double-precision
 * references, and the bit-exactness promises of kernels.h:
 *   - T>1 rows equal T=1 rows, and a row's value does not depend on which
 *     other rows share the call;
 *   - linear_swiglu == silu(linear(gate)) * linear(up) exactly;
 *   - the blocked (GEMM) kernels: every band, odd row counts, T = 1..9 and
 *     past a token block, cols with remainder blocks, T>1 == T=1 bit for
 *     bit, also hook by hook against dot1; f32 from 16 tokens (OpenBLAS)
 *     within rounding of the portable kernels and the same bits for any
 *     thread count;
 *   - every ISA this build and CPU run (SC_KERNEL_ISAS: AVX2, AVX-512,
 *     NEON, NEON+dotprod) passes all of the above and agrees with the
 *     portable kernels to 1e-5;
 *   - bf16 weights with bf16 activations (sc_kernel_ctx.bf16_act), each
 *     engine (AMX tiles, AVX512-BF16) where the CPU has it: against a
 *     double reference over the bf16-rounded activations, partial row and
 *     token blocks, bias and accumulate, strides, the same bits for 1 and
 *     2 threads and for a token alone as within a call; where an engine
 *     does not run, asking for it changes nothing (the same bits as
 *     without);
 *   - conv1d (the fused causal conv): the bits of IM2COL then linear() in
 *     the same pieces, f32 and bf16 weights, bf16 activations allowed
 *     (both engines pack the conv's rows straight from x and the state), a stream
 *     in two calls, the state it leaves;
 *   - the default choice and the SPEECHC_ISA override, with its errors.
 * SPEECHC_TEST_ISAS=a,b makes it fail unless ISAs a and b run here (the
 * emulated runs of scripts/neon.sh, so that they cannot test less).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "cpu.h"
#include "kernels.h"
#include "kernels_amx.h"
#include "pool.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}
static void fill(float *p, int n) {
  for (int i = 0; i < n; i++) p[i] = frand();
}
static uint16_t to_bf16(float f) { /* truncation is enough for test data */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static double bf16_val(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

enum { MAXR = 16, MAXC = 128, MAXT = 3, LDX = MAXC + 5, LDY = MAXR + 3 };

/* A weight matrix held in both bands: wf is f32, wb its bf16 truncation. */
typedef struct {
  float wf[2 * MAXR * MAXC];
  uint16_t wb[2 * MAXR * MAXC];
} Weights;

static double wval(const Weights *W, int wtype, size_t i) {
  return wtype == SC_W_F32 ? W->wf[i] : bf16_val(W->wb[i]);
}
static const void *wptr(const Weights *W, int wtype, size_t row, int cols) {
  return wtype == SC_W_F32 ? (const void *)(W->wf + row * cols)
                           : (const void *)(W->wb + row * cols);
}

/* Reference y[t,r] and the magnitude it is made of (for a relative bound). */
static void ref_linear(const Weights *W, int wtype, const float *bias,
                       const float *x, const float *y0, int T, int rows,
                       int cols, int acc, double *ref, double *mag) {
  for (int t = 0; t < T; t++)
    for (int r = 0; r < rows; r++) {
      double s = 0, m = 0;
      for (int c = 0; c < cols; c++) {
        double p = wval(W, wtype, (size_t)r * cols + c) * x[t * LDX + c];
        s += p;
        m += fabs(p);
      }
      if (bias) s += bias[r], m += fabs(bias[r]);
      if (acc) s += y0[t * LDY + r], m += fabs(y0[t * LDY + r]);
      ref[t * MAXR + r] = s;
      mag[t * MAXR + r] = m;
    }
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

static void test_linear(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static Weights W;
  static const int colss[] = {37, 100, 3, 8, 64, 128};
  float x[MAXT * LDX], bias[MAXR], y0[MAXT * LDY];
  for (int i = 0; i < 2 * MAXR * MAXC; i++) {
    W.wf[i] = frand();
    W.wb[i] = to_bf16(W.wf[i]);
  }
  fill(x, MAXT * LDX);
  fill(bias, MAXR);
  fill(y0, MAXT * LDY);
  for (int wt = 0; wt < 2; wt++)
    for (size_t ci = 0; ci < sizeof colss / sizeof *colss; ci++)
      for (int with_bias = 0; with_bias < 2; with_bias++)
        for (int acc = 0; acc < 2; acc++) {
          int wtype = wt ? SC_W_BF16 : SC_W_F32, cols = colss[ci], rows = 5;
          const float *b = with_bias ? bias : NULL;
          const void *w = wptr(&W, wtype, 0, cols);
          double ref[MAXT * MAXR], mag[MAXT * MAXR];
          float y3[MAXT * LDY], y1[LDY];
          ref_linear(&W, wtype, b, x, y0, 3, rows, cols, acc, ref, mag);

          /* T = 3 against the reference */
          memcpy(y3, y0, sizeof y3);
          K->linear(K->ctx, wtype, w, b, x, LDX, y3, LDY, 3, rows, cols, acc);
          for (int t = 0; t < 3; t++)
            for (int r = 0; r < rows; r++)
              CHECK_MSG(fabs(y3[t * LDY + r] - ref[t * MAXR + r]) <=
                            1e-5 * mag[t * MAXR + r] + 1e-30,
                        "%s band %d cols %d bias %d acc %d t %d r %d: %g vs %g",
                        sc_kernels_isa(K), wtype, cols, with_bias, acc, t, r,
                        y3[t * LDY + r], ref[t * MAXR + r]);
          /* padding between rows of y is untouched */
          for (int t = 0; t < 3; t++)
            for (int r = rows; r < LDY; r++)
              CHECK(same_bits(y3[t * LDY + r], y0[t * LDY + r]));

          /* T = 1 per token gives the same bits as T = 3 */
          for (int t = 0; t < 3; t++) {
            memcpy(y1, y0 + t * LDY, sizeof y1);
            K->linear(K->ctx, wtype, w, b, x + t * LDX, LDX, y1, LDY, 1, rows,
                      cols, acc);
            for (int r = 0; r < rows; r++)
              CHECK_MSG(same_bits(y1[r], y3[t * LDY + r]),
                        "%s T=1 vs T=3: band %d cols %d t %d r %d",
                        sc_kernels_isa(K), wtype, cols, t, r);
          }
          /* one row per call gives the same bits as five rows per call
           * (rows 0-3 go through the 4-row path, row 4 through the 1-row) */
          for (int r = 0; r < rows; r++) {
            float yr = y0[r];
            K->linear(K->ctx, wtype, wptr(&W, wtype, r, cols),
                      b ? b + r : NULL, x, LDX, &yr, 1, 1, 1, cols, acc);
            CHECK_MSG(same_bits(yr, y3[r]), "%s row %d alone: %g vs %g",
                      sc_kernels_isa(K), r, yr, y3[r]);
          }
        }
  CHECK(!ctx->failed);

  /* unsupported bands are reported, not computed */
  float y = 0;
  K->linear(K->ctx, 9, W.wf, NULL, x, LDX, &y, 1, 1, 1, 32, 0);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "unsupported weight band (value 9)");
  sc_kernel_ctx_clear(ctx);
  K->linear_swiglu(K->ctx, SC_W_F16, W.wf, x, LDX, &y, 1, 1, 1, 32);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "unsupported weight band (value 2)");
  sc_kernel_ctx_clear(ctx);
}

/* Fused SwiGLU must equal the unfused graph bit for bit. */
static void test_swiglu(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static Weights W;
  float x[MAXT * LDX];
  for (int i = 0; i < 2 * MAXR * MAXC; i++) {
    W.wf[i] = frand() * 2.0f;
    W.wb[i] = to_bf16(W.wf[i]);
  }
  fill(x, MAXT * LDX);
  static const int colss[] = {37, 100, 128};
  static const int rowss[] = {5, 8, 1};
  for (int wt = 0; wt < 2; wt++)
    for (int ci = 0; ci < 3; ci++)
      for (int T = 1; T <= 3; T += 2) {
        int wtype = wt ? SC_W_BF16 : SC_W_F32, cols = colss[ci],
            rows = rowss[ci];
        const void *w = wptr(&W, wtype, 0, cols);
        float y[MAXT * LDY], g[MAXT * LDY], u[MAXT * LDY];
        K->linear_swiglu(K->ctx, wtype, w, x, LDX, y, LDY, T, rows, cols);
        K->linear(K->ctx, wtype, w, NULL, x, LDX, g, LDY, T, rows, cols, 0);
        K->linear(K->ctx, wtype, wptr(&W, wtype, rows, cols), NULL, x, LDX, u,
                  LDY, T, rows, cols, 0);
        for (int t = 0; t < T; t++)
          for (int r = 0; r < rows; r++) {
            float gv = g[t * LDY + r], uv = u[t * LDY + r];
            float e = -gv;
            sc_expf_n(&e, &e, 1);
            float want = gv / (1.0f + e) * uv;
            CHECK_MSG(same_bits(y[t * LDY + r], want),
                      "%s swiglu band %d cols %d T %d t %d r %d: %.9g vs %.9g",
                      sc_kernels_isa(K), wtype, cols, T, t, r, y[t * LDY + r],
                      want);
            /* and it is SwiGLU at all: against doubles */
            double gd = 0, ud = 0, m = 0;
            for (int c = 0; c < cols; c++) {
              gd += wval(&W, wtype, (size_t)r * cols + c) * x[t * LDX + c];
              ud += wval(&W, wtype, (size_t)(rows + r) * cols + c) * x[t * LDX + c];
              m += fabs(wval(&W, wtype, (size_t)r * cols + c) * x[t * LDX + c]);
            }
            double sd = gd / (1 + exp(-gd)) * ud;
            CHECK_MSG(fabs(y[t * LDY + r] - sd) <= 1e-4 * (1 + m) * (1 + fabs(ud)),
                      "swiglu vs double: %g vs %g", y[t * LDY + r], sd);
          }
      }
  CHECK(!ctx->failed);
}

/* An ISA's kernels and the portable ones compute the same function to
 * rounding. */
static void test_isa_agree(const sc_kernels *A, const sc_kernels *P) {
  static Weights W;
  float x[MAXT * LDX], bias[MAXR];
  for (int i = 0; i < 2 * MAXR * MAXC; i++) {
    W.wf[i] = frand();
    W.wb[i] = to_bf16(W.wf[i]);
  }
  fill(x, MAXT * LDX);
  fill(bias, MAXR);
  for (int wt = 0; wt < 2; wt++)
    for (int cols = 1; cols <= MAXC; cols += 9) {
      int wtype = wt ? SC_W_BF16 : SC_W_F32, rows = 13;
      float ya[MAXT * LDY], yp[MAXT * LDY];
      const void *w = wptr(&W, wtype, 0, cols);
      A->linear(A->ctx, wtype, w, bias, x, LDX, ya, LDY, 3, rows, cols, 0);
      P->linear(P->ctx, wtype, w, bias, x, LDX, yp, LDY, 3, rows, cols, 0);
      /* one token (the one-row dots) with and without the software
       * prefetch (kernels.h sc_gemv_prefetch_on): the same bits */
      float g0[MAXR], g1[MAXR];
      const int pf = atomic_load(&sc_gemv_prefetch_on);
      A->linear(A->ctx, wtype, w, bias, x, LDX, g0, LDY, 1, rows, cols, 0);
      atomic_store(&sc_gemv_prefetch_on, !pf);
      A->linear(A->ctx, wtype, w, bias, x, LDX, g1, LDY, 1, rows, cols, 0);
      atomic_store(&sc_gemv_prefetch_on, pf);
      CHECK_MSG(!memcmp(g0, g1, sizeof(float) * rows), "%s prefetch %d vs %d: band %d cols %d", sc_kernels_isa(A), pf,
                !pf, wtype, cols);
      /* on, into the other cache (kernels.h sc_gemv_l2): the same bits */
      const int l2 = atomic_load(&sc_gemv_l2);
      atomic_store(&sc_gemv_prefetch_on, 1);
      atomic_store(&sc_gemv_l2, !l2);
      A->linear(A->ctx, wtype, w, bias, x, LDX, g1, LDY, 1, rows, cols, 0);
      atomic_store(&sc_gemv_l2, l2);
      atomic_store(&sc_gemv_prefetch_on, pf);
      CHECK_MSG(!memcmp(g0, g1, sizeof(float) * rows), "%s prefetch into L%d: band %d cols %d", sc_kernels_isa(A),
                2 - l2, wtype, cols);
      for (int t = 0; t < 3; t++)
        for (int r = 0; r < rows; r++) {
          double m = fabs(bias[r]);
          for (int c = 0; c < cols; c++)
            m += fabs(wval(&W, wtype, (size_t)r * cols + c) * x[t * LDX + c]);
          CHECK_MSG(fabs(ya[t * LDY + r] - yp[t * LDY + r]) <= 1e-5 * m,
                    "%s vs portable band %d cols %d: %g vs %g", sc_kernels_isa(A), wtype, cols,
                    ya[t * LDY + r], yp[t * LDY + r]);
        }
    }
}

/* ---- attention ---------------------------------------------------------- */

/* head_dim: 20 (columns past the last multiple of 8), 136 (16-column
 * steps, one 8-column step, values in 64 + 64 + 8 columns), 128 and 23
 * (columns past the last multiple of 4) */
enum { HEADS = 4, KVH = 2, HDMAX = 136, MAXPOS = 16 };
static int HD = 20;
#define LDQ (HEADS * HD + 3)
#define LDKV (KVH * HD + 5)
#define LDA (HEADS * HD + 1)

/* Keys and values by absolute position, of two sessions; the cache under
 * test is filled from them as the ring would be (row p % cap holds
 * position p). */
typedef float KvRows[MAXPOS][KVH * HDMAX];
static KvRows kpos, vpos, kpos_b, vpos_b;

static void ref_attention_kv(const float *q, int T, int pos, float scale, int window,
                             KvRows kpos, KvRows vpos, double *out /* [T][HEADS*HD] */) {
  for (int t = 0; t < T; t++) {
    int p = pos + t;
    int lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    for (int h = 0; h < HEADS; h++) {
      int kvh = h / (HEADS / KVH);
      double sc[MAXPOS], m = -INFINITY, sum = 0;
      for (int j = lo; j <= p; j++) {
        double d = 0;
        for (int i = 0; i < HD; i++)
          d += (double)q[t * LDQ + h * HD + i] * kpos[j][kvh * HD + i];
        sc[j] = d * scale;
        if (sc[j] > m) m = sc[j];
      }
      for (int j = lo; j <= p; j++) sum += sc[j] = exp(sc[j] - m);
      for (int i = 0; i < HD; i++) {
        double o = 0;
        for (int j = lo; j <= p; j++) o += sc[j] * vpos[j][kvh * HD + i];
        out[(t * HEADS + h) * HD + i] = o / sum;
      }
    }
  }
}

static void ref_attention(const float *q, int T, int pos, float scale, int window, double *out) {
  ref_attention_kv(q, T, pos, scale, window, kpos, vpos, out);
}

/* The ring of cap rows that a session with keys kp, vp up to position
 * last holds. */
static void fill_ring(float *kc, float *vc, int cap, int last, KvRows kp, KvRows vp) {
  for (int i = 0; i < cap * LDKV; i++) kc[i] = vc[i] = NAN; /* unwritten */
  for (int p = 0; p <= last; p++) {
    memcpy(kc + (p % cap) * LDKV, kp[p], KVH * HD * sizeof(float));
    memcpy(vc + (p % cap) * LDKV, vp[p], KVH * HD * sizeof(float));
  }
}

/* T <= MAXPOS queries from pos against the reference, and each, bit for
 * bit, against the same query alone (a prompt's rows against decode). */
static void check_attention(const sc_kernels *K, int T, int pos, int cap,
                            int window) {
  static float kc[MAXPOS * (KVH * HDMAX + 5)], vc[MAXPOS * (KVH * HDMAX + 5)];
  static float q[MAXPOS * (HEADS * HDMAX + 3)], y[MAXPOS * (HEADS * HDMAX + 1)], y1[HEADS * HDMAX + 1];
  static double ref[MAXPOS * HEADS * HDMAX];
  float scale = 1.0f / sqrtf((float)HD);
  fill(q, T * LDQ);
  fill_ring(kc, vc, cap, pos + T - 1, kpos, vpos);
  K->attention(K->ctx, q, LDQ, kc, vc, LDKV, cap, y, LDA, T, pos, NULL, NULL, HEADS, KVH,
               HD, scale, window);
  ref_attention(q, T, pos, scale, window, ref);
  int alone = 0;
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < HEADS * HD; i++)
      CHECK_MSG(fabs(y[t * LDA + i] - ref[t * HEADS * HD + i]) <= 1e-5,
                "%s attention T %d pos %d cap %d window %d t %d i %d: %g vs %g",
                sc_kernels_isa(K), T, pos, cap, window, t, i, y[t * LDA + i],
                ref[t * HEADS * HD + i]);
    K->attention(K->ctx, q + t * LDQ, LDQ, kc, vc, LDKV, cap, y1, LDA, 1, pos + t, NULL, NULL, HEADS, KVH, HD,
                 scale, window);
    alone += memcmp(y + t * LDA, y1, (size_t)HEADS * HD * sizeof *y1) != 0;
  }
  CHECK_MSG(!alone, "%s attention T %d pos %d cap %d window %d: %d rows differ from the same query alone",
            sc_kernels_isa(K), T, pos, cap, window, alone);
}

/* Rows placed one by one (sc_io.row_pos, row_state): three queries of two
 * sessions, out of order and at scattered positions, each in its own
 * session's ring (A's at kc, B's `off` bytes further), against the
 * reference and, bit for bit, against the same query alone on the usual
 * path. */
static void check_attention_rows(const sc_kernels *K, int cap, int window, int b_first, int b_last) {
  enum { RING = MAXPOS * (KVH * HDMAX + 5) };
  static float kc[2 * RING], vc[2 * RING];
  float q[3 * (HEADS * HDMAX + 3)], y[3 * (HEADS * HDMAX + 1)], y1[HEADS * HDMAX + 1];
  double ref[HEADS * HDMAX];
  const float scale = 1.0f / sqrtf((float)HD);
  const int row_pos[3] = {b_first, 4, b_last};
  const int in_b[3] = {1, 0, 1};
  const long long off = RING * (long long)sizeof(float);
  const long long row_state[3] = {off, 0, off};
  fill(q, 3 * LDQ);
  fill_ring(kc, vc, cap, 4, kpos, vpos);              /* session A: positions 0..4 */
  fill_ring(kc + RING, vc + RING, cap, b_first > b_last ? b_first : b_last, kpos_b, vpos_b); /* B */
  K->attention(K->ctx, q, LDQ, kc, vc, LDKV, cap, y, LDA, 3, 0, row_pos, row_state, HEADS, KVH, HD, scale,
               window);
  for (int t = 0; t < 3; t++) {
    const float *kt = in_b[t] ? kc + RING : kc, *vt = in_b[t] ? vc + RING : vc;
    K->attention(K->ctx, q + t * LDQ, LDQ, kt, vt, LDKV, cap, y1, LDA, 1, row_pos[t], NULL, NULL, HEADS, KVH, HD,
                 scale, window);
    ref_attention_kv(q + t * LDQ, 1, row_pos[t], scale, window, in_b[t] ? kpos_b : kpos, in_b[t] ? vpos_b : vpos,
                     ref);
    for (int i = 0; i < HEADS * HD; i++) {
      CHECK_MSG(fabs(y[t * LDA + i] - ref[i]) <= 1e-5, "%s attention, placed rows, cap %d window %d row %d i %d: "
                "%g vs %g", sc_kernels_isa(K), cap, window, t, i, y[t * LDA + i], ref[i]);
      CHECK_MSG(y[t * LDA + i] == y1[i], "%s attention, placed rows, cap %d window %d row %d i %d: %.9g, alone "
                "%.9g", sc_kernels_isa(K), cap, window, t, i, y[t * LDA + i], y1[i]);
    }
  }
}

static void test_attention(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static const int hds[] = {20, 136, 128, 23};
  for (int hi = 0; hi < 4; hi++) {
    HD = hds[hi];
    for (int p = 0; p < MAXPOS; p++) {
      fill(kpos[p], KVH * HD);
      fill(vpos[p], KVH * HD);
      for (int i = 0; i < KVH * HD; i++) kpos[p][i] *= 3 * 20.0f / HD; /* peakier softmax */
      fill(kpos_b[p], KVH * HD);
      fill(vpos_b[p], KVH * HD);
    }
    check_attention(K, 1, 0, 8, 0);   /* first token: y = v0 */
    check_attention(K, 1, 5, 8, 0);   /* decode, no window: four keys and two */
    check_attention(K, 3, 2, 8, 0);   /* prefill chunk, causal inside it */
    check_attention(K, 1, 5, 8, 3);   /* sliding window */
    check_attention(K, 3, 2, 8, 3);   /* window cuts inside the chunk */
    check_attention(K, 3, 6, 16, 3);
    check_attention(K, 1, 6, 4, 4);   /* ring: positions 3..6 in rows 3,0,1,2 */
    check_attention(K, 1, 13, 4, 4);  /* ring wrapped several times */
    check_attention(K, 2, 9, 5, 4);   /* ring, T=2: needs window+T-1 rows */
    check_attention(K, 3, 12, 16, 0); /* 13..15 keys: groups of four and a rest */
    check_attention(K, 1, 14, 7, 6);  /* a window across the ring's wrap */
    check_attention(K, 14, 1, 16, 0); /* a prompt: blocks of SC_ATTN_ROWS and a rest */
    check_attention(K, 11, 4, 16, 6); /* the window slides inside a block */
    check_attention(K, 9, 6, 12, 4);  /* ... across the ring's wrap */
    check_attention_rows(K, 16, 0, 9, 2);
    check_attention_rows(K, 16, 3, 9, 2);
    check_attention_rows(K, 6, 5, 8, 9); /* rings of different wraps */
    CHECK(!ctx->failed);
  }
  HD = 20;

  /* a span the ring no longer holds is an error, not stale data */
  float q[HEADS * 20 + 3] = {0}, kc[4 * (KVH * 20 + 5)] = {0}, y[HEADS * 20 + 1];
  K->attention(K->ctx, q, LDQ, kc, kc, LDKV, 4, y, LDA, 1, 6, NULL, NULL, HEADS, KVH, HD,
               1.0f, 0);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "exceed the cache rows (value 7)");
  sc_kernel_ctx_clear(ctx);
  /* window 4, T=2 at pos 9: the first query needs position 6, which the
   * second token's row overwrote in a 4-row ring */
  K->attention(K->ctx, q, LDQ, kc, kc, LDKV, 4, y, LDA, 2, 9, NULL, NULL, HEADS, KVH, HD,
               1.0f, 4);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "exceed the cache rows (value 5)");
  sc_kernel_ctx_clear(ctx);
  K->attention(K->ctx, q, LDQ, kc, kc, LDKV, 4, y, LDA, 1, 0, NULL, NULL, 3, 2, HD, 1.0f,
               0);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "multiple of kv_heads");
  sc_kernel_ctx_clear(ctx);
  /* placed rows: each is checked against its own keys */
  const int bad_pos[2] = {1, -3}, far_pos[2] = {1, 6};
  K->attention(K->ctx, q, LDQ, kc, kc, LDKV, 4, y, LDA, 2, 0, bad_pos, NULL, HEADS, KVH, HD, 1.0f, 0);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "position is negative (value -3)");
  sc_kernel_ctx_clear(ctx);
  K->attention(K->ctx, q, LDQ, kc, kc, LDKV, 4, y, LDA, 2, 0, far_pos, NULL, HEADS, KVH, HD, 1.0f, 0);
  CHECK(ctx->failed);
  CHECK_CONTAINS(ctx->err, "exceed the cache rows (value 7)");
  sc_kernel_ctx_clear(ctx);
}


/* ---- blocked GEMM ------------------------------------------------------- */

enum { GR = 67, GC = 1088, GT = 70, GLDX = GC + 3, GLDY = 2 * GR + 1 };

/* A matrix of 2*GR rows x cols in band wtype, from uniform floats. */
static void make_band(int wtype, int cols, unsigned char *w) {
  float row[GC];
  const size_t rb = sc_band_row_bytes(wtype, cols);
  for (int r = 0; r < 2 * GR; r++) {
    fill(row, cols);
    unsigned char *dst = w + rb * r;
    if (wtype == SC_W_F32) memcpy(dst, row, rb);
    else if (wtype == SC_W_BF16)
      for (int c = 0; c < cols; c++) {
        uint16_t h = to_bf16(row[c]);
        memcpy(dst + 2 * c, &h, 2);
      }
    else if (wtype == SC_W_Q8_0) { /* GGML's blocks, then the CPU's groups (kernels.h) */
      unsigned char ggml[GC / 32 * SC_Q8_0_BLOCK];
      sc_quantize_row_q8_0(row, cols, ggml);
      sc_pack_row_q8_0(ggml, cols, dst);
    } else {
      unsigned char ggml[GC / 32 * SC_Q4_0_BLOCK];
      sc_quantize_row_q4_0(row, cols, ggml);
      sc_pack_row_q4_0(ggml, cols, dst);
    }
  }
}

static const int gbands[] = {SC_W_F32, SC_W_BF16, SC_W_Q8_0, SC_W_Q4_0};

/* linear / linear_swiglu with T tokens against T calls of one token: the
 * same bits (f32 with T >= 16 goes through OpenBLAS: rounding only). */
static void test_gemm_linear(const sc_kernels *K, sc_kernel_ctx *ctx) {
  static unsigned char w[2 * GR * GC * 4];
  static float x[GT * GLDX], bias[GR], y0[GT * GLDY], y[GT * GLDY], y1[GLDY];
  /* q4_0: tail blocks only, one whole group, two groups and a tail */
  /* 1061 / 1056: past an AVX2 f32/bf16 segment of 1024 columns, through
   * the driver's laid-out activations (gemm_x_order) */
  static const int fcols[] = {37, 100, 136, 224, 1061}, qcols[] = {32, 160, 256, 544, 1056};
  /* 67: 17 blocks of four rows, more than one run of blocks that a short
   * run of tokens meets (kernels.c, GEMM_GROUP) */
  static const int rowss[] = {1, 2, 3, 5, 7, 8, 9, 67};
  fill(x, GT * GLDX);
  fill(bias, GR);
  fill(y0, GT * GLDY);
  for (int bi = 0; bi < 4; bi++) {
    const int wtype = gbands[bi];
    for (int ci = 0; ci < 5; ci++) {
      const int cols = wtype == SC_W_F32 || wtype == SC_W_BF16 ? fcols[ci] : qcols[ci];
      const size_t rb = sc_band_row_bytes(wtype, cols);
      make_band(wtype, cols, w);
      for (int ri = 0; ri < (int)(sizeof rowss / sizeof *rowss); ri++)
        for (int T = 1; T <= GT; T = T < 9 ? T + 1 : T == 9 ? GT : GT + 1) {
          const int rows = rowss[ri], acc = (T + ri) & 1, swiglu = ci == 1;
          const int blas = wtype == SC_W_F32 && T >= 16 &&
                           strcmp(sc_kernels_isa(K), "portable") != 0;
          memcpy(y, y0, sizeof y);
          if (swiglu) K->linear_swiglu(K->ctx, wtype, w, x, GLDX, y, GLDY, T, rows, cols);
          else K->linear(K->ctx, wtype, w, bias, x, GLDX, y, GLDY, T, rows, cols, acc);
          for (int t = 0; t < T; t++) {
            memcpy(y1, y0 + t * GLDY, sizeof y1);
            if (swiglu) K->linear_swiglu(K->ctx, wtype, w, x + t * GLDX, GLDX, y1, GLDY, 1, rows, cols);
            else K->linear(K->ctx, wtype, w, bias, x + t * GLDX, GLDX, y1, GLDY, 1, rows, cols, acc);
            for (int r = 0; r < rows; r++) {
              const float a = y[t * GLDY + r], b = y1[r];
              if (blas) {
                double m = 1.0; /* |y0| + |bias| + sum |w x|, loosely */
                for (int c = 0; c < cols; c++) m += fabs(((const float *)w)[(size_t)r * cols + c] * x[t * GLDX + c]);
                if (swiglu) m *= 1.0 + fabs(b);
                CHECK_MSG(fabs(a - b) <= 2e-6 * m, "%s blas T=%d vs T=1: cols %d rows %d t %d r %d: %.9g vs %.9g",
                          sc_kernels_isa(K), T, cols, rows, t, r, a, b);
              } else
                CHECK_MSG(same_bits(a, b), "%s gemm band %d T=%d vs T=1: cols %d rows %d t %d r %d%s: %.9g vs %.9g",
                          sc_kernels_isa(K), wtype, T, cols, rows, t, r, swiglu ? " swiglu" : "", a, b);
            }
            for (int r = rows; r < GLDY; r++) /* nothing else written */
              CHECK(same_bits(y[t * GLDY + r], y0[t * GLDY + r]));
          }
          (void)rb;
        }
    }
  }
  CHECK(!ctx->failed);
}

/* The ops' gemm hooks directly: every element the bits of dot1; with
 * gemm_x_order, the _ordered f32 / bf16 GEMMs on tokens it laid out too. */
static void test_gemm_hooks(const sc_kern_ops *ops) {
  static unsigned char w[2 * GR * GC * 4];
  static float x[GT * GLDX], xo[GT * GLDX], out[GT * 4];
  static int8_t xq[GT * GC];
  static float xd[GT * GC / 32];
  static unsigned char xp[GT * GC * 2];
  /* f32 531 and 1061: past the tiles' column segments (256 NEON, 512
   * AVX-512, 1024 AVX2), 1061 also into the 8-column and scalar tails;
   * q4_0 480: a group and a tail of seven blocks */
  static const int fcols[] = {3, 37, 136, 224, 531, 1061}, qcols[] = {32, 288, 256, 544, 480, 1056};
  CHECK(ops->gemm_f32 && ops->gemm_bf16 && ops->gemm_q8_0 && ops->gemm_q4_0);
  const int ordered = ops->gemm_x_order != NULL; /* all three or none */
  CHECK(!ops->gemm_f32_ordered == !ordered && !ops->gemm_bf16_ordered == !ordered);
  fill(x, GT * GLDX);
  for (int bi = 0; bi < 4; bi++) {
    const int wtype = gbands[bi];
    const int quant = wtype == SC_W_Q8_0 || wtype == SC_W_Q4_0;
    for (int ci = 0; ci < 6; ci++) {
      const int cols = quant ? qcols[ci] : fcols[ci], nb = cols / 32;
      const size_t rb = sc_band_row_bytes(wtype, cols);
      make_band(wtype, cols, w);
      if (quant)
        for (int t = 0; t < GT; t++)
          ops->quantize_q8(x + t * GLDX, nb, xq + t * cols, xd + t * nb, xp + (size_t)t * cols * 2);
      if (ordered && !quant)
        for (int t = 0; t < GT; t++) ops->gemm_x_order(x + t * GLDX, cols, xo + t * GLDX);
      /* nt 63-65 and 68: up to and past the 64 tokens an AVX2 f32/bf16 call
       * keeps at once */
      for (int ord = 0; ord <= (ordered && !quant); ord++)
      for (int nr = 1; nr <= 4; nr++)
        for (int nt = 1; nt <= GT; nt = nt < 17 ? nt + 1 : nt == 17 ? 26 : nt >= 62 && nt < 65 ? nt + 1 : nt + 3) {
          memset(out, 0xff, sizeof out);
          if (wtype == SC_W_F32 && ord) ops->gemm_f32_ordered((const float *)w, nr, xo, GLDX, nt, cols, out, 4);
          else if (wtype == SC_W_F32) ops->gemm_f32((const float *)w, nr, x, GLDX, nt, cols, out, 4);
          else if (wtype == SC_W_BF16 && ord)
            ops->gemm_bf16_ordered((const uint16_t *)w, nr, xo, GLDX, nt, cols, out, 4);
          else if (wtype == SC_W_BF16) ops->gemm_bf16((const uint16_t *)w, nr, x, GLDX, nt, cols, out, 4);
          else if (wtype == SC_W_Q8_0) ops->gemm_q8_0(w, rb, nr, xq, xd, xp, nb, nt, out, 4);
          else ops->gemm_q4_0(w, rb, nr, xq, xd, xp, nb, nt, out, 4);
          for (int t = 0; t < nt; t++)
            for (int r = 0; r < nr; r++) {
              float d;
              if (wtype == SC_W_F32) ops->dot1_f32((const float *)w + (size_t)r * cols, x + t * GLDX, cols, &d);
              else if (wtype == SC_W_BF16) ops->dot1_bf16((const uint16_t *)w + (size_t)r * cols, x + t * GLDX, cols, &d);
              else if (wtype == SC_W_Q8_0)
                ops->dot1_q8_0(w + r * rb, rb, xq + t * cols, xd + t * nb, xp + (size_t)t * cols * 2, nb, &d);
              else ops->dot1_q4_0(w + r * rb, rb, xq + t * cols, xd + t * nb, xp + (size_t)t * cols * 2, nb, &d);
              CHECK_MSG(same_bits(out[t * 4 + r], d),
                        "%s gemm hook band %d%s cols %d nr %d nt %d t %d r %d: %.9g vs %.9g", ops->name, wtype,
                        ord ? " ordered" : "", cols, nr, nt, t, r, out[t * 4 + r], d);
            }
          for (int t = nt; t < GT; t++) /* nothing past nt tokens */
            for (int r = 0; r < 4; r++) CHECK(out[t * 4 + r] != out[t * 4 + r]);
        }
    }
  }
}

/* q8_0 rows in the CPU's groups (kernels.h): the packer against the
 * layout's definition and its inverse, and the ops' q8_0 dots against a
 * double reference (dot4 == dot1 bit for bit; every GEMM element against
 * dot1: test_gemm_hooks), the AVX-512 tables with the avx2 table's bits. */
static void test_q8_0_groups(const sc_kern_ops *ops) {
  static unsigned char ggml[4 * GC / 32 * SC_Q8_0_BLOCK], w[4 * GC / 32 * SC_Q8_0_BLOCK], back[GC / 32 * SC_Q8_0_BLOCK];
  static float x[GT * GLDX], row[GC];
  static int8_t xq[GT * GC];
  static float xd[GT * GC / 32];
  static unsigned char xp[GT * GC * 2];
  /* no whole group; one; one and a tail of one; two and a tail; one and seven */
  static const int qcols[] = {96, 256, 288, 544, 480};
  const sc_kern_ops *a2 = sc_kern_ops_isa("avx2");
  fill(x, GT * GLDX);
  for (int ci = 0; ci < 5; ci++) {
    const int cols = qcols[ci], nb = cols / 32, ng = nb / 8;
    const size_t rb = sc_band_row_bytes(SC_W_Q8_0, cols);
    for (int r = 0; r < 4; r++) {
      fill(row, cols);
      unsigned char *g = ggml + r * rb;
      sc_quantize_row_q8_0(row, cols, g);
      for (int b = r; b < nb; b += 3) g[b * SC_Q8_0_BLOCK + 2 + (b * 7 + r) % 32] = 0x80; /* -128: GGML never writes it, a file may */
      sc_pack_row_q8_0(g, cols, w + r * rb);
      /* the layout as kernels.h defines it */
      for (int b = 0; b < nb; b++)
        for (int e = 0; e < 32; e++) {
          const unsigned char want = g[b * SC_Q8_0_BLOCK + 2 + e];
          const unsigned char *wr = w + r * rb;
          const unsigned char got = b < 8 * ng ? wr[(b / 8) * SC_Q8_GROUP_BYTES + 16 + 32 * (e / 4) + 4 * (b % 8) + e % 4]
                                               : wr[b * SC_Q8_0_BLOCK + 2 + e];
          CHECK_MSG(got == want, "q8_0 pack: cols %d block %d element %d", cols, b, e);
        }
      for (int b = 0; b < nb; b++) {
        const unsigned char *d = b < 8 * ng ? w + r * rb + (b / 8) * SC_Q8_GROUP_BYTES + 2 * (b % 8)
                                            : w + r * rb + b * SC_Q8_0_BLOCK;
        CHECK(!memcmp(d, g + b * SC_Q8_0_BLOCK, 2));
      }
      sc_unpack_row_q8_0(w + r * rb, cols, back);
      CHECK(!memcmp(back, g, rb));
    }
    for (int t = 0; t < GT; t++)
      ops->quantize_q8(x + t * GLDX, nb, xq + t * cols, xd + t * nb, xp + (size_t)t * cols * 2);
    for (int t = 0; t < GT; t++) {
      float d4[4];
      const size_t xo = (size_t)t * cols * 2;
      ops->dot4_q8_0(w, rb, xq + t * cols, xd + t * nb, xp + xo, nb, d4);
      /* the software prefetch (kernels.h sc_gemv_prefetch_on) leaves the bits */
      float p4[4];
      const int pf = atomic_load(&sc_gemv_prefetch_on);
      atomic_store(&sc_gemv_prefetch_on, !pf);
      ops->dot4_q8_0(w, rb, xq + t * cols, xd + t * nb, xp + xo, nb, p4);
      atomic_store(&sc_gemv_prefetch_on, pf);
      for (int r = 0; r < 4; r++)
        CHECK_MSG(same_bits(d4[r], p4[r]), "%s q8_0 prefetch %d vs %d: cols %d t %d r %d", ops->name, pf, !pf,
                  cols, t, r);
      const int l2 = atomic_load(&sc_gemv_l2); /* on, into the other cache */
      atomic_store(&sc_gemv_prefetch_on, 1);
      atomic_store(&sc_gemv_l2, !l2);
      ops->dot4_q8_0(w, rb, xq + t * cols, xd + t * nb, xp + xo, nb, p4);
      atomic_store(&sc_gemv_l2, l2);
      atomic_store(&sc_gemv_prefetch_on, pf);
      for (int r = 0; r < 4; r++)
        CHECK_MSG(same_bits(d4[r], p4[r]), "%s q8_0 prefetch into L%d: cols %d t %d r %d", ops->name, 2 - l2, cols,
                  t, r);
      for (int r = 0; r < 4; r++) {
        const unsigned char *g = ggml + r * rb;
        double ref = 0, mag = 0;
        for (int b = 0; b < nb; b++) {
          long sum = 0;
          for (int e = 0; e < 32; e++) sum += (long)(int8_t)g[b * SC_Q8_0_BLOCK + 2 + e] * xq[t * cols + 32 * b + e];
          uint16_t h;
          memcpy(&h, g + b * SC_Q8_0_BLOCK, 2);
          const double term = (double)sc_f16_to_f32(h) * xd[t * nb + b] * (double)sum;
          ref += term;
          mag += fabs(term);
        }
        float d1;
        const unsigned char *wr = w + r * rb;
        ops->dot1_q8_0(wr, rb, xq + t * cols, xd + t * nb, xp + xo, nb, &d1);
        CHECK_MSG(same_bits(d4[r], d1), "%s q8_0 dot4 vs dot1: cols %d t %d r %d", ops->name, cols, t, r);
        CHECK_MSG(fabs(d1 - ref) <= 1e-6 * mag + 1e-30, "%s q8_0 cols %d t %d r %d: %.9g vs %.9g (of %.3g)",
                  ops->name, cols, t, r, d1, ref, mag);
        if (a2 && !strncmp(ops->name, "avx512", 6)) { /* the AVX-512 tables keep the avx2 table's float steps */
          float d2;
          a2->dot1_q8_0(wr, rb, xq + t * cols, xd + t * nb, xp + xo, nb, &d2);
          CHECK_MSG(same_bits(d1, d2), "%s q8_0 vs avx2: cols %d t %d r %d: %.9g vs %.9g", ops->name, cols, t, r, d1, d2);
        }
      }
    }
  }
}

/* f32 prefill through OpenBLAS: against the portable kernels to rounding,
 * past one 64-row panel, and the same bits with and without a pool. */
static void test_gemm_blas(const sc_kernels *A, const sc_kernels *P) {
  enum { R = 150, C = 72, T = 24, LD = 2 * R };
  static float w[2 * R * C], x[T * C], bias[R], ya[T * LD], yp[T * LD], yt[T * LD];
  for (int i = 0; i < 2 * R * C; i++) w[i] = frand();
  fill(x, T * C);
  fill(bias, R);
  sc_kernel_ctx pooled = {0};
  pooled.pool = sc_pool_new(2);
  sc_kernels A2;
  sc_kernels_init(&A2, &pooled);
  for (int swiglu = 0; swiglu < 2; swiglu++) {
    if (swiglu) {
      A->linear_swiglu(A->ctx, SC_W_F32, w, x, C, ya, LD, T, R, C);
      P->linear_swiglu(P->ctx, SC_W_F32, w, x, C, yp, LD, T, R, C);
      A2.linear_swiglu(A2.ctx, SC_W_F32, w, x, C, yt, LD, T, R, C);
    } else {
      A->linear(A->ctx, SC_W_F32, w, bias, x, C, ya, LD, T, R, C, 0);
      P->linear(P->ctx, SC_W_F32, w, bias, x, C, yp, LD, T, R, C, 0);
      A2.linear(A2.ctx, SC_W_F32, w, bias, x, C, yt, LD, T, R, C, 0);
    }
    for (int t = 0; t < T; t++)
      for (int r = 0; r < R; r++) {
        double m = fabs(bias[r]);
        for (int c = 0; c < C; c++) m += fabs(w[r * C + c] * x[t * C + c]);
        if (swiglu) m *= 1.0 + fabs(yp[t * LD + r]);
        CHECK_MSG(fabs(ya[t * LD + r] - yp[t * LD + r]) <= 1e-5 * m, "blas%s vs portable t %d r %d: %.9g vs %.9g",
                  swiglu ? " swiglu" : "", t, r, ya[t * LD + r], yp[t * LD + r]);
        CHECK_MSG(same_bits(ya[t * LD + r], yt[t * LD + r]), "blas 1 vs 2 threads t %d r %d", t, r);
      }
  }
  CHECK(!pooled.failed);
  sc_pool_free(pooled.pool);
  sc_kernel_ctx_free(&pooled);
}

/* x rounded to bf16, to nearest even, as the AMX path rounds it. */
static double bf16_rne(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  u &= 0xffff0000u;
  float r;
  memcpy(&r, &u, 4);
  return r;
}

/* bf16 weights meeting bf16 activations (kernels.h) on one engine
 * (SC_BF16ACT_AMX or _DP; where it does not run here, the f32-activation
 * fallback), for whole 32-column rows; tol: of the magnitude sum. */
static void test_bf16_act_engine(const sc_kernels *K0, int engine, double tol) {
  enum { C = 96, LDX = C + 8, MAXRR = 80, MAXT = 70, LD = MAXRR + 5 };
  static uint16_t w[MAXRR * C];
  static float wf[MAXRR * C], x[MAXT * LDX], bias[MAXRR], y0[MAXT * LD], ya[MAXT * LD], yb[MAXT * LD],
      yc[MAXT * LD];
  for (int i = 0; i < MAXRR * C; i++) w[i] = to_bf16(frand());
  for (int i = 0; i < MAXRR * C; i++) wf[i] = (float)bf16_val(w[i]);
  fill(x, MAXT * LDX);
  fill(bias, MAXRR);
  fill(y0, MAXT * LD);
  const int amx = sc_bf16act_engine(engine) == engine; /* the engine runs */
  printf("bf16 activations: %s %s\n", engine == SC_BF16ACT_AMX ? "AMX" : "AVX512-BF16",
         amx ? "runs here" : "does not run here (checking the fallback)");
  sc_kernel_ctx c1 = {.bf16_act = engine}, c2 = {.bf16_act = engine}, c0 = {0};
  c2.pool = sc_pool_new(2);
  sc_kernels K1, K2, Kf;
  CHECK(sc_kernels_init_isa(&K1, &c1, sc_kernels_isa(K0)) == 0);
  CHECK(sc_kernels_init_isa(&K2, &c2, sc_kernels_isa(K0)) == 0);
  CHECK(sc_kernels_init_isa(&Kf, &c0, sc_kernels_isa(K0)) == 0);
  const int shapes[][2] = {{64, 32}, {80, 70}, {48, 16}, {17, 33}, {33, 47}, {16, 64}, {1, 40}, {5, 17}, {64, 1}, {40, 3}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
    for (int combo = 0; combo < 4; combo++) { /* bias and accumulate, each with and without the other */
      const int R = shapes[s][0], T = shapes[s][1], acc = combo & 1;
      const float *b = combo & 2 ? bias : NULL;
      memcpy(ya, y0, sizeof ya);
      memcpy(yb, y0, sizeof yb);
      memcpy(yc, y0, sizeof yc);
      K1.linear(K1.ctx, SC_W_BF16, w, b, x, LDX, ya, LD, T, R, C, acc);
      K2.linear(K2.ctx, SC_W_BF16, w, b, x, LDX, yb, LD, T, R, C, acc);
      Kf.linear(Kf.ctx, SC_W_BF16, w, b, x, LDX, yc, LD, T, R, C, acc);
      for (int t = 0; t < MAXT; t++)
        for (int r = 0; r < LD; r++) {
          const int i = t * LD + r;
          if (t >= T || r >= R) { /* nothing outside [T, R] is written */
            CHECK(same_bits(ya[i], y0[i]) && same_bits(yb[i], y0[i]));
            continue;
          }
          CHECK_MSG(same_bits(ya[i], yb[i]), "bf16_act R %d T %d: 1 vs 2 threads t %d r %d", R, T, t, r);
          if (r == 0) { /* token t alone gives the bits it has in the call */
            float y1[MAXRR];
            memcpy(y1, y0 + t * LD, sizeof y1);
            K1.linear(K1.ctx, SC_W_BF16, w, b, x + t * LDX, LDX, y1, LD, 1, R, C, acc);
            for (int rr = 0; rr < R; rr++)
              CHECK_MSG(same_bits(y1[rr], ya[t * LD + rr]), "bf16_act R %d T %d: token %d alone, row %d", R, T, t, rr);
          }
          if (!amx) {
            CHECK_MSG(same_bits(ya[i], yc[i]), "bf16_act %d not running R %d T %d t %d r %d", engine, R, T, t,
                    r);
            continue;
          }
          double ref = b ? b[r] : 0, mag = fabs(ref);
          for (int k = 0; k < C; k++) {
            const double p = (double)wf[r * C + k] * bf16_rne(x[t * LDX + k]);
            ref += p;
            mag += fabs(p);
          }
          if (acc) ref += y0[i], mag += fabs(y0[i]);
          CHECK_MSG(fabs(ya[i] - ref) <= tol * mag, "bf16_act %d R %d T %d acc %d t %d r %d: %.9g vs %.9g", engine,
                    R, T, acc, t, r, ya[i], ref);
        }
    }
  CHECK(!c1.failed && !c2.failed && !c0.failed);
  sc_pool_free(c2.pool);
  sc_kernel_ctx_free(&c1);
  sc_kernel_ctx_free(&c2);
  sc_kernel_ctx_free(&c0);
}

/* An LM's prefill (bf16_act_min_t): calls of fewer tokens, and rowwise
 * calls, keep the f32 activations' bits; longer ones, linear and
 * linear_swiglu (past one SwiGLU pass of 128 tokens too), agree with
 * bf16-rounded activations in double within tol, on 1 and 2 threads alike. */
static void test_bf16_act_prefill(const sc_kernels *K0, int engine, double tol) {
  enum { C = 64, R = 40, MAXT = 150, LDX = C + 4, LD = R + 3 };
  static uint16_t w[2 * R * C];
  static float wf[2 * R * C], x[MAXT * LDX], ya[MAXT * LD], yb[MAXT * LD], yf[MAXT * LD], yr[MAXT * LD];
  for (int i = 0; i < 2 * R * C; i++) w[i] = to_bf16(frand()), wf[i] = (float)bf16_val(w[i]);
  fill(x, MAXT * LDX);
  const int runs = sc_bf16act_engine(engine) == engine;
  sc_kernel_ctx c1 = {.bf16_act = engine, .bf16_act_min_t = 16}, c0 = {0};
  sc_kernel_ctx c2 = c1, cr = c1;
  c2.pool = sc_pool_new(2);
  cr.rowwise = 1;
  sc_kernels K1, K2, Kf, Kr;
  CHECK(sc_kernels_init_isa(&K1, &c1, sc_kernels_isa(K0)) == 0);
  CHECK(sc_kernels_init_isa(&K2, &c2, sc_kernels_isa(K0)) == 0);
  CHECK(sc_kernels_init_isa(&Kf, &c0, sc_kernels_isa(K0)) == 0);
  CHECK(sc_kernels_init_isa(&Kr, &cr, sc_kernels_isa(K0)) == 0);
  const int Ts[] = {1, 15, 16, 40, 150};
  for (size_t k = 0; k < sizeof Ts / sizeof *Ts; k++)
    for (int swiglu = 0; swiglu < 2; swiglu++) {
      const int T = Ts[k];
      memset(ya, 0, sizeof ya), memset(yb, 0, sizeof yb), memset(yf, 0, sizeof yf), memset(yr, 0, sizeof yr);
      if (swiglu) {
        K1.linear_swiglu(K1.ctx, SC_W_BF16, w, x, LDX, ya, LD, T, R, C);
        K2.linear_swiglu(K2.ctx, SC_W_BF16, w, x, LDX, yb, LD, T, R, C);
        Kf.linear_swiglu(Kf.ctx, SC_W_BF16, w, x, LDX, yf, LD, T, R, C);
        Kr.linear_swiglu(Kr.ctx, SC_W_BF16, w, x, LDX, yr, LD, T, R, C);
      } else {
        K1.linear(K1.ctx, SC_W_BF16, w, NULL, x, LDX, ya, LD, T, R, C, 0);
        K2.linear(K2.ctx, SC_W_BF16, w, NULL, x, LDX, yb, LD, T, R, C, 0);
        Kf.linear(Kf.ctx, SC_W_BF16, w, NULL, x, LDX, yf, LD, T, R, C, 0);
        Kr.linear(Kr.ctx, SC_W_BF16, w, NULL, x, LDX, yr, LD, T, R, C, 0);
      }
      CHECK_MSG(!memcmp(ya, yb, sizeof ya), "bf16 prefill T %d swiglu %d: 1 vs 2 threads", T, swiglu);
      CHECK_MSG(!memcmp(yr, yf, sizeof yr), "bf16 prefill T %d swiglu %d: a rowwise call left f32", T, swiglu);
      if (T < 16 || !runs) {
        CHECK_MSG(!memcmp(ya, yf, sizeof ya), "bf16 prefill T %d swiglu %d: not the f32 activations' bits", T,
                  swiglu);
        continue;
      }
      int differs = 0;
      for (int t = 0; t < T; t++)
        for (int r = 0; r < R; r++) {
          double g = 0, u = 0, mg = 0, mu = 0;
          for (int i = 0; i < C; i++) {
            const double xv = bf16_rne(x[t * LDX + i]);
            g += wf[r * C + i] * xv, mg += fabs(wf[r * C + i] * xv);
            u += wf[(R + r) * C + i] * xv, mu += fabs(wf[(R + r) * C + i] * xv);
          }
          const float got = ya[t * LD + r];
          differs |= !same_bits(got, yf[t * LD + r]);
          if (!swiglu) {
            CHECK_MSG(fabs(got - g) <= tol * mg, "bf16 prefill T %d t %d r %d: %.9g vs %.9g", T, t, r, got, g);
          } else {
            const double sg = g / (1 + exp(-g)), ref = sg * u;
            /* silu's slope is at most 1.1: each factor's error, times the other */
            const double bound = tol * (1.1 * mg * fabs(u) + fabs(sg) * mu) + 1e-6 * fabs(ref);
            CHECK_MSG(fabs(got - ref) <= bound, "bf16 prefill swiglu T %d t %d r %d: %.9g vs %.9g", T, t, r, got,
                      ref);
          }
        }
      CHECK_MSG(differs, "bf16 prefill T %d swiglu %d: the bf16 engine did not run", T, swiglu);
    }
  CHECK(!c1.failed && !c2.failed && !c0.failed && !cr.failed);
  sc_pool_free(c2.pool);
  sc_kernel_ctx_free(&c1);
  sc_kernel_ctx_free(&c2);
  sc_kernel_ctx_free(&c0);
  sc_kernel_ctx_free(&cr);
}

static void test_bf16_act(const sc_kernels *K0) {
  /* AMX sums pairs then 32-column blocks; vdpbf16ps one chain of 48 pairs
   * here (C = 96): its bound is C roundings of 2^-24 of the magnitude */
  test_bf16_act_engine(K0, SC_BF16ACT_AMX, 2e-6);
  test_bf16_act_engine(K0, SC_BF16ACT_DP, 96 * 0x1p-24);
  test_bf16_act_prefill(K0, SC_BF16ACT_AMX, 2e-6);
  test_bf16_act_prefill(K0, SC_BF16ACT_DP, 64 * 0x1p-24);
  /* the default takes AMX where it runs, else AVX512-BF16 */
  const int best = sc_bf16act_engine(SC_BF16ACT_BEST);
  CHECK(best == (sc_amx_usable() ? SC_BF16ACT_AMX : sc_bf16dp_usable() ? SC_BF16ACT_DP : SC_BF16ACT_OFF));
  CHECK(sc_bf16act_engine(SC_BF16ACT_OFF) == SC_BF16ACT_OFF);
}

/* sc_kernels.conv1d against IM2COL + linear() in the same pieces. */
static void test_conv1d(const sc_kernels *K0) {
  enum { C = 64, KS = 3, D = 2, O = 40, R1 = 37, R2 = 50, S = (KS - 1) * D, KC = KS * C, LDXC = C + 3 };
  static float wf[O * KC], x[(R1 + R2) * LDXC], bias[O], col[(R1 + R2) * KC], ya[(R1 + R2) * O],
      yb[(R1 + R2) * O], sa[S * C], sb[S * C];
  static uint16_t wb[O * KC];
  for (int i = 0; i < O * KC; i++) wb[i] = to_bf16(frand()), wf[i] = (float)bf16_val(wb[i]);
  fill(x, (R1 + R2) * LDXC);
  fill(bias, O);
  for (int band = 0; band < 2; band++)
    for (int piece = 8; piece <= 32; piece += 24) {
      const int wt = band ? SC_W_BF16 : SC_W_F32;
      const void *w = band ? (const void *)wb : (const void *)wf;
      sc_kernel_ctx c = {.bf16_act = 1};
      sc_kernels K;
      CHECK(sc_kernels_init_isa(&K, &c, sc_kernels_isa(K0)) == 0);
      memset(sa, 0, sizeof sa);
      memset(sb, 0, sizeof sb);
      const int part[2][2] = {{0, R1}, {R1, R2}};
      for (int q = 0; q < 2; q++) {
        const int at = part[q][0], R = part[q][1];
        K.conv1d(K.ctx, wt, w, bias, x + at * LDXC, LDXC, sa, col, piece, ya + at * O, O, R, C, KS, D, O);
        for (int r0 = 0; r0 < R;) {
          const int nr = R - r0 < 2 * piece ? R - r0 : piece;
          K.im2col(K.ctx, x + (at + r0) * LDXC, LDXC, sb, col, KC, nr, C, KS, D);
          K.linear(K.ctx, wt, w, bias, col, KC, yb + (at + r0) * O, O, nr, O, KC, 0);
          r0 += nr;
        }
      }
      CHECK_MSG(!memcmp(ya, yb, sizeof ya), "conv1d band %d piece %d: not the bits of im2col + linear", band, piece);
      CHECK_MSG(!memcmp(sa, sb, sizeof sa), "conv1d band %d piece %d: state", band, piece);
      CHECK(!c.failed);
      /* and near the double reference of the conv (bf16 activations on AMX) */
      double worst = 0;
      for (int t = 0; t < R1 + R2; t++)
        for (int o = 0; o < O; o++) {
          double ref = bias[o], mag = fabs(bias[o]);
          for (int j = 0; j < KS; j++) {
            const int src = t + j * D - S; /* row of x; before 0: the zero state */
            if (src < 0) continue;
            for (int ch = 0; ch < C; ch++) {
              const double p = (double)wf[o * KC + j * C + ch] * x[src * LDXC + ch];
              ref += p;
              mag += fabs(p);
            }
          }
          const double e = fabs(ya[t * O + o] - ref) / mag;
          if (e > worst) worst = e;
        }
      CHECK_MSG(worst < 1e-2, "conv1d band %d piece %d: %g off the reference", band, piece, worst);
      sc_kernel_ctx_free(&c);
    }
  sc_kernel_ctx c = {0};
  sc_kernels K;
  CHECK(sc_kernels_init_isa(&K, &c, sc_kernels_isa(K0)) == 0);
  K.conv1d(K.ctx, SC_W_F32, wf, bias, x, LDXC, sa, col, 0, ya, O, 4, C, KS, D, O);
  CHECK(c.failed && strstr(c.err, "conv1d: the piece"));
  sc_kernel_ctx_free(&c);
}

static void test_table(const sc_kernels *K, void *ctx) {
  CHECK(K->abi_version == SC_ABI_VERSION);
  CHECK(K->ctx == ctx);
  float e1 = 1.0f;
  sc_expf_n(&e1, &e1, 1);
  CHECK(K->expf(1.0f) == e1 && fabsf(e1 - 2.71828183f) <= 2.4e-7f);
  /* silu: the bits of the generated code's scalar map over K->expf, rows
   * with their own strides, longer than one piece, and in place */
  enum { SR = 3, SC = 300, SLX = 311, SLY = 305 };
  static float sx[SR * SLX], sy[SR * SLY];
  for (int i = 0; i < SR * SLX; i++) sx[i] = 30.0f * frand();
  sx[0] = 100.0f, sx[1] = -100.0f, sx[2] = 0.0f, sx[3] = -0.0f;
  K->silu(K->ctx, sx, SLX, sy, SLY, SR, SC);
  int sbad = 0;
  for (int t = 0; t < SR; t++)
    for (int c = 0; c < SC; c++) {
      const float a = sx[t * SLX + c], want = a / (1.0f + K->expf(-a));
      sbad += memcmp(&want, &sy[t * SLY + c], 4) != 0;
    }
  CHECK_MSG(!sbad, "silu: %d of %d values differ from x / (1 + expf(-x))", sbad, SR * SC);
  memcpy(sy, sx, sizeof sy < sizeof sx ? sizeof sy : sizeof sx);
  K->silu(K->ctx, sy, SLX, sy, SLX, 1, SC);
  sbad = 0;
  for (int c = 0; c < SC; c++) {
    const float a = sx[c], want = a / (1.0f + K->expf(-a));
    sbad += memcmp(&want, &sy[c], 4) != 0;
  }
  CHECK_MSG(!sbad, "silu in place: %d values differ", sbad);
  CHECK(K->sqrtf(2.0f) == sqrtf(2.0f));
  CHECK(K->logf(3.0f) == logf(3.0f));
  CHECK(K->erff(0.5f) == erff(0.5f));
  sc_kernel_ctx *c = ctx;
  K->error(ctx, "first", 1);
  K->error(ctx, "second", 2);
  CHECK(c->failed);
  CHECK(strcmp(c->err, "first (value 1)") == 0);
  sc_kernel_ctx_clear(c);
  CHECK(!c->failed && c->err[0] == '\0');
}

/* Score rows longer than ATTN_STACK_KEYS (2048, kernels.c) go to the
 * context's scratch, one row per chunk of the pool (a prompt's blocks
 * always do): contexts past 2048 tokens, which every other case here is
 * far below.  A 2100-row ring, 8 columns, two query heads on one KV head;
 * one query at 2099, a prompt of 64 ending there (blocks where the table
 * has attn_rows, 16 of them over 8 chunks), placed rows at 2099, 100 and 2050, and a window of 2060
 * (a span past the stack, not the whole ring): each against a double
 * reference, and on a 2-thread pool the same bits as on the caller alone. */
static void test_attention_long(const char *isa) {
  enum { CAP = 2100, HDL = 8, H = 2, LQ = H * HDL, TMAX = 64 };
  static float kc[CAP * HDL], vc[CAP * HDL];
  float q[TMAX * LQ], y1[TMAX * LQ], y2[TMAX * LQ];
  fill(kc, CAP * HDL);
  fill(vc, CAP * HDL);
  for (int i = 0; i < CAP * HDL; i++) kc[i] *= 2.0f; /* peakier than uniform */
  fill(q, TMAX * LQ);
  sc_kernel_ctx c1 = {0}, c2 = {0};
  c2.pool = sc_pool_new(2);
  sc_kernels K1, K2;
  CHECK(sc_kernels_init_isa(&K1, &c1, isa) == 0 && sc_kernels_init_isa(&K2, &c2, isa) == 0);
  const float scale = 0.35f;
  static const int placed[3] = {2099, 100, 2050};
  struct { int T, pos, window; const int *row_pos; } cases[] = {
      {1, 2099, 0, NULL}, {64, 2036, 0, NULL}, {3, 0, 0, placed}, {1, 2099, 2060, NULL}};
  for (int ci = 0; ci < 4; ci++) {
    const int T = cases[ci].T;
    memset(y1, 0, sizeof y1);
    memset(y2, 0xff, sizeof y2);
    K1.attention(K1.ctx, q, LQ, kc, vc, HDL, CAP, y1, LQ, T, cases[ci].pos, cases[ci].row_pos, NULL, H, 1, HDL,
                 scale, cases[ci].window);
    K2.attention(K2.ctx, q, LQ, kc, vc, HDL, CAP, y2, LQ, T, cases[ci].pos, cases[ci].row_pos, NULL, H, 1, HDL,
                 scale, cases[ci].window);
    CHECK_MSG(!c1.failed && !c2.failed, "%s case %d: %s %s", isa, ci, c1.err, c2.err);
    CHECK_MSG(!memcmp(y1, y2, (size_t)T * LQ * sizeof *y1), "%s case %d: a pool of 2 gives other bits", isa, ci);
    /* chunks that shared a score row would race: give them the chances */
    for (int rep = 0; rep < 30 && !memcmp(y1, y2, (size_t)T * LQ * sizeof *y1); rep++)
      K2.attention(K2.ctx, q, LQ, kc, vc, HDL, CAP, y2, LQ, T, cases[ci].pos, cases[ci].row_pos, NULL, H, 1, HDL,
                   scale, cases[ci].window);
    CHECK_MSG(!memcmp(y1, y2, (size_t)T * LQ * sizeof *y1), "%s case %d: a pool of 2 gives other bits on a repeat",
              isa, ci);
    double worst = 0;
    for (int t = 0; t < T; t++)
      for (int h = 0; h < H; h++) {
        const int pt = cases[ci].row_pos ? cases[ci].row_pos[t] : cases[ci].pos + t;
        const int lo = cases[ci].window && pt - cases[ci].window + 1 > 0 ? pt - cases[ci].window + 1 : 0;
        const float *qh = q + t * LQ + h * HDL;
        double mx = -1e300, sum = 0, acc[HDL] = {0};
        for (int k = lo; k <= pt; k++) {
          double d = 0;
          for (int i = 0; i < HDL; i++) d += (double)qh[i] * kc[(k % CAP) * HDL + i];
          mx = d * scale > mx ? d * scale : mx;
        }
        for (int k = lo; k <= pt; k++) {
          double d = 0;
          for (int i = 0; i < HDL; i++) d += (double)qh[i] * kc[(k % CAP) * HDL + i];
          const double e = exp(d * scale - mx);
          sum += e;
          for (int i = 0; i < HDL; i++) acc[i] += e * vc[(k % CAP) * HDL + i];
        }
        for (int i = 0; i < HDL; i++) {
          const double err = fabs(y1[t * LQ + h * HDL + i] - acc[i] / sum);
          worst = err > worst ? err : worst;
        }
      }
    CHECK_MSG(worst < 2e-5, "%s case %d: %g from the double reference", isa, ci, worst);
  }
  sc_pool_free(c2.pool);
  sc_kernel_ctx_free(&c1);
  sc_kernel_ctx_free(&c2);
}

/* The default choice and SPEECHC_ISA. */
static void test_choice(const sc_kernels *best) {
  const char *isa = sc_kernels_isa(best);
  CHECK(strcmp(isa, "avx512") != 0); /* only when named */
#if defined(__x86_64__)
  /* avx512-vnni where the CPU has it (and this build its table): its
   * 256-bit GEMV twin where 512-bit operations are split (Zen 4); else avx2 */
  const char *vnni = sc_cpu_avx512_split() ? "avx512-vnni-256" : "avx512-vnni";
  if (sc_kern_ops_isa("avx512-vnni"))
    CHECK_MSG(strcmp(isa, vnni) == 0, "default %s on a CPU with AVX512-VNNI, not %s", isa, vnni);
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    CHECK_MSG(strcmp(isa, "avx2") == 0, "default %s", isa);
  CHECK(strstr(sc_kernels_reason(best), "default") != NULL);
  /* The expectations above rest on the runtime's own detection; here the
   * CPU's features as the compiler's runtime reads them: a table this build
   * compiled and this CPU runs must be offered (a broken detection would
   * otherwise make every "if (!sc_kern_ops_isa(n)) continue" skip it). */
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && sc_kern_avx2.dot4_f32)
    CHECK_MSG(sc_kern_ops_isa("avx2") != NULL, "the CPU has AVX2 and FMA, the avx2 table is not offered");
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") && sc_kern_avx512vnni.dot4_f32) {
    CHECK_MSG(sc_kern_ops_isa("avx512-vnni") != NULL, "the CPU has AVX512-VNNI, the avx512-vnni table is not "
              "offered");
    CHECK_MSG(!strncmp(isa, "avx512-vnni", 11), "the CPU has AVX512-VNNI, the default is %s", isa);
  }
#elif defined(__aarch64__)
  CHECK(strcmp(isa, "neon") == 0 || strcmp(isa, "neon-dotprod") == 0);
#endif
  sc_kernel_ctx c = {0};
  sc_kernels K;
  setenv("SPEECHC_ISA", "portable", 1);
  CHECK(sc_kernels_init(&K, &c) == 0 && strcmp(sc_kernels_isa(&K), "portable") == 0);
  setenv("SPEECHC_ISA", isa, 1);
  CHECK(sc_kernels_init(&K, &c) == 0 && strcmp(sc_kernels_isa(&K), isa) == 0);
  setenv("SPEECHC_ISA", "sse9", 1);
  CHECK(sc_kernels_init(&K, &c) == -1 && c.failed);
  CHECK_CONTAINS(c.err, "SPEECHC_ISA: unknown ISA 'sse9'");
  CHECK_CONTAINS(c.err, "portable");
  CHECK(strcmp(sc_kernels_isa(&K), "portable") == 0);
  sc_kernel_ctx_clear(&c);
  /* an ISA that does not run here (always one: x86 or ARM) is refused */
  char all[] = SC_KERNEL_ISAS;
  int refused = 0;
  for (char *n = strtok(all, ","); n; n = strtok(NULL, ",")) {
    if (sc_kern_ops_isa(n)) continue;
    setenv("SPEECHC_ISA", n, 1);
    CHECK_MSG(sc_kernels_init(&K, &c) == -1 && c.failed, "SPEECHC_ISA=%s accepted", n);
    CHECK_CONTAINS(c.err, n);
    CHECK_MSG(strstr(c.err, "cannot run") || strstr(c.err, "no kernels"), "%s", c.err);
    sc_kernel_ctx_clear(&c);
    refused++;
  }
  CHECK(refused > 0);
  unsetenv("SPEECHC_ISA");
}

/* sc_expf_n: within 1 ulp of e^x in double, rounded, over a sample of
 * every binade and the edges (inf above ln(FLT_MAX), 0 below ln of half
 * the least subnormal, subnormal results, NaN), and every variant this
 * CPU runs (baseline, AVX2, AVX-512) gives the baseline's bits. */
static long ulp_dist(float a, float b) {
  int32_t x, y;
  memcpy(&x, &a, 4);
  memcpy(&y, &b, 4);
  if (x < 0) x = INT32_MIN - x; /* ordered as integers */
  if (y < 0) y = INT32_MIN - y;
  return labs((long)x - (long)y);
}

static void test_expf(void) {
  enum { N = 1 << 20 };
  static float x[N], y[N], yv[N];
  int n = 0;
  /* a sample of the float line: every 4099th bit pattern */
  for (uint64_t u = 0; u <= 0xffffffffull && n < N - 64; u += 4099) {
    uint32_t b = (uint32_t)u;
    memcpy(&x[n++], &b, 4);
  }
  static const float edge[] = {0.0f, -0.0f, 1.0f, -1.0f, 88.7228394f, 88.7228355f, 88.72284f, 89.0f,
                               -87.3365479f, -87.34f, -100.0f, -103.278931f, -103.972076f, -103.972084f,
                               -103.97209f, -104.5f, 1e-8f, -1e-8f, 0.5f * 0.693147181f, -0.5f * 0.693147181f,
                               INFINITY, -INFINITY, NAN, 0x1p-149f, 20.0f, -20.0f};
  for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) x[n++] = edge[i];
  sc_expf_n(x, y, n);
  long worst = 0;
  float at = 0;
  for (int i = 0; i < n; i++) {
    const float want = (float)exp((double)x[i]);
    if (isnan(x[i])) {
      CHECK_MSG(isnan(y[i]), "expf(nan) = %g", y[i]);
      continue;
    }
    const long d = ulp_dist(y[i], want);
    if (d > worst) worst = d, at = x[i];
  }
  CHECK_MSG(worst <= 1, "sc_expf_n: %ld ulp from e^x at %a", worst, at);
  float big[4] = {89.0f, INFINITY, -104.0f, -INFINITY}, e[4];
  sc_expf_n(big, e, 4);
  CHECK(isinf(e[0]) && e[0] > 0 && isinf(e[1]) && e[2] == 0.0f && e[3] == 0.0f);
  /* in place, and in pieces longer than the function's stack buffer */
  memcpy(yv, x, (size_t)n * sizeof *x);
  sc_expf_n(yv, yv, n);
  CHECK(!memcmp(yv, y, (size_t)n * sizeof *y));
  for (int v = 0; v < 3; v++) {
    sc_expf_fn f = sc_expf_variant(v);
    CHECK_MSG(v > 0 || f, "the baseline sc_expf_n variant is missing");
    if (!f) continue;
    printf("sc_expf_n variant %d runs here\n", v);
    memset(yv, 0, sizeof yv);
    f(x, yv, n);
    int diff = 0;
    for (int i = 0; i < n; i++) diff += memcmp(&yv[i], &y[i], 4) != 0;
    CHECK_MSG(!diff, "sc_expf_n variant %d: %d of %d values differ from the baseline's", v, diff, n);
  }
  CHECK(sc_expf_variant(3) == NULL && sc_expf_variant(-1) == NULL);
  int diff1 = 0; /* the scalar form, the generated code's K->expf */
  for (int i = 0; i < n; i++) {
    const float e = sc_expf1(x[i]);
    diff1 += memcmp(&e, &y[i], 4) != 0;
  }
  CHECK_MSG(!diff1, "sc_expf1: %d of %d values differ from sc_expf_n's", diff1, n);
}

/* The AVX-512 tables' attention row gives AVX2's bits (its two 8-float
 * accumulators are the halves of one 16-float one): every head size's
 * column tails, short key groups, a ring that wraps. */
static void test_attn_row_avx512(void) {
  const sc_kern_ops *a2 = sc_kern_ops_isa("avx2");
  if (!a2 || !a2->attn_row) return;
  static const char *isas[] = {"avx512", "avx512-vnni"};
  static const int hds[] = {8, 16, 20, 23, 64, 120, 128, 136, 256};
  enum { CAP = 37, LD = 300 };
  static float kc[CAP * LD], vc[CAP * LD];
  float q[256], s1[64], s2[64], y1[256], y2[256];
  fill(kc, CAP * LD);
  fill(vc, CAP * LD);
  for (size_t ii = 0; ii < 2; ii++) {
    const sc_kern_ops *o = sc_kern_ops_isa(isas[ii]);
    if (!o || !o->attn_row) continue;
    int bad = 0, runs = 0;
    for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
      for (int n = 1; n <= 33; n += 4)
        for (int lo = 0; lo < CAP; lo += 13) {
          const int hd = hds[hi];
          fill(q, hd);
          a2->attn_row(q, kc, vc, LD, lo, n, CAP, hd, 0.125f, s1, y1);
          o->attn_row(q, kc, vc, LD, lo, n, CAP, hd, 0.125f, s2, y2);
          bad += memcmp(y1, y2, (size_t)hd * sizeof *y1) != 0;
          runs++;
        }
    CHECK_MSG(!bad, "%s attn_row: %d of %d rows differ from avx2's bits", isas[ii], bad, runs);
  }
}

/* Every table's attn_rows gives each query attn_row's bits alone: head
 * sizes with column tails, 1..SC_ATTN_ROWS queries seeing different
 * numbers of keys (in any order, some shorter than a key group), a ring
 * that wraps, score rows end to end (a row as long as its ring). */
static void test_attn_rows(void) {
  /* 256 and 264: both sides of the queries' copy (ATTN_QPACK in the AVX2
   * table); up to 75 keys: three blocks of values (32 a block) */
  static const int hds[] = {8, 20, 23, 64, 72, 128, 136, 256, 264};
  enum { CAP = 75, LD = 280, LDQ_R = 270, LDS = CAP, LDY = 267 }; /* score rows end to end */
  static float kc[CAP * LD], vc[CAP * LD], q[SC_ATTN_ROWS * LDQ_R], s[SC_ATTN_ROWS * LDS];
  static float y[SC_ATTN_ROWS * LDY], y1[LDY], s1[LDS];
  fill(kc, CAP * LD);
  fill(vc, CAP * LD);
  char all[] = SC_KERNEL_ISAS;
  for (char *name = strtok(all, ","); name; name = strtok(NULL, ",")) {
    const sc_kern_ops *o = sc_kern_ops_isa(name);
    if (!o || !o->attn_rows) continue;
    CHECK_MSG(o->attn_row != NULL, "%s: attn_rows without attn_row", name);
    int bad = 0, runs = 0;
    unsigned seed = 7;
    for (size_t hi = 0; hi < sizeof hds / sizeof *hds; hi++)
      for (int nq = 1; nq <= SC_ATTN_ROWS; nq++)
        for (int lo = 0; lo < CAP; lo += 17) {
          const int hd = hds[hi];
          int n[SC_ATTN_ROWS];
          for (int i = 0; i < nq; i++) {
            seed = seed * 1103515245u + 12345u;
            n[i] = 1 + (int)(seed >> 16) % CAP; /* 1..CAP keys, in no order */
          }
          fill(q, nq * LDQ_R);
          o->attn_rows(q, LDQ_R, nq, kc, vc, LD, lo, n, CAP, hd, 0.09f, s, LDS, y, LDY);
          for (int i = 0; i < nq; i++) {
            o->attn_row(q + i * LDQ_R, kc, vc, LD, lo, n[i], CAP, hd, 0.09f, s1, y1);
            bad += memcmp(y + i * LDY, y1, (size_t)hd * sizeof *y1) != 0;
            runs++;
          }
        }
    CHECK_MSG(!bad, "%s attn_rows: %d of %d rows differ from attn_row's bits", name, bad, runs);
    printf("%s attn_rows: %d rows with attn_row's bits\n", name, runs);
  }
}

int main(void) {
  unsetenv("SPEECHC_ISA");
  test_expf();
  test_attn_row_avx512();
  test_attn_rows();
  sc_kernel_ctx cbest = {0}, cport = {0};
  sc_kernels best, port;
  CHECK(sc_kernels_init(&best, &cbest) == 0);
  sc_kernels_init_portable(&port, &cport);
  printf("kernels: %s\n", sc_kernels_isa(&best));
  CHECK(strcmp(sc_kernels_isa(&port), "portable") == 0);
  test_choice(&best);

  /* the ISAs the caller says must run here */
  const char *must = getenv("SPEECHC_TEST_ISAS");
  if (must) {
    char list[128];
    snprintf(list, sizeof list, "%s", must);
    for (char *n = strtok(list, ","); n; n = strtok(NULL, ","))
      CHECK_MSG(sc_kern_ops_isa(n) != NULL, "SPEECHC_TEST_ISAS: %s does not run here", n);
  }

  test_bf16_act(&best);
  test_conv1d(&best);
  test_table(&port, &cport);
  test_linear(&port, &cport);
  test_swiglu(&port, &cport);
  test_attention(&port, &cport);
  test_attention_long("portable");
  test_gemm_linear(&port, &cport);
  test_q8_0_groups(sc_kern_ops_isa("portable"));
  char all[] = SC_KERNEL_ISAS;
  for (char *n = strtok(all, ","); n; n = strtok(NULL, ",")) {
    if (!strcmp(n, "portable") || !sc_kern_ops_isa(n)) continue;
    sc_kernel_ctx c = {0};
    sc_kernels K;
    CHECK(sc_kernels_init_isa(&K, &c, n) == 0 && strcmp(sc_kernels_isa(&K), n) == 0);
    printf("testing %s against portable\n", n);
    test_table(&K, &c);
    test_linear(&K, &c);
    test_swiglu(&K, &c);
    test_attention(&K, &c);
    test_attention_long(n);
    test_gemm_linear(&K, &c);
    test_isa_agree(&K, &port);
    if (sc_kern_ops_isa(n)->gemm_f32) test_gemm_hooks(sc_kern_ops_isa(n)); /* else per-token fallback */
    test_q8_0_groups(sc_kern_ops_isa(n));
    test_gemm_blas(&K, &port);
    sc_kernel_ctx_free(&c);
  }
  sc_kernel_ctx_free(&cbest);
  sc_kernel_ctx_free(&cport);
  CHECK_DONE();
}
