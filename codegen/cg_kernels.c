/*
 * cg_kernels.c — the device kernel of each op, written over the kernel
 * dialect (cg_dialect.h) and printed by cg_cuda.c's emitter (cg_kernels.h).
 *
 * Semantics are those of cg_c.c's emit_node and the CPU kernels, op for
 * op.  Fused ops are one kernel each.  Numbers differ from the CPU by
 * rounding only (warp-order dot products, online softmax), except for the
 * q8_0 / q4_0 bands, whose activations stay f32 here (the CPU quantizes
 * them to 8 bits as GGML does).
 *
 *   Prompt GEMM (the same ops in graphs of T tokens, f32 / bf16 weights,
 *     no norm or one over the whole row): blocks of 8 warps x 2 rows x 16
 *     tokens, the input staged 256 columns at a time, a lane's 2 x 16
 *     partial dot products in registers: each weight byte read once per 16
 *     tokens (emit_gemm_tiled).
 *   GEMV/GEMM (LINEAR, LINEAR_ADD, NORM_LINEAR, LINEAR_SWIGLU): blocks of 8
 *     warps, each warp one output row at a time (1-4 rows per warp, so
 *     that a large matrix amortises the staging and a small one still has
 *     ~512 blocks), TB tokens per block (grid.y covers T).  Each warp
 *     loads its first row's weights into registers (when they fit) while
 *     the block stages its TB input rows in shared memory (for a norm over
 *     the whole row: x times the norm weight and the sums of squares in
 *     the same pass, 1/rms applied to the dot products; other norm groups
 *     normalise the staged rows), then each lane reads 16 bytes of the
 *     weight row per step (f32: 4 values, bf16: 8; q8_0 / q4_0: lane j
 *     takes element j of each 32-block), every weight byte once per block
 *     of tokens; warp-shuffle reduction; bias, residual or SwiGLU in the
 *     epilogue.
 *   Prompt ATTENTION (graphs of T tokens, head_dim <= 128): one block of 8
 *     warps per (head, 8 queries), each key and value row read once for
 *     the 8 (emit_attention_tiled).
 *   ATTENTION, ROPE_ATTENTION: one block of 8 warps per (head, token);
 *     warps take chunks of 32 cache rows in turn (a lane scores a row),
 *     keep an online softmax, and merge their partial results in shared
 *     memory; ROPE_ATTENTION first rotates q and the new k rows and stages
 *     them with the new v rows in shared memory (emit_attention).
 *   RMSNORM: a block per (group, token).  ROPE / NORM_ROPE: a warp per
 *     (token, head).  EMBED: a block per token (id -1: zero row; an id
 *     outside the table records an error in sc_device_io).  KV_STORE,
 *     elementwise ops and OUTPUT: one thread per element; a value the
 *     planner put in the output slot needs no OUTPUT kernel.
 *   sc_sample (sc_abi.h, cg_cuda.c): the sampler every artifact ends
 *     with, launched by the runtime, not by the entry functions.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_kernels.h"

/* Failing to lower node text: "<Title> target: " + the message. */
int cu_fail(Cu *cu, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return sc_fail(cu->cg.err, SC_EINPUT, "%s target: %s", cu->d->title, msg);
}

/* The device expression of a weight argument `name` that node wi feeds:
 * a weight whose set is chosen by io->step is offset on the device (the
 * host passes the base), so that a recorded launch stays valid. */
const char *cu_wptr(Cu *cu, int wi, const char *name) {
  static _Thread_local char buf[160];
  const IrNode *w = node(&cu->cg, wi);
  if (w->op == OP_WEIGHT) {
    const IrWeight *wt = &cu->cg.m->weights[w->weight];
    if (wt->sets > 1 && w->p.set_mode == SET_STEP) {
      long long set_bytes = (long long)(wt->rows * ir_band_row_bytes(wt->band, wt->cols));
      snprintf(buf, sizeof buf, "(%s + ($i64)(io->step + %d) * %lld$ll)", name, w->p.off, set_bytes);
      return buf;
    }
  }
  return name;
}

/* Norm weight factor for column expression c. */
static void norm_w(char *out, size_t size, int mode, const char *w, const char *c) {
  if (mode == NORM_ONE_PLUS) snprintf(out, size, "(1.0f + %s[%s])", w, c);
  else snprintf(out, size, "%s[%s]", w, c);
}

DType cu_band_of(const Cu *cu, int wi) {
  const IrNode *w = node(&cu->cg, wi);
  return w->op == OP_WEIGHT ? cu->cg.m->weights[w->weight].band : DT_F32;
}

/* ---- GEMV / GEMM ---------------------------------------------------------- */

/* One step of the dot loop at column expression c for nw weight rows.  The
 * weights are loaded here (pf NULL) or were loaded ahead into the arrays
 * p0/p1, entry pf. */
static void gemv_step(Cu *cu, DType band, int vec, int nw, int TB, long long C, const char *ind,
                      const char *pf) {
  for (int j = 0; j < nw; j++) {
    if (vec == 1)
      KB("%sconst float wv%d = %s;\n", ind, j, band == DT_F32 ? (j ? "w1[c]" : "w0[c]") : (j ? "sc_bf16(w1[c])" : "sc_bf16(w0[c])"));
    else if (pf)
      KB("%sconst %s wv%d = p%d[%s];\n", ind, band == DT_F32 ? "float4" : "uint4", j, j, pf);
    else if (band == DT_F32)
      KB("%sconst float4 wv%d = $ldg((const $dev float4 *)(w%d + c));\n", ind, j, j);
    else
      KB("%sconst uint4 wv%d = $ldg((const $dev uint4 *)(w%d + c));\n", ind, j, j);
  }
  KB("#pragma unroll\n%sfor (int tt = 0; tt < %d; tt++) {\n", ind, TB);
  if (vec == 1) {
    KB("%s  const float xv = xs[tt * %lld + c];\n", ind, C);
    for (int j = 0; j < nw; j++) KB("%s  a%d[tt] += wv%d * xv;\n", ind, j, j);
  } else {
    KB("%s  const float4 xa = *(const $tg float4 *)(xs + tt * %lld + c);\n", ind, C);
    if (band == DT_BF16) KB("%s  const float4 xb = *(const $tg float4 *)(xs + tt * %lld + c + 4);\n", ind, C);
    for (int j = 0; j < nw; j++) {
      if (band == DT_F32)
        KB("%s  a%d[tt] += wv%d.x * xa.x + wv%d.y * xa.y + wv%d.z * xa.z + wv%d.w * xa.w;\n", ind, j, j, j, j, j);
      else
        KB("%s  a%d[tt] += sc_lo(wv%d.x) * xa.x + sc_hi(wv%d.x) * xa.y + sc_lo(wv%d.y) * xa.z + "
           "sc_hi(wv%d.y) * xa.w +\n%s             sc_lo(wv%d.z) * xb.x + sc_hi(wv%d.z) * xb.y + "
           "sc_lo(wv%d.w) * xb.z + sc_hi(wv%d.w) * xb.w;\n",
           ind, j, j, j, j, j, ind, j, j, j, j);
    }
  }
  KB("%s}\n", ind);
}

/* Loads of one weight row (and its up row) into the registers p0 (p1):
 * NV full steps of 32 lanes x vec elements, then the REM tail. */
static void gemv_load_row(Cu *cu, const char *vt, int vec, int nw, long long NV, long long REM, const char *ind) {
  const long long per = 32LL * vec;
  for (int j = 0; j < nw; j++) {
    if (NV > 0)
      KB("#pragma unroll\n%sfor (int k = 0; k < %lld; k++) p%d[k] = $ldg((const $dev %s *)(w%d + (k * 32 + lane) * %d));\n",
         ind, NV, j, vt, j, vec);
    if (REM > 0 && NV > 0)
      KB("%sif (lane * %d < %lld) p%d[%lld] = $ldg((const $dev %s *)(w%d + %lld + lane * %d));\n", ind, vec, REM, j, NV,
         vt, j, NV * per, vec);
    else if (REM > 0)
      KB("%sif (lane * %d < %lld) p%d[0] = $ldg((const $dev %s *)(w%d + lane * %d));\n", ind, vec, REM, j, vt, j, vec);
  }
}

void cu_indent_from(StrBuf *b, size_t from) {
  if (b->failed || from >= b->len) return;
  char *tail = malloc(b->len - from + 1);
  if (!tail) {
    b->failed = 1;
    return;
  }
  memcpy(tail, b->s + from, b->len - from + 1);
  b->len = from;
  b->s[from] = 0;
  for (char *line = tail; *line;) {
    char *nl = strchr(line, '\n');
    size_t n = nl ? (size_t)(nl - line + 1) : strlen(line);
    if (line[0] != '#' && line[0] != '\n') sb_puts(b, "  ");
    sb_printf(b, "%.*s", (int)n, line);
    line += n;
  }
  free(tail);
}

/* The dot loop of one warp over a weight row of C columns in band (w0,
 * and w1 its up row when nw is 2, pointers to the band's elements, or
 * bytes for q8_0 / q4_0) against TB input rows staged in shared memory
 * (xs [TB, C]): lane partial sums into a0[tt] (a1[tt]).  pf: the row was
 * loaded ahead into p0 (p1) by gemv_load_row.  The GEMV kernel's inner
 * loop, and the MoE kernels' (cg_kernels_gdn.c). */
