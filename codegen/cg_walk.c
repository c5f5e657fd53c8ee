/*
 * cg_walk.c — what every target shares: value naming (the model's own
 * names made unique C identifiers), the C expressions of values, the
 * weight/state layout macros and the descriptor that ends each artifact.
 * The targets (cg_c.c, and the device targets) print the ops.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_internal.h"

/* "%.9g" gives the shortest-ish text that reads back as the same float, but
 * "1" or "0" followed by 'f' is not a C literal: add ".0" when the text has
 * neither a point nor an exponent.  Non-finite values have no literal at
 * all; the frontends refuse them (an assert here, not generated code that
 * fails to compile). */
const char *cg_float(char buf[32], float v) {
  IR_ASSERT(v - v == 0); /* finite */
  int n = snprintf(buf, 32, "%.9g", v);
  snprintf(buf + n, (size_t)(32 - n), "%sf", strpbrk(buf, ".e") ? "" : ".0");
  return buf;
}

void c_ident(const char *in, char *out, size_t size) {
  size_t k = 0;
  for (; *in && k + 1 < size; in++) out[k++] = isalnum((unsigned char)*in) ? *in : '_';
  out[k] = 0;
}

/* The SC_W_* constant of a weight's band, as C text (a dtype that is no
 * band reads as f32). */
const char *wtype_name(DType d) {
  const int w = ir_wtype(d);
  return sc_band(w < 0 ? SC_W_F32 : w)->abi_name;
}

const IrNode *node(const Cg *cg, int i) { return &cg->g->nodes[i]; }

/* The C expression of a value as a float pointer (or W_/S_ macro).  A
 * view that writes state (KV_STORE) is the state it wrote: it has no
 * variable of its own. */
static int state_view(const IrNode *n) {
  return (ir_op_flags[n->op] & (F_VIEW | F_STATE)) == (F_VIEW | F_STATE);
}

const char *ref(const Cg *cg, int i) {
  const IrNode *n = node(cg, i);
  if (state_view(n)) return ref(cg, n->src[0]);
  return cg->var[i];
}

long long ld(const Cg *cg, int i) {
  const IrNode *n = node(cg, i);
  if (state_view(n) || n->op == OP_STATE) return (long long)n->cols;
  return (long long)n->ld;
}

/* Row count of a value as C text: "T", "(T * 4)" or a literal. */
const char *rows(const IrNode *n) {
  static _Thread_local char ring[4][48];
  static _Thread_local int k;
  k = (k + 1) % 4;
  return ir_rows_text(n->rows, ring[k], sizeof ring[k]);
}

/* C type of a view's elements: token ids or activations. */
const char *vtype(const IrNode *n) { return n->dtype == DT_I32 ? "const int" : "float"; }

void comment_node(Cg *cg, int i) {
  const IrNode *n = node(cg, i);
  if (ir_op_flags[n->op] & F_LEAF) return;
  OUT("\n  /* %s = %s(", n->name, ir_op_names[n->op]);
  for (int s = 0; s < n->nsrc; s++) OUT("%s%s", s ? ", " : "", node(cg, n->src[s])->name);
  OUT(") */\n");
}

void cg_name_values(Cg *cg, const Graph *g) {
  cg->g = g;
  /* variable names: the model's names, made unique */
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    char id[IR_NAME];
    c_ident(n->name, id, sizeof id);
    if (n->op == OP_WEIGHT) snprintf(cg->var[i], sizeof cg->var[i], "W_%s", id);
    else if (n->op == OP_STATE) snprintf(cg->var[i], sizeof cg->var[i], "S_%s", id);
    else if (n->op == OP_INPUT_IDS) snprintf(cg->var[i], sizeof cg->var[i], "io->ids");
    else snprintf(cg->var[i], sizeof cg->var[i], "%s", id);
    for (int j = 0; j < i; j++)
      if (!strcmp(cg->var[j], cg->var[i])) {
        size_t len = strlen(cg->var[i]);
        snprintf(cg->var[i] + len, sizeof cg->var[i] - len, "_%d", i);
        break;
      }
  }
}

