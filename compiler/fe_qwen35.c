/*
 * fe_qwen35.c — the Gated DeltaNet hybrids, text model only: Qwen3.5 dense
 * (model_type qwen3_5, the published layout with its text model under
 * text_config and tensors model.language_model.*; or qwen3_5_text, what
 * Qwen3_5ForCausalLM writes, tensors model.*), Qwen3.5-MoE (qwen3_5_moe,
 * qwen3_5_moe_text, likewise) and Qwen3-Next (qwen3_next, tensors
 * model.*), from transformers 5.x modeling_qwen3_5.py,
 * modeling_qwen3_5_moe.py and modeling_qwen3_next.py:
 *
 *   x = embed(ids)
 *   per layer (layer_types, else full attention every
 *   full_attention_interval-th layer):
 *     linear_attention (Gated DeltaNet):
 *       h = rmsnorm1p(x);  qkv, z, b, a = h·Wqkv, h·Wz, h·Wb, h·Wa
 *         (Qwen3-Next: h·Wqkvz and h·Wba grouped per key head, the same
 *         rows regrouped at build time)
 *       c = silu(causal depthwise conv_K(qkv));  q, k, v = split(c)
 *       q, k = l2norm per head (eps 1e-6);  beta = sigmoid(b)
 *       g = -exp(A_log) * softplus(a + dt_bias)
 *       o = delta_rule(q, k, v, g, beta; S)   (v-head h reads k-head h/r)
 *       x += (gated_rmsnorm(o, z) per v-head)·Wout
 *     full_attention: the Qwen3 block's attention with zero-centred norms,
 *       partial NeoX RoPE and o *= sigmoid(gate), the gate packed per head
 *       in q_proj (fe_qwen3.c)
 *     h = rmsnorm1p(x), then
 *       dense:  x += mlp(h)   (SwiGLU)
 *       MoE:    route = top-k of softmax(h·Wrouter) (renormalised: always
 *               for Qwen3.5-MoE, when norm_topk_prob for Qwen3-Next)
 *               x += sum_j w_j expert_{e_j}(h) + sigmoid(h·Wsg) shared(h)
 *               (TOPK_ROUTE, MOE_COMBINE; every expert and the shared
 *               one a SwiGLU MLP)
 *   logits = rmsnorm1p(x_last)·Wlm   (Wlm = embed_tokens when tied)
 *
 * rmsnorm1p is RMSNORM with NORM_ONE_PLUS (stored w, applied as 1 + w);
 * the gated norm's w is plain.  Which layers are MoE: every layer of
 * Qwen3.5-MoE; in Qwen3-Next those not in mlp_only_layers whose index + 1
 * is a multiple of decoder_sparse_step, when num_experts > 0.  The
 * experts come fused as the modules hold them (mlp.experts.gate_up_proj
 * [E, 2I, H], down_proj [E, H, I]) or one tensor per expert
 * (mlp.experts.E.{gate,up,down}_proj.weight), for either model type; both
 * become one [E*2I, H] and one [E*H, I] weight.  The router and the shared
 * expert's gate stay f32 in every band (a routing choice must not flip on
 * quantization noise; they are E + 1 rows of H).
 * Session state per GDN layer: the conv's last K-1 inputs [K-1, conv_dim]
 * and the delta-rule matrices [nv, dk*dv]; per full-attention layer the
 * KV caches.  Entry points "prefill" and "decode" as fe_llm's; the delta
 * rule runs token by token in both, or in prefill calls of 16 tokens or
 * more in the chunkwise form with --delta-chunk N (the same function; on
 * the CPUs measured so far slower, so not the default).
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
  Qwen3Dims a;                   /* the full-attention layers and every dense MLP */
  int64_t vocab, max_pos;
  int tied;
  int64_t nk, nv, dk, dv, kconv; /* linear_num_key_heads, ..., linear_conv_kernel_dim */
  int grouped;                   /* Qwen3-Next: in_proj_qkvz / in_proj_ba grouped per key head */
  int64_t experts, top_k, moe_inter, shared_inter; /* 0 experts: dense */
  int renorm;                    /* the top-k weights divided by their sum */
  unsigned char *gdn;            /* [layers]: 1 for a linear_attention layer */
  unsigned char *moe;            /* [layers]: 1 for a mixture-of-experts FFN */
} GdnDims;

typedef struct GdnLayer {
  Qwen3Layer b;                  /* attention (full layers), dense MLP, input norm */
  int in_qkv, in_z, in_b, in_a;  /* [2*nk*dk + nv*dv, H], [nv*dv, H], [nv, H], [nv, H] (Qwen3.5) */
  int in_qkvz, in_ba;            /* [conv_dim + nv*dv, H], [2*nv, H] (Qwen3-Next, regrouped) */
  int conv;                      /* [conv_dim, K] f32 depthwise taps */
  int decay_rate, dt_bias;       /* [1, nv] f32: -exp(A_log), dt_bias */
  int norm;                      /* [1, dv] f32: the gated norm's weight */
  int out;                       /* [H, nv*dv] */
  int conv_state, delta_state;   /* [K-1, conv_dim], [nv, dk*dv] */
  int router;                    /* [E, H] f32 */
  int experts_gu, experts_down;  /* [E*2I, H], [E*H, I] */
  int sh_gate, sh_up, sh_down;   /* [Is, H], [Is, H], [H, Is]: the shared expert */
  int sh_sigmoid;                /* [1, H] f32: shared_expert_gate */
} GdnLayer;

