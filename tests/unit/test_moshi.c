/*
 * test_moshi.c — Moshi's RQ-Transformer (fe_moshi.c) against the `moshi`
 * package:
 *   - the package's own fixture (tests/data/moshi/conformance, a copy of
 *     the assets of moshi/tests/test_lm.py; $SPEECHC_SHARED/conformance/moshi
 *     when that is set): built from a config.json written from that
 *     test's arguments, a teacher-forced forward over its codes passes the
 *     package's criterion, the masked cross-entropy of the logits and of
 *     the text logits within 1e-6 relative of the stored ones;
 *   - tests/data/moshi (tests/parity/make_moshi.py): the 7B's switches and
 *     the family's others, logits and text logits of LMModel.forward at
 *     1e-4 relative per row, the delay masks equal, libtcc and gcc, fused
 *     and not;
 *   - the bands (tests/data/moshi/bands_tiny, whose matrices quantize
 *     whole): bf16, q8_0 and q4_0 against f32, teacher-forced, on the
 *     logits' cosine and the argmax of every step and codebook;
 *   - `speechc moshi --input user.wav -o reply.wav` (duplex_tiny,
 *     tests/parity/make_duplex.py): the rows and the reply PCM of the
 *     package's run_inference loop;
 *   - config switches speechc does not lower are refused by name.
 * With SPEECHC_TEST_TARGET=cuda or metal (test_moshi_cuda_emu,
 * test_moshi_metal_emu) the conformance criterion and the three fixtures'
 * forward and LMGen rows again, on device builds run by the emulators.
 * The teacher-forced forward is LMModel.forward's: the codes delayed per
 * stream (the initial tokens before each delay), one temporal step per
 * time step, the depformer's dep_q steps on the next step's tokens, and
 * the logits moved back by each stream's delay.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "build.h"
#include "checkpoint.h"
#include "check.h"
#include "model_internal.h"
#include "parity_util.h"
#include "safetensors.h"
#include "wav.h"

static char tmpdir[64];

typedef struct Lm {
  int K, Q, card, text_card, text_out, dim, delays[64];
} Lm;

/* The forward of LMModel over codes [K, T] (text first): logits
 * [Q, T, card] and text [T, text_out], NaN where the delays leave no
 * prediction; mask [Q, T] and tmask [T] as the package computes them. */
static int forward(sc_session *s, const Lm *lm, const int *codes, int T, float *logits, float *text,
                   unsigned char *mask, unsigned char *tmask, sc_error *err) {
  const sc_entry *et = rt_entry(s->m, "temporal"), *e0 = rt_entry(s->m, "depformer_text"),
                 *ea = rt_entry(s->m, "depformer_audio");
  CHECK(et && e0 && (ea || lm->Q == 1));
  if (!et || !e0) return -1;
  const int K = lm->K, Q = lm->Q;
  /* D[k][s], s = 0..T: the delayed codes with the initial step in front */
  int *D = malloc(sizeof *D * (size_t)K * (T + 1));
  for (int k = 0; k < K; k++)
    for (int st = 0; st <= T; st++) {
      const int init = k ? lm->card : lm->text_card, src = st - 1 - lm->delays[k];
      D[k * (T + 1) + st] = st >= 1 && src >= 0 ? codes[k * T + src] : init;
    }
  float *pl = malloc(sizeof *pl * (size_t)Q * T * lm->card), *pt = malloc(sizeof *pt * (size_t)T * lm->text_out);
  float *h = malloc(sizeof *h * (size_t)lm->dim);
  int ids[64], rc = 0;
  sc_session_reset(s);
  for (int st = 0; st < T && !rc; st++) {
    for (int k = 0; k < K; k++) ids[k] = D[k * (T + 1) + st];
    sc_io io = {.ids = ids, .n = 1, .pos = st, .out = pt + (size_t)st * lm->text_out, .hidden_out = h};
    if ((rc = rt_call(s, et, &io, err))) break;
    for (int k = 0; k < Q && !rc; k++) {
      const int id = D[k * (T + 1) + st + 1]; /* k = 0: the text token; else audio stream k-1 */
      sc_io dio = {.ids = &id, .n = 1, .pos = k, .step = k, .hidden_in = h,
                   .out = pl + ((size_t)k * T + st) * lm->card};
      rc = rt_call(s, k ? ea : e0, &dio, err);
    }
  }
  for (int t = 0; t < T && !rc; t++) {
    for (int k = 0; k < Q; k++) {
      const int src = t + lm->delays[1 + k];
      mask[k * T + t] = src < T && codes[(1 + k) * T + t] != -1;
      for (int c = 0; c < lm->card; c++)
        logits[((size_t)k * T + t) * lm->card + c] = src < T ? pl[((size_t)k * T + src) * lm->card + c] : NAN;
    }
    const int src = t + lm->delays[0];
    tmask[t] = src < T && codes[t] != -1;
    for (int c = 0; c < lm->text_out; c++)
      text[(size_t)t * lm->text_out + c] = src < T ? pt[(size_t)src * lm->text_out + c] : NAN;
  }
  free(D);
  free(pl);
  free(pt);
  free(h);
  return rc;
}

static sc_model *build_band(const char *dir, const char *tag, const char *cc, int fuse, DType band,
                            sc_session **s) {
  char out[512];
  snprintf(out, sizeof out, "%s/%s_%s_%d_%s.so", tmpdir, tag, cc, fuse, ir_dtype_name(band));
  BuildOpts o = build_defaults();
  o.band = band;
  o.model_dir = dir;
  o.out_path = out;
  o.cc = cc;
  o.quiet = 1;
  o.fuse = fuse;
  o.max_context = 64;
  o.target = test_target();
  sc_error err = {0};
  int built = sc_build(&o, &err) == 0;
  CHECK_MSG(built, "build %s: %s", dir, err.msg);
  sc_model *m = NULL;
  if (built) CHECK_MSG(sc_model_open(out, NULL, &m, &err) == 0, "%s", err.msg);
  if (m) CHECK_MSG(sc_session_open(m, s, &err) == 0, "%s", err.msg);
  return m;
}

static sc_model *build_open(const char *dir, const char *tag, const char *cc, int fuse, sc_session **s) {
  return build_band(dir, tag, cc, fuse, DT_F32, s);
}

static void *load(const char *dir, const char *file, long want) {
  char path[512];
  long size = 0;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  void *p = slurp(path, &size);
  CHECK_MSG(p && size == want, "%s: %ld bytes, expected %ld", path, size, want);
  return p;
}

/* Run LMGen with p over S steps of user codes; rows[R, 1 + Q] receive what
 * it returns.  Returns the row count. */
static int run_rows(sc_session *s, const sc_moshi_params *p, const int *user, int S, int U, int *rows, int R,
                    int Q) {
  sc_moshi *g = NULL;
  sc_error err = {0};
  int n = 0, row[64], has;
  CHECK_MSG(sc_moshi_open(s, p, &g, NULL, &err) == 0, "%s", err.msg);
  CHECK(!g || (sc_moshi_step(g, NULL, row, &has, &err) == SC_EUSAGE && strstr(err.msg, "no user codes") &&
               sc_moshi_step(g, user, row, NULL, NULL) == SC_EUSAGE)); /* refused before a step */
  for (int st = 0; g && st < S; st++) {
    CHECK_MSG(sc_moshi_step(g, user + (size_t)st * U, row, &has, &err) == 0, "%s", err.msg);
    if (has && n < R) memcpy(rows + (size_t)n++ * (1 + Q), row, sizeof *row * (size_t)(1 + Q));
  }
  sc_moshi_close(g);
  return n;
}

/* LMGen's sampling: the package's draws come from torch's generator, which
 * speechc does not reproduce, so its properties are tested instead:
 *   - top-k 1 on both streams at a positive temperature is greedy: the
 *     package's greedy rows (so each top-k reaches its stream's sampler);
 *   - the same seed gives the same rows; another seed, other rows; the
 *     defaults (0.8 / 250, 0.7 / 25) do not give the greedy rows. */
static void sampled(sc_session *s, const int *user, int S, int U, const int *greedy, int R, int Q,
                    const char *name) {
  int *a = calloc((size_t)R * (1 + Q), sizeof *a), *b = calloc((size_t)R * (1 + Q), sizeof *b);
  sc_moshi_params p;
  sc_error err = {0};
  CHECK_MSG(sc_moshi_defaults(s->m, &p, &err) == 0, "%s", err.msg);
  CHECK(!p.greedy && p.temp == 0.8f && p.temp_text == 0.7f && p.top_k == 250 && p.top_k_text == 25);
  sc_moshi_params one = p;
  one.temp = one.temp_text = 2.0f;
  one.top_k = one.top_k_text = 1;
  CHECK(run_rows(s, &one, user, S, U, a, R, Q) == R);
  CHECK_MSG(!memcmp(a, greedy, sizeof *a * (size_t)R * (1 + Q)), "%s: top-k 1 sampling is not greedy", name);
  CHECK(run_rows(s, &p, user, S, U, a, R, Q) == R);
  CHECK(run_rows(s, &p, user, S, U, b, R, Q) == R);
  CHECK_MSG(!memcmp(a, b, sizeof *a * (size_t)R * (1 + Q)), "%s: the same seed gave other rows", name);
  CHECK_MSG(memcmp(a, greedy, sizeof *a * (size_t)R * (1 + Q)), "%s: sampling gave the greedy rows", name);
  p.seed++;
  CHECK(run_rows(s, &p, user, S, U, b, R, Q) == R);
  CHECK_MSG(memcmp(a, b, sizeof *a * (size_t)R * (1 + Q)), "%s: seeds %llu and %llu gave the same rows", name,
            (unsigned long long)p.seed - 1, (unsigned long long)p.seed);
  free(a);
  free(b);
}

/* The indices of the k best of x[n] (ties: lower index) as a mask. */
static void top_mask(const float *x, int n, int k, unsigned char *in) {
  memset(in, 0, (size_t)n);
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int i = 0; i < n; i++)
      if (!in[i] && (best < 0 || x[i] > x[best])) best = i;
    in[best] = 1;
  }
}

/* Top-k as a distribution: the first step's inputs are all initial tokens,
 * so its text logits are fixed, and its first audio codebook's logits are
 * fixed given the drawn text token.  Over many seeds at a high temperature
 * every draw must be among the k best (computed here on a second session
 * from the entry points), and all k must turn up; with top-k off, more than
 * k do. */
