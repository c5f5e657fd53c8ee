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
 * pointers into the parsed config, appended to t->names. */
static int config_names(TtsText *t, const char *key, int *n, sc_error *err) {
  const cJSON *tc = cJSON_GetObjectItemCaseSensitive(t->config, "talker_config");
  const cJSON *obj = cJSON_GetObjectItemCaseSensitive(tc, key), *e;
  int have = t->info.n_speakers + t->info.n_languages, k = 0;
  cJSON_ArrayForEach(e, obj) k++;
  char **g = realloc(t->names, (size_t)(have + k + 1) * sizeof *g);
  if (!g) return sc_fail(err, SC_ERUNTIME, "out of memory");
  t->names = g;
  k = 0;
  cJSON_ArrayForEach(e, obj) if (e->string) g[have + k++] = e->string;
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
  if (!rc) rc = config_names(t, "spk_id", &t->info.n_speakers, err);
  if (!rc) rc = config_names(t, "codec_language_id", &t->info.n_languages, err);
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

int tts_text_speak(TtsStream *s, const TtsTextRequest *r, int *n_frames, sc_error *err) {
  TtsText *t = s->t;
  sc_tts_params p = r->params;
  *n_frames = 0;
  if (r->on_pcm && !s->cs)
    return sc_fail(err, SC_EUSAGE, "%s has no codec decoder to make audio with (hint: build the checkpoint "
                   "directory that holds speech_tokenizer/, which writes model.codec.so beside model.so)", t->path);
  if (p.max_frames < 1) return sc_fail(err, SC_EUSAGE, "max_frames %d: expected at least 1", p.max_frames);
  if (p.max_frames > s->cap_frames) {
    int32_t *c = realloc(s->codes, (size_t)p.max_frames * t->info.codebooks * sizeof *c);
    if (!c) return sc_fail(err, SC_ERUNTIME, "out of memory for %d frames of codes", p.max_frames);
    s->codes = c;
    s->cap_frames = p.max_frames;
  }
  int32_t *text_ids = NULL, *instruct_ids = NULL;
  int rc = SC_OK;
  if (r->text) {
    rc = tts_text_ids(t, 0, r->text_what ? r->text_what : "text", r->text, &text_ids, &p.n_text, err);
    p.text_ids = text_ids;
  }
  if (!rc && r->instruct) {
    rc = tts_text_ids(t, 1, r->instruct_what ? r->instruct_what : "instruct", r->instruct, &instruct_ids,
                      &p.n_instruct, err);
    p.instruct_ids = instruct_ids;
  }
  p.codec = r->on_pcm ? s->cs : NULL;
  p.on_audio = r->on_pcm ? on_audio : NULL;
  p.audio_user = (void *)r;
  if (!rc) rc = sc_tts_generate(s->s, &p, s->codes, n_frames, r->on_frame, r->user, err);
  free(text_ids);
  free(instruct_ids);
  return rc;
}
