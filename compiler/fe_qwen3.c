/*
 * fe_qwen3.c — the Qwen3 decoder block, shared by every frontend built from
 * it: the dense LM (fe_llm.c) and Qwen3-TTS's talker and code predictor
 * (fe_tts.c).  Math (HF modeling_qwen3.py):
 *   h = rmsnorm(x);  q,k,v = h·Wq, h·Wk, h·Wv
 *   q,k = per-head rmsnorm (when qk_norm), then NeoX RoPE
 *   o = attention(q, K, V) (causal, GQA, scale head_dim^-0.5);  x += o·Wo
 *   h = rmsnorm(x);  x += (silu(h·Wg) * (h·Wu))·Wd
 * Variants (Qwen3Dims): sliding window, LayerScale, q/k/v/o biases (the
 * codec's transformer); zero-centred norms (1 + w), partial RoPE and an
 * output gate packed in q_proj (Qwen3.5's full-attention layers:
 * o = attention(..) * sigmoid(h·Wgate)).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend.h"

/* RoPE as transformers computes it, from three places a config may hold it:
 * top-level rope_theta, rope_scaling (4.x; its type under "rope_type" or
 * the legacy "type", which transformers still honours) and rope_parameters
 * (5.x: type and theta together).  speechc computes plain RoPE over the
 * whole head: type "default" (or none), one theta, partial_rotary_factor 1.
 * Every other type (linear, dynamic, yarn, llama3, longrope, ...) scales
 * the frequencies and is refused by name, never computed as plain RoPE. */
static int rope_type_of(const cJSON *obj, const char *where, const char *key, const char *dflt,
                        const char **type, sc_error *err) {
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(obj, key);
  *type = NULL;
  if (!rs || cJSON_IsNull(rs)) return SC_OK;
  if (!cJSON_IsObject(rs))
    return sc_fail(err, SC_EINPUT, "%s: key '%s' must be an object or null, found %s", where, key,
                   cJSON_IsString(rs) ? "a string" : cJSON_IsNumber(rs) ? "a number" : "another JSON type");
  char w[160];
  snprintf(w, sizeof w, "%s: %s", where, key);
  /* rope_parameters keyed by layer type (Gemma-style hybrids) */
  for (const cJSON *e = rs->child; e; e = e->next)
    if (cJSON_IsObject(e))
      return sc_fail(err, SC_EINPUT, "%s: per-layer-type RoPE ('%s') is not supported", w, e->string);
  const char *a = NULL, *b = NULL;
  if (cfg_str_opt(rs, w, "rope_type", "", &a, err) || cfg_str_opt(rs, w, "type", "", &b, err)) return err->code;
  if (*a && *b && strcmp(a, b))
    return sc_fail(err, SC_EINPUT, "%s: rope_type '%s' and type '%s' disagree (transformers reads one or the "
                   "other depending on its version)", w, a, b);
  *type = *a ? a : *b ? b : dflt;
  if (!*type)
    return sc_fail(err, SC_EINPUT, "%s: no 'rope_type' (or legacy 'type'): transformers cannot tell which "
                   "RoPE it means", w);
  if (strcmp(*type, "default"))
    return sc_fail(err, SC_EINPUT, "%s: RoPE type '%s' is not supported (supported: default); speechc "
                   "would compute plain RoPE where transformers scales it", w, *type);
  return SC_OK;
}

/* use_rp 0: a class that never reads rope_parameters (qwen-tts' on the
 * transformers 4.x it pins) */
