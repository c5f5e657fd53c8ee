/*
 * pass_fuse.c — form the fused ops from their unfused definitions.
 *
 *   1. sibling LINEARs that read the same input with the same band and no
 *      bias become one LINEAR over a packed weight ([Wq;Wk;Wv], [Wg;Wu])
 *      whose former outputs are SLICE views of it (the graph is rebuilt in
 *      order so that the views follow the merged node);
 *   2. MUL(SILU(slice a), slice b), a and b the two halves of one LINEAR
 *                                                      -> LINEAR_SWIGLU;
 *   3. ROPE(RMSNORM(x)) with a per-head norm           -> NORM_ROPE;
 *   4. LINEAR(RMSNORM(x)) where the norm has one user  -> NORM_LINEAR,
 *      and LINEAR_SWIGLU(RMSNORM(x)) likewise          -> LINEAR_SWIGLU
 *      with the norm weight as its third input;
 *   5. ADD(r, LINEAR(x)) where the linear has one user -> LINEAR_ADD;
 *   6. ATTENTION(R(q), KV_STORE(kc, R(k)), KV_STORE(vc, v)) for a fixed
 *      token count of at most 4 (decode graphs), R both ROPE or both
 *      NORM_ROPE with the same table and parameters, each producer read
 *      only there                                     -> ROPE_ATTENTION;
 *   7. LINEAR(IM2COL(x)) where the im2col has one user -> CONV1D, in
 *      pieces of CONV1D_BYTES of im2col rows (a multiple of 32 rows, at
 *      least 32: whole AMX tiles, kernels.h); not for f32 weights, whose
 *      GEMM (OpenBLAS) packs the weights again for every piece: measured
 *      slower in pieces than whole.
 * Rewrites 2-7 happen in place (the consumer takes over, producers die),
 * then dead nodes are dropped.  On the CPU each fused op performs the same
 * float operations in the same order as its definition (the kernels
 * compute each row's dot product independently of the rows around it), so
 * --no-fuse gives identical numbers; tests/unit/test_parity.c holds this.
 * (CONV1D's pieces are GEMMs over fewer rows: the same bits except where
 * a GEMM's order may depend on its row count, kernels.h: OpenBLAS f32.)
 * A device target may round a fused op differently (a norm factor applied
 * after the dot product, a warp-order sum): within the parity tolerance.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

#define N(i) (&g->nodes[(i)])

/* Bytes of im2col rows per CONV1D piece: with its GEMM's output and a
 * panel of weights it stays in a 1-2 MB L2. */
#define CONV1D_BYTES (384 * 1024)

/* "layer0.q_proj" + "layer0.k_proj" + "layer0.v_proj" -> "layer0.qkv" */
static void merged_name(const Module *m, const int *w, int n, char *out, size_t size) {
  const char *first = m->weights[w[0]].name;
  const char *dot = strrchr(first, '.');
  int pre = dot ? (int)(dot - first + 1) : 0;
  snprintf(out, size, "%.*s", pre, first);
  for (int i = 0; i < n; i++) {
    const char *nm = m->weights[w[i]].name;
    const char *d = strrchr(nm, '.');
    const char *suf = d ? d + 1 : nm;
    size_t len = strlen(suf);
    if (len > 5 && !strcmp(suf + len - 5, "_proj")) len -= 5;
    size_t cur = strlen(out);
    snprintf(out + cur, size - cur, "%.*s", (int)len, suf);
  }
}

static int merged_weight(Module *m, const int *w, int n) {
  char name[IR_NAME];
  merged_name(m, w, n, name, sizeof name);
  int id = ir_weight_find(m, name);
  if (id >= 0) return id;
  int64_t rows = 0;
  for (int i = 0; i < n; i++) rows += m->weights[w[i]].rows;
  id = ir_weight_add(m, name, m->weights[w[0]].band, 1, rows, m->weights[w[0]].cols);
  IrWeight *mw = &m->weights[id];
  for (int i = 0; i < n; i++) {
    const IrWeight *s = &m->weights[w[i]];
    IR_ASSERT(s->n_src == 1 && s->sets == 1 && s->gen == WGEN_NONE);
    ir_weight_src_add(m, id, s->src[0]); /* with its row runs, if any */
    mw = &m->weights[id];
    size_t cur = strlen(mw->source);
    snprintf(mw->source + cur, sizeof mw->source - cur, "%s%s", i ? " + " : "", s->source);
  }
  return id;
}

