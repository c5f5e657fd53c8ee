/*
 * test_tts_batch.c — batched Qwen3-TTS frames (sc_tts_batch_*): every
 * stream of a batch makes exactly the codes sc_tts_generate makes alone
 * with the same parameters, bit for bit.
 *
 * Both tiny layouts of tests/data/tts (0.6B; 1.7B with
 * small_to_mtp_projection), each band (f32, bf16, q8_0, q4_0), and the
 * 0.6B layout with sliding windows (tts_tiny_sliding, f32), built with
 * --max-batch 8 (17 streams take three calls of each entry per frame),
 * and each kernel ISA this CPU runs (portable, avx2, the default).  17
 * requests that differ in everything a request sets: text length, instruct,
 * speaker (a dialect one too), language, streaming or not, max_frames,
 * min_frames, the talker's and predictor's sampling (greedy, temperature,
 * top-k, top-p, repetition penalty) and seeds; one stops through on_frame.
 * Each runs alone first.  Then batches of 1, 2, 3, 8 and 17 streams that
 * all start together, and a continuous batch of at most 8 slots where
 * streams join while others run (so at different positions), ended ones
 * leave and are replaced at once, and one is removed mid-run (its codes
 * so far a prefix of its own run).  A stream whose talker context fills
 * fails alone with the error sc_tts_generate gives, the others go on.
 * Refusals: a model built with --max-batch 1, an LM, a codec session in
 * the params, a session of another model, one added twice.
 * SPEECHC_TEST_TARGET=cuda (test_tts_batch_cuda_emu): the same on --target
 * cuda builds run by the CUDA emulator.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "model_internal.h"
#include "parity_util.h"

enum { NREQ = 17, MAXF = 24, G = 16, SLOTS = 8 };

static char tmpdir[64];
/* The CPU runs all of it; the CUDA emulator, far slower, a smaller set:
 * n_req requests, batches up to n_req, the continuous batch on 3 slots. */
static int n_req = NREQ, n_slots = SLOTS, removed_req = 6;

typedef struct Req {
  int32_t text[24], instr[12];
  sc_tts_params p;
  int stop_at;              /* on_frame stops after this frame (-1: never) */
  int32_t want[MAXF * G];   /* alone */
  int n_want, rc_want;
  char msg_want[1024];
  int32_t got[MAXF * G];    /* batched */
  int n_got;
} Req;

static int on_frame(void *user, const int32_t *codes, int n, int frame) {
  (void)codes;
  (void)n;
  const Req *r = user;
  return r->stop_at == frame;
}

static void make_req(Req *r, int i) {
  memset(r, 0, sizeof *r);
  const int n_text = 9 + (i * 5) % 11;
  for (int k = 0; k < n_text; k++) r->text[k] = (97 * i + 31 * k + 3) % 512;
  r->p = sc_tts_defaults();
  r->p.text_ids = r->text;
  r->p.n_text = n_text;
  if (i % 3 == 0) {
    for (int k = 0; k < 7; k++) r->instr[k] = (13 * i + 7 * k + 1) % 512;
    r->p.instruct_ids = r->instr;
    r->p.n_instruct = 7;
  }
  static const char *const spk[] = {"tiny_speaker", "tiny_dialect", NULL, NULL};
  static const char *const lang[] = {"english", "chinese", NULL};
  r->p.speaker = spk[i % 4];
  r->p.language = lang[i % 3];
  r->p.non_streaming = i % 5 == 2;
  r->p.max_frames = 6 + (i * 7) % 13;
  r->p.min_frames = i % 3;
  r->p.talker.greedy = i % 6 == 5;
  r->p.talker.temperature = 0.7f + 0.05f * (float)(i % 5);
  r->p.talker.top_k = 10 + i;
  r->p.talker.top_p = i % 2 ? 0.9f : 1.0f;
  r->p.talker.repetition_penalty = i % 4 == 1 ? 1.3f : 1.05f;
  r->p.talker.seed = 1000 + (uint64_t)i;
  r->p.predictor.greedy = i % 7 == 3;
  r->p.predictor.temperature = 0.6f + 0.1f * (float)(i % 4);
  r->p.predictor.top_k = i % 2 ? 0 : 20;
  r->p.predictor.seed = 77 * (uint64_t)i + 5;
  r->stop_at = i == 4 ? 3 : -1;
}

