/*
 * cg_cuda.c — the CUDA target, and the Metal target through the same code
 * with the Metal dialect (cg_emit_metal: model.metal, the same host C; no
 * device sampler there).
 *
 * From the same planned Module as the C target, two texts:
 *
 *   model.cu  one kernel (SC_KERNEL) per live node that
 *             computes, named after its graph and node
 *             (`decode_layer0_qkv`), every shape a literal.  Nodes whose
 *             kernels would be identical (the same op and shapes in every
 *             layer) share the first one's kernel: layers differ only in
 *             the pointers they are passed.
 *   model.c   host C, compiled by the usual toolchain into model.so: one
 *             small launcher per kernel (grid, block, arguments) and one
 *             entry function per graph that checks its call like the C
 *             target and launches the kernels in order through K->launch.
 *             W, S, X and io's pointers are device addresses there: host
 *             code only offsets them.
 *
 * Kernel text is written over a dialect (cg_dialect.h): `$tid`,
 * `$barrier`, `$shared`, `$shfl(v, j)`, ... are the dialect's words,
 * spelled by dialect_cuda.c when a kernel is finished; the helpers every
 * kernel uses are the dialect's prelude.
 *
 * Kernels read the call's position and step from the session's
 * sc_device_io (sc_abi.h), never from their arguments, so a recorded
 * sequence of launches (a CUDA graph) is valid for every position; the
 * arguments depend only on the graph and its token count T.
 *
 * The kernel of each op is cg_kernels.c's; this file shares identical
 * kernels, prints their launchers, the entry functions, the sampler and
 * the artifact's device code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cg_kernels.h"
#include "sc_sample_core_text.h"

void cu_karg(Cu *cu, const char *type, const char *name, const char *host) {
  CuArg *a = &cu->args[cu->n_args++];
  a->type = type;
  snprintf(a->name, sizeof a->name, "%s", name);
  snprintf(a->host, sizeof a->host, "%s", host);
}

void cu_kernel_begin(Cu *cu) {
  cu->n_args = 0;
  cu->suffix = "";
  cu->body.len = 0;
  if (cu->body.s) cu->body.s[0] = 0;
}

/* The token count of graph g as host C text: "T" or a literal. */
static const char *g_tokens(const Graph *g, char *buf, size_t size) {
  if (!g->exact) return "T";
  snprintf(buf, size, "%d", g->max_tokens);
  return buf;
}

/* Finish the kernel of node i: share an identical earlier kernel or add
 * this one (device source + host launcher), then call it from the entry.
 * gx, gy: host C expressions of the grid (may use T). */
