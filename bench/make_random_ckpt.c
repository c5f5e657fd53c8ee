/*
 * make_random_ckpt.c — the C twin of bench/make_random_ckpt.py, for
 * machines without Python/numpy (the GPU run, tests/gpu/run.sh): a random
 * checkpoint with the exact tensor names and shapes of a published model,
 * for speed measurements only (the weights are noise: normal(0, 0.02) for
 * matrices, 1 + normal(0, 0.1) for norm vectors, normal(0, 0.1) for biases;
 * "normal" is a sum of four uniforms, fast and close enough).
 *
 *   make_random_ckpt KIND OUT_DIR [--dtype bf16|f32] [--layers N] [--with-codec]
 *
 * KIND: qwen3-0.6b, qwen3-tts-0.6b, qwen3-wide-tiny, qwen35-moe-wide-tiny,
 * codec-12hz (the 12 Hz
 * tokenizer's decoder at its published shapes, decoder tensors only: what
 * speechc reads of a speech_tokenizer/ directory) or codec-tiny (the same
 * layout, a few MB, with the published 2048-entry codebooks so that any
 * talker code decodes).  --with-codec also writes OUT_DIR/speech_tokenizer/
 * (codec-12hz for qwen3-tts-0.6b; codec-tiny for any other kind), always f32.
 *
 * qwen3-wide-tiny: a 2-layer Qwen3 of a few MB whose matrices are wider
 * than the CUDA prompt GEMM's column step (256) without being multiples of
 * it (hidden 320, intermediate 544), for test_cuda.
 * qwen35-moe-wide-tiny: a 2-layer Qwen3.5-MoE text model (one Gated
 * DeltaNet layer, one full-attention layer) of a few MB with the published
 * 35B-A3B's head sizes (GDN heads of 128, 2 key / 4 value heads;
 * attention heads of 256, partial rotary 0.25) and top 8 of 8 experts, on
 * hidden 256, for test_cuda's kernels at the real head sizes.
 * --layers overrides num_hidden_layers (of the talker, for TTS).  The
 * config.json written is the Python tool's.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct Tensor {
  char name[96];
  int64_t rows, cols; /* rows 0: a vector of cols */
  int64_t k;          /* > 0: a conv weight [rows, cols, k] */
} Tensor;

typedef struct List {
  Tensor *t;
  int n, cap;
  int fan_in; /* matrices normal(0, 1/fan_in) (the codecs: activations stay O(1)), else 0.02 */
} List;

static void add(List *l, const char *name, int64_t rows, int64_t cols) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 256;
    l->t = realloc(l->t, (size_t)l->cap * sizeof *l->t);
    if (!l->t) exit(1);
  }
  Tensor *t = &l->t[l->n++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->rows = rows;
  t->cols = cols;
  t->k = 0;
}

static void add3(List *l, const char *name, int64_t d0, int64_t d1, int64_t k) {
  add(l, name, d0, d1);
  l->t[l->n - 1].k = k;
}

typedef struct Dims {
  int64_t H, I, hd, heads, kv, layers;
} Dims;

static void qwen3_layers(List *l, const char *prefix, const Dims *d) {
  const int64_t q = d->heads * d->hd, kv = d->kv * d->hd;
  char n[96];
  for (int L = 0; L < d->layers; L++) {
#define T(suffix, r, c) (snprintf(n, sizeof n, "%s%d.%s", prefix, L, suffix), add(l, n, r, c))
    T("input_layernorm.weight", 0, d->H);
    T("post_attention_layernorm.weight", 0, d->H);
    T("self_attn.q_proj.weight", q, d->H);
    T("self_attn.k_proj.weight", kv, d->H);
    T("self_attn.v_proj.weight", kv, d->H);
    T("self_attn.o_proj.weight", d->H, q);
    T("self_attn.q_norm.weight", 0, d->hd);
    T("self_attn.k_norm.weight", 0, d->hd);
    T("mlp.gate_proj.weight", d->I, d->H);
    T("mlp.up_proj.weight", d->I, d->H);
    T("mlp.down_proj.weight", d->H, d->I);
#undef T
  }
}

