/*
 * pass_plan.c — static memory plan.
 *
 * Session state: every IrState gets a 64-byte-aligned slice of one state
 * block (KV caches, conv and recurrent states), shared by all entries.
 *
 * Scratch: every value that owns a buffer (not a leaf, an F_VIEW op, or
 * OUTPUT) gets an offset in one arena per graph, sized for max_tokens rows.
 * A value lives from its definition to its last reader (views extend the
 * life of what they view).  Buffers are placed first-fit among those alive;
 * an op whose ops.def `inplace` input dies at that node (elementwise
 * ops, a residual update) writes in place.  A value whose only reader is an OUTPUT (the
 * logits head, the last embedding) is placed in the output slot itself
 * (IR_BUF_OUT): its kernel writes there and the OUTPUT copies nothing.
 * A graph that runs in tiles (ir_graph_tile, CPU) sizes the buffers from
 * the tile's head on for one tile, and keeps what the tiles read from
 * before the head alive to the end (every tile reads it).
 * A node whose emitter needs a temporary (the target's plan_temp, target.h:
 * the C target's normalised input of a linear with a norm, rotated q and k
 * rows of ROPE_ATTENTION) gets an aux buffer, alive only during the node.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

#define ALIGN(x) (((x) + 63) & ~(int64_t)63)

static int owns_buffer(const IrNode *n) {
  return !(ir_op_flags[n->op] & (F_LEAF | F_VIEW)) && n->op != OP_OUTPUT;
}

typedef struct Block { int64_t off, size; int until; } Block;

static int64_t place(Block *live, int *n_live, int64_t size, int until, int64_t *high) {
  /* live is kept sorted by offset; find the first gap that fits */
  int64_t at = 0;
  int k = 0;
  for (; k < *n_live; k++) {
    if (live[k].off - at >= size) break;
    if (live[k].off + live[k].size > at) at = live[k].off + live[k].size;
  }
  memmove(&live[k + 1], &live[k], (size_t)(*n_live - k) * sizeof *live);
  live[k] = (Block){at, size, until};
  (*n_live)++;
  if (at + size > *high) *high = at + size;
  return at;
}

