/*
 * fe_llm.c — the dense decoder LM: Qwen3 (`qwen3`) and Llama (`llama`).
 *
 * Pre-norm blocks (HF modeling_qwen3.py / modeling_llama.py):
 *   h = rmsnorm(x);  q,k,v = h·Wq, h·Wk, h·Wv
 *   qwen3: q,k = per-head rmsnorm(q), rmsnorm(k)  (before RoPE)
 *   q,k = NeoX RoPE;  o = attention(q, K, V) (causal, GQA);  x += o·Wo
 *   h = rmsnorm(x);  x += (silu(h·Wg) * (h·Wu))·Wd
 *   logits = rmsnorm(x_last)·Wlm   (Wlm = embed_tokens when tied)
 * Entry points: "prefill" (up to prefill_chunk tokens) and "decode" (one).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "sc_abi.h"

typedef struct LlmConfig {
  int64_t hidden, layers, heads, kv_heads, head_dim, inter, vocab, max_pos;
  double eps, theta;
  int tied, qk_norm;
} LlmConfig;

static int read_config(const Checkpoint *c, int qwen3, LlmConfig *k, sc_error *err) {
  const cJSON *j = c->config;
  const char *w = "config.json";
  memset(k, 0, sizeof *k);
  if (cfg_int_req(j, w, "hidden_size", &k->hidden, err) ||
      cfg_int_req(j, w, "num_hidden_layers", &k->layers, err) ||
      cfg_int_req(j, w, "num_attention_heads", &k->heads, err) ||
      cfg_int_req(j, w, "intermediate_size", &k->inter, err) ||
      cfg_int_req(j, w, "vocab_size", &k->vocab, err) ||
      cfg_int_opt(j, w, "num_key_value_heads", k->heads, &k->kv_heads, err) ||
      cfg_int_opt(j, w, "max_position_embeddings", 4096, &k->max_pos, err) ||
      cfg_num_opt(j, w, "rms_norm_eps", 1e-6, &k->eps, err) ||
      cfg_num_opt(j, w, "rope_theta", 10000.0, &k->theta, err) ||
      cfg_bool_opt(j, w, "tie_word_embeddings", 0, &k->tied, err))
    return err->code;
  if (k->hidden < 1 || k->layers < 1 || k->heads < 1 || k->inter < 1 || k->vocab < 1)
    return sc_fail(err, SC_EINPUT, "%s: hidden_size, num_hidden_layers, num_attention_heads, "
                   "intermediate_size and vocab_size must be positive", c->config_path);
  /* head_dim may be absent or null (Llama): hidden / heads */
  const cJSON *hd = cJSON_GetObjectItemCaseSensitive(j, "head_dim");
  if (hd && !cJSON_IsNull(hd)) {
    if (cfg_int_req(j, w, "head_dim", &k->head_dim, err)) return err->code;
  } else {
    k->head_dim = k->hidden / k->heads;
  }
  if (k->kv_heads < 1 || k->heads % k->kv_heads)
    return sc_fail(err, SC_EINPUT, "%s: num_attention_heads (%lld) must be a multiple of "
                   "num_key_value_heads (%lld)", c->config_path, (long long)k->heads,
                   (long long)k->kv_heads);
  if (k->head_dim < 2 || k->head_dim % 2)
    return sc_fail(err, SC_EINPUT, "%s: head_dim %lld must be even and positive",
                   c->config_path, (long long)k->head_dim);
  if (!(k->eps > 0) || !(k->theta > 0))
    return sc_fail(err, SC_EINPUT, "%s: rms_norm_eps and rope_theta must be positive", c->config_path);
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j, "rope_scaling");
  if (rs && !cJSON_IsNull(rs)) {
    const char *type = NULL;
    if (cfg_str_opt(rs, "config.json: rope_scaling", "rope_type", "default", &type, err))
      return err->code;
    if (strcmp(type, "default"))
      return sc_fail(err, SC_EINPUT, "%s: rope_scaling type '%s' is not supported yet "
                     "(supported: none, default)", c->config_path, type);
  }
  int flag = 0;
  if (cfg_bool_opt(j, w, "attention_bias", 0, &flag, err)) return err->code;
  if (flag)
    return sc_fail(err, SC_EINPUT, "%s: attention_bias true is not supported yet", c->config_path);
  if (cfg_bool_opt(j, w, "use_sliding_window", 0, &flag, err)) return err->code;
  if (flag)
    return sc_fail(err, SC_EINPUT, "%s: use_sliding_window true is not supported yet", c->config_path);
  const char *act = NULL;
  if (cfg_str_opt(j, w, "hidden_act", "silu", &act, err)) return err->code;
  if (strcmp(act, "silu"))
    return sc_fail(err, SC_EINPUT, "%s: hidden_act '%s' is not supported (expected silu)",
                   c->config_path, act);
  k->qk_norm = qwen3;
  return SC_OK;
}