static const char cfg_lm[] =
    "{\"model_type\":\"qwen3\",\"hidden_size\":1024,\"num_hidden_layers\":28,\"num_a"
    "ttention_heads\":16,\"num_key_value_heads\":8,\"head_dim\":128,\"intermediat"
    "e_size\":3072,\"vocab_size\":151936,\"tie_word_embeddings\":true,\"rms_norm_"
    "eps\":1e-06,\"rope_theta\":1000000.0,\"max_position_embeddings\":40960}";
static const char cfg_wide[] =
    "{\"model_type\":\"qwen3\",\"hidden_size\":320,\"num_hidden_layers\":2,\"num_atte"
    "ntion_heads\":4,\"num_key_value_heads\":2,\"head_dim\":64,\"intermediate_size\""
    ":544,\"vocab_size\":512,\"tie_word_embeddings\":true,\"rms_norm_eps\":1e-06,\"ro"
    "pe_theta\":10000.0,\"max_position_embeddings\":4096}";
static const char cfg_gdn_wide[] =
    "{\"model_type\":\"qwen3_5_moe_text\",\"hidden_size\":256,\"num_hidden_layers\":2,\"num_a"
    "ttention_heads\":2,\"num_key_value_heads\":1,\"head_dim\":256,\"linear_num_key_heads\":2"
    ",\"linear_num_value_heads\":4,\"linear_key_head_dim\":128,\"linear_value_head_dim\":128,"
    "\"linear_conv_kernel_dim\":4,\"num_experts\":8,\"num_experts_per_tok\":8,\"moe_intermedia"
    "te_size\":64,\"shared_expert_intermediate_size\":64,\"vocab_size\":512,\"tie_word_embedd"
    "ings\":false,\"rms_norm_eps\":1e-06,\"max_position_embeddings\":4096,\"full_attention_in"
    "terval\":2,\"hidden_act\":\"silu\",\"rope_parameters\":{\"rope_type\":\"default\",\"rope"
    "_theta\":10000000.0,\"partial_rotary_factor\":0.25}}";

/* Qwen3.5-MoE text layers (bench/make_random_ckpt.py's gdn_moe_layers):
 * GDN layers with full attention every `interval`-th, fused experts. */
typedef struct GdnDims {
  int64_t H, hd, heads, kv, nk, nv, dk, dv, kconv, E, I, Is, layers, interval;
} GdnDims;

static void gdn_moe_layers(List *l, const char *prefix, const GdnDims *d) {
  const int64_t conv = 2 * d->nk * d->dk + d->nv * d->dv, q = d->heads * d->hd, kv = d->kv * d->hd;
  char n[96];
  for (int L = 0; L < d->layers; L++) {
#define T(suffix, r, c) (snprintf(n, sizeof n, "%s%d.%s", prefix, L, suffix), add(l, n, r, c))
    T("input_layernorm.weight", 0, d->H);
    T("post_attention_layernorm.weight", 0, d->H);
    if ((L + 1) % d->interval) {
      T("linear_attn.in_proj_qkv.weight", conv, d->H);
      T("linear_attn.in_proj_z.weight", d->nv * d->dv, d->H);
      T("linear_attn.in_proj_b.weight", d->nv, d->H);
      T("linear_attn.in_proj_a.weight", d->nv, d->H);
      snprintf(n, sizeof n, "%s%d.linear_attn.conv1d.weight", prefix, L), add3(l, n, conv, 1, d->kconv);
      T("linear_attn.A_log", 0, d->nv);
      T("linear_attn.dt_bias", 0, d->nv);
      T("linear_attn.norm.weight", 0, d->dv);
      T("linear_attn.out_proj.weight", d->H, d->nv * d->dv);
    } else {
      T("self_attn.q_proj.weight", 2 * q, d->H);
      T("self_attn.k_proj.weight", kv, d->H);
      T("self_attn.v_proj.weight", kv, d->H);
      T("self_attn.o_proj.weight", d->H, q);
      T("self_attn.q_norm.weight", 0, d->hd);
      T("self_attn.k_norm.weight", 0, d->hd);
    }
    T("mlp.gate.weight", d->E, d->H);
    snprintf(n, sizeof n, "%s%d.mlp.experts.gate_up_proj", prefix, L), add3(l, n, d->E, 2 * d->I, d->H);
    snprintf(n, sizeof n, "%s%d.mlp.experts.down_proj", prefix, L), add3(l, n, d->E, d->H, d->I);
    T("mlp.shared_expert.gate_proj.weight", d->Is, d->H);
    T("mlp.shared_expert.up_proj.weight", d->Is, d->H);
    T("mlp.shared_expert.down_proj.weight", d->H, d->Is);
    T("mlp.shared_expert_gate.weight", 1, d->H);
#undef T
  }
}

