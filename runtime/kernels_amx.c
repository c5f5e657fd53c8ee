/*
 * kernels_amx.c — bf16 GEMM on Intel AMX tiles (kernels.h, "bf16
 * activations"): the pieces kernels.c's driver calls when a bf16 linear
 * may round its activations to bf16 and the CPU grants the tile state.
 *
 * The product is computed transposed: C^T[r, t] = sum_k W[r, k] x[t, k],
 * so the weights are the A operand, loaded straight from their row-major
 * bf16 rows (16 rows of 32 elements per tile), and the activations are
 * the B operand, converted to bf16 (round to nearest even) and packed once
 * per call in the VNNI order tdpbf16ps reads: for a block of 16 tokens
 * and 32 columns k0.., row i of the tile holds, for each token t, the
 * pair x[t, k0 + 2i], x[t, k0 + 2i + 1].  A 2 x 2 block of tiles (32 rows
 * x 32 tokens, four accumulators, two A and two B tiles: all eight) runs
 * over the whole row, products exact in f32, accumulated in f32 in the
 * order the hardware uses (pairs, then 32-column blocks in order).
 *
 * Without AMX, AVX512-BF16's vdpbf16ps (sc_bf16dp_conv_tile): tokens in
 * the vector lanes, each weight pair broadcast from its row-major row, so
 * the weights are not repacked; the activations are packed transposed
 * ([column pair][token], sc_bf16dp_pack_convt), which makes a causal
 * conv's im2col rows unnecessary (a linear is a conv of one tap).  Each
 * output element is a chain of f32 accumulations over the column pairs
 * in order (other bits than the tiles' order, the same bits for any T,
 * thread count or blocking).  On a CPU whose vdpbf16ps runs at twice the
 * f32 FMA rate (Zen 4/5) this doubles the ceiling of the f32 GEMM.
 *
 * Compiled with -mamx-tile -mamx-bf16 -mavx512bf16 -mavx512f -mavx512bw
 * (CMakeLists.txt) on x86-64 when the compiler has them; elsewhere every
 * function says "not available".  Linux grants the tile data state on
 * request (arch_prctl(ARCH_REQ_XCOMP_PERM)); sc_amx_usable asks once per
 * process.  Nothing here runs before a *_usable check said yes.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels_amx.h"

#if defined(__x86_64__) && defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BW__) && \
    defined(__AVX512BF16__)
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int amx_ok;

static void amx_probe(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
  const int tile = (d >> 24) & 1, bf16 = (d >> 22) & 1;
  if (!tile || !bf16) return;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return; /* OSXSAVE */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return; /* XTILECFG, XTILEDATA enabled by the OS */
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) return;
  amx_ok = 1;
}

int sc_amx_usable(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, amx_probe);
  return amx_ok;
}

static int dp_ok;

/* AVX512-BF16 with AVX512-BW, and the OS saving the zmm state. */
static void dp_probe(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((b >> 16) & 1) || !((b >> 30) & 1)) return; /* F, BW */
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d) || !((a >> 5) & 1)) return;                       /* BF16 */
  if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) return;                                /* OSXSAVE */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  dp_ok = (lo & 0xe6) == 0xe6; /* SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM */
}

/* Asked once per process: cpuid traps to the hypervisor in a VM. */
int sc_bf16dp_usable(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, dp_probe);
  return dp_ok;
}

/* Palette 1: tiles 0-3 the accumulators (16 rows x 16 f32), 4-5 the
 * weights (16 rows x 32 bf16), 6-7 the activations (16 pair rows x 16
 * tokens x 2 bf16): every tile 16 rows of 64 bytes. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileCfg;

void sc_amx_begin(void) {
  TileCfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int i = 0; i < 8; i++) {
    cfg.colsb[i] = 64;
    cfg.rows[i] = 16;
  }
  /* gcc 12 does not see _tile_loadconfig read cfg and drops the stores
   * above without this */
  __asm__ volatile("" : : "m"(cfg) : "memory");
  _tile_loadconfig(&cfg);
}

