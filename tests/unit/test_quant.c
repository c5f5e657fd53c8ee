/*
 * test_quant.c — the quantized weight bands.
 *
 *  1. f16 conversions: every f16 survives f16 -> f32 -> f16; rounding to
 *     nearest even, subnormals, overflow.
 *  2. The quantizers give GGML's bytes: blocks recorded from gguf-py's
 *     numpy reference (gguf.quants, which mirrors quantize_row_q8_0_ref /
 *     quantize_row_q4_0_ref) for a fixed input.
 *  3. Kernels: q8_0 / q4_0 linear against a double-precision dot of the
 *     dequantized weights with the quantized activations; every ISA that
 *     runs here quantizes activations to the portable bits; T=1 == T=3 and
 *     one row alone == rows together, bit for bit; swiglu == silu(gate) *
 *     up exactly; NEON with and without dotprod give the same bits.
 *  4. Accuracy gates on the tiny checkpoints (decode path, every trace row):
 *     cosine of the logits against the f32 build >= 0.999 for bf16 and
 *     q8_0, >= 0.99 for q4_0; bf16 greedy tokens equal the HF trace.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kernels.h"
#ifndef SC_KERNELS_ONLY
#include "build.h"
#include "parity_util.h"
#include "speechc.h"
#endif

/* ---- 1. f16 ------------------------------------------------------------- */

static void test_f16(void) {
  for (uint32_t h = 0; h < 65536; h++) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* NaN payloads */
    float f = sc_f16_to_f32((uint16_t)h);
    CHECK_MSG(sc_f32_to_f16(f) == h, "f16 %04x -> %g -> %04x", h, f, sc_f32_to_f16(f));
  }
  CHECK(sc_f16_to_f32(0x3c00) == 1.0f);
  CHECK(sc_f16_to_f32(0x0001) == 0x1.0p-24f);       /* smallest subnormal */
  CHECK(sc_f16_to_f32(0xfbff) == -65504.0f);
  CHECK(sc_f32_to_f16(1.0f + 0x1.0p-11f) == 0x3c00); /* tie: to even (down) */
  CHECK(sc_f32_to_f16(1.0f + 0x3.0p-11f) == 0x3c02); /* tie: to even (up) */
  CHECK(sc_f32_to_f16(0x1.0p-25f) == 0x0000);        /* tie below the subnormal: even */
  CHECK(sc_f32_to_f16(0x1.8p-25f) == 0x0001);
  CHECK(sc_f32_to_f16(65520.0f) == 0x7c00);          /* rounds past max: inf */
  CHECK(sc_f32_to_f16(-1e9f) == 0xfc00);
  CHECK((sc_f32_to_f16(NAN) & 0x7e00) == 0x7e00);
}

/* ---- 2. GGML's bytes ---------------------------------------------------- */

/* x[i] = ((i * 37) % 101 - 50) / 16 * 2^(i/32 - 2), 128 values (4 blocks),
 * all exact in f32 and numpy alike.  The expected bytes are in
 * test_quant_golden.h, which says how they were made. */
static float ggml_input(int i) {
  return (float)((i * 37) % 101 - 50) / 16.0f * ldexpf(1.0f, i / 32 - 2);
}

#include "test_quant_golden.h"

