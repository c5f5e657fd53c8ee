/*
 * ir.h — the speechc layer IR.
 *
 * A Module is one compiled model: its weight table, its persistent state
 * table and one Graph per entry point (prefill, decode, ...).  A Graph is a
 * topologically ordered array of nodes; a node is {op, dtype, shape, srcs,
 * params}.  Every value is 2-D [rows, cols]; rows is a literal, or an affine
 * function of the call's token count T: IR_T is T itself, IR_T_SCALED(m, d)
 * is T*m/d (a transposed conv's output, T*stride; a strided conv's, T/stride).
 * pass_specialize binds T to a constant where it can.
 * Heads, groups and positions are parameters of the ops that need them.
 *
 * Ownership: a Module owns everything reachable from it; ir_module_free()
 * releases it all.  Nodes refer to each other, to weights and to states by
 * index, so arrays may grow without invalidating references.
 */
#ifndef SC_IR_H
#define SC_IR_H

#include <stdint.h>
#include <stdio.h>

#include "sc_bands.h"
#include "speechc.h"

typedef enum OpKind {
#define OP(name, nsrc, flags, inplace, targets, doc) OP_##name,
#include "ops.def"
#undef OP
  OP_COUNT
} OpKind;

/* ops.def's operand slots: S_<OP>_<NAME> is the index of that input. */
enum {
#define SLOT(op, name, index) S_##op##_##name = index,
#include "ops.def"
#undef SLOT
};

/* ops.def's flags and targets columns. */
enum { F_FUSED = 1, F_VIEW = 2, F_LEAF = 4, F_STATE = 8 };
typedef enum IrTarget { IR_TARGET_CPU, IR_TARGET_CUDA, IR_TARGET_METAL, IR_TARGET_COUNT } IrTarget;
enum { T_CPU = 1 << IR_TARGET_CPU, T_CUDA = 1 << IR_TARGET_CUDA, T_METAL = 1 << IR_TARGET_METAL };

typedef enum DType { DT_F32, DT_I32, DT_BF16, DT_F16, DT_Q8_0, DT_Q4_0, DT_COUNT } DType;

enum { NORM_PLAIN, NORM_ONE_PLUS, NORM_ALPHA };
enum { ROPE_NEOX, ROPE_INTERLEAVED };
enum { OUT_LOGITS, OUT_HIDDEN };
enum { SET_FIXED, SET_STEP };

/* Rows that depend on T are negative: -1 - ((m-1) << 20 | (d-1)) is T*m/d,
 * so IR_T (m = d = 1) is -1 and equal row counts compare equal as integers.
 * ir_rows_scale() composes them, ir_rows_eval() binds T. */
#define IR_T (-1)       /* rows: the call's token count */
#define IR_T_SCALED(m, d) (-1 - ((((int64_t)(m) - 1) << 20) | ((int64_t)(d) - 1)))
#define IR_ROWS_ON_T(r) ((r) < 0)                                  /* depends on T */
#define IR_ROWS_MUL(r) ((int)(((-1 - (r)) >> 20) + 1))             /* m of T*m/d */
#define IR_ROWS_DIV(r) ((int)(((-1 - (r)) & ((1 << 20) - 1)) + 1)) /* d of T*m/d */
#define IR_ROWS_MAX_FACTOR (1 << 20)
#define IR_BUF_OUT(slot) (-2 - (int64_t)(slot)) /* IrNode.buf of a value placed in output slot OUT_* */
#define IR_BUF_IS_OUT(b) ((b) <= -2)
#define IR_BUF_SLOT(b) ((int)(-2 - (b)))
#define IR_MAX_SRC 8
#define IR_NAME 48