static int rope_params(const cJSON *obj, const char *where, double dflt_prf, int use_rp, double *theta,
                       double *prf, const char **prf_key, sc_error *err) {
  const char *t1, *t2 = NULL;
  /* rope_scaling without a type makes transformers 4.x fail; rope_parameters
   * without one is 5.x's "default" */
  if (rope_type_of(obj, where, "rope_scaling", NULL, &t1, err) ||
      (use_rp && rope_type_of(obj, where, "rope_parameters", "default", &t2, err)))
    return err->code;
  const cJSON *rp = use_rp ? cJSON_GetObjectItemCaseSensitive(obj, "rope_parameters") : NULL;
  if (!cJSON_IsObject(rp)) rp = NULL;
  /* both: 5.x takes a non-empty rope_scaling whole in place of
   * rope_parameters (its theta then from the top level or the default),
   * 4.x never reads rope_parameters; what rope_parameters says is dropped
   * either way, and a reader of the file would not expect it */
  const cJSON *rs0 = cJSON_GetObjectItemCaseSensitive(obj, "rope_scaling");
  if (rp && cJSON_IsObject(rs0) && rs0->child)
    return sc_fail(err, SC_EINPUT, "%s: rope_scaling and rope_parameters both given: transformers 5.x takes "
                   "rope_scaling in place of rope_parameters and 4.x never reads rope_parameters, so what "
                   "rope_parameters says is ignored; give one of them", where);
  char w[160];
  snprintf(w, sizeof w, "%s: rope_parameters", where);
  /* NAN: absent (a present value is finite; 0 or less is refused later) */
  double th = NAN, pth = NAN, pf = NAN, ppf = NAN;
  if (cfg_num_opt(obj, where, "rope_theta", NAN, &th, err) ||
      (rp && cfg_num_opt(rp, w, "rope_theta", NAN, &pth, err)) ||
      cfg_num_opt(obj, where, "partial_rotary_factor", NAN, &pf, err) ||
      (rp && cfg_num_opt(rp, w, "partial_rotary_factor", NAN, &ppf, err)))
    return err->code;
  if (!isnan(th) && !isnan(pth) && th != pth)
    return sc_fail(err, SC_EINPUT, "%s: rope_theta %g and rope_parameters.rope_theta %g disagree", where,
                   th, pth);
  if (!isnan(pf) && !isnan(ppf) && pf != ppf)
    return sc_fail(err, SC_EINPUT, "%s: partial_rotary_factor %g and rope_parameters.partial_rotary_factor %g "
                   "disagree", where, pf, ppf);
  *theta = !isnan(th) ? th : !isnan(pth) ? pth : 10000.0;
  *prf = !isnan(ppf) ? ppf : !isnan(pf) ? pf : dflt_prf;
  *prf_key = !isnan(ppf) ? "rope_parameters.partial_rotary_factor" : !isnan(pf) ? "partial_rotary_factor" : NULL;
  /* rope_scaling's own theta or factor: transformers 4.x never reads them,
   * 5.x takes them over every other (rope_parameters = rope_scaling or
   * rope_parameters).  The same values either way, or refused (a class
   * that never reads rope_parameters runs on 4.x: ignored there). */
  const cJSON *rs = cJSON_GetObjectItemCaseSensitive(obj, "rope_scaling");
  if (use_rp && cJSON_IsObject(rs)) {
    double sth = NAN, spf = NAN;
    snprintf(w, sizeof w, "%s: rope_scaling", where);
    if (cfg_num_opt(rs, w, "rope_theta", NAN, &sth, err) ||
        cfg_num_opt(rs, w, "partial_rotary_factor", NAN, &spf, err))
      return err->code;
    if (!isnan(sth) && sth != *theta)
      return sc_fail(err, SC_EINPUT, "%s: rope_scaling.rope_theta %g differs from rope_theta %g (top level or "
                     "rope_parameters, else the default): transformers 4.x ignores the first, 5.x uses it; "
                     "give one value", where, sth, *theta);
    if (!isnan(spf) && spf != *prf)
      return sc_fail(err, SC_EINPUT, "%s: rope_scaling.partial_rotary_factor %g differs from "
                     "partial_rotary_factor %g (top level or rope_parameters, else the default): transformers "
                     "4.x ignores the first, 5.x uses it; give one value", where, spf, *prf);
  }
  return SC_OK;
}

int fe_rope_params(const cJSON *obj, const char *where, double dflt_prf, double *theta, double *prf,
                   const char **prf_key, sc_error *err) {
  return rope_params(obj, where, dflt_prf, 1, theta, prf, prf_key, err);
}

