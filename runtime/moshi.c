/*
 * moshi.c — the step loop of Moshi's RQ-Transformer, as the `moshi`
 * package's LMGen._step runs it (moshi/models/lm.py), over the entry points
 * fe_moshi.c compiles (temporal, depformer_text, depformer_audio).
 *
 * State: a cache [K, CT] of tokens, CT = max_delay + 2, filled with the
 * ungenerated id -2, and the step count `offset`.  One step:
 *   1. the user's codes go to cache[k][(offset + delay_k) % CT] for the
 *      user streams k = 1 + dep_q .. K-1;
 *   2. the temporal step reads cache[k][offset % CT], or the initial token
 *      (text_card for text, card for audio) while offset <= delay_k;
 *   3. the text token is drawn from its logits, then dep_q depformer steps
 *      each draw audio codebook k from the previous token (the text token
 *      for k = 0); a draw is LMGen's sample_token (speechc.h), through
 *      sc_sample with the text's and the audio's parameters;
 *   4. offset += 1, and the drawn tokens go to cache[.][offset % CT];
 *   5. after max_delay steps, the row cache[k][(offset - max_delay +
 *      delay_k) % CT] for k = 0..dep_q is returned.
 *
 * sc_moshi_batch_step runs the same step for several conversations (each
 * a generator on its own session) with each call made for all of them:
 * the "_batch" entries carry a row per conversation, at its own step in
 * its own session's caches (sc_io.row_pos, row_state); the depformer's
 * rows all sit at the same step k of the frame.  Each generator draws
 * from its own samplers in the same order as alone, and every row gets the
 * bits of the one-row call (the blocked tiles, kernels.h; the calls set
 * sc_kernel_ctx.rowwise, as batch.c's do), so its rows equal
 * sc_moshi_step's (test_moshi checks it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "model_internal.h"

#define MOSHI_MAX_K 64

struct sc_moshi {
  sc_session *s;
  const sc_entry *temporal, *dep_text, *dep_audio;
  sc_moshi_info info;
  int K, CT, offset, text_out, dim;
  int busy;        /* inside sc_moshi_push: its callback may not step again */
  int delays[MOSHI_MAX_K];
  int32_t *cache;  /* [K, CT] */
  float *tlogits;  /* [text_out] */
  float *alogits;  /* [card] */
  float *h;        /* [dim] */
  sc_sampler *text, *audio;
  sc_moshi_times times;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cfg_int(const cJSON *c, const char *key, int dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
  return cJSON_IsNumber(v) ? v->valueint : dflt;
}

static float cfg_num(const cJSON *c, const char *key, float dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
  return cJSON_IsNumber(v) ? (float)v->valuedouble : dflt;
}

/* LMGen.__init__'s defaults, then lm_gen_config (fe_moshi.c checked its
 * keys and types at build time). */
int sc_moshi_defaults(const sc_model *m, sc_moshi_params *p, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!m || !p) return sc_fail(err, SC_EUSAGE, "sc_moshi_defaults: no %s", !m ? "model" : "params");
  memset(p, 0, sizeof *p);
  p->temp = 0.8f;
  p->temp_text = 0.7f;
  p->top_k = 250;
  p->top_k_text = 25;
  p->seed = 4242;
  if (strcmp(m->d->family, "moshi"))
    return sc_fail(err, SC_EUSAGE, "%s: a %s model, not a Moshi model (model_type moshi)", m->path, m->d->family);
  cJSON *c = cJSON_Parse(m->d->config_json);
  if (!c) return sc_fail(err, SC_ERUNTIME, "%s: out of memory reading the Moshi config", m->path);
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(c, "lm_gen_config");
  if (cJSON_IsObject(g)) {
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(g, "use_sampling");
    p->greedy = cJSON_IsFalse(u);
    p->temp = cfg_num(g, "temp", p->temp);
    p->temp_text = cfg_num(g, "temp_text", p->temp_text);
    p->top_k = cfg_int(g, "top_k", p->top_k);
    p->top_k_text = cfg_int(g, "top_k_text", p->top_k_text);
  }
  cJSON_Delete(c);
  return SC_OK;
}