typedef struct IrParams {
  int group;            /* norms: columns per normalisation group */
  int norm_mode;        /* NORM_* */
  float eps;
  float scale;          /* attention scale */
  int heads, kv_heads, head_dim;
  int rot_dims, rope_mode;
  int window;           /* ATTENTION/KV_STORE: 0 = whole cache */
  int off;              /* SLICE: first column */
  int slot;             /* OUTPUT: OUT_* */
  int set_mode;         /* WEIGHT with sets: SET_FIXED / SET_STEP (with p.off) */
  int ksize;            /* IM2COL, DWCONV, OVERLAP_ADD: kernel size k */
  int dilation;         /* IM2COL, DWCONV: dilation d */
  int stride;           /* OVERLAP_ADD: stride s (output rows = s * input rows) */
  int block;            /* CONV1D: rows per piece; DELTA_RULE: chunk (0: token by token) */
  float lo, hi;         /* CLAMP: bounds */
  float alpha;          /* ELU: the slope of the negative side */
  int replicate;        /* IM2COL_STRIDED: pad_mode replicate (the state has a flag row) */
  int align;            /* ATTENTION: positions arrive in groups of align (ops.def); 0, 1: one by one */
  int experts, top_k;   /* TOPK_ROUTE, MOE_COMBINE: E, k */
  int renorm;           /* TOPK_ROUTE: the k weights divided by their sum */
  int tile;             /* any node, CPU: it and every later node run `tile` T-units at a
                         * time (ir_graph_tile); 0: the whole call at once */
} IrParams;

typedef struct IrNode {
  OpKind op;
  DType dtype;
  int64_t rows, cols;   /* rows may be IR_T */
  int src[IR_MAX_SRC];
  int nsrc;
  IrParams p;
  int weight;           /* WEIGHT: index into Module.weights */
  int state;            /* STATE: index into Module.states */
  char name[IR_NAME];   /* from the model's own names: "layer3.qkv" */
  /* set by pass_plan */
  int dead;
  int64_t buf;          /* byte offset in scratch, -1 for leaves and views,
                         * IR_BUF_OUT(slot) for a value written straight
                         * into the entry's output slot (its OUTPUT copies
                         * nothing) */
  int64_t ld;           /* row stride in elements */
  int64_t aux;          /* byte offset of a per-node temporary, -1 if none */
  int last_use;
} IrNode;

typedef struct Graph {
  char name[32];        /* entry point: "prefill", "decode" */
  int input;            /* SC_IN_IDS / SC_IN_EMBEDS */
  int max_tokens;       /* largest T per call */
  int exact;            /* every call has exactly max_tokens tokens */
  IrNode *nodes;
  int n_nodes, cap_nodes;
  int64_t scratch_bytes;/* set by pass_plan */
  int out_cols, hidden_cols;
  int out_all_rows;     /* io->out gets every row (T x out_cols), not just one */
  int pos_mul;          /* 0, 1: row t is at position io->pos + t; m > 1: at m * io->pos + t (a
                         * codec whose transformer runs m steps per frame: io->pos counts frames) */
  int row_states;       /* its conv and recurrent state ops (DWCONV, DELTA_RULE) step each row
                         * in the row's own state block (io->row_state[t], else the session's),
                         * one token at a time: a batched step of the Gated DeltaNet hybrids */
} Graph;

/* Where a weight's bytes come from: the rows of checkpoint tensors,
 * concatenated in order (sets, then rows), or a table computed at build.
 * A source gives `rows` rows of its tensor: rows 0.. in order, or with
 * run > 0 the rows row0 + (r / run) * stride + r % run for r < rows (runs
 * of `run` rows every `stride` rows: one half of each head of a packed
 * projection, e.g. the query rows of Qwen3.5's q_proj [query | gate]). */
typedef struct IrWeightSrc {
  const void *tensor;   /* const StTensor * (compiler) */
  int64_t rows;         /* rows taken from it */
  int64_t row0, run, stride; /* run 0: rows 0..rows-1 */
} IrWeightSrc;
/* The tensor row that row r of source s is. */
static inline int64_t ir_src_row(const IrWeightSrc *s, int64_t r) {
  return s->run > 0 ? s->row0 + r / s->run * s->stride + r % s->run : r;
}