static sc_model *build(const char *layout, DType band, int max_batch, int max_ctx, const char *tag) {
  char out[256], dir[128];
  snprintf(out, sizeof out, "%s/%s.so", tmpdir, tag);
  snprintf(dir, sizeof dir, "tests/data/tts/%s", layout);
  BuildOpts o = build_defaults();
  o.model_dir = dir;
  o.out_path = out;
  o.quiet = 1;
  o.band = band;
  o.target = test_target();
  o.max_batch = max_batch;
  o.max_context = max_ctx;
  sc_error err = {0};
  int rc = sc_build(&o, &err);
  CHECK_MSG(rc == 0, "build %s: %s", tag, err.msg);
  sc_model *m = NULL;
  if (!rc) CHECK_MSG(sc_model_open(out, NULL, &m, &err) == 0, "%s", err.msg);
  return m;
}

static void alone(sc_model *m, Req *r, int n) {
  sc_session *s = NULL;
  sc_error err = {0};
  CHECK_MSG(sc_session_open(m, &s, &err) == 0, "%s", err.msg);
  if (!s) return;
  for (int i = 0; i < n; i++) {
    memset(&err, 0, sizeof err);
    memset(r[i].want, 0xff, sizeof r[i].want);
    r[i].rc_want = sc_tts_generate(s, &r[i].p, r[i].want, &r[i].n_want, on_frame, &r[i], &err);
    snprintf(r[i].msg_want, sizeof r[i].msg_want, "%s", err.msg);
  }
  sc_session_close(s);
}

/* r's batched codes against its own run alone; n_frames frames made */
static void same(const char *what, const Req *r, int i) {
  CHECK_MSG(r->n_got == r->n_want, "%s: request %d: %d frames batched, %d alone", what, i, r->n_got, r->n_want);
  const int n = r->n_got < r->n_want ? r->n_got : r->n_want;
  for (int k = 0; k < n * G; k++)
    if (r->got[k] != r->want[k]) {
      CHECK_MSG(0, "%s: request %d: frame %d code %d: %d batched, %d alone", what, i, k / G, k % G, r->got[k],
                r->want[k]);
      break;
    }
}

/* Requests first..first+B-1 in one batch, all from the start. */
static void together(sc_model *m, Req *r, int B, const char *what) {
  sc_tts_batch *b = NULL;
  sc_session *s[NREQ] = {0};
  sc_error err = {0};
  CHECK_MSG(sc_tts_batch_new(m, &b, &err) == 0, "%s: %s", what, err.msg);
  if (!b) return;
  for (int i = 0; i < B; i++) {
    CHECK_MSG(sc_session_open(m, &s[i], &err) == 0, "%s", err.msg);
    memset(r[i].got, 0xff, sizeof r[i].got);
    CHECK_MSG(sc_tts_batch_add(b, s[i], &r[i].p, r[i].got, &r[i].n_got, on_frame, &r[i], &err) == 0, "%s: %s",
              what, err.msg);
  }
  CHECK(sc_tts_batch_size(b) == B);
  for (int guard = 0; sc_tts_batch_running(b) && guard < MAXF + 2; guard++)
    CHECK_MSG(sc_tts_batch_step(b, &err) == 0, "%s: %s", what, err.msg);
  CHECK_MSG(sc_tts_batch_running(b) == 0, "%s: streams still running", what);
  for (int i = 0; i < B; i++) {
    CHECK_MSG(r[i].rc_want == 0, "alone %d: %s", i, r[i].msg_want);
    CHECK(sc_tts_batch_status(b, s[i], NULL) == SC_TTS_ENDED);
    same(what, &r[i], i);
  }
  sc_tts_batch_free(b);
  for (int i = 0; i < B; i++) sc_session_close(s[i]);
}

