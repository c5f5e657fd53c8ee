/*
 * fe_qwen35.c — the dense Qwen3.5 text model (model_type qwen3_5, the
 * published layout with its text model under text_config and tensors
 * model.language_model.*; or qwen3_5_text, what Qwen3_5ForCausalLM
 * writes, tensors model.*), from transformers 5.x modeling_qwen3_5.py:
 *
 *   x = embed(ids)
 *   per layer (layer_types, else full attention every
 *   full_attention_interval-th layer):
 *     linear_attention (Gated DeltaNet):
 *       h = rmsnorm1p(x);  qkv, z, b, a = h·Wqkv, h·Wz, h·Wb, h·Wa
 *       c = silu(causal depthwise conv_K(qkv));  q, k, v = split(c)
 *       q, k = l2norm per head (eps 1e-6);  beta = sigmoid(b)
 *       g = -exp(A_log) * softplus(a + dt_bias)
 *       o = delta_rule(q, k, v, g, beta; S)   (v-head h reads k-head h/r)
 *       x += (gated_rmsnorm(o, z) per v-head)·Wout
 *     full_attention: the Qwen3 block's attention with zero-centred norms,
 *       partial NeoX RoPE and o *= sigmoid(gate), the gate packed per head
 *       in q_proj (fe_qwen3.c)
 *     x += mlp(rmsnorm1p(x))   (SwiGLU)
 *   logits = rmsnorm1p(x_last)·Wlm   (Wlm = embed_tokens when tied)
 *
 * rmsnorm1p is RMSNORM with NORM_ONE_PLUS (stored w, applied as 1 + w);
 * the gated norm's w is plain.  Session state per GDN layer: the conv's
 * last K-1 inputs [K-1, conv_dim] and the delta-rule matrices [nv, dk*dv];
 * per full-attention layer the KV caches.  Entry points "prefill" and
 * "decode" as fe_llm's; the delta rule runs token by token in both (its
 * chunked form for long prompts is a later increment of issue 16).
 * Qwen3.5-MoE and Qwen3-Next are refused by name (fe_gdn_not_yet).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "sc_abi.h"

#define L2NORM_EPS 1e-6f  /* FLA's l2norm, hard-coded in transformers */
#define CONV_K_MAX 64

typedef struct GdnDims {
  Qwen3Dims a;                   /* the full-attention layers and every MLP */
  int64_t vocab, max_pos;
  int tied;
  int64_t nk, nv, dk, dv, kconv; /* linear_num_key_heads, ..., linear_conv_kernel_dim */
  unsigned char *gdn;            /* [layers]: 1 for a linear_attention layer */
} GdnDims;

typedef struct GdnLayer {
  Qwen3Layer b;                  /* attention (full layers), MLP, input norm */
  int in_qkv, in_z, in_b, in_a;  /* [2*nk*dk + nv*dv, H], [nv*dv, H], [nv, H], [nv, H] */
  int conv;                      /* [conv_dim, K] f32 depthwise taps */
  int decay_rate, dt_bias;       /* [1, nv] f32: -exp(A_log), dt_bias */
  int norm;                      /* [1, dv] f32: the gated norm's weight */
  int out;                       /* [H, nv*dv] */
  int conv_state, delta_state;   /* [K-1, conv_dim], [nv, dk*dv] */
} GdnLayer;

int fe_gdn_not_yet(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  (void)o;
  const char *what = !strcmp(m->model_type, "qwen3_next") ? "Qwen3-Next" : "Qwen3.5-MoE";
  return sc_fail(err, SC_EINPUT, "%s: model_type '%s' (%s) is not implemented yet: speechc builds the dense "
                 "Qwen3.5 text model (qwen3_5, qwen3_5_text); the mixture of experts and Qwen3-Next's grouped "
                 "projections come next", c->config_path, m->model_type, what);
}

