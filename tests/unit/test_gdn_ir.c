/*
 * test_gdn_ir.c — the Gated DeltaNet ops of ops.def (L2NORM,
 * GATED_RMSNORM, DELTA_RULE) and what Qwen3.5 needs around them, through
 * the compiler:
 *   - a GDN token mixer built from the builders (DWCONV without bias,
 *     SILU, SLICEs, L2NORM, SIGMOID, ADD of a bias row, SOFTPLUS, MUL by
 *     a row, DELTA_RULE, GATED_RMSNORM): shapes, ops.def's columns, the
 *     printer's parameters;
 *   - the verifier refuses each malformed form naming it;
 *   - the targets column: the C target lowers the graph (the kernel calls
 *     and SOFTPLUS's threshold in the text), and so does CUDA (a kernel
 *     per op, named after the node; a chunkwise delta rule whose block
 *     would not fit in shared memory is refused naming --delta-chunk);
 *   - pass_pack: a weight made of row runs of a tensor (one half of each
 *     head of a packed projection) and a WGEN_NEG_EXP weight hold the
 *     rows and values they say.
 *   - the mixture of experts (TOPK_ROUTE, MOE_COMBINE): builders, printer,
 *     verifier refusals, which inputs stay quantized, the planner's
 *     temporaries, C lowering, CUDA lowering (the router kernel, the
 *     experts' two kernels decoding q8_0 rows).
 * (The kernels: test_gdn_kernels.c, test_moe_kernels.c; the whole models:
 * test_gdn.c.)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg.h"
#include "check.h"
#include "ir.h"
#include "passes.h"
#include "safetensors.h"
#include "scratch.h"
#include "target.h"

enum { H = 16, NK = 2, NV = 6, DK = 4, DV = 3, KC = 4, KD = NK * DK, VD = NV * DV, CD = 2 * KD + VD };

typedef struct Mixer {
  int conv, l2q, sig, add, sp, mul, delta, norm;
} Mixer;

/* x [T, H] -> the GDN mixer of one layer (unfused), its nodes in *n. */
static Graph *build(Module *m, Mixer *n) {
  ir_module_init(m);
  snprintf(m->family, sizeof m->family, "llm");
  snprintf(m->model_type, sizeof m->model_type, "test_gdn");
  m->max_context = 64;
  Graph *g = ir_graph_new(m, "prefill", SC_IN_EMBEDS, 8);
  const int x = ir_input_embeds(g, H);
#define WT(name, r, c, band) ir_weight(m, g, ir_weight_add(m, name, band, 1, r, c))
  const int qkv = ir_linear(g, x, WT("qkv_proj", CD, H, DT_BF16), -1, "qkv");
  const int z = ir_linear(g, x, WT("z_proj", VD, H, DT_BF16), -1, "z");
  const int b = ir_linear(g, x, WT("b_proj", NV, H, DT_BF16), -1, "b");
  const int a = ir_linear(g, x, WT("a_proj", NV, H, DT_BF16), -1, "a");
  const int cs = ir_state(m, g, ir_state_add(m, "conv_state", KC - 1, CD));
  n->conv = ir_dwconv(g, qkv, WT("conv", CD, KC, DT_F32), -1, cs, KC, 1, "conv");
  const int c = ir_unary(g, OP_SILU, n->conv, "conv_silu");
  const int q = ir_slice(g, c, 0, KD, "q"), k = ir_slice(g, c, KD, KD, "k"), v = ir_slice(g, c, 2 * KD, VD, "v");
  n->l2q = ir_l2norm(g, q, DK, 1e-6f, "q_l2norm");
  const int l2k = ir_l2norm(g, k, DK, 1e-6f, "k_l2norm");
  n->sig = ir_unary(g, OP_SIGMOID, b, "beta");
  n->add = ir_binary(g, OP_ADD, a, WT("dt_bias", 1, NV, DT_F32), "a_dt");
  n->sp = ir_unary(g, OP_SOFTPLUS, n->add, "a_softplus");
  n->mul = ir_binary(g, OP_MUL, n->sp, WT("decay_rate", 1, NV, DT_F32), "g");
  const int ds = ir_state(m, g, ir_state_add(m, "delta_state", NV, DK * DV));
  n->delta = ir_delta_rule(g, n->l2q, l2k, v, n->mul, n->sig, ds, NV, NK, DK, 0.5f, "delta_rule");
  n->norm = ir_gated_rmsnorm(g, n->delta, z, WT("gdn_norm", 1, DV, DT_F32), DV, 1e-6f, "gdn_norm");
  ir_output(g, ir_linear(g, n->norm, WT("out_proj", H, VD, DT_BF16), -1, "out"), OUT_HIDDEN);
#undef WT
  return g;
}