void cu_dot_row(Cu *cu, DType band, long long C, int nw, int TB, int pf) {
  const int quant = sc_band_quantized(ir_wtype(band));
  const int vec = band == DT_F32 ? (C % 4 ? 1 : 4) : (C % 8 ? 1 : 8);
  const long long per = 32LL * vec, NV = vec > 1 ? C / per : 0, REM = vec > 1 ? C - NV * per : 0;
  if (quant) {
    /* GGML blocks of 32: lane j takes element j of each block (its byte,
     * or nibble, and the block's f16 scale), so a warp reads a block's
     * bytes together; the activations stay f32 */
    const int q8 = band == DT_Q8_0, bb = sc_band(ir_wtype(band))->block_bytes;
    KB("#pragma unroll 4\n  for (int b = 0; b < %lld; b++) {\n", C / 32);
    KB("    const int c = b * 32 + lane;\n");
    for (int j = 0; j < nw; j++) {
      KB("    const $dev unsigned char *k%d = w%d + b * %d;\n", j, j, bb);
      KB("    const float d%d = sc_f16(*(const $dev unsigned short *)k%d);\n", j, j);
      if (q8) KB("    const float q%d = (float)(signed char)k%d[2 + lane];\n", j, j);
      else KB("    const float q%d = (float)((lane < 16 ? k%d[2 + lane] & 15 : k%d[2 + lane - 16] >> 4) - 8);\n", j, j, j);
    }
    KB("#pragma unroll\n    for (int tt = 0; tt < %d; tt++) {\n", TB);
    KB("      const float xv = xs[tt * %lld + c];\n", C);
    KB("      a0[tt] += d0 * (q0 * xv);\n");
    if (nw == 2) KB("      a1[tt] += d1 * (q1 * xv);\n");
    KB("    }\n  }\n");
  } else if (vec == 1) {
    KB("  for (int c = lane; c < %lld; c += 32) {\n", C);
    gemv_step(cu, band, 1, nw, TB, C, "    ", NULL);
    KB("  }\n");
  } else {
    if (NV > 0) {
      KB("#pragma unroll\n  for (int k = 0; k < %lld; k++) {\n", NV);
      KB("    const int c = (k * 32 + lane) * %d;\n", vec);
      gemv_step(cu, band, vec, nw, TB, C, "    ", pf ? "k" : NULL);
      KB("  }\n");
    }
    if (REM > 0) {
      char last[24];
      snprintf(last, sizeof last, "%lld", NV);
      KB("  if (lane * %d < %lld) {\n", vec, REM);
      if (NV > 0) KB("    const int c = %lld + lane * %d;\n", NV * per, vec);
      else KB("    const int c = lane * %d;\n", vec);
      gemv_step(cu, band, vec, nw, TB, C, "    ", pf ? last : NULL);
      KB("  }\n");
    }
  }
}

/* Weight registers a warp may hold for its prefetched row (uint4/float4
 * each, 4 registers): beyond this the loads stay in the dot loop. */
#define CU_PREFETCH_VECS 16

/* Their kernel arguments, in this order: x, nw, w, bias, r. */
static void lin_kargs(Cu *cu, const IrLinOperands *o) {
  Cg *cg = &cu->cg;
  cu_karg(cu, "const float *", "x", ref(cg, o->x));
  if (o->nw >= 0) cu_karg(cu, "const float *", "nw", ref(cg, o->nw));
  cu_karg(cu, "const unsigned char *$restrict ", "w", cg->var[o->w]);
  if (o->bias >= 0) cu_karg(cu, "const float *", "bias", ref(cg, o->bias));
  if (o->res >= 0) cu_karg(cu, "const float *", "r", ref(cg, o->res));
}

/* What both linear kernels (GEMV, tiled GEMM) start from: node i's
 * operands, its weight and band, and the output rows R (SwiGLU: half the
 * weight's) by C input columns. */
typedef struct LinNode {
  const IrNode *n, *w;
  int swiglu;
  IrLinOperands o;
  DType band;
  long long R, C;
} LinNode;

static LinNode lin_node(Cu *cu, int i) {
  LinNode l;
  l.n = node(&cu->cg, i);
  l.swiglu = l.n->op == OP_LINEAR_SWIGLU;
  l.o = ir_lin_operands(l.n);
  l.w = node(&cu->cg, l.o.w);
  l.band = cu_band_of(cu, l.o.w);
  l.R = l.swiglu ? l.w->rows / 2 : l.w->rows;
  l.C = l.w->cols;
  return l;
}

static int emit_gemv(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const LinNode L = lin_node(cu, i);
  const IrNode *n = L.n, *w = L.w;
  const int swiglu = L.swiglu, xi = L.o.x, nwi = L.o.nw, wi = L.o.w, bi = L.o.bias, ri = L.o.res;
  const IrLinOperands o = L.o;
  const DType band = L.band;
  const long long R = L.R, C = L.C;
  const int quant = sc_band_quantized(ir_wtype(band));
  if (band != DT_F32 && band != DT_BF16 && !quant)
    return cu_fail(cu, "%s: weight band %s is not supported yet "
                   "(accepted: f32, bf16, q8_0, q4_0)", n->name, ir_dtype_name(band));
  if (quant && w->cols % 32)
    return cu_fail(cu, "%s: %s rows of %lld columns (not blocks of 32)",
                   n->name, ir_dtype_name(band), (long long)w->cols);
  /* shared floats per staged token: the row, and a norm's per-token sums */
  const long long per_token = C + (nwi >= 0 ? 8 + C / n->p.group : 0);
  if (per_token > CU_SHARED_FLOATS(cu))
    return cu_fail(cu, "%s: %lld input columns exceed the %d a "
                   "block stages in shared memory", n->name, C, CU_SHARED_FLOATS(cu));
  const int exact = !IR_ROWS_ON_T(n->rows); /* rows known: a ROW view, or an exact graph */
  int TB = exact ? (n->rows < 4 ? (int)n->rows : 4) : 4;
  if (TB * per_token > CU_SHARED_FLOATS(cu)) TB = (int)(CU_SHARED_FLOATS(cu) / per_token);
  const int vec = band == DT_F32 ? (C % 4 ? 1 : 4) : (C % 8 ? 1 : 8);
  const long long per = 32LL * vec, NV = vec > 1 ? C / per : 0, REM = vec > 1 ? C - NV * per : 0;
  const int nw = swiglu ? 2 : 1;
  /* the first row's weights are loaded before the input is staged, so the
   * weight stream starts with the kernel (when a row fits in registers) */
  const int pf = !quant && vec > 1 && (NV + (REM > 0)) * nw <= CU_PREFETCH_VECS;
  const long long NP = NV + (REM > 0);
  /* a norm over the whole row: its factor multiplies the dot product */
  const int norm1 = nwi >= 0 && n->p.group == C;
  const char *T = rows(n);
  const long long ldx = ld(cg, xi), ldy = (long long)n->ld;
  char nwf[64];

  cu_kernel_begin(cu);
  lin_kargs(cu, &o);
  cu_karg(cu, "float *", "y", cg->var[i]);

  /* rows per block: 8 warps x RW rows each, so that large matrices
   * amortise the staging over more rows while small ones keep >= ~512
   * blocks in flight */
  long long RW = R / (8 * 512);
  RW = RW < 1 ? 1 : RW > 4 ? 4 : RW;
  const long long RPB = 8 * RW;
  const char *et = band == DT_F32 ? "float" : band == DT_BF16 ? "unsigned short" : "unsigned char";
  const char *vt = band == DT_F32 ? "float4" : "uint4";
  const long long row_units = quant ? (long long)ir_band_row_bytes(band, C) : C; /* elements or bytes */

  KB("  $shared16 float xs[%lld]; /* [%d tokens, %lld] */\n", (long long)TB * C, TB, C);
  KB("  const int t0 = $bid_y * %d;\n", TB);
  KB("  const int nt = %s - t0 < %d ? %s - t0 : %d;\n", T, TB, T, TB);
  KB("  const int lane = $tid & 31, row0 = $bid_x * %lld + ($tid >> 5);\n", RPB);
  KB("  const int row_end = $bid_x * %lld + %lld < %lld ? $bid_x * %lld + %lld : %lld;\n", RPB, RPB, R,
     RPB, RPB, R);
  if (pf) {
    KB("  %s p0[%lld]", vt, NP);
    if (swiglu) KB(", p1[%lld]", NP);
    KB("; /* this warp's first row, loaded while the input is staged */\n");
    KB("  if (row0 < row_end) {\n");
    KB("    const $dev %s *w0 = (const $dev %s *)%s + ($i64)row0 * %lld;\n", et, et, cu_wptr(cu, wi, "w"), row_units);
    if (swiglu) KB("    const $dev %s *w1 = w0 + %lld$ll; /* the up row */\n", et, R * row_units);
    gemv_load_row(cu, vt, vec, nw, NV, REM, "    ");
    KB("  }\n");
  }
  if (norm1) {
    /* one pass: stage x * w' and each row's sum of squares; the factor
     * 1/rms(x) multiplies the dot products in the epilogue */
    const IrParams *p = &n->p;
    norm_w(nwf, sizeof nwf, p->norm_mode, "nw", "c");
    KB("  $shared float ssp[%d]; /* [%d tokens, 8 warps] partial sums of squares */\n", 8 * TB, TB);
    KB("#pragma unroll\n  for (int tt = 0; tt < %d; tt++) {\n", TB);
    KB("    float ss = 0.0f;\n");
    KB("    for (int c = $tid; c < %lld; c += 256) {\n", C);
    KB("      const float v = tt < nt ? x[($i64)(t0 + tt) * %lld + c] : 0.0f;\n", ldx);
    KB("      xs[tt * %lld + c] = v * %s;\n", C, nwf);
    KB("      ss += v * v;\n    }\n");
    KB("    ss = sc_warp_sum(ss);\n");
    KB("    if (lane == 0) ssp[tt * 8 + ($tid >> 5)] = ss;\n  }\n  $barrier;\n");
    char eps[32];
    KB("  float rr[%d]; /* 1 / rms of each staged row */\n", TB);
    KB("#pragma unroll\n  for (int tt = 0; tt < %d; tt++) {\n", TB);
    KB("    float s = 0.0f;\n    for (int k = 0; k < 8; k++) s += ssp[tt * 8 + k];\n");
    KB("    rr[tt] = 1.0f / $sqrtf(s / %lld.0f + %s);\n  }\n", C, cg_float(eps, p->eps));
  } else {
    KB("  for (int i = $tid; i < %lld; i += 256) {\n", (long long)TB * C);
    KB("    const int tt = i / %lld, c = i - tt * %lld;\n", C, C);
    KB("    xs[i] = tt < nt ? x[($i64)(t0 + tt) * %lld + c] : 0.0f;\n", ldx);
    KB("  }\n  $barrier;\n");
  }
  if (nwi >= 0 && !norm1) {
    const IrParams *p = &n->p;
    const long long G = C / p->group;
    KB("  $shared float rs[%lld]; /* shared arrays at the kernel's scope, as Metal wants */\n", (long long)TB * G);
    KB("  { /* RMSNorm of each staged row, per group of %d */\n", p->group);
    KB("    for (int u = $tid >> 5; u < %lld; u += 8) {\n", (long long)TB * G);
    KB("      const $tg float *xr = xs + u * %d;\n", p->group);
    KB("      float ss = 0.0f;\n");
    KB("      for (int c = $tid & 31; c < %d; c += 32) ss += xr[c] * xr[c];\n", p->group);
    KB("      ss = sc_warp_sum(ss);\n");
    char eps[32];
    KB("      if (($tid & 31) == 0) rs[u] = 1.0f / $sqrtf(ss / %d.0f + %s);\n", p->group, cg_float(eps, p->eps));
    KB("    }\n    $barrier;\n");
    KB("    for (int i = $tid; i < %lld; i += 256) {\n", (long long)TB * C);
    KB("      const int c = i %% %d;\n", p->group);
    norm_w(nwf, sizeof nwf, p->norm_mode, "nw", "c");
    KB("      xs[i] = (xs[i] * rs[i / %d]) * %s;\n", p->group, nwf);
    KB("    }\n    $barrier;\n  }\n");
  }
  KB("  for (int row = row0; row < row_end; row += 8) {\n");
  size_t mark = cu->body.len;
  KB("  const $dev %s *w0 = (const $dev %s *)%s + ($i64)row * %lld;\n", et, et, cu_wptr(cu, wi, "w"), row_units);
  if (swiglu) KB("  const $dev %s *w1 = w0 + %lld$ll; /* the up row */\n", et, R * row_units);
  if (pf) {
    KB("  if (row != row0) {\n");
    gemv_load_row(cu, vt, vec, nw, NV, REM, "    ");
    KB("  }\n");
  }
  KB("  float a0[%d]", TB);
  if (swiglu) KB(", a1[%d]", TB);
  KB(";\n#pragma unroll\n  for (int tt = 0; tt < %d; tt++) a0[tt] = %s0.0f;\n", TB, swiglu ? "a1[tt] = " : "");
  cu_dot_row(cu, band, C, nw, TB, pf);
  KB("#pragma unroll\n  for (int tt = 0; tt < %d; tt++) {\n", TB);
  KB("    a0[tt] = sc_warp_sum(a0[tt])%s;\n", norm1 ? " * rr[tt]" : "");
  if (swiglu) KB("    a1[tt] = sc_warp_sum(a1[tt])%s;\n", norm1 ? " * rr[tt]" : "");
  KB("  }\n  if (lane == 0) {\n");
  KB("#pragma unroll\n    for (int tt = 0; tt < %d; tt++) {\n      if (tt >= nt) break;\n", TB);
  KB("      const $i64 t = t0 + tt;\n");
  if (swiglu) {
    KB("      const float g = a0[tt], u = a1[tt];\n");
    KB("      y[t * %lld + row] = (g / (1.0f + $expf(-g))) * u;\n", ldy);
  } else if (ri >= 0) {
    KB("      y[t * %lld + row] = r[t * %lld + row] + a0[tt];\n", ldy, ld(cg, ri));
  } else {
    KB("      y[t * %lld + row] = a0[tt]%s;\n", ldy, bi >= 0 ? " + bias[row]" : "");
  }
  KB("    }\n  }\n");
  /* the loop body above was written at function depth: indent it */
  cu_indent_from(&cu->body, mark);
  KB("  }\n");
  char gx[32], gy[64];
  snprintf(gx, sizeof gx, "%lld", (R + RPB - 1) / RPB);
  if (exact) snprintf(gy, sizeof gy, "%lld", ((long long)n->rows + TB - 1) / TB);
  else snprintf(gy, sizeof gy, "(T + %d) / %d", TB - 1, TB);
  return cu_kernel_end(cu, i, 256, gx, gy);
}