/* ---- config ---------------------------------------------------------------
 * Qwen3_5TextConfig's keys, with its defaults for absent ones (what the
 * official class means by a missing key):
 *   vocab_size 248320, hidden_size 4096, intermediate_size 12288,
 *   num_hidden_layers 32, num_attention_heads 16, num_key_value_heads 4,
 *   head_dim 256 (not hidden/heads), rms_norm_eps 1e-6,
 *   max_position_embeddings 32768, linear_conv_kernel_dim 4,
 *   linear_key_head_dim 128, linear_value_head_dim 128,
 *   linear_num_key_heads 16, linear_num_value_heads 32          read;
 *   layer_types (linear_attention | full_attention), else
 *   full_attention_interval (4)                                  read;
 *   rope_theta, rope_parameters (rope_type default, rope_theta,
 *   partial_rotary_factor 0.25; mrope_section and mrope_interleaved
 *   change nothing for text, whose three position rows are equal)   read;
 *   tie_word_embeddings: the text config's, and for qwen3_5 the top
 *   level's too (Qwen3_5ForCausalLM reads one, the published
 *   Qwen3_5ForConditionalGeneration the other: they must agree);
 *   hidden_act          silu only;
 *   attention_bias      false only;
 *   num_experts, num_experts_per_tok, moe_intermediate_size,
 *   shared_expert_intermediate_size   refused (a MoE config);
 *   mtp_*, attention_dropout, initializer_range, use_cache, token ids:
 *   no effect on the text model's inference. */
