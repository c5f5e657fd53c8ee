/*
 * test_codec_official.c — the codec kernels against the official 12 Hz
 * decoder (qwen-tts 0.1.1, float32), through the committed fixture
 * tests/data/codec/codec_tiny (tests/parity/make_codec.py: random weights,
 * and the output of every stage of Qwen3TTSTokenizerV2Decoder.forward):
 *   - each conv stage alone, from the official output of the stage before
 *     it: pre_conv (Conv1d k 3), the two upsamplers (ConvTranspose1d k = s
 *     = 2, then the ConvNeXt block: depthwise conv, LayerNorm eps 1e-6,
 *     GELU, LayerScale), decoder.0 (Conv1d k 7), both decoder blocks
 *     (SnakeBeta, ConvTranspose1d k = 2s, three residual units with
 *     dilations 1, 3, 9), the last SnakeBeta, the last conv, the clamp —
 *     built only from the sc_kernels entries the IR lowers them to
 *     (IM2COL + LINEAR, LINEAR + OVERLAP_ADD, DWCONV, LAYERNORM, SNAKE)
 *     with the weights in the layouts of sc_conv_weight_im2col /
 *     sc_convt_weight_linear;
 *   - the whole conv stack from the official pre-transformer output to
 *     the PCM, in one call and streamed frame by frame and in uneven
 *     chunks with every layer's state carried: PCM within 1e-4 of the
 *     official (the f32 bound), streamed == whole to rounding
 *     (bit for bit with the portable kernels, whose LINEAR does not
 *     depend on the token count).
 * The RVQ and the pre-transformer are not kernels of this ops and
 * are not run here (their stages' official outputs are the inputs).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels.h"
#include "safetensors.h"

#define DIR "tests/data/codec/codec_tiny/"

static StFile sf;
static sc_kernels K;
static sc_kernel_ctx kctx;

static float *tensor(const char *name, int64_t want_numel) {
  for (int i = 0; i < sf.n_tensors; i++)
    if (!strcmp(sf.tensors[i].name, name)) {
      const StTensor *t = &sf.tensors[i];
      CHECK_MSG(t->numel == want_numel, "%s has %lld elements, expected %lld", name, (long long)t->numel,
                (long long)want_numel);
      float *p = malloc((size_t)t->numel * sizeof *p);
      st_read_f32(t, 0, t->numel, p);
      return p;
    }
  CHECK_MSG(0, "no tensor %s", name);
  return calloc((size_t)want_numel, sizeof(float));
}

/* A stage file, [C, L] channel-major, as rows [L, C]. */
static float *stage(const char *name, int C, int L) {
  char path[256];
  snprintf(path, sizeof path, DIR "stage.%s.f32", name);
  FILE *f = fopen(path, "rb");
  float *cm = malloc((size_t)C * L * sizeof *cm), *rm = malloc((size_t)C * L * sizeof *rm);
  CHECK_MSG(f && fread(cm, sizeof *cm, (size_t)C * L, f) == (size_t)C * L, "cannot read %s", path);
  if (f) fclose(f);
  for (int c = 0; c < C; c++)
    for (int t = 0; t < L; t++) rm[(size_t)t * C + c] = cm[(size_t)c * L + t];
  free(cm);
  return rm;
}

/* max |a - b| over n, and max |b| */
static double maxdiff(const float *a, const float *b, size_t n, double *scale) {
  double d = 0, s = 0;
  for (size_t i = 0; i < n; i++) {
    if (fabs(a[i] - b[i]) > d) d = fabs(a[i] - b[i]);
    if (fabs(b[i]) > s) s = fabs(b[i]);
  }
  *scale = s;
  return d;
}

/* ---- layers, each with its session state -------------------------------- */

typedef struct Conv { /* causal Conv1d, stride 1 */
  int cin, cout, k, d;
  float *w, *b, *state; /* [cout, k*cin], [cout], [(k-1)*d, cin] */
} Conv;

static void conv_load(Conv *c, const char *prefix, int cin, int cout, int k, int d) {
  char n[160];
  *c = (Conv){.cin = cin, .cout = cout, .k = k, .d = d};
  snprintf(n, sizeof n, "%s.conv.weight", prefix);
  float *w = tensor(n, (int64_t)cout * cin * k);
  c->w = malloc((size_t)cout * cin * k * sizeof *c->w);
  sc_conv_weight_im2col(w, cout, cin, k, c->w);
  free(w);
  snprintf(n, sizeof n, "%s.conv.bias", prefix);
  c->b = tensor(n, cout);
  c->state = calloc((size_t)((k - 1) * d + 1) * cin, sizeof *c->state);
}

