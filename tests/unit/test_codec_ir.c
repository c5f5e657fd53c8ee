/*
 * test_codec_ir.c — the codec ops of ops.def (IM2COL, DWCONV, OVERLAP_ADD,
 * SNAKE, LAYERNORM, CLAMP, and MUL broadcasting a [1,C] row) through the
 * compiler:
 *   - builders give the shapes ops.def states (OVERLAP_ADD: stride x T
 *     rows), the printer shows their parameters;
 *   - the verifier refuses each malformed form with a message naming it
 *     (state rows, bands, k < 2, k < s, a missing or extra state, bounds);
 *   - the targets column: the CPU target lowers a graph of them, the CUDA
 *     target refuses it naming the op;
 *   - pass_pack writes WGEN_CONV / WGEN_CONVT weights in the layouts of
 *     sc_conv_weight_im2col / sc_convt_weight_linear;
 *   - end to end: a small decoder-shaped graph (SnakeBeta, causal dilated
 *     Conv1d as LINEAR(IM2COL), LayerNorm, depthwise conv, LayerScale,
 *     residual, ConvTranspose1d as OVERLAP_ADD(LINEAR), clamp) is planned,
 *     printed as C, compiled by libtcc and by the system compiler, loaded,
 *     and run against a double-precision reference of the PyTorch modules,
 *     whole and streamed in chunks of 1, 2, 3 and 5 tokens with its conv
 *     states in the session block;
 *   - the same graph fused: LINEAR(IM2COL) becomes CONV1D (pass_fuse rule
 *     7), run in pieces of 2 rows (and a last piece of up to 3), the same
 *     numbers whole and streamed; the verifier refuses a CONV1D without a
 *     piece size or with a state of the wrong shape.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg.h"
#include "check.h"
#include "ir.h"
#include "kernels.h"
#include "passes.h"
#include "safetensors.h"
#include "sc_abi_text.h"
#include "scratch.h"
#include "target.h"
#include "toolchain.h"

static uint64_t rng_state = 0x853c49e6748fea9bull;
static float frand(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

/* ---- the test decoder ----------------------------------------------------
 * e [T, C0] -> snake -> causal Conv1d C0 -> C1 (k K1, dilation D1) -> h
 * h -> LayerNorm -> depthwise conv (k K2) -> * gamma -> + h -> r
 * r -> ConvTranspose1d C1 -> C2 (k K3, stride S3) -> clamp -> out [S3*T, C2] */
enum { C0 = 6, C1 = 8, C2 = 4, K1 = 3, D1 = 2, K2 = 4, K3 = 5, S3 = 2, MAXT = 12 };
#define LN_EPS 1e-5f
#define LO (-1.25f)
#define HI 1.25f

typedef struct Params {
  float alpha[C0], beta[C0];
  float wc[C1 * C0 * K1], bc[C1];  /* Conv1d [C1, C0, K1] */
  float lw[C1], lb[C1];            /* LayerNorm */
  float dw[C1 * K2], db[C1];       /* depthwise [C1, 1, K2] */
  float gamma[C1];                 /* LayerScale */
  float wt[C1 * C2 * K3], bt[C2];  /* ConvTranspose1d [C1, C2, K3] */
} Params;

static void make_params(Params *p) {
  float *all = (float *)p;
  for (size_t i = 0; i < sizeof *p / sizeof(float); i++) all[i] = frand() * 0.6f;
  for (int c = 0; c < C1; c++) p->lw[c] = 1.0f + 0.3f * frand();
  for (int i = 0; i < C1 * C2 * K3; i++) p->wt[i] *= 0.5f; /* most outputs inside the clamp */
}