static void topk_draws(sc_session *s, sc_session *ref, const int *user, int U, const char *name) {
  const sc_entry *et = rt_entry(s->m, "temporal"), *e0 = rt_entry(s->m, "depformer_text");
  sc_moshi_info info;
  sc_moshi *g = NULL;
  sc_error err = {0};
  CHECK_MSG(sc_moshi_open(s, NULL, &g, &info, &err) == 0, "%s", err.msg);
  sc_moshi_close(g);
  if (!et || !e0 || info.max_delay != 1) return;
  const int TV = et->out_cols, V = info.card, KT = 3, KA = 4, N = 200;
  float *tl = malloc(sizeof *tl * (size_t)TV), *al = malloc(sizeof *al * (size_t)V),
        *h = malloc(sizeof *h * (size_t)et->hidden_cols);
  unsigned char *tin = malloc((size_t)TV), *ain = malloc((size_t)V);
  int ids[64];
  ids[0] = info.text_card;
  for (int k = 1; k <= info.n_q; k++) ids[k] = info.card;
  sc_session_reset(ref);
  sc_io io = {.ids = ids, .n = 1, .pos = 0, .out = tl, .hidden_out = h};
  CHECK_MSG(rt_call(ref, et, &io, &err) == 0, "%s", err.msg);
  top_mask(tl, TV, KT, tin);
  for (int off = 0; off < 2; off++) {
    int tseen[4096] = {0}, aseen[4096] = {0}, nt = 0, na = 0;
    sc_moshi_params p;
    sc_moshi_defaults(s->m, &p, &err);
    p.temp = p.temp_text = 50.0f;
    p.top_k_text = off ? 0 : KT;
    p.top_k = off ? 0 : KA;
    for (int i = 0; i < N; i++) {
      int row[64];
      p.seed = 1000 + (uint64_t)i;
      if (run_rows(s, &p, user, 2, U, row, 1, info.dep_q) != 1) break;
      const int t = row[0], a = row[1];
      nt += !tseen[t]++;
      na += !aseen[a]++;
      if (off) continue;
      CHECK_MSG(tin[t], "%s: seed %d drew text token %d, not among the top %d", name, i, t, KT);
      sc_io d = {.ids = &t, .n = 1, .pos = 0, .step = 0, .hidden_in = h, .out = al};
      CHECK_MSG(rt_call(ref, e0, &d, &err) == 0, "%s", err.msg);
      top_mask(al, V, KA, ain);
      CHECK_MSG(ain[a], "%s: seed %d drew audio token %d, not among the top %d", name, i, a, KA);
    }
    if (!off) {
      CHECK_MSG(nt == KT, "%s: %d distinct text tokens under top-k %d", name, nt, KT);
      CHECK_MSG(na >= KA, "%s: %d distinct audio tokens under top-k %d", name, na, KA);
    } else {
      CHECK_MSG(nt > KT && na > KA, "%s: top-k off drew only %d text / %d audio tokens", name, nt, na);
    }
    printf("%s: top-k %s: %d distinct text, %d distinct audio tokens over %d seeds\n", name, off ? "off" : "on", nt,
           na, N);
  }
  free(tl), free(al), free(h), free(tin), free(ain);
}

/* LMGen greedy over the fixture's user codes: every returned row equal. */
/* What a sc_moshi_push callback saw. */
typedef struct Rows {
  int n, cap, n_row, stop_at, max_delay, bad_step;
  int *rows; /* [cap, n_row] */
  sc_moshi *g;
  int reenter_rc;
} Rows;

static int on_row(void *user, const int32_t *row, int n_row, int step) {
  Rows *r = user;
  if (n_row != r->n_row || step != r->n + r->max_delay) r->bad_step++;
  if (r->n < r->cap) memcpy(r->rows + (size_t)r->n * n_row, row, sizeof *row * (size_t)n_row);
  r->n++;
  if (r->g) { /* stepping or pushing from the callback is refused */
    sc_error e = {0};
    int32_t codes[64] = {0}, out[64];
    int has, n;
    r->reenter_rc = sc_moshi_step(r->g, codes, out, &has, &e) == SC_EUSAGE &&
                    sc_moshi_push(r->g, codes, 1, on_row, r, &n, &e) == SC_EUSAGE && strstr(e.msg, "callback");
    r->g = NULL;
  }
  return r->stop_at && r->n == r->stop_at;
}

/* sc_moshi_push: its callback rows are sc_moshi_step's (the package's
 * greedy rows), pushed whole, frame by frame and in uneven pieces; a stop
 * from the callback ends the push after that frame and pushing the rest
 * continues the stream; a bad frame in the middle is refused after the
 * frames before it went in, and the stream continues from it. */
static void pushed(sc_session *s, const int *user, int S, int U, const int *want, int R, int Q, const char *name) {
  const int n_row = 1 + Q;
  Rows r = {.cap = R + 4, .n_row = n_row};
  r.rows = calloc((size_t)r.cap * n_row, sizeof *r.rows);
  sc_moshi_params gp = {.greedy = 1};
  sc_moshi_info info;
  sc_error err = {0};
  for (int mode = 0; mode < 5; mode++) {
    sc_moshi *g = NULL;
    CHECK_MSG(sc_moshi_open(s, &gp, &g, &info, &err) == 0, "%s", err.msg);
    if (!g) break;
    r.n = 0, r.bad_step = 0, r.max_delay = info.max_delay, r.stop_at = 0, r.g = NULL, r.reenter_rc = 0;
    int done = 0, n;
    if (mode == 0) { /* whole, and the callback tries to re-enter */
      r.g = g;
      CHECK_MSG(sc_moshi_push(g, user, S, on_row, &r, &n, &err) == 0, "%s", err.msg);
      CHECK(n == S && r.reenter_rc == 1);
    } else if (mode == 1) { /* frame by frame, a push of 0 frames between */
      for (int st = 0; st < S; st++) {
        CHECK(sc_moshi_push(g, user + (size_t)st * U, 1, on_row, &r, &n, &err) == 0 && n == 1);
        CHECK(sc_moshi_push(g, NULL, 0, on_row, &r, &n, &err) == 0 && n == 0);
      }
    } else if (mode == 2) { /* uneven pieces */
      for (int st = 0, piece = 3; st < S; st += piece, piece = piece % 4 + 1) {
        int k = piece < S - st ? piece : S - st;
        CHECK(sc_moshi_push(g, user + (size_t)st * U, k, on_row, &r, &n, &err) == 0 && n == k);
      }
    } else if (mode == 3) { /* stop after the second row, then the rest */
      r.stop_at = 2;
      CHECK(sc_moshi_push(g, user, S, on_row, &r, &done, &err) == 0);
      CHECK_MSG(done == info.max_delay + 2 && r.n == 2, "%s: stopped after %d frames, %d rows", name, done, r.n);
      r.stop_at = 0;
      CHECK(sc_moshi_push(g, user + (size_t)done * U, S - done, on_row, &r, &n, &err) == 0 && n == S - done);
    } else { /* a code outside the codebook at frame 5: refused, then continued */
      int *bad = malloc(sizeof *bad * (size_t)S * U);
      memcpy(bad, user, sizeof *bad * (size_t)S * U);
      bad[5 * U + U - 1] = info.card + 3;
      CHECK(sc_moshi_push(g, bad, S, on_row, &r, &done, &err) == SC_EINPUT && done == 5);
      CHECK_CONTAINS(err.msg, "step 5: user code");
      CHECK_CONTAINS(err.msg, "outside [0, ");
      CHECK(r.n == (5 > info.max_delay ? 5 - info.max_delay : 0));
      CHECK(sc_moshi_push(g, user + 5 * U, S - 5, on_row, &r, &n, &err) == 0 && n == S - 5);
      CHECK(sc_moshi_push(g, NULL, 2, on_row, &r, &n, &err) == SC_EUSAGE && n == 0);
      CHECK(sc_moshi_push(g, user, -1, on_row, &r, &n, &err) == SC_EUSAGE);
      free(bad);
    }
    CHECK_MSG(r.n == R && r.bad_step == 0, "%s push mode %d: %d rows (expected %d), %d with a wrong step", name, mode,
              r.n, R, r.bad_step);
    CHECK_MSG(r.n != R || !memcmp(r.rows, want, sizeof *want * (size_t)R * n_row),
              "%s push mode %d: the callback's rows are not sc_moshi_step's", name, mode);
    sc_moshi_close(g);
  }
  free(r.rows);
  printf("%s: sc_moshi_push rows identical (whole, frame by frame, pieces, stop and resume, bad frame)\n", name);
}

static void lmgen(sc_session *s, const char *dir, const char *name, const char *cc) {
  char path[300];
  snprintf(path, sizeof path, "%s/trace.json", dir);
  char *p = slurp(path, NULL);
  cJSON *tr = cJSON_Parse(p);
  free(p);
  const int S = cJSON_GetObjectItem(tr, "gen_steps")->valueint, R = cJSON_GetObjectItem(tr, "gen_rows")->valueint;
  const int U = cJSON_GetObjectItem(tr, "user_codebooks")->valueint, Q = cJSON_GetObjectItem(tr, "dep_q")->valueint;
  cJSON_Delete(tr);
  int *user = load(dir, "user.i32", (long)S * U * 4), *want = load(dir, "gen.i32", (long)R * (1 + Q) * 4);
  sc_moshi *g = NULL;
  sc_moshi_info info;
  sc_error err = {0};
  sc_moshi_params gp = {.greedy = 1};
  CHECK_MSG(sc_moshi_open(s, &gp, &g, &info, &err) == 0, "%s", err.msg);
  if (g && user && want) {
    CHECK(info.user_codebooks == U && info.dep_q == Q);
    int rows = 0, row[64], has = 0;
    for (int st = 0; st < S; st++) {
      CHECK_MSG(sc_moshi_step(g, user + (size_t)st * U, row, &has, &err) == 0, "%s", err.msg);
      if (!has) continue;
      CHECK_MSG(rows < R, "%s: more rows than LMGen returned", name);
      if (rows < R)
        for (int k = 0; k <= Q; k++)
          CHECK_MSG(row[k] == want[rows * (1 + Q) + k], "%s %s LMGen row %d token %d: %d, expected %d", name, cc,
                    rows, k, row[k], want[rows * (1 + Q) + k]);
      rows++;
    }
    CHECK_MSG(rows == R, "%s: %d LMGen rows, expected %d", name, rows, R);
    /* a user code outside the codebook is refused with the step named */
    int bad[64] = {0};
    bad[0] = info.card;
    CHECK(sc_moshi_step(g, bad, row, &has, &err) == SC_EINPUT);
    CHECK_CONTAINS(err.msg, "outside");
    printf("%s %s: %d LMGen greedy rows identical\n", name, cc, rows);
  }
  sc_moshi_close(g);
  if (user && want) pushed(s, user, S, U, want, R, Q, name);
  if (user && want) sampled(s, user, S, U, want, R, Q, name);
  free(user);
  free(want);
}

/* sc_moshi_batch_step against sc_moshi_step alone: conversations of B =
 * 1, 2, 3, 8 and 17 at once (17: more than the entries' 16 rows, two
 * calls a step), B + 3 in all, each with its own user codes, length and
 * sampling (greedy, or the defaults with a seed of its own), joining at
 * other steps (three in the first steps, then one each time a
 * conversation ends: its slot refilled at once), so rows sit at different
 * steps; every row and has_row equal to the conversation's run alone
 * (the CPU: the same bits, so the same draws).  Refusals: a code outside
 * the codebook steps no generator; a generator added twice, or a second
 * one on the same session.  On the CPU again with SPEECHC_ISA=portable and
 * avx2 (where the CPU has it). */
enum { BT_MAXC = 20, BT_MAXL = 12 };

static void bt_user(int c, int st, int U, int card, int32_t *u) {
  for (int i = 0; i < U; i++) u[i] = (int32_t)((c * 131 + st * 17 + i * 7 + 3) % card);
}

static void bt_params(const sc_model *m, int c, sc_moshi_params *p) {
  sc_error err = {0};
  CHECK(sc_moshi_defaults(m, p, &err) == 0);
  p->greedy = c % 3 == 0;
  p->seed = 1000 + (uint64_t)c;
}

