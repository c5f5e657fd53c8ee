/*
 * fe_mimi.c — Mimi, Kyutai's codec (model_type "mimi"): codes of one frame
 * (80 ms) in, 1920 samples out, as the `moshi` package's MimiModel.decode
 * computes them, and 1920 samples in, a frame of codes out, as its encode
 * (moshi/models/compression.py, modules/seanet.py, modules/conv.py,
 * modules/resample.py, quantization/vq.py, quantization/core_vq.py), tensor
 * names as its state dict has them.  Channels are columns, time steps rows.
 * Decode:
 *
 *   h = P_first·sum_{i<s} cb_i[c_i] + P_rest·sum_{s<=i<K} cb_i[c_i]   split RVQ decode
 *   h = upsample(h)       depthwise ConvTranspose1d, k = 2*stride, no bias
 *   h = transformer(h)    StreamingTransformer (fe_moshi.c): LayerNorm,
 *                         RoPE, LayerScale, GELU FFN, a ring of `context`
 *   pcm = SEANetDecoder(h):
 *       conv_k(h); per ratio r: h = convT_2r/r(elu(h));
 *                  h = h + conv1(elu(conv_res,d(elu(h)))) for d = base^j
 *       conv_last(elu(h))
 *
 * config.json is {"model_type": "mimi", "num_codebooks": K} plus the Mimi
 * config as moshi.models.loaders.get_mimi takes it (sample_rate, channels,
 * frame_rate, seanet, quantizer, transformer).  Without any of those keys
 * the package's own defaults (loaders._mimi_config: the published Mimi);
 * with them, every one is needed and a key a dict lacks means what the
 * package's class means by it.  K defaults to 8, as get_mimi's.
 *
 * Streaming is the package's: every conv keeps its left context, every
 * transposed conv its carried sums, and the transformer, which runs
 * `stride` steps per frame, keeps a KV ring whose window is the package's
 * RingKVCache fed one frame at a time (ATTENTION's p.align = stride: the
 * first step of a frame sees context - 1 earlier steps).  So one call over
 * an utterance equals the package's frame-by-frame streaming decode.
 * Entry point "audio": up to --prefill-chunk (4) frames of K codes in,
 * frames x 1920 samples out.  io->pos counts frames (Graph.pos_mul).
 *
 * Encode (entry point "encode", the same number of frames per call):
 *
 *   h = SEANetEncoder(pcm):
 *       conv_k(pcm); per ratio r, last first: h = h + conv1(elu(conv_res,d(elu(h))))
 *                  for d = base^j; h = conv_2r/r(elu(h))   (stride r)
 *       conv_last(elu(h))
 *   h = transformer(h)    the encoder's StreamingTransformer, as the decoder's
 *   h = downsample(h)     Conv1d k = 2*stride, stride, no bias, replicate padding
 *   codes = split RVQ encode: per group (semantic, acoustic) r = P_in·h, then
 *       per stage c = argmin_j |r - cb[j]| (VQ_NEAREST), r -= cb[c]
 *
 * Every strided conv keeps the package's kernel - stride rows of context
 * (IM2COL_STRIDED; the downsample's first call pads with copies of its
 * first row), so one call over an utterance is the package's streaming
 * encode, one frame per call; the encoder has its own states and ring,
 * and the runtime its own frame count (sc_codec_encode).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend.h"
#include "sc_abi.h"

#define MIMI_MAX_RATIOS 8
#define MIMI_MAX_CODEBOOKS 64

typedef struct MimiCfg {
  int64_t sample_rate, channels, frame_size;
  double frame_rate;
  /* seanet */
  int64_t dim, n_filters, n_res, kernel, res_kernel, last_kernel, dil_base, compress;
  int ratios[MIMI_MAX_RATIOS], n_ratios, true_skip;
  double alpha;                 /* ELU */
  int64_t hop, stride;          /* hop: samples per encoder step; stride: steps per frame */
  /* quantizer */
  int64_t q_dim, n_q, bins, q_in, q_out, n_sem, K;
  /* transformer */
  MoshiStack tr;
  int64_t context, tr_in, tr_out;
} MimiCfg;

/* ---- config ---------------------------------------------------------------- */

static const char *const top_keys[] = {"model_type", "num_codebooks", "sample_rate", "channels", "frame_rate",
                                       "seanet", "quantizer", "transformer"};
static const char *const seanet_keys[] = {
    "channels", "dimension", "causal", "n_filters", "n_residual_layers", "ratios", "activation",
    "activation_params", "final_activation", "final_activation_params", "norm", "norm_params", "kernel_size",
    "last_kernel_size", "residual_kernel_size", "dilation_base", "pad_mode", "true_skip", "compress",
    "disable_norm_outer_blocks", "trim_right_ratio", "mask_fn", "mask_position"};
/* the quantizer's training-only arguments are accepted and mean nothing here */
static const char *const quant_keys[] = {"dimension", "n_q", "bins", "input_dimension", "output_dimension",
                                         "n_q_semantic", "q_dropout", "no_quantization_rate", "decay",
                                         "threshold_usage_ratio", "replaced_usage_ratio", "codebook_offset"};
static const char *const tr_keys[] = {"d_model", "num_heads", "num_layers", "dim_feedforward", "causal",
                                      "context", "positional_embedding", "max_period", "positional_scale",
                                      "layer_scale", "norm", "gating", "kv_repeat", "conv_layout",
                                      "input_dimension", "output_dimensions"};

