/*
 * cg_kernels_gdn.c — the device kernels of the Gated DeltaNet and
 * mixture-of-experts ops (Qwen3.5, Qwen3.5-MoE, Qwen3-Next), over the
 * kernel dialect like cg_kernels.c's.  Semantics are those of the CPU
 * kernels (runtime/kernels_gdn.c, kernels_moe.c, kernels_codec.c's
 * DWCONV) op for op; numbers differ by rounding only (warp-order sums).
 *
 *   DWCONV: a thread per channel walks the call's rows in order over its
 *     own column of the state's rows then x's, and keeps the last rows as
 *     the state (in place: no other thread reads that column).
 *   L2NORM, GATED_RMSNORM: a block per (group, token), as RMSNORM.
 *   DELTA_RULE: a block of 8 warps per (v-head, 32 columns of S); the
 *     block's columns of S [dk, 32] live in shared memory for the whole
 *     call, loaded at the start and stored at the end, so the recurrent
 *     state is read and written once per call.  Token by token (decode,
 *     and prompts without p.block): lane j is column j, warp w rows
 *     w, w+8, ..., and u = S^T k and o = S^T q are summed over the warps
 *     through shared memory.  With p.block, calls of 16 tokens or more take
 *     FLA's chunkwise form (runtime/kernels_gdn.c has the algebra), p.block
 *     tokens a chunk: the chunk's k, q, v columns, decays and the
 *     [L, L] dot products staged in shared memory, the forward
 *     substitution by one warp (a lane per column), outputs and the state
 *     at the chunk's end by all.
 *   TOPK_ROUTE: a warp per token: the softmax, then k rounds of a warp
 *     argmax (the lower index on ties), the renormalisation by lane 0 in
 *     rank order.
 *   MOE_COMBINE: two kernels.  `_gate_up`: a block per (token, rank) pair
 *     and 8 rows of the expert's intermediate, the expert index read from
 *     the route on the device (an index that names no expert fails the
 *     call); silu(gate) * up of each row into the node's temporary
 *     [T*k, I].  Then the node's own kernel: a block per token and 8 output
 *     rows, a warp per row summing weight * the chosen expert's down row
 *     against its pair's intermediate, in rank order, plus the gated
 *     shared expert.  Only the chosen experts' rows are read; both use the
 *     GEMV kernel's dot loop (cu_dot_row), so every band is decoded as
 *     LINEAR decodes it.
 */
#include <stdio.h>

#include "cg_kernels.h"

/* Shared floats a kernel may declare (48 KiB, the static limit). */

/* ---- DWCONV ----------------------------------------------------------------- */

