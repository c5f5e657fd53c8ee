/*
 * tts_text.c — speech from text with a built Qwen3-TTS model (tts_text.h):
 * the model, its tokenizer and its codec decoder opened once; per request,
 * the chat templates tokenized and sc_tts_generate run on a stream's
 * sessions.
 */
#include "tts_text.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "tokenizer.h"

/* The official qwen-tts templates around the text and the instruction. */
#define TEXT_PREFIX "<|im_start|>assistant\n"
#define TEXT_SUFFIX "<|im_end|>\n<|im_start|>assistant\n"
#define INSTRUCT_PREFIX "<|im_start|>user\n"
#define INSTRUCT_SUFFIX "<|im_end|>\n"

struct TtsText {
  char *path;
  sc_model *m, *cm;        /* the talker, the codec decoder (NULL: none) */
  tok_tokenizer *tok;      /* NULL: none */
  pthread_mutex_t tok_mu;  /* tok_encode keeps scratch in the tokenizer */
  cJSON *config;           /* the talker's config; owns the name strings below */
  char **names;            /* [n_speakers + n_languages] */
  TtsTextInfo info;
};

struct TtsStream {
  TtsText *t;
  sc_session *s, *cs;      /* talker, codec (NULL without a codec) */
  int32_t *codes;          /* [cap_frames * codebooks] */
  int cap_frames;
  int max_frames;          /* the last request's, after frames_to_context */
  int context_frames;      /* what the context held for it */
};

TtsTextOpts tts_text_defaults(void) {
  return (TtsTextOpts){.verify_weights = 1};
}

void tts_text_resolve(const char *path, TtsTextOpts *o, char tok[4096], char codec[4096]) {
  if (!o->tokenizer && !tok_dir_of(path, tok, 4096) && strcmp(tok, path) && !access(tok, F_OK))
    o->tokenizer = tok;
  if (!o->codec && !sc_codec_path(path, codec, 4096) && !access(codec, F_OK)) o->codec = codec;
}

/* The keys of the object `key` of talker_config, as a NULL-free array of
 * pointers into the parsed config, appended to t->names; skip_dialects:
 * not those naming a dialect (the official supported_languages leaves
 * them out: a dialect comes with its speaker, never as a language). */
static int config_names(TtsText *t, const char *key, int skip_dialects, int *n, sc_error *err) {
  const cJSON *tc = cJSON_GetObjectItemCaseSensitive(t->config, "talker_config");
  const cJSON *obj = cJSON_GetObjectItemCaseSensitive(tc, key), *e;
  int have = t->info.n_speakers + t->info.n_languages, k = 0;
  cJSON_ArrayForEach(e, obj) k++;
  char **g = realloc(t->names, (size_t)(have + k + 1) * sizeof *g);
  if (!g) return sc_fail(err, SC_ERUNTIME, "out of memory");
  t->names = g;
  k = 0;
  cJSON_ArrayForEach(e, obj) {
    if (e->string && !(skip_dialects && strstr(e->string, "dialect"))) g[have + k++] = e->string;
  }
  *n = k;
  return SC_OK;
}