int fe_rope_params_4x(const cJSON *obj, const char *where, double dflt_prf, double *theta, double *prf,
                      const char **prf_key, sc_error *err) {
  return rope_params(obj, where, dflt_prf, 0, theta, prf, prf_key, err);
}

static int read_rope(const cJSON *obj, const char *where, const Qwen3Family *f, Qwen3Dims *d, sc_error *err) {
  double prf;
  const char *key;
  if (rope_params(obj, where, 1.0, f->rope_parameters, &d->theta, &prf, &key, err)) return err->code;
  if (prf != 1)
    return sc_fail(err, SC_EINPUT, "%s: %s %g is not supported (RoPE over the whole head only: 1.0)", where,
                   key, prf);
  return SC_OK;
}

/* The config classes that read this block's keys.  Qwen3Config fills in
 * 32 key/value heads of 128 for absent keys, LlamaConfig the head count
 * and hidden / heads (configuration_qwen3.py, configuration_llama.py);
 * qwen-tts' talker 2 heads and hidden / heads (its attention's getattr),
 * its code predictor 8 of 128 (configuration_qwen3_tts.py).  Only Llama's
 * MLP has biases; Qwen3's and the code predictor's layers slide by
 * layer_types / max_window_layers, the talker's all at once by
 * use_sliding_window (its forward takes the sliding mask for every layer),
 * Llama's never.  Sliding layers are parity-tested for Qwen3Config
 * (qwen3_sliding) and both TTS classes (tts_tiny_sliding).  qwen-tts
 * runs on transformers 4.x, which never reads rope_parameters (5.x's
 * place for the theta): its classes ignore it. */
const Qwen3Family FE_QWEN3 = {"Qwen3Config", 32, 128, 0, SLIDE_LAYERS, 1, 1};
const Qwen3Family FE_LLAMA = {"LlamaConfig", 0, 0, 1, SLIDE_IGNORED, 0, 1};
const Qwen3Family FE_TTS_TALKER = {"Qwen3TTSTalkerConfig", 2, 0, 0, SLIDE_ALL, 1, 0};
const Qwen3Family FE_TTS_PREDICTOR = {"Qwen3TTSTalkerCodePredictorConfig", 8, 128, 0, SLIDE_LAYERS, 1, 0};

int fe_qwen3_window(const Qwen3Dims *d, int L) {
  if (d->window) return d->window;
  return L >= 0 && L < FE_LAYERS_MAX && d->slide[L / 8] >> (L % 8) & 1 ? d->slide_window : 0;
}

/* Which layers slide, as f's config class decides it (d->slide[],
 * d->slide_window).  Qwen3Config: sliding_window (default 4096) only when
 * use_sliding_window, else none; layer_types when given, else layers
 * max_window_layers (28) and up when there is a window.  A
 * "sliding_attention" layer without a window makes transformers fail: it
 * is refused, as is every sliding layer of a class without slide_ok.
 * transformers' window of W: a query at p sees keys p-W+1..p (its mask's
 * kv > q - W), the ATTENTION op's window. */