/* At most SLOTS streams; the next request joins as soon as a slot frees,
 * and one more joins every third step while there is room; request
 * removed_req (6, or the first that runs 3 frames alone on this table) is
 * removed after 2 steps in the batch. */
static void continuous(sc_model *m, Req *r, const char *what) {
  sc_tts_batch *b = NULL;
  sc_session *slot[SLOTS] = {0};
  int who[SLOTS], age[SLOTS];
  const int R = removed_req;
  sc_error err = {0};
  CHECK_MSG(sc_tts_batch_new(m, &b, &err) == 0, "%s: %s", what, err.msg);
  if (!b) return;
  for (int k = 0; k < n_slots; k++) {
    CHECK_MSG(sc_session_open(m, &slot[k], &err) == 0, "%s", err.msg);
    who[k] = -1;
  }
  int next = 0, removed = -1, joined_late = 0;
  for (int step = 0; step < 200 && (next < n_req || sc_tts_batch_size(b)); step++) {
    /* leave: ended streams, and request R after two frames */
    for (int k = 0; k < n_slots; k++) {
      if (who[k] < 0) continue;
      const int st = sc_tts_batch_status(b, slot[k], NULL);
      if (st == SC_TTS_RUNNING && !(who[k] == R && age[k] == 2)) continue;
      CHECK_MSG(st == SC_TTS_ENDED || who[k] == R, "%s: request %d: status %d", what, who[k], st);
      if (who[k] == R && st == SC_TTS_RUNNING) removed = R;
      else same(what, &r[who[k]], who[k]);
      CHECK(sc_tts_batch_remove(b, slot[k]) == 0);
      who[k] = -1;
    }
    /* join: a free slot is refilled at once after the first steps */
    const int room = step < 4 ? (step % 3 == 0) : n_slots;
    for (int k = 0, added = 0; k < n_slots && next < n_req && added < room; k++) {
      if (who[k] >= 0) continue;
      memset(r[next].got, 0xff, sizeof r[next].got);
      CHECK_MSG(sc_tts_batch_add(b, slot[k], &r[next].p, r[next].got, &r[next].n_got, on_frame, &r[next], &err) == 0,
                "%s: %s", what, err.msg);
      who[k] = next++;
      age[k] = 0;
      added++;
      joined_late += step > 0;
    }
    if (sc_tts_batch_running(b)) CHECK_MSG(sc_tts_batch_step(b, &err) == 0, "%s: %s", what, err.msg);
    for (int k = 0; k < n_slots; k++) age[k]++;
  }
  CHECK_MSG(next == n_req && sc_tts_batch_size(b) == 0, "%s: %d requests started, %d streams left", what, next,
            sc_tts_batch_size(b));
  CHECK(joined_late > 0);
  CHECK_MSG(removed == R, "%s: request %d ended before its removal", what, R);
  CHECK_MSG(r[R].n_got == 2 && !memcmp(r[R].got, r[R].want, sizeof(int32_t) * 2 * G),
            "%s: the removed stream made %d frames, not a prefix of its own run", what, r[R].n_got);
  sc_tts_batch_free(b);
  for (int k = 0; k < n_slots; k++) sc_session_close(slot[k]);
}