static int read_config(const Checkpoint *c, const char *model_type, GdnDims *d, const cJSON **text,
                       char *where, size_t where_size, sc_error *err) {
  const cJSON *top = c->config, *tc = top;
  snprintf(where, where_size, "%s", c->config_path);
  if (!strcmp(model_type, "qwen3_5")) {
    tc = cJSON_GetObjectItemCaseSensitive(top, "text_config");
    if (!cJSON_IsObject(tc))
      return sc_fail(err, SC_EINPUT, "%s: text_config is missing or not an object (a qwen3_5 config.json holds "
                     "the text model there; a text-only one says model_type qwen3_5_text)", c->config_path);
    snprintf(where, where_size, "%s: text_config", c->config_path);
  }
  *text = tc;
  /* a mixture of experts: named, never half-read as the dense model */
  static const char *const moe[] = {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                                    "shared_expert_intermediate_size"};
  for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tc, moe[i]);
    if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0))
      return sc_fail(err, SC_EINPUT, "%s: '%s' makes this a mixture-of-experts config (num_experts, "
                     "num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size): not "
                     "implemented yet, speechc builds the dense Qwen3.5 text model", where, moe[i]);
  }
  Qwen3Dims *a = &d->a;
  memset(a, 0, sizeof *a);
  if (cfg_int_opt(tc, where, "vocab_size", 248320, &d->vocab, err) ||
      cfg_int_opt(tc, where, "hidden_size", 4096, &a->hidden, err) ||
      cfg_int_opt(tc, where, "intermediate_size", 12288, &a->inter, err) ||
      cfg_int_opt(tc, where, "num_hidden_layers", 32, &a->layers, err) ||
      cfg_int_opt(tc, where, "num_attention_heads", 16, &a->heads, err) ||
      cfg_int_opt(tc, where, "num_key_value_heads", 4, &a->kv_heads, err) ||
      cfg_int_opt(tc, where, "head_dim", 256, &a->head_dim, err) ||
      cfg_num_opt(tc, where, "rms_norm_eps", 1e-6, &a->eps, err) ||
      cfg_int_opt(tc, where, "max_position_embeddings", 32768, &d->max_pos, err) ||
      cfg_int_opt(tc, where, "linear_conv_kernel_dim", 4, &d->kconv, err) ||
      cfg_int_opt(tc, where, "linear_key_head_dim", 128, &d->dk, err) ||
      cfg_int_opt(tc, where, "linear_value_head_dim", 128, &d->dv, err) ||
      cfg_int_opt(tc, where, "linear_num_key_heads", 16, &d->nk, err) ||
      cfg_int_opt(tc, where, "linear_num_value_heads", 32, &d->nv, err))
    return err->code;
  const int64_t dims[] = {d->vocab, a->hidden, a->inter, a->heads, a->kv_heads, a->head_dim, d->max_pos,
                          d->dk, d->dv, d->nk, d->nv};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
    if (dims[i] < 1 || dims[i] > FE_DIM_MAX)
      return sc_fail(err, SC_EINPUT, "%s: vocab_size, hidden_size, intermediate_size, num_attention_heads, "
                     "num_key_value_heads, head_dim, max_position_embeddings and the linear_* head counts and "
                     "dims must be in 1..%d", where, FE_DIM_MAX);
  if (a->layers < 1 || a->layers > FE_LAYERS_MAX)
    return sc_fail(err, SC_EINPUT, "%s: num_hidden_layers %lld: expected 1..%d", where, (long long)a->layers,
                   FE_LAYERS_MAX);
  /* head counts that group */
  if (a->heads % a->kv_heads)
    return sc_fail(err, SC_EINPUT, "%s: num_attention_heads (%lld) must be a multiple of num_key_value_heads "
                   "(%lld)", where, (long long)a->heads, (long long)a->kv_heads);
  if (d->nv % d->nk)
    return sc_fail(err, SC_EINPUT, "%s: linear_num_value_heads (%lld) must be a multiple of "
                   "linear_num_key_heads (%lld): each key head serves nv / nk value heads", where,
                   (long long)d->nv, (long long)d->nk);
  if (a->head_dim < 2 || a->head_dim % 2 || a->head_dim > FE_HEAD_DIM_MAX || d->dk > FE_HEAD_DIM_MAX ||
      d->dv > FE_HEAD_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: head_dim %lld (even), linear_key_head_dim %lld and "
                   "linear_value_head_dim %lld must be at most %d", where, (long long)a->head_dim,
                   (long long)d->dk, (long long)d->dv, FE_HEAD_DIM_MAX);
  if (d->kconv < 2 || d->kconv > CONV_K_MAX)
    return sc_fail(err, SC_EINPUT, "%s: linear_conv_kernel_dim %lld: expected 2..%d", where, (long long)d->kconv,
                   CONV_K_MAX);
  if (!((float)a->eps > 0) || isinf((float)a->eps))
    return sc_fail(err, SC_EINPUT, "%s: rms_norm_eps %g must be positive and finite in f32", where, a->eps);
  /* RoPE: plain, partial */
  double prf;
  const char *prf_key;
  if (fe_rope_params(tc, where, 0.25, &a->theta, &prf, &prf_key, err)) return err->code;
  if (!(a->theta > 0))
    return sc_fail(err, SC_EINPUT, "%s: rope_theta %g must be positive", where, a->theta);
  const double rot = floor((double)a->head_dim * prf); /* Python's int() */
  if (!(prf > 0 && prf <= 1) || rot < 2 || (int64_t)rot % 2)
    return sc_fail(err, SC_EINPUT, "%s: %s %g gives %g rotary dims of head_dim %lld: expected an even count "
                   "in 2..head_dim", where, prf_key ? prf_key : "partial_rotary_factor (default)", prf, rot,
                   (long long)a->head_dim);
  a->rot_dims = (int)rot;
  /* what the block does not have */
  const char *act = NULL;
  int bias = 0;
  if (cfg_str_opt(tc, where, "hidden_act", "silu", &act, err) ||
      cfg_bool_opt(tc, where, "attention_bias", 0, &bias, err))
    return err->code;
  if (strcmp(act, "silu"))
    return sc_fail(err, SC_EINPUT, "%s: hidden_act '%s' is not supported (expected silu)", where, act);
  if (bias)
    return sc_fail(err, SC_EINPUT, "%s: attention_bias true is not supported yet (the q/k/v/o biases would be "
                   "dropped)", where);
  /* tied embeddings */
  int tied_text = 0, tied_top = 0;
  if (cfg_bool_opt(tc, where, "tie_word_embeddings", 0, &tied_text, err)) return err->code;
  d->tied = tied_text;
  if (tc != top) {
    const cJSON *tt = cJSON_GetObjectItemCaseSensitive(top, "tie_word_embeddings");
    const cJSON *tx = cJSON_GetObjectItemCaseSensitive(tc, "tie_word_embeddings");
    if (cfg_bool_opt(top, c->config_path, "tie_word_embeddings", 0, &tied_top, err)) return err->code;
    if (tt && !cJSON_IsNull(tt) && tx && !cJSON_IsNull(tx) && tied_top != tied_text)
      return sc_fail(err, SC_EINPUT, "%s: tie_word_embeddings is %s at the top level and %s in text_config: "
                     "Qwen3_5ForConditionalGeneration and Qwen3_5ForCausalLM would compute different logits",
                     c->config_path, tied_top ? "true" : "false", tied_text ? "true" : "false");
    if (tt && !cJSON_IsNull(tt)) d->tied = tied_top;
  }
  /* layer kinds */
  d->gdn = calloc((size_t)a->layers, 1);
  if (!d->gdn) return sc_fail(err, SC_ERUNTIME, "out of memory");
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(tc, "layer_types");
  if (lt && !cJSON_IsNull(lt)) {
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != a->layers)
      return sc_fail(err, SC_EINPUT, "%s: layer_types must be a list of num_hidden_layers %lld entries, found "
                     "%s%d entries", where, (long long)a->layers, cJSON_IsArray(lt) ? "" : "a non-list: ",
                     cJSON_IsArray(lt) ? cJSON_GetArraySize(lt) : 0);
    int i = 0;
    for (const cJSON *e = lt->child; e; e = e->next, i++) {
      const int lin = cJSON_IsString(e) && !strcmp(e->valuestring, "linear_attention");
      if (!lin && !(cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention")))
        return sc_fail(err, SC_EINPUT, "%s: layer_types[%d] is '%.40s': a Qwen3.5 layer is linear_attention or "
                       "full_attention", where, i, cJSON_IsString(e) ? e->valuestring : "(not a string)");
      d->gdn[i] = (unsigned char)lin;
    }
  } else {
    int64_t every;
    if (cfg_int_opt(tc, where, "full_attention_interval", 4, &every, err)) return err->code;
    if (every < 1 || every > FE_LAYERS_MAX)
      return sc_fail(err, SC_EINPUT, "%s: full_attention_interval %lld: expected 1..%d", where, (long long)every,
                     FE_LAYERS_MAX);
    for (int64_t i = 0; i < a->layers; i++) d->gdn[i] = (i + 1) % every != 0;
  }
  a->qk_norm = 1;
  a->attn_gate = 1;
  a->norm_mode = NORM_ONE_PLUS;
  return SC_OK;
}

