/*
 * fe_codec.c — the Qwen3-TTS-Tokenizer-12Hz decoder (model_type
 * qwen3_tts_tokenizer_12hz: a Qwen3-TTS checkpoint's speech_tokenizer/),
 * from qwen_tts/core/tokenizer_12hz/modeling_qwen3_tts_tokenizer_v2.py
 * (Qwen3TTSTokenizerV2Decoder.forward), channels in columns:
 *
 *   h = P1·cb0[c0] + P2·(cb1[c1] + ... + cb15[c15])   split RVQ decode
 *   h = conv3(h)                                       pre_conv
 *   h = transformer(h)      Qwen3 block: sliding window, LayerScale, biases
 *   h = convnext(convT_f(h))                           per upsampling ratio f
 *   h = conv7(h), then per upsample rate r:
 *       h = convT_2r/r(snake(h)); h = unit_d(h) for d = 1, 3, 9
 *       unit_d(h) = h + conv1(snake(conv7_d(snake(h))))
 *   pcm = clamp(conv7(snake(h)), -1, 1)
 *
 * A causal conv is IM2COL (which keeps the last (k-1)*d input rows in
 * session state) and a LINEAR over its rows; a causal transposed conv is a
 * LINEAR to k*Cout columns and OVERLAP_ADD (which carries the sums past the
 * call's end in state); the attention keeps a ring of sliding_window + T
 * positions.  So calls over consecutive frames give exactly what one call
 * over all of them gives: the whole utterance and the stream are the same
 * computation.  Entry point "audio": up to --prefill-chunk (8) frames of
 * num_quantizers codes in, frames x decode_upsample_rate samples out.
 *
 * The same property lets the CPU run the late, wide-in-time blocks a
 * frame at a time within a call (IrParams.tile, ir_graph_tile): from the
 * first block whose output for a whole call passes CODEC_TILE_BYTES (else
 * the last block), so their activations stay in L2 instead of streaming
 * through memory between every two ops.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend.h"
#include "sc_abi.h"

#define CODEC_MAX_STAGES 8
/* a block's output for a whole call above this: run it a frame at a time */
#define CODEC_TILE_BYTES (2 << 20)
#define CODEC_RATE_MAX 64

typedef struct CodecDims {
  int64_t nq, bins, cb_dim, latent, dec_dim, max_pos;
  int ratios[CODEC_MAX_STAGES], n_ratios;  /* upsampling_ratios */
  int rates[CODEC_MAX_STAGES], n_rates;    /* upsample_rates */
  int64_t upsample;                        /* product of both */
  Qwen3Dims tf;                            /* pre_transformer */
} CodecDims;

/* A list of small positive ints (upsample_rates, upsampling_ratios). */
static int read_rates(const cJSON *obj, const char *where, const char *key, const int *dflt, int n_dflt,
                      int *out, int *n, sc_error *err) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!a || cJSON_IsNull(a)) {
    memcpy(out, dflt, (size_t)n_dflt * sizeof *out);
    *n = n_dflt;
    return SC_OK;
  }
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > CODEC_MAX_STAGES)
    return sc_fail(err, SC_EINPUT, "%s: %s must be a list of 1 to %d integers", where, key, CODEC_MAX_STAGES);
  *n = 0;
  for (const cJSON *e = a->child; e; e = e->next) {
    int64_t v;
    if (cfg_int_val(e, where, key, &v, err)) return err->code;
    if (v < 1 || v > CODEC_RATE_MAX)
      return sc_fail(err, SC_EINPUT, "%s: %s[%d] is %lld, expected 1..%d", where, key, *n, (long long)v,
                     CODEC_RATE_MAX);
    out[(*n)++] = (int)v;
  }
  return SC_OK;
}

/* decoder_config with the official defaults (Qwen3TTSTokenizerV2DecoderConfig):
 * a key the file lacks means what the official class means by it. */
