/*
 * test_rows.c — rows placed one by one (sc_io.row_pos and row_state,
 * ABI 6): one call that carries the next tokens of two sessions, each at
 * its own position in its own KV caches, gives what separate calls give,
 * bit for bit, and leaves both sessions' caches as separate calls would.
 *
 * The tiny Qwen3 of tests/data/llm is built for SPEECHC_TEST_TARGET (cpu,
 * or cuda: the emulator of tests/emu in CI).  Two sessions A and B hold
 * prompts of different lengths.  The reference feeds each its tokens in
 * separate one-row calls; the placed run feeds, per step, both tokens in
 * one call of the prompt entry (rows out of order, positions apart, B's
 * row in B's state block through its offset from A's) and, last, each
 * session's token through the other session's call of the decode entry
 * (a negative offset, and the fused rope-attention path).  Every call's
 * logits (those of its last row) must equal the reference's; the last
 * step, run on each session's own caches, shows what the placed calls
 * stored.  Positions outside the context are refused by name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "model_internal.h"
#include "parity_util.h"

enum { STEPS = 3, MAXV = 1024 };

static const int32_t prompt_a[] = {3, 1, 4, 1, 5};
static const int32_t prompt_b[] = {9, 2, 6};
static const int32_t feed_a[STEPS] = {7, 20, 33}, feed_b[STEPS] = {11, 2, 48};

typedef struct Pair {
  sc_session *s[2];          /* A, B */
  int pos[2];                /* tokens in each session's caches */
} Pair;

/* One call of e on session s with rows placed at row_pos, in the state
 * blocks row_state; the last row's logits into out. */
static int call_rows(sc_session *s, const sc_entry *e, int n, const int32_t *ids, const int *row_pos,
                     const long long *row_state, float *out, sc_error *err) {
  sc_io io = {.ids = ids, .n = n, .out = out, .row_pos = row_pos, .row_state = row_state};
  return rt_call(s, e, &io, err);
}

static void open_pair(sc_model *m, Pair *p) {
  sc_error err = {0};
  memset(p, 0, sizeof *p);
  for (int k = 0; k < 2; k++) CHECK_MSG(sc_session_open(m, &p->s[k], &err) == 0, "session: %s", err.msg);
  CHECK_MSG(sc_prefill(p->s[0], prompt_a, 5, &err) == 0, "prefill A: %s", err.msg);
  CHECK_MSG(sc_prefill(p->s[1], prompt_b, 3, &err) == 0, "prefill B: %s", err.msg);
  p->pos[0] = 5;
  p->pos[1] = 3;
}

static void close_pair(Pair *p) {
  for (int k = 0; k < 2; k++) sc_session_close(p->s[k]);
}

/* The reference: each session's token alone, in its own call of e
 * (prefill for steps 0..STEPS-2, decode for the last), rows as usual
 * (io->pos, no row_pos). */
static void reference(sc_model *m, float ref[STEPS][2][MAXV]) {
  Pair p;
  open_pair(m, &p);
  sc_error err = {0};
  for (int i = 0; i < STEPS; i++)
    for (int k = 0; k < 2; k++) {
      const sc_entry *e = rt_entry(m, i + 1 < STEPS ? "prefill" : "decode");
      const int32_t id = k ? feed_b[i] : feed_a[i];
      sc_io io = {.ids = &id, .n = 1, .pos = p.pos[k], .out = ref[i][k]};
      CHECK_MSG(rt_call(p.s[k], e, &io, &err) == 0, "reference step %d: %s", i, err.msg);
      p.pos[k]++;
    }
  close_pair(&p);
}

static void same(const float *got, const float *want, int vocab, const char *what, int step) {
  int diff = 0;
  for (int i = 0; i < vocab && !diff; i++) diff = memcmp(&got[i], &want[i], 4) != 0;
  CHECK_MSG(!diff, "%s, step %d: logits differ from separate calls", what, step);
}