/* ---- weights ------------------------------------------------------------- */

/* The depthwise conv1d weight [C, 1, K] as the f32 taps [C, K] DWCONV reads. */
static int conv_taps(Module *m, const Checkpoint *c, const char *name, const char *tensor, int64_t C, int64_t K,
                     sc_error *err) {
  const int64_t shape[3] = {C, 1, K};
  const StTensor *t = ckpt_tensor(c, tensor, 3, shape, err);
  if (!t) return -1;
  int w = ir_weight_add(m, name, DT_F32, 1, C, K);
  IrWeight *wt = &m->weights[w];
  wt->src[0] = (IrWeightSrc){.tensor = t, .rows = C};
  wt->n_src = 1;
  snprintf(wt->source, sizeof wt->source, "%.150s", tensor);
  return w;
}

/* -exp(A_log) [1, nv], computed at build (WGEN_NEG_EXP). */
static int decay_rate(Module *m, const Checkpoint *c, const char *name, const char *tensor, int64_t nv,
                      sc_error *err) {
  const StTensor *t = ckpt_tensor(c, tensor, 1, &nv, err);
  if (!t) return -1;
  int w = ir_weight_add(m, name, DT_F32, 1, 1, nv);
  IrWeight *wt = &m->weights[w];
  wt->src[0] = (IrWeightSrc){.tensor = t, .rows = 1};
  wt->n_src = 1;
  wt->gen = WGEN_NEG_EXP;
  snprintf(wt->source, sizeof wt->source, "-exp(%.150s)", tensor);
  return w;
}

