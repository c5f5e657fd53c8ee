/*
 * kernels_moe.c — the kernels behind the mixture-of-experts ops of
 * ops.def: TOPK_ROUTE and MOE_COMBINE (sc_abi.h has their contracts).
 *
 * topk_route is transformers' router (softmax in f32, torch.topk, the
 * optional renormalisation) one token at a time.
 *
 * moe works on the (token, rank) pairs of a call, T*k of them.  It counts
 * them per expert, gives each a slot in expert order (tokens in order
 * within an expert) and copies each token's input to its slots; then the
 * gate/up products of every expert that was chosen run as one batch of
 * SwiGLU GEMMs over its slots (sc_linear_batch: one pool job, every
 * expert's row blocks shared out over the threads), and the down products
 * as a second batch.  An expert nobody chose is never read; a chosen one
 * is read once per call, however many tokens chose it.  Last, each
 * token's output is the sum over its ranks, in rank order, of weight
 * times its slot's row, plus the gated shared expert.  Every slot's row
 * has the bits of a GEMV of that expert on that token alone (the linear
 * kernels' contract), so neither the tokens sharing a call nor the thread
 * count changes a bit: prefill and decode agree exactly.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* ---- TOPK_ROUTE ---------------------------------------------------------- */

static void k_topk_route(void *ctx, const float *logits, int ldl, float *y, int ldy, int T, int E, int k,
                         int renorm) {
  if (T < 1 || E < 1 || k < 1 || k > E) {
    sc_kernel_error(ctx, "topk_route: bad shape (tokens, experts, or k outside 1..experts)", k);
    return;
  }
  void *owned = NULL;
  float *p = sc_kernel_scratch(ctx, (size_t)E * (sizeof *p + 1), &owned); /* [E] probabilities, [E] taken */
  if (!p) {
    sc_kernel_error(ctx, "topk_route: out of memory", E);
    return;
  }
  unsigned char *taken = (unsigned char *)(p + E);
  for (int t = 0; t < T; t++) {
    const float *l = logits + (size_t)t * ldl;
    float *yt = y + (size_t)t * ldy;
    float m = l[0];
    for (int e = 1; e < E; e++)
      if (l[e] > m) m = l[e];
    float sum = 0.0f;
    for (int e = 0; e < E; e++) sum += p[e] = expf(l[e] - m);
    for (int e = 0; e < E; e++) p[e] /= sum, taken[e] = 0;
    /* k passes: the largest p not taken yet, the lower index on ties (the
     * probabilities are compared, as torch.topk over the softmax does) */
    float total = 0.0f;
    for (int j = 0; j < k; j++) {
      int best = -1;
      for (int e = 0; e < E; e++)
        if (!taken[e] && (best < 0 || p[e] > p[best])) best = e;
      taken[best] = 1;
      yt[j] = p[best];
      yt[k + j] = (float)best;
      total += p[best];
    }
    if (renorm)
      for (int j = 0; j < k; j++) yt[j] /= total;
  }
  free(owned);
}

/* ---- MOE_COMBINE --------------------------------------------------------- */

#define MOE_STACK_TASKS 64