/* ---- prompt GEMM ---------------------------------------------------------- */

/* Tile of the prompt GEMM: tokens per block, rows per warp, columns staged
 * per step (floats). */
#define CU_GT 16
#define CU_GR 2
#define CU_GK 256

/* Graphs of T tokens (prefill) with f32 / bf16 weights and no norm or one
 * over the whole row take the tiled GEMM below; the rest the GEMV kernel. */
static int gemm_tiled(const Cu *cu, int i) {
  const Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  if (n->rows != IR_T) return 0; /* T tokens exactly (not T*m/d: not a prefill) */
  const IrLinOperands o = ir_lin_operands(n);
  const int wi = o.w, nwi = o.nw;
  const DType band = cu_band_of(cu, wi);
  const long long C = node(cg, wi)->cols;
  if (band == DT_F32) return C % 4 == 0 && (nwi < 0 || n->p.group == C);
  if (band == DT_BF16) return C % 8 == 0 && (nwi < 0 || n->p.group == C);
  return 0;
}

/* The prompt GEMM: a block of 8 warps takes CU_GT tokens and 8 * CU_GR
 * rows.  The input is staged CU_GK columns at a time for all CU_GT tokens
 * (a norm's weight applied as it is staged, 1/rms of each row computed
 * first), and each lane keeps its warp's CU_GR rows x CU_GT tokens of
 * partial dot products in registers, so every weight byte is read once
 * per CU_GT tokens (the GEMV kernel: once per 4) and each 16-byte weight
 * load feeds CU_GT * 8 (bf16) multiply-adds.  Warp-shuffle reductions and
 * the GEMV kernel's epilogues (1/rms, bias, residual, SwiGLU) at the end. */
static int emit_gemm_tiled(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const LinNode L = lin_node(cu, i);
  const IrNode *n = L.n;
  const int swiglu = L.swiglu, xi = L.o.x, nwi = L.o.nw, wi = L.o.w, bi = L.o.bias, ri = L.o.res;
  const IrLinOperands o = L.o;
  const DType band = L.band;
  const long long R = L.R, C = L.C;
  const int vec = band == DT_F32 ? 4 : 8, steps = CU_GK / (32 * vec), nw = swiglu ? 2 : 1;
  const long long ldx = ld(cg, xi), ldy = (long long)n->ld;
  const char *et = band == DT_F32 ? "float" : "unsigned short";
  const char *vt = band == DT_F32 ? "float4" : "uint4";
  char nwf[64], eps[32];

  cu_kernel_begin(cu);
  lin_kargs(cu, &o);
  cu_karg(cu, "float *", "y", cg->var[i]);

  KB("  $shared16 float xs[%d]; /* [%d tokens, %d columns] of the input */\n", CU_GT * CU_GK,
     CU_GT, CU_GK);
  KB("  const int t0 = $bid_y * %d;\n", CU_GT);
  KB("  const int nt = T - t0 < %d ? T - t0 : %d;\n", CU_GT, CU_GT);
  KB("  const int lane = $tid & 31, row0 = $bid_x * %d + ($tid >> 5) * %d;\n", 8 * CU_GR, CU_GR);
  if (nwi >= 0) {
    KB("  $shared float rr[%d]; /* 1 / rms of each token's row */\n", CU_GT);
    KB("  for (int tt = $tid >> 5; tt < %d; tt += 8) {\n", CU_GT);
    KB("    float ss = 0.0f;\n");
    KB("    if (tt < nt)\n");
    KB("      for (int c = lane; c < %lld; c += 32) {\n", C);
    KB("        const float v = x[($i64)(t0 + tt) * %lld + c];\n", ldx);
    KB("        ss += v * v;\n      }\n");
    KB("    ss = sc_warp_sum(ss);\n");
    KB("    if (lane == 0) rr[tt] = 1.0f / $sqrtf(ss / %lld.0f + %s);\n  }\n", C, cg_float(eps, n->p.eps));
  }
  /* this warp's rows (clamped: the last block's extra rows compute a
   * copy of row R-1 that is never written) */
  for (int r = 0; r < CU_GR; r++) {
    KB("  const $dev %s *w%d_%d = (const $dev %s *)%s + ($i64)(row0 + %d < %lld ? row0 + %d : %lld) * %lld;\n", et, 0, r,
       et, cu_wptr(cu, wi, "w"), r, R, r, R - 1, C);
    if (swiglu) KB("  const $dev %s *w1_%d = w0_%d + %lld$ll; /* the up row */\n", et, r, r, R * C);
  }
  KB("  float a0[%d][%d]", CU_GR, CU_GT);
  if (swiglu) KB(", a1[%d][%d]", CU_GR, CU_GT);
  KB(";\n");
  KB("#pragma unroll\n  for (int j = 0; j < %d; j++)\n#pragma unroll\n", CU_GR);
  KB("    for (int tt = 0; tt < %d; tt++) a0[j][tt] = %s0.0f;\n", CU_GT, swiglu ? "a1[j][tt] = " : "");
  KB("  for (int k0 = 0; k0 < %lld; k0 += %d) {\n", C, CU_GK);
  KB("    $barrier; /* the previous columns are used up */\n");
  KB("    for (int i = $tid; i < %d; i += 256) {\n", CU_GT * CU_GK);
  KB("      const int tt = i / %d, c = k0 + (i & %d);\n", CU_GK, CU_GK - 1);
  if (nwi >= 0) norm_w(nwf, sizeof nwf, n->p.norm_mode, "nw", "c");
  KB("      xs[i] = tt < nt && c < %lld ? x[($i64)(t0 + tt) * %lld + c]%s%s : 0.0f;\n", C, ldx,
     nwi >= 0 ? " * " : "", nwi >= 0 ? nwf : "");
  KB("    }\n    $barrier;\n");
  for (int s = 0; s < steps; s++) {
    KB("    {\n      const int c = %d + lane * %d; /* in the staged columns */\n", s * 32 * vec, vec);
    if (C % CU_GK) KB("      if (k0 + c < %lld) {\n", C);
    const char *ind = C % CU_GK ? "        " : "      ";
    for (int r = 0; r < CU_GR; r++)
      for (int j = 0; j < nw; j++)
        KB("%sconst %s wv%d_%d = $ldg((const $dev %s *)(w%d_%d + k0 + c));\n", ind, vt, j, r, vt, j, r);
    KB("#pragma unroll\n%sfor (int tt = 0; tt < %d; tt++) {\n", ind, CU_GT);
    KB("%s  const float4 xa = *(const $tg float4 *)(xs + tt * %d + c);\n", ind, CU_GK);
    if (band == DT_BF16) KB("%s  const float4 xb = *(const $tg float4 *)(xs + tt * %d + c + 4);\n", ind, CU_GK);
    for (int r = 0; r < CU_GR; r++)
      for (int j = 0; j < nw; j++) {
        if (band == DT_F32)
          KB("%s  a%d[%d][tt] += wv%d_%d.x * xa.x + wv%d_%d.y * xa.y + wv%d_%d.z * xa.z + wv%d_%d.w * xa.w;\n", ind,
             j, r, j, r, j, r, j, r, j, r);
        else
          KB("%s  a%d[%d][tt] += sc_lo(wv%d_%d.x) * xa.x + sc_hi(wv%d_%d.x) * xa.y + sc_lo(wv%d_%d.y) * xa.z +\n"
             "%s               sc_hi(wv%d_%d.y) * xa.w + sc_lo(wv%d_%d.z) * xb.x + sc_hi(wv%d_%d.z) * xb.y +\n"
             "%s               sc_lo(wv%d_%d.w) * xb.z + sc_hi(wv%d_%d.w) * xb.w;\n",
             ind, j, r, j, r, j, r, j, r, ind, j, r, j, r, j, r, ind, j, r, j, r);
      }
    KB("%s}\n", ind);
    if (C % CU_GK) KB("      }\n");
    KB("    }\n");
  }
  KB("  }\n");
  KB("#pragma unroll\n  for (int j = 0; j < %d; j++) {\n", CU_GR);
  KB("    const int row = row0 + j;\n");
  KB("#pragma unroll\n    for (int tt = 0; tt < %d; tt++) {\n", CU_GT);
  KB("      const float g = sc_warp_sum(a0[j][tt])%s;\n", nwi >= 0 ? " * rr[tt]" : "");
  if (swiglu) KB("      const float u = sc_warp_sum(a1[j][tt])%s;\n", nwi >= 0 ? " * rr[tt]" : "");
  KB("      if (lane == 0 && row < %lld && tt < nt) {\n", R);
  KB("        const $i64 t = t0 + tt;\n");
  if (swiglu) KB("        y[t * %lld + row] = (g / (1.0f + $expf(-g))) * u;\n", ldy);
  else if (ri >= 0) KB("        y[t * %lld + row] = r[t * %lld + row] + g;\n", ldy, ld(cg, ri));
  else KB("        y[t * %lld + row] = g%s;\n", ldy, bi >= 0 ? " + bias[row]" : "");
  KB("      }\n    }\n  }\n");
  char gx[32], gy[64];
  snprintf(gx, sizeof gx, "%lld", (R + 8 * CU_GR - 1) / (8 * CU_GR));
  snprintf(gy, sizeof gy, "(T + %d) / %d", CU_GT - 1, CU_GT);
  return cu_kernel_end(cu, i, 256, gx, gy);
}