/* Weight and state macros: W_<name> and S_<name> over the W and S bases. */
void cg_emit_layout(Cg *cg) {
  const Module *m = cg->m;
  OUT("/* Weights: byte offsets in the weight file's data section. */\n");
  for (int w = 0; w < m->n_weights; w++) {
    const IrWeight *wt = &m->weights[w];
    if (!wt->used) continue;
    char id[IR_NAME];
    c_ident(wt->name, id, sizeof id);
    OUT("#define W_%s (W + %lldLL) /* %s [", id, (long long)wt->offset, ir_dtype_name(wt->band));
    if (wt->sets > 1) OUT("%lld, ", (long long)wt->sets);
    OUT("%lld, %lld] ", (long long)wt->rows, (long long)wt->cols);
    sb_comment(cg->o, wt->source);
    OUT(" */\n");
  }
  OUT("\n/* Session state: byte offsets in the state block. */\n");
  for (int s = 0; s < m->n_states; s++) {
    char id[IR_NAME];
    c_ident(m->states[s].name, id, sizeof id);
    OUT("#define S_%s ((float *)(S + %lldLL)) /* f32 [%lld, %lld] */\n", id,
        (long long)m->states[s].offset, (long long)m->states[s].rows, (long long)m->states[s].cols);
  }
}

/* Whether g keeps state that follows one sequence rather than a position
 * per row (a conv's left context, a transposed conv's carry, a recurrent
 * matrix): every state writer but the KV caches, which rows index by their
 * own positions. */
static int sequence_state(const Graph *g) {
  for (int i = 0; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    const int per_row = g->row_states && (n->op == OP_DWCONV || n->op == OP_DELTA_RULE);
    if (!n->dead && (ir_op_flags[n->op] & F_STATE) && n->op != OP_KV_STORE && n->op != OP_ROPE_ATTENTION &&
        !per_row)
      return 1;
  }
  return 0;
}

/* Token ids per row of io->ids: the columns of the graph's INPUT_IDS (1
 * when it reads embeddings instead). */
static int ids_cols(const Graph *g) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == OP_INPUT_IDS) return (int)g->nodes[i].cols;
  return 1;
}

/* Output rows per row of the call, when every row's output is returned:
 * the logits OUTPUT's rows over T (T * m: a codec's samples per frame; or
 * a literal after pass_specialize in graphs of exactly max_tokens rows). */
static int out_rows_mul(const Graph *g) {
  for (int i = 0; g->out_all_rows && i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->op != OP_OUTPUT || n->p.slot != OUT_LOGITS) continue;
    if (IR_ROWS_ON_T(n->rows)) {
      IR_ASSERT(IR_ROWS_DIV(n->rows) == 1); /* whole output rows per input row */
      return IR_ROWS_MUL(n->rows);
    }
    IR_ASSERT(g->exact && n->rows % g->max_tokens == 0);
    return (int)(n->rows / g->max_tokens);
  }
  return 1;
}

/* The entry table, tensor table, config text and the exported descriptor
 * (sc_abi.h) that every target's host code ends with.  Every string in them
 * is printed by sb_cquote / sb_cstring: names come from the checkpoint and
 * from -o. */
void cg_emit_descriptor(Cg *cg, const CgInfo *info, const char *target) {
  cg_emit_descriptor_ext(cg, info, target, NULL);
}

void cg_emit_descriptor_ext(Cg *cg, const CgInfo *info, const char *target, const char *extra) {
  const Module *m = cg->m;
  StrBuf *o = cg->o;
  OUT("\nstatic const sc_entry entries[] = {\n");
  OUT("  /* name, fn, input, max_tokens, ids_cols, out_cols, out_all_rows, out_rows_mul, hidden_cols,\n"
      "   * scratch_bytes */\n");
  for (int gi = 0; gi < m->n_graphs; gi++) {
    const Graph *g = &m->graphs[gi];
    OUT("  {");
    sb_cquote(o, g->name);
    OUT(", entry_%s, %s, %d, %d, %d, %d, %d, %d, %lldULL},\n", g->name,
        g->input == SC_IN_IDS ? "SC_IN_IDS" : "SC_IN_EMBEDS", g->max_tokens, ids_cols(g), g->out_cols,
        g->out_all_rows, out_rows_mul(g), g->hidden_cols, (long long)g->scratch_bytes);
  }
  OUT("};\n\nstatic const sc_tensor_info tensors[] = {\n");
  int n_tensors = 0;
  for (int w = 0; w < m->n_weights; w++) {
    const IrWeight *wt = &m->weights[w];
    if (!wt->used) continue;
    OUT("  {");
    sb_cquote(o, wt->name);
    OUT(", ");
    sb_cquote(o, wt->source);
    OUT(", %s, %lld, %lld, %lld, %lldULL, %lldULL},\n", wtype_name(wt->band),
        (long long)wt->sets, (long long)wt->rows, (long long)wt->cols, (long long)wt->offset,
        (long long)wt->bytes);
    n_tensors++;
  }
  OUT("};\n\nstatic const char config_json[] =\n");
  const char *cj = m->config_json ? m->config_json : "{}";
  size_t len = strlen(cj);
  for (size_t k = 0; k < len; k += 72) {
    char chunk[80];
    snprintf(chunk, sizeof chunk, "%.*s", (int)(len - k < 72 ? len - k : 72), cj + k);
    OUT("  \"");
    sb_cstring(o, chunk);
    OUT("\"\n");
  }
  if (!len) OUT("  \"\"\n");
  OUT("  ;\n\nstatic const sc_model_desc desc = {\n");
  OUT("  SC_DESC_MAGIC, SC_ABI_VERSION,\n");
  OUT("  ");
  sb_cquote(o, m->family);
  OUT(", ");
  sb_cquote(o, m->model_type);
  OUT(", config_json, 0x%016llxULL,\n  ", (unsigned long long)m->config_hash);
  sb_cquote(o, SPEECHC_VERSION);
  OUT(", ");
  sb_cquote(o, target);
  OUT(", ");
  sb_cquote(o, info->cpu_features);
  OUT(",\n");
  OUT("  %d, %d, %d, %d, /* vocab, hidden, layers, max_context */\n", m->vocab, m->hidden,
      m->n_layers, m->max_context);
  OUT("  ");
  sb_cquote(o, info->weight_file);
  OUT(", %lluULL, 0x%016llxULL, 0x%016llxULL,\n", (unsigned long long)info->weight_bytes,
      (unsigned long long)info->weight_checksum, (unsigned long long)info->build_id);
  OUT("  %lldULL, /* state bytes */\n", (long long)m->state_bytes);
  OUT("  %d, entries, %d, tensors,\n", m->n_graphs, n_tensors);
  if (extra) OUT("%s", extra);
  if (m->notes[0]) {
    OUT("  .notes = ");
    sb_cquote(o, m->notes);
    OUT(",\n");
  }
  OUT("};\n\n");
  OUT("const sc_model_desc *speechc_model(void) {\n%s  return &desc;\n}\n",
      extra ? "" : "  (void)sc_bf16_keep;\n");
}

