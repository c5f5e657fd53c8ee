/*
 * test_mimi_ir.c — the IR pieces Mimi added, compiled by libtcc and gcc
 * and run against double-precision references of the package's modules:
 *   - ELU (torch.nn.ELU(alpha)): y = x > 0 ? x : alpha * expm1(x), within
 *     2e-7 (absolute, plus 2e-7 relative) over inputs from -30 to 30, around
 *     0 on both sides; the verifier refuses a non-finite alpha;
 *   - ATTENTION with p.align = 2: a query at position p attends over the
 *     positions max(0, last - window + 1)..p, last = the end of p's group
 *     of 2 (moshi's RingKVCache of `window` rows fed two steps at a time),
 *     one call over 14 positions and the same positions fed 2, 4 and 6 at
 *     a time (io->pos advancing) give the reference; with align 1 the
 *     first row of a group would see one key more, which the reference
 *     here would catch; the verifier refuses a window shorter than a group;
 *   - Graph.pos_mul: a graph whose positions run at 2 per io->pos gives
 *     the same rows as position-by-position calls at 2 * pos.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cg.h"
#include "check.h"
#include "ir.h"
#include "kernels.h"
#include "passes.h"
#include "sc_abi_text.h"
#include "scratch.h"
#include "target.h"
#include "toolchain.h"

typedef const sc_model_desc *(*desc_fn)(void);

#define HD 4     /* one head of 4 */
#define WIN 3    /* attention window */
#define NPOS 14  /* positions in the attention test */
#define NE 64    /* ELU inputs per row */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((rng >> 40) * (1.0 / (1 << 23)) - 1.0);
}

typedef struct Built {
  Module m;
  void *dl;
  const sc_model_desc *d;
  unsigned char *S, *X;
} Built;

/* Plan, emit, compile and load m's graphs. */
static int compile(Built *b, const char *cc, const char *tag) {
  sc_error err = {0};
  const Target *cpu = target_find("cpu", &err);
  pass_mark_used(&b->m);
  pass_plan(&b->m, cpu);
  for (int gi = 0; gi < b->m.n_graphs; gi++)
    CHECK_MSG(ir_verify(&b->m, &b->m.graphs[gi], &err) == SC_OK, "%s", err.msg);
  StrBuf src;
  sb_init(&src);
  CgInfo info = {.weight_file = "m.weights", .band = "f32", .cpu_features = "", .target = cpu};
  CHECK_MSG(cg_emit_c(&b->m, &info, &src, &err) == SC_OK, "%s", err.msg);
  char c[64], so[64];
  snprintf(c, sizeof c, "%s_%s.c", tag, cc);
  snprintf(so, sizeof so, "%s_%s.so", tag, cc);
  write_text(P(c), src.s);
  write_text(P("sc_abi.h"), (const char *)sc_abi_text);
  sb_free(&src);
  if (tc_compile(cc, P(c), P(so), NULL, &err) != SC_OK) {
    CHECK_MSG(0, "%s: %s", cc, err.msg);
    return -1;
  }
  b->dl = dlopen(P(so), RTLD_NOW | RTLD_LOCAL);
  CHECK_MSG(b->dl, "%s", dlerror());
  if (!b->dl) return -1;
  b->d = ((desc_fn)dlsym(b->dl, SC_DESC_SYMBOL))();
  int64_t scratch = 0;
  for (int gi = 0; gi < b->m.n_graphs; gi++)
    if (b->m.graphs[gi].scratch_bytes > scratch) scratch = b->m.graphs[gi].scratch_bytes;
  b->S = calloc(1, (size_t)b->m.state_bytes + 64);
  b->X = aligned_alloc(64, ((size_t)scratch + 127) & ~(size_t)63);
  return 0;
}

static void unload(Built *b) {
  if (b->dl) dlclose(b->dl);
  free(b->S);
  free(b->X);
  ir_module_free(&b->m);
}

static void test_elu(const char *cc, sc_kernels *K, sc_kernel_ctx *kc) {
  Built b = {0};
  ir_module_init(&b.m);
  b.m.max_context = 64;
  Graph *g = ir_graph_new(&b.m, "audio", SC_IN_EMBEDS, 4);
  int x = ir_input_embeds(g, NE);
  ir_output(g, ir_elu(g, x, 0.7f, "elu"), OUT_LOGITS);
  if (compile(&b, cc, "elu")) return unload(&b);
  float in[4 * NE], out[4 * NE];
  for (int i = 0; i < 4 * NE; i++) in[i] = 30.0f * frand();
  for (int i = 0; i < 16; i++) in[i] = ldexpf(i % 2 ? 1.0f : -1.0f, -(i + 1)); /* around 0 */
  in[16] = 0.0f;
  in[17] = -0.0f;
  sc_io io = {.embeds = in, .n = 4, .out = out};
  CHECK(b.d->entries[0].fn(K, NULL, b.S, b.X, &io) == 0);
  CHECK_MSG(!kc->failed, "%s", kc->err);
  double worst = 0;
  for (int i = 0; i < 4 * NE; i++) {
    const double v = in[i], ref = v > 0 ? v : 0.7 * expm1(v);
    const double e = fabs(out[i] - ref) / (2e-7 + 2e-7 * fabs(ref));
    if (e > worst) worst = e;
  }
  printf("%s: ELU within %.2f of its bound\n", cc, worst);
  CHECK_MSG(worst <= 1.0, "%s: ELU off the double reference by %.2f x the bound", cc, worst);
  unload(&b);
}