static void test_graph(void) {
  Module m;
  Mixer n;
  Graph *g = build(&m, &n);
  sc_error err = {0};
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "%s", err.msg);
  const IrNode *d = &g->nodes[n.delta];
  CHECK(d->rows == IR_T && d->cols == VD && d->p.heads == NV && d->p.kv_heads == NK && d->p.head_dim == DK);
  CHECK(g->nodes[n.conv].nsrc == S_DWCONV_B && g->nodes[n.norm].cols == VD);
  CHECK(ir_op_flags[OP_DELTA_RULE] & F_STATE && !(ir_op_flags[OP_L2NORM] & F_STATE));
  CHECK(ir_op_inplace[OP_L2NORM] == 0 && ir_op_inplace[OP_GATED_RMSNORM] == S_GATED_RMSNORM_X &&
        ir_op_inplace[OP_DELTA_RULE] == -1);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ir_print(&m, g, f);
  fclose(f);
  CHECK_CONTAINS(text, " : f32[T, 34] k=4 dilation=1  ; conv");
  CHECK_CONTAINS(text, " : f32[T, 8] group=4 eps=1e-06  ; q_l2norm");
  CHECK_CONTAINS(text, " : f32[T, 18] v_heads=6 k_heads=2 dk=4 scale=0.5  ; delta_rule");
  CHECK_CONTAINS(text, " : f32[T, 18] group=3 eps=1e-06  ; gdn_norm");
  free(text);