/* ---- the other ops ------------------------------------------------------- */

/* Grid of `per_block`-thread blocks covering rows*count items, rows those
 * of value v (a literal, or the launcher's T). */
void cu_grid_items(const IrNode *v, long long count, int per_block, char *gx, size_t size) {
  char r[48];
  if (!IR_ROWS_ON_T(v->rows))
    snprintf(gx, size, "%lld", ((long long)v->rows * count + per_block - 1) / per_block);
  else
    snprintf(gx, size, "(%s * %lld + %d) / %d", ir_rows_text(v->rows, r, sizeof r), count,
             per_block - 1, per_block);
}

/* One block per row of value v. */
static const char *rows_grid(const IrNode *v, char *buf, size_t size) {
  return ir_rows_text(v->rows, buf, size);
}

/* One thread per element of a [T, cols] result: y = expr over a (, b). */
static int emit_map(Cu *cu, int i, const char *expr) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const long long C = (long long)n->cols;
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "a", ref(cg, n->src[0]));
  if (n->nsrc > 1) cu_karg(cu, "const float *", "b", ref(cg, n->src[1]));
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  const int i = $bid_x * 256 + $tid;\n");
  KB("  if (i >= %s * %lld) return;\n", rows(n), C);
  KB("  const int t = i / %lld, c = i - t * %lld;\n", C, C);
  KB("  const float av = a[($i64)t * %lld + c];\n", ld(cg, n->src[0]));
  if (n->nsrc > 1) {
    const IrNode *b = node(cg, n->src[1]);
    int bcast = b->rows == 1 && n->rows != 1;
    KB("  const float bv = b[%s%lld + c];\n", bcast ? "" : "($i64)t * ", bcast ? 0LL : ld(cg, n->src[1]));
  }
  KB("  y[($i64)t * %lld + c] = %s;\n", (long long)n->ld, expr);
  char gx[64];
  cu_grid_items(n, C, 256, gx, sizeof gx);
  return cu_kernel_end(cu, i, 256, gx, "1");
}

/* OUTPUT: rows of x into io's buffer; with --check-numerics the first
 * NaN/inf is reported (sc_device_io) with its index in the output. */
static int emit_copy(Cu *cu, int i, int xi, const char *dst, long long ldy) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const long long C = (long long)n->cols;
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "x", ref(cg, xi));
  cu_karg(cu, "float *", "y", dst);
  KB("  const int i = $bid_x * 256 + $tid;\n");
  KB("  if (i >= %s * %lld) return;\n", rows(n), C);
  KB("  const int t = i / %lld, c = i - t * %lld;\n", C, C);
  if (cu->check_numerics) {
    KB("  const float v = x[($i64)t * %lld + c];\n", ld(cg, xi));
    KB("  if (!isfinite(v)) sc_fail(io, SC_KID, 2, i); /* --check-numerics */\n");
    KB("  y[($i64)t * %lld + c] = v;\n", ldy);
  } else {
    KB("  y[($i64)t * %lld + c] = x[($i64)t * %lld + c];\n", ldy, ld(cg, xi));
  }
  char gx[64];
  cu_grid_items(n, C, 256, gx, sizeof gx);
  return cu_kernel_end(cu, i, 256, gx, "1");
}

static int emit_embed(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrNode *tab = node(cg, SRC(n, EMBED, TABLE));
  const IrWeight *w = &cg->m->weights[tab->weight];
  const long long C = (long long)w->cols;
  cu_kernel_begin(cu);
  cu_karg(cu, "const int *", "ids", ref(cg, SRC(n, EMBED, IDS)));
  cu_karg(cu, "const unsigned char *$restrict ", "tab", cg->var[SRC(n, EMBED, TABLE)]);
  cu_karg(cu, "float *", "y", cg->var[i]);
  const long long ids_ld = ld(cg, SRC(n, EMBED, IDS)); /* > 1: one column of a codes input */
  if (ids_ld > 1) KB("  const int t = $bid_x, id = ids[t * %lld];\n", ids_ld);
  else KB("  const int t = $bid_x, id = ids[t];\n");
  KB("  $dev float *yr = y + ($i64)t * %lld;\n", (long long)n->ld);
  KB("  if (id == -1) {\n    for (int c = $tid; c < %lld; c += 256) yr[c] = 0.0f;\n    return;\n  }\n", C);
  KB("  if (id < 0 || id >= %lld) { /* %s: token id out of range [0, %lld) */\n", (long long)w->rows, n->name,
     (long long)w->rows);
  KB("    if ($tid == 0) sc_fail(io, SC_KID, 1, id);\n    return;\n  }\n");
  const char *tp = cu_wptr(cu, SRC(n, EMBED, TABLE), "tab");
  if (w->band == DT_F32) {
    KB("  const $dev float *row = (const $dev float *)%s + ($i64)id * %lld;\n", tp, C);
    KB("  for (int c = $tid; c < %lld; c += 256) yr[c] = row[c];\n", C);
  } else if (w->band == DT_BF16) {
    KB("  const $dev unsigned short *row = (const $dev unsigned short *)%s + ($i64)id * %lld;\n", tp, C);
    KB("  for (int c = $tid; c < %lld; c += 256) yr[c] = sc_bf16(row[c]);\n", C);
  } else if (sc_band_quantized(ir_wtype(w->band))) {
    /* GGML blocks, as the C target decodes them */
    int q8 = w->band == DT_Q8_0;
    KB("  const $dev unsigned char *row = %s + ($i64)id * %lld$ll; /* %s */\n", tp,
       (long long)ir_band_row_bytes(w->band, w->cols), ir_dtype_name(w->band));
    KB("  for (int c = $tid; c < %lld; c += 256) {\n", C);
    KB("    const $dev unsigned char *blk = row + (c >> 5) * %d;\n", sc_band(ir_wtype(w->band))->block_bytes);
    KB("    const float d = sc_f16(blk[0] | (unsigned)blk[1] << 8);\n");
    if (q8) KB("    yr[c] = d * (float)(signed char)blk[2 + (c & 31)];\n");
    else KB("    const int j = c & 31;\n    yr[c] = d * (float)((j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4) - 8);\n");
    KB("  }\n");
  } else {
    return cu_fail(cu, "embedding band %s is not supported yet",
                   ir_dtype_name(w->band));
  }
  char gx[48];
  return cu_kernel_end(cu, i, 256, rows_grid(n, gx, sizeof gx), "1");
}