int cu_emit_dwconv(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const int xi = SRC(n, DWCONV, X), wi = SRC(n, DWCONV, W), si = SRC(n, DWCONV, STATE);
  const int bias = n->nsrc > S_DWCONV_B;
  const long long C = (long long)n->cols;
  const int K = p->ksize, D = p->dilation, S = (K - 1) * D;
  if (cu_band_of(cu, wi) != DT_F32 || (bias && cu_band_of(cu, SRC(n, DWCONV, B)) != DT_F32))
    return cu_fail(cu, "%s: the depthwise conv's weights must be f32", n->name);
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "x", ref(cg, xi));
  cu_karg(cu, "const float *", "w", cg->var[wi]);
  if (bias) cu_karg(cu, "const float *", "b", ref(cg, SRC(n, DWCONV, B)));
  cu_karg(cu, "float *", "st", ref(cg, si));
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  enum { C = %lld, K = %d, D = %d, S = %d }; /* channels, taps, dilation, state rows */\n", C, K, D, S);
  KB("  const int c = $bid_x * 256 + $tid;\n");
  KB("  if (c >= C) return;\n");
  KB("  float wk[K]; /* this channel's taps (w [C, K]) */\n");
  KB("  for (int j = 0; j < K; j++) wk[j] = w[($i64)c * K + j];\n");
  if (cg->g->row_states) {
    /* each row a step of its own session, in its row's state block (the
     * batched step: sc_io.row_state): the T = 1 arithmetic, then the
     * window moves up a row */
    const long long ldx = ld(cg, xi);
    KB("  for (int t = 0; t < T; t++) {\n");
    KB("    $dev float *s = ($dev float *)(($dev char *)st + sc_row_state(io, t));\n");
    KB("    const float xt = x[($i64)t * %lld + c];\n", ldx);
    KB("    float acc = %s;\n", bias ? "b[c]" : "0.0f");
    KB("    for (int j = 0; j < K; j++) acc += wk[j] * (j * D < S ? s[($i64)(j * D) * C + c] : xt);\n");
    KB("    y[($i64)t * %lld + c] = acc;\n", (long long)n->ld);
    KB("    for (int r = 0; r + 1 < S; r++) s[($i64)r * C + c] = s[($i64)(r + 1) * C + c];\n");
    KB("    if (S > 0) s[($i64)(S - 1) * C + c] = xt;\n  }\n");
    char gx[32];
    snprintf(gx, sizeof gx, "%lld", (C + 255) / 256);
    return cu_kernel_end(cu, i, 256, gx, "1");
  }
  KB("  /* xx = the state's S rows, then x's: row r of xx */\n");
  KB("#define XX(r) ((r) < S ? st[($i64)(r) * C + c] : x[($i64)((r) - S) * %lld + c])\n", ld(cg, xi));
  KB("  for (int t = 0; t < T; t++) {\n");
  KB("    float acc = %s;\n", bias ? "b[c]" : "0.0f");
  KB("    for (int j = 0; j < K; j++) acc += wk[j] * XX(t + j * D);\n");
  KB("    y[($i64)t * %lld + c] = acc;\n  }\n", (long long)n->ld);
  KB("  /* the state: the last S rows of xx (row r reads row T + r >= r: in place, ascending) */\n");
  KB("  for (int r = 0; r < S; r++) st[($i64)r * C + c] = XX(T + r);\n");
  KB("#undef XX\n");
  char gx[32];
  snprintf(gx, sizeof gx, "%lld", (C + 255) / 256);
  return cu_kernel_end(cu, i, 256, gx, "1");
}

/* ---- L2NORM, GATED_RMSNORM -------------------------------------------------- */

/* A block per (group, token): the group's sum of squares over the block,
 * then each column scaled (and gated). */
int cu_emit_group_norm(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const int gated = n->op == OP_GATED_RMSNORM;
  const int xi = gated ? SRC(n, GATED_RMSNORM, X) : n->src[0];
  const int G = (int)(n->cols / p->group);
  const int nt = p->group >= 256 ? 256 : (p->group + 31) / 32 * 32;
  char eps[32];
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "x", ref(cg, xi));
  if (gated) {
    cu_karg(cu, "const float *", "z", ref(cg, SRC(n, GATED_RMSNORM, Z)));
    cu_karg(cu, "const float *", "w", ref(cg, SRC(n, GATED_RMSNORM, W)));
  }
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  $shared float part[%d];\n  $shared float rr;\n", nt / 32);
  KB("  const $i64 t = $bid_y;\n");
  KB("  const $dev float *xr = x + t * %lld + $bid_x * %d;\n", ld(cg, xi), p->group);
  if (gated)
    KB("  const $dev float *zr = z + t * %lld + $bid_x * %d;\n", ld(cg, SRC(n, GATED_RMSNORM, Z)), p->group);
  KB("  $dev float *yr = y + t * %lld + $bid_x * %d;\n", (long long)n->ld, p->group);
  KB("  float ss = 0.0f;\n");
  KB("  for (int c = $tid; c < %d; c += %d) ss += xr[c] * xr[c];\n", p->group, nt);
  KB("  ss = sc_warp_sum(ss);\n  if (($tid & 31) == 0) part[$tid >> 5] = ss;\n  $barrier;\n");
  KB("  if ($tid == 0) {\n    float s = 0.0f;\n");
  KB("    for (int k = 0; k < %d; k++) s += part[k];\n", nt / 32);
  if (gated) KB("    rr = 1.0f / $sqrtf(s / %d.0f + %s);\n  }\n  $barrier;\n", p->group, cg_float(eps, p->eps));
  else KB("    rr = 1.0f / $sqrtf(s + %s); /* a sum, not a mean */\n  }\n  $barrier;\n", cg_float(eps, p->eps));
  if (gated) {
    KB("  for (int c = $tid; c < %d; c += %d) {\n", p->group, nt);
    KB("    const float zc = zr[c];\n");
    KB("    yr[c] = w[c] * (xr[c] * rr) * (zc / (1.0f + $expf(-zc)));\n  }\n");
  } else {
    KB("  for (int c = $tid; c < %d; c += %d) yr[c] = xr[c] * rr;\n", p->group, nt);
  }
  char gx[16];
  snprintf(gx, sizeof gx, "%d", G);
  return cu_kernel_end(cu, i, nt, gx, ir_rows_text(n->rows, (char[48]){0}, 48));
}

