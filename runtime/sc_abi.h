/*
 * sc_abi.h — the contract between a compiled model (model.so) and the
 * speechc runtime.
 *
 * This header is self-contained (no libc includes): the compiler writes it
 * next to the generated source, which is compiled with -nostdlib by libtcc or
 * the system compiler.  Any change to a struct below bumps SC_ABI_VERSION;
 * so does a change in how a band's rows are laid out (5: q4_0 rows in the
 * CPU kernels' groups of eight blocks).  6: a position and a state block
 * per row of a call (sc_io.row_pos, row_state), so that one call can
 * carry rows of several sessions; ids_cols and out_rows_mul per entry.
 * 7: the mixture-of-experts kernels (topk_route, moe), delta_rule's
 * chunk, the descriptor's notes, the fused causal conv (conv1d), the
 * strided im2col (im2col_strided).  8: the residual VQ encode stage
 * (vq_nearest).  9: SiLU over rows (silu), the runtime's one exponential
 * behind it and expf.  10: q8_0 rows in the CPU kernels' groups of eight
 * blocks, as q4_0's.  11: the row-wise ops as kernels (rmsnorm, rope,
 * store_rows) instead of loops in the generated code.
 * The runtime refuses an artifact whose version differs and says both.
 */
#ifndef SC_ABI_H
#define SC_ABI_H

#define SC_ABI_VERSION 11
#define SC_DESC_MAGIC 0x4d444353u /* "SCDM" little-endian */
#define SC_DESC_SYMBOL "speechc_model"

/* Weight bands: how a weight tensor's rows are stored in the weight file. */
enum {
  SC_W_F32 = 0,  /* float32 */
  SC_W_BF16 = 1, /* bfloat16 (upper half of an f32) */
  SC_W_F16 = 2,  /* IEEE half */
  SC_W_Q8_0 = 3, /* blocks of 32: f16 scale d, 32 x int8; x = d*q */
  SC_W_Q4_0 = 4  /* blocks of 32: f16 scale d, 16 bytes of nibbles; x = d*(q-8);
                  * CPU rows in groups of eight blocks (runtime/kernels.h) */
};

/* What an entry point reads as its main input. */
enum { SC_IN_IDS = 0, SC_IN_EMBEDS = 1 };

/*
 * Kernels the runtime hands to generated code.  Hot loops that libtcc cannot
 * vectorise live here, precompiled for the CPU's features.  Every pointer is
 * row-major with an explicit leading dimension (ld*) in floats.
 */