static int mergeable(const Module *m, const Graph *g, int a, int b) {
  const IrNode *x = N(a), *y = N(b);
  if (x->op != OP_LINEAR || y->op != OP_LINEAR || x->dead || y->dead) return 0;
  if (x->nsrc > S_LINEAR_B || y->nsrc > S_LINEAR_B || x->src[S_LINEAR_X] != y->src[S_LINEAR_X]) return 0;
  const IrWeight *wx = &m->weights[N(x->src[S_LINEAR_W])->weight];
  const IrWeight *wy = &m->weights[N(y->src[S_LINEAR_W])->weight];
  return wx->band == wy->band && wx->sets == 1 && wy->sets == 1 && wx->cols == wy->cols && wx->n_src == 1 &&
         wy->n_src == 1 && wx->gen == WGEN_NONE && wy->gen == WGEN_NONE;
}

/* Rebuild g with sibling linears merged. */
static void merge_siblings(Module *m, Graph *g) {
  Graph old = *g;
  int *map = malloc((size_t)old.n_nodes * sizeof *map);
  IR_ASSERT(map);
  for (int i = 0; i < old.n_nodes; i++) map[i] = -1;
  g->nodes = NULL;
  g->n_nodes = g->cap_nodes = 0;
  for (int i = 0; i < old.n_nodes; i++) {
    const IrNode *n = &old.nodes[i];
    if (n->dead || map[i] >= 0) continue;
    int group[8] = {i}, count = 1;
    if (n->op == OP_LINEAR)
      for (int j = i + 1; j < old.n_nodes && count < 8; j++)
        if (mergeable(m, &old, i, j)) group[count++] = j;
    if (count > 1) {
      int w[8];
      for (int k = 0; k < count; k++) w[k] = old.nodes[old.nodes[group[k]].src[S_LINEAR_W]].weight;
      int mw = merged_weight(m, w, count);
      char name[IR_NAME];
      snprintf(name, sizeof name, "%s", m->weights[mw].name);
      int lin = ir_linear(g, map[n->src[S_LINEAR_X]], ir_weight(m, g, mw), -1, name);
      int64_t off = 0;
      for (int k = 0; k < count; k++) {
        const IrNode *mk = &old.nodes[group[k]];
        map[group[k]] = ir_slice(g, lin, (int)off, mk->cols, mk->name);
        off += mk->cols;
      }
      continue;
    }
    int src[IR_MAX_SRC];
    for (int s = 0; s < n->nsrc; s++) {
      IR_ASSERT(map[n->src[s]] >= 0);
      src[s] = map[n->src[s]];
    }
    int k = ir_node(g, n->op, n->dtype, n->rows, n->cols, src, n->nsrc, n->name);
    IrNode *c = N(k);
    c->p = n->p;
    c->weight = n->weight;
    c->state = n->state;
    map[i] = k;
  }
  free(map);
  free(old.nodes);
}

/* Drop dead nodes, keeping order; nodes nobody reads die too, except the
 * ones with effects (OUTPUT, and the F_STATE ops that write state). */
static void compact(Graph *g) {
  for (int i = g->n_nodes - 1; i >= 0; i--) {
    IrNode *n = &g->nodes[i];
    if (!n->dead && n->op != OP_OUTPUT && !(ir_op_flags[n->op] & F_STATE) && ir_uses(g, i) == 0) n->dead = 1;
  }
  int *map = malloc((size_t)g->n_nodes * sizeof *map);
  IR_ASSERT(map);
  int k = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].dead) { map[i] = -1; continue; }
    IrNode n = g->nodes[i];
    for (int s = 0; s < n.nsrc; s++) {
      IR_ASSERT(map[n.src[s]] >= 0);
      n.src[s] = map[n.src[s]];
    }
    map[i] = k;
    g->nodes[k++] = n;
  }
  g->n_nodes = k;
  free(map);
}