static void test_ggml_bytes(void) {
  float x[128];
  for (int i = 0; i < 128; i++) x[i] = ggml_input(i);
  unsigned char q8[4 * SC_Q8_0_BLOCK], q4[4 * SC_Q4_0_BLOCK];
  sc_quantize_row_q8_0(x, 128, q8);
  sc_quantize_row_q4_0(x, 128, q4);
  for (int i = 0; i < (int)sizeof q8; i++)
    CHECK_MSG(q8[i] == golden_q8_0[i], "q8_0 byte %d: %02x, GGML %02x", i, q8[i], golden_q8_0[i]);
  for (int i = 0; i < (int)sizeof q4; i++)
    CHECK_MSG(q4[i] == golden_q4_0[i], "q4_0 byte %d: %02x, GGML %02x", i, q4[i], golden_q4_0[i]);
  /* and dequantization inverts the layout: within half a step of x */
  float y[128];
  sc_dequantize_row(SC_W_Q8_0, q8, 128, y);
  for (int i = 0; i < 128; i++) {
    float d = sc_f16_to_f32((uint16_t)(q8[i / 32 * 34] | q8[i / 32 * 34 + 1] << 8));
    /* half a step, plus the f16 rounding of d times |q| <= 127 */
    CHECK_MSG(fabsf(y[i] - x[i]) <= fabsf(d) * (0.5f + 127.0f / 2048) + 1e-6f, "q8_0 dequant %d: %g vs %g", i, y[i], x[i]);
  }
  unsigned char q4p[sizeof q4];
  sc_pack_row_q4_0(q4, 128, q4p); /* four blocks: no whole group, GGML's order */
  CHECK(!memcmp(q4, q4p, sizeof q4));
  sc_dequantize_row(SC_W_Q4_0, q4p, 128, y);
  for (int i = 0; i < 128; i++) {
    float d = sc_f16_to_f32((uint16_t)(q4[i / 32 * 18] | q4[i / 32 * 18 + 1] << 8));
    /* a whole step: the side opposite the extreme value stops at 7 d */
    CHECK_MSG(fabsf(y[i] - x[i]) <= fabsf(d) * (1.0f + 8.0f / 2048) + 1e-6f, "q4_0 dequant %d: %g vs %g", i, y[i], x[i]);
  }
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

/* The CPU's q4_0 order (kernels.h), from its description: 19 blocks = two
 * whole groups and three GGML blocks, the same bytes rearranged, and the
 * same numbers as GGML's decoding of the original. */
static void test_q4_0_groups(void) {
  enum { NB = 19, C = NB * 32 };
  float x[C], y[C];
  unsigned char g[NB * SC_Q4_0_BLOCK], p[NB * SC_Q4_0_BLOCK];
  for (int i = 0; i < C; i++) x[i] = ggml_input(i) * (float)(1 + i % 5);
  sc_quantize_row_q4_0(x, C, g);
  CHECK(sc_band_row_bytes(SC_W_Q4_0, C) == sizeof p);
  sc_pack_row_q4_0(g, C, p);
  int bad = 0;
  for (int gr = 0; gr < 2; gr++)
    for (int j = 0; j < 8; j++) {
      const unsigned char *blk = g + (8 * gr + j) * SC_Q4_0_BLOCK, *grp = p + gr * 144;
      bad += grp[2 * j] != blk[0] || grp[2 * j + 1] != blk[1];
      for (int c = 0; c < 4; c++)
        for (int i = 0; i < 4; i++) bad += grp[16 + 32 * c + 4 * j + i] != blk[2 + 4 * c + i];
    }
  CHECK_MSG(!bad, "%d bytes of the two whole groups out of place", bad);
  CHECK(!memcmp(p + 2 * 144, g + 16 * SC_Q4_0_BLOCK, 3 * SC_Q4_0_BLOCK));
  sc_dequantize_row(SC_W_Q4_0, p, C, y);
  for (int b = 0; b < NB; b++) {
    const unsigned char *blk = g + b * SC_Q4_0_BLOCK;
    const float d = sc_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    for (int k = 0; k < 16; k++) {
      CHECK_MSG(same_bits(y[32 * b + k], d * (float)((blk[2 + k] & 15) - 8)), "q4_0 block %d element %d", b, k);
      CHECK_MSG(same_bits(y[32 * b + 16 + k], d * (float)((blk[2 + k] >> 4) - 8)), "q4_0 block %d element %d", b,
                16 + k);
    }
  }
}

/* The CPU's q8_0 order (kernels.h), from its description: 19 blocks = two
 * whole groups and three GGML blocks, the same bytes rearranged, and the
 * same numbers as GGML's decoding of the original. */
static void test_q8_0_groups(void) {
  enum { NB = 19, C = NB * 32 };
  float x[C], y[C];
  unsigned char g[NB * SC_Q8_0_BLOCK], p[NB * SC_Q8_0_BLOCK];
  for (int i = 0; i < C; i++) x[i] = ggml_input(i) * (float)(1 + i % 5);
  sc_quantize_row_q8_0(x, C, g);
  CHECK(sc_band_row_bytes(SC_W_Q8_0, C) == sizeof p);
  sc_pack_row_q8_0(g, C, p);
  int bad = 0;
  for (int gr = 0; gr < 2; gr++)
    for (int j = 0; j < 8; j++) {
      const unsigned char *blk = g + (8 * gr + j) * SC_Q8_0_BLOCK, *grp = p + gr * SC_Q8_GROUP_BYTES;
      bad += grp[2 * j] != blk[0] || grp[2 * j + 1] != blk[1];
      for (int k = 0; k < 8; k++) /* chunk k: elements 4k..4k+3 of each block */
        for (int i = 0; i < 4; i++) bad += grp[16 + 32 * k + 4 * j + i] != blk[2 + 4 * k + i];
    }
  CHECK_MSG(!bad, "%d bytes of the two whole groups out of place", bad);
  CHECK(!memcmp(p + 2 * SC_Q8_GROUP_BYTES, g + 16 * SC_Q8_0_BLOCK, 3 * SC_Q8_0_BLOCK));
  sc_dequantize_row(SC_W_Q8_0, p, C, y);
  for (int b = 0; b < NB; b++) {
    const unsigned char *blk = g + b * SC_Q8_0_BLOCK;
    const float d = sc_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    for (int k = 0; k < 32; k++)
      CHECK_MSG(same_bits(y[32 * b + k], d * (float)(int8_t)blk[2 + k]), "q8_0 block %d element %d", b, k);
  }
}

/* ---- 3. kernels --------------------------------------------------------- */

/* Every consumer of frand() seeds it first (rng_seed), so what it draws
 * never depends on how many ISAs the CPU ran before it: the random
 * checkpoint of section 4 was once a different checkpoint on AVX-512
 * machines (three ISAs' kernel tests before it) than on AVX2 ones (two). */
static uint64_t rng_state;
static void rng_seed(uint64_t seed) { rng_state = 0x243f6a8885a308d3ull ^ (seed * 0x9e3779b97f4a7c15ull); }
static float frand(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}


enum { ROWS = 11, COLS = 608, T3 = 3, LDX = COLS + 7, LDY = 2 * ROWS + 1 };

static void test_kernels_band(const sc_kernels *K, const sc_kernels *P, int wtype) {
  rng_seed(1);
  static float wf[2 * ROWS * COLS], x[T3 * LDX], bias[ROWS], wr_all[ROWS * COLS];
  static unsigned char w[2 * ROWS * COLS * 2];
  size_t rb = sc_band_row_bytes(wtype, COLS);
  for (int i = 0; i < 2 * ROWS * COLS; i++) wf[i] = frand() * (1 + i % 7);
  for (int i = 0; i < T3 * LDX; i++) x[i] = frand() * (i % 13 == 0 ? 4 : 1);
  for (int i = 0; i < ROWS; i++) bias[i] = frand();
  for (int r = 0; r < 2 * ROWS; r++)
    if (wtype == SC_W_Q8_0) { /* 19 blocks: two whole groups and three
                               * GGML blocks (kernels.h) */
      unsigned char ggml[COLS / 32 * SC_Q8_0_BLOCK];
      sc_quantize_row_q8_0(wf + r * COLS, COLS, ggml);
      sc_pack_row_q8_0(ggml, COLS, w + r * rb);
    } else { /* 19 blocks: two whole groups (even and odd accumulators) and
              * three GGML blocks (kernels.h) */
      unsigned char ggml[COLS / 32 * SC_Q4_0_BLOCK];
      sc_quantize_row_q4_0(wf + r * COLS, COLS, ggml);
      sc_pack_row_q4_0(ggml, COLS, w + r * rb);
    }

  /* activations: the ISA gives the portable bits */
  const int nb = COLS / 32;
  const sc_kern_ops *ops = sc_kern_ops_isa(sc_kernels_isa(K));
  CHECK(ops != NULL);
  if (ops)
    for (int t = 0; t < T3; t++) {
      int8_t qa[COLS], qp[COLS];
      float da[COLS / 32], dp[COLS / 32];
      unsigned char pa[COLS * 2], pp[COLS * 2];
      ops->quantize_q8(x + t * LDX, nb, qa, da, pa);
      sc_kern_portable.quantize_q8(x + t * LDX, nb, qp, dp, pp);
      CHECK_MSG(!memcmp(qa, qp, sizeof qa) && !memcmp(da, dp, sizeof da) &&
                    !memcmp(pa, pp, (size_t)(nb / 8) * SC_Q4_VIEW_GROUP),
                "%s and portable quantize activations row %d differently", ops->name, t);
      /* the q4_0 view is the same numbers (kernels.h) */
      for (int g = 0; g < nb / 8; g++) {
        const unsigned char *o = pa + g * SC_Q4_VIEW_GROUP;
        int32_t s8[8];
        float d[8];
        memcpy(s8, o + 256, 32);
        memcpy(d, o + 288, 32);
        for (int c = 0; c < 4; c++)
          for (int h = 0; h < 2; h++)
            for (int j = 0; j < 8; j++)
              for (int i = 0; i < 4; i++)
                CHECK((int8_t)o[128 * h + 32 * c + 4 * j + i] == qa[(8 * g + j) * 32 + 16 * h + 4 * c + i]);
        for (int j = 0; j < 8; j++) {
          int sum = 0;
          for (int k = 0; k < 32; k++) sum += qa[(8 * g + j) * 32 + k];
          CHECK(s8[j] == 8 * sum);
          CHECK(same_bits(d[j], da[8 * g + j]));
        }
      }
    }

  for (int pass = 0; pass < 2; pass++) {
    const sc_kernels *k = pass ? P : K;
    float y[T3 * LDY], y1[LDY];
    for (int i = 0; i < T3 * LDY; i++) y[i] = 0.5f;
    k->linear(k->ctx, wtype, w, bias, x, LDX, y, LDY, T3, ROWS, COLS, 1);
    for (int t = 0; t < T3; t++) {
      /* reference, in doubles: the dequantized weights against the
       * activations as the kernels quantize them (d_x * q_x) */
      int8_t xq[COLS];
      float xd[COLS / 32];
      unsigned char xp[COLS * 2];
      sc_kern_portable.quantize_q8(x + t * LDX, nb, xq, xd, xp);
      for (int r = 0; r < ROWS; r++) {
        float wr[COLS];
        sc_dequantize_row(wtype, w + r * rb, COLS, wr);
        memcpy(wr_all + r * COLS, wr, sizeof wr);
        double s = 0, m = 0;
        for (int c = 0; c < COLS; c++) {
          double xv = (double)xd[c / 32] * xq[c];
          s += (double)wr[c] * xv;
          m += fabs((double)wr[c] * xv);
        }
        double want = 0.5 + s + bias[r];
        CHECK_MSG(fabs(y[t * LDY + r] - want) <= 1e-5 * (m + fabs(bias[r]) + 0.5), "%s band %d t %d r %d: %.9g vs %.9g",
                  sc_kernels_isa(k), wtype, t, r, y[t * LDY + r], want);
        /* and it is the product with x itself, to quantization error:
         * each activation within half its block's step d_x of x, each
         * weight within |w - dequantized w| (plus the rounding above) */
        double exact = 0.5 + bias[r], qerr = 1e-5 * (m + fabs(bias[r]) + 0.5);
        for (int c = 0; c < COLS; c++) {
          exact += (double)wf[r * COLS + c] * x[t * LDX + c];
          qerr += fabs((double)wr_all[r * COLS + c]) * 0.5 * xd[c / 32] +
                  fabs((double)wr_all[r * COLS + c] - wf[r * COLS + c]) * fabs((double)x[t * LDX + c]);
        }
        CHECK_MSG(fabs(y[t * LDY + r] - exact) <= qerr,
                  "%s band %d t %d r %d far from the f32 product: %g vs %g (bound %g)", sc_kernels_isa(k), wtype,
                  t, r, y[t * LDY + r], exact, qerr);
      }
      /* T=1 gives the T=3 bits */
      for (int i = 0; i < LDY; i++) y1[i] = 0.5f;
      k->linear(k->ctx, wtype, w, bias, x + t * LDX, LDX, y1, LDY, 1, ROWS, COLS, 1);
      for (int r = 0; r < ROWS; r++)
        CHECK_MSG(same_bits(y1[r], y[t * LDY + r]), "%s band %d T=1 vs T=3 t %d r %d", sc_kernels_isa(k), wtype, t, r);
    }
    /* one row alone (the 1-row path) gives the bits of the 4-row path */
    for (int r = 0; r < ROWS; r++) {
      float yr = 0.5f;
      k->linear(k->ctx, wtype, w + r * rb, bias + r, x, LDX, &yr, 1, 1, 1, COLS, 1);
      CHECK_MSG(same_bits(yr, y[r]), "%s band %d row %d alone: %g vs %g", sc_kernels_isa(k), wtype, r, yr, y[r]);
    }
    /* swiglu == silu(gate) * up, bit for bit */
    float g[T3 * LDY], u[T3 * LDY], sw[T3 * LDY];
    k->linear_swiglu(k->ctx, wtype, w, x, LDX, sw, LDY, T3, ROWS, COLS);
    k->linear(k->ctx, wtype, w, NULL, x, LDX, g, LDY, T3, ROWS, COLS, 0);
    k->linear(k->ctx, wtype, w + ROWS * rb, NULL, x, LDX, u, LDY, T3, ROWS, COLS, 0);
    for (int t = 0; t < T3; t++)
      for (int r = 0; r < ROWS; r++) {
        float gv = g[t * LDY + r], want = gv / (1.0f + sc_expf1(-gv)) * u[t * LDY + r];
        CHECK_MSG(same_bits(sw[t * LDY + r], want), "%s band %d swiglu t %d r %d", sc_kernels_isa(k), wtype, t, r);
      }
  }
  /* cols not a multiple of 32: an error, not garbage */
  sc_kernel_ctx *c = K->ctx;
  float y = 0;
  K->linear(K->ctx, wtype, w, NULL, x, LDX, &y, 1, 1, 1, 40, 0);
  CHECK(c->failed);
  CHECK_CONTAINS(c->err, "need cols a multiple of 32 (value 40)");
  sc_kernel_ctx_clear(c);
}

#ifndef SC_KERNELS_ONLY
/* ---- 4. accuracy gates -------------------------------------------------- */

/* A well-conditioned random Qwen3 checkpoint, written here so that the
 * test needs no data file: weights ~ N(0, 0.02^2) (the initializer_range of
 * the published configs; sums of four uniforms), norm weights 1, f32.  The
 * committed HF checkpoints use std 0.2 at hidden 64 (gain ~1.6 per matmul),
 * which makes them chaotic: there any weight error is amplified layer by
 * layer, so their gates below are the measured floors, not the issue's. */
static int write_random_ckpt(const char *dir, uint64_t seed) {
  /* H = 288: q4_0 rows of nine blocks, one whole group and a GGML block
   * (kernels.h), in the embedding table and the GEMVs alike */
  enum { H = 288, I = 384, HD = 32, NH = 4, NKV = 2, L = 2, V = 512 };
  static const struct { const char *fmt; int rows, cols; } per_layer[] = {
      {"model.layers.%d.input_layernorm.weight", 0, H},
      {"model.layers.%d.post_attention_layernorm.weight", 0, H},
      {"model.layers.%d.self_attn.q_proj.weight", NH * HD, H},
      {"model.layers.%d.self_attn.k_proj.weight", NKV * HD, H},
      {"model.layers.%d.self_attn.v_proj.weight", NKV * HD, H},
      {"model.layers.%d.self_attn.o_proj.weight", H, NH * HD},
      {"model.layers.%d.self_attn.q_norm.weight", 0, HD},
      {"model.layers.%d.self_attn.k_norm.weight", 0, HD},
      {"model.layers.%d.mlp.gate_proj.weight", I, H},
      {"model.layers.%d.mlp.up_proj.weight", I, H},
      {"model.layers.%d.mlp.down_proj.weight", H, I},
  };
  char names[64][80];
  int rows[64], cols[64], n = 0;
  snprintf(names[n], 80, "model.embed_tokens.weight"), rows[n] = V, cols[n++] = H;
  for (int l = 0; l < L; l++)
    for (size_t k = 0; k < sizeof per_layer / sizeof *per_layer; k++) {
      snprintf(names[n], 80, per_layer[k].fmt, l);
      rows[n] = per_layer[k].rows, cols[n++] = per_layer[k].cols;
    }
  snprintf(names[n], 80, "model.norm.weight"), rows[n] = 0, cols[n++] = H;
  snprintf(names[n], 80, "lm_head.weight"), rows[n] = V, cols[n++] = H;
  char path[512], hdr[8192];
  rng_seed(seed);
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  if (!f) return 1;
  fprintf(f, "{\"model_type\": \"qwen3\", \"hidden_size\": %d, \"intermediate_size\": %d, "
          "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, "
          "\"head_dim\": %d, \"vocab_size\": %d, \"tie_word_embeddings\": false, "
          "\"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"max_position_embeddings\": 4096}\n",
          H, I, L, NH, NKV, HD, V);
  fclose(f);
  size_t len = 0, off = 0;
  len += (size_t)snprintf(hdr + len, sizeof hdr - len, "{");
  for (int i = 0; i < n; i++) {
    size_t bytes = (size_t)(rows[i] ? rows[i] : 1) * cols[i] * 4;
    if (rows[i])
      len += (size_t)snprintf(hdr + len, sizeof hdr - len, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d,%d],"
                              "\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i], rows[i], cols[i], off, off + bytes);
    else
      len += (size_t)snprintf(hdr + len, sizeof hdr - len, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%d],"
                              "\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i], cols[i], off, off + bytes);
    off += bytes;
  }
  len += (size_t)snprintf(hdr + len, sizeof hdr - len, "}");
  while (len % 8) hdr[len++] = ' ';
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (!(f = fopen(path, "wb"))) return 1;
  uint64_t hl = len;
  fwrite(&hl, 8, 1, f);
  fwrite(hdr, 1, len, f);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < (rows[i] ? rows[i] : 1) * cols[i]; k++) {
      float v = rows[i] ? 0.02f * 1.7320508f * (frand() + frand() + frand() + frand()) / 2.0f : 1.0f;
      fwrite(&v, 4, 1, f);
    }
  return fclose(f) != 0;
}