typedef struct sc_kernels {
  int abi_version;
  void *ctx; /* runtime-owned: thread pool, error slot */
  /* y[t,r] (=, or += when acc) sum_c W[r,c]*x[t,c] (+ bias[r]); W is `rows`
   * rows of `cols` in band wtype.  T=1 is a GEMV, T>1 a GEMM. */
  void (*linear)(void *ctx, int wtype, const void *w, const float *bias,
                 const float *x, int ldx, float *y, int ldy, int T, int rows,
                 int cols, int acc);
  /* y[t,r] = silu(g)*u with g = Wg[r]·x[t], u = Wu[r]·x[t]; Wu follows Wg
   * in the same allocation (w is [2*rows, cols]). */
  void (*linear_swiglu)(void *ctx, int wtype, const void *w, const float *x,
                        int ldx, float *y, int ldy, int T, int rows, int cols);
  /* Causal attention for T queries over a cache of `cap` rows (row p % cap
   * holds position p), window rows back (0: all).  Query t is at position
   * row_pos[t] (row_pos NULL: pos + t) and reads the caches row_state[t]
   * bytes from kc and vc (row_state NULL: at kc and vc), as sc_io says.
   * q [T, heads*hd] (ldq), caches [cap, kv_heads*hd] (ldkv), y [T, heads*hd]. */
  void (*attention)(void *ctx, const float *q, int ldq, const float *kc,
                    const float *vc, int ldkv, int cap, float *y, int ldy,
                    int T, int pos, const int *row_pos, const long long *row_state,
                    int heads, int kv_heads, int head_dim, float scale, int window);
  float (*expf)(float);
  float (*sqrtf)(float);
  float (*logf)(float);
  float (*erff)(float);
  /* Record an error; the entry point then returns non-zero. */
  void (*error)(void *ctx, const char *msg, int value);
  /* Device targets only (NULL on the CPU).  Launch kernel number `kernel`
   * of the descriptor's kernel_names on the session's stream with a grid of
   * gx*gy*gz blocks of bx*by*bz threads, smem bytes of dynamic shared
   * memory and args[i] pointing at the value of parameter i.  Returns 0, or
   * non-zero with the error recorded through `error`. */
  int (*launch)(void *ctx, int kernel, unsigned gx, unsigned gy, unsigned gz,
                unsigned bx, unsigned by, unsigned bz, unsigned smem, void **args);
  /* Device targets only: the device address of the session's sc_device_io,
   * the first parameter of every kernel. */
  void *device_io;
  /* ---- the codec ops of ops.def (IM2COL, DWCONV, OVERLAP_ADD, SNAKE,
   * LAYERNORM), CPU only.  Rows are time steps, channels are columns.  A
   * conv state is [(k-1)*d, C] (ld C): the last (k-1)*d rows of the input
   * seen so far, zero at session reset; NULL when (k-1)*d is 0. */
  /* y[t, j*C + c] = xx[t + j*d, c] for t < R, j < k, xx = state rows then
   * x rows; then state = the last (k-1)*d rows of xx.  y [R, k*C] must
   * not overlap x or state. */
  void (*im2col)(void *ctx, const float *x, int ldx, float *state, float *y, int ldy, int R, int C,
                 int k, int d);
  /* Depthwise causal conv: y[t,c] = b[c] + sum_j w[c*k + j] * xx[t + j*d, c]
   * (w [C, k]; b [C] or NULL), then the state as im2col's.  y must not
   * overlap x or state. */
  void (*dwconv)(void *ctx, const float *x, int ldx, const float *w, const float *b, float *state,
                 float *y, int ldy, int R, int C, int k, int d);
  /* The overlap-add half of a causal ConvTranspose1d (kernel k >= stride
   * s): z [R, k*C] holds each input row's k output taps (tap j at columns
   * j*C..); y [R*s, C]: y[p] = carry[p] (p < k-s) + the sum of the taps
   * z[i, j*C + c] with i*s + j = p, + b[c] (b NULL: none); state [k-s, C]
   * (NULL when k == s) carries the sums that land past R*s to the next
   * call.  y must not overlap z or state. */
  void (*overlap_add)(void *ctx, const float *z, int ldz, const float *b, float *state, float *y,
                      int ldy, int R, int C, int k, int s);
  /* SnakeBeta: y = x + sin(x*exp(alpha[c]))^2 / (exp(beta[c]) + 1e-9)
   * over [R, C] (alpha, beta [C]); y may be x. */
  void (*snake)(void *ctx, const float *x, int ldx, const float *alpha, const float *beta, float *y,
                int ldy, int R, int C);
  /* Per row over all C columns: y = (x - mean) / sqrt(var + eps) * w + b,
   * var biased (divided by C); y may be x. */
  void (*layernorm)(void *ctx, const float *x, int ldx, const float *w, const float *b, float eps,
                    float *y, int ldy, int R, int C);
  /* ---- the Gated DeltaNet ops of ops.def (L2NORM, GATED_RMSNORM,
   * DELTA_RULE), CPU only.  Rows are tokens; g is the group (a head). */
  /* Per row, per group of g columns: y = x * (1 / sqrt(sum x^2 + eps)), in
   * f32; y may be x. */
  void (*l2norm)(void *ctx, const float *x, int ldx, float *y, int ldy, int R, int C, int g, float eps);
  /* Per row, per group of g columns: y = w[c % g] * (x * (1 / sqrt(mean
   * x^2 + eps))) * silu(z) (w [g]); y may be x. */
  void (*gated_rmsnorm)(void *ctx, const float *x, int ldx, const float *z, int ldz, const float *w,
                        float eps, float *y, int ldy, int R, int C, int g);
  /* The gated delta rule over T tokens, one after the other: for each
   * v-head h < nv (k-head h / (nv / nk)) with S = state + h*dk*dv
   * ([dk, dv] row-major): S *= exp(g[t*ldg + h]); u = S^T k; S += k (x)
   * beta[t*ldb + h] * (v - u); y[t*ldy + h*dv + j] = sum_i S[i*dv + j] *
   * (scale * q[i]).  q, k: [T, nk*dk]; v, y: [T, nv*dv]; y must not
   * overlap an input or the state.  chunk > 0: a call of 16 tokens or more
   * computes the same in the chunkwise form, chunk tokens at a time (at
   * most 256; equal to rounding); 0: token by token always. */
  void (*delta_rule)(void *ctx, const float *q, int ldq, const float *k, int ldk, const float *v, int ldv,
                     const float *g, int ldg, const float *beta, int ldb, float *state, float *y, int ldy,
                     int T, int nv, int nk, int dk, int dv, float scale, int chunk);
  /* ---- the mixture-of-experts ops of ops.def (TOPK_ROUTE, MOE_COMBINE),
   * CPU only.  Rows are tokens. */
  /* Per row t of logits [T, E]: p = softmax in f32 (max subtracted, sums
   * in index order); e_0..e_{k-1} the k largest p, descending (ties: the
   * lower index); y[t*ldy + j] = p[e_j] (divided by their sum, in rank
   * order, when renorm), y[t*ldy + k + j] = (float)e_j. */
  void (*topk_route)(void *ctx, const float *logits, int ldl, float *y, int ldy, int T, int E, int k,
                     int renorm);
  /* Routed SwiGLU experts: y[t] = sum_{j<k} route[t*ldr + j] * Wd_e
   * (silu(Wg_e x[t]) * (Wu_e x[t])), e = route[t*ldr + k + j], summed in
   * rank order, then + sigmoid(sg[t*ldg]) * sh[t] when sh is not NULL.
   * wgu: E experts of [2I, H] (gate rows, then up rows) in band wt_gu;
   * wd: E experts of [H, I] in band wt_d; only the chosen experts' rows are
   * read.  Each product is the bits linear() gives for that expert and
   * row, whichever tokens share an expert.  tmp: SC_MOE_TMP_WORDS(T, k, E,
   * I, H) 4-byte words, 64-byte aligned; y must not overlap an input. */
  void (*moe)(void *ctx, int wt_gu, const void *wgu, int wt_d, const void *wd, const float *x, int ldx,
              const float *route, int ldr, const float *sh, int lds, const float *sg, int ldg, float *y, int ldy,
              void *tmp, int T, int E, int k, int inter, int H);
  /* ---- the fused causal Conv1d of ops.def (CONV1D), CPU only. */
  /* y[t*ldy + o] = b[o] + sum_{j<k, c<C} W[o, j*C + c] * xx[t + j*d, c]
   * for t < R, o < O (b NULL: none), xx = the state's (k-1)*d rows then
   * x's R rows, W O rows of k*C in band wtype, each row a linear() row
   * of the im2col rows; then the state as im2col's.  col: scratch of
   * min(R, 2*piece - 1) rows of k*C floats, where the kernel may
   * materialise the im2col rows piece rows at a time.  y must not overlap
   * x, the state or col. */
  void (*conv1d)(void *ctx, int wtype, const void *w, const float *bias, const float *x, int ldx,
                 float *state, float *col, int piece, float *y, int ldy, int R, int C, int k, int d, int O);
  /* IM2COL_STRIDED (a StreamingConv1d of stride s): y[t, j*C + c] =
   * xx[t*s + j*d, c] for t < R/s (R a multiple of s), xx = the P = (k-1)*d
   * + 1 - s state rows (P >= 0) then x; then state = the last P rows of xx.
   * replicate: the state has one more row whose first value is 0 in a fresh
   * session: then the P rows are first set to x's row 0 and it becomes 1.
   * y [R/s, k*C] must not overlap x or state. */
  void (*im2col_strided)(void *ctx, const float *x, int ldx, float *state, float *y, int ldy, int R, int C,
                         int k, int d, int s, int replicate);
  /* VQ_NEAREST (one stage of a residual VQ encode): per row t < R of x
   * [R, D], the first j < N of the least sqrt(max(sum_c (-2 x[t,c])
   * table[j,c] + |x_t|^2 + |table_j|^2, 0)), every sum in f32 in index
   * order; y[t, 0:P] = codes[t*ldc ..] (P earlier codes; codes NULL when
   * P is 0), y[t, P] = (float)j, y[t, P+1+c] = x[t,c] - table[j,c].
   * table [N, D] f32 (ld D); y must not overlap x or codes. */
  void (*vq_nearest)(void *ctx, const float *x, int ldx, const float *table, int N, const float *codes, int ldc,
                     int P, float *y, int ldy, int R, int D);
  /* SILU over [R, C]: y = x / (1.0f + expf(-x)) with this table's expf,
   * the bits of that expression element by element; y may be x. */
  void (*silu)(void *ctx, const float *x, int ldx, float *y, int ldy, int R, int C);
  /* ---- the row-wise ops of every decoder (runtime/kernels_rows.c has how
   * they sum and round: the same bits on every CPU). */
  /* RMSNORM over [R, C], per row and group of g columns: y = (x * (1 /
   * sqrt(mean x^2 + eps))) * w[c % g], or * (1 + w[c % g]) when one_plus
   * (w [g]); y may be x. */
  void (*rmsnorm)(void *ctx, const float *x, int ldx, const float *w, int one_plus, float eps, float *y,
                  int ldy, int R, int C, int g);
  /* ROPE over T rows of `heads` heads of head_dim columns: row t (at
   * position row_pos[t], or pos + t when row_pos is NULL) rotates the
   * first rot columns of each head by the table's row of that position
   * (rot / 2 cosines, then rot / 2 sines): pairs (i, i + rot/2), or
   * (2i, 2i + 1) when interleaved; the other columns are copied.  With
   * norm_w (not NULL) each head is RMS-normalised first, as rmsnorm with
   * g = head_dim.  y may be x. */
  void (*rope)(void *ctx, const float *table, const float *x, int ldx, float *y, int ldy, int T, int pos,
               const int *row_pos, int heads, int head_dim, int rot, int interleaved, const float *norm_w,
               int one_plus, float eps);
  /* Row t of x [T, cols] into row (row_pos[t] or pos + t) % cap of cache
   * (ld cols), row_state[t] bytes further when row_state is not NULL. */
  void (*store_rows)(void *ctx, const float *x, int ldx, float *cache, int cap, int cols, int T, int pos,
                     const int *row_pos, const long long *row_state);
} sc_kernels;