#define REFUSE(NODE, EDIT, WANT)                                                                  \
  do {                                                                                            \
    IrNode keep = g->nodes[NODE];                                                                 \
    IrNode *n_ = &g->nodes[NODE];                                                                 \
    (void)n_;                                                                                     \
    EDIT;                                                                                         \
    sc_error e_ = {0};                                                                            \
    CHECK_MSG(ir_verify(&m, g, &e_) != SC_OK && strstr(e_.msg, WANT), "%s: '%s'", #EDIT, e_.msg); \
    g->nodes[NODE] = keep;                                                                        \
  } while (0)
  REFUSE(n.delta, n_->p.kv_heads = 4, "heads 6, kv_heads 4, head_dim 4 (v heads a multiple of k heads)");
  REFUSE(n.delta, n_->p.head_dim = 2, "q, k have 8, 8 cols, expected kv_heads * head_dim = 4");
  REFUSE(n.delta, n_->p.heads = 5, "heads 5, kv_heads 2");
  REFUSE(n.delta, n_->src[S_DELTA_RULE_STATE] = n_->src[S_DELTA_RULE_V], "expected a state [6, 12]");
  REFUSE(n.delta, n_->src[S_DELTA_RULE_BETA] = n_->src[S_DELTA_RULE_V], "g, beta need one column per v head (6)");
  REFUSE(n.delta, n_->p.scale = NAN, "scale nan");
  REFUSE(n.delta, n_->p.block = 300, "chunk 300 (0: token by token, else 1..256)");
  REFUSE(n.l2q, n_->p.group = 3, "group 3 does not divide 8 cols");
  REFUSE(n.l2q, n_->p.eps = -1, "eps -1");
  REFUSE(n.norm, n_->src[S_GATED_RMSNORM_Z] = n_->src[S_GATED_RMSNORM_X] - 1, "is not x's shape");
  REFUSE(n.norm, n_->p.group = 6, "norm weight gdn_norm: expected an f32 weight [1, 6]");
  REFUSE(n.conv, n_->nsrc = 2, "has 2 inputs, expected 3 or 4 (x, taps, state[, bias])");
  /* weights read as floats must be f32, in either operand of ADD/MUL */
  {
    const int bias = g->nodes[n.add].src[1];
    g->nodes[bias].dtype = DT_BF16;
    REFUSE(n.add, (void)0, "broadcast weight dt_bias is bf16, not f32");
    g->nodes[bias].dtype = DT_F32;
    const int w = g->nodes[n.norm].src[S_GATED_RMSNORM_W];
    g->nodes[w].dtype = DT_BF16;
    REFUSE(n.norm, (void)0, "expected an f32 weight [1, 3]");
    g->nodes[w].dtype = DT_F32;
  }
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "restored: %s", err.msg);

  /* both targets lower it */
  pass_mark_used(&m);
  pass_plan(&m, target_find("cuda", &err));
  CHECK(ir_check_target(&m, IR_TARGET_CPU, &err) == SC_OK);
  CHECK_MSG(ir_check_target(&m, IR_TARGET_CUDA, &err) == SC_OK, "%s", err.msg);
  {
    StrBuf cu, host;
    sb_init(&cu);
    sb_init(&host);
    CgInfo ci = {.weight_file = "m.weights", .band = "bf16", .cpu_features = "", .target = target_find("cuda", &err)};
    CHECK_MSG(cg_emit_cuda(&m, &ci, &cu, &host, &err) == SC_OK, "%s", err.msg);
    CHECK_CONTAINS(cu.s, "SC_KERNEL(256) prefill_conv(sc_device_io *io, const float *x, const float *w, float *st,");
    CHECK_CONTAINS(cu.s, "enum { C = 34, K = 4, D = 1, S = 3 }; /* channels, taps, dilation, state rows */");
    CHECK_CONTAINS(cu.s, "SC_KERNEL(32) prefill_q_l2norm(");
    CHECK_CONTAINS(cu.s, "rr = 1.0f / sqrtf(s + 9.99999997e-07f); /* a sum, not a mean */");
    CHECK_CONTAINS(cu.s, "yr[c] = w[c] * (xr[c] * rr) * (zc / (1.0f + expf(-zc)));");
    CHECK_CONTAINS(cu.s, "SC_KERNEL(256) prefill_delta_rule(");
    CHECK_CONTAINS(cu.s, "enum { DK = 4, DV = 3, NW = 8 }; /* k and v head dims, warps */");
    CHECK_CONTAINS(cu.s, "const int h = blockIdx.x, kh = h / 3, wid = threadIdx.x >> 5, lane = threadIdx.x & 31;");
    CHECK(!strstr(cu.s, "the chunkwise form")); /* p.block 0: token by token */
    CHECK_CONTAINS(host.s, "launch_prefill_delta_rule(K, q_l2norm, k_l2norm, v, g, beta, S_delta_state, delta_rule, T)");
    sb_free(&cu);
    sb_free(&host);
    /* the chunkwise form from 16 tokens: its arrays in shared memory */
    g->max_tokens = 32;
    g->nodes[n.delta].p.block = 16;
    sb_init(&cu);
    sb_init(&host);
    CHECK_MSG(cg_emit_cuda(&m, &ci, &cu, &host, &err) == SC_OK, "%s", err.msg);
    CHECK_CONTAINS(cu.s, "if (T >= 16) { /* the chunkwise form, 16 tokens a chunk */");
    sb_free(&cu);
    sb_free(&host);
    g->nodes[n.delta].p.block = 256;
    sb_init(&cu);
    sb_init(&host);
    CHECK(cg_emit_cuda(&m, &ci, &cu, &host, &err) == SC_EINPUT);
    CHECK_CONTAINS(err.msg, "CUDA target: delta_rule: the delta rule's block needs");
    CHECK_CONTAINS(err.msg, "(hint: a smaller --delta-chunk, or 0 for the recurrent form)");
    sb_free(&cu);
    sb_free(&host);
    g->nodes[n.delta].p.block = 0;
    g->max_tokens = 8;
  }
  StrBuf c;
  sb_init(&c);
  CgInfo info = {.weight_file = "m.weights", .band = "f32", .cpu_features = "", .target = target_find("cpu", &err)};
  CHECK_MSG(cg_emit_c(&m, &info, &c, &err) == SC_OK, "%s", err.msg);
  CHECK(c.s && strstr(c.s, "K->dwconv(K->ctx, qkv, 34, ((const float *)W_conv), 0, S_conv_state,"));
  CHECK(c.s && strstr(c.s, "K->l2norm(K->ctx, q, 34, q_l2norm, 8, T, 8, 4, 9.99999997e-07f);"));
  CHECK(c.s && strstr(c.s, "S_delta_state, delta_rule, 18, T, 6, 2, 4, 3, 0.5f, 0);"));
  CHECK(c.s && strstr(c.s, "K->gated_rmsnorm(K->ctx, delta_rule, 18, z, 18, ((const float *)W_gdn_norm),"));
  CHECK(c.s && strstr(c.s, "= a > 20.0f ? a : K->logf(1.0f + K->expf(a));"));
  CHECK(c.s && strstr(c.s, "const float b = ((const float *)W_dt_bias)[c]; /* one row for every t */"));
  sb_free(&c);
  const OpKind gdn[] = {OP_L2NORM, OP_GATED_RMSNORM, OP_DELTA_RULE, OP_DWCONV};
  for (size_t k = 0; k < sizeof gdn / sizeof *gdn; k++)
    CHECK_MSG(ir_op_targets[gdn[k]] == (T_CPU | T_CUDA | T_METAL), "%s", ir_op_names[gdn[k]]);
  ir_module_free(&m);
}