static const char cfg_tts[] =
    "{\"model_type\":\"qwen3_tts\",\"tts_model_type\":\"custom_voice\",\"tts_model_s"
    "ize\":\"0b6\",\"tts_pad_token_id\":151671,\"tts_bos_token_id\":151672,\"tts_eo"
    "s_token_id\":151673,\"im_start_token_id\":151644,\"im_end_token_id\":151645"
    ",\"assistant_token_id\":77091,\"talker_config\":{\"hidden_size\":1024,\"inter"
    "mediate_size\":3072,\"num_hidden_layers\":28,\"num_attention_heads\":16,\"nu"
    "m_key_value_heads\":8,\"head_dim\":128,\"vocab_size\":3072,\"text_vocab_size"
    "\":151936,\"text_hidden_size\":2048,\"num_code_groups\":16,\"rms_norm_eps\":1"
    "e-06,\"rope_theta\":1000000.0,\"max_position_embeddings\":32768,\"hidden_ac"
    "t\":\"silu\",\"codec_pad_id\":2148,\"codec_bos_id\":2149,\"codec_eos_token_id\""
    ":2150,\"codec_think_id\":2154,\"codec_nothink_id\":2155,\"codec_think_bos_i"
    "d\":2156,\"codec_think_eos_id\":2157,\"codec_language_id\":{\"english\":2050,"
    "\"chinese\":2055},\"spk_id\":{\"random_speaker\":3000},\"spk_is_dialect\":{\"ra"
    "ndom_speaker\":false},\"code_predictor_config\":{\"hidden_size\":1024,\"inte"
    "rmediate_size\":3072,\"num_hidden_layers\":5,\"num_attention_heads\":16,\"nu"
    "m_key_value_heads\":8,\"head_dim\":128,\"vocab_size\":2048,\"num_code_groups"
    "\":16,\"rms_norm_eps\":1e-06,\"rope_theta\":1000000.0,\"hidden_act\":\"silu\"}}"
    "}";

/* The 12 Hz codec decoder (qwen_tts tokenizer_12hz, Qwen3TTSTokenizerV2Decoder). */
typedef struct CodecDims {
  int64_t nq, bins, cb_dim, latent, dec_dim, hidden, heads, kv, hd, inter, layers;
  int ratios[2], rates[4];
} CodecDims;
static const CodecDims codec_pub = {16, 2048, 512, 1024, 1536, 512, 16, 16, 64, 1024, 8, {2, 2}, {8, 5, 4, 3}};
static const CodecDims codec_tiny = {16, 2048, 32, 32, 64, 32, 4, 2, 16, 64, 2, {2, 2}, {8, 5, 4, 3}};