/* The model types this file builds and what differs between them. */
typedef struct GdnType {
  const char *type, *name;
  int nested;   /* the text model under text_config, tensors model.language_model.* */
  int moe;      /* 0 dense; 1 Qwen3.5-MoE (every layer, always renormalised); 2 Qwen3-Next */
  int grouped;  /* in_proj_qkvz / in_proj_ba */
  int64_t vocab, hidden, inter, layers, kv_heads, experts, top_k; /* the config class's defaults */
} GdnType;

static const GdnType gdn_types[] = {
    {"qwen3_5", "Qwen3.5", 1, 0, 0, 248320, 4096, 12288, 32, 4, 0, 0},
    {"qwen3_5_text", "Qwen3.5", 0, 0, 0, 248320, 4096, 12288, 32, 4, 0, 0},
    {"qwen3_5_moe", "Qwen3.5-MoE", 1, 1, 0, 248320, 2048, 0, 40, 2, 256, 8},
    {"qwen3_5_moe_text", "Qwen3.5-MoE", 0, 1, 0, 248320, 2048, 0, 40, 2, 256, 8},
    {"qwen3_next", "Qwen3-Next", 0, 2, 1, 151936, 2048, 5632, 48, 2, 512, 10},
};

static const GdnType *gdn_type(const char *model_type) {
  for (size_t i = 0; i < sizeof gdn_types / sizeof *gdn_types; i++)
    if (!strcmp(gdn_types[i].type, model_type)) return &gdn_types[i];
  return NULL;
}

/* ---- config ---------------------------------------------------------------
 * The text config classes' keys (Qwen3_5TextConfig, Qwen3_5MoeTextConfig,
 * Qwen3NextConfig), with the class's defaults for absent ones (what the
 * official class means by a missing key; gdn_types has those that differ):
 *   vocab_size, hidden_size, intermediate_size (dense MLPs),
 *   num_hidden_layers, num_attention_heads, num_key_value_heads,
 *   head_dim 256 (not hidden/heads), rms_norm_eps 1e-6,
 *   max_position_embeddings 32768, linear_conv_kernel_dim 4,
 *   linear_key_head_dim 128, linear_value_head_dim 128,
 *   linear_num_key_heads 16, linear_num_value_heads 32          read;
 *   layer_types (linear_attention | full_attention), else
 *   full_attention_interval (4)                                  read;
 *   rope_theta, rope_parameters (rope_type default, rope_theta,
 *   partial_rotary_factor 0.25; mrope_section and mrope_interleaved
 *   change nothing for text, whose three position rows are equal)   read;
 *   tie_word_embeddings: the text config's, and for the nested layout the
 *   top level's too (the CausalLM class reads one, the published
 *   ConditionalGeneration class the other: they must agree);
 *   hidden_act          silu (or its alias swish) only;
 *   attention_bias      false only;
 *   num_experts, num_experts_per_tok, moe_intermediate_size,
 *   shared_expert_intermediate_size: the MoE types' (512/256, 10/8, 512,
 *   512); a dense qwen3_5 config that has them is refused;
 *   norm_topk_prob (true), decoder_sparse_step (1), mlp_only_layers ([]):
 *   Qwen3-Next's (Qwen3.5-MoE's router always renormalises and every
 *   layer is MoE: the class reads none of them);
 *   mtp_*, attention_dropout, initializer_range, use_cache, token ids,
 *   router_aux_loss_coef, output_router_logits: no effect on the text
 *   model's inference. */
static int read_moe(const cJSON *tc, const char *where, const GdnType *ty, GdnDims *d, sc_error *err);

