/*
 * fe_moshi.c — Kyutai's RQ-Transformer (`model_type: moshi`): the temporal
 * transformer and the depformer of the `moshi` package's LMModel
 * (moshi/models/lm.py, modules/transformer.py, modules/gating.py,
 * models/lm_utils.py), tensor names as its state dict has them.
 *
 * config.json is what moshi.models.loaders.CheckpointInfo reads: LMModel's
 * keyword arguments plus moshi_name, mimi_name, tokenizer_name, model_type,
 * lm_gen_config, ... (not LM arguments).  A key the file lacks means what
 * LMModel / StreamingTransformer mean by it (LayerNorm, ungated GELU FFN,
 * sinusoidal positions, ...); a key speechc does not know or a switch it
 * does not lower is refused by name.
 *
 * Entry points (each one step of one stream, T = 1):
 *   temporal         ids [1, 1 + n_q] (text, then the audio streams; -1 is
 *                    the zero token: a zero row) -> text logits, and the
 *                    post-out_norm hidden h
 *   depformer_text   step 0 of the depformer: hidden_in = h, id = the text
 *                    token -> logits of codebook 0
 *   depformer_audio  step k >= 1 (io->step = k): id = the audio token of
 *                    codebook k-1 -> logits of codebook k
 * A layer is  x += ls1 * out(attn(norm1(x)));  x += ls2 * ffn(norm2(x)).
 * The temporal attention keeps a ring of `context` positions (the
 * package's RingKVCache and its `delta < context` mask); the depformer's
 * holds the dep_q positions of one frame, positions 0..dep_q-1, so each
 * frame starts afresh without clearing it.  Per-step depformer weights
 * (in_proj / out_proj slices, gating.k, depformer_in[k], emb, heads) are
 * weights with one set per step, chosen by io->step; a
 * weights_per_step_schedule maps step k to the set the package uses, so a
 * shared set is packed once per step that uses it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "sc_abi.h"

#define MOSHI_MAX_STEPS 16 /* IrWeight.src: sets per weight */
#define MOSHI_MAX_STREAMS 64

typedef struct MoshiCfg {
  MoshiStack tr, dep;
  int64_t n_q, dep_q, card, text_card, text_out, context, low_rank;
  int multi_linear, n_in;        /* depformer_in count */
  int in_sched[MOSHI_MAX_STEPS]; /* step -> depformer_in index */
  int schedule[MOSHI_MAX_STEPS]; /* step -> weight set */
  int delays[MOSHI_MAX_STREAMS];
} MoshiCfg;

/* ---- config ------------------------------------------------------------ */

/* moshi.models.loaders._lm_kwargs (the 7B) and CheckpointInfo's names for
 * a repository without config.json (MOSHI_NAME, MIMI_NAME,
 * TEXT_TOKENIZER_NAME); checkpoint.c gives it to a directory without
 * config.json whose weights are a Moshi LM. */
const char fe_moshi_7b_config[] =
    "{\"dim\": 4096, \"text_card\": 32000, \"existing_text_padding_id\": 3, \"n_q\": 16, \"dep_q\": 8, "
    "\"card\": 2048, \"num_heads\": 32, \"num_layers\": 32, \"hidden_scale\": 4.125, \"causal\": true, "
    "\"layer_scale\": null, \"context\": 3000, \"max_period\": 10000, \"gating\": \"silu\", "
    "\"norm\": \"rms_norm_f32\", \"positional_embedding\": \"rope\", \"depformer_dim\": 1024, "
    "\"depformer_dim_feedforward\": 4224, \"depformer_num_heads\": 16, \"depformer_num_layers\": 6, "
    "\"depformer_layer_scale\": null, \"depformer_multi_linear\": true, \"depformer_context\": 8, "
    "\"depformer_max_period\": 10000, \"depformer_gating\": \"silu\", \"depformer_pos_emb\": \"none\", "
    "\"depformer_weights_per_step\": true, "
    "\"delays\": [0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1], "
    "\"moshi_name\": \"model.safetensors\", \"mimi_name\": \"tokenizer-e351c8d8-checkpoint125.safetensors\", "
    "\"tokenizer_name\": \"tokenizer_spm_32k_3.model\", \"model_type\": \"moshi\"}";

/* Keys CheckpointInfo takes out of config.json before LMModel sees the rest. */
static const char *const info_keys[] = {"moshi_name", "mimi_name", "mimi_config_name", "tokenizer_name",
                                        "lora_name", "model_type", "lm_gen_config", "tts_config",
                                        "stt_config", "model_id"};
/* LMModel / StreamingTransformer(Layer) arguments speechc reads. */
static const char *const lm_keys[] = {
    "delays", "n_q", "dep_q", "card", "text_card", "text_card_out", "dim", "num_heads", "num_layers",
    "hidden_scale", "norm", "context", "causal", "max_period", "positional_embedding", "positional_scale",
    "gating", "layer_scale", "kv_repeat", "dim_feedforward", "existing_text_padding_id",
    "existing_text_end_padding_id", "depformer_dim", "depformer_dim_feedforward", "depformer_multi_linear",
    "depformer_weights_per_step", "depformer_weights_per_step_schedule", "depformer_low_rank_embeddings",
    "depformer_pos_emb", "depformer_norm", "depformer_num_heads", "depformer_num_layers",
    "depformer_gating", "depformer_layer_scale", "depformer_max_period", "depformer_context",
    "depformer_kv_repeat", "depformer_positional_scale", "depformer_causal", "norm_emb", "bias_proj",
    "demux_second_text_stream", "demux_second_stream", "extra_heads_num_heads", "extra_heads_dim",
    "conditioners", "fuser", "cross_attention", "quantize", "lora", "lora_rank", "lora_scaling",
    "skip_self_attn", "gradient_checkpointing", "checkpointing", "same_initial"};

static int known(const char *k, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(k, list[i])) return 1;
  return 0;
}