static int check_keys(const cJSON *obj, const char *where, const char *const *keys, size_t n, sc_error *err) {
  for (const cJSON *e = obj->child; e; e = e->next) {
    size_t i = 0;
    while (i < n && strcmp(e->string, keys[i])) i++;
    if (i == n)
      return sc_fail(err, SC_EINPUT, "%s: key '%s' is not a Mimi argument speechc knows (the package would "
                     "refuse it, or speechc would ignore a switch)", where, e->string);
  }
  return SC_OK;
}

/* A sub-config: the object, or (published defaults) an empty one. */
static const cJSON *section(const cJSON *cfg, const char *key, int pub, const cJSON *empty, const char *path,
                            sc_error *err) {
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (!s && pub) return empty;
  if (!cJSON_IsObject(s)) {
    sc_fail(err, SC_EINPUT, "%s: %s must be an object (the Mimi config needs seanet, quantizer and transformer "
            "together, as get_mimi reads them)", path, key);
    return NULL;
  }
  return s;
}

/* A switch that must have one value: refuse any other by name. */
static int must_str(const cJSON *obj, const char *where, const char *key, const char *dflt, const char *want,
                    const char *why, sc_error *err) {
  const char *v;
  if (cfg_str_opt(obj, where, key, dflt, &v, err)) return err->code;
  if (strcmp(v, want))
    return sc_fail(err, SC_EINPUT, "%s: %s '%s' is not supported (%s)", where, key, v, why);
  return SC_OK;
}

static int must_null(const cJSON *obj, const char *where, const char *key, const char *why, sc_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (v && !cJSON_IsNull(v)) return sc_fail(err, SC_EINPUT, "%s: %s is set: not supported (%s)", where, key, why);
  return SC_OK;
}

static int read_seanet(const cJSON *s, const char *where, int pub, MimiCfg *m, sc_error *err) {
  int causal;
  double trim;
  if (check_keys(s, where, seanet_keys, sizeof seanet_keys / sizeof *seanet_keys, err) ||
      cfg_int_opt(s, where, "channels", 1, &m->channels, err) ||
      cfg_int_opt(s, where, "dimension", pub ? 512 : 128, &m->dim, err) ||
      cfg_int_opt(s, where, "n_filters", pub ? 64 : 32, &m->n_filters, err) ||
      cfg_int_opt(s, where, "n_residual_layers", pub ? 1 : 3, &m->n_res, err) ||
      cfg_int_opt(s, where, "kernel_size", 7, &m->kernel, err) ||
      cfg_int_opt(s, where, "last_kernel_size", pub ? 3 : 7, &m->last_kernel, err) ||
      cfg_int_opt(s, where, "residual_kernel_size", 3, &m->res_kernel, err) ||
      cfg_int_opt(s, where, "dilation_base", 2, &m->dil_base, err) ||
      cfg_int_opt(s, where, "compress", 2, &m->compress, err) ||
      cfg_bool_opt(s, where, "true_skip", 1, &m->true_skip, err) ||
      cfg_bool_opt(s, where, "causal", pub, &causal, err) ||
      cfg_num_opt(s, where, "trim_right_ratio", 1.0, &trim, err) ||
      must_str(s, where, "activation", "ELU", "ELU",
               "the published Mimi's; another torch.nn activation is not lowered", err) ||
      must_str(s, where, "norm", "none", "none",
               "weight_norm: fold it into the conv weights first, as the published checkpoint is", err) ||
      must_str(s, where, "pad_mode", pub ? "constant" : "reflect", "constant",
               "speechc's causal convs pad with zeros; the package refuses reflect", err) ||
      must_null(s, where, "final_activation", "no activation after the last conv is lowered", err) ||
      must_null(s, where, "mask_fn", "an encoder mask", err))
    return err->code;
  if (!causal)
    return sc_fail(err, SC_EINPUT, "%s: causal false: the package's streaming convs are causal only", where);
  if (trim != 1.0)
    return sc_fail(err, SC_EINPUT, "%s: trim_right_ratio %g: the package's StreamingConvTranspose1d takes 1.0 only",
                   where, trim);
  m->alpha = 1.0;
  const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "activation_params");
  if (ap && !cJSON_IsNull(ap)) {
    if (!cJSON_IsObject(ap)) return sc_fail(err, SC_EINPUT, "%s: activation_params must be an object", where);
    for (const cJSON *e = ap->child; e; e = e->next)
      if (strcmp(e->string, "alpha"))
        return sc_fail(err, SC_EINPUT, "%s: activation_params key '%s' is not ELU's (alpha)", where, e->string);
    if (cfg_num_opt(ap, where, "alpha", 1.0, &m->alpha, err)) return err->code;
    if (!isfinite(m->alpha)) return sc_fail(err, SC_EINPUT, "%s: the ELU alpha must be finite", where);
  }
  /* ratios: the decoder's order */
  const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "ratios");
  static const int pub_r[] = {8, 6, 5, 4}, cls_r[] = {8, 5, 4, 2};
  if (!r || cJSON_IsNull(r)) {
    memcpy(m->ratios, pub ? pub_r : cls_r, sizeof pub_r);
    m->n_ratios = 4;
  } else {
    if (!cJSON_IsArray(r) || cJSON_GetArraySize(r) < 1 || cJSON_GetArraySize(r) > MIMI_MAX_RATIOS)
      return sc_fail(err, SC_EINPUT, "%s: ratios must be a list of 1 to %d integers", where, MIMI_MAX_RATIOS);
    m->n_ratios = 0;
    for (const cJSON *e = r->child; e; e = e->next) {
      int64_t v;
      if (cfg_int_val(e, where, "ratios", &v, err)) return err->code;
      if (v < 1 || v > 64)
        return sc_fail(err, SC_EINPUT, "%s: ratios[%d] is %lld, expected 1..64", where, m->n_ratios, (long long)v);
      m->ratios[m->n_ratios++] = (int)v;
    }
  }
  if (m->channels != 1)
    return sc_fail(err, SC_EINPUT, "%s: channels %lld: only mono Mimi is lowered", where, (long long)m->channels);
  const int64_t dims[] = {m->dim, m->n_filters, m->kernel, m->last_kernel, m->res_kernel, m->dil_base, m->compress};
  for (size_t i = 0; i < sizeof dims / sizeof *dims; i++)
    if (dims[i] < 1 || dims[i] > FE_DIM_MAX)
      return sc_fail(err, SC_EINPUT, "%s: dimension, n_filters, kernel sizes, dilation_base and compress must be "
                     "in 1..%d", where, FE_DIM_MAX);
  if (m->n_res < 0 || m->n_res > 16)
    return sc_fail(err, SC_EINPUT, "%s: n_residual_layers %lld: expected 0..16", where, (long long)m->n_res);
  if (m->n_filters << m->n_ratios > FE_DIM_MAX || (m->n_filters / m->compress) < 1)
    return sc_fail(err, SC_EINPUT, "%s: n_filters %lld with %d ratios and compress %lld: channel counts out of "
                   "range", where, (long long)m->n_filters, m->n_ratios, (long long)m->compress);
  m->hop = 1;
  for (int i = 0; i < m->n_ratios; i++) m->hop *= m->ratios[i];
  return SC_OK;
}

