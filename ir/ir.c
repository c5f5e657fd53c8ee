/*
 * ir.c — IR tables (expanded from ops.def), the module and graph
 * containers, the node builders, the verifier and the text printer.
 */
#include "ir.h"

#include <stdlib.h>
#include <string.h>

const char *const ir_op_names[OP_COUNT] = {
#define OP(name, nsrc, flags, inplace, targets, doc) #name,
#include "ops.def"
#undef OP
};
const int ir_op_nsrc[OP_COUNT] = {
#define OP(name, nsrc, flags, inplace, targets, doc) nsrc,
#include "ops.def"
#undef OP
};
const int ir_op_flags[OP_COUNT] = {
#define OP(name, nsrc, flags, inplace, targets, doc) flags,
#include "ops.def"
#undef OP
};
const int ir_op_inplace[OP_COUNT] = {
#define OP(name, nsrc, flags, inplace, targets, doc) inplace,
#include "ops.def"
#undef OP
};
const unsigned ir_op_targets[OP_COUNT] = {
#define OP(name, nsrc, flags, inplace, targets, doc) targets,
#include "ops.def"
#undef OP
};
const char *const ir_op_docs[OP_COUNT] = {
#define OP(name, nsrc, flags, inplace, targets, doc) doc,
#include "ops.def"
#undef OP
};
const char *const ir_target_names[IR_TARGET_COUNT] = {"cpu", "cuda", "metal"};

_Noreturn void ir_assert_fail(const char *file, int line, const char *expr) {
  fprintf(stderr, "%s:%d: internal error: assertion failed: %s\n", file, line, expr);
  abort();
}

/* The band of each DType that can store a weight (the rest: -1). */
static const int dtype_wtype[DT_COUNT] = {
    [DT_F32] = SC_W_F32, [DT_I32] = -1,          [DT_BF16] = SC_W_BF16,
    [DT_F16] = SC_W_F16, [DT_Q8_0] = SC_W_Q8_0, [DT_Q4_0] = SC_W_Q4_0,
};

int ir_wtype(DType d) { return d >= 0 && d < DT_COUNT ? dtype_wtype[d] : -1; }

DType ir_dtype_of_wtype(int wtype) {
  for (int d = 0; d < DT_COUNT; d++)
    if (dtype_wtype[d] == wtype && wtype >= 0) return (DType)d;
  return DT_COUNT;
}

const char *ir_dtype_name(DType d) {
  if (d == DT_I32) return "i32";
  const sc_band_traits *t = sc_band(ir_wtype(d));
  return t ? t->name : "?";
}

int64_t ir_band_row_bytes(DType band, int64_t cols) {
  if (band == DT_I32) return cols * 4;
  return (int64_t)sc_band_row_bytes(ir_wtype(band), cols);
}

/* ---- rows as an affine function of T ------------------------------------ */

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int64_t ir_rows_scale(int64_t r, int m, int d) {
  if (m < 1 || d < 1) return 0;
  if (!IR_ROWS_ON_T(r)) return r * m % d ? 0 : r * m / d;
  int64_t num = (int64_t)IR_ROWS_MUL(r) * m, den = (int64_t)IR_ROWS_DIV(r) * d;
  const int64_t g = gcd64(num, den);
  num /= g;
  den /= g;
  if (num > IR_ROWS_MAX_FACTOR || den > IR_ROWS_MAX_FACTOR) return 0;
  return IR_T_SCALED(num, den);
}

int64_t ir_rows_eval(int64_t r, int64_t T) {
  return IR_ROWS_ON_T(r) ? T * IR_ROWS_MUL(r) / IR_ROWS_DIV(r) : r;
}

const char *ir_rows_text(int64_t r, char *buf, size_t size) {
  if (!IR_ROWS_ON_T(r)) snprintf(buf, size, "%lld", (long long)r);
  else if (IR_ROWS_MUL(r) == 1 && IR_ROWS_DIV(r) == 1) snprintf(buf, size, "T");
  else if (IR_ROWS_DIV(r) == 1) snprintf(buf, size, "(T * %d)", IR_ROWS_MUL(r));
  else if (IR_ROWS_MUL(r) == 1) snprintf(buf, size, "(T / %d)", IR_ROWS_DIV(r));
  else snprintf(buf, size, "(T * %d / %d)", IR_ROWS_MUL(r), IR_ROWS_DIV(r));
  return buf;
}

int ir_graph_t_align(const Graph *g) {
  int64_t align = 1;
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->dead || !IR_ROWS_ON_T(n->rows)) continue;
    const int64_t d = IR_ROWS_DIV(n->rows);
    align = align / gcd64(align, d) * d;
  }
  return align > IR_ROWS_MAX_FACTOR ? 0 : (int)align;
}

/* Ops that may run a call's rows in tiles: row by row, or streaming with
 * their state (kernels.h: pieces give the bits of one call, f32 GEMMs to
 * rounding). */
static int tile_op(OpKind op) {
  switch (op) {
  case OP_WEIGHT: case OP_STATE: case OP_LINEAR: case OP_LINEAR_ADD: case OP_NORM_LINEAR: case OP_ADD:
  case OP_MUL: case OP_SILU: case OP_SIGMOID: case OP_GELU: case OP_SOFTPLUS: case OP_SWIGLU: case OP_RMSNORM:
  case OP_LAYERNORM: case OP_GATED_RMSNORM: case OP_L2NORM: case OP_SLICE: case OP_RESHAPE: case OP_IM2COL:
  case OP_IM2COL_STRIDED: case OP_DWCONV: case OP_OVERLAP_ADD: case OP_SNAKE: case OP_CLAMP: case OP_ELU:
  case OP_CONV1D: case OP_OUTPUT:
    return 1;
  default:
    return 0;
  }
}

static int tile_rows(int64_t rows, int units) { return IR_ROWS_ON_T(rows) && units % IR_ROWS_DIV(rows) == 0; }

int ir_graph_tile(const Graph *g, int *units) {
  int head = -1;
  for (int i = 0; i < g->n_nodes && head < 0; i++)
    if (!g->nodes[i].dead && g->nodes[i].p.tile > 0) head = i;
  if (head < 0 || g->exact || !g->out_all_rows) return -1;
  const int u = g->nodes[head].p.tile;
  if (u >= g->max_tokens) return -1;
  for (int i = head; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->dead || n->op == OP_WEIGHT || n->op == OP_STATE) continue;
    if (!tile_op(n->op) || !tile_rows(n->rows, u)) return -1;
    for (int s = 0; s < n->nsrc; s++) {
      const IrNode *x = &g->nodes[n->src[s]];
      if (n->src[s] >= head || x->op == OP_WEIGHT || x->op == OP_STATE) continue;
      if ((ir_op_flags[x->op] & (F_LEAF | F_VIEW)) || !tile_rows(x->rows, u)) return -1;
    }
  }
  *units = u;
  return head;
}

static void *grow(void *p, int *cap, int need, size_t elem) {
  if (need <= *cap) return p;
  int n = *cap ? *cap * 2 : 64;
  while (n < need) n *= 2;
  p = realloc(p, (size_t)n * elem);
  IR_ASSERT(p);
  memset((char *)p + (size_t)*cap * elem, 0, (size_t)(n - *cap) * elem);
  *cap = n;
  return p;
}

void ir_module_init(Module *m) { memset(m, 0, sizeof *m); }

void ir_module_free(Module *m) {
  for (int i = 0; i < m->n_graphs; i++) free(m->graphs[i].nodes);
  free(m->graphs);
  for (int i = 0; i < m->n_weights; i++) free(m->weights[i].src);
  free(m->weights);
  free(m->states);
  memset(m, 0, sizeof *m);
}

