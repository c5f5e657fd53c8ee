/*
 * cmd_bench.c — `speechc bench model.so`: decode speed against the
 * machine's own read bandwidth, measured in the same run.
 *
 * Decode is memory-bound: every step reads every weight once.  So next to
 * tokens/s the bench prints the bytes of weights one decode step reads
 * (from the artifact's tensor table: every tensor, except that embedding
 * tables only used as gathers and RoPE tables contribute one row, a
 * mixture of experts' tensors the k chosen experts' share; a GDN hybrid
 * adds its recurrent state, read and written once a step), the
 * effective GB/s that implies, and the read bandwidth of a STREAM-like
 * probe (sum a large buffer) on the same number of threads, so that the
 * ratio says how close to the hardware limit the step runs.  Times are
 * medians: the machine may be shared.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cli.h"
#include "json.h"
#include "kernels.h"
#include "pool.h"
#include "sc_abi.h"
#include "speechc.h"

const sc_model_desc *sc_model_desc_of(const sc_model *m);

/* A device target's device ("cuda": the GPU's name), NULL for the CPU: the
 * CPU's read probe and kernel ISA then say nothing about the run. */
static const char *bench_device(const sc_model *m) {
  const sc_model_desc *d = sc_model_desc_of(m);
  if (!d || !strcmp(d->target, "cpu")) return NULL;
  const char *name = m->be && m->be->device_name ? m->be->device_name(m) : NULL;
  return name ? name : d->target;
}

/* The lines a device run prints instead of the CPU's probe and kernels. */
static void device_lines(const sc_model *m, const char *dev, double gbs) {
  printf("device        %s (--target %s; host code %s)\n", dev, sc_model_desc_of(m)->target,
         sc_model_desc_of(m)->cpu_features[0] ? "by the system compiler" : "by libtcc");
  printf("effective     %.2f GB/s of weights (the CPU's read probe does not apply)\n", gbs);
}
int cmd_bench(int argc, char **argv);
extern const char *const usage_bench;

const char *const usage_bench =
    "usage: speechc bench model.so [options]\n"
    "\n"
    "Prefills a prompt twice (the first also maps the weights in; the second is\n"
    "timed), times decode steps and prints tokens/s (median), the bytes of weights\n"
    "one step reads, the effective GB/s, and the fraction of the read bandwidth\n"
    "that a STREAM-like probe measures on the same threads in the same run.  A\n"
    "Gated DeltaNet hybrid (Qwen3.5, Qwen3-Next) also reads and writes its f32\n"
    "recurrent state every step: the rate and fraction count it, and the\n"
    "weights' alone are printed beside them.  On a machine whose bandwidth moves\n"
    "(a shared host), \"paired\" times the steps in windows of 8 with a probe pass\n"
    "just before each and prints the median of the windows' fractions.\n"
    "\n"
    "  --steps N              decode steps to time (default 32)\n"
    "  --threads N            kernel threads (default 0 = one per physical core)\n"
    "  --prompt N             prompt tokens prefilled first (default 16)\n"
    "  --probe-mb N           size of the bandwidth probe's buffer (default 1024)\n"
    "  --streams B            also step B sessions together (sc_batch_step: each weight read\n"
    "                         once per step for all; a Qwen3/Llama artifact built with\n"
    "                         --max-batch >= 2, the default 16; B above it takes several\n"
    "                         calls a step) and print aggregate and per-stream tokens/s\n"
    "\n"
    "A Qwen3-TTS artifact is timed by frames instead: one stream generates\n"
    "(sc_tts_generate, EOS held off so every run makes the same frames), then B\n"
    "streams step together (sc_tts_batch_step; --max-batch >= 2 at build, the\n"
    "default 16), and the bench prints frames/s per stream and in all, the\n"
    "bytes of weights one frame reads (the talker once, the code predictor once\n"
    "per code) and, for one stream, the fraction of the read probe.\n"
    "  --frames N             frames timed per run (default 32; 3 more are warm-up)\n"
    "\n"
    "A Moshi artifact is timed by 80 ms steps (--steps of them, 3 more first):\n"
    "one conversation with LMGen's default sampling on fixed user codes, the\n"
    "median step, its split (the temporal transformer, the depformer's dep_q\n"
    "steps, the rest: sampling and bookkeeping), the bytes of weights a step\n"
    "reads (the temporal transformer once, the depformer once per codebook) and\n"
    "the fraction of the read probe; with --streams B, B conversations stepped\n"
    "together (sc_moshi_batch_step), steps/s in all and per conversation.\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int parse_count(const char *flag, const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "speechc: %s expects an integer in [%ld, %ld], got '%s'\n\n%s", flag, lo, hi,
            s ? s : "", usage_bench);
    return SC_EUSAGE;
  }
  *out = v;
  return SC_OK;
}

/* ---- weights read per decode step ---------------------------------------- */

static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* A mixture of experts' k and E from the artifact's config (top level or
 * text_config); 0 when the model has none. */
static void moe_counts(const sc_model_desc *d, int *k, int *E) {
  *k = *E = 0;
  cJSON *j = d->config_json ? cJSON_Parse(d->config_json) : NULL;
  const cJSON *tc = cJSON_GetObjectItemCaseSensitive(j, "text_config");
  const cJSON *c = cJSON_IsObject(tc) ? tc : j;
  const cJSON *ne = cJSON_GetObjectItemCaseSensitive(c, "num_experts");
  const cJSON *nk = cJSON_GetObjectItemCaseSensitive(c, "num_experts_per_tok");
  if (cJSON_IsNumber(ne) && cJSON_IsNumber(nk) && ne->valueint > 0 && nk->valueint > 0 && nk->valueint <= ne->valueint)
    *E = ne->valueint, *k = nk->valueint;
  cJSON_Delete(j);
}

/* A Gated DeltaNet hybrid's per-session recurrent matrices and conv
 * windows (f32), which every decode step reads and writes once each: the
 * delta rule's floor besides the weights.  0 for a model without GDN
 * layers (or a config this cannot read: then nothing is counted). */