static int read_quantizer(const cJSON *q, const char *where, int pub, MimiCfg *m, sc_error *err) {
  if (check_keys(q, where, quant_keys, sizeof quant_keys / sizeof *quant_keys, err) ||
      cfg_int_opt(q, where, "dimension", pub ? 256 : 128, &m->q_dim, err) ||
      cfg_int_opt(q, where, "n_q", pub ? 32 : 8, &m->n_q, err) ||
      cfg_int_opt(q, where, "bins", pub ? 2048 : 1024, &m->bins, err) ||
      cfg_int_opt(q, where, "n_q_semantic", 1, &m->n_sem, err))
    return err->code;
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(q, "input_dimension");
  const cJSON *out = cJSON_GetObjectItemCaseSensitive(q, "output_dimension");
  /* None means `dimension`, as ResidualVectorQuantizer's `or` */
  if (cfg_int_opt(q, where, "input_dimension", pub ? 512 : m->q_dim, &m->q_in, err) ||
      cfg_int_opt(q, where, "output_dimension", pub ? 512 : m->q_dim, &m->q_out, err))
    return err->code;
  if (in && cJSON_IsNull(in)) m->q_in = m->q_dim;
  if (out && cJSON_IsNull(out)) m->q_out = m->q_dim;
  if (m->q_dim < 1 || m->q_dim > FE_DIM_MAX || m->bins < 1 || m->bins > FE_DIM_MAX || m->q_in < 1 || m->q_out < 1 ||
      m->q_in > FE_DIM_MAX || m->q_out > FE_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: dimension, bins, input_dimension and output_dimension must be in 1..%d",
                   where, FE_DIM_MAX);
  if (m->n_sem < 1 || m->n_q <= m->n_sem || m->n_q > MIMI_MAX_CODEBOOKS)
    return sc_fail(err, SC_EINPUT, "%s: n_q %lld, n_q_semantic %lld: the package needs n_q > n_q_semantic >= 1 "
                   "(speechc: n_q <= %d)", where, (long long)m->n_q, (long long)m->n_sem, MIMI_MAX_CODEBOOKS);
  return SC_OK;
}