/* An entry function's header: its signature, the token-count and context
 * checks every target makes before touching a buffer.  `scratch_note`
 * follows the scratch size in the comment; `extra` is appended to the
 * (void) line.  host_io: io's pointers are host memory, so rows placed one
 * by one (sc_io.row_pos) have their positions checked here too; a device
 * target's host code cannot read them and leaves that to the runtime
 * (it still refuses placed rows in a graph whose state follows one
 * sequence: that needs only the pointers). */
void cg_entry_prologue(Cg *cg, const Graph *g, int host_io, const char *scratch_note, const char *extra) {
  int max_ctx = cg->m->max_context;
  OUT("\n/* %s: T %s %d tokens per call; scratch %lld bytes%s */\n", g->name,
      g->exact ? "=" : "<=", g->max_tokens, (long long)g->scratch_bytes, scratch_note);
  OUT("static int entry_%s(const sc_kernels *K, const unsigned char *W, unsigned char *S,\n"
      "    unsigned char *X, const sc_io *io) {\n", g->name);
  if (g->exact) {
    OUT("  if (io->n != %d) {\n    K->error(K->ctx, \"%s: takes exactly %d token%s\", io->n);\n    return 1;\n  }\n",
        g->max_tokens, g->name, g->max_tokens, g->max_tokens == 1 ? "" : "s");
  } else {
    OUT("  const int T = io->n;\n");
    OUT("  if (T < 1 || T > %d) {\n    K->error(K->ctx, \"%s: token count out of range [1, %d]\", T);\n    return 1;\n  }\n",
        g->max_tokens, g->name, g->max_tokens);
    const int align = ir_graph_t_align(g);
    if (align > 1)
      OUT("  if (T %% %d) {\n    K->error(K->ctx, \"%s: token count not a multiple of %d\", T);\n    return 1;\n  }\n",
          align, g->name, align);
  }
  if (g->pos_mul > 1)
    OUT("  const int pos = io->pos * %d; /* io->pos counts frames of %d steps */\n", g->pos_mul, g->pos_mul);
  else
    OUT("  const int pos = io->pos;\n");
  char span[16];
  snprintf(span, sizeof span, g->exact ? "%d" : "T", g->max_tokens);
  /* only the pointers are read: a device target's host code can check it too */
  if (sequence_state(g))
    OUT("  if (io->row_pos || io->row_state) {\n    K->error(K->ctx, \"%s: rows placed one by one (row_pos, "
        "row_state) are not supported: its conv or recurrent state follows one sequence\", 0);\n    return 1;\n"
        "  }\n", g->name);
  if (host_io) {
    OUT("  for (int t = 0; io->row_pos && t < %s; t++)\n", span);
    OUT("    if (io->row_pos[t] < 0 || io->row_pos[t] >= %d) {\n      K->error(K->ctx, \"%s: a row's position is "
        "outside the context (max_context %d)\", io->row_pos[t]);\n      return 1;\n    }\n", max_ctx, g->name,
        max_ctx);
  }
  /* max_context counts what io->pos counts: frames where a frame is pos_mul steps */
  const char *at = g->pos_mul > 1 ? "io->pos" : "pos";
  OUT("  if (!io->row_pos && (%s < 0 || %s + %s > %d)) {\n    K->error(K->ctx, \"%s: context full (max_context %d)\", "
      "%s);\n    return 1;\n  }\n", at, at, span, max_ctx, g->name, max_ctx, at);
  OUT("  (void)W; (void)S; (void)X;%s\n", extra);
}