static int read_sliding(const cJSON *obj, const char *where, const Qwen3Family *f, Qwen3Dims *d,
                        sc_error *err) {
  memset(d->slide, 0, sizeof d->slide);
  d->slide_window = 0;
  if (f->sliding == SLIDE_IGNORED) return SC_OK;
  int use = 0;
  if (cfg_bool_opt(obj, where, "use_sliding_window", 0, &use, err)) return err->code;
  const cJSON *sw = cJSON_GetObjectItemCaseSensitive(obj, "sliding_window");
  int64_t window = 0; /* 0: none */
  if (use && !cJSON_IsNull(sw)) {
    if (cfg_int_opt(obj, where, "sliding_window", 4096, &window, err)) return err->code;
    if (window < 1 || window > FE_DIM_MAX)
      return sc_fail(err, SC_EINPUT, "%s: sliding_window %lld: expected 1..%d (or null)", where,
                     (long long)window, FE_DIM_MAX);
  }
  if (f->sliding == SLIDE_ALL) { /* a window, if any, for every layer (layer_types, max_window_layers unread) */
    if (window && !f->slide_ok)
      return sc_fail(err, SC_EINPUT, "%s: use_sliding_window true is not supported yet for %s (a window of "
                     "sliding_window positions in every layer)", where, f->cls);
    for (int64_t i = 0; window && i < d->layers; i++) d->slide[i / 8] |= (unsigned char)(1u << (i % 8));
    d->slide_window = (int)window;
    return SC_OK;
  }
  const int64_t layers = d->layers;
  int n_slide = 0, first = -1;
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(obj, "layer_types");
  if (lt && !cJSON_IsNull(lt)) {
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != layers)
      return sc_fail(err, SC_EINPUT, "%s: layer_types must be a list of num_hidden_layers %lld entries, "
                     "found %s%d entries", where, (long long)layers, cJSON_IsArray(lt) ? "" : "a non-list: ",
                     cJSON_IsArray(lt) ? cJSON_GetArraySize(lt) : 0);
    int i = 0;
    for (const cJSON *e = lt->child; e; e = e->next, i++) {
      const int full = cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention");
      const int sliding = cJSON_IsString(e) && !strcmp(e->valuestring, "sliding_attention");
      if (!full && !sliding)
        return sc_fail(err, SC_EINPUT, "%s: layer_types[%d] is '%.40s': expected full_attention or "
                       "sliding_attention", where, i, cJSON_IsString(e) ? e->valuestring : "(not a string)");
      if (sliding && !window)
        return sc_fail(err, SC_EINPUT, "%s: layer_types[%d] is 'sliding_attention' without a window (%s): "
                       "transformers fails on it", where, i, use ? "sliding_window null" : "use_sliding_window "
                       "false");
      if (sliding) d->slide[i / 8] |= (unsigned char)(1u << (i % 8)), n_slide++, first = first < 0 ? i : first;
    }
  } else if (window) {
    int64_t full = 28;
    if (cfg_int_opt(obj, where, "max_window_layers", 28, &full, err)) return err->code;
    for (int64_t i = full > 0 ? full : 0; i < layers; i++, n_slide++) {
      d->slide[i / 8] |= (unsigned char)(1u << (i % 8));
      if (first < 0) first = (int)i;
    }
  }
  if (n_slide && !f->slide_ok)
    return sc_fail(err, SC_EINPUT, "%s: layer %d (and %d in all) slides (use_sliding_window, layer_types, "
                   "max_window_layers): not supported yet for %s; speechc attends to every earlier position",
                   where, first, n_slide, f->cls);
  d->slide_window = n_slide ? (int)window : 0;
  return SC_OK;
}

/* The block's config, as f's class reads it.  Every key that changes the
 * math is honoured or refused by name:
 *   hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
 *   intermediate_size, head_dim (absent: f's defaults), rms_norm_eps  read;
 *   rope_theta, rope_scaling, rope_parameters, partial_rotary_factor  read_rope;
 *   hidden_act          silu (or its alias swish) only;
 *   attention_bias      false only (q/k/v/o biases are not in the IR's block);
 *   mlp_bias            false only where the class reads it (Llama's gate/up/down biases);
 *   use_sliding_window, sliding_window, max_window_layers, layer_types  read_sliding;
 *   pretraining_tp      ignored: transformers' forward no longer reads it,
 *                       and its sliced matmuls were the same product;
 *   attention_dropout, initializer_range, use_cache, token ids: no effect
 *                       on inference.
 * vocab_size, tie_word_embeddings and max_position_embeddings are the
 * callers' (fe_llm.c, fe_tts.c). */