/* LAYERNORM: a block of 256 threads per row: the mean, then the biased
 * variance about it (two passes, as the CPU kernel), then every column
 * (x - mean) * rstd * w + b. */
static int emit_layernorm(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const int xi = SRC(n, LAYERNORM, X);
  const long long C = (long long)n->cols;
  char eps[32];
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "x", ref(cg, xi));
  cu_karg(cu, "const float *", "w", ref(cg, SRC(n, LAYERNORM, W)));
  cu_karg(cu, "const float *", "b", ref(cg, SRC(n, LAYERNORM, B)));
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  $shared float part[8];\n  $shared float stat;\n");
  KB("  const $i64 t = $bid_x;\n");
  KB("  const $dev float *xr = x + t * %lld;\n", ld(cg, xi));
  KB("  $dev float *yr = y + t * %lld;\n", (long long)n->ld);
  KB("  float s = 0.0f;\n  for (int c = $tid; c < %lld; c += 256) s += xr[c];\n", C);
  KB("  s = sc_warp_sum(s);\n  if (($tid & 31) == 0) part[$tid >> 5] = s;\n  $barrier;\n");
  KB("  if ($tid == 0) {\n    float a = 0.0f;\n    for (int k = 0; k < 8; k++) a += part[k];\n");
  KB("    stat = a / %lld.0f;\n  }\n  $barrier;\n", C);
  KB("  const float mean = stat;\n");
  KB("  float q = 0.0f;\n  for (int c = $tid; c < %lld; c += 256) {\n", C);
  KB("    const float d = xr[c] - mean;\n    q += d * d;\n  }\n");
  KB("  q = sc_warp_sum(q);\n  if (($tid & 31) == 0) part[$tid >> 5] = q; /* thread 0 has read the first sums */\n");
  KB("  $barrier;\n");
  KB("  if ($tid == 0) {\n    float a = 0.0f;\n    for (int k = 0; k < 8; k++) a += part[k];\n");
  KB("    stat = 1.0f / $sqrtf(a / %lld.0f + %s); /* every thread has read the mean */\n  }\n  $barrier;\n", C,
     cg_float(eps, n->p.eps));
  KB("  const float rstd = stat;\n");
  KB("  for (int c = $tid; c < %lld; c += 256) yr[c] = (xr[c] - mean) * rstd * w[c] + b[c];\n", C);
  return cu_kernel_end(cu, i, 256, rows(n), "1");
}

/* POS_ADD: one thread per element, y = x + the row's position's table row
 * (sc_row_pos: io->row_pos[t], or io->pos + t). */
static int emit_pos_add(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const int xi = SRC(n, POS_ADD, X);
  const long long C = (long long)n->cols;
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "x", ref(cg, xi));
  cu_karg(cu, "const float *", "tab", ref(cg, SRC(n, POS_ADD, TABLE)));
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  const int i = $bid_x * 256 + $tid;\n");
  KB("  if (i >= %s * %lld) return;\n", rows(n), C);
  KB("  const int t = i / %lld, c = i - t * %lld;\n", C, C);
  KB("  y[($i64)t * %lld + c] = x[($i64)t * %lld + c] + tab[($i64)sc_row_pos(io, t) * %lld + c];\n",
     (long long)n->ld, ld(cg, xi), C);
  char gx[64];
  cu_grid_items(n, C, 256, gx, sizeof gx);
  return cu_kernel_end(cu, i, 256, gx, "1");
}

static int emit_rmsnorm(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const int G = (int)(n->cols / p->group);
  int nt = p->group >= 256 ? 256 : (p->group + 31) / 32 * 32;
  char wf[64];
  norm_w(wf, sizeof wf, p->norm_mode, "w", "c");
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "x", ref(cg, SRC(n, RMSNORM, X)));
  cu_karg(cu, "const float *", "w", ref(cg, SRC(n, RMSNORM, NW)));
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  $shared float part[%d];\n  $shared float rr;\n", nt / 32);
  KB("  const $i64 t = $bid_y;\n");
  KB("  const $dev float *xr = x + t * %lld + $bid_x * %d;\n", ld(cg, SRC(n, RMSNORM, X)), p->group);
  KB("  $dev float *yr = y + t * %lld + $bid_x * %d;\n", (long long)n->ld, p->group);
  KB("  float ss = 0.0f;\n");
  KB("  for (int c = $tid; c < %d; c += %d) ss += xr[c] * xr[c];\n", p->group, nt);
  KB("  ss = sc_warp_sum(ss);\n  if (($tid & 31) == 0) part[$tid >> 5] = ss;\n  $barrier;\n");
  KB("  if ($tid == 0) {\n    float s = 0.0f;\n");
  KB("    for (int k = 0; k < %d; k++) s += part[k];\n", nt / 32);
  char eps[32];
  KB("    rr = 1.0f / $sqrtf(s / %d.0f + %s);\n  }\n  $barrier;\n", p->group, cg_float(eps, p->eps));
  KB("  for (int c = $tid; c < %d; c += %d) yr[c] = (xr[c] * rr) * %s;\n", p->group, nt, wf);
  char gx[16], gy[48];
  snprintf(gx, sizeof gx, "%d", G);
  return cu_kernel_end(cu, i, nt, gx, rows_grid(n, gy, sizeof gy));
}

/* ROPE and NORM_ROPE: a warp per (token, head), the head staged in shared
 * memory so that any pairing (NeoX halves, interleaved) reads it. */
static int emit_rope(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const int norm = n->op == OP_NORM_ROPE;
  const int HD = p->head_dim, R = p->rot_dims, half = R / 2;
  char wf[64];
  cu_kernel_begin(cu);
  const int xi = norm ? SRC(n, NORM_ROPE, X) : SRC(n, ROPE, X);
  cu_karg(cu, "const float *", "x", ref(cg, xi));
  if (norm) cu_karg(cu, "const float *", "nw", ref(cg, SRC(n, NORM_ROPE, NW)));
  cu_karg(cu, "const float *", "tab", ref(cg, norm ? SRC(n, NORM_ROPE, TABLE) : SRC(n, ROPE, TABLE)));
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  $shared float hb[%d];\n", 4 * HD);
  KB("  const int lane = $tid & 31, u = $bid_x * 4 + ($tid >> 5);\n");
  KB("  if (u >= %s * %d) return;\n", rows(n), p->heads);
  KB("  const int t = u / %d, h = u - t * %d;\n", p->heads, p->heads);
  KB("  const $dev float *a = x + ($i64)t * %lld + h * %d;\n", ld(cg, xi), HD);
  KB("  $dev float *b = y + ($i64)t * %lld + h * %d;\n", (long long)n->ld, HD);
  KB("  $tg float *s = hb + ($tid >> 5) * %d;\n", HD);
  if (norm) {
    norm_w(wf, sizeof wf, p->norm_mode, "nw", "c");
    KB("  float ss = 0.0f;\n");
    KB("  for (int c = lane; c < %d; c += 32) {\n    s[c] = a[c];\n    ss += s[c] * s[c];\n  }\n", HD);
    KB("  ss = sc_warp_sum(ss);\n");
    char eps[32];
    KB("  const float r = 1.0f / $sqrtf(ss / %d.0f + %s);\n", HD, cg_float(eps, p->eps));
    KB("  for (int c = lane; c < %d; c += 32) s[c] = (s[c] * r) * %s;\n", HD, wf);
  } else {
    KB("  for (int c = lane; c < %d; c += 32) s[c] = a[c];\n", HD);
  }
  KB("  $warp_barrier;\n");
  KB("  const $dev float *cs = tab + ($i64)sc_row_pos(io, t) * %d; /* cos | sin */\n", R);
  KB("  for (int i = lane; i < %d; i += 32) {\n", half);
  if (p->rope_mode == ROPE_NEOX) {
    KB("    const float x0 = s[i], x1 = s[i + %d], c = cs[i], sn = cs[%d + i];\n", half, half);
    KB("    b[i] = x0 * c - x1 * sn;\n    b[i + %d] = x1 * c + x0 * sn;\n", half);
  } else {
    KB("    const float x0 = s[2 * i], x1 = s[2 * i + 1], c = cs[i], sn = cs[%d + i];\n", half);
    KB("    b[2 * i] = x0 * c - x1 * sn;\n    b[2 * i + 1] = x1 * c + x0 * sn;\n");
  }
  KB("  }\n");
  if (R < HD) KB("  for (int i = %d + lane; i < %d; i += 32) b[i] = s[i];\n", R, HD);
  char gx[64];
  cu_grid_items(n, p->heads, 4, gx, sizeof gx);
  return cu_kernel_end(cu, i, 128, gx, "1");
}

static int emit_kv_store(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrNode *c = node(cg, SRC(n, KV_STORE, CACHE)), *x = node(cg, SRC(n, KV_STORE, X));
  const long long C = (long long)c->cols;
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "x", ref(cg, SRC(n, KV_STORE, X)));
  cu_karg(cu, "float *", "cache", ref(cg, SRC(n, KV_STORE, CACHE)));
  KB("  const int i = $bid_x * 256 + $tid;\n");
  KB("  if (i >= %s * %lld) return;\n", rows(x), C);
  KB("  const int t = i / %lld, c = i - t * %lld;\n", C, C);
  KB("  $dev float *ct = ($dev float *)(($dev char *)cache + sc_row_state(io, t)); /* row t's state block */\n");
  KB("  ct[($i64)(sc_row_pos(io, t) %% %lld) * %lld + c] = x[($i64)t * %lld + c];\n",
     (long long)c->rows, C, ld(cg, SRC(n, KV_STORE, X)));
  char gx[64];
  cu_grid_items(x, C, 256, gx, sizeof gx);
  return cu_kernel_end(cu, i, 256, gx, "1");
}

/* ROPE_ATTENTION's prologue for one head, by one warp: the raw head a
 * (staged in s), its norm with weight nwv when norm, its rotation at
 * position `at` into b (shared memory), as emit_rope does per head. */
