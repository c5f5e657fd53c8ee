/*
 * serve_request.c — POST /v1/audio/speech bodies to requests
 * (serve_request.h).  Every refusal names the field; nothing here reads
 * or writes anything but its arguments.
 */
#include "serve_request.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "json.h"

#define SEED_MAX 9007199254740992.0 /* 2^53: every integer up to it is exact in a double */

/* The fields, each once; the order of OpenAI's reference, then ours. */
#define FIELDS(X)                                                                           \
  X(model) X(input) X(voice) X(response_format) X(speed) X(instructions) X(instruct)       \
  X(language) X(stream) X(stream_format) X(seed) X(temperature) X(top_k) X(top_p) X(repetition_penalty)     \
  X(sub_temperature) X(sub_top_k) X(sub_top_p) X(greedy) X(max_frames)
#define NAME(f) #f,
static const char *const field_names[] = {FIELDS(NAME)};
#undef NAME
#define N_FIELDS ((int)(sizeof field_names / sizeof *field_names))

/* "a, b, c" of names into buf (cut with "..." when it does not fit). */
static void list_names(const char *const *names, int n, char *buf, size_t cap) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < n && at < cap; i++) {
    int k = snprintf(buf + at, cap - at, "%s%s", i ? ", " : "", names[i]);
    if (k < 0 || (size_t)k >= cap - at) {
      if (cap > 4) strcpy(buf + cap - 4, "...");
      return;
    }
    at += (size_t)k;
  }
}

static const char *type_name(const cJSON *v) {
  return cJSON_IsString(v) ? "a string" : cJSON_IsNumber(v) ? "a number" : cJSON_IsBool(v) ? "a boolean"
         : cJSON_IsNull(v) ? "null" : cJSON_IsArray(v) ? "an array" : "an object";
}

/* A string field: *out malloc'd, or NULL when absent. */
static int get_string(const cJSON *v, const char *name, char **out, sc_error *err) {
  *out = NULL;
  if (!v) return SC_OK;
  if (!cJSON_IsString(v) || !v->valuestring)
    return sc_fail(err, SC_EUSAGE, "%s: expected a string, got %s", name, type_name(v));
  if (!(*out = strdup(v->valuestring))) return sc_fail(err, SC_ERUNTIME, "out of memory");
  return SC_OK;
}

static int get_number(const cJSON *v, const char *name, double lo, double hi, double *out, sc_error *err) {
  if (!v) return SC_OK;
  if (!cJSON_IsNumber(v)) return sc_fail(err, SC_EUSAGE, "%s: expected a number, got %s", name, type_name(v));
  if (!(v->valuedouble >= lo && v->valuedouble <= hi))
    return sc_fail(err, SC_EUSAGE, "%s: %g is outside [%g, %g]", name, v->valuedouble, lo, hi);
  *out = v->valuedouble;
  return SC_OK;
}

static int get_float(const cJSON *v, const char *name, double lo, double hi, float *out, sc_error *err) {
  double d = *out;
  if (get_number(v, name, lo, hi, &d, err)) return err->code;
  *out = (float)d;
  return SC_OK;
}

static int get_integer(const cJSON *v, const char *name, double lo, double hi, double *out, sc_error *err) {
  double d = *out;
  if (get_number(v, name, lo, hi, &d, err)) return err->code;
  if (d != floor(d)) return sc_fail(err, SC_EUSAGE, "%s: expected an integer, got %g", name, d);
  *out = d;
  return SC_OK;
}

static int get_int(const cJSON *v, const char *name, int lo, int hi, int *out, sc_error *err) {
  double d = *out;
  if (get_integer(v, name, lo, hi, &d, err)) return err->code;
  *out = (int)d;
  return SC_OK;
}

static int get_bool(const cJSON *v, const char *name, int *out, sc_error *err) {
  if (!v) return SC_OK;
  if (!cJSON_IsBool(v)) return sc_fail(err, SC_EUSAGE, "%s: expected true or false, got %s", name, type_name(v));
  *out = cJSON_IsTrue(v);
  return SC_OK;
}

/* *name must be one of names[n] (case-insensitive; NULL list: any); it is
 * replaced by the list's spelling. */