/* ---- the committed tiny checkpoints ------------------------------------- */

static const char *const models[] = {"qwen3_gqa2_hd32_tied", "qwen3_gqa4_hd16_bf16", "llama_gqa4_sharded",
                                     "qwen3_trained_tiny"};
static char tmpdir[64];

/* Build dir in band, decode toks one by one into rows [n, vocab]; when gen
 * is given, also greedy-generate n_gen tokens after the first n_prompt. */
static int run_band(const char *dir, const char *tag, DType band, const int32_t *toks, int n,
                    float *rows, int n_prompt, int32_t *gen, int n_gen) {
  char so[512];
  snprintf(so, sizeof so, "%s/%s_%s.so", tmpdir, tag, ir_dtype_name(band));
  BuildOpts o = build_defaults();
  o.model_dir = dir;
  o.out_path = so;
  o.band = band;
  o.quiet = 1;
  o.max_context = 64;
  sc_error err = {0};
  int rc = sc_build(&o, &err);
  CHECK_MSG(rc == 0, "build %s: %s", so, err.msg);
  if (rc) return 1;
  sc_model *m = NULL;
  sc_session *s = NULL;
  CHECK_MSG(sc_model_open(so, NULL, &m, &err) == 0, "%s", err.msg);
  if (!m) return 1;
  CHECK_MSG(sc_session_open(m, &s, &err) == 0, "%s", err.msg);
  if (!s) { sc_model_close(m); return 1; }
  int V = 0;
  for (int r = 0; r < n; r++) {
    CHECK_MSG(sc_decode(s, toks[r], &err) == 0, "%s", err.msg);
    const float *lg = sc_logits(s, &V);
    memcpy(rows + (size_t)r * V, lg, (size_t)V * 4);
  }
  if (gen) {
    sc_session_reset(s);
    sc_sample_params p = sc_sample_defaults();
    p.greedy = 1;
    int n_out = 0;
    CHECK_MSG(sc_generate(s, toks, n_prompt, n_gen, &p, -1, gen, &n_out, NULL, NULL, &err) == 0,
              "%s", err.msg);
  }
  sc_session_close(s);
  sc_model_close(m);
  return 0;
}

