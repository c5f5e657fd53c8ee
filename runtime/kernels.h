/*
 * kernels.h — the CPU kernels behind sc_kernels (sc_abi.h).
 *
 * sc_kernels_init fills the table a compiled model calls: linear (GEMV/GEMM
 * over f32, bf16, q8_0 or q4_0 weights), linear_swiglu, attention over a
 * (ring) KV cache, and libm wrappers.  The ISA is chosen once, at init
 * (SC_KERNEL_ISAS): AVX2+FMA(+F16C) on x86-64, NEON (with SDOT when the CPU
 * has dotprod) on AArch64, portable C otherwise.  AVX-512 is compiled in
 * but only runs when asked for (SPEECHC_ISA=avx512): it has not run here.
 *
 * Threads: when the context holds a pool (pool.h), linear and
 * linear_swiglu cut their output rows into chunks of whole blocks of four
 * rows, attention its (token, head) pairs, four chunks per thread, and the
 * pool's threads claim the chunks; one sc_pool_run, so one barrier, per
 * call.  A row is computed by the same code whichever thread runs it, so
 * results do not depend on the thread count.
 *
 * Quantized bands (GGML's q8_0 and q4_0: blocks of 32 weights with an f16
 * scale) are multiplied against activations quantized on the fly to 8 bits
 * per 32-block, as llama.cpp does (vec_dot_q8_0_q8_0, vec_dot_q4_0_q8_0):
 * exact integer dots per block, then one float multiply-add per block by
 * d_w * d_x.  The activation scale is kept in f32 (GGML rounds it to f16).
 * The activations are quantized once per call, before the rows are split.
 *
 * Prefill (T > 1): the ops' optional gemm_* hooks (AVX2, AVX-512 and
 * NEON have them) take a tile of rows x tokens and load each weight block
 * once for several tokens; without them the driver calls the dots once per
 * token.  f32 weights with T >= 16 (BLAS_MIN_T in kernels.c) go instead to
 * OpenBLAS's cblas_sgemm, called by our pool's threads on fixed 64-row
 * panels with OpenBLAS's own threading off; the portable table never takes
 * that path, nor does a runtime built with -DSPEECHC_OPENBLAS=OFF (then f32
 * is like the others).
 *
 * Numerical contract (tests/unit/test_kernels.c holds it): every output
 * element is one dot product W[r]·x[t] whose accumulation order depends only
 * on `cols` — not on rows, T, which rows or tokens are computed together,
 * or the thread count — then `+ bias[r]`, then `y + d` when accumulating.
 * So T=1 and T>1 agree bit for bit, and linear_swiglu equals
 * silu(linear(gate)) * linear(up) exactly.  One exception: f32 weights
 * with T >= 16 (OpenBLAS) follow OpenBLAS's order, which may depend on T:
 * they agree with T=1 to rounding (~1e-6 relative), not bits, and stay
 * the same bits for any thread count (the panels do not depend on it).
 * The portable and SIMD paths agree to rounding (~1e-6 relative), not
 * bits; for the quantized bands all quantize the activations to the same
 * bits.
 *
 * The Gated DeltaNet kernels (kernels_gdn.c: l2norm, gated_rmsnorm and
 * the delta rule, token by token) are ISA-neutral C loops too, the delta
 * rule's heads spread over the pool.
 *
 * The mixture-of-experts kernels (kernels_moe.c): topk_route, a C loop
 * per token, and moe, which groups the (token, expert) pairs by expert and
 * runs every chosen expert's gate/up GEMMs as one pool job, then every
 * down GEMM as another (sc_linear_batch): only the chosen experts' rows
 * are read, and each expert's rows once per call.
 *
 * bf16 activations (kernels_amx.c): where the runtime allows it for a
 * model (sc_kernel_ctx.bf16_act: codec decoders in every call, whose gate
 * is the waveform's SNR against f32; other models only in calls of at
 * least bf16_act_min_t tokens, their prefill, never in a rowwise call) and
 * the CPU has an engine for it, a bf16 linear (linear_swiglu too, as one
 * linear over the gate and up rows, then silu(g) * u) whose columns are
 * whole 32-blocks runs on it, activations rounded to bf16 (to nearest even),
 * products exact, sums in f32: on the AMX tiles (when the OS grants the
 * tile state), over pairs then 32-column blocks in the hardware's order;
 * else with AVX512-BF16's vdpbf16ps, one f32 chain over the column pairs
 * in order.  Every element is the same arithmetic whatever T, the rows
 * around it or the thread count, so T = 1 and T > 1 agree bit for bit;
 * the two engines differ from each other in the last bits, and from f32
 * activations by bf16's rounding of x (~3 significant digits).  conv1d
 * (the fused causal conv) packs its im2col rows straight from x and the
 * state there: the bits of im2col then linear().  Elsewhere conv1d is
 * im2col then linear(), a piece of rows at a time.
 *
 * The codec kernels (kernels_codec.c: im2col, dwconv, overlap_add, snake,
 * layernorm; sc_abi.h states each) are ISA-neutral C loops over rows with
 * the channel loop innermost, except SnakeBeta's sine, which each ISA may
 * vectorize (sc_kern_ops.snake_row, sc_sin2 below).  Streaming a sequence
 * in pieces gives the bits of one call over all of it.
 */