Graph *ir_graph_new(Module *m, const char *name, int input, int max_tokens) {
  m->graphs = realloc(m->graphs, (size_t)(m->n_graphs + 1) * sizeof *m->graphs);
  IR_ASSERT(m->graphs);
  Graph *g = &m->graphs[m->n_graphs++];
  memset(g, 0, sizeof *g);
  snprintf(g->name, sizeof g->name, "%s", name);
  g->input = input;
  g->max_tokens = max_tokens;
  return g;
}

Graph *ir_graph_exact(Module *m, const char *name, int input, int n) {
  Graph *g = ir_graph_new(m, name, input, n);
  g->exact = 1;
  return g;
}

int ir_weight_add(Module *m, const char *name, DType band, int64_t sets,
                  int64_t rows, int64_t cols) {
  IR_ASSERT(ir_weight_find(m, name) < 0);
  m->weights = grow(m->weights, &m->cap_weights, m->n_weights + 1, sizeof *m->weights);
  IrWeight *w = &m->weights[m->n_weights];
  memset(w, 0, sizeof *w);
  snprintf(w->name, sizeof w->name, "%s", name);
  w->band = band;
  w->sets = sets;
  w->rows = rows;
  w->cols = cols;
  w->offset = -1;
  w->cap_src = 16;
  w->src = calloc((size_t)w->cap_src, sizeof *w->src);
  IR_ASSERT(w->src);
  return m->n_weights++;
}

void ir_weight_src_add(Module *m, int w, IrWeightSrc src) {
  IrWeight *wt = &m->weights[w];
  wt->src = grow(wt->src, &wt->cap_src, wt->n_src + 1, sizeof *wt->src);
  wt->src[wt->n_src++] = src;
}

int ir_weight_find(const Module *m, const char *name) {
  for (int i = 0; i < m->n_weights; i++)
    if (!strcmp(m->weights[i].name, name)) return i;
  return -1;
}

int ir_state_add(Module *m, const char *name, int64_t rows, int64_t cols) {
  m->states = grow(m->states, &m->cap_states, m->n_states + 1, sizeof *m->states);
  IrState *s = &m->states[m->n_states];
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", name);
  s->rows = rows;
  s->cols = cols;
  s->offset = -1;
  return m->n_states++;
}

/* ---- builders ----------------------------------------------------------- */

int ir_node(Graph *g, OpKind op, DType dt, int64_t rows, int64_t cols,
            const int *src, int nsrc, const char *name) {
  IR_ASSERT(nsrc <= IR_MAX_SRC);
  IR_ASSERT(ir_op_nsrc[op] < 0 || ir_op_nsrc[op] == nsrc);
  g->nodes = grow(g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes);
  IrNode *n = &g->nodes[g->n_nodes];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->dtype = dt;
  n->rows = rows;
  n->cols = cols;
  for (int i = 0; i < nsrc; i++) {
    IR_ASSERT(src[i] >= 0 && src[i] < g->n_nodes);
    n->src[i] = src[i];
  }
  n->nsrc = nsrc;
  n->weight = n->state = -1;
  n->buf = n->aux = -1;
  snprintf(n->name, sizeof n->name, "%s", name ? name : ir_op_names[op]);
  return g->n_nodes++;
}

#define N(i) (&g->nodes[(i)])

int ir_input_ids(Graph *g) { return ir_input_codes(g, 1); }
int ir_input_codes(Graph *g, int64_t cols) { return ir_node(g, OP_INPUT_IDS, DT_I32, IR_T, cols, NULL, 0, "ids"); }

int ir_input_embeds(Graph *g, int64_t cols) {
  return ir_node(g, OP_INPUT_EMBEDS, DT_F32, IR_T, cols, NULL, 0, "embeds");
}

int ir_input_samples(Graph *g, int64_t per_token) {
  IR_ASSERT(per_token >= 1 && per_token < IR_ROWS_MAX_FACTOR);
  return ir_node(g, OP_INPUT_EMBEDS, DT_F32, IR_T_SCALED(per_token, 1), 1, NULL, 0, "pcm");
}

int ir_input_hidden(Graph *g, int64_t cols) {
  return ir_node(g, OP_INPUT_HIDDEN, DT_F32, IR_T, cols, NULL, 0, "hidden_in");
}

int ir_weight_set(Module *m, Graph *g, int w, int mode, int value) {
  IrWeight *wt = &m->weights[w];
  IR_ASSERT(mode == SET_STEP || (value >= 0 && value < wt->sets));
  /* reuse the leaf when this graph already has one for this selection */
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == OP_WEIGHT && g->nodes[i].weight == w &&
        g->nodes[i].p.set_mode == mode && g->nodes[i].p.off == value)
      return i;
  char name[IR_NAME + 16];
  if (wt->sets == 1) snprintf(name, sizeof name, "%s", wt->name);
  else if (mode == SET_FIXED) snprintf(name, sizeof name, "%s.%d", wt->name, value);
  else snprintf(name, sizeof name, "%s.step%+d", wt->name, value);
  int n = ir_node(g, OP_WEIGHT, wt->band, wt->rows, wt->cols, NULL, 0, name);
  N(n)->weight = w;
  N(n)->p.set_mode = mode;
  N(n)->p.off = value;
  return n;
}

int ir_weight(Module *m, Graph *g, int w) {
  IR_ASSERT(m->weights[w].sets == 1);
  return ir_weight_set(m, g, w, SET_FIXED, 0);
}

int ir_state(Module *m, Graph *g, int s) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == OP_STATE && g->nodes[i].state == s) return i;
  int n = ir_node(g, OP_STATE, DT_F32, m->states[s].rows, m->states[s].cols, NULL, 0,
                  m->states[s].name);
  N(n)->state = s;
  return n;
}

int ir_embed(Graph *g, int table, int ids, const char *name) {
  IR_ASSERT(N(table)->op == OP_WEIGHT && N(ids)->dtype == DT_I32);
  int s[2] = {table, ids};
  return ir_node(g, OP_EMBED, DT_F32, N(ids)->rows, N(table)->cols, s, 2, name);
}

int ir_linear(Graph *g, int x, int w, int bias, const char *name) {
  IR_ASSERT(N(w)->op == OP_WEIGHT && N(x)->cols == N(w)->cols);
  int s[3] = {x, w, bias};
  return ir_node(g, OP_LINEAR, DT_F32, N(x)->rows, N(w)->rows, s, bias >= 0 ? 3 : 2, name);
}

int ir_rmsnorm(Graph *g, int x, int w, int group, int mode, float eps, const char *name) {
  IR_ASSERT(N(w)->cols == group && N(x)->cols % group == 0);
  int s[2] = {x, w};
  int n = ir_node(g, OP_RMSNORM, DT_F32, N(x)->rows, N(x)->cols, s, 2, name);
  N(n)->p.group = group;
  N(n)->p.norm_mode = mode;
  N(n)->p.eps = eps;
  return n;
}

int ir_rope(Graph *g, int x, int heads, int head_dim, int rot_dims, int mode, int table,
            const char *name) {
  IR_ASSERT(N(x)->cols == (int64_t)heads * head_dim && rot_dims <= head_dim && rot_dims % 2 == 0);
  IR_ASSERT(N(table)->op == OP_WEIGHT && N(table)->cols == rot_dims);
  int s[2] = {x, table};
  int n = ir_node(g, OP_ROPE, DT_F32, N(x)->rows, N(x)->cols, s, 2, name);
  IrParams *p = &N(n)->p;
  p->heads = heads;
  p->head_dim = head_dim;
  p->rot_dims = rot_dims;
  p->rope_mode = mode;
  return n;
}

int ir_kv_store(Graph *g, int cache, int x, const char *name) {
  IR_ASSERT(N(cache)->op == OP_STATE && N(cache)->cols == N(x)->cols);
  int s[2] = {cache, x};
  return ir_node(g, OP_KV_STORE, DT_F32, N(cache)->rows, N(cache)->cols, s, 2, name);
}