/* The PyTorch modules over the whole sequence, in double. */
static void reference(const Params *pp, const float *e, int T, double *out) {
  double a[MAXT][C0], h[MAXT][C1], n[MAXT][C1], r[MAXT][C1];
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C0; c++) {
      const double x = e[t * C0 + c], s = sin(x * exp(pp->alpha[c]));
      a[t][c] = x + 1.0 / (exp(pp->beta[c]) + 1e-9) * s * s;
    }
  for (int t = 0; t < T; t++) /* left padding (K1-1)*D1 */
    for (int o = 0; o < C1; o++) {
      double s = pp->bc[o];
      for (int j = 0; j < K1; j++) {
        const int src = t + j * D1 - (K1 - 1) * D1;
        if (src >= 0)
          for (int c = 0; c < C0; c++) s += (double)pp->wc[(o * C0 + c) * K1 + j] * a[src][c];
      }
      h[t][o] = s;
    }
  for (int t = 0; t < T; t++) {
    double mean = 0, var = 0;
    for (int c = 0; c < C1; c++) mean += h[t][c];
    mean /= C1;
    for (int c = 0; c < C1; c++) var += (h[t][c] - mean) * (h[t][c] - mean);
    var /= C1;
    for (int c = 0; c < C1; c++) n[t][c] = (h[t][c] - mean) / sqrt(var + LN_EPS) * pp->lw[c] + pp->lb[c];
  }
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C1; c++) {
      double s = pp->db[c];
      for (int j = 0; j < K2; j++) {
        const int src = t + j - (K2 - 1);
        if (src >= 0) s += (double)pp->dw[c * K2 + j] * n[src][c];
      }
      r[t][c] = s * pp->gamma[c] + h[t][c];
    }
  for (int p = 0; p < T * S3; p++)
    for (int o = 0; o < C2; o++) {
      double s = pp->bt[o];
      for (int i = 0; i < T; i++) {
        const int j = p - i * S3;
        if (j >= 0 && j < K3)
          for (int c = 0; c < C1; c++) s += r[i][c] * pp->wt[(c * C2 + o) * K3 + j];
      }
      out[p * C2 + o] = s < LO ? LO : s > HI ? HI : s;
    }
}

/* A weight of the module, its data kept for the weight block. */
typedef struct Wdata {
  int id;
  const float *data;
} Wdata;
static Wdata wd[16];
static int n_wd;

static int weight(Module *m, Graph *g, const char *name, int64_t rows, int64_t cols, const float *data) {
  const int w = ir_weight_add(m, name, DT_F32, 1, rows, cols);
  wd[n_wd++] = (Wdata){w, data};
  return ir_weight(m, g, w);
}

/* The graph, with the conv weights already in the layouts the ops read. */
static void build(Module *m, const Params *pp, float *wc_lin, float *wt_lin) {
  ir_module_init(m);
  snprintf(m->family, sizeof m->family, "codec");
  snprintf(m->model_type, sizeof m->model_type, "test_codec");
  m->max_context = 4096;
  n_wd = 0;
  sc_conv_weight_im2col(pp->wc, C1, C0, K1, wc_lin);
  sc_convt_weight_linear(pp->wt, C1, C2, K3, wt_lin);
  Graph *g = ir_graph_new(m, "audio", SC_IN_EMBEDS, MAXT);
  const int e = ir_input_embeds(g, C0);
  const int a = ir_snake(g, e, weight(m, g, "snake.alpha", 1, C0, pp->alpha), weight(m, g, "snake.beta", 1, C0, pp->beta),
                         "snake");
  const int st1 = ir_state(m, g, ir_state_add(m, "conv.ctx", (K1 - 1) * D1, C0));
  const int col = ir_im2col(g, a, st1, K1, D1, "conv.im2col");
  const int h = ir_linear(g, col, weight(m, g, "conv.w", C1, K1 * C0, wc_lin), weight(m, g, "conv.b", 1, C1, pp->bc),
                          "conv");
  const int n = ir_layernorm(g, h, weight(m, g, "norm.w", 1, C1, pp->lw), weight(m, g, "norm.b", 1, C1, pp->lb), LN_EPS,
                             "norm");
  const int st2 = ir_state(m, g, ir_state_add(m, "dw.ctx", K2 - 1, C1));
  const int d = ir_dwconv(g, n, weight(m, g, "dw.w", C1, K2, pp->dw), weight(m, g, "dw.b", 1, C1, pp->db), st2, K2, 1,
                          "dwconv");
  const int sc = ir_binary(g, OP_MUL, d, weight(m, g, "gamma", 1, C1, pp->gamma), "layerscale");
  const int r = ir_binary(g, OP_ADD, sc, h, "residual");
  const int z = ir_linear(g, r, weight(m, g, "up.w", K3 * C2, C1, wt_lin), -1, "up.taps");
  const int st3 = ir_state(m, g, ir_state_add(m, "up.carry", K3 - S3, C2));
  const int u = ir_overlap_add(g, z, weight(m, g, "up.b", 1, C2, pp->bt), st3, K3, S3, "up");
  ir_output(g, ir_clamp(g, u, LO, HI, "clamp"), OUT_LOGITS);
}