static unsigned long long gdn_state_bytes(const sc_model_desc *d) {
  cJSON *j = d->config_json ? cJSON_Parse(d->config_json) : NULL;
  const cJSON *tc = cJSON_GetObjectItemCaseSensitive(j, "text_config");
  const cJSON *c = cJSON_IsObject(tc) ? tc : j;
  const char *keys[] = {"linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim",
                        "linear_value_head_dim", "linear_conv_kernel_dim", "num_hidden_layers"};
  long long v[6];
  int ok = c != NULL;
  for (int i = 0; i < 6 && ok; i++) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, keys[i]);
    ok = cJSON_IsNumber(n) && n->valuedouble >= 1 && n->valuedouble <= 1e6;
    v[i] = ok ? (long long)n->valuedouble : 0;
  }
  long long linear = 0;
  if (ok) {
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(c, "layer_types");
    const cJSON *fi = cJSON_GetObjectItemCaseSensitive(c, "full_attention_interval");
    if (cJSON_IsArray(lt)) {
      const cJSON *e;
      cJSON_ArrayForEach(e, lt) linear += cJSON_IsString(e) && !strcmp(e->valuestring, "linear_attention");
    } else if (cJSON_IsNumber(fi) && fi->valueint >= 1) {
      for (long long i = 0; i < v[5]; i++) linear += (i + 1) % fi->valueint != 0;
    }
  }
  cJSON_Delete(j);
  const long long nv = v[0], nk = v[1], dk = v[2], dv = v[3], kc = v[4];
  return ok ? (unsigned long long)linear * 4ull * (unsigned long long)(nv * dk * dv + (kc - 1) * (2 * nk * dk + nv * dv))
            : 0;
}

/* A tensor is a gather-only table when it is an embedding table and some
 * other tensor with `vocab` rows is the output head (tied heads read the
 * whole table); RoPE tables are gathered by position.  Of the experts'
 * tensors (".experts_"), one decode step reads the k chosen experts' rows:
 * k/E of their bytes. */
static unsigned long long step_bytes(const sc_model_desc *d, unsigned long long *gathered) {
  int k, E;
  moe_counts(d, &k, &E);
  int separate_head = 0;
  for (int i = 0; i < d->n_tensors; i++)
    if (d->tensors[i].rows == d->vocab && !has(d->tensors[i].name, "embed")) separate_head = 1;
  unsigned long long sum = 0;
  *gathered = 0;
  for (int i = 0; i < d->n_tensors; i++) {
    const sc_tensor_info *t = &d->tensors[i];
    int gather = !strncmp(t->name, "rope.", 5) || (has(t->name, "embed") && separate_head);
    unsigned long long row = t->rows > 0 ? t->bytes / ((unsigned long long)t->rows * (t->sets > 0 ? t->sets : 1)) : t->bytes;
    if (gather) {
      sum += row;
      *gathered += t->bytes;
    } else if (E && has(t->name, ".experts_")) {
      sum += t->bytes / (unsigned long long)E * (unsigned long long)k;
    } else {
      sum += t->bytes;
    }
  }
  return sum;
}

/* The band holding most of the bytes; `others` lists the rest with their
 * sizes ("" when there are none), e.g. " (+ f32 0.4 MB)". */
static const char *main_band(const sc_model_desc *d, char *others, size_t size) {
  unsigned long long by[SC_W_COUNT] = {0};
  for (int i = 0; i < d->n_tensors; i++)
    if (sc_band(d->tensors[i].wtype)) by[d->tensors[i].wtype] += d->tensors[i].bytes;
  int best = 0;
  for (int k = 1; k < SC_W_COUNT; k++)
    if (by[k] > by[best]) best = k;
  size_t len = 0;
  others[0] = '\0';
  for (int k = 0; k < SC_W_COUNT && len < size; k++)
    if (k != best && by[k])
      len += (size_t)snprintf(others + len, size - len, "%s%s %.1f MB", len ? ", " : " (+ ", sc_band(k)->name,
                              by[k] / 1e6);
  if (len && len < size) snprintf(others + len, size - len, ")");
  return sc_band(best)->name;
}

/* ---- the read probe ------------------------------------------------------ */

/* Decode steps per window of the paired fraction (a probe pass each). */
#define PAIR_STEPS 8

/* Bytes a probe loop reads per iteration (and the unit chunks are cut in). */
#define PROBE_BLOCK 256

/* How far ahead of its loads a prefetching loop asks for lines: 4 KB, the
 * distance that read fastest in standalone loops on an AMX Xeon (2 threads:
 * 20.4-22.5 GB/s against 16.7-19.9 without a prefetch). */
#define PROBE_AHEAD 4096

/* The probe's loops: each sums bytes [a, b) of buf (multiples of
 * PROBE_BLOCK) in four independent vector lanes, some asking for the lines
 * PROBE_AHEAD bytes ahead too.  A CPU's read bandwidth is the best any of
 * them reaches: the compiler's baseline vectors (16-byte loads on x86-64)
 * read less than the kernels do on some CPUs (an AMX Xeon: 11-13 GB/s
 * against decode's 17-20), so the probe tries the CPU's widest loads and
 * a prefetch into L1 or L2 as the kernels do, and keeps the fastest. */
#define PROBE_LOOP(name, attr, vt, ahead, loc)                                               \
  attr static uint64_t name(const unsigned char *buf, size_t a, size_t b) {                 \
    typedef uint64_t v __attribute__((vector_size(sizeof(vt)), aligned(sizeof(vt))));      \
    const v *p = (const v *)(buf + a);                                                      \
    const size_t n = (b - a) / (4 * sizeof(v));                                             \
    v s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};                                               \
    for (size_t i = 0; i < n; i++, p += 4) {                                                \
      if (ahead)                                                                            \
        for (size_t l = 0; l < 4 * sizeof(v); l += 64) __builtin_prefetch((const char *)p + (ahead) + l, 0, loc); \
      s0 += p[0];                                                                           \
      s1 += p[1];                                                                           \
      s2 += p[2];                                                                           \
      s3 += p[3];                                                                           \
    }                                                                                       \
    s0 += s1 + s2 + s3;                                                                     \
    uint64_t t = 0;                                                                         \
    for (size_t k = 0; k < sizeof(v) / 8; k++) t += s0[k];                                  \
    return t; /* keeps the loads */                                                         \
  }