#ifndef SC_KERNELS_H
#define SC_KERNELS_H

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sc_abi.h"
#include "sc_bands.h"

/* What K->ctx points to.  The runtime owns one per session (kernels run on
 * the session's thread) and should clear it (sc_kernel_ctx_clear) before
 * each entry-point call: only the first error of a call is kept. */
typedef struct sc_kernel_ctx {
  char err[256]; /* first error of the call: "msg (value V)" */
  int failed;    /* non-zero once an error was recorded */
  void *pool;    /* sc_pool (pool.h) the kernels split work over, owned by
                  * the caller; NULL = run on the caller's thread */
  void *scratch; /* kernel scratch (quantized activations, long score
                  * rows), grown on demand; freed by sc_kernel_ctx_free */
  size_t scratch_bytes;
  int bf16_act;  /* bf16 weights may meet activations rounded to bf16 (the
                  * "bf16 activations" GEMM above), set per model by the
                  * runtime: SC_BF16ACT_OFF, _BEST, _AMX or _DP */
  int bf16_act_min_t; /* 0: bf16_act applies to every call (a codec: a frame
                       * alone has the bits of a whole call); N: only to calls
                       * of at least N tokens (an LM's prefill; its decode
                       * keeps f32 activations) */
  int rowwise;   /* 1: every row of a call gets the bits it gets alone (no
                  * OpenBLAS for f32, whose order depends on the rows; the
                  * batched decode step sets it for its calls) */
} sc_kernel_ctx;

/* sc_kernel_ctx.bf16_act: off (f32 activations); the best engine this CPU
 * runs (AMX tiles, else AVX512-BF16, else off); or one engine by name,
 * which does nothing where it cannot run (sc_bf16act_engine says). */
enum { SC_BF16ACT_OFF = 0, SC_BF16ACT_BEST = 1, SC_BF16ACT_AMX = 2, SC_BF16ACT_DP = 3 };
/* The engine a bf16_act setting resolves to here: SC_BF16ACT_AMX,
 * SC_BF16ACT_DP or SC_BF16ACT_OFF. */
int sc_bf16act_engine(int bf16_act);
/* The setting a value of SPEECHC_BF16_ACT names: NULL, "" or "auto"
 * SC_BF16ACT_BEST, "amx", "avx512bf16", "off" (or "0"); -1 for any other. */
int sc_bf16act_setting(const char *value);

/* Every ISA speechc has kernels for, in sc_kernels_init's order of
 * preference ("avx512" only when asked for). */
#define SC_KERNEL_ISAS "avx512-vnni-256,avx512-vnni,avx512,avx2,neon-dotprod,neon,portable"

/* Fill K for the best ISA this CPU runs, or the one the environment
 * variable SPEECHC_ISA names.  ctx (an sc_kernel_ctx, or NULL to drop
 * errors) is stored as K->ctx; K does not own it.  Returns 0, or -1 when
 * SPEECHC_ISA names an ISA that is unknown or that this build or CPU
 * cannot run: then ctx holds the message and K the portable kernels. */
int sc_kernels_init(sc_kernels *K, void *ctx);
/* The table for one named ISA (SC_KERNEL_ISAS): 0, or -1 with a message in
 * ctx when the name is unknown or this build or CPU cannot run it. */