static double cosine(const float *a, const float *b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; i++) {
    ab += (double)a[i] * b[i];
    aa += (double)a[i] * a[i];
    bb += (double)b[i] * b[i];
  }
  return ab / sqrt(aa * bb);
}

static double worst_cosine(const float *got, const float *ref, int n, int V) {
  double worst = 1;
  for (int r = 0; r < n; r++) {
    double c = cosine(got + (size_t)r * V, ref + (size_t)r * V, V);
    if (c < worst || c != c) worst = c;
  }
  return worst;
}

static const DType bands[] = {DT_BF16, DT_Q8_0, DT_Q4_0};

/* The gates (bf16, q8_0 >= 0.999) on well-conditioned random
 * checkpoints.  q4_0 does not reach 0.99 on random Gaussian weights (its
 * per-weight error is ~8% of the weights' std, and nothing in random
 * logits dominates that noise), so its gate is a margin derived from many
 * seeds, not one machine's reading:
 *
 *   SPEECHC_QUANT_SEEDS=1-200 build/test_quant  (2026-12-01, Intel Xeon
 *   with AVX-512, default ISA avx2; 18 s)
 *   worst row over seeds 1..200: bf16 0.999964, q8_0 0.999539, q4_0 0.922819
 *
 * The test runs seeds 1..3 (each checkpoint is a function of its seed
 * alone, the same on every machine, and every ISA that runs gives the same
 * figure: checked below) and gates q4_0 at 0.92, under the worst of all 200
 * seeds, so no seed's draw decides it; seeds 1..3 sit 0.0165 above it
 * (0.943, 0.941, 0.9365).  bf16 and q8_0 keep the 0.999, which all
 * 200 seeds clear by 5e-4 or more. */