/* ---- DELTA_RULE ------------------------------------------------------------- */

/* Calls of this many tokens or more take the chunkwise form when p.block
 * asks for it (runtime/kernels_gdn.c's DELTA_CHUNK_MIN_T). */
#define CU_DELTA_CHUNK_MIN_T 16

int cu_emit_delta_rule(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const int qi = SRC(n, DELTA_RULE, Q), ki = SRC(n, DELTA_RULE, K), vi = SRC(n, DELTA_RULE, V);
  const int gi = SRC(n, DELTA_RULE, G), bi = SRC(n, DELTA_RULE, BETA), si = SRC(n, DELTA_RULE, STATE);
  const int NV = p->heads, NK = p->kv_heads, DK = p->head_dim;
  const int DV = (int)(node(cg, vi)->cols / NV), NT = (DV + 31) / 32;
  const int L = p->block, chunked = L > 0 && cg->g->max_tokens >= CU_DELTA_CHUNK_MIN_T;
  const char *live = DV % 32 ? "live && " : "";
  /* shared floats: S's columns, k, q, the warps' partial sums; the chunk's arrays */
  const long long sh_rec = 32LL * DK + 2 * DK + 8 * 32;
  const long long sh_chunk = chunked ? 2LL * L * DK + 2LL * L * L + 4LL * L * 32 + 4LL * L : 0;
  if (sh_rec + sh_chunk > CU_SHARED_FLOATS(cu))
    return cu_fail(cu, "%s: the delta rule's block needs %lld bytes of shared memory "
                   "(head_dim %d, chunk %d), above the %d KiB a kernel may declare%s", n->name,
                   4 * (sh_rec + sh_chunk), DK, L, cu->d->shared_bytes / 1024,
                   chunked ? " (hint: a smaller --delta-chunk, or 0 for the recurrent form)" : "");
  char scale[32];
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "q", ref(cg, qi));
  cu_karg(cu, "const float *", "k", ref(cg, ki));
  cu_karg(cu, "const float *", "v", ref(cg, vi));
  cu_karg(cu, "const float *", "g", ref(cg, gi));
  cu_karg(cu, "const float *", "beta", ref(cg, bi));
  cu_karg(cu, "float *", "state", ref(cg, si));
  cu_karg(cu, "float *", "y", cg->var[i]);
  const long long ldq = ld(cg, qi), ldk = ld(cg, ki), ldv = ld(cg, vi), ldg = ld(cg, gi), ldb = ld(cg, bi);
  const long long ldy = (long long)n->ld;
  KB("  enum { DK = %d, DV = %d, NW = 8 }; /* k and v head dims, warps */\n", DK, DV);
  KB("  $shared float Ss[DK * 32]; /* this block's 32 columns of S [DK, DV] */\n");
  KB("  $shared float ks[DK], qs[DK], red[NW * 32];\n");
  KB("  const int h = $bid_x, kh = h / %d, wid = $tid >> 5, lane = $tid & 31;\n", NV / NK);
  KB("  const int c = $bid_y * 32 + lane%s;\n", DV % 32 ? ", live = c < DV" : "");
  /* rows: each row a step of its own session, S loaded from and stored to
   * its row's state block around it (the batched step: sc_io.row_state) */
  const int rows = cg->g->row_states;
  IR_ASSERT(!(rows && chunked));
  char load[128], store[128];
  snprintf(load, sizeof load, "for (int i = wid; i < DK; i += NW) Ss[i * 32 + lane] = %sSg[i * DV + c]%s;",
           DV % 32 ? "live ? " : "", DV % 32 ? " : 0.0f" : "");
  snprintf(store, sizeof store, "for (int i = wid; i < DK; i += NW) %sSg[i * DV + c] = Ss[i * 32 + lane];",
           DV % 32 ? "if (live) " : "");
  if (rows) {
    KB("  $dev float *S0 = state + ($i64)h * DK * DV; /* in the calling session's block */\n");
  } else {
    KB("  $dev float *Sg = state + ($i64)h * DK * DV;\n");
    KB("  %s\n", load);
  }
  if (chunked) {
    /* the chunk's arrays at the kernel's scope (Metal wants shared arrays there) */
    KB("  enum { L = %d };\n", L);
    KB("  /* k, scale * q [L, DK]; k.k and q.k within the chunk [L, L]; v, S0^T k, S0^T q and delta [L, 32];\n"
       "   * the summed decays G, e^G, beta, e^(G_L - G) [L] */\n");
    KB("  $shared float Kc[L * DK], Qc[L * DK], KK[L * L], QK[L * L];\n");
    KB("  $shared float Vc[L * 32], Wc[L * 32], Pc[L * 32], Dc[L * 32], Gc[L], Ec[L], Bc[L], Fc[L];\n");
    KB("  if (T >= %d) { /* the chunkwise form, %d tokens a chunk */\n", CU_DELTA_CHUNK_MIN_T, L);
    KB("    for (int t0 = 0; t0 < T; t0 += L) {\n");
    KB("      const int n = T - t0 < L ? T - t0 : L;\n");
    KB("      $barrier; /* the previous chunk is used up */\n");
    KB("      for (int i = $tid; i < n * DK; i += NW * 32) {\n");
    KB("        const int t = i / DK, j = i - t * DK;\n");
    KB("        Kc[i] = k[($i64)(t0 + t) * %lld + kh * DK + j];\n", ldk);
    KB("        Qc[i] = q[($i64)(t0 + t) * %lld + kh * DK + j] * %s;\n      }\n", ldq, cg_float(scale, p->scale));
    KB("      for (int i = $tid; i < n * 32; i += NW * 32) {\n");
    KB("        const int t = i >> 5, cc = $bid_y * 32 + (i & 31);\n");
    KB("        Vc[i] = %sv[($i64)(t0 + t) * %lld + h * DV + cc]%s;\n      }\n", DV % 32 ? "cc < DV ? " : "", ldv,
       DV % 32 ? " : 0.0f" : "");
    KB("      if ($tid == 0) {\n        float acc = 0.0f;\n");
    KB("        for (int t = 0; t < n; t++) {\n");
    KB("          acc += g[($i64)(t0 + t) * %lld + h];\n", ldg);
    KB("          Gc[t] = acc, Ec[t] = $expf(acc), Bc[t] = beta[($i64)(t0 + t) * %lld + h];\n        }\n", ldb);
    KB("        for (int t = 0; t < n; t++) Fc[t] = $expf(Gc[n - 1] - Gc[t]);\n      }\n");
    KB("      $barrier;\n");
    KB("      for (int i = $tid; i < n * n; i += NW * 32) { /* (t, s), s <= t */\n");
    KB("        const int t = i / n, s = i - t * n;\n");
    KB("        if (s > t) continue;\n");
    KB("        float kk = 0.0f, qk = 0.0f;\n");
    KB("        for (int j = 0; j < DK; j++) {\n");
    KB("          kk += Kc[t * DK + j] * Kc[s * DK + j];\n");
    KB("          qk += Qc[t * DK + j] * Kc[s * DK + j];\n        }\n");
    KB("        const float dec = $expf(Gc[t] - Gc[s]);\n");
    KB("        KK[t * L + s] = kk * (Bc[t] * dec);\n");
    KB("        QK[t * L + s] = qk * dec;\n      }\n");
    KB("      for (int t = wid; t < n; t += NW) { /* S0^T k_t, S0^T q_t */\n");
    KB("        float wv = 0.0f, pv = 0.0f;\n");
    KB("        for (int j = 0; j < DK; j++) {\n");
    KB("          const float s = Ss[j * 32 + lane];\n");
    KB("          wv += s * Kc[t * DK + j];\n          pv += s * Qc[t * DK + j];\n        }\n");
    KB("        Wc[t * 32 + lane] = wv;\n        Pc[t * 32 + lane] = pv;\n      }\n");
    KB("      $barrier;\n");
    KB("      if (wid == 0) /* delta by forward substitution, a lane per column */\n");
    KB("        for (int t = 0; t < n; t++) {\n");
    KB("          float d = Bc[t] * (Vc[t * 32 + lane] - Ec[t] * Wc[t * 32 + lane]);\n");
    KB("          for (int s = 0; s < t; s++) d -= KK[t * L + s] * Dc[s * 32 + lane];\n");
    KB("          Dc[t * 32 + lane] = d;\n        }\n");
    KB("      $barrier;\n");
    KB("      for (int t = wid; t < n; t += NW) {\n");
    KB("        float o = Ec[t] * Pc[t * 32 + lane];\n");
    KB("        for (int s = 0; s <= t; s++) o += QK[t * L + s] * Dc[s * 32 + lane];\n");
    KB("        %sy[($i64)(t0 + t) * %lld + h * DV + c] = o;\n      }\n", DV % 32 ? "if (live) " : "", ldy);
    KB("      for (int i = wid; i < DK; i += NW) { /* the state at the chunk's end */\n");
    KB("        float s = Ss[i * 32 + lane] * Ec[n - 1];\n");
    KB("        for (int r = 0; r < n; r++) s += (Fc[r] * Kc[r * DK + i]) * Dc[r * 32 + lane];\n");
    KB("        Ss[i * 32 + lane] = s;\n      }\n");
    KB("    }\n");
    KB("  } else {\n");
  }
  size_t mark = cu->body.len;
  KB("  for (int t = 0; t < T; t++) { /* token by token */\n");
  if (rows) {
    KB("    $dev float *Sg = ($dev float *)(($dev char *)S0 + sc_row_state(io, t)); /* row t's */\n");
    KB("    %s\n", load);
  }
  KB("    for (int i = $tid; i < DK; i += NW * 32) {\n");
  KB("      ks[i] = k[($i64)t * %lld + kh * DK + i];\n", ldk);
  KB("      qs[i] = q[($i64)t * %lld + kh * DK + i] * %s;\n    }\n", ldq, cg_float(scale, p->scale));
  KB("    const float decay = $expf(g[($i64)t * %lld + h]), b = beta[($i64)t * %lld + h];\n", ldg, ldb);
  KB("    $barrier;\n");
  KB("    float part = 0.0f; /* S *= decay; u = S^T k, this warp's rows */\n");
  KB("    for (int i = wid; i < DK; i += NW) {\n");
  KB("      const float s = Ss[i * 32 + lane] * decay;\n");
  KB("      Ss[i * 32 + lane] = s;\n      part += s * ks[i];\n    }\n");
  KB("    red[wid * 32 + lane] = part;\n");
  KB("    $barrier;\n");
  KB("    float u = 0.0f;\n");
  KB("    for (int w = 0; w < NW; w++) u += red[w * 32 + lane];\n");
  char vt[96];
  snprintf(vt, sizeof vt, "v[($i64)t * %lld + h * DV + c]", ldv);
  if (DV % 32) KB("    const float d = ((live ? %s : 0.0f) - u) * b; /* delta = beta (v - u) */\n", vt);
  else KB("    const float d = (%s - u) * b; /* delta = beta (v - u) */\n", vt);
  KB("    float o = 0.0f; /* S += k (x) delta; o = S^T q */\n");
  KB("    for (int i = wid; i < DK; i += NW) {\n");
  KB("      const float s = Ss[i * 32 + lane] + ks[i] * d;\n");
  KB("      Ss[i * 32 + lane] = s;\n      o += s * qs[i];\n    }\n");
  KB("    $barrier; /* every warp has read red */\n");
  KB("    red[wid * 32 + lane] = o;\n");
  KB("    $barrier;\n");
  KB("    if (%swid == 0) {\n", live);
  KB("      float yv = 0.0f;\n");
  KB("      for (int w = 0; w < NW; w++) yv += red[w * 32 + lane];\n");
  KB("      y[($i64)t * %lld + h * DV + c] = yv;\n    }\n", ldy);
  if (rows) KB("    %s /* each thread its own elements */\n", store);
  KB("  }\n");
  if (chunked) {
    cu_indent_from(&cu->body, mark);
    KB("  }\n");
  }
  if (!rows) {
    KB("  $barrier;\n");
    KB("  %s\n", store);
  }
  char gx[16], gy[16];
  snprintf(gx, sizeof gx, "%d", NV);
  snprintf(gy, sizeof gy, "%d", NT);
  return cu_kernel_end(cu, i, 256, gx, gy);
}