/* The weight block the W_ macros point into; offsets as pass_pack's. */
static unsigned char *layout_weights(Module *m, size_t *bytes) {
  size_t off = 0;
  for (int i = 0; i < n_wd; i++) {
    IrWeight *w = &m->weights[wd[i].id];
    w->offset = (int64_t)((off + 63) & ~(size_t)63);
    w->bytes = w->rows * w->cols * 4;
    off = (size_t)(w->offset + w->bytes);
  }
  unsigned char *W = aligned_alloc(64, (off + 63) & ~(size_t)63);
  for (int i = 0; i < n_wd; i++) {
    const IrWeight *w = &m->weights[wd[i].id];
    memcpy(W + w->offset, wd[i].data, (size_t)w->bytes);
  }
  *bytes = off;
  return W;
}

static void test_builders_and_verifier(void) {
  static Params prm;
  static float wc_lin[C1 * K1 * C0], wt_lin[K3 * C2 * C1];
  make_params(&prm);
  Module m;
  build(&m, &prm, wc_lin, wt_lin);
  Graph *g = &m.graphs[0];
  sc_error err = {0};
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "%s", err.msg);
  /* shapes */
  int im = -1, ov = -1, dw = -1, cl = -1, ln = -1, mul = -1;
  for (int i = 0; i < g->n_nodes; i++) {
    const OpKind op = g->nodes[i].op;
    if (op == OP_IM2COL) im = i;
    if (op == OP_OVERLAP_ADD) ov = i;
    if (op == OP_DWCONV) dw = i;
    if (op == OP_CLAMP) cl = i;
    if (op == OP_LAYERNORM) ln = i;
    if (op == OP_MUL) mul = i;
  }
  CHECK(im >= 0 && g->nodes[im].rows == IR_T && g->nodes[im].cols == K1 * C0);
  CHECK(ov >= 0 && g->nodes[ov].rows == IR_T_SCALED(S3, 1) && g->nodes[ov].cols == C2 && g->nodes[ov].nsrc == 3);
  CHECK(cl >= 0 && g->nodes[cl].rows == IR_T_SCALED(S3, 1));
  CHECK(ir_op_flags[OP_IM2COL] & F_STATE && ir_op_flags[OP_DWCONV] & F_STATE && ir_op_flags[OP_OVERLAP_ADD] & F_STATE);
  /* the printer shows the parameters */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ir_print(&m, g, f);
  fclose(f);
  CHECK_CONTAINS(text, "IM2COL %");
  CHECK_CONTAINS(text, " : f32[T, 18] k=3 dilation=2  ; conv.im2col");
  CHECK_CONTAINS(text, "k=4 dilation=1  ; dwconv");
  CHECK_CONTAINS(text, " : f32[(T * 2), 4] k=5 stride=2  ; up");
  CHECK_CONTAINS(text, "eps=1e-05  ; norm");
  CHECK_CONTAINS(text, "lo=-1.25 hi=1.25  ; clamp");
  CHECK_CONTAINS(text, "SNAKE %");
  free(text);

  /* each malformed form is refused by name */