/* The mixture of experts: TOPK_ROUTE and MOE_COMBINE through the builders,
 * printer, verifier, targets column, C lowering and the packer's band
 * rule (expert matrices may stay quantized). */
static void test_moe(void) {
  enum { MH = 64, E = 4, K = 2, I = 32 };
  Module m;
  ir_module_init(&m);
  snprintf(m.family, sizeof m.family, "llm");
  snprintf(m.model_type, sizeof m.model_type, "test_moe");
  m.max_context = 64;
  Graph *g = ir_graph_new(&m, "prefill", SC_IN_EMBEDS, 8);
  const int x = ir_input_embeds(g, MH);
#define WT(name, r, c, band) ir_weight(&m, g, ir_weight_add(&m, name, band, 1, r, c))
  const int logits = ir_linear(g, x, WT("router", E, MH, DT_F32), -1, "router");
  const int route = ir_topk_route(g, logits, K, 1, "route");
  const int sh = ir_linear(g, x, WT("shared", MH, MH, DT_Q8_0), -1, "shared");
  const int sg = ir_linear(g, x, WT("shared_gate", 1, MH, DT_F32), -1, "shared_gate");
  const int moe = ir_moe_combine(g, x, route, WT("experts_gate_up", E * 2 * I, MH, DT_Q8_0),
                                 WT("experts_down", E * MH, I, DT_Q8_0), sh, sg, E, "experts");
  ir_output(g, moe, OUT_HIDDEN);
#undef WT
  sc_error err = {0};
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "%s", err.msg);
  CHECK(g->nodes[route].rows == IR_T && g->nodes[route].cols == 2 * K && g->nodes[moe].cols == MH);
  CHECK(g->nodes[moe].p.experts == E && g->nodes[moe].p.top_k == K && g->nodes[moe].nsrc == S_MOE_COMBINE_SG + 1);
  CHECK(ir_reads_matrix(&g->nodes[moe], S_MOE_COMBINE_WGU) && ir_reads_matrix(&g->nodes[moe], S_MOE_COMBINE_WD) &&
        !ir_reads_matrix(&g->nodes[moe], S_MOE_COMBINE_X) && !ir_reads_matrix(&g->nodes[moe], S_MOE_COMBINE_SG));
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ir_print(&m, g, f);
  fclose(f);
  CHECK_CONTAINS(text, " : f32[T, 4] experts=4 k=2 renorm  ; route");
  CHECK_CONTAINS(text, " : f32[T, 64] experts=4 k=2 shared  ; experts");
  free(text);