void sc_amx_end(void) { _tile_release(); }

/* 16 floats -> 16 bf16 bit patterns, round to nearest even (NaN stays a
 * quiet NaN), as the 16 words of a 256-bit vector. */
static inline __m256i to_bf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, _mm512_set1_epi32(0x00400000)));
  return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

static inline void transpose16(__m512 v[16]);

/* One packed block: token t's 32 columns at src[t] (NULL: zeros) as 16
 * bf16 pairs; transposed, row i of the tile is pair i of the 16 tokens. */
static inline void pack_block(const float *const src[16], uint16_t *out) {
  __m512 v[16];
  for (int t = 0; t < 16; t++) {
    if (src[t]) {
      const __m512i p = _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16(_mm512_loadu_ps(src[t]))),
                                           to_bf16(_mm512_loadu_ps(src[t] + 16)), 1);
      v[t] = _mm512_castsi512_ps(p);
    } else {
      v[t] = _mm512_setzero_ps();
    }
  }
  transpose16(v);
  float *dst = (float *)out;
  for (int i = 0; i < 16; i++) _mm512_store_ps(dst + 16 * i, v[i]);
}

void sc_amx_pack(const float *x, int ldx, int T, int cols, int tb0, int tb1, uint16_t *xp) {
  const int nkb = cols / 32;
  const float *src[16];
  for (int tb = tb0; tb < tb1; tb++)
    for (int kb = 0; kb < nkb; kb++) {
      for (int t = 0; t < 16; t++) {
        const int tt = tb * 16 + t;
        src[t] = tt < T ? x + (size_t)tt * ldx + kb * 32 : NULL;
      }
      pack_block(src, xp + ((size_t)tb * nkb + kb) * 512);
    }
}

void sc_amx_pack_conv(const float *state, int S, const float *x, int ldx, int r0, int T, int C, int k, int d,
                      int tb0, int tb1, uint16_t *xp) {
  const int nkb = k * C / 32;
  const float *src[16];
  for (int tb = tb0; tb < tb1; tb++)
    for (int kb = 0; kb < nkb; kb++) {
      const int j = kb * 32 / C, c0 = kb * 32 % C; /* tap, first channel */
      for (int t = 0; t < 16; t++) {
        const int tt = tb * 16 + t, row = r0 + tt + j * d; /* row of [state; x] */
        src[t] = tt >= T ? NULL : (row < S ? state + (size_t)row * C : x + (size_t)(row - S) * ldx) + c0;
      }
      pack_block(src, xp + ((size_t)tb * nkb + kb) * 512);
    }
}

void sc_amx_tile(const uint16_t *w, size_t ldw, const uint16_t *b0, const uint16_t *b1, int nkb,
                 float *c) {
  const size_t stride = ldw * sizeof(uint16_t);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int kb = 0; kb < nkb; kb++) {
    _tile_loadd(4, w + (size_t)kb * 32, stride);
    _tile_loadd(5, w + 16 * ldw + (size_t)kb * 32, stride);
    _tile_loadd(6, b0 + (size_t)kb * 512, 64);
    _tile_loadd(7, b1 + (size_t)kb * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 32 * sizeof(float));
  _tile_stored(1, c + 16, 32 * sizeof(float));
  _tile_stored(2, c + 16 * 32, 32 * sizeof(float));
  _tile_stored(3, c + 16 * 32 + 16, 32 * sizeof(float));
}

/* A causal conv on vdpbf16ps without its im2col rows: the source rows
 * are packed once, transposed (row cp of xt: channel pair cp of the
 * tokens in order), and the column pair j*C/2 + cp of output token t is
 * then xt[cp, t + j*d]: sixteen consecutive tokens are one load at any
 * offset.  The chain runs over the pairs in the im2col order. */