int cu_kernel_end(Cu *cu, int i, int threads, const char *gx, const char *gy) {
  Cg *cg = &cu->cg;
  const IrNode *n = node(cg, i);
  StrBuf text, key;
  sb_init(&text);
  sb_init(&key);
  cu->d->param(&text, 0, "sc_device_io *", "io");
  for (int a = 0; a < cu->n_args; a++) cu->d->param(&text, a + 1, cu->args[a].type, cu->args[a].name);
  cu->d->param(&text, cu->n_args + 1, "int ", "T");
  if (cu->d->params_end) sb_puts(&text, cu->d->params_end);
  sb_printf(&text, ") {\n%s}\n", cu->body.s ? cu->body.s : "");
  const int failed = text.failed;
  if (!failed) cg_dialect_expand(cu->d, &key, text.s, text.len);
  sb_free(&text);
  size_t sig_len = key.len;
  sb_printf(&key, "@%d %s %s", threads, gx, gy);
  if (failed || key.failed || cu->body.failed) {
    sb_free(&key);
    return sc_fail(cg->err, SC_ERUNTIME, "out of memory while generating CUDA code");
  }
  int k = 0;
  while (k < cu->n_k && strcmp(cu->k[k].key, key.s)) k++;
  if (k == cu->n_k) {
    if (cu->n_k == cu->cap_k) {
      int cap = cu->cap_k ? 2 * cu->cap_k : 64;
      CuKernel *nk = realloc(cu->k, (size_t)cap * sizeof *nk);
      if (!nk) {
        sb_free(&key);
        return sc_fail(cg->err, SC_ERUNTIME, "out of memory");
      }
      cu->k = nk;
      cu->cap_k = cap;
    }
    CuKernel *kk = &cu->k[cu->n_k++];
    snprintf(kk->name, sizeof kk->name, "%s_%s%s", cg->g->name, cg->var[i], cu->suffix);
    kk->key = key.s;
    key.s = NULL;
    /* device */
    sb_printf(cu->cu, "\n/* %s: %s [%s, %lld] */\n#define SC_KID %d\n", kk->name, ir_op_names[n->op],
              rows(n), (long long)n->cols, k);
    cu->d->kernel_head(cu->cu, kk->name, threads);
    sb_printf(cu->cu, "%.*s", (int)sig_len, kk->key);
    sb_printf(cu->cu, "#undef SC_KID\n");
    /* host launcher */
    StrBuf *l = &cu->launch;
    sb_printf(l, "\n/* kernel %d: %s */\nstatic int launch_%s(const sc_kernels *K", k, kk->name, kk->name);
    for (int a = 0; a < cu->n_args; a++) sb_printf(l, ", const void *%s", cu->args[a].name);
    sb_printf(l, ", int T) {\n  void *args[] = {(void *)&K->device_io");
    for (int a = 0; a < cu->n_args; a++) sb_printf(l, ", (void *)&%s", cu->args[a].name);
    sb_printf(l, ", (void *)&T};\n");
    sb_printf(l, "  return K->launch(K->ctx, %d, %s, %s, 1, %d, 1, 1, 0, args);\n}\n", k, gx, gy, threads);
  }
  sb_free(&key);
  char tb[16];
  OUT("  if (launch_%s(K", cu->k[k].name);
  for (int a = 0; a < cu->n_args; a++) OUT(", %s", cu->args[a].host);
  OUT(", %s)) return 1;\n", g_tokens(cg->g, tb, sizeof tb));
  return SC_OK;
}

static int emit_graph(Cu *cu, const Graph *g) {
  Cg *cg = &cu->cg;
  if (!(cg->var = calloc((size_t)g->n_nodes, sizeof *cg->var)))
    return sc_fail(cg->err, SC_ERUNTIME, "out of memory");
  cg_name_values(cg, g);
  cg_entry_prologue(cg, g, 0, " (device)", " (void)pos;");
  int rc = SC_OK;
  for (int i = 0; i < g->n_nodes && rc == SC_OK; i++) {
    if (g->nodes[i].dead) continue;
    comment_node(cg, i);
    rc = cu_emit_node(cu, i);
  }
  OUT("  return 0;\n}\n");
  free(cg->var);
  cg->var = NULL;
  return rc;
}

/* The sampler every artifact carries (sc_abi.h, SC_SAMPLE_KERNEL): the
 * pipeline of runtime/sample.c over the arithmetic it shares with it,
 * runtime/sc_sample_core.h, printed before it (sc_penalized, sc_tempered,
 * sc_ranks_before, the generator, the weights and the sums).  Suppression
 * and the repetition penalty come from the sampler's mask (bit 1:
 * suppressed, bit 0: seen, set for every id it draws, so the history of a
 * generation stays on the device) and its `ban` id.  One block of 1024
 * threads: a strided pass (16-byte loads, so that one SM keeps enough of a
 * 150k-entry vocabulary in flight) finds the first non-finite logit and
 * the argmax of the penalised scores (lowest index on ties), reduced
 * through shared memory; a draw sorts the scaled scores best first
 * (bitonic, by sc_ranks_before) when top-k or top-p needs an order, then
 * thread 0 makes the draw with sample.c's own functions, so a seed gives
 * the draws the CPU gives, up to the last bit of exp(). */