/* Per-layer weights, as indices into Module.weights. */
typedef struct LayerW {
  int attn_norm, wq, wk, wv, wo, q_norm, k_norm, mlp_norm, wg, wu, wd, kcache, vcache;
} LayerW;

static int build_graph(Module *m, Graph *g, const LlmConfig *k, const LayerW *lw,
                       int embed, int final_norm, int head, int rope) {
  char nm[IR_NAME];
  const int H = (int)k->hidden, hd = (int)k->head_dim;
  const int nh = (int)k->heads, nkv = (int)k->kv_heads;
  int ids = ir_input_ids(g);
  int x = ir_embed(g, ir_weight(m, g, embed), ids, "embed");
  int rope_w = ir_weight(m, g, rope);
  for (int L = 0; L < k->layers; L++) {
    const LayerW *w = &lw[L];
#define NAME(s) (snprintf(nm, sizeof nm, "layer%d.%s", L, s), nm)
    int h = ir_rmsnorm(g, x, ir_weight(m, g, w->attn_norm), H, NORM_PLAIN, (float)k->eps, NAME("attn_norm"));
    int q = ir_linear(g, h, ir_weight(m, g, w->wq), -1, NAME("q"));
    int kk = ir_linear(g, h, ir_weight(m, g, w->wk), -1, NAME("k"));
    int v = ir_linear(g, h, ir_weight(m, g, w->wv), -1, NAME("v"));
    if (k->qk_norm) {
      q = ir_rmsnorm(g, q, ir_weight(m, g, w->q_norm), hd, NORM_PLAIN, (float)k->eps, NAME("q_norm"));
      kk = ir_rmsnorm(g, kk, ir_weight(m, g, w->k_norm), hd, NORM_PLAIN, (float)k->eps, NAME("k_norm"));
    }
    q = ir_rope(g, q, nh, hd, hd, ROPE_NEOX, rope_w, NAME("q_rope"));
    kk = ir_rope(g, kk, nkv, hd, hd, ROPE_NEOX, rope_w, NAME("k_rope"));
    int kc = ir_kv_store(g, ir_state(m, g, w->kcache), kk, NAME("k_store"));
    int vc = ir_kv_store(g, ir_state(m, g, w->vcache), v, NAME("v_store"));
    int a = ir_attention(g, q, kc, vc, -1, nh, nkv, hd, (float)(1.0 / sqrt((double)hd)), 0, NAME("attn"));
    int o = ir_linear(g, a, ir_weight(m, g, w->wo), -1, NAME("o"));
    x = ir_binary(g, OP_ADD, x, o, NAME("attn_res"));
    h = ir_rmsnorm(g, x, ir_weight(m, g, w->mlp_norm), H, NORM_PLAIN, (float)k->eps, NAME("mlp_norm"));
    int gate = ir_linear(g, h, ir_weight(m, g, w->wg), -1, NAME("gate"));
    int up = ir_linear(g, h, ir_weight(m, g, w->wu), -1, NAME("up"));
    /* two statements: NAME() reuses one buffer, so it must not appear twice in one call */
    int silu = ir_unary(g, OP_SILU, gate, NAME("gate_silu"));
    int act = ir_binary(g, OP_MUL, silu, up, NAME("swiglu"));
    int d = ir_linear(g, act, ir_weight(m, g, w->wd), -1, NAME("down"));
    x = ir_binary(g, OP_ADD, x, d, NAME("mlp_res"));
#undef NAME
  }
  int last = ir_row(g, x, -1, "last");
  int f = ir_rmsnorm(g, last, ir_weight(m, g, final_norm), H, NORM_PLAIN, (float)k->eps, "final_norm");
  int logits = ir_linear(g, f, ir_weight(m, g, head), -1, "lm_head");
  ir_output(g, logits, OUT_LOGITS);
  return SC_OK;
}

