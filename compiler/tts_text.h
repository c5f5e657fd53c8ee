/*
 * tts_text.h — speech from text with a built Qwen3-TTS model: what
 * `speechc tts` and `speechc serve` share, so that both run one copy of the
 * chat templates, the tokenizer, the codec decoder and the generation call.
 *
 * A TtsText is one model opened once: the talker artifact, its tokenizer
 * (a directory: the checkpoint's, or model.tokenizer/ that speechc build
 * writes beside model.so) and its codec decoder (model.codec.so beside
 * it).  It is read-only after tts_text_open and shared by any number of
 * threads; the tokenizer, which keeps scratch between calls, is behind a
 * lock of its own.
 *
 * A TtsStream is what one request needs while it runs: a talker session, a
 * codec session when the model has a decoder, and the codes buffer.  A
 * stream serves one request at a time, on one thread; streams of the same
 * TtsText run in parallel, each with its own sessions and kernel threads
 * (speechc.h: sessions are independent).  A stream is reused from request
 * to request: sc_tts_generate resets both sessions at its start.
 */
#ifndef SC_TTS_TEXT_H
#define SC_TTS_TEXT_H

#include <stdint.h>

#include "speechc.h"

typedef struct TtsText TtsText;
typedef struct TtsStream TtsStream;

typedef struct TtsTextOpts {
  const char *tokenizer;   /* tokenizer directory, or NULL: none (tts_text_resolve fills it) */
  const char *codec;       /* codec decoder artifact, or NULL: no audio (likewise) */
  int threads;             /* kernel threads of each talker session (0: one per physical core) */
  int decoder_threads;     /* of each codec session (0: as threads) */
  int verify_weights;      /* recompute the weight checksums at open */
} TtsTextOpts;

/* Defaults: no tokenizer, no codec, threads 0, weights verified. */
TtsTextOpts tts_text_defaults(void);

/* Fill what o leaves NULL with what speechc build writes beside the model
 * at path, when it is there: the tokenizer directory X.tokenizer/ and the
 * codec decoder X.codec.so.  tok[] and codec[] (4096 bytes each) hold the
 * names. */
void tts_text_resolve(const char *path, TtsTextOpts *o, char tok[4096], char codec[4096]);

/* Open the model at path (a Qwen3-TTS artifact: others are SC_EUSAGE), the
 * tokenizer and the codec decoder o names.  *out owns them all. */
int tts_text_open(const char *path, const TtsTextOpts *o, TtsText **out, sc_error *err);
void tts_text_close(TtsText *t);

typedef struct TtsTextInfo {
  int codebooks;           /* codes per frame (16) */
  int has_tokenizer;       /* 1: requests may give text (not only ids) */
  int has_codec;           /* 1: requests may ask for audio */
  int sample_rate;         /* Hz, with a codec (24000) */
  int samples_per_frame;   /* with a codec (1920) */
  int n_speakers, n_languages;
  const char *const *speakers;  /* the config's spk_id names, as written there */
  const char *const *languages; /* codec_language_id names, "auto" and dialects not included */
  int drops_instruct;      /* a 0.6B CustomVoice model: requests' instructions are dropped, as
                              qwen-tts' generate_custom_voice drops them */
  sc_tts_params defaults;  /* sc_tts_model_defaults: its generation_config.json over qwen-tts' */
} TtsTextInfo;
/* Valid until tts_text_close. */
const TtsTextInfo *tts_text_info(const TtsText *t);
/* lang as the official package validates it: NULL or auto, or one of
 * info.languages, in any case (so never a dialect, which comes with its
 * speaker, nor ""); else SC_EUSAGE naming `what` and the choices. */
int tts_text_language(const TtsText *t, const char *what, const char *lang, sc_error *err);

