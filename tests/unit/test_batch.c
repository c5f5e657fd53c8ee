/*
 * test_batch.c — batched decode (sc_batch_*, the "decode_batch" entry):
 * every session of a batch ends each step with the logits and position
 * sc_decode would have left it, bit for bit.
 *
 * For each band (f32, bf16, q8_0, q4_0) the trained tiny Qwen3 of
 * tests/data/llm (hidden 128: q8_0 / q4_0 rows of whole blocks, and wide
 * enough that OpenBLAS's f32 order differs from a row alone) is built with
 * --max-batch 8, and f32 once more with 32 (17 rows in one call: OpenBLAS
 * would take them, and must not).  Batches of 1, 2, 3, 8 and 17 sessions (17: three calls
 * of the entry), each session with a prompt of its own length, step 5
 * times on tokens that differ per session and step; a twin of each session
 * takes the same tokens through sc_decode, alone.  Then a batch whose
 * sessions join and leave between steps (one joins fresh, at position 0
 * after a one-token prompt).  Refusals: a token outside the vocabulary
 * (nothing moves), a session of another model, one added twice, a model
 * built with --max-batch 1 (no batch entry).  The Gated DeltaNet hybrids
 * of tests/data/gdn (dense, MoE with a shared expert, fused experts; f32
 * and q4_0) the same way: each row's conv window and recurrent state are
 * its own session's (on the emulators f32 only).  sc_generate_batch on
 * every model: six requests differing in prompt, length (0 and 7 of 12),
 * sampling (greedy, temperature / top-k, top-p, repetition penalty) and
 * eos give each the tokens sc_generate gives it alone; shared sessions and
 * a model without the batch entry are refused.  On the CPU the batches
 * again with SPEECHC_ISA=portable and avx2 (where the CPU has it), each
 * against sc_decode with the same kernels.
 * SPEECHC_TEST_TARGET=cuda (test_batch_cuda_emu): the same on --target
 * cuda builds run by the CUDA emulator, logits within 1e-5 (same()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "model_internal.h"
#include "parity_util.h"

enum { MAXS = 17, STEPS = 5 };

static char tmpdir[64];

static sc_model *build_dir(const char *dir, DType band, int max_batch, const char *tag) {
  char out[256];
  snprintf(out, sizeof out, "%s/%s.so", tmpdir, tag);
  BuildOpts o = build_defaults();
  o.model_dir = dir;
  o.out_path = out;
  o.quiet = 1;
  o.band = band;
  o.target = test_target();
  o.max_batch = max_batch;
  o.max_context = 64;
  sc_error err = {0};
  int rc = sc_build(&o, &err);
  CHECK_MSG(rc == 0, "build %s: %s", tag, err.msg);
  sc_model *m = NULL;
  if (!rc) CHECK_MSG(sc_model_open(out, NULL, &m, &err) == 0, "%s", err.msg);
  return m;
}

static sc_model *build(DType band, int max_batch, const char *tag) {
  return build_dir("tests/data/llm/qwen3_trained_tiny", band, max_batch, tag);
}

/* Session i's prompt: 1 + (3i mod 7) tokens. */
static void prompt(sc_session *s, int i, int vocab) {
  int32_t ids[8];
  const int n = 1 + (3 * i) % 7;
  for (int k = 0; k < n; k++) ids[k] = (37 * i + 11 * k + 5) % vocab;
  sc_error err = {0};
  CHECK_MSG(sc_prefill(s, ids, n, &err) == 0, "prompt %d: %s", i, err.msg);
}

static int token(int i, int step, int vocab) { return (53 * i + 29 * step + 7) % vocab; }

/* The batch's session and its twin agree: position and every logit's bits
 * on the CPU.  --target cuda makes no such promise (its prompt and decode
 * kernels sum in other orders than its one-token ones): there the logits
 * agree within 1e-5, relative, and so does everything the rows carry. */
static void same(sc_session *got, sc_session *want, const char *what, int i, int step) {
  int vocab = 0;
  const float *a = sc_logits(got, &vocab), *b = sc_logits(want, NULL);
  CHECK_MSG(sc_session_pos(got) == sc_session_pos(want), "%s: session %d step %d: position %d, alone %d", what, i,
            step, sc_session_pos(got), sc_session_pos(want));
  if (strcmp(test_target(), "cpu")) {
    const double e = rel_err(a, b, vocab);
    CHECK_MSG(e <= 1e-5, "%s: session %d step %d: logits %g from sc_decode's, relative", what, i, step, e);
    return;
  }
  CHECK_MSG(!memcmp(a, b, (size_t)vocab * sizeof *a), "%s: session %d step %d: logits differ from sc_decode's",
            what, i, step);
}