int tts_text_open(const char *path, const TtsTextOpts *o, TtsText **out, sc_error *err) {
  *out = NULL;
  TtsTextOpts d = tts_text_defaults();
  if (!o) o = &d;
  TtsText *t = calloc(1, sizeof *t);
  if (!t || !(t->path = strdup(path))) {
    free(t);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  pthread_mutex_init(&t->tok_mu, NULL);
  sc_open_opts mo = {.verify_weights = o->verify_weights, .threads = o->threads};
  int rc = sc_model_open(path, &mo, &t->m, err);
  if (!rc) rc = check_family(t->m, path, "qwen3_tts", err);
  if (!rc && !(t->info.codebooks = sc_tts_codebooks(t->m)))
    rc = sc_fail(err, SC_EINPUT, "%s: its embedded Qwen3-TTS config is not usable (hint: rebuild it with this "
                 "speechc, which checks the config at build time)", path);
  if (!rc) {
    sc_model_info mi;
    sc_model_get_info(t->m, &mi);
    if (!(t->config = cJSON_Parse(mi.config_json)))
      rc = sc_fail(err, SC_EINPUT, "%s: the embedded config is not valid JSON", path);
  }
  if (!rc) rc = sc_tts_model_defaults(t->m, &t->info.defaults, err);
  if (!rc) rc = config_names(t, "spk_id", 0, &t->info.n_speakers, err);
  if (!rc) rc = config_names(t, "codec_language_id", 1, &t->info.n_languages, err);
  if (!rc) {
    /* qwen-tts' generate_custom_voice drops the instruction when
     * tts_model_size in "0b6" (a substring test, as written there) */
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(t->config, "tts_model_size");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t->config, "tts_model_type");
    t->info.drops_instruct = cJSON_IsString(type) && !strcmp(type->valuestring, "custom_voice") &&
                             cJSON_IsString(size) && strstr("0b6", size->valuestring);
    /* a Base model speaks only in a voice cloned from reference audio
     * (qwen-tts refuses its custom-voice and voice-design calls) */
    if (cJSON_IsString(type) && !strcmp(type->valuestring, "base"))
      rc = sc_fail(err, SC_EUSAGE, "%s: a Base model (tts_model_type base) speaks in a voice cloned from "
                   "reference audio (qwen-tts' generate_voice_clone), which speechc does not do yet; use a "
                   "CustomVoice or VoiceDesign model", path);
  }
  if (!rc) {
    t->info.speakers = (const char *const *)t->names;
    t->info.languages = (const char *const *)t->names + t->info.n_speakers;
  }
  if (!rc && o->tokenizer) {
    rc = tok_load(o->tokenizer, &t->tok, err);
    t->info.has_tokenizer = !rc;
  }
  if (!rc && o->codec) {
    sc_open_opts co = mo;
    if (o->decoder_threads) co.threads = o->decoder_threads;
    sc_codec_info ci;
    rc = sc_model_open(o->codec, &co, &t->cm, err);
    if (!rc) rc = sc_codec_get_info(t->cm, &ci, err);
    if (!rc) {
      t->info.has_codec = 1;
      t->info.sample_rate = ci.sample_rate;
      t->info.samples_per_frame = ci.samples_per_frame;
    }
  }
  if (rc) {
    tts_text_close(t);
    return rc;
  }
  *out = t;
  return SC_OK;
}

void tts_text_close(TtsText *t) {
  if (!t) return;
  sc_model_close(t->m);
  sc_model_close(t->cm);
  tok_free(t->tok);
  pthread_mutex_destroy(&t->tok_mu);
  free(t->names);
  cJSON_Delete(t->config);
  free(t->path);
  free(t);
}

const TtsTextInfo *tts_text_info(const TtsText *t) { return &t->info; }

int tts_stream_open(TtsText *t, TtsStream **out, sc_error *err) {
  *out = NULL;
  TtsStream *s = calloc(1, sizeof *s);
  if (!s) return sc_fail(err, SC_ERUNTIME, "out of memory");
  s->t = t;
  int rc = sc_session_open(t->m, &s->s, err);
  if (!rc && t->cm) rc = sc_session_open(t->cm, &s->cs, err);
  if (rc) {
    tts_stream_close(s);
    return rc;
  }
  *out = s;
  return SC_OK;
}

void tts_stream_close(TtsStream *s) {
  if (!s) return;
  sc_session_close(s->s);
  sc_session_close(s->cs);
  free(s->codes);
  free(s);
}

void tts_stream_idle(TtsStream *s) {
  if (!s) return;
  sc_session_reset(s->s);
  if (s->cs) sc_session_reset(s->cs);
}

const int32_t *tts_stream_codes(const TtsStream *s) { return s->codes; }

int tts_text_ids(TtsText *t, int instruct, const char *what, const char *body, int32_t **ids, int *n,
                 sc_error *err) {
  *ids = NULL;
  *n = 0;
  if (!t->tok)
    return sc_fail(err, SC_EUSAGE, "%s: text needs a tokenizer, and %s was opened without one (hint: the "
                   "checkpoint's directory, or the model.tokenizer/ that speechc build writes beside model.so)",
                   what, t->path);
  const char *prefix = instruct ? INSTRUCT_PREFIX : TEXT_PREFIX, *suffix = instruct ? INSTRUCT_SUFFIX : TEXT_SUFFIX;
  size_t len = strlen(prefix) + strlen(body) + strlen(suffix), k;
  char *s = malloc(len + 1);
  if (!s) return sc_fail(err, SC_ERUNTIME, "out of memory");
  snprintf(s, len + 1, "%s%s%s", prefix, body, suffix);
  pthread_mutex_lock(&t->tok_mu);
  /* the body alone first, so that a bad byte's offset is into the text given */
  int rc = tok_encode(t->tok, body, strlen(body), what, ids, &k, err);
  free(*ids);
  *ids = NULL;
  if (!rc) rc = tok_encode(t->tok, s, len, what, ids, &k, err);
  pthread_mutex_unlock(&t->tok_mu);
  free(s);
  if (rc == SC_EINPUT) rc = err->code = SC_EUSAGE;
  if (!rc && k > INT32_MAX) rc = sc_fail(err, SC_EUSAGE, "%s: too long", what);
  if (rc) {
    free(*ids);
    *ids = NULL;
    return rc;
  }
  *n = (int)k;
  return SC_OK;
}