static int one_of(char **name, const char *field, const char *const *names, int n, const char *extra,
                  sc_error *err) {
  if (!*name || !names) return SC_OK;
  if (extra && !strcasecmp(*name, extra)) return SC_OK;
  for (int i = 0; i < n; i++)
    if (!strcasecmp(*name, names[i])) {
      char *s = strdup(names[i]);
      if (!s) return sc_fail(err, SC_ERUNTIME, "out of memory");
      free(*name);
      *name = s;
      return SC_OK;
    }
  char list[700];
  list_names(names, n, list, sizeof list);
  return sc_fail(err, SC_EUSAGE, "%s: '%.100s' is not one of this model's: %s%s%s", field, *name,
                 extra ? extra : "", extra && n ? ", " : "", n ? list : extra ? "" : "(none)");
}

/* The checks of every field of the object j, into r. */
static int read_fields(const cJSON *j, const ServeLimits *lim, ServeRequest *r, sc_error *err) {
  const cJSON *f[N_FIELDS] = {0}, *e;
  cJSON_ArrayForEach(e, j) {
    int k = 0;
    while (k < N_FIELDS && strcmp(e->string, field_names[k])) k++;
    if (k == N_FIELDS) {
      char list[700];
      list_names(field_names, N_FIELDS, list, sizeof list);
      return sc_fail(err, SC_EUSAGE, "unknown field '%.100s' (fields: %s)", e->string, list);
    }
    f[k] = cJSON_IsNull(e) ? NULL : e; /* null: the default, as OpenAI's clients send it */
  }
  enum {
#define ENUM(x) F_##x,
    FIELDS(ENUM)
#undef ENUM
  };
  sc_tts_params *p = &r->params;
  char *format = NULL, *instructions = NULL, *stream_format = NULL;
  double speed = 1.0, seed = 0;
  int greedy = -1, rc; /* -1: not given, the model's default */
  if ((rc = get_string(f[F_model], "model", &r->model, err)) ||
      (rc = get_string(f[F_input], "input", &r->input, err)) ||
      (rc = get_string(f[F_voice], "voice", &r->voice, err)) ||
      (rc = get_string(f[F_language], "language", &r->language, err)) ||
      (rc = get_string(f[F_instruct], "instruct", &r->instruct, err)) ||
      (rc = get_string(f[F_instructions], "instructions", &instructions, err)) ||
      (rc = get_string(f[F_response_format], "response_format", &format, err)) ||
      (rc = get_string(f[F_stream_format], "stream_format", &stream_format, err)))
    goto out;
  r->sse = stream_format && !strcmp(stream_format, "sse");
  if (stream_format && !r->sse && strcmp(stream_format, "audio")) {
    rc = sc_fail(err, SC_EUSAGE, "stream_format: '%.40s' is not supported; expected \"audio\" (the audio itself; "
                 "with \"stream\": true as it is made) or \"sse\" (server-sent events)", stream_format);
    goto out;
  }
  if (!r->input) {
    rc = sc_fail(err, SC_EUSAGE, "input: missing (the text to speak)");
    goto out;
  }
  if (!r->input[0]) {
    rc = sc_fail(err, SC_EUSAGE, "input: empty (the text to speak)");
    goto out;
  }
  if (instructions && r->instruct) {
    rc = sc_fail(err, SC_EUSAGE, "instructions and instruct: give one (they are the same field)");
    goto out;
  }
  if (instructions) r->instruct = instructions, instructions = NULL;
  if (format && !strcmp(format, "pcm")) {
    r->format = SERVE_PCM;
  } else if (format && strcmp(format, "wav")) {
    rc = sc_fail(err, SC_EUSAGE, "response_format: '%.40s' is not supported; speechc serves wav and pcm (bare "
                 "s16le mono)%s", format, strcmp(format, "mp3") && strcmp(format, "opus") &&
                 strcmp(format, "aac") && strcmp(format, "flac") ? "" : ", not compressed audio");
    goto out;
  }
  if ((rc = get_number(f[F_speed], "speed", -INFINITY, INFINITY, &speed, err))) goto out;
  if (speed != 1.0) {
    rc = sc_fail(err, SC_EUSAGE, "speed: %g is not supported; only 1.0 (the model has no speed control)", speed);
    goto out;
  }
  if ((rc = one_of(&r->voice, "voice", lim->voices, lim->n_voices, NULL, err)) ||
      (rc = one_of(&r->language, "language", lim->languages, lim->n_languages, "auto", err)) ||
      (rc = get_bool(f[F_stream], "stream", &r->stream, err)) ||
      (rc = get_bool(f[F_greedy], "greedy", &greedy, err)) ||
      (rc = get_integer(f[F_seed], "seed", 0, SEED_MAX, &seed, err)) ||
      (rc = get_float(f[F_temperature], "temperature", 0, 100, &p->talker.temperature, err)) ||
      (rc = get_int(f[F_top_k], "top_k", 0, INT_MAX, &p->talker.top_k, err)) ||
      (rc = get_float(f[F_top_p], "top_p", 1e-9, 1, &p->talker.top_p, err)) ||
      (rc = get_float(f[F_repetition_penalty], "repetition_penalty", 1e-6, 1e6, &p->talker.repetition_penalty,
                      err)) ||
      (rc = get_float(f[F_sub_temperature], "sub_temperature", 0, 100, &p->predictor.temperature, err)) ||
      (rc = get_int(f[F_sub_top_k], "sub_top_k", 0, INT_MAX, &p->predictor.top_k, err)) ||
      (rc = get_float(f[F_sub_top_p], "sub_top_p", 1e-9, 1, &p->predictor.top_p, err)) ||
      (rc = get_int(f[F_max_frames], "max_frames", 1, lim->max_frames, &p->max_frames, err)))
    goto out;
  r->max_frames_given = f[F_max_frames] != NULL;
  if (r->sse && f[F_stream] && !r->stream) {
    rc = sc_fail(err, SC_EUSAGE, "stream: false with stream_format \"sse\": server-sent events are streamed "
                 "(leave stream out, or ask for stream_format \"audio\")");
    goto out;
  }
  if (r->sse) r->stream = 1;
  p->talker.seed = p->predictor.seed = (uint64_t)seed;
  if (greedy >= 0) p->talker.greedy = p->predictor.greedy = greedy; /* false samples over a do_sample: false */
  p->speaker = r->voice;
  p->language = r->language;
out:
  free(format);
  free(instructions);
  free(stream_format);
  return rc;
}