/* One request.  text and instruct are UTF-8, each put in its chat
 * template and tokenized; or NULL, and then params.text_ids /
 * instruct_ids are used as given (the ids of the whole template).  An
 * empty instruct is no instruction; with info.drops_instruct none is
 * used (qwen-tts' rules).  The
 * rest of params (speaker, language, sampling, max_frames, stats, the
 * decoder's batching) is passed to sc_tts_generate as it is; codec,
 * on_audio and audio_user are the stream's.
 *   on_pcm, when set, gets each frame's samples_per_frame floats in
 * [-1, 1] in frame order ON THE DECODER THREAD (sc_tts_params.on_audio);
 * a non-zero return stops generation before its next frame, and
 * tts_text_speak then returns SC_OK: the caller knows why it stopped.
 * Without on_pcm no audio is decoded (codes only).  on_frame, when set,
 * runs on the calling thread after each frame's codes, as sc_tts_generate
 * calls it.  text_what / instruct_what name the texts in errors ("text",
 * "instruct" when NULL).
 *   params.max_frames against the talker's context (and, with on_pcm, the
 * codec decoder's): with frames_to_context set (max_frames is a default,
 * not asked for) more than the contexts hold after this prompt is lowered
 * to what they hold (sc_tts_context_frames), so that the request ends
 * there as at max_frames; without it, more is SC_EUSAGE before anything
 * runs. */
typedef struct TtsTextRequest {
  const char *text, *instruct;
  const char *text_what, *instruct_what;
  sc_tts_params params;
  int (*on_pcm)(void *user, const float *pcm, int n_samples, int frame);
  sc_frame_cb on_frame;
  void *user;
  int frames_to_context;
  /* when set: called on the calling thread once the request is checked
   * (texts, speaker, language, max_frames) and before anything runs, so
   * that nothing is written for a request refused; a non-zero return ends
   * the request with that code and *err */
  int (*on_start)(void *user, sc_error *err);
} TtsTextRequest;

/* The ids of text `body` in its chat template (instruct 0: the text's,
 * "<|im_start|>assistant\n{body}<|im_end|>\n<|im_start|>assistant\n"; 1:
 * the instruction's, "<|im_start|>user\n{body}<|im_end|>\n"); *ids
 * malloc'd.  Text that is not UTF-8 is SC_EUSAGE with the offset of the
 * bad byte in body, the message starting with `what`; so is a TtsText
 * without a tokenizer. */
int tts_text_ids(TtsText *t, int instruct, const char *what, const char *body, int32_t **ids, int *n,
                 sc_error *err);

int tts_stream_open(TtsText *t, TtsStream **out, sc_error *err);
void tts_stream_close(TtsStream *s);
/* Between requests: reset its sessions, which on the CPU gives their
 * state memory (KV caches, the decoder's states) back to the system until
 * the next request writes it again. */
void tts_stream_idle(TtsStream *s);
/* Run one request on s.  *n_frames receives the frames made (on an error
 * too: those made before it); their codes are tts_stream_codes(s),
 * [frames x codebooks], valid until the next request on s.  A bad text,
 * speaker, language or sampling value is SC_EUSAGE naming it. */
int tts_text_speak(TtsStream *s, const TtsTextRequest *r, int *n_frames, sc_error *err);
const int32_t *tts_stream_codes(const TtsStream *s);
/* The frames the contexts held for s's last request when its max_frames
 * was that many (lowered by frames_to_context, or asked for exactly), else
 * 0: a request that made that many frames ended at the context's end. */
int tts_stream_limited(const TtsStream *s);

/* Requests stepped together: a TtsSched owns a batch of the model
 * (sc_tts_batch_*; the artifact needs its batched entries: built for the
 * CPU with --max-batch >= 2, the default) and a thread that makes one
 * frame of every running request per step, so each weight is read once
 * per step for all of them.  Any number of threads call tts_sched_speak,
 * each with a stream of its own; each waits for its frames and decodes
 * their audio itself with its stream's codec session, one frame per
 * decoder call, as they come (the bits of sc_tts_params.audio_batch = 1).
 * A request's codes are exactly tts_text_speak's (sc_tts_batch_add), its
 * audio those of audio_batch 1.  Close it after every tts_sched_speak has
 * returned. */
typedef struct TtsSched TtsSched;
int tts_sched_open(TtsText *t, TtsSched **out, sc_error *err);
void tts_sched_close(TtsSched *q);
/* As tts_text_speak, but with on_frame and on_pcm both on the calling
 * thread, in frame order (a non-zero return from either stops the
 * request at that frame).  The decoder settings of params (audio_batch,
 * audio_sequential, audio_no_share) do not apply; params.stats gets
 * prompt_s, prompt_rows, frames and wall_s. */
int tts_sched_speak(TtsSched *q, TtsStream *s, const TtsTextRequest *r, int *n_frames, sc_error *err);

#endif
