/*
 * test_sessions.c — two sessions on one model, run in two threads at once,
 * give exactly what they give when run one after the other.
 *
 * Every tiny checkpoint of tests/data/llm is built with libtcc and with gcc.
 * Two different workloads (the trace's prompt and continuation; another
 * prompt and other tokens) are first run one after the other on one
 * thread, then several times on two sessions of the same sc_model in two
 * threads started together.  Each workload records the logits after its
 * prefill and after each decode step, then the tokens of a seeded sampling
 * run (sc_generate with temperature, top-k and top-p); both must match the
 * sequential run bit for bit.  Sessions with one kernel thread and with two
 * (each session its own pool) are both covered.  scripts/tsan.sh runs this
 * test under ThreadSanitizer, which must report nothing.
 *
 * And the room a context leaves (test_room): sc_generate and
 * sc_generate_batch make exactly the tokens that fit (max_context - prompt
 * + 1, less what the session already holds), and one more is SC_EUSAGE
 * before any work, naming the numbers.
 */
#include <pthread.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "parity_util.h"
#include "speechc.h"

#define N_DECODE 8
#define N_GEN 8
#define ROUNDS 3

static const char *const models[] = {"qwen3_gqa2_hd32_tied", "qwen3_gqa4_hd16_bf16", "llama_gqa4_sharded"};

typedef struct Work {
  sc_model *m;
  int32_t prompt[64];
  int n_prompt;
  int32_t feed[N_DECODE];   /* tokens decoded after the prompt */
  int vocab;
  /* results */
  float *rows;              /* [(1 + N_DECODE) * vocab] logits */
  int32_t gen[N_GEN];
  int n_gen;
  int rc;
  char msg[1100];
  pthread_barrier_t *start; /* both threads begin together (NULL: sequential) */
} Work;

static void *run_work(void *arg) {
  Work *w = arg;
  sc_session *s = NULL;
  sc_error err = {0};
  w->rc = sc_session_open(w->m, &s, &err);
  if (w->start) pthread_barrier_wait(w->start);
  if (!w->rc) w->rc = sc_prefill(s, w->prompt, w->n_prompt, &err);
  if (!w->rc) memcpy(w->rows, sc_logits(s, NULL), (size_t)w->vocab * 4);
  for (int i = 0; i < N_DECODE && !w->rc; i++) {
    w->rc = sc_decode(s, w->feed[i], &err);
    if (!w->rc) memcpy(w->rows + (size_t)(i + 1) * w->vocab, sc_logits(s, NULL), (size_t)w->vocab * 4);
  }
  if (!w->rc) {
    sc_session_reset(s);
    sc_sample_params p = sc_sample_defaults();
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.9f;
    p.seed = 1234;
    w->rc = sc_generate(s, w->prompt, w->n_prompt, N_GEN, &p, -1, w->gen, &w->n_gen, NULL, NULL, &err);
  }
  if (w->rc) snprintf(w->msg, sizeof w->msg, "%s", err.msg);
  sc_session_close(s);
  return NULL;
}

/* Two workloads on one model: trace-driven (a) and its mirror image (b). */
static void make_work(Work *a, Work *b, sc_model *m, const Trace *t) {
  memset(a, 0, sizeof *a);
  memset(b, 0, sizeof *b);
  a->m = b->m = m;
  a->vocab = b->vocab = t->vocab;
  a->n_prompt = b->n_prompt = t->n_prompt;
  for (int i = 0; i < t->n_prompt; i++) {
    a->prompt[i] = t->prompt[i];
    b->prompt[i] = t->prompt[t->n_prompt - 1 - i];
  }
  for (int i = 0; i < N_DECODE; i++) {
    a->feed[i] = t->greedy[i % t->n_greedy];
    b->feed[i] = (int32_t)((i * 37 + 11) % t->vocab);
  }
  size_t bytes = (size_t)(1 + N_DECODE) * t->vocab * 4;
  a->rows = calloc(1, bytes);
  b->rows = calloc(1, bytes);
}