static void sizes(sc_model *m, const char *band) {
  static const int batch[] = {1, 2, 3, 8, 17};
  sc_model_info info;
  sc_model_get_info(m, &info);
  const int vocab = info.vocab;
  sc_error err = {0};
  for (size_t c = 0; c < sizeof batch / sizeof *batch; c++) {
    const int B = batch[c];
    sc_session *s[MAXS] = {0}, *t[MAXS] = {0};
    sc_batch *b = NULL;
    CHECK_MSG(sc_batch_new(m, &b, &err) == 0, "%s", err.msg);
    if (!b) return;
    for (int i = 0; i < B; i++) {
      CHECK_MSG(sc_session_open(m, &s[i], &err) == 0 && sc_session_open(m, &t[i], &err) == 0, "%s", err.msg);
      prompt(s[i], i, vocab);
      prompt(t[i], i, vocab);
      CHECK_MSG(sc_batch_add(b, s[i], &err) == 0, "%s", err.msg);
    }
    CHECK(sc_batch_size(b) == B);
    for (int step = 0; step < STEPS; step++) {
      int32_t ids[MAXS];
      for (int i = 0; i < B; i++) ids[i] = token(i, step, vocab);
      CHECK_MSG(sc_batch_step(b, ids, &err) == 0, "%s B %d step %d: %s", band, B, step, err.msg);
      for (int i = 0; i < B; i++) {
        CHECK_MSG(sc_decode(t[i], ids[i], &err) == 0, "%s", err.msg);
        char what[64];
        snprintf(what, sizeof what, "%s, batch of %d", band, B);
        same(s[i], t[i], what, i, step);
      }
    }
    sc_batch_free(b);
    for (int i = 0; i < B; i++) sc_session_close(s[i]), sc_session_close(t[i]);
  }
}

/* Sessions join and leave between steps; a bad token moves nothing. */
static void churn(sc_model *m, const char *band) {
  enum { N = 6 };
  sc_model_info info;
  sc_model_get_info(m, &info);
  const int vocab = info.vocab;
  sc_error err = {0};
  sc_session *s[N] = {0}, *t[N] = {0};
  sc_batch *b = NULL;
  CHECK_MSG(sc_batch_new(m, &b, &err) == 0, "%s", err.msg);
  if (!b) return;
  for (int i = 0; i < N; i++) {
    CHECK_MSG(sc_session_open(m, &s[i], &err) == 0 && sc_session_open(m, &t[i], &err) == 0, "%s", err.msg);
    prompt(s[i], i, vocab);
    prompt(t[i], i, vocab);
  }
  /* who is in the batch at each step */
  static const char *plan[] = {"01", "0123", "023", "0235", "25", "245"};
  for (int step = 0; step < 6; step++) {
    for (int i = 0; i < N; i++) {
      const int want = strchr(plan[step], '0' + i) != NULL;
      int in = 0;
      for (int k = 0; k < sc_batch_size(b); k++) in |= sc_batch_session(b, k) == s[i];
      if (in && !want) CHECK(sc_batch_remove(b, s[i]) == 0);
      if (!in && want) CHECK_MSG(sc_batch_add(b, s[i], &err) == 0, "%s", err.msg);
    }
    const int B = sc_batch_size(b);
    int32_t ids[N];
    for (int k = 0; k < B; k++) /* the index of each batch slot's session */
      for (int i = 0; i < N; i++)
        if (sc_batch_session(b, k) == s[i]) ids[k] = token(i, step, vocab);
    if (step == 3) { /* a token outside the vocabulary: refused, nothing moved */
      int32_t bad[N];
      memcpy(bad, ids, sizeof bad);
      bad[B - 1] = vocab;
      int before[N];
      for (int k = 0; k < B; k++) before[k] = sc_session_pos(sc_batch_session(b, k));
      CHECK(sc_batch_step(b, bad, &err) == SC_EUSAGE && strstr(err.msg, "outside the vocabulary"));
      for (int k = 0; k < B; k++) CHECK(sc_session_pos(sc_batch_session(b, k)) == before[k]);
    }
    CHECK_MSG(sc_batch_step(b, ids, &err) == 0, "%s churn step %d: %s", band, step, err.msg);
    for (int k = 0; k < B; k++)
      for (int i = 0; i < N; i++)
        if (sc_batch_session(b, k) == s[i]) {
          CHECK_MSG(sc_decode(t[i], ids[k], &err) == 0, "%s", err.msg);
          char what[64];
          snprintf(what, sizeof what, "%s, joining and leaving", band);
          same(s[i], t[i], what, i, step);
        }
  }
  /* refusals */
  CHECK(sc_batch_add(b, sc_batch_session(b, 0), &err) == SC_EUSAGE && strstr(err.msg, "in the batch already"));
  CHECK(sc_batch_remove(b, s[1]) == -1);
  sc_batch_free(b);
  for (int i = 0; i < N; i++) sc_session_close(s[i]), sc_session_close(t[i]);
}

