/*
 * test_metal.c — the Metal target around its parity tests (which run as
 * test_*_metal_emu on the stand-in):
 *   - a --target metal model: greedy tokens through the stand-in equal the
 *     HF transformers trace the CPU target matches (example_generate's),
 *     one command buffer per call, the same dispatches every decode step,
 *     two sessions generating on two threads at once;
 *     without a Metal device (no SPEECHC_LIBMETAL off macOS) a clear error,
 *     from the API and the CLI; a batched step across two sessions (rows in
 *     each other's buffers) equal to stepping them alone;
 *   - the stand-in can fail: MSL outside the subset (double, long long,
 *     CUDA spellings) is refused, a pointer that loses its address space
 *     does not compile, a barrier not every thread reaches is a deadlock, a
 *     simdgroup exchange with lanes missing is divergence, a misaligned
 *     float4 read is a fault, a write past a buffer is caught, a threadgroup
 *     array declared inside a block is refused; and a
 *     correct kernel computes what it should (threadgroup memory, barriers,
 *     simd_sum, two-dimensional grids, the token count by reference).
 *   - the kernels at wider shapes against the CPU build (wide(), below).
 * SPEECHC_METAL_EMU names the stand-in library (ctest sets it).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "metal_dev.h"
#include "backend.h"
#include "speechc.h"

static char tmpdir[64];

typedef struct GenJob {
  sc_model *m;
  const int32_t *prompt;
  int n_prompt;
  int32_t out[16];
  int n, rc;
} GenJob;

/* A session of its own, greedy generation of 16 tokens. */
static void *gen_thread(void *arg) {
  GenJob *j = arg;
  sc_error err = {0};
  sc_session *s = NULL;
  sc_sample_params p = sc_sample_defaults();
  p.greedy = 1;
  j->rc = sc_session_open(j->m, &s, &err);
  if (!j->rc) j->rc = sc_generate(s, j->prompt, j->n_prompt, 16, &p, -1, j->out, &j->n, NULL, NULL, &err);
  sc_session_close(s);
  return NULL;
}