static int read_config(const Checkpoint *c, CodecDims *d, int64_t *sample_rate, sc_error *err) {
  char where[300];
  const cJSON *dc = cJSON_GetObjectItemCaseSensitive(c->config, "decoder_config");
  if (!cJSON_IsObject(dc))
    return sc_fail(err, SC_EINPUT, "%s: decoder_config is missing or not an object (a Qwen3-TTS "
                   "tokenizer's config.json has one)", c->config_path);
  snprintf(where, sizeof where, "%s: decoder_config", c->config_path);
  Qwen3Dims *t = &d->tf;
  memset(d, 0, sizeof *d);
  double theta;
  int bias;
  const char *act = NULL;
  if (cfg_int_opt(dc, where, "num_quantizers", 16, &d->nq, err) ||
      cfg_int_opt(dc, where, "codebook_size", 2048, &d->bins, err) ||
      cfg_int_opt(dc, where, "codebook_dim", 512, &d->cb_dim, err) ||
      cfg_int_opt(dc, where, "latent_dim", 1024, &d->latent, err) ||
      cfg_int_opt(dc, where, "decoder_dim", 1536, &d->dec_dim, err) ||
      cfg_int_opt(dc, where, "max_position_embeddings", 8000, &d->max_pos, err) ||
      cfg_int_opt(dc, where, "hidden_size", 1024, &t->hidden, err) ||
      cfg_int_opt(dc, where, "num_hidden_layers", 8, &t->layers, err) ||
      cfg_int_opt(dc, where, "num_attention_heads", 16, &t->heads, err) ||
      cfg_int_opt(dc, where, "num_key_value_heads", 16, &t->kv_heads, err) ||
      cfg_int_opt(dc, where, "intermediate_size", 3072, &t->inter, err) ||
      cfg_num_opt(dc, where, "rms_norm_eps", 1e-5, &t->eps, err) ||
      cfg_bool_opt(dc, where, "attention_bias", 0, &bias, err) ||
      cfg_str_opt(dc, where, "hidden_act", "silu", &act, err) ||
      cfg_int_opt(c->config, c->config_path, "output_sample_rate", 24000, sample_rate, err))
    return err->code;
  int64_t window;
  if (cfg_int_opt(dc, where, "sliding_window", 72, &window, err)) return err->code;
  static const int ratios[] = {2, 2}, rates[] = {8, 5, 4, 3};
  if (read_rates(dc, where, "upsampling_ratios", ratios, 2, d->ratios, &d->n_ratios, err) ||
      read_rates(dc, where, "upsample_rates", rates, 4, d->rates, &d->n_rates, err))
    return err->code;
  t->attn_bias = bias;
  t->layer_scale = 1;
  t->qk_norm = 0;
  const cJSON *hd = cJSON_GetObjectItemCaseSensitive(dc, "head_dim");
  if (hd && !cJSON_IsNull(hd)) {
    if (cfg_int_req(dc, where, "head_dim", &t->head_dim, err)) return err->code;
  } else {
    t->head_dim = t->heads > 0 ? t->hidden / t->heads : 0;
  }
  /* rope_theta (10000), rope_scaling (plain RoPE only, by name), a
   * partial_rotary_factor, as the talker's (qwen-tts: transformers 4.x) */
  double prf;
  const char *prf_key;
  if (fe_rope_params_4x(dc, where, 1.0, &theta, &prf, &prf_key, err)) return err->code;
  if (prf != 1)
    return sc_fail(err, SC_EINPUT, "%s: %s %g is not supported (RoPE over the whole head only: 1.0)", where,
                   prf_key, prf);
  t->theta = theta;
  if (strcmp(act, "silu") && strcmp(act, "swish")) /* transformers' swish is nn.SiLU */
    return sc_fail(err, SC_EINPUT, "%s: hidden_act '%s' is not supported (expected silu)", where, act);

  /* shapes: positive, far from overflow, and what the official modules
   * can build (SplitResidualVectorQuantizer asserts n_q > 1) */
  const int64_t dims[] = {d->nq, d->bins, d->cb_dim, d->latent, d->dec_dim, t->hidden,
                          t->heads, t->kv_heads, t->inter, t->head_dim};
  for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
    if (dims[i] < 1 || dims[i] > FE_DIM_MAX)
      return sc_fail(err, SC_EINPUT, "%s: num_quantizers, codebook_size, codebook_dim, latent_dim, "
                     "decoder_dim, hidden_size, num_attention_heads, num_key_value_heads, intermediate_size "
                     "and head_dim must be in 1..%d", where, FE_DIM_MAX);
  if (d->nq < 2 || d->nq > 64)
    return sc_fail(err, SC_EINPUT, "%s: num_quantizers %lld: expected 2..64 (one semantic codebook and "
                   "at least one acoustic)", where, (long long)d->nq);
  if (d->cb_dim < 2)
    return sc_fail(err, SC_EINPUT, "%s: codebook_dim %lld: the codebooks have codebook_dim / 2 "
                   "columns, so it must be at least 2", where, (long long)d->cb_dim);
  if (t->layers < 1 || t->layers > FE_LAYERS_MAX)
    return sc_fail(err, SC_EINPUT, "%s: num_hidden_layers %lld: expected 1..%d", where, (long long)t->layers,
                   FE_LAYERS_MAX);
  if (t->heads % t->kv_heads)
    return sc_fail(err, SC_EINPUT, "%s: num_attention_heads (%lld) must be a multiple of "
                   "num_key_value_heads (%lld)", where, (long long)t->heads, (long long)t->kv_heads);
  if (t->head_dim < 2 || t->head_dim % 2 || t->head_dim > FE_HEAD_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: head_dim %lld must be even, positive and at most %d", where,
                   (long long)t->head_dim, FE_HEAD_DIM_MAX);
  if (!((float)t->eps > 0) || isinf((float)t->eps) || !(theta > 0))
    return sc_fail(err, SC_EINPUT, "%s: rms_norm_eps and rope_theta must be positive and finite", where);
  if (window < 1 || window > FE_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: sliding_window %lld: expected 1..%d", where, (long long)window,
                   FE_DIM_MAX);
  t->window = (int)window;
  if (d->max_pos < 1 || d->max_pos > FE_DIM_MAX)
    return sc_fail(err, SC_EINPUT, "%s: max_position_embeddings %lld: expected 1..%d", where,
                   (long long)d->max_pos, FE_DIM_MAX);
  /* channels halve once per decoder block, as the official class floors */
  if (d->dec_dim >> d->n_rates < 1)
    return sc_fail(err, SC_EINPUT, "%s: decoder_dim %lld halves %d times (once per upsample rate) to "
                   "nothing", where, (long long)d->dec_dim, d->n_rates);
  d->upsample = 1;
  for (int i = 0; i < d->n_ratios; i++) d->upsample *= d->ratios[i];
  for (int i = 0; i < d->n_rates; i++) d->upsample *= d->rates[i];
  if (d->upsample > 1 << 16)
    return sc_fail(err, SC_EINPUT, "%s: the upsampling factors multiply to %lld samples per frame "
                   "(at most %d)", where, (long long)d->upsample, 1 << 16);
  /* absent: the official class's 1920 (what the runtime reads too); the
   * official decode trims its output to frames x decode_upsample_rate,
   * speechc gives whole frames: they must agree */
  const cJSON *dur = cJSON_GetObjectItemCaseSensitive(c->config, "decode_upsample_rate");
  int64_t declared;
  if (cfg_int_opt(c->config, c->config_path, "decode_upsample_rate", 1920, &declared, err)) return err->code;
  if (declared != d->upsample)
    return sc_fail(err, SC_EINPUT, "%s: decode_upsample_rate is %lld%s but decoder_config's "
                   "upsampling_ratios and upsample_rates multiply to %lld (the official decode cuts its output "
                   "to frames x the first; speechc decodes whole frames)", c->config_path,
                   (long long)declared, dur && !cJSON_IsNull(dur) ? "" : " (the default of an absent key)",
                   (long long)d->upsample);
  if (*sample_rate < 1 || *sample_rate > 1000000)
    return sc_fail(err, SC_EINPUT, "%s: output_sample_rate %lld: expected 1..1000000 Hz", c->config_path,
                   (long long)*sample_rate);
  return SC_OK;
}

