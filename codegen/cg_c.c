/*
 * cg_c.c — the C target.
 *
 * One walk over each planned graph; each live node prints a short comment
 * naming its op and shape, then either a loop nest with literal bounds or
 * a call into the kernel table K.  Values are float pointers into the
 * scratch arena X at planned offsets; views are pointer offsets; weights
 * and states are macros over W and S.  The token count T is a literal 1 in
 * decode graphs and io->n (bounded by max_tokens) in prefill graphs.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_internal.h"
#include "target.h"

/* Row t's position (sc_io: pos + t unless the call places its rows). */
#define ROW_POS "(io->row_pos ? io->row_pos[t] : pos + t)"

/* y = x * rsqrt(mean(x^2) + eps) * w' over groups of p.group, rows of
 * rowexpr: the runtime's rmsnorm (sc_abi.h). */
static void emit_rmsnorm_body(Cg *cg, const IrParams *p, int64_t cols, const char *x,
                              long long ldx, const char *w, const char *y, long long ldy,
                              const char *rowexpr) {
  char eps[32];
  OUT("  K->rmsnorm(K->ctx, %s, %lld, (const float *)%s, %d, %s, %s, %lld, %s, %lld, %d);\n", x, ldx, w,
      p->norm_mode == NORM_ONE_PLUS, cg_float(eps, p->eps), y, ldy, rowexpr, (long long)cols, p->group);
}

/* RoPE over p.heads heads (each RMS-normalised by norm_w first when not
 * NULL): the runtime's rope (sc_abi.h), positions from io. */
static void emit_rope_body(Cg *cg, const IrParams *p, const char *table, const char *x,
                           long long ldx, const char *y, long long ldy, const char *rowexpr,
                           const char *norm_w, float eps) {
  char epsf[32], nw[IR_NAME + 24] = "0";
  if (norm_w) snprintf(nw, sizeof nw, "(const float *)%s", norm_w);
  OUT("  K->rope(K->ctx, (const float *)%s, %s, %lld, %s, %lld, %s, pos, io->row_pos,\n", table, x, ldx, y, ldy,
      rowexpr);
  OUT("          %d, %d, %d, %d, %s, %d, %s); /* %d heads of %d, %d rotated (%s)%s */\n", p->heads, p->head_dim,
      p->rot_dims, p->rope_mode != ROPE_NEOX, nw, p->norm_mode == NORM_ONE_PLUS,
      cg_float(epsf, norm_w ? eps : 0.0f), p->heads, p->head_dim, p->rot_dims,
      p->rope_mode == ROPE_NEOX ? "NeoX pairs" : "interleaved pairs",
      !norm_w ? "" : p->norm_mode == NORM_ONE_PLUS ? ", QK-norm by 1 + w first" : ", QK-norm first");
}

/* Rows of x into a state value (a cache) at their positions: the
 * runtime's store_rows (sc_abi.h). */
static void emit_store_rows(Cg *cg, const char *x, long long ldx, const char *cache, long long cap,
                            long long cols, const char *rowexpr) {
  OUT("  K->store_rows(K->ctx, %s, %lld, %s, %lld, %lld, %s, pos, io->row_pos, io->row_state);\n", x, ldx,
      cache, cap, cols, rowexpr);
}

static void emit_copy_rows(Cg *cg, const char *rowexpr, const char *x, long long ldx,
                           const char *y, long long ldy, int64_t cols) {
  OUT("  for (int t = 0; t < %s; t++)\n", rowexpr);
  OUT("    for (int c = 0; c < %lld; c++) %s[t * %lld + c] = %s[t * %lld + c];\n",
      (long long)cols, y, ldy, x, ldx);
}

/* A value as a float pointer expression: a weight's macro is a byte
 * address, cast (the ops that read weights as floats require f32). */
static const char *fref(Cg *cg, int i) {
  static _Thread_local char ring[4][IR_NAME + 32];
  static _Thread_local int k;
  if (node(cg, i)->op != OP_WEIGHT) return ref(cg, i);
  k = (k + 1) % 4;
  snprintf(ring[k], sizeof ring[k], "((const float *)%s)", ref(cg, i));
  return ring[k];
}

/* State value i in row t's state block (sc_io.row_state), for the per-row
 * steps of a graph with row_states. */
static const char *row_state_ref(Cg *cg, int i) {
  static _Thread_local char buf[IR_NAME + 96];
  snprintf(buf, sizeof buf, "(float *)((unsigned char *)%s + (io->row_state ? io->row_state[t] : 0))", ref(cg, i));
  return buf;
}

/* Elementwise y = f(a[, b]) with an expression over `a` and `b`; b may be
 * one row broadcast over a's rows (MUL by LayerScale's gamma). */
static void emit_map(Cg *cg, const IrNode *n, int i, const char *expr) {
  OUT("  for (int t = 0; t < %s; t++)\n", rows(n));
  OUT("    for (int c = 0; c < %lld; c++) {\n", (long long)n->cols);
  OUT("      const float a = %s[t * %lld + c];\n", ref(cg, n->src[0]), ld(cg, n->src[0]));
  if (n->nsrc > 1 && node(cg, n->src[1])->rows == 1 && n->rows != 1)
    OUT("      const float b = %s[c]; /* one row for every t */\n", fref(cg, n->src[1]));
  else if (n->nsrc > 1)
    OUT("      const float b = %s[t * %lld + c];\n", fref(cg, n->src[1]), ld(cg, n->src[1]));
  OUT("      %s[t * %lld + c] = %s;\n", cg->var[i], (long long)n->ld, expr);
  OUT("    }\n");
}