/* ---- TOPK_ROUTE ------------------------------------------------------------- */

int cu_emit_topk_route(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const int xi = n->src[0], E = p->experts, K = p->top_k;
  if (E > CU_SHARED_FLOATS(cu))
    return cu_fail(cu, "%s: %d experts exceed the %d a router block holds", n->name, E,
                   CU_SHARED_FLOATS(cu));
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "x", ref(cg, xi));
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  enum { E = %d, K = %d }; /* experts, chosen per token */\n", E, K);
  KB("  $shared float pr[E]; /* the softmax; -1 once chosen */\n");
  KB("  const int t = $bid_x, lane = $tid;\n");
  KB("  const $dev float *l = x + ($i64)t * %lld;\n", ld(cg, xi));
  KB("  $dev float *yt = y + ($i64)t * %lld;\n", (long long)n->ld);
  KB("  float m = -SC_INF, s = 0.0f;\n");
  KB("  for (int e = lane; e < E; e += 32) m = $fmaxf(m, l[e]);\n");
  KB("  m = sc_warp_max(m);\n");
  KB("  for (int e = lane; e < E; e += 32) {\n    pr[e] = $expf(l[e] - m);\n    s += pr[e];\n  }\n");
  KB("  s = sc_warp_sum(s);\n");
  KB("  for (int e = lane; e < E; e += 32) pr[e] /= s;\n");
  KB("  $warp_barrier;\n");
  KB("  float total = 0.0f;\n");
  KB("  for (int j = 0; j < K; j++) { /* the largest left, the lower index on ties */\n");
  KB("    float bv = -1.0f;\n    int bi = E;\n");
  KB("    for (int e = lane; e < E; e += 32)\n      if (pr[e] > bv) bv = pr[e], bi = e;\n");
  KB("    for (int o = 16; o > 0; o >>= 1) {\n");
  KB("      const float ov = $shfl(bv, lane ^ o);\n      const int oi = $shfl(bi, lane ^ o);\n");
  KB("      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;\n    }\n");
  KB("    if (lane == 0) {\n      yt[j] = bv;\n      yt[K + j] = (float)bi;\n      pr[bi] = -1.0f;\n    }\n");
  KB("    total += bv;\n");
  KB("    $warp_barrier;\n  }\n");
  if (p->renorm) KB("  if (lane == 0)\n    for (int j = 0; j < K; j++) yt[j] /= total;\n");
  else KB("  (void)total;\n");
  char gx[48];
  return cu_kernel_end(cu, i, 32, ir_rows_text(n->rows, gx, sizeof gx), "1");
}