/* One sampler per stream kind: LMGen's sample_token is sc_sample with
 * top-p and the repetition penalty off. */
static int new_sampler(int greedy, float temp, int top_k, uint64_t seed, sc_sampler **out, const char *what,
                       sc_error *err) {
  sc_sample_params sp = sc_sample_defaults();
  sp.greedy = greedy || !(temp > 0);
  sp.temperature = temp > 0 ? temp : 0;
  sp.top_k = top_k;
  sp.seed = seed;
  if (isnan(temp) || isinf(temp))
    return sc_fail(err, SC_EUSAGE, "the %s temperature must be a finite number (got %g); <= 0 means greedy", what,
                   temp);
  if (sc_sampler_new(&sp, out, err)) return sc_fail(err, err->code, "%s sampling: %s", what, err->msg);
  return SC_OK;
}

int sc_moshi_open(sc_session *s, const sc_moshi_params *p, sc_moshi **out, sc_moshi_info *info, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!s || !out) return sc_fail(err, SC_EUSAGE, "sc_moshi_open: no %s", !s ? "session" : "out");
  *out = NULL;
  const sc_model *m = s->m;
  sc_moshi_params dflt;
  if (!p) {
    if (sc_moshi_defaults(m, &dflt, err)) return err->code;
    p = &dflt;
  }
  if (strcmp(m->d->family, "moshi"))
    return sc_fail(err, SC_EUSAGE, "%s: a %s model, not a Moshi model (model_type moshi)", m->path, m->d->family);
  sc_moshi *g = calloc(1, sizeof *g);
  cJSON *c = cJSON_Parse(m->d->config_json);
  if (!g || !c) {
    free(g);
    cJSON_Delete(c);
    return sc_fail(err, SC_ERUNTIME, "%s: out of memory reading the Moshi config", m->path);
  }
  g->s = s;
  g->temporal = rt_entry(m, "temporal");
  g->dep_text = rt_entry(m, "depformer_text");
  g->dep_audio = rt_entry(m, "depformer_audio");
  sc_moshi_info *in = &g->info;
  /* fe_moshi.c checked these when it built the artifact; defaults are LMModel's */
  in->n_q = cfg_int(c, "n_q", 8);
  in->dep_q = cfg_int(c, "dep_q", 8);
  in->card = cfg_int(c, "card", 1024);
  in->text_card = cfg_int(c, "text_card", 32000);
  in->user_codebooks = in->n_q - in->dep_q;
  g->K = in->n_q + 1;
  const cJSON *dl = cJSON_GetObjectItemCaseSensitive(c, "delays");
  int ok = g->temporal && g->dep_text && (g->dep_audio || in->dep_q == 1) && g->K <= MOSHI_MAX_K &&
           cJSON_GetArraySize(dl) == g->K;
  for (int k = 0; ok && k < g->K; k++) {
    g->delays[k] = cJSON_GetArrayItem(dl, k)->valueint;
    if (g->delays[k] > in->max_delay) in->max_delay = g->delays[k];
  }
  cJSON_Delete(c);
  if (!ok) {
    free(g);
    return sc_fail(err, SC_EINPUT, "%s: the Moshi artifact lacks its entry points or delays (rebuild it)", m->path);
  }
  g->CT = in->max_delay + 2;
  g->text_out = g->temporal->out_cols;
  g->dim = g->temporal->hidden_cols;
  g->cache = malloc(sizeof *g->cache * (size_t)g->K * g->CT);
  g->tlogits = malloc(sizeof *g->tlogits * (size_t)g->text_out);
  g->alogits = malloc(sizeof *g->alogits * (size_t)in->card);
  g->h = malloc(sizeof *g->h * (size_t)g->dim);
  if (!g->cache || !g->tlogits || !g->alogits || !g->h) {
    sc_moshi_close(g);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  if (new_sampler(p->greedy, p->temp_text, p->top_k_text, p->seed, &g->text, "text", err) ||
      new_sampler(p->greedy, p->temp, p->top_k, p->seed + 1, &g->audio, "audio", err)) {
    sc_moshi_close(g);
    return err->code;
  }
  for (int i = 0; i < g->K * g->CT; i++) g->cache[i] = -2; /* ungenerated */
  sc_session_reset(s);
  if (info) *info = *in;
  *out = g;
  return SC_OK;
}