/* --check-numerics: after an output is written, the first NaN or inf in it
 * (a flat index over its rows) fails the call through K->error.  A bit
 * test, not x != x: it catches inf too and means the same under any
 * compiler flags. */
static void emit_check_finite(Cg *cg, const IrNode *n, const char *dst, const char *what) {
  OUT("  for (int i = 0; i < %s * %lld; i++) { /* --check-numerics */\n", rows(n), (long long)n->cols);
  OUT("    union { float f; unsigned u; } v;\n    v.f = %s[i];\n", dst);
  OUT("    if ((v.u & 0x7f800000u) == 0x7f800000u) {\n");
  OUT("      K->error(K->ctx, (v.u & 0x007fffffu) ? \"--check-numerics: NaN in the %s at index\"\n"
      "                                      : \"--check-numerics: inf in the %s at index\", i);\n", what, what);
  OUT("      return 1;\n    }\n  }\n");
}

static int emit_node(Cg *cg, int i) {
  if (cg_emit_value(cg, i, 0)) return SC_OK;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const char *v = cg->var[i];
  const Module *m = cg->m;
  switch (n->op) {
  case OP_EMBED: {
    const IrNode *tab = node(cg, SRC(n, EMBED, TABLE));
    const IrWeight *w = &m->weights[tab->weight];
    OUT("  for (int t = 0; t < %s; t++) {\n", rows(n));
    const long long ids_ld = ld(cg, SRC(n, EMBED, IDS)); /* > 1: one column of a codes input */
    if (ids_ld == 1) OUT("    const int id = %s[t];\n", ref(cg, SRC(n, EMBED, IDS)));
    else OUT("    const int id = %s[t * %lld];\n", ref(cg, SRC(n, EMBED, IDS)), ids_ld);
    OUT("    float *y = %s + t * %lld;\n", v, (long long)n->ld);
    OUT("    if (id == -1) {\n      for (int c = 0; c < %lld; c++) y[c] = 0.0f;\n      continue;\n    }\n",
        (long long)n->cols);
    OUT("    if (id < 0 || id >= %lld) {\n", (long long)w->rows);
    OUT("      K->error(K->ctx, \"%s: token id out of range [0, %lld)\", id);\n", n->name, (long long)w->rows);
    OUT("      return 1;\n    }\n");
    if (w->band == DT_F32) {
      OUT("    const float *row = (const float *)%s + (long)id * %lld;\n", cg->var[SRC(n, EMBED, TABLE)],
          (long long)w->cols);
      OUT("    for (int c = 0; c < %lld; c++) y[c] = row[c];\n", (long long)w->cols);
    } else if (w->band == DT_BF16) {
      OUT("    const unsigned short *row = (const unsigned short *)%s + (long)id * %lld;\n",
          cg->var[SRC(n, EMBED, TABLE)], (long long)w->cols);
      OUT("    for (int c = 0; c < %lld; c++) y[c] = bf16_to_f32(row[c]);\n", (long long)w->cols);
    } else if (sc_band_quantized(ir_wtype(w->band))) {
      /* one row of blocks: f16 scale (decoded exactly, subnormals
       * included), then 32 int8 or 16 bytes of nibbles (low: element k,
       * high: element k + 16), as the target lays them out
       * (target_group): on cpu the CPU's groups of eight
       * (runtime/kernels.h), byte k of a grouped block
       * (k / 4) * 32 + k % 4 bytes after its first, the last nb % 8 blocks
       * GGML's. */
      const sc_band_traits *bt = sc_band(ir_wtype(w->band));
      const int q8 = w->band == DT_Q8_0, G = target_group(cg->target, w->band);
      const long long nb = (long long)(w->cols / bt->block), whole = G ? nb / G * G : 0;
      OUT("    const unsigned char *row = %s + (long)id * %lldLL; /* %s */\n", cg->var[SRC(n, EMBED, TABLE)],
          (long long)ir_band_row_bytes(w->band, w->cols), ir_dtype_name(w->band));
      OUT("    for (int b = 0; b < %lld; b++) {\n", nb);
      if (whole) {
        /* group b / G: G scales (2 bytes each), then chunks of 4 bytes per
         * block (G of them a chunk) */
        int shift = 0;
        while (1 << shift < G) shift++;
        IR_ASSERT(1 << shift == G);
        OUT("      const int grouped = b < %lld, step = grouped ? %d : 4;\n", whole, 4 * G);
        OUT("      const unsigned char *blk = grouped ? row + (b >> %d) * %d + 2 * (b & %d) : row + b * %d;\n",
            shift, bt->cpu_group_bytes, G - 1, bt->block_bytes);
        OUT("      const unsigned char *q = grouped ? row + (b >> %d) * %d + %d + 4 * (b & %d) : blk + 2;\n",
            shift, bt->cpu_group_bytes, 2 * G, G - 1);
      } else {
        OUT("      const unsigned char *blk = row + b * %d;\n", bt->block_bytes);
        OUT("      const unsigned char *q = blk + 2;\n      const int step = 4;\n");
      }
      OUT("      const unsigned h = blk[0] | (unsigned)blk[1] << 8, e = h >> 10 & 31, mant = h & 1023;\n");
      OUT("      union { unsigned u; float f; } cv;\n");
      OUT("      cv.u = e == 31 ? 0x7f800000u | mant << 13 : (e + 112) << 23 | mant << 13;\n");
      OUT("      float d = e ? cv.f : (float)mant * 5.9604644775390625e-8f; /* 2^-24 */\n");
      OUT("      if (h & 0x8000) d = -d;\n");
      if (q8) {
        OUT("      for (int k = 0; k < 32; k++) y[b * 32 + k] = d * (float)(signed char)q[(k >> 2) * step + (k & 3)];\n");
      } else {
        OUT("      for (int k = 0; k < 16; k++) {\n");
        OUT("        const unsigned char v = q[(k >> 2) * step + (k & 3)];\n");
        OUT("        y[b * 32 + k] = d * (float)((v & 15) - 8);\n");
        OUT("        y[b * 32 + k + 16] = d * (float)((v >> 4) - 8);\n");
        OUT("      }\n");
      }
      OUT("    }\n");
    } else {
      return sc_fail(cg->err, SC_EINPUT, "C target: embedding band %s is not supported yet",
                     ir_dtype_name(w->band));
    }
    OUT("  }\n");
    return SC_OK;
  }
  case OP_LINEAR:
  case OP_LINEAR_ADD:
  case OP_NORM_LINEAR: {
    const IrLinOperands o = ir_lin_operands(n);
    const int xi = o.x, wi = o.w, bi = o.bias;
    const IrNode *w = node(cg, wi);
    const char *x = ref(cg, xi);
    long long ldx = ld(cg, xi);
    char xbuf[IR_NAME + 16];
    if (n->op == OP_NORM_LINEAR) {
      snprintf(xbuf, sizeof xbuf, "%s_in", v);
      OUT("  float *%s = (float *)(X + %lld); /* [%s, %lld] normalised input */\n", xbuf,
          (long long)n->aux, rows(n), (long long)node(cg, xi)->cols);
      emit_rmsnorm_body(cg, p, node(cg, xi)->cols, x, ldx, ref(cg, o.nw), xbuf,
                        (long long)node(cg, xi)->cols, rows(n));
      x = xbuf;
      ldx = (long long)node(cg, xi)->cols;
    }
    int acc = 0;
    if (n->op == OP_LINEAR_ADD) {
      int r = o.res;
      if (node(cg, r)->buf != n->buf || node(cg, r)->op == OP_SLICE)
        emit_copy_rows(cg, rows(n), ref(cg, r), ld(cg, r), v, (long long)n->ld, n->cols);
      acc = 1;
    }
    char bias[IR_NAME + 24] = "0";
    if (bi >= 0) snprintf(bias, sizeof bias, "(const float *)%s", ref(cg, bi));
    OUT("  K->linear(K->ctx, %s, %s, %s, %s, %lld, %s, %lld, %s, %lld, %lld, %d);\n",
        wtype_name(w->dtype), cg->var[wi], bias, x, ldx, v,
        (long long)n->ld, rows(n), (long long)w->rows, (long long)w->cols, acc);
    return SC_OK;
  }
  case OP_LINEAR_SWIGLU: {
    const IrLinOperands o = ir_lin_operands(n);
    const IrNode *w = node(cg, o.w);
    const char *x = ref(cg, o.x);
    long long ldx = ld(cg, o.x);
    char xbuf[IR_NAME + 16];
    if (o.nw >= 0) { /* the norm first, into the aux buffer */
      const long long C = (long long)node(cg, o.x)->cols;
      snprintf(xbuf, sizeof xbuf, "%s_in", v);
      OUT("  float *%s = (float *)(X + %lld); /* [%s, %lld] normalised input */\n", xbuf, (long long)n->aux,
          rows(n), C);
      emit_rmsnorm_body(cg, p, C, x, ldx, ref(cg, o.nw), xbuf, C, rows(n));
      x = xbuf;
      ldx = C;
    }
    OUT("  K->linear_swiglu(K->ctx, %s, %s, %s, %lld, %s, %lld, %s, %lld, %lld);\n",
        wtype_name(w->dtype), cg->var[o.w], x, ldx, v,
        (long long)n->ld, rows(n), (long long)w->rows / 2, (long long)w->cols);
    return SC_OK;
  }
  case OP_ROPE_ATTENTION: {
    /* the definition, step by step: rotated q and k into the aux buffer,
     * both cache stores, then attention over the caches */
    const int norm = n->nsrc > S_ROPE_ATTENTION_QN;
    const int qi = SRC(n, ROPE_ATTENTION, Q), ki = SRC(n, ROPE_ATTENTION, K), vi = SRC(n, ROPE_ATTENTION, V);
    const char *kcache = ref(cg, SRC(n, ROPE_ATTENTION, KC)), *vcache = ref(cg, SRC(n, ROPE_ATTENTION, VC));
    const char *table = ref(cg, SRC(n, ROPE_ATTENTION, TABLE));
    const long long QD = (long long)node(cg, qi)->cols, KD = (long long)node(cg, ki)->cols;
    const IrNode *kc = node(cg, SRC(n, ROPE_ATTENTION, KC));
    char T[24];
    snprintf(T, sizeof T, "%s", rows(n));
    OUT("  float *%s_q = (float *)(X + %lld); /* [%s, %lld] rotated q */\n", v, (long long)n->aux, T, QD);
    OUT("  float *%s_k = %s_q + %s * %lld; /* [%s, %lld] rotated k */\n", v, v, T, QD, T, KD);
    char qb[IR_NAME + 16], kb[IR_NAME + 16];
    snprintf(qb, sizeof qb, "%s_q", v);
    snprintf(kb, sizeof kb, "%s_k", v);
    IrParams rp = *p;
    emit_rope_body(cg, &rp, table, ref(cg, qi), ld(cg, qi), qb, QD, T,
                   norm ? ref(cg, SRC(n, ROPE_ATTENTION, QN)) : NULL, p->eps);
    rp.heads = p->kv_heads;
    emit_rope_body(cg, &rp, table, ref(cg, ki), ld(cg, ki), kb, KD, T,
                   norm ? ref(cg, SRC(n, ROPE_ATTENTION, KN)) : NULL, p->eps);
    OUT("  /* the new k and v rows into the caches */\n");
    emit_store_rows(cg, kb, KD, kcache, (long long)kc->rows, KD, T);
    emit_store_rows(cg, ref(cg, vi), ld(cg, vi), vcache, (long long)kc->rows, KD, T);
    char scale[32];
    OUT("  K->attention(K->ctx, %s, %lld, %s, %s, %lld, %lld, %s, %lld, %s, pos, io->row_pos, io->row_state,\n"
        "               %d, %d, %d, %s, %d);\n",
        qb, QD, kcache, vcache, KD, (long long)kc->rows, v, (long long)n->ld,
        rows(n), p->heads, p->kv_heads, p->head_dim, cg_float(scale, p->scale), p->window);
    return SC_OK;
  }
  case OP_RMSNORM:
    emit_rmsnorm_body(cg, p, n->cols, ref(cg, SRC(n, RMSNORM, X)), ld(cg, SRC(n, RMSNORM, X)),
                      ref(cg, SRC(n, RMSNORM, NW)), v, (long long)n->ld, rows(n));
    return SC_OK;
  case OP_ROPE:
    emit_rope_body(cg, p, ref(cg, SRC(n, ROPE, TABLE)), ref(cg, SRC(n, ROPE, X)), ld(cg, SRC(n, ROPE, X)), v,
                   (long long)n->ld, rows(n), NULL, 0);
    return SC_OK;
  case OP_NORM_ROPE:
    emit_rope_body(cg, p, ref(cg, SRC(n, NORM_ROPE, TABLE)), ref(cg, SRC(n, NORM_ROPE, X)),
                   ld(cg, SRC(n, NORM_ROPE, X)), v,
                   (long long)n->ld, rows(n), ref(cg, SRC(n, NORM_ROPE, NW)), p->eps);
    return SC_OK;
  case OP_POS_ADD: {
    const int xi = SRC(n, POS_ADD, X);
    OUT("  for (int t = 0; t < %s; t++) {\n", rows(n));
    OUT("    const float *pe = (const float *)%s + (long)%s * %lld;\n", ref(cg, SRC(n, POS_ADD, TABLE)), ROW_POS,
        (long long)n->cols);
    OUT("    for (int c = 0; c < %lld; c++) %s[t * %lld + c] = %s[t * %lld + c] + pe[c];\n  }\n", (long long)n->cols,
        v, (long long)n->ld, ref(cg, xi), ld(cg, xi));
    return SC_OK;
  }
  case OP_KV_STORE: {
    const IrNode *c = node(cg, SRC(n, KV_STORE, CACHE));
    emit_store_rows(cg, ref(cg, SRC(n, KV_STORE, X)), ld(cg, SRC(n, KV_STORE, X)), ref(cg, SRC(n, KV_STORE, CACHE)),
                    (long long)c->rows, (long long)c->cols, rows(node(cg, SRC(n, KV_STORE, X))));
    return SC_OK;
  }
  case OP_ATTENTION: {
    const IrNode *c = node(cg, SRC(n, ATTENTION, KC));
    char scale[32];
    if (p->align > 1) {
      /* one call per row: each row's window is its own (ops.def) */
      const int qi = SRC(n, ATTENTION, Q);
      OUT("  for (int t = 0; t < %s; t++) /* positions in groups of %d */\n", rows(n), p->align);
      OUT("    K->attention(K->ctx, %s + t * %lld, %lld, %s, %s, %lld, %lld, %s + t * %lld, %lld, 1, pos + t, 0, 0,\n"
          "                 %d, %d, %d, %s, %d - (%d - (pos + t) %% %d));\n",
          ref(cg, qi), ld(cg, qi), ld(cg, qi), ref(cg, SRC(n, ATTENTION, KC)), ref(cg, SRC(n, ATTENTION, VC)),
          (long long)c->cols, (long long)c->rows, v, (long long)n->ld, (long long)n->ld, p->heads, p->kv_heads,
          p->head_dim, cg_float(scale, p->scale), p->window, p->align - 1, p->align);
      IR_ASSERT(n->nsrc == S_ATTENTION_GATE);
      return SC_OK;
    }
    OUT("  K->attention(K->ctx, %s, %lld, %s, %s, %lld, %lld, %s, %lld, %s, pos, io->row_pos, io->row_state,\n"
        "               %d, %d, %d, %s, %d);\n",
        ref(cg, SRC(n, ATTENTION, Q)), ld(cg, SRC(n, ATTENTION, Q)), ref(cg, SRC(n, ATTENTION, KC)),
        ref(cg, SRC(n, ATTENTION, VC)),
        (long long)c->cols, (long long)c->rows, v, (long long)n->ld, rows(n), p->heads,
        p->kv_heads, p->head_dim, cg_float(scale, p->scale), p->window);
    if (n->nsrc > S_ATTENTION_GATE) {
      OUT("  for (int t = 0; t < %s; t++)\n", rows(n));
      OUT("    for (int c = 0; c < %lld; c++) {\n", (long long)n->cols);
      const int gi = SRC(n, ATTENTION, GATE);
      OUT("      const float gt = %s[t * %lld + c];\n", ref(cg, gi), ld(cg, gi));
      OUT("      %s[t * %lld + c] *= 1.0f / (1.0f + K->expf(-gt));\n", v, (long long)n->ld);
      OUT("    }\n");
    }
    return SC_OK;
  }
  case OP_ADD: emit_map(cg, n, i, "a + b"); return SC_OK;
  case OP_MUL: emit_map(cg, n, i, "a * b"); return SC_OK;
  case OP_SILU: /* the map a / (1.0f + K->expf(-a)), vectorized by the runtime */
    OUT("  K->silu(K->ctx, %s, %lld, %s, %lld, %s, %lld);\n", ref(cg, n->src[0]), ld(cg, n->src[0]), v,
        (long long)n->ld, rows(n), (long long)n->cols);
    return SC_OK;
  case OP_SIGMOID: emit_map(cg, n, i, "1.0f / (1.0f + K->expf(-a))"); return SC_OK;
  case OP_SOFTPLUS: emit_map(cg, n, i, "a > 20.0f ? a : K->logf(1.0f + K->expf(a))"); return SC_OK;
  case OP_GELU: emit_map(cg, n, i, "0.5f * a * (1.0f + K->erff(a * 0.70710678118654752f))"); return SC_OK;
  case OP_IM2COL: {
    const int xi = SRC(n, IM2COL, X);
    OUT("  K->im2col(K->ctx, %s, %lld, %s, %s, %lld, %s, %lld, %d, %d);\n", ref(cg, xi), ld(cg, xi),
        ref(cg, SRC(n, IM2COL, STATE)), v, (long long)n->ld, rows(n), (long long)node(cg, xi)->cols, p->ksize,
        p->dilation);
    return SC_OK;
  }
  case OP_IM2COL_STRIDED: {
    const int xi = SRC(n, IM2COL_STRIDED, X);
    OUT("  K->im2col_strided(K->ctx, %s, %lld, %s, %s, %lld, %s, %lld, %d, %d, %d, %d);\n", ref(cg, xi),
        ld(cg, xi), n->nsrc > S_IM2COL_STRIDED_STATE ? ref(cg, SRC(n, IM2COL_STRIDED, STATE)) : "NULL", v,
        (long long)n->ld, rows(node(cg, xi)), (long long)node(cg, xi)->cols, p->ksize, p->dilation, p->stride,
        p->replicate);
    return SC_OK;
  }
  case OP_VQ_NEAREST: {
    const int xi = SRC(n, VQ_NEAREST, X), ti = SRC(n, VQ_NEAREST, TABLE);
    const int has_codes = n->nsrc > S_VQ_NEAREST_CODES;
    const int ci = has_codes ? SRC(n, VQ_NEAREST, CODES) : -1;
    OUT("  K->vq_nearest(K->ctx, %s, %lld, %s, %lld, %s, %lld, %lld, %s, %lld, %s, %lld);\n", ref(cg, xi),
        ld(cg, xi), fref(cg, ti), (long long)node(cg, ti)->rows, has_codes ? ref(cg, ci) : "0",
        has_codes ? ld(cg, ci) : 0LL, has_codes ? (long long)node(cg, ci)->cols : 0LL, v, (long long)n->ld,
        rows(n), (long long)node(cg, xi)->cols);
    return SC_OK;
  }
  case OP_CONV1D: {
    const int xi = SRC(n, CONV1D, X), wi = SRC(n, CONV1D, W);
    const IrNode *w = node(cg, wi);
    char bias[IR_NAME + 24] = "0";
    if (n->nsrc > S_CONV1D_B) snprintf(bias, sizeof bias, "(const float *)%s", ref(cg, SRC(n, CONV1D, B)));
    OUT("  K->conv1d(K->ctx, %s, %s, %s, %s, %lld, %s, (float *)(X + %lld), %d, %s, %lld, %s, %lld, %d, %d, %lld);\n",
        wtype_name(w->dtype), cg->var[wi], bias, ref(cg, xi), ld(cg, xi), ref(cg, SRC(n, CONV1D, STATE)),
        (long long)n->aux, p->block, v, (long long)n->ld, rows(n), (long long)node(cg, xi)->cols, p->ksize,
        p->dilation, (long long)w->rows);
    return SC_OK;
  }
  case OP_DWCONV: {
    const int xi = SRC(n, DWCONV, X);
    if (cg->g->row_states) { /* each row a step in its own state block */
      OUT("  for (int t = 0; t < %s; t++)\n", rows(n));
      OUT("    K->dwconv(K->ctx, %s + (long)t * %lld, %lld, %s, %s, %s, %s + (long)t * %lld, %lld, 1, %lld, %d, "
          "%d);\n", ref(cg, xi), ld(cg, xi), ld(cg, xi), fref(cg, SRC(n, DWCONV, W)),
          n->nsrc > S_DWCONV_B ? fref(cg, SRC(n, DWCONV, B)) : "0", row_state_ref(cg, SRC(n, DWCONV, STATE)), v,
          (long long)n->ld, (long long)n->ld, (long long)n->cols, p->ksize, p->dilation);
      return SC_OK;
    }
    OUT("  K->dwconv(K->ctx, %s, %lld, %s, %s, %s, %s, %lld, %s, %lld, %d, %d);\n", ref(cg, xi), ld(cg, xi),
        fref(cg, SRC(n, DWCONV, W)), n->nsrc > S_DWCONV_B ? fref(cg, SRC(n, DWCONV, B)) : "0",
        ref(cg, SRC(n, DWCONV, STATE)), v, (long long)n->ld, rows(n), (long long)n->cols, p->ksize, p->dilation);
    return SC_OK;
  }
  case OP_OVERLAP_ADD: {
    const int zi = SRC(n, OVERLAP_ADD, Z);
    OUT("  K->overlap_add(K->ctx, %s, %lld, %s, %s, %s, %lld, %s, %lld, %d, %d); /* %s rows out */\n",
        ref(cg, zi), ld(cg, zi), fref(cg, SRC(n, OVERLAP_ADD, B)),
        n->nsrc > S_OVERLAP_ADD_STATE ? ref(cg, SRC(n, OVERLAP_ADD, STATE)) : "0", v, (long long)n->ld,
        rows(node(cg, zi)), (long long)n->cols, p->ksize, p->stride, rows(n));
    return SC_OK;
  }
  case OP_SNAKE: {
    const int xi = SRC(n, SNAKE, X);
    OUT("  K->snake(K->ctx, %s, %lld, %s, %s, %s, %lld, %s, %lld);\n", ref(cg, xi), ld(cg, xi),
        fref(cg, SRC(n, SNAKE, ALPHA)), fref(cg, SRC(n, SNAKE, BETA)), v, (long long)n->ld, rows(n),
        (long long)n->cols);
    return SC_OK;
  }
  case OP_LAYERNORM: {
    const int xi = SRC(n, LAYERNORM, X);
    char eps[32];
    OUT("  K->layernorm(K->ctx, %s, %lld, %s, %s, %s, %s, %lld, %s, %lld);\n", ref(cg, xi), ld(cg, xi),
        fref(cg, SRC(n, LAYERNORM, W)), fref(cg, SRC(n, LAYERNORM, B)), cg_float(eps, p->eps), v,
        (long long)n->ld, rows(n), (long long)n->cols);
    return SC_OK;
  }
  case OP_ELU: {
    char alpha[32], expr[96];
    snprintf(expr, sizeof expr, "a > 0.0f ? a : %s * (K->expf(a) - 1.0f)", cg_float(alpha, p->alpha));
    emit_map(cg, n, i, expr);
    return SC_OK;
  }
  case OP_CLAMP: {
    /* comparisons, not fminf/fmaxf: a NaN stays NaN, as torch.clamp */
    char lo[32], hi[32], expr[96];
    snprintf(expr, sizeof expr, "a < %s ? %s : a > %s ? %s : a", cg_float(lo, p->lo), lo, cg_float(hi, p->hi), hi);
    emit_map(cg, n, i, expr);
    return SC_OK;
  }
  case OP_L2NORM: {
    const int xi = n->src[0];
    char eps[32];
    OUT("  K->l2norm(K->ctx, %s, %lld, %s, %lld, %s, %lld, %d, %s);\n", ref(cg, xi), ld(cg, xi), v,
        (long long)n->ld, rows(n), (long long)n->cols, p->group, cg_float(eps, p->eps));
    return SC_OK;
  }
  case OP_GATED_RMSNORM: {
    const int xi = SRC(n, GATED_RMSNORM, X), zi = SRC(n, GATED_RMSNORM, Z);
    char eps[32];
    OUT("  K->gated_rmsnorm(K->ctx, %s, %lld, %s, %lld, %s, %s, %s, %lld, %s, %lld, %d);\n", ref(cg, xi),
        ld(cg, xi), ref(cg, zi), ld(cg, zi), fref(cg, SRC(n, GATED_RMSNORM, W)), cg_float(eps, p->eps), v,
        (long long)n->ld, rows(n), (long long)n->cols, p->group);
    return SC_OK;
  }
  case OP_DELTA_RULE: {
    const int q = SRC(n, DELTA_RULE, Q), k = SRC(n, DELTA_RULE, K), vv = SRC(n, DELTA_RULE, V);
    const int gi = SRC(n, DELTA_RULE, G), bi = SRC(n, DELTA_RULE, BETA);
    char scale[32];
    if (cg->g->row_states) { /* each row a step in its own state block */
      OUT("  for (int t = 0; t < %s; t++)\n", rows(n));
      OUT("    K->delta_rule(K->ctx, %s + (long)t * %lld, %lld, %s + (long)t * %lld, %lld, %s + (long)t * %lld, "
          "%lld,\n", ref(cg, q), ld(cg, q), ld(cg, q), ref(cg, k), ld(cg, k), ld(cg, k), ref(cg, vv), ld(cg, vv),
          ld(cg, vv));
      OUT("                  %s + (long)t * %lld, %lld, %s + (long)t * %lld, %lld, %s, %s + (long)t * %lld, "
          "%lld, 1, %d, %d, %d, %lld, %s, 0);\n", ref(cg, gi), ld(cg, gi), ld(cg, gi), ref(cg, bi), ld(cg, bi),
          ld(cg, bi), row_state_ref(cg, SRC(n, DELTA_RULE, STATE)), v, (long long)n->ld, (long long)n->ld,
          p->heads, p->kv_heads, p->head_dim, (long long)(n->cols / p->heads), cg_float(scale, p->scale));
      return SC_OK;
    }
    OUT("  K->delta_rule(K->ctx, %s, %lld, %s, %lld, %s, %lld,\n", ref(cg, q), ld(cg, q), ref(cg, k), ld(cg, k),
        ref(cg, vv), ld(cg, vv));
    OUT("                %s, %lld, %s, %lld, %s, %s, %lld, %s, %d, %d, %d, %lld, %s, %d);\n", ref(cg, gi), ld(cg, gi),
        ref(cg, bi), ld(cg, bi), ref(cg, SRC(n, DELTA_RULE, STATE)), v, (long long)n->ld, rows(n), p->heads,
        p->kv_heads, p->head_dim, (long long)(n->cols / p->heads), cg_float(scale, p->scale), p->block);
    return SC_OK;
  }
  case OP_TOPK_ROUTE: {
    const int xi = n->src[0];
    OUT("  K->topk_route(K->ctx, %s, %lld, %s, %lld, %s, %d, %d, %d);\n", ref(cg, xi), ld(cg, xi), v,
        (long long)n->ld, rows(n), p->experts, p->top_k, p->renorm);
    return SC_OK;
  }
  case OP_MOE_COMBINE: {
    const int xi = SRC(n, MOE_COMBINE, X), ri = SRC(n, MOE_COMBINE, ROUTE);
    const int gu = SRC(n, MOE_COMBINE, WGU), wd = SRC(n, MOE_COMBINE, WD);
    const int shared = n->nsrc > S_MOE_COMBINE_SH;
    const IrNode *wg = node(cg, gu);
    OUT("  K->moe(K->ctx, %s, %s, %s, %s, %s, %lld, %s, %lld,\n", wtype_name(wg->dtype), cg->var[gu],
        wtype_name(node(cg, wd)->dtype), cg->var[wd], ref(cg, xi), ld(cg, xi), ref(cg, ri), ld(cg, ri));
    OUT("         %s, %lld, %s, %lld, %s, %lld, X + %lld, %s, %d, %d, %lld, %lld);\n",
        shared ? ref(cg, SRC(n, MOE_COMBINE, SH)) : "0", shared ? ld(cg, SRC(n, MOE_COMBINE, SH)) : 0LL,
        shared ? ref(cg, SRC(n, MOE_COMBINE, SG)) : "0", shared ? ld(cg, SRC(n, MOE_COMBINE, SG)) : 0LL, v,
        (long long)n->ld, (long long)n->aux, rows(n), p->experts, p->top_k, (long long)(wg->rows / (2 * p->experts)),
        (long long)n->cols);
    return SC_OK;
  }
  case OP_SWIGLU:
    OUT("  for (int t = 0; t < %s; t++)\n", rows(n));
    OUT("    for (int c = 0; c < %lld; c++) {\n", (long long)n->cols);
    OUT("      const float a = %s[t * %lld + c], b = %s[t * %lld + %lld + c];\n",
        ref(cg, n->src[0]), ld(cg, n->src[0]), ref(cg, n->src[0]), ld(cg, n->src[0]), (long long)n->cols);
    OUT("      %s[t * %lld + c] = (a / (1.0f + K->expf(-a))) * b;\n", v, (long long)n->ld);
    OUT("    }\n");
    return SC_OK;
  case OP_OUTPUT: {
    const char *dst = p->slot == OUT_LOGITS ? "io->out" : "io->hidden_out";
    if (IR_BUF_IS_OUT(node(cg, n->src[0])->buf))
      OUT("  /* %s was written there: nothing to copy */\n", node(cg, n->src[0])->name);
    else
      emit_copy_rows(cg, rows(n), ref(cg, n->src[0]), ld(cg, n->src[0]), dst, (long long)n->cols, n->cols);
    if (cg->check_numerics) emit_check_finite(cg, n, dst, p->slot == OUT_LOGITS ? "logits" : "hidden output");
    return SC_OK;
  }
  default: /* ops.def says the C target lowers it (ir_check_target) */
    return sc_fail(cg->err, SC_EINPUT, "internal error: C target: op %s (%s) is marked T_CPU in ops.def "
                   "but has no case here", ir_op_names[n->op], n->name);
  }
}