static void plan_graph(Graph *g, const Target *t) {
  int n = g->n_nodes;
  /* a graph that runs in tiles from node `head` (ir_graph_tile): what the
   * tiles read from before the head lives to the end, and the buffers
   * from the head on hold one tile */
  int units = 0;
  const int head = t->ir == IR_TARGET_CPU ? ir_graph_tile(g, &units) : -1;
  for (int i = 0; i < n; i++) {
    g->nodes[i].last_use = i;
    g->nodes[i].buf = g->nodes[i].aux = -1;
  }
  for (int i = 0; i < n; i++) {
    const IrNode *x = &g->nodes[i];
    if (x->dead) continue;
    for (int s = 0; s < x->nsrc; s++) {
      int r = x->src[s];
      /* a view keeps its whole chain alive */
      const int until = head >= 0 && i >= head && r < head ? n : i;
      for (;;) {
        if (g->nodes[r].last_use < until) g->nodes[r].last_use = until;
        if (!(ir_op_flags[g->nodes[r].op] & F_VIEW)) break;
        r = g->nodes[r].src[0];
      }
    }
  }
  /* values read only by an OUTPUT, rows as written: straight into the slot */
  for (int i = 0; i < n; i++) {
    const IrNode *o = &g->nodes[i];
    if (o->dead || o->op != OP_OUTPUT) continue;
    IrNode *x = &g->nodes[o->src[0]];
    if (owns_buffer(x) && ir_uses(g, o->src[0]) == 1 && x->rows == o->rows) x->buf = IR_BUF_OUT(o->p.slot);
  }
  Block *live = calloc((size_t)2 * n + 2, sizeof *live);
  IR_ASSERT(live);
  int n_live = 0;
  int64_t high = 0;
  for (int i = 0; i < n; i++) {
    IrNode *x = &g->nodes[i];
    if (x->dead) continue;
    /* free what died before this node */
    for (int k = 0; k < n_live;)
      if (live[k].until < i) memmove(&live[k], &live[k + 1], (size_t)(--n_live - k) * sizeof *live);
      else k++;
    const int64_t rows = ir_rows_eval(x->rows, head >= 0 && i >= head ? units : g->max_tokens);
    if (owns_buffer(x) && IR_BUF_IS_OUT(x->buf)) {
      x->ld = x->cols;
    } else if (owns_buffer(x)) {
      x->ld = x->cols;
      /* in place: over the input ops.def names (elementwise ops' first
       * operand, a residual add's residual) */
      int inplace = ir_op_inplace[x->op] >= 0 ? x->src[ir_op_inplace[x->op]] : -1;
      if (inplace >= 0) {
        IrNode *r = &g->nodes[inplace];
        if (!owns_buffer(r) || r->last_use != i || r->ld != x->cols || r->rows != x->rows) inplace = -1;
      }
      if (inplace >= 0) {
        IrNode *r = &g->nodes[inplace];
        x->buf = r->buf;
        for (int k = 0; k < n_live; k++)
          if (live[k].off == r->buf) live[k].until = x->last_use;
      } else {
        x->buf = place(live, &n_live, ALIGN(rows * x->cols * 4), x->last_use, &high);
      }
    } else if (x->op == OP_SLICE) {
      x->ld = g->nodes[x->src[0]].ld;
    } else if (x->op == OP_ROW) {
      x->ld = g->nodes[x->src[0]].ld;
    } else if (x->op == OP_RESHAPE) { /* the verifier saw a buffer's rows, stored whole */
      IR_ASSERT(g->nodes[x->src[0]].ld == g->nodes[x->src[0]].cols);
      x->ld = x->cols;
    } else {
      x->ld = x->cols;
    }
    const int64_t temp = t->plan_temp ? t->plan_temp(g, x, rows) : 0;
    if (temp > 0) x->aux = place(live, &n_live, ALIGN(temp), i, &high);
  }
  free(live);
  g->scratch_bytes = high;
}

void pass_plan(Module *m, const Target *t) {
  /* every state is at most 2^20 rows of 2^29 floats (max context, kv_heads
   * * head_dim); their sum saturates, and pass_plan_check_session refuses
   * it long before */
  int64_t off = 0;
  for (int s = 0; s < m->n_states; s++) {
    m->states[s].offset = off;
    int64_t sz = ALIGN(m->states[s].rows * m->states[s].cols * 4);
    off = off > INT64_MAX / 2 - sz ? INT64_MAX / 2 : off + sz;
  }
  m->state_bytes = off;
  for (int gi = 0; gi < m->n_graphs; gi++) plan_graph(&m->graphs[gi], t);
}

int pass_plan_check_session(const Module *m, int64_t cap_mb, sc_error *err) {
  int64_t scratch = 0;
  const char *widest = "";
  for (int gi = 0; gi < m->n_graphs; gi++)
    if (m->graphs[gi].scratch_bytes > scratch) {
      scratch = m->graphs[gi].scratch_bytes;
      widest = m->graphs[gi].name;
    }
  const double mb = 1048576.0, state = (double)m->state_bytes, logits = 4.0 * m->vocab;
  const double total = state + (double)scratch + logits;
  if (total <= (double)cap_mb * mb) return SC_OK;
  return sc_fail(err, SC_EINPUT, "per-session memory %.1f MB exceeds --max-session-mb %lld: %.1f MB of state "
                 "(KV caches of %d positions), %.1f MB of scratch (entry '%s'), %.1f MB of logits (hint: lower "
                 "--max-context or --prefill-chunk, or raise --max-session-mb if the machine holds it)",
                 total / mb, (long long)cap_mb, state / mb, m->max_context, (double)scratch / mb, widest,
                 logits / mb);
}