int sc_kernels_init_isa(sc_kernels *K, void *ctx, const char *isa);
/* The same table with the portable C kernels only (tests, debugging). */
void sc_kernels_init_portable(sc_kernels *K, void *ctx);
/* The name of the ISA whose kernels K holds ("unknown" if none). */
const char *sc_kernels_isa(const sc_kernels *K);
/* Why sc_kernels_init chose them (SPEECHC_ISA, or the measured default). */
const char *sc_kernels_reason(const sc_kernels *K);
/* Software prefetch in the x86 one-token dots of f32, bf16 and q8_0 rows
 * (sc_gemv_ahead bytes ahead of the row's stream; q4_0's dot always
 * prefetches).  It does not touch the arithmetic: the bits are the same
 * either way.  On for CPUs where it was measured faster (Zen 3, Zen 5, an
 * AMX Xeon: docs/PERFORMANCE.md) and those never measured; off on AMD
 * Zen 4, whose hardware prefetcher alone reads these rows faster (q8_0
 * decode 0.92 against 0.80 of the paired probe).  The distance: 1 KB,
 * except 4 KB on Intel CPUs (an AMX Xeon read bf16 / q8_0 / q4_0 GEMVs
 * 1.16x / 1.2x / 1.4x faster from DRAM than at 1 KB).
 * SPEECHC_GEMV_PREFETCH=0 or 1 overrides the CPU's choice of on or off, a
 * multiple of 64 from 64 to 65536 turns it on at that many bytes (any
 * other value: sc_kernels_init fails).  Set once per process by
 * sc_kernels_init / _init_isa; read by the kernels with a relaxed load.
 * *_why says why, for speechc bench. */
extern _Atomic int sc_gemv_prefetch_on;
extern _Atomic int sc_gemv_ahead;
static inline size_t sc_gemv_ahead_bytes(void) {
  return (size_t)atomic_load_explicit(&sc_gemv_ahead, memory_order_relaxed);
}
/* Which cache those prefetches fill: L1 (0), or L2 (1) on Intel CPUs,
 * where an AMX Xeon decoded 1.08-1.14x (bf16) and 1.06-1.07x (q8_0)
 * faster with the rows fetched into L2 (docs/PERFORMANCE.md); L1
 * elsewhere, as measured on AMD.  Both x86 tables' one-token dots.
 * SPEECHC_GEMV_PREFETCH_CACHE=l1 or l2 overrides it (any other value:
 * sc_kernels_init fails).  The bits are the same either way. */
extern _Atomic int sc_gemv_l2;
static inline int sc_gemv_into_l2(void) { return atomic_load_explicit(&sc_gemv_l2, memory_order_relaxed); }
/* The x86 tables' GEMV row prefetch (they include <immintrin.h>): into L1
 * (T0), or into L2 (T1) where the caller's l2, read from sc_gemv_into_l2
 * once a call, says so; the branch goes the same way every time. */
#define SC_GEMV_PREFETCH(p, l2)                                              \
  do {                                                                       \
    if (l2) _mm_prefetch((const char *)(p), _MM_HINT_T1);                    \
    else _mm_prefetch((const char *)(p), _MM_HINT_T0);                       \
  } while (0)
const char *sc_gemv_prefetch_why(void);
/* Forget a previous error so that the next call starts clean. */
void sc_kernel_ctx_clear(sc_kernel_ctx *c);
/* Free the context's scratch (not its pool). */
void sc_kernel_ctx_free(sc_kernel_ctx *c);