/* The elements before tile f_ of a value of rows (T * m / d) and row
 * stride ld: "(long)f_ * m*ld", or "(long)(f_ / d) * m*ld" (f_ is a
 * multiple of the tile, the tile of d). */
static const char *tile_offset(char buf[64], int64_t rows, long long ld) {
  const int m = IR_ROWS_MUL(rows), d = IR_ROWS_DIV(rows);
  if (d == 1) snprintf(buf, 64, "(long)f_ * %lld", (long long)m * ld);
  else snprintf(buf, 64, "(long)(f_ / %d) * %lld", d, (long long)m * ld);
  return buf;
}

/* Open the loop that runs nodes head.. `units` of T at a time
 * (ir_graph_tile): T, io (its outputs offset) and the values the tiles
 * read from before the head (offset by the tile's rows) are shadowed in
 * the loop's block, so the nodes print as for a whole call. */
static void emit_tile_open(Cg *cg, const Graph *g, int head, int units) {
  OUT("\n  /* From %s on, the call runs in tiles of T = %d: these buffers hold one tile,\n"
      "   * so they stay in the caches; every op from here on streams (its state carries\n"
      "   * from tile to tile), so the tiles give the whole call's result. */\n",
      g->nodes[head].name, units);
  OUT("  for (int f_ = 0; f_ < T; f_ += %d) {\n", units);
  OUT("    const int tile_T_ = T - f_ < %d ? T - f_ : %d;\n", units, units);
  OUT("    sc_io io_ = *io;\n");
  for (int i = head; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->dead || n->op != OP_OUTPUT) continue;
    char off[64];
    OUT("    io_.%s += %s;\n", n->p.slot == OUT_LOGITS ? "out" : "hidden_out",
        tile_offset(off, n->rows, (long long)n->cols));
  }
  /* the values before the head that a tile reads, each once */
  char *seen = calloc((size_t)head, 1);
  IR_ASSERT(seen);
  for (int i = head; i < g->n_nodes; i++) {
    const IrNode *n = &g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->nsrc; k++) {
      const int j = n->src[k];
      const IrNode *x = &g->nodes[j];
      if (j >= head || seen[j] || x->op == OP_WEIGHT || x->op == OP_STATE) continue;
      seen[j] = 1;
      char off[64];
      OUT("    float *const %s_tile_ = %s + %s;\n", cg->var[j], cg->var[j], tile_offset(off, x->rows, ld(cg, j)));
    }
  }
  OUT("    {\n      const int T = tile_T_;\n      const sc_io *const io = &io_;\n");
  for (int j = 0; j < head; j++)
    if (seen[j]) OUT("      float *const %s = %s_tile_;\n", cg->var[j], cg->var[j]);
  free(seen);
}