/* ---- weights ------------------------------------------------------------- */

typedef struct Fe {
  Module *m;
  const Checkpoint *c;
  DType band;
  sc_error *err;
  int failed;
} Fe;

/* A per-channel vector (bias, norm weight, snake parameter, scale): f32. */
static int vec(Fe *f, const char *name, const char *tensor, int64_t n) {
  if (f->failed) return -1;
  int w = fe_weight(f->m, f->c, name, tensor, 0, n, DT_F32, f->err);
  if (w < 0) f->failed = 1;
  return w;
}

/* A conv weight of one of the kinds in frontend.h (FE_CONV, ...). */
enum { CONV = FE_CONV, CONVT = FE_CONVT, DEPTHWISE = FE_DEPTHWISE };
static int conv_weight(Fe *f, const char *name, const char *tensor, int kind, int64_t cout, int64_t cin,
                       int k) {
  if (f->failed) return -1;
  int w = fe_conv_weight(f->m, f->c, name, tensor, kind, cout, cin, k, f->band, f->err);
  if (w < 0) f->failed = 1;
  return w;
}

int fe_conv_weight(Module *m, const Checkpoint *c, const char *name, const char *tensor, int kind, int64_t cout,
                   int64_t cin, int k, DType band, sc_error *err) {
  const int t_ = kind == FE_CONVT || kind == FE_CONVT_DW, dw = kind == FE_DEPTHWISE || kind == FE_CONVT_DW;
  /* PyTorch: Conv1d [cout, cin/groups, k], ConvTranspose1d [cin, cout/groups, k] */
  const int64_t shape[3] = {t_ ? cin : cout, dw ? 1 : t_ ? cout : cin, k};
  const StTensor *t = ckpt_tensor(c, tensor, 3, shape, err);
  if (!t) return -1;
  const int64_t rows = t_ ? k * cout : cout;
  const int64_t cols = kind == FE_DEPTHWISE ? k : t_ ? cin : k * cin;
  int w = ir_weight_add(m, name, kind == FE_DEPTHWISE ? DT_F32 : band, 1, rows, cols);
  IrWeight *wt = &m->weights[w];
  wt->src[0].tensor = t;
  wt->src[0].rows = rows;
  wt->n_src = 1;
  wt->gen = kind == FE_DEPTHWISE || (kind == FE_CONV && k == 1) ? WGEN_NONE
            : kind == FE_CONV                                    ? WGEN_CONV
            : kind == FE_CONVT                                   ? WGEN_CONVT
                                                                 : WGEN_CONVT_DW;
  wt->gen_k = k;
  snprintf(wt->source, sizeof wt->source, "%s", tensor);
  return w;
}