static void rope_head_warp(Cu *cu, const IrParams *p, int norm, const char *a, const char *nwv, const char *s,
                           const char *b, const char *at, const char *ind) {
  const int HD = p->head_dim, R = p->rot_dims, half = R / 2;
  char wf[64];
  if (norm) {
    norm_w(wf, sizeof wf, p->norm_mode, nwv, "c");
    KB("%sfloat ss = 0.0f;\n", ind);
    KB("%sfor (int c = lane; c < %d; c += 32) {\n%s  %s[c] = %s[c];\n%s  ss += %s[c] * %s[c];\n%s}\n", ind, HD, ind, s,
       a, ind, s, s, ind);
    KB("%sss = sc_warp_sum(ss);\n", ind);
    char eps[32];
    KB("%sconst float r = 1.0f / $sqrtf(ss / %d.0f + %s);\n", ind, HD, cg_float(eps, p->eps));
    KB("%sfor (int c = lane; c < %d; c += 32) %s[c] = (%s[c] * r) * %s;\n", ind, HD, s, s, wf);
  } else {
    KB("%sfor (int c = lane; c < %d; c += 32) %s[c] = %s[c];\n", ind, HD, s, a);
  }
  KB("%s$warp_barrier;\n", ind);
  KB("%sconst $dev float *cs = tab + ($i64)(%s) * %d; /* cos | sin */\n", ind, at, R);
  KB("%sfor (int i = lane; i < %d; i += 32) {\n", ind, half);
  if (p->rope_mode == ROPE_NEOX) {
    KB("%s  const float x0 = %s[i], x1 = %s[i + %d], c = cs[i], sn = cs[%d + i];\n", ind, s, s, half, half);
    KB("%s  %s[i] = x0 * c - x1 * sn;\n%s  %s[i + %d] = x1 * c + x0 * sn;\n", ind, b, ind, b, half);
  } else {
    KB("%s  const float x0 = %s[2 * i], x1 = %s[2 * i + 1], c = cs[i], sn = cs[%d + i];\n", ind, s, s, half);
    KB("%s  %s[2 * i] = x0 * c - x1 * sn;\n%s  %s[2 * i + 1] = x1 * c + x0 * sn;\n", ind, b, ind, b);
  }
  KB("%s}\n", ind);
  if (R < HD) KB("%sfor (int i = %d + lane; i < %d; i += 32) %s[i] = %s[i];\n", ind, R, HD, b, s);
}

/* ATTENTION and ROPE_ATTENTION.  A block of NW warps per (head, token).
 * Warps take chunks of 32 cache rows in turn: each lane scores one row (q
 * from shared memory, 16-byte loads along the row), the warp updates its
 * online softmax once per chunk, then walks the chunk's value rows
 * (coalesced, one output column per lane and step).  The warps' partial
 * results merge at the end.
 * Each block reads its row's position and state block from the call
 * (sc_row_pos, sc_row_state: rows may come from several sessions).
 * ROPE_ATTENTION (T <= 6 rows): warp 0 normalises and rotates the block's
 * query head, warps 1..T the T new key rows of its kv head, warp T+1
 * stages the T new value rows, all in shared memory; the first query head
 * of each kv head stores its row's new k and v into the caches, and every
 * block reads the new rows of its own state block from its shared copies
 * (fp: their positions), not from the caches (no block waits for
 * another's store; a row a store overwrites in a ring is older than any
 * row a query sees). */
/* The score of one key row against the staged query: d += row . qs, over
 * HD columns, four at a time where vec (the cache row's pointer is kp in
 * address space as, a $word). */
static void attn_dot(Cu *cu, int vec, const char *kp, const char *as, const char *ind) {
  if (vec) {
    KB("#pragma unroll 8\n%sfor (int c = 0; c < HD; c += 4) {\n", ind);
    KB("%s  const float4 kv = *(const %s float4 *)(%s + c), qv = *(const $tg float4 *)(qs + c);\n", ind, as, kp);
    KB("%s  d += kv.x * qv.x + kv.y * qv.y + kv.z * qv.z + kv.w * qv.w;\n%s}\n", ind, ind);
  } else {
    KB("%sfor (int c = 0; c < HD; c++) d += %s[c] * qs[c];\n", ind, kp);
  }
}

static int emit_attention(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const int fresh = n->op == OP_ROPE_ATTENTION, norm = fresh && n->nsrc > S_ROPE_ATTENTION_QN;
  IR_ASSERT(p->align <= 1); /* grouped positions are CPU only (Mimi, whose codec ops CUDA refuses first) */
  const int qi = fresh ? SRC(n, ROPE_ATTENTION, Q) : SRC(n, ATTENTION, Q);
  const int kci = fresh ? SRC(n, ROPE_ATTENTION, KC) : SRC(n, ATTENTION, KC);
  const int vci = fresh ? SRC(n, ROPE_ATTENTION, VC) : SRC(n, ATTENTION, VC);
  const int kxi = fresh ? SRC(n, ROPE_ATTENTION, K) : -1, vxi = fresh ? SRC(n, ROPE_ATTENTION, V) : -1;
  const IrNode *c = node(cg, kci);
  const int HD = p->head_dim, EPL = (HD + 31) / 32, group = p->heads / p->kv_heads, NW = 8;
  const long long CAP = (long long)c->rows, LDKV = (long long)c->cols;
  const int gate = !fresh && n->nsrc > S_ATTENTION_GATE, vec = HD % 4 == 0 && LDKV % 4 == 0;
  const int NT = fresh ? (int)n->rows : 0; /* new rows, all in shared memory */
  IR_ASSERT(!fresh || (NT >= 1 && NT + 2 <= NW));
  /* qs, ks, vs, hb and sm_o below: all static shared memory */
  const long long shared = 4LL * HD * (1 + (fresh ? 3 * NT + 1 : 0) + NW) + 8LL * NW;
  if (shared > cu->d->shared_bytes)
    return cu_fail(cu, "%s: head_dim %d needs %lld bytes of shared memory per "
                   "attention block, above the %d KiB a kernel may declare", n->name, HD, shared,
                   cu->d->shared_bytes / 1024);
  const char *guard = HD % 32 ? "if (c < HD) " : "";
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "q", ref(cg, qi));
  if (fresh) {
    cu_karg(cu, "const float *", "kx", ref(cg, kxi));
    cu_karg(cu, "const float *", "vx", ref(cg, vxi));
    cu_karg(cu, "float *", "kc", ref(cg, kci));
    cu_karg(cu, "float *", "vc", ref(cg, vci));
    cu_karg(cu, "const float *", "tab", ref(cg, SRC(n, ROPE_ATTENTION, TABLE)));
    if (norm) {
      cu_karg(cu, "const float *", "qn", ref(cg, SRC(n, ROPE_ATTENTION, QN)));
      cu_karg(cu, "const float *", "kn", ref(cg, SRC(n, ROPE_ATTENTION, KN)));
    }
  } else {
    cu_karg(cu, "const float *", "kc", ref(cg, kci));
    cu_karg(cu, "const float *", "vc", ref(cg, vci));
  }
  if (gate) cu_karg(cu, "const float *", "gate", ref(cg, SRC(n, ATTENTION, GATE)));
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  enum { HD = %d, NW = %d };\n", HD, NW);
  KB("  $shared16 float qs[HD];\n");
  if (fresh) {
    KB("  /* the %d new k and v rows; staging of the heads before rotation */\n", NT);
    KB("  $shared16 float ks[%d * HD], vs[%d * HD], hb[%d * HD];\n", NT, NT, NT + 1);
  }
  KB("  $shared float sm_m[NW], sm_l[NW], sm_o[NW * HD];\n");
  KB("  const int h = $bid_x, t = $bid_y, wid = $tid >> 5, lane = $tid & 31;\n");
  KB("  const int p = sc_row_pos(io, t);\n");
  KB("  const $i64 sb = sc_row_state(io, t); /* row t's state block */\n");
  KB("  kc = (%s$dev float *)((%s$dev char *)kc + sb);\n  vc = (%s$dev float *)((%s$dev char *)vc + sb);\n",
     fresh ? "" : "const ", fresh ? "" : "const ", fresh ? "" : "const ", fresh ? "" : "const ");
  if (fresh) {
    KB("  int fp[%d]; /* position of new row j when it is in this block's state, else -1 */\n", NT);
    KB("  for (int j = 0; j < %d; j++) fp[j] = sc_row_state(io, j) == sb ? sc_row_pos(io, j) : -1;\n", NT);
  }
  if (p->window > 0) KB("  const int lo = p - %d + 1 > 0 ? p - %d + 1 : 0;\n", p->window, p->window);
  else KB("  const int lo = 0;\n");
  KB("  const $i64 kvo = ($i64)(h / %d) * HD;\n", group);
  KB("  const $dev float *qh = q + ($i64)t * %lld + h * HD;\n", ld(cg, qi));
  if (fresh) {
    KB("  if (wid == 0) { /* the query head */\n");
    KB("    $tg float *st = hb;\n");
    rope_head_warp(cu, p, norm, "qh", "qn", "st", "qs", "p", "    ");
    KB("  } else if (wid <= %d) { /* new key row wid - 1 of this head's kv head */\n", NT);
    KB("    const int j = wid - 1;\n");
    KB("    const $dev float *kh = kx + ($i64)j * %lld + kvo;\n", ld(cg, kxi));
    KB("    $tg float *st = hb + wid * HD, *kj = ks + j * HD;\n");
    rope_head_warp(cu, p, norm, "kh", "kn", "st", "kj", "sc_row_pos(io, j)", "    ");
    KB("  } else if (wid == %d) { /* the new value rows */\n", NT + 1);
    KB("    for (int i = lane; i < %d * HD; i += 32) vs[i] = vx[($i64)(i / HD) * %lld + kvo + i %% HD];\n",
       NT, ld(cg, vxi));
    KB("  }\n  $barrier;\n");
    KB("  if (h %% %d == 0) /* the kv head's first query head stores its token's new rows */\n", group);
    KB("    for (int c = $tid; c < HD; c += NW * 32) {\n");
    KB("      kc[($i64)(p %% %lld) * %lld + kvo + c] = ks[t * HD + c];\n", CAP, LDKV);
    KB("      vc[($i64)(p %% %lld) * %lld + kvo + c] = vs[t * HD + c];\n    }\n", CAP, LDKV);
  } else {
    KB("  for (int c = $tid; c < HD; c += NW * 32) qs[c] = qh[c];\n");
    KB("  $barrier;\n");
  }
  KB("  float m = -SC_INF, l = 0.0f, o[%d];\n", EPL);
  KB("  for (int e = 0; e < %d; e++) o[e] = 0.0f;\n", EPL);
  KB("  for (int k0 = lo + wid * 32; k0 <= p; k0 += NW * 32) {\n");
  KB("    const int k = k0 + lane;\n");
  KB("    float s = -SC_INF;\n");
  KB("    if (k <= p) {\n");
  KB("      const $dev float *kr = kc + ($i64)(k %% %lld) * %lld + kvo;\n", CAP, LDKV);
  if (fresh && cu->d->generic_ptr)
    KB("      for (int j = 0; j < %d; j++)\n        if (fp[j] == k) kr = ks + j * HD;\n", NT);
  KB("      float d = 0.0f;\n");
  if (fresh && !cu->d->generic_ptr) {
    /* a pointer has one address space: a fresh row (threadgroup) and a
     * cached one (device) are read by two copies of the loop */
    KB("      int fj = -1;\n      for (int j = 0; j < %d; j++)\n        if (fp[j] == k) fj = j;\n", NT);
    KB("      if (fj >= 0) {\n        const $tg float *kf = ks + fj * HD;\n");
    attn_dot(cu, vec, "kf", "$tg", "        ");
    KB("      } else {\n");
    attn_dot(cu, vec, "kr", "$dev", "        ");
    KB("      }\n");
  } else {
    attn_dot(cu, vec, "kr", "$dev", "      ");
  }
  char scale[32];
  KB("      s = d * %s;\n    }\n", cg_float(scale, p->scale));
  KB("    const float mn = $fmaxf(m, sc_warp_max(s)); /* finite: lane 0 has a row */\n");
  KB("    const float sa = $expf(m - mn), pk = k <= p ? $expf(s - mn) : 0.0f;\n");
  KB("    l = l * sa + sc_warp_sum(pk);\n");
  KB("    for (int e = 0; e < %d; e++) o[e] *= sa;\n", EPL);
  KB("    const int nk = p - k0 + 1 < 32 ? p - k0 + 1 : 32;\n");
  KB("    for (int j = 0; j < nk; j++) {\n");
  KB("      const float pj = $shfl(pk, j);\n");
  KB("      const $dev float *vr = vc + ($i64)((k0 + j) %% %lld) * %lld + kvo;\n", CAP, LDKV);
  if (fresh && cu->d->generic_ptr)
    KB("      for (int r = 0; r < %d; r++)\n        if (fp[r] == k0 + j) vr = vs + r * HD;\n", NT);
  if (fresh && !cu->d->generic_ptr) {
    KB("      int fr = -1;\n      for (int r = 0; r < %d; r++)\n        if (fp[r] == k0 + j) fr = r;\n", NT);
    KB("      for (int e = 0; e < %d; e++) {\n        const int c = lane + 32 * e;\n"
       "        %so[e] += pj * (fr >= 0 ? vs[fr * HD + c] : vr[c]);\n      }\n", EPL, guard);
  } else {
    KB("      for (int e = 0; e < %d; e++) {\n        const int c = lane + 32 * e;\n        %so[e] += pj * vr[c];\n      }\n",
       EPL, guard);
  }
  KB("    }\n    m = mn;\n  }\n");
  KB("  if (lane == 0) {\n    sm_m[wid] = m;\n    sm_l[wid] = l;\n  }\n");
  KB("  for (int e = 0; e < %d; e++) {\n    const int c = lane + 32 * e;\n    %ssm_o[wid * HD + c] = o[e];\n  }\n",
     EPL, guard);
  KB("  $barrier;\n");
  KB("  float M = -SC_INF, f[NW], L = 0.0f;\n");
  KB("  for (int w = 0; w < NW; w++) M = $fmaxf(M, sm_m[w]);\n");
  KB("  for (int w = 0; w < NW; w++) {\n    f[w] = sm_m[w] == -SC_INF ? 0.0f : $expf(sm_m[w] - M);\n    L += sm_l[w] * f[w];\n  }\n");
  KB("  for (int c = $tid; c < HD; c += NW * 32) {\n");
  KB("    float v = 0.0f;\n    for (int w = 0; w < NW; w++) v += sm_o[w * HD + c] * f[w];\n    v /= L;\n");
  if (gate)
    KB("    v *= 1.0f / (1.0f + $expf(-gate[($i64)t * %lld + h * HD + c]));\n",
       ld(cg, SRC(n, ATTENTION, GATE)));
  KB("    y[($i64)t * %lld + h * HD + c] = v;\n  }\n", (long long)n->ld);
  char gx[16], gy[48];
  snprintf(gx, sizeof gx, "%d", p->heads);
  return cu_kernel_end(cu, i, 32 * NW, gx, rows_grid(n, gy, sizeof gy));
}