/* Weights computed at build from checkpoint tensors (pass_pack):
 *   WGEN_ROPE      cos|sin table [max_ctx, rot_dims] (no tensor)
 *   WGEN_CODEBOOK  src 0 embedding_sum [K, D], src 1 cluster_usage [K]:
 *                  row r = embedding_sum[r] / max(cluster_usage[r], 1e-5)
 *   WGEN_CONV      a Conv1d weight [Cout, Cin, k] as the [Cout, k*Cin] matrix
 *                  IM2COL's rows multiply: W'[o, j*Cin + c] = W[o, c, j]
 *   WGEN_CONVT     a ConvTranspose1d weight [Cin, Cout, k] as the
 *                  [k*Cout, Cin] matrix OVERLAP_ADD's input comes from:
 *                  W''[j*Cout + o, c] = W[c, o, j]
 *   WGEN_NEG_EXP   -exp(x) of each element, in f32 (GDN's decay rates
 *                  -exp(A_log), which g = -exp(A_log) * softplus(..) needs)
 *   WGEN_SINPOS    sinusoidal positions [max_ctx, C] (no tensor), as moshi's
 *                  create_sin_embedding in f32: row p = gen_scale *
 *                  [cos(p*f_i) | sin(p*f_i)], f_i = 1 / gen_theta^(i/(C/2-1))
 *   WGEN_CONVT_DW  a depthwise ConvTranspose1d weight [C, 1, k] (groups = C)
 *                  as WGEN_CONVT's [k*C, C] matrix, zero off the diagonal:
 *                  W''[j*C + o, c] = (o == c) * W[c, 0, j]
 *   WGEN_ZERO      zeros (no tensor): the bias of a conv that has none
 *   WGEN_CONVT_POLY a ConvTranspose1d weight [Cin, Cout, k] of stride s =
 *                  gen_stride as the [s*Cout, n*Cin] matrix of the causal
 *                  Conv1d (n = ceil(k/s) taps, IM2COL's column order) whose
 *                  output row i, read as s rows of Cout, is the transposed
 *                  conv's rows i*s .. i*s + s-1 (its s phases):
 *                  W'[m*Cout + o, j*Cin + c] = W[c, o, m + (n-1-j)*s],
 *                  zero where that tap is k or more
 *   WGEN_REPEAT    a vector [C] repeated to [1, cols] (cols a multiple of
 *                  C): the bias of the phases above
 * gen_k is the kernel size k of the convs. */
enum { WGEN_NONE, WGEN_ROPE, WGEN_CODEBOOK, WGEN_CONV, WGEN_CONVT, WGEN_NEG_EXP, WGEN_SINPOS, WGEN_CONVT_DW,
       WGEN_ZERO, WGEN_CONVT_POLY, WGEN_REPEAT };
typedef struct IrWeight {
  char name[IR_NAME];
  char source[160];     /* checkpoint names it was made from, for humans */
  DType band;           /* stored type */
  int64_t sets, rows, cols;
  IrWeightSrc *src;     /* [cap_src] (16 from ir_weight_add; ir_weight_src_add grows it) */
  int n_src, cap_src;
  int gen;              /* WGEN_* */
  double gen_theta;
  double gen_scale;     /* WGEN_SINPOS: factor of every entry */
  int gen_rot;
  int gen_k;
  int gen_stride;       /* WGEN_CONVT_POLY: the stride s */
  int used;
  int64_t offset, bytes; /* set by pack */
} IrWeight;

typedef struct IrState {
  char name[IR_NAME];
  int64_t rows, cols;   /* f32 */
  int64_t offset;       /* byte offset in the session state */
} IrState;