static void batched_isa(sc_model *m, const char *what) {
  sc_error err = {0};
  sc_session *s0 = NULL;
  sc_moshi *g0 = NULL;
  sc_moshi_info in;
  CHECK_MSG(sc_session_open(m, &s0, &err) == 0 && sc_moshi_open(s0, NULL, &g0, &in, &err) == 0, "%s", err.msg);
  sc_moshi_close(g0);
  if (!s0) return;
  const int U = in.user_codebooks, W = 1 + in.dep_q;
  static int32_t want[BT_MAXC][BT_MAXL][64], got[64 * BT_MAXC];
  static int want_has[BT_MAXC][BT_MAXL], has[BT_MAXC];
  int32_t u[64], user[64 * BT_MAXC];
  int len[BT_MAXC];
  for (int c = 0; c < BT_MAXC; c++) { /* each conversation alone */
    len[c] = 4 + (c * 5) % (BT_MAXL - 3);
    sc_moshi_params p;
    bt_params(m, c, &p);
    sc_moshi *g = NULL;
    CHECK_MSG(sc_moshi_open(s0, &p, &g, NULL, &err) == 0, "%s", err.msg);
    for (int st = 0; g && st < len[c]; st++) {
      bt_user(c, st, U, in.card, u);
      CHECK_MSG(sc_moshi_step(g, u, want[c][st], &want_has[c][st], &err) == 0, "%s", err.msg);
    }
    sc_moshi_close(g);
  }
  static const int Bs[] = {1, 2, 3, 8, 17};
  for (size_t bi = 0; bi < sizeof Bs / sizeof *Bs; bi++) {
    const int B = Bs[bi], N = B + 3;
    sc_moshi_batch *b = NULL;
    CHECK_MSG(sc_moshi_batch_new(m, &b, &err) == 0, "%s: %s", what, err.msg);
    if (!b) break;
    sc_session *ss[BT_MAXC] = {0};
    sc_moshi *gs[BT_MAXC] = {0};
    int who[BT_MAXC], at[BT_MAXC] = {0}, next = 0, done = 0, mismatch = 0, rows = 0;
    for (int t = 0; done < N && t < 200; t++) {
      /* joins: up to three in the first steps, then whenever a slot is free */
      while (next < N && sc_moshi_batch_size(b) < B && (next < 3 ? t >= next : 1)) {
        sc_moshi_params p;
        bt_params(m, next, &p);
        CHECK_MSG(sc_session_open(m, &ss[next], &err) == 0 && sc_moshi_open(ss[next], &p, &gs[next], NULL, &err) == 0 &&
                      sc_moshi_batch_add(b, gs[next], &err) == 0,
                  "%s", err.msg);
        next++;
      }
      const int n = sc_moshi_batch_size(b);
      for (int i = 0; i < n; i++) {
        sc_moshi *g = sc_moshi_batch_get(b, i);
        int c = 0;
        while (gs[c] != g) c++;
        who[i] = c;
        bt_user(c, at[c], U, in.card, user + (size_t)i * U);
      }
      if (!n) continue;
      if (t == 2 && n > 1) { /* a bad code in the last row: nothing moves */
        int32_t keep = user[(size_t)(n - 1) * U];
        user[(size_t)(n - 1) * U] = in.card;
        CHECK(sc_moshi_batch_step(b, user, got, has, &err) == SC_EINPUT);
        CHECK_CONTAINS(err.msg, "outside");
        user[(size_t)(n - 1) * U] = keep;
        CHECK(sc_moshi_batch_add(b, sc_moshi_batch_get(b, 0), &err) == SC_EUSAGE);
        sc_moshi *twin = NULL;
        CHECK(sc_moshi_open(ss[who[0]], NULL, &twin, NULL, &err) == SC_OK);
        CHECK(sc_moshi_batch_add(b, twin, &err) == SC_EUSAGE);
        CHECK_CONTAINS(err.msg, "same session");
        sc_moshi_close(twin); /* reset the session: so step the original no more */
        sc_moshi_batch_remove(b, gs[who[0]]);
        /* its alone run restarts: the session's caches were reset */
        sc_moshi_close(gs[who[0]]);
        sc_moshi_params p;
        bt_params(m, who[0], &p);
        CHECK(sc_moshi_open(ss[who[0]], &p, &gs[who[0]], NULL, &err) == SC_OK);
        at[who[0]] = 0;
        CHECK(sc_moshi_batch_add(b, gs[who[0]], &err) == SC_OK);
        continue;
      }
      CHECK_MSG(sc_moshi_batch_step(b, user, got, has, &err) == 0, "%s B=%d: %s", what, B, err.msg);
      for (int i = 0; i < n; i++) {
        const int c = who[i], st = at[c]++;
        if (has[i] != want_has[c][st] || (has[i] && memcmp(got + (size_t)i * W, want[c][st], sizeof *got * W))) {
          if (!mismatch++)
            CHECK_MSG(0, "%s B=%d: conversation %d step %d: the batched row differs from its run alone", what, B, c,
                      st);
        }
        rows += has[i];
        if (at[c] == len[c]) {
          CHECK(sc_moshi_batch_remove(b, gs[c]) == 0);
          sc_moshi_close(gs[c]);
          sc_session_close(ss[c]);
          gs[c] = NULL;
          ss[c] = NULL;
          done++;
        }
      }
    }
    CHECK_MSG(done == N, "%s B=%d: %d of %d conversations ended", what, B, done, N);
    if (!mismatch) printf("%s: %d conversations, %d at once: %d rows identical to their runs alone\n", what, N, B, rows);
    for (int c = 0; c < BT_MAXC; c++) {
      sc_moshi_close(gs[c]);
      sc_session_close(ss[c]);
    }
    sc_moshi_batch_free(b);
  }
  sc_session_close(s0);
}

/* batched_isa with the default kernels, then (the CPU) with each other ISA
 * this CPU runs: sessions pick their kernels when they open. */
static void batched(sc_model *m, const char *what) {
  batched_isa(m, what);
  if (strcmp(test_target(), "cpu")) return;
  const char *isas[2];
  const int n = test_other_isas(isas);
  for (int i = 0; i < n; i++) {
    char tag[160];
    snprintf(tag, sizeof tag, "%s SPEECHC_ISA=%s", what, isas[i]);
    setenv("SPEECHC_ISA", isas[i], 1);
    batched_isa(m, tag);
    unsetenv("SPEECHC_ISA");
  }
}

/* tests/data/moshi/<name>: logits per row at 1e-4 relative */
/* A fixture's shapes (trace.json, config.json; dim from the model): *T
 * its steps; 0 when unreadable. */
static int read_lm(const char *dir, const sc_model *m, Lm *lm, int *T) {
  char *p, path[300];
  snprintf(path, sizeof path, "%s/trace.json", dir);
  p = slurp(path, NULL);
  cJSON *tr = p ? cJSON_Parse(p) : NULL;
  free(p);
  CHECK_MSG(tr, "%s unreadable", path);
  if (!tr) return 0;
  memset(lm, 0, sizeof *lm);
  lm->K = cJSON_GetObjectItem(tr, "K")->valueint;
  lm->Q = cJSON_GetObjectItem(tr, "dep_q")->valueint;
  lm->card = cJSON_GetObjectItem(tr, "card")->valueint;
  lm->text_out = cJSON_GetObjectItem(tr, "text_card_out")->valueint;
  *T = cJSON_GetObjectItem(tr, "T")->valueint;
  int_array(cJSON_GetObjectItem(tr, "delays"), lm->delays, 64);
  cJSON_Delete(tr);
  sc_model_info info;
  sc_model_get_info(m, &info);
  lm->dim = info.hidden;
  /* text_card from the temporal's ids: the initial text token is text_card */
  snprintf(path, sizeof path, "%s/config.json", dir);
  p = slurp(path, NULL);
  cJSON *cfg = p ? cJSON_Parse(p) : NULL;
  free(p);
  CHECK_MSG(cfg, "%s unreadable", path);
  if (!cfg) return 0;
  lm->text_card = cJSON_GetObjectItem(cfg, "text_card")->valueint;
  cJSON_Delete(cfg);
  return 1;
}

static void parity(const char *name, const char *cc, int fuse) {
  char dir[256];
  snprintf(dir, sizeof dir, "tests/data/moshi/%s", name);
  sc_session *s = NULL;
  sc_model *m = build_open(dir, name, cc, fuse, &s);
  if (!s) return;
  Lm lm;
  int T = 0;
  sc_error err = {0};
  if (!read_lm(dir, m, &lm, &T)) {
    sc_session_close(s);
    sc_model_close(m);
    return;
  }

  int *codes = load(dir, "codes.i32", (long)lm.K * T * 4);
  float *want = load(dir, "logits.f32", (long)lm.Q * T * lm.card * 4);
  float *wtext = load(dir, "text_logits.f32", (long)T * lm.text_out * 4);
  unsigned char *wmask = load(dir, "mask.u8", (long)lm.Q * T), *wtmask = load(dir, "text_mask.u8", T);
  float *got = malloc(sizeof *got * (size_t)lm.Q * T * lm.card), *gtext = malloc(sizeof *gtext * (size_t)T * lm.text_out);
  unsigned char *mask = malloc((size_t)lm.Q * T), *tmask = malloc((size_t)T);
  if (codes && want && wtext && wmask && wtmask) {
    int rc = forward(s, &lm, codes, T, got, gtext, mask, tmask, &err);
    CHECK_MSG(rc == 0, "%s: %s", name, err.msg);
    double worst = 0;
    for (int k = 0; k < lm.Q && !rc; k++)
      for (int t = 0; t < T; t++) {
        CHECK_MSG(mask[k * T + t] == wmask[k * T + t], "%s mask[%d][%d]", name, k, t);
        const size_t o = ((size_t)k * T + t) * lm.card;
        if (isnan(want[o])) {
          CHECK_MSG(isnan(got[o]), "%s %s: codebook %d step %d should have no prediction", name, cc, k, t);
          continue;
        }
        double e = rel_err(got + o, want + o, lm.card);
        if (e > worst) worst = e;
        CHECK_MSG(e <= 1e-4, "%s %s fuse %d: codebook %d step %d: rel err %g", name, cc, fuse, k, t, e);
      }
    for (int t = 0; t < T && !rc; t++) {
      CHECK_MSG(tmask[t] == wtmask[t], "%s text mask[%d]", name, t);
      const size_t o = (size_t)t * lm.text_out;
      if (isnan(wtext[o])) continue;
      double e = rel_err(gtext + o, wtext + o, lm.text_out);
      if (e > worst) worst = e;
      CHECK_MSG(e <= 1e-4, "%s %s fuse %d: text step %d: rel err %g", name, cc, fuse, t, e);
    }
    printf("%s %s fuse %d: worst rel err %.3g over %d steps\n", name, cc, fuse, worst, T);
  }
  lmgen(s, dir, name, cc);
  if (!strcmp(cc, "tcc") && fuse) {
    sc_session *ref = NULL;
    CHECK_MSG(sc_session_open(m, &ref, &err) == 0, "%s", err.msg);
    int zeros[128] = {0}; /* user codes: row 0 depends on step 0 only */
    if (ref) topk_draws(s, ref, zeros, lm.K - 1 - lm.Q, name);
    sc_session_close(ref);
    char what[96];
    snprintf(what, sizeof what, "%s %s", name, test_target());
    batched(m, what);
  }
  free(codes), free(want), free(wtext), free(wmask), free(wtmask), free(got), free(gtext), free(mask), free(tmask);
  sc_session_close(s);
  sc_model_close(m);
}

/* One depformer step (dep_q 1) with per-step weights: the package keeps
 * its FFN a one-element list (depformer.layers.L.gating.0.*); and
 * depformer_causal false in config.json, which its loader drops.  LMGen's
 * rows only: the package's training forward fails on dep_q 1. */
