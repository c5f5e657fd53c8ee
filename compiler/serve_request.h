/*
 * serve_request.h — the body of POST /v1/audio/speech (speechc serve) as a
 * pure function: JSON bytes in, a request or an error message out.  No
 * I/O, no globals, nothing of the server: tests/fuzz/fuzz_request.c runs
 * it on arbitrary bytes.
 *
 * The shape is OpenAI's speech request, with speechc's extras:
 *   model            string, any value (one model is served; recorded only)
 *   input            string, required, not empty: the text to speak
 *   voice            string: a speaker of the model (case-insensitive, as
 *                    the runtime looks it up); absent: no speaker
 *   response_format  "wav" (default) or "pcm" (bare s16le); OpenAI's other
 *                    formats (mp3, opus, aac, flac) are refused by name
 *   speed            number; only 1.0 (the model has no speed control)
 *   instructions     string (OpenAI's name) or instruct (speechc's): the
 *                    instruction, in its chat template; not both
 *   language         string: a language of the model, or "auto"
 *   stream           boolean: audio as it is decoded (chunked transfer)
 *   stream_format    "audio" (OpenAI's default: the audio itself) or "sse":
 *                    server-sent events (OpenAI's speech.audio.delta with
 *                    the audio bytes in base64, then speech.audio.done),
 *                    always streamed ("stream": false with it is refused)
 *   seed             integer in [0, 2^53]: same seed, same audio
 *   temperature, top_k, top_p, repetition_penalty
 *                    the talker's sampling (speechc tts's flags and ranges)
 *   sub_temperature, sub_top_k, sub_top_p
 *                    the code predictor's
 *   greedy           boolean: argmax for both
 *   max_frames       integer in [1, limits.max_frames]; absent: the
 *                    limit, lowered to what the model's context holds
 *                    after the prompt (TtsTextRequest.frames_to_context)
 * null for any field is that field absent (OpenAI's clients send it so).
 * Anything else is refused by name (a misspelt "temprature" is an error,
 * not a silent default).  The body must be UTF-8 JSON as Python's json
 * reads it (compiler/json.h: no control characters in strings, no \u0000,
 * a repeated key's last value wins), one object, nothing after it.
 */
#ifndef SC_SERVE_REQUEST_H
#define SC_SERVE_REQUEST_H

#include <stddef.h>

#include "speechc.h"

typedef enum ServeFormat { SERVE_WAV = 0, SERVE_PCM = 1 } ServeFormat;

/* What the served model accepts; a NULL list accepts any name. */
typedef struct ServeLimits {
  int max_frames;                 /* the most a request may ask for (and its default) */
  const char *const *voices;      /* speaker names */
  int n_voices;
  const char *const *languages;   /* language names ("auto" is always accepted) */
  int n_languages;
  const sc_tts_params *defaults;  /* what a request leaves out (the model's, sc_tts_model_defaults);
                                     NULL: sc_tts_defaults() */
} ServeLimits;

typedef struct ServeRequest {
  char *model;                    /* as given, or NULL */
  char *input;                    /* the text */
  char *voice;                    /* the speaker as the model spells it, or NULL */
  char *language;                 /* or NULL (auto) */
  char *instruct;                 /* or NULL */
  ServeFormat format;
  int stream;
  int max_frames_given;           /* 0: params.max_frames is limits.max_frames */
  int sse;                        /* stream_format "sse" (stream is 1 then) */
  /* sampling, max_frames, speaker and language (pointing into the strings
   * above) for sc_tts_generate; text ids are the caller's */
  sc_tts_params params;
} ServeRequest;

/* Parse body[0, len).  On success *out owns its strings (serve_request_free);
 * on failure *out is zeroed and err (SC_EUSAGE) says what was wrong, naming
 * the field and, for a value outside a set, the values accepted. */
int serve_request_parse(const char *body, size_t len, const ServeLimits *lim, ServeRequest *out,
                        sc_error *err);
void serve_request_free(ServeRequest *r);

#endif