typedef struct Module {
  char family[16];
  char model_type[32];
  const char *config_json;  /* borrowed from the checkpoint */
  uint64_t config_hash;
  int vocab, hidden, n_layers, max_context;
  IrWeight *weights; int n_weights, cap_weights;
  IrState *states; int n_states, cap_states;
  int64_t state_bytes;
  Graph *graphs; int n_graphs;
  char notes[256];          /* what the build left out, for inspect ("" = nothing) */
} Module;

extern const char *const ir_op_names[OP_COUNT];
extern const int ir_op_nsrc[OP_COUNT];
extern const int ir_op_flags[OP_COUNT];
extern const int ir_op_inplace[OP_COUNT];  /* input the result may overwrite, -1 */
extern const unsigned ir_op_targets[OP_COUNT]; /* T_* of the targets lowering it */
extern const char *const ir_target_names[IR_TARGET_COUNT]; /* "cpu", "cuda" */
extern const char *const ir_op_docs[OP_COUNT];
const char *ir_dtype_name(DType d);
/* Weight bands are the SC_W_* of runtime/sc_bands.h, whose traits (block,
 * bytes, names, CPU layout) every layer reads.  ir_wtype: the SC_W_* band
 * of a DType, -1 for one that is not a band (i32); ir_dtype_of_wtype: the
 * reverse, DT_COUNT for no band. */
int ir_wtype(DType d);
DType ir_dtype_of_wtype(int wtype);
int64_t ir_band_row_bytes(DType band, int64_t cols); /* bytes of one row */
/* Rows r times m/d (r a literal or T-relative, see IR_T_SCALED); 0 when a
 * literal is not divisible or a factor leaves the encodable range. */
int64_t ir_rows_scale(int64_t r, int m, int d);
/* Rows r for a call of T tokens (T a multiple of IR_ROWS_DIV(r)). */
int64_t ir_rows_eval(int64_t r, int64_t T);
/* Rows r as C text over the variable T: "T", "(T * 4)", "(T / 2)", "12".
 * Writes into buf and returns it. */
const char *ir_rows_text(int64_t r, char *buf, size_t size);
/* The multiple every call's T must be for g's rows to be whole (the lcm of
 * their divisors; 1 for graphs without strided rows). */
int ir_graph_t_align(const Graph *g);

/* The node from which g runs in tiles (the first live node with p.tile,
 * CPU only), and *units the T-units per tile; -1 when g runs whole.  A
 * tile applies only where it cannot change what is computed: a graph of
 * varying T (not exact) with every row written out (out_all_rows), and
 * from the head on only ops that stream (their state carries across
 * calls, or they are row by row), every row count T * m / d with d
 * dividing the tile, and nothing before the head read but weights, states
 * and values that own a buffer of such rows. */
int ir_graph_tile(const Graph *g, int *units);

void ir_module_init(Module *m);
void ir_module_free(Module *m);
Graph *ir_graph_new(Module *m, const char *name, int input, int max_tokens);
/* A graph whose calls always carry exactly n tokens (decode: n = 1). */
Graph *ir_graph_exact(Module *m, const char *name, int input, int n);
int ir_weight_add(Module *m, const char *name, DType band, int64_t sets,
                  int64_t rows, int64_t cols);
int ir_weight_find(const Module *m, const char *name);
/* Append a source to weight w (its rows follow the earlier sources'). */
void ir_weight_src_add(Module *m, int w, IrWeightSrc src);
int ir_state_add(Module *m, const char *name, int64_t rows, int64_t cols);

/* Builders.  Each asserts its shape rules and returns the node index. */
int ir_node(Graph *g, OpKind op, DType dt, int64_t rows, int64_t cols,
            const int *src, int nsrc, const char *name);
int ir_input_ids(Graph *g);
/* [T, cols] ids: `cols` per token (a codec's codebooks), io->ids row-major. */
int ir_input_codes(Graph *g, int64_t cols);
int ir_input_embeds(Graph *g, int64_t cols);
/* io->embeds read as one channel of T*per_token rows (a codec encoder's
 * samples: per_token samples a frame). */
