/*
 * test_threads.c — the kernel thread pool, and results that do not depend
 * on the thread count.
 *
 * The pool: every chunk of a job runs exactly once, and all are finished
 * when sc_pool_run returns; with workers, chunks run on more than one
 * thread; limited (sc_pool_limit) to n threads, on n at most.
 *
 * Every tiny checkpoint is built once per band (f32, bf16, q8_0, q4_0; the
 * kernels are the runtime's whatever the toolchain, so libtcc builds) and
 * run with 1, 2 and 3 kernel threads (chunks of rows are claimed by
 * whichever thread is free, so the split differs from run to run): the
 * prompt through prefill, then the greedy continuation through decode.  All logits must be bit-identical to the
 * single-threaded run, and the sessions must really hold that many threads
 * (checked through the kernel context's pool).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "model_internal.h"
#include "parity_util.h"
#include "pool.h"
#include "speechc.h"

static const char *const models[] = {"qwen3_gqa2_hd32_tied", "qwen3_gqa4_hd16_bf16", "llama_gqa4_sharded"};
static const DType bands[] = {DT_F32, DT_BF16, DT_Q8_0, DT_Q4_0};

static char tmpdir[64];

/* ---- the pool itself ----------------------------------------------------- */

typedef struct Job {
  int id;
  int out[64];
  atomic_int runs[64];
  pthread_t who[64];
} Job;

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Each chunk works ~20 us, so a caller that returned before its workers
 * finished would see unwritten slots. */
static void job_chunk(void *arg, int c, int n) {
  Job *j = arg;
  double t0 = seconds();
  while (seconds() - t0 < 20e-6) {}
  j->out[c] = j->id * 1000 + n;
  j->who[c] = pthread_self();
  atomic_fetch_add(&j->runs[c], 1);
}

/* Every chunk runs exactly once and is finished when sc_pool_run returns;
 * the workers do take chunks. */
static void test_pool(void) {
  CHECK(sc_pool_threads(NULL) == 1);
  for (int threads = 1; threads <= 3; threads++) {
    sc_pool *p = sc_pool_new(threads);
    CHECK(p && sc_pool_threads(p) == threads);
    int shared = 0;
    static Job j;
    for (int id = 0; id < 300; id++) {
      int n = 1 + id % 40;
      memset(&j, 0, sizeof j);
      j.id = id;
      sc_pool_run(p, job_chunk, &j, n);
      for (int c = 0; c < n; c++) {
        CHECK_MSG(j.out[c] == id * 1000 + n && atomic_load(&j.runs[c]) == 1,
                  "%d threads, job %d: chunk %d of %d ran %d times, out %d", threads, id, c, n,
                  atomic_load(&j.runs[c]), j.out[c]);
        if (!pthread_equal(j.who[c], j.who[0])) shared = 1;
      }
    }
    CHECK_MSG(shared == (threads > 1), "%d threads: chunks ran on %s thread", threads,
              shared ? "more than one" : "one");
    sc_pool_free(p);
  }
  CHECK(sc_physical_cores() >= 1);
}

/* sc_pool_limit: a pool of 3 limited to 1 runs every chunk on the caller,
 * limited to 2 on at most two threads (the third worker asleep), and
 * back to 3 on all; every chunk still once, in every state. */