int fe_zero_vec(Module *m, const char *name, int64_t n) {
  int w = ir_weight_add(m, name, DT_F32, 1, 1, n);
  m->weights[w].gen = WGEN_ZERO;
  snprintf(m->weights[w].source, sizeof m->weights[w].source, "computed: zeros (no bias)");
  return w;
}

/* Codebook table: embedding_sum / clamp(cluster_usage, 1e-5), [bins, dim]. */
static int codebook(Fe *f, const char *name, const char *prefix, int64_t bins, int64_t dim) {
  if (f->failed) return -1;
  char es[200], cu[200];
  snprintf(es, sizeof es, "%s._codebook.embedding_sum", prefix);
  snprintf(cu, sizeof cu, "%s._codebook.cluster_usage", prefix);
  const int64_t shape[2] = {bins, dim};
  const StTensor *a = ckpt_tensor(f->c, es, 2, shape, f->err);
  const StTensor *b = a ? ckpt_tensor(f->c, cu, 1, &bins, f->err) : NULL;
  if (!b) {
    f->failed = 1;
    return -1;
  }
  int w = ir_weight_add(f->m, name, DT_F32, 1, bins, dim);
  IrWeight *wt = &f->m->weights[w];
  wt->src[0] = (IrWeightSrc){.tensor = a, .rows = bins};
  wt->src[1] = (IrWeightSrc){.tensor = b, .rows = 1};
  wt->n_src = 2;
  wt->gen = WGEN_CODEBOOK;
  snprintf(wt->source, sizeof wt->source, "%.70s / clamp(%.70s)", es, cu);
  return w;
}

/* ---- the graph ------------------------------------------------------------ */

typedef struct Gb {
  Fe *f;
  Graph *g;
  char name[IR_NAME];
} Gb;

#define W(idx) ir_weight(b->f->m, b->g, (idx))

/* a + b into buf, cut to fit (IR names are short; no printf: the cut is
 * deliberate and needs no format-truncation warning) */
static const char *join(char *buf, size_t size, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > size - 1) la = size - 1;
  if (lb > size - 1 - la) lb = size - 1 - la;
  memmove(buf, a, la);
  memcpy(buf + la, b, lb);
  buf[la + lb] = 0;
  return buf;
}

static const char *nm(Gb *b, const char *name, const char *suffix) {
  return join(b->name, sizeof b->name, name, suffix);
}

/* The weight and bias of a CausalConvNet / CausalTransConvNet module
 * (PREFIX.conv.weight, PREFIX.conv.bias): 0, or -1 with the error set. */
