/*
 * batch.c — batched decode (speechc.h, sc_batch_*): one call of the
 * "decode_batch" entry carries one token of each session, row i at its
 * session's position (sc_io.row_pos) in its session's state block
 * (sc_io.row_state, the offset of its state from the first session's).
 * The entry writes every row's logits; each goes to its session.
 *
 * sc_generate_batch is sc_generate's loop over such steps: each request
 * draws from its own session's logits with its own sampler, and the
 * running ones step together.
 *
 * Why rows are exact: the projections run as one GEMM over the rows, and
 * the blocked tiles give each row the bits of a one-row call (kernels.h);
 * the f32 band's OpenBLAS path would not, so the calls set
 * sc_kernel_ctx.rowwise; attention reads each row's own cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model_internal.h"

struct sc_batch {
  sc_model *m;
  int held;                 /* a reference on m (rt_model_ref), given back by sc_batch_free */
  const sc_entry *e;
  sc_session **s;
  int n, cap;
  int *row_pos;
  long long *row_state;
  float *logits; /* [rows, vocab] of one call */
};

int sc_batch_new(sc_model *m, sc_batch **out, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!out) return sc_fail(err, SC_EUSAGE, "sc_batch_new: out is NULL");
  *out = NULL;
  if (!m) return sc_fail(err, SC_EUSAGE, "sc_batch_new: no model");
  const sc_entry *e = rt_entry(m, "decode_batch");
  if (!e)
    return sc_fail(err, SC_EUSAGE, "%s: this %s model has no batched decode entry (hint: a Qwen3 or Llama model "
                   "built with --max-batch 2 or more, the default, has one)", m->path, m->d->family);
  sc_batch *b = calloc(1, sizeof *b);
  const size_t rows = (size_t)e->max_tokens;
  if (b) {
    b->row_pos = malloc(rows * sizeof *b->row_pos);
    b->row_state = malloc(rows * sizeof *b->row_state);
    b->logits = malloc(rows * (size_t)m->d->vocab * sizeof *b->logits);
  }
  if (!b || !b->row_pos || !b->row_state || !b->logits) {
    sc_batch_free(b);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  b->m = m;
  b->e = e;
  rt_model_ref(m);
  b->held = 1;
  *out = b;
  return SC_OK;
}

void sc_batch_free(sc_batch *b) {
  if (!b) return;
  free(b->s);
  free(b->row_pos);
  free(b->row_state);
  free(b->logits);
  if (b->held) sc_model_close(b->m);
  free(b);
}

int sc_batch_add(sc_batch *b, sc_session *s, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!b) return sc_fail(err, SC_EUSAGE, "sc_batch_add: no batch");
  if (!s || s->m != b->m) return sc_fail(err, SC_EUSAGE, "sc_batch_add: the session is not of the batch's model");
  for (int i = 0; i < b->n; i++)
    if (b->s[i] == s) return sc_fail(err, SC_EUSAGE, "sc_batch_add: the session is in the batch already");
  if (b->n == b->cap) {
    const int cap = b->cap ? 2 * b->cap : 8;
    sc_session **p = realloc(b->s, (size_t)cap * sizeof *p);
    if (!p) return sc_fail(err, SC_ERUNTIME, "out of memory");
    b->s = p;
    b->cap = cap;
  }
  b->s[b->n++] = s;
  return SC_OK;
}

int sc_batch_remove(sc_batch *b, sc_session *s) {
  for (int i = 0; b && i < b->n; i++)
    if (b->s[i] == s) {
      memmove(&b->s[i], &b->s[i + 1], (size_t)(b->n - i - 1) * sizeof *b->s);
      b->n--;
      return 0;
    }
  return -1;
}

int sc_batch_size(const sc_batch *b) { return b ? b->n : 0; }

sc_session *sc_batch_session(const sc_batch *b, int i) { return b && i >= 0 && i < b->n ? b->s[i] : NULL; }

int sc_batch_step(sc_batch *b, const int32_t *ids, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!b) return sc_fail(err, SC_EUSAGE, "sc_batch_step: no batch");
  if (b->n && !ids) return sc_fail(err, SC_EUSAGE, "sc_batch_step: no ids for the batch's %d sessions", b->n);
  const sc_model_desc *d = b->m->d;
  for (int i = 0; i < b->n; i++) {
    if (ids[i] < 0 || ids[i] >= d->vocab)
      return sc_fail(err, SC_EUSAGE, "token %d (session %d of the batch) is outside the vocabulary [0, %d)", ids[i],
                     i, d->vocab);
    if (b->s[i]->pos >= d->max_context)
      return sc_fail(err, SC_ERUNTIME, "context full: session %d of the batch is at position %d, max_context %d "
                     "(hint: rebuild with a larger --max-context)", i, b->s[i]->pos, d->max_context);
  }
  /* all calls first, then the positions and logits: an error moves nothing */
  const size_t vocab = (size_t)d->vocab;
  float *keep = b->n > b->e->max_tokens ? malloc((size_t)b->n * vocab * sizeof *keep) : NULL;
  if (b->n > b->e->max_tokens && !keep) return sc_fail(err, SC_ERUNTIME, "out of memory");
  int rc = SC_OK;
  for (int i0 = 0; i0 < b->n && !rc; i0 += b->e->max_tokens) {
    const int n = b->n - i0 < b->e->max_tokens ? b->n - i0 : b->e->max_tokens;
    sc_session *a = b->s[i0]; /* runs the call: its kernels, threads and scratch */
    const unsigned long long base = rt_state_base(a);
    for (int r = 0; r < n; r++) {
      b->row_pos[r] = b->s[i0 + r]->pos;
      b->row_state[r] = (long long)(rt_state_base(b->s[i0 + r]) - base);
    }
    sc_io io = {.ids = ids + i0, .n = n, .out = keep ? keep + (size_t)i0 * vocab : b->logits,
                .row_pos = b->row_pos, .row_state = b->row_state};
    const int rowwise = a->kctx.rowwise;
    a->kctx.rowwise = 1;
    rc = rt_call(a, b->e, &io, err);
    a->kctx.rowwise = rowwise;
  }
  if (!rc)
    for (int i = 0; i < b->n; i++) {
      const float *src = keep ? keep + (size_t)i * vocab : b->logits + (size_t)i * vocab;
      /* logits a device-sampled call of this session left behind would
       * otherwise overwrite these at its next sc_logits: flushed first */
      if (b->s[i]->m->be->fetch_logits) b->s[i]->m->be->fetch_logits(b->s[i]);
      memcpy(b->s[i]->logits, src, vocab * sizeof *src);
      b->s[i]->pos++;
    }
  free(keep);
  return rc;
}