static int read_config(const Checkpoint *c, const GdnType *ty, GdnDims *d, const cJSON **text, char *where,
                       size_t where_size, sc_error *err) {
  const cJSON *top = c->config, *tc = top;
  snprintf(where, where_size, "%s", c->config_path);
  if (ty->nested) {
    tc = cJSON_GetObjectItemCaseSensitive(top, "text_config");
    if (!cJSON_IsObject(tc))
      return sc_fail(err, SC_EINPUT, "%s: text_config is missing or not an object (a %s config.json holds "
                     "the text model there; a text-only one says model_type %s_text)", c->config_path, ty->type,
                     ty->type);
    snprintf(where, where_size, "%s: text_config", c->config_path);
  }
  *text = tc;
  /* null where the config classes want a number or a flag: transformers
   * fails on it (5.x's strict fields; 4.x's arithmetic), so no default is
   * put in its place */
  static const char *const numbers[] = {
      "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
      "num_key_value_heads", "head_dim", "rms_norm_eps", "linear_conv_kernel_dim", "linear_key_head_dim",
      "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads", "full_attention_interval",
      "attention_bias",
      /* read by the mixture-of-experts types only (the dense class ignores them) */
      "num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
      "decoder_sparse_step", "norm_topk_prob"};
  const size_t n_numbers = sizeof numbers / sizeof numbers[0] - (ty->moe ? 0 : 6);
  for (size_t i = 0; i < n_numbers; i++)
    if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(tc, numbers[i])))
      return sc_fail(err, SC_EINPUT, "%s: %s is null: transformers fails on it (it wants a value; leave the key "
                     "out for the config class's default)", where, numbers[i]);
  /* partial_rotary_factor null: inside rope_parameters 5.x fails on it;
   * at the top level it keeps the None (setdefault) and leaves it out of
   * rope_parameters, so unless rope_parameters gives one it rotates whole
   * heads (its get's 1.0), not the class's 0.25 */
  const cJSON *rpar = cJSON_GetObjectItemCaseSensitive(tc, "rope_parameters");
  const cJSON *rp_prf = cJSON_IsObject(rpar) ? cJSON_GetObjectItemCaseSensitive(rpar, "partial_rotary_factor") : NULL;
  if (cJSON_IsNull(rp_prf))
    return sc_fail(err, SC_EINPUT, "%s: rope_parameters.partial_rotary_factor is null: transformers fails on it "
                   "(give a number, or leave the key out for 0.25)", where);
  if (cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(tc, "partial_rotary_factor")) && !rp_prf)
    return sc_fail(err, SC_EINPUT, "%s: partial_rotary_factor is null: transformers 5.x then rotates whole heads "
                   "where the key left out means 0.25; give a number", where);
  /* a mixture of experts in a dense type: named, never half-read as dense */
  static const char *const moe[] = {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                                    "shared_expert_intermediate_size"};
  for (size_t i = 0; i < sizeof moe / sizeof moe[0] && !ty->moe; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(tc, moe[i]);
    if (v && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0))
      return sc_fail(err, SC_EINPUT, "%s: '%s' makes this a mixture-of-experts config (num_experts, "
                     "num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size), but "
                     "model_type %s is the dense model (hint: Qwen3.5-MoE says qwen3_5_moe)", where, moe[i],
                     ty->type);
  }
  Qwen3Dims *a = &d->a;
  memset(a, 0, sizeof *a);
  if (cfg_int_opt(tc, where, "vocab_size", ty->vocab, &d->vocab, err) ||
      cfg_int_opt(tc, where, "hidden_size", ty->hidden, &a->hidden, err) ||
      cfg_int_opt(tc, where, "intermediate_size", ty->inter, &a->inter, err) ||
      cfg_int_opt(tc, where, "num_hidden_layers", ty->layers, &a->layers, err) ||
      cfg_int_opt(tc, where, "num_attention_heads", 16, &a->heads, err) ||
      cfg_int_opt(tc, where, "num_key_value_heads", ty->kv_heads, &a->kv_heads, err) ||
      cfg_int_opt(tc, where, "head_dim", 256, &a->head_dim, err) ||
      cfg_num_opt(tc, where, "rms_norm_eps", 1e-6, &a->eps, err) ||
      cfg_int_opt(tc, where, "max_position_embeddings", 32768, &d->max_pos, err) ||
      cfg_int_opt(tc, where, "linear_conv_kernel_dim", 4, &d->kconv, err) ||
      cfg_int_opt(tc, where, "linear_key_head_dim", 128, &d->dk, err) ||
      cfg_int_opt(tc, where, "linear_value_head_dim", 128, &d->dv, err) ||
      cfg_int_opt(tc, where, "linear_num_key_heads", 16, &d->nk, err) ||
      cfg_int_opt(tc, where, "linear_num_value_heads", 32, &d->nv, err))
    return err->code;
  const int64_t dims[] = {d->vocab, a->hidden, a->heads, a->kv_heads, a->head_dim, d->max_pos,
                          d->dk, d->dv, d->nk, d->nv};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
    if (dims[i] < 1 || dims[i] > FE_DIM_MAX)
      return sc_fail(err, SC_EINPUT, "%s: vocab_size, hidden_size, num_attention_heads, "
                     "num_key_value_heads, head_dim, max_position_embeddings and the linear_* head counts and "
                     "dims must be in 1..%d", where, FE_DIM_MAX);
  if (a->inter < (ty->moe == 1 ? 0 : 1) || a->inter > FE_DIM_MAX) /* Qwen3.5-MoE has no dense MLP */
    return sc_fail(err, SC_EINPUT, "%s: intermediate_size %lld: expected 1..%d", where, (long long)a->inter,
                   FE_DIM_MAX);
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
  if (strcmp(act, "silu") && strcmp(act, "swish")) /* transformers' ACT2FN: swish is silu */
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
        return sc_fail(err, SC_EINPUT, "%s: layer_types[%d] is '%.40s': a %s layer is linear_attention or "
                       "full_attention", where, i, cJSON_IsString(e) ? e->valuestring : "(not a string)", ty->name);
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
  d->grouped = ty->grouped;
  return read_moe(tc, where, ty, d, err);
}

/* The mixture of experts: its sizes, which layers have it, whether the
 * router renormalises.  Experts without a top-k are refused (transformers
 * would fail); a top-k without experts is Qwen3-Next's dense model, as
 * transformers builds it. */