/* sc_tts_params.on_audio, on the decoder thread: the request's on_pcm. */
static int on_audio(void *user, const int32_t *codes, int g, const float *pcm, int n, int frame) {
  const TtsTextRequest *r = user;
  (void)codes, (void)g;
  return r->on_pcm(r->user, pcm, n, frame);
}

int tts_text_language(const TtsText *t, const char *what, const char *lang, sc_error *err) {
  if (!lang || !strcasecmp(lang, "auto")) return SC_OK;
  for (int i = 0; i < t->info.n_languages; i++)
    if (!strcasecmp(lang, t->info.languages[i])) return SC_OK;
  char names[512];
  size_t n = (size_t)snprintf(names, sizeof names, "auto");
  for (int i = 0; i < t->info.n_languages && n < sizeof names; i++)
    n += (size_t)snprintf(names + n, sizeof names - n, ", %s", t->info.languages[i]);
  return sc_fail(err, SC_EUSAGE, "%s %.64s: unknown; this model knows: %s%s", what, *lang ? lang : "''", names,
                 strstr(lang, "dialect") ? " (a dialect comes with its speaker: give the speaker, with language "
                 "auto or chinese)" : "");
}

/* What both ways of speaking do first: the codes buffer sized, the texts
 * tokenized into p (their ids in *text_ids, *instruct_ids, the caller's
 * to free). */
static int speak_prepare(TtsStream *s, const TtsTextRequest *r, sc_tts_params *p, int32_t **text_ids,
                         int32_t **instruct_ids, sc_error *err) {
  TtsText *t = s->t;
  *p = r->params;
  *text_ids = *instruct_ids = NULL;
  if (r->on_pcm && !s->cs)
    return sc_fail(err, SC_EUSAGE, "%s has no codec decoder to make audio with (hint: build the checkpoint "
                   "directory that holds speech_tokenizer/, which writes model.codec.so beside model.so)", t->path);
  s->max_frames = s->context_frames = 0;
  if (p->max_frames < 1) return sc_fail(err, SC_EUSAGE, "max_frames %d: expected at least 1", p->max_frames);
  int rc = SC_OK;
  if (r->text) {
    rc = tts_text_ids(t, 0, r->text_what ? r->text_what : "text", r->text, text_ids, &p->n_text, err);
    p->text_ids = *text_ids;
  }
  if (t->info.drops_instruct) { /* as qwen-tts' generate_custom_voice */
    p->instruct_ids = NULL;
    p->n_instruct = 0;
  } else if (!rc && r->instruct && *r->instruct) {
    /* an empty instruction is none, as the official generate reads "" */
    rc = tts_text_ids(t, 1, r->instruct_what ? r->instruct_what : "instruct", r->instruct, instruct_ids,
                      &p->n_instruct, err);
    p->instruct_ids = *instruct_ids;
  }
  /* the frames the talker's context holds after this prompt, and the
   * decoder's stream when audio is made */
  int fit = 0;
  if (!rc) rc = sc_tts_context_frames(t->m, p, &fit, err);
  if (rc) return rc;
  sc_model_info mi, ci = {0};
  sc_model_get_info(t->m, &mi);
  const int rows = mi.max_context + 1 - fit; /* when fit > 0 */
  if (r->on_pcm) {
    sc_model_get_info(t->cm, &ci);
    if (ci.max_context < fit) fit = ci.max_context;
  }
  if (fit < 1)
    return sc_fail(err, SC_EUSAGE, "%s: its prompt leaves no room for a frame in the talker's context of %d "
                   "positions (hint: a shorter text, or rebuild with a larger --max-context)",
                   r->text_what ? r->text_what : "text", mi.max_context);
  if (p->max_frames > fit && r->frames_to_context) {
    p->max_frames = fit;
  } else if (p->max_frames > fit && r->on_pcm && ci.max_context == fit) {
    return sc_fail(err, SC_EUSAGE, "max_frames %d: the codec decoder's context holds %d frames (hint: a lower "
                   "max_frames, or rebuild it with a larger --max-context)", p->max_frames, fit);
  } else if (p->max_frames > fit) {
    return sc_fail(err, SC_EUSAGE, "max_frames %d: the prompt's %d rows leave room for %d frames in the "
                   "talker's context of %d positions (hint: a lower max_frames, or rebuild with a larger "
                   "--max-context)", p->max_frames, rows, fit, mi.max_context);
  }
  s->max_frames = p->max_frames;
  s->context_frames = fit;
  if (p->max_frames > s->cap_frames) {
    int32_t *c = realloc(s->codes, (size_t)p->max_frames * t->info.codebooks * sizeof *c);
    if (!c) return sc_fail(err, SC_ERUNTIME, "out of memory for %d frames of codes", p->max_frames);
    s->codes = c;
    s->cap_frames = p->max_frames;
  }
  return r->on_start ? r->on_start(r->user, err) : SC_OK;
}