int ir_attention(Graph *g, int q, int kc, int vc, int gate, int heads, int kv_heads,
                 int head_dim, float scale, int window, const char *name) {
  IR_ASSERT(N(q)->cols == (int64_t)heads * head_dim);
  IR_ASSERT(N(kc)->cols == (int64_t)kv_heads * head_dim && heads % kv_heads == 0);
  int s[4] = {q, kc, vc, gate};
  int n = ir_node(g, OP_ATTENTION, DT_F32, N(q)->rows, N(q)->cols, s, gate >= 0 ? 4 : 3, name);
  IrParams *p = &N(n)->p;
  p->heads = heads;
  p->kv_heads = kv_heads;
  p->head_dim = head_dim;
  p->scale = scale;
  p->window = window;
  return n;
}

int ir_binary(Graph *g, OpKind op, int a, int b, const char *name) {
  IR_ASSERT(N(a)->cols == N(b)->cols);
  int s[2] = {a, b};
  return ir_node(g, op, DT_F32, N(a)->rows, N(a)->cols, s, 2, name);
}

int ir_unary(Graph *g, OpKind op, int x, const char *name) {
  int64_t cols = op == OP_SWIGLU ? N(x)->cols / 2 : N(x)->cols;
  return ir_node(g, op, DT_F32, N(x)->rows, cols, &x, 1, name);
}

int ir_slice(Graph *g, int x, int off, int64_t cols, const char *name) {
  IR_ASSERT(off >= 0 && off + cols <= N(x)->cols);
  int n = ir_node(g, OP_SLICE, N(x)->dtype, N(x)->rows, cols, &x, 1, name);
  N(n)->p.off = off;
  return n;
}

int ir_reshape(Graph *g, int x, int f, const char *name) {
  const int64_t rows = ir_rows_scale(N(x)->rows, f, 1);
  IR_ASSERT(f >= 1 && N(x)->cols % f == 0 && rows != 0);
  int n = ir_node(g, OP_RESHAPE, N(x)->dtype, rows, N(x)->cols / f, &x, 1, name);
  N(n)->p.stride = f;
  return n;
}

int ir_row(Graph *g, int x, int row, const char *name) {
  IR_ASSERT(row >= -1 && (IR_ROWS_ON_T(N(x)->rows) || row < N(x)->rows));
  int n = ir_node(g, OP_ROW, N(x)->dtype, 1, N(x)->cols, &x, 1, name);
  N(n)->p.off = row;
  return n;
}

int ir_output(Graph *g, int x, int slot) {
  int n = ir_node(g, OP_OUTPUT, DT_F32, N(x)->rows, N(x)->cols, &x, 1,
                  slot == OUT_LOGITS ? "out.logits" : "out.hidden");
  N(n)->p.slot = slot;
  if (slot == OUT_LOGITS) {
    g->out_cols = (int)N(x)->cols;
    g->out_all_rows = N(x)->rows != 1;
  }
  else g->hidden_cols = (int)N(x)->cols;
  return n;
}

/* ---- codec builders ------------------------------------------------------ */

/* A conv state: an f32 STATE of `rows` rows and x's channels. */
static int is_conv_state(const Graph *g, int s, int64_t rows, int64_t cols) {
  const IrNode *n = &g->nodes[s];
  return n->op == OP_STATE && n->rows == rows && n->cols == cols;
}

/* An f32 weight of [rows, cols] (a per-channel vector or a depthwise kernel). */
static int is_f32_weight(const Graph *g, int w, int64_t rows, int64_t cols) {
  const IrNode *n = &g->nodes[w];
  return n->op == OP_WEIGHT && n->dtype == DT_F32 && n->rows == rows && n->cols == cols;
}

int ir_im2col(Graph *g, int x, int state, int ksize, int dilation, const char *name) {
  IR_ASSERT(ksize >= 2 && dilation >= 1);
  IR_ASSERT(is_conv_state(g, state, (int64_t)(ksize - 1) * dilation, N(x)->cols));
  int s[2] = {x, state};
  int n = ir_node(g, OP_IM2COL, DT_F32, N(x)->rows, ksize * N(x)->cols, s, 2, name);
  N(n)->p.ksize = ksize;
  N(n)->p.dilation = dilation;
  return n;
}

int ir_im2col_strided(Graph *g, int x, int state, int ksize, int dilation, int stride, int replicate,
                      const char *name) {
  const int64_t P = (int64_t)(ksize - 1) * dilation + 1 - stride;
  IR_ASSERT(ksize >= 1 && dilation >= 1 && stride >= 1 && P >= 0);
  const int has_state = P > 0 || replicate;
  IR_ASSERT(has_state ? is_conv_state(g, state, P + (replicate ? 1 : 0), N(x)->cols) : state < 0);
  int s[2] = {x, state};
  int n = ir_node(g, OP_IM2COL_STRIDED, DT_F32, ir_rows_scale(N(x)->rows, 1, stride), ksize * N(x)->cols, s,
                  has_state ? 2 : 1, name);
  N(n)->p.ksize = ksize;
  N(n)->p.dilation = dilation;
  N(n)->p.stride = stride;
  N(n)->p.replicate = replicate;
  return n;
}

int ir_dwconv(Graph *g, int x, int w, int b, int state, int ksize, int dilation, const char *name) {
  const int64_t C = N(x)->cols;
  IR_ASSERT(ksize >= 2 && dilation >= 1);
  IR_ASSERT(is_f32_weight(g, w, C, ksize) && (b < 0 || is_f32_weight(g, b, 1, C)));
  IR_ASSERT(is_conv_state(g, state, (int64_t)(ksize - 1) * dilation, C));
  int s[4];
  s[S_DWCONV_X] = x, s[S_DWCONV_W] = w, s[S_DWCONV_STATE] = state, s[S_DWCONV_B] = b;
  int n = ir_node(g, OP_DWCONV, DT_F32, N(x)->rows, C, s, b >= 0 ? 4 : 3, name);
  N(n)->p.ksize = ksize;
  N(n)->p.dilation = dilation;
  return n;
}

int ir_overlap_add(Graph *g, int z, int b, int state, int ksize, int stride, const char *name) {
  IR_ASSERT(stride >= 1 && ksize >= stride && N(z)->cols % ksize == 0);
  const int64_t C = N(z)->cols / ksize, rows = ir_rows_scale(N(z)->rows, stride, 1);
  IR_ASSERT(rows != 0 && is_f32_weight(g, b, 1, C));
  IR_ASSERT(ksize == stride ? state < 0 : is_conv_state(g, state, ksize - stride, C));
  int s[3] = {z, b, state};
  int n = ir_node(g, OP_OVERLAP_ADD, DT_F32, rows, C, s, state >= 0 ? 3 : 2, name);
  N(n)->p.ksize = ksize;
  N(n)->p.stride = stride;
  return n;
}

int ir_snake(Graph *g, int x, int alpha, int beta, const char *name) {
  IR_ASSERT(is_f32_weight(g, alpha, 1, N(x)->cols) && is_f32_weight(g, beta, 1, N(x)->cols));
  int s[3] = {x, alpha, beta};
  return ir_node(g, OP_SNAKE, DT_F32, N(x)->rows, N(x)->cols, s, 3, name);
}

int ir_layernorm(Graph *g, int x, int w, int b, float eps, const char *name) {
  IR_ASSERT(is_f32_weight(g, w, 1, N(x)->cols) && is_f32_weight(g, b, 1, N(x)->cols));
  IR_ASSERT(eps >= 0 && eps - eps == 0);
  int s[3] = {x, w, b};
  int n = ir_node(g, OP_LAYERNORM, DT_F32, N(x)->rows, N(x)->cols, s, 3, name);
  N(n)->p.eps = eps;
  return n;
}

int ir_pos_add(Graph *g, int x, int table, const char *name) {
  IR_ASSERT(N(table)->op == OP_WEIGHT && N(table)->cols == N(x)->cols);
  int s[2] = {x, table};
  return ir_node(g, OP_POS_ADD, DT_F32, N(x)->rows, N(x)->cols, s, 2, name);
}