/* Attention over positions grouped by `align`, double precision. */
static void attention_ref(const float *in, int align, double *out) {
  for (int p = 0; p < NPOS; p++) {
    const int last = p - p % align + align - 1;
    const int lo = last - WIN + 1 > 0 ? last - WIN + 1 : 0;
    const float *q = in + p * 3 * HD;
    double s[NPOS], mx = -1e300, sum = 0;
    for (int j = lo; j <= p; j++) {
      double d = 0;
      for (int c = 0; c < HD; c++) d += (double)q[c] * in[j * 3 * HD + HD + c];
      s[j] = d * 0.5;
      if (s[j] > mx) mx = s[j];
    }
    for (int j = lo; j <= p; j++) sum += s[j] = exp(s[j] - mx);
    for (int c = 0; c < HD; c++) {
      double y = 0;
      for (int j = lo; j <= p; j++) y += s[j] / sum * in[j * 3 * HD + 2 * HD + c];
      out[p * HD + c] = y;
    }
  }
}

/* Rows of 3*HD: q | k | v; the graph attends with window WIN, align 2;
 * pos_mul makes each call's io->pos count groups of 2. */
static void build_attention(Module *m, int pos_mul, int max_rows) {
  ir_module_init(m);
  m->max_context = 64;
  Graph *g = ir_graph_new(m, "audio", SC_IN_EMBEDS, max_rows);
  g->pos_mul = pos_mul;
  int x = ir_input_embeds(g, 3 * HD);
  int q = ir_slice(g, x, 0, HD, "q"), k = ir_slice(g, x, HD, HD, "k"), v = ir_slice(g, x, 2 * HD, HD, "v");
  const int ring = WIN + max_rows;
  int kc = ir_kv_store(g, ir_state(m, g, ir_state_add(m, "k_cache", ring, HD)), k, "k_store");
  int vc = ir_kv_store(g, ir_state(m, g, ir_state_add(m, "v_cache", ring, HD)), v, "v_store");
  int a = ir_attention(g, q, kc, vc, -1, 1, 1, HD, 0.5f, WIN, "attn");
  ir_attention_align(g, a, 2);
  ir_output(g, a, OUT_LOGITS);
}

static void test_attention(const char *cc, sc_kernels *K, sc_kernel_ctx *kc) {
  float in[NPOS * 3 * HD], out[NPOS * HD];
  for (int i = 0; i < NPOS * 3 * HD; i++) in[i] = 2.0f * frand();
  double ref[NPOS * HD], ungrouped[NPOS * HD];
  attention_ref(in, 2, ref);
  attention_ref(in, 1, ungrouped);
  double apart = 0;
  for (int i = 0; i < NPOS * HD; i++) apart = fmax(apart, fabs(ref[i] - ungrouped[i]));
  CHECK_MSG(apart > 1e-2, "the grouped and ungrouped references agree (%g): a weak test", apart);
  for (int pm = 1; pm <= 2; pm++) {
    Built b = {0};
    build_attention(&b.m, pm, NPOS);
    if (compile(&b, cc, pm == 1 ? "attn" : "attn_pm")) {
      unload(&b);
      continue;
    }
    static const int pieces[] = {NPOS, 2, 4, 6};
    for (size_t k = 0; k < sizeof pieces / sizeof *pieces; k++) {
      memset(b.S, 0, (size_t)b.m.state_bytes);
      memset(out, 0, sizeof out);
      for (int at = 0; at < NPOS;) {
        const int n = NPOS - at < pieces[k] ? NPOS - at : pieces[k];
        /* pos_mul 2: io->pos counts groups of 2 rows */
        sc_io io = {.embeds = in + at * 3 * HD, .n = n, .pos = at / pm, .out = out + at * HD};
        CHECK(b.d->entries[0].fn(K, NULL, b.S, b.X, &io) == 0);
        at += n;
      }
      CHECK_MSG(!kc->failed, "%s", kc->err);
      double worst = 0;
      for (int i = 0; i < NPOS * HD; i++) worst = fmax(worst, fabs(out[i] - ref[i]));
      CHECK_MSG(worst <= 2e-6, "%s pos_mul %d, %d rows per call: %g off the grouped reference", cc, pm,
                pieces[k], worst);
    }
    unload(&b);
  }
}

static void test_verifier(void) {
  Module m;
  ir_module_init(&m);
  Graph *g = ir_graph_new(&m, "audio", SC_IN_EMBEDS, 4);
  int x = ir_input_embeds(g, 3 * HD);
  int e = ir_elu(g, x, 1.0f, "elu");
  sc_error err = {0};
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "%s", err.msg);
  g->nodes[e].p.alpha = NAN;
  CHECK(ir_verify(&m, g, &err) != SC_OK && strstr(err.msg, "alpha"));
  ir_module_free(&m);
  build_attention(&m, 1, 4);
  g = &m.graphs[0];
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == OP_ATTENTION) g->nodes[i].p.align = 4;
  CHECK(ir_verify(&m, g, &err) != SC_OK && strstr(err.msg, "shorter than its position groups"));
  ir_module_free(&m);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/speechc_mimi_ir_XXXXXX");
  CHECK(mkdtemp(root) != NULL);
  sc_kernel_ctx kc = {0};
  sc_kernels K;
  CHECK(sc_kernels_init(&K, &kc) == 0);
  test_verifier();
  const char *ccs[] = {"tcc", "gcc"};
  for (int c = 0; c < 2; c++) {
    test_elu(ccs[c], &K, &kc);
    test_attention(ccs[c], &K, &kc);
  }
  sc_kernel_ctx_free(&kc);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  CHECK(system(cmd) == 0);
  CHECK_DONE();
}
