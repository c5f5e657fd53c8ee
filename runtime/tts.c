/*
 * tts.c — the Qwen3-TTS driver: the official generation loop of qwen-tts
 * 0.1.1 (Qwen3TTSForConditionalGeneration.generate and the talker's
 * forward), in plain C over the entry points fe_tts.c compiles:
 *
 *   prompt   [P(instruct)] ++ P(role) ++ codec prefix rows ++ first text row
 *   frame t  c0 ~ talker logits (repetition penalty over earlier c0s,
 *            ids [V-1024, V) suppressed except EOS, EOS also suppressed for
 *            the first min_frames codes); stop at EOS;
 *            c1..c_{G-1} from the predictor: prefill [h, E(c0)] then one
 *            step per code, its KV cache restarting at position 0;
 *            next talker input = codec_sum(c) + trailing text row t (or
 *            P(tts_pad) once the text is used up).
 * P(x) = text_projection(text_embedding(x)), E = the talker's codec table.
 *
 * A frame is written once, as a step program (backend.h, frame_program):
 * the talker's step, c0 drawn, the predictor's steps each drawn, the codec
 * sum.  The session's backend runs it: the CPU as a loop of calls and
 * sc_sample draws, CUDA as one graph with one host round trip per frame
 * (only the talker's input row up, the codes and the codec sum down).
 * Every backend gives the codes sc_sample gives.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "backend.h"
#include "model_internal.h"
#include "tts_internal.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

sc_tts_params sc_tts_defaults(void) {
  sc_tts_params p;
  memset(&p, 0, sizeof p);
  p.max_frames = 2048;
  p.min_frames = 2;
  p.talker = sc_sample_defaults();
  p.talker.temperature = 0.9f;
  p.talker.top_k = 50;
  p.talker.top_p = 1.0f;
  p.talker.repetition_penalty = 1.05f;
  p.predictor = sc_sample_defaults();
  p.predictor.temperature = 0.9f;
  p.predictor.top_k = 50;
  p.predictor.top_p = 1.0f;
  return p;
}

/* The key speechc build puts generation_config.json's values under in the
 * embedded config (compiler/build.c, tts_generation_defaults), checked
 * there: booleans, whole numbers and finite numbers in range. */
#define GEN_DEFAULTS_KEY "speechc_generation_defaults"

int sc_tts_model_defaults(const sc_model *m, sc_tts_params *p, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!m || !p) return sc_fail(err, SC_EUSAGE, "sc_tts_model_defaults: no %s", !m ? "model" : "params");
  *p = sc_tts_defaults();
  if (strcmp(m->d->family, "qwen3_tts"))
    return sc_fail(err, SC_EUSAGE, "%s is a %s model, not a Qwen3-TTS model", m->path, m->d->family);
  cJSON *j = cJSON_Parse(m->d->config_json);
  if (!j) return sc_fail(err, SC_EINPUT, "%s: the embedded config is not valid JSON", m->path);
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, GEN_DEFAULTS_KEY), *v;
#define GEN(key) ((v = cJSON_GetObjectItemCaseSensitive(g, key)) != NULL)
  if (GEN("do_sample")) p->talker.greedy = cJSON_IsFalse(v);
  if (GEN("top_k")) p->talker.top_k = v->valueint;
  if (GEN("top_p")) p->talker.top_p = (float)v->valuedouble;
  if (GEN("temperature")) p->talker.temperature = (float)v->valuedouble;
  if (GEN("repetition_penalty")) p->talker.repetition_penalty = (float)v->valuedouble;
  if (GEN("subtalker_dosample")) p->predictor.greedy = cJSON_IsFalse(v);
  if (GEN("subtalker_top_k")) p->predictor.top_k = v->valueint;
  if (GEN("subtalker_top_p")) p->predictor.top_p = (float)v->valuedouble;
  if (GEN("subtalker_temperature")) p->predictor.temperature = (float)v->valuedouble;
  if (GEN("max_new_tokens")) p->max_frames = v->valueint;
#undef GEN
  cJSON_Delete(j);
  return SC_OK;
}

static int get_int(const cJSON *obj, const char *where, const char *key, int *out, sc_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsNumber(v))
    return sc_fail(err, SC_EINPUT, "model config: %s.%s is missing or not a number", where, key);
  *out = v->valueint;
  return SC_OK;
}