static int conv_params(Gb *b, const char *name, const char *tensor_prefix, int kind, int64_t cout, int64_t cin,
                       int k, int *w, int *bias) {
  char t[200];
  snprintf(t, sizeof t, "%s.conv.weight", tensor_prefix);
  *w = conv_weight(b->f, nm(b, name, ".w"), t, kind, cout, cin, k);
  snprintf(t, sizeof t, "%s.conv.bias", tensor_prefix);
  *bias = vec(b->f, nm(b, name, ".b"), t, cout);
  return b->f->failed ? -1 : 0;
}

/* Causal Conv1d, stride 1: IM2COL keeps (k-1)*dil rows of state. */
static int conv(Gb *b, int x, const char *name, const char *tensor_prefix, int64_t cout, int64_t cin, int k,
                int dil) {
  int w, bias;
  if (conv_params(b, name, tensor_prefix, CONV, cout, cin, k, &w, &bias)) return -1;
  return fe_causal_conv(b->f->m, b->g, x, w, bias, cin, k, dil, name);
}

int fe_causal_conv(Module *m, Graph *g, int x, int w, int bias, int64_t cin, int k, int dil, const char *name) {
  if (k > 1) {
    char n[IR_NAME], sn[IR_NAME];
    int st = ir_state_add(m, join(sn, sizeof sn, name, ".context"), (int64_t)(k - 1) * dil, cin);
    x = ir_im2col(g, x, ir_state(m, g, st), k, dil, join(n, sizeof n, name, ".cols"));
  }
  return ir_linear(g, x, ir_weight(m, g, w), bias >= 0 ? ir_weight(m, g, bias) : -1, name);
}

/* Causal ConvTranspose1d (kernel k >= stride s, right trim k - s), as its
 * s phases: output rows i*s + m, m < s, are a causal Conv1d of x with
 * n = ceil(k/s) taps (WGEN_CONVT_POLY), whose [T, s*Cout] rows RESHAPE
 * reads as [T*s, Cout].  The same sums as LINEAR + OVERLAP_ADD, without
 * the [T, k*Cout] taps in between or a pass to add them up; its state is
 * the last n-1 input rows instead of the carried sums. */
static int conv_t(Gb *b, int x, const char *name, const char *tensor_prefix, int64_t cout, int64_t cin, int k,
                  int s) {
  Fe *f = b->f;
  char t[200];
  snprintf(t, sizeof t, "%s.conv.weight", tensor_prefix);
  const int64_t shape[3] = {cin, cout, k}, n = (k + s - 1) / s;
  const StTensor *tw = f->failed ? NULL : ckpt_tensor(f->c, t, 3, shape, f->err);
  snprintf(t, sizeof t, "%s.conv.bias", tensor_prefix);
  const StTensor *tb = tw ? ckpt_tensor(f->c, t, 1, &shape[1], f->err) : NULL;
  if (!tb) {
    f->failed = 1;
    return -1;
  }
  int w = ir_weight_add(f->m, nm(b, name, ".w"), f->band, 1, s * cout, n * cin);
  IrWeight *wt = &f->m->weights[w];
  wt->src[0] = (IrWeightSrc){.tensor = tw, .rows = s * cout};
  wt->n_src = 1;
  wt->gen = WGEN_CONVT_POLY;
  wt->gen_k = k;
  wt->gen_stride = s;
  snprintf(wt->source, sizeof wt->source, "%.120s as %d phases", tw->name, s);
  int bias = ir_weight_add(f->m, nm(b, name, ".b"), DT_F32, 1, 1, s * cout);
  wt = &f->m->weights[bias];
  wt->src[0] = (IrWeightSrc){.tensor = tb, .rows = 1};
  wt->n_src = 1;
  wt->gen = WGEN_REPEAT;
  snprintf(wt->source, sizeof wt->source, "%.120s x %d", tb->name, s);
  char pn[IR_NAME];
  const int y = fe_causal_conv(f->m, b->g, x, w, bias, cin, (int)n, 1, join(pn, sizeof pn, name, ".phases"));
  return ir_reshape(b->g, y, s, name);
}

int fe_causal_conv_t(Module *m, Graph *g, int x, int w, int bias, int64_t cout, int k, int s, const char *name) {
  char n[IR_NAME], sn[IR_NAME];
  int z = ir_linear(g, x, ir_weight(m, g, w), -1, join(n, sizeof n, name, ".taps"));
  int st = k > s ? ir_state(m, g, ir_state_add(m, join(sn, sizeof sn, name, ".carry"), k - s, cout)) : -1;
  return ir_overlap_add(g, z, ir_weight(m, g, bias), st, k, s, name);
}