int ir_input_samples(Graph *g, int64_t per_token);
/* The entry's extra input vector io->hidden_in [1, cols]. */
int ir_input_hidden(Graph *g, int64_t cols);
int ir_weight(Module *m, Graph *g, int w);
int ir_state(Module *m, Graph *g, int s);
int ir_embed(Graph *g, int table, int ids, const char *name);
int ir_linear(Graph *g, int x, int w, int bias, const char *name);
int ir_rmsnorm(Graph *g, int x, int w, int group, int mode, float eps, const char *name);
int ir_rope(Graph *g, int x, int heads, int head_dim, int rot_dims, int mode, int table, const char *name);
int ir_kv_store(Graph *g, int cache, int x, const char *name);
int ir_attention(Graph *g, int q, int kc, int vc, int gate, int heads, int kv_heads,
                 int head_dim, float scale, int window, const char *name);
int ir_binary(Graph *g, OpKind op, int a, int b, const char *name);
int ir_unary(Graph *g, OpKind op, int x, const char *name);
int ir_slice(Graph *g, int x, int off, int64_t cols, const char *name);
/* A view of x's rows [R, C] as [R*f, C/f] (ops.def RESHAPE). */
int ir_reshape(Graph *g, int x, int f, const char *name);
/* A view of one row of x; row -1 is the last (T-1). */
int ir_row(Graph *g, int x, int row, const char *name);
/* The leaf of one set of a weight with sets: mode SET_FIXED (set = value)
 * or SET_STEP (set = io->step + value, checked at run time). */
int ir_weight_set(Module *m, Graph *g, int w, int mode, int value);
int ir_output(Graph *g, int x, int slot);

/* The codec ops (ops.def has their exact semantics; CPU only).  A conv
 * state is an f32 STATE leaf of (k-1)*d rows (IM2COL, DWCONV) or k-s rows
 * (OVERLAP_ADD; -1 when k == s, which needs none) and x's channels; the
 * weights w, b, alpha, beta are f32 WEIGHT leaves ([C,k] for w, [1,C] for
 * the others).  A causal Conv1d of PyTorch weight W [Cout, Cin, k] is
 * ir_linear(g, ir_im2col(g, x, state, k, d, ..), W', bias) with W' the
 * WGEN_CONV weight [Cout, k*Cin]; a causal ConvTranspose1d of weight
 * [Cin, Cout, k] is ir_overlap_add(g, ir_linear(g, x, W'', -1), b, state,
 * k, s) with W'' the WGEN_CONVT weight [k*Cout, Cin]. */
int ir_im2col(Graph *g, int x, int state, int ksize, int dilation, const char *name);
/* A StreamingConv1d of stride s (ops.def IM2COL_STRIDED): state is an f32
 * STATE of (k-1)*d + 1 - s rows (+1 with replicate), or -1 when that is 0
 * without replicate.  Output rows: x's / s. */
int ir_im2col_strided(Graph *g, int x, int state, int ksize, int dilation, int stride, int replicate,
                      const char *name);
/* DWCONV: b = -1 for a conv without bias (GDN's). */
int ir_dwconv(Graph *g, int x, int w, int b, int state, int ksize, int dilation, const char *name);
/* y [s * rows(z), z cols / k] (rows T-relative when z's are). */
int ir_overlap_add(Graph *g, int z, int b, int state, int ksize, int stride, const char *name);
int ir_snake(Graph *g, int x, int alpha, int beta, const char *name);
int ir_layernorm(Graph *g, int x, int w, int b, float eps, const char *name);
int ir_clamp(Graph *g, int x, float lo, float hi, const char *name);
/* torch.nn.ELU(alpha) (ELU). */
int ir_elu(Graph *g, int x, float alpha, const char *name);
/* One stage of a residual VQ encode (VQ_NEAREST): the nearest row of the
 * f32 WEIGHT table to each row of x, after the earlier stages' codes
 * (codes [R, P], or -1 for the first stage); [R, P + 1 + D]: the codes,
 * this stage's code, the residual x - table[code]. */