/* moe's temporaries: the gathered inputs [T*k, H], the experts' SwiGLU
 * rows [T*k, I] and outputs [T*k, H] (floats), then T*k slots and E + 1
 * offsets (ints). */
#define SC_MOE_TMP_WORDS(T, k, E, I, H) \
  ((long long)(T) * (k) * (2LL * (H) + (I)) + (long long)(T) * (k) + (E) + 1)

/*
 * Device targets: what kernels read of the call (the runtime writes it to
 * device memory before each call, so a captured sequence of launches stays
 * valid for any position) and where they report an error (an id outside a
 * table, a non-finite output): the first failing kernel stores 1 + its
 * number, the value and what went wrong.
 */
enum { SC_DEV_ERR_RANGE = 1, SC_DEV_ERR_NONFINITE = 2, SC_DEV_ERR_LOGIT_NAN = 3, SC_DEV_ERR_LOGIT_INF = 4,
       SC_DEV_ERR_SAMPLE_N = 5, SC_DEV_ERR_ALL_SUPPRESSED = 6 };
typedef struct sc_device_io {
  int n, pos, step;        /* as in sc_io */
  int err_kernel;          /* 0: no error; else 1 + index into kernel_names */
  int err_value;           /* the id, or the output index */
  int err_what;            /* SC_DEV_ERR_RANGE: id outside its table;
                            * SC_DEV_ERR_NONFINITE: NaN/inf output (--check-numerics);
                            * SC_DEV_ERR_LOGIT_NAN / _INF: the sampler met a NaN / inf
                            * logit at index err_value (the first one);
                            * SC_DEV_ERR_SAMPLE_N: a draw over more than
                            * SC_SAMPLE_MAX logits (err_value) was asked for */
  unsigned long long row_pos;   /* device address of sc_io.row_pos's [n] ints, 0: none */
  unsigned long long row_state; /* device address of sc_io.row_state's [n], 0: none */
  int pad[6];              /* 64 bytes */
} sc_device_io;