/* A switch that must keep its harmless value: false / null / 0. */
static int must_be_off(const cJSON *cfg, const char *where, const char *key, const char *why, sc_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsNumber(v) && v->valuedouble == 0) ||
      (cJSON_IsObject(v) && !v->child) || (cJSON_IsArray(v) && !v->child))
    return SC_OK;
  return sc_fail(err, SC_EINPUT, "%s: %s is set: not supported yet (%s)", where, key, why);
}

static int read_norm(const char *where, const char *key, const char *s, MoshiStack *t, sc_error *err) {
  static const struct { const char *name; int kind; double eps; } norms[] = {
      {"layer_norm", NORM_LAYER, 1e-5}, {"layer_norm_f32", NORM_LAYER, 1e-8},
      {"rms_norm", NORM_RMS, 1e-5}, {"rms_norm_f32", NORM_RMS, 1e-8}};
  for (size_t i = 0; i < sizeof norms / sizeof *norms; i++)
    if (!strcmp(s, norms[i].name)) {
      t->norm = norms[i].kind;
      t->norm_eps = norms[i].eps;
      return SC_OK;
    }
  return sc_fail(err, SC_EINPUT, "%s: %s '%s' is not a norm the package knows (layer_norm, layer_norm_f32, "
                 "rms_norm, rms_norm_f32)", where, key, s);
}

static int read_gating(const char *where, const char *key, const char *s, MoshiStack *t, sc_error *err) {
  if (!strcmp(s, "none")) t->ffn = FFN_NONE;
  else if (!strcmp(s, "silu")) t->ffn = FFN_SILU;
  else if (!strcmp(s, "gelu")) t->ffn = FFN_GELU;
  else
    return sc_fail(err, SC_EINPUT, "%s: %s '%s' is not supported (supported: none, silu, gelu)", where, key, s);
  return SC_OK;
}

static int read_pos(const char *where, const char *key, const char *s, MoshiStack *t, sc_error *err) {
  t->rope_mode = ROPE_INTERLEAVED;
  if (!strcmp(s, "none")) t->pos = POS_NONE;
  else if (!strcmp(s, "sin")) t->pos = POS_SIN;
  else if (!strcmp(s, "rope")) t->pos = POS_ROPE;
  else if (!strcmp(s, "sin_rope")) t->pos = POS_SIN | POS_ROPE;
  else if (!strcmp(s, "rope_concat")) t->pos = POS_ROPE, t->rope_mode = ROPE_NEOX;
  else
    return sc_fail(err, SC_EINPUT, "%s: %s '%s' is not one the package knows (sin, rope, sin_rope, none, "
                   "rope_concat)", where, key, s);
  return SC_OK;
}

/* layer_scale: null (none) or a number (LayerScale vectors in the checkpoint). */
static int read_layer_scale(const cJSON *cfg, const char *where, const char *key, int dflt, int *on,
                            sc_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (!v) *on = dflt;
  else if (cJSON_IsNull(v)) *on = 0;
  else if (cJSON_IsNumber(v)) *on = 1;
  else return sc_fail(err, SC_EINPUT, "%s: %s must be null or a number", where, key);
  return SC_OK;
}

static int check_stack(const char *where, const char *what, MoshiStack *t, sc_error *err) {
  if (t->dim < 4 || t->dim > FE_DIM_MAX || t->heads < 1 || t->dim % t->heads || t->layers < 1 ||
      t->layers > FE_LAYERS_MAX || t->ff < 1 || t->ff > FE_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: the %s's dim %lld, heads %lld, layers %lld, dim_feedforward %lld: "
                   "expected a dim divisible by the heads, at least 4, and positive sizes", where, what,
                   (long long)t->dim, (long long)t->heads, (long long)t->layers, (long long)t->ff);
  int64_t hd = t->dim / t->heads;
  if (hd % 2 || hd > FE_HEAD_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: the %s's head dim %lld must be even and at most %d", where, what,
                   (long long)hd, FE_HEAD_DIM_MAX);
  if (t->kv_heads < 1)
    return sc_fail(err, SC_EINPUT, "%s: the %s's kv_repeat must divide num_heads %lld", where, what,
                   (long long)t->heads);
  if ((t->pos & POS_SIN) && t->dim % 2)
    return sc_fail(err, SC_EINPUT, "%s: sinusoidal positions need an even dim", where);
  if (!(t->max_period > 0)) return sc_fail(err, SC_EINPUT, "%s: the %s's max_period must be positive", where, what);
  /* ActivationGating's hidden size */
  t->hidden = t->ff == 4 * t->dim ? 21 * t->dim / 8 : 2 * t->ff / 3;
  if (t->ffn != FFN_NONE && t->hidden < 1)
    return sc_fail(err, SC_EINPUT, "%s: the %s's gating hidden size is 0", where, what);
  return SC_OK;
}

/* lm_gen_config: LMGen keyword arguments that run_inference passes; the
 * runtime reads the sampling ones (sc_moshi_defaults).  CFG (cfg_coef != 1)
 * and other arguments are refused by name. */