static const char cu_sampler[] =
    "/* logit v of id i as sample.c scores it: suppressed (mask bit 1, or the\n"
    " * ban id) -inf, seen (bit 0) penalised */\n"
    "SC_DEVICE float sc_score(float v, int i, const unsigned char *mask, float pen, int ban) {\n"
    "  const unsigned m = mask ? mask[i] : 0u;\n"
    "  if (i == ban || (m & 2u)) return -SC_INF;\n"
    "  if ((m & 1u) && pen != 1.0f) return sc_penalized(v, pen);\n"
    "  return v;\n"
    "}\n"
    "SC_DEVICE void sc_arg_step(float v, int i, const unsigned char *mask, float pen, int ban, float *best, int *bi,\n"
    "                           int *bad) {\n"
    "  if (!isfinite(v)) *bad = *bad < i ? *bad : i;\n"
    "  else if ((v = sc_score(v, i, mask, pen, ban)) > *best) *best = v, *bi = i;\n"
    "}\n"
    "/* the draw: token and, with a mask, the id marked seen */\n"
    "SC_DEVICE void sc_take(const sc_device_sampler *sp, int *token, int id) {\n"
    "  *token = id;\n"
    "  if (sp->mask) ((unsigned char *)sp->mask)[id] |= 1u;\n"
    "}\n"
    "SC_KERNEL(1024) sc_sample(sc_device_io *io, const float *logits, sc_device_sampler *sp, int *token, int n) {\n"
    "  enum { MAX = %d, NT = 1024 };\n"
    "  $shared float key[MAX];\n"
    "  $shared int kid[MAX];\n"
    "  $shared float rv[NT];\n"
    "  $shared int ri[NT], rb[NT];\n"
    "  $shared double zs;\n"
    "  const int tid = $tid;\n"
    "  const unsigned char *mask = (const unsigned char *)sp->mask;\n"
    "  const float pen = sp->penalty;\n"
    "  const int ban = sp->ban;\n"
    "  float best = -SC_INF;\n"
    "  int bi = n, bad = n;\n"
    "  /* each thread's indices ascend: its first maximum, its first bad one */\n"
    "  const int n4 = n %% 4 ? 0 : n / 4;\n"
    "#pragma unroll 4\n"
    "  for (int i = tid; i < n4; i += NT) {\n"
    "    const float4 v = ((const float4 *)logits)[i];\n"
    "    sc_arg_step(v.x, 4 * i, mask, pen, ban, &best, &bi, &bad);\n"
    "    sc_arg_step(v.y, 4 * i + 1, mask, pen, ban, &best, &bi, &bad);\n"
    "    sc_arg_step(v.z, 4 * i + 2, mask, pen, ban, &best, &bi, &bad);\n"
    "    sc_arg_step(v.w, 4 * i + 3, mask, pen, ban, &best, &bi, &bad);\n"
    "  }\n"
    "  for (int i = 4 * n4 + tid; i < n; i += NT) sc_arg_step(logits[i], i, mask, pen, ban, &best, &bi, &bad);\n"
    "  rv[tid] = best;\n  ri[tid] = bi;\n  rb[tid] = bad;\n"
    "  $barrier;\n"
    "  for (int s = NT / 2; s > 0; s >>= 1) {\n"
    "    if (tid < s) {\n"
    "      if (sc_ranks_before(rv[tid + s], ri[tid + s], rv[tid], ri[tid])) rv[tid] = rv[tid + s], ri[tid] = ri[tid + s];\n"
    "      if (rb[tid + s] < rb[tid]) rb[tid] = rb[tid + s];\n"
    "    }\n"
    "    $barrier;\n"
    "  }\n"
    "  const int top_id = ri[0], first_bad = rb[0];\n"
    "  const float temp = sp->temperature;\n"
    "  if (first_bad < n || top_id >= n || (!sp->greedy && temp > 0.0f && n > MAX)) {\n"
    "    if (tid == 0) {\n"
    "      if (first_bad < n) sc_fail(io, SC_KID, isnan(logits[first_bad]) ? 3 : 4, first_bad);\n"
    "      else if (top_id >= n) sc_fail(io, SC_KID, 6, n);\n"
    "      else sc_fail(io, SC_KID, 5, n);\n"
    "      *token = -1;\n"
    "    }\n"
    "    return;\n"
    "  }\n"
    "  const float top = sc_tempered(sc_score(logits[top_id], top_id, mask, pen, ban), temp);\n"
    "  if (sp->greedy || !(temp > 0.0f) || isinf(top)) {\n"
    "    if (tid == 0) sc_take(sp, token, top_id);\n"
    "    return;\n"
    "  }\n"
    "  /* the candidates: every id not suppressed, scores scaled by the\n"
    "   * temperature, in id order; m of them (for top-k) */\n"
    "  int N2 = 2, m = 0;\n"
    "  while (N2 < n) N2 <<= 1;\n"
    "  $barrier; /* everyone has read ri[0] */\n"
    "  for (int i = tid; i < N2; i += NT) {\n"
    "    key[i] = i < n ? sc_tempered(sc_score(logits[i], i, mask, pen, ban), temp) : -SC_INF;\n"
    "    kid[i] = i; /* padding: ids >= n rank after every real id */\n"
    "    m += key[i] != -SC_INF;\n"
    "  }\n"
    "  ri[tid] = m;\n"
    "  $barrier;\n"
    "  for (int s = NT / 2; s > 0; s >>= 1) {\n"
    "    if (tid < s) ri[tid] += ri[tid + s];\n"
    "    $barrier;\n"
    "  }\n"
    "  m = ri[0];\n"
    "  const int k = sp->top_k, topk = k > 0 && k < m;\n"
    "  const float top_p = sp->top_p;\n"
    "  const sc_cands c = {key, 0, 0, top}; /* key[i] is candidate i's score; weights computed as needed */\n"
    "  if (!topk && top_p < 1.0f && tid == 0) zs = sc_cand_sum(&c, n); /* top-p's total, in id order */\n"
    "  $barrier; /* the sort below moves the keys thread 0 sums */\n"
    "  if (topk || top_p < 1.0f) { /* best first */\n"
    "    for (int size = 2; size <= N2; size <<= 1)\n"
    "      for (int stride = size >> 1; stride > 0; stride >>= 1) {\n"
    "        for (int t = tid; t < N2 / 2; t += NT) {\n"
    "          const int a = 2 * t - (t & (stride - 1)), b = a + stride;\n"
    "          if ((a & size) == 0 ? sc_ranks_before(key[b], kid[b], key[a], kid[a])\n"
    "                              : sc_ranks_before(key[a], kid[a], key[b], kid[b])) {\n"
    "            const float kv = key[a];\n"
    "            const int iv = kid[a];\n"
    "            key[a] = key[b], kid[a] = kid[b];\n"
    "            key[b] = kv, kid[b] = iv;\n"
    "          }\n"
    "        }\n"
    "        $barrier;\n"
    "      }\n"
    "  }\n"
    "  if (tid != 0) return;\n"
    "  int kept = topk ? k : n;\n"
    "  if (top_p < 1.0f) { /* the shortest best-first prefix reaching top_p */\n"
    "    const int kk = sc_top_p_prefix(&c, kept, topk ? sc_cand_sum(&c, kept) : zs, top_p);\n"
    "    if (kk) kept = kk;\n"
    "  }\n"
    "  sc_take(sp, token, kid[sc_draw(&c, kept, sp->rng)]);\n"
    "}\n";