int fe_llm(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  LlmConfig k;
  int qwen3 = !strcmp(m->model_type, "qwen3");
  if (read_config(c, qwen3, &k, err)) return err->code;
  const int64_t H = k.hidden, hd = k.head_dim, I = k.inter;
  const int64_t qdim = k.heads * hd, kvdim = k.kv_heads * hd;
  int max_ctx = o->max_context ? o->max_context : (int)(k.max_pos < 2048 ? k.max_pos : 2048);
  m->vocab = (int)k.vocab;
  m->hidden = (int)H;
  m->n_layers = (int)k.layers;
  m->max_context = max_ctx;

  char name[IR_NAME], tensor[160];
  LayerW *lw = calloc((size_t)k.layers, sizeof *lw);
  if (!lw) return sc_fail(err, SC_ERUNTIME, "out of memory");
  int embed = fe_weight(m, c, "embed_tokens", "model.embed_tokens.weight", k.vocab, H, o->band, err);
  if (embed < 0) goto fail;
  for (int L = 0; L < k.layers; L++) {
    LayerW *w = &lw[L];
    struct { int *slot; const char *nm, *t; int64_t rows, cols; int norm; } spec[] = {
        {&w->attn_norm, "attn_norm", "input_layernorm.weight", 0, H, 1},
        {&w->wq, "q_proj", "self_attn.q_proj.weight", qdim, H, 0},
        {&w->wk, "k_proj", "self_attn.k_proj.weight", kvdim, H, 0},
        {&w->wv, "v_proj", "self_attn.v_proj.weight", kvdim, H, 0},
        {&w->wo, "o_proj", "self_attn.o_proj.weight", H, qdim, 0},
        {&w->q_norm, "q_norm", "self_attn.q_norm.weight", 0, hd, 1},
        {&w->k_norm, "k_norm", "self_attn.k_norm.weight", 0, hd, 1},
        {&w->mlp_norm, "mlp_norm", "post_attention_layernorm.weight", 0, H, 1},
        {&w->wg, "gate_proj", "mlp.gate_proj.weight", I, H, 0},
        {&w->wu, "up_proj", "mlp.up_proj.weight", I, H, 0},
        {&w->wd, "down_proj", "mlp.down_proj.weight", H, I, 0},
    };
    for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++) {
      if (!qwen3 && (spec[i].slot == &w->q_norm || spec[i].slot == &w->k_norm)) continue;
      snprintf(name, sizeof name, "layer%d.%s", L, spec[i].nm);
      snprintf(tensor, sizeof tensor, "model.layers.%d.%s", L, spec[i].t);
      /* norm vectors stay f32 whatever the band: they are tiny */
      *spec[i].slot = fe_weight(m, c, name, tensor, spec[i].rows, spec[i].cols,
                                spec[i].norm ? DT_F32 : o->band, err);
      if (*spec[i].slot < 0) goto fail;
    }
    snprintf(name, sizeof name, "layer%d.k_cache", L);
    w->kcache = ir_state_add(m, name, max_ctx, kvdim);
    snprintf(name, sizeof name, "layer%d.v_cache", L);
    w->vcache = ir_state_add(m, name, max_ctx, kvdim);
  }
  int final_norm = fe_weight(m, c, "final_norm", "model.norm.weight", 0, H, DT_F32, err);
  if (final_norm < 0) goto fail;
  int head = embed;
  if (!k.tied) {
    head = fe_weight(m, c, "lm_head", "lm_head.weight", k.vocab, H, o->band, err);
    if (head < 0) {
      if (!ckpt_find(c, "lm_head.weight"))
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                 " (hint: config.json says tie_word_embeddings is false)");
      goto fail;
    }
  }
  int rope = fe_rope_table(m, max_ctx, (int)hd, k.theta);

  Graph *g = ir_graph_new(m, "prefill", SC_IN_IDS, o->prefill_chunk < max_ctx ? o->prefill_chunk : max_ctx);
  build_graph(m, g, &k, lw, embed, final_norm, head, rope);
  g = ir_graph_new(m, "decode", SC_IN_IDS, 1);
  build_graph(m, g, &k, lw, embed, final_norm, head, rope);
  free(lw);
  return SC_OK;
fail:
  free(lw);
  return err->code;
}