static void codec_tensors(List *l, const CodecDims *c) {
  char n[96];
  const int64_t vq = c->cb_dim / 2;
  for (int q = 0; q < c->nq; q++) {
    const char *g = q ? "rvq_rest" : "rvq_first";
    snprintf(n, sizeof n, "decoder.quantizer.%s.vq.layers.%d._codebook.embedding_sum", g, q ? q - 1 : 0);
    add(l, n, c->bins, vq);
    snprintf(n, sizeof n, "decoder.quantizer.%s.vq.layers.%d._codebook.cluster_usage", g, q ? q - 1 : 0);
    add(l, n, 0, c->bins);
  }
  add3(l, "decoder.quantizer.rvq_first.output_proj.weight", c->cb_dim, vq, 1);
  add3(l, "decoder.quantizer.rvq_rest.output_proj.weight", c->cb_dim, vq, 1);
  add3(l, "decoder.pre_conv.conv.weight", c->latent, c->cb_dim, 3);
  add(l, "decoder.pre_conv.conv.bias", 0, c->latent);
  add(l, "decoder.pre_transformer.input_proj.weight", c->hidden, c->latent);
  add(l, "decoder.pre_transformer.input_proj.bias", 0, c->hidden);
  Dims d = {c->hidden, c->inter, c->hd, c->heads, c->kv, c->layers};
  qwen3_layers(l, "decoder.pre_transformer.layers.", &d);
  for (int L = 0; L < c->layers; L++) {
    snprintf(n, sizeof n, "decoder.pre_transformer.layers.%d.self_attn_layer_scale.scale", L);
    add(l, n, 0, c->hidden);
    snprintf(n, sizeof n, "decoder.pre_transformer.layers.%d.mlp_layer_scale.scale", L);
    add(l, n, 0, c->hidden);
  }
  add(l, "decoder.pre_transformer.norm.weight", 0, c->hidden);
  add(l, "decoder.pre_transformer.output_proj.weight", c->latent, c->hidden);
  add(l, "decoder.pre_transformer.output_proj.bias", 0, c->latent);
  const int64_t L = c->latent;
  for (int i = 0; i < 2; i++) {
#define U(fmt, ...) (snprintf(n, sizeof n, "decoder.upsample.%d." fmt, i), __VA_ARGS__)
    U("0.conv.weight", add3(l, n, L, L, c->ratios[i]));
    U("0.conv.bias", add(l, n, 0, L));
    U("1.dwconv.conv.weight", add3(l, n, L, 1, 7));
    U("1.dwconv.conv.bias", add(l, n, 0, L));
    U("1.norm.weight", add(l, n, 0, L));
    U("1.norm.bias", add(l, n, 0, L));
    U("1.pwconv1.weight", add(l, n, 4 * L, L));
    U("1.pwconv1.bias", add(l, n, 0, 4 * L));
    U("1.pwconv2.weight", add(l, n, L, 4 * L));
    U("1.pwconv2.bias", add(l, n, 0, L));
    U("1.gamma", add(l, n, 0, L));
#undef U
  }
  add3(l, "decoder.decoder.0.conv.weight", c->dec_dim, L, 7);
  add(l, "decoder.decoder.0.conv.bias", 0, c->dec_dim);
  int64_t out = c->dec_dim;
  for (int i = 0; i < 4; i++) {
    const int64_t in = c->dec_dim >> i;
    out = c->dec_dim >> (i + 1);
#define B(fmt, ...) (snprintf(n, sizeof n, "decoder.decoder.%d.block." fmt, i + 1), __VA_ARGS__)
    B("0.alpha", add(l, n, 0, in));
    B("0.beta", add(l, n, 0, in));
    B("1.conv.weight", add3(l, n, in, out, 2 * c->rates[i]));
    B("1.conv.bias", add(l, n, 0, out));
    for (int u = 2; u < 5; u++) {
      snprintf(n, sizeof n, "decoder.decoder.%d.block.%d.act1.alpha", i + 1, u), add(l, n, 0, out);
      snprintf(n, sizeof n, "decoder.decoder.%d.block.%d.act1.beta", i + 1, u), add(l, n, 0, out);
      snprintf(n, sizeof n, "decoder.decoder.%d.block.%d.conv1.conv.weight", i + 1, u), add3(l, n, out, out, 7);
      snprintf(n, sizeof n, "decoder.decoder.%d.block.%d.conv1.conv.bias", i + 1, u), add(l, n, 0, out);
      snprintf(n, sizeof n, "decoder.decoder.%d.block.%d.act2.alpha", i + 1, u), add(l, n, 0, out);
      snprintf(n, sizeof n, "decoder.decoder.%d.block.%d.act2.beta", i + 1, u), add(l, n, 0, out);
      snprintf(n, sizeof n, "decoder.decoder.%d.block.%d.conv2.conv.weight", i + 1, u), add3(l, n, out, out, 1);
      snprintf(n, sizeof n, "decoder.decoder.%d.block.%d.conv2.conv.bias", i + 1, u), add(l, n, 0, out);
    }
#undef B
  }
  add(l, "decoder.decoder.5.alpha", 0, out);
  add(l, "decoder.decoder.5.beta", 0, out);
  add3(l, "decoder.decoder.6.conv.weight", 1, out, 7);
  add(l, "decoder.decoder.6.conv.bias", 0, 1);
}