static void test_accuracy_random(int seed_lo, int seed_hi) {
  static const double gate[] = {0.999, 0.999, 0.92};
  enum { N = 48, V = 512 };
  int32_t toks[N];
  for (int i = 0; i < N; i++) toks[i] = (int32_t)((i * 7919 + 13) % V);
  float *ref = calloc((size_t)N * V, 4), *got = calloc((size_t)N * V, 4);
  double worst_of[3] = {1, 1, 1};
  for (int seed = seed_lo; seed <= seed_hi; seed++) {
    char dir[128], tag[32];
    snprintf(dir, sizeof dir, "%s/random%d", tmpdir, seed);
    snprintf(tag, sizeof tag, "random%d", seed);
    if (mkdir(dir, 0755) || write_random_ckpt(dir, (uint64_t)seed)) {
      CHECK_MSG(0, "cannot write %s", dir);
      break;
    }
    run_band(dir, tag, DT_F32, toks, N, ref, 0, NULL, 0);
    for (size_t bi = 0; bi < sizeof bands / sizeof *bands; bi++) {
      if (run_band(dir, tag, bands[bi], toks, N, got, 0, NULL, 0)) continue;
      double worst = worst_cosine(got, ref, N, V);
      printf("random std 0.02 seed %-3d %-5s worst logits cosine vs f32 over %d rows: %.6f (gate %.3f)\n",
             seed, ir_dtype_name(bands[bi]), N, worst, gate[bi]);
      CHECK_MSG(worst >= gate[bi], "random checkpoint seed %d %s: logits cosine %.6f < %.3f", seed,
                ir_dtype_name(bands[bi]), worst, gate[bi]);
      if (!(worst >= worst_of[bi])) worst_of[bi] = worst;
      /* the figure is the machine's only through the kernels, and every
       * ISA that runs here gives it (to rounding: f32 sums in another
       * order) */
      if (seed != seed_lo) continue;
      char isas[] = SC_KERNEL_ISAS;
      float *alt = calloc((size_t)N * V, 4), *alt_ref = calloc((size_t)N * V, 4);
      for (char *isa = strtok(isas, ","); isa; isa = strtok(NULL, ",")) {
        if (!sc_kern_ops_isa(isa)) continue;
        setenv("SPEECHC_ISA", isa, 1);
        run_band(dir, tag, DT_F32, toks, N, alt_ref, 0, NULL, 0);
        run_band(dir, tag, bands[bi], toks, N, alt, 0, NULL, 0);
        unsetenv("SPEECHC_ISA");
        double w = worst_cosine(alt, alt_ref, N, V);
        printf("  with SPEECHC_ISA=%-12s %.6f\n", isa, w);
        CHECK_MSG(fabs(w - worst) < 1e-4, "seed %d %s: SPEECHC_ISA=%s gives cosine %.6f, the default %.6f",
                  seed, ir_dtype_name(bands[bi]), isa, w, worst);
      }
      free(alt);
      free(alt_ref);
    }
  }
  printf("random std 0.02 seeds %d..%d worst: bf16 %.6f  q8_0 %.6f  q4_0 %.6f\n", seed_lo, seed_hi,
         worst_of[0], worst_of[1], worst_of[2]);
  free(ref);
  free(got);
}