#undef REFUSE
#define REFUSE(NODE, EDIT, WANT)                                                                  \
  do {                                                                                            \
    IrNode keep = g->nodes[NODE];                                                                 \
    IrNode *n_ = &g->nodes[NODE];                                                                 \
    EDIT;                                                                                         \
    sc_error e_ = {0};                                                                            \
    CHECK_MSG(ir_verify(&m, g, &e_) != SC_OK && strstr(e_.msg, WANT), "%s: '%s'", #EDIT, e_.msg); \
    g->nodes[NODE] = keep;                                                                        \
  } while (0)
  REFUSE(route, n_->p.top_k = 5, "top 5 of 4 experts");
  REFUSE(route, n_->cols = 6, "into 6 cols");
  REFUSE(moe, n_->nsrc = 5, "has 5 inputs, expected 4 or 6");
  REFUSE(moe, n_->p.experts = 3, "expert matrices experts_gate_up [256, 64], experts_down [256, 32]");
  REFUSE(moe, n_->src[S_MOE_COMBINE_ROUTE] = x, "route embeds [64 cols] for top 2 of 4 experts");
  REFUSE(moe, n_->src[S_MOE_COMBINE_SG] = sh, "shared expert shared or its gate shared: expected [T, 64] and [T, 1]");
#undef REFUSE
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "restored: %s", err.msg);
  pass_mark_used(&m);
  pass_plan(&m, target_find("cpu", &err));
  CHECK(g->nodes[moe].aux >= 0); /* the kernel's temporaries */
  CHECK_MSG(ir_check_target(&m, IR_TARGET_CUDA, &err) == SC_OK, "%s", err.msg);
  {
    StrBuf cu, host;
    sb_init(&cu);
    sb_init(&host);
    CgInfo ci = {.weight_file = "m.weights", .band = "q8_0", .cpu_features = "", .target = target_find("cuda", &err)};
    CHECK_MSG(cg_emit_cuda(&m, &ci, &cu, &host, &err) == SC_OK, "%s", err.msg);
    CHECK_CONTAINS(cu.s, "SC_KERNEL(32) prefill_route(");
    CHECK_CONTAINS(cu.s, "if (lane == 0)\n    for (int j = 0; j < K; j++) yt[j] /= total;"); /* renorm */
    CHECK_CONTAINS(cu.s, "SC_KERNEL(256) prefill_experts_gate_up(");
    CHECK_CONTAINS(cu.s, "const unsigned char *w0 = (const unsigned char *)w + ((long long)e * 64 + row) * 68LL;");
    CHECK_CONTAINS(cu.s, "const float q0 = (float)(signed char)k0[2 + lane];");
    CHECK_CONTAINS(cu.s, "SC_KERNEL(256) prefill_experts(");
    CHECK_CONTAINS(cu.s, "const unsigned char *w0 = (const unsigned char *)w + ((long long)re[j] * H + row) * 34LL;");
    CHECK_CONTAINS(cu.s, "acc += (1.0f / (1.0f + expf(-sg[(long long)t * 1]))) * sh[(long long)t * 64 + row];");
    /* the pairs' intermediates in the planner's temporary; T * k pairs */
    char want[160];
    snprintf(want, sizeof want, "launch_prefill_experts_gate_up(K, embeds, route, W_experts_gate_up, (float *)(X + %lld), T)",
             (long long)g->nodes[moe].aux);
    CHECK_CONTAINS(host.s, want);
    CHECK_CONTAINS(host.s, "return K->launch(K->ctx, 4, 4, T * 2, 1, 256, 1, 1, 0, args);");
    sb_free(&cu);
    sb_free(&host);
  }
  StrBuf c;
  sb_init(&c);
  CgInfo info = {.weight_file = "m.weights", .band = "q8_0", .cpu_features = "", .target = target_find("cpu", &err)};
  CHECK_MSG(cg_emit_c(&m, &info, &c, &err) == SC_OK, "%s", err.msg);
  CHECK(c.s && strstr(c.s, "K->topk_route(K->ctx, router, 4, route, 4, T, 4, 2, 1);"));
  CHECK(c.s && strstr(c.s, "K->moe(K->ctx, SC_W_Q8_0, W_experts_gate_up, SC_W_Q8_0, W_experts_down, embeds, 64, route, 4,"));
  CHECK(c.s && strstr(c.s, "shared, 64, shared_gate, 1, experts, 64, X + "));
  sb_free(&c);
  CHECK(ir_op_targets[OP_TOPK_ROUTE] == (T_CPU | T_CUDA | T_METAL) && ir_op_targets[OP_MOE_COMBINE] == (T_CPU | T_CUDA | T_METAL));
  ir_module_free(&m);
}