/* spk_id values may be an int or a one-element list */
static int id_value(const cJSON *v, int *out) {
  if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1) v = cJSON_GetArrayItem(v, 0);
  if (!cJSON_IsNumber(v)) return 0;
  *out = v->valueint;
  return 1;
}

static void list_keys(const cJSON *obj, char *out, size_t size) {
  size_t len = 0;
  out[0] = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, obj) {
    if (!it->string) continue; /* not an object: fe_tts refuses such configs at build */
    int n = snprintf(out + len, size - len, "%s%s", len ? ", " : "", it->string);
    if (n < 0 || (size_t)n >= size - len) break;
    len += (size_t)n;
  }
}

/* lower-case copy for the official `.lower()` lookups */
static void lower(const char *in, char *out, size_t size) {
  size_t k = 0;
  for (; in && in[k] && k + 1 < size; k++) out[k] = (char)(in[k] >= 'A' && in[k] <= 'Z' ? in[k] + 32 : in[k]);
  out[k] = 0;
}

int tts_config(const sc_model *m, TtsConfig *c, sc_error *err) {
  memset(c, 0, sizeof *c);
  if (strcmp(m->d->family, "qwen3_tts"))
    return sc_fail(err, SC_EUSAGE, "%s is a %s model, not a Qwen3-TTS model", m->path, m->d->family);
  c->json = cJSON_Parse(m->d->config_json);
  if (!c->json) return sc_fail(err, SC_EINPUT, "%s: the embedded config is not valid JSON", m->path);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(c->json, "talker_config");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(t, "code_predictor_config");
  c->talker = t;
  if (get_int(c->json, "config", "tts_pad_token_id", &c->tts_pad, err) ||
      get_int(c->json, "config", "tts_bos_token_id", &c->tts_bos, err) ||
      get_int(c->json, "config", "tts_eos_token_id", &c->tts_eos, err) ||
      get_int(t, "talker_config", "codec_pad_id", &c->codec_pad, err) ||
      get_int(t, "talker_config", "codec_bos_id", &c->codec_bos, err) ||
      get_int(t, "talker_config", "codec_eos_token_id", &c->codec_eos, err) ||
      get_int(t, "talker_config", "codec_think_id", &c->think, err) ||
      get_int(t, "talker_config", "codec_nothink_id", &c->nothink, err) ||
      get_int(t, "talker_config", "codec_think_bos_id", &c->think_bos, err) ||
      get_int(t, "talker_config", "codec_think_eos_id", &c->think_eos, err) ||
      get_int(t, "talker_config", "vocab_size", &c->vocab, err) ||
      get_int(t, "talker_config", "text_vocab_size", &c->text_vocab, err) ||
      get_int(t, "talker_config", "num_code_groups", &c->groups, err) ||
      get_int(t, "talker_config", "hidden_size", &c->hidden, err) ||
      get_int(p, "code_predictor_config", "vocab_size", &c->pvocab, err)) {
    tts_config_free(c);
    return err->code;
  }
  const char *need[] = {"text_embed", "codec_embed", "codec_sum", "talker_prefill", "talker_decode",
                        "predictor_prefill", "predictor_decode"};
  const sc_entry **slot[] = {&c->text_embed, &c->codec_embed, &c->codec_sum, &c->talker_prefill,
                             &c->talker_decode, &c->pred_prefill, &c->pred_decode};
  for (int i = 0; i < 7; i++)
    if (!(*slot[i] = rt_entry(m, need[i]))) {
      tts_config_free(c);
      return sc_fail(err, SC_EINPUT, "%s: entry point '%s' is missing (hint: rebuild)", m->path, need[i]);
    }
  return SC_OK;
}

void tts_config_free(TtsConfig *c) {
  cJSON_Delete(c->json);
  c->json = NULL;
}

int tts_suppress(const TtsConfig *c, int32_t *out) {
  int n = 0;
  for (int id = c->vocab - 1024 > 0 ? c->vocab - 1024 : 0; id < c->vocab; id++)
    if (id != c->codec_eos) out[n++] = id;
  out[n] = c->codec_eos;
  return n;
}

int sc_tts_codebooks(const sc_model *m) {
  TtsConfig c;
  sc_error err;
  if (!m || tts_config(m, &c, &err)) return 0;
  tts_config_free(&c);
  return c.groups;
}