typedef struct { uint64_t w[4]; } probe_v32;
typedef struct { uint64_t w[8]; } probe_v64;
PROBE_LOOP(probe_base, , probe_v32, 0, 3)
PROBE_LOOP(probe_base_pf, , probe_v32, PROBE_AHEAD, 3)
PROBE_LOOP(probe_base_pf2, , probe_v32, PROBE_AHEAD, 2)
#if defined(__x86_64__) && defined(__GNUC__)
#define SC_PROBE_X86 1
PROBE_LOOP(probe_avx2, __attribute__((target("avx2"))), probe_v32, 0, 3)
PROBE_LOOP(probe_avx2_pf, __attribute__((target("avx2"))), probe_v32, PROBE_AHEAD, 3)
PROBE_LOOP(probe_avx2_pf2, __attribute__((target("avx2"))), probe_v32, PROBE_AHEAD, 2)
PROBE_LOOP(probe_avx512, __attribute__((target("avx512f"))), probe_v64, 0, 3)
PROBE_LOOP(probe_avx512_pf, __attribute__((target("avx512f"))), probe_v64, PROBE_AHEAD, 3)
PROBE_LOOP(probe_avx512_pf2, __attribute__((target("avx512f"))), probe_v64, PROBE_AHEAD, 2)
#endif

typedef struct ProbeLoop {
  uint64_t (*sum)(const unsigned char *buf, size_t a, size_t b);
  const char *name;
  const char *feature; /* the CPU feature it needs, NULL: none */
} ProbeLoop;

static const ProbeLoop probe_loops[] = {
    {probe_base, "baseline vectors", NULL},
    {probe_base_pf, "baseline vectors, prefetch 4 KB ahead", NULL},
    {probe_base_pf2, "baseline vectors, prefetch 4 KB ahead into L2", NULL},
#ifdef SC_PROBE_X86
    {probe_avx2, "32-byte AVX2 loads", "avx2"},
    {probe_avx2_pf, "32-byte AVX2 loads, prefetch 4 KB ahead", "avx2"},
    {probe_avx2_pf2, "32-byte AVX2 loads, prefetch 4 KB ahead into L2", "avx2"},
    {probe_avx512, "64-byte AVX-512 loads", "avx512f"},
    {probe_avx512_pf, "64-byte AVX-512 loads, prefetch 4 KB ahead", "avx512f"},
    {probe_avx512_pf2, "64-byte AVX-512 loads, prefetch 4 KB ahead into L2", "avx512f"},
#endif
};
enum { N_PROBE_LOOPS = sizeof probe_loops / sizeof probe_loops[0] };

static int probe_loop_runs(const ProbeLoop *l) {
#ifdef SC_PROBE_X86
  if (l->feature && !strcmp(l->feature, "avx2")) return __builtin_cpu_supports("avx2");
  if (l->feature && !strcmp(l->feature, "avx512f")) return __builtin_cpu_supports("avx512f");
#endif
  return !l->feature;
}

typedef struct Probe {
  const unsigned char *buf;
  size_t bytes;
  const ProbeLoop *loop;
  uint64_t sums[256];
} Probe;

/* Chunk c of nc sums its contiguous share with the chosen loop. */
static void probe_chunk(void *arg, int c, int nc) {
  Probe *p = arg;
  size_t n = p->bytes / PROBE_BLOCK, a = n * (size_t)c / (size_t)nc, b = n * (size_t)(c + 1) / (size_t)nc;
  p->sums[c & 255] += p->loop->sum(p->buf, a * PROBE_BLOCK, b * PROBE_BLOCK);
}

/* The probe's buffer (faulted in), threads and fastest loop, kept for
 * several passes. */
typedef struct ProbeRun {
  Probe p;
  void *buf;
  sc_pool *pool;
  int chunks;
} ProbeRun;

static void probe_close(ProbeRun *r) {
  sc_pool_free(r->pool);
  free(r->buf);
  memset(r, 0, sizeof *r);
}

/* GB/s of one read of the whole buffer. */
static double probe_pass(ProbeRun *r) {
  double t0 = now();
  sc_pool_run(r->pool, probe_chunk, &r->p, r->chunks);
  return (double)r->p.bytes / (now() - t0) / 1e9;
}

static int probe_open(ProbeRun *r, int threads, size_t mb) {
  memset(r, 0, sizeof *r);
  r->p.bytes = mb << 20;
  if (posix_memalign(&r->buf, 4096, r->p.bytes)) return -1;
  memset(r->buf, 1, r->p.bytes); /* fault every page in before timing */
  r->p.buf = r->buf;
  r->pool = threads > 1 ? sc_pool_new(threads) : NULL;
  if (threads > 1 && !r->pool) {
    probe_close(r);
    return -1;
  }
  r->chunks = 4 * threads; /* as the kernels cut their jobs */
  r->p.loop = &probe_loops[0];
  sc_pool_run(r->pool, probe_chunk, &r->p, r->chunks); /* warm the threads */
  /* the fastest loop this CPU runs: the best of two passes each, the
   * loops taken in turn twice over so that a moment's drift of a shared
   * machine's bandwidth does not pick one */
  double best[N_PROBE_LOOPS] = {0};
  for (int round = 0; round < 2; round++)
    for (int k = 0; k < N_PROBE_LOOPS; k++) {
      if (!probe_loop_runs(&probe_loops[k])) continue;
      r->p.loop = &probe_loops[k];
      double g = probe_pass(r);
      if (g > best[k]) best[k] = g;
    }
  r->p.loop = &probe_loops[0];
  for (int k = 1; k < N_PROBE_LOOPS; k++)
    if (best[k] > best[r->p.loop - probe_loops]) r->p.loop = &probe_loops[k];
  return 0;
}

/* Best and median GB/s of `passes` reads. */
static void probe_passes(ProbeRun *r, int passes, double *best, double *med) {
  double gbs[16];
  if (passes > 16) passes = 16;
  for (int k = 0; k < passes; k++) gbs[k] = probe_pass(r);
  *best = 0;
  for (int k = 0; k < passes; k++)
    if (gbs[k] > *best) *best = gbs[k];
  *med = median(gbs, passes);
}

/* Best and median GB/s of `passes` reads of an mb-MiB buffer, and the loop
 * that read it. */
static int probe_bandwidth(int threads, size_t mb, int passes, double *best, double *med, const char **loop) {
  ProbeRun r;
  if (probe_open(&r, threads, mb)) return -1;
  probe_passes(&r, passes, best, med);
  *loop = r.p.loop->name;
  probe_close(&r);
  return 0;
}