/* The committed HF checkpoints.  qwen3_trained_tiny (make_trained.py: a
 * tiny Qwen3 trained on a Markov chain, so its logits are peaked like a real
 * model's) holds the gates: bf16 and q8_0 >= 0.999, q4_0 >= 0.99
 * (measured 0.999998 / 0.99992 / 0.9964).  The three random ones are
 * chaotic on purpose (init std 0.2, see make_llm.py): nothing in their
 * logits dominates the weight noise, so they are held at their measured
 * floors as regression guards: q8_0 0.9978..0.9984, q4_0 0.74..0.79, the
 * same as quantizing the weights and running in f32.  bf16 greedy tokens
 * equal the trace's everywhere.  These floors are not a machine's reading:
 * the checkpoints are committed files and every ISA gives the same figures
 * (the cross-ISA check above), so they move only when the code does. */
static void test_accuracy_traces(void) {
  static const double gate_trained[] = {0.999, 0.999, 0.99}, gate_random[] = {0.999, 0.997, 0.70};
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/data/llm/%s", models[mi]);
    const double *gate = strcmp(models[mi], "qwen3_trained_tiny") ? gate_random : gate_trained;
    Trace t;
    CHECK(trace_load(dir, &t) == 0);
    int32_t toks[128];
    for (int r = 0; r < t.n_rows && r < 128; r++)
      toks[r] = r < t.n_prompt ? t.prompt[r] : t.greedy[r - t.n_prompt];
    size_t n = (size_t)t.n_rows * t.vocab;
    float *ref = calloc(n, 4), *got = calloc(n, 4);
    int32_t gen[64];
    run_band(dir, models[mi], DT_F32, toks, t.n_rows, ref, 0, NULL, 0);
    for (size_t bi = 0; bi < sizeof bands / sizeof *bands; bi++) {
      memset(gen, 0xff, sizeof gen);
      if (run_band(dir, models[mi], bands[bi], toks, t.n_rows, got, t.n_prompt, gen, t.n_greedy)) continue;
      double worst = worst_cosine(got, ref, t.n_rows, t.vocab);
      printf("%-22s %-5s worst logits cosine vs f32 over %d rows: %.6f (gate %.3f)\n", models[mi],
             ir_dtype_name(bands[bi]), t.n_rows, worst, gate[bi]);
      CHECK_MSG(worst >= gate[bi], "%s %s: logits cosine %.6f < %.3f", models[mi],
                ir_dtype_name(bands[bi]), worst, gate[bi]);
      if (bands[bi] == DT_BF16)
        for (int i = 0; i < t.n_greedy; i++)
          CHECK_MSG(gen[i] == t.greedy[i], "%s bf16 greedy token %d: %d, trace %d", models[mi], i,
                    gen[i], t.greedy[i]);
    }
    free(ref);
    free(got);
    free(t.logits);
  }
}