/* Rows of an embedding entry (text_embed or codec_embed) for n ids, in
 * chunks of its max_tokens. */
static int embed_rows(sc_session *s, const sc_entry *e, const int32_t *ids, int n, float *out,
                      sc_error *err) {
  for (int done = 0; done < n;) {
    int k = n - done < e->max_tokens ? n - done : e->max_tokens;
    sc_io io = {.ids = ids + rt_ids_len(e, done), .n = k, .out = out + rt_out_len(e, done)};
    if (rt_call(s, e, &io, err)) return err->code;
    done += k;
  }
  return SC_OK;
}

static void add_rows(float *y, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static int check_ids(const int32_t *ids, int n, int vocab, const char *what, sc_error *err) {
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab)
      return sc_fail(err, SC_EUSAGE, "%s: token %d (index %d) is outside the text vocabulary [0, %d)",
                     what, ids[i], i, vocab);
  return SC_OK;
}

/* The prompt's codec ids (think, language, speaker, pad, bos) into
 * codec[8], *nc of them, after the checks of p's ids, speaker and language
 * that the official generate makes. */
static int prompt_codec(const TtsConfig *c, const sc_tts_params *p, int32_t codec[8], int *nc_out,
                        sc_error *err) {
  if (p->n_text < 9 || !p->text_ids)
    return sc_fail(err, SC_EUSAGE, "text ids: %d tokens%s; expected the ids of '<|im_start|>assistant\\n"
                   "{text}<|im_end|>\\n<|im_start|>assistant\\n' (3 + at least 1 + 5)", p->n_text,
                   p->text_ids ? "" : " at NULL");
  if (p->instruct_ids && p->n_instruct < 0)
    return sc_fail(err, SC_EUSAGE, "instruct ids: n_instruct %d; expected 0 or more", p->n_instruct);
  if (check_ids(p->text_ids, p->n_text, c->text_vocab, "text ids", err)) return err->code;
  if (p->instruct_ids && check_ids(p->instruct_ids, p->n_instruct, c->text_vocab, "instruct ids", err))
    return err->code;

  /* language and speaker, as the official generate resolves them */
  char lang[64], spk[64];
  lower(p->language && *p->language ? p->language : "auto", lang, sizeof lang);
  lower(p->speaker ? p->speaker : "", spk, sizeof spk);
  const cJSON *langs = cJSON_GetObjectItemCaseSensitive(c->talker, "codec_language_id");
  int lang_id = -1, spk_code = -1;
  char names[512];
  if (strcmp(lang, "auto")) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(langs, lang);
    if (!cJSON_IsNumber(v)) {
      list_keys(langs, names, sizeof names);
      return sc_fail(err, SC_EUSAGE, "--language %s: unknown; this model knows: auto, %s", p->language, names);
    }
    lang_id = v->valueint;
  }
  if (spk[0]) {
    const cJSON *spks = cJSON_GetObjectItemCaseSensitive(c->talker, "spk_id");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(spks, spk);
    if (!v || !id_value(v, &spk_code)) {
      list_keys(spks, names, sizeof names);
      return sc_fail(err, SC_EUSAGE, "--speaker %s: unknown; this model knows: %s", p->speaker,
                     names[0] ? names : "(no speakers: it is not a custom-voice model)");
    }
    if (spk_code < 0 || spk_code >= c->vocab)
      return sc_fail(err, SC_EINPUT, "model config: spk_id[%s] = %d is outside the codec vocabulary", spk, spk_code);
    const cJSON *dia = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(c->talker, "spk_is_dialect"), spk);
    if ((!strcmp(lang, "chinese") || !strcmp(lang, "auto")) && cJSON_IsString(dia)) {
      const cJSON *v2 = cJSON_GetObjectItemCaseSensitive(langs, dia->valuestring);
      if (!cJSON_IsNumber(v2))
        return sc_fail(err, SC_EINPUT, "model config: dialect '%s' of speaker %s has no codec_language_id",
                       dia->valuestring, spk);
      lang_id = v2->valueint;
    }
  }

  int nc = 0;
  if (lang_id < 0) {
    codec[nc++] = c->nothink, codec[nc++] = c->think_bos, codec[nc++] = c->think_eos;
  } else {
    codec[nc++] = c->think, codec[nc++] = c->think_bos, codec[nc++] = lang_id, codec[nc++] = c->think_eos;
  }
  if (spk_code >= 0) codec[nc++] = spk_code;
  codec[nc++] = c->codec_pad;
  codec[nc++] = c->codec_bos;
  *nc_out = nc;
  return SC_OK;
}

