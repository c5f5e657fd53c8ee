/*
 * tts_internal.h — pieces of the Qwen3-TTS driver (tts.c) that the parity
 * tests call one at a time.  Not part of the public API.
 */
#ifndef SC_TTS_INTERNAL_H
#define SC_TTS_INTERNAL_H

#include <cjson/cJSON.h>

#include "model_internal.h"

typedef struct TtsConfig {
  cJSON *json;              /* the model's config.json */
  const cJSON *talker;      /* its talker_config */
  int tts_pad, tts_bos, tts_eos;
  int codec_pad, codec_bos, codec_eos, think, nothink, think_bos, think_eos;
  int vocab, text_vocab, groups, hidden, pvocab;
  const sc_entry *text_embed, *codec_embed, *codec_sum, *talker_prefill, *talker_decode,
      *pred_prefill, *pred_decode;
} TtsConfig;

typedef struct TtsPrompt {
  float *prompt;            /* [rows, H] talker prefill input */
  int rows;
  float *trailing;          /* [trail, H] added to decode inputs 0..trail-1 */
  int trail;
  float *pad;               /* [3, H] P(tts_pad), P(tts_bos), P(tts_eos) */
} TtsPrompt;

int tts_config(const sc_model *m, TtsConfig *c, sc_error *err);
void tts_config_free(TtsConfig *c);
/* The ids c0 never takes, as the official generate suppresses them:
 * [V-1024, V) but the codec EOS, into out[1025]; returns their count n,
 * and out[n] is the EOS itself (suppressed too while t < min_frames:
 * pass n + 1 then). */
int tts_suppress(const TtsConfig *c, int32_t *out);
int tts_build_prompt(sc_session *s, const TtsConfig *c, const sc_tts_params *p, TtsPrompt *out,
                     sc_error *err);
void tts_prompt_free(TtsPrompt *p);
/* Talker over n input rows at the session position: logits and post-norm
 * hidden of the last row. */
int tts_talker(sc_session *s, const TtsConfig *c, const float *embeds, int n, float *logits,
               float *hidden, sc_error *err);
/* Predictor step k: k = 0 prefills hc0 = [h, E(c0)]; k >= 1 feeds code c_k. */
int tts_predictor_step(sc_session *s, const TtsConfig *c, int step, const float *hc0, int32_t code,
                       float *logits, sc_error *err);

/* The audio half of sc_tts_generate (tts_audio.c): a decoder thread fed
 * frame by frame, or the sequential order (sc_tts_params.audio_sequential).
 * codes is the generator's [max_frames, G] output, gen the talker's
 * session (its kernel threads share the cores with the decoder's), start
 * the sc_tts_generate call's now(). */
typedef struct TtsAudio TtsAudio;
int tts_audio_start(sc_session *codec, const sc_tts_params *p, sc_session *gen, const int32_t *codes, int G,
                    double start, TtsAudio **out, sc_error *err);
/* Frame t's codes (codes[t * G ...]) are final: decode them (queued, or
 * now when sequential).  Frames come in order from 0.  Non-zero when the
 * audio side has stopped (a codec error or on_audio's stop): generate no
 * more.  May wait while the generator is too far ahead of the audio. */
int tts_audio_push(TtsAudio *a, int t);
/* Before each frame: non-zero once the audio side has stopped.  Gives
 * the generator's kernel threads their share of the cores while the
 * decoder has frames, all of them while it has none. */
int tts_audio_next(TtsAudio *a);
/* No more frames: the frames pushed are decoded (unless the audio side
 * stopped), the thread joined, its timings put in st (may be NULL), and a
 * is freed (NULL: nothing).  Returns the decoder's error, copied to err
 * when err is non-NULL. */
int tts_audio_finish(TtsAudio *a, sc_tts_stats *st, sc_error *err);

#endif