static int gdn_weights(Module *m, const Checkpoint *c, const GdnDims *d, const char *prefix, int L, DType band,
                       GdnLayer *w, sc_error *err) {
  const int64_t H = d->a.hidden, kd = d->nk * d->dk, vd = d->nv * d->dv, C = 2 * kd + vd;
  char name[IR_NAME], tensor[200];
  memset(&w->b, 0xff, sizeof w->b); /* every index -1: the attention's weights and caches are absent */
#define T(s) (snprintf(tensor, sizeof tensor, "%s%d.%s", prefix, L, s), tensor)
#define NM(s) (snprintf(name, sizeof name, "layer%d.%s", L, s), name)
  if ((w->b.attn_norm = fe_weight(m, c, NM("attn_norm"), T("input_layernorm.weight"), 0, H, DT_F32, err)) < 0 ||
      (w->in_qkv = fe_weight(m, c, NM("qkv_proj"), T("linear_attn.in_proj_qkv.weight"), C, H, band, err)) < 0 ||
      (w->in_z = fe_weight(m, c, NM("z_proj"), T("linear_attn.in_proj_z.weight"), vd, H, band, err)) < 0 ||
      (w->in_b = fe_weight(m, c, NM("b_proj"), T("linear_attn.in_proj_b.weight"), d->nv, H, band, err)) < 0 ||
      (w->in_a = fe_weight(m, c, NM("a_proj"), T("linear_attn.in_proj_a.weight"), d->nv, H, band, err)) < 0 ||
      (w->conv = conv_taps(m, c, NM("conv"), T("linear_attn.conv1d.weight"), C, d->kconv, err)) < 0 ||
      (w->decay_rate = decay_rate(m, c, NM("decay_rate"), T("linear_attn.A_log"), d->nv, err)) < 0 ||
      (w->dt_bias = fe_weight(m, c, NM("dt_bias"), T("linear_attn.dt_bias"), 0, d->nv, DT_F32, err)) < 0 ||
      (w->norm = fe_weight(m, c, NM("gdn_norm"), T("linear_attn.norm.weight"), 0, d->dv, DT_F32, err)) < 0 ||
      (w->out = fe_weight(m, c, NM("out_proj"), T("linear_attn.out_proj.weight"), H, vd, band, err)) < 0)
    return err->code;
  w->conv_state = ir_state_add(m, NM("conv_state"), d->kconv - 1, C);
  w->delta_state = ir_state_add(m, NM("delta_state"), d->nv, d->dk * d->dv);
#undef T
#undef NM
  return fe_qwen3_mlp_weights(m, c, &d->a, prefix, "", L, band, &w->b, err);
}

/* ---- the graph ----------------------------------------------------------- */

/* The GDN token mixer of layer L with its residual add. */
static int gdn_mixer(Module *m, Graph *g, int x, const GdnDims *d, const GdnLayer *w, int L) {
  char nm[IR_NAME];
#define NAME(s) (snprintf(nm, sizeof nm, "layer%d.%s", L, s), nm)
#define W(i) ir_weight(m, g, (i))
  const int H = (int)d->a.hidden, nk = (int)d->nk, nv = (int)d->nv, dk = (int)d->dk, dv = (int)d->dv;
  const float eps = (float)d->a.eps;
  int h = ir_rmsnorm(g, x, W(w->b.attn_norm), H, NORM_ONE_PLUS, eps, NAME("attn_norm"));
  int qkv = ir_linear(g, h, W(w->in_qkv), -1, NAME("qkv"));
  int z = ir_linear(g, h, W(w->in_z), -1, NAME("z"));
  int b = ir_linear(g, h, W(w->in_b), -1, NAME("b"));
  int a = ir_linear(g, h, W(w->in_a), -1, NAME("a"));
  int cv = ir_dwconv(g, qkv, W(w->conv), -1, ir_state(m, g, w->conv_state), (int)d->kconv, 1, NAME("conv"));
  cv = ir_unary(g, OP_SILU, cv, NAME("conv_silu"));
  int q = ir_slice(g, cv, 0, nk * dk, NAME("q"));
  int k = ir_slice(g, cv, nk * dk, nk * dk, NAME("k"));
  int v = ir_slice(g, cv, 2 * nk * dk, nv * dv, NAME("v"));
  q = ir_l2norm(g, q, dk, L2NORM_EPS, NAME("q_l2norm"));
  k = ir_l2norm(g, k, dk, L2NORM_EPS, NAME("k_l2norm"));
  int beta = ir_unary(g, OP_SIGMOID, b, NAME("beta"));
  int gt = ir_binary(g, OP_ADD, a, W(w->dt_bias), NAME("a_dt"));
  gt = ir_unary(g, OP_SOFTPLUS, gt, NAME("a_softplus"));
  gt = ir_binary(g, OP_MUL, gt, W(w->decay_rate), NAME("g"));
  int o = ir_delta_rule(g, q, k, v, gt, beta, ir_state(m, g, w->delta_state), nv, nk, dk,
                        (float)(1.0 / sqrt((double)dk)), NAME("delta_rule"));
  o = ir_gated_rmsnorm(g, o, z, W(w->norm), dv, eps, NAME("gdn_norm"));
  o = ir_linear(g, o, W(w->out), -1, NAME("out"));
  return ir_binary(g, OP_ADD, x, o, NAME("mix_res"));
#undef W
#undef NAME
}