static int snake(Gb *b, int x, const char *name, const char *tensor_prefix, int64_t ch) {
  char t[200];
  snprintf(t, sizeof t, "%s.alpha", tensor_prefix);
  int alpha = vec(b->f, nm(b, name, ".alpha"), t, ch);
  snprintf(t, sizeof t, "%s.beta", tensor_prefix);
  int beta = vec(b->f, nm(b, name, ".beta"), t, ch);
  if (b->f->failed) return -1;
  return ir_snake(b->g, x, W(alpha), W(beta), name);
}

/* ConvNeXt block: x + gamma * pw2(gelu(pw1(layernorm(dwconv7(x))))). */
static int convnext(Gb *b, int x, const char *name, const char *tp, int64_t dim) {
  char t[200], n[IR_NAME];
  Fe *f = b->f;
  snprintf(t, sizeof t, "%s.dwconv.conv.weight", tp);
  int dw = conv_weight(f, nm(b, name, ".dw"), t, DEPTHWISE, dim, 1, 7);
  snprintf(t, sizeof t, "%s.dwconv.conv.bias", tp);
  int dwb = vec(f, nm(b, name, ".dw_b"), t, dim);
  snprintf(t, sizeof t, "%s.norm.weight", tp);
  int lnw = vec(f, nm(b, name, ".ln_w"), t, dim);
  snprintf(t, sizeof t, "%s.norm.bias", tp);
  int lnb = vec(f, nm(b, name, ".ln_b"), t, dim);
  snprintf(t, sizeof t, "%s.pwconv1.weight", tp);
  int w1 = f->failed ? -1 : fe_weight(f->m, f->c, nm(b, name, ".pw1"), t, 4 * dim, dim, f->band, f->err);
  if (w1 < 0) f->failed = 1;
  snprintf(t, sizeof t, "%s.pwconv1.bias", tp);
  int b1 = vec(f, nm(b, name, ".pw1_b"), t, 4 * dim);
  snprintf(t, sizeof t, "%s.pwconv2.weight", tp);
  int w2 = f->failed ? -1 : fe_weight(f->m, f->c, nm(b, name, ".pw2"), t, dim, 4 * dim, f->band, f->err);
  if (w2 < 0) f->failed = 1;
  snprintf(t, sizeof t, "%s.pwconv2.bias", tp);
  int b2 = vec(f, nm(b, name, ".pw2_b"), t, dim);
  snprintf(t, sizeof t, "%s.gamma", tp);
  int gamma = vec(f, nm(b, name, ".gamma"), t, dim);
  if (f->failed) return -1;
  int st = ir_state_add(f->m, nm(b, name, ".context"), 6, dim);
  join(n, sizeof n, name, ".dw");
  int h = ir_dwconv(b->g, x, W(dw), W(dwb), ir_state(f->m, b->g, st), 7, 1, n);
  join(n, sizeof n, name, ".ln");
  h = ir_layernorm(b->g, h, W(lnw), W(lnb), 1e-6f, n);
  join(n, sizeof n, name, ".pw1");
  h = ir_linear(b->g, h, W(w1), W(b1), n);
  join(n, sizeof n, name, ".gelu");
  h = ir_unary(b->g, OP_GELU, h, n);
  join(n, sizeof n, name, ".pw2");
  h = ir_linear(b->g, h, W(w2), W(b2), n);
  join(n, sizeof n, name, ".scaled");
  h = ir_binary(b->g, OP_MUL, h, W(gamma), n);
  join(n, sizeof n, name, ".res");
  return ir_binary(b->g, OP_ADD, x, h, n);
}