static int read_moe(const cJSON *tc, const char *where, const GdnType *ty, GdnDims *d, sc_error *err) {
  const int64_t L = d->a.layers;
  d->moe = calloc((size_t)L, 1);
  if (!d->moe) return sc_fail(err, SC_ERUNTIME, "out of memory");
  if (!ty->moe) return SC_OK;
  if (cfg_int_opt(tc, where, "num_experts", ty->experts, &d->experts, err) ||
      cfg_int_opt(tc, where, "num_experts_per_tok", ty->top_k, &d->top_k, err) ||
      cfg_int_opt(tc, where, "moe_intermediate_size", 512, &d->moe_inter, err) ||
      cfg_int_opt(tc, where, "shared_expert_intermediate_size", 512, &d->shared_inter, err))
    return err->code;
  if (d->experts < 0 || d->experts > FE_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: num_experts %lld: expected 0..%d", where, (long long)d->experts,
                   FE_DIM_MAX);
  if (d->experts == 0 && ty->moe == 1)
    return sc_fail(err, SC_EINPUT, "%s: num_experts 0: every %s layer is a mixture of experts (hint: the dense "
                   "model is model_type qwen3_5)", where, ty->name);
  if (d->experts == 0) { /* Qwen3-Next without experts: dense MLPs, and
                           * num_experts_per_tok (which save_pretrained
                           * always writes) is never read */
    d->top_k = 0;
    return SC_OK;
  }
  if (d->top_k < 1)
    return sc_fail(err, SC_EINPUT, "%s: num_experts %lld without a top-k (num_experts_per_tok %lld): the router "
                   "must choose 1..num_experts experts per token", where, (long long)d->experts,
                   (long long)d->top_k);
  if (d->top_k > d->experts)
    return sc_fail(err, SC_EINPUT, "%s: num_experts_per_tok %lld exceeds num_experts %lld", where,
                   (long long)d->top_k, (long long)d->experts);
  /* shared_expert_intermediate_size 0: the official block still holds an
   * empty shared expert and its gate, whose product is zero: the experts
   * alone */
  if (d->moe_inter < 1 || d->moe_inter > FE_DIM_MAX || d->shared_inter < 0 || d->shared_inter > FE_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: moe_intermediate_size %lld must be in 1..%d and "
                   "shared_expert_intermediate_size %lld in 0..%d", where, (long long)d->moe_inter, FE_DIM_MAX,
                   (long long)d->shared_inter, FE_DIM_MAX);
  if (d->experts * 2 * d->moe_inter > INT32_MAX || d->experts * d->a.hidden > INT32_MAX)
    return sc_fail(err, SC_EINPUT, "%s: %lld experts of %lld x %lld: too many rows", where, (long long)d->experts,
                   (long long)d->moe_inter, (long long)d->a.hidden);
  d->renorm = 1;
  if (ty->moe == 1) { /* Qwen3.5-MoE: every layer, always renormalised */
    memset(d->moe, 1, (size_t)L);
    return SC_OK;
  }
  int64_t step;
  if (cfg_bool_opt(tc, where, "norm_topk_prob", 1, &d->renorm, err) ||
      cfg_int_opt(tc, where, "decoder_sparse_step", 1, &step, err))
    return err->code;
  if (step < 1 || step > FE_LAYERS_MAX)
    return sc_fail(err, SC_EINPUT, "%s: decoder_sparse_step %lld: expected 1..%d", where, (long long)step,
                   FE_LAYERS_MAX);
  for (int64_t i = 0; i < L; i++) d->moe[i] = (i + 1) % step == 0;
  const cJSON *only = cJSON_GetObjectItemCaseSensitive(tc, "mlp_only_layers");
  if (only && !cJSON_IsNull(only)) {
    if (!cJSON_IsArray(only))
      return sc_fail(err, SC_EINPUT, "%s: mlp_only_layers must be a list of layer indices", where);
    for (const cJSON *e = only->child; e; e = e->next) {
      int64_t i;
      if (cfg_int_val(e, where, "mlp_only_layers[]", &i, err)) return err->code;
      if (i >= 0 && i < L) d->moe[i] = 0; /* another index matches no layer (transformers' `not in`) */
    }
  }
  for (int64_t i = 0; i < L; i++)
    if (!d->moe[i] && d->a.inter < 1)
      return sc_fail(err, SC_EINPUT, "%s: layer %lld has a dense MLP but intermediate_size is %lld", where,
                     (long long)i, (long long)d->a.inter);
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

/* Qwen3-Next's grouped projections as the rows Qwen3.5's layout has:
 * in_proj_qkvz [nk * (2dk + 2r*dv), H] holds per key head g
 * [q_g (dk) | k_g (dk) | v_g (r*dv) | z_g (r*dv)], r = nv / nk, and
 * in_proj_ba [nk * 2r, H] per key head [b_g (r) | a_g (r)].  The weight
 * "qkvz" takes every q row, then every k, v and z row (runs of each
 * group), so its first conv_dim outputs are the conv's input
 * [q all | k all | v all] and the rest z, all in head order; "ba" takes
 * every b row, then every a row. */
static int grouped_weights(Module *m, const Checkpoint *c, const GdnDims *d, const char *prefix, int L,
                           DType band, GdnLayer *w, sc_error *err) {
  const int64_t H = d->a.hidden, r = d->nv / d->nk, dk = d->dk, rv = r * d->dv;
  const int64_t group = 2 * dk + 2 * rv, conv = 2 * d->nk * dk + d->nv * d->dv;
  char name[IR_NAME], tensor[200];
  struct { const char *nm, *t; int64_t rows_per_group, nparts, part[4], run[4]; int *slot; } spec[2] = {
      {"qkvz_proj", "linear_attn.in_proj_qkvz.weight", group, 4, {0, dk, 2 * dk, 2 * dk + rv}, {dk, dk, rv, rv},
       &w->in_qkvz},
      {"ba_proj", "linear_attn.in_proj_ba.weight", 2 * r, 2, {0, r}, {r, r}, &w->in_ba},
  };
  for (int i = 0; i < 2; i++) {
    const int64_t trows = d->nk * spec[i].rows_per_group, shape[2] = {trows, H};
    snprintf(tensor, sizeof tensor, "%s%d.%s", prefix, L, spec[i].t);
    const StTensor *t = ckpt_tensor(c, tensor, 2, shape, err);
    if (!t) return err->code;
    snprintf(name, sizeof name, "layer%d.%s", L, spec[i].nm);
    const int wi = ir_weight_add(m, name, band, 1, trows, H);
    for (int k = 0; k < spec[i].nparts; k++)
      ir_weight_src_add(m, wi, (IrWeightSrc){.tensor = t, .rows = d->nk * spec[i].run[k], .row0 = spec[i].part[k],
                                             .run = spec[i].run[k], .stride = spec[i].rows_per_group});
    snprintf(m->weights[wi].source, sizeof m->weights[wi].source, "%.120s regrouped per head", tensor);
    *spec[i].slot = wi;
  }
  IR_ASSERT(m->weights[w->in_qkvz].rows == conv + d->nv * d->dv);
  return SC_OK;
}

static int gdn_weights(Module *m, const Checkpoint *c, const GdnDims *d, const char *prefix, int L, DType band,
                       GdnLayer *w, sc_error *err) {
  const int64_t H = d->a.hidden, kd = d->nk * d->dk, vd = d->nv * d->dv, C = 2 * kd + vd;
  char name[IR_NAME], tensor[200];
#define T(s) (snprintf(tensor, sizeof tensor, "%s%d.%s", prefix, L, s), tensor)
#define NM(s) (snprintf(name, sizeof name, "layer%d.%s", L, s), name)
  if ((w->b.attn_norm = fe_weight(m, c, NM("attn_norm"), T("input_layernorm.weight"), 0, H, DT_F32, err)) < 0)
    return err->code;
  if (d->grouped) {
    if (grouped_weights(m, c, d, prefix, L, band, w, err)) return err->code;
  } else if ((w->in_qkv = fe_weight(m, c, NM("qkv_proj"), T("linear_attn.in_proj_qkv.weight"), C, H, band, err)) < 0 ||
             (w->in_z = fe_weight(m, c, NM("z_proj"), T("linear_attn.in_proj_z.weight"), vd, H, band, err)) < 0 ||
             (w->in_b = fe_weight(m, c, NM("b_proj"), T("linear_attn.in_proj_b.weight"), d->nv, H, band, err)) < 0 ||
             (w->in_a = fe_weight(m, c, NM("a_proj"), T("linear_attn.in_proj_a.weight"), d->nv, H, band, err)) < 0) {
    return err->code;
  }
  if ((w->conv = conv_taps(m, c, NM("conv"), T("linear_attn.conv1d.weight"), C, d->kconv, err)) < 0 ||
      (w->decay_rate = decay_rate(m, c, NM("decay_rate"), T("linear_attn.A_log"), d->nv, err)) < 0 ||
      (w->dt_bias = fe_weight(m, c, NM("dt_bias"), T("linear_attn.dt_bias"), 0, d->nv, DT_F32, err)) < 0 ||
      (w->norm = fe_weight(m, c, NM("gdn_norm"), T("linear_attn.norm.weight"), 0, d->dv, DT_F32, err)) < 0 ||
      (w->out = fe_weight(m, c, NM("out_proj"), T("linear_attn.out_proj.weight"), H, vd, band, err)) < 0)
    return err->code;
  w->conv_state = ir_state_add(m, NM("conv_state"), d->kconv - 1, C);
  w->delta_state = ir_state_add(m, NM("delta_state"), d->nv, d->dk * d->dv);
#undef T
#undef NM
  return SC_OK;
}

/* The experts of layer L as two weights, [E*2I, H] (expert e's gate rows,
 * then its up rows) and [E*H, I], from the fused tensors or one tensor per
 * expert, whichever the checkpoint holds. */
static int expert_weights(Module *m, const Checkpoint *c, const GdnDims *d, const char *prefix, int L, DType band,
                          GdnLayer *w, sc_error *err) {
  const int64_t E = d->experts, I = d->moe_inter, H = d->a.hidden;
  char name[IR_NAME], tensor[200], fused_gu[200], fused_d[200];
  snprintf(fused_gu, sizeof fused_gu, "%s%d.mlp.experts.gate_up_proj", prefix, L);
  snprintf(fused_d, sizeof fused_d, "%s%d.mlp.experts.down_proj", prefix, L);
  snprintf(name, sizeof name, "layer%d.experts_gate_up", L);
  w->experts_gu = ir_weight_add(m, name, band, 1, E * 2 * I, H);
  snprintf(name, sizeof name, "layer%d.experts_down", L);
  w->experts_down = ir_weight_add(m, name, band, 1, E * H, I);
  IrWeight *gu = &m->weights[w->experts_gu], *dn = &m->weights[w->experts_down];
  if (ckpt_find(c, fused_gu) || ckpt_find(c, fused_d)) {
    const int64_t sgu[3] = {E, 2 * I, H}, sd[3] = {E, H, I};
    const StTensor *a = ckpt_tensor(c, fused_gu, 3, sgu, err), *b = a ? ckpt_tensor(c, fused_d, 3, sd, err) : NULL;
    if (!b) return err->code;
    ir_weight_src_add(m, w->experts_gu, (IrWeightSrc){.tensor = a, .rows = E * 2 * I});
    ir_weight_src_add(m, w->experts_down, (IrWeightSrc){.tensor = b, .rows = E * H});
    gu = &m->weights[w->experts_gu], dn = &m->weights[w->experts_down];
    snprintf(gu->source, sizeof gu->source, "%.150s", fused_gu);
    snprintf(dn->source, sizeof dn->source, "%.150s", fused_d);
    return SC_OK;
  }
  snprintf(tensor, sizeof tensor, "%s%d.mlp.experts.0.gate_proj.weight", prefix, L);
  if (!ckpt_find(c, tensor))
    return sc_fail(err, SC_EINPUT, "%s: layer %d has no experts: neither '%s' (+ down_proj) nor '%s' (one tensor "
                   "per expert) is in the checkpoint", c->dir, L, fused_gu, tensor);
  for (int64_t e = 0; e < E; e++) {
    static const char *const part[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int k = 0; k < 3; k++) {
      const int64_t shape[2] = {k < 2 ? I : H, k < 2 ? H : I};
      snprintf(tensor, sizeof tensor, "%s%d.mlp.experts.%lld.%s.weight", prefix, L, (long long)e, part[k]);
      const StTensor *t = ckpt_tensor(c, tensor, 2, shape, err);
      if (!t) {
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                 " (num_experts is %lld: experts 0..%lld are expected)", (long long)E, (long long)E - 1);
        return err->code;
      }
      ir_weight_src_add(m, k < 2 ? w->experts_gu : w->experts_down, (IrWeightSrc){.tensor = t, .rows = shape[0]});
    }
  }
  gu = &m->weights[w->experts_gu], dn = &m->weights[w->experts_down];
  snprintf(gu->source, sizeof gu->source, "%.100s%d.mlp.experts.{0..%lld}.{gate,up}_proj.weight", prefix, L,
           (long long)E - 1);
  snprintf(dn->source, sizeof dn->source, "%.100s%d.mlp.experts.{0..%lld}.down_proj.weight", prefix, L,
           (long long)E - 1);
  return SC_OK;
}