/* The probe's line of a CPU run. */
static void print_probe(double best, double med, long mb, int threads, const char *loop) {
  printf("read probe    %.2f GB/s best, %.2f median (%ld MB buffer, %d thread%s, 5 passes; %s, the fastest of "
         "the loops this CPU runs)\n", best, med, mb, threads, threads > 1 ? "s" : "", loop);
}

/* B sessions, each prefilled with ids, stepped together: the median step
 * time of `steps` timed steps after 3 untimed ones into *med. */
static int bench_streams(sc_model *m, int B, const int32_t *ids, int prompt, long steps, double *med,
                         sc_error *err) {
  const sc_model_desc *d = sc_model_desc_of(m);
  sc_session **s = calloc((size_t)B, sizeof *s);
  int32_t *tok = calloc((size_t)B, sizeof *tok);
  double *dt = calloc((size_t)steps, sizeof *dt);
  sc_batch *b = NULL;
  int rc = s && tok && dt ? sc_batch_new(m, &b, err) : sc_fail(err, SC_ERUNTIME, "out of memory");
  for (int i = 0; !rc && i < B; i++) {
    rc = sc_session_open(m, &s[i], err);
    if (!rc) rc = sc_prefill(s[i], ids, prompt, err);
    if (!rc) rc = sc_batch_add(b, s[i], err);
    tok[i] = (int32_t)((i * 131 + 1) % d->vocab);
  }
  for (long k = 0; !rc && k < 3 + steps; k++) {
    for (int i = 0; i < B; i++) tok[i] = (int32_t)(((int64_t)tok[i] * 31 + 7) % d->vocab);
    double t0 = now();
    rc = sc_batch_step(b, tok, err);
    if (k >= 3) dt[k - 3] = now() - t0;
  }
  if (!rc) *med = median(dt, (int)steps);
  sc_batch_free(b);
  for (int i = 0; s && i < B; i++) sc_session_close(s[i]);
  free(s);
  free(tok);
  free(dt);
  return rc;
}

/* ---- Qwen3-TTS: frames ---------------------------------------------------- */

/* Bytes of weights one frame reads: the talker's tensors once, the code
 * predictor's ("pred.") once per code after c0 (G-1 steps), of which a
 * per-step set (its heads) gives one set a step; embedding tables and RoPE
 * are gathers (a row each).  The text tables only serve the prompt. */
static unsigned long long tts_frame_bytes(const sc_model_desc *d, int G) {
  unsigned long long sum = 0;
  for (int i = 0; i < d->n_tensors; i++) {
    const sc_tensor_info *t = &d->tensors[i];
    const unsigned long long sets = t->sets > 0 ? (unsigned long long)t->sets : 1;
    const unsigned long long row = t->rows > 0 ? t->bytes / ((unsigned long long)t->rows * sets) : t->bytes;
    if (!strncmp(t->name, "text_", 5)) continue;
    if (!strncmp(t->name, "rope.", 5) || has(t->name, "embed")) sum += row;
    else if (!strncmp(t->name, "pred.", 5)) sum += t->bytes / sets * (unsigned long long)(G - 1);
    else sum += t->bytes;
  }
  return sum;
}

typedef struct FrameClock {
  double last, *dt;
  int n, cap;
} FrameClock;

static int on_frame_clock(void *user, const int32_t *codes, int n_codes, int frame) {
  (void)codes;
  (void)n_codes;
  (void)frame;
  FrameClock *c = user;
  const double t = now();
  if (c->n < c->cap) c->dt[c->n++] = t - c->last;
  c->last = t;
  return 0;
}

/* The request every bench stream makes: a 16-token text, EOS held off
 * (min_frames = max_frames) so each run makes max_frames frames. */
static sc_tts_params tts_bench_params(const int32_t *text, int frames, int i) {
  sc_tts_params p = sc_tts_defaults();
  p.text_ids = text;
  p.n_text = 16;
  p.max_frames = p.min_frames = frames;
  p.talker.seed = 1 + (uint64_t)i;
  p.predictor.seed = 1001 + (uint64_t)i;
  return p;
}

