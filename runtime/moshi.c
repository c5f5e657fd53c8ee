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
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
};

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

/* One LMGen step (the file's comment).  The user's codes are checked before
 * any state changes, so a refused frame leaves the stream as it was. */
static int step(sc_moshi *g, const int32_t *user, int32_t *row, int *has_row, sc_error *err) {
  const sc_moshi_info *in = &g->info;
  const int K = g->K, CT = g->CT, Q = in->dep_q;
  *has_row = 0;
  for (int i = 0; i < in->user_codebooks; i++)
    if (user[i] < 0 || user[i] >= in->card)
      return sc_fail(err, SC_EINPUT, "step %d: user code %d of codebook %d is outside [0, %d)", g->offset, user[i],
                     i, in->card);
  for (int k = Q + 1; k < K; k++) g->cache[k * CT + (g->offset + g->delays[k]) % CT] = user[k - Q - 1];
  int32_t ids[MOSHI_MAX_K];
  for (int k = 0; k < K; k++)
    ids[k] = g->offset <= g->delays[k] ? (k ? in->card : in->text_card) : g->cache[k * CT + g->offset % CT];
  sc_io io = {.ids = ids, .n = 1, .pos = g->offset, .out = g->tlogits, .hidden_out = g->h};
  if (rt_call(g->s, g->temporal, &io, err)) return err->code;
  int32_t prev, toks[MOSHI_MAX_K];
  if (sc_sample(g->text, g->tlogits, g->text_out, NULL, 0, NULL, 0, &prev, err)) return err->code;
  toks[0] = prev;
  for (int k = 0; k < Q; k++) {
    sc_io d = {.ids = &prev, .n = 1, .pos = k, .step = k, .hidden_in = g->h, .out = g->alogits};
    if (rt_call(g->s, k ? g->dep_audio : g->dep_text, &d, err)) return err->code;
    if (sc_sample(g->audio, g->alogits, in->card, NULL, 0, NULL, 0, &prev, err)) return err->code;
    toks[k + 1] = prev;
  }
  g->offset++;
  for (int k = 0; k <= Q; k++) g->cache[k * CT + g->offset % CT] = toks[k];
  if (g->offset <= in->max_delay) return SC_OK;
  for (int k = 0; k <= Q; k++) row[k] = g->cache[k * CT + (g->offset - in->max_delay + g->delays[k]) % CT];
  *has_row = 1;
  return SC_OK;
}

int sc_moshi_step(sc_moshi *g, const int32_t *user, int32_t *row, int *has_row, sc_error *err) {
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