/*
 * Device targets: every artifact carries the kernel SC_SAMPLE_KERNEL (last
 * in kernel_names), which picks one token from logits in device memory as
 * runtime/sample.c does:
 *
 *   sc_sample(sc_device_io *io, const float *logits, sc_device_sampler *sp,
 *             int *token, int n)      one block of 1024 threads
 *
 * Suppression and the repetition penalty come from sp->mask (n bytes in
 * device memory, or 0 for none): bit 1 suppresses the id, bit 0 marks it
 * seen (its score is divided, or multiplied when negative, by sp->penalty)
 * and is set for every id the sampler draws, so a generation's history
 * stays on the device; sp->ban suppresses one more id (-1: none).
 * greedy (or temperature <= 0): the first index of the maximum, any n;
 * otherwise (n <= SC_SAMPLE_MAX) temperature, top-k, top-p and one draw
 * from sp->rng, the sampler's own xoshiro256** stream, in the order and
 * the precision (double weights, sequential sums) of sample.c.  A
 * non-finite logit, or every id suppressed, fails the call (sc_device_io)
 * and writes token -1.
 */
#define SC_SAMPLE_KERNEL "sc_sample"
#define SC_SAMPLE_MAX 4096
typedef struct sc_device_sampler {
  unsigned long long rng[4]; /* xoshiro256** state, advanced by each draw */
  int greedy;
  float temperature, top_p;
  int top_k;
  float penalty;             /* repetition penalty on seen ids (1: off) */
  int ban;                   /* an id suppressed for this draw, -1: none */
  unsigned long long mask;   /* device address of [n] bytes (bit 0 seen,
                              * bit 1 suppressed), 0: none; 64 bytes in all */
} sc_device_sampler;