/* Queries per block of the prompt attention. */
#define CU_QT 8

/* Prompt attention (ATTENTION in graphs of T tokens, head_dim <= 128): a
 * block of NW warps per (head, CU_QT consecutive queries).  As in
 * emit_attention, warps take chunks of 32 cache rows in turn and a lane
 * scores one row, but against all CU_QT queries of the block (staged in
 * shared memory), each with its own causal limit, window and online
 * softmax; the chunk's value rows are read once for all of them.  Every
 * key and value row is read once per CU_QT queries instead of once per
 * query.  The warps' partial results merge at the end.  Queries in
 * different state blocks (a call placing rows of several sessions,
 * sc_io.row_state) take turns: the key loop runs once per state block,
 * for its queries only; a prompt's rows are one block and one turn. */
static int emit_attention_tiled(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const int qi = SRC(n, ATTENTION, Q), kci = SRC(n, ATTENTION, KC), vci = SRC(n, ATTENTION, VC);
  const IrNode *c = node(cg, kci);
  const int HD = p->head_dim, EPL = (HD + 31) / 32, group = p->heads / p->kv_heads, NW = 8, QT = CU_QT;
  const long long CAP = (long long)c->rows, LDKV = (long long)c->cols;
  const int gate = n->nsrc > S_ATTENTION_GATE, vec = HD % 4 == 0 && LDKV % 4 == 0;
  const char *guard = HD % 32 ? "if (c < HD) " : "";
  char scale[32];
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "q", ref(cg, qi));
  cu_karg(cu, "const float *", "kc", ref(cg, kci));
  cu_karg(cu, "const float *", "vc", ref(cg, vci));
  if (gate) cu_karg(cu, "const float *", "gate", ref(cg, SRC(n, ATTENTION, GATE)));
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  enum { HD = %d, NW = %d, QT = %d };\n", HD, NW, QT);
  KB("  $shared16 float qs[QT * HD];\n");
  KB("  $shared float sm_m[NW * QT], sm_l[NW * QT], sm_o[NW * QT * HD];\n");
  KB("  const int h = $bid_x, t0 = $bid_y * QT, wid = $tid >> 5, lane = $tid & 31;\n");
  KB("  const int nq = T - t0 < QT ? T - t0 : QT;\n");
  KB("  const $i64 kvo = ($i64)(h / %d) * HD;\n", group);
  KB("  for (int i = $tid; i < QT * HD; i += NW * 32) {\n");
  KB("    const int j = i / HD, c = i - j * HD;\n");
  KB("    qs[i] = j < nq ? q[($i64)(t0 + j) * %lld + h * HD + c] : 0.0f;\n  }\n", ld(cg, qi));
  KB("  $barrier;\n");
  KB("  float m[QT], l[QT], o[QT][%d];\n", EPL);
  KB("#pragma unroll\n  for (int j = 0; j < QT; j++) {\n    m[j] = -SC_INF;\n    l[j] = 0.0f;\n");
  KB("#pragma unroll\n    for (int e = 0; e < %d; e++) o[j][e] = 0.0f;\n  }\n", EPL);
  KB("  for (int g = 0; g < nq; g++) { /* the queries of each state block in turn (one, unless rows are placed) */\n");
  KB("    if (sc_row_group(io, t0, t0 + g) != t0 + g) continue;\n");
  KB("    const $i64 sb = sc_row_state(io, t0 + g);\n");
  KB("    const $dev float *kg = (const $dev float *)((const $dev char *)kc + sb), *vg = (const $dev float *)((const $dev char *)vc + sb);\n");
  KB("    int pq[QT], lo = 0x7fffffff, pl = -1; /* query j's position (-1: another block's), the keys' span */\n");
  KB("#pragma unroll\n    for (int j = 0; j < QT; j++) {\n");
  KB("      pq[j] = j < nq && sc_row_group(io, t0, t0 + j) == t0 + g ? sc_row_pos(io, t0 + j) : -1;\n");
  if (p->window > 0)
    KB("      const int lj = pq[j] - %d + 1 > 0 ? pq[j] - %d + 1 : 0;\n", p->window, p->window);
  else
    KB("      const int lj = 0;\n");
  KB("      if (pq[j] >= 0 && lj < lo) lo = lj;\n      if (pq[j] > pl) pl = pq[j];\n    }\n");
  KB("    for (int k0 = lo + wid * 32; k0 <= pl; k0 += NW * 32) {\n");
  KB("      const int k = k0 + lane;\n");
  KB("      float s[QT];\n");
  KB("#pragma unroll\n      for (int j = 0; j < QT; j++) s[j] = -SC_INF;\n");
  KB("      if (k <= pl) {\n");
  KB("        const $dev float *kr = kg + ($i64)(k %% %lld) * %lld + kvo;\n", CAP, LDKV);
  KB("        float d[QT];\n");
  KB("#pragma unroll\n        for (int j = 0; j < QT; j++) d[j] = 0.0f;\n");
  if (vec) {
    KB("#pragma unroll 4\n        for (int c = 0; c < HD; c += 4) {\n");
    KB("          const float4 kv = *(const $dev float4 *)(kr + c);\n");
    KB("#pragma unroll\n          for (int j = 0; j < QT; j++) {\n");
    KB("            const float4 qv = *(const $tg float4 *)(qs + j * HD + c);\n");
    KB("            d[j] += kv.x * qv.x + kv.y * qv.y + kv.z * qv.z + kv.w * qv.w;\n          }\n        }\n");
  } else {
    KB("        for (int c = 0; c < HD; c++) {\n          const float kv = kr[c];\n");
    KB("#pragma unroll\n          for (int j = 0; j < QT; j++) d[j] += kv * qs[j * HD + c];\n        }\n");
  }
  KB("#pragma unroll\n        for (int j = 0; j < QT; j++) /* query j sees rows up to pq[j]%s */\n",
     p->window > 0 ? " within its window" : "");
  if (p->window > 0)
    KB("          if (k <= pq[j] && k > pq[j] - %d) s[j] = d[j] * %s;\n", p->window, cg_float(scale, p->scale));
  else
    KB("          if (k <= pq[j]) s[j] = d[j] * %s;\n", cg_float(scale, p->scale));
  KB("      }\n");
  KB("      float pk[QT];\n");
  KB("#pragma unroll\n      for (int j = 0; j < QT; j++) {\n");
  KB("        const float mn = $fmaxf(m[j], sc_warp_max(s[j]));\n");
  KB("        const float sa = m[j] == mn ? 1.0f : $expf(m[j] - mn); /* -inf == -inf: no rows yet */\n");
  KB("        pk[j] = s[j] == -SC_INF ? 0.0f : $expf(s[j] - mn);\n");
  KB("        l[j] = l[j] * sa + sc_warp_sum(pk[j]);\n");
  KB("#pragma unroll\n        for (int e = 0; e < %d; e++) o[j][e] *= sa;\n", EPL);
  KB("        m[j] = mn;\n      }\n");
  KB("      const int nk = pl - k0 + 1 < 32 ? pl - k0 + 1 : 32;\n");
  KB("      for (int r = 0; r < nk; r++) {\n");
  KB("        const $dev float *vr = vg + ($i64)((k0 + r) %% %lld) * %lld + kvo;\n", CAP, LDKV);
  KB("        float vv[%d];\n", EPL);
  KB("#pragma unroll\n        for (int e = 0; e < %d; e++) {\n          const int c = lane + 32 * e;\n", EPL);
  KB("          vv[e] = 0.0f;\n          %svv[e] = vr[c];\n        }\n", guard);
  KB("#pragma unroll\n        for (int j = 0; j < QT; j++) {\n");
  KB("          const float pj = $shfl(pk[j], r);\n");
  KB("#pragma unroll\n          for (int e = 0; e < %d; e++) o[j][e] += pj * vv[e];\n        }\n      }\n    }\n  }\n",
     EPL);
  KB("  if (lane == 0)\n#pragma unroll\n    for (int j = 0; j < QT; j++) {\n");
  KB("      sm_m[wid * QT + j] = m[j];\n      sm_l[wid * QT + j] = l[j];\n    }\n");
  KB("#pragma unroll\n  for (int j = 0; j < QT; j++)\n#pragma unroll\n    for (int e = 0; e < %d; e++) {\n", EPL);
  KB("      const int c = lane + 32 * e;\n      %ssm_o[(wid * QT + j) * HD + c] = o[j][e];\n    }\n", guard);
  KB("  $barrier;\n");
  KB("  for (int i = $tid; i < nq * HD; i += NW * 32) {\n");
  KB("    const int j = i / HD, c = i - j * HD;\n");
  KB("    float M = -SC_INF, L = 0.0f, v = 0.0f;\n");
  KB("    for (int w = 0; w < NW; w++) M = $fmaxf(M, sm_m[w * QT + j]);\n");
  KB("    for (int w = 0; w < NW; w++) {\n");
  KB("      const float f = sm_m[w * QT + j] == -SC_INF ? 0.0f : $expf(sm_m[w * QT + j] - M);\n");
  KB("      L += sm_l[w * QT + j] * f;\n      v += sm_o[(w * QT + j) * HD + c] * f;\n    }\n");
  KB("    v /= L;\n");
  if (gate)
    KB("    v *= 1.0f / (1.0f + $expf(-gate[($i64)(t0 + j) * %lld + h * HD + c]));\n",
       ld(cg, SRC(n, ATTENTION, GATE)));
  KB("    y[($i64)(t0 + j) * %lld + h * HD + c] = v;\n  }\n", (long long)n->ld);
  char gx[16], gy[48];
  snprintf(gx, sizeof gx, "%d", p->heads);
  snprintf(gy, sizeof gy, "(T + %d) / %d", QT - 1, QT);
  return cu_kernel_end(cu, i, 32 * NW, gx, gy);
}