void sc_moshi_close(sc_moshi *g) {
  if (!g) return;
  free(g->cache);
  free(g->tlogits);
  free(g->alogits);
  free(g->h);
  sc_sampler_free(g->text);
  sc_sampler_free(g->audio);
  free(g);
}

/* The parts of a step (the file's comment), shared by sc_moshi_step and
 * sc_moshi_batch_step.  check: the user's codes are checked before any
 * state changes, so a refused frame leaves the stream as it was. */
static int check_user(const sc_moshi *g, const int32_t *user, sc_error *err) {
  const sc_moshi_info *in = &g->info;
  for (int i = 0; i < in->user_codebooks; i++)
    if (user[i] < 0 || user[i] >= in->card)
      return sc_fail(err, SC_EINPUT, "step %d: user code %d of codebook %d is outside [0, %d)", g->offset, user[i],
                     i, in->card);
  return SC_OK;
}

/* 1-2: the user's codes into the cache, the temporal step's K ids out. */
static void begin(sc_moshi *g, const int32_t *user, int32_t *ids) {
  const sc_moshi_info *in = &g->info;
  const int K = g->K, CT = g->CT, Q = in->dep_q;
  for (int k = Q + 1; k < K; k++) g->cache[k * CT + (g->offset + g->delays[k]) % CT] = user[k - Q - 1];
  for (int k = 0; k < K; k++)
    ids[k] = g->offset <= g->delays[k] ? (k ? in->card : in->text_card) : g->cache[k * CT + g->offset % CT];
}

/* 4-5: the drawn tokens toks[1 + dep_q] into the cache; the row, if any. */
static void finish(sc_moshi *g, const int32_t *toks, int32_t *row, int *has_row) {
  const sc_moshi_info *in = &g->info;
  const int CT = g->CT, Q = in->dep_q;
  g->offset++;
  for (int k = 0; k <= Q; k++) g->cache[k * CT + g->offset % CT] = toks[k];
  *has_row = g->offset > in->max_delay;
  if (*has_row)
    for (int k = 0; k <= Q; k++) row[k] = g->cache[k * CT + (g->offset - in->max_delay + g->delays[k]) % CT];
}

/* One LMGen step on the one-row entries. */
static int step(sc_moshi *g, const int32_t *user, int32_t *row, int *has_row, sc_error *err) {
  const sc_moshi_info *in = &g->info;
  const int Q = in->dep_q;
  *has_row = 0;
  if (g->offset >= g->s->m->d->max_context)
    return sc_fail(err, SC_ERUNTIME, "context full at step %d, max_context %d (hint: rebuild with a larger "
                   "--max-context)", g->offset, g->s->m->d->max_context);
  if (check_user(g, user, err)) return err->code;
  const double ts = now();
  int32_t ids[MOSHI_MAX_K];
  begin(g, user, ids);
  sc_io io = {.ids = ids, .n = 1, .pos = g->offset, .out = g->tlogits, .hidden_out = g->h};
  double t0 = now();
  if (rt_call(g->s, g->temporal, &io, err)) return err->code;
  double t1 = now();
  g->times.temporal_s += t1 - t0;
  int32_t prev, toks[MOSHI_MAX_K];
  if (sc_sample(g->text, g->tlogits, g->text_out, NULL, 0, NULL, 0, &prev, err)) return err->code;
  toks[0] = prev;
  double dep = 0;
  for (int k = 0; k < Q; k++) {
    sc_io d = {.ids = &prev, .n = 1, .pos = k, .step = k, .hidden_in = g->h, .out = g->alogits};
    t0 = now();
    if (rt_call(g->s, k ? g->dep_audio : g->dep_text, &d, err)) return err->code;
    dep += now() - t0;
    if (sc_sample(g->audio, g->alogits, in->card, NULL, 0, NULL, 0, &prev, err)) return err->code;
    toks[k + 1] = prev;
  }
  g->times.depformer_s += dep;
  g->times.step_s += now() - ts;
  g->times.steps++;
  finish(g, toks, row, has_row);
  return SC_OK;
}