int ir_clamp(Graph *g, int x, float lo, float hi, const char *name) {
  IR_ASSERT(lo <= hi && lo - lo == 0 && hi - hi == 0);
  int n = ir_node(g, OP_CLAMP, DT_F32, N(x)->rows, N(x)->cols, &x, 1, name);
  N(n)->p.lo = lo;
  N(n)->p.hi = hi;
  return n;
}

int ir_elu(Graph *g, int x, float alpha, const char *name) {
  IR_ASSERT(alpha - alpha == 0);
  int n = ir_node(g, OP_ELU, DT_F32, N(x)->rows, N(x)->cols, &x, 1, name);
  N(n)->p.alpha = alpha;
  return n;
}

int ir_vq_nearest(Graph *g, int x, int table, int codes, const char *name) {
  const int64_t D = N(x)->cols, P = codes < 0 ? 0 : N(codes)->cols;
  IR_ASSERT(N(table)->op == OP_WEIGHT && N(table)->dtype == DT_F32 && N(table)->cols == D);
  IR_ASSERT(codes < 0 || N(codes)->rows == N(x)->rows);
  int s[3];
  s[S_VQ_NEAREST_X] = x, s[S_VQ_NEAREST_TABLE] = table, s[S_VQ_NEAREST_CODES] = codes;
  return ir_node(g, OP_VQ_NEAREST, DT_F32, N(x)->rows, P + 1 + D, s, codes < 0 ? 2 : 3, name);
}

void ir_attention_align(Graph *g, int a, int align) {
  IR_ASSERT(N(a)->op == OP_ATTENTION && align >= 1 && (N(a)->p.window == 0 || N(a)->p.window >= align));
  N(a)->p.align = align;
}

/* ---- Gated DeltaNet builders --------------------------------------------- */

int ir_l2norm(Graph *g, int x, int group, float eps, const char *name) {
  IR_ASSERT(group >= 1 && N(x)->cols % group == 0 && eps >= 0 && eps - eps == 0);
  int n = ir_node(g, OP_L2NORM, DT_F32, N(x)->rows, N(x)->cols, &x, 1, name);
  N(n)->p.group = group;
  N(n)->p.eps = eps;
  return n;
}

int ir_gated_rmsnorm(Graph *g, int x, int z, int w, int group, float eps, const char *name) {
  IR_ASSERT(group >= 1 && N(x)->cols % group == 0 && eps >= 0 && eps - eps == 0);
  IR_ASSERT(N(z)->cols == N(x)->cols && N(z)->rows == N(x)->rows && is_f32_weight(g, w, 1, group));
  int s[3];
  s[S_GATED_RMSNORM_X] = x, s[S_GATED_RMSNORM_Z] = z, s[S_GATED_RMSNORM_W] = w;
  int n = ir_node(g, OP_GATED_RMSNORM, DT_F32, N(x)->rows, N(x)->cols, s, 3, name);
  N(n)->p.group = group;
  N(n)->p.eps = eps;
  return n;
}

int ir_delta_rule(Graph *g, int q, int k, int v, int gate, int beta, int state, int nv, int nk, int dk,
                  float scale, const char *name) {
  IR_ASSERT(nk >= 1 && nv >= nk && nv % nk == 0 && dk >= 1 && N(v)->cols % nv == 0);
  const int64_t dv = N(v)->cols / nv;
  IR_ASSERT(N(q)->cols == (int64_t)nk * dk && N(k)->cols == (int64_t)nk * dk);
  IR_ASSERT(N(gate)->cols == nv && N(beta)->cols == nv);
  IR_ASSERT(is_conv_state(g, state, nv, dk * dv));
  int s[6];
  s[S_DELTA_RULE_Q] = q, s[S_DELTA_RULE_K] = k, s[S_DELTA_RULE_V] = v;
  s[S_DELTA_RULE_G] = gate, s[S_DELTA_RULE_BETA] = beta, s[S_DELTA_RULE_STATE] = state;
  int n = ir_node(g, OP_DELTA_RULE, DT_F32, N(q)->rows, N(v)->cols, s, 6, name);
  IrParams *p = &N(n)->p;
  p->heads = nv;
  p->kv_heads = nk;
  p->head_dim = dk;
  p->scale = scale;
  return n;
}

int ir_topk_route(Graph *g, int logits, int k, int renorm, const char *name) {
  IR_ASSERT(k >= 1 && k <= N(logits)->cols);
  int n = ir_node(g, OP_TOPK_ROUTE, DT_F32, N(logits)->rows, 2 * k, &logits, 1, name);
  N(n)->p.experts = (int)N(logits)->cols;
  N(n)->p.top_k = k;
  N(n)->p.renorm = renorm;
  return n;
}

int ir_moe_combine(Graph *g, int x, int route, int wgu, int wd, int sh, int sg, int experts, const char *name) {
  IR_ASSERT(N(wgu)->op == OP_WEIGHT && N(wd)->op == OP_WEIGHT && experts >= 1 && (sh < 0) == (sg < 0));
  int s[6];
  s[S_MOE_COMBINE_X] = x, s[S_MOE_COMBINE_ROUTE] = route, s[S_MOE_COMBINE_WGU] = wgu, s[S_MOE_COMBINE_WD] = wd;
  s[S_MOE_COMBINE_SH] = sh, s[S_MOE_COMBINE_SG] = sg;
  int n = ir_node(g, OP_MOE_COMBINE, DT_F32, N(x)->rows, N(x)->cols, s, sh >= 0 ? 6 : 4, name);
  N(n)->p.experts = experts;
  N(n)->p.top_k = (int)(N(route)->cols / 2);
  return n;
}

int ir_reads_matrix(const IrNode *n, int k) {
  if (ir_is_linear(n->op)) return n->src[k] == ir_lin_operands(n).w;
  if (n->op == OP_EMBED) return k == S_EMBED_TABLE;
  if (n->op == OP_CONV1D) return k == S_CONV1D_W; /* the GEMM of its im2col rows (kernels.c conv1d) */
  if (n->op == OP_MOE_COMBINE) return k == S_MOE_COMBINE_WGU || k == S_MOE_COMBINE_WD;
  return 0;
}

int ir_is_linear(OpKind op) {
  return op == OP_LINEAR || op == OP_NORM_LINEAR || op == OP_LINEAR_ADD || op == OP_LINEAR_SWIGLU;
}

IrLinOperands ir_lin_operands(const IrNode *n) {
  IrLinOperands o = {-1, -1, -1, -1, -1};
  const int *s = n->src, k = n->nsrc;
  switch (n->op) {
  case OP_LINEAR:
    o.x = s[S_LINEAR_X], o.w = s[S_LINEAR_W];
    if (k > S_LINEAR_B) o.bias = s[S_LINEAR_B];
    break;
  case OP_NORM_LINEAR:
    o.x = s[S_NORM_LINEAR_X], o.w = s[S_NORM_LINEAR_W], o.nw = s[S_NORM_LINEAR_NW];
    if (k > S_NORM_LINEAR_B) o.bias = s[S_NORM_LINEAR_B];
    break;
  case OP_LINEAR_ADD:
    o.x = s[S_LINEAR_ADD_X], o.w = s[S_LINEAR_ADD_W], o.res = s[S_LINEAR_ADD_R];
    break;
  case OP_LINEAR_SWIGLU:
    o.x = s[S_LINEAR_SWIGLU_X], o.w = s[S_LINEAR_SWIGLU_W];
    if (k > S_LINEAR_SWIGLU_NW) o.nw = s[S_LINEAR_SWIGLU_NW];
    break;
  default:
    IR_ASSERT(!"not a linear");
  }
  return o;
}