/* A weight of row runs (Qwen3.5's q_proj halves) and -exp(A_log). */
static void test_pack(void) {
  enum { HEADS = 3, HD = 4, COLS = 5, ROWS = HEADS * 2 * HD };
  static float src[ROWS * COLS], alog[7];
  for (int i = 0; i < ROWS * COLS; i++) src[i] = (float)i;
  for (int i = 0; i < 7; i++) alog[i] = 0.37f * (float)i - 1.0f;
  StTensor t = {.name = "q_proj", .dtype = ST_F32, .ndim = 2, .shape = {ROWS, COLS}, .numel = ROWS * COLS,
                .data = (const uint8_t *)src, .nbytes = sizeof src};
  StTensor ta = {.name = "A_log", .dtype = ST_F32, .ndim = 1, .shape = {7}, .numel = 7,
                 .data = (const uint8_t *)alog, .nbytes = sizeof alog};
  Module m;
  ir_module_init(&m);
  int ids[3];
  for (int half = 0; half < 2; half++) {
    ids[half] = ir_weight_add(&m, half ? "gate" : "query", DT_F32, 1, HEADS * HD, COLS);
    IrWeight *w = &m.weights[ids[half]];
    w->src[0] = (IrWeightSrc){.tensor = &t, .rows = HEADS * HD, .row0 = half * HD, .run = HD, .stride = 2 * HD};
    w->n_src = 1;
    w->used = 1;
  }
  ids[2] = ir_weight_add(&m, "decay_rate", DT_F32, 1, 1, 7);
  IrWeight *w = &m.weights[ids[2]];
  w->src[0] = (IrWeightSrc){.tensor = &ta, .rows = 1};
  w->n_src = 1;
  w->gen = WGEN_NEG_EXP;
  w->used = 1;
  CHECK(ir_src_row(&m.weights[ids[1]].src[0], 5) == 2 * HD + HD + 1);
  sc_error err = {0};
  FILE *f = fopen(P("runs.weights"), "wb");
  uint64_t sum = 0, bytes = 0;
  CHECK_MSG(f && pass_pack(&m, target_find("cpu", &err), f, P("runs.weights"), &sum, &bytes, 1, 1, &err) == SC_OK,
            "%s", err.msg);
  FILE *r = fopen(P("runs.weights"), "rb");
  for (int half = 0; r && half < 2; half++) {
    float got[HEADS * HD * COLS];
    CHECK(!fseek(r, SC_WFILE_HEADER + (long)m.weights[ids[half]].offset, SEEK_SET) &&
          fread(got, sizeof got, 1, r) == 1);
    int bad = 0;
    for (int h = 0; h < HEADS; h++)
      for (int i = 0; i < HD; i++)
        for (int c = 0; c < COLS; c++)
          bad += got[(h * HD + i) * COLS + c] != src[(h * 2 * HD + half * HD + i) * COLS + c];
    CHECK_MSG(!bad, "%s: %d elements are not the rows of their half", half ? "gate" : "query", bad);
  }
  float neg[7];
  CHECK(r && !fseek(r, SC_WFILE_HEADER + (long)m.weights[ids[2]].offset, SEEK_SET) && fread(neg, sizeof neg, 1, r) == 1);
  for (int i = 0; i < 7; i++) CHECK_MSG(neg[i] == -expf(alog[i]), "decay_rate[%d] %g", i, neg[i]);
  if (r) fclose(r);
  ir_module_free(&m);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/speechc-gdn-ir-XXXXXX");
  if (!mkdtemp(root)) return 1;
  (void)write_text;
  test_graph();
  test_moe();
  test_pack();
  unlink(P("runs.weights"));
  rmdir(root);
  CHECK_DONE();
}