#endif /* SC_KERNELS_ONLY */

/* NEON with and without dotprod: the same bits (kernels_neon.c), on
 * edge values too: +-127 activations against -128 / -127 weights; the
 * dots and the GEMM hooks (whose tiles run the same integer dots). */
static void test_neon_variants(void) {
  const sc_kern_ops *a = sc_kern_ops_isa("neon"), *b = sc_kern_ops_isa("neon-dotprod");
  if (!a || !b) return;
  enum { NB = 19, NT = 3 }; /* q4_0: up to two whole groups and a tail */
  static unsigned char w8[4 * NB * SC_Q8_0_BLOCK], w4[4 * NB * SC_Q4_0_BLOCK];
  float x[NT * NB * 32], xd[NT * NB], oa[4 * NT], ob[4 * NT];
  int8_t xq[NT * NB * 32];
  static unsigned char xp[NT * NB * 64];
  rng_seed(2);
  srand(2);
  for (int i = 0; i < NT * NB * 32; i++) x[i] = i % 5 == 0 ? (i & 1 ? -3.0f : 3.0f) : frand();
  for (size_t i = 0; i < sizeof w8; i++) w8[i] = (unsigned char)(i % 3 ? 0x80 + i % 2 : rand());
  /* q4_0 rows read as groups or GGML blocks depending on nb (kernels.h):
   * no byte may make an f16 Inf or NaN, wherever a scale is read */
  for (size_t i = 0; i < sizeof w4; i++) {
    unsigned char v;
    do v = (unsigned char)rand(); while ((v & 0x7c) == 0x7c);
    w4[i] = v;
  }
  for (int r = 0; r < 4; r++)
    for (int k = 0; k < NB; k++) { /* sane scales */
      w8[(r * NB + k) * SC_Q8_0_BLOCK] = 0, w8[(r * NB + k) * SC_Q8_0_BLOCK + 1] = 0x2c;
    }
  static unsigned char wg8[sizeof w8];
  for (int n = 1; n <= NB; n++) {
    /* NT tokens of n blocks, as the GEMM hooks take them (kernels.h) */
    for (int t = 0; t < NT; t++)
      a->quantize_q8(x + t * NB * 32, n, xq + t * n * 32, xd + t * n, xp + t * n * 64);
    for (int r = 0; r < 4; r++) /* q8_0 rows of n blocks in the CPU's groups */
      sc_pack_row_q8_0(w8 + (size_t)r * NB * SC_Q8_0_BLOCK, n * 32, wg8 + (size_t)r * NB * SC_Q8_0_BLOCK);
    a->gemm_q8_0(wg8, (size_t)NB * SC_Q8_0_BLOCK, 4, xq, xd, xp, n, NT, oa, 4);
    b->gemm_q8_0(wg8, (size_t)NB * SC_Q8_0_BLOCK, 4, xq, xd, xp, n, NT, ob, 4);
    CHECK_MSG(!memcmp(oa, ob, sizeof oa), "gemm q8_0 nb %d: neon %g, neon-dotprod %g", n, oa[0], ob[0]);
    a->gemm_q4_0(w4, (size_t)NB * SC_Q4_0_BLOCK, 4, xq, xd, xp, n, NT, oa, 4);
    b->gemm_q4_0(w4, (size_t)NB * SC_Q4_0_BLOCK, 4, xq, xd, xp, n, NT, ob, 4);
    CHECK_MSG(!memcmp(oa, ob, sizeof oa), "gemm q4_0 nb %d: neon %g, neon-dotprod %g", n, oa[0], ob[0]);
    a->dot4_q8_0(wg8, (size_t)NB * SC_Q8_0_BLOCK, xq, xd, xp, n, oa);
    b->dot4_q8_0(wg8, (size_t)NB * SC_Q8_0_BLOCK, xq, xd, xp, n, ob);
    CHECK_MSG(!memcmp(oa, ob, 4 * sizeof *oa), "q8_0 nb %d: neon %g, neon-dotprod %g", n, oa[0], ob[0]);
    a->dot4_q4_0(w4, (size_t)NB * SC_Q4_0_BLOCK, xq, xd, xp, n, oa);
    b->dot4_q4_0(w4, (size_t)NB * SC_Q4_0_BLOCK, xq, xd, xp, n, ob);
    CHECK_MSG(!memcmp(oa, ob, 4 * sizeof *oa), "q4_0 nb %d: neon %g, neon-dotprod %g", n, oa[0], ob[0]);
    /* and both equal the exact integer dot times the scales, to rounding */
    for (int r = 0; r < 4; r++) {
      double s = 0, m = 0;
      for (int k = 0; k < n; k++) {
        const unsigned char *blk = w8 + (r * NB + k) * SC_Q8_0_BLOCK;
        long is = 0;
        for (int j = 0; j < 32; j++) is += (int8_t)blk[2 + j] * xq[k * 32 + j];
        double v = (double)sc_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)) * xd[k] * is;
        s += v, m += fabs(v);
      }
      a->dot4_q8_0(wg8, (size_t)NB * SC_Q8_0_BLOCK, xq, xd, xp, n, oa);
      CHECK_MSG(fabs(oa[r] - s) <= 1e-5 * (m + 1e-30), "neon q8_0 nb %d r %d: %g vs %g", n, r, oa[r], s);
    }
  }
  printf("neon and neon-dotprod: the same bits\n");
}