int ir_vq_nearest(Graph *g, int x, int table, int codes, const char *name);
/* Attention node a (ATTENTION) takes its positions in groups of `align`
 * (ops.def): the window of position p shrinks by align-1 - p % align. */
void ir_attention_align(Graph *g, int a, int align);
/* x + table[position of each row] (POS_ADD; table an f32 WEIGHT of x's width). */
int ir_pos_add(Graph *g, int x, int table, const char *name);

/* The Gated DeltaNet ops (ops.def; CPU only).  L2NORM and GATED_RMSNORM
 * normalise groups of `group` columns (a head); w is an f32 WEIGHT [1,
 * group].  DELTA_RULE reads q, k [T, nk*dk], v [T, nv*dv], the log decay
 * g and beta [T, nv], and the recurrent state, an f32 STATE [nv, dk*dv];
 * nv is a multiple of nk (v-head h reads k-head h / (nv / nk)); the
 * result is [T, nv*dv]. */
int ir_l2norm(Graph *g, int x, int group, float eps, const char *name);
int ir_gated_rmsnorm(Graph *g, int x, int z, int w, int group, float eps, const char *name);
int ir_delta_rule(Graph *g, int q, int k, int v, int gate, int beta, int state, int nv, int nk, int dk,
                  float scale, const char *name);

/* The mixture-of-experts ops (ops.def; CPU only).  ir_topk_route: router
 * logits [T, E] -> a route [T, 2k].  ir_moe_combine: x [T, H] through the
 * k routed experts of wgu [E*2I, H] and wd [E*H, I] (WEIGHT leaves), plus
 * sigmoid(sg) * sh when sh [T, H] and sg [T, 1] are given (both or
 * neither: -1). */
int ir_topk_route(Graph *g, int logits, int k, int renorm, const char *name);
int ir_moe_combine(Graph *g, int x, int route, int wgu, int wd, int sh, int sg, int experts, const char *name);
/* Whether input k of n is read as a weight matrix in its band by a kernel
 * (LINEAR's W, EMBED's table, MOE_COMBINE's expert matrices): the inputs
 * that may stay quantized. */
int ir_reads_matrix(const IrNode *n, int k);

/* Checks every node: arity, source order, shapes, dtypes.  Returns SC_OK or
 * SC_EINPUT with "graph NAME: node N (op): problem" (a compiler bug). */
int ir_verify(const Module *m, const Graph *g, sc_error *err);
/* The inputs of LINEAR and its fused forms (NORM_LINEAR, LINEAR_ADD,
 * LINEAR_SWIGLU) by name, read through their slots: node indices, -1 where
 * the node has none.  ir_is_linear: op is one of them. */
typedef struct IrLinOperands {
  int x, w, nw, bias, res; /* input, matrix, norm weight, bias, residual */
} IrLinOperands;
int ir_is_linear(OpKind op);
IrLinOperands ir_lin_operands(const IrNode *n);
/* Every live node of m is lowered by `target` (ops.def's targets column):
 * SC_OK, or SC_EINPUT naming the first op that is not, its node and graph.
 * Codegen asks this before it prints anything. */
int ir_check_target(const Module *m, IrTarget target, sc_error *err);
/* Node whose buffer a value lives in: follows F_VIEW ops (SLICE, ROW, and
 * KV_STORE, which returns its cache). */
int ir_root(const Graph *g, int n);
/* Number of live nodes reading n. */
int ir_uses(const Graph *g, int n);

/* Readable text of a graph, one node per line. */
void ir_print(const Module *m, const Graph *g, FILE *out);

#define IR_ASSERT(c)                                                          \
  do {                                                                        \
    if (!(c)) ir_assert_fail(__FILE__, __LINE__, #c);                         \
  } while (0)
_Noreturn void ir_assert_fail(const char *file, int line, const char *expr);

#endif