/* Sessions pick their kernels when they open (SPEECHC_ISA). */
static void with_isa(sc_model *m, const char *tag, const char *isa, Req *r) {
  if (isa) setenv("SPEECHC_ISA", isa, 1);
  else unsetenv("SPEECHC_ISA");
  char what[160];
  for (int i = 0; i < NREQ; i++) make_req(&r[i], i);
  alone(m, r, n_req);
  /* the stream removed mid-run must still be running after two frames in
   * the batch: its own run says so, and sampled codes (so where EOS comes)
   * follow the table's rounding, so the first that does on this table */
  const int preferred = removed_req;
  for (int i = 0; i < n_req && (r[removed_req].n_want < 3 || r[removed_req].stop_at >= 0 ||
                                r[removed_req].rc_want); i++)
    removed_req = i;
  CHECK_MSG(r[removed_req].n_want >= 3 && r[removed_req].stop_at < 0 && !r[removed_req].rc_want,
            "%s: no request makes 3 frames to remove mid-run", tag);
  int ended_eos = 0, ended_max = 0;
  for (int i = 0; i < n_req; i++) {
    ended_eos += r[i].n_want < r[i].p.max_frames && r[i].stop_at < 0;
    ended_max += r[i].n_want == r[i].p.max_frames;
  }
  CHECK_MSG(ended_max > 0, "%s: no request ran to max_frames", tag);
  static const int Bs[] = {1, 2, 3, 8, 17};
  for (size_t k = 0; k < sizeof Bs / sizeof Bs[0] && Bs[k] <= n_req; k++) {
    snprintf(what, sizeof what, "%s %s B=%d", tag, isa ? isa : "default", Bs[k]);
    together(m, r, Bs[k], what);
  }
  snprintf(what, sizeof what, "%s %s continuous", tag, isa ? isa : "default");
  continuous(m, r, what);
  removed_req = preferred;
  printf("%s %s: %d requests, %d ended by EOS\n", tag, isa ? isa : "default", n_req, ended_eos);
}

/* The talker's context fills for one stream: it fails, as alone, and the
 * others end as alone. */
static void context_full(Req *r) {
  unsetenv("SPEECHC_ISA");
  sc_model *m = build("tts_tiny_06b_layout", DT_F32, SLOTS, 40, "ctx40");
  if (!m) return;
  for (int i = 0; i < 3; i++) make_req(&r[i], i + 1);
  r[1].p.max_frames = MAXF;
  r[1].p.min_frames = MAXF; /* no EOS: the context fills */
  alone(m, r, 3);
  CHECK_MSG(r[1].rc_want == SC_ERUNTIME && strstr(r[1].msg_want, "context full"), "alone: %d %s", r[1].rc_want,
            r[1].msg_want);
  sc_tts_batch *b = NULL;
  sc_session *s[3] = {0};
  sc_error err = {0};
  CHECK_MSG(sc_tts_batch_new(m, &b, &err) == 0, "%s", err.msg);
  for (int i = 0; b && i < 3; i++) {
    CHECK_MSG(sc_session_open(m, &s[i], &err) == 0, "%s", err.msg);
    CHECK_MSG(sc_tts_batch_add(b, s[i], &r[i].p, r[i].got, &r[i].n_got, NULL, NULL, &err) == 0, "%s", err.msg);
  }
  for (int guard = 0; b && sc_tts_batch_running(b) && guard < MAXF + 2; guard++)
    CHECK_MSG(sc_tts_batch_step(b, &err) == 0, "%s", err.msg);
  if (b) {
    sc_error e = {0};
    CHECK(sc_tts_batch_status(b, s[1], &e) == SC_TTS_FAILED);
    CHECK_MSG(!strcmp(e.msg, r[1].msg_want), "batched '%s', alone '%s'", e.msg, r[1].msg_want);
    CHECK(sc_tts_batch_status(b, s[0], NULL) == SC_TTS_ENDED && sc_tts_batch_status(b, s[2], NULL) == SC_TTS_ENDED);
    for (int i = 0; i < 3; i++) same("ctx40", &r[i], i);
  }
  sc_tts_batch_free(b);
  for (int i = 0; i < 3; i++) sc_session_close(s[i]);
  sc_model_close(m);
}

/* on_frame of the stream of session self: removes self and then other,
 * tries to add and to step */
typedef struct Cb {
  sc_tts_batch *b;
  sc_session *self, *other;
  int removed, add_rc, step_rc;
  char msg[1024];
} Cb;

static int remove_on_frame(void *user, const int32_t *codes, int n, int frame) {
  (void)codes, (void)n, (void)frame;
  Cb *c = user;
  sc_error e = {0};
  int32_t got[MAXF * G];
  int n_got;
  sc_tts_params p = sc_tts_defaults();
  c->add_rc = sc_tts_batch_add(c->b, c->other, &p, got, &n_got, NULL, NULL, &e);
  snprintf(c->msg, sizeof c->msg, "%s", e.msg);
  c->step_rc = sc_tts_batch_step(c->b, &e);
  c->removed = sc_tts_batch_remove(c->b, c->self) || sc_tts_batch_remove(c->b, c->other) ||
               sc_tts_batch_remove(c->b, c->self) != -1;
  return 0;
}