/* The prompt's rows for nc codec ids: the instruction, the role's 3, the
 * codec ids but bos over the text's first token (non-streaming: all of
 * it, its eos and bos's row). */
static int prompt_rows(const sc_tts_params *p, int nc) {
  const int n_txt = p->n_text - 8; /* ids[3:-5] */
  return (p->instruct_ids ? p->n_instruct : 0) + 3 + (nc - 1) + (p->non_streaming ? n_txt + 2 : 1);
}

/* The code predictor steps its G codes a frame at positions [0, G) of
 * the same context: a shorter one can make no frame at all. */
static int predictor_room(const sc_model *m, const TtsConfig *c, sc_error *err) {
  if (m->d->max_context >= c->groups) return SC_OK;
  return sc_fail(err, SC_EUSAGE, "max_context %d is less than the %d positions the code predictor steps each frame "
                 "(hint: rebuild with --max-context %d or more)", m->d->max_context, c->groups, c->groups);
}

int sc_tts_context_frames(const sc_model *m, const sc_tts_params *p, int *frames, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!m || !p || !frames)
    return sc_fail(err, SC_EUSAGE, "sc_tts_context_frames: no %s", !m ? "model" : !p ? "params" : "frames");
  *frames = 0;
  TtsConfig c;
  if (tts_config(m, &c, err)) return err->code;
  int32_t codec[8];
  int nc = 0, rc = predictor_room(m, &c, err);
  if (!rc) rc = prompt_codec(&c, p, codec, &nc, err);
  tts_config_free(&c);
  if (rc) return rc;
  /* the prompt fills positions [0, rows); frame 0 comes from it, and
   * frame t >= 1 steps the talker at position rows + t - 1 */
  const long fit = (long)m->d->max_context - prompt_rows(p, nc) + 1;
  *frames = fit > 0 ? (fit < INT32_MAX ? (int)fit : INT32_MAX) : 0;
  return SC_OK;
}