static int read_gen_config(const cJSON *cfg, const char *w, sc_error *err) {
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(cfg, "lm_gen_config");
  if (!g || cJSON_IsNull(g)) return SC_OK;
  if (!cJSON_IsObject(g)) return sc_fail(err, SC_EINPUT, "%s: lm_gen_config must be an object", w);
  static const char *const keys[] = {"temp", "temp_text", "top_k", "top_k_text", "use_sampling", "cfg_coef", "check"};
  for (const cJSON *e = g->child; e; e = e->next)
    if (!known(e->string, keys, sizeof keys / sizeof *keys))
      return sc_fail(err, SC_EINPUT, "%s: lm_gen_config key '%s' is not an LMGen argument speechc lowers "
                     "(known: temp, temp_text, top_k, top_k_text, use_sampling, cfg_coef 1)", w, e->string);
  int use_sampling, check;
  double t, tt, coef;
  int64_t k, kt;
  if (cfg_num_opt(g, w, "temp", 0.8, &t, err) || cfg_num_opt(g, w, "temp_text", 0.7, &tt, err) ||
      cfg_int_opt(g, w, "top_k", 250, &k, err) || cfg_int_opt(g, w, "top_k_text", 25, &kt, err) ||
      cfg_bool_opt(g, w, "use_sampling", 1, &use_sampling, err) || cfg_bool_opt(g, w, "check", 0, &check, err) ||
      cfg_num_opt(g, w, "cfg_coef", 1.0, &coef, err))
    return sc_fail(err, err->code, "lm_gen_config: %s", err->msg);
  if (coef != 1.0)
    return sc_fail(err, SC_EINPUT, "%s: lm_gen_config cfg_coef %g: classifier-free guidance is not supported", w,
                   coef);
  if (!isfinite(t) || !isfinite(tt) || k < 0 || kt < 0 || k > 1 << 30 || kt > 1 << 30)
    return sc_fail(err, SC_EINPUT, "%s: lm_gen_config: temperatures must be finite and top-k 0..2^30", w);
  return SC_OK;
}