static void build_graph(Module *m, Graph *g, const GdnDims *d, const GdnLayer *lw, int embed, int final_norm,
                        int head, int rope) {
  int ids = ir_input_ids(g);
  int x = ir_embed(g, ir_weight(m, g, embed), ids, "embed");
  int rope_w = ir_weight(m, g, rope);
  for (int L = 0; L < d->a.layers; L++) {
    if (d->gdn[L]) {
      x = gdn_mixer(m, g, x, d, &lw[L], L);
      x = fe_qwen3_mlp(m, g, x, &d->a, &lw[L].b, "", L);
    } else {
      x = fe_qwen3_layer(m, g, x, &d->a, &lw[L].b, rope_w, "", L);
    }
  }
  int last = ir_row(g, x, -1, "last");
  int f = ir_rmsnorm(g, last, ir_weight(m, g, final_norm), (int)d->a.hidden, NORM_ONE_PLUS, (float)d->a.eps,
                     "final_norm");
  int logits = ir_linear(g, f, ir_weight(m, g, head), -1, "lm_head");
  ir_output(g, logits, OUT_LOGITS);
}

int fe_qwen35(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  GdnDims d;
  memset(&d, 0, sizeof d);
  const cJSON *tc;
  char where[300];
  GdnLayer *lw = NULL;
  if (read_config(c, m->model_type, &d, &tc, where, sizeof where, err)) goto fail;
  const int64_t H = d.a.hidden;
  const int max_ctx = o->max_context ? o->max_context : (int)(d.max_pos < 2048 ? d.max_pos : 2048);
  m->vocab = (int)d.vocab;
  m->hidden = (int)H;
  m->n_layers = (int)d.a.layers;
  m->max_context = max_ctx;
  /* the published layout's prefix, or the text model's own (both are what
   * transformers' qwen3_5_text loader takes) */
  const char *base = ckpt_find(c, "model.language_model.embed_tokens.weight") || !ckpt_find(c, "model.embed_tokens.weight")
                         ? "model.language_model."
                         : "model.";
  char tensor[200], prefix[64];
  snprintf(prefix, sizeof prefix, "%slayers.", base);
  lw = calloc((size_t)d.a.layers, sizeof *lw);
  if (!lw) {
    sc_fail(err, SC_ERUNTIME, "out of memory");
    goto fail;
  }
  snprintf(tensor, sizeof tensor, "%sembed_tokens.weight", base);
  const int embed = fe_weight(m, c, "embed_tokens", tensor, d.vocab, H, o->band, err);
  if (embed < 0) goto fail;
  for (int L = 0; L < d.a.layers; L++) {
    int rc = d.gdn[L] ? gdn_weights(m, c, &d, prefix, L, o->band, &lw[L], err)
                      : fe_qwen3_layer_weights(m, c, &d.a, prefix, "", L, max_ctx, o->band, &lw[L].b, err);
    if (rc) goto fail;
  }
  snprintf(tensor, sizeof tensor, "%snorm.weight", base);
  const int final_norm = fe_weight(m, c, "final_norm", tensor, 0, H, DT_F32, err);
  if (final_norm < 0) goto fail;
  int head = embed;
  if (!d.tied) {
    head = fe_weight(m, c, "lm_head", "lm_head.weight", d.vocab, H, o->band, err);
    if (head < 0) {
      if (!ckpt_find(c, "lm_head.weight"))
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                 " (hint: config.json says tie_word_embeddings is false)");
      goto fail;
    }
  }
  const int rope = fe_rope_table(m, max_ctx, d.a.rot_dims, d.a.theta);
  build_graph(m, ir_graph_new(m, "prefill", SC_IN_IDS, fe_chunk(o, 128, max_ctx)), &d, lw, embed, final_norm,
              head, rope);
  build_graph(m, ir_graph_new(m, "decode", SC_IN_IDS, 1), &d, lw, embed, final_norm, head, rope);
  free(lw);
  free(d.gdn);
  return SC_OK;
fail:
  free(lw);
  free(d.gdn);
  return err->code;
}