/* The input and table of a ROPE / NORM_ROPE node. */
static int rope_x(const IrNode *r) { return r->src[r->op == OP_NORM_ROPE ? S_NORM_ROPE_X : S_ROPE_X]; }
static int rope_table(const IrNode *r) { return r->src[r->op == OP_NORM_ROPE ? S_NORM_ROPE_TABLE : S_ROPE_TABLE]; }

/* Node n becomes op over src (indexed by op's slots), its first nsrc. */
static void become(IrNode *n, OpKind op, const int *src, int nsrc) {
  n->op = op;
  n->nsrc = nsrc;
  memcpy(n->src, src, sizeof n->src);
}

/* Rule 6 at attention node i: rewrite it when its inputs have the shape of
 * the definition; returns 1 if it did. */
static int rope_attention(Graph *g, int i) {
  IrNode *n = N(i);
  if (n->nsrc != S_ATTENTION_GATE || IR_ROWS_ON_T(n->rows) || n->rows > 4) return 0; /* no gate */
  if (n->p.align > 1) return 0; /* ROPE_ATTENTION's windows are one per node */
  int q = n->src[S_ATTENTION_Q], ks = n->src[S_ATTENTION_KC], vs = n->src[S_ATTENTION_VC];
  if (N(ks)->op != OP_KV_STORE || N(vs)->op != OP_KV_STORE || ir_uses(g, ks) != 1 || ir_uses(g, vs) != 1)
    return 0;
  int k = N(ks)->src[S_KV_STORE_X], v = N(vs)->src[S_KV_STORE_X];
  const IrNode *qr = N(q), *kr = N(k);
  if ((qr->op != OP_ROPE && qr->op != OP_NORM_ROPE) || kr->op != qr->op) return 0;
  if (ir_uses(g, q) != 1 || ir_uses(g, k) != 1 || qr->rows != n->rows || kr->rows != n->rows ||
      N(v)->rows != n->rows)
    return 0;
  const IrParams *qp = &qr->p, *kp = &kr->p, *ap = &n->p;
  if (rope_table(qr) != rope_table(kr) || qp->rot_dims != kp->rot_dims || qp->rope_mode != kp->rope_mode ||
      qp->head_dim != ap->head_dim || kp->head_dim != ap->head_dim || qp->heads != ap->heads ||
      kp->heads != ap->kv_heads)
    return 0;
  int norm = qr->op == OP_NORM_ROPE;
  if (norm && (qp->group != kp->group || qp->eps != kp->eps || qp->norm_mode != kp->norm_mode)) return 0;
  int src[IR_MAX_SRC] = {0};
  src[S_ROPE_ATTENTION_Q] = rope_x(qr);
  src[S_ROPE_ATTENTION_K] = rope_x(kr);
  src[S_ROPE_ATTENTION_V] = v;
  src[S_ROPE_ATTENTION_KC] = N(ks)->src[S_KV_STORE_CACHE];
  src[S_ROPE_ATTENTION_VC] = N(vs)->src[S_KV_STORE_CACHE];
  src[S_ROPE_ATTENTION_TABLE] = rope_table(qr);
  if (norm) {
    src[S_ROPE_ATTENTION_QN] = qr->src[S_NORM_ROPE_NW];
    src[S_ROPE_ATTENTION_KN] = kr->src[S_NORM_ROPE_NW];
  }
  IrParams p = *ap;
  p.rot_dims = qp->rot_dims;
  p.rope_mode = qp->rope_mode;
  if (norm) {
    p.group = qp->group;
    p.eps = qp->eps;
    p.norm_mode = qp->norm_mode;
  }
  N(q)->dead = N(k)->dead = N(ks)->dead = N(vs)->dead = 1;
  become(n, OP_ROPE_ATTENTION, src, norm ? S_ROPE_ATTENTION_KN + 1 : S_ROPE_ATTENTION_TABLE + 1);
  n->p = p;
  return 1;
}