static void one_depformer_step(const char *cc) {
  const char *dir = "tests/data/moshi/dq1_tiny";
  sc_session *s = NULL;
  sc_model *m = build_open(dir, "dq1_tiny", cc, 1, &s);
  if (!s) return;
  lmgen(s, dir, "dq1_tiny", cc);
  sc_session_close(s);
  sc_model_close(m);
}

static double cosine(const float *a, const float *b, int n) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < n; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
  return ab / (sqrt(aa * bb) + 1e-300);
}

static int argmax(const float *x, int n, float *margin) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  float second = -INFINITY;
  for (int i = 0; i < n; i++)
    if (i != best && x[i] > second) second = x[i];
  *margin = x[best] - second;
  return best;
}

/* The bands against f32, teacher-forced on the fixture's codes (every run
 * sees the same tokens, so a band is judged step by step, not on a
 * trajectory that diverged): per step and codebook (and the text), the
 * logits' cosine with f32's and whether the argmax agrees, where f32's
 * own top-2 margin is at least `margin` of its logits' spread (closer
 * calls are rounding's to decide).  The gates hold the random fixture at
 * its floors (measured on Zen 5, AVX-512: cosine 0.999892 / 0.997680 /
 * 0.647994, agreement 80/80, 79/80, 59/80): random weights amplify
 * rounding, and q4_0's 4-bit steps on 64-column rows (two blocks) drift
 * most; on trained weights the same bands land far closer. */
static void bands(const char *name) {
  static const DType bandv[] = {DT_BF16, DT_Q8_0, DT_Q4_0};
  static const double min_cos[] = {0.9998, 0.995, 0.6}, min_agree[] = {0.98, 0.95, 0.7};
  const double margin = 0.02;
  char dir[256];
  snprintf(dir, sizeof dir, "tests/data/moshi/%s", name);
  sc_session *s0 = NULL;
  sc_model *m0 = build_open(dir, name, "tcc", 1, &s0);
  Lm lm;
  int T = 0;
  sc_error err = {0};
  if (!s0 || !read_lm(dir, m0, &lm, &T)) {
    sc_session_close(s0);
    sc_model_close(m0);
    return;
  }
  const size_t nl = (size_t)lm.Q * T * lm.card, nt = (size_t)T * lm.text_out;
  int *codes = load(dir, "codes.i32", (long)lm.K * T * 4);
  float *ref = malloc(sizeof *ref * nl), *rtext = malloc(sizeof *rtext * nt), *got = malloc(sizeof *got * nl),
        *gtext = malloc(sizeof *gtext * nt);
  unsigned char *mask = malloc((size_t)lm.Q * T), *tmask = malloc((size_t)T);
  int rc = codes ? forward(s0, &lm, codes, T, ref, rtext, mask, tmask, &err) : -1;
  CHECK_MSG(rc == 0, "%s f32: %s", name, err.msg);
  for (size_t b = 0; b < sizeof bandv / sizeof *bandv && !rc; b++) {
    sc_session *s = NULL;
    sc_model *m = build_band(dir, name, "tcc", 1, bandv[b], &s);
    if (!s) continue;
    CHECK_MSG(forward(s, &lm, codes, T, got, gtext, mask, tmask, &err) == 0, "%s %s: %s", name,
              ir_dtype_name(bandv[b]), err.msg);
    double worst = 1;
    int rows = 0, agree = 0, decided = 0;
    for (int k = 0; k <= lm.Q; k++) /* k = Q: the text */
      for (int t = 0; t < T; t++) {
        const int n = k < lm.Q ? lm.card : lm.text_out;
        const float *r = k < lm.Q ? ref + ((size_t)k * T + t) * lm.card : rtext + (size_t)t * lm.text_out;
        const float *g = k < lm.Q ? got + ((size_t)k * T + t) * lm.card : gtext + (size_t)t * lm.text_out;
        if (isnan(r[0])) continue;
        const double c = cosine(g, r, n);
        if (c < worst) worst = c;
        rows++;
        float mr, mg, lo = r[0], hi = r[0];
        for (int i = 0; i < n; i++) lo = r[i] < lo ? r[i] : lo, hi = r[i] > hi ? r[i] : hi;
        const int ar = argmax(r, n, &mr), ag = argmax(g, n, &mg);
        if (mr < margin * (hi - lo)) continue;
        decided++;
        agree += ar == ag;
      }
    const double frac = decided ? (double)agree / decided : 1;
    printf("%s %s: logits cosine >= %.6f over %d rows; argmax agrees on %d of %d decided rows (%.4f)\n", name,
           ir_dtype_name(bandv[b]), worst, rows, agree, decided, frac);
    CHECK_MSG(rows > 0 && decided > rows / 2, "%s: %d rows, %d decided", name, rows, decided);
    CHECK_MSG(worst >= min_cos[b], "%s %s: logits cosine %.6f < %.4f", name, ir_dtype_name(bandv[b]), worst,
              min_cos[b]);
    CHECK_MSG(frac >= min_agree[b], "%s %s: argmax agreement %.4f < %.2f", name, ir_dtype_name(bandv[b]), frac,
              min_agree[b]);
    char what[96];
    snprintf(what, sizeof what, "%s %s", name, ir_dtype_name(bandv[b]));
    batched(m, what);
    sc_session_close(s);
    sc_model_close(m);
  }
  free(codes), free(ref), free(rtext), free(got), free(gtext), free(mask), free(tmask);
  sc_session_close(s0);
  sc_model_close(m0);
}

/* moshi.utils.utils.cross_entropy, mean over batch and time per codebook */
static void ce_mean(const float *logits, const int *targets, const unsigned char *mask, int B, int K, int T, int V,
                    double *out) {
  for (int k = 0; k < K; k++) {
    double sum = 0;
    for (int b = 0; b < B; b++)
      for (int t = 0; t < T; t++) {
        const size_t r = ((size_t)b * K + k) * T + t;
        if (!mask[r]) continue;
        const float *l = logits + r * V;
        float mx = -INFINITY;
        for (int c = 0; c < V; c++) mx = l[c] > mx ? l[c] : mx;
        double z = 0;
        for (int c = 0; c < V; c++) z += exp((double)l[c] - mx);
        sum += mx + log(z) - l[targets[r]];
      }
    out[k] = sum / (B * T);
  }
}

static const StTensor *tensor(const StFile *f, const char *name) {
  for (int i = 0; i < f->n_tensors; i++)
    if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
  return NULL;
}

/* The package's own test: tests/test_lm.py::test_forward. */
static void conformance(void) {
  const char *env = getenv("SPEECHC_SHARED");
  char src[512], dir[300], path[700];
  if (env && *env) snprintf(src, sizeof src, "%s/conformance/moshi", env);
  else snprintf(src, sizeof src, "tests/data/moshi/conformance");
  snprintf(dir, sizeof dir, "%s/conformance", tmpdir);
  mkdir(dir, 0700);
  /* the checkpoint's files must be inside its directory: a copy */
  snprintf(path, sizeof path, "%s/test_lm_model.safetensors", src);
  long size = 0;
  char *model = slurp(path, &size);
  CHECK_MSG(model != NULL, "%s is missing (the conformance fixture; SPEECHC_SHARED names a shared/ folder holding it)", path);
  if (!model) return;
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(model, 1, (size_t)size, f) == (size_t)size);
  if (f) fclose(f);
  free(model);
  snprintf(path, sizeof path, "%s/config.json", dir);
  f = fopen(path, "w");
  fputs("{\"model_type\": \"moshi\", \"delays\": [0, 1, 2, 4], \"n_q\": 3, \"dep_q\": 3, \"card\": 32,\n"
        " \"text_card\": 48, \"dim\": 16, \"num_layers\": 2, \"num_heads\": 1, \"hidden_scale\": 1,\n"
        " \"depformer_dim\": 16, \"depformer_multi_linear\": true, \"depformer_weights_per_step\": true,\n"
        " \"depformer_weights_per_step_schedule\": [0, 1, 1], \"depformer_low_rank_embeddings\": 8,\n"
        " \"depformer_num_heads\": 1, \"depformer_gating\": \"silu\", \"context\": 4}\n", f);
  fclose(f);

  StFile cf = {0}, of = {0};
  sc_error err = {0};
  snprintf(path, sizeof path, "%s/test_lm_codes.safetensors", src);
  CHECK_MSG(st_open(&cf, path, &err) == 0, "%s", err.msg);
  snprintf(path, sizeof path, "%s/test_lm_out.safetensors", src);
  CHECK_MSG(st_open(&of, path, &err) == 0, "%s", err.msg);
  const StTensor *ct = tensor(&cf, "codes"), *lt = tensor(&of, "logits"), *tt = tensor(&of, "text_logits"),
                 *mt = tensor(&of, "mask"), *tmt = tensor(&of, "text_mask");
  CHECK(ct && lt && tt && mt && tmt && ct->ndim == 3 && ct->dtype == ST_I64);
  if (!(ct && lt && tt && mt && tmt && ct->ndim == 3)) return;
  const int B = (int)ct->shape[0], K = (int)ct->shape[1], T = (int)ct->shape[2];
  Lm lm = {.K = K, .Q = 3, .card = 32, .text_card = 48, .text_out = 48, .dim = 16, .delays = {0, 1, 2, 4}};
  CHECK(lt->numel == (int64_t)B * lm.Q * T * lm.card && tt->numel == (int64_t)B * T * lm.text_out);

  for (int cc = 0; cc < (strcmp(test_target(), "cpu") ? 1 : 2); cc++) { /* a device: the host code's cc is moot */
    sc_session *s = NULL;
    sc_model *m = build_open(dir, "conformance", cc ? "gcc" : "tcc", 1, &s);
    if (!s) return;
    float *ref = malloc(sizeof *ref * (size_t)lt->numel), *rtext = malloc(sizeof *rtext * (size_t)tt->numel);
    float *got = malloc(sizeof *got * (size_t)lt->numel), *gtext = malloc(sizeof *gtext * (size_t)tt->numel);
    unsigned char *mask = malloc((size_t)B * lm.Q * T), *tmask = malloc((size_t)B * T);
    int *codes = malloc(sizeof *codes * (size_t)B * K * T), *atgt = malloc(sizeof *atgt * (size_t)B * lm.Q * T),
        *ttgt = malloc(sizeof *ttgt * (size_t)B * T);
    st_read_f32(lt, 0, lt->numel, ref);
    st_read_f32(tt, 0, tt->numel, rtext);
    const int64_t *c64 = (const int64_t *)ct->data;
    for (int64_t i = 0; i < (int64_t)B * K * T; i++) codes[i] = (int)c64[i];
    for (int b = 0; b < B; b++) {
      int rc = forward(s, &lm, codes + (size_t)b * K * T, T, got + (size_t)b * lm.Q * T * lm.card,
                       gtext + (size_t)b * T * lm.text_out, mask + (size_t)b * lm.Q * T, tmask + (size_t)b * T, &err);
      CHECK_MSG(rc == 0, "conformance batch %d: %s", b, err.msg);
      for (int t = 0; t < T; t++) {
        for (int k = 0; k < lm.Q; k++) atgt[((size_t)b * lm.Q + k) * T + t] = codes[((size_t)b * K + 1 + k) * T + t];
        ttgt[(size_t)b * T + t] = codes[(size_t)b * K * T + t];
      }
    }
    /* the masks equal the stored ones */
    for (int64_t i = 0; i < mt->numel; i++) CHECK_MSG(mask[i] == mt->data[i], "conformance mask %lld", (long long)i);
    for (int64_t i = 0; i < tmt->numel; i++) CHECK_MSG(tmask[i] == tmt->data[i], "text mask %lld", (long long)i);
    double ce[8], ce_ref[8], tce, tce_ref, worst = 0;
    ce_mean(got, atgt, mask, B, lm.Q, T, lm.card, ce);
    ce_mean(ref, atgt, mask, B, lm.Q, T, lm.card, ce_ref);
    ce_mean(gtext, ttgt, tmask, B, 1, T, lm.text_out, &tce);
    ce_mean(rtext, ttgt, tmask, B, 1, T, lm.text_out, &tce_ref);
    for (int k = 0; k <= lm.Q; k++) {
      const double a = k < lm.Q ? ce[k] : tce, r = k < lm.Q ? ce_ref[k] : tce_ref, d = fabs(a - r) / r;
      if (d > worst) worst = d;
      CHECK_MSG(d <= 1e-6, "conformance %s: %s cross-entropy %.9g vs %.9g: rel %g", cc ? "gcc" : "tcc",
                k < lm.Q ? "audio" : "text", a, r, d);
    }
    printf("conformance %s: masked cross-entropy worst rel diff %.3g (criterion 1e-6)\n", cc ? "gcc" : "tcc", worst);
    free(ref), free(rtext), free(got), free(gtext), free(mask), free(tmask), free(codes), free(atgt), free(ttgt);
    sc_session_close(s);
    sc_model_close(m);
  }
  st_close(&cf);
  st_close(&of);
}