int tts_stream_limited(const TtsStream *s) {
  return s->max_frames == s->context_frames ? s->context_frames : 0;
}

int tts_text_speak(TtsStream *s, const TtsTextRequest *r, int *n_frames, sc_error *err) {
  sc_tts_params p;
  int32_t *text_ids, *instruct_ids;
  *n_frames = 0;
  int rc = speak_prepare(s, r, &p, &text_ids, &instruct_ids, err);
  p.codec = r->on_pcm ? s->cs : NULL;
  p.on_audio = r->on_pcm ? on_audio : NULL;
  p.audio_user = (void *)r;
  if (!rc) rc = sc_tts_generate(s->s, &p, s->codes, n_frames, r->on_frame, r->user, err);
  free(text_ids);
  free(instruct_ids);
  return rc;
}

/* ---- requests stepped together (TtsSched) ---------------------------------
 * One thread owns the sc_tts_batch: it adds the requests that came in,
 * makes one frame of every running one, and retires those that ended.
 * Each request's own thread waits for its frames and decodes their audio
 * with its stream's codec session, one frame per call, as they come. */

typedef struct SchedJob {
  struct TtsSched *q;
  TtsStream *s;
  sc_tts_params p;
  int made;                /* frames whose codes are in s->codes (under mu) */
  int sched_frames;        /* the batch's count (the scheduler's own) */
  int finished, cancel, rc;
  sc_error err;
  pthread_cond_t cv;       /* made or finished changed */
  struct SchedJob *next;   /* in the queue of requests not yet added */
} SchedJob;

struct TtsSched {
  TtsText *t;
  sc_tts_batch *b;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;       /* a request came in, or quit */
  int quit;
  SchedJob *queue, **queue_end;
  SchedJob **run;          /* in the batch */
  int n_run, cap_run;
};

/* sc_frame_cb, on the scheduler's thread: publish the frame; a request
 * that was cancelled ends here. */
static int sched_on_frame(void *user, const int32_t *codes, int g, int frame) {
  SchedJob *j = user;
  (void)codes, (void)g;
  TtsSched *q = j->q;
  pthread_mutex_lock(&q->mu);
  j->made = frame + 1;
  const int stop = j->cancel;
  pthread_cond_signal(&j->cv);
  pthread_mutex_unlock(&q->mu);
  return stop;
}

/* Under q->mu: j is over, with rc and err. */
static void sched_finish(SchedJob *j, int rc, const sc_error *err) {
  j->rc = rc;
  if (rc && err) j->err = *err;
  j->finished = 1;
  pthread_cond_signal(&j->cv);
}

static void *sched_main(void *arg) {
  TtsSched *q = arg;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->quit && !q->queue && !q->n_run) pthread_cond_wait(&q->cv, &q->mu);
    if (q->quit && !q->queue && !q->n_run) break;
    /* joins: each prompt is prefilled here, on its own session */
    SchedJob *in = q->queue;
    q->queue = NULL;
    q->queue_end = &q->queue;
    pthread_mutex_unlock(&q->mu);
    for (SchedJob *j = in, *next; j; j = next) {
      next = j->next;
      sc_error e = {0};
      int rc = SC_OK;
      if (q->n_run == q->cap_run) {
        const int cap = q->cap_run ? 2 * q->cap_run : 8;
        SchedJob **r = realloc(q->run, (size_t)cap * sizeof *r);
        if (r) q->run = r, q->cap_run = cap;
        else rc = sc_fail(&e, SC_ERUNTIME, "out of memory");
      }
      if (!rc) rc = sc_tts_batch_add(q->b, j->s->s, &j->p, j->s->codes, &j->sched_frames, sched_on_frame, j, &e);
      pthread_mutex_lock(&q->mu);
      if (rc) sched_finish(j, rc, &e);
      else q->run[q->n_run++] = j;
      pthread_mutex_unlock(&q->mu);
    }
    /* one frame of each; a failed call ends the requests it carried */
    sc_error e = {0};
    if (sc_tts_batch_running(q->b)) sc_tts_batch_step(q->b, &e);
    pthread_mutex_lock(&q->mu);
    for (int i = 0; i < q->n_run;) {
      SchedJob *j = q->run[i];
      const int st = sc_tts_batch_status(q->b, j->s->s, &e);
      if (st == SC_TTS_RUNNING && !j->cancel) {
        i++;
        continue;
      }
      sc_tts_batch_remove(q->b, j->s->s);
      sched_finish(j, st == SC_TTS_FAILED ? e.code : SC_OK, &e);
      q->run[i] = q->run[--q->n_run];
    }
  }
  pthread_mutex_unlock(&q->mu);
  return NULL;
}