void sc_bf16dp_pack_convt(const float *state, int S, const float *x, int ldx, int r0, int n, int C, int cp0,
                          int cp1, int sa, int sb, uint32_t *xt, int ldt) {
  for (int cb = cp0; cb < cp1; cb += 16) { /* 16 pairs: 32 channels */
    for (int s0 = sa; s0 < sb; s0 += 16) {
      /* token t's 32 channels as 16 pairs, then transposed: vector i is
       * pair cb + i of the 16 tokens.  vcvtne2ps2bf16 rounds to nearest
       * even and flushes denormal inputs, which vdpbf16ps would treat as
       * zero anyway: the products are those of to_bf16's pairs. */
      __m512 v[16];
      for (int t = 0; t < 16; t++) {
        const int s = s0 + t, row = r0 + s;
        if (s >= n) {
          v[t] = _mm512_setzero_ps();
          continue;
        }
        const float *p = (row < S ? state + (size_t)row * C : x + (size_t)(row - S) * ldx) + 2 * cb;
        v[t] = (__m512)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + 16), _mm512_loadu_ps(p));
      }
      transpose16(v);
      for (int i = 0; i < 16; i++) _mm512_storeu_ps((float *)(xt + (size_t)(cb + i) * ldt + s0), v[i]);
    }
  }
}

/* R weight rows x V blocks of 16 tokens over the column pairs of tap j,
 * channel pairs cp0..cp1: acc[r][v] lanes are tokens, started from c (or
 * zero for the first block) and left in c, so the chain over the pairs
 * is the same whatever the blocking; each pair w[r, p] is broadcast. */
#define DPC_BODY(R, V)                                                                      \
  do {                                                                                      \
    __m512 acc[R][V];                                                                       \
    for (int r = 0; r < R; r++)                                                             \
      for (int v = 0; v < V; v++)                                                           \
        acc[r][v] = first ? _mm512_setzero_ps() : _mm512_load_ps(c + (r0 + r) * 32 + 16 * v); \
    const uint32_t *wr[R];                                                                  \
    for (int r = 0; r < R; r++) wr[r] = (const uint32_t *)(w + (size_t)(r0 + r) * ldw) + pj; \
    for (int cp = cp0; cp < cp1; cp++) {                                                    \
      __m512bh xv[V];                                                                       \
      for (int v = 0; v < V; v++) xv[v] = (__m512bh)_mm512_loadu_si512(xj + (size_t)cp * ldt + 16 * v); \
      for (int r = 0; r < R; r++) {                                                         \
        const __m512bh wb = (__m512bh)_mm512_set1_epi32((int)wr[r][cp]);                    \
        for (int v = 0; v < V; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], wb, xv[v]);     \
      }                                                                                     \
    }                                                                                       \
    for (int r = 0; r < R; r++)                                                             \
      for (int v = 0; v < V; v++) _mm512_store_ps(c + (r0 + r) * 32 + 16 * v, acc[r][v]);   \
  } while (0)

/* Column pairs per block: the block's activations for 32 tokens (16 KB)
 * stay in L1 while every row pass reads them. */
#define DP_KB 128

void sc_bf16dp_conv_tile(const uint16_t *w, size_t ldw, const uint32_t *xt, size_t ldt, int t0, int C, int k,
                         int d, int nr, int nt, float *c) {
  const int hc = C / 2;
  for (int j = 0; j < k; j++) {
    const uint32_t *xj = xt + t0 + j * d;
    const int pj = j * hc;
    for (int cp0 = 0; cp0 < hc; cp0 += DP_KB) {
      const int cp1 = hc - cp0 < DP_KB ? hc : cp0 + DP_KB, first = j == 0 && cp0 == 0;
      if (nt > 16) {
        for (int r0 = 0; r0 < nr; r0 += 8) DPC_BODY(8, 2);
      } else {
        for (int r0 = 0; r0 < nr; r0 += 16) DPC_BODY(16, 1);
      }
    }
  }
}