/*
 * The quantized bands, exactly as GGML defines them (ggml-common.h,
 * quantize_row_q8_0_ref / quantize_row_q4_0_ref).  A row of `cols` (a
 * multiple of 32) is cols/32 blocks:
 *   q8_0: f16 d, 32 x int8 q;      x[j] = d * q[j];       d = max|x| / 127
 *   q4_0: f16 d, 16 bytes nibbles; x[j] = d * (q[j] - 8)  d = m / -8 where m
 *         is the value of largest magnitude (with its sign); byte k holds
 *         element k in its low nibble and element k + 16 in its high one.
 * f16 conversions round to nearest even, as F16C does.
 *
 * q8_0 and q4_0 rows are stored for the CPU in groups of eight blocks (the
 * same bytes, rearranged; the CUDA and Metal targets keep GGML's order),
 * so that one 32-byte load feeds eight blocks and one F16C conversion
 * gives eight scales.  q4_0:
 *   each whole group g of blocks 8g..8g+7 is SC_Q4_GROUP_BYTES: the eight
 *   f16 scales d[8] (block 8g+j's at j), then four chunks c = 0..3 of 32
 *   bytes, chunk byte 4j + i = GGML byte 4c + i of block 8g+j (so its low
 *   nibble is element 4c+i, its high one element 16+4c+i);
 *   the last cols/32 % 8 blocks follow as plain GGML blocks (SC_Q4_0_BLOCK
 *   bytes each).
 * A row has the same size as in GGML, cols/32 blocks.  The sizes and the
 * per-band table (row bytes, names) are in sc_bands.h.
 *
 * q8_0 (since ABI 10; before, GGML's blocks: its prompt tile spent six
 * vector operations per row, token and block, docs/PERFORMANCE.md):
 *   each whole group g of blocks 8g..8g+7 is SC_Q8_GROUP_BYTES: the eight
 *   f16 scales d[8] (block 8g+j's at j), then eight chunks k = 4h + c
 *   (h = 0..1, c = 0..3) of 32 bytes, chunk byte 4j + i = element
 *   16h + 4c + i of block 8g+j (exactly where quantize_q8's view xp puts
 *   the activation that meets it, so 32-bit lane j of a chunk's products
 *   belongs to block j);
 *   the last cols/32 % 8 blocks follow as plain GGML blocks.
 * (SC_Q8_GROUP, SC_Q8_GROUP_BYTES: sc_bands.h.)  So every kernel gets a
 * group's eight exact integer block dots in the lanes of one int32 vector
 * and does its float work once per eight blocks.
 */
#define SC_Q4_VIEW_GROUP 320   /* bytes of the activation view per group */
#define SC_ATTN_ROWS 8         /* queries an attn_rows call takes at most */
uint16_t sc_f32_to_f16(float f);
float sc_f16_to_f32(uint16_t h);
/* bf16 bits -> f32, exactly (bf16 is the top half of an f32): the one
 * definition every kernel file's scalar tail uses. */
static inline __attribute__((always_inline)) float sc_bf16_to_f32(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
/* f16 bits -> f32 for every bit pattern: the quantized kernels read their
 * block scales through it (a load instead of a conversion).  Process-wide
 * and read-only once sc_kernels_init* has filled it (once, thread-safe). */
extern float sc_f16_table[65536];
/* Quantize one row of cols floats into cols/32 blocks at out. */
void sc_quantize_row_q8_0(const float *x, int cols, void *out);
void sc_quantize_row_q4_0(const float *x, int cols, void *out);
/* A row of GGML q4_0 blocks -> the CPU's grouped order (same size; in and
 * out must not overlap). */
void sc_pack_row_q4_0(const void *ggml, int cols, void *out);
/* A row of GGML q8_0 blocks -> the CPU's grouped order (same size; in and
 * out must not overlap), and back. */
void sc_pack_row_q8_0(const void *ggml, int cols, void *out);
void sc_unpack_row_q8_0(const void *grouped, int cols, void *ggml);
/* Dequantize one row of band wtype (any SC_W_*; q8_0 and q4_0 in the CPU's
 * grouped order) into y[cols]. */
void sc_dequantize_row(int wtype, const void *row, int cols, float *y);

/* The quantized GEMM's loop over rows, shared by the x86 tables (their
 * ALWAYS_INLINE, PREFETCH and tile): NAME##t runs one tile of NTT tokens
 * (xq, xd, xp already at its first token) against every pair of rows (one
 * for an odd last row) before the caller's next tile, so the tile's
 * activations stay in L1 while the rows pass and the nr <= 4 rows stay
 * there for every tile; during the first tile (first != 0) it prefetches
 * the next two rows (in this block or the next: rows are consecutive),
 * since at several tokens a tile runs too long per byte for the hardware
 * prefetcher to stay ahead.  SC_GEMM_Q_TOKENS(NAME, K) runs the K-token
 * tile at token t of NAME's arguments and advances t. */
#define SC_DEFINE_GEMM_Q_ROWS(NAME, TILE)                                        \
  ALWAYS_INLINE void NAME##t(const uint8_t *w, size_t rb, int nr, const int8_t *xq, const float *xd, \
                             const unsigned char *xp, int nb, float *out, int ldo, const int NTT, \
                             int first) {                                        \
    int r = 0;                                                                   \
    for (; r + 2 <= nr; r += 2) {                                                \
      if (first)                                                                 \
        for (size_t l = 0; l < 2 * rb; l += 64) PREFETCH(w + (r + 2) * rb + l);  \
      TILE(w + r * rb, rb, xq, xd, xp, nb, out + r, ldo, 2, NTT);                \
    }                                                                            \
    if (r < nr) TILE(w + r * rb, rb, xq, xd, xp, nb, out + r, ldo, 1, NTT);      \
  }