/* Append the sampler to the device source and the kernel list. */
static int emit_sampler(Cu *cu) {
  if (cu->n_k == cu->cap_k) {
    CuKernel *nk = realloc(cu->k, (size_t)(cu->cap_k + 1) * sizeof *nk);
    if (!nk) return sc_fail(cu->cg.err, SC_ERUNTIME, "out of memory");
    cu->k = nk;
    cu->cap_k++;
  }
  CuKernel *kk = &cu->k[cu->n_k];
  snprintf(kk->name, sizeof kk->name, "%s", SC_SAMPLE_KERNEL);
  if (!(kk->key = malloc(sizeof SC_SAMPLE_KERNEL))) return sc_fail(cu->cg.err, SC_ERUNTIME, "out of memory");
  memcpy(kk->key, SC_SAMPLE_KERNEL, sizeof SC_SAMPLE_KERNEL);
  sb_printf(cu->cu, "\n/* The arithmetic of a draw, shared with the host sampler: runtime/sc_sample_core.h */\n"
            "#define SC_SAMPLE_FN SC_DEVICE\n#define SC_SAMPLE_INF SC_INF\n");
  sb_puts(cu->cu, (const char *)sc_sample_core_text);
  sb_printf(cu->cu, "\n/* %s: one token from device logits (sc_abi.h) */\n#define SC_KID %d\n", kk->name, cu->n_k);
  StrBuf text;
  sb_init(&text);
  sb_printf(&text, cu_sampler, SC_SAMPLE_MAX);
  if (!text.failed) cg_dialect_expand(cu->d, cu->cu, text.s, text.len);
  else cu->cu->failed = 1;
  sb_free(&text);
  sb_printf(cu->cu, "#undef SC_KID\n");
  cu->n_k++;
  return SC_OK;
}