/* The activations' quantizer against its definition (kernels.h), not
 * against itself: per block of 32, d = amax / 127 and each q within half a
 * step of x / d, the largest |q| 127 (0 and d 0 for a zero block); every
 * ISA's quantize_q8 is then held to the portable bits (test_kernels_band).
 * Blocks: random, one value alone, all zero, the largest a negative, huge
 * and tiny magnitudes (not below 127 / FLT_MAX, where 127 / amax is inf,
 * as in GGML's quantize_row_q8_0). */
static void test_quantize_def(void) {
  enum { NB = 16 };
  static float x[NB * 32];
  rng_seed(7);
  for (int i = 0; i < NB * 32; i++) x[i] = frand() * (i % 5 == 0 ? 9 : 1);
  memset(x + 32, 0, 32 * sizeof *x);
  x[40] = 3.0f;                                    /* block 1: one value */
  memset(x + 64, 0, 32 * sizeof *x);               /* block 2: zeros */
  x[100] = -50.0f;                                 /* block 3: the largest negative */
  for (int j = 0; j < 32; j++) x[128 + j] *= 1e30f; /* block 4: huge */
  for (int j = 0; j < 32; j++) x[160 + j] *= 1e-30f; /* block 5: tiny */
  int8_t q[NB * 32];
  float d[NB];
  unsigned char xp[NB / 8 * SC_Q4_VIEW_GROUP];
  sc_kern_portable.quantize_q8(x, NB, q, d, xp);
  for (int b = 0; b < NB; b++) {
    float amax = 0.0f;
    int qmax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
    CHECK_MSG(same_bits(d[b], amax / 127.0f), "block %d: d %g, want amax / 127 = %g", b, d[b], amax / 127.0f);
    for (int j = 0; j < 32; j++) {
      const int qj = q[32 * b + j];
      qmax = abs(qj) > qmax ? abs(qj) : qmax;
      const double want = amax > 0 ? (double)x[32 * b + j] * 127.0 / amax : 0.0;
      CHECK_MSG(fabs(qj - want) <= 0.5 + 1e-4, "block %d value %d: q %d for x / d = %.6f", b, j, qj, want);
    }
    CHECK_MSG(qmax == (amax > 0 ? 127 : 0), "block %d: largest |q| %d", b, qmax);
  }
}

int main(void) {
  unsetenv("SPEECHC_ISA");
  test_quantize_def();
  test_f16();
  test_ggml_bytes();
  test_q4_0_groups();
  test_q8_0_groups();
  sc_kernel_ctx cp = {0};
  sc_kernels P;
  sc_kernels_init_portable(&P, &cp);
  char all[] = SC_KERNEL_ISAS;
  for (char *n = strtok(all, ","); n; n = strtok(NULL, ",")) {
    if (!sc_kern_ops_isa(n)) continue;
    sc_kernel_ctx ca = {0};
    sc_kernels K;
    CHECK(sc_kernels_init_isa(&K, &ca, n) == 0);
    printf("quantized kernels: %s\n", n);
    test_kernels_band(&K, &P, SC_W_Q8_0);
    test_kernels_band(&K, &P, SC_W_Q4_0);
    sc_kernel_ctx_free(&ca);
  }
  test_neon_variants();
  sc_kernel_ctx_free(&cp);
#ifndef SC_KERNELS_ONLY
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc-quant-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  /* SPEECHC_QUANT_SEEDS=LO-HI: the random checkpoints of those seeds
   * instead of 1..3 (how the q4_0 gate above was derived) */
  int lo = 1, hi = 3;
  const char *seeds = getenv("SPEECHC_QUANT_SEEDS");
  if (seeds && sscanf(seeds, "%d-%d", &lo, &hi) != 2) lo = hi = atoi(seeds);
  test_accuracy_random(lo, hi);
  test_accuracy_traces();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) {}
#endif
  CHECK_DONE();
}