int fe_qwen3_dims(const cJSON *obj, const char *where, const Qwen3Family *f, Qwen3Dims *d, sc_error *err) {
  memset(d, 0, sizeof *d);
  if (cfg_int_req(obj, where, "hidden_size", &d->hidden, err) ||
      cfg_int_req(obj, where, "num_hidden_layers", &d->layers, err) ||
      cfg_int_req(obj, where, "num_attention_heads", &d->heads, err) ||
      cfg_int_req(obj, where, "intermediate_size", &d->inter, err) ||
      cfg_num_opt(obj, where, "rms_norm_eps", 1e-6, &d->eps, err) ||
      read_rope(obj, where, f, d, err))
    return err->code;
  /* absent: the class's default; null: the head count (every class) */
  const cJSON *kv = cJSON_GetObjectItemCaseSensitive(obj, "num_key_value_heads");
  if (cfg_int_opt(obj, where, "num_key_value_heads", kv || !f->kv_heads ? d->heads : f->kv_heads,
                  &d->kv_heads, err))
    return err->code;
  if (d->hidden < 1 || d->layers < 1 || d->heads < 1 || d->inter < 1)
    return sc_fail(err, SC_EINPUT, "%s: hidden_size, num_hidden_layers, num_attention_heads "
                   "and intermediate_size must be positive", where);
  /* Far above any published model: keeps products of dimensions far from
   * overflow and every dimension exact as an int. */
  if (d->hidden > FE_DIM_MAX || d->heads > FE_DIM_MAX || d->inter > FE_DIM_MAX || d->layers > FE_LAYERS_MAX)
    return sc_fail(err, SC_EINPUT, "%s: hidden_size %lld, num_attention_heads %lld, intermediate_size "
                   "%lld: each must be at most %d; num_hidden_layers %lld: at most %d", where,
                   (long long)d->hidden, (long long)d->heads, (long long)d->inter, FE_DIM_MAX,
                   (long long)d->layers, FE_LAYERS_MAX);
  /* head_dim absent: the class's default; null: hidden / heads (LlamaConfig's
   * rule; Qwen3Config fails on it) */
  const cJSON *hd = cJSON_GetObjectItemCaseSensitive(obj, "head_dim");
  if (hd && !cJSON_IsNull(hd)) {
    if (cfg_int_req(obj, where, "head_dim", &d->head_dim, err)) return err->code;
  } else {
    d->head_dim = !hd && f->head_dim ? f->head_dim : d->hidden / d->heads;
  }
  if (d->kv_heads < 1 || d->heads % d->kv_heads)
    return sc_fail(err, SC_EINPUT, "%s: num_attention_heads (%lld) must be a multiple of "
                   "num_key_value_heads (%lld%s)", where, (long long)d->heads, (long long)d->kv_heads,
                   kv ? "" : ", the default of an absent key");
  if (d->head_dim < 2 || d->head_dim % 2 || d->head_dim > FE_HEAD_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: head_dim %lld must be even, positive and at most %d (published "
                   "models use 64..256; the kernels keep one head on the stack or in shared memory)",
                   where, (long long)d->head_dim, FE_HEAD_DIM_MAX);
  if (!(d->eps > 0) || !(d->theta > 0))
    return sc_fail(err, SC_EINPUT, "%s: rms_norm_eps and rope_theta must be positive", where);
  /* the norms compute in f32: an eps that is 0 or inf there has no meaning */
  if (!((float)d->eps > 0) || isinf((float)d->eps))
    return sc_fail(err, SC_EINPUT, "%s: rms_norm_eps %g is outside the f32 range", where, d->eps);
  static const char *const no_bias[] = {"attention_bias", "mlp_bias"};
  static const char *const why[] = {"(the q/k/v/o biases would be dropped)",
                                    "(the gate/up/down biases would be dropped)"};
  for (int i = 0; i < 1 + f->mlp_bias; i++) {
    int flag = 0;
    if (cfg_bool_opt(obj, where, no_bias[i], 0, &flag, err)) return err->code;
    if (flag) return sc_fail(err, SC_EINPUT, "%s: %s true is not supported yet %s", where, no_bias[i], why[i]);
  }
  if (read_sliding(obj, where, f, d, err)) return err->code;
  const char *act = NULL;
  if (cfg_str_opt(obj, where, "hidden_act", "silu", &act, err)) return err->code;
  if (strcmp(act, "silu") && strcmp(act, "swish"))
    return sc_fail(err, SC_EINPUT, "%s: hidden_act '%s' is not supported (expected silu)", where, act);
  d->qk_norm = 1;
  d->window = d->layer_scale = d->attn_bias = d->attn_gate = 0;
  d->rot_dims = (int)d->head_dim;
  d->norm_mode = NORM_PLAIN;
  return SC_OK;
}

/* The block's weights, attention part, MLP part or both (in the one
 * order every checkpoint's weight file has used: the attention's, the
 * MLP's, then the variants' vectors). */
enum { PART_ATTN = 1, PART_MLP = 2 };
static int declare(Module *m, const Checkpoint *c, const Qwen3Dims *d, const char *tensor_prefix,
                   const char *name_prefix, int L, DType band, Qwen3Layer *w, int parts, sc_error *err) {
  const int64_t H = d->hidden, hd = d->head_dim, I = d->inter;
  const int64_t qdim = d->heads * hd, kvdim = d->kv_heads * hd;
  struct { int *slot; const char *nm, *t; int64_t rows, cols; int norm, part; } spec[] = {
      {&w->attn_norm, "attn_norm", "input_layernorm.weight", 0, H, 1, PART_ATTN},
      {&w->wq, "q_proj", "self_attn.q_proj.weight", qdim, H, 0, PART_ATTN},
      {&w->wgate, "g_proj", "self_attn.q_proj.weight", qdim, H, 0, PART_ATTN},
      {&w->wk, "k_proj", "self_attn.k_proj.weight", kvdim, H, 0, PART_ATTN},
      {&w->wv, "v_proj", "self_attn.v_proj.weight", kvdim, H, 0, PART_ATTN},
      {&w->wo, "o_proj", "self_attn.o_proj.weight", H, qdim, 0, PART_ATTN},
      {&w->q_norm, "q_norm", "self_attn.q_norm.weight", 0, hd, 1, PART_ATTN},
      {&w->k_norm, "k_norm", "self_attn.k_norm.weight", 0, hd, 1, PART_ATTN},
      {&w->mlp_norm, "mlp_norm", "post_attention_layernorm.weight", 0, H, 1, PART_MLP},
      {&w->wg, "gate_proj", "mlp.gate_proj.weight", I, H, 0, PART_MLP},
      {&w->wu, "up_proj", "mlp.up_proj.weight", I, H, 0, PART_MLP},
      {&w->wd, "down_proj", "mlp.down_proj.weight", H, I, 0, PART_MLP},
  };
  char name[IR_NAME], tensor[200];
  for (size_t i = 0; i < sizeof spec / sizeof spec[0]; i++) {
    if (!(spec[i].part & parts)) continue; /* another part's: left as it is */
    *spec[i].slot = -1;
    if (!d->qk_norm && (spec[i].slot == &w->q_norm || spec[i].slot == &w->k_norm)) continue;
    if (!d->attn_gate && spec[i].slot == &w->wgate) continue;
    snprintf(name, sizeof name, "%slayer%d.%s", name_prefix, L, spec[i].nm);
    snprintf(tensor, sizeof tensor, "%s%d.%s", tensor_prefix, L, spec[i].t);
    if (d->attn_gate && (spec[i].slot == &w->wq || spec[i].slot == &w->wgate)) {
      /* q_proj [heads * 2*hd, H] is per head [query (hd) | gate (hd)]:
       * q_proj takes the first hd rows of each head, g_proj the second */
      *spec[i].slot = fe_weight_rows(m, c, name, tensor, 2 * qdim, H, spec[i].slot == &w->wq ? 0 : hd, hd,
                                     2 * hd, qdim, band, err);
    } else {
      /* norm vectors stay f32 whatever the band: they are tiny */
      *spec[i].slot = fe_weight(m, c, name, tensor, spec[i].rows, spec[i].cols,
                                spec[i].norm ? DT_F32 : band, err);
    }
    if (*spec[i].slot < 0) {
      /* the projections' shapes come from the config (and the class's
       * defaults for absent keys): say which numbers they came from */
      const int proj = spec[i].slot == &w->wq || spec[i].slot == &w->wgate || spec[i].slot == &w->wk ||
                       spec[i].slot == &w->wv || spec[i].slot == &w->wo;
      size_t n = strlen(err->msg);
      if (proj && strstr(err->msg, "has shape") && n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - n, " (from the config: hidden_size %lld, num_attention_heads "
                 "%lld, num_key_value_heads %lld, head_dim %lld; an absent key takes its config class's "
                 "default)", (long long)H, (long long)d->heads, (long long)d->kv_heads, (long long)hd);
      return err->code;
    }
  }
  /* the variants' vectors, f32 like the norms */
  struct { int *slot; const char *nm, *t; int64_t cols; int on, part; } vec[] = {
      {&w->bq, "q_bias", "self_attn.q_proj.bias", qdim, d->attn_bias, PART_ATTN},
      {&w->bk, "k_bias", "self_attn.k_proj.bias", kvdim, d->attn_bias, PART_ATTN},
      {&w->bv, "v_bias", "self_attn.v_proj.bias", kvdim, d->attn_bias, PART_ATTN},
      {&w->bo, "o_bias", "self_attn.o_proj.bias", H, d->attn_bias, PART_ATTN},
      {&w->attn_scale, "attn_scale", "self_attn_layer_scale.scale", H, d->layer_scale, PART_ATTN},
      {&w->mlp_scale, "mlp_scale", "mlp_layer_scale.scale", H, d->layer_scale, PART_MLP},
  };
  for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
    if (!(vec[i].part & parts)) continue;
    *vec[i].slot = -1;
    if (!vec[i].on) continue;
    snprintf(name, sizeof name, "%slayer%d.%s", name_prefix, L, vec[i].nm);
    snprintf(tensor, sizeof tensor, "%s%d.%s", tensor_prefix, L, vec[i].t);
    *vec[i].slot = fe_weight(m, c, name, tensor, 0, vec[i].cols, DT_F32, err);
    if (*vec[i].slot < 0) return err->code;
  }
  return SC_OK;
}