/* y [R, cout] = conv(x [R, cin]) */
static void conv_run(Conv *c, const float *x, int R, float *y) {
  const int kc = c->k * c->cin;
  if (c->k == 1) {
    K.linear(K.ctx, SC_W_F32, c->w, c->b, x, c->cin, y, c->cout, R, c->cout, c->cin, 0);
    return;
  }
  float *col = malloc((size_t)R * kc * sizeof *col);
  K.im2col(K.ctx, x, c->cin, c->state, col, kc, R, c->cin, c->k, c->d);
  K.linear(K.ctx, SC_W_F32, c->w, c->b, col, kc, y, c->cout, R, c->cout, kc, 0);
  free(col);
}

typedef struct ConvT { /* causal ConvTranspose1d, right-trimmed by k - s */
  int cin, cout, k, s;
  float *w, *b, *state; /* [k*cout, cin], [cout], [k-s, cout] */
} ConvT;

static void convt_load(ConvT *c, const char *prefix, int cin, int cout, int k, int s) {
  char n[160];
  *c = (ConvT){.cin = cin, .cout = cout, .k = k, .s = s};
  snprintf(n, sizeof n, "%s.conv.weight", prefix);
  float *w = tensor(n, (int64_t)cin * cout * k);
  c->w = malloc((size_t)cin * cout * k * sizeof *c->w);
  sc_convt_weight_linear(w, cin, cout, k, c->w);
  free(w);
  snprintf(n, sizeof n, "%s.conv.bias", prefix);
  c->b = tensor(n, cout);
  c->state = calloc((size_t)(k - s + 1) * cout, sizeof *c->state);
}

/* y [R*s, cout] = convT(x [R, cin]) */
static void convt_run(ConvT *c, const float *x, int R, float *y) {
  const int zc = c->k * c->cout;
  float *z = malloc((size_t)R * zc * sizeof *z);
  K.linear(K.ctx, SC_W_F32, c->w, NULL, x, c->cin, z, zc, R, zc, c->cin, 0);
  K.overlap_add(K.ctx, z, zc, c->b, c->k > c->s ? c->state : NULL, y, c->cout, R, c->cout, c->k, c->s);
  free(z);
}

typedef struct Snake {
  int C;
  float *alpha, *beta;
} Snake;

static void snake_load(Snake *s, const char *prefix, int C) {
  char n[160];
  s->C = C;
  snprintf(n, sizeof n, "%s.alpha", prefix);
  s->alpha = tensor(n, C);
  snprintf(n, sizeof n, "%s.beta", prefix);
  s->beta = tensor(n, C);
}

static void snake_run(const Snake *s, const float *x, int R, float *y) {
  K.snake(K.ctx, x, s->C, s->alpha, s->beta, y, s->C, R, s->C);
}

typedef struct ConvNeXt {
  int C;
  float *dw, *db, *state;          /* [C, 7], [C], [6, C] */
  float *lw, *lb, *w1, *b1, *w2, *b2, *gamma;
} ConvNeXt;

static void convnext_load(ConvNeXt *b, const char *p, int C) {
  char n[160];
  b->C = C;
#define T_(field, suffix, numel) snprintf(n, sizeof n, "%s.%s", p, suffix), b->field = tensor(n, numel)
  T_(dw, "dwconv.conv.weight", (int64_t)C * 7);
  T_(db, "dwconv.conv.bias", C);
  T_(lw, "norm.weight", C);
  T_(lb, "norm.bias", C);
  T_(w1, "pwconv1.weight", (int64_t)4 * C * C);
  T_(b1, "pwconv1.bias", 4 * C);
  T_(w2, "pwconv2.weight", (int64_t)4 * C * C);
  T_(b2, "pwconv2.bias", C);
  T_(gamma, "gamma", C);
#undef T_
  b->state = calloc((size_t)6 * C, sizeof *b->state);
}