/* ---- MOE_COMBINE ------------------------------------------------------------ */

/* The element type a band's rows are read as, and a row's size in those
 * elements (bytes for the block bands). */
static const char *band_etype(DType band) {
  return band == DT_F32 ? "float" : band == DT_BF16 ? "unsigned short" : "unsigned char";
}
static long long band_row_units(DType band, long long cols) {
  return sc_band_quantized(ir_wtype(band)) ? (long long)ir_band_row_bytes(band, cols) : cols;
}

static int moe_band_ok(Cu *cu, const IrNode *n, DType band, long long cols) {
  const int quant = sc_band_quantized(ir_wtype(band));
  if (band != DT_F32 && band != DT_BF16 && !quant)
    return cu_fail(cu, "%s: expert band %s is not supported yet "
                   "(accepted: f32, bf16, q8_0, q4_0)", n->name, ir_dtype_name(band));
  if (quant && cols % 32)
    return cu_fail(cu, "%s: %s expert rows of %lld columns (not blocks of 32)",
                   n->name, ir_dtype_name(band), cols);
  return SC_OK;
}

int cu_emit_moe(Cu *cu, int i) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  const IrParams *p = &n->p;
  const int xi = SRC(n, MOE_COMBINE, X), ri = SRC(n, MOE_COMBINE, ROUTE);
  const int gui = SRC(n, MOE_COMBINE, WGU), wdi = SRC(n, MOE_COMBINE, WD);
  const int shared = n->nsrc > S_MOE_COMBINE_SH;
  const int E = p->experts, K = p->top_k;
  const long long H = (long long)n->cols, I = (long long)node(cg, gui)->rows / (2 * E);
  const DType bgu = cu_band_of(cu, gui), bd = cu_band_of(cu, wdi);
  int rc = moe_band_ok(cu, n, bgu, H);
  if (!rc) rc = moe_band_ok(cu, n, bd, I);
  if (rc) return rc;
  if (H > CU_SHARED_FLOATS(cu) || K * I > CU_SHARED_FLOATS(cu))
    return cu_fail(cu, "%s: hidden %lld or top-k x intermediate %lld exceeds the %d "
                   "floats an expert block stages", n->name, H, K * I, CU_SHARED_FLOATS(cu));
  IR_ASSERT(n->aux >= 0); /* the planner's temporary (cg_c_temp_bytes): the pairs' intermediates */
  char act[64], gx[32], gy[64], rt[48];
  snprintf(act, sizeof act, "(float *)(X + %lld)", (long long)n->aux);
  const char *T = rows(n);
  const long long ldr = ld(cg, ri);

  /* 1: each (token, rank) pair's silu(gate) * up, I rows */
  cu_kernel_begin(cu);
  cu->suffix = "_gate_up";
  cu_karg(cu, "const float *", "x", ref(cg, xi));
  cu_karg(cu, "const float *", "route", ref(cg, ri));
  cu_karg(cu, "const unsigned char *$restrict ", "w", cg->var[gui]);
  cu_karg(cu, "float *", "act", act);
  KB("  enum { E = %d, K = %d, I = %lld, H = %lld }; /* experts, top-k, intermediate, hidden */\n", E, K, I, H);
  KB("  $shared16 float xs[H]; /* the pair's token */\n");
  KB("  const int pr = $bid_y, t = pr / K, j = pr - t * K;\n");
  KB("  const float ef = route[($i64)t * %lld + K + j];\n", ldr);
  KB("  const int e = (int)ef;\n");
  KB("  if (!(ef >= 0.0f && ef < (float)E) || (float)e != ef) { /* names no expert */\n");
  KB("    if ($tid == 0 && $bid_x == 0) sc_fail(io, SC_KID, 1, (int)ef);\n    return;\n  }\n");
  KB("  for (int c = $tid; c < H; c += 256) xs[c] = x[($i64)t * %lld + c];\n", ld(cg, xi));
  KB("  $barrier;\n");
  KB("  const int lane = $tid & 31, row = $bid_x * 8 + ($tid >> 5);\n");
  KB("  if (row >= I) return;\n");
  KB("  const $dev %s *w0 = (const $dev %s *)%s + (($i64)e * %lld + row) * %lld$ll; /* expert e's gate row */\n",
     band_etype(bgu), band_etype(bgu), cu_wptr(cu, gui, "w"), 2 * I, band_row_units(bgu, H));
  KB("  const $dev %s *w1 = w0 + %lld$ll; /* its up row */\n", band_etype(bgu), I * band_row_units(bgu, H));
  KB("  float a0[1] = {0.0f}, a1[1] = {0.0f};\n");
  cu_dot_row(cu, bgu, H, 2, 1, 0);
  KB("  const float gv = sc_warp_sum(a0[0]), uv = sc_warp_sum(a1[0]);\n");
  KB("  if (lane == 0) act[($i64)pr * I + row] = (gv / (1.0f + $expf(-gv))) * uv;\n");
  snprintf(gx, sizeof gx, "%lld", (I + 7) / 8);
  if (IR_ROWS_ON_T(n->rows)) snprintf(gy, sizeof gy, "%s * %d", T, K);
  else snprintf(gy, sizeof gy, "%lld", (long long)n->rows * K);
  if ((rc = cu_kernel_end(cu, i, 256, gx, gy))) return rc;

  /* 2: each token's weighted sum over its ranks of the down rows, plus
   * the gated shared expert */
  cu_kernel_begin(cu);
  cu_karg(cu, "const float *", "act", act);
  cu_karg(cu, "const float *", "route", ref(cg, ri));
  cu_karg(cu, "const unsigned char *$restrict ", "w", cg->var[wdi]);
  if (shared) {
    cu_karg(cu, "const float *", "sh", ref(cg, SRC(n, MOE_COMBINE, SH)));
    cu_karg(cu, "const float *", "sg", ref(cg, SRC(n, MOE_COMBINE, SG)));
  }
  cu_karg(cu, "float *", "y", cg->var[i]);
  KB("  enum { E = %d, K = %d, I = %lld, H = %lld }; /* experts, top-k, intermediate, hidden */\n", E, K, I, H);
  KB("  $shared16 float as[K * I]; /* the token's pairs' intermediates */\n");
  KB("  $shared float rw[K];\n  $shared int re[K]; /* their weights and experts */\n");
  KB("  const int t = $bid_y;\n");
  KB("  for (int c = $tid; c < K * I; c += 256) as[c] = act[($i64)t * K * I + c];\n");
  KB("  if ($tid < K) {\n");
  KB("    const float ef = route[($i64)t * %lld + K + $tid];\n", ldr);
  KB("    rw[$tid] = route[($i64)t * %lld + $tid];\n", ldr);
  KB("    re[$tid] = ef >= 0.0f && ef < (float)E && (float)(int)ef == ef ? (int)ef : -1; /* -1: _gate_up failed */\n");
  KB("  }\n  $barrier;\n");
  KB("  for (int j = 0; j < K; j++)\n    if (re[j] < 0) return;\n");
  KB("  const int lane = $tid & 31, row = $bid_x * 8 + ($tid >> 5);\n");
  KB("  if (row >= H) return;\n");
  KB("  float acc = 0.0f;\n");
  KB("  for (int j = 0; j < K; j++) { /* rank order */\n");
  size_t mark = cu->body.len;
  KB("  const $tg float *xs = as + j * I;\n");
  KB("  const $dev %s *w0 = (const $dev %s *)%s + (($i64)re[j] * H + row) * %lld$ll; /* expert re[j]'s down row */\n",
     band_etype(bd), band_etype(bd), cu_wptr(cu, wdi, "w"), band_row_units(bd, I));
  KB("  float a0[1] = {0.0f};\n");
  cu_dot_row(cu, bd, I, 1, 1, 0);
  KB("  acc += rw[j] * sc_warp_sum(a0[0]);\n");
  cu_indent_from(&cu->body, mark);
  KB("  }\n");
  if (shared)
    KB("  acc += (1.0f / (1.0f + $expf(-sg[($i64)t * %lld]))) * sh[($i64)t * %lld + row];\n",
       ld(cg, SRC(n, MOE_COMBINE, SG)), ld(cg, SRC(n, MOE_COMBINE, SH)));
  KB("  if (lane == 0) y[($i64)t * %lld + row] = acc;\n", (long long)n->ld);
  snprintf(gx, sizeof gx, "%lld", (H + 7) / 8);
  return cu_kernel_end(cu, i, 256, gx, ir_rows_text(n->rows, rt, sizeof rt));
}