/*
 * Per-call arguments of an entry point.
 *
 * Rows.  A call has n rows (tokens, or frames).  By default they are one
 * sequence of one session: row t sits at position pos + t of the state
 * block S.  row_pos and row_state place each row on its own: row t at
 * position row_pos[t], its state (KV caches) row_state[t] bytes from S,
 * so one call can carry the next token of several sessions, each at its
 * own position in its own caches.  Every row stores its keys and values
 * before any row attends, so rows sharing a state block see each other as
 * separate calls in row order would; such rows must have distinct
 * positions, and a ring cache must hold every key any of them sees.  The
 * runtime checks each row_pos against max_context before a call (device
 * targets cannot read them on the host); the C target checks them again.
 */
typedef struct sc_io {
  const int *ids;          /* [n, ids_cols] token ids (SC_IN_IDS) */
  const float *embeds;     /* [n, hidden] input embeddings (SC_IN_EMBEDS) */
  const float *hidden_in;  /* [n, hidden] auxiliary input, a row per input row, when the entry has one */
  int n;                   /* rows in this call, 1..max_tokens */
  int pos;                 /* position of the first row (when row_pos is NULL) */
  int step;                /* weight-set index for per-step entries */
  float *out;              /* [out_cols] (or [n * out_rows_mul, out_cols]) output, e.g. logits */
  float *hidden_out;       /* [hidden_cols] post-norm hidden of the last row
                            * ([n, hidden_cols]: every row's, with out_all_rows) */
  const int *row_pos;      /* [n] position of each row, or NULL: row t at pos + t */
  const long long *row_state; /* [n] byte offset from S of each row's state block
                            * (may be negative), or NULL: every row's is S */
} sc_io;