/* Two sweeps: SwiGLU first, since rule 4 would otherwise turn the packed
 * gate/up LINEAR into a NORM_LINEAR before its MUL is reached, and rule 2
 * could never match. */
static void fuse_in_place(Module *m, Graph *g) {
  for (int sweep = 0; sweep < 2; sweep++)
  for (int i = 0; i < g->n_nodes; i++) {
    IrNode *n = N(i);
    if (n->dead) continue;
    /* 2. SwiGLU over the two halves of one packed linear */
    if (sweep == 0 && n->op == OP_MUL && N(n->src[0])->op == OP_SILU) {
      int silu = n->src[0], sa = N(silu)->src[0], sb = n->src[1];
      if (N(sa)->op == OP_SLICE && N(sb)->op == OP_SLICE && N(sa)->src[0] == N(sb)->src[0]) {
        int lin = N(sa)->src[0];
        int64_t half = N(sa)->cols;
        if (N(lin)->op == OP_LINEAR && N(lin)->nsrc == S_LINEAR_B && N(lin)->cols == 2 * half &&
            N(sa)->p.off == 0 && N(sb)->p.off == half && ir_uses(g, silu) == 1 &&
            ir_uses(g, sa) == 1 && ir_uses(g, sb) == 1 && ir_uses(g, lin) == 2) {
          int src[IR_MAX_SRC] = {0};
          src[S_LINEAR_SWIGLU_X] = N(lin)->src[S_LINEAR_X];
          src[S_LINEAR_SWIGLU_W] = N(lin)->src[S_LINEAR_W];
          become(n, OP_LINEAR_SWIGLU, src, S_LINEAR_SWIGLU_NW); /* no norm yet: rule 4b */
          N(silu)->dead = N(sa)->dead = N(sb)->dead = N(lin)->dead = 1;
          continue;
        }
      }
    }
    if (sweep == 0) continue;
    /* 3. QK-norm + RoPE */
    if (n->op == OP_ROPE && N(n->src[S_ROPE_X])->op == OP_RMSNORM) {
      int nrm = n->src[S_ROPE_X];
      if (N(nrm)->p.group == n->p.head_dim && ir_uses(g, nrm) == 1) {
        IrParams p = n->p;
        p.group = N(nrm)->p.group;
        p.norm_mode = N(nrm)->p.norm_mode;
        p.eps = N(nrm)->p.eps;
        int src[IR_MAX_SRC] = {0};
        src[S_NORM_ROPE_X] = N(nrm)->src[S_RMSNORM_X];
        src[S_NORM_ROPE_NW] = N(nrm)->src[S_RMSNORM_NW];
        src[S_NORM_ROPE_TABLE] = n->src[S_ROPE_TABLE];
        become(n, OP_NORM_ROPE, src, 3);
        n->p = p;
        N(nrm)->dead = 1;
        continue;
      }
    }
    /* 4. norm as the GEMV's prologue */
    if (n->op == OP_LINEAR && N(n->src[S_LINEAR_X])->op == OP_RMSNORM && ir_uses(g, n->src[S_LINEAR_X]) == 1) {
      int nrm = n->src[S_LINEAR_X];
      const int bias = n->nsrc > S_LINEAR_B;
      int src[IR_MAX_SRC] = {0};
      src[S_NORM_LINEAR_X] = N(nrm)->src[S_RMSNORM_X];
      src[S_NORM_LINEAR_NW] = N(nrm)->src[S_RMSNORM_NW];
      src[S_NORM_LINEAR_W] = n->src[S_LINEAR_W];
      if (bias) src[S_NORM_LINEAR_B] = n->src[S_LINEAR_B];
      become(n, OP_NORM_LINEAR, src, bias ? S_NORM_LINEAR_B + 1 : S_NORM_LINEAR_B);
      n->p.group = N(nrm)->p.group;
      n->p.norm_mode = N(nrm)->p.norm_mode;
      n->p.eps = N(nrm)->p.eps;
      N(nrm)->dead = 1;
      continue;
    }
    /* 4b. the MLP norm as the SwiGLU GEMV's prologue */
    if (n->op == OP_LINEAR_SWIGLU && n->nsrc == S_LINEAR_SWIGLU_NW &&
        N(n->src[S_LINEAR_SWIGLU_X])->op == OP_RMSNORM && ir_uses(g, n->src[S_LINEAR_SWIGLU_X]) == 1) {
      int nrm = n->src[S_LINEAR_SWIGLU_X];
      n->src[S_LINEAR_SWIGLU_X] = N(nrm)->src[S_RMSNORM_X];
      n->src[S_LINEAR_SWIGLU_NW] = N(nrm)->src[S_RMSNORM_NW];
      n->nsrc = S_LINEAR_SWIGLU_NW + 1;
      n->p.group = N(nrm)->p.group;
      n->p.norm_mode = N(nrm)->p.norm_mode;
      n->p.eps = N(nrm)->p.eps;
      N(nrm)->dead = 1;
      continue;
    }
    /* 7. a causal conv's im2col rows straight into its GEMM, a piece at a time */
    if (n->op == OP_LINEAR && N(n->src[S_LINEAR_X])->op == OP_IM2COL && ir_uses(g, n->src[S_LINEAR_X]) == 1 &&
        m->weights[N(n->src[S_LINEAR_W])->weight].sets == 1 && m->weights[N(n->src[S_LINEAR_W])->weight].band != DT_F32) {
      const int col = n->src[S_LINEAR_X];
      const int bias = n->nsrc > S_LINEAR_B;
      int src[IR_MAX_SRC] = {0};
      src[S_CONV1D_X] = N(col)->src[S_IM2COL_X];
      src[S_CONV1D_W] = n->src[S_LINEAR_W];
      src[S_CONV1D_STATE] = N(col)->src[S_IM2COL_STATE];
      if (bias) src[S_CONV1D_B] = n->src[S_LINEAR_B];
      const int64_t row_bytes = N(col)->cols * 4;
      int64_t block = CONV1D_BYTES / row_bytes / 32 * 32;
      become(n, OP_CONV1D, src, bias ? S_CONV1D_B + 1 : S_CONV1D_B);
      n->p.ksize = N(col)->p.ksize;
      n->p.dilation = N(col)->p.dilation;
      n->p.block = block < 32 ? 32 : (int)block;
      N(col)->dead = 1;
      continue;
    }
    /* 6. decode attention with its rotations and cache stores */
    if (n->op == OP_ATTENTION && rope_attention(g, i)) continue;
    /* 5. residual add in the GEMV epilogue */
    if (n->op == OP_ADD) {
      int lin = n->src[1], r = n->src[0];
      if (N(lin)->op != OP_LINEAR) { lin = n->src[0]; r = n->src[1]; }
      /* the residual a whole activation, not a broadcast bias row */
      if (N(lin)->op == OP_LINEAR && N(lin)->nsrc == S_LINEAR_B && ir_uses(g, lin) == 1 &&
          N(r)->rows == n->rows && N(r)->op != OP_WEIGHT) {
        int src[IR_MAX_SRC] = {0};
        src[S_LINEAR_ADD_X] = N(lin)->src[S_LINEAR_X];
        src[S_LINEAR_ADD_W] = N(lin)->src[S_LINEAR_W];
        src[S_LINEAR_ADD_R] = r;
        become(n, OP_LINEAR_ADD, src, 3);
        N(lin)->dead = 1;
        continue;
      }
    }
  }
}

void pass_fuse(Module *m) {
  for (int gi = 0; gi < m->n_graphs; gi++) {
    Graph *g = &m->graphs[gi];
    merge_siblings(m, g);
    fuse_in_place(m, g);
    compact(g);
  }
}

void pass_mark_used(Module *m) {
  for (int w = 0; w < m->n_weights; w++) m->weights[w].used = 0;
  for (int gi = 0; gi < m->n_graphs; gi++) {
    const Graph *g = &m->graphs[gi];
    for (int i = 0; i < g->n_nodes; i++) {
      const IrNode *n = &g->nodes[i];
      if (n->dead) continue;
      if (n->op == OP_WEIGHT && ir_uses(g, i) > 0) m->weights[n->weight].used = 1;
    }
  }
}