#define SC_GEMM_Q_TOKENS(NAME, K)                                                \
  do {                                                                           \
    NAME##t(w, rb, nr, xq + (size_t)t * 32 * nb, xd + (size_t)t * nb, xp + (size_t)t * 64 * nb, nb, \
            out + (size_t)t * ldo, ldo, K, t == 0);                              \
    t += K;                                                                      \
  } while (0)

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
  /* x[nb*32] -> 8-bit blocks: xd[b] = max|x| / 127 over block b (f32),
   * xq = x * (127 / max|x|) rounded to nearest even (0 for an all-zero
   * block).  xp[(nb/8) * SC_Q4_VIEW_GROUP] is the same data arranged for
   * the q4_0 dot, group by group (blocks 8g..8g+7, as the weights): int8
   * x[h][c][32] for half h = 0..1 and chunk c = 0..3, byte 4j + i =
   * xq[8g+j][16h + 4c + i] (what the low (h=0) or high (h=1) nibbles of
   * weight chunk c meet); then int32 s[8] = 8 * (the sum of xq over block
   * 8g+j) (the nibble offsets); then f32 d[8] = xd[8g..8g+7].  Every ISA
   * gives the same bits. */
  void (*quantize_q8)(const float *x, int nb, int8_t *xq, float *xd, unsigned char *xp);
  /* N rows of q8_0 / q4_0 blocks (the CPU's grouped order), row_bytes
   * apart, against quantized x: per block (SIMD tables: per whole group,
   * lane j block 8g+j) the exact integer dot, then acc += d_w * d_x * dot
   * (the float order is each ISA's, fixed by nb). */
  void (*dot4_q8_0)(const uint8_t *w, size_t row_bytes, const int8_t *xq,
                    const float *xd, const unsigned char *xp, int nb, float *out);
  void (*dot1_q8_0)(const uint8_t *w, size_t row_bytes, const int8_t *xq,
                    const float *xd, const unsigned char *xp, int nb, float *out);
  void (*dot4_q4_0)(const uint8_t *w, size_t row_bytes, const int8_t *xq,
                    const float *xd, const unsigned char *xp, int nb, float *out);
  void (*dot1_q4_0)(const uint8_t *w, size_t row_bytes, const int8_t *xq,
                    const float *xd, const unsigned char *xp, int nb, float *out);
  /* Optional: one query row's causal attention over n rows of a ring
   * cache (NULL = the driver calls dot1_f32 and axpy per key).  Key
   * (value) j is at kc (vc) + ((lo + j) % cap) * ld; s: scratch of n
   * floats; y[hd] = sum_j softmax_j(scale * q.K_j) V_j, the softmax in
   * floats with the max subtracted and expf, as the driver's. */
  void (*attn_row)(const float *q, const float *kc, const float *vc, size_t ld, int lo, int n,
                   int cap, int hd, float scale, float *s, float *y);
  /* Optional: nq <= SC_ATTN_ROWS queries of one head at once (a prompt's
   * rows; NULL = attn_row for each): query i at q + i * ldq sees the n[i]
   * keys from the same first key lo, its scores at s + i * lds (lds >=
   * every n[i]), its output at y + i * ldy, with the bits attn_row gives
   * it alone. */
  void (*attn_rows)(const float *q, int ldq, int nq, const float *kc, const float *vc, size_t ld, int lo,
                    const int *n, int cap, int hd, float scale, float *s, int lds, float *y, int ldy);
  /* Optional blocked (GEMM) forms for T > 1; NULL = the driver calls
   * dot4/dot1 once per token.  Each computes nr <= 4 rows against nt
   * tokens into out[t * ldo + r], loading each weight block once for
   * several tokens, and must give every element the bits dot1 gives that
   * row and token (so T = 1 and T > 1 agree).  Float bands: token t at
   * x + t * ldx.  Quantized bands: token t's activations at xq + t*32*nb,
   * xd + t*nb, xp + t*64*nb (quantize_q8 of each token in turn; the view
   * takes 40 of those 64 bytes per block). */
  void (*gemm_f32)(const float *w, int nr, const float *x, int ldx, int nt, int cols,
                   float *out, int ldo);
  void (*gemm_bf16)(const uint16_t *w, int nr, const float *x, int ldx, int nt, int cols,
                    float *out, int ldo);
  void (*gemm_q8_0)(const uint8_t *w, size_t row_bytes, int nr, const int8_t *xq,
                    const float *xd, const unsigned char *xp, int nb, int nt, float *out,
                    int ldo);
  void (*gemm_q4_0)(const uint8_t *w, size_t row_bytes, int nr, const int8_t *xq,
                    const float *xd, const unsigned char *xp, int nb, int nt, float *out,
                    int ldo);
  /* Optional, all three or none: the order in which this table's f32 /
   * bf16 GEMMs would rather read a token's activations.  gemm_x_order
   * lays out one token's cols values (xo does not overlap x);
   * gemm_f32_ordered / gemm_bf16_ordered are gemm_f32 / gemm_bf16 reading
   * tokens so laid out (token t at x + t * ldx), with the same bits.  The
   * driver lays out a prompt once per linear call. */
  void (*gemm_x_order)(const float *x, int cols, float *xo);
  void (*gemm_f32_ordered)(const float *w, int nr, const float *x, int ldx, int nt, int cols,
                           float *out, int ldo);
  void (*gemm_bf16_ordered)(const uint16_t *w, int nr, const float *x, int ldx, int nt, int cols,
                            float *out, int ldo);
  /* Optional: f32 / bf16 prompts hand gemm_f32 / gemm_bf16 (and their
   * _ordered forms) up to this many tokens a call, 1..64 (0 = 24): a table
   * whose call has a fixed cost per block of rows (widening them, say)
   * pays it once for that many. */
  int gemm_fl_tokens;
  /* Optional: nonzero = f32 / bf16 prompts longer than one call walk
   * groups of blocks of rows against each call's tokens, so that a long
   * prompt's activations come from L3 once per group rather than once
   * per block of four rows (0 = each block takes all the tokens). */
  int gemm_fl_groups;
  /* Optional: q4_0 prompts walk runs of this many tokens (<= 24) across
   * several blocks of rows, so that a run's activations stay in L1 (0 =
   * every block takes all the tokens, 24 at a time). */
  int gemm_q4_0_tokens;
  /* Optional: SnakeBeta over one row of n channels, y[i] = x[i] + ib[i] *
   * sc_sin2(x[i] * a[i]) with a = exp(alpha) and ib = 1 / (exp(beta) +
   * 1e-9) given per channel; y may be x (NULL = the portable loop, which
   * auto-vectorizes).  Agrees with the portable row to rounding. */
  void (*snake_row)(const float *x, const float *a, const float *ib, float *y, int n);
} sc_kern_ops;