/* A MoE layer's FFN weights: the norm, the router, the experts, the shared
 * expert and its gate. */
static int moe_weights(Module *m, const Checkpoint *c, const GdnDims *d, const char *prefix, int L, DType band,
                       GdnLayer *w, sc_error *err) {
  const int64_t H = d->a.hidden, Is = d->shared_inter;
  char name[IR_NAME], tensor[200];
#define T(s) (snprintf(tensor, sizeof tensor, "%s%d.%s", prefix, L, s), tensor)
#define NM(s) (snprintf(name, sizeof name, "layer%d.%s", L, s), name)
  w->sh_gate = w->sh_up = w->sh_down = w->sh_sigmoid = -1;
  if ((w->b.mlp_norm = fe_weight(m, c, NM("mlp_norm"), T("post_attention_layernorm.weight"), 0, H, DT_F32, err)) < 0 ||
      (w->router = fe_weight(m, c, NM("router"), T("mlp.gate.weight"), d->experts, H, DT_F32, err)) < 0 ||
      expert_weights(m, c, d, prefix, L, band, w, err))
    return err->code;
  if (!Is) return SC_OK; /* an empty shared expert: nothing of it is read */
  if ((w->sh_gate = fe_weight(m, c, NM("shared_gate_proj"), T("mlp.shared_expert.gate_proj.weight"), Is, H, band, err)) < 0 ||
      (w->sh_up = fe_weight(m, c, NM("shared_up_proj"), T("mlp.shared_expert.up_proj.weight"), Is, H, band, err)) < 0 ||
      (w->sh_down = fe_weight(m, c, NM("shared_down_proj"), T("mlp.shared_expert.down_proj.weight"), H, Is, band, err)) < 0 ||
      (w->sh_sigmoid = fe_weight(m, c, NM("shared_expert_gate"), T("mlp.shared_expert_gate.weight"), 1, H, DT_F32, err)) < 0)
    return err->code;
#undef T
#undef NM
  return SC_OK;
}

