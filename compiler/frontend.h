/*
 * frontend.h — model families lowered to IR.
 *
 * A frontend reads config.json and the tensor table of a Checkpoint, checks
 * every tensor it needs against the shapes the config implies, declares the
 * module's weights, states and entry-point graphs, and builds each graph
 * from the unfused IR ops.  Fusion and everything after are passes.
 */
#ifndef SC_FRONTEND_H
#define SC_FRONTEND_H

#include "checkpoint.h"
#include "ir.h"

typedef struct BuildOpts {
  const char *model_dir;
  const char *out_path;      /* model.so */
  const char *cc;            /* "tcc", "gcc", "clang" */
  const char *target;        /* "cpu" */
  DType band;                /* --weights */
  int max_context;           /* 0: family default */
  int prefill_chunk;         /* tokens per prefill call (frames per codec call); 0: fe_chunk's default */
  int delta_chunk;           /* --delta-chunk: Gated DeltaNet prefill in the chunkwise form, tokens
                              * per chunk (0: token by token) */
  int max_batch;             /* --max-batch: sessions per batched decode step (LMs; 0 or 1: none) */
  int fuse;                  /* 0 with --no-fuse */
  const char *emit_dir;      /* keep generated sources here */
  const char *arch;          /* --cuda-arch: the target's architecture (cuda: NULL = compute_80) */
  const char *dump_ir;       /* NULL, "" (all passes) or a pass name */
  int quiet;
  int check_numerics;        /* --check-numerics: entry points check their outputs */
  int64_t max_session_mb;    /* --max-session-mb: refuse a build whose session needs more */
  int signals;               /* the CLI: SIGINT/SIGTERM/SIGHUP remove the temporaries */
  const CkptAs *ckpt_as;     /* NULL: model_dir as published; else a file of it under a given config */
} BuildOpts;

typedef int (*FrontendFn)(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);

/* Family lookup by config.json model_type; NULL when unknown. */
FrontendFn fe_lookup(const char *model_type, const char **family);

int fe_llm(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);
int fe_tts(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);
int fe_codec(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);
/* Kyutai's RQ-Transformer (fe_moshi.c): temporal step and depformer steps. */
int fe_moshi(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);
/* Kyutai's Mimi codec (fe_mimi.c): its decoder, codes to PCM. */
int fe_mimi(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);
/* The Gated DeltaNet hybrids (fe_qwen35.c): Qwen3.5 dense and MoE, Qwen3-Next. */
int fe_qwen35(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);

/* Bounds on config dimensions, far above any published model (and
 * FE_DIM_MAX, FE_HEAD_DIM_MAX below). */
#define FE_LAYERS_MAX (1 << 12)

/* The Qwen3 decoder block (fe_qwen3.c), shared by the LM and TTS frontends. */
typedef struct Qwen3Dims {
  int64_t hidden, layers, heads, kv_heads, head_dim, inter;
  double eps, theta;
  int qk_norm;
  /* variants of the block outside the LMs (0 from fe_qwen3_dims): */
  int window;       /* sliding-window attention over this many positions */
  int slide_window; /* ... in the layers slide[] marks (Qwen3Config's sliding layers) */
  unsigned char slide[FE_LAYERS_MAX / 8];
  int layer_scale;  /* both residual branches times a per-channel scale */
  int attn_bias;    /* q/k/v/o projections carry biases */
  int attn_gate;    /* q_proj packs [query | gate] per head; o *= sigmoid(gate) */
  int rot_dims;     /* RoPE over the first rot_dims of each head; 0: all */
  int norm_mode;    /* NORM_PLAIN, or NORM_ONE_PLUS (zero-centred norms: 1 + w) */
} Qwen3Dims;
typedef struct Qwen3Layer {  /* indices into Module.weights / .states; -1: absent */
  int attn_norm, wq, wk, wv, wo, q_norm, k_norm, mlp_norm, wg, wu, wd, kcache, vcache;
  int bq, bk, bv, bo, attn_scale, mlp_scale;
  int wgate;                 /* attn_gate: the gate rows of q_proj */
} Qwen3Layer;
/* How one config class reads the block's keys (its constructor in
 * transformers or qwen-tts): what it fills in for a key the file leaves
 * out, and which keys it reads at all. */
enum { SLIDE_IGNORED, SLIDE_LAYERS, SLIDE_ALL };
typedef struct Qwen3Family {
  const char *cls;   /* the config class, named in messages */
  int64_t kv_heads;  /* num_key_value_heads when absent; 0: num_attention_heads (null is that in every class) */
  int64_t head_dim;  /* head_dim when absent; 0: hidden_size / num_attention_heads */
  int mlp_bias;      /* 1: the MLP reads mlp_bias; 0: it has no biases and never reads the key */
  int sliding;       /* use_sliding_window: ignored (SLIDE_IGNORED), for the layers layer_types or
                        max_window_layers name (SLIDE_LAYERS), for every layer (SLIDE_ALL) */
  int slide_ok;      /* sliding layers built (parity-tested for Qwen3Config), else refused */
  int rope_parameters; /* reads transformers 5.x's rope_parameters (qwen-tts' 4.x classes do not) */
} Qwen3Family;
extern const Qwen3Family FE_QWEN3, FE_LLAMA, FE_TTS_TALKER, FE_TTS_PREDICTOR;
/* Read the block's dimensions from a config object as class f reads them
 * (qk_norm set to 1). */