static void same(const Work *seq, const Work *par, const char *what) {
  CHECK_MSG(seq->rc == 0 && par->rc == 0, "%s: %s%s", what, seq->msg, par->msg);
  CHECK_MSG(!memcmp(seq->rows, par->rows, (size_t)(1 + N_DECODE) * seq->vocab * 4),
            "%s: logits differ between the sequential and the two-thread runs", what);
  CHECK_MSG(seq->n_gen == par->n_gen && !memcmp(seq->gen, par->gen, sizeof seq->gen),
            "%s: sampled tokens differ between the sequential and the two-thread runs", what);
}

static void test_model(const char *so, const Trace *t, int threads, const char *what) {
  sc_open_opts opts = {.verify_weights = 1, .threads = threads};
  sc_model *m = NULL;
  sc_error err = {0};
  CHECK_MSG(sc_model_open(so, &opts, &m, &err) == 0, "%s: %s", what, err.msg);
  if (!m) return;
  Work sa, sb;
  make_work(&sa, &sb, m, t);
  run_work(&sa);
  run_work(&sb);
  CHECK_MSG(sa.rc == 0 && sb.rc == 0, "%s: sequential: %s%s", what, sa.msg, sb.msg);
  /* the workloads must differ, or a mix-up between sessions would go unseen */
  CHECK_MSG(memcmp(sa.rows, sb.rows, (size_t)t->vocab * 4) != 0, "%s: both workloads give the same logits", what);
  for (int r = 0; r < ROUNDS; r++) {
    Work pa, pb;
    make_work(&pa, &pb, m, t);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 2);
    pa.start = pb.start = &start;
    pthread_t ta, tb;
    int ok = !pthread_create(&ta, NULL, run_work, &pa);
    ok = ok && !pthread_create(&tb, NULL, run_work, &pb);
    CHECK_MSG(ok, "%s: cannot start threads", what);
    if (ok) {
      pthread_join(ta, NULL);
      pthread_join(tb, NULL);
      same(&sa, &pa, what);
      same(&sb, &pb, what);
    }
    pthread_barrier_destroy(&start);
    free(pa.rows);
    free(pb.rows);
  }
  free(sa.rows);
  free(sb.rows);
  sc_model_close(m);
}