static void codec_config(const CodecDims *c, char *cfg, size_t size) {
  snprintf(cfg, size,
           "{\"model_type\":\"qwen3_tts_tokenizer_12hz\",\"decode_upsample_rate\":1920,"
           "\"output_sample_rate\":24000,\"decoder_config\":{\"num_quantizers\":%lld,\"codebook_size\":%lld,"
           "\"codebook_dim\":%lld,\"latent_dim\":%lld,\"decoder_dim\":%lld,\"hidden_size\":%lld,"
           "\"num_attention_heads\":%lld,\"num_key_value_heads\":%lld,\"head_dim\":%lld,"
           "\"intermediate_size\":%lld,\"num_hidden_layers\":%lld,\"sliding_window\":72,"
           "\"max_position_embeddings\":8000,\"rope_theta\":10000,\"rms_norm_eps\":1e-05,"
           "\"hidden_act\":\"silu\",\"attention_bias\":false,\"upsampling_ratios\":[%d,%d],"
           "\"upsample_rates\":[%d,%d,%d,%d]}}",
           (long long)c->nq, (long long)c->bins, (long long)c->cb_dim, (long long)c->latent, (long long)c->dec_dim,
           (long long)c->hidden, (long long)c->heads, (long long)c->kv, (long long)c->hd, (long long)c->inter,
           (long long)c->layers, c->ratios[0], c->ratios[1], c->rates[0], c->rates[1], c->rates[2], c->rates[3]);
}