/* A switch speechc does not lower is refused by name. */
static void refusals(void) {
  static const struct { const char *add, *want; } cases[] = {
      {"\"norm_emb\": true", "norm_emb"},
      {"\"demux_second_text_stream\": true", "demux_second_text_stream"},
      {"\"depformer_norm\": \"layer_norm\"", "depformer_norm"},
      {"\"gating\": \"relu\"", "gating 'relu'"},
      {"\"norm\": \"batch_norm\"", "norm 'batch_norm'"},
      {"\"positional_embedding\": \"alibi\"", "positional_embedding 'alibi'"},
      {"\"cross_attention\": true", "cross_attention"},
      {"\"frobnicate\": 1", "'frobnicate'"},
      {"\"causal\": false", "causal"},
      {"\"lm_gen_config\": {\"cfg_coef\": 3.0}", "cfg_coef 3"},
      {"\"lm_gen_config\": {\"top_p\": 0.9}", "lm_gen_config key 'top_p'"},
      {"\"lm_gen_config\": {\"temp\": \"hot\"}", "temp"},
  };
  char dir[300], path[400], cmd[900];
  snprintf(dir, sizeof dir, "%s/refuse", tmpdir);
  mkdir(dir, 0700);
  snprintf(cmd, sizeof cmd, "cp tests/data/moshi/family_tiny/model.safetensors %s/", dir);
  CHECK(system(cmd) == 0);
  char *base = slurp("tests/data/moshi/family_tiny/config.json", NULL);
  CHECK(base != NULL);
  if (!base) return;
  char *brace = strrchr(base, '}');
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "%.*s, %s}\n", (int)(brace - base), base, cases[i].add);
    fclose(f);
    BuildOpts o = build_defaults();
    char out[400];
    snprintf(out, sizeof out, "%s/refused.so", tmpdir);
    o.model_dir = dir;
    o.out_path = out;
    o.quiet = 1;
    sc_error err = {0};
    CHECK_MSG(sc_build(&o, &err) == SC_EINPUT, "%s was accepted", cases[i].add);
    CHECK_CONTAINS(err.msg, cases[i].want);
  }
  /* lm_gen_config gives the sampling defaults, as run_inference passes it to LMGen */
  snprintf(path, sizeof path, "%s/config.json", dir);
  FILE *f = fopen(path, "w");
  fprintf(f, "%.*s, \"lm_gen_config\": {\"temp\": 0.5, \"temp_text\": 0.25, \"top_k\": 7, \"top_k_text\": 3, "
          "\"use_sampling\": false, \"cfg_coef\": 1.0}}\n", (int)(brace - base), base);
  fclose(f);
  sc_session *s = NULL;
  sc_model *m = build_open(dir, "gencfg", "tcc", 1, &s);
  sc_moshi_params p;
  sc_error err = {0};
  if (m) {
    CHECK_MSG(sc_moshi_defaults(m, &p, &err) == 0, "%s", err.msg);
    CHECK(p.greedy && p.temp == 0.5f && p.temp_text == 0.25f && p.top_k == 7 && p.top_k_text == 3 && p.seed == 4242);
  }
  sc_session_close(s);
  sc_model_close(m);
  free(base);
}

/* Checkpoints as the package ships them:
 *   - the built-in 7B defaults equal the package's (_lm_kwargs and the file
 *     names, tests/data/moshi/defaults_7b.json, written by make_moshi.py);
 *   - config.json's moshi_name names the LM file, beside other
 *     .safetensors files (its Mimi): the package's greedy rows;
 *   - a moshi_name that is missing or not a plain file name is refused;
 *   - without config.json, Moshi weights get the 7B's shapes.  The 7B is
 *     too big to build here, so this is seen in the error on the tiny
 *     weights: the first tensor is expected at the 7B's [card + 1, dim];
 *     weights that are not Moshi's keep the missing-config.json message. */
static void shipped(void) {
  char *want = slurp("tests/data/moshi/defaults_7b.json", NULL);
  cJSON *a = want ? cJSON_Parse(want) : NULL, *b = cJSON_Parse(fe_moshi_7b_config);
  CHECK_MSG(a && b && cJSON_Compare(a, b, 1), "fe_moshi_7b_config differs from the package's _lm_kwargs");
  cJSON_Delete(a), cJSON_Delete(b), free(want);

  char dir[100], cmd[2000], path[400];
  snprintf(dir, sizeof dir, "%s/shipped", tmpdir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s/legacy %s/other && cp tests/data/moshi/moshi7b_tiny/model.safetensors "
           "%s/lm_weights.safetensors && cp tests/data/mimi/mimi_tiny/model.safetensors %s/mimi.safetensors && "
           "sed 's/\"moshi_name\": \"model.safetensors\"/\"moshi_name\": \"lm_weights.safetensors\"/' "
           "tests/data/moshi/moshi7b_tiny/config.json > %s/config.json && grep -q lm_weights %s/config.json && "
           "cp tests/data/moshi/moshi7b_tiny/model.safetensors %s/legacy/ && "
           "cp tests/data/mimi/mimi_tiny/model.safetensors %s/other/", dir, dir, dir, dir, dir, dir, dir, dir);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  sc_session *s = NULL;
  sc_model *m = build_open(dir, "shipped", "tcc", 1, &s);
  if (s) lmgen(s, "tests/data/moshi/moshi7b_tiny", "moshi_name", "tcc");
  sc_session_close(s);
  sc_model_close(m);

  static const struct { const char *name, *want; } bad[] = {
      {"absent.safetensors", "absent.safetensors: missing"},
      {"../moshi7b_tiny/model.safetensors", "must be the name of a .safetensors file"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    snprintf(cmd, sizeof cmd, "sed -i 's#\"moshi_name\": \"[^\"]*\"#\"moshi_name\": \"%s\"#' %s/config.json", bad[i].name,
             dir);
    CHECK(system(cmd) == 0);
    Checkpoint c;
    sc_error err = {0};
    CHECK_MSG(ckpt_open(&c, dir, &err) == SC_EINPUT, "moshi_name %s was accepted", bad[i].name);
    CHECK_CONTAINS(err.msg, bad[i].want);
  }
  static const struct { const char *sub, *want; } none[] = {
      {"legacy", "tensor 'emb.0.weight' has shape [25, 16], expected [2049, 4096]"},
      {"other", "config.json: not found"},
  };
  for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, none[i].sub);
    char out[450];
    snprintf(out, sizeof out, "%s/none.so", tmpdir);
    BuildOpts o = build_defaults();
    o.model_dir = path;
    o.out_path = out;
    o.quiet = 1;
    sc_error err = {0};
    CHECK_MSG(sc_build(&o, &err) == SC_EINPUT, "%s without config.json was accepted", none[i].sub);
    CHECK_CONTAINS(err.msg, none[i].want);
    if (i == 0) CHECK_CONTAINS(err.msg, "7B defaults");
  }
}

/* One command: `speechc build` of a Moshi directory whose mimi_name file is
 * present also builds that Mimi (OUT.codec.so), with num_codebooks
 * max(dep_q, n_q - dep_q) and the config of mimi_config_name, as the
 * package's get_mimi: the tiny Mimi's streaming decode (test_mimi's
 * fixture) within 1e-5 of its peak.  --no-codec builds the LM alone. */
static void one_command(void) {
  const char *bin = getenv("SPEECHC_BIN");
  if (!bin || !*bin) return;
  char dir[100], cmd[4096], path[200];
  snprintf(dir, sizeof dir, "%s/with_mimi", tmpdir);
  snprintf(cmd, sizeof cmd, "mkdir -p %s/out && cp tests/data/moshi/family_tiny/model.safetensors %s/ && "
           "cp tests/data/mimi/mimi_tiny/model.safetensors %s/mimi.safetensors && "
           "grep -v '\"model_type\"\\|\"num_codebooks\"' tests/data/mimi/mimi_tiny/config.json > %s/mimi_config.json && "
           "sed 's/\"model_type\": \"moshi\"/\"model_type\": \"moshi\", \"mimi_config_name\": \"mimi_config.json\"/' "
           "tests/data/moshi/family_tiny/config.json > %s/config.json && grep -q mimi_config_name %s/config.json && "
           "grep -q '\"mimi_name\": \"mimi.safetensors\"' %s/config.json && "
           "%s build %s -o %s/out/m.so -q && %s decode %s/out/m.codec.so tests/data/mimi/mimi_tiny/codes.i32 "
           "-o %s/out/pcm.raw --f32 -q && %s build %s -o %s/out/n.so -q --no-codec && test ! -e %s/out/n.codec.so",
           dir, dir, dir, dir, dir, dir, dir, bin, dir, dir, bin, dir, dir, bin, dir, dir, dir);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  const long n = 6L * 1920;
  float *want = load("tests/data/mimi/mimi_tiny", "pcm.f32", n * 4);
  snprintf(path, sizeof path, "%s/out", dir);
  float *got = load(path, "pcm.raw", n * 4);
  if (want && got) {
    double peak = 0, worst = 0;
    for (long i = 0; i < n; i++) {
      if (fabs(want[i]) > peak) peak = fabs(want[i]);
      if (fabs(got[i] - want[i]) > worst) worst = fabs(got[i] - want[i]);
    }
    CHECK_MSG(worst <= 1e-5 * peak, "the Mimi built beside Moshi: max diff %g of peak %g", worst, peak);
    printf("one command: Moshi + its Mimi; decode within %.3g of the peak\n", worst / peak);
  }
  free(want);
  free(got);
}