/* W: weight data base, S: session state, X: scratch of scratch_bytes.
 * Device targets: W, S, X and io's pointers are device addresses (the
 * generated host code only offsets them and passes them to kernels). */
typedef int (*sc_entry_fn)(const sc_kernels *K, const unsigned char *W,
                           unsigned char *S, unsigned char *X, const sc_io *io);

typedef struct sc_entry {
  const char *name;        /* "prefill", "decode", ... */
  sc_entry_fn fn;
  int input;               /* SC_IN_IDS or SC_IN_EMBEDS */
  int max_tokens;          /* largest n per call */
  int ids_cols;            /* token ids per row of io->ids (1 for LMs) */
  int out_cols;            /* floats per row written to io->out (0: none) */
  int out_all_rows;        /* 1: io->out gets n * out_rows_mul rows; 0: one row (the last) */
  int out_rows_mul;        /* output rows per input row when out_all_rows (1 for LMs) */
  int hidden_cols;         /* floats written to io->hidden_out (0: none) */
  unsigned long long scratch_bytes;
} sc_entry;

typedef struct sc_tensor_info {
  const char *name;        /* packed name, e.g. "layer0.qkv" */
  const char *source;      /* checkpoint tensors it was made from */
  int wtype;               /* SC_W_* */
  int sets, rows, cols;
  unsigned long long offset, bytes; /* in the weight file's data section */
} sc_tensor_info;

typedef struct sc_model_desc {
  unsigned magic;          /* SC_DESC_MAGIC: first, never moves */
  int abi_version;         /* SC_ABI_VERSION: second, never moves */
  const char *family;      /* "llm", "qwen3_tts", "moshi", "hybrid" */
  const char *model_type;  /* config.json model_type */
  const char *config_json; /* the checkpoint's config.json, minified */
  unsigned long long config_hash;
  const char *compiler_version;
  const char *target;      /* "cpu", "cuda" */
  const char *cpu_features;/* features the code was built for ("" = any) */
  int vocab, hidden, n_layers, max_context;
  const char *weight_file; /* file name, next to model.so */
  unsigned long long weight_bytes;    /* data section size */
  unsigned long long weight_checksum; /* sc_checksum64 of the data section */
  unsigned long long build_id;        /* also stored in the weight header */
  unsigned long long state_bytes;     /* per-session persistent state */
  int n_entries;
  const sc_entry *entries;
  int n_tensors;
  const sc_tensor_info *tensors;
  /* Device targets (zero on the CPU): the device code (CUDA: PTX text,
   * NUL-terminated; device_code_bytes excludes the NUL; Metal: a .metallib
   * when the build had Apple's toolchain, else empty), the source it was
   * compiled from (for humans; Metal compiles it at load when there is no
   * .metallib), and the kernels K->launch numbers. */
  const char *device_code;
  unsigned long long device_code_bytes;
  const char *device_source;
  const char *device_arch; /* e.g. "compute_80" */
  int n_kernels;
  const char *const *kernel_names;
  /* What the build left out of the checkpoint on purpose, for `speechc
   * inspect` (e.g. a vision tower beside a text model), or NULL. */
  const char *notes;
} sc_model_desc;

/* The weight file: a 4096-byte header then the data section. */
#define SC_WFILE_MAGIC "SCWGHT01"
#define SC_WFILE_VERSION 1
#define SC_WFILE_HEADER 4096
#define SC_WFILE_ALIGN 64
typedef struct sc_wfile_header {
  char magic[8];
  unsigned version;
  unsigned header_bytes;
  unsigned long long data_bytes;
  unsigned long long checksum;
  unsigned long long build_id;
  char model_type[32];
} sc_wfile_header;

#endif /* SC_ABI_H */
