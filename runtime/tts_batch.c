/*
 * tts_batch.c — Qwen3-TTS frames of several streams at once (speechc.h,
 * sc_tts_batch_*).  A frame is tts.c's frame program, with each call made
 * for every running stream together:
 *
 *   talker     one row per stream (talker_batch), at the stream's own
 *              position in its own session's caches (sc_io.row_pos,
 *              row_state); a stream's first frame uses its prompt's
 *              logits and hidden instead (prefilled when it joined);
 *   c0         drawn per stream, with its own sampler, history and
 *              min_frames; EOS ends the stream;
 *   predictor  the prefill's two rows [h, E(c0)] per stream at positions
 *              0 and 1 (predictor_prefill_batch), then G-2 steps of one
 *              row per stream (predictor_decode_batch), each code drawn
 *              per stream by its predictor sampler;
 *   codec sum  per stream, the next talker input.
 *
 * Why the codes equal sc_tts_generate's bit for bit: each stream's draws
 * come in the same order from the same generators, and every row a call
 * carries gets the bits of the one-stream call (the blocked tiles give
 * each row the bits of a one-row call, kernels.h; the calls set
 * sc_kernel_ctx.rowwise so that no f32 row goes to OpenBLAS, nor a bf16
 * row to the bf16-activation engine; attention reads each row's own
 * cache).  test_tts_batch checks it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_internal.h"
#include "tts_internal.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct TtsStream {
  sc_session *s;
  sc_tts_params p;          /* the caller's (its pointers stay the caller's) */
  int32_t *codes;           /* [max_frames * G], the caller's */
  int *n_frames;
  sc_frame_cb on_frame;
  void *user;
  sc_sampler *ts, *ps;      /* talker's, predictor's */
  TtsPrompt pr;
  int32_t *hist;            /* [max_frames] c0 of the frames made */
  float *x, *h, *tlogits;   /* next talker input [H], hidden [H], logits [V] */
  int t;                    /* frames made */
  int status;               /* SC_TTS_* */
  sc_error err;             /* with SC_TTS_FAILED */
  double start;
  int live;                 /* scratch of a step: still in this frame */
  int removed;              /* removed by a callback during the step: freed after it */
} TtsStream;

struct sc_tts_batch {
  sc_model *m;
  int held;                 /* a reference on m (rt_model_ref), given back by sc_tts_batch_free */
  int stepping;             /* inside sc_tts_batch_step (its callbacks run) */
  TtsConfig c;
  const sc_entry *talker, *pprefill, *pdecode;
  int rows;                 /* streams per call: the talker's and the predictor's decode rows */
  TtsStream **st;
  int n, cap;
  int32_t *suppress;        /* [1025] (tts_suppress) */
  int n_sup;
  /* one call's rows; the prefill's twice as many */
  int *row_pos;
  long long *row_state;
  int32_t *ids;
  float *in, *out, *hid;    /* [2 rows, H], [2 rows, max(V, pV, H)], [rows, H] */
  int32_t *frame;           /* [rows * G]: the codes of the streams of one call */
  TtsStream **run, **dec, **pred; /* [rows]: a call's streams, those the talker steps, those
                                   * the predictor runs */
};

static void stream_free(TtsStream *x) {
  if (!x) return;
  sc_sampler_free(x->ts);
  sc_sampler_free(x->ps);
  tts_prompt_free(&x->pr);
  free(x->hist);
  free(x->x);
  free(x->h);
  free(x->tlogits);
  free(x);
}

void sc_tts_batch_free(sc_tts_batch *b) {
  if (!b) return;
  for (int i = 0; i < b->n; i++) stream_free(b->st[i]);
  free(b->st);
  tts_config_free(&b->c);
  free(b->suppress);
  free(b->row_pos);
  free(b->row_state);
  free(b->ids);
  free(b->in);
  free(b->out);
  free(b->hid);
  free(b->frame);
  free(b->run);
  free(b->dec);
  free(b->pred);
  if (b->held) sc_model_close(b->m);
  free(b);
}

