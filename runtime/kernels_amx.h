/*
 * kernels_amx.h — the AMX bf16 tile pieces behind kernels.c's "bf16
 * activations" GEMM (kernels.h states its numerical contract).  Stubs
 * that report "not usable" where the build or the CPU has no AMX.
 */
#ifndef SC_KERNELS_AMX_H
#define SC_KERNELS_AMX_H

#include <stddef.h>
#include <stdint.h>

/* 1 when this build has the AMX kernels, the CPU has AMX-TILE and
 * AMX-BF16, and the OS granted this process the tile state (asked once). */
int sc_amx_usable(void);
/* 1 when this build has the AVX512-BF16 kernel and the CPU runs it. */
int sc_bf16dp_usable(void);
/* Configure (release) this thread's tiles around a run of sc_amx_tile. */
void sc_amx_begin(void);
void sc_amx_end(void);
/* Pack token blocks tb0..tb1 (16 tokens each; tokens past T are zeros) of
 * x [T, cols] (ld ldx; cols a multiple of 32) as bf16 (round to nearest
 * even) in the B-tile order: block (tb, kb) at xp + (tb * cols/32 + kb) *
 * 512, row i (of 16) = for t < 16 the pair x[16tb + t, 32kb + 2i + 0..1]. */
void sc_amx_pack(const float *x, int ldx, int T, int cols, int tb0, int tb1, uint16_t *xp);
/* The same for the im2col rows r0..r0+T of a causal conv (sc_kernels.
 * conv1d) without making them: token t, column j*C + c is row r0 + t +
 * j*d of [state (S rows); x (ld ldx)], channel c.  C a multiple of 32. */
void sc_amx_pack_conv(const float *state, int S, const float *x, int ldx, int r0, int T, int C, int k, int d,
                      int tb0, int tb1, uint16_t *xp);
/* c[r * 32 + t] = sum_k w[r * ldw + k] * x[t, k] for 32 weight rows (bf16,
 * ld ldw elements) and the 32 tokens of the packed blocks b0 (tokens
 * 0..15) and b1 (16..31), k < 32 * nkb.  Needs sc_amx_begin. */
void sc_amx_tile(const uint16_t *w, size_t ldw, const uint16_t *b0, const uint16_t *b1, int nkb,
                 float *c);

/* A causal conv's source for sc_bf16dp_conv_tile: xt[cp * ldt + s] = the
 * bf16 pair (channels 2cp, 2cp + 1) of row r0 + s of [state (S rows); x
 * (ld ldx)] for s < n, zero for n <= s, for the channel pairs cp0..cp1
 * and sa <= s < sb (all four multiples of 16; C a multiple of 32). */
void sc_bf16dp_pack_convt(const float *state, int S, const float *x, int ldx, int r0, int n, int C, int cp0,
                          int cp1, int sa, int sb, uint32_t *xt, int ldt);
/* sc_amx_tile's product (the same c layout) with vdpbf16ps, for the
 * im2col rows t0.. of a causal conv (k taps, dilation d, C channels; a
 * linear is k = 1) read from the transposed source xt (tokens t0 .. t0 +
 * 31 + (k - 1) d must be in ldt): element (r, t) is the f32 chain over
 * the column pairs in order.  Only the first nr rows (rounded up to 8 or
 * 16; those rows of w must be readable) and, when nt <= 16, the first 16
 * tokens are computed; the rest of c is left as it was. */
void sc_bf16dp_conv_tile(const uint16_t *w, size_t ldw, const uint32_t *xt, size_t ldt, int t0, int C, int k,
                         int d, int nr, int nt, float *c);

/* The first nr rows and nt tokens of c (sc_amx_tile's, 64-byte aligned)
 * into y[t * ldy + r] (y's row 0 at the tile's first weight row): + bias[r]
 * (bias NULL: none), then y + that when acc, in f32. */
void sc_amx_store(const float *c, int nr, int nt, const float *bias, int acc, float *y, size_t ldy);

#endif /* SC_KERNELS_AMX_H */