/* ---- the graph ----------------------------------------------------------- */

/* The GDN token mixer of layer L with its residual add. */
static int gdn_mixer(Module *m, Graph *g, int x, const GdnDims *d, const GdnLayer *w, int L, int chunk) {
  char nm[IR_NAME];
#define NAME(s) (snprintf(nm, sizeof nm, "layer%d.%s", L, s), nm)
#define W(i) ir_weight(m, g, (i))
  const int H = (int)d->a.hidden, nk = (int)d->nk, nv = (int)d->nv, dk = (int)d->dk, dv = (int)d->dv;
  const int C = 2 * nk * dk + nv * dv;
  const float eps = (float)d->a.eps;
  int h = ir_rmsnorm(g, x, W(w->b.attn_norm), H, NORM_ONE_PLUS, eps, NAME("attn_norm"));
  int qkv, z, b, a;
  if (d->grouped) {
    int qkvz = ir_linear(g, h, W(w->in_qkvz), -1, NAME("qkvz"));
    int ba = ir_linear(g, h, W(w->in_ba), -1, NAME("ba"));
    qkv = ir_slice(g, qkvz, 0, C, NAME("qkv"));
    z = ir_slice(g, qkvz, C, nv * dv, NAME("z"));
    b = ir_slice(g, ba, 0, nv, NAME("b"));
    a = ir_slice(g, ba, nv, nv, NAME("a"));
  } else {
    qkv = ir_linear(g, h, W(w->in_qkv), -1, NAME("qkv"));
    z = ir_linear(g, h, W(w->in_z), -1, NAME("z"));
    b = ir_linear(g, h, W(w->in_b), -1, NAME("b"));
    a = ir_linear(g, h, W(w->in_a), -1, NAME("a"));
  }
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
  g->nodes[o].p.block = chunk; /* the chunkwise form for long calls, when asked */
  o = ir_gated_rmsnorm(g, o, z, W(w->norm), dv, eps, NAME("gdn_norm"));
  o = ir_linear(g, o, W(w->out), -1, NAME("out"));
  return ir_binary(g, OP_ADD, x, o, NAME("mix_res"));
}