int sc_tts_batch_new(sc_model *m, sc_tts_batch **out, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!out) return sc_fail(err, SC_EUSAGE, "sc_tts_batch_new: out is NULL");
  *out = NULL;
  if (!m) return sc_fail(err, SC_EUSAGE, "sc_tts_batch_new: no model");
  sc_tts_batch *b = calloc(1, sizeof *b);
  if (!b) return sc_fail(err, SC_ERUNTIME, "out of memory");
  b->m = m;
  if (tts_config(m, &b->c, err)) {
    free(b);
    return err->code;
  }
  b->talker = rt_entry(m, "talker_batch");
  b->pprefill = rt_entry(m, "predictor_prefill_batch");
  b->pdecode = rt_entry(m, "predictor_decode_batch");
  if (!b->talker || !b->pprefill || !b->pdecode) {
    sc_tts_batch_free(b);
    return sc_fail(err, SC_EUSAGE, "%s: this Qwen3-TTS model has no batched frame entries (hint: a model built "
                   "with --max-batch 2 or more, the default, has them)", m->path);
  }
  const TtsConfig *c = &b->c;
  int rows = b->talker->max_tokens;
  if (b->pdecode->max_tokens < rows) rows = b->pdecode->max_tokens;
  if (b->pprefill->max_tokens / 2 < rows) rows = b->pprefill->max_tokens / 2;
  if (rows < 1) {
    sc_tts_batch_free(b);
    return sc_fail(err, SC_EINPUT, "%s: the batched frame entries carry no stream (hint: rebuild)", m->path);
  }
  b->rows = rows;
  /* out holds a call's logits, or the E(c0) rows (hidden wide) */
  size_t V = (size_t)(c->vocab > c->pvocab ? c->vocab : c->pvocab);
  const size_t R = (size_t)rows, H = (size_t)c->hidden;
  if (V < H) V = H;
  b->suppress = malloc(1025 * sizeof *b->suppress);
  b->row_pos = malloc(2 * R * sizeof *b->row_pos);
  b->row_state = malloc(2 * R * sizeof *b->row_state);
  b->ids = malloc(R * (size_t)c->groups * sizeof *b->ids);
  b->in = malloc(2 * R * H * sizeof *b->in);
  b->out = malloc(2 * R * V * sizeof *b->out);
  b->hid = malloc(R * H * sizeof *b->hid);
  b->frame = malloc(R * (size_t)c->groups * sizeof *b->frame);
  b->run = malloc(R * sizeof *b->run);
  b->dec = malloc(R * sizeof *b->dec);
  b->pred = malloc(R * sizeof *b->pred);
  if (!b->suppress || !b->row_pos || !b->row_state || !b->ids || !b->in || !b->out || !b->hid || !b->frame ||
      !b->run || !b->dec || !b->pred) {
    sc_tts_batch_free(b);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  b->n_sup = tts_suppress(c, b->suppress);
  rt_model_ref(m);
  b->held = 1;
  *out = b;
  return SC_OK;
}

static TtsStream *find(const sc_tts_batch *b, const sc_session *s, int *at) {
  for (int i = 0; i < b->n; i++)
    if (b->st[i]->s == s && !b->st[i]->removed) {
      if (at) *at = i;
      return b->st[i];
    }
  return NULL;
}

int sc_tts_batch_size(const sc_tts_batch *b) {
  int k = 0;
  for (int i = 0; b && i < b->n; i++) k += !b->st[i]->removed;
  return k;
}

int sc_tts_batch_running(const sc_tts_batch *b) {
  int k = 0;
  for (int i = 0; b && i < b->n; i++) k += b->st[i]->status == SC_TTS_RUNNING;
  return k;
}

int sc_tts_batch_status(const sc_tts_batch *b, const sc_session *s, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  const TtsStream *x = find(b, s, NULL);
  if (!x) return -1;
  if (x->status == SC_TTS_FAILED && err) *err = x->err;
  return x->status;
}

int sc_tts_batch_remove(sc_tts_batch *b, sc_session *s) {
  int at;
  TtsStream *x = b ? find(b, s, &at) : NULL;
  if (!x) return -1;
  if (b->stepping) { /* from a callback: out at once (its codes no longer written), freed after the step */
    x->removed = 1;
    x->live = 0;
    x->status = SC_TTS_ENDED;
    return 0;
  }
  stream_free(x);
  memmove(&b->st[at], &b->st[at + 1], (size_t)(b->n - at - 1) * sizeof *b->st);
  b->n--;
  return 0;
}