int sc_moshi_step(sc_moshi *g, const int32_t *user, int32_t *row, int *has_row, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!g || !user || !row || !has_row)
    return sc_fail(err, SC_EUSAGE, "sc_moshi_step: no %s", !g ? "generator" : !user ? "user codes" : !row ? "row buffer"
                   : "has_row");
  *has_row = 0;
  if (g->busy)
    return sc_fail(err, SC_EUSAGE, "sc_moshi_step: called from a sc_moshi_push callback of the same generator "
                   "(hint: return non-zero to stop the push, then step)");
  return step(g, user, row, has_row, err);
}

/* sc_moshi_step over n_frames frames, each returned row handed to on_row
 * before the next frame is stepped. */
int sc_moshi_push(sc_moshi *g, const int32_t *user, int n_frames, sc_moshi_row_cb on_row, void *cb_user,
                  int *n_pushed, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!g) return sc_fail(err, SC_EUSAGE, "sc_moshi_push: no generator");
  if (n_pushed) *n_pushed = 0;
  if (g->busy)
    return sc_fail(err, SC_EUSAGE, "sc_moshi_push: called from a callback of the same generator "
                   "(hint: return non-zero to stop the push, then push again)");
  if (n_frames < 0 || (n_frames > 0 && !user))
    return sc_fail(err, SC_EUSAGE, "sc_moshi_push: %d frames at %p: expected n_frames >= 0 and the codes",
                   n_frames, (const void *)user);
  const int U = g->info.user_codebooks, n_row = 1 + g->info.dep_q;
  int32_t row[MOSHI_MAX_K];
  int rc = SC_OK, has;
  g->busy = 1;
  for (int i = 0; i < n_frames; i++) {
    const int at = g->offset;
    if ((rc = step(g, user + (size_t)i * U, row, &has, err))) break;
    if (n_pushed) *n_pushed = i + 1;
    if (has && on_row && on_row(cb_user, row, n_row, at)) break;
  }
  g->busy = 0;
  return rc;
}

int sc_moshi_push_pcm(sc_moshi *g, sc_session *codec, const float *pcm, int n_frames, sc_moshi_audio_cb on_audio,
                      void *cb_user, int *n_pushed, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!g) return sc_fail(err, SC_EUSAGE, "sc_moshi_push_pcm: no generator");
  if (n_pushed) *n_pushed = 0;
  if (g->busy)
    return sc_fail(err, SC_EUSAGE, "sc_moshi_push_pcm: called from a callback of the same generator "
                   "(hint: return non-zero to stop the push, then push again)");
  if (!codec || n_frames < 0 || (n_frames > 0 && !pcm))
    return sc_fail(err, SC_EUSAGE, "sc_moshi_push_pcm: %d frames at %p, codec %p: expected a Mimi session, "
                   "n_frames >= 0 and the samples", n_frames, (const void *)pcm, (const void *)codec);
  sc_codec_info ci;
  if (rt_codec_dims(codec->m, &ci) && sc_codec_get_info(codec->m, &ci, err)) return err->code;
  if (!ci.can_encode) return sc_fail(err, SC_EUSAGE, "sc_moshi_push_pcm: the codec has no encoder (a Mimi is needed)");
  if (ci.n_codebooks != g->info.user_codebooks || ci.n_codebooks != g->info.dep_q || ci.codebook_size != g->info.card)
    return sc_fail(err, SC_EINPUT, "sc_moshi_push_pcm: the Mimi gives %d codebooks of %d entries, but the model reads "
                   "%d user codebooks and writes %d, of %d entries", ci.n_codebooks, ci.codebook_size,
                   g->info.user_codebooks, g->info.dep_q, g->info.card);
  const int spf = ci.samples_per_frame, n_row = 1 + g->info.dep_q;
  float *out = malloc(sizeof *out * (size_t)spf);
  if (!out) return sc_fail(err, SC_ERUNTIME, "out of memory");
  int32_t codes[MOSHI_MAX_K], row[MOSHI_MAX_K];
  int rc = SC_OK, has;
  g->busy = 1;
  for (int i = 0; i < n_frames; i++) {
    if ((rc = sc_codec_encode(codec, pcm + (size_t)i * spf, 1, codes, err))) break;
    /* run_inference steps the stream's first frame twice: the first time
     * only so that the transformer sees it (its result is dropped) */
    if (!g->offset && (rc = step(g, codes, row, &has, err))) break;
    const int at = g->offset;
    if ((rc = step(g, codes, row, &has, err))) break;
    if (n_pushed) *n_pushed = i + 1;
    if (!has) continue;
    if ((rc = sc_codec_decode(codec, row + 1, 1, out, err))) break;
    if (on_audio && on_audio(cb_user, row, n_row, out, spf, at)) break;
  }
  g->busy = 0;
  free(out);
  return rc;
}