/* y = x + gamma * pw2(gelu(pw1(layernorm(dwconv(x))))) */
static void convnext_run(ConvNeXt *b, const float *x, int R, float *y) {
  const int C = b->C;
  float *h = malloc((size_t)R * C * sizeof *h), *u = malloc((size_t)R * 4 * C * sizeof *u);
  K.dwconv(K.ctx, x, C, b->dw, b->db, b->state, h, C, R, C, 7, 1);
  K.layernorm(K.ctx, h, C, b->lw, b->lb, 1e-6f, h, C, R, C);
  K.linear(K.ctx, SC_W_F32, b->w1, b->b1, h, C, u, 4 * C, R, 4 * C, C, 0);
  for (size_t i = 0; i < (size_t)R * 4 * C; i++) u[i] = 0.5f * u[i] * (1.0f + erff(u[i] * 0.70710678118654752f));
  K.linear(K.ctx, SC_W_F32, b->w2, b->b2, u, 4 * C, h, C, R, C, 4 * C, 0);
  for (int t = 0; t < R; t++)
    for (int c = 0; c < C; c++) y[(size_t)t * C + c] = x[(size_t)t * C + c] + h[(size_t)t * C + c] * b->gamma[c];
  free(h);
  free(u);
}

typedef struct Block { /* SnakeBeta, ConvTranspose1d, three residual units */
  int cin, cout, rate;
  Snake act;
  ConvT up;
  Snake a1[3], a2[3];
  Conv c1[3], c2[3];
} Block;

static void block_load(Block *b, int i, int cin, int rate) {
  char p[160];
  b->cin = cin, b->cout = cin / 2, b->rate = rate;
  snprintf(p, sizeof p, "decoder.decoder.%d.block.0", i);
  snake_load(&b->act, p, cin);
  snprintf(p, sizeof p, "decoder.decoder.%d.block.1", i);
  convt_load(&b->up, p, cin, b->cout, 2 * rate, rate);
  static const int dil[3] = {1, 3, 9};
  for (int u = 0; u < 3; u++) {
    snprintf(p, sizeof p, "decoder.decoder.%d.block.%d.act1", i, 2 + u);
    snake_load(&b->a1[u], p, b->cout);
    snprintf(p, sizeof p, "decoder.decoder.%d.block.%d.act2", i, 2 + u);
    snake_load(&b->a2[u], p, b->cout);
    snprintf(p, sizeof p, "decoder.decoder.%d.block.%d.conv1", i, 2 + u);
    conv_load(&b->c1[u], p, b->cout, b->cout, 7, dil[u]);
    snprintf(p, sizeof p, "decoder.decoder.%d.block.%d.conv2", i, 2 + u);
    conv_load(&b->c2[u], p, b->cout, b->cout, 1, 1);
  }
}

/* y [R*rate, cout] */
static void block_run(Block *b, const float *x, int R, float *y) {
  const int Ro = R * b->rate, C = b->cout;
  float *a = malloc((size_t)R * b->cin * sizeof *a), *h = malloc((size_t)Ro * C * sizeof *h),
        *g = malloc((size_t)Ro * C * sizeof *g);
  snake_run(&b->act, x, R, a);
  convt_run(&b->up, a, R, y);
  for (int u = 0; u < 3; u++) {
    snake_run(&b->a1[u], y, Ro, h);
    conv_run(&b->c1[u], h, Ro, g);
    snake_run(&b->a2[u], g, Ro, g);
    conv_run(&b->c2[u], g, Ro, h);
    for (size_t i = 0; i < (size_t)Ro * C; i++) y[i] += h[i];
  }
  free(a), free(h), free(g);
}

/* The conv stack of codec_tiny: latent 24, upsampling_ratios [2, 2],
 * decoder_dim 32, upsample_rates [2, 3]. */
typedef struct Stack {
  Conv pre;
  ConvT ups[2];
  ConvNeXt cnx[2];
  Conv dec0;
  Block blk[2];
  Snake last_act;
  Conv last;
} Stack;

static void stack_load(Stack *s) {
  conv_load(&s->pre, "decoder.pre_conv", 32, 24, 3, 1);
  for (int i = 0; i < 2; i++) {
    char p[64];
    snprintf(p, sizeof p, "decoder.upsample.%d.0", i);
    convt_load(&s->ups[i], p, 24, 24, 2, 2);
    snprintf(p, sizeof p, "decoder.upsample.%d.1", i);
    convnext_load(&s->cnx[i], p, 24);
  }
  conv_load(&s->dec0, "decoder.decoder.0", 24, 32, 7, 1);
  block_load(&s->blk[0], 1, 32, 2);
  block_load(&s->blk[1], 2, 16, 3);
  snake_load(&s->last_act, "decoder.decoder.3", 8);
  conv_load(&s->last, "decoder.decoder.4", 8, 1, 7, 1);
}