static int read_config(const Checkpoint *c, MoshiCfg *m, sc_error *err) {
  const cJSON *cfg = c->config;
  const char *w = c->config_path;
  memset(m, 0, sizeof *m);
  for (const cJSON *e = cfg->child; e; e = e->next)
    if (!known(e->string, info_keys, sizeof info_keys / sizeof *info_keys) &&
        !known(e->string, lm_keys, sizeof lm_keys / sizeof *lm_keys))
      return sc_fail(err, SC_EINPUT, "%s: key '%s' is not an LMModel argument speechc knows (the package "
                     "would pass it on to its transformer and fail, or speechc would ignore a switch)", w,
                     e->string);
  static const struct { const char *key, *why; } off[] = {
      {"norm_emb", "a LayerNorm after each embedding"},
      {"bias_proj", "biases on the text and audio heads"},
      {"demux_second_text_stream", "two muxed text streams"},
      {"demux_second_stream", "two muxed text streams"},
      {"conditioners", "conditioning"},
      {"fuser", "conditioning"},
      {"cross_attention", "cross-attention"},
      {"depformer_norm", "per-codebook depformer norms"},
      {"lora", "LoRA adapters (fuse them into the weights first)"},
      {"skip_self_attn", "layers without self-attention"},
      {"quantize", "the package's int8 layers"},
  };
  for (size_t i = 0; i < sizeof off / sizeof *off; i++)
    if (must_be_off(cfg, w, off[i].key, off[i].why, err)) return err->code;
  if (read_gen_config(cfg, w, err)) return err->code;
  /* depformer_causal is never read: the package's loader drops it (the
   * depformer is always causal) */
  int causal = 1;
  if (cfg_bool_opt(cfg, w, "causal", 1, &causal, err)) return err->code;
  if (!causal) return sc_fail(err, SC_EINPUT, "%s: causal false is not supported (Moshi steps are causal)", w);

  MoshiStack *t = &m->tr, *d = &m->dep;
  double hidden_scale;
  int64_t kv_repeat, ff_t, dkv, dheads, dlayers;
  const char *norm, *gating, *pos, *dgating, *dpos;
  if (cfg_int_opt(cfg, w, "n_q", 8, &m->n_q, err) || cfg_int_opt(cfg, w, "dep_q", 8, &m->dep_q, err) ||
      cfg_int_opt(cfg, w, "card", 1024, &m->card, err) ||
      cfg_int_opt(cfg, w, "text_card", 32000, &m->text_card, err) ||
      cfg_int_opt(cfg, w, "dim", 128, &t->dim, err) || cfg_int_opt(cfg, w, "num_heads", 8, &t->heads, err) ||
      cfg_int_req(cfg, w, "num_layers", &t->layers, err) ||
      cfg_num_opt(cfg, w, "hidden_scale", 4, &hidden_scale, err) ||
      cfg_str_opt(cfg, w, "norm", "layer_norm", &norm, err) ||
      cfg_str_opt(cfg, w, "gating", "none", &gating, err) ||
      cfg_str_opt(cfg, w, "positional_embedding", "sin", &pos, err) ||
      cfg_num_opt(cfg, w, "max_period", 10000, &t->max_period, err) ||
      cfg_num_opt(cfg, w, "positional_scale", 1.0, &t->pos_scale, err) ||
      cfg_int_opt(cfg, w, "kv_repeat", 1, &kv_repeat, err) ||
      read_norm(w, "norm", norm, t, err) || read_gating(w, "gating", gating, t, err) ||
      read_pos(w, "positional_embedding", pos, t, err) ||
      read_layer_scale(cfg, w, "layer_scale", 0, &t->layer_scale, err))
    return err->code;
  if (cfg_int_opt(cfg, w, "text_card_out", m->text_card, &m->text_out, err)) return err->code;
  const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(cfg, "context");
  m->context = 0; /* none: every earlier step */
  if (ctx && !cJSON_IsNull(ctx) && cfg_int_req(cfg, w, "context", &m->context, err)) return err->code;
  if (ctx && !cJSON_IsNull(ctx) && m->context < 1)
    return sc_fail(err, SC_EINPUT, "%s: context %lld must be positive (or null)", w, (long long)m->context);
  /* StreamingTransformer gets int(hidden_scale * dim) unless dim_feedforward is given */
  if (cfg_int_opt(cfg, w, "dim_feedforward", (int64_t)(hidden_scale * (double)t->dim), &ff_t, err)) return err->code;
  t->ff = ff_t;
  t->kv_heads = kv_repeat >= 1 && t->heads % kv_repeat == 0 ? t->heads / kv_repeat : 0;
  t->sets = 1;
  t->per_step = 0;
  if (check_stack(w, "transformer", t, err)) return err->code;
  if (m->n_q < 1 || m->n_q + 1 > MOSHI_MAX_STREAMS || m->dep_q < 0 || m->dep_q > m->n_q || m->card < 1 ||
      m->text_card < 1 || m->text_out < 1)
    return sc_fail(err, SC_EINPUT, "%s: n_q %lld, dep_q %lld, card %lld, text_card %lld: expected 1 <= n_q < %d, "
                   "0 <= dep_q <= n_q and positive cards", w, (long long)m->n_q, (long long)m->dep_q,
                   (long long)m->card, (long long)m->text_card, MOSHI_MAX_STREAMS);
  if (m->dep_q < 1 || m->dep_q > MOSHI_MAX_STEPS)
    return sc_fail(err, SC_EINPUT, "%s: dep_q %lld is not supported yet (1..%d; 0 is a model without a depformer)",
                   w, (long long)m->dep_q, MOSHI_MAX_STEPS);

  /* delays: one per stream, >= 0 */
  const cJSON *dl = cJSON_GetObjectItemCaseSensitive(cfg, "delays");
  if (!cJSON_IsArray(dl) || cJSON_GetArraySize(dl) != m->n_q + 1)
    return sc_fail(err, SC_EINPUT, "%s: delays must be a list of 1 + n_q = %lld integers", w,
                   (long long)(m->n_q + 1));
  int i = 0;
  for (const cJSON *e = dl->child; e; e = e->next, i++) {
    int64_t v;
    if (cfg_int_val(e, w, "delays", &v, err)) return err->code;
    if (v < 0 || v > 1000) return sc_fail(err, SC_EINPUT, "%s: delays[%d] is %lld, expected 0..1000", w, i, (long long)v);
    m->delays[i] = (int)v;
  }

  /* the depformer: the transformer's arguments overridden by depformer_* */
  int wps = 0;
  int64_t dff;
  double dps;
  if (cfg_int_opt(cfg, w, "depformer_dim", 256, &d->dim, err) ||
      cfg_int_opt(cfg, w, "depformer_num_heads", t->heads, &dheads, err) ||
      cfg_int_opt(cfg, w, "depformer_num_layers", t->layers, &dlayers, err) ||
      cfg_int_opt(cfg, w, "depformer_kv_repeat", kv_repeat, &dkv, err) ||
      cfg_str_opt(cfg, w, "depformer_gating", gating, &dgating, err) ||
      cfg_str_opt(cfg, w, "depformer_pos_emb", "sin", &dpos, err) ||
      cfg_num_opt(cfg, w, "depformer_max_period", t->max_period, &d->max_period, err) ||
      cfg_num_opt(cfg, w, "depformer_positional_scale", t->pos_scale, &dps, err) ||
      cfg_bool_opt(cfg, w, "depformer_multi_linear", 0, &m->multi_linear, err) ||
      cfg_bool_opt(cfg, w, "depformer_weights_per_step", 0, &wps, err) ||
      read_gating(w, "depformer_gating", dgating, d, err) || read_pos(w, "depformer_pos_emb", dpos, d, err) ||
      read_layer_scale(cfg, w, "depformer_layer_scale", t->layer_scale, &d->layer_scale, err))
    return err->code;
  const cJSON *dffj = cJSON_GetObjectItemCaseSensitive(cfg, "depformer_dim_feedforward");
  if (cJSON_IsArray(dffj))
    return sc_fail(err, SC_EINPUT, "%s: a per-step list of depformer_dim_feedforward is not supported yet", w);
  if (cfg_int_opt(cfg, w, "depformer_dim_feedforward", (int64_t)(hidden_scale * (double)d->dim), &dff, err))
    return err->code;
  d->ff = dff;
  d->heads = dheads;
  d->layers = dlayers;
  d->kv_heads = dkv >= 1 && dheads % dkv == 0 ? dheads / dkv : 0;
  d->pos_scale = dps;
  d->norm = t->norm;
  d->norm_eps = t->norm_eps;
  if (check_stack(w, "depformer", d, err)) return err->code;
  if (d->ffn == FFN_NONE && wps)
    return sc_fail(err, SC_EINPUT, "%s: depformer_weights_per_step without gating: the package refuses it", w);

  /* the schedule: step k uses weight set schedule[k] */
  const cJSON *sch = cJSON_GetObjectItemCaseSensitive(cfg, "depformer_weights_per_step_schedule");
  int n_sets = (int)m->dep_q;
  for (int k = 0; k < m->dep_q; k++) m->schedule[k] = k;
  if (sch && !cJSON_IsNull(sch)) {
    if (!cJSON_IsArray(sch) || cJSON_GetArraySize(sch) != m->dep_q)
      return sc_fail(err, SC_EINPUT, "%s: depformer_weights_per_step_schedule must list dep_q = %lld set indices",
                     w, (long long)m->dep_q);
    int k = 0;
    n_sets = 0;
    for (const cJSON *e = sch->child; e; e = e->next, k++) {
      int64_t v;
      if (cfg_int_val(e, w, "depformer_weights_per_step_schedule", &v, err)) return err->code;
      if (v < 0 || v >= m->dep_q)
        return sc_fail(err, SC_EINPUT, "%s: depformer_weights_per_step_schedule[%d] is %lld, expected 0..%lld", w,
                       k, (long long)v, (long long)m->dep_q - 1);
      m->schedule[k] = (int)v;
      if (v + 1 > n_sets) n_sets = (int)v + 1;
    }
  }
  d->sets = wps ? (int)m->dep_q : 1; /* one set per step, shared ones repeated */
  d->per_step = wps;
  /* depformer_in follows the schedule whether or not the layers do */
  const int has_sched = sch && !cJSON_IsNull(sch);
  m->n_in = m->multi_linear ? (has_sched ? n_sets : (int)m->dep_q) : 1;
  for (int k = 0; k < m->dep_q; k++)
    m->in_sched[k] = !m->multi_linear ? 0 : has_sched ? m->schedule[k] : k;
  if (!wps) /* the layers have one set of weights */
    for (int k = 0; k < m->dep_q; k++) m->schedule[k] = 0;
  const cJSON *lr = cJSON_GetObjectItemCaseSensitive(cfg, "depformer_low_rank_embeddings");
  if (lr && !cJSON_IsNull(lr)) {
    if (cfg_int_req(cfg, w, "depformer_low_rank_embeddings", &m->low_rank, err)) return err->code;
    if (m->low_rank < 1 || m->low_rank > FE_DIM_MAX)
      return sc_fail(err, SC_EINPUT, "%s: depformer_low_rank_embeddings must be positive", w);
  }
  return SC_OK;
}