static void test_model(const char *emu) {
  char out[128];
  snprintf(out, sizeof out, "%s/m.so", tmpdir);
  BuildOpts o = build_defaults();
  o.model_dir = "tests/data/llm/qwen3_gqa2_hd32_tied";
  o.out_path = out;
  o.target = "metal";
  o.quiet = 1;
  sc_error err = {0};
  CHECK_MSG(sc_build(&o, &err) == 0, "%s", err.msg);

  /* no device: the API and the CLI say so */
  unsetenv("SPEECHC_LIBMETAL");
  sc_model *m = NULL;
  CHECK(sc_model_open(out, NULL, &m, &err) != 0);
  CHECK_CONTAINS(err.msg, "no Metal device: this model was built with --target metal");
  CHECK_CONTAINS(err.msg, "rebuild with --target cpu");
  const char *bin = getenv("SPEECHC_BIN");
  if (bin) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' run '%s' --ids 1,2 -n 1 > %s/log 2>&1", bin, out, tmpdir);
    int rc = system(cmd);
    CHECK_MSG(WIFEXITED(rc) && WEXITSTATUS(rc) == 3, "speechc run without a Metal device: status %d", rc);
  }
  setenv("SPEECHC_LIBMETAL", "/nonexistent/libmetal.so", 1);
  CHECK(sc_model_open(out, NULL, &m, &err) != 0);
  CHECK_CONTAINS(err.msg, "SPEECHC_LIBMETAL=/nonexistent/libmetal.so cannot be loaded");

  /* the stand-in: the trace's greedy tokens */
  setenv("SPEECHC_LIBMETAL", emu, 1);
  CHECK_MSG(sc_model_open(out, NULL, &m, &err) == 0, "%s", err.msg);
  if (!m) return;
  const char *dn = m->be->device_name(m);
  CHECK(dn && !strcmp(dn, "speechc Metal emulator"));
  sc_session *s = NULL, *s2 = NULL;
  CHECK_MSG(sc_session_open(m, &s, &err) == 0, "%s", err.msg);
  const int32_t prompt[] = {0, 4, 134, 16, 186, 230, 101, 208};
  const int32_t want[] = {111, 17, 145, 233, 252, 95, 92, 171, 131, 226, 124, 167, 128, 54, 160, 205};
  int32_t got[16];
  int n = 0;
  sc_sample_params p = sc_sample_defaults();
  p.greedy = 1;
  CHECK_MSG(sc_generate(s, prompt, 8, 16, &p, -1, got, &n, NULL, NULL, &err) == 0, "%s", err.msg);
  CHECK(n == 16 && !memcmp(got, want, sizeof want));
  /* two sessions generating on two threads at once: each the trace */
  {
    GenJob jobs[2];
    pthread_t th[2];
    for (int k = 0; k < 2; k++) {
      jobs[k] = (GenJob){m, prompt, 8, {0}, 0, -1};
      CHECK(pthread_create(&th[k], NULL, gen_thread, &jobs[k]) == 0);
    }
    for (int k = 0; k < 2; k++) {
      pthread_join(th[k], NULL);
      CHECK_MSG(jobs[k].rc == 0 && jobs[k].n == 16 && !memcmp(jobs[k].out, want, sizeof want),
                "thread %d: rc %d, %d tokens", k, jobs[k].rc, jobs[k].n);
    }
  }
  /* decode steps: the same dispatches each, one command buffer per call */
  long long d0 = rt_metal_dispatches(s);
  CHECK(sc_decode(s, 5, &err) == 0);
  long long d1 = rt_metal_dispatches(s);
  CHECK(sc_decode(s, 6, &err) == 0);
  long long d2 = rt_metal_dispatches(s);
  CHECK_MSG(d1 - d0 > 3 && d2 - d1 == d1 - d0, "dispatches per step: %lld, %lld", d1 - d0, d2 - d1);

  /* a batched step across two sessions: each row in its own session's
   * buffer, reached through GPU addresses; equal to stepping them alone */
  CHECK_MSG(sc_session_open(m, &s2, &err) == 0, "%s", err.msg);
  sc_session *a1 = NULL, *a2 = NULL;
  CHECK(sc_session_open(m, &a1, &err) == 0 && sc_session_open(m, &a2, &err) == 0);
  sc_session_reset(s);
  const int32_t pa[] = {3, 9, 27}, pb[] = {5, 25};
  CHECK(sc_prefill(s, pa, 3, &err) == 0 && sc_prefill(s2, pb, 2, &err) == 0);
  CHECK(sc_prefill(a1, pa, 3, &err) == 0 && sc_prefill(a2, pb, 2, &err) == 0);
  sc_batch *b = NULL;
  CHECK_MSG(sc_batch_new(m, &b, &err) == 0, "sc_batch_new on a metal model: %s", err.msg);
  if (b) {
    CHECK(sc_batch_add(b, s, &err) == 0 && sc_batch_add(b, s2, &err) == 0);
    const int32_t ids[2] = {7, 8};
    CHECK_MSG(sc_batch_step(b, ids, &err) == 0, "%s", err.msg);
    CHECK(sc_decode(a1, 7, &err) == 0 && sc_decode(a2, 8, &err) == 0);
    /* within 1e-5: the several-row kernels sum in another order than the
     * one-row GEMV, as on CUDA (test_batch_cuda_emu) */
    for (int k = 0; k < 2; k++) {
      int V = 0, V2 = 0;
      const float *l0 = sc_logits(k ? s2 : s, &V), *l1 = sc_logits(k ? a2 : a1, &V2);
      double num = 0, den = 0;
      for (int i = 0; i < V && V == V2; i++) {
        num += ((double)l0[i] - l1[i]) * ((double)l0[i] - l1[i]);
        den += (double)l1[i] * l1[i];
      }
      CHECK_MSG(V > 0 && V == V2 && num <= 1e-10 * den, "session %d: batched logits rel err %g", k,
                den > 0 ? sqrt(num / den) : -1.0);
    }
    sc_batch_free(b);
  }
  sc_session_close(a1);
  sc_session_close(a2);
  sc_session_close(s2);
  sc_session_close(s);
  sc_model_close(m);
}

/* ---- the stand-in itself --------------------------------------------------- */

static const sc_metal_api *api;
static void *dev;

/* Compile src, run kernel `name` on nt threads x (gx, gy) groups over one
 * buffer of n floats (filled with 0..n-1), T = value; the buffer back in
 * out.  Returns 0, 1 (library refused: msg), 2 (the run failed: msg). */
static int run_kernel(const char *src, const char *name, unsigned gx, unsigned gy, unsigned nt, int value,
                      float *out, int n, char *msg, size_t size) {
  msg[0] = 0;
  void *lib = api->library_new(dev, src, msg, size);
  if (!lib) return 1;
  void *pipe = api->pipeline_new(dev, lib, name, msg, size);
  void *contents = NULL;
  uint64_t gpu = 0;
  void *buf = api->buffer_new(dev, (size_t)n * 4, &contents, &gpu, msg, size);
  CHECK(pipe && buf && contents && gpu);
  for (int i = 0; i < n; i++) ((float *)contents)[i] = (float)i;
  void *cmd = api->begin(dev, msg, size);
  size_t off = 0;
  api->dispatch(cmd, pipe, gx, gy, nt, 1, &buf, &off, value);
  int rc = api->end(cmd, msg, size) ? 2 : 0;
  if (out) memcpy(out, contents, (size_t)n * 4);
  api->buffer_free(buf);
  api->pipeline_free(pipe);
  api->library_free(lib);
  return rc;
}