/* sc_generate_batch: requests differing in prompt, length, sampling and
 * eos give each the tokens sc_generate gives it alone, and the refusals. */
static void generate(sc_model *m, const char *band) {
  enum { R = 6, MAXN = 12 };
  sc_model_info info;
  sc_model_get_info(m, &info);
  const int vocab = info.vocab;
  sc_sample_params p[R];
  for (int i = 0; i < R; i++) p[i] = sc_sample_defaults();
  p[0].greedy = 1;
  p[1].temperature = 0.8f, p[1].top_k = 20, p[1].seed = 7;
  p[2].top_p = 0.9f, p[2].seed = 3;
  p[3].greedy = 1, p[3].repetition_penalty = 1.3f;
  p[4].temperature = 1.2f, p[4].seed = 11;
  p[5].greedy = 1;
  const int n_new[R] = {MAXN, 7, MAXN, 5, 0, MAXN};
  int32_t prompts[R][8], want[R][MAXN], got[R][MAXN];
  int n_want[R];
  int32_t eos[R] = {-1, -1, -1, -1, -1, -1};
  int stop5 = 0;
  sc_error err = {0};
  for (int i = 0; i < R; i++) {
    for (int k = 0; k < 8; k++) prompts[i][k] = (41 * i + 13 * k + 3) % vocab;
    if (i == 5) { /* an eos the greedy run meets at its fourth token */
      sc_session *s = NULL;
      int n = 0;
      CHECK(sc_session_open(m, &s, &err) == 0);
      CHECK(sc_generate(s, prompts[i], 1 + i % 8, MAXN, &p[i], -1, want[i], &n, NULL, NULL, &err) == 0 && n == MAXN);
      eos[i] = want[i][3];
      stop5 = 0;
      while (want[i][stop5] != eos[i]) stop5++;
      stop5++; /* the tokens up to its first occurrence */
      sc_session_close(s);
    }
    sc_session *s = NULL;
    CHECK(sc_session_open(m, &s, &err) == 0);
    CHECK_MSG(sc_generate(s, prompts[i], 1 + i % 8, n_new[i], &p[i], eos[i], want[i], &n_want[i], NULL, NULL, &err) ==
              0, "%s", err.msg);
    sc_session_close(s);
  }
  sc_session *s[R] = {0};
  sc_gen_request req[R];
  for (int i = 0; i < R; i++) {
    CHECK(sc_session_open(m, &s[i], &err) == 0);
    req[i] = (sc_gen_request){s[i], prompts[i], 1 + i % 8, n_new[i], p[i], eos[i], got[i], -1};
  }
  CHECK_MSG(sc_generate_batch(m, req, R, &err) == 0, "%s: %s", band, err.msg);
  for (int i = 0; i < R; i++) {
    CHECK_MSG(req[i].n_out == n_want[i] && !memcmp(got[i], want[i], (size_t)n_want[i] * sizeof got[i][0]),
              "%s: request %d: %d tokens, alone %d; or they differ", band, i, req[i].n_out, n_want[i]);
    CHECK(sc_session_pos(s[i]) == 1 + i % 8 + (n_want[i] ? n_want[i] - 1 : 0));
  }
  CHECK(n_want[5] == stop5 && n_want[4] == 0 && n_want[1] == 7); /* eos, nothing, a shorter request */
  /* refusals: a shared session, a session of nothing */
  req[1].session = s[0];
  CHECK(sc_generate_batch(m, req, 2, &err) == SC_EUSAGE && strstr(err.msg, "requests 0 and 1 share a session"));
  req[1].session = NULL;
  CHECK(sc_generate_batch(m, req, 2, &err) == SC_EUSAGE && strstr(err.msg, "request 1: its session is not of the model"));
  for (int i = 0; i < R; i++) sc_session_close(s[i]);
}