void sc_moshi_get_times(const sc_moshi *g, sc_moshi_times *t) {
  if (t && g) *t = g->times;
  else if (t) memset(t, 0, sizeof *t);
}

/* ---- several conversations at once ---------------------------------------- */

struct sc_moshi_batch {
  sc_model *m;
  int held;                 /* a reference on m (rt_model_ref), given back by sc_moshi_batch_free */
  const sc_entry *temporal, *dep_text, *dep_audio;
  int rows;                 /* conversations per call */
  int K, Q, text_out, dim, card;
  sc_moshi **g;
  int n, cap;
  int *row_pos;
  long long *row_state;
  int32_t *ids;             /* [rows, K] */
  int32_t *prev;            /* [rows] */
  int32_t *toks;            /* [rows, 1 + Q] */
  float *tlogits, *h, *alogits; /* [rows, text_out], [rows, dim], [rows, card] */
  sc_moshi_times times;
};

void sc_moshi_batch_free(sc_moshi_batch *b) {
  if (!b) return;
  free(b->g);
  free(b->row_pos);
  free(b->row_state);
  free(b->ids);
  free(b->prev);
  free(b->toks);
  free(b->tlogits);
  free(b->h);
  free(b->alogits);
  if (b->held) sc_model_close(b->m);
  free(b);
}