int serve_request_parse(const char *body, size_t len, const ServeLimits *lim, ServeRequest *out,
                        sc_error *err) {
  memset(out, 0, sizeof *out);
  out->params = lim->defaults ? *lim->defaults : sc_tts_defaults();
  if (lim->max_frames > 0) out->params.max_frames = lim->max_frames; /* the limit is the default */
  if (!len) return sc_fail(err, SC_EUSAGE, "request body: empty; expected a JSON object with at least \"input\"");
  if (json_check_text(body, len, "request body", "key", err)) return err->code = SC_EUSAGE;
  /* cJSON reads to a NUL: a copy that has one */
  char *text = malloc(len + 1);
  if (!text) return sc_fail(err, SC_ERUNTIME, "out of memory");
  memcpy(text, body, len);
  text[len] = 0;
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
  int rc = SC_OK;
  if (!j || end != text + len) {
    size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
    rc = sc_fail(err, SC_EUSAGE, "request body: not valid JSON (error near byte %zu)", at);
  } else if (!cJSON_IsObject(j)) {
    rc = sc_fail(err, SC_EUSAGE, "request body: expected a JSON object, got %s", type_name(j));
  } else if (!(rc = json_last_wins(j, err))) {
    rc = read_fields(j, lim, out, err);
  }
  cJSON_Delete(j);
  free(text);
  if (rc) {
    serve_request_free(out);
    memset(out, 0, sizeof *out);
  }
  return rc;
}

void serve_request_free(ServeRequest *r) {
  free(r->model);
  free(r->input);
  free(r->voice);
  free(r->language);
  free(r->instruct);
  r->model = r->input = r->voice = r->language = r->instruct = NULL;
}