static void test_room(const char *tmpdir) {
  char so[512];
  snprintf(so, sizeof so, "%s/room.so", tmpdir);
  BuildOpts o = build_defaults();
  o.model_dir = "tests/data/llm/qwen3_gqa2_hd32_tied";
  o.out_path = so;
  o.cc = "tcc";
  o.quiet = 1;
  o.max_context = 16;
  sc_error err = {0};
  CHECK_MSG(sc_build(&o, &err) == 0, "room: %s", err.msg);
  sc_model *m = NULL;
  sc_session *s = NULL, *s2 = NULL;
  CHECK_MSG(sc_model_open(so, NULL, &m, &err) == 0 && sc_session_open(m, &s, &err) == 0 &&
            sc_session_open(m, &s2, &err) == 0, "room: %s", err.msg);
  if (!s2) return;
  sc_sample_params p = sc_sample_defaults();
  p.greedy = 1;
  const int32_t prompt[4] = {1, 2, 3, 4};
  int32_t out[32];
  int n = -1;
  /* 4 prompt tokens at 0..3, new ones decoded at 4..15: 13 fit */
  CHECK(sc_generate(s, prompt, 4, 14, &p, -1, out, &n, NULL, NULL, &err) == SC_EUSAGE && n == 0);
  CHECK_CONTAINS(err.msg, "n_new 14: the prompt's 4 tokens leave room for 13 new tokens in max_context 16");
  sc_session_reset(s);
  CHECK_MSG(sc_generate(s, prompt, 4, 13, &p, -1, out, &n, NULL, NULL, &err) == 0 && n == 13, "13 tokens: %s",
            err.msg);
  /* a session that goes on: 4 + 4 positions held (a call's last token is
   * not decoded), 2 more prompt tokens at 8, 9, new ones at 10..15 */
  sc_session_reset(s);
  CHECK(sc_generate(s, prompt, 4, 5, &p, -1, out, &n, NULL, NULL, &err) == 0 && n == 5);
  CHECK(sc_generate(s, prompt, 2, 8, &p, -1, out, &n, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "n_new 8: the prompt's 2 tokens after the session's 8 leave room for 7 new tokens");
  CHECK_MSG(sc_generate(s, prompt, 2, 7, &p, -1, out, &n, NULL, NULL, &err) == 0 && n == 7, "%s", err.msg);
  /* the batch: the same room per request, checked before any request runs */
  sc_session_reset(s);
  sc_gen_request r[2] = {{s, prompt, 4, 13, p, -1, out, 0}, {s2, prompt, 2, 16, p, -1, out + 16, 0}};
  CHECK(sc_generate_batch(m, r, 2, &err) == SC_EUSAGE && r[0].n_out == 0);
  CHECK_CONTAINS(err.msg, "n_new 16: the prompt's 2 tokens leave room for 15 new tokens in max_context 16");
  CHECK_CONTAINS(err.msg, "(request 1)");
  r[1].n_new = 15;
  CHECK_MSG(sc_generate_batch(m, r, 2, &err) == 0 && r[0].n_out == 13 && r[1].n_out == 15, "batch: %s", err.msg);
  /* arguments sc_generate cannot use: refused before the session moves */
  sc_session_reset(s);
  CHECK(sc_generate(s, prompt, -1, 2, &p, -1, out, &n, NULL, NULL, &err) == SC_EUSAGE && n == 0);
  CHECK_CONTAINS(err.msg, "a prompt of at least one token");
  CHECK(sc_generate(s, NULL, 4, 2, &p, -1, out, &n, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "at NULL");
  CHECK(sc_generate(s, prompt, 4, 2, &p, -1, NULL, &n, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "out NULL");
  CHECK(sc_prefill(s, NULL, 2, &err) == SC_EUSAGE && sc_session_pos(s) == 0);
  CHECK_CONTAINS(err.msg, "no tokens given (ids NULL)");
  /* err may be NULL: the code alone, no crash; no session is an error */
  CHECK(sc_decode(s, -1, NULL) == SC_EUSAGE && sc_prefill(s, prompt, 0, NULL) == SC_EUSAGE &&
        sc_generate(s, NULL, 4, 2, &p, -1, out, &n, NULL, NULL, NULL) == SC_EUSAGE && sc_session_pos(s) == 0);
  CHECK(sc_prefill(NULL, prompt, 2, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "sc_prefill: no session");
  CHECK(sc_decode(NULL, 1, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "sc_decode: no session");
  sc_model *none = NULL;
  CHECK(sc_model_open(NULL, NULL, &none, &err) == SC_EUSAGE && !none);
  CHECK_CONTAINS(err.msg, "sc_model_open: no path");
  CHECK(sc_session_open(m, NULL, NULL) == SC_EUSAGE && sc_batch_new(m, NULL, NULL) == SC_EUSAGE);
  CHECK(sc_generate(s, prompt, 4, 2, &p, -1, out, NULL, NULL, NULL, &err) == SC_EUSAGE && sc_session_pos(s) == 0);
  CHECK_CONTAINS(err.msg, "sc_generate: no n_out");
  /* the accessors and the frees take NULL */
  int nv = 7;
  sc_model_info mi = {.vocab = 3};
  sc_model_get_info(NULL, &mi);
  CHECK(!sc_logits(NULL, &nv) && nv == 0 && sc_session_pos(NULL) == -1 && mi.vocab == 0);
  CHECK(sc_batch_size(NULL) == 0 && !sc_batch_session(NULL, 0) && sc_batch_remove(NULL, s) != 0);
  sc_session_reset(NULL);
  sc_session_close(NULL);
  sc_batch_free(NULL);
  /* a batch with sessions and no ids: refused, not read */
  sc_session *s3 = NULL;
  sc_batch *nb = NULL;
  CHECK(sc_session_open(m, &s3, &err) == 0 && sc_batch_new(m, &nb, &err) == 0 && sc_batch_add(nb, s3, &err) == 0);
  CHECK(sc_batch_step(nb, NULL, &err) == SC_EUSAGE && sc_session_pos(s3) == 0);
  CHECK_CONTAINS(err.msg, "sc_batch_step: no ids for the batch's 1 sessions");
  CHECK(sc_batch_step(NULL, prompt, NULL) == SC_EUSAGE);
  sc_batch_free(nb);
  sc_session_close(s3);
  /* the model closed before its sessions and its batch: they keep it
   * until they close (ASan: no use after free) and still run */
  sc_batch *lb = NULL;
  CHECK_MSG(sc_batch_new(m, &lb, &err) == 0, "%s", err.msg);
  sc_model_close(m);
  CHECK_MSG(sc_generate(s, prompt, 4, 3, &p, -1, out, &n, NULL, NULL, &err) == 0 && n == 3, "after close: %s",
            err.msg);
  sc_session_close(s);
  sc_session_reset(s2);
  CHECK_MSG(lb && sc_prefill(s2, prompt, 4, &err) == 0 && sc_batch_add(lb, s2, &err) == 0 &&
                sc_batch_step(lb, prompt, &err) == 0 && sc_session_pos(s2) == 5, "a batch after close: %s", err.msg);
  sc_session_close(s2); /* the batch still holds the model */
  CHECK(lb && sc_batch_remove(lb, s2) == 0 && sc_batch_step(lb, prompt, &err) == 0);
  sc_batch_free(lb);
}

int main(void) {
  char tmpdir[] = "/tmp/speechc-sessions-XXXXXX";
  if (!mkdtemp(tmpdir)) return 1;
  static const char *const ccs[] = {"tcc", "gcc"};
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/data/llm/%s", models[mi]);
    Trace t;
    CHECK_MSG(trace_load(dir, &t) == 0, "%s: cannot load the trace", dir);
    if (t.n_greedy < 1) continue;
    for (size_t ci = 0; ci < 2; ci++) {
      char so[512], what[512];
      snprintf(so, sizeof so, "%s/%s.%s.so", tmpdir, models[mi], ccs[ci]);
      BuildOpts o = build_defaults();
      o.model_dir = dir;
      o.out_path = so;
      o.cc = ccs[ci];
      o.quiet = 1;
      sc_error err = {0};
      CHECK_MSG(sc_build(&o, &err) == 0, "%s (%s): %s", dir, ccs[ci], err.msg);
      for (int threads = 1; threads <= 2; threads++) {
        snprintf(what, sizeof what, "%s, %s, %d kernel thread%s per session", models[mi], ccs[ci],
                 threads, threads > 1 ? "s" : "");
        test_model(so, &t, threads, what);
      }
      unlink(so);
      char wts[520];
      glob_t g;
      snprintf(wts, sizeof wts, "%.*s.*.weights", (int)(strlen(so) - 3), so);
      if (glob(wts, 0, NULL, &g) == 0)
        for (size_t k = 0; k < g.gl_pathc; k++) unlink(g.gl_pathv[k]);
      globfree(&g);
    }
    free(t.logits);
  }
  test_room(tmpdir);
  glob_t g;
  char pat[300];
  snprintf(pat, sizeof pat, "%s/room*", tmpdir);
  if (glob(pat, 0, NULL, &g) == 0)
    for (size_t k = 0; k < g.gl_pathc; k++) unlink(g.gl_pathv[k]);
  globfree(&g);
  rmdir(tmpdir);
  CHECK_DONE();
}