/* The device source of m in dialect d (title: the language's name in the
 * generated comments) and the host C. */
static int emit_gpu(const Module *m, const CgInfo *info, const CgDialect *d, IrTarget ir, const char *title,
                    StrBuf *cu_out, StrBuf *host, sc_error *err) {
  if (ir_check_target(m, ir, err)) return err->code;
  Cu cus;
  memset(&cus, 0, sizeof cus);
  Cu *cu = &cus;
  cu->cu = cu_out;
  cu->d = d;
  IR_ASSERT(cu->d->warp == 32); /* cg_kernels.c's lane arithmetic (& 31, >> 5) */
  sb_init(&cu->launch);
  sb_init(&cu->body);
  StrBuf entries;
  sb_init(&entries);
  cu->cg.m = m;
  cu->cg.o = &entries;
  cu->cg.err = err;
  cu->check_numerics = info->check_numerics;

  sb_printf(cu_out, "/*\n * Generated by speechc %s for %s; do not edit.\n", SPEECHC_VERSION, title);
  sb_printf(cu_out, " * model: %s (family %s), config hash %016llx\n", m->model_type, m->family,
            (unsigned long long)m->config_hash);
  sb_printf(cu_out, " * weights: %s, %s; max context %d\n", info->band, info->fused ? "fused" : "unfused",
            m->max_context);
  if (info->check_numerics) sb_printf(cu_out, " * --check-numerics: outputs are checked for NaN and inf\n");
  sb_printf(cu_out, " */\n");
  sb_puts(cu_out, cus.d->prelude);

  int rc = SC_OK;
  for (int gi = 0; gi < m->n_graphs && rc == SC_OK; gi++) rc = emit_graph(cu, &m->graphs[gi]);
  if (rc == SC_OK && d->sampler) rc = emit_sampler(cu);

  if (rc == SC_OK) {
    Cg *cg = &cu->cg;
    cg->o = host;
    OUT("/*\n * Generated by speechc %s for %s (host side); do not edit.\n", SPEECHC_VERSION, title);
    OUT(" * model: %s (family %s), config hash %016llx\n", m->model_type, m->family,
        (unsigned long long)m->config_hash);
    OUT(" * weights: %s, %s; max context %d; %d kernels\n", info->band, info->fused ? "fused" : "unfused",
        m->max_context, cu->n_k);
    OUT(" * entry points:");
    for (int gi = 0; gi < m->n_graphs; gi++) OUT(" %s", m->graphs[gi].name);
    OUT("\n * W, S, X and io's pointers are device addresses: this code only offsets\n"
        " * them and launches the kernels of %s through K->launch.\n */\n", d->source_name);
    OUT("#include \"sc_abi.h\"\n\n");
    cg_emit_layout(cg);
    OUT("\nstatic const char *const kernel_names[] = {\n");
    for (int k = 0; k < cu->n_k; k++) {
      OUT("  ");
      sb_cquote(host, cu->k[k].name);
      OUT(",\n");
    }
    OUT("};\n");
    sb_puts(host, cu->launch.s ? cu->launch.s : "");
    sb_puts(host, entries.s ? entries.s : "");
    if (host->failed || cu_out->failed || cu->launch.failed || entries.failed)
      rc = sc_fail(err, SC_ERUNTIME, "out of memory while generating %s code", title);
  }
  for (int k = 0; k < cu->n_k; k++) free(cu->k[k].key);
  free(cu->k);
  sb_free(&cu->launch);
  sb_free(&cu->body);
  sb_free(&entries);
  return rc;
}