static int read_transformer(const cJSON *t, const char *where, int pub, MimiCfg *m, sc_error *err) {
  MoshiStack *s = &m->tr;
  memset(s, 0, sizeof *s);
  int causal, conv_layout, ls;
  int64_t kv_repeat;
  const char *norm, *gating, *pos;
  if (check_keys(t, where, tr_keys, sizeof tr_keys / sizeof *tr_keys, err) ||
      cfg_int_opt(t, where, "d_model", pub ? 512 : -1, &s->dim, err) ||
      cfg_int_opt(t, where, "num_heads", pub ? 8 : -1, &s->heads, err) ||
      cfg_int_opt(t, where, "num_layers", pub ? 8 : -1, &s->layers, err) ||
      cfg_int_opt(t, where, "dim_feedforward", 2048, &s->ff, err) ||
      cfg_int_opt(t, where, "kv_repeat", 1, &kv_repeat, err) ||
      cfg_bool_opt(t, where, "causal", pub, &causal, err) ||
      cfg_bool_opt(t, where, "conv_layout", pub, &conv_layout, err) ||
      cfg_num_opt(t, where, "max_period", 10000, &s->max_period, err) ||
      cfg_num_opt(t, where, "positional_scale", 1.0, &s->pos_scale, err) ||
      cfg_str_opt(t, where, "norm", "layer_norm", &norm, err) ||
      cfg_str_opt(t, where, "gating", "none", &gating, err) ||
      cfg_str_opt(t, where, "positional_embedding", pub ? "rope" : "sin", &pos, err) ||
      cfg_int_opt(t, where, "input_dimension", pub ? 512 : -1, &m->tr_in, err))
    return err->code;
  if (!pub && (s->dim < 0 || s->heads < 0 || s->layers < 0 || m->tr_in < 0))
    return sc_fail(err, SC_EINPUT, "%s: d_model, num_heads, num_layers and input_dimension are required (the "
                   "package's ProjectedTransformer has no defaults for them)", where);
  const cJSON *lsj = cJSON_GetObjectItemCaseSensitive(t, "layer_scale");
  ls = lsj ? cJSON_IsNumber(lsj) : pub;
  if (lsj && !cJSON_IsNull(lsj) && !cJSON_IsNumber(lsj))
    return sc_fail(err, SC_EINPUT, "%s: layer_scale must be null or a number", where);
  s->layer_scale = ls;
  if (!causal)
    return sc_fail(err, SC_EINPUT, "%s: causal false is not supported (Mimi streams causally)", where);
  if (!conv_layout)
    return sc_fail(err, SC_EINPUT, "%s: conv_layout false: Mimi hands its transformers [B, C, T] tensors, so "
                   "the package would read channels as time", where);
  const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(t, "context");
  m->context = pub ? 250 : 0;
  if (ctx && !cJSON_IsNull(ctx) && cfg_int_req(t, where, "context", &m->context, err)) return err->code;
  if (ctx && cJSON_IsNull(ctx)) m->context = 0;
  if (m->context < 1 || m->context > FE_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: context %lld: the package streams only with a positive context (its "
                   "RingKVCache's capacity)", where, (long long)m->context);
  const cJSON *outs = cJSON_GetObjectItemCaseSensitive(t, "output_dimensions");
  m->tr_out = s->dim;
  if (outs || !pub) {
    if (!cJSON_IsArray(outs) || cJSON_GetArraySize(outs) != 1)
      return sc_fail(err, SC_EINPUT, "%s: output_dimensions must list one dimension (Mimi uses one output)", where);
    if (cfg_int_val(outs->child, where, "output_dimensions", &m->tr_out, err)) return err->code;
  } else {
    m->tr_out = 512;
  }
  s->kv_heads = kv_repeat >= 1 && s->heads >= 1 && s->heads % kv_repeat == 0 ? s->heads / kv_repeat : 0;
  s->sets = 1;
  if (fe_moshi_read_stack(where, norm, gating, pos, s, err)) return err->code;
  if (m->tr_in < 1 || m->tr_in > FE_DIM_MAX || m->tr_out < 1 || m->tr_out > FE_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: input_dimension and output_dimensions must be in 1..%d", where, FE_DIM_MAX);
  return SC_OK;
}

static int read_config(const Checkpoint *c, MimiCfg *m, sc_error *err) {
  const cJSON *cfg = c->config;
  const char *path = c->config_path;
  char where[300];
  memset(m, 0, sizeof *m);
  if (check_keys(cfg, path, top_keys, sizeof top_keys / sizeof *top_keys, err)) return err->code;
  static const char *const mk[] = {"sample_rate", "channels", "frame_rate", "seanet", "quantizer", "transformer"};
  int given = 0;
  for (size_t i = 0; i < sizeof mk / sizeof *mk; i++) given += cJSON_GetObjectItemCaseSensitive(cfg, mk[i]) != NULL;
  const int pub = given == 0;
  for (size_t i = 0; !pub && i < sizeof mk / sizeof *mk; i++)
    if (!cJSON_GetObjectItemCaseSensitive(cfg, mk[i]))
      return sc_fail(err, SC_EINPUT, "%s: %s is missing (a Mimi config gives sample_rate, channels, frame_rate, "
                     "seanet, quantizer and transformer, as get_mimi reads them; or none of them for the "
                     "published Mimi)", path, mk[i]);
  int64_t channels;
  if (cfg_int_opt(cfg, path, "sample_rate", 24000, &m->sample_rate, err) ||
      cfg_int_opt(cfg, path, "channels", 1, &channels, err) ||
      cfg_num_opt(cfg, path, "frame_rate", 12.5, &m->frame_rate, err) ||
      cfg_int_opt(cfg, path, "num_codebooks", 8, &m->K, err))
    return err->code;
  cJSON *empty = cJSON_CreateObject();
  const cJSON *s = section(cfg, "seanet", pub, empty, path, err);
  int rc = s ? SC_OK : err->code;
  if (!rc) {
    snprintf(where, sizeof where, "%s: seanet", path);
    rc = read_seanet(s, where, pub, m, err);
  }
  if (!rc && !(s = section(cfg, "quantizer", pub, empty, path, err))) rc = err->code;
  if (!rc) {
    snprintf(where, sizeof where, "%s: quantizer", path);
    rc = read_quantizer(s, where, pub, m, err);
  }
  if (!rc && !(s = section(cfg, "transformer", pub, empty, path, err))) rc = err->code;
  if (!rc) {
    snprintf(where, sizeof where, "%s: transformer", path);
    rc = read_transformer(s, where, pub, m, err);
  }
  cJSON_Delete(empty);
  if (rc) return rc;
  if (channels != 1)
    return sc_fail(err, SC_EINPUT, "%s: channels %lld: only mono Mimi is lowered", path, (long long)channels);
  if (m->sample_rate < 1 || m->sample_rate > 1000000 || !(m->frame_rate > 0) || !isfinite(m->frame_rate))
    return sc_fail(err, SC_EINPUT, "%s: sample_rate %lld and frame_rate %g must be positive", path,
                   (long long)m->sample_rate, m->frame_rate);
  if (m->K < m->n_sem || m->K > m->n_q)
    return sc_fail(err, SC_EINPUT, "%s: num_codebooks %lld: expected %lld..%lld (the quantizer's n_q_semantic to "
                   "n_q)", path, (long long)m->K, (long long)m->n_sem, (long long)m->n_q);
  /* frames: the encoder runs at sample_rate / hop, the codes at frame_rate */
  m->frame_size = (int64_t)((double)m->sample_rate / m->frame_rate);
  const double enc_rate = (double)m->sample_rate / (double)m->hop, ratio = enc_rate / m->frame_rate;
  m->stride = (int64_t)ratio;
  if (ratio < 1 || (double)m->stride != ratio || m->stride > 16)
    return sc_fail(err, SC_EINPUT, "%s: the encoder's rate %g Hz (sample_rate / the product of the seanet "
                   "ratios) must be frame_rate %g Hz times an integer 1..16", path, enc_rate, m->frame_rate);
  if (m->frame_size != m->hop * m->stride)
    return sc_fail(err, SC_EINPUT, "%s: a frame is %lld samples but the decoder makes %lld", path,
                   (long long)m->frame_size, (long long)(m->hop * m->stride));
  if (m->stride > 1 && m->context < m->stride)
    return sc_fail(err, SC_EINPUT, "%s: transformer context %lld is shorter than the %lld steps of a frame", path,
                   (long long)m->context, (long long)m->stride);
  m->tr.align = (int)m->stride;
  return SC_OK;
}

/* ---- the graph ------------------------------------------------------------- */

typedef struct Mb {
  Module *m;
  const Checkpoint *c;
  Graph *g;
  DType band;
  sc_error *err;
} Mb;

#define W(idx) ir_weight(b->m, b->g, (idx))

/* A causal StreamingConv1d "<tp>.conv.conv.{weight,bias}" over x. */
static int conv(Mb *b, int x, const char *tp, const char *name, int64_t cout, int64_t cin, int k, int dil) {
  char t[200], n[IR_NAME];
  snprintf(t, sizeof t, "%s.conv.conv.weight", tp);
  snprintf(n, sizeof n, "%s.w", name);
  int w = fe_conv_weight(b->m, b->c, n, t, FE_CONV, cout, cin, k, b->band, b->err);
  if (w < 0) return -1;
  snprintf(t, sizeof t, "%s.conv.conv.bias", tp);
  snprintf(n, sizeof n, "%s.b", name);
  int bias = fe_weight(b->m, b->c, n, t, 0, cout, DT_F32, b->err);
  if (bias < 0) return -1;
  return fe_causal_conv(b->m, b->g, x, w, bias, cin, k, dil, name);
}

static int elu(Mb *b, int x, double alpha, const char *name) {
  return ir_elu(b->g, x, (float)alpha, name);
}

/* SEANet's residual block `<side>.model.<idx>` (node names from un) over
 * h [T, ch]: h (or its 1x1 shortcut) + conv2(elu(conv1_dil(elu(h)))), the
 * first conv to `hidden` channels.  -1 on error. */
static int resblock(Mb *b, const MimiCfg *d, int h, const char *side, int idx, const char *un, int64_t ch,
                    int64_t hidden, int64_t dil) {
  char tp[200], n[IR_NAME];
  snprintf(n, sizeof n, "%.30s.elu1", un);
  int y = elu(b, h, d->alpha, n);
  snprintf(tp, sizeof tp, "%s.model.%d.block.1", side, idx);
  snprintf(n, sizeof n, "%.30s.conv1", un);
  y = conv(b, y, tp, n, hidden, ch, (int)d->res_kernel, (int)dil);
  if (y < 0) return -1;
  snprintf(n, sizeof n, "%.30s.elu2", un);
  y = elu(b, y, d->alpha, n);
  snprintf(tp, sizeof tp, "%s.model.%d.block.3", side, idx);
  snprintf(n, sizeof n, "%.30s.conv2", un);
  y = conv(b, y, tp, n, ch, hidden, 1, 1);
  if (y < 0) return -1;
  int skip = h;
  if (!d->true_skip) {
    snprintf(tp, sizeof tp, "%s.model.%d.shortcut", side, idx);
    snprintf(n, sizeof n, "%.30s.shortcut", un);
    if ((skip = conv(b, h, tp, n, ch, ch, 1, 1)) < 0) return -1;
  }
  snprintf(n, sizeof n, "%.30s.add", un);
  return ir_binary(b->g, OP_ADD, skip, y, n);
}

/* Split RVQ decode: P_first·(first codebooks) + P_rest·(the others). */
static int rvq(Mb *b, const MimiCfg *d) {
  int ids = ir_input_codes(b->g, (int)d->K);
  int sum[2] = {-1, -1};
  char t[200], n[IR_NAME];
  for (int i = 0; i < d->K; i++) {
    const int first = i < d->n_sem;
    char es[200], cu[200];
    snprintf(t, sizeof t, "quantizer.%s.vq.layers.%lld._codebook", first ? "rvq_first" : "rvq_rest",
             (long long)(first ? i : i - d->n_sem));
    snprintf(es, sizeof es, "%.150s.embedding_sum", t);
    snprintf(cu, sizeof cu, "%.150s.cluster_usage", t);
    const int64_t shape[2] = {d->bins, d->q_dim};
    const StTensor *a = ckpt_tensor(b->c, es, 2, shape, b->err);
    const StTensor *u = a ? ckpt_tensor(b->c, cu, 1, &d->bins, b->err) : NULL;
    if (!u) return -1;
    snprintf(n, sizeof n, "codebook%d", i);
    int tab = ir_weight_add(b->m, n, DT_F32, 1, d->bins, d->q_dim);
    IrWeight *wt = &b->m->weights[tab];
    wt->src[0] = (IrWeightSrc){.tensor = a, .rows = d->bins};
    wt->src[1] = (IrWeightSrc){.tensor = u, .rows = 1};
    wt->n_src = 2;
    wt->gen = WGEN_CODEBOOK; /* embedding_sum / clamp(cluster_usage, 1e-5), as EuclideanCodebook */
    snprintf(wt->source, sizeof wt->source, "%.70s / clamp(%.70s)", es, cu);
    snprintf(n, sizeof n, "codes%d", i);
    int col = ir_slice(b->g, ids, i, 1, n);
    snprintf(n, sizeof n, "quantized%d", i);
    int e = ir_embed(b->g, W(tab), col, n);
    snprintf(n, sizeof n, "rvq_sum%d", i);
    sum[!first] = sum[!first] < 0 ? e : ir_binary(b->g, OP_ADD, sum[!first], e, n);
  }
  int out = -1;
  for (int k = 0; k < 2; k++) {
    if (sum[k] < 0) continue; /* num_codebooks == n_q_semantic: rvq_rest unused */
    snprintf(t, sizeof t, "quantizer.%s.output_proj.weight", k ? "rvq_rest" : "rvq_first");
    snprintf(n, sizeof n, "rvq_%s_proj", k ? "rest" : "first");
    int p = fe_conv_weight(b->m, b->c, n, t, FE_CONV, d->q_out, d->q_dim, 1, b->band, b->err);
    if (p < 0) return -1;
    int y = ir_linear(b->g, sum[k], W(p), -1, n);
    out = out < 0 ? y : ir_binary(b->g, OP_ADD, out, y, "rvq");
  }
  return out;
}

/* A ProjectedTransformer ("<tp>transformer.layers.", "<tp>input_proj",
 * "<tp>output_projs.0"; names "<np>..."): projections where the widths
 * differ, the layers, over x at stride steps per frame. */
static int transformer(Mb *b, const MimiCfg *d, int x, int max_ctx, int rows, const char *tp, const char *np) {
  const MoshiStack *t = &d->tr;
  MoshiLayer ls[64];
  if (t->layers > 64)
    return sc_fail(b->err, SC_EINPUT, "%s: transformer num_layers %lld: at most 64", b->c->config_path,
                   (long long)t->layers), -1;
  if (d->q_out != d->dim || d->tr_in != d->dim || d->tr_out != d->dim)
    return sc_fail(b->err, SC_EINPUT, "%s: the quantizer gives %lld channels, the transformer takes %lld and "
                   "gives %lld: each must be the seanet dimension %lld", b->c->config_path, (long long)d->q_out,
                   (long long)d->tr_in, (long long)d->tr_out, (long long)d->dim), -1;
  /* the ring: the window, plus the call's steps written before any attends */
  const int ring = (int)d->context + rows;
  char t1[200], n1[IR_NAME];
  snprintf(t1, sizeof t1, "%stransformer.layers.", tp);
  for (int L = 0; L < t->layers; L++)
    if (fe_moshi_layer_weights(b->m, b->c, b->band, t, t1, np, L, ring, &ls[L], b->err)) return -1;
  int sin, rope;
  fe_moshi_pos_tables(b->m, t, max_ctx * (int)d->stride, np, &sin, &rope);
  if (d->tr_in != t->dim) {
    snprintf(t1, sizeof t1, "%sinput_proj.weight", tp);
    snprintf(n1, sizeof n1, "%sinput_proj", np);
    int w = fe_weight(b->m, b->c, n1, t1, t->dim, d->tr_in, b->band, b->err);
    if (w < 0) return -1;
    x = ir_linear(b->g, x, W(w), -1, n1);
  }
  x = fe_moshi_stack(b->m, b->g, t, ls, x, sin, rope, (int)d->context, np);
  if (d->tr_out != t->dim) {
    snprintf(t1, sizeof t1, "%soutput_projs.0.weight", tp);
    snprintf(n1, sizeof n1, "%soutput_proj", np);
    int w = fe_weight(b->m, b->c, n1, t1, d->tr_out, t->dim, b->band, b->err);
    if (w < 0) return -1;
    x = ir_linear(b->g, x, W(w), -1, n1);
  }
  return x;
}

/* SEANetDecoder: decoder.model.<i> in the package's Sequential order. */
static int seanet_decoder(Mb *b, const MimiCfg *d, int h) {
  char tp[120], n[IR_NAME], un[IR_NAME];
  int idx = 0;
  int64_t mult = (int64_t)1 << d->n_ratios;
  snprintf(tp, sizeof tp, "decoder.model.%d", idx++);
  h = conv(b, h, tp, "dec0", mult * d->n_filters, d->dim, (int)d->kernel, 1);
  for (int i = 0; i < d->n_ratios && h >= 0; i++) {
    const int64_t in = mult * d->n_filters, out = in / 2, hidden = out / d->compress;
    const int r = d->ratios[i];
    snprintf(n, sizeof n, "dec%d.elu", i + 1);
    h = elu(b, h, d->alpha, n);
    idx++;
    char t[200];
    snprintf(t, sizeof t, "decoder.model.%d.convtr.convtr.weight", idx);
    snprintf(n, sizeof n, "dec%d.convt.w", i + 1);
    int w = fe_conv_weight(b->m, b->c, n, t, FE_CONVT, out, in, 2 * r, b->band, b->err);
    snprintf(t, sizeof t, "decoder.model.%d.convtr.convtr.bias", idx);
    snprintf(n, sizeof n, "dec%d.convt.b", i + 1);
    int bias = w < 0 ? -1 : fe_weight(b->m, b->c, n, t, 0, out, DT_F32, b->err);
    if (bias < 0) return -1;
    snprintf(n, sizeof n, "dec%d.convt", i + 1);
    h = fe_causal_conv_t(b->m, b->g, h, w, bias, out, 2 * r, r, n);
    idx++;
    int64_t dil = 1;
    for (int j = 0; j < d->n_res && h >= 0; j++, idx++, dil *= d->dil_base) {
      if (dil > FE_DIM_MAX) return sc_fail(b->err, SC_EINPUT, "%s: seanet dilations overflow", b->c->config_path), -1;
      snprintf(un, sizeof un, "dec%d.res%d", i + 1, j);
      h = resblock(b, d, h, "decoder", idx, un, out, hidden, dil);
    }
    mult /= 2;
  }
  if (h < 0) return -1;
  h = elu(b, h, d->alpha, "final.elu");
  idx++;
  snprintf(tp, sizeof tp, "decoder.model.%d", idx);
  return conv(b, h, tp, "final.conv", d->channels, d->n_filters, (int)d->last_kernel, 1);
}

/* A causal StreamingConv1d of stride s (kernel 2s in the encoder) over x:
 * IM2COL_STRIDED with the package's kernel - stride rows of state (zero
 * padding, or with replicate the first input row's copies), then LINEAR. */
static int conv_strided(Mb *b, int x, const char *tp, const char *name, int64_t cout, int64_t cin, int k, int s,
                        int replicate, int bias) {
  char t[200], n[IR_NAME], sn[IR_NAME];
  snprintf(t, sizeof t, "%s.conv.conv.weight", tp);
  snprintf(n, sizeof n, "%.40s.w", name);
  int w = fe_conv_weight(b->m, b->c, n, t, FE_CONV, cout, cin, k, b->band, b->err);
  if (w < 0) return -1;
  int bw = -1;
  if (bias) {
    snprintf(t, sizeof t, "%s.conv.conv.bias", tp);
    snprintf(n, sizeof n, "%.40s.b", name);
    if ((bw = fe_weight(b->m, b->c, n, t, 0, cout, DT_F32, b->err)) < 0) return -1;
  }
  const int P = k - s; /* (k-1)*1 + 1 - s */
  int st = -1;
  if (P > 0 || replicate) {
    snprintf(sn, sizeof sn, "%.38s.context", name);
    st = ir_state(b->m, b->g, ir_state_add(b->m, sn, P + (replicate ? 1 : 0), cin));
  }
  snprintf(n, sizeof n, "%.40s.cols", name);
  x = ir_im2col_strided(b->g, x, st, k, 1, s, replicate, n);
  return ir_linear(b->g, x, W(w), bw >= 0 ? W(bw) : -1, name);
}

/* SEANetEncoder: encoder.model.<i> in the package's Sequential order (the
 * ratios reversed: the first block strides by the last ratio). */
static int seanet_encoder(Mb *b, const MimiCfg *d, int h) {
  char tp[120], n[IR_NAME], un[IR_NAME];
  int idx = 0;
  int64_t mult = 1;
  snprintf(tp, sizeof tp, "encoder.model.%d", idx++);
  h = conv(b, h, tp, "enc0", d->n_filters, d->channels, (int)d->kernel, 1);
  for (int i = 0; i < d->n_ratios && h >= 0; i++) {
    const int64_t ch = mult * d->n_filters, hidden = ch / d->compress;
    const int r = d->ratios[d->n_ratios - 1 - i];
    int64_t dil = 1;
    for (int j = 0; j < d->n_res && h >= 0; j++, idx++, dil *= d->dil_base) {
      if (dil > FE_DIM_MAX) return sc_fail(b->err, SC_EINPUT, "%s: seanet dilations overflow", b->c->config_path), -1;
      snprintf(un, sizeof un, "enc%d.res%d", i + 1, j);
      h = resblock(b, d, h, "encoder", idx, un, ch, hidden, dil);
    }
    if (h < 0) return -1;
    snprintf(n, sizeof n, "enc%d.elu", i + 1);
    h = elu(b, h, d->alpha, n);
    idx++;
    snprintf(tp, sizeof tp, "encoder.model.%d", idx++);
    snprintf(n, sizeof n, "enc%d.down", i + 1);
    h = conv_strided(b, h, tp, n, 2 * ch, ch, 2 * r, r, 0, 1);
    mult *= 2;
  }
  if (h < 0) return -1;
  h = elu(b, h, d->alpha, "enc_final.elu");
  idx++;
  snprintf(tp, sizeof tp, "encoder.model.%d", idx);
  return conv(b, h, tp, "enc_final.conv", d->dim, mult * d->n_filters, (int)d->last_kernel, 1);
}

/* Split RVQ encode (SplitResidualVectorQuantizer.encode): each group
 * projects the latent with its own input_proj (a 1x1 conv, no bias), then
 * its stages each take the nearest entry of their codebook (declared by
 * the decoder's rvq(), shared) and pass the residual on; the codes of
 * every stage ride in front (VQ_NEAREST), so the last node's first K
 * columns are the frame's codes. */
static int rvq_encode(Mb *b, const MimiCfg *d, int x) {
  char t[200], n[IR_NAME];
  int codes = -1; /* [R, codes so far | residual] of the last stage */
  int done = 0;
  for (int k = 0; k < 2; k++) {
    const int64_t first = k ? d->n_sem : 0, end = k ? d->K : d->n_sem;
    if (end <= first) continue; /* num_codebooks == n_q_semantic: rvq_rest unused */
    snprintf(t, sizeof t, "quantizer.%s.input_proj.weight", k ? "rvq_rest" : "rvq_first");
    snprintf(n, sizeof n, "rvq_%s_in", k ? "rest" : "first");
    int p = fe_conv_weight(b->m, b->c, n, t, FE_CONV, d->q_dim, d->q_in, 1, b->band, b->err);
    if (p < 0) return -1;
    int res = ir_linear(b->g, x, W(p), -1, n);
    for (int64_t i = first; i < end; i++) {
      snprintf(n, sizeof n, "codebook%lld", (long long)i);
      const int tab = ir_weight_find(b->m, n);
      IR_ASSERT(tab >= 0);
      int prev = -1;
      if (done) {
        snprintf(n, sizeof n, "vq%d.codes", done - 1);
        prev = ir_slice(b->g, codes, 0, done, n);
      }
      snprintf(n, sizeof n, "vq%lld", (long long)i);
      codes = ir_vq_nearest(b->g, res, W(tab), prev, n);
      done++;
      snprintf(n, sizeof n, "vq%lld.residual", (long long)i);
      res = ir_slice(b->g, codes, done, d->q_dim, n);
    }
  }
  return ir_slice(b->g, codes, 0, d->K, "codes");
}

/* Entry point "encode": frames x frame_size samples in (one channel), the
 * codes of each frame out as floats [frames, K] (exact integers).  Every
 * conv keeps its left context, the transformer its ring (positions in
 * groups of stride steps, a frame's), the downsample its replicate state:
 * one call over an utterance is the package's frame-by-frame streaming
 * encode. */
static int encode_graph(Module *m, const Checkpoint *c, const BuildOpts *o, const MimiCfg *d, int frames,
                        int max_ctx, sc_error *err) {
  if (d->q_in != d->dim)
    return sc_fail(err, SC_EINPUT, "%s: the quantizer takes %lld channels (input_dimension) but the encoder gives "
                   "%lld (the seanet dimension)", c->config_path, (long long)d->q_in, (long long)d->dim);
  Mb b = {m, c, ir_graph_new(m, "encode", SC_IN_EMBEDS, frames), o->band, err};
  b.g->pos_mul = (int)d->stride;
  int h = ir_input_samples(b.g, d->frame_size);
  h = seanet_encoder(&b, d, h);
  if (h < 0) return err->code ? err->code : SC_EINPUT;
  h = transformer(&b, d, h, max_ctx, frames * (int)d->stride, "encoder_transformer.", "enc_tf.");
  if (h < 0) return err->code ? err->code : SC_EINPUT;
  if (d->stride > 1) /* ConvDownsample1d: learnt, groups 1, no bias, pad_mode replicate */
    h = conv_strided(&b, h, "downsample.conv", "downsample", d->dim, d->dim, (int)(2 * d->stride), (int)d->stride,
                     1, 0);
  if (h < 0) return err->code ? err->code : SC_EINPUT;
  h = rvq_encode(&b, d, h);
  if (h < 0) return err->code ? err->code : SC_EINPUT;
  ir_output(b.g, h, OUT_LOGITS);
  return SC_OK;
}

int fe_mimi(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  MimiCfg d;
  if (read_config(c, &d, err)) return err->code;
  /* frames one stream may hold (positions of the rotary table, x stride) */
  const int max_ctx = o->max_context ? o->max_context : 8000;
  if ((int64_t)max_ctx * d.stride > FE_DIM_MAX)
    return sc_fail(err, SC_EUSAGE, "--max-context %d: at most %lld frames", max_ctx,
                   (long long)(FE_DIM_MAX / d.stride));
  /* scratch grows by a few MB a frame at the published shapes */
  const int frames = fe_chunk(o, 4, max_ctx);
  m->vocab = (int)d.bins;
  m->hidden = (int)d.tr.dim;
  m->n_layers = (int)d.tr.layers;
  m->max_context = max_ctx;
  Mb b = {m, c, ir_graph_new(m, "audio", SC_IN_IDS, frames), o->band, err};
  b.g->pos_mul = (int)d.stride;
  int h = rvq(&b, &d);
  if (h < 0) return err->code ? err->code : SC_EINPUT;
  if (d.stride > 1) { /* ConvTrUpsample1d: learnt, channel-wise (groups = dimension), no bias */
    int w = fe_conv_weight(m, c, "upsample.w", "upsample.convtr.convtr.convtr.weight", FE_CONVT_DW, d.dim, d.dim,
                           (int)(2 * d.stride), o->band, err);
    if (w < 0) return err->code;
    int zero = fe_zero_vec(m, "upsample.b", d.dim);
    h = fe_causal_conv_t(m, b.g, h, w, zero, d.dim, (int)(2 * d.stride), (int)d.stride, "upsample");
  }
  h = transformer(&b, &d, h, max_ctx, frames * (int)d.stride, "decoder_transformer.", "dec_tf.");
  if (h < 0) return err->code ? err->code : SC_EINPUT;
  h = seanet_decoder(&b, &d, h);
  if (h < 0) return err->code ? err->code : SC_EINPUT;
  ir_output(b.g, h, OUT_LOGITS);
  return encode_graph(m, c, o, &d, frames, max_ctx, err);
}