#define REFUSE(NODE, EDIT, WANT)                                                         \
  do {                                                                                   \
    IrNode keep = g->nodes[NODE];                                                        \
    IrNode *n_ = &g->nodes[NODE];                                                        \
    (void)n_;                                                                            \
    EDIT;                                                                                \
    sc_error e_ = {0};                                                                   \
    CHECK_MSG(ir_verify(&m, g, &e_) != SC_OK && strstr(e_.msg, WANT), "%s: '%s'", #EDIT, e_.msg); \
    g->nodes[NODE] = keep;                                                               \
  } while (0)
  REFUSE(im, n_->p.ksize = 1, "kernel size 1, dilation 2 (need k >= 2");
  REFUSE(im, n_->p.dilation = 3, "expected a state [6, 6]");
  REFUSE(im, n_->cols = 12, "output shape");
  REFUSE(dw, n_->src[S_DWCONV_STATE] = n_->src[S_DWCONV_X], "is LAYERNORM");
  REFUSE(dw, n_->p.ksize = 3, "expected a state [2, 8]");
  REFUSE(ov, n_->p.stride = 6, "kernel size 5, stride 6 (need k >= s >= 1)");
  REFUSE(ov, n_->nsrc = 2, "has 2 inputs, expected 3 (a state exactly when k > s)");
  REFUSE(ov, n_->rows = IR_T, "rows are not stride x z's rows");
  REFUSE(ov, n_->p.ksize = 4, "z has 20 cols, expected k * C = 16");
  REFUSE(cl, n_->p.lo = 2.0f, "bounds [2, 1.25]");
  REFUSE(cl, n_->p.hi = INFINITY, "bounds");
  REFUSE(ln, n_->p.eps = -1.0f, "eps -1");
  /* the vectors the kernels read as floats must be f32 */
  {
    const int b = g->nodes[ov].src[S_OVERLAP_ADD_B];
    g->nodes[b].dtype = DT_BF16;
    REFUSE(ov, (void)0, "bias up.b: expected an f32 weight [1, 4]");
    g->nodes[b].dtype = DT_F32;
    const int gm = g->nodes[mul].src[1];
    g->nodes[gm].dtype = DT_BF16;
    REFUSE(mul, (void)0, "broadcast weight gamma is bf16, not f32");
    g->nodes[gm].dtype = DT_F32;
    const int al = g->nodes[ln].src[S_LAYERNORM_W];
    g->nodes[al].dtype = DT_Q8_0;
    REFUSE(ln, (void)0, "norm.w: expected an f32 weight [1, 8]");
    g->nodes[al].dtype = DT_F32;
  }
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "restored: %s", err.msg);

  /* the targets column: cpu lowers them, cuda refuses by name */
  pass_mark_used(&m);
  pass_plan(&m, target_find("cpu", &err));
  CHECK(ir_check_target(&m, IR_TARGET_CPU, &err) == SC_OK);
  CHECK(ir_check_target(&m, IR_TARGET_CUDA, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "cuda target: op SNAKE (snake, graph audio node");
  CHECK_CONTAINS(err.msg, "has no cuda lowering yet");
  StrBuf cu, host;
  sb_init(&cu);
  sb_init(&host);
  CgInfo info = {.weight_file = "m.weights", .band = "f32", .cpu_features = "", .target = target_find("cuda", &err)};
  CHECK(cg_emit_cuda(&m, &info, &cu, &host, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "op SNAKE");
  sb_free(&cu);
  sb_free(&host);
  /* each codec op alone is refused too (not only the first one met);
   * DWCONV, the Gated DeltaNet layers' conv as well, the GPU targets
   * lower, and LAYERNORM (Moshi's transformers) */
  const OpKind codec[] = {OP_IM2COL, OP_OVERLAP_ADD, OP_SNAKE, OP_CLAMP};
  for (size_t k = 0; k < sizeof codec / sizeof *codec; k++)
    CHECK_MSG(ir_op_targets[codec[k]] == T_CPU, "%s", ir_op_names[codec[k]]);
  CHECK(ir_op_targets[OP_LAYERNORM] == (T_CPU | T_CUDA | T_METAL) &&
        ir_op_targets[OP_DWCONV] == (T_CPU | T_CUDA | T_METAL));
  ir_module_free(&m);
}

/* MUL by a [1,C] row is lowered by both targets (MUL is T_CPU | T_CUDA):
 * the C map reads the row for every t, CUDA's broadcasts it too. */
static void test_mul_broadcast(void) {
  Module m;
  ir_module_init(&m);
  Graph *g = ir_graph_new(&m, "scale", SC_IN_EMBEDS, 4);
  const int x = ir_input_embeds(g, 8);
  const int gm = ir_weight(&m, g, ir_weight_add(&m, "gamma", DT_F32, 1, 1, 8));
  ir_output(g, ir_binary(g, OP_MUL, x, gm, "scaled"), OUT_LOGITS);
  sc_error err = {0};
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "%s", err.msg);
  pass_mark_used(&m);
  pass_plan(&m, target_find("cpu", &err));
  StrBuf c, cu, host;
  sb_init(&c), sb_init(&cu), sb_init(&host);
  CgInfo info = {.weight_file = "m.weights", .band = "f32", .cpu_features = "", .target = target_find("cpu", &err)};
  CHECK_MSG(cg_emit_c(&m, &info, &c, &err) == SC_OK, "%s", err.msg);
  CHECK(c.s && strstr(c.s, "const float b = ((const float *)W_gamma)[c]; /* one row for every t */"));
  info.target = target_find("cuda", &err);
  CHECK_MSG(cg_emit_cuda(&m, &info, &cu, &host, &err) == SC_OK, "%s", err.msg);
  CHECK(cu.s && strstr(cu.s, "const float bv = b[0 + c];"));
  sb_free(&c), sb_free(&cu), sb_free(&host);
  /* rows that differ other than by one broadcast row are still refused */
  g->nodes[gm].rows = 2;
  m.weights[0].rows = 2;
  CHECK(ir_verify(&m, g, &err) != SC_OK && strstr(err.msg, "operand shapes differ"));
  ir_module_free(&m);
}