static void stack_reset(Stack *s) {
  Conv *convs[] = {&s->pre, &s->dec0, &s->last};
  for (int i = 0; i < 3; i++) memset(convs[i]->state, 0, (size_t)(convs[i]->k - 1) * convs[i]->d * convs[i]->cin * 4);
  for (int i = 0; i < 2; i++) {
    memset(s->cnx[i].state, 0, (size_t)6 * s->cnx[i].C * 4);
    Block *b = &s->blk[i];
    memset(b->up.state, 0, (size_t)(b->up.k - b->up.s) * b->up.cout * 4);
    for (int u = 0; u < 3; u++) memset(b->c1[u].state, 0, (size_t)6 * b->c1[u].d * b->c1[u].cin * 4);
  }
}

/* pre-transformer output [R frames, 24] -> PCM [R*24] (clamped) */
static void stack_run(Stack *s, const float *x, int R, float *pcm) {
  float *a = malloc((size_t)R * 2 * 24 * sizeof *a), *b = malloc((size_t)R * 2 * 24 * sizeof *b);
  float *c = malloc((size_t)R * 4 * 24 * sizeof *c), *d = malloc((size_t)R * 4 * 24 * sizeof *d);
  float *e = malloc((size_t)R * 4 * 32 * sizeof *e), *f = malloc((size_t)R * 8 * 16 * sizeof *f);
  float *g = malloc((size_t)R * 24 * 8 * sizeof *g);
  convt_run(&s->ups[0], x, R, a);
  convnext_run(&s->cnx[0], a, 2 * R, b);
  convt_run(&s->ups[1], b, 2 * R, c);
  convnext_run(&s->cnx[1], c, 4 * R, d);
  conv_run(&s->dec0, d, 4 * R, e);
  block_run(&s->blk[0], e, 4 * R, f);
  block_run(&s->blk[1], f, 8 * R, g);
  snake_run(&s->last_act, g, 24 * R, g);
  conv_run(&s->last, g, 24 * R, pcm);
  for (int i = 0; i < 24 * R; i++) pcm[i] = pcm[i] < -1.0f ? -1.0f : pcm[i] > 1.0f ? 1.0f : pcm[i];
  free(a), free(b), free(c), free(d), free(e), free(f), free(g);
}

/* ---- the tests ------------------------------------------------------------ */

enum { F = 12 }; /* frames in the fixture */

#define STAGE_CHECK(NAME, GOT, WANT, N)                                                          \
  do {                                                                                           \
    double scale_, d_ = maxdiff(GOT, WANT, N, &scale_);                                          \
    CHECK_MSG(d_ <= 1e-5 * (scale_ > 1 ? scale_ : 1), "stage %s: max |diff| %g (max |official| %g)", NAME, d_, \
              scale_);                                                                           \
    printf("  %-22s max |diff| %.2e (max |official| %.2f)\n", NAME, d_, scale_);                \
  } while (0)