/* Split RVQ decode: P1·cb0[c0] + P2·sum_i cb_i[c_i]. */
static int rvq(Gb *b, const CodecDims *d) {
  Fe *f = b->f;
  const int64_t vq = d->cb_dim / 2;
  int ids = ir_input_codes(b->g, d->nq);
  int sum[2] = {-1, -1};
  char prefix[160], n[IR_NAME];
  for (int i = 0; i < d->nq; i++) {
    const int first = i == 0;
    snprintf(prefix, sizeof prefix, "decoder.quantizer.%s.vq.layers.%d", first ? "rvq_first" : "rvq_rest",
             first ? 0 : i - 1);
    snprintf(n, sizeof n, "codebook%d", i);
    int tab = codebook(f, n, prefix, d->bins, vq);
    if (tab < 0) return -1;
    snprintf(n, sizeof n, "codes%d", i);
    int col = ir_slice(b->g, ids, i, 1, n);
    snprintf(n, sizeof n, "quantized%d", i);
    int e = ir_embed(b->g, W(tab), col, n);
    snprintf(n, sizeof n, "rvq_sum%d", i);
    sum[!first] = sum[!first] < 0 ? e : ir_binary(b->g, OP_ADD, sum[!first], e, n);
  }
  int out = -1;
  for (int k = 0; k < 2; k++) {
    snprintf(prefix, sizeof prefix, "decoder.quantizer.%s.output_proj.weight", k ? "rvq_rest" : "rvq_first");
    snprintf(n, sizeof n, "rvq_%s_proj", k ? "rest" : "first");
    int p = conv_weight(f, n, prefix, CONV, d->cb_dim, vq, 1);
    if (p < 0) return -1;
    int y = ir_linear(b->g, sum[k], W(p), -1, n);
    out = out < 0 ? y : ir_binary(b->g, OP_ADD, out, y, "rvq");
  }
  return out;
}

/* The decoder block from which a call runs a frame at a time. */
static int tile_block(const CodecDims *d, int frames) {
  int64_t rows = d->upsample; /* rows per frame after the last block */
  for (int i = 0; i < d->n_rates; i++) rows /= d->rates[i];
  for (int i = 0; i < d->n_rates; i++) {
    rows *= d->rates[i];
    if (rows * (d->dec_dim >> (i + 1)) * 4 * frames > CODEC_TILE_BYTES) return i;
  }
  return d->n_rates - 1;
}

static int build_graph(Gb *b, const CodecDims *d, const Qwen3Layer *lw, int rope, int tf_in, int tf_in_b,
                       int tf_norm, int tf_out, int tf_out_b) {
  Fe *f = b->f;
  const int tile_from = tile_block(d, b->g->max_tokens);
  char tp[160], n[IR_NAME];
  int h = rvq(b, d);
  if (h < 0) return -1;
  h = conv(b, h, "pre_conv", "decoder.pre_conv", d->latent, d->cb_dim, 3, 1);
  if (h < 0) return -1;
  const Qwen3Dims *t = &d->tf;
  h = ir_linear(b->g, h, W(tf_in), W(tf_in_b), "tf.input_proj");
  const int rope_w = W(rope);
  for (int L = 0; L < t->layers; L++) h = fe_qwen3_layer(f->m, b->g, h, t, &lw[L], rope_w, "tf.", L);
  h = ir_rmsnorm(b->g, h, W(tf_norm), (int)t->hidden, NORM_PLAIN, (float)t->eps, "tf.norm");
  h = ir_linear(b->g, h, W(tf_out), W(tf_out_b), "tf.output_proj");
  for (int i = 0; i < d->n_ratios; i++) {
    snprintf(tp, sizeof tp, "decoder.upsample.%d.0", i);
    snprintf(n, sizeof n, "up%d.convt", i);
    h = conv_t(b, h, n, tp, d->latent, d->latent, d->ratios[i], d->ratios[i]);
    if (h < 0) return -1;
    snprintf(tp, sizeof tp, "decoder.upsample.%d.1", i);
    snprintf(n, sizeof n, "up%d.convnext", i);
    h = convnext(b, h, n, tp, d->latent);
    if (h < 0) return -1;
  }
  h = conv(b, h, "dec0", "decoder.decoder.0", d->dec_dim, d->latent, 7, 1);
  if (h < 0) return -1;
  int64_t ch = d->dec_dim;
  for (int i = 0; i < d->n_rates; i++) {
    const int64_t in = d->dec_dim >> i, out = d->dec_dim >> (i + 1);
    const int r = d->rates[i];
    char bp[120];
    snprintf(bp, sizeof bp, "decoder.decoder.%d.block", i + 1);
    snprintf(tp, sizeof tp, "%s.0", bp);
    snprintf(n, sizeof n, "dec%d.snake", i + 1);
    h = snake(b, h, n, tp, in);
    if (h >= 0 && i == tile_from) b->g->nodes[h].p.tile = 1;
    snprintf(tp, sizeof tp, "%s.1", bp);
    snprintf(n, sizeof n, "dec%d.convt", i + 1);
    if (h >= 0) h = conv_t(b, h, n, tp, out, in, 2 * r, r);
    static const int dil[3] = {1, 3, 9};
    for (int u = 0; u < 3 && h >= 0; u++) {
      char un[IR_NAME];
      snprintf(un, sizeof un, "dec%d.unit%d", i + 1, u);
      snprintf(tp, sizeof tp, "%s.%d.act1", bp, u + 2);
      join(n, sizeof n, un, ".act1");
      int y = snake(b, h, n, tp, out);
      snprintf(tp, sizeof tp, "%s.%d.conv1", bp, u + 2);
      join(n, sizeof n, un, ".conv1");
      if (y >= 0) y = conv(b, y, n, tp, out, out, 7, dil[u]);
      snprintf(tp, sizeof tp, "%s.%d.act2", bp, u + 2);
      join(n, sizeof n, un, ".act2");
      if (y >= 0) y = snake(b, y, n, tp, out);
      snprintf(tp, sizeof tp, "%s.%d.conv2", bp, u + 2);
      join(n, sizeof n, un, ".conv2");
      if (y >= 0) y = conv(b, y, n, tp, out, out, 1, 1);
      join(n, sizeof n, un, ".res");
      h = y < 0 ? -1 : ir_binary(b->g, OP_ADD, h, y, n);
    }
    if (h < 0) return -1;
    ch = out;
  }
  snprintf(tp, sizeof tp, "decoder.decoder.%d", d->n_rates + 1);
  h = snake(b, h, "final.snake", tp, ch);
  snprintf(tp, sizeof tp, "decoder.decoder.%d", d->n_rates + 2);
  if (h >= 0) h = conv(b, h, "final.conv", tp, 1, ch, 7, 1);
  if (h < 0) return -1;
  h = ir_clamp(b->g, h, -1.0f, 1.0f, "pcm");
  ir_output(b->g, h, OUT_LOGITS);
  return SC_OK;
}