/* pass_pack's derived conv weights (WGEN_CONV, WGEN_CONVT) are written in
 * the layouts of sc_conv_weight_im2col / sc_convt_weight_linear, the ones
 * the kernels are tested with. */
static void test_derived_weights(void) {
  enum { A = 7, B = 5, KK = 3 };
  static float src[A * B * KK], want[2][A * B * KK];
  for (int i = 0; i < A * B * KK; i++) src[i] = frand();
  sc_conv_weight_im2col(src, A, B, KK, want[0]);  /* Conv1d [A, B, k] -> [A, k*B] */
  sc_convt_weight_linear(src, A, B, KK, want[1]); /* ConvTranspose1d [A, B, k] -> [k*B, A] */
  StTensor t = {.name = "w", .dtype = ST_F32, .ndim = 3, .shape = {A, B, KK}, .numel = A * B * KK,
                .data = (const uint8_t *)src, .nbytes = sizeof src};
  Module m;
  ir_module_init(&m);
  const int wc = ir_weight_add(&m, "conv", DT_F32, 1, A, KK * B);
  const int wt = ir_weight_add(&m, "convt", DT_F32, 1, KK * B, A);
  const int gens[2] = {WGEN_CONV, WGEN_CONVT}, ids[2] = {wc, wt};
  for (int k = 0; k < 2; k++) {
    IrWeight *w = &m.weights[ids[k]];
    w->gen = gens[k];
    w->gen_k = KK;
    w->src[0] = (IrWeightSrc){.tensor = &t, .rows = A};
    w->n_src = 1;
    w->used = 1;
  }
  sc_error err = {0};
  FILE *f = fopen(P("derived.weights"), "wb");
  uint64_t sum = 0, bytes = 0;
  CHECK_MSG(f && pass_pack(&m, target_find("cpu", &err), f, P("derived.weights"), &sum, &bytes, 1, 1, &err) == SC_OK,
            "%s", err.msg);
  FILE *r = fopen(P("derived.weights"), "rb");
  for (int k = 0; r && k < 2; k++) {
    float got[A * B * KK];
    const IrWeight *w = &m.weights[ids[k]];
    CHECK(w->bytes == (int64_t)sizeof got);
    CHECK(!fseek(r, SC_WFILE_HEADER + (long)w->offset, SEEK_SET) && fread(got, sizeof got, 1, r) == 1);
    CHECK_MSG(!memcmp(got, want[k], sizeof got), "%s: packed rows differ from the kernels' layout", w->name);
  }
  if (r) fclose(r);
  ir_module_free(&m);
}

/* ---- end to end ---------------------------------------------------------- */

typedef const sc_model_desc *(*desc_fn)(void);

