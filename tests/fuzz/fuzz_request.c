/*
 * fuzz_request.c — speechc serve's request parser (compiler/serve_request.c)
 * on arbitrary bytes, as an HTTP body would bring them.
 *
 * The model it checks against knows the voices "tiny_speaker" and "Vivian"
 * and the languages "english" and "chinese", and allows 100 frames.  The
 * contract: no crash; a refusal is SC_EUSAGE (SC_ERUNTIME only for out of
 * memory) with a message, and leaves the request zeroed; an accepted
 * request has a non-empty input, a known format, a voice and a language
 * spelt as the model spells them (or none, or "auto"), max_frames in
 * [1, 100] and the sampling values inside the documented ranges; and,
 * written out again as JSON, it parses to the same request.
 */
#include "fuzz_util.h"

#include <math.h>

#include <cjson/cJSON.h>

#include "serve_request.h"

static const char *const voices[] = {"tiny_speaker", "Vivian"};
static const char *const languages[] = {"english", "chinese"};
static const ServeLimits lim = {100, voices, 2, languages, 2, NULL};

static int one_of(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) return 1;
  return 0;
}

static int same_str(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

static int same_sampling(const sc_sample_params *a, const sc_sample_params *b) {
  return a->greedy == b->greedy && a->temperature == b->temperature && a->top_k == b->top_k &&
         a->top_p == b->top_p && a->repetition_penalty == b->repetition_penalty && a->seed == b->seed;
}

/* r as a request body again (every field written out). */
static char *to_json(const ServeRequest *r) {
  cJSON *j = cJSON_CreateObject();
  const sc_tts_params *p = &r->params;
  if (r->model) cJSON_AddStringToObject(j, "model", r->model);
  cJSON_AddStringToObject(j, "input", r->input);
  if (r->voice) cJSON_AddStringToObject(j, "voice", r->voice);
  if (r->language) cJSON_AddStringToObject(j, "language", r->language);
  if (r->instruct) cJSON_AddStringToObject(j, "instruct", r->instruct);
  cJSON_AddStringToObject(j, "response_format", r->format == SERVE_PCM ? "pcm" : "wav");
  cJSON_AddBoolToObject(j, "stream", r->stream);
  cJSON_AddBoolToObject(j, "greedy", p->talker.greedy);
  char seed[32]; /* as an integer: cJSON prints 2^53 as 9.00719925474099e+15 */
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)p->talker.seed);
  cJSON_AddRawToObject(j, "seed", seed);
  cJSON_AddNumberToObject(j, "temperature", p->talker.temperature);
  cJSON_AddNumberToObject(j, "top_k", p->talker.top_k);
  cJSON_AddNumberToObject(j, "top_p", p->talker.top_p);
  cJSON_AddNumberToObject(j, "repetition_penalty", p->talker.repetition_penalty);
  cJSON_AddNumberToObject(j, "sub_temperature", p->predictor.temperature);
  cJSON_AddNumberToObject(j, "sub_top_k", p->predictor.top_k);
  cJSON_AddNumberToObject(j, "sub_top_p", p->predictor.top_p);
  cJSON_AddNumberToObject(j, "max_frames", p->max_frames);
  char *s = cJSON_PrintUnformatted(j);
  cJSON_Delete(j);
  if (!s) abort();
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ServeRequest r;
  memset(&r, 0x5a, sizeof r);
  sc_error err = {0};
  int rc = serve_request_parse((const char *)data, size, &lim, &r, &err);
  if (rc) {
    FUZZ_CHECK((rc == SC_EUSAGE || rc == SC_ERUNTIME) && rc == err.code && err.msg[0], "rc %d: %s", rc, err.msg);
    FUZZ_CHECK(!r.model && !r.input && !r.voice && !r.language && !r.instruct, "request not zeroed on failure");
    return 0;
  }
  const sc_tts_params *p = &r.params;
  FUZZ_CHECK(r.input && r.input[0], "accepted without input");
  FUZZ_CHECK(r.format == SERVE_WAV || r.format == SERVE_PCM, "format %d", (int)r.format);
  FUZZ_CHECK(r.stream == 0 || r.stream == 1, "stream %d", r.stream);
  FUZZ_CHECK(!r.voice || one_of(r.voice, voices, 2), "voice '%s'", r.voice);
  FUZZ_CHECK(!r.language || one_of(r.language, languages, 2) || !strcasecmp(r.language, "auto"), "language '%s'",
             r.language);
  FUZZ_CHECK(p->speaker == r.voice && p->language == r.language, "params do not point at the strings");
  FUZZ_CHECK(p->max_frames >= 1 && p->max_frames <= lim.max_frames, "max_frames %d", p->max_frames);
  FUZZ_CHECK(p->talker.seed == p->predictor.seed && p->talker.seed <= (1ull << 53), "seed");
  FUZZ_CHECK(p->talker.temperature >= 0 && p->talker.temperature <= 100 && p->talker.top_k >= 0 &&
             p->talker.top_p > 0 && p->talker.top_p <= 1 && p->talker.repetition_penalty > 0 &&
             p->predictor.temperature >= 0 && p->predictor.temperature <= 100 && p->predictor.top_k >= 0 &&
             p->predictor.top_p > 0 && p->predictor.top_p <= 1, "sampling out of range");
  char *again = to_json(&r);
  ServeRequest q;
  rc = serve_request_parse(again, strlen(again), &lim, &q, &err);
  FUZZ_CHECK(rc == 0, "written again, refused: %s: %s", err.msg, again);
  FUZZ_CHECK(same_str(q.model, r.model) && same_str(q.input, r.input) && same_str(q.voice, r.voice) &&
             same_str(q.language, r.language) && same_str(q.instruct, r.instruct) && q.format == r.format &&
             q.stream == r.stream && q.params.max_frames == p->max_frames &&
             same_sampling(&q.params.talker, &p->talker) && same_sampling(&q.params.predictor, &p->predictor),
             "written again, read differently: %s", again);
  serve_request_free(&q);
  free(again);
  serve_request_free(&r);
  return 0;
}