int ir_root(const Graph *g, int n) {
  while (ir_op_flags[g->nodes[n].op] & F_VIEW) n = g->nodes[n].src[0];
  return n;
}

int ir_uses(const Graph *g, int n) {
  int uses = 0;
  for (int i = n + 1; i < g->n_nodes; i++) {
    if (g->nodes[i].dead) continue;
    for (int s = 0; s < g->nodes[i].nsrc; s++) uses += g->nodes[i].src[s] == n;
  }
  return uses;
}

/* ---- verifier ----------------------------------------------------------- */

#define VFAIL(...)                                                            \
  do {                                                                        \
    char why_[256];                                                           \
    snprintf(why_, sizeof why_, __VA_ARGS__);                                 \
    return sc_fail(err, SC_EINPUT, "internal error: graph %s: node %d (%s %s): %s", \
                   g->name, i, ir_op_names[n->op], n->name, why_);           \
  } while (0)

static int rows_match(int64_t a, int64_t b) { return a == b; }

/* Input slot NAME of op OP (ops.def) of node n, in the verifier loop. */
#define S(OP, NAME) (&g->nodes[n->src[S_##OP##_##NAME]])

int ir_verify(const Module *m, const Graph *g, sc_error *err) {
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->dead) continue;
    if (n->op < 0 || n->op >= OP_COUNT) VFAIL("bad op");
    int want = ir_op_nsrc[n->op];
    if (want >= 0 && n->nsrc != want) VFAIL("has %d inputs, expected %d", n->nsrc, want);
    for (int s = 0; s < n->nsrc; s++) {
      if (n->src[s] < 0 || n->src[s] >= i) VFAIL("input %d refers to node %d (not earlier)", s, n->src[s]);
      if (g->nodes[n->src[s]].dead) VFAIL("input %d refers to dead node %d", s, n->src[s]);
    }
    const IrNode *a = n->nsrc > 0 ? &g->nodes[n->src[0]] : NULL;
    const IrNode *b = n->nsrc > 1 ? &g->nodes[n->src[1]] : NULL;
    if (!IR_ROWS_ON_T(n->rows) && n->rows < 1) VFAIL("rows %lld", (long long)n->rows);
    if (IR_ROWS_ON_T(n->rows) && g->max_tokens % IR_ROWS_DIV(n->rows))
      VFAIL("rows T/%d with max_tokens %d (not a multiple)", IR_ROWS_DIV(n->rows), g->max_tokens);
    if (n->cols < 1) VFAIL("cols %lld", (long long)n->cols);
    switch (n->op) {
    case OP_WEIGHT:
      if (n->weight < 0 || n->weight >= m->n_weights) VFAIL("no weight");
      if (m->weights[n->weight].rows != n->rows || m->weights[n->weight].cols != n->cols)
        VFAIL("shape differs from weight %s", m->weights[n->weight].name);
      break;
    case OP_STATE:
      if (n->state < 0 || n->state >= m->n_states) VFAIL("no state");
      break;
    case OP_EMBED: {
      const IrNode *tab = S(EMBED, TABLE), *ids = S(EMBED, IDS);
      if (tab->op != OP_WEIGHT || ids->dtype != DT_I32) VFAIL("expects (weight, ids)");
      if (n->cols != tab->cols || !rows_match(n->rows, ids->rows)) VFAIL("shape");
      break;
    }
    case OP_LINEAR: case OP_NORM_LINEAR: case OP_LINEAR_ADD: case OP_LINEAR_SWIGLU: {
      /* required inputs: x, W, and the norm weight or residual; one more optional */
      const int need = n->op == OP_NORM_LINEAR || n->op == OP_LINEAR_ADD ? 3 : 2;
      const int most = n->op == OP_LINEAR_ADD ? 3 : need + 1;
      if (n->nsrc < need || n->nsrc > most) VFAIL("has %d inputs, expected %d to %d", n->nsrc, need, most);
      const IrLinOperands o = ir_lin_operands(n);
      const IrNode *x = &g->nodes[o.x], *w = &g->nodes[o.w];
      if (w->op != OP_WEIGHT) VFAIL("weight input is %s", ir_op_names[w->op]);
      if (w->cols != x->cols) VFAIL("x has %lld cols, weight %s has %lld", (long long)x->cols, w->name, (long long)w->cols);
      int64_t out = n->op == OP_LINEAR_SWIGLU ? w->rows / 2 : w->rows;
      if (n->cols != out || !rows_match(n->rows, x->rows)) VFAIL("output shape");
      if (n->op == OP_NORM_LINEAR && g->nodes[o.nw].cols != x->cols) VFAIL("norm weight width");
      if (o.res >= 0 && g->nodes[o.res].cols != n->cols) VFAIL("residual width");
      if (n->op == OP_LINEAR_SWIGLU && o.nw >= 0 &&
          (n->p.group < 1 || x->cols % n->p.group || g->nodes[o.nw].cols != n->p.group))
        VFAIL("norm group %d", n->p.group);
      break;
    }
    case OP_ROPE_ATTENTION: {
      /* q, k, v, kc, vc, table, and the head norms qn, kn or neither */
      if (n->nsrc != S_ROPE_ATTENTION_QN && n->nsrc != S_ROPE_ATTENTION_KN + 1)
        VFAIL("has %d inputs, expected %d or %d", n->nsrc, S_ROPE_ATTENTION_QN, S_ROPE_ATTENTION_KN + 1);
      const IrParams *p = &n->p;
      const int64_t qd = (int64_t)p->heads * p->head_dim, kd = (int64_t)p->kv_heads * p->head_dim;
      const IrNode *q = S(ROPE_ATTENTION, Q), *k = S(ROPE_ATTENTION, K), *v = S(ROPE_ATTENTION, V);
      const IrNode *kc = S(ROPE_ATTENTION, KC), *vc = S(ROPE_ATTENTION, VC), *tab = S(ROPE_ATTENTION, TABLE);
      if (IR_ROWS_ON_T(n->rows) || n->rows > 4 || q->rows != n->rows || k->rows != n->rows || v->rows != n->rows)
        VFAIL("formed for a fixed count of at most 4 tokens");
      if (p->kv_heads < 1 || p->heads % p->kv_heads) VFAIL("GQA ratio");
      if (q->cols != qd || n->cols != qd) VFAIL("q width");
      if (k->cols != kd || v->cols != kd) VFAIL("k/v width");
      if (kc->op != OP_STATE || vc->op != OP_STATE || kc->cols != kd || vc->cols != kd) VFAIL("caches");
      if (tab->op != OP_WEIGHT || tab->cols != p->rot_dims || p->rot_dims > p->head_dim) VFAIL("rope table");
      if (n->nsrc > S_ROPE_ATTENTION_QN && (p->group != p->head_dim || S(ROPE_ATTENTION, QN)->cols != p->head_dim ||
                           S(ROPE_ATTENTION, KN)->cols != p->head_dim))
        VFAIL("head norm weights");
      break;
    }
    case OP_RMSNORM: case OP_NORM_ROPE: {
      const int norm_rope = n->op == OP_NORM_ROPE;
      const IrNode *x = norm_rope ? S(NORM_ROPE, X) : S(RMSNORM, X), *nw = norm_rope ? S(NORM_ROPE, NW) : S(RMSNORM, NW);
      if (norm_rope && (n->p.group != n->p.head_dim || S(NORM_ROPE, TABLE)->op != OP_WEIGHT))
        VFAIL("norm group must be the head");
      if (n->p.group < 1 || x->cols % n->p.group || nw->cols != n->p.group) VFAIL("group %d", n->p.group);
      if (n->cols != x->cols) VFAIL("shape");
      break;
    }
    case OP_POS_ADD:
      if (S(POS_ADD, TABLE)->op != OP_WEIGHT || S(POS_ADD, TABLE)->cols != n->cols ||
          S(POS_ADD, X)->cols != n->cols || S(POS_ADD, TABLE)->dtype != DT_F32)
        VFAIL("position table");
      break;
    case OP_ROPE:
      if (S(ROPE, TABLE)->op != OP_WEIGHT || S(ROPE, TABLE)->cols != n->p.rot_dims) VFAIL("rope table");
      if (S(ROPE, X)->cols != (int64_t)n->p.heads * n->p.head_dim) VFAIL("heads x head_dim");
      break;
    case OP_KV_STORE:
      if (S(KV_STORE, CACHE)->op != OP_STATE || S(KV_STORE, CACHE)->cols != S(KV_STORE, X)->cols)
        VFAIL("cache/x width");
      break;
    case OP_ATTENTION:
      if (n->nsrc < S_ATTENTION_GATE || n->nsrc > S_ATTENTION_GATE + 1)
        VFAIL("has %d inputs, expected %d or %d", n->nsrc, S_ATTENTION_GATE, S_ATTENTION_GATE + 1);
      if (S(ATTENTION, Q)->cols != (int64_t)n->p.heads * n->p.head_dim) VFAIL("q width");
      if (S(ATTENTION, KC)->cols != (int64_t)n->p.kv_heads * n->p.head_dim) VFAIL("kv width");
      if (n->p.kv_heads < 1 || n->p.heads % n->p.kv_heads) VFAIL("GQA ratio");
      if (n->p.align > 1 && n->p.window > 0 && n->p.window < n->p.align)
        VFAIL("window %d is shorter than its position groups (align %d)", n->p.window, n->p.align);
      if (n->p.align > 1 && !n->p.window) VFAIL("align %d without a window", n->p.align);
      break;
    case OP_ADD: case OP_MUL:
      /* a weight operand is read as floats; b may be an f32 [1,C] row
       * broadcast over a's rows (LayerScale's gamma, a bias row) */
      for (int q = 0; q < 2; q++) {
        const IrNode *o = q ? b : a;
        if (o->op == OP_WEIGHT && o->dtype != DT_F32)
          VFAIL("%sweight %s is %s, not f32", q && b->rows == 1 && a->rows != 1 ? "broadcast " : "", o->name,
                ir_dtype_name(o->dtype));
      }
      if (b->rows == 1 && a->rows != 1 && a->cols == b->cols) {
        if (n->rows != a->rows || n->cols != a->cols) VFAIL("shape");
        break;
      }
      if (a->cols != b->cols || a->rows != b->rows) VFAIL("operand shapes differ");
      break;
    case OP_IM2COL: case OP_DWCONV: {
      const int dw = n->op == OP_DWCONV;
      if (dw && n->nsrc != S_DWCONV_B && n->nsrc != S_DWCONV_B + 1)
        VFAIL("has %d inputs, expected %d or %d (x, taps, state[, bias])", n->nsrc, S_DWCONV_B, S_DWCONV_B + 1);
      const IrNode *x = dw ? S(DWCONV, X) : S(IM2COL, X), *st = dw ? S(DWCONV, STATE) : S(IM2COL, STATE);
      const int k = n->p.ksize, d = n->p.dilation;
      if (k < 2 || d < 1) VFAIL("kernel size %d, dilation %d (need k >= 2, d >= 1; a k = 1 conv is a LINEAR)", k, d);
      if (st->op != OP_STATE || st->rows != (int64_t)(k - 1) * d || st->cols != x->cols)
        VFAIL("state %s is %s [%lld, %lld], expected a state [%lld, %lld] ((k-1)*d rows, x's channels)", st->name,
              ir_op_names[st->op], (long long)st->rows, (long long)st->cols, (long long)(k - 1) * d,
              (long long)x->cols);
      if (!rows_match(n->rows, x->rows) || n->cols != (dw ? 1 : k) * x->cols) VFAIL("output shape");
      if (dw) {
        const IrNode *w = S(DWCONV, W);
        if (w->op != OP_WEIGHT || w->dtype != DT_F32 || w->rows != x->cols || w->cols != k)
          VFAIL("taps %s: expected an f32 weight [%lld, %d]", w->name, (long long)x->cols, k);
        if (n->nsrc > S_DWCONV_B) {
          const IrNode *bb = S(DWCONV, B);
          if (bb->op != OP_WEIGHT || bb->dtype != DT_F32 || bb->rows != 1 || bb->cols != x->cols)
            VFAIL("bias %s: expected an f32 weight [1, %lld]", bb->name, (long long)x->cols);
        }
      }
      break;
    }
    case OP_IM2COL_STRIDED: {
      const IrNode *x = S(IM2COL_STRIDED, X);
      const int k = n->p.ksize, d = n->p.dilation, s = n->p.stride;
      const int64_t P = (int64_t)(k - 1) * d + 1 - s;
      if (k < 1 || d < 1 || s < 1 || P < 0)
        VFAIL("kernel size %d, dilation %d, stride %d (need (k-1)*d + 1 >= s >= 1)", k, d, s);
      const int want = P > 0 || n->p.replicate ? 2 : 1;
      if (n->nsrc != want) VFAIL("has %d inputs, expected %d (x[, state])", n->nsrc, want);
      if (want == 2) {
        const IrNode *st = S(IM2COL_STRIDED, STATE);
        const int64_t rows = P + (n->p.replicate ? 1 : 0);
        if (st->op != OP_STATE || st->rows != rows || st->cols != x->cols)
          VFAIL("state %s: expected a state [%lld, %lld]", st->name, (long long)rows, (long long)x->cols);
      }
      if (!rows_match(n->rows, ir_rows_scale(x->rows, 1, s)) || n->cols != (int64_t)k * x->cols)
        VFAIL("output shape");
      break;
    }
    case OP_CONV1D: {
      if (n->nsrc != S_CONV1D_B && n->nsrc != S_CONV1D_B + 1)
        VFAIL("has %d inputs, expected %d or %d (x, W, state[, bias])", n->nsrc, S_CONV1D_B, S_CONV1D_B + 1);
      const IrNode *x = S(CONV1D, X), *w = S(CONV1D, W), *st = S(CONV1D, STATE);
      const int k = n->p.ksize, d = n->p.dilation;
      if (k < 2 || d < 1 || n->p.block < 1)
        VFAIL("kernel size %d, dilation %d, block %d (need k >= 2, d >= 1, block >= 1)", k, d, n->p.block);
      if (st->op != OP_STATE || st->rows != (int64_t)(k - 1) * d || st->cols != x->cols)
        VFAIL("state %s: expected a state [%lld, %lld]", st->name, (long long)(k - 1) * d, (long long)x->cols);
      if (w->op != OP_WEIGHT || w->cols != (int64_t)k * x->cols)
        VFAIL("weight %s: expected [O, k*C = %lld]", w->name, (long long)k * x->cols);
      if (n->cols != w->rows || !rows_match(n->rows, x->rows)) VFAIL("output shape");
      if (n->nsrc > S_CONV1D_B && S(CONV1D, B)->cols != n->cols) VFAIL("bias width");
      break;
    }
    case OP_OVERLAP_ADD: {
      const IrNode *z = S(OVERLAP_ADD, Z), *bb = S(OVERLAP_ADD, B);
      const int k = n->p.ksize, st = n->p.stride;
      if (st < 1 || k < st) VFAIL("kernel size %d, stride %d (need k >= s >= 1)", k, st);
      if (n->nsrc != (k > st ? 3 : 2)) VFAIL("has %d inputs, expected %d (a state exactly when k > s)", n->nsrc, k > st ? 3 : 2);
      if (z->cols != (int64_t)k * n->cols) VFAIL("z has %lld cols, expected k * C = %lld", (long long)z->cols, (long long)k * n->cols);
      if (n->rows != ir_rows_scale(z->rows, st, 1)) VFAIL("rows are not stride x z's rows");
      if (bb->op != OP_WEIGHT || bb->dtype != DT_F32 || bb->rows != 1 || bb->cols != n->cols)
        VFAIL("bias %s: expected an f32 weight [1, %lld]", bb->name, (long long)n->cols);
      if (k > st) {
        const IrNode *s0 = S(OVERLAP_ADD, STATE);
        if (s0->op != OP_STATE || s0->rows != k - st || s0->cols != n->cols)
          VFAIL("state %s: expected a state [%d, %lld] (k-s rows)", s0->name, k - st, (long long)n->cols);
      }
      break;
    }
    case OP_SNAKE: case OP_LAYERNORM: {
      const int sn = n->op == OP_SNAKE;
      const IrNode *x = sn ? S(SNAKE, X) : S(LAYERNORM, X);
      const IrNode *v[2] = {sn ? S(SNAKE, ALPHA) : S(LAYERNORM, W), sn ? S(SNAKE, BETA) : S(LAYERNORM, B)};
      for (int q = 0; q < 2; q++)
        if (v[q]->op != OP_WEIGHT || v[q]->dtype != DT_F32 || v[q]->rows != 1 || v[q]->cols != x->cols)
          VFAIL("%s: expected an f32 weight [1, %lld]", v[q]->name, (long long)x->cols);
      if (!sn && !(n->p.eps >= 0 && n->p.eps - n->p.eps == 0)) VFAIL("eps %g", n->p.eps);
      if (!rows_match(n->rows, x->rows) || n->cols != x->cols) VFAIL("shape");
      break;
    }
    case OP_L2NORM: case OP_GATED_RMSNORM: {
      const IrNode *x = n->op == OP_L2NORM ? a : S(GATED_RMSNORM, X);
      if (n->p.group < 1 || x->cols % n->p.group) VFAIL("group %d does not divide %lld cols", n->p.group, (long long)x->cols);
      if (!(n->p.eps >= 0 && n->p.eps - n->p.eps == 0)) VFAIL("eps %g", n->p.eps);
      if (!rows_match(n->rows, x->rows) || n->cols != x->cols) VFAIL("shape");
      if (n->op == OP_GATED_RMSNORM) {
        const IrNode *z = S(GATED_RMSNORM, Z), *w = S(GATED_RMSNORM, W);
        if (!rows_match(z->rows, x->rows) || z->cols != x->cols) VFAIL("gate z %s is not x's shape", z->name);
        if (w->op != OP_WEIGHT || w->dtype != DT_F32 || w->rows != 1 || w->cols != n->p.group)
          VFAIL("norm weight %s: expected an f32 weight [1, %d]", w->name, n->p.group);
      }
      break;
    }
    case OP_DELTA_RULE: {
      const IrParams *p = &n->p;
      const IrNode *q = S(DELTA_RULE, Q), *k = S(DELTA_RULE, K), *v = S(DELTA_RULE, V);
      const IrNode *gt = S(DELTA_RULE, G), *bt = S(DELTA_RULE, BETA), *st = S(DELTA_RULE, STATE);
      if (p->kv_heads < 1 || p->heads < p->kv_heads || p->heads % p->kv_heads || p->head_dim < 1)
        VFAIL("heads %d, kv_heads %d, head_dim %d (v heads a multiple of k heads)", p->heads, p->kv_heads, p->head_dim);
      const int64_t kd = (int64_t)p->kv_heads * p->head_dim;
      if (q->cols != kd || k->cols != kd) VFAIL("q, k have %lld, %lld cols, expected kv_heads * head_dim = %lld",
                                                (long long)q->cols, (long long)k->cols, (long long)kd);
      if (v->cols % p->heads) VFAIL("v has %lld cols, not a multiple of %d heads", (long long)v->cols, p->heads);
      const int64_t dv = v->cols / p->heads;
      if (gt->cols != p->heads || bt->cols != p->heads) VFAIL("g, beta need one column per v head (%d)", p->heads);
      if (!rows_match(q->rows, n->rows) || !rows_match(k->rows, n->rows) || !rows_match(v->rows, n->rows) ||
          !rows_match(gt->rows, n->rows) || !rows_match(bt->rows, n->rows))
        VFAIL("inputs with other row counts");
      if (st->op != OP_STATE || st->rows != p->heads || st->cols != p->head_dim * dv)
        VFAIL("state %s is %s [%lld, %lld], expected a state [%d, %lld] (a dk x dv matrix per v head)", st->name,
              ir_op_names[st->op], (long long)st->rows, (long long)st->cols, p->heads, (long long)(p->head_dim * dv));
      if (n->cols != v->cols) VFAIL("output shape");
      if (!(p->scale - p->scale == 0)) VFAIL("scale %g", p->scale);
      if (p->block < 0 || p->block > 256) VFAIL("chunk %d (0: token by token, else 1..256)", p->block);
      break;
    }
    case OP_ELU:
      if (!(n->p.alpha - n->p.alpha == 0)) VFAIL("alpha %g", n->p.alpha);
      if (!rows_match(n->rows, a->rows) || n->cols != a->cols) VFAIL("shape");
      break;
    case OP_VQ_NEAREST: {
      if (n->nsrc != 2 && n->nsrc != 3) VFAIL("has %d inputs, expected 2 or 3 (x, table[, codes])", n->nsrc);
      const IrNode *x = S(VQ_NEAREST, X), *t = S(VQ_NEAREST, TABLE);
      if (t->op != OP_WEIGHT || t->dtype != DT_F32 || t->cols != x->cols || t->rows < 1 || t->rows >= 1 << 24)
        VFAIL("table %s: expected an f32 weight [N < 2^24, %lld]", t->name, (long long)x->cols);
      const int64_t P = n->nsrc == 3 ? S(VQ_NEAREST, CODES)->cols : 0;
      if (n->nsrc == 3 && !rows_match(S(VQ_NEAREST, CODES)->rows, x->rows)) VFAIL("codes rows");
      if (!rows_match(n->rows, x->rows) || n->cols != P + 1 + x->cols) VFAIL("output shape");
      break;
    }
    case OP_TOPK_ROUTE:
      if (n->p.experts != a->cols || n->p.top_k < 1 || n->p.top_k > n->p.experts || n->cols != 2 * n->p.top_k)
        VFAIL("top %d of %lld experts into %lld cols (expected 1 <= k <= E = the logits' cols, 2k cols)", n->p.top_k,
              (long long)a->cols, (long long)n->cols);
      if (!rows_match(n->rows, a->rows)) VFAIL("shape");
      break;
    case OP_MOE_COMBINE: {
      if (n->nsrc != S_MOE_COMBINE_SH && n->nsrc != S_MOE_COMBINE_SG + 1)
        VFAIL("has %d inputs, expected %d or %d (x, route, Wgu, Wd[, shared, shared gate])", n->nsrc,
              S_MOE_COMBINE_SH, S_MOE_COMBINE_SG + 1);
      const IrNode *x = S(MOE_COMBINE, X), *r = S(MOE_COMBINE, ROUTE);
      const IrNode *gu = S(MOE_COMBINE, WGU), *wd = S(MOE_COMBINE, WD);
      const int E = n->p.experts, k = n->p.top_k;
      if (E < 1 || k < 1 || k > E || r->cols != 2 * k || !rows_match(r->rows, x->rows))
        VFAIL("route %s [%lld cols] for top %d of %d experts", r->name, (long long)r->cols, k, E);
      if (gu->op != OP_WEIGHT || wd->op != OP_WEIGHT || gu->cols != x->cols || gu->rows % (2 * E) ||
          wd->rows != (int64_t)E * x->cols || wd->cols != gu->rows / (2 * E))
        VFAIL("expert matrices %s [%lld, %lld], %s [%lld, %lld]: expected [E*2I, H], [E*H, I] with E %d, H %lld",
              gu->name, (long long)gu->rows, (long long)gu->cols, wd->name, (long long)wd->rows, (long long)wd->cols,
              E, (long long)x->cols);
      if (n->nsrc > S_MOE_COMBINE_SH) {
        const IrNode *sh = S(MOE_COMBINE, SH), *sg = S(MOE_COMBINE, SG);
        if (!rows_match(sh->rows, x->rows) || sh->cols != x->cols || !rows_match(sg->rows, x->rows) || sg->cols != 1)
          VFAIL("shared expert %s or its gate %s: expected [T, %lld] and [T, 1]", sh->name, sg->name,
                (long long)x->cols);
      }
      if (!rows_match(n->rows, x->rows) || n->cols != x->cols) VFAIL("shape");
      break;
    }
    case OP_CLAMP:
      if (!(n->p.lo <= n->p.hi) || n->p.lo - n->p.lo != 0 || n->p.hi - n->p.hi != 0)
        VFAIL("bounds [%g, %g]", n->p.lo, n->p.hi);
      if (!rows_match(n->rows, a->rows) || n->cols != a->cols) VFAIL("shape");
      break;
    case OP_SLICE:
      if (n->p.off < 0 || n->p.off + n->cols > a->cols) VFAIL("slice out of range");
      break;
    case OP_RESHAPE:
      if (n->p.stride < 1 || a->cols != n->cols * n->p.stride || n->rows != ir_rows_scale(a->rows, n->p.stride, 1))
        VFAIL("[%lld cols] is not the rows of [%lld cols] split in %d", (long long)n->cols, (long long)a->cols,
              n->p.stride);
      if (ir_op_flags[a->op] & F_VIEW) VFAIL("reshapes a view (%s): its rows may not be contiguous", a->name);
      break;
    case OP_SWIGLU:
      if (a->cols != 2 * n->cols) VFAIL("swiglu width");
      break;
    default:
      break;
    }
    int ids_view = (n->op == OP_ROW || n->op == OP_SLICE) && a && a->dtype == DT_I32 && n->dtype == DT_I32;
    if (n->op != OP_WEIGHT && n->op != OP_STATE && n->op != OP_INPUT_IDS && !ids_view && n->dtype != DT_F32)
      VFAIL("activations are f32, found %s", ir_dtype_name(n->dtype));
  }
  return SC_OK;
}

