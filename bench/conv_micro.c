/*
 * conv_micro.c — times the codec kernels on the published 12 Hz decoder's
 * conv stack (decoder_dim 1536, latent 1024, upsample_rates 8 5 4 3 after
 * the two x2 upsamplers: 4, 32, 160, 640 and 1920 rows per frame), one
 * second of audio (12 frames here, 23040 samples) fed FRAMES frames per call:
 *
 *   conv_micro ISA THREADS [FRAMES] [REPS] [f32|bf16]
 *
 * bf16: the weights in bf16 with bf16 activations allowed (the codec's
 * contract, kernels.h: AMX tiles where the CPU grants them, else
 * AVX512-BF16).
 * Each causal Conv1d is IM2COL + LINEAR (f32 weights) or the fused
 * CONV1D (bf16, in the IR's pieces), each
 * ConvTranspose1d LINEAR + OVERLAP_ADD, each SnakeBeta SNAKE, as the IR
 * lowers them.  Prints per stage the best of REPS (default 3) in ms and
 * GFLOP/s (2 flops per multiply-add; SnakeBeta in Melem/s), the share
 * IM2COL takes, and the totals as milliseconds per second of audio (the
 * conv stack's real-time factor).  The pre-transformer and the ConvNeXt
 * blocks are not here.  Weights and inputs are random; nothing is checked
 * (tests/unit/test_codec_kernels.c does that).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"
#include "kernels_amx.h"
#include "pool.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int band = SC_W_F32;

/* Weights of n elements in the band: f32 as they are, or bf16 (truncated). */
static void *wbuf(float *w, size_t n) {
  if (band == SC_W_F32) return w;
  uint16_t *b = aligned_alloc(64, (n * 2 + 63) & ~(size_t)63);
  for (size_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &w[i], 4);
    b[i] = (uint16_t)(u >> 16);
  }
  free(w);
  return b;
}

static float *buf(size_t n, int random) {
  float *p = aligned_alloc(64, (n * sizeof *p + 63) & ~(size_t)63);
  for (size_t i = 0; i < n; i++) p[i] = random ? (float)rand() / RAND_MAX - 0.5f : 0.0f;
  return p;
}

enum { CONV, CONVT, SNAKE };
typedef struct Stage {
  const char *name;
  int kind, cin, cout, k, d; /* d: dilation (CONV) or stride (CONVT) */
  int rows;                  /* input rows per frame */
  int times;                 /* how many such layers the decoder has */
} Stage;

static const Stage stages[] = {
    {"decoder.0 conv 1024->1536 k7", CONV, 1024, 1536, 7, 1, 4, 1},
    {"block0 snake 1536", SNAKE, 1536, 1536, 0, 0, 4, 1},
    {"block0 convT 1536->768 k16 s8", CONVT, 1536, 768, 16, 8, 4, 1},
    {"block0 res snake 768 (x6)", SNAKE, 768, 768, 0, 0, 32, 6},
    {"block0 res conv 768 k7 d1", CONV, 768, 768, 7, 1, 32, 1},
    {"block0 res conv 768 k7 d3", CONV, 768, 768, 7, 3, 32, 1},
    {"block0 res conv 768 k7 d9", CONV, 768, 768, 7, 9, 32, 1},
    {"block0 res conv 768 k1 (x3)", CONV, 768, 768, 1, 1, 32, 3},
    {"block1 snake 768", SNAKE, 768, 768, 0, 0, 32, 1},
    {"block1 convT 768->384 k10 s5", CONVT, 768, 384, 10, 5, 32, 1},
    {"block1 res snake 384 (x6)", SNAKE, 384, 384, 0, 0, 160, 6},
    {"block1 res conv 384 k7 d1", CONV, 384, 384, 7, 1, 160, 1},
    {"block1 res conv 384 k7 d3", CONV, 384, 384, 7, 3, 160, 1},
    {"block1 res conv 384 k7 d9", CONV, 384, 384, 7, 9, 160, 1},
    {"block1 res conv 384 k1 (x3)", CONV, 384, 384, 1, 1, 160, 3},
    {"block2 snake 384", SNAKE, 384, 384, 0, 0, 160, 1},
    {"block2 convT 384->192 k8 s4", CONVT, 384, 192, 8, 4, 160, 1},
    {"block2 res snake 192 (x6)", SNAKE, 192, 192, 0, 0, 640, 6},
    {"block2 res conv 192 k7 d1", CONV, 192, 192, 7, 1, 640, 1},
    {"block2 res conv 192 k7 d3", CONV, 192, 192, 7, 3, 640, 1},
    {"block2 res conv 192 k7 d9", CONV, 192, 192, 7, 9, 640, 1},
    {"block2 res conv 192 k1 (x3)", CONV, 192, 192, 1, 1, 640, 3},
    {"block3 snake 192", SNAKE, 192, 192, 0, 0, 640, 1},
    {"block3 convT 192->96 k6 s3", CONVT, 192, 96, 6, 3, 640, 1},
    {"block3 res snake 96 (x6)", SNAKE, 96, 96, 0, 0, 1920, 6},
    {"block3 res conv 96 k7 d1", CONV, 96, 96, 7, 1, 1920, 1},
    {"block3 res conv 96 k7 d3", CONV, 96, 96, 7, 3, 1920, 1},
    {"block3 res conv 96 k7 d9", CONV, 96, 96, 7, 9, 1920, 1},
    {"block3 res conv 96 k1 (x3)", CONV, 96, 96, 1, 1, 1920, 3},
    {"final snake 96", SNAKE, 96, 96, 0, 0, 1920, 1},
    {"final conv 96->1 k7", CONV, 96, 1, 7, 1, 1920, 1},
};