/* splitmix64; a normal-like value from the sum of four 16-bit uniforms
 * (Irwin-Hall, unit variance): fast and deterministic, enough for noise */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float normal(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  float s = (float)(z & 0xffff) + (float)(z >> 16 & 0xffff) + (float)(z >> 32 & 0xffff) + (float)(z >> 48);
  return (s * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

/* mkdir -p */
static void make_dirs(const char *path) {
  char p[1024];
  snprintf(p, sizeof p, "%s", path);
  for (char *c = p + 1; *c; c++)
    if (*c == '/') {
      *c = 0;
      mkdir(p, 0755);
      *c = '/';
    }
  mkdir(p, 0755);
}

/* config.json and model.safetensors of the tensors in l into out. */
static int write_ckpt(const char *out, const char *cfg, const List *l, int esize) {
  make_dirs(out);
  char path[1024];
  snprintf(path, sizeof path, "%s/config.json", out);
  FILE *f = fopen(path, "w");
  if (!f || fputs(cfg, f) < 0 || fclose(f)) {
    fprintf(stderr, "make_random_ckpt: cannot write %s: %s\n", path, strerror(errno));
    return 2;
  }
  /* header */
  size_t hcap = (size_t)l->n * 200 + 64, hlen = 0;
  char *h = malloc(hcap);
  int64_t off = 0;
  hlen += (size_t)snprintf(h + hlen, hcap - hlen, "{");
  for (int i = 0; i < l->n; i++) {
    const Tensor *t = &l->t[i];
    int64_t bytes = (t->rows ? t->rows : 1) * t->cols * (t->k ? t->k : 1) * esize;
    if (t->k)
      hlen += (size_t)snprintf(h + hlen, hcap - hlen, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld,%lld],\"data_offsets\":[%lld,%lld]}",
                               i ? "," : "", t->name, esize == 2 ? "BF16" : "F32", (long long)t->rows,
                               (long long)t->cols, (long long)t->k, (long long)off, (long long)(off + bytes));
    else if (t->rows)
      hlen += (size_t)snprintf(h + hlen, hcap - hlen, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%lld,%lld]}",
                               i ? "," : "", t->name, esize == 2 ? "BF16" : "F32", (long long)t->rows,
                               (long long)t->cols, (long long)off, (long long)(off + bytes));
    else
      hlen += (size_t)snprintf(h + hlen, hcap - hlen, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%lld,%lld]}",
                               i ? "," : "", t->name, esize == 2 ? "BF16" : "F32", (long long)t->cols,
                               (long long)off, (long long)(off + bytes));
    off += bytes;
  }
  hlen += (size_t)snprintf(h + hlen, hcap - hlen, "}");
  while (hlen % 8) h[hlen++] = ' ';
  snprintf(path, sizeof path, "%s/model.safetensors", out);
  f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "make_random_ckpt: cannot write %s: %s\n", path, strerror(errno));
    return 2;
  }
  uint64_t hl = hlen;
  fwrite(&hl, 8, 1, f);
  fwrite(h, 1, hlen, f);
  size_t buf_n = 1 << 20;
  unsigned char *buf = malloc(buf_n * 4);
  for (int i = 0; i < l->n; i++) {
    const Tensor *t = &l->t[i];
    int vec = !t->rows, bias = strstr(t->name, ".bias") != NULL;
    float scale = vec ? 0.1f : l->fan_in ? 1.0f / sqrtf((float)(t->cols * (t->k ? t->k : 1))) : 0.02f;
    float shift = vec && !bias ? 1.0f : 0.0f;
    /* a GDN layer's dt_bias as trained models have it (softplus(dt_bias) of
     * about 0.02): a decay of about 0.95 per token (A = e^A_log, about e),
     * so that the recurrent state carries across a prompt */
    if (vec && strstr(t->name, "dt_bias")) shift = -4.0f;
    int64_t n = (t->rows ? t->rows : 1) * t->cols * (t->k ? t->k : 1);
    for (int64_t k = 0; k < n;) {
      size_t m = (size_t)(n - k < (int64_t)buf_n ? n - k : (int64_t)buf_n);
      for (size_t j = 0; j < m; j++) {
        float x = normal() * scale + shift;
        uint32_t u;
        memcpy(&u, &x, 4);
        if (esize == 2) {
          uint16_t b = (uint16_t)(u >> 16);
          memcpy(buf + 2 * j, &b, 2);
        } else {
          memcpy(buf + 4 * j, &u, 4);
        }
      }
      if (fwrite(buf, (size_t)esize, m, f) != m) {
        fprintf(stderr, "make_random_ckpt: write failed: %s\n", strerror(errno));
        return 2;
      }
      k += (int64_t)m;
    }
  }
  if (fclose(f)) {
    fprintf(stderr, "make_random_ckpt: write failed: %s\n", strerror(errno));
    return 2;
  }
  printf("wrote %s (%lld MB of weights)\n", out, (long long)(off >> 20));
  free(buf);
  free(h);
  return 0;
}