int fe_qwen3_dims(const cJSON *obj, const char *where, const Qwen3Family *f, Qwen3Dims *d, sc_error *err);
/* The attention window of layer L (0: every earlier position). */
int fe_qwen3_window(const Qwen3Dims *d, int L);
/* Declare layer L's weights (tensors "<tensor_prefix>L.self_attn.q_proj.weight",
 * ...; names "<name_prefix>layerL.q_proj") and its KV caches of max_ctx rows
 * (a ring: positions p and p + max_ctx share a row). */
int fe_qwen3_layer_weights(Module *m, const Checkpoint *c, const Qwen3Dims *d,
                           const char *tensor_prefix, const char *name_prefix, int L,
                           int max_ctx, DType band, Qwen3Layer *w, sc_error *err);
/* Only the attention's weights and its KV caches (a layer whose FFN is
 * not the block's MLP: a mixture of experts): sets the attention's
 * indices of w and leaves the others as they are. */
int fe_qwen3_attn_weights(Module *m, const Checkpoint *c, const Qwen3Dims *d, const char *tensor_prefix,
                          const char *name_prefix, int L, int max_ctx, DType band, Qwen3Layer *w, sc_error *err);
/* Only the MLP's weights (norm, gate, up, down; LayerScale), for a layer
 * whose token mixer is not attention (Qwen3.5's GDN layers): sets the
 * MLP's indices of w and leaves the others as they are. */
int fe_qwen3_mlp_weights(Module *m, const Checkpoint *c, const Qwen3Dims *d, const char *tensor_prefix,
                         const char *name_prefix, int L, DType band, Qwen3Layer *w, sc_error *err);
/* Append layer L to g over the residual stream x; returns the new x.  It
 * is fe_qwen3_mlp(fe_qwen3_attention(x)), each with its residual add. */
int fe_qwen3_layer(Module *m, Graph *g, int x, const Qwen3Dims *d, const Qwen3Layer *w,
                   int rope, const char *name_prefix, int L);
int fe_qwen3_attention(Module *m, Graph *g, int x, const Qwen3Dims *d, const Qwen3Layer *w, int rope,
                       const char *name_prefix, int L);
int fe_qwen3_mlp(Module *m, Graph *g, int x, const Qwen3Dims *d, const Qwen3Layer *w, const char *name_prefix,
                 int L);
/* RoPE keys as transformers reads them (rope_theta, rope_scaling,
 * rope_parameters; only plain RoPE): theta (default 10000) and the partial
 * rotary factor (dflt_prf when absent); *prf_key names where the factor
 * came from (NULL: the default).  Values given twice must agree. */
int fe_rope_params(const cJSON *obj, const char *where, double dflt_prf, double *theta, double *prf,
                   const char **prf_key, sc_error *err);
/* The same for a class on transformers 4.x, which never reads
 * rope_parameters (qwen-tts' classes: it pins 4.57). */
int fe_rope_params_4x(const cJSON *obj, const char *where, double dflt_prf, double *theta, double *prf,
                      const char **prf_key, sc_error *err);

/* Kyutai's StreamingTransformer (fe_moshi.c), shared by Moshi's LM and
 * Mimi's encoder and decoder transformers.  A layer is
 * x += ls1 * out(attn(norm1(x)));  x += ls2 * ffn(norm2(x)). */
enum { NORM_RMS, NORM_LAYER };
enum { FFN_NONE, FFN_SILU, FFN_GELU };
enum { POS_NONE = 0, POS_SIN = 1, POS_ROPE = 2 }; /* bits: sin_rope is both */

typedef struct MoshiStack {      /* one StreamingTransformer */
  int64_t dim, heads, kv_heads, layers, ff;  /* ff: dim_feedforward */
  int norm, ffn, pos, rope_mode, layer_scale;
  double norm_eps, max_period, pos_scale;
  int64_t hidden;                /* gating hidden (ActivationGating) */
  int sets;                      /* per-step weight sets (1: none) */
  int per_step;                  /* weights_per_step: the FFN's are gating.<i>, even with one set */
  int align;                     /* positions arrive in groups of align (ATTENTION's p.align; 0, 1: singly) */
} MoshiStack;

typedef struct MoshiLayer {
  int n1w, n1b, n2w, n2b, qkv, out, ls1, ls2, ff_in, ff_out, kc, vc;
} MoshiLayer;

/* Set t's norm, gating and positions from the package's names and check
 * its sizes (dim, heads, kv_heads, layers, ff, max_period set before). */
int fe_moshi_read_stack(const char *where, const char *norm, const char *gating, const char *pos, MoshiStack *t,
                        sc_error *err);