static void placed(sc_model *m, float ref[STEPS][2][MAXV], int vocab) {
  Pair p;
  open_pair(m, &p);
  sc_error err = {0};
  float out[MAXV];
  const long long ab = (long long)(rt_state_base(p.s[1]) - rt_state_base(p.s[0])); /* B's block from A's */
  const sc_entry *prefill = rt_entry(m, "prefill"), *decode = rt_entry(m, "decode");
  for (int i = 0; i + 1 < STEPS; i++) {
    /* A's call carries both rows; the last row (its logits) is step i's
     * first session in turn: B then A, then A then B */
    const int last = i % 2 ? 1 : 0, first = 1 - last;
    const int32_t ids[2] = {first ? feed_b[i] : feed_a[i], last ? feed_b[i] : feed_a[i]};
    const int row_pos[2] = {p.pos[first], p.pos[last]};
    const long long row_state[2] = {first ? ab : 0, last ? ab : 0};
    CHECK_MSG(call_rows(p.s[0], prefill, 2, ids, row_pos, row_state, out, &err) == 0, "placed step %d: %s", i,
              err.msg);
    same(out, ref[i][last], vocab, last ? "B's row after A's" : "A's row after B's", i);
    p.pos[0]++;
    p.pos[1]++;
  }
  /* the decode entry, one row each: A's token in B's call and B's in A's */
  for (int k = 0; k < 2; k++) {
    const int32_t id = k ? feed_b[STEPS - 1] : feed_a[STEPS - 1];
    const long long off = k ? ab : -ab;
    CHECK_MSG(call_rows(p.s[1 - k], decode, 1, &id, &p.pos[k], &off, out, &err) == 0, "placed decode: %s",
              err.msg);
    same(out, ref[STEPS - 1][k], vocab, k ? "decode of B in A's call" : "decode of A in B's call", STEPS - 1);
  }
  /* outside the context: refused before the call, naming the row */
  const int bad[2] = {p.pos[0], m->d->max_context};
  const int32_t ids[2] = {1, 2};
  CHECK(call_rows(p.s[0], prefill, 2, ids, bad, NULL, out, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "row 1 is at position 64, outside the context [0, 64)");
  const int neg = -1;
  CHECK(call_rows(p.s[0], decode, 1, ids, &neg, NULL, out, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "row 0 is at position -1");
  close_pair(&p);
}

int main(void) {
  char dir[] = "/tmp/speechc-rows-XXXXXX", out[128];
  if (!mkdtemp(dir)) return 1;
  snprintf(out, sizeof out, "%s/model.so", dir);
  BuildOpts o = build_defaults();
  o.model_dir = "tests/data/llm/qwen3_gqa2_hd32_tied";
  o.out_path = out;
  o.target = test_target();
  o.max_context = 64;
  o.prefill_chunk = 16;
  o.quiet = 1;
  sc_error err = {0};
  sc_model *m = NULL;
  int rc = sc_build(&o, &err);
  if (!rc) rc = sc_model_open(out, NULL, &m, &err);
  CHECK_MSG(rc == 0, "%s for %s: %s", o.model_dir, o.target, err.msg);
  if (!rc) {
    const sc_model_desc *d = m->d;
    CHECK(d->vocab <= MAXV);
    for (int i = 0; i < d->n_entries; i++) /* an LM: one id per row, one output row per row */
      CHECK_MSG(d->entries[i].ids_cols == 1 && d->entries[i].out_rows_mul == 1, "entry %s: ids_cols %d, "
                "out_rows_mul %d", d->entries[i].name, d->entries[i].ids_cols, d->entries[i].out_rows_mul);
    static float ref[STEPS][2][MAXV];
    reference(m, ref);
    placed(m, ref, d->vocab);
    sc_model_close(m);
  }
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
  printf("target %s\n", o.target);
  CHECK_DONE();
}