int sc_moshi_batch_new(sc_model *m, sc_moshi_batch **out, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!out) return sc_fail(err, SC_EUSAGE, "sc_moshi_batch_new: out is NULL");
  *out = NULL;
  if (!m) return sc_fail(err, SC_EUSAGE, "sc_moshi_batch_new: no model");
  if (strcmp(m->d->family, "moshi"))
    return sc_fail(err, SC_EUSAGE, "%s: a %s model, not a Moshi model (model_type moshi)", m->path, m->d->family);
  sc_moshi_batch *b = calloc(1, sizeof *b);
  cJSON *c = cJSON_Parse(m->d->config_json);
  if (!b || !c) {
    free(b);
    cJSON_Delete(c);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  b->m = m;
  b->temporal = rt_entry(m, "temporal_batch");
  b->dep_text = rt_entry(m, "depformer_text_batch");
  b->dep_audio = rt_entry(m, "depformer_audio_batch");
  b->K = cfg_int(c, "n_q", 8) + 1;
  b->Q = cfg_int(c, "dep_q", 8);
  b->card = cfg_int(c, "card", 1024);
  cJSON_Delete(c);
  if (!b->temporal || !b->dep_text || (!b->dep_audio && b->Q > 1)) {
    sc_moshi_batch_free(b);
    return sc_fail(err, SC_EUSAGE, "%s: this Moshi model has no batched step entries (hint: a model built with "
                   "--max-batch 2 or more, the default, has them)", m->path);
  }
  int rows = b->temporal->max_tokens;
  if (b->dep_text->max_tokens < rows) rows = b->dep_text->max_tokens;
  if (b->dep_audio && b->dep_audio->max_tokens < rows) rows = b->dep_audio->max_tokens;
  b->rows = rows;
  b->text_out = b->temporal->out_cols;
  b->dim = b->temporal->hidden_cols;
  const size_t R = (size_t)rows;
  b->row_pos = malloc(R * sizeof *b->row_pos);
  b->row_state = malloc(R * sizeof *b->row_state);
  b->ids = malloc(R * (size_t)b->K * sizeof *b->ids);
  b->prev = malloc(R * sizeof *b->prev);
  b->toks = malloc(R * (size_t)(1 + b->Q) * sizeof *b->toks);
  b->tlogits = malloc(R * (size_t)b->text_out * sizeof *b->tlogits);
  b->h = malloc(R * (size_t)b->dim * sizeof *b->h);
  b->alogits = malloc(R * (size_t)b->card * sizeof *b->alogits);
  if (rows < 1 || !b->row_pos || !b->row_state || !b->ids || !b->prev || !b->toks || !b->tlogits || !b->h ||
      !b->alogits) {
    sc_moshi_batch_free(b);
    return rows < 1 ? sc_fail(err, SC_EINPUT, "%s: the batched step entries carry no row (hint: rebuild)", m->path)
                    : sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  rt_model_ref(m);
  b->held = 1;
  *out = b;
  return SC_OK;
}

int sc_moshi_batch_add(sc_moshi_batch *b, sc_moshi *g, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!b) return sc_fail(err, SC_EUSAGE, "sc_moshi_batch_add: no batch");
  if (!g || g->s->m != b->m)
    return sc_fail(err, SC_EUSAGE, "sc_moshi_batch_add: the generator is not of the batch's model");
  for (int i = 0; i < b->n; i++)
    if (b->g[i] == g || b->g[i]->s == g->s)
      return sc_fail(err, SC_EUSAGE, "sc_moshi_batch_add: %s", b->g[i] == g ? "the generator is in the batch already"
                                                                           : "another generator of the batch has "
                                                                             "the same session");
  if (b->n == b->cap) {
    const int cap = b->cap ? 2 * b->cap : 8;
    sc_moshi **p = realloc(b->g, (size_t)cap * sizeof *p);
    if (!p) return sc_fail(err, SC_ERUNTIME, "out of memory");
    b->g = p;
    b->cap = cap;
  }
  b->g[b->n++] = g;
  return SC_OK;
}

int sc_moshi_batch_remove(sc_moshi_batch *b, sc_moshi *g) {
  for (int i = 0; b && i < b->n; i++)
    if (b->g[i] == g) {
      memmove(&b->g[i], &b->g[i + 1], (size_t)(b->n - i - 1) * sizeof *b->g);
      b->n--;
      return 0;
    }
  return -1;
}

int sc_moshi_batch_size(const sc_moshi_batch *b) { return b ? b->n : 0; }

sc_moshi *sc_moshi_batch_get(const sc_moshi_batch *b, int i) { return b && i >= 0 && i < b->n ? b->g[i] : NULL; }

void sc_moshi_batch_get_times(const sc_moshi_batch *b, sc_moshi_times *t) {
  if (t && b) *t = b->times;
  else if (t) memset(t, 0, sizeof *t);
}