/* Node i's value, the half of an entry function every target prints the
 * same: a weight, input or view is declared whole (returns 1); any other
 * value gets its buffer pointer declared, scratch or the entry's output,
 * and returns 0 for the target to compute it.  steps_on_device: a weight
 * whose set follows io->step is passed at its base and the kernels add
 * the set (CUDA, so that a recorded launch stays valid); else the host
 * offsets it. */
int cg_emit_value(Cg *cg, int i, int steps_on_device) {
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const char *v = cg->var[i];
  const Module *m = cg->m;
  switch (n->op) {
  case OP_WEIGHT: {
    const IrWeight *w = &m->weights[n->weight];
    if (w->sets == 1) return 1; /* the W_ macro itself */
    char base[IR_NAME];
    c_ident(w->name, base, sizeof base);
    long long set_bytes = (long long)(w->rows * ir_band_row_bytes(w->band, w->cols));
    if (p->set_mode == SET_FIXED) {
      OUT("  const unsigned char *%s = W_%s + %d * %lldLL; /* set %d of %lld */\n", v, base,
          p->off, set_bytes, p->off, (long long)w->sets);
    } else {
      OUT("  if (io->step + %d < 0 || io->step + %d >= %lld) {\n", p->off, p->off, (long long)w->sets);
      OUT("    K->error(K->ctx, \"%s: step out of range\", io->step);\n    return 1;\n  }\n", n->name);
      if (steps_on_device)
        OUT("  const unsigned char *%s = W_%s; /* the kernels add set io->step%+d */\n", v, base, p->off);
      else
        OUT("  const unsigned char *%s = W_%s + (long)(io->step + %d) * %lldLL; /* set step%+d */\n",
            v, base, p->off, set_bytes, p->off);
    }
    return 1;
  }
  case OP_INPUT_IDS:
  case OP_STATE:
    return 1; /* macros and io fields */
  case OP_INPUT_EMBEDS:
    OUT("  const float *%s = io->embeds; /* [%s, %lld] */\n", v, rows(n), (long long)n->cols);
    return 1;
  case OP_INPUT_HIDDEN:
    OUT("  const float *%s = io->hidden_in; /* [%s, %lld] */\n", v, rows(n), (long long)n->cols);
    return 1;
  case OP_SLICE:
    OUT("  %s *%s = %s + %d; /* [%s, %lld] view, row stride %lld */\n", vtype(n), v,
        ref(cg, n->src[0]), p->off, rows(n), (long long)n->cols, (long long)n->ld);
    return 1;
  case OP_RESHAPE:
    OUT("  float *%s = %s; /* [%s, %lld] view: %s's rows split in %d */\n", v, ref(cg, n->src[0]), rows(n),
        (long long)n->cols, node(cg, n->src[0])->name, p->stride);
    return 1;
  case OP_ROW:
    if (p->off < 0)
      OUT("  %s *%s = %s + (%s - 1) * %lld; /* [1, %lld] last token */\n", vtype(n), v,
          ref(cg, n->src[0]), rows(node(cg, n->src[0])), ld(cg, n->src[0]), (long long)n->cols);
    else
      OUT("  %s *%s = %s + %d * %lld; /* [1, %lld] row %d */\n", vtype(n), v, ref(cg, n->src[0]),
          p->off, ld(cg, n->src[0]), (long long)n->cols, p->off);
    return 1;
  default:
    break;
  }
  /* every other value owns a scratch buffer (or writes through io) */
  if (n->buf >= 0)
    OUT("  float *%s = (float *)(X + %lld); /* [%s, %lld] */\n", v, (long long)n->buf,
        rows(n), (long long)n->cols);
  else if (IR_BUF_IS_OUT(n->buf))
    OUT("  float *%s = io->%s; /* [%s, %lld] the entry's output itself */\n", v,
        IR_BUF_SLOT(n->buf) == OUT_LOGITS ? "out" : "hidden_out", rows(n), (long long)n->cols);
  return 0;
}