/* on_frame: removes its stream and closes its session */
static sc_session *closing;
static int close_on_frame(void *user, const int32_t *codes, int n, int frame) {
  (void)codes, (void)n, (void)frame;
  sc_tts_batch_remove(user, closing);
  sc_session_close(closing);
  return 0;
}

static void refusals(void) {
  unsetenv("SPEECHC_ISA");
  sc_error err = {0};
  sc_tts_batch *b = NULL;
  sc_model *one = build("tts_tiny_06b_layout", DT_F32, 1, 64, "nobatch");
  if (one) {
    CHECK(sc_tts_batch_new(one, &b, &err) == SC_EUSAGE && !b);
    CHECK_CONTAINS(err.msg, "--max-batch 2 or more");
  }
  sc_model *m = build("tts_tiny_06b_layout", DT_F32, 4, 64, "refuse");
  if (!m || !one) return;
  CHECK_MSG(sc_tts_batch_new(m, &b, &err) == 0, "%s", err.msg);
  sc_session *s = NULL, *other = NULL;
  CHECK_MSG(sc_session_open(m, &s, &err) == 0 && sc_session_open(one, &other, &err) == 0, "%s", err.msg);
  Req *r = calloc(1, sizeof *r);
  make_req(r, 1);
  sc_tts_params p = r->p;
  p.codec = other; /* any session: refused before it is used */
  CHECK(sc_tts_batch_add(b, s, &p, r->got, &r->n_got, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "does not decode audio");
  CHECK(sc_tts_batch_add(b, other, &r->p, r->got, &r->n_got, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "not of the batch's model");
  CHECK_MSG(sc_tts_batch_add(b, s, &r->p, r->got, &r->n_got, NULL, NULL, &err) == 0, "%s", err.msg);
  CHECK(sc_tts_batch_add(b, s, &r->p, r->got, &r->n_got, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "in the batch already");
  p = r->p;
  p.max_frames = 0;
  sc_session *s2 = NULL;
  CHECK_MSG(sc_session_open(m, &s2, &err) == 0, "%s", err.msg);
  CHECK(sc_tts_batch_add(b, s2, &p, r->got, &r->n_got, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "--max-frames must be >= 1");
  CHECK(sc_tts_batch_size(b) == 1 && sc_tts_batch_status(b, s2, NULL) == -1);
  CHECK(sc_tts_batch_remove(b, s2) == -1 && sc_tts_batch_remove(b, s) == 0 && sc_tts_batch_size(b) == 0);
  /* callbacks of a step: removing a stream (its own, or another's not yet
   * stepped) takes it out at once and frees it after the step (ASan: no
   * use after free); adding or stepping is refused */
  Req *r2 = calloc(1, sizeof *r2);
  make_req(r2, 2);
  Cb cb = {b, s, s2, 0, 0, 0, ""};
  CHECK_MSG(sc_tts_batch_add(b, s, &r->p, r->got, &r->n_got, remove_on_frame, &cb, &err) == 0 &&
            sc_tts_batch_add(b, s2, &r2->p, r2->got, &r2->n_got, NULL, NULL, &err) == 0, "%s", err.msg);
  CHECK_MSG(sc_tts_batch_step(b, &err) == 0, "%s", err.msg);
  CHECK(cb.removed == 0 && cb.add_rc == SC_EUSAGE && cb.step_rc == SC_EUSAGE);
  CHECK_CONTAINS(cb.msg, "not from a callback of sc_tts_batch_step");
  CHECK_MSG(sc_tts_batch_size(b) == 0 && sc_tts_batch_status(b, s, NULL) == -1 && r->n_got == 1 && r2->n_got <= 1,
            "size %d, frames %d and %d", sc_tts_batch_size(b), r->n_got, r2->n_got);
  const int n2 = r2->n_got;
  CHECK(sc_tts_batch_step(b, &err) == 0 && r2->n_got == n2); /* nothing left to step */
  /* a callback that removes its stream and closes its session: the later
   * streams of the same call go on without it (ASan: its session was the
   * call's first) */
  sc_session *s3 = NULL, *s4 = NULL;
  CHECK_MSG(sc_session_open(m, &s3, &err) == 0 && sc_session_open(m, &s4, &err) == 0, "%s", err.msg);
  r->n_got = r2->n_got = 0;
  closing = s3;
  CHECK_MSG(sc_tts_batch_add(b, s3, &r->p, r->got, &r->n_got, close_on_frame, b, &err) == 0 &&
            sc_tts_batch_add(b, s4, &r2->p, r2->got, &r2->n_got, NULL, NULL, &err) == 0, "%s", err.msg);
  CHECK_MSG(sc_tts_batch_step(b, &err) == 0 && r->n_got == 1 && r2->n_got == 1 && sc_tts_batch_size(b) == 1,
            "%s: frames %d and %d", err.msg, r->n_got, r2->n_got);
  /* the model closed first: the batch keeps it (ASan) */
  sc_model_close(m);
  m = NULL;
  CHECK(sc_tts_batch_step(b, &err) == 0 && r2->n_got == 2 && sc_tts_batch_remove(b, s4) == 0);
  sc_session_close(s4);
  sc_session_close(s);
  sc_session_close(s2);
  CHECK(sc_tts_batch_step(b, &err) == 0); /* the batch alone holds the model now */
  free(r2);
  sc_tts_batch_free(b);
  free(r);
  sc_session_close(other);
  sc_model_close(m);
  sc_model_close(one);

  sc_model *lm = NULL;
  BuildOpts o = build_defaults();
  char out[256];
  snprintf(out, sizeof out, "%s/lm.so", tmpdir);
  o.model_dir = "tests/data/llm/qwen3_trained_tiny";
  o.out_path = out;
  o.quiet = 1;
  CHECK_MSG(sc_build(&o, &err) == 0 && sc_model_open(out, NULL, &lm, &err) == 0, "%s", err.msg);
  if (lm) {
    CHECK(sc_tts_batch_new(lm, &b, &err) == SC_EUSAGE);
    CHECK_CONTAINS(err.msg, "not a Qwen3-TTS model");
  }
  sc_model_close(lm);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc_ttsb_XXXXXX");
  CHECK(mkdtemp(tmpdir) != NULL);
  Req *r = calloc(NREQ, sizeof *r);
  static const DType bands[] = {DT_F32, DT_BF16, DT_Q8_0, DT_Q4_0};
  /* the sliding windows' layout in f32 only: the windows are the bands' alike */
  static const char *const layouts[] = {"tts_tiny_06b_layout", "tts_tiny_17b_layout", "tts_tiny_sliding"};
  /* the ISAs this CPU runs besides its default */
  const char *isas[3] = {NULL}; /* the default first */
  int n_isa = 1 + test_other_isas(isas + 1);
  const int cpu = !strcmp(test_target(), "cpu");
  if (!cpu) { /* the device's kernels: no ISA to pick; the emulator's pace */
    n_isa = 1;
    n_req = 3;
    n_slots = 2;
    removed_req = 1;
  }
  static const char *const names[] = {"f32", "i32", "bf16", "f16", "q8_0", "q4_0"};
  for (int l = 0; l < (cpu ? 3 : 1); l++)
    for (size_t k = 0; k < (l == 2 ? 1 : sizeof bands / sizeof bands[0]); k += cpu ? 1 : 3) {
      char tag[96];
      snprintf(tag, sizeof tag, "%s_%s", layouts[l], names[bands[k]]);
      unsetenv("SPEECHC_ISA");
      sc_model *m = build(layouts[l], bands[k], cpu ? SLOTS : 2, 256, tag);
      for (int a = 0; m && a < n_isa; a++) with_isa(m, tag, isas[a], r);
      sc_model_close(m);
    }
  if (cpu) { /* the runtime's own paths: the same on every target */
    context_full(r);
    refusals();
  }
  free(r);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmpdir);
  CHECK_DONE();
}