/* Build, compile with `cc`, load; run whole and in chunks against the
 * double reference. */
static void run_compiled(const char *cc, int fused) {
  static Params prm;
  static float wc_lin[C1 * K1 * C0], wt_lin[K3 * C2 * C1];
  make_params(&prm);
  Module m;
  build(&m, &prm, wc_lin, wt_lin);
  sc_error err = {0};
  const Target *cpu = target_find("cpu", &err);
  if (fused) {
    /* rule 7 leaves f32 weights alone (OpenBLAS would repack them per
     * piece); the band it reads is the module's, so the conv's weight
     * passes as bf16 for the rule while its node and data stay f32 */
    int cw = -1;
    for (int w = 0; w < m.n_weights; w++)
      if (!strcmp(m.weights[w].name, "conv.w")) cw = w;
    CHECK(cw >= 0);
    if (cw < 0) return;
    m.weights[cw].band = DT_BF16;
    pass_fuse(&m);
    m.weights[cw].band = DT_F32;
    Graph *fg = &m.graphs[0];
    int conv = -1;
    for (int i = 0; i < fg->n_nodes; i++)
      if (fg->nodes[i].op == OP_CONV1D) conv = i;
    CHECK_MSG(conv >= 0, "%s", "pass_fuse formed no CONV1D");
    if (conv < 0) return;
    IrNode *cn = &fg->nodes[conv];
    CHECK(cn->p.ksize == K1 && cn->p.dilation == D1 && cn->p.block >= 32 && cn->nsrc == S_CONV1D_B + 1);
    cn->p.block = 0;
    CHECK(ir_verify(&m, fg, &err) != SC_OK && strstr(err.msg, "block 0"));
    cn->p.block = 2; /* pieces of 2 rows, so that a 12-row call has several */
    const int st = cn->src[S_CONV1D_STATE];
    cn->src[S_CONV1D_STATE] = cn->src[S_CONV1D_X];
    CHECK(ir_verify(&m, fg, &err) != SC_OK && strstr(err.msg, "expected a state [4, 6]"));
    cn->src[S_CONV1D_STATE] = st;
  }
  pass_mark_used(&m);
  pass_plan(&m, cpu);
  CHECK_MSG(ir_verify(&m, &m.graphs[0], &err) == SC_OK, "%s", err.msg);
  size_t wbytes = 0;
  unsigned char *W = layout_weights(&m, &wbytes);
  StrBuf src;
  sb_init(&src);
  CgInfo info = {.weight_file = "m.weights", .band = "f32", .cpu_features = "", .target = cpu,
                 .weight_bytes = wbytes};
  CHECK_MSG(cg_emit_c(&m, &info, &src, &err) == SC_OK, "%s", err.msg);
  if (fused) {
    const char *call = src.s ? strstr(src.s, "K->conv1d(") : NULL;
    CHECK(call && !strncmp(call, "K->conv1d(K->ctx, SC_W_F32, W_conv_w, (const float *)W_conv_b, snake, 6, "
                                 "S_conv_ctx, (float *)(X + ", 99) &&
          strstr(call, "), 2, conv, 8, T, 6, 3, 2, 8);"));
  }
  else
    CHECK(src.s && strstr(src.s, "K->im2col(K->ctx, snake, 6, S_conv_ctx, conv_im2col, 18, T, 6, 3, 2);"));
  CHECK(src.s && strstr(src.s, "K->overlap_add(K->ctx, up_taps, 20, ((const float *)W_up_b), S_up_carry, up, 4, T, 4, 5, 2); /* (T * 2) rows out */"));
  CHECK(src.s && strstr(src.s, "const float b = ((const float *)W_gamma)[c]; /* one row for every t */"));
  CHECK(src.s && strstr(src.s, "a < -1.25f ? -1.25f : a > 1.25f ? 1.25f : a"));
  write_text(P("model.c"), src.s);
  write_text(P("sc_abi.h"), (const char *)sc_abi_text);
  char so[64];
  snprintf(so, sizeof so, "model_%s_%d.so", cc, fused);
  if (tc_compile(cc, P("model.c"), P(so), NULL, &err) != SC_OK) {
    CHECK_MSG(0, "%s: %s", cc, err.msg);
    sb_free(&src);
    free(W);
    ir_module_free(&m);
    return;
  }
  void *dl = dlopen(P(so), RTLD_NOW | RTLD_LOCAL);
  CHECK_MSG(dl, "%s", dlerror());
  if (!dl) return;
  const sc_model_desc *d = ((desc_fn)dlsym(dl, SC_DESC_SYMBOL))();
  CHECK(d && d->n_entries == 1 && !strcmp(d->entries[0].name, "audio"));
  const Graph *g = &m.graphs[0];
  unsigned char *S = calloc(1, (size_t)m.state_bytes + 64);
  unsigned char *X = aligned_alloc(64, ((size_t)g->scratch_bytes + 127) & ~(size_t)63);
  sc_kernel_ctx kc = {0};
  sc_kernels K;
  CHECK(sc_kernels_init(&K, &kc) == 0);

  const int T = MAXT;
  float e[MAXT * C0], whole[MAXT * S3 * C2], part[MAXT * S3 * C2];
  double ref[MAXT * S3 * C2];
  for (int i = 0; i < T * C0; i++) e[i] = frand() * 2.0f;
  reference(&prm, e, T, ref);
  sc_io io = {.embeds = e, .n = T, .pos = 0, .out = whole};
  CHECK(d->entries[0].fn(&K, W, S, X, &io) == 0);
  CHECK_MSG(!kc.failed, "%s", kc.err);
  double worst = 0, big = 0;
  int inside = 0;
  for (int i = 0; i < T * S3 * C2; i++) {
    const double dv = fabs(whole[i] - ref[i]);
    if (dv > worst) worst = dv;
    if (fabs(ref[i]) > big) big = fabs(ref[i]);
    inside += fabs(ref[i]) < HI;
  }
  CHECK_MSG(worst <= 2e-5 * big, "%s: whole call off the reference by %g (max |ref| %g)", cc, worst, big);
  CHECK_MSG(inside > T * S3 * C2 / 2, "%s: most outputs clamped (%d inside): a weak test", cc, inside);
  /* streamed: the session state carries the conv contexts and the carry */
  static const int chunks[][5] = {{1}, {2}, {3}, {5, 1, 4, 2}};
  for (size_t p = 0; p < sizeof chunks / sizeof *chunks; p++) {
    memset(S, 0, (size_t)m.state_bytes);
    int at = 0, k = 0;
    while (at < T) {
      int n = chunks[p][k % 4] ? chunks[p][k % 4] : chunks[p][0];
      k++;
      if (n > T - at) n = T - at;
      sc_io ci = {.embeds = e + at * C0, .n = n, .pos = at, .out = part + at * S3 * C2};
      CHECK(d->entries[0].fn(&K, W, S, X, &ci) == 0);
      at += n;
    }
    double diff = 0;
    for (int i = 0; i < T * S3 * C2; i++)
      if (fabs(part[i] - whole[i]) > diff) diff = fabs(part[i] - whole[i]);
    CHECK_MSG(diff <= 1e-6 * big, "%s: streamed in chunks (pattern %zu) differs from the whole call by %g", cc, p,
              diff);
  }
  CHECK_MSG(!kc.failed, "%s", kc.err);
  sc_kernel_ctx_free(&kc);
  dlclose(dl);
  free(S);
  free(X);
  free(W);
  sb_free(&src);
  ir_module_free(&m);
}