static int bench_tts(sc_model *m, const char *path, long frames, long streams, long threads, long probe_mb) {
  const sc_model_desc *d = sc_model_desc_of(m);
  const int G = sc_tts_codebooks(m), F = (int)frames + 3;
  sc_error err = {0};
  int32_t text[16];
  cJSON *j = cJSON_Parse(d->config_json);
  const cJSON *tv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "talker_config"),
                                                     "text_vocab_size");
  const int text_vocab = cJSON_IsNumber(tv) && tv->valueint > 0 ? tv->valueint : 1; /* the build checked it */
  cJSON_Delete(j);
  for (int k = 0; k < 16; k++) text[k] = (int32_t)((k * 7919 + 5) % text_vocab);
  int32_t *codes = malloc((size_t)F * (size_t)G * (size_t)(streams > 1 ? streams : 1) * sizeof *codes);
  int *n_frames = calloc((size_t)streams, sizeof *n_frames);
  double *dt = calloc((size_t)F, sizeof *dt), *dtb = calloc((size_t)F, sizeof *dtb);
  sc_session **s = calloc((size_t)streams, sizeof *s);
  sc_tts_batch *b = NULL;
  int rc = codes && n_frames && dt && dtb && s ? SC_OK : sc_fail(&err, SC_ERUNTIME, "out of memory");
  /* one stream alone; its first frames (and the prompt) are not timed */
  FrameClock clk = {.dt = dt, .cap = F};
  sc_tts_stats st = {0};
  if (!rc) rc = sc_session_open(m, &s[0], &err);
  if (!rc) {
    sc_tts_params p = tts_bench_params(text, F, 0);
    p.stats = &st;
    clk.last = now();
    rc = sc_tts_generate(s[0], &p, codes, &n_frames[0], on_frame_clock, &clk, &err);
  }
  if (!rc && clk.n < F) rc = sc_fail(&err, SC_ERUNTIME, "bench: the stream made %d frames of %d", clk.n, F);
  double med = rc ? 0 : median(dt + 3, (int)frames), med_b = 0;
  /* B streams together */
  int nb = 0;
  if (!rc && streams > 1) {
    rc = sc_tts_batch_new(m, &b, &err);
    for (int i = 0; !rc && i < streams; i++) {
      if (!s[i]) rc = sc_session_open(m, &s[i], &err);
      sc_tts_params p = tts_bench_params(text, F, i);
      if (!rc) rc = sc_tts_batch_add(b, s[i], &p, codes + (size_t)i * F * G, &n_frames[i], NULL, NULL, &err);
    }
    while (!rc && sc_tts_batch_running(b)) {
      const double t0 = now();
      rc = sc_tts_batch_step(b, &err);
      if (nb < F) dtb[nb++] = now() - t0;
    }
    for (int i = 0; !rc && i < streams; i++)
      if (sc_tts_batch_status(b, s[i], &err) != SC_TTS_ENDED || n_frames[i] != F)
        rc = sc_fail(&err, SC_ERUNTIME, "bench: stream %d made %d frames of %d (%s)", i, n_frames[i], F, err.msg);
    if (!rc) med_b = median(dtb + 3, (int)frames);
  }
  int used_threads = threads > 0 ? (int)threads : sc_physical_cores();
  double best = 0, med_probe = 0;
  const char *probe_loop = "";
  const char *dev = bench_device(m);
  if (!rc && !dev && probe_bandwidth(used_threads, (size_t)probe_mb, 5, &best, &med_probe, &probe_loop))
    rc = sc_fail(&err, SC_ERUNTIME, "out of memory for the %ld MB bandwidth probe (hint: --probe-mb)", probe_mb);
  if (rc) {
    fprintf(stderr, "speechc: error: %s\n", err.msg);
  } else {
    const unsigned long long bytes = tts_frame_bytes(d, G);
    const double gbs = (double)bytes / med / 1e9;
    sc_kernels K;
    sc_kernels_init(&K, NULL);
    char others[128];
    const char *band = main_band(d, others, sizeof others);
    printf("model         %s (%s, %s)\n", path, d->model_type, d->family);
    printf("weights       %s, %.1f MB in all%s\n", band, d->weight_bytes / 1e6, others);
    if (!dev) {
      printf("code          %s; kernels %s, %d thread%s\n",
             d->cpu_features[0] ? "system compiler" : "libtcc (portable)", sc_kernels_isa(&K), used_threads,
             used_threads > 1 ? "s" : "");
      printf("kernels why   %s\n", sc_kernels_reason(&K));
      printf("prefetch      %s\n", sc_gemv_prefetch_why());
    }
    printf("one stream    %ld frames: median %.2f ms/frame = %.2f frames/s (real time: 12.5; prompt %d rows "
           "in %.1f ms)\n", frames, med * 1e3, 1.0 / med, st.prompt_rows, st.prompt_s * 1e3);
    printf("weights read  %.1f MB per frame (talker once, predictor %d times)\n", bytes / 1e6, G - 1);
    if (dev) {
      device_lines(m, dev, gbs);
    } else {
      printf("effective     %.2f GB/s\n", gbs);
      print_probe(best, med_probe, probe_mb, used_threads, probe_loop);
      printf("fraction      %.1f%% of the best probe\n", 100.0 * gbs / best);
    }
    if (streams > 1) {
      printf("streams       %ld streams stepped together: median %.2f ms/frame = %.2f frames/s in all, %.2f per "
             "stream (%.2fx one stream's aggregate)\n", streams, med_b * 1e3, streams / med_b, 1.0 / med_b,
             streams * med / med_b);
      printf("bench: streams=%ld frame_ms=%.3f agg_frames_s=%.3f stream_frames_s=%.3f speedup=%.3f\n", streams,
             med_b * 1e3, streams / med_b, 1.0 / med_b, streams * med / med_b);
    }
    printf("bench: band=%s frames_s=%.3f ms=%.3f bytes=%llu gbps=%.3f probe_gbps=%.3f frac=%.4f threads=%d%s%s\n",
           band, 1.0 / med, med * 1e3, bytes, gbs, best, best > 0 ? gbs / best : 0.0, used_threads,
           dev ? " target=" : "", dev ? d->target : "");
  }
  sc_tts_batch_free(b);
  for (int i = 0; s && i < streams; i++) sc_session_close(s[i]);
  free(s);
  free(codes);
  free(n_frames);
  free(dt);
  free(dtb);
  return rc;
}

/* ---- Moshi: 80 ms steps ----------------------------------------------------- */

/* Bytes of weights one step reads: the temporal transformer's tensors once
 * (its embedding tables, the text's and the eight streams', a row each),
 * the depformer's ("dep.", "depformer_", "linears") once per depformer
 * step: a tensor with per-step sets gives one set a step, one without is
 * read dep_q times, and its embedding tables give a row a step.  RoPE and
 * sinusoidal tables are gathers.  *dep gets the depformer's share. */
static unsigned long long moshi_step_bytes(const sc_model_desc *d, int Q, unsigned long long *dep) {
  unsigned long long sum = 0;
  *dep = 0;
  for (int i = 0; i < d->n_tensors; i++) {
    const sc_tensor_info *t = &d->tensors[i];
    const unsigned long long sets = t->sets > 0 ? (unsigned long long)t->sets : 1;
    const unsigned long long row = t->rows > 0 ? t->bytes / ((unsigned long long)t->rows * sets) : t->bytes;
    const int in_dep = !strncmp(t->name, "dep.", 4) || !strncmp(t->name, "depformer_", 10) ||
                       !strcmp(t->name, "linears");
    const int low_rank = has(t->name, "_emb_lr"); /* a matrix after the gather, read whole */
    const int gather =
        !low_rank && (!strncmp(t->name, "rope.", 5) || has(t->name, "sin_positions") || has(t->name, "emb"));
    const unsigned long long once = gather ? row : sets > 1 ? t->bytes / sets : t->bytes;
    /* the text token's table serves step 0 of the depformer, the audio ones steps 1..dep_q-1 */
    const int uses = !strncmp(t->name, "depformer_text_emb", 18) ? 1
                     : !strncmp(t->name, "depformer_emb", 13) ? (Q > 1 ? Q - 1 : 0)
                     : in_dep ? Q : 1;
    const unsigned long long b = once * (unsigned long long)uses;
    sum += b;
    if (in_dep) *dep += b;
  }
  return sum;
}

/* The codes user i feeds at step k: a fixed walk, no sampling inside it. */
static void moshi_user(int i, long k, int U, int card, int32_t *u) {
  for (int c = 0; c < U; c++) u[c] = (int32_t)((i * 131 + k * 17 + c * 7 + 3) % card);
}