static void test_stages(Stack *s) {
  stack_reset(s);
  float *in = stage("rvq", 32, F), *want = stage("pre_conv", 24, F), *y = malloc(4096 * sizeof *y);
  conv_run(&s->pre, in, F, y);
  STAGE_CHECK("pre_conv", y, want, (size_t)F * 24);
  free(in), free(want);
  static const struct { const char *in, *out; int cin, lin, cout, lout; } st[] = {
      {"pre_transformer", "upsample.0.transconv", 24, F, 24, 2 * F},
      {"upsample.0.transconv", "upsample.0.convnext", 24, 2 * F, 24, 2 * F},
      {"upsample.0.convnext", "upsample.1.transconv", 24, 2 * F, 24, 4 * F},
      {"upsample.1.transconv", "upsample.1.convnext", 24, 4 * F, 24, 4 * F},
      {"upsample.1.convnext", "decoder.0.conv", 24, 4 * F, 32, 4 * F},
      {"decoder.0.conv", "decoder.1.block", 32, 4 * F, 16, 8 * F},
      {"decoder.1.block", "decoder.2.block", 16, 8 * F, 8, 24 * F},
      {"decoder.2.block", "decoder.3.snake", 8, 24 * F, 8, 24 * F},
      {"decoder.3.snake", "decoder.4.conv", 8, 24 * F, 1, 24 * F},
  };
  for (size_t i = 0; i < sizeof st / sizeof *st; i++) {
    float *x = stage(st[i].in, st[i].cin, st[i].lin);
    want = stage(st[i].out, st[i].cout, st[i].lout);
    const int R = st[i].lin;
    switch (i) {
    case 0: convt_run(&s->ups[0], x, R, y); break;
    case 1: convnext_run(&s->cnx[0], x, R, y); break;
    case 2: convt_run(&s->ups[1], x, R, y); break;
    case 3: convnext_run(&s->cnx[1], x, R, y); break;
    case 4: conv_run(&s->dec0, x, R, y); break;
    case 5: block_run(&s->blk[0], x, R, y); break;
    case 6: block_run(&s->blk[1], x, R, y); break;
    case 7: snake_run(&s->last_act, x, R, y); break;
    case 8: conv_run(&s->last, x, R, y); break;
    }
    STAGE_CHECK(st[i].out, y, want, (size_t)st[i].cout * st[i].lout);
    free(x), free(want);
  }
  free(y);
  CHECK_MSG(!kctx.failed, "%s", kctx.err);
}

static float *read_pcm(void) {
  float *p = malloc(24 * F * sizeof *p);
  FILE *f = fopen(DIR "pcm.f32", "rb");
  CHECK(f && fread(p, sizeof *p, 24 * F, f) == 24 * F);
  if (f) fclose(f);
  return p;
}

static void test_stack(Stack *s) {
  float *x = stage("pre_transformer", 24, F), *pcm = read_pcm();
  float whole[24 * F], part[24 * F];
  stack_reset(s);
  stack_run(s, x, F, whole);
  double scale, d = maxdiff(whole, pcm, 24 * F, &scale);
  CHECK_MSG(d <= 1e-4 * scale, "conv stack, one call: PCM off the official by %g (max %g)", d, scale);
  printf("  pre_transformer -> PCM, one call: max |diff| %.2e\n", d);
  static const int chunks[][4] = {{1, 1, 1, 1}, {5, 3, 4, 0}, {2, 7, 3, 0}};
  for (size_t p = 0; p < sizeof chunks / sizeof *chunks; p++) {
    stack_reset(s);
    int at = 0, k = 0;
    while (at < F) {
      int n = chunks[p][k % 4] ? chunks[p][k % 4] : F - at;
      k++;
      if (n > F - at) n = F - at;
      stack_run(s, x + (size_t)at * 24, n, part + at * 24);
      at += n;
    }
    double dp = maxdiff(part, pcm, 24 * F, &scale), dw = maxdiff(part, whole, 24 * F, &scale);
    CHECK_MSG(dp <= 1e-4 * scale, "conv stack streamed (pattern %zu): PCM off the official by %g", p, dp);
    /* LINEAR's order depends on T only through OpenBLAS (T >= 16): the
     * portable kernels stream bit for bit */
    const double tol = !strcmp(sc_kernels_isa(&K), "portable") ? 0 : 1e-5;
    CHECK_MSG(dw <= tol, "conv stack streamed (pattern %zu): off the one call by %g", p, dw);
    printf("  streamed (pattern %zu): max |diff| %.2e from the official, %.2e from one call\n", p, dp, dw);
  }
  CHECK_MSG(!kctx.failed, "%s", kctx.err);
  free(x);
  free(pcm);
}

int main(void) {
  sc_error err = {0};
  if (st_open(&sf, DIR "model.safetensors", &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  static Stack s; /* the weights stay for the process (a test) */
  stack_load(&s);
  char all[] = SC_KERNEL_ISAS;
  for (char *n = strtok(all, ","); n; n = strtok(NULL, ",")) {
    if (!sc_kern_ops_isa(n)) continue;
    CHECK(sc_kernels_init_isa(&K, &kctx, n) == 0);
    printf("%s:\n", n);
    test_stages(&s);
    test_stack(&s);
  }
  sc_kernel_ctx_free(&kctx);
  st_close(&sf);
  CHECK_DONE();
}