int cg_emit_cuda(const Module *m, const CgInfo *info, StrBuf *cu, StrBuf *host, sc_error *err) {
  return emit_gpu(m, info, &cg_dialect_cuda, IR_TARGET_CUDA, "CUDA", cu, host, err);
}

int cg_emit_metal(const Module *m, const CgInfo *info, StrBuf *msl, StrBuf *host, sc_error *err) {
  return emit_gpu(m, info, &cg_dialect_metal, IR_TARGET_METAL, "Metal", msl, host, err);
}

/* A text as string-literal lines: one literal per source line. */
static void emit_text(StrBuf *o, const char *name, const char *s, size_t n) {
  sb_printf(o, "\nstatic const char %s[] =\n", name);
  size_t i = 0;
  if (!n) sb_puts(o, "  \"\"\n");
  while (i < n) {
    char line[4096 + 16];
    size_t k = 0;
    line[k++] = ' ';
    line[k++] = ' ';
    line[k++] = '"';
    while (i < n && k < sizeof line - 8) {
      unsigned char c = (unsigned char)s[i++];
      if (c == '\n') {
        line[k++] = '\\';
        line[k++] = 'n';
        break;
      }
      if (c == '"' || c == '\\') {
        line[k++] = '\\';
        line[k++] = (char)c;
      } else if (c < 32 || c >= 127 || c == '?') {
        /* '?' too: no trigraphs */
        k += (size_t)snprintf(line + k, 5, "\\%03o", c);
      } else {
        line[k++] = (char)c;
      }
    }
    line[k++] = '"';
    line[k++] = '\n';
    line[k] = 0;
    sb_puts(o, line);
  }
  sb_puts(o, "  ;\n");
}

static int emit_tail(const Module *m, const CgInfo *info, const CgDevice *dev, const char *target, StrBuf *host,
                     sc_error *err) {
  Cu cus;
  memset(&cus, 0, sizeof cus);
  Cg *cg = &cus.cg;
  cg->m = m;
  cg->o = host;
  cg->err = err;
  emit_text(host, "device_code", dev->code, dev->code_bytes);
  emit_text(host, "device_source", dev->source, strlen(dev->source));
  StrBuf extra;
  sb_init(&extra);
  sb_printf(&extra, "  device_code, %lluULL, device_source, ", (unsigned long long)dev->code_bytes);
  sb_cquote(&extra, dev->arch);
  sb_puts(&extra, ",\n  (int)(sizeof kernel_names / sizeof kernel_names[0]), kernel_names,\n");
  if (extra.failed) host->failed = 1;
  cg_emit_descriptor_ext(cg, info, target, extra.s ? extra.s : "");
  sb_free(&extra);
  if (host->failed) return sc_fail(err, SC_ERUNTIME, "out of memory while generating code");
  return SC_OK;
}

int cg_emit_cuda_tail(const Module *m, const CgInfo *info, const CgDevice *dev, StrBuf *host, sc_error *err) {
  return emit_tail(m, info, dev, "cuda", host, err);
}

int cg_emit_metal_tail(const Module *m, const CgInfo *info, const CgDevice *dev, StrBuf *host, sc_error *err) {
  return emit_tail(m, info, dev, "metal", host, err);
}