#define FRAMES 12 /* ~ one second at 12.5 Hz */

/* One layer over FRAMES frames, `per` frames per call: seconds, and the
 * seconds IM2COL took. */
static double run_stage(const sc_kernels *K, const Stage *s, int per, double *t_im2col) {
  const int R = s->rows * FRAMES, rc = s->rows * per;
  const int kc = s->k * s->cin, S = s->kind == CONV ? (s->k - 1) * s->d : s->k - s->d;
  float *x = buf((size_t)R * s->cin, 1), *st = buf((size_t)(S > 0 ? S : 1) * s->cin, 0);
  float *y = NULL, *mid = NULL, *b = buf((size_t)s->cout, 1), *b2 = buf((size_t)s->cout, 1);
  void *w = NULL;
  double t0, ti = 0;
  if (s->kind == SNAKE) {
    y = buf((size_t)R * s->cin, 0);
    t0 = now_s();
    for (int f = 0; f < FRAMES; f += per) K->snake(K->ctx, x + (size_t)f * s->rows * s->cin, s->cin, b, b2, y, s->cin, rc, s->cin);
  } else if (s->kind == CONV) {
    w = wbuf(buf((size_t)s->cout * kc, 1), (size_t)s->cout * kc);
    mid = buf((size_t)rc * kc, 0);
    y = buf((size_t)R * s->cout, 0);
    t0 = now_s();
    for (int f = 0; f < FRAMES; f += per) {
      const float *xc = x + (size_t)f * s->rows * s->cin;
      if (s->k > 1 && band == SC_W_BF16) { /* fused as the IR does (pass_fuse.c, CONV1D) */
        int piece = (int)(384 * 1024 / ((size_t)kc * sizeof(float)) / 32 * 32);
        if (piece < 32) piece = 32;
        K->conv1d(K->ctx, band, w, b, xc, s->cin, st, mid, piece, y + (size_t)f * s->rows * s->cout, s->cout, rc,
                  s->cin, s->k, s->d, s->cout);
        continue;
      }
      if (s->k > 1) {
        const double a = now_s();
        K->im2col(K->ctx, xc, s->cin, st, mid, kc, rc, s->cin, s->k, s->d);
        ti += now_s() - a;
        xc = mid;
      }
      K->linear(K->ctx, band, w, b, xc, kc, y + (size_t)f * s->rows * s->cout, s->cout, rc, s->cout, kc, 0);
    }
  } else {
    const int zc = s->k * s->cout;
    w = wbuf(buf((size_t)zc * s->cin, 1), (size_t)zc * s->cin);
    mid = buf((size_t)rc * zc, 0);
    y = buf((size_t)R * s->d * s->cout, 0);
    t0 = now_s();
    for (int f = 0; f < FRAMES; f += per) {
      K->linear(K->ctx, band, w, NULL, x + (size_t)f * s->rows * s->cin, s->cin, mid, zc, rc, zc, s->cin, 0);
      K->overlap_add(K->ctx, mid, zc, b, S ? st : NULL, y + (size_t)f * s->rows * s->d * s->cout, s->cout, rc,
                     s->cout, s->k, s->d);
    }
  }
  const double t = now_s() - t0;
  free(x), free(st), free(y), free(w), free(mid), free(b), free(b2);
  *t_im2col = ti;
  return t;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: conv_micro ISA THREADS [FRAMES_PER_CALL] [REPS] [f32|bf16]\n");
    return 2;
  }
  const int threads = atoi(argv[2]), per = argc > 3 ? atoi(argv[3]) : FRAMES, reps = argc > 4 ? atoi(argv[4]) : 3;
  if (threads < 1 || per < 1 || FRAMES % per || reps < 1) {
    fprintf(stderr, "conv_micro: THREADS >= 1, FRAMES_PER_CALL dividing %d, REPS >= 1\n", FRAMES);
    return 2;
  }
  if (argc > 5 && strcmp(argv[5], "f32") && strcmp(argv[5], "bf16")) {
    fprintf(stderr, "conv_micro: the band is f32 or bf16, not '%s'\n", argv[5]);
    return 2;
  }
  band = argc > 5 && !strcmp(argv[5], "bf16") ? SC_W_BF16 : SC_W_F32;
  sc_kernel_ctx c = {.bf16_act = 1};
  c.pool = threads > 1 ? sc_pool_new(threads) : NULL;
  sc_kernels K;
  if (sc_kernels_init_isa(&K, &c, argv[1])) {
    fprintf(stderr, "conv_micro: %s\n", c.err);
    return 1;
  }
  srand(1);
  printf("conv_micro: %s, %d thread%s, %d frames per call (%d in all = %.2f s of audio), %s weights%s\n",
         argv[1], threads, threads > 1 ? "s" : "", per, FRAMES, FRAMES / 12.5, band == SC_W_F32 ? "f32" : "bf16",
         band != SC_W_BF16                                 ? ""
         : sc_bf16act_engine(SC_BF16ACT_BEST) == SC_BF16ACT_AMX ? " (AMX)"
         : sc_bf16act_engine(SC_BF16ACT_BEST) == SC_BF16ACT_DP  ? " (AVX512-BF16)"
                                                                : "");
  double total = 0, total_flop = 0, total_snake = 0, total_im2col = 0;
  for (size_t i = 0; i < sizeof stages / sizeof *stages; i++) {
    const Stage *s = &stages[i];
    double best = 1e30, best_i = 0;
    for (int r = 0; r < reps; r++) {
      double ti;
      const double t = run_stage(&K, s, per, &ti);
      if (t < best) best = t, best_i = ti;
    }
    if (c.failed) {
      fprintf(stderr, "conv_micro: %s\n", c.err);
      return 1;
    }
    const double rows = (double)s->rows * FRAMES;
    const double t = best * s->times;
    total += t;
    total_im2col += best_i * s->times;
    if (s->kind == SNAKE) {
      total_snake += t;
      printf("  %-32s %8.2f ms  %7.0f Melem/s\n", s->name, t * 1e3, rows * s->cin / best * 1e-6);
    } else {
      const double flop = 2.0 * rows * s->cin * s->cout * s->k * s->times;
      total_flop += flop;
      printf("  %-32s %8.2f ms  %7.1f GFLOP/s", s->name, t * 1e3, flop / t * 1e-9);
      if (best_i > 0) printf("  (im2col %4.1f%%)", 100 * best_i / best);
      printf("\n");
    }
  }
  const double audio = FRAMES / 12.5;
  printf("total: %.1f ms per second of audio (RTF %.3f): convs %.1f GFLOP at %.1f GFLOP/s (im2col %.1f ms), "
         "snake %.1f ms\n",
         total / audio * 1e3, total / audio, total_flop / audio * 1e-9, total_flop / (total - total_snake) * 1e-9,
         total_im2col / audio * 1e3, total_snake / audio * 1e3);
  sc_kernel_ctx_free(&c);
  sc_pool_free(c.pool);
  return 0;
}