/* The MoE FFN of layer L with its residual add: router, top-k, the
 * routed experts and the gated shared expert (MOE_COMBINE). */
static int moe_ffn(Module *m, Graph *g, int x, const GdnDims *d, const GdnLayer *w, int L) {
  char nm[IR_NAME];
  int h = ir_rmsnorm(g, x, W(w->b.mlp_norm), (int)d->a.hidden, NORM_ONE_PLUS, (float)d->a.eps, NAME("mlp_norm"));
  int logits = ir_linear(g, h, W(w->router), -1, NAME("router"));
  int route = ir_topk_route(g, logits, (int)d->top_k, d->renorm, NAME("route"));
  int sh = -1, sg = -1;
  if (w->sh_gate >= 0) { /* the gated shared expert (none when it is empty) */
    int gate = ir_linear(g, h, W(w->sh_gate), -1, NAME("shared_gate"));
    int up = ir_linear(g, h, W(w->sh_up), -1, NAME("shared_up"));
    int act = ir_binary(g, OP_MUL, ir_unary(g, OP_SILU, gate, NAME("shared_silu")), up, NAME("shared_swiglu"));
    sh = ir_linear(g, act, W(w->sh_down), -1, NAME("shared_down"));
    sg = ir_linear(g, h, W(w->sh_sigmoid), -1, NAME("shared_expert_gate"));
  }
  int y = ir_moe_combine(g, h, route, W(w->experts_gu), W(w->experts_down), sh, sg, (int)d->experts,
                         NAME("experts"));
  return ir_binary(g, OP_ADD, x, y, NAME("mlp_res"));
}
#undef W
#undef NAME

/* all_rows: every row's logits (the batched step, whose rows are sessions
 * of their own, each conv window and recurrent state in its row's block). */
static void build_graph(Module *m, Graph *g, const GdnDims *d, const GdnLayer *lw, int embed, int final_norm,
                        int head, int rope, int chunk, int all_rows) {
  g->row_states = all_rows;
  int ids = ir_input_ids(g);
  int x = ir_embed(g, ir_weight(m, g, embed), ids, "embed");
  int rope_w = ir_weight(m, g, rope);
  for (int L = 0; L < d->a.layers; L++) {
    x = d->gdn[L] ? gdn_mixer(m, g, x, d, &lw[L], L, chunk) : fe_qwen3_attention(m, g, x, &d->a, &lw[L].b, rope_w, "", L);
    x = d->moe[L] ? moe_ffn(m, g, x, d, &lw[L], L) : fe_qwen3_mlp(m, g, x, &d->a, &lw[L].b, "", L);
  }
  int last = all_rows ? x : ir_row(g, x, -1, "last");
  int f = ir_rmsnorm(g, last, ir_weight(m, g, final_norm), (int)d->a.hidden, NORM_ONE_PLUS, (float)d->a.eps,
                     "final_norm");
  int logits = ir_linear(g, f, ir_weight(m, g, head), -1, "lm_head");
  ir_output(g, logits, OUT_LOGITS);
}

/* What a text-only build leaves out, for inspect: the vision tower and the
 * multi-token-prediction head that published checkpoints carry. */
static void ignored_note(Module *m, const Checkpoint *c) {
  static const struct { const char *prefix, *what; } parts[] = {
      {"model.visual.", "the vision tower"}, {"mtp.", "the multi-token-prediction head"}};
  for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
    int n = 0;
    for (int t = 0; t < c->n_tensors; t++) n += !strncmp(c->by_name[t]->name, parts[i].prefix, strlen(parts[i].prefix));
    if (!n) continue;
    const size_t len = strlen(m->notes);
    snprintf(m->notes + len, sizeof m->notes - len, "%s%s* (%d tensor%s, %s)", len ? ", " : "ignored: ",
             parts[i].prefix, n, n == 1 ? "" : "s", parts[i].what);
  }
  if (m->notes[0]) {
    const size_t len = strlen(m->notes);
    snprintf(m->notes + len, sizeof m->notes - len, "; only the text model is compiled");
  }
}

