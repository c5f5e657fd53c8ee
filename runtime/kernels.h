/*
 * kernels.h — the CPU kernels behind sc_kernels (sc_abi.h).
 *
 * sc_kernels_init fills the table a compiled model calls: linear (GEMV/GEMM
 * over f32 or bf16 weights), linear_swiglu, attention over a (ring) KV cache,
 * and libm wrappers.  The ISA is chosen once, at init: AVX2+FMA when the CPU
 * has both, portable C otherwise.
 *
 * Numerical contract (tests/unit/test_kernels.c holds it): every output
 * element is one dot product W[r]·x[t] whose accumulation order depends only
 * on `cols` — not on rows, T, or which rows are computed together — then
 * `+ bias[r]`, then `y + d` when accumulating.  So T=1 and T>1 agree bit for
 * bit, and linear_swiglu equals silu(linear(gate)) * linear(up) exactly.
 * The portable and AVX2 paths agree to rounding (~1e-6 relative), not bits.
 */
#ifndef SC_KERNELS_H
#define SC_KERNELS_H

#include <stdint.h>

#include "sc_abi.h"

/* What K->ctx points to.  The runtime owns one per session (kernels run on
 * the session's thread) and should clear it (sc_kernel_ctx_clear) before
 * each entry-point call: only the first error of a call is kept. */
typedef struct sc_kernel_ctx {
  char err[256]; /* first error of the call: "msg (value V)" */
  int failed;    /* non-zero once an error was recorded */
  void *pool;    /* reserved for a thread pool; NULL = run on the caller */
} sc_kernel_ctx;

/* Fill K for the best ISA this CPU runs.  ctx (an sc_kernel_ctx, or NULL to
 * drop errors) is stored as K->ctx; K does not own it. */
void sc_kernels_init(sc_kernels *K, void *ctx);
/* The same table with the portable C kernels only (tests, debugging). */
void sc_kernels_init_portable(sc_kernels *K, void *ctx);
/* "avx2" or "portable": which kernels K holds ("unknown" if neither). */
const char *sc_kernels_isa(const sc_kernels *K);
/* Forget a previous error so that the next call starts clean. */
void sc_kernel_ctx_clear(sc_kernel_ctx *c);

/*
 * Internal: the per-ISA inner loops that kernels.c's drivers call.  Each
 * dotN computes N row dots W[r]·x for rows w, w+cols, ... (bf16 rows are
 * uint16 bit patterns) into out[0..N); dot4 and dot1 must give every row the
 * same bits, since which rows share a call depends on `rows`.
 */
typedef struct sc_kern_ops {
  const char *name;
  void (*dot4_f32)(const float *w, const float *x, int cols, float *out);
  void (*dot1_f32)(const float *w, const float *x, int cols, float *out);
  void (*dot4_bf16)(const uint16_t *w, const float *x, int cols, float *out);
  void (*dot1_bf16)(const uint16_t *w, const float *x, int cols, float *out);
  /* y[i] += a * x[i], i < n */
  void (*axpy)(float *y, float a, const float *x, int n);
} sc_kern_ops;

/* Defined in kernels_avx2.c; all hooks NULL when that file was built
 * without -mavx2 -mfma (then sc_kernels_init falls back to portable). */
extern const sc_kern_ops sc_kern_avx2;

#endif /* SC_KERNELS_H */