int tts_build_prompt(sc_session *s, const TtsConfig *c, const sc_tts_params *p, TtsPrompt *out,
                     sc_error *err) {
  memset(out, 0, sizeof *out);
  const int H = c->hidden;
  int32_t codec[8];
  int nc = 0;
  if (predictor_room(s->m, c, err) || prompt_codec(c, p, codec, &nc, err)) return err->code;
  const int32_t *text = p->text_ids + 3;
  const int n_txt = p->n_text - 8;  /* ids[3:-5] */
  int rows = prompt_rows(p, nc);
  int trail = p->non_streaming ? 1 : n_txt;  /* text[1:] ++ eos */
  out->prompt = calloc((size_t)rows * H, sizeof(float));
  out->trailing = calloc((size_t)trail * H, sizeof(float));
  out->pad = calloc((size_t)3 * H, sizeof(float));
  float *tmp = calloc((size_t)(nc + 1) * H, sizeof(float));
  if (!out->prompt || !out->trailing || !out->pad || !tmp) {
    free(tmp);
    tts_prompt_free(out);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  float *bos_e = out->pad + H, *eos_e = out->pad + 2 * H; /* P(tts_bos), P(tts_eos); pad first */
  int32_t specials[3] = {c->tts_pad, c->tts_bos, c->tts_eos};
  int rc = embed_rows(s, c->text_embed, specials, 3, out->pad, err);
  int r = 0;
  if (!rc && p->instruct_ids) {
    rc = embed_rows(s, c->text_embed, p->instruct_ids, p->n_instruct, out->prompt, err);
    r += p->n_instruct;
  }
  if (!rc) rc = embed_rows(s, c->text_embed, p->text_ids, 3, out->prompt + (size_t)r * H, err);
  r += 3;
  if (!rc) rc = embed_rows(s, c->codec_embed, codec, nc, tmp, err);
  if (!rc) {
    /* codec prefix: E(C[i]) + P(pad) ..., then E(codec_pad) + P(bos) */
    for (int i = 0; i < nc - 1; i++, r++) {
      float *row = out->prompt + (size_t)r * H;
      memcpy(row, i < nc - 2 ? out->pad : bos_e, (size_t)H * sizeof(float));
      add_rows(row, tmp + (size_t)i * H, (size_t)H);
    }
    const float *e_bos = tmp + (size_t)(nc - 1) * H, *e_pad = tmp + (size_t)(nc - 2) * H;
    if (!p->non_streaming) {
      float *row = out->prompt + (size_t)r * H;
      rc = embed_rows(s, c->text_embed, text, 1, row, err);
      add_rows(row, e_bos, (size_t)H);
      r++;
      if (!rc && n_txt > 1) rc = embed_rows(s, c->text_embed, text + 1, n_txt - 1, out->trailing, err);
      memcpy(out->trailing + (size_t)(n_txt - 1) * H, eos_e, (size_t)H * sizeof(float));
    } else {
      rc = embed_rows(s, c->text_embed, text, n_txt, out->prompt + (size_t)r * H, err);
      memcpy(out->prompt + (size_t)(r + n_txt) * H, eos_e, (size_t)H * sizeof(float));
      for (int i = 0; i <= n_txt; i++) add_rows(out->prompt + (size_t)(r + i) * H, e_pad, (size_t)H);
      r += n_txt + 1;
      float *row = out->prompt + (size_t)r * H;
      memcpy(row, out->pad, (size_t)H * sizeof(float));
      add_rows(row, e_bos, (size_t)H);
      r++;
      memcpy(out->trailing, out->pad, (size_t)H * sizeof(float));
    }
  }
  free(tmp);
  if (rc) {
    tts_prompt_free(out);
    return rc;
  }
  out->rows = r;
  out->trail = trail;
  return SC_OK;
}

void tts_prompt_free(TtsPrompt *p) {
  free(p->prompt);
  free(p->trailing);
  free(p->pad);
  memset(p, 0, sizeof *p);
}

int tts_talker(sc_session *s, const TtsConfig *c, const float *embeds, int n, float *logits,
               float *hidden, sc_error *err) {
  const sc_entry *e = n == 1 ? c->talker_decode : c->talker_prefill;
  for (int done = 0; done < n;) {
    int k = n - done < e->max_tokens ? n - done : e->max_tokens;
    if (s->pos + k > s->m->d->max_context)
      return sc_fail(err, SC_ERUNTIME, "context full: talker position %d + %d exceeds max_context %d "
                     "(hint: rebuild with a larger --max-context, or lower --max-frames)",
                     s->pos, k, s->m->d->max_context);
    sc_io io = {.embeds = embeds + (size_t)done * c->hidden, .n = k, .pos = s->pos, .out = logits,
                .hidden_out = hidden};
    if (rt_call(s, e, &io, err)) return err->code;
    s->pos += k;
    done += k;
  }
  return SC_OK;
}

int tts_predictor_step(sc_session *s, const TtsConfig *c, int step, const float *hc0, int32_t code,
                       float *logits, sc_error *err) {
  if (step == 0) {
    sc_io io = {.embeds = hc0, .n = 2, .pos = 0, .step = 0, .out = logits};
    return rt_call(s, c->pred_prefill, &io, err);
  }
  sc_io io = {.ids = &code, .n = 1, .pos = step + 1, .step = step, .out = logits};
  return rt_call(s, c->pred_decode, &io, err);
}

/* A step of a frame program with nothing wired: no ids, rows or outputs, no draw. */
static sc_step call_step(const sc_entry *e, int n, int pos, int step) {
  const sc_step_ref none = {SC_NONE, 0};
  return (sc_step){.entry = e, .n = n, .pos = pos, .step = step, .ids = SC_NONE, .embeds = none, .out = none,
                   .hidden = none, .sample = SC_NONE, .token = SC_NONE, .stop = SC_NONE};
}

/* The buffers of a frame program (TtsFrame.bufs). */
enum { FB_X, FB_TLOGITS, FB_HC0, FB_PLOGITS, FB_SUM, FB_COUNT };

typedef struct TtsFrame {
  sc_step *steps;             /* [G + 2] */
  sc_step_buf bufs[FB_COUNT];
  sc_step_sampler smp[2];     /* the talker's, the predictor's */
  sc_step_prog prog;
} TtsFrame;

/* Frame t as a step program: the talker's step on x (for t = 0 the
 * prompt's, whose logits and hidden h the caller left in tlogits and
 * hc0[0:H]) with c0 drawn from its logits (suppression, the penalty over
 * hist[0..t)), the predictor's prefill on [h; E(c0)] and its G-2 decode
 * steps, each drawing the next code, and the codec sum of the frame's
 * codes into x.  The codes land in codes[0..G). */
static void frame_program(TtsFrame *fr, const TtsConfig *c, int t, int pos, float *x, float *tlogits, float *hc0,
                          float *plogits, int32_t *codes, sc_sampler *ts, const int32_t *hist,
                          const int32_t *suppress, int n_suppress, sc_sampler *ps) {
  const int H = c->hidden, G = c->groups;
  fr->bufs[FB_X] = (sc_step_buf){x, t ? H : 0, SC_BUF_IN};
  fr->bufs[FB_TLOGITS] = (sc_step_buf){tlogits, c->vocab, t ? SC_BUF_TMP : SC_BUF_IN};
  fr->bufs[FB_HC0] = (sc_step_buf){hc0, 2 * H, t ? SC_BUF_TMP : SC_BUF_IN};
  fr->bufs[FB_PLOGITS] = (sc_step_buf){plogits, c->pvocab, SC_BUF_TMP};
  fr->bufs[FB_SUM] = (sc_step_buf){x, H, SC_BUF_OUT};
  fr->smp[0] = (sc_step_sampler){ts, "talker sampler", hist, t, suppress, n_suppress};
  fr->smp[1] = (sc_step_sampler){ps, "predictor sampler", NULL, 0, NULL, 0};
  sc_step *st = fr->steps;
  int k = 0;
  st[k] = call_step(t ? c->talker_decode : NULL, 1, pos, 0);
  if (t) {
    st[k].embeds = (sc_step_ref){FB_X, 0};
    st[k].hidden = (sc_step_ref){FB_HC0, 0};
  }
  st[k].out = (sc_step_ref){FB_TLOGITS, 0};
  st[k].sample = 0, st[k].vocab = c->vocab, st[k].token = 0, st[k].stop = c->codec_eos;
  const int mark = k++;
  st[k] = call_step(c->codec_embed, 1, 0, 0); /* E(c0) */
  st[k].ids = 0;
  st[k++].out = (sc_step_ref){FB_HC0, H};
  for (int j = 0; j < G - 1; j++, k++) {
    st[k] = j ? call_step(c->pred_decode, 1, j + 1, j) : call_step(c->pred_prefill, 2, 0, 0);
    if (j) st[k].ids = j;
    else st[k].embeds = (sc_step_ref){FB_HC0, 0};
    st[k].out = (sc_step_ref){FB_PLOGITS, 0};
    st[k].sample = 1, st[k].vocab = c->pvocab, st[k].token = j + 1;
  }
  st[k] = call_step(c->codec_sum, G, 0, 0);
  st[k].ids = 0;
  st[k++].out = (sc_step_ref){FB_SUM, 0};
  fr->prog = (sc_step_prog){.steps = st, .n_steps = k, .bufs = fr->bufs, .n_bufs = FB_COUNT, .samplers = fr->smp,
                            .n_samplers = 2, .tokens = codes, .n_tokens = G, .mark = mark};
}

int sc_tts_generate(sc_session *s, const sc_tts_params *p, int32_t *codes, int *n_frames,
                    sc_frame_cb on_frame, void *user, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  const double start = now();
  sc_tts_stats st = {0};
  if (!s || !p || !codes || !n_frames)
    return sc_fail(err, SC_EUSAGE, "sc_tts_generate: no %s", !s ? "session" : !p ? "params" : !codes ? "codes buffer"
                   : "n_frames");
  *n_frames = 0;
  if (p->max_frames < 1) return sc_fail(err, SC_EUSAGE, "--max-frames must be >= 1, got %d", p->max_frames);
  if (p->min_frames < 0) return sc_fail(err, SC_EUSAGE, "min_frames must be >= 0, got %d", p->min_frames);
  TtsConfig c;
  if (tts_config(s->m, &c, err)) return err->code;
  const int H = c.hidden, G = c.groups, V = c.vocab;
  sc_sampler *ts = NULL, *ps = NULL;
  TtsPrompt pr = {0};
  float *logits = malloc((size_t)V * sizeof(float)), *h = malloc((size_t)H * sizeof(float));
  float *x = malloc((size_t)H * sizeof(float)), *hc0 = calloc((size_t)2 * H, sizeof(float));
  float *plogits = malloc((size_t)c.pvocab * sizeof(float));
  sc_step *steps = malloc((size_t)(G + 2) * sizeof *steps);
  TtsFrame fr;
  int32_t *hist = malloc(((size_t)p->max_frames + 1) * sizeof(int32_t));
  int32_t *suppress = malloc((size_t)1025 * sizeof(int32_t));
  TtsAudio *audio = NULL;   /* with p->codec */
  int rc = SC_OK;
  if (!logits || !h || !x || !hc0 || !plogits || !steps || !hist || !suppress) {
    rc = sc_fail(err, SC_ERUNTIME, "out of memory");
    goto done;
  }
  if ((rc = sc_sampler_new(&p->talker, &ts, err))) goto done;
  sc_sample_params pp = p->predictor;
  pp.seed ^= 0x9e3779b97f4a7c15ull; /* its own stream, still fixed by the seed */
  if ((rc = sc_sampler_new(&pp, &ps, err))) goto done;
  const int n_sup = tts_suppress(&c, suppress);

  sc_session_reset(s);
  double t0 = start, t1;
  if (p->codec && (rc = tts_audio_start(p->codec, p, s, codes, G, start, &audio, err))) goto done;
  if ((rc = tts_build_prompt(s, &c, p, &pr, err))) goto done;
  if ((rc = tts_talker(s, &c, pr.prompt, pr.rows, logits, h, err))) goto done;
  st.prompt_rows = pr.rows;
  st.prompt_s = now() - t0;
  memcpy(hc0, h, (size_t)H * sizeof(float));
  fr.steps = steps;
  for (int t = 0; t < p->max_frames; t++) {
    /* frame t: the talker's step t (but for t = 0: the prompt's), c0 and
     * the predictor's codes, run as one program by the backend */
    int32_t *f = codes + (size_t)t * G;
    if (audio && tts_audio_next(audio)) break; /* its error, if any, is returned below */
    t0 = now();
    if (t && s->pos + 1 > s->m->d->max_context) {
      rc = sc_fail(err, SC_ERUNTIME, "context full: talker position %d + 1 exceeds max_context %d (hint: rebuild "
                   "with a larger --max-context, or lower --max-frames)", s->pos, s->m->d->max_context);
      goto done;
    }
    frame_program(&fr, &c, t, s->pos, x, logits, hc0, plogits, f, ts, hist, suppress, n_sup + (t < p->min_frames),
                  ps);
    if ((rc = rt_run_steps(s, &fr.prog, err))) goto done;
    if (t) s->pos++;
    t1 = now();
    /* a backend that ran the program step by step timed the talker's half */
    st.talker_s += fr.prog.mark_s ? fr.prog.mark_s - t0 : 0;
    st.predictor_s += t1 - (fr.prog.mark_s ? fr.prog.mark_s : t0);
    if (f[0] == c.codec_eos) break;
    hist[t] = f[0];
    *n_frames = st.frames = t + 1;
    /* a frame on_frame stops at is still decoded: the codes and the audio
     * end at the same frame */
    const int stop = on_frame && on_frame(user, f, G, t);
    if (audio && tts_audio_push(audio, t)) break; /* decoded now, or queued for the decoder thread */
    if (stop) break;
    /* next talker input: the codec sum plus text row t */
    add_rows(x, t < pr.trail ? pr.trailing + (size_t)t * H : pr.pad, (size_t)H);
  }
done:
  /* the frames queued are still decoded; the generator's error comes first */
  if (tts_audio_finish(audio, &st, rc ? NULL : err)) rc = rc ? rc : err->code;
  st.wall_s = now() - start;
  if (p->stats) *p->stats = st;
  sc_sampler_free(ts);
  sc_sampler_free(ps);
  tts_prompt_free(&pr);
  tts_config_free(&c);
  free(logits);
  free(h);
  free(x);
  free(hc0);
  free(plogits);
  free(steps);
  free(hist);
  free(suppress);
  return rc;
}