/* ---- weights ----------------------------------------------------------- */

typedef struct Fe {
  Module *m;
  const Checkpoint *c;
  const MoshiCfg *cfg;
  DType band;
  sc_error *err;
} Fe;

/* A norm gain or bias vector [dim] (f32): "<p>.alpha" is [1, 1, dim]. */
static int vec(Fe *f, const char *name, const char *tensor, int64_t dim, int alpha) {
  int64_t shape[3] = {1, 1, dim};
  const StTensor *t = alpha ? ckpt_tensor(f->c, tensor, 3, shape, f->err) : ckpt_tensor(f->c, tensor, 1, &shape[2], f->err);
  if (!t) return -1;
  int w = ir_weight_add(f->m, name, DT_F32, 1, 1, dim);
  IrWeight *wt = &f->m->weights[w];
  wt->src[0].tensor = t;
  wt->src[0].rows = 1;
  wt->n_src = 1;
  snprintf(wt->source, sizeof wt->source, "%s", tensor);
  return w;
}

/* A weight of f->cfg's per-step sets of [rows, cols] (sets = 1: one
 * matrix), set k from the package's set sched[k] of `base`: either the
 * packed "<base>_weight" / "<base>.weight" [mult*rows, cols] (real
 * checkpoints: in_proj_weight, out_proj.weight), or one tensor per set
 * "<base>s.<i>.weight" (the module's own state dict names). */
static int step_weight(Fe *f, const char *name, const char *packed, const char *each, int sets, int mult,
                       const int *sched, int64_t rows, int64_t cols) {
  const StTensor *pt = ckpt_find(f->c, packed);
  int w = ir_weight_add(f->m, name, f->band, sets, rows, cols);
  for (int k = 0; k < sets; k++) {
    const int s = sched ? sched[k] : k;
    IrWeightSrc src = {.rows = rows};
    char tensor[200];
    if (pt) {
      int64_t shape[2] = {mult * rows, cols};
      if (!(src.tensor = ckpt_tensor(f->c, packed, 2, shape, f->err))) return -1;
      src.row0 = s * rows, src.run = rows, src.stride = rows;
      snprintf(tensor, sizeof tensor, "%s", packed);
    } else {
      int64_t shape[2] = {rows, cols};
      snprintf(tensor, sizeof tensor, each, s);
      if (!(src.tensor = ckpt_tensor(f->c, tensor, 2, shape, f->err))) return -1;
    }
    IrWeight *wt = &f->m->weights[w];
    wt->src[k] = src;
    wt->n_src = k + 1;
    if (k == 0) snprintf(wt->source, sizeof wt->source, "%.150s", tensor);
  }
  if (sets > 1) {
    IrWeight *wt = &f->m->weights[w];
    size_t len = strlen(wt->source);
    snprintf(wt->source + len, sizeof wt->source - len, " (sets by step)");
  }
  return w;
}

static int layer_weights(Fe *f, const MoshiStack *t, const char *tp, const char *np, int L, int kv_rows,
                         const int *sched, int mult, MoshiLayer *l) {
  char name[IR_NAME], tensor[200], each[200];
  const int64_t D = t->dim, kvdim = t->kv_heads * (t->dim / t->heads);
  const int sets = t->sets;
#define T(s) (snprintf(tensor, sizeof tensor, "%s%d.%s", tp, L, s), tensor)
#define N(s) (snprintf(name, sizeof name, "%slayer%d.%s", np, L, s), name)
#define E(s) (snprintf(each, sizeof each, "%s%d.%s", tp, L, s), each)
  const int rms = t->norm == NORM_RMS;
  l->n1b = l->n2b = l->ls1 = l->ls2 = -1;
  if ((l->n1w = vec(f, N("norm1"), T(rms ? "norm1.alpha" : "norm1.weight"), D, rms)) < 0) return -1;
  if (!rms && (l->n1b = vec(f, N("norm1_bias"), T("norm1.bias"), D, 0)) < 0) return -1;
  E("self_attn.in_projs.%d.weight");
  if ((l->qkv = step_weight(f, N("qkv"), T("self_attn.in_proj_weight"), each, sets, mult, sched, D + 2 * kvdim,
                            D)) < 0)
    return -1;
  E("self_attn.out_projs.%d.weight");
  if ((l->out = step_weight(f, N("out"), T("self_attn.out_proj.weight"), each, sets, mult, sched, D, D)) < 0)
    return -1;
  if (t->layer_scale && ((l->ls1 = vec(f, N("ls1"), T("layer_scale_1.scale"), D, 0)) < 0 ||
                         (l->ls2 = vec(f, N("ls2"), T("layer_scale_2.scale"), D, 0)) < 0))
    return -1;
  if ((l->n2w = vec(f, N("norm2"), T(rms ? "norm2.alpha" : "norm2.weight"), D, rms)) < 0) return -1;
  if (!rms && (l->n2b = vec(f, N("norm2_bias"), T("norm2.bias"), D, 0)) < 0) return -1;
  if (t->ffn == FFN_NONE) {
    if ((l->ff_in = fe_weight(f->m, f->c, N("linear1"), T("linear1.weight"), t->ff, D, f->band, f->err)) < 0 ||
        (l->ff_out = fe_weight(f->m, f->c, N("linear2"), T("linear2.weight"), D, t->ff, f->band, f->err)) < 0)
      return -1;
  } else if (t->per_step) {
    /* "gating.<i>.linear_in.weight" (a ModuleList even for one step:
     * dep_q 1): no packed form */
    E("gating.%d.linear_in.weight");
    if ((l->ff_in = step_weight(f, N("gating_in"), "", each, sets, mult, sched, 2 * t->hidden, D)) < 0) return -1;
    E("gating.%d.linear_out.weight");
    if ((l->ff_out = step_weight(f, N("gating_out"), "", each, sets, mult, sched, D, t->hidden)) < 0) return -1;
  } else {
    if ((l->ff_in = fe_weight(f->m, f->c, N("gating_in"), T("gating.linear_in.weight"), 2 * t->hidden, D, f->band,
                              f->err)) < 0 ||
        (l->ff_out = fe_weight(f->m, f->c, N("gating_out"), T("gating.linear_out.weight"), D, t->hidden, f->band,
                               f->err)) < 0)
      return -1;
  }
  l->kc = ir_state_add(f->m, N("k_cache"), kv_rows, kvdim);
  l->vc = ir_state_add(f->m, N("v_cache"), kv_rows, kvdim);
#undef T
#undef N
#undef E
  return SC_OK;
}