/*
 * sin(u)^2, as every ISA's SnakeBeta computes it (kernels_codec.c and the
 * snake_row hooks): for |u| <= SC_SIN2_MAX, u = n*pi/2 + r with n =
 * rint(u * 2/pi) (the 1.5*2^23 trick) and r reduced by three parts of pi/2
 * (Cody-Waite, exact products for |n| < 2^13), s = sin(r) by Cephes'
 * sinf polynomial on |r| <= pi/4, and sin^2(u) = s^2 for n even, 1 - s^2
 * for n odd (no sign, no cosine).  Beyond SC_SIN2_MAX (and for inf) the
 * hooks take sinf(u)^2 instead.  Error against sin(u)^2 in double: below
 * 1.5e-7 absolute (test_kernels).
 */
#define SC_SIN2_MAX 8192.0f
#define SC_SIN2_2OPI 0.636619772367581343f /* 2/pi */
#define SC_SIN2_RND 12582912.0f           /* 1.5 * 2^23 */
#define SC_SIN2_DP1 1.5703125f
#define SC_SIN2_DP2 4.837512969970703125e-4f
#define SC_SIN2_DP3 7.54978995489188216e-8f
#define SC_SIN2_S1 -1.6666654611e-1f
#define SC_SIN2_S2 8.3321608736e-3f
#define SC_SIN2_S3 -1.9515295891e-4f
static inline float sc_sin2(float u) {
  const float n = (u * SC_SIN2_2OPI + SC_SIN2_RND) - SC_SIN2_RND;
  const float r = ((u - n * SC_SIN2_DP1) - n * SC_SIN2_DP2) - n * SC_SIN2_DP3;
  const float z = r * r;
  const float s = r + r * z * (SC_SIN2_S1 + z * (SC_SIN2_S2 + z * SC_SIN2_S3));
  const float s2 = s * s;
  return ((int)n & 1) ? 1.0f - s2 : s2;
}