int fe_qwen3_layer_weights(Module *m, const Checkpoint *c, const Qwen3Dims *d, const char *tensor_prefix,
                           const char *name_prefix, int L, int max_ctx, DType band, Qwen3Layer *w,
                           sc_error *err) {
  w->wgate = -1;
  if (declare(m, c, d, tensor_prefix, name_prefix, L, band, w, PART_ATTN | PART_MLP, err)) return err->code;
  const int64_t kvdim = d->kv_heads * d->head_dim;
  char name[IR_NAME];
  snprintf(name, sizeof name, "%slayer%d.k_cache", name_prefix, L);
  w->kcache = ir_state_add(m, name, max_ctx, kvdim);
  snprintf(name, sizeof name, "%slayer%d.v_cache", name_prefix, L);
  w->vcache = ir_state_add(m, name, max_ctx, kvdim);
  return SC_OK;
}

int fe_qwen3_attn_weights(Module *m, const Checkpoint *c, const Qwen3Dims *d, const char *tensor_prefix,
                          const char *name_prefix, int L, int max_ctx, DType band, Qwen3Layer *w, sc_error *err) {
  w->wgate = -1;
  if (declare(m, c, d, tensor_prefix, name_prefix, L, band, w, PART_ATTN, err)) return err->code;
  const int64_t kvdim = d->kv_heads * d->head_dim;
  char name[IR_NAME];
  snprintf(name, sizeof name, "%slayer%d.k_cache", name_prefix, L);
  w->kcache = ir_state_add(m, name, max_ctx, kvdim);
  snprintf(name, sizeof name, "%slayer%d.v_cache", name_prefix, L);
  w->vcache = ir_state_add(m, name, max_ctx, kvdim);
  return SC_OK;
}