/* Layer L's weights ("<tp>L.norm1.weight", ...; one set), KV rings of kv_rows. */
int fe_moshi_layer_weights(Module *m, const Checkpoint *c, DType band, const MoshiStack *t, const char *tp,
                           const char *np, int L, int kv_rows, MoshiLayer *l, sc_error *err);
/* The sinusoidal and RoPE tables of t over `rows` positions (-1: none). */
void fe_moshi_pos_tables(Module *m, const MoshiStack *t, int rows, const char *np, int *sin, int *rope);
/* Every layer of t over x (positions added first when sin >= 0); window:
 * the attention's (0: all). */
int fe_moshi_stack(Module *m, Graph *g, const MoshiStack *t, const MoshiLayer *ls, int x, int sin, int rope,
                   int window, const char *np);

/* Causal convs for the codecs (fe_codec.c), shared by the 12 Hz decoder
 * and Mimi.  Kinds: FE_CONV (Conv1d [cout, cin, k] as IM2COL's matrix, a
 * plain one at k = 1), FE_CONVT (ConvTranspose1d [cin, cout, k] as
 * OVERLAP_ADD's taps), FE_DEPTHWISE (Conv1d with groups = cout, [cout, 1,
 * k] as DWCONV's f32 taps), FE_CONVT_DW (ConvTranspose1d with groups =
 * cin = cout, [cin, 1, k], as FE_CONVT's matrix with zeros off the
 * diagonal).  Weight index, or -1 with err set. */
enum { FE_CONV, FE_CONVT, FE_DEPTHWISE, FE_CONVT_DW };
int fe_conv_weight(Module *m, const Checkpoint *c, const char *name, const char *tensor, int kind, int64_t cout,
                   int64_t cin, int k, DType band, sc_error *err);
/* An f32 [1, n] of zeros: the bias of a conv that has none. */
int fe_zero_vec(Module *m, const char *name, int64_t n);
/* x [R, cin] through a causal Conv1d of stride 1 (weight w of kind FE_CONV,
 * bias weight b or -1): IM2COL with (k-1)*dil rows of state "<name>.context",
 * then LINEAR. */
int fe_causal_conv(Module *m, Graph *g, int x, int w, int b, int64_t cin, int k, int dil, const char *name);
/* x [R, cin] through a causal ConvTranspose1d (w of kind FE_CONVT or
 * FE_CONVT_DW, bias b, kernel k >= stride s): LINEAR to the taps, then
 * OVERLAP_ADD carrying k - s rows "<name>.carry"; [R*s, cout]. */
int fe_causal_conv_t(Module *m, Graph *g, int x, int w, int b, int64_t cout, int k, int s, const char *name);

/* Bounds on config dimensions, far above any published model (and
 * FE_LAYERS_MAX above). */
#define FE_DIM_MAX (1 << 20)
/* head_dim: 2x the largest published (256).  The C target normalises one
 * head in a stack array (2 KiB at 512) and the CUDA kernels stage a few
 * heads per block in shared memory (cg_cuda.c refuses a graph whose block
 * would need more than the 48 KiB a kernel may declare). */
#define FE_HEAD_DIM_MAX 512

/* Shared helpers. */
/* Tokens (frames) per call: --prefill-chunk, else the family's default,
 * never more than max_ctx. */
int fe_chunk(const BuildOpts *o, int dflt, int max_ctx);
/* Declare weight `name` from checkpoint tensor `tensor` of shape
 * [rows, cols] (cols only when rows == 0: a 1-D vector), stored in band.
 * Returns the weight index, or -1 with err set. */
/* tie_word_embeddings true, and the checkpoint holds an lm_head.weight that
 * is not the embedding (other bytes, dtype or shape): 1, else 0.
 * transformers 4.x ties them anyway (the embedding's values), 5.x then
 * keeps the stored head (modeling_utils' "we will NOT tie them"). */
int fe_head_untied(const Checkpoint *c, const char *embed_tensor);
int fe_weight(Module *m, const Checkpoint *c, const char *name, const char *tensor,
              int64_t rows, int64_t cols, DType band, sc_error *err);
/* Declare weight `name` [rows, cols] from some rows of tensor `tensor`
 * [tensor_rows, cols]: runs of `run` rows every `stride` rows from row0
 * (IrWeightSrc), e.g. one half of each head of a packed projection. */
int fe_weight_rows(Module *m, const Checkpoint *c, const char *name, const char *tensor, int64_t tensor_rows,
                   int64_t cols, int64_t row0, int64_t run, int64_t stride, int64_t rows, DType band,
                   sc_error *err);
/* Declare a weight of `sets` sets of [rows, cols], set i from the tensor
 * named by printf(fmt, i) (e.g. per-step heads "lm_head.%d.weight"). */
int fe_weight_sets(Module *m, const Checkpoint *c, const char *name, const char *fmt,
                   int sets, int64_t rows, int64_t cols, DType band, sc_error *err);
/* Declare the cos|sin table of a rotary embedding (max_ctx rows; a table
 * with the same rot_dims and theta is shared, and grows to the longest
 * request: call this before any graph reads the table). */
int fe_rope_table(Module *m, int max_ctx, int rot_dims, double theta);

#endif