int main(int argc, char **argv) {
  const char *shape = NULL, *out = NULL, *dtype = "bf16";
  int layers = -1, with_codec = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dtype = argv[++i];
    else if (!strcmp(argv[i], "--layers") && i + 1 < argc) layers = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--with-codec")) with_codec = 1;
    else if (!shape) shape = argv[i];
    else if (!out) out = argv[i];
    else shape = NULL, i = argc;
  }
  int tts = shape && !strcmp(shape, "qwen3-tts-0.6b"), wide = shape && !strcmp(shape, "qwen3-wide-tiny");
  int gdn = shape && !strcmp(shape, "qwen35-moe-wide-tiny");
  int codec = shape && (!strcmp(shape, "codec-12hz") || !strcmp(shape, "codec-tiny"));
  if (!shape || !out || (!tts && !wide && !gdn && !codec && strcmp(shape, "qwen3-0.6b")) ||
      (strcmp(dtype, "bf16") && strcmp(dtype, "f32"))) {
    fprintf(stderr, "usage: make_random_ckpt qwen3-0.6b|qwen3-tts-0.6b|qwen3-wide-tiny|qwen35-moe-wide-tiny|"
            "codec-12hz|codec-tiny OUT_DIR "
            "[--dtype bf16|f32] [--layers N] [--with-codec]\n");
    return 1;
  }
  const int esize = strcmp(dtype, "bf16") ? 4 : 2;
  Dims d = {1024, 3072, 128, 16, 8, layers > 0 ? layers : 28};
  if (wide) d = (Dims){320, 544, 64, 4, 2, 2};
  List l = {0};
  char cfg[4096];
  snprintf(cfg, sizeof cfg, "%s", tts ? cfg_tts : wide ? cfg_wide : gdn ? cfg_gdn_wide : cfg_lm);
  if (layers > 0) { /* the first num_hidden_layers is the model's (the talker's) */
    char *p = strstr(cfg, "\"num_hidden_layers\":28");
    if (p) {
      char rest[4096];
      snprintf(rest, sizeof rest, "%s", p + strlen("\"num_hidden_layers\":28"));
      snprintf(p, sizeof cfg - (size_t)(p - cfg), "\"num_hidden_layers\":%d%s", layers, rest);
    }
  }
  if (gdn) {
    const GdnDims g = {256, 256, 2, 1, 2, 4, 128, 128, 4, 8, 64, 64, 2, 2};
    add(&l, "model.embed_tokens.weight", 512, g.H);
    gdn_moe_layers(&l, "model.layers.", &g);
    add(&l, "model.norm.weight", 0, g.H);
    add(&l, "lm_head.weight", 512, g.H);
  } else if (codec) {
    const CodecDims *c = strcmp(shape, "codec-tiny") ? &codec_pub : &codec_tiny;
    codec_tensors(&l, c);
    codec_config(c, cfg, sizeof cfg);
    l.fan_in = 1;
  } else if (!tts) {
    add(&l, "model.embed_tokens.weight", wide ? 512 : 151936, d.H);
    qwen3_layers(&l, "model.layers.", &d);
    add(&l, "model.norm.weight", 0, d.H);
  } else {
    const int64_t TH = 2048, V = 3072, PV = 2048;
    Dims p = {1024, 3072, 128, 16, 8, 5};
    add(&l, "talker.model.text_embedding.weight", 151936, TH);
    add(&l, "talker.text_projection.linear_fc1.weight", TH, TH);
    add(&l, "talker.text_projection.linear_fc1.bias", 0, TH);
    add(&l, "talker.text_projection.linear_fc2.weight", d.H, TH);
    add(&l, "talker.text_projection.linear_fc2.bias", 0, d.H);
    add(&l, "talker.model.codec_embedding.weight", V, d.H);
    add(&l, "talker.codec_head.weight", V, d.H);
    qwen3_layers(&l, "talker.model.layers.", &d);
    add(&l, "talker.model.norm.weight", 0, d.H);
    qwen3_layers(&l, "talker.code_predictor.model.layers.", &p);
    add(&l, "talker.code_predictor.model.norm.weight", 0, p.H);
    char n[96];
    for (int i = 0; i < 15; i++) {
      snprintf(n, sizeof n, "talker.code_predictor.model.codec_embedding.%d.weight", i);
      add(&l, n, PV, d.H);
      snprintf(n, sizeof n, "talker.code_predictor.lm_head.%d.weight", i);
      add(&l, n, PV, p.H);
    }
  }
  int rc = write_ckpt(out, cfg, &l, esize);
  free(l.t);
  if (rc || !with_codec) return rc;
  /* the speech tokenizer's decoder beside it, in f32 as published */
  List cl = {.fan_in = 1};
  const CodecDims *c = tts ? &codec_pub : &codec_tiny;
  codec_tensors(&cl, c);
  codec_config(c, cfg, sizeof cfg);
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/speech_tokenizer", out);
  rc = write_ckpt(dir, cfg, &cl, 4);
  free(cl.t);
  return rc;
}