/* v[i][j] -> v[j][i] for a 16 x 16 block of 32-bit elements. */
static inline void transpose16(__m512 v[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  /* u[4i + j], 128-bit lane L: rows 4i..4i+3 of column 4L + j */
  for (int i = 0; i < 4; i++) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int j = 0; j < 4; j++) {
    const __m512 lo01 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44), hi01 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xee);
    const __m512 lo23 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44),
                 hi23 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xee);
    v[j] = _mm512_shuffle_f32x4(lo01, lo23, 0x88);
    v[4 + j] = _mm512_shuffle_f32x4(lo01, lo23, 0xdd);
    v[8 + j] = _mm512_shuffle_f32x4(hi01, hi23, 0x88);
    v[12 + j] = _mm512_shuffle_f32x4(hi01, hi23, 0xdd);
  }
}

void sc_amx_store(const float *c, int nr, int nt, const float *bias, int acc, float *y, size_t ldy) {
  for (int rh = 0; rh < 2 && 16 * rh < nr; rh++) {
    const int n = nr - 16 * rh < 16 ? nr - 16 * rh : 16;
    const __mmask16 m = (__mmask16)((1u << n) - 1);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(m, bias + 16 * rh) : _mm512_setzero_ps();
    for (int th = 0; th < 2 && 16 * th < nt; th++) {
      __m512 v[16];
      for (int i = 0; i < 16; i++) v[i] = _mm512_load_ps(c + (16 * rh + i) * 32 + 16 * th);
      transpose16(v);
      const int ntt = nt - 16 * th < 16 ? nt - 16 * th : 16;
      for (int t = 0; t < ntt; t++) {
        float *dst = y + (size_t)(16 * th + t) * ldy + 16 * rh;
        __m512 val = _mm512_add_ps(v[t], b);
        if (acc) val = _mm512_add_ps(_mm512_maskz_loadu_ps(m, dst), val);
        _mm512_mask_storeu_ps(dst, m, val);
      }
    }
  }
}

#else /* no AMX in this build */

int sc_amx_usable(void) { return 0; }
int sc_bf16dp_usable(void) { return 0; }
void sc_bf16dp_pack_convt(const float *state, int S, const float *x, int ldx, int r0, int n, int C, int cp0,
                          int cp1, int sa, int sb, uint32_t *xt, int ldt) {
  (void)state, (void)S, (void)x, (void)ldx, (void)r0, (void)n, (void)C, (void)cp0, (void)cp1, (void)sa, (void)sb;
  (void)xt, (void)ldt;
}
void sc_bf16dp_conv_tile(const uint16_t *w, size_t ldw, const uint32_t *xt, size_t ldt, int t0, int C, int k,
                         int d, int nr, int nt, float *c) {
  (void)w, (void)ldw, (void)xt, (void)ldt, (void)t0, (void)C, (void)k, (void)d, (void)nr, (void)nt, (void)c;
}
void sc_amx_begin(void) {}
void sc_amx_end(void) {}
void sc_amx_pack(const float *x, int ldx, int T, int cols, int tb0, int tb1, uint16_t *xp) {
  (void)x, (void)ldx, (void)T, (void)cols, (void)tb0, (void)tb1, (void)xp;
}
void sc_amx_pack_conv(const float *state, int S, const float *x, int ldx, int r0, int T, int C, int k, int d,
                      int tb0, int tb1, uint16_t *xp) {
  (void)state, (void)S, (void)x, (void)ldx, (void)r0, (void)T, (void)C, (void)k, (void)d, (void)tb0, (void)tb1;
  (void)xp;
}
void sc_amx_tile(const uint16_t *w, size_t ldw, const uint16_t *b0, const uint16_t *b1, int nkb,
                 float *c) {
  (void)w, (void)ldw, (void)b0, (void)b1, (void)nkb, (void)c;
}
void sc_amx_store(const float *c, int nr, int nt, const float *bias, int acc, float *y, size_t ldy) {
  (void)c, (void)nr, (void)nt, (void)bias, (void)acc, (void)y, (void)ldy;
}

#endif