int fe_codec(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  CodecDims d;
  int64_t sample_rate;
  if (read_config(c, &d, &sample_rate, err)) return err->code;
  const Qwen3Dims *t = &d.tf;
  /* positions run on through a stream: the rotary table covers the
   * official max_position_embeddings unless --max-context says otherwise */
  const int max_ctx = o->max_context ? o->max_context : (int)d.max_pos;
  /* scratch grows by ~7.5 MB per frame at the published shapes: 8 frames
   * (0.64 s of audio) keep it near 60 MB and the GEMMs long */
  const int frames = fe_chunk(o, 8, max_ctx);
  m->vocab = (int)d.bins;
  m->hidden = (int)t->hidden;
  m->n_layers = (int)t->layers;
  m->max_context = max_ctx;

  Fe f = {m, c, o->band, err, 0};
  Qwen3Layer lw[64];
  if (t->layers > 64)
    return sc_fail(err, SC_EINPUT, "%s: decoder_config num_hidden_layers %lld: at most 64", c->config_path,
                   (long long)t->layers);
  /* the attention ring: the window, plus the call's frames written first */
  const int ring = t->window + frames;
  for (int L = 0; L < t->layers; L++)
    if (fe_qwen3_layer_weights(m, c, t, "decoder.pre_transformer.layers.", "tf.", L, ring, o->band, &lw[L], err))
      return err->code;
  int tf_in = fe_weight(m, c, "tf.input_proj", "decoder.pre_transformer.input_proj.weight", t->hidden, d.latent,
                        o->band, err);
  if (tf_in < 0) return err->code;
  int tf_in_b = vec(&f, "tf.input_proj_b", "decoder.pre_transformer.input_proj.bias", t->hidden);
  int tf_norm = vec(&f, "tf.norm", "decoder.pre_transformer.norm.weight", t->hidden);
  if (f.failed) return err->code;
  int tf_out = fe_weight(m, c, "tf.output_proj", "decoder.pre_transformer.output_proj.weight", d.latent,
                         t->hidden, o->band, err);
  if (tf_out < 0) return err->code;
  int tf_out_b = vec(&f, "tf.output_proj_b", "decoder.pre_transformer.output_proj.bias", d.latent);
  if (f.failed) return err->code;
  int rope = fe_rope_table(m, max_ctx, (int)t->head_dim, t->theta);
  Gb b = {&f, ir_graph_new(m, "audio", SC_IN_IDS, frames), {0}};
  if (build_graph(&b, &d, lw, rope, tf_in, tf_in_b, tf_norm, tf_out, tf_out_b)) return err->code;
  return SC_OK; /* the sample rate travels in config_json, which the runtime reads */
}