int ir_check_target(const Module *m, IrTarget target, sc_error *err) {
  for (int gi = 0; gi < m->n_graphs; gi++) {
    const Graph *g = &m->graphs[gi];
    for (int i = 0; i < g->n_nodes; i++) {
      const IrNode *n = &g->nodes[i];
      if (!n->dead && !(ir_op_targets[n->op] & (1u << target)))
        return sc_fail(err, SC_EINPUT, "%s target: op %s (%s, graph %s node %d) has no %s lowering yet",
                       ir_target_names[target], ir_op_names[n->op], n->name, g->name, i,
                       ir_target_names[target]);
    }
  }
  return SC_OK;
}

/* ---- printer ------------------------------------------------------------ */

static void print_rows(FILE *out, int64_t r) {
  char buf[48];
  fputs(ir_rows_text(r, buf, sizeof buf), out);
}

void ir_print(const Module *m, const Graph *g, FILE *out) {
  fprintf(out, "graph %s (max_tokens %d) {\n", g->name, g->max_tokens);
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->dead) continue;
    fprintf(out, "  %%%d = %s", i, ir_op_names[n->op]);
    for (int s = 0; s < n->nsrc; s++) fprintf(out, "%s%%%d", s ? ", " : " ", n->src[s]);
    fprintf(out, " : %s[", ir_dtype_name(n->dtype));
    print_rows(out, n->rows);
    fprintf(out, ", %lld]", (long long)n->cols);
    const IrParams *p = &n->p;
    switch (n->op) {
    case OP_WEIGHT: {
      const IrWeight *w = &m->weights[n->weight];
      if (w->sets > 1 && p->set_mode == SET_FIXED) fprintf(out, " set=%d of %lld", p->off, (long long)w->sets);
      if (w->sets > 1 && p->set_mode == SET_STEP) fprintf(out, " set=step%+d of %lld", p->off, (long long)w->sets);
      break;
    }
    case OP_ROW: fprintf(out, " row=%d", p->off); break;
    case OP_RMSNORM: case OP_NORM_LINEAR: case OP_NORM_ROPE: case OP_LINEAR_SWIGLU:
      if (n->op == OP_LINEAR_SWIGLU && n->nsrc <= S_LINEAR_SWIGLU_NW) break; /* no norm */
      fprintf(out, " group=%d eps=%g mode=%s", p->group, p->eps,
              p->norm_mode == NORM_PLAIN ? "w" : p->norm_mode == NORM_ONE_PLUS ? "1+w" : "alpha");
      if (n->op == OP_NORM_ROPE) fprintf(out, " heads=%d rot=%d", p->heads, p->rot_dims);
      break;
    case OP_ROPE_ATTENTION:
      fprintf(out, " heads=%d kv_heads=%d head_dim=%d rot=%d %s scale=%g window=%d", p->heads, p->kv_heads,
              p->head_dim, p->rot_dims, p->rope_mode == ROPE_NEOX ? "neox" : "interleaved", p->scale, p->window);
      if (n->nsrc > S_ROPE_ATTENTION_QN)
        fprintf(out, " group=%d eps=%g mode=%s", p->group, p->eps,
                p->norm_mode == NORM_PLAIN ? "w" : p->norm_mode == NORM_ONE_PLUS ? "1+w" : "alpha");
      break;
    case OP_ROPE:
      fprintf(out, " heads=%d head_dim=%d rot=%d %s", p->heads, p->head_dim, p->rot_dims,
              p->rope_mode == ROPE_NEOX ? "neox" : "interleaved");
      break;
    case OP_ATTENTION:
      fprintf(out, " heads=%d kv_heads=%d head_dim=%d scale=%g window=%d", p->heads,
              p->kv_heads, p->head_dim, p->scale, p->window);
      if (p->align > 1) fprintf(out, " align=%d", p->align);
      break;
    case OP_ELU: fprintf(out, " alpha=%g", p->alpha); break;
    case OP_SLICE: fprintf(out, " off=%d", p->off); break;
    case OP_RESHAPE: fprintf(out, " f=%d", p->stride); break;
    case OP_IM2COL: case OP_DWCONV: fprintf(out, " k=%d dilation=%d", p->ksize, p->dilation); break;
    case OP_IM2COL_STRIDED:
      fprintf(out, " k=%d dilation=%d stride=%d%s", p->ksize, p->dilation, p->stride, p->replicate ? " replicate" : "");
      break;
    case OP_CONV1D: fprintf(out, " k=%d dilation=%d block=%d", p->ksize, p->dilation, p->block); break;
    case OP_OVERLAP_ADD: fprintf(out, " k=%d stride=%d", p->ksize, p->stride); break;
    case OP_LAYERNORM: fprintf(out, " eps=%g", p->eps); break;
    case OP_CLAMP: fprintf(out, " lo=%g hi=%g", p->lo, p->hi); break;
    case OP_L2NORM: case OP_GATED_RMSNORM: fprintf(out, " group=%d eps=%g", p->group, p->eps); break;
    case OP_TOPK_ROUTE: fprintf(out, " experts=%d k=%d%s", p->experts, p->top_k, p->renorm ? " renorm" : ""); break;
    case OP_MOE_COMBINE: fprintf(out, " experts=%d k=%d%s", p->experts, p->top_k, n->nsrc > S_MOE_COMBINE_SH ? " shared" : ""); break;
    case OP_DELTA_RULE:
      fprintf(out, " v_heads=%d k_heads=%d dk=%d scale=%g", p->heads, p->kv_heads, p->head_dim, p->scale);
      if (p->block) fprintf(out, " chunk=%d", p->block);
      break;
    default: break;
    }
    fprintf(out, "  ; %s\n", n->name);
  }
  fputs("}\n", out);
}