#define HEAD "#include <metal_stdlib>\nusing namespace metal;\n"
#define SIG(name) "kernel void " name "(device float *x [[buffer(0)]], constant int &T [[buffer(1)]],\n" \
                  "    uint sc_tid [[thread_position_in_threadgroup]], uint2 sc_bid [[threadgroup_position_in_grid]])"

static void test_stand_in(const char *emu) {
  void *dl = dlopen(emu, RTLD_NOW | RTLD_LOCAL);
  CHECK_MSG(dl != NULL, "%s: %s", emu, dlerror());
  if (!dl) return;
  sc_metal_api_fn get = (sc_metal_api_fn)dlsym(dl, SC_METAL_API_SYMBOL);
  CHECK(get && (api = get()) && api->version == SC_METAL_API_VERSION);
  if (!api) return;
  char name[64], msg[1024];
  CHECK((dev = api->open(name, sizeof name, msg, sizeof msg)) != NULL);

  /* a correct kernel: per group, the sum of its 64 values by simd_sum and a
   * threadgroup array, times T, written at the group's first element; the
   * second grid dimension offsets by 128 */
  const char *good = HEAD SIG("k") " {\n"
                     "  threadgroup float part[2];\n"
                     "  device float *g = x + sc_bid.y * 128 + sc_bid.x * 64;\n"
                     "  const float s = simd_sum(g[sc_tid]);\n"
                     "  if ((sc_tid & 31) == 0) part[sc_tid >> 5] = s;\n"
                     "  threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                     "  if (sc_tid == 0) g[0] = (part[0] + part[1]) * (float)T;\n"
                     "}\n";
  float out[256];
  CHECK_MSG(run_kernel(good, "k", 2, 2, 64, 3, out, 256, msg, sizeof msg) == 0, "%s", msg);
  for (int gi = 0; gi < 4; gi++) {
    double want = 0;
    for (int i = 0; i < 64; i++) want += gi * 64 + i;
    CHECK_MSG(out[gi * 64] == (float)(3 * want) && out[gi * 64 + 1] == gi * 64 + 1, "group %d: %g", gi,
              out[gi * 64]);
  }

  /* refused before compiling: outside the subset */
  static const struct { const char *text, *want; } refused[] = {
      {HEAD SIG("k") " { double d = x[0]; x[0] = (float)d; }\n", "'double'"},
      {HEAD SIG("k") " { long long i = sc_tid; x[i] = 0; }\n", "'long long'"},
      {HEAD SIG("k") " { __syncthreads(); }\n", "'__'"},
      {"#include <metal_stdlib>\n#include <math.h>\n" SIG("k") " { }\n", "anything but <metal_stdlib>"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
    CHECK(run_kernel(refused[i].text, "k", 1, 1, 32, 0, NULL, 64, msg, sizeof msg) == 1);
    CHECK_CONTAINS(msg, refused[i].want);
  }
  const char *nested = HEAD SIG("k") " {\n  if (sc_tid == 0) {\n    threadgroup float s[4];\n    s[0] = x[0];\n  }\n}\n";
  CHECK(run_kernel(nested, "k", 1, 1, 32, 0, NULL, 64, msg, sizeof msg) == 1);
  CHECK_CONTAINS(msg, "inside a block");
  /* does not compile: a device pointer into a thread-space pointer, a
   * threadgroup pointer into a device one */
  const char *lost = HEAD SIG("k") " { float *p = x; p[sc_tid] = 1.0f; }\n";
  CHECK(run_kernel(lost, "k", 1, 1, 32, 0, NULL, 64, msg, sizeof msg) == 1);
  CHECK_CONTAINS(msg, "does not compile");
  const char *mixed = HEAD SIG("k") " {\n  threadgroup float s[32];\n  device float *p = s;\n  p[0] = x[0];\n}\n";
  CHECK(run_kernel(mixed, "k", 1, 1, 32, 0, NULL, 64, msg, sizeof msg) == 1);

  /* fails when run */
  const char *returned = HEAD SIG("k") " {\n  if (sc_tid < 16) return;\n"
                         "  threadgroup_barrier(mem_flags::mem_threadgroup);\n  x[sc_tid] = 1.0f;\n}\n";
  CHECK(run_kernel(returned, "k", 1, 1, 64, 0, NULL, 64, msg, sizeof msg) == 2);
  CHECK_CONTAINS(msg, "not every thread reaches");
  const char *deadlock = HEAD SIG("k") " {\n  if (sc_tid < 32) threadgroup_barrier(mem_flags::mem_threadgroup);\n"
                         "  else simdgroup_barrier(mem_flags::mem_threadgroup);\n  x[sc_tid] = 1.0f;\n}\n";
  CHECK(run_kernel(deadlock, "k", 1, 1, 64, 0, NULL, 64, msg, sizeof msg) == 2);
  CHECK_CONTAINS(msg, "barrier");
  const char *diverge = HEAD SIG("k") " {\n  if (sc_tid < 16) x[sc_tid] = simd_sum(x[sc_tid]);\n}\n";
  CHECK(run_kernel(diverge, "k", 1, 1, 32, 0, NULL, 64, msg, sizeof msg) == 2);
  CHECK_CONTAINS(msg, "not all 32 lanes");
  const char *misaligned = HEAD SIG("k") " {\n  const float4 v = *(const device float4 *)(x + 1);\n"
                           "  x[sc_tid] = v.x;\n}\n";
  CHECK(run_kernel(misaligned, "k", 1, 1, 32, 0, NULL, 64, msg, sizeof msg) == 2);
  CHECK_CONTAINS(msg, "misaligned");
  const char *past = HEAD SIG("k") " { x[64 + sc_tid] = 1.0f; }\n";
  CHECK(run_kernel(past, "k", 1, 1, 32, 0, NULL, 64, msg, sizeof msg) == 2);
  CHECK_CONTAINS(msg, "past the end of a buffer");
  api->close(dev);
}

/* The kernels at wider shapes than the tiny checkpoints', against the CPU
 * build of the same band: bench/make_random_ckpt's qwen3-wide-tiny (the
 * prompt GEMM over 2 and 3 column steps of 256, the last partial, and
 * token tiles of 16, 16 and 8) in f32 and bf16, and qwen35-moe-wide-tiny
 * (GDN heads of 128, attention heads of 256 with the output gate, top 8
 * of 8 experts; the chunkwise delta rule with --delta-chunk 8, whose
 * arrays must fit Metal's 32 KiB of threadgroup memory) in f32: a 40-token
 * prompt in one prefill call, then 4 decode steps; logits within 1e-4
 * relative (max |diff| / max |cpu|), every band (the CPU build's bf16
 * activations kept in f32, as the GPU kernels keep them). */
static void wide(const char *kind, DType band, int delta_chunk) {
  char ckpt[128], cmd[1200], tool[512];
  const char *bin = getenv("SPEECHC_BIN");
  if (!bin) {
    CHECK_MSG(0, "SPEECHC_BIN is not set");
    return;
  }
  snprintf(ckpt, sizeof ckpt, "%s/%s", tmpdir, kind);
  snprintf(tool, sizeof tool, "%s", bin);
  char *slash = strrchr(tool, '/');
  snprintf(slash ? slash + 1 : tool, sizeof tool - (size_t)(slash ? slash + 1 - tool : 0), "make_random_ckpt");
  snprintf(cmd, sizeof cmd, "test -d '%s' || '%s' %s '%s' --dtype f32 > /dev/null", ckpt, tool, kind, ckpt);
  if (system(cmd)) {
    CHECK_MSG(0, "make_random_ckpt %s failed", kind);
    return;
  }
  enum { V = 512, P = 40, STEPS = 5 };
  int32_t prompt[P];
  for (int i = 0; i < P; i++) prompt[i] = (i * 53 + 7) % V;
  float *logits[2] = {calloc((size_t)STEPS * V, sizeof(float)), calloc((size_t)STEPS * V, sizeof(float))};
  for (int k = 0; k < 2; k++) { /* cpu, metal */
    char out[256];
    snprintf(out, sizeof out, "%s/%s_%s_%d.so", tmpdir, kind, ir_dtype_name(band), k);
    BuildOpts o = build_defaults();
    o.model_dir = ckpt;
    o.out_path = out;
    o.target = k ? "metal" : "cpu";
    o.band = band;
    o.max_context = 64;
    o.prefill_chunk = P;
    o.delta_chunk = k ? delta_chunk : 0;
    o.quiet = 1;
    sc_error err = {0};
    sc_model *m = NULL;
    sc_session *s = NULL;
    int rc = sc_build(&o, &err);
    if (!rc) rc = sc_model_open(out, NULL, &m, &err);
    /* the CPU's bf16 prompts keep f32 activations, as the GPU kernels do
     * (else AMX / AVX512-BF16 machines round them, and the two builds
     * differ by that, not by the kernels) */
    if (!k) setenv("SPEECHC_BF16_ACT", "off", 1);
    if (!rc) rc = sc_session_open(m, &s, &err);
    unsetenv("SPEECHC_BF16_ACT");
    if (!rc) rc = sc_prefill(s, prompt, P, &err);
    if (!rc) memcpy(logits[k], sc_logits(s, NULL), V * sizeof(float));
    for (int t = 1; t < STEPS && !rc; t++) {
      rc = sc_decode(s, prompt[t], &err);
      if (!rc) memcpy(logits[k] + (size_t)t * V, sc_logits(s, NULL), V * sizeof(float));
    }
    CHECK_MSG(rc == 0, "%s %s %s: %s", kind, o.target, ir_dtype_name(band), err.msg);
    sc_session_close(s);
    sc_model_close(m);
  }
  double worst = 0, worst_cos = 1;
  for (int t = 0; t < STEPS; t++) {
    double dmax = 0, cmax = 0, dot = 0, na = 0, nb = 0;
    for (int v = 0; v < V; v++) {
      const double a = logits[0][t * V + v], b = logits[1][t * V + v], d = fabs(b - a);
      if (d > dmax || d != d) dmax = d;
      if (fabs(a) > cmax) cmax = fabs(a);
      dot += a * b, na += a * a, nb += b * b;
    }
    const double e = cmax > 0 ? dmax / cmax : dmax, cs = dot / sqrt(na * nb);
    if (!(e <= worst)) worst = e;
    if (!(cs >= worst_cos)) worst_cos = cs;
  }
  printf("  %s %s: 40-token prefill + 4 decode steps on metal, worst logits vs the cpu: rel err %.2g, "
         "cosine %.7f\n", kind, ir_dtype_name(band), worst, worst_cos);
  CHECK_MSG(worst <= 1e-4, "%s %s: logits rel err %g > 1e-4", kind, ir_dtype_name(band), worst);
  free(logits[0]);
  free(logits[1]);
}

int main(void) {
  const char *emu = getenv("SPEECHC_METAL_EMU");
  CHECK_MSG(emu && *emu, "SPEECHC_METAL_EMU must name the stand-in (ctest sets it)");
  if (!emu || !*emu) CHECK_DONE();
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc-metal-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  /* the stand-in compiles each library in a directory under TMPDIR: all
   * of them must be gone once the libraries are loaded */
  char emu_tmp[160];
  snprintf(emu_tmp, sizeof emu_tmp, "%s/emu-tmp", tmpdir);
  CHECK(mkdir(emu_tmp, 0700) == 0);
  setenv("TMPDIR", emu_tmp, 1);
  test_stand_in(emu);
  test_model(emu);
  wide("qwen3-wide-tiny", DT_F32, 0);
  wide("qwen3-wide-tiny", DT_BF16, 0);
  wide("qwen35-moe-wide-tiny", DT_F32, 8);
  { /* --delta-chunk 16 at heads of 128 needs 44 KiB: refused by name, with the limit */
    char out[256];
    snprintf(out, sizeof out, "%s/gdn16.so", tmpdir);
    char ckpt[128];
    snprintf(ckpt, sizeof ckpt, "%s/qwen35-moe-wide-tiny", tmpdir);
    BuildOpts o = build_defaults();
    o.model_dir = ckpt;
    o.out_path = out;
    o.target = "metal";
    o.max_context = 64;
    o.prefill_chunk = 40;
    o.delta_chunk = 16;
    o.quiet = 1;
    sc_error err = {0};
    CHECK(sc_build(&o, &err) == SC_EINPUT);
    CHECK_CONTAINS(err.msg, "Metal target: layer0.delta_rule: the delta rule's block needs 45312 bytes of shared "
                   "memory (head_dim 128, chunk 16), above the 32 KiB a kernel may declare");
  }
  { /* nothing left behind by the stand-in's compiles */
    DIR *d = opendir(emu_tmp);
    CHECK(d != NULL);
    int left = 0;
    for (struct dirent *e; d && (e = readdir(d));)
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        fprintf(stderr, "left behind under TMPDIR: %s\n", e->d_name);
        left++;
      }
    if (d) closedir(d);
    CHECK(left == 0);
  }
  unsetenv("TMPDIR");
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) {}
  CHECK_DONE();
}