/* One request of sc_generate_batch: its sampler and the history its
 * repetition penalty reads (prompt, then every token made). */
typedef struct GenState {
  sc_sampler *smp;
  int32_t *hist;
  int n_hist;
  int done;
} GenState;

int sc_generate_batch(sc_model *m, sc_gen_request *reqs, int n, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!m || n < 0 || (n && !reqs)) return sc_fail(err, SC_EUSAGE, "sc_generate_batch: no model or requests");
  for (int i = 0; i < n; i++) {
    reqs[i].n_out = 0;
    if (!reqs[i].session || reqs[i].session->m != m)
      return sc_fail(err, SC_EUSAGE, "request %d: its session is not of the model", i);
    if (reqs[i].n_new < 0 || reqs[i].n_prompt < 1 || !reqs[i].prompt || (reqs[i].n_new && !reqs[i].out))
      return sc_fail(err, SC_EUSAGE, "request %d: a prompt of at least one token, n_new >= 0 and an output buffer "
                     "are needed (got %d prompt tokens, n_new %d)", i, reqs[i].n_prompt, reqs[i].n_new);
    for (int j = 0; j < i; j++)
      if (reqs[j].session == reqs[i].session)
        return sc_fail(err, SC_EUSAGE, "requests %d and %d share a session", j, i);
    if (rt_generate_room(reqs[i].session, reqs[i].n_prompt, reqs[i].n_new, err)) {
      snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg), " (request %d)", i);
      return err->code;
    }
  }
  sc_batch *b = NULL;
  if (sc_batch_new(m, &b, err)) return err->code;
  GenState *g = calloc((size_t)(n ? n : 1), sizeof *g);
  int *who = malloc((size_t)(n ? n : 1) * sizeof *who); /* batch slot -> request */
  int32_t *ids = malloc((size_t)(n ? n : 1) * sizeof *ids);
  int rc = g && who && ids ? SC_OK : sc_fail(err, SC_ERUNTIME, "out of memory");
  for (int i = 0; i < n && !rc; i++) {
    sc_gen_request *r = &reqs[i];
    if (!(g[i].hist = malloc(((size_t)r->n_prompt + (size_t)r->n_new + 1) * sizeof *g[i].hist))) {
      rc = sc_fail(err, SC_ERUNTIME, "out of memory");
      break;
    }
    memcpy(g[i].hist, r->prompt, (size_t)r->n_prompt * sizeof *g[i].hist);
    g[i].n_hist = r->n_prompt;
    if ((rc = sc_sampler_new(&r->params, &g[i].smp, err)) || (rc = sc_prefill(r->session, r->prompt, r->n_prompt, err))) {
      snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg), " (request %d)", i);
      break;
    }
    g[i].done = r->n_new == 0;
  }
  /* sc_generate's loop, every running request a row: draw, keep, stop or
   * feed the token back */
  const int vocab = m->d->vocab;
  while (!rc) {
    int rows = 0;
    for (int i = 0; i < n && !rc; i++) {
      sc_gen_request *r = &reqs[i];
      if (g[i].done) continue;
      int32_t tok = -1;
      if ((rc = sc_sample(g[i].smp, r->session->logits, vocab, g[i].hist, g[i].n_hist, NULL, 0, &tok, err))) {
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg), " (request %d)", i);
        break;
      }
      r->out[r->n_out++] = tok;
      g[i].hist[g[i].n_hist++] = tok;
      if (tok == r->eos || r->n_out == r->n_new) {
        g[i].done = 1;
        continue;
      }
      who[rows] = i;
      ids[rows++] = tok;
    }
    if (rc || !rows) break;
    /* the batch holds exactly this step's rows, in request order */
    while (sc_batch_size(b) > 0) sc_batch_remove(b, sc_batch_session(b, 0));
    for (int k = 0; k < rows && !rc; k++) {
      const sc_session *ss = reqs[who[k]].session;
      if (ss->pos >= m->d->max_context)
        rc = sc_fail(err, SC_ERUNTIME, "request %d: context full at position %d, max_context %d (hint: rebuild with "
                     "a larger --max-context, or ask for fewer tokens)", who[k], ss->pos, m->d->max_context);
      else rc = sc_batch_add(b, reqs[who[k]].session, err);
    }
    if (!rc) rc = sc_batch_step(b, ids, err);
  }
  for (int i = 0; i < n && g; i++) {
    sc_sampler_free(g[i].smp);
    free(g[i].hist);
  }
  free(g);
  free(who);
  free(ids);
  sc_batch_free(b);
  return rc;
}