/* speechc moshi on the fixture's user codes (JSON): the package's rows. */
static void cli(void) {
  const char *bin = getenv("SPEECHC_BIN");
  CHECK_MSG(bin && *bin, "SPEECHC_BIN is not set (ctest sets it)");
  if (!bin || !*bin) return;
  const char *dir = "tests/data/moshi/family_tiny";
  const int S = 10, U = 2, Q = 4, R = 7;
  int *user = load(dir, "user.i32", (long)S * U * 4), *want = load(dir, "gen.i32", (long)R * (1 + Q) * 4);
  if (!user || !want) return;
  char path[300], cmd[1200];
  snprintf(path, sizeof path, "%s/user.json", tmpdir);
  FILE *f = fopen(path, "w");
  fputs("{\"codes\": [", f);
  for (int st = 0; st < S; st++) fprintf(f, "%s[%d, %d]", st ? ", " : "", user[st * U], user[st * U + 1]);
  fputs("]}\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s build %s -o %s/cli.so -q && %s moshi %s/cli.so --user-codes %s --codes-out %s/out.json "
           "--greedy", bin, dir, tmpdir, bin, tmpdir, path, tmpdir);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  snprintf(path, sizeof path, "%s/out.json", tmpdir);
  char *text = slurp(path, NULL);
  cJSON *j = text ? cJSON_Parse(text) : NULL;
  const cJSON *rows = cJSON_GetObjectItem(j, "tokens");
  CHECK_MSG(cJSON_GetArraySize(rows) == R, "speechc moshi wrote %d rows, expected %d", cJSON_GetArraySize(rows), R);
  for (int r = 0; r < R && r < cJSON_GetArraySize(rows); r++)
    for (int k = 0; k <= Q; k++)
      CHECK_MSG(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, r), k)->valueint == want[r * (1 + Q) + k],
                "speechc moshi row %d token %d", r, k);
  /* sampling flags: top-k 1 at a positive temperature is greedy; a seed
   * reproduces its rows, another seed gives others */
  snprintf(cmd, sizeof cmd, "%s moshi %s/cli.so --user-codes %s/user.json --codes-out %s/k1.json --temp 3 "
           "--temp-text 3 --top-k 1 --top-k-text 1 && cmp -s %s/k1.json %s/out.json", bin, tmpdir, tmpdir, tmpdir,
           tmpdir, tmpdir);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  snprintf(cmd, sizeof cmd, "for r in 7a 7b 8; do %s moshi %s/cli.so --user-codes %s/user.json --codes-out %s/s$r.json "
           "--seed ${r%%[ab]} --temp 1.5 --temp-text 1.5 || exit 9; done; cd %s; cmp -s s7a.json out.json && exit 3; "
           "cmp -s s7a.json s7b.json || exit 4; cmp -s s7a.json s8.json && exit 5; exit 0", bin, tmpdir, tmpdir, tmpdir,
           tmpdir);
  int st = system(cmd);
  CHECK_MSG(WEXITSTATUS(st) == 0, "speechc moshi --seed: exit %d (3: sampled = greedy, 4: seed 7 not reproduced, "
            "5: seeds 7 and 8 agree)", WEXITSTATUS(st));
  /* several conversations in one run: each output the one its pair gives
   * alone (default sampling; lengths 10, 6 and 1 steps, so they end apart) */
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/u%d.json", tmpdir, k + 2);
    FILE *uf = fopen(path, "w");
    CHECK_MSG(uf != NULL, "%s", path);
    if (!uf) return;
    fputs(k ? "[" : "{\"codes\": [", uf); /* the second as a bare list */
    for (int st2 = k ? 0 : 3; st2 < (k ? 1 : 9); st2++)
      fprintf(uf, "%s[%d, %d]", st2 == (k ? 0 : 3) ? "" : ", ", user[st2 * U], user[st2 * U + 1]);
    fputs(k ? "]\n" : "]}\n", uf);
    fclose(uf);
  }
  snprintf(cmd, sizeof cmd,
           "cd %s && for u in user u2 u3; do %s moshi cli.so --user-codes $u.json --codes-out $u.alone.json -q || exit 9; done "
           "&& %s moshi cli.so --user-codes user.json --codes-out user.multi.json --user-codes u2.json --codes-out "
           "u2.multi.json --user-codes u3.json --codes-out u3.multi.json || exit 8; "
           "for u in user u2 u3; do cmp -s $u.alone.json $u.multi.json || exit 7; done; "
           "grep -q '\\[' u2.multi.json || exit 6",
           tmpdir, bin, bin);
  st = system(cmd);
  CHECK_MSG(WEXITSTATUS(st) == 0, "speechc moshi, three conversations: exit %d (9: alone failed, 8: together failed, "
            "7: an output differs from its run alone, 6: no rows)", WEXITSTATUS(st));
  static const struct {
    const char *args, *want;
  } multi_bad[] = {
      {"--user-codes user.json --codes-out a.json --user-codes u2.json", "2 --user-codes but 1 --codes-out"},
      {"--user-codes user.json --codes-out a.json --user-codes u2.json --codes-out a.json", "write the same file"},
      {"--user-codes user.json --codes-out a.json --user-codes u2.json --codes-out b.json --text-out t.txt",
       "2 conversations but 1 --text-out"},
  };
  for (size_t i = 0; i < sizeof multi_bad / sizeof *multi_bad; i++) {
    snprintf(cmd, sizeof cmd, "cd %s && %s moshi cli.so %s -q 2> err.txt", tmpdir, bin, multi_bad[i].args);
    st = system(cmd);
    snprintf(path, sizeof path, "%s/err.txt", tmpdir);
    char *msg = slurp(path, NULL);
    CHECK_MSG(WEXITSTATUS(st) != 0 && msg && strstr(msg, multi_bad[i].want), "%s: exit %d, '%s' lacks '%s'",
              multi_bad[i].args, WEXITSTATUS(st), msg ? msg : "", multi_bad[i].want);
    free(msg);
  }
  /* a conversation that outgrows the context is named by its file, before
   * any work */
  snprintf(cmd, sizeof cmd, "rm -f %s/err.txt && %s build %s -o %s/cli5.so -q --max-context 5 --no-codec && cd %s && "
           "%s moshi cli5.so --user-codes u3.json --codes-out a.json --user-codes user.json --codes-out b.json "
           "2> err.txt", tmpdir, bin, dir, tmpdir, tmpdir, bin);
  st = system(cmd);
  snprintf(path, sizeof path, "%s/err.txt", tmpdir);
  char *full = slurp(path, NULL);
  CHECK_MSG(WEXITSTATUS(st) == 1 && full && strstr(full, "user.json: 10 frames make 10 steps, more than the model's "
                                                    "context of 5"),
            "two conversations, one past max_context: exit %d, '%s'", WEXITSTATUS(st), full ? full : "");
  free(full);
  /* sc_moshi_step past the context: refused before the step touches the
   * stream, named once */
  {
    snprintf(path, sizeof path, "%s/cli5.so", tmpdir);
    sc_model *m5 = NULL;
    sc_session *s5 = NULL;
    sc_moshi *g5 = NULL;
    sc_error e5 = {0};
    CHECK_MSG(sc_model_open(path, NULL, &m5, &e5) == 0 && sc_session_open(m5, &s5, &e5) == 0 &&
              sc_moshi_open(s5, NULL, &g5, NULL, &e5) == 0, "%s", e5.msg);
    int32_t u5[64] = {0}, row5[64];
    int has5 = 0, ok5 = 1;
    for (int i = 0; g5 && i < 5; i++) ok5 &= sc_moshi_step(g5, u5, row5, &has5, &e5) == 0;
    CHECK_MSG(ok5, "5 steps in a context of 5: %s", e5.msg);
    CHECK(g5 && sc_moshi_step(g5, u5, row5, &has5, &e5) == SC_ERUNTIME && !has5);
    CHECK_MSG(!strcmp(e5.msg, "context full at step 5, max_context 5 (hint: rebuild with a larger --max-context)"),
              "'%s'", e5.msg);
    sc_moshi_close(g5);
    sc_session_close(s5);
    sc_model_close(m5);
  }
  /* speechc bench on a Moshi artifact: steps, their split, bytes, and B
   * conversations together */
  snprintf(cmd, sizeof cmd, "%s bench %s/cli.so --steps 4 --streams 3 --threads 1 --probe-mb 16 > %s/bench.txt",
           bin, tmpdir, tmpdir);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  snprintf(path, sizeof path, "%s/bench.txt", tmpdir);
  char *out = slurp(path, NULL);
  static const char *const lines[] = {"one stream    4 steps: median", "split         mean per step: temporal",
                                      "depformer (4 steps)", "depformer 4 times",
                                      "streams       3 conversations stepped together",
                                      "bench: streams=3 step_ms=", "bench: band=f32 steps_s="};
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    CHECK_MSG(out && strstr(out, lines[i]), "speechc bench on Moshi: '%s' missing from:\n%s", lines[i],
              out ? out : "(no output)");
  free(out);
  /* a user file with the wrong number of codebooks is refused, naming it */
  snprintf(path, sizeof path, "%s/bad.json", tmpdir);
  f = fopen(path, "w");
  fputs("{\"codes\": [[1, 2, 3]]}\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s moshi %s/cli.so --user-codes %s --codes-out %s/o2.json --greedy 2>%s/err.txt",
           bin, tmpdir, path, tmpdir, tmpdir);
  CHECK(WEXITSTATUS(system(cmd)) == 2);
  snprintf(path, sizeof path, "%s/err.txt", tmpdir);
  char *msg = slurp(path, NULL);
  CHECK(msg != NULL);
  if (msg) CHECK_CONTAINS(msg, "frame 0 has 3 codes, expected 2");
  free(msg);
  cJSON_Delete(j);
  free(text);
  free(user);
  free(want);
}

/* What sc_moshi_push_pcm gave: rows and samples; stop_after > 0 stops the
 * push once that many rows came. */
typedef struct Pcm {
  int tok[16 * 5];
  float pcm[16 * 1920];
  int rows, stop_after;
} Pcm;

static int on_pcm(void *user, const int32_t *row, int n_row, const float *pcm, int n_pcm, int step) {
  Pcm *p = user;
  (void)step;
  if (p->rows >= 16 || n_row != 5 || n_pcm != 1920) return 1;
  memcpy(p->tok + p->rows * 5, row, sizeof *row * 5);
  memcpy(p->pcm + p->rows * 1920, pcm, sizeof *pcm * 1920);
  p->rows++;
  return p->stop_after && p->rows == p->stop_after;
}

/* `speechc moshi --input user.wav -o reply.wav`: run_inference's loop
 * against the package's (tests/data/moshi/duplex_tiny, make_duplex.py):
 * one `speechc build` writes the LM and its Mimi; the rows equal the
 * package's greedy rows and the reply its PCM within 1e-4 of the peak
 * (float WAV); the same reply as 16-bit WAV; refusals by name. */