/* One SnakeBeta element (a = exp(alpha), ib = 1 / (exp(beta) + 1e-9)):
 * the scalar form every snake_row uses for its tail. */
static inline float sc_snake1(float x, float a, float ib) {
  const float u = x * a;
  float s2;
  if (fabsf(u) > SC_SIN2_MAX) {
    const float sn = sinf(u);
    s2 = sn * sn;
  } else {
    s2 = sc_sin2(u);
  }
  return x + ib * s2;
}

/* What the codec kernels (kernels_codec.c) share with kernels.c: the
 * error slot, the context's scratch (n bytes, 64-byte aligned; *owned set
 * when there is no context and the caller must free it), and one SnakeBeta
 * entry per ISA table. */
void sc_kernel_error(void *ctx, const char *msg, int value);
void *sc_kernel_scratch(void *ctx, size_t n, void **owned);
/* Fill K's codec entries (im2col ... layernorm) with the portable drivers,
 * SnakeBeta over ops' snake_row (portable when NULL). */
void sc_kernels_codec_fill(sc_kernels *K, const sc_kern_ops *ops);
/* rmsnorm, rope and store_rows (kernels_rows.c): one set for every ISA. */
void sc_kernels_rows_fill(sc_kernels *K);
/* The codec kernels' pieces the fused conv (kernels.c) shares: IM2COL
 * itself (sc_kernels.im2col), its argument checks (1 with the error
 * recorded), and the state update: state = the last S rows of [state; x]. */
void sc_im2col(void *ctx, const float *x, int ldx, float *state, float *y, int ldy, int R, int C, int k,
               int d);
int sc_conv_bad(void *ctx, const char *what, int R, int C, int k, int d, int S, const float *state);
void sc_conv_state_push(float *state, int S, int C, const float *x, int ldx, int R);
/* Fill K's Gated DeltaNet entries (l2norm, gated_rmsnorm, delta_rule;
 * kernels_gdn.c): ISA-neutral C loops, the same on every table. */
void sc_kernels_gdn_fill(sc_kernels *K);

/* Fill K's topk_route (kernels_moe.c; ISA-neutral).  K->moe is bound per
 * ISA, to sc_moe_impl with that ISA's ops. */
void sc_kernels_moe_fill(sc_kernels *K);

/* One linear (or, with swiglu, linear_swiglu) call of a batch: y [T, ldy]
 * = W x for x [T, ldx], W `rows` rows of `cols` in band wtype (2*rows for
 * SwiGLU, gate then up). */
typedef struct sc_lin_task {
  int wtype;
  const void *w;
  const float *x;
  float *y;
  int ldx, ldy, T, rows, cols, swiglu;
} sc_lin_task;
/* Run n tasks as one pool job (one barrier): every task's blocks of four
 * rows are chunks of the same job, so small GEMVs (one expert each) keep
 * every thread busy.  Each output element has the bits linear() or
 * linear_swiglu() gives it (never the OpenBLAS path).  Uses the context's
 * scratch.  0, or -1 with the error recorded (`what` starts it). */
int sc_linear_batch(const sc_kern_ops *ops, void *ctx, const sc_lin_task *t, int n, const char *what);
/* sc_kernels.moe over an ISA's ops (kernels_moe.c). */
void sc_moe_impl(const sc_kern_ops *ops, void *ctx, int wt_gu, const void *wgu, int wt_d, const void *wd,
                 const float *x, int ldx, const float *route, int ldr, const float *sh, int lds, const float *sg,
                 int ldg, float *y, int ldy, void *tmp, int T, int E, int k, int inter, int H);