static void stats(TtsStream *x) {
  if (!x->p.stats) return;
  x->p.stats->frames = x->t;
  x->p.stats->wall_s = now() - x->start;
}

static void end(TtsStream *x) {
  x->status = SC_TTS_ENDED;
  stats(x);
}

static void fail(TtsStream *x, const sc_error *e) {
  x->status = SC_TTS_FAILED;
  x->err = *e;
  stats(x);
}

int sc_tts_batch_add(sc_tts_batch *b, sc_session *s, const sc_tts_params *p, int32_t *codes, int *n_frames,
                     sc_frame_cb on_frame, void *user, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!b) return sc_fail(err, SC_EUSAGE, "sc_tts_batch_add: no batch");
  const double start = now();
  if (b->stepping) return sc_fail(err, SC_EUSAGE, "sc_tts_batch_add: not from a callback of sc_tts_batch_step");
  if (!s || s->m != b->m) return sc_fail(err, SC_EUSAGE, "sc_tts_batch_add: the session is not of the batch's model");
  if (find(b, s, NULL)) return sc_fail(err, SC_EUSAGE, "sc_tts_batch_add: the session is in the batch already");
  if (!codes || !n_frames) return sc_fail(err, SC_EUSAGE, "sc_tts_batch_add: no codes or n_frames");
  if (p->max_frames < 1) return sc_fail(err, SC_EUSAGE, "--max-frames must be >= 1, got %d", p->max_frames);
  if (p->min_frames < 0) return sc_fail(err, SC_EUSAGE, "min_frames must be >= 0, got %d", p->min_frames);
  if (p->codec)
    return sc_fail(err, SC_EUSAGE, "sc_tts_batch_add: a batch does not decode audio (params.codec must be NULL; "
                   "decode each stream's codes with sc_codec_decode)");
  const TtsConfig *c = &b->c;
  const size_t H = (size_t)c->hidden;
  TtsStream *x = calloc(1, sizeof *x);
  if (!x) return sc_fail(err, SC_ERUNTIME, "out of memory");
  x->s = s;
  x->p = *p;
  x->codes = codes;
  x->n_frames = n_frames;
  x->on_frame = on_frame;
  x->user = user;
  x->start = start;
  x->hist = malloc((size_t)p->max_frames * sizeof *x->hist);
  x->x = malloc(H * sizeof *x->x);
  x->h = malloc(H * sizeof *x->h);
  x->tlogits = malloc((size_t)c->vocab * sizeof *x->tlogits);
  int rc = SC_OK;
  if (!x->hist || !x->x || !x->h || !x->tlogits) rc = sc_fail(err, SC_ERUNTIME, "out of memory");
  if (b->n == b->cap && !rc) {
    const int cap = b->cap ? 2 * b->cap : 8;
    TtsStream **q = realloc(b->st, (size_t)cap * sizeof *q);
    if (!q) rc = sc_fail(err, SC_ERUNTIME, "out of memory");
    else b->st = q, b->cap = cap;
  }
  /* the samplers and seeds of sc_tts_generate */
  if (!rc) rc = sc_sampler_new(&p->talker, &x->ts, err);
  sc_sample_params pp = p->predictor;
  pp.seed ^= 0x9e3779b97f4a7c15ull;
  if (!rc) rc = sc_sampler_new(&pp, &x->ps, err);
  if (!rc) {
    sc_session_reset(s);
    rc = tts_build_prompt(s, c, p, &x->pr, err);
  }
  if (!rc) rc = tts_talker(s, c, x->pr.prompt, x->pr.rows, x->tlogits, x->h, err);
  if (rc) {
    stream_free(x);
    return rc;
  }
  if (p->stats) {
    memset(p->stats, 0, sizeof *p->stats);
    p->stats->prompt_rows = x->pr.rows;
    p->stats->prompt_s = now() - start;
  }
  *n_frames = 0;
  b->st[b->n++] = x;
  return SC_OK;
}

/* One call of e for the streams a[0..n), lead a[0]: rows_per stream rows
 * each, stream i's rows at positions pos0(i) + 0, 1, ...; in, out and
 * hidden as sc_io's. */