static void duplex(void) {
  const char *bin = getenv("SPEECHC_BIN");
  if (!bin || !*bin) return;
  const char *dir = "tests/data/moshi/duplex_tiny";
  const int R = 8, Q = 4, N = R * 1920;
  int *want = load(dir, "tokens.i32", (long)R * (1 + Q) * 4);
  float *pcm = load(dir, "reply.f32", (long)N * 4);
  if (!want || !pcm) return;
  char cmd[1400], path[300];
  snprintf(cmd, sizeof cmd, "%s build %s -o %s/duplex.so -q && %s moshi %s/duplex.so --input %s/in.wav -o %s/reply.wav "
           "--f32 --greedy --codes-out %s/rows.json -q && %s moshi %s/duplex.so --input %s/in.wav -o %s/reply16.wav "
           "--greedy -q", bin, dir, tmpdir, bin, tmpdir, dir, tmpdir, tmpdir, bin, tmpdir, dir, tmpdir);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  snprintf(path, sizeof path, "%s/rows.json", tmpdir);
  char *text = slurp(path, NULL);
  cJSON *j = text ? cJSON_Parse(text) : NULL;
  const cJSON *rows = cJSON_GetObjectItem(j, "tokens");
  CHECK_MSG(cJSON_GetArraySize(rows) == R, "--input: %d rows, expected %d", cJSON_GetArraySize(rows), R);
  for (int r = 0; r < R && r < cJSON_GetArraySize(rows); r++)
    for (int k = 0; k <= Q; k++)
      CHECK_MSG(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, r), k)->valueint == want[r * (1 + Q) + k],
                "--input: row %d token %d differs from the package's", r, k);
  const float *got = NULL, *got16 = NULL;
  long size = 0, size16 = 0;
  snprintf(path, sizeof path, "%s/reply.wav", tmpdir);
  char *wav = slurp(path, &size);
  snprintf(path, sizeof path, "%s/reply16.wav", tmpdir);
  char *wav16 = slurp(path, &size16);
  CHECK_MSG(wav && wav16, "%s", "reply.wav / reply16.wav unreadable");
  /* the data chunk: the last 4N bytes (float) / 2N bytes (s16) */
  if (wav && size >= 4L * N) got = (const float *)(wav + size - 4L * N);
  if (wav16 && size16 >= 2L * N) got16 = (const float *)(wav16 + size16 - 2L * N);
  CHECK_MSG(got && got16, "reply sizes %ld, %ld", size, size16);
  if (got && got16) {
    double peak = 0, worst = 0, worst16 = 0;
    for (int i = 0; i < N; i++) peak = fabs(pcm[i]) > peak ? fabs(pcm[i]) : peak;
    for (int i = 0; i < N; i++) {
      float g;
      memcpy(&g, (const char *)got + 4L * i, 4);
      const double e = fabs(g - pcm[i]);
      worst = e > worst ? e : worst;
      int16_t q;
      memcpy(&q, (const char *)got16 + 2L * i, 2);
      const double c = pcm[i] > 1 ? 1 : pcm[i] < -1 ? -1 : pcm[i], e16 = fabs(q / 32768.0 - c);
      worst16 = e16 > worst16 ? e16 : worst16;
    }
    printf("duplex_tiny --input: %d rows as the package's, reply PCM within %.3g (peak %.3g), 16-bit within %.3g\n",
           R, worst, peak, worst16);
    CHECK_MSG(worst <= 1e-4 * peak, "--input: reply %.3g off the package's (peak %.3g)", worst, peak);
    CHECK_MSG(worst16 <= 2.0 / 32768, "--input: 16-bit reply %.3g off", worst16);
  }
  /* a model (and Mimi) of 8 steps cannot hold the 8 frames' 9 steps (the
   * first frame is stepped twice): refused before any work, the reply file
   * not written */
  snprintf(cmd, sizeof cmd, "%s build %s -o %s/duplex8.so -q --max-context 8 && %s moshi %s/duplex8.so --input "
           "%s/in.wav -o %s/reply8.wav --greedy -q 2>%s/err8.txt", bin, dir, tmpdir, bin, tmpdir, dir, tmpdir, tmpdir);
  const int st8 = system(cmd);
  CHECK_MSG(WIFEXITED(st8) && WEXITSTATUS(st8) == 1, "--max-context 8: wait status %d", st8);
  snprintf(path, sizeof path, "%s/err8.txt", tmpdir);
  char *msg8 = slurp(path, NULL);
  CHECK(msg8 != NULL);
  if (msg8) CHECK_CONTAINS(msg8, "in.wav: 8 frames make 9 steps, more than the model's context of 8");
  free(msg8);
  snprintf(path, sizeof path, "%s/reply8.wav", tmpdir);
  CHECK_MSG(access(path, F_OK) != 0, "%s", "a refused --input wrote its reply file");
  /* --max-context is the Mimi's frames too (a step is a frame) */
  snprintf(cmd, sizeof cmd, "%s inspect %s/duplex8.codec.so | grep -q 'max context 8$'", bin, tmpdir);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  free(wav), free(wav16), free(text);
  cJSON_Delete(j);
  /* three duplex conversations in one run (in.wav, its first 6 frames, its
   * first 2 frames and a half), sampled: each reply, its rows and its
   * transcript-free codes byte for byte the run of its pair alone */
  {
    sc_wav_audio in = {0};
    sc_error err = {0};
    char name[300];
    snprintf(name, sizeof name, "%s/in.wav", dir);
    CHECK_MSG(sc_wav_read(name, &in, &err) == 0, "%s", err.msg);
    static const size_t cut[2] = {6 * 1920, 2 * 1920 + 960};
    for (int k = 0; k < 2 && in.pcm; k++) {
      snprintf(name, sizeof name, "%s/in%d.wav", tmpdir, k + 2);
      sc_wav_opts wo = sc_wav_opts_for(name);
      wo.sample_rate = 24000;
      sc_wav *w = NULL;
      CHECK_MSG(sc_wav_open(name, &wo, &w, &err) == 0 && sc_wav_write(w, in.pcm, cut[k], &err) == 0 &&
                    sc_wav_close(w, &err) == 0,
                "%s: %s", name, err.msg);
    }
    sc_wav_audio_free(&in);
    snprintf(cmd, sizeof cmd,
             "cp %s/in.wav %s/in1.wav && cd %s && for k in 1 2 3; do %s moshi duplex.so --input in$k.wav -o a$k.wav "
             "--codes-out a$k.json -q || exit 9; done && %s moshi duplex.so --input in1.wav -o b1.wav --codes-out "
             "b1.json --input in2.wav -o b2.wav --codes-out b2.json --input in3.wav -o b3.wav --codes-out b3.json -q "
             "2> err3.txt || exit 8; for k in 1 2 3; do cmp -s a$k.wav b$k.wav || exit 7; cmp -s a$k.json b$k.json || exit 6; "
             "done; test $(stat -c %%s b3.wav) -lt $(stat -c %%s b2.wav) || exit 5",
             dir, tmpdir, tmpdir, bin, bin);
    const int st = system(cmd);
    snprintf(name, sizeof name, "%s/err3.txt", tmpdir);
    char *why = slurp(name, NULL);
    CHECK_MSG(WEXITSTATUS(st) == 0, "speechc moshi, three --input conversations: exit %d (9: alone failed, 8: "
              "together failed, 7: a reply differs from its run alone, 6: its rows differ, 5: lengths): %s\n%s",
              WEXITSTATUS(st), why ? why : "", cmd);
    free(why);
    snprintf(cmd, sizeof cmd, "cd %s && %s moshi duplex.so --input in1.wav -o c1.wav --input in2.wav -q 2> err.txt",
             tmpdir, bin);
    const int st2 = system(cmd);
    snprintf(name, sizeof name, "%s/err.txt", tmpdir);
    char *msg = slurp(name, NULL);
    CHECK_MSG(WEXITSTATUS(st2) != 0 && msg && strstr(msg, "2 --input but 1 -o"), "unpaired --input: exit %d, '%s'",
              WEXITSTATUS(st2), msg ? msg : "");
    free(msg);
    /* a NaN in a float WAV: refused naming the file (bad input: exit 2),
     * before the reply is created */
    {
      float nan_pcm[2 * 1920];
      for (int i = 0; i < 2 * 1920; i++) nan_pcm[i] = 0.01f * (float)(i % 7);
      nan_pcm[2000] = NAN;
      snprintf(name, sizeof name, "%s/nan.wav", tmpdir);
      sc_wav_opts wo = sc_wav_opts_for(name);
      wo.sample_rate = 24000;
      wo.format = SC_WAV_F32;
      sc_wav *w = NULL;
      CHECK_MSG(sc_wav_open(name, &wo, &w, &err) == 0 && sc_wav_write(w, nan_pcm, 2 * 1920, &err) == 0 &&
                    sc_wav_close(w, &err) == 0,
                "%s: %s", name, err.msg);
      snprintf(cmd, sizeof cmd, "cd %s && rm -f nanreply.wav && %s moshi duplex.so --input nan.wav -o nanreply.wav "
               "-q 2> err.txt; echo $? > rc.txt; test ! -e nanreply.wav", tmpdir, bin);
      const int st3 = system(cmd);
      snprintf(name, sizeof name, "%s/err.txt", tmpdir);
      char *m3 = slurp(name, NULL);
      snprintf(name, sizeof name, "%s/rc.txt", tmpdir);
      char *rc3 = slurp(name, NULL);
      CHECK_MSG(WEXITSTATUS(st3) == 0 && rc3 && atoi(rc3) == 2 && m3 && strstr(m3, "nan.wav: sample 2000 (0.083 s) "
                "is not finite"), "NaN input: exit %s, reply left %s, '%s'", rc3 ? rc3 : "?",
                WEXITSTATUS(st3) ? "behind" : "out", m3 ? m3 : "");
      free(m3), free(rc3);
    }
  }
  /* the API: sc_moshi_push_pcm in uneven pieces, stopped after the third
   * row and resumed, gives the same rows and samples */
  {
    char lm[300], mm[300];
    snprintf(lm, sizeof lm, "%s/duplex.so", tmpdir);
    snprintf(mm, sizeof mm, "%s/duplex.codec.so", tmpdir);
    sc_model *m = NULL, *cm = NULL;
    sc_session *s = NULL, *cs = NULL;
    sc_moshi *g = NULL;
    sc_error err = {0};
    sc_moshi_params p;
    sc_wav_audio in = {0};
    snprintf(path, sizeof path, "%s/in.wav", dir);
    int rc = sc_model_open(lm, NULL, &m, &err) || sc_model_open(mm, NULL, &cm, &err) ||
             sc_session_open(m, &s, &err) || sc_session_open(cm, &cs, &err) || sc_moshi_defaults(m, &p, &err);
    p.greedy = 1;
    if (!rc) rc = sc_moshi_open(s, &p, &g, NULL, &err) || sc_wav_read(path, &in, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    Pcm got_api = {.stop_after = 3};
    const int pieces[] = {1, 3, 4};
    for (int at = 0, k = 0; !rc && k < 3; k++) {
      int pushed = 0;
      rc = sc_moshi_push_pcm(g, cs, in.pcm + (size_t)at * 1920, pieces[k], on_pcm, &got_api, &pushed, &err);
      CHECK_MSG(rc == 0, "push_pcm: %s", err.msg);
      at += pushed;
      if (pushed < pieces[k]) { /* stopped: push the rest of this piece */
        got_api.stop_after = 0;
        rc = sc_moshi_push_pcm(g, cs, in.pcm + (size_t)at * 1920, pieces[k] - pushed, on_pcm, &got_api, &pushed,
                               &err);
        at += pushed;
      }
    }
    CHECK_MSG(got_api.rows == R, "push_pcm: %d rows, expected %d", got_api.rows, R);
    for (int r = 0; r < R && r < got_api.rows; r++)
      CHECK_MSG(!memcmp(got_api.tok + r * (1 + Q), want + r * (1 + Q), sizeof(int) * (1 + Q)), "push_pcm row %d", r);
    double worst = 0;
    for (int i = 0; i < got_api.rows * 1920; i++) worst = fmax(worst, fabs(got_api.pcm[i] - pcm[i]));
    CHECK_MSG(worst <= 1e-4 * 4.0, "push_pcm: PCM %.3g off", worst);
    sc_wav_audio_free(&in);
    sc_moshi_close(g);
    sc_session_close(s), sc_session_close(cs);
    sc_model_close(m), sc_model_close(cm);
  }
  free(want), free(pcm);
  /* refusals: two ways in, no -o, a Mimi that is not there, a 16 kHz file */
  static const struct { const char *args, *want; int code; } bad[] = {
      {"--input %s/in.wav -o %s/x.wav --user-codes x.json", "give one", 1},
      {"--input %s/in.wav%.0s", "--input needs -o", 1},
      {"--input %s/in.wav -o %s/x.wav --mimi /nonexistent.so", "/nonexistent.so", 2},
      {"--input %s/in16k.wav -o %s/x.wav", "16000", 2},
  };
  snprintf(cmd, sizeof cmd, "python3 -c \"import sys; b=bytearray(open('%s/in.wav','rb').read()); "
           "b[24:28]=(16000).to_bytes(4,'little'); b[28:32]=(32000).to_bytes(4,'little'); "
           "open('%s/in16k.wav','wb').write(b)\"", dir, tmpdir);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char args[600];
    snprintf(args, sizeof args, bad[i].args, i == 3 ? tmpdir : dir, tmpdir);
    snprintf(cmd, sizeof cmd, "%s moshi %s/duplex.so %s 2>%s/err.txt", bin, tmpdir, args, tmpdir);
    const int st = system(cmd);
    CHECK_MSG(WEXITSTATUS(st) == bad[i].code, "%s: exit %d, expected %d", cmd, WEXITSTATUS(st), bad[i].code);
    snprintf(path, sizeof path, "%s/err.txt", tmpdir);
    char *msg = slurp(path, NULL);
    CHECK(msg != NULL);
    if (msg) CHECK_MSG(strstr(msg, bad[i].want) != NULL, "%s: '%s' lacks '%s'", cmd, msg, bad[i].want);
    free(msg);
  }
}