static int bench_moshi(sc_model *m, const char *path, long steps, long streams, long threads, long probe_mb) {
  const sc_model_desc *d = sc_model_desc_of(m);
  sc_error err = {0};
  const int B = streams > 1 ? (int)streams : 1;
  sc_session **s = calloc((size_t)B, sizeof *s);
  sc_moshi **g = calloc((size_t)B, sizeof *g);
  double *dt = calloc((size_t)steps, sizeof *dt), *dtb = calloc((size_t)steps, sizeof *dtb);
  int32_t *user = malloc((size_t)B * 64 * sizeof *user), *rows = malloc((size_t)B * 64 * sizeof *rows);
  int *has = calloc((size_t)B, sizeof *has);
  sc_moshi_batch *b = NULL;
  sc_moshi_info in = {0};
  sc_moshi_times t0 = {0}, t1 = {0}, tb0 = {0}, tb1 = {0};
  int rc = s && g && dt && dtb && user && rows && has ? SC_OK : sc_fail(&err, SC_ERUNTIME, "out of memory");
  /* one conversation: LMGen's default sampling, 3 untimed steps first */
  if (!rc) rc = sc_session_open(m, &s[0], &err);
  if (!rc) rc = sc_moshi_open(s[0], NULL, &g[0], &in, &err);
  if (!rc && 3 + steps > d->max_context)
    rc = sc_fail(&err, SC_EUSAGE, "--steps %ld (+3 warm-up) exceed the model's max context %d", steps, d->max_context);
  const int U = in.user_codebooks;
  for (long k = 0; !rc && k < 3 + steps; k++) {
    moshi_user(0, k, U, in.card, user);
    if (k == 3) sc_moshi_get_times(g[0], &t0);
    const double a = now();
    rc = sc_moshi_step(g[0], user, rows, has, &err);
    if (k >= 3) dt[k - 3] = now() - a;
  }
  if (!rc) sc_moshi_get_times(g[0], &t1);
  /* B conversations together, opened afresh */
  if (!rc && B > 1) {
    rc = sc_moshi_batch_new(m, &b, &err);
    for (int i = 0; !rc && i < B; i++) {
      if (!s[i]) rc = sc_session_open(m, &s[i], &err);
      sc_moshi_params p;
      if (!rc) rc = sc_moshi_defaults(m, &p, &err);
      p.seed += (uint64_t)i;
      sc_moshi_close(g[i]);
      g[i] = NULL;
      if (!rc) rc = sc_moshi_open(s[i], &p, &g[i], NULL, &err);
      if (!rc) rc = sc_moshi_batch_add(b, g[i], &err);
    }
    for (long k = 0; !rc && k < 3 + steps; k++) {
      for (int i = 0; i < B; i++) moshi_user(i, k, U, in.card, user + (size_t)i * U);
      if (k == 3) sc_moshi_batch_get_times(b, &tb0);
      const double a = now();
      rc = sc_moshi_batch_step(b, user, rows, has, &err);
      if (k >= 3) dtb[k - 3] = now() - a;
    }
    if (!rc) sc_moshi_batch_get_times(b, &tb1);
  }
  int used_threads = threads > 0 ? (int)threads : sc_physical_cores();
  double best = 0, med_probe = 0;
  const char *probe_loop = "";
  const char *dev = bench_device(m);
  if (!rc && !dev && probe_bandwidth(used_threads, (size_t)probe_mb, 5, &best, &med_probe, &probe_loop))
    rc = sc_fail(&err, SC_ERUNTIME, "out of memory for the %ld MB bandwidth probe (hint: --probe-mb)", probe_mb);
  if (rc) {
    fprintf(stderr, "speechc: error: %s\n", err.msg);
  } else {
    const double med = median(dt, (int)steps), n = (double)(t1.steps - t0.steps);
    const double tt = (t1.temporal_s - t0.temporal_s) / n, td = (t1.depformer_s - t0.depformer_s) / n,
                 ts = (t1.step_s - t0.step_s) / n;
    unsigned long long dep = 0, bytes = moshi_step_bytes(d, in.dep_q, &dep);
    const double gbs = (double)bytes / med / 1e9;
    sc_kernels K;
    sc_kernels_init(&K, NULL);
    char others[128];
    const char *band = main_band(d, others, sizeof others);
    printf("model         %s (%s, %s)\n", path, d->model_type, d->family);
    printf("weights       %s, %.1f MB in all%s\n", band, d->weight_bytes / 1e6, others);
    if (!dev) {
      printf("code          %s; kernels %s, %d thread%s\n",
             d->cpu_features[0] ? "system compiler" : "libtcc (portable)", sc_kernels_isa(&K), used_threads,
             used_threads > 1 ? "s" : "");
      printf("kernels why   %s\n", sc_kernels_reason(&K));
      printf("prefetch      %s\n", sc_gemv_prefetch_why());
    }
    printf("one stream    %ld steps: median %.2f ms/step = %.2f steps/s (real time: 12.5, one step per 80 ms)\n",
           steps, med * 1e3, 1.0 / med);
    printf("split         mean per step: temporal %.2f ms, depformer (%d steps) %.2f ms, sampling and the rest "
           "%.2f ms\n", tt * 1e3, in.dep_q, td * 1e3, (ts - tt - td) * 1e3);
    printf("weights read  %.1f MB per step (temporal once: %.1f MB; depformer %d times: %.1f MB)\n", bytes / 1e6,
           (bytes - dep) / 1e6, in.dep_q, dep / 1e6);
    if (dev) {
      device_lines(m, dev, gbs);
    } else {
      printf("effective     %.2f GB/s (temporal %.2f, depformer %.2f)\n", gbs, (bytes - dep) / tt / 1e9,
             dep / td / 1e9);
      print_probe(best, med_probe, probe_mb, used_threads, probe_loop);
      printf("fraction      %.1f%% of the best probe\n", 100.0 * gbs / best);
    }
    if (B > 1) {
      const double medb = median(dtb, (int)steps), nb = (double)(tb1.steps - tb0.steps);
      printf("streams       %d conversations stepped together: median %.2f ms/step = %.2f steps/s in all, %.2f per "
             "stream (%.2fx one stream's); mean per step: temporal %.2f ms, depformer %.2f ms\n", B, medb * 1e3,
             B / medb, 1.0 / medb, B * med / medb, (tb1.temporal_s - tb0.temporal_s) / nb * 1e3,
             (tb1.depformer_s - tb0.depformer_s) / nb * 1e3);
      printf("bench: streams=%d step_ms=%.3f agg_steps_s=%.3f stream_steps_s=%.3f speedup=%.3f\n", B, medb * 1e3,
             B / medb, 1.0 / medb, B * med / medb);
    }
    printf("bench: band=%s steps_s=%.3f ms=%.3f temporal_ms=%.3f depformer_ms=%.3f bytes=%llu gbps=%.3f "
           "probe_gbps=%.3f frac=%.4f threads=%d%s%s\n",
           band, 1.0 / med, med * 1e3, tt * 1e3, td * 1e3, bytes, gbs, best, best > 0 ? gbs / best : 0.0,
           used_threads, dev ? " target=" : "", dev ? d->target : "");
  }
  sc_moshi_batch_free(b);
  for (int i = 0; i < B; i++) {
    if (g) sc_moshi_close(g[i]);
    if (s) sc_session_close(s[i]);
  }
  free(s);
  free(g);
  free(dt);
  free(dtb);
  free(user);
  free(rows);
  free(has);
  return rc;
}