static void test_pool_limit(void) {
  sc_pool *p = sc_pool_new(3);
  CHECK(p != NULL);
  if (!p) return;
  static Job j;
  const int limits[] = {1, 2, 3, 0, 7, 2, 1, 3};
  for (int k = 0; k < 8; k++) {
    sc_pool_limit(p, limits[k]);
    const int want = limits[k] < 1 ? 1 : limits[k] > 3 ? 3 : limits[k];
    CHECK(sc_pool_threads(p) == want);
    int most = 0;
    for (int id = 0; id < 100; id++) {
      const int n = 24;
      memset(&j, 0, sizeof j);
      j.id = id;
      sc_pool_run(p, job_chunk, &j, n);
      pthread_t seen[3];
      int n_seen = 0;
      for (int c = 0; c < n; c++) {
        CHECK(j.out[c] == id * 1000 + n && atomic_load(&j.runs[c]) == 1);
        int known = 0;
        for (int i = 0; i < n_seen; i++) known |= pthread_equal(seen[i], j.who[c]);
        if (!known && n_seen < 3) seen[n_seen++] = j.who[c];
        else if (!known) n_seen = 4; /* a fourth thread: impossible */
      }
      if (n_seen > most) most = n_seen;
      if (want == 1) CHECK(n_seen == 1 && pthread_equal(seen[0], pthread_self()));
    }
    CHECK_MSG(most <= want, "limit %d: chunks ran on %d threads", want, most);
  }
  sc_pool_free(p);
  sc_pool_limit(NULL, 2); /* nothing */
}

/* Prefill the prompt (chunks of 3), then decode the continuation; rows
 * receives the logits after the prefill and after each decode. */
static int run_threads(const char *so, const Trace *t, int threads, float *rows) {
  sc_open_opts opts = {.verify_weights = 1, .threads = threads};
  sc_model *m = NULL;
  sc_session *s = NULL;
  sc_error err = {0};
  CHECK_MSG(sc_model_open(so, &opts, &m, &err) == 0, "%s", err.msg);
  if (!m) return 1;
  CHECK_MSG(sc_session_open(m, &s, &err) == 0, "%s", err.msg);
  if (!s) { sc_model_close(m); return 1; }
  CHECK_MSG(sc_pool_threads(s->kctx.pool) == threads, "%s: session has %d threads, asked %d", so,
            sc_pool_threads(s->kctx.pool), threads);
  int V = t->vocab;
  CHECK_MSG(sc_prefill(s, t->prompt, t->n_prompt, &err) == 0, "%s", err.msg);
  memcpy(rows, sc_logits(s, NULL), (size_t)V * 4);
  for (int i = 0; i + 1 < t->n_greedy; i++) {
    CHECK_MSG(sc_decode(s, t->greedy[i], &err) == 0, "%s", err.msg);
    memcpy(rows + (size_t)(i + 1) * V, sc_logits(s, NULL), (size_t)V * 4);
  }
  sc_session_close(s);
  sc_model_close(m);
  return 0;
}

int main(void) {
  test_pool();
  test_pool_limit();
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc-threads-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++)
    for (size_t bi = 0; bi < sizeof bands / sizeof *bands; bi++) {
      char dir[256], so[512];
      snprintf(dir, sizeof dir, "tests/data/llm/%s", models[mi]);
      snprintf(so, sizeof so, "%s/%s_%s.so", tmpdir, models[mi], ir_dtype_name(bands[bi]));
      Trace t;
      CHECK(trace_load(dir, &t) == 0);
      BuildOpts o = build_defaults();
      o.model_dir = dir;
      o.out_path = so;
      o.cc = "tcc";
      o.band = bands[bi];
      o.quiet = 1;
      o.max_context = 64;
      o.prefill_chunk = 3;
      sc_error err = {0};
      int rc = sc_build(&o, &err);
      CHECK_MSG(rc == 0, "build %s: %s", so, err.msg);
      size_t n = (size_t)t.n_greedy * t.vocab;
      float *one = calloc(n, 4), *many = calloc(n, 4);
      if (!rc && !run_threads(so, &t, 1, one))
        for (int threads = 2; threads <= 3; threads++) {
          memset(many, 0, n * 4);
          run_threads(so, &t, threads, many);
          for (int r = 0; r < t.n_greedy; r++)
            CHECK_MSG(!memcmp(one + (size_t)r * t.vocab, many + (size_t)r * t.vocab, (size_t)t.vocab * 4),
                      "%s %s: %d threads, logits row %d differ from 1 thread", models[mi],
                      ir_dtype_name(bands[bi]), threads, r);
        }
      free(one);
      free(many);
      free(t.logits);
    }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) {}
  CHECK_DONE();
}