static int call_rows(sc_tts_batch *b, const sc_entry *e, TtsStream **a, int n, int rows_per, int pos0, int step,
                     const int32_t *ids, const float *in, float *out, float *hidden, sc_error *err) {
  sc_session *lead = a[0]->s;
  const unsigned long long base = rt_state_base(lead);
  for (int i = 0; i < n; i++)
    for (int r = 0; r < rows_per; r++) {
      b->row_pos[i * rows_per + r] = (pos0 < 0 ? a[i]->s->pos : pos0) + r;
      b->row_state[i * rows_per + r] = (long long)(rt_state_base(a[i]->s) - base);
    }
  sc_io io = {.ids = ids, .embeds = in, .n = n * rows_per, .step = step, .out = out, .hidden_out = hidden,
              .row_pos = b->row_pos, .row_state = b->row_state};
  const int rowwise = lead->kctx.rowwise;
  lead->kctx.rowwise = 1;
  const int rc = rt_call(lead, e, &io, err);
  lead->kctx.rowwise = rowwise;
  return rc;
}

/* Stream x draws into *tok from logits with sampler smp (its history and
 * suppression for c0); a failure ends x. */
static int draw(TtsStream *x, sc_sampler *smp, float *logits, int vocab, const int32_t *hist, int n_hist,
                const int32_t *sup, int n_sup, int32_t *tok) {
  sc_error e = {0};
  if (sc_sample(smp, logits, vocab, hist, n_hist, sup, n_sup, tok, &e)) {
    fail(x, &e);
    x->live = 0;
    return 1;
  }
  return 0;
}

/* The predictor's G-1 codes for the streams a[0..n) (n <= rows), whose
 * c0 is drawn and whose h holds the talker's hidden; frame row i of
 * b->frame gets stream i's codes. */
static int predictor(sc_tts_batch *b, TtsStream **a, int n, sc_error *err) {
  const TtsConfig *c = &b->c;
  const int G = c->groups;
  const size_t H = (size_t)c->hidden, PV = (size_t)c->pvocab;
  /* E(c0) of each stream into the odd rows, h into the even */
  for (int i = 0; i < n; i++) b->ids[i] = b->frame[(size_t)i * G];
  for (int done = 0; done < n;) {
    const int k = n - done < c->codec_embed->max_tokens ? n - done : c->codec_embed->max_tokens;
    sc_io io = {.ids = b->ids + done, .n = k, .out = b->out + (size_t)done * H};
    if (rt_call(a[0]->s, c->codec_embed, &io, err)) return err->code;
    done += k;
  }
  for (int i = 0; i < n; i++) {
    memcpy(b->in + 2 * i * H, a[i]->h, H * sizeof *b->in);
    memcpy(b->in + (2 * i + 1) * H, b->out + i * H, H * sizeof *b->in);
  }
  if (call_rows(b, b->pprefill, a, n, 2, 0, 0, NULL, b->in, b->out, NULL, err)) return err->code;
  for (int i = 0; i < n; i++)
    if (a[i]->live) draw(a[i], a[i]->ps, b->out + (2 * i + 1) * PV, c->pvocab, NULL, 0, NULL, 0, &b->frame[i * G + 1]);
  for (int j = 1; j < G - 1; j++) {
    for (int i = 0; i < n; i++) b->ids[i] = a[i]->live ? b->frame[i * G + j] : 0;
    if (call_rows(b, b->pdecode, a, n, 1, j + 1, j, b->ids, NULL, b->out, NULL, err)) return err->code;
    for (int i = 0; i < n; i++)
      if (a[i]->live) draw(a[i], a[i]->ps, b->out + i * PV, c->pvocab, NULL, 0, NULL, 0, &b->frame[i * G + j + 1]);
  }
  return SC_OK;
}