/* Rows i0 .. i0 + n - 1 of the batch, one call per entry for all of them. */
static int batch_rows(sc_moshi_batch *b, int i0, int n, const int32_t *user, int32_t *rows, int *has_row,
                      sc_error *err) {
  const int K = b->K, Q = b->Q, U = K - 1 - Q;
  sc_moshi **g = b->g + i0;
  sc_session *a = g[0]->s; /* runs the calls: its kernels, threads and scratch */
  const unsigned long long base = rt_state_base(a);
  for (int r = 0; r < n; r++) {
    begin(g[r], user + (size_t)(i0 + r) * U, b->ids + (size_t)r * K);
    b->row_pos[r] = g[r]->offset;
    b->row_state[r] = (long long)(rt_state_base(g[r]->s) - base);
  }
  const int rowwise = a->kctx.rowwise;
  a->kctx.rowwise = 1;
  int rc = SC_OK;
  sc_io io = {.ids = b->ids, .n = n, .out = b->tlogits, .hidden_out = b->h, .row_pos = b->row_pos,
              .row_state = b->row_state};
  double t0 = now();
  rc = rt_call(a, b->temporal, &io, err);
  double t1 = now();
  b->times.temporal_s += t1 - t0;
  for (int r = 0; r < n && !rc; r++) {
    rc = sc_sample(g[r]->text, b->tlogits + (size_t)r * b->text_out, b->text_out, NULL, 0, NULL, 0, &b->prev[r],
                   err);
    b->toks[(size_t)r * (1 + Q)] = b->prev[r];
  }
  double dep = 0;
  for (int k = 0; k < Q && !rc; k++) {
    for (int r = 0; r < n; r++) b->row_pos[r] = k;
    sc_io d = {.ids = b->prev, .n = n, .pos = k, .step = k, .hidden_in = b->h, .out = b->alogits,
               .row_pos = b->row_pos, .row_state = b->row_state};
    t0 = now();
    rc = rt_call(a, k ? b->dep_audio : b->dep_text, &d, err);
    dep += now() - t0;
    for (int r = 0; r < n && !rc; r++) {
      rc = sc_sample(g[r]->audio, b->alogits + (size_t)r * b->card, b->card, NULL, 0, NULL, 0, &b->prev[r], err);
      b->toks[(size_t)r * (1 + Q) + k + 1] = b->prev[r];
    }
  }
  a->kctx.rowwise = rowwise;
  b->times.depformer_s += dep;
  if (rc) return rc;
  for (int r = 0; r < n; r++)
    finish(g[r], b->toks + (size_t)r * (1 + Q), rows + (size_t)(i0 + r) * (1 + Q), &has_row[i0 + r]);
  return SC_OK;
}

int sc_moshi_batch_step(sc_moshi_batch *b, const int32_t *user, int32_t *rows, int *has_row, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!b || (b->n && (!user || !rows || !has_row)))
    return sc_fail(err, SC_EUSAGE, "sc_moshi_batch_step: no %s", !b ? "batch" : !user ? "user codes" : !rows ? "rows "
                   "buffer" : "has_row");
  const int U = b->K - 1 - b->Q;
  for (int i = 0; i < b->n; i++) {
    has_row[i] = 0;
    if (b->g[i]->busy)
      return sc_fail(err, SC_EUSAGE, "sc_moshi_batch_step: generator %d of the batch is inside its own push", i);
    if (b->g[i]->offset >= b->m->d->max_context)
      return sc_fail(err, SC_ERUNTIME, "generator %d of the batch: context full at step %d, max_context %d (hint: "
                     "rebuild with a larger --max-context)", i, b->g[i]->offset, b->m->d->max_context);
    if (check_user(b->g[i], user + (size_t)i * U, err)) {
      char msg[sizeof err->msg];
      snprintf(msg, sizeof msg, "%s", err->msg);
      return sc_fail(err, err->code, "generator %d of the batch: %s", i, msg);
    }
  }
  const double t0 = now();
  int rc = SC_OK;
  for (int i0 = 0; i0 < b->n && !rc; i0 += b->rows)
    rc = batch_rows(b, i0, b->n - i0 < b->rows ? b->n - i0 : b->rows, user, rows, has_row, err);
  if (!rc && b->n) {
    b->times.steps++;
    b->times.step_s += now() - t0;
  }
  return rc;
}