/* ---- graphs ------------------------------------------------------------ */

/* The leaf of w: its step's set when it has sets, else the one matrix. */
static int wleaf(Module *m, Graph *g, int w) {
  return m->weights[w].sets > 1 ? ir_weight_set(m, g, w, SET_STEP, 0) : ir_weight(m, g, w);
}

static int norm(Module *m, Graph *g, const MoshiStack *t, int x, int w, int b, const char *name) {
  if (t->norm == NORM_RMS) return ir_rmsnorm(g, x, ir_weight(m, g, w), (int)t->dim, NORM_ALPHA, (float)t->norm_eps, name);
  return ir_layernorm(g, x, ir_weight(m, g, w), ir_weight(m, g, b), (float)t->norm_eps, name);
}

static int layer(Module *m, Graph *g, const MoshiStack *t, const MoshiLayer *l, int x, int rope, int window,
                 const char *np, int L) {
  char nm[IR_NAME];
#define NAME(s) (snprintf(nm, sizeof nm, "%slayer%d.%s", np, L, s), nm)
  const int D = (int)t->dim, nh = (int)t->heads, nkv = (int)t->kv_heads, hd = D / nh, kvd = nkv * hd;
  int h = norm(m, g, t, x, l->n1w, l->n1b, NAME("norm1"));
  int qkv = ir_linear(g, h, wleaf(m, g, l->qkv), -1, NAME("qkv"));
  int q = ir_slice(g, qkv, 0, D, NAME("q"));
  int k = ir_slice(g, qkv, D, kvd, NAME("k"));
  int v = ir_slice(g, qkv, D + kvd, kvd, NAME("v"));
  if (rope >= 0) {
    q = ir_rope(g, q, nh, hd, hd, t->rope_mode, rope, NAME("q_rope"));
    k = ir_rope(g, k, nkv, hd, hd, t->rope_mode, rope, NAME("k_rope"));
  }
  int kc = ir_kv_store(g, ir_state(m, g, l->kc), k, NAME("k_store"));
  int vc = ir_kv_store(g, ir_state(m, g, l->vc), v, NAME("v_store"));
  int a = ir_attention(g, q, kc, vc, -1, nh, nkv, hd, (float)(1.0 / sqrt((double)hd)), window, NAME("attn"));
  if (t->align > 1) ir_attention_align(g, a, t->align);
  int o = ir_linear(g, a, wleaf(m, g, l->out), -1, NAME("out"));
  if (l->ls1 >= 0) o = ir_binary(g, OP_MUL, o, ir_weight(m, g, l->ls1), NAME("ls1"));
  x = ir_binary(g, OP_ADD, x, o, NAME("attn_res"));
  h = norm(m, g, t, x, l->n2w, l->n2b, NAME("norm2"));
  int u = ir_linear(g, h, wleaf(m, g, l->ff_in), -1, NAME(t->ffn == FFN_NONE ? "linear1" : "gating_in"));
  if (t->ffn == FFN_NONE) {
    u = ir_unary(g, OP_GELU, u, NAME("gelu"));
  } else if (t->ffn == FFN_SILU) {
    u = ir_unary(g, OP_SWIGLU, u, NAME("swiglu"));
  } else {
    int a0 = ir_unary(g, OP_GELU, ir_slice(g, u, 0, (int)t->hidden, NAME("gate")), NAME("gate_gelu"));
    u = ir_binary(g, OP_MUL, a0, ir_slice(g, u, (int)t->hidden, (int)t->hidden, NAME("up")), NAME("gated"));
  }
  u = ir_linear(g, u, wleaf(m, g, l->ff_out), -1, NAME(t->ffn == FFN_NONE ? "linear2" : "gating_out"));
  if (l->ls2 >= 0) u = ir_binary(g, OP_MUL, u, ir_weight(m, g, l->ls2), NAME("ls2"));
  return ir_binary(g, OP_ADD, x, u, NAME("ffn_res"));
#undef NAME
}