static int emit_graph(Cg *cg, const Graph *g) {
  if (!(cg->var = calloc((size_t)g->n_nodes, sizeof *cg->var))) return sc_fail(cg->err, SC_ERUNTIME, "out of memory");
  cg_name_values(cg, g);
  cg_entry_prologue(cg, g, 1, "", "");
  int units = 0;
  const int head = ir_graph_tile(g, &units);
  int rc = SC_OK;
  for (int i = 0; i < g->n_nodes && rc == SC_OK; i++) {
    if (g->nodes[i].dead) continue;
    if (i == head) emit_tile_open(cg, g, head, units);
    comment_node(cg, i);
    rc = emit_node(cg, i);
  }
  if (head >= 0) OUT("    }\n  }\n");
  OUT("  return 0;\n}\n");
  free(cg->var);
  cg->var = NULL;
  return rc;
}

int64_t cg_c_temp_bytes(const Graph *g, const IrNode *n, int64_t rows) {
  if (ir_is_linear(n->op) && ir_lin_operands(n).nw >= 0) return rows * g->nodes[ir_lin_operands(n).x].cols * 4;
  if (n->op == OP_CONV1D) { /* a piece of im2col rows */
    const int64_t piece = rows < 2 * (int64_t)n->p.block - 1 ? rows : 2 * (int64_t)n->p.block - 1;
    return piece * n->p.ksize * g->nodes[SRC(n, CONV1D, X)].cols * 4;
  }
  if (n->op == OP_MOE_COMBINE) {
    const int64_t H = n->cols, I = g->nodes[SRC(n, MOE_COMBINE, WGU)].rows / (2 * n->p.experts);
    return SC_MOE_TMP_WORDS(rows, n->p.top_k, n->p.experts, I, H) * 4;
  }
  if (n->op == OP_ROPE_ATTENTION)
    return rows * (g->nodes[SRC(n, ROPE_ATTENTION, Q)].cols + g->nodes[SRC(n, ROPE_ATTENTION, K)].cols) * 4;
  return 0;
}