/* IM2COL_STRIDED: the builder's shapes (rows T/s), the printer, the
 * verifier's refusals (state rows with and without the replicate flag row,
 * a kernel shorter than the stride), and the CUDA target refusing it. */
static void test_strided(void) {
  Module m;
  ir_module_init(&m);
  m.max_context = 64;
  Graph *g = ir_graph_new(&m, "enc", SC_IN_EMBEDS, 8);
  const int x = ir_input_embeds(g, 3);
  const int st = ir_state(&m, g, ir_state_add(&m, "down.ctx", 2 + 1, 3)); /* k 4, s 2: P 2, + the flag row */
  const int y = ir_im2col_strided(g, x, st, 4, 1, 2, 1, "down");
  ir_output(g, y, OUT_LOGITS);
  sc_error err = {0};
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "%s", err.msg);
  CHECK(g->nodes[y].rows == IR_T_SCALED(1, 2) && g->nodes[y].cols == 12 && ir_graph_t_align(g) == 2);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ir_print(&m, g, f);
  fclose(f);
  CHECK_CONTAINS(text, "k=4 dilation=1 stride=2 replicate  ; down");
  free(text);
  IrNode keep = g->nodes[y];
  g->nodes[y].p.replicate = 0; /* then the state has one row too many */
  CHECK(ir_verify(&m, g, &err) != SC_OK);
  CHECK_CONTAINS(err.msg, "state down.ctx: expected a state [2, 3]");
  g->nodes[y] = keep;
  g->nodes[y].p.ksize = 1; /* (k-1)*d + 1 < s */
  CHECK(ir_verify(&m, g, &err) != SC_OK);
  CHECK_CONTAINS(err.msg, "need (k-1)*d + 1 >= s >= 1");
  g->nodes[y] = keep;
  CHECK(ir_check_target(&m, IR_TARGET_CUDA, &err) != SC_OK);
  CHECK_CONTAINS(err.msg, "IM2COL_STRIDED");
  ir_module_free(&m);
}