/* A frame of the streams a[0..n), n <= rows. */
static int frame(sc_tts_batch *b, TtsStream **a, int n, sc_error *err) {
  const TtsConfig *c = &b->c;
  const int G = c->groups;
  const size_t H = (size_t)c->hidden, V = (size_t)c->vocab;
  /* the talker's step for the streams past their first frame */
  TtsStream **d = b->dec;
  int nd = 0;
  for (int i = 0; i < n; i++)
    if (a[i]->t) d[nd++] = a[i];
  if (nd) {
    for (int i = 0; i < nd; i++) memcpy(b->in + i * H, d[i]->x, H * sizeof *b->in);
    if (call_rows(b, b->talker, d, nd, 1, -1, 0, NULL, b->in, b->out, b->hid, err)) return err->code;
    for (int i = 0; i < nd; i++) {
      memcpy(d[i]->tlogits, b->out + i * V, V * sizeof *b->out);
      memcpy(d[i]->h, b->hid + i * H, H * sizeof *b->hid);
      d[i]->s->pos++;
    }
  }
  /* c0; EOS ends a stream here */
  TtsStream **q = b->pred;
  int nq = 0;
  for (int i = 0; i < n; i++) {
    TtsStream *x = a[i];
    int32_t c0;
    x->live = 1;
    if (draw(x, x->ts, x->tlogits, c->vocab, x->hist, x->t, b->suppress, b->n_sup + (x->t < x->p.min_frames), &c0))
      continue;
    x->codes[(size_t)x->t * G] = c0;
    if (c0 == c->codec_eos) {
      x->live = 0;
      end(x);
      continue;
    }
    b->frame[(size_t)nq * G] = c0;
    q[nq++] = x;
  }
  if (nq && predictor(b, q, nq, err)) return err->code;
  for (int i = 0; i < nq; i++) {
    TtsStream *x = q[i];
    if (!x->live) continue; /* a draw failed: ended */
    int32_t *f = x->codes + (size_t)x->t * G;
    memcpy(f, b->frame + (size_t)i * G, (size_t)G * sizeof *f);
    sc_io io = {.ids = f, .n = G, .out = x->x};
    /* on the stream's own session: a callback before may have removed an
     * earlier stream of the call and closed its session */
    if (rt_call(x->s, c->codec_sum, &io, err)) return err->code;
    x->hist[x->t] = f[0];
    *x->n_frames = ++x->t;
    const int stop = x->on_frame && x->on_frame(x->user, f, G, x->t - 1);
    if (x->removed) continue; /* by its callback (or an earlier stream's: then !live above) */
    if (stop || x->t == x->p.max_frames) {
      end(x);
      continue;
    }
    const float *row = x->t - 1 < x->pr.trail ? x->pr.trailing + (size_t)(x->t - 1) * H : x->pr.pad;
    for (size_t k = 0; k < H; k++) x->x[k] += row[k];
  }
  return SC_OK;
}

static int step(sc_tts_batch *b, sc_error *err);

/* The callbacks may remove streams (their own or others': freed here,
 * after the step), not add them or step again. */
int sc_tts_batch_step(sc_tts_batch *b, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!b) return sc_fail(err, SC_EUSAGE, "sc_tts_batch_step: no batch");
  if (b->stepping) return sc_fail(err, SC_EUSAGE, "sc_tts_batch_step: not from one of its own callbacks");
  b->stepping = 1;
  const int rc = step(b, err);
  b->stepping = 0;
  int k = 0;
  for (int i = 0; i < b->n; i++)
    if (b->st[i]->removed)
      stream_free(b->st[i]);
    else
      b->st[k++] = b->st[i];
  b->n = k;
  return rc;
}

static int step(sc_tts_batch *b, sc_error *err) {
  const int max_ctx = b->m->d->max_context;
  int rc = SC_OK;
  TtsStream **a = b->run;
  for (int i0 = 0; i0 < b->n;) {
    /* the next running streams, up to a call's rows */
    int n = 0;
    for (; i0 < b->n && n < b->rows; i0++) {
      TtsStream *x = b->st[i0];
      if (x->status != SC_TTS_RUNNING) continue;
      if (x->t && x->s->pos + 1 > max_ctx) {
        sc_error e = {0};
        sc_fail(&e, SC_ERUNTIME, "context full: talker position %d + 1 exceeds max_context %d (hint: rebuild "
                "with a larger --max-context, or lower --max-frames)", x->s->pos, max_ctx);
        fail(x, &e);
        continue;
      }
      a[n++] = x;
    }
    if (!n) continue;
    sc_error e = {0};
    if (frame(b, a, n, &e)) {
      for (int i = 0; i < n; i++)
        if (a[i]->status == SC_TTS_RUNNING) fail(a[i], &e);
      if (!rc) rc = sc_fail(err, e.code, "%s", e.msg);
    }
  }
  return rc;
}