/* Sessions pick their kernels when they open (SPEECHC_ISA): sizes() and
 * churn() again with each other ISA this CPU runs (the device targets: none). */
static void other_isas(sc_model *m, const char *name) {
  if (strcmp(test_target(), "cpu")) return;
  const char *isas[2];
  const int n = test_other_isas(isas);
  for (int i = 0; i < n; i++) {
    char tag[128];
    snprintf(tag, sizeof tag, "%s SPEECHC_ISA=%s", name, isas[i]);
    setenv("SPEECHC_ISA", isas[i], 1);
    sizes(m, tag);
    churn(m, tag);
    unsetenv("SPEECHC_ISA");
    printf("%s: batches give sc_decode's bits\n", tag);
  }
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc-batch-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  static const DType bands[] = {DT_F32, DT_BF16, DT_Q8_0, DT_Q4_0};
  sc_model *first = NULL;
  for (size_t k = 0; k < sizeof bands / sizeof *bands; k++) {
    const char *name = ir_dtype_name(bands[k]);
    sc_model *m = build(bands[k], 8, name);
    if (!m) continue;
    sizes(m, name);
    churn(m, name);
    generate(m, name);
    printf("%s: batches of 1, 2, 3, 8, 17 and joining / leaving give sc_decode's bits; sc_generate_batch gives "
           "sc_generate's tokens\n", name);
    other_isas(m, name);
    if (!first) first = m;
    else sc_model_close(m);
  }
  /* the Gated DeltaNet hybrids: each row's conv window and recurrent
   * state in its own session's block (dense; MoE with a shared expert, the
   * grouped projections; fused experts), f32 and q4_0; and Qwen3 with
   * sliding-window layers: each row's window ends at its own position */
  static const char *const gdn[] = {"tests/data/gdn/qwen35_dense_tiny", "tests/data/gdn/qwen3_next_moe_tiny",
                                    "tests/data/gdn/qwen35_moe_tiny", "tests/data/llm/qwen3_sliding"};
  const int bands_gdn = strcmp(test_target(), "cpu") ? 1 : 2; /* the emulators: f32 alone (their time) */
  for (size_t g = 0; g < sizeof gdn / sizeof *gdn; g++)
    for (int q = 0; q < bands_gdn; q++) {
      const DType band = q ? DT_Q4_0 : DT_F32;
      char tag[96];
      snprintf(tag, sizeof tag, "%s_%s", strrchr(gdn[g], '/') + 1, ir_dtype_name(band));
      sc_model *m = build_dir(gdn[g], band, 8, tag);
      if (!m) continue;
      sizes(m, tag);
      churn(m, tag);
      generate(m, tag);
      printf("%s: batches of 1, 2, 3, 8, 17 and joining / leaving give sc_decode's bits\n", tag);
      other_isas(m, tag);
      sc_model_close(m);
    }
  /* f32 with 17 rows in one call: past OpenBLAS's 16 rows, which the
   * batch must keep out (its order depends on the rows) */
  sc_model *wide = build(DT_F32, 32, "f32_wide");
  if (wide) {
    sizes(wide, "f32, one call of up to 32 rows");
    sc_model_close(wide);
  }
  /* a session of another model; a model without the batch entry */
  sc_error err = {0};
  sc_model *one = build(DT_F32, 1, "nobatch");
  sc_batch *b = NULL;
  if (one) {
    CHECK(sc_batch_new(one, &b, &err) == SC_EUSAGE && strstr(err.msg, "no batched decode entry") && !b);
    sc_session *s1 = NULL;
    int32_t pr = 1, o1[2];
    CHECK(sc_session_open(one, &s1, &err) == 0);
    sc_gen_request r1 = {s1, &pr, 1, 2, sc_sample_defaults(), -1, o1, 0};
    CHECK(sc_generate_batch(one, &r1, 1, &err) == SC_EUSAGE && strstr(err.msg, "no batched decode entry"));
    sc_session_close(s1);
    if (first) {
      sc_session *s = NULL;
      CHECK(sc_session_open(one, &s, &err) == 0);
      CHECK(sc_batch_new(first, &b, &err) == 0);
      if (b && s) CHECK(sc_batch_add(b, s, &err) == SC_EUSAGE && strstr(err.msg, "not of the batch's model"));
      sc_batch_free(b);
      sc_session_close(s);
    }
    sc_model_close(one);
  }
  sc_model_close(first);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) return 1;
  CHECK_DONE();
}