/* VQ_NEAREST: the builder's shapes (the earlier codes in front), the
 * verifier's refusals (a table of another width, a bf16 table, a wrong
 * output width), and the CUDA target refusing it. */
static void test_vq(void) {
  Module m;
  ir_module_init(&m);
  m.max_context = 64;
  Graph *g = ir_graph_new(&m, "enc", SC_IN_EMBEDS, 8);
  const int x = ir_input_embeds(g, 4);
  const int tw = ir_weight_add(&m, "cb0", DT_F32, 1, 32, 4), tb = ir_weight_add(&m, "cb1", DT_F32, 1, 16, 4);
  const int a = ir_vq_nearest(g, x, ir_weight(&m, g, tw), -1, "vq0");
  const int r = ir_slice(g, a, 1, 4, "res0"), c = ir_slice(g, a, 0, 1, "codes0");
  const int b = ir_vq_nearest(g, r, ir_weight(&m, g, tb), c, "vq1");
  ir_output(g, ir_slice(g, b, 0, 2, "codes"), OUT_LOGITS);
  sc_error err = {0};
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "%s", err.msg);
  CHECK(g->nodes[a].cols == 5 && g->nodes[b].cols == 6 && g->nodes[b].rows == IR_T && g->nodes[b].nsrc == 3);
  IrNode keep = g->nodes[b];
  g->nodes[b].cols = 5;
  CHECK(ir_verify(&m, g, &err) != SC_OK);
  CHECK_CONTAINS(err.msg, "output shape");
  g->nodes[b] = keep;
  const int t2 = g->nodes[b].src[S_VQ_NEAREST_TABLE];
  g->nodes[t2].dtype = DT_BF16;
  CHECK(ir_verify(&m, g, &err) != SC_OK);
  CHECK_CONTAINS(err.msg, "table cb1: expected an f32 weight [N < 2^24, 4]");
  g->nodes[t2].dtype = DT_F32;
  g->nodes[b].nsrc = 1;
  CHECK(ir_verify(&m, g, &err) != SC_OK);
  CHECK_CONTAINS(err.msg, "expected 2 or 3 (x, table[, codes])");
  g->nodes[b] = keep;
  CHECK(ir_check_target(&m, IR_TARGET_CUDA, &err) != SC_OK);
  CHECK_CONTAINS(err.msg, "VQ_NEAREST");
  ir_module_free(&m);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/sc_codec_ir.XXXXXX");
  if (!mkdtemp(root)) return 1;
  test_builders_and_verifier();
  test_strided();
  test_vq();
  test_derived_weights();
  test_mul_broadcast();
  for (int fused = 0; fused < 2; fused++) {
    run_compiled("tcc", fused);
    if (!system("command -v gcc >/dev/null 2>&1")) run_compiled("gcc", fused);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  if (system(cmd)) return 1;
  CHECK_DONE();
}