/* ---- each op -------------------------------------------------------------- */

int cu_emit_node(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  if (cg_emit_value(cg, i, 1)) return SC_OK;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const char *v = cg->var[i];
  const Module *m = cg->m;
  switch (n->op) {
  case OP_EMBED: return emit_embed(cu, i);
  case OP_LINEAR:
  case OP_LINEAR_ADD:
  case OP_NORM_LINEAR:
  case OP_LINEAR_SWIGLU: return gemm_tiled(cu, i) ? emit_gemm_tiled(cu, i) : emit_gemv(cu, i);
  case OP_RMSNORM: return emit_rmsnorm(cu, i);
  case OP_LAYERNORM: return emit_layernorm(cu, i);
  case OP_POS_ADD: return emit_pos_add(cu, i);
  case OP_L2NORM:
  case OP_GATED_RMSNORM: return cu_emit_group_norm(cu, i);
  case OP_DWCONV: return cu_emit_dwconv(cu, i);
  case OP_DELTA_RULE: return cu_emit_delta_rule(cu, i);
  case OP_TOPK_ROUTE: return cu_emit_topk_route(cu, i);
  case OP_MOE_COMBINE: return cu_emit_moe(cu, i);
  case OP_ROPE:
  case OP_NORM_ROPE: return emit_rope(cu, i);
  case OP_KV_STORE: return emit_kv_store(cu, i);
  case OP_ATTENTION:
  case OP_ROPE_ATTENTION: {
    const IrNode *c = node(cg, n->op == OP_ROPE_ATTENTION ? SRC(n, ROPE_ATTENTION, KC) : SRC(n, ATTENTION, KC));
    if (n->p.window > 0 || c->rows < m->max_context) {
      /* a ring: the rows the first query sees must all still be there
       * (rows placed one by one: the caller's contract, sc_io) */
      OUT("  if (!io->row_pos) {\n    const int first = %d > 0 && pos - %d + 1 > 0 ? pos - %d + 1 : 0;\n", p->window,
          p->window, p->window);
      OUT("    if (pos + %s - first > %lld) {\n", rows(n), (long long)c->rows);
      OUT("      K->error(K->ctx, \"%s: keys visible to the queries exceed the cache rows\", pos + %s - first);\n",
          n->name, rows(n));
      OUT("      return 1;\n    }\n  }\n");
    }
    /* prompts: CU_QT queries per block, when their partial sums fit */
    if (n->op == OP_ATTENTION && n->rows == IR_T && p->head_dim <= 128) return emit_attention_tiled(cu, i);
    return emit_attention(cu, i);
  }
  case OP_ADD: return emit_map(cu, i, "av + bv");
  case OP_MUL: return emit_map(cu, i, "av * bv");
  case OP_SILU: return emit_map(cu, i, "av / (1.0f + $expf(-av))");
  case OP_SIGMOID: return emit_map(cu, i, "1.0f / (1.0f + $expf(-av))");
  case OP_SOFTPLUS: return emit_map(cu, i, "av > 20.0f ? av : $logf(1.0f + $expf(av))");
  case OP_GELU: return emit_map(cu, i, "0.5f * av * (1.0f + $erff(av * 0.70710678118654752f))");
  case OP_SWIGLU: {
    /* y = silu(a) * b with a, b the two column halves of one value */
    const long long C = (long long)n->cols, ldx = ld(cg, n->src[0]);
    cu_kernel_begin(cu);
    cu_karg(cu, "const float *", "x", ref(cg, n->src[0]));
    cu_karg(cu, "float *", "y", v);
    KB("  const int i = $bid_x * 256 + $tid;\n");
    KB("  if (i >= %s * %lld) return;\n", rows(n), C);
    KB("  const int t = i / %lld, c = i - t * %lld;\n", C, C);
    KB("  const float av = x[($i64)t * %lld + c], bv = x[($i64)t * %lld + %lld + c];\n", ldx, ldx, C);
    KB("  y[($i64)t * %lld + c] = (av / (1.0f + $expf(-av))) * bv;\n", (long long)n->ld);
    char gx[64];
    cu_grid_items(n, C, 256, gx, sizeof gx);
    return cu_kernel_end(cu, i, 256, gx, "1");
  }
  case OP_OUTPUT:
    /* a value placed in the slot is there already: with --check-numerics
     * its check still runs (a copy onto itself) */
    if (IR_BUF_IS_OUT(node(cg, n->src[0])->buf) && !cu->check_numerics) {
      OUT("  /* %s was written there: nothing to copy */\n", node(cg, n->src[0])->name);
      return SC_OK;
    }
    return emit_copy(cu, i, n->src[0], p->slot == OUT_LOGITS ? "io->out" : "io->hidden_out", (long long)n->cols);
  default: /* ops.def says the CUDA target lowers it (ir_check_target) */
    return sc_fail(cg->err, SC_EINPUT, "internal error: CUDA target: op %s (%s) is marked T_CUDA in ops.def "
                   "but has no case here", ir_op_names[n->op], n->name);
  }
}