/* The positional tables of a stack: the sinusoidal one and RoPE's. */
static void pos_tables(Module *m, const MoshiStack *t, int rows, const char *np, int *sin, int *rope) {
  *sin = *rope = -1;
  if (t->pos & POS_SIN) {
    char name[IR_NAME];
    snprintf(name, sizeof name, "%ssin_positions", np);
    *sin = ir_weight_add(m, name, DT_F32, 1, rows, t->dim);
    IrWeight *wt = &m->weights[*sin];
    wt->gen = WGEN_SINPOS;
    wt->gen_theta = t->max_period;
    wt->gen_scale = t->pos_scale;
    snprintf(wt->source, sizeof wt->source, "computed: sinusoidal, max_period %g, scale %g", t->max_period,
             t->pos_scale);
  }
  if (t->pos & POS_ROPE) *rope = fe_rope_table(m, rows, (int)(t->dim / t->heads), t->max_period);
}

static int stack(Module *m, Graph *g, const MoshiStack *t, const MoshiLayer *ls, int x, int sin, int rope,
                 int window, const char *np) {
  if (sin >= 0) {
    char nm[IR_NAME];
    snprintf(nm, sizeof nm, "%spositions", np);
    x = ir_pos_add(g, x, ir_weight(m, g, sin), nm);
  }
  int rl = rope >= 0 ? ir_weight(m, g, rope) : -1;
  for (int L = 0; L < t->layers; L++) x = layer(m, g, t, &ls[L], x, rl, window, np, L);
  return x;
}

static int lm(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);

/* What the step's graphs read: the stacks, their layers and positional
 * tables, and the weights around them (lm()). */
typedef struct MoshiGraphs {
  const MoshiStack *t, *d;
  const MoshiLayer *tl, *dl;
  int K, Q, R, t_sin, t_rope, d_sin, d_rope, context;
  int text_emb;
  const int *emb;
  int out_w, out_b, text_lin, dep_in, dep_text, dep_text_lr, dep_emb, dep_emb_lr, heads;
} MoshiGraphs;

/* The step's entry points: rows 0 gives "temporal", "depformer_text" and
 * "depformer_audio" of one row; rows B their "_batch" forms of up to B
 * rows, each row one conversation (the same ops: a row's values do not
 * depend on the others'). */
static void graphs(Module *m, const MoshiGraphs *x, int rows) {
  const MoshiStack *t = x->t, *d = x->d;
  char name[IR_NAME];
#define GRAPH(nm) (rows ? ir_graph_new(m, (snprintf(name, sizeof name, "%s_batch", nm), name), SC_IN_IDS, rows) \
                        : ir_graph_exact(m, nm, SC_IN_IDS, 1))
  /* temporal: sum of the audio embeddings in stream order, then the text's */
  Graph *g = GRAPH("temporal");
  int ids = ir_input_codes(g, x->K), e = -1;
  for (int i = 0; i < x->K - 1; i++) {
    char nm[IR_NAME];
    snprintf(nm, sizeof nm, "audio%d", i);
    int a = ir_embed(g, ir_weight(m, g, x->emb[i]), ir_slice(g, ids, i + 1, 1, nm), NULL);
    snprintf(nm, sizeof nm, "emb_sum%d", i);
    e = e < 0 ? a : ir_binary(g, OP_ADD, e, a, nm);
  }
  int te = ir_embed(g, ir_weight(m, g, x->text_emb), ir_slice(g, ids, 0, 1, "text"), "text_emb");
  e = ir_binary(g, OP_ADD, e, te, "input");
  e = stack(m, g, t, x->tl, e, x->t_sin, x->t_rope, x->context, "");
  int h = norm(m, g, t, e, x->out_w, x->out_b, "out_norm");
  ir_output(g, h, OUT_HIDDEN);
  ir_output(g, ir_linear(g, h, ir_weight(m, g, x->text_lin), -1, "text_logits"), OUT_LOGITS);

  /* depformer steps: depformer_in[k](h) + the previous token's embedding */
  for (int first = 1; first >= 0; first--) {
    if (!first && x->Q < 2) break;
    g = GRAPH(first ? "depformer_text" : "depformer_audio");
    int hin = ir_input_hidden(g, t->dim);
    int xin = ir_linear(g, hin, wleaf(m, g, x->dep_in), -1, "depformer_in");
    int tab = first ? ir_weight(m, g, x->dep_text) : ir_weight_set(m, g, x->dep_emb, SET_STEP, -1);
    int y = ir_embed(g, tab, ir_input_ids(g), first ? "dep_text_emb" : "dep_emb");
    if (x->R) {
      int lr = first ? ir_weight(m, g, x->dep_text_lr) : ir_weight_set(m, g, x->dep_emb_lr, SET_STEP, -1);
      y = ir_linear(g, y, lr, -1, "dep_emb_low_rank");
    }
    y = ir_binary(g, OP_ADD, y, xin, "dep_input"); /* a row of each per conversation */
    y = stack(m, g, d, x->dl, y, x->d_sin, x->d_rope, 0, "dep.");
    ir_output(g, ir_linear(g, y, ir_weight_set(m, g, x->heads, SET_STEP, 0), -1, "dep_logits"), OUT_LOGITS);
  }
#undef GRAPH
}

/* A config the directory does not hold (the 7B defaults) is named in any
 * error, so that a shape the weights do not have is explained. */
int fe_moshi(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  if (lm(m, c, o, err) == SC_OK) return SC_OK;
  if (c->config_given) {
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%s", err->msg);
    sc_fail(err, err->code, "%s (the config: %s)", msg, c->config_path);
  }
  return err->code;
}