int fe_qwen3_mlp_weights(Module *m, const Checkpoint *c, const Qwen3Dims *d, const char *tensor_prefix,
                         const char *name_prefix, int L, DType band, Qwen3Layer *w, sc_error *err) {
  return declare(m, c, d, tensor_prefix, name_prefix, L, band, w, PART_MLP, err);
}

/* The leaf of weight w, or -1 when the layer has none. */
static int opt_weight(Module *m, Graph *g, int w) { return w >= 0 ? ir_weight(m, g, w) : -1; }

/* A node name "<prefix>layerL.s"; one NAME() per call: it reuses nm. */
#define NAME(s) (snprintf(nm, sizeof nm, "%slayer%d.%s", name_prefix, L, s), nm)

int fe_qwen3_attention(Module *m, Graph *g, int x, const Qwen3Dims *d, const Qwen3Layer *w, int rope,
                       const char *name_prefix, int L) {
  char nm[IR_NAME];
  const int H = (int)d->hidden, hd = (int)d->head_dim, rot = d->rot_dims ? d->rot_dims : hd;
  const int nh = (int)d->heads, nkv = (int)d->kv_heads, nmode = d->norm_mode;
  const float eps = (float)d->eps;
  int h = ir_rmsnorm(g, x, ir_weight(m, g, w->attn_norm), H, nmode, eps, NAME("attn_norm"));
  int q = ir_linear(g, h, ir_weight(m, g, w->wq), opt_weight(m, g, w->bq), NAME("q"));
  int gate = w->wgate >= 0 ? ir_linear(g, h, ir_weight(m, g, w->wgate), -1, NAME("attn_gate")) : -1;
  int k = ir_linear(g, h, ir_weight(m, g, w->wk), opt_weight(m, g, w->bk), NAME("k"));
  int v = ir_linear(g, h, ir_weight(m, g, w->wv), opt_weight(m, g, w->bv), NAME("v"));
  if (d->qk_norm) {
    q = ir_rmsnorm(g, q, ir_weight(m, g, w->q_norm), hd, nmode, eps, NAME("q_norm"));
    k = ir_rmsnorm(g, k, ir_weight(m, g, w->k_norm), hd, nmode, eps, NAME("k_norm"));
  }
  q = ir_rope(g, q, nh, hd, rot, ROPE_NEOX, rope, NAME("q_rope"));
  k = ir_rope(g, k, nkv, hd, rot, ROPE_NEOX, rope, NAME("k_rope"));
  int kc = ir_kv_store(g, ir_state(m, g, w->kcache), k, NAME("k_store"));
  int vc = ir_kv_store(g, ir_state(m, g, w->vcache), v, NAME("v_store"));
  int a = ir_attention(g, q, kc, vc, gate, nh, nkv, hd, (float)(1.0 / sqrt((double)hd)), fe_qwen3_window(d, L),
                       NAME("attn"));
  int o = ir_linear(g, a, ir_weight(m, g, w->wo), opt_weight(m, g, w->bo), NAME("o"));
  if (w->attn_scale >= 0) o = ir_binary(g, OP_MUL, o, ir_weight(m, g, w->attn_scale), NAME("attn_scaled"));
  return ir_binary(g, OP_ADD, x, o, NAME("attn_res"));
}