/* ---- the command ----------------------------------------------------------- */

int cmd_bench(int argc, char **argv) {
  const char *path = NULL;
  long steps = 32, threads = 0, prompt = 16, probe_mb = 1024, streams = 1, frames = 32;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_bench, stdout);
      return 0;
    }
    if (!strcmp(a, "--steps")) {
      if (parse_count(a, val, 1, 100000, &steps)) return SC_EUSAGE;
      i++;
    } else if (!strcmp(a, "--threads")) {
      if (parse_count(a, val, 0, 1024, &threads)) return SC_EUSAGE;
      i++;
    } else if (!strcmp(a, "--prompt")) {
      if (parse_count(a, val, 1, 1 << 20, &prompt)) return SC_EUSAGE;
      i++;
    } else if (!strcmp(a, "--probe-mb")) {
      if (parse_count(a, val, 16, 1 << 16, &probe_mb)) return SC_EUSAGE;
      i++;
    } else if (!strcmp(a, "--streams")) {
      if (parse_count(a, val, 1, 4096, &streams)) return SC_EUSAGE;
      i++;
    } else if (!strcmp(a, "--frames")) {
      if (parse_count(a, val, 1, 100000, &frames)) return SC_EUSAGE;
      i++;
    } else if (a[0] == '-') {
      fprintf(stderr, "speechc: unknown option '%s'\n\n%s", a, usage_bench);
      return SC_EUSAGE;
    } else if (!path) {
      path = a;
    } else {
      fprintf(stderr, "speechc: unexpected argument '%s'\n\n%s", a, usage_bench);
      return SC_EUSAGE;
    }
  }
  if (!path) {
    fprintf(stderr, "speechc: missing model.so\n\n%s", usage_bench);
    return SC_EUSAGE;
  }
  sc_error err = {0};
  sc_open_opts opts = {.verify_weights = 0, .threads = (int)threads};
  sc_model *m = NULL;
  sc_session *s = NULL;
  int rc = sc_model_open(path, &opts, &m, &err);
  if (!rc && sc_tts_codebooks(m)) {
    rc = bench_tts(m, path, frames, streams, threads, probe_mb);
    sc_model_close(m);
    return rc;
  }
  if (!rc && !strcmp(sc_model_desc_of(m)->family, "moshi")) {
    rc = bench_moshi(m, path, steps, streams, threads, probe_mb);
    sc_model_close(m);
    return rc;
  }
  if (!rc) rc = check_family(m, path, "llm", &err);
  const sc_model_desc *d = rc ? NULL : sc_model_desc_of(m);
  if (!rc && prompt + 3 + steps > d->max_context)
    rc = sc_fail(&err, SC_EUSAGE, "--prompt %ld + --steps %ld (+3 warm-up) exceed the model's max context %d "
                 "(hint: rebuild with a larger --max-context)", prompt, steps, d->max_context);
  if (!rc) rc = sc_session_open(m, &s, &err);
  double *dt = calloc((size_t)steps, sizeof *dt);
  int32_t *ids = calloc((size_t)prompt, sizeof *ids);
  if (!rc && (!dt || !ids)) rc = sc_fail(&err, SC_ERUNTIME, "out of memory");
  /* The first prefill also maps the weight pages into this process (soft
   * faults: the loader lets them go after checking them, model.c); the
   * second, after a reset, times the kernels alone, as peers' warm-up
   * runs do.  Both are printed. */
  double t_prefill = 0, t_cold = 0;
  if (!rc) {
    for (long i = 0; i < prompt; i++) ids[i] = (int32_t)((i * 7919 + 11) % d->vocab);
    double t0 = now();
    rc = sc_prefill(s, ids, (int)prompt, &err);
    t_cold = now() - t0;
  }
  if (!rc) {
    sc_session_reset(s);
    double t0 = now();
    rc = sc_prefill(s, ids, (int)prompt, &err);
    t_prefill = now() - t0;
  }
  /* a few untimed steps, then the timed ones; ids follow a fixed walk so
   * that no sampling sits inside the timing.  On the CPU a probe pass
   * runs before every PAIR_STEPS timed steps: each window's rate against
   * the bandwidth of that moment (a shared machine's bandwidth moves from
   * second to second; the passes sit outside the steps' timing). */
  int used_threads = threads > 0 ? (int)threads : sc_physical_cores();
  const char *dev = rc ? NULL : bench_device(m);
  ProbeRun pr = {0};
  const int paired = !rc && !dev;
  if (paired && probe_open(&pr, used_threads, (size_t)probe_mb)) {
    rc = sc_fail(&err, SC_ERUNTIME, "out of memory for the %ld MB bandwidth probe (hint: --probe-mb)", probe_mb);
  }
  double *pair_gbs = calloc((size_t)steps / PAIR_STEPS + 1, sizeof *pair_gbs);
  if (!rc && !pair_gbs) rc = sc_fail(&err, SC_ERUNTIME, "out of memory");
  int windows = 0;
  int32_t tok = 1;
  for (long i = 0; !rc && i < 3 + steps; i++) {
    if (paired && i >= 3 && (i - 3) % PAIR_STEPS == 0) {
      /* past the kernel threads' spin after a step (pool.c), so that
       * they do not share the cores with the pass */
      nanosleep(&(struct timespec){0, 2000000}, NULL);
      pair_gbs[windows++] = probe_pass(&pr);
    }
    tok = (int32_t)(((int64_t)tok * 31 + 7) % d->vocab);
    double t0 = now();
    rc = sc_decode(s, tok, &err);
    if (i >= 3) dt[i - 3] = now() - t0;
  }
  double med_b = 0;
  if (!rc && streams > 1) rc = bench_streams(m, (int)streams, ids, (int)prompt, steps, &med_b, &err);
  if (rc) {
    fprintf(stderr, "speechc: error: %s\n", err.msg);
    goto done;
  }
  double best = 0, med_probe = 0;
  if (paired) probe_passes(&pr, 5, &best, &med_probe);
  unsigned long long gathered = 0, bytes = step_bytes(d, &gathered), state = gdn_state_bytes(d);
  /* each window's steps (median) against the probe pass before them; the
   * median of those fractions (sorting a window's slice leaves the whole
   * run's median and extremes as they are) */
  double frac_paired = 0;
  for (int w = 0; w < windows; w++) {
    const long a = (long)w * PAIR_STEPS, n = steps - a < PAIR_STEPS ? steps - a : PAIR_STEPS;
    pair_gbs[w] = (double)(bytes + 2 * state) / median(dt + a, (int)n) / 1e9 / pair_gbs[w];
  }
  if (windows) frac_paired = median(pair_gbs, windows);
  double lo = dt[0], hi = dt[0];
  for (long i = 1; i < steps; i++) {
    if (dt[i] < lo) lo = dt[i];
    if (dt[i] > hi) hi = dt[i];
  }
  double med = median(dt, (int)steps);
  /* a GDN hybrid's step also reads and writes its recurrent state: the
   * effective rate counts both (and the weights' alone are printed too) */
  double gbs = (double)(bytes + 2 * state) / med / 1e9, gbs_w = (double)bytes / med / 1e9;
  sc_kernels K;
  sc_kernels_init(&K, NULL);
  char others[128];
  const char *band = main_band(d, others, sizeof others);
  printf("model         %s (%s, %s)\n", path, d->model_type, d->family);
  printf("weights       %s, %.1f MB in all%s\n", band, d->weight_bytes / 1e6, others);
  if (!dev) {
    printf("code          %s; kernels %s, %d thread%s\n",
           d->cpu_features[0] ? "system compiler" : "libtcc (portable)", sc_kernels_isa(&K), used_threads,
           used_threads > 1 ? "s" : "");
    printf("kernels why   %s\n", sc_kernels_reason(&K));
    printf("prefetch      %s\n", sc_gemv_prefetch_why());
  }
  /* the session opened above refused a bad value */
  const int eng = sc_bf16act_engine(sc_bf16act_setting(getenv("SPEECHC_BF16_ACT")));
  if (strstr(band, "bf16") && !dev)
    printf("bf16 prefill  %s\n", eng == SC_BF16ACT_AMX ? "AMX tiles, activations rounded to bf16 (calls of 16+ tokens)"
                                  : eng == SC_BF16ACT_DP ? "AVX512-BF16, activations rounded to bf16 (calls of 16+ tokens)"
                                                         : "f32 activations (no AMX or AVX512-BF16 here, or SPEECHC_BF16_ACT=off)");
  printf("prefill       %ld tokens in %.1f ms = %.1f tokens/s (the first, mapping the weights: %.1f ms)\n",
         prompt, t_prefill * 1e3, prompt / t_prefill, t_cold * 1e3);
  printf("decode        %ld steps: median %.2f ms/token (min %.2f, max %.2f) = %.2f tokens/s\n", steps,
         med * 1e3, lo * 1e3, hi * 1e3, 1.0 / med);
  printf("weights read  %.1f MB per step (gather-only tables, %.1f MB, count one row)\n", bytes / 1e6,
         gathered / 1e6);
  if (state)
    printf("state r+w     %.1f MB per step (the GDN layers' recurrent matrices and conv windows, f32: %.1f MB "
           "read, then written)\n", 2 * state / 1e6, state / 1e6);
  if (dev) {
    device_lines(m, dev, gbs);
  } else {
    if (state) printf("effective     %.2f GB/s (weights and state; the weights alone %.2f)\n", gbs, gbs_w);
    else printf("effective     %.2f GB/s\n", gbs);
    print_probe(best, med_probe, probe_mb, used_threads, pr.p.loop->name);
    if (state)
      printf("fraction      %.1f%% of the best probe (the weights alone %.1f%%)\n", 100.0 * gbs / best,
             100.0 * gbs_w / best);
    else printf("fraction      %.1f%% of the best probe\n", 100.0 * gbs / best);
    if (state)
      printf("paired        %.1f%% (the weights alone %.1f%%; median over %d windows: %d steps against a probe "
             "pass just before them)\n", 100.0 * frac_paired, 100.0 * frac_paired * bytes / (bytes + 2 * state),
             windows, PAIR_STEPS);
    else
      printf("paired        %.1f%% (median over %d windows: %d steps against a probe pass just before them)\n",
             100.0 * frac_paired, windows, PAIR_STEPS);
  }
  if (streams > 1) {
    printf("streams       %ld sessions stepped together: median %.2f ms/step = %.2f tokens/s aggregate, %.2f per "
           "stream (%.2fx one stream's)\n", streams, med_b * 1e3, streams / med_b, 1.0 / med_b, streams * med / med_b);
    printf("bench: streams=%ld step_ms=%.3f agg_tok_s=%.3f stream_tok_s=%.3f speedup=%.3f\n", streams, med_b * 1e3,
           streams / med_b, 1.0 / med_b, streams * med / med_b);
  }
  printf("bench: band=%s tok_s=%.3f ms=%.3f bytes=%llu state_rw_bytes=%llu gbps=%.3f probe_gbps=%.3f frac=%.4f "
         "frac_weights=%.4f frac_paired=%.4f threads=%d prompt=%ld prefill_tok_s=%.3f%s%s\n",
         band, 1.0 / med, med * 1e3, bytes, 2 * state, gbs, best, best > 0 ? gbs / best : 0.0,
         best > 0 ? gbs_w / best : 0.0, frac_paired, used_threads, prompt, prompt / t_prefill, dev ? " target=" : "",
         dev ? d->target : "");
done:
  probe_close(&pr);
  free(pair_gbs);
  free(dt);
  free(ids);
  sc_session_close(s);
  sc_model_close(m);
  return rc;
}