static int lm(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  MoshiCfg cfg;
  if (read_config(c, &cfg, err)) return err->code;
  const MoshiStack *t = &cfg.tr, *d = &cfg.dep;
  const int K = (int)cfg.n_q + 1, Q = (int)cfg.dep_q;
  /* positions: the session's steps (the temporal ring holds `context` of them) */
  const int max_ctx = o->max_context ? o->max_context : 8192;
  const int ring = cfg.context ? (int)(cfg.context < max_ctx ? cfg.context : max_ctx) : max_ctx;
  m->vocab = (int)cfg.text_out;
  m->hidden = (int)t->dim;
  m->n_layers = (int)t->layers;
  m->max_context = max_ctx;
  Fe f = {m, c, &cfg, o->band, err};
  MoshiLayer *tl = calloc((size_t)t->layers, sizeof *tl), *dl = calloc((size_t)d->layers, sizeof *dl);
  int rc = SC_EINPUT;
  if (!tl || !dl) {
    rc = sc_fail(err, SC_ERUNTIME, "out of memory");
    goto done;
  }
  int text_emb, emb[MOSHI_MAX_STREAMS], out_w, out_b = -1, text_lin, dep_in, dep_text, dep_text_lr = -1;
  int dep_emb = -1, dep_emb_lr = -1, heads;
  char name[IR_NAME], tensor[200];
  const int rms = t->norm == NORM_RMS, R = (int)cfg.low_rank;
#define W(var, call) if ((var = (call)) < 0) goto done
  for (int i = 0; i < K - 1; i++) {
    snprintf(name, sizeof name, "emb%d", i);
    snprintf(tensor, sizeof tensor, "emb.%d.weight", i);
    W(emb[i], fe_weight(m, c, name, tensor, cfg.card + 1, t->dim, o->band, err));
  }
  W(text_emb, fe_weight(m, c, "text_emb", "text_emb.weight", cfg.text_card + 1, t->dim, o->band, err));
  for (int L = 0; L < t->layers; L++)
    if (layer_weights(&f, t, "transformer.layers.", "", L, ring, NULL, 1, &tl[L])) goto done;
  W(out_w, vec(&f, "out_norm", rms ? "out_norm.alpha" : "out_norm.weight", t->dim, rms));
  if (!rms) W(out_b, vec(&f, "out_norm_bias", "out_norm.bias", t->dim, 0));
  W(text_lin, fe_weight(m, c, "text_linear", "text_linear.weight", cfg.text_out, t->dim, o->band, err));

  /* depformer: depformer_in[schedule[k]] (or the one), embeddings, layers, heads */
  W(dep_in, step_weight(&f, "depformer_in", "", "depformer_in.%d.weight", cfg.n_in > 1 ? Q : 1, 1, cfg.in_sched,
                        d->dim, t->dim));
  const int64_t ecols = R ? R : d->dim;
  W(dep_text, fe_weight(m, c, "depformer_text_emb", "depformer_text_emb.weight", cfg.text_card + 1, ecols, o->band,
                        err));
  if (R) W(dep_text_lr, fe_weight(m, c, "depformer_text_emb_lr", "depformer_text_emb.low_rank.weight", d->dim, R,
                                  o->band, err));
  if (Q > 1) {
    W(dep_emb, fe_weight_sets(m, c, "depformer_emb", "depformer_emb.%d.weight", Q - 1, cfg.card + 1, ecols, o->band,
                              err));
    if (R) W(dep_emb_lr, fe_weight_sets(m, c, "depformer_emb_lr", "depformer_emb.%d.low_rank.weight", Q - 1, d->dim,
                                        R, o->band, err));
  }
  {
    MoshiStack ds = *d;
    int mult = 1;
    for (int k = 0; k < Q; k++)
      if (cfg.schedule[k] + 1 > mult) mult = cfg.schedule[k] + 1;
    for (int L = 0; L < d->layers; L++)
      if (layer_weights(&f, &ds, "depformer.layers.", "dep.", L, Q, cfg.schedule, d->sets > 1 ? mult : 1, &dl[L]))
        goto done;
  }
  W(heads, fe_weight_sets(m, c, "linears", "linears.%d.weight", Q, cfg.card, d->dim, o->band, err));
#undef W

  int t_sin, t_rope, d_sin, d_rope;
  pos_tables(m, t, max_ctx, "", &t_sin, &t_rope);
  pos_tables(m, d, Q, "dep.", &d_sin, &d_rope);

  MoshiGraphs gr = {t, d, tl, dl, K, Q, R, t_sin, t_rope, d_sin, d_rope, (int)cfg.context, text_emb, emb, out_w,
                     out_b, text_lin, dep_in, dep_text, dep_text_lr, dep_emb, dep_emb_lr, heads};
  graphs(m, &gr, 0);
  /* A step of up to --max-batch conversations at once (sc_moshi_batch_step):
   * each row at its own step in its own session's caches (sc_io.row_pos /
   * row_state), every row's outputs. */
  if (o->max_batch > 1) graphs(m, &gr, o->max_batch < max_ctx ? o->max_batch : max_ctx);
  rc = SC_OK;
done:
  free(tl);
  free(dl);
  return rc;
}

/* ---- the StreamingTransformer for Mimi (frontend.h) -------------------- */

int fe_moshi_read_stack(const char *where, const char *norm, const char *gating, const char *pos, MoshiStack *t,
                        sc_error *err) {
  if (read_norm(where, "norm", norm, t, err) || read_gating(where, "gating", gating, t, err) ||
      read_pos(where, "positional_embedding", pos, t, err))
    return err->code;
  return check_stack(where, "transformer", t, err);
}

int fe_moshi_layer_weights(Module *m, const Checkpoint *c, DType band, const MoshiStack *t, const char *tp,
                           const char *np, int L, int kv_rows, MoshiLayer *l, sc_error *err) {
  Fe f = {m, c, NULL, band, err};
  return layer_weights(&f, t, tp, np, L, kv_rows, NULL, 1, l) ? (err->code ? err->code : SC_EINPUT) : SC_OK;
}

void fe_moshi_pos_tables(Module *m, const MoshiStack *t, int rows, const char *np, int *sin, int *rope) {
  pos_tables(m, t, rows, np, sin, rope);
}

int fe_moshi_stack(Module *m, Graph *g, const MoshiStack *t, const MoshiLayer *ls, int x, int sin, int rope,
                   int window, const char *np) {
  return stack(m, g, t, ls, x, sin, rope, window, np);
}