int fe_qwen3_mlp(Module *m, Graph *g, int x, const Qwen3Dims *d, const Qwen3Layer *w, const char *name_prefix,
                 int L) {
  char nm[IR_NAME];
  int h = ir_rmsnorm(g, x, ir_weight(m, g, w->mlp_norm), (int)d->hidden, d->norm_mode, (float)d->eps,
                     NAME("mlp_norm"));
  int gate = ir_linear(g, h, ir_weight(m, g, w->wg), -1, NAME("gate"));
  int up = ir_linear(g, h, ir_weight(m, g, w->wu), -1, NAME("up"));
  int silu = ir_unary(g, OP_SILU, gate, NAME("gate_silu"));
  int act = ir_binary(g, OP_MUL, silu, up, NAME("swiglu"));
  int dn = ir_linear(g, act, ir_weight(m, g, w->wd), -1, NAME("down"));
  if (w->mlp_scale >= 0) dn = ir_binary(g, OP_MUL, dn, ir_weight(m, g, w->mlp_scale), NAME("mlp_scaled"));
  return ir_binary(g, OP_ADD, x, dn, NAME("mlp_res"));
}
#undef NAME

int fe_qwen3_layer(Module *m, Graph *g, int x, const Qwen3Dims *d, const Qwen3Layer *w,
                   int rope, const char *name_prefix, int L) {
  x = fe_qwen3_attention(m, g, x, d, w, rope, name_prefix, L);
  return fe_qwen3_mlp(m, g, x, d, w, name_prefix, L);
}