int fe_qwen35(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  GdnDims d;
  memset(&d, 0, sizeof d);
  const cJSON *tc;
  char where[300];
  GdnLayer *lw = NULL;
  const GdnType *ty = gdn_type(m->model_type);
  IR_ASSERT(ty); /* fe_lookup sends only these types here */
  if (read_config(c, ty, &d, &tc, where, sizeof where, err)) goto fail;
  const int64_t H = d.a.hidden;
  const int max_ctx = o->max_context ? o->max_context : (int)(d.max_pos < 2048 ? d.max_pos : 2048);
  m->vocab = (int)d.vocab;
  m->hidden = (int)H;
  m->n_layers = (int)d.a.layers;
  m->max_context = max_ctx;
  /* the published layout's prefix, or the text model's own (both are what
   * transformers' text loaders take) */
  const char *base = ckpt_find(c, "model.language_model.embed_tokens.weight") || !ckpt_find(c, "model.embed_tokens.weight")
                         ? "model.language_model."
                         : "model.";
  char tensor[200], prefix[64];
  if (!strcmp(ty->type, "qwen3_next") && !strcmp(base, "model.language_model.")) {
    sc_fail(err, SC_EINPUT, "%s: model.language_model.* tensors: Qwen3-Next's are model.* (transformers' "
            "Qwen3NextForCausalLM reads no other names, and would start those weights random)", c->config_path);
    goto fail;
  }
  snprintf(prefix, sizeof prefix, "%slayers.", base);
  lw = malloc((size_t)d.a.layers * sizeof *lw);
  if (!lw) {
    sc_fail(err, SC_ERUNTIME, "out of memory");
    goto fail;
  }
  memset(lw, 0xff, (size_t)d.a.layers * sizeof *lw); /* every index -1 until declared */
  snprintf(tensor, sizeof tensor, "%sembed_tokens.weight", base);
  const int embed = fe_weight(m, c, "embed_tokens", tensor, d.vocab, H, o->band, err);
  if (embed < 0) goto fail;
  for (int L = 0; L < d.a.layers; L++) {
    int rc = d.gdn[L] ? gdn_weights(m, c, &d, prefix, L, o->band, &lw[L], err)
                      : fe_qwen3_attn_weights(m, c, &d.a, prefix, "", L, max_ctx, o->band, &lw[L].b, err);
    if (!rc)
      rc = d.moe[L] ? moe_weights(m, c, &d, prefix, L, o->band, &lw[L], err)
                    : fe_qwen3_mlp_weights(m, c, &d.a, prefix, "", L, o->band, &lw[L].b, err);
    if (rc) goto fail;
  }
  snprintf(tensor, sizeof tensor, "%snorm.weight", base);
  const int final_norm = fe_weight(m, c, "final_norm", tensor, 0, H, DT_F32, err);
  if (final_norm < 0) goto fail;
  int head = embed;
  /* a stored head that is not the embedding: Qwen3.5 (transformers 5.x
   * only) keeps it; Qwen3-Next's 4.x ties them, its 5.x does not */
  snprintf(tensor, sizeof tensor, "%sembed_tokens.weight", base);
  if (d.tied && fe_head_untied(c, tensor)) {
    if (!strcmp(ty->type, "qwen3_next")) {
      sc_fail(err, SC_EINPUT, "%s: tie_word_embeddings is true, but the checkpoint's lm_head.weight is not %s: "
              "transformers 4.x ties them (the embedding's values), 5.x keeps lm_head; set tie_word_embeddings "
              "to false to use lm_head.weight, or leave it out of the checkpoint", c->config_path, tensor);
      goto fail;
    }
    d.tied = 0;
  }
  if (!d.tied) {
    head = fe_weight(m, c, "lm_head", "lm_head.weight", d.vocab, H, o->band, err);
    if (head < 0) {
      if (!ckpt_find(c, "lm_head.weight"))
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                 " (hint: config.json says tie_word_embeddings is false)");
      goto fail;
    }
  }
  ignored_note(m, c);
  const int rope = fe_rope_table(m, max_ctx, d.a.rot_dims, d.a.theta);
  build_graph(m, ir_graph_new(m, "prefill", SC_IN_IDS, fe_chunk(o, 128, max_ctx)), &d, lw, embed, final_norm,
              head, rope, o->delta_chunk, 0);
  build_graph(m, ir_graph_new(m, "decode", SC_IN_IDS, 1), &d, lw, embed, final_norm, head, rope, 0, 0);
  /* one decode step of up to --max-batch sessions (sc_batch_step): each
   * row at its own position in its own caches, conv window and recurrent
   * state (sc_io.row_pos / row_state) */
  if (o->max_batch > 1)
    build_graph(m, ir_graph_new(m, "decode_batch", SC_IN_IDS, o->max_batch < max_ctx ? o->max_batch : max_ctx), &d,
                lw, embed, final_norm, head, rope, 0, 1);
  free(lw);
  free(d.gdn);
  free(d.moe);
  return SC_OK;
fail:
  free(lw);
  free(d.gdn);
  free(d.moe);
  return err->code;
}