void sc_moe_impl(const sc_kern_ops *ops, void *ctx, int wt_gu, const void *wgu, int wt_d, const void *wd,
                 const float *x, int ldx, const float *route, int ldr, const float *sh, int lds, const float *sg,
                 int ldg, float *y, int ldy, void *tmp, int T, int E, int k, int I, int H) {
  if (T < 1 || E < 1 || k < 1 || k > E || I < 1 || H < 1 || !tmp || !sc_band(wt_gu) || !sc_band(wt_d)) {
    sc_kernel_error(ctx, "moe: bad shape (tokens, experts, k, intermediate, hidden), band or no temporaries", k);
    return;
  }
  const int P = T * k; /* (token, rank) pairs */
  float *xg = tmp;                              /* [P, H] each slot's input */
  float *act = xg + (size_t)P * H;              /* [P, I] silu(gate) * up */
  float *out = act + (size_t)P * I;             /* [P, H] the expert's output */
  int *slot = (int *)(out + (size_t)P * H);     /* [P] pair t*k + j -> its slot */
  int *first = slot + P;                        /* [E + 1] an expert's first slot */
  memset(first, 0, (size_t)(E + 1) * sizeof *first);
  for (int p = 0; p < P; p++) {
    const float ef = route[(size_t)(p / k) * ldr + k + p % k];
    const int e = (int)ef;
    if (!(ef >= 0.0f && ef < (float)E) || (float)e != ef) {
      sc_kernel_error(ctx, "moe: a route names no expert (not an integer in [0, experts))", (int)ef);
      return;
    }
    first[e + 1]++;
  }
  for (int e = 0; e < E; e++) first[e + 1] += first[e];
  /* slots in expert order, tokens in order within an expert; first[]
   * advances as slots are handed out, then is shifted back */
  for (int p = 0; p < P; p++) {
    const int e = (int)route[(size_t)(p / k) * ldr + k + p % k];
    slot[p] = first[e]++;
    memcpy(xg + (size_t)slot[p] * H, x + (size_t)(p / k) * ldx, (size_t)H * sizeof *xg);
  }
  for (int e = E; e > 0; e--) first[e] = first[e - 1];
  first[0] = 0;
  int used = 0;
  for (int e = 0; e < E; e++) used += first[e + 1] > first[e];
  sc_lin_task stack[2 * MOE_STACK_TASKS], *tasks = stack;
  if (used > MOE_STACK_TASKS && !(tasks = malloc((size_t)2 * used * sizeof *tasks))) {
    sc_kernel_error(ctx, "moe: out of memory for the expert list", used);
    return;
  }
  const size_t rb_gu = sc_band_row_bytes(wt_gu, H), rb_d = sc_band_row_bytes(wt_d, I);
  for (int e = 0, i = 0; e < E; e++) {
    const int n = first[e + 1] - first[e], s0 = first[e];
    if (!n) continue;
    tasks[i] = (sc_lin_task){.wtype = wt_gu, .w = (const unsigned char *)wgu + (size_t)e * 2 * I * rb_gu,
                             .x = xg + (size_t)s0 * H, .y = act + (size_t)s0 * I, .ldx = H, .ldy = I, .T = n,
                             .rows = I, .cols = H, .swiglu = 1};
    tasks[used + i] = (sc_lin_task){.wtype = wt_d, .w = (const unsigned char *)wd + (size_t)e * H * rb_d,
                                    .x = act + (size_t)s0 * I, .y = out + (size_t)s0 * H, .ldx = I, .ldy = H,
                                    .T = n, .rows = H, .cols = I};
    i++;
  }
  const int rc = sc_linear_batch(ops, ctx, tasks, used, "moe: experts' gate/up") ||
                 sc_linear_batch(ops, ctx, tasks + used, used, "moe: experts' down");
  if (tasks != stack) free(tasks);
  if (rc) return;
  for (int t = 0; t < T; t++) {
    float *yt = y + (size_t)t * ldy;
    for (int c = 0; c < H; c++) yt[c] = 0.0f;
    for (int j = 0; j < k; j++) {
      const float w = route[(size_t)t * ldr + j];
      const float *o = out + (size_t)slot[t * k + j] * H;
      for (int c = 0; c < H; c++) yt[c] += w * o[c];
    }
    if (sh) {
      const float gv = sg[(size_t)t * ldg], gate = 1.0f / (1.0f + expf(-gv));
      const float *s = sh + (size_t)t * lds;
      for (int c = 0; c < H; c++) yt[c] += gate * s[c];
    }
  }
}

/* ---- the table ---------------------------------------------------------- */

void sc_kernels_moe_fill(sc_kernels *K) { K->topk_route = k_topk_route; }