int tts_sched_open(TtsText *t, TtsSched **out, sc_error *err) {
  *out = NULL;
  TtsSched *q = calloc(1, sizeof *q);
  if (!q) return sc_fail(err, SC_ERUNTIME, "out of memory");
  q->t = t;
  q->queue_end = &q->queue;
  if (sc_tts_batch_new(t->m, &q->b, err)) {
    free(q);
    return err->code;
  }
  pthread_mutex_init(&q->mu, NULL);
  pthread_cond_init(&q->cv, NULL);
  if (pthread_create(&q->thread, NULL, sched_main, q)) {
    sc_tts_batch_free(q->b);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
    return sc_fail(err, SC_ERUNTIME, "cannot start the batch's thread");
  }
  *out = q;
  return SC_OK;
}

void tts_sched_close(TtsSched *q) {
  if (!q) return;
  pthread_mutex_lock(&q->mu);
  q->quit = 1;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  sc_tts_batch_free(q->b);
  pthread_mutex_destroy(&q->mu);
  pthread_cond_destroy(&q->cv);
  free(q->run);
  free(q);
}

int tts_sched_speak(TtsSched *q, TtsStream *s, const TtsTextRequest *r, int *n_frames, sc_error *err) {
  sc_tts_params p;
  int32_t *text_ids, *instruct_ids;
  *n_frames = 0;
  if (s->t != q->t) return sc_fail(err, SC_EUSAGE, "tts_sched_speak: the stream is of another model");
  int rc = speak_prepare(s, r, &p, &text_ids, &instruct_ids, err);
  const int G = s->t->info.codebooks, spf = s->t->info.samples_per_frame;
  float *pcm = !rc && r->on_pcm ? malloc((size_t)spf * sizeof *pcm) : NULL;
  if (!rc && r->on_pcm && !pcm) rc = sc_fail(err, SC_ERUNTIME, "out of memory");
  if (rc) {
    free(text_ids);
    free(instruct_ids);
    return rc;
  }
  if (r->on_pcm) sc_session_reset(s->cs);
  SchedJob j = {.q = q, .s = s, .p = p};
  pthread_cond_init(&j.cv, NULL);
  pthread_mutex_lock(&q->mu);
  *q->queue_end = &j;
  q->queue_end = &j.next;
  pthread_cond_signal(&q->cv);
  int heard = 0, stop = 0;
  for (;;) {
    while (!j.finished && (stop || j.made == heard)) pthread_cond_wait(&j.cv, &q->mu);
    const int made = j.made, finished = j.finished;
    pthread_mutex_unlock(&q->mu);
    /* frames [heard, made) are final: the caller's callbacks, then audio */
    for (; heard < made && !stop; heard++) {
      const int32_t *f = s->codes + (size_t)heard * G;
      if (r->on_frame && r->on_frame(r->user, f, G, heard)) stop = 1; /* as sc_tts_generate: no audio */
      else if (r->on_pcm) {
        if ((rc = sc_codec_decode(s->cs, f, 1, pcm, err))) stop = 1;
        else if (r->on_pcm(r->user, pcm, spf, heard)) stop = 1;
      }
      *n_frames = heard + 1;
    }
    pthread_mutex_lock(&q->mu);
    if (stop) j.cancel = 1;
    if (finished && (stop || heard == made)) break;
  }
  pthread_mutex_unlock(&q->mu);
  if (!rc && j.rc) {
    rc = j.rc;
    *err = j.err;
  }
  if (p.stats) p.stats->frames = *n_frames;
  pthread_cond_destroy(&j.cv);
  free(pcm);
  free(text_ids);
  free(instruct_ids);
  return rc;
}