/*
 * Conv weights in the layouts the codec ops read, from PyTorch's (the
 * weight packer's derived weights, compiler/pass_pack.c):
 *   Conv1d [cout, cin, k] -> IM2COL's LINEAR weight [cout, k*cin]:
 *     out[o, j*cin + c] = w[o, c, j];
 *   ConvTranspose1d [cin, cout, k] -> OVERLAP_ADD's LINEAR weight
 *     [k*cout, cin]: out[j*cout + o, c] = w[c, o, j].
 * out must not overlap w.  sc_conv_weight_src gives, for element (row,
 * col) of the derived [rows, cols] matrix, the flat index of its source
 * element (kind SC_CONV_IM2COL: dims = cout, cin; SC_CONV_TRANSPOSED:
 * dims = cin, cout), so a packer may also permute while streaming.
 */
enum { SC_CONV_IM2COL = 1, SC_CONV_TRANSPOSED = 2 };
size_t sc_conv_weight_src(int kind, int dim0, int dim1, int k, size_t row, size_t col);
void sc_conv_weight_im2col(const float *w, int cout, int cin, int k, float *out);
void sc_convt_weight_linear(const float *w, int cin, int cout, int k, float *out);

/* y[i] = e^x[i] for n floats (y may be x; vexp.c): within 1 ulp of the
 * correctly rounded value, +inf above ln(FLT_MAX), 0 below ln of half the
 * least subnormal, NaN for NaN.  The one exponential of the hot loops
 * (softmax, SiLU, the sigmoid gates): every kernel table calls it, and its
 * variants (baseline, AVX2, AVX-512) give the same bits, so nothing
 * depends on the table, the CPU's vector width or the thread count. */
void sc_expf_n(const float *x, float *y, int n);
/* Variant v (0 baseline, 1 AVX2, 2 AVX-512) of sc_expf_n's loop, x and y
 * not overlapping; NULL where this build or CPU has none (tests compare
 * them). */
typedef void (*sc_expf_fn)(const float *x, float *y, int n);
/* One value, the same bits: sc_kernels.expf, so that the generated code's
 * SiLU, sigmoid and SwiGLU agree with the kernels' (fused == unfused). */
float sc_expf1(float x);
sc_expf_fn sc_expf_variant(int v);

/* The portable loops (kernels.c), always there. */
extern const sc_kern_ops sc_kern_portable;
/* Defined in kernels_avx2.c; all hooks NULL when that file was built
 * without -mavx2 -mfma -mf16c (then sc_kernels_init falls back to
 * portable). */
extern const sc_kern_ops sc_kern_avx2;
/* kernels_avx512.c (-mavx512f -mavx512bw -mavx512vl), kernels_neon.c and
 * kernels_neon_dotprod.c (AArch64, the latter -march=armv8.2-a+dotprod):
 * likewise all NULL where their target features were not compiled in. */
extern const sc_kern_ops sc_kern_avx512;
extern const sc_kern_ops sc_kern_avx512vnni;    /* kernels_avx512vnni.c */
extern const sc_kern_ops sc_kern_avx512vnni256; /* kernels_avx512vnni256.c */
/* The ends every attn_row shares (kernels.c): the softmax of a score row
 * in place (max subtracted, sc_expf_n, summed in key order; returns the
 * sum), and the value columns c0..hd one by one, each an fmaf chain over
 * the keys in order times inv (the columns past the vector width). */
float sc_softmax_row(float *s, int n);
void sc_attn_value_cols(const float *s, const float *vc, size_t ld, int lo, int n, int cap, int c0, int hd,
                        float inv, float *y);
/* kernels_avx2.c's attn_row (the AVX-512 tables have their own at twice
 * the width: there is no bit contract between attention and the other
 * hooks, nor across tables). */
void sc_attn_row_avx2(const float *q, const float *kc, const float *vc, size_t ld, int lo, int n, int cap,
                      int hd, float scale, float *s, float *y);
void sc_attn_rows_avx2(const float *q, int ldq, int nq, const float *kc, const float *vc, size_t ld, int lo,
                       const int *n, int cap, int hd, float scale, float *s, int lds, float *y, int ldy);
extern const sc_kern_ops sc_kern_neon;
extern const sc_kern_ops sc_kern_neon_dotprod;
/* The inner loops of a named ISA when this build and CPU run them, else
 * NULL (tests compare each one's quantize_q8 with the portable one). */
const sc_kern_ops *sc_kern_ops_isa(const char *isa);

#endif /* SC_KERNELS_H */