int cg_emit_c(const Module *m, const CgInfo *info, StrBuf *o, sc_error *err) {
  Cg cgs = {.m = m, .o = o, .err = err, .check_numerics = info->check_numerics, .target = info->target},
     *cg = &cgs;
  if (ir_check_target(m, IR_TARGET_CPU, err)) return err->code;
  OUT("/*\n * Generated by speechc %s for the CPU; do not edit.\n", SPEECHC_VERSION);
  OUT(" * model: %s (family %s), config hash %016llx\n", m->model_type, m->family,
      (unsigned long long)m->config_hash);
  OUT(" * weights: %s, %s; max context %d\n", info->band, info->fused ? "fused" : "unfused",
      m->max_context);
  if (info->check_numerics) OUT(" * --check-numerics: every entry point fails on a NaN or inf output\n");
  OUT(" * entry points:");
  for (int gi = 0; gi < m->n_graphs; gi++) OUT(" %s", m->graphs[gi].name);
  OUT("\n */\n#include \"sc_abi.h\"\n\n");
  OUT("static float bf16_to_f32(unsigned short b) {\n"
      "  union { unsigned u; float f; } c;\n  c.u = (unsigned)b << 16;\n  return c.f;\n}\n\n");
  cg_emit_layout(cg);
  OUT("\n/* Avoid unused-function warnings when no bf16 weight is read. */\n");
  OUT("typedef float (*sc_bf16_fn)(unsigned short);\nstatic const sc_bf16_fn sc_bf16_keep = bf16_to_f32;\n");
  for (int gi = 0; gi < m->n_graphs; gi++) {
    int rc = emit_graph(cg, &m->graphs[gi]);
    if (rc) return rc;
  }
  cg_emit_descriptor(cg, info, "cpu");
  if (o->failed) return sc_fail(err, SC_ERUNTIME, "out of memory while generating code");
  return SC_OK;
}