/* The transcript: path's bytes must be the UTF-8 whose hex is `hex`. */
static int same_hex(const char *path, const char *hex) {
  long n = 0;
  char *t = slurp(path, &n);
  int ok = t && (size_t)n * 2 == strlen(hex);
  for (long i = 0; ok && i < n; i++) {
    unsigned v;
    ok = sscanf(hex + 2 * i, "%2x", &v) == 1 && v == (unsigned char)t[i];
  }
  free(t);
  return ok;
}

/* tests/data/moshi/<name>/user.i32 as the JSON --user-codes reads. */
static void user_json(const char *name, const char *path) {
  char dir[200], tp[300];
  snprintf(dir, sizeof dir, "tests/data/moshi/%s", name);
  snprintf(tp, sizeof tp, "%s/trace.json", dir);
  char *t = slurp(tp, NULL);
  cJSON *tr = cJSON_Parse(t);
  const int S = cJSON_GetObjectItem(tr, "gen_steps")->valueint, U = cJSON_GetObjectItem(tr, "user_codebooks")->valueint;
  int *user = load(dir, "user.i32", (long)S * U * 4);
  FILE *f = fopen(path, "w");
  fputs("{\"codes\": [", f);
  for (int st = 0; user && st < S; st++)
    for (int k = 0; k < U; k++) fprintf(f, "%s%d%s", k ? ", " : st ? ", [" : "[", user[st * U + k], k == U - 1 ? "]" : "");
  fputs("]}\n", f);
  fclose(f);
  free(user);
  cJSON_Delete(tr);
  free(t);
}

/* The text: speechc build copies the checkpoint's tokenizer_name into
 * OUT.tokenizer/, and speechc moshi --text-out writes what the package's
 * DecodeIds gives for the greedy rows' text tokens (tests/data/spm's
 * moshi_transcripts, made with the package), also with --tokenizer FILE or
 * DIR; stderr gets the same text as it comes, -q silences it.  Refused:
 * --text-out without a model, a broken model at build and at run time, a
 * model with fewer pieces than text_card. */
static void text_out(void) {
  const char *bin = getenv("SPEECHC_BIN");
  if (!bin || !*bin) return;
  char *doc = slurp("tests/data/spm/unigram_bf.json", NULL);
  cJSON *j = doc ? cJSON_Parse(doc) : NULL;
  const cJSON *tr = cJSON_GetObjectItem(j, "moshi_transcripts");
  const char *h7 = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(tr, "moshi7b_tiny"), "hex"));
  const char *hf = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(tr, "family_tiny"), "hex"));
  CHECK(h7 && hf);
  if (!h7 || !hf) return;
  char d[200], cmd[4096], path[300];
  snprintf(d, sizeof d, "%s/spm", tmpdir);
  snprintf(path, sizeof path, "%s/user7b.json", tmpdir);
  user_json("moshi7b_tiny", path);
  snprintf(path, sizeof path, "%s/userf.json", tmpdir);
  user_json("family_tiny", path);
  /* a checkpoint with its tokenizer_name (family_tiny names tokenizer.model) */
  snprintf(cmd, sizeof cmd, "set -e; mkdir -p %s/ck %s/out; cp tests/data/moshi/family_tiny/config.json "
           "tests/data/moshi/family_tiny/model.safetensors %s/ck/; cp tests/data/spm/unigram_bf.model %s/ck/tokenizer.model; "
           "%s build %s/ck -o %s/out/m.so -q --no-codec; cmp %s/ck/tokenizer.model %s/out/m.tokenizer/tokenizer.model; "
           "%s moshi %s/out/m.so --user-codes %s/userf.json --codes-out %s/rows.json --greedy --text-out %s/t.txt "
           "2>%s/err.txt; %s moshi %s/out/m.so --user-codes %s/userf.json --codes-out %s/rows.json --greedy -q "
           "2>%s/errq.txt; test ! -s %s/errq.txt",
           d, d, d, d, bin, d, d, d, d, bin, d, tmpdir, d, d, d, bin, d, tmpdir, d, d, d);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  snprintf(path, sizeof path, "%s/t.txt", d);
  CHECK_MSG(same_hex(path, hf), "family_tiny: --text-out is not the package's DecodeIds");
  snprintf(path, sizeof path, "%s/err.txt", d);
  CHECK_MSG(same_hex(path, hf), "family_tiny: the text on stderr is not the package's DecodeIds");
  /* the 7B's switches, byte pieces held back on stderr; --tokenizer FILE and DIR */
  snprintf(cmd, sizeof cmd, "set -e; %s build tests/data/moshi/moshi7b_tiny -o %s/out/b.so -q --no-codec; "
           "test ! -e %s/out/b.tokenizer/tokenizer.model; "
           "%s moshi %s/out/b.so --user-codes %s/user7b.json --codes-out %s/rows7.json --greedy --text-out %s/t7.txt "
           "--tokenizer tests/data/spm/unigram_bf.model 2>%s/err7.txt; "
           "%s moshi %s/out/b.so --user-codes %s/user7b.json --codes-out %s/rows7.json --greedy --text-out %s/t7d.txt "
           "--tokenizer %s/ck -q",
           bin, d, d, bin, d, tmpdir, d, d, d, bin, d, tmpdir, d, d, d);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  snprintf(path, sizeof path, "%s/t7.txt", d);
  CHECK_MSG(same_hex(path, h7), "moshi7b_tiny: --text-out is not the package's DecodeIds");
  snprintf(path, sizeof path, "%s/t7d.txt", d);
  CHECK_MSG(same_hex(path, h7), "moshi7b_tiny: --text-out with --tokenizer DIR");
  snprintf(path, sizeof path, "%s/err7.txt", d);
  CHECK_MSG(same_hex(path, h7), "moshi7b_tiny: the text on stderr is not the package's DecodeIds");
  /* refusals, each naming what is missing or broken */
  struct { const char *args, *msg; int code; } bad[] = {
    {"--text-out %s/x.txt", "no SentencePiece model for --text-out", 2},
    {"--text-out %s/x.txt --tokenizer tests/data/moshi/family_tiny/config.json", "not a SentencePiece model", 2},
    {"--tokenizer %s/none.model", "none.model", 2},
    {"--tokenizer %s/few.model", "fewer than the model's text_card", 2},
  };
  snprintf(cmd, sizeof cmd, "head -c 3000 tests/data/spm/unigram_bf.model > %s/cut.model", d);
  CHECK(system(cmd) == 0);
  for (int i = 0; i < 4; i++) {
    char args[600], file[300];
    snprintf(args, sizeof args, bad[i].args, d);
    if (i == 3) { /* a valid model with 24 pieces: the CLI's message, not the library's */
      snprintf(file, sizeof file, "%s/few.model", d);
      FILE *f = fopen(file, "wb");
      /* ModelProto: pieces {"<unk>", type UNKNOWN}, then "a".."w" (NORMAL);
       * trainer_spec {model_type: BPE} */
      fprintf(f, "%c%c%c%c<unk>%c%c", 0x0a, 9, 0x0a, 5, 0x18, 2);
      for (int k = 0; k < 23; k++) fprintf(f, "%c%c%c%c%c", 0x0a, 3, 0x0a, 1, 'a' + k);
      fprintf(f, "%c%c%c%c", 0x12, 2, 0x18, 2);
      fclose(f);
    }
    snprintf(cmd, sizeof cmd, "%s moshi %s/out/b.so --user-codes %s/user7b.json --codes-out %s/r.json --greedy %s "
             "2>%s/e.txt", bin, d, tmpdir, d, args, d);
    int st = system(cmd);
    CHECK_MSG(WEXITSTATUS(st) == bad[i].code, "%s: exit %d", cmd, WEXITSTATUS(st));
    snprintf(path, sizeof path, "%s/e.txt", d);
    char *msg = slurp(path, NULL);
    CHECK_MSG(msg && strstr(msg, bad[i].msg), "%s: '%s' lacks '%s'", cmd, msg ? msg : "", bad[i].msg);
    free(msg);
  }
  /* a broken tokenizer_name file fails the build, naming it */
  snprintf(cmd, sizeof cmd, "cp %s/cut.model %s/ck/tokenizer.model; %s build %s/ck -o %s/out/c.so -q --no-codec "
           "2>%s/eb.txt", d, d, bin, d, d, d);
  CHECK(WEXITSTATUS(system(cmd)) == 2);
  snprintf(path, sizeof path, "%s/eb.txt", d);
  char *msg = slurp(path, NULL);
  CHECK_MSG(msg && strstr(msg, "ck/tokenizer.model: not a SentencePiece model"), "build: '%s'", msg ? msg : "");
  free(msg);
  cJSON_Delete(j);
  free(doc);
  printf("text: --text-out and stderr equal the package's DecodeIds on both fixtures; refusals named\n");
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc-moshi-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  if (strcmp(test_target(), "cpu")) {
    /* SPEECHC_TEST_TARGET=cuda / metal (test_moshi_cuda_emu, _metal_emu):
     * the package's criterion, the forward of each fixture within 1e-4 and
     * LMGen's rows, on device builds run by an emulator */
    conformance();
    parity("moshi7b_tiny", "tcc", 1);
    parity("family_tiny", "tcc", 1);
    parity("bands_tiny", "tcc", 1);
    one_depformer_step("tcc");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) return 1;
    CHECK_DONE();
  }
  conformance();
  parity("moshi7b_tiny", "tcc", 1);
  parity("moshi7b_tiny", "gcc", 1);
  parity("moshi7b_tiny", "tcc", 0);
  parity("family_tiny", "tcc", 1);
  parity("family_tiny", "gcc", 1);
  parity("family_tiny", "tcc", 0);
  parity("bands_tiny", "tcc", 1);
  one_depformer_step("tcc");
  one_depformer_step("gcc");
  bands("bands_tiny");
  refusals();
  shipped();
  one_command();
  cli();
  duplex();
  text_out();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) return 1;
  CHECK_DONE();
}
