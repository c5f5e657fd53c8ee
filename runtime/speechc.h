/*
 * speechc.h — the public C API of the speechc runtime.
 *
 * Open a compiled model (model.so + its weight file), open any number of
 * sessions on it (each with its own KV cache and state; sessions are
 * independent and may run in different threads), feed tokens, read logits,
 * sample.  Every function that can fail returns an SC_* code and fills an
 * sc_error with a message that names the file or argument at fault (err may
 * be NULL: the code alone); a NULL where a session, buffer or count is
 * needed is SC_EUSAGE, never a crash.  Library code never exits the
 * process.
 */
#ifndef SPEECHC_H
#define SPEECHC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes; they double as the CLI's exit codes. */
enum {
  SC_OK = 0,
  SC_EUSAGE = 1,   /* bad argument or flag */
  SC_EINPUT = 2,   /* bad input file: checkpoint, artifact, weight file */
  SC_ERUNTIME = 3, /* failure while running: context full, NaN logits, OOM */
};

typedef struct sc_error {
  int code;
  char msg[1024];
} sc_error;

/* Fill err (if non-NULL) and return code.  printf-style. */
int sc_fail(sc_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

typedef struct sc_model sc_model;
typedef struct sc_session sc_session;

typedef struct sc_open_opts {
  int verify_weights; /* recompute the weight checksum at open (default 1) */
  int threads;        /* kernel threads of each session, its caller included
                       * (0: one per physical core) */
} sc_open_opts;

/* Open model.so (path) and the weight file it names.  opts may be NULL. */
int sc_model_open(const char *path, const sc_open_opts *opts, sc_model **out,
                  sc_error *err);
/* The caller's handle goes; a session or batch (sc_batch, sc_tts_batch,
 * sc_moshi_batch) still open keeps the model until it is closed too (any
 * order works; m is not to be used after this). */
void sc_model_close(sc_model *m);

typedef struct sc_model_info {
  const char *family, *model_type, *target, *compiler_version, *weight_file;
  const char *config_json;
  int vocab, hidden, n_layers, max_context;
  uint64_t weight_bytes, state_bytes, config_hash;
} sc_model_info;
void sc_model_get_info(const sc_model *m, sc_model_info *info);

/* Sessions: each holds max_context positions, the model's compiled
 * maximum (sc_model_info.max_context). */
int sc_session_open(sc_model *m, sc_session **out, sc_error *err);
void sc_session_close(sc_session *s);
/* Position 0, state zeroed; on the CPU the state's memory goes back to
 * the system (a session holds the pages of the positions it has used). */
void sc_session_reset(sc_session *s);
int sc_session_pos(const sc_session *s);

/* Append n tokens (any n >= 1; long prompts are chunked), leaving the
 * logits of the last one readable through sc_logits. */
int sc_prefill(sc_session *s, const int32_t *ids, int n, sc_error *err);
/* Append one token. */
int sc_decode(sc_session *s, int32_t id, sc_error *err);
/* Logits of the last token fed ([vocab]); valid until the next call. */
const float *sc_logits(const sc_session *s, int *n_vocab);

/* Batched decode (Qwen3 / Llama artifacts built with --max-batch > 1,
 * the default 16): one step appends one token to each of
 * several sessions of the same model, each at its own position in its own
 * KV caches, and reads every weight once for all of them (the entry
 * "decode_batch", rows placed by sc_io.row_pos / row_state).  Each
 * session's logits and position are then exactly those sc_decode would
 * have left, bit for bit on the CPU (within rounding on --target cuda),
 * whatever the batch, the other sessions or their positions.  A batch
 * holds sessions (it does not own them): add and remove between steps, a
 * session in one batch at a time.  Thread safety:
 * sc_batch_step runs on the first session's kernel threads; no session of
 * the batch may be used elsewhere during it, and a batch is used by one
 * thread at a time.  More sessions than the entry's rows take several
 * calls. */
typedef struct sc_batch sc_batch;
int sc_batch_new(sc_model *m, sc_batch **out, sc_error *err);
void sc_batch_free(sc_batch *b);
int sc_batch_add(sc_batch *b, sc_session *s, sc_error *err);
int sc_batch_remove(sc_batch *b, sc_session *s); /* 0, or -1: not in the batch */
int sc_batch_size(const sc_batch *b);
/* Sessions in the order they were added (removal keeps the others' order). */
sc_session *sc_batch_session(const sc_batch *b, int i);
/* ids[i] goes to sc_batch_session(b, i).  On error no session moved:
 * positions and logits are as before the call, except that the KV rows of
 * the failed call's sessions may hold the new tokens (overwritten by the
 * next step at those positions). */
int sc_batch_step(sc_batch *b, const int32_t *ids, sc_error *err);

/* Sampling, in HF order: suppressed ids to -inf, repetition penalty over
 * `history` (greedy too, as HF does), then greedy (or temperature <= 0) is
 * argmax with the lowest index winning ties; otherwise temperature, top-k,
 * top-p and a draw from a seeded generator owned by the sampler. */
typedef struct sc_sample_params {
  int greedy;
  float temperature;        /* default 1.0 */
  int top_k;                /* 0: off */
  float top_p;              /* 1.0: off */
  float repetition_penalty; /* 1.0: off; HF semantics (divide if >0, else multiply) */
  uint64_t seed;
} sc_sample_params;
sc_sample_params sc_sample_defaults(void);

typedef struct sc_sampler sc_sampler;
int sc_sampler_new(const sc_sample_params *p, sc_sampler **out, sc_error *err);
void sc_sampler_free(sc_sampler *s);
/* Pick a token from logits[n].  Suppressed ids (sorted or not, may be NULL)
 * get -inf first.  Non-finite logits are an SC_ERUNTIME error. */
int sc_sample(sc_sampler *s, const float *logits, int n, const int32_t *history,
              int n_history, const int32_t *suppress, int n_suppress,
              int32_t *token, sc_error *err);

/* Generation: prefill `prompt`, then produce n_new tokens (stops early at
 * eos when eos >= 0).  out receives the new tokens; *n_out their count.
 * on_token, when set, is called after each token; return non-zero to stop.
 * n_new tokens must fit the context: max_context - (session position +
 * n_prompt) + 1 at most, else SC_EUSAGE before any work. */
typedef int (*sc_token_cb)(void *user, int32_t token, int index);
int sc_generate(sc_session *s, const int32_t *prompt, int n_prompt, int n_new,
                const sc_sample_params *p, int32_t eos, int32_t *out,
                int *n_out, sc_token_cb on_token, void *user, sc_error *err);

/* sc_generate for several sessions of one model at once: request i
 * prefills its prompt on its session, then every step samples each running
 * request's next token with its own sampler (its params and seed) and
 * advances all of them with one batched step (sc_batch_step); a request
 * ends at its eos or after n_new tokens, and the others go on.  Each
 * request's tokens are those sc_generate gives it alone (the logits are
 * the same bits on the CPU; the same seed draws the same tokens).  The
 * sessions must be distinct and of model m, which needs the batch entry
 * (a Qwen3 / Llama or Qwen3.5-family artifact built with --max-batch 2 or
 * more, the default).  On an error (naming the request) every request
 * keeps the tokens made so far in out / n_out.  Thread safety as
 * sc_batch_step's. */
typedef struct sc_gen_request {
  sc_session *session;
  const int32_t *prompt;    /* n_prompt >= 1 ids */
  int n_prompt;
  int n_new;                /* >= 0 */
  sc_sample_params params;
  int32_t eos;              /* -1: none */
  int32_t *out;             /* [n_new] */
  int n_out;                /* out: tokens made */
} sc_gen_request;
int sc_generate_batch(sc_model *m, sc_gen_request *reqs, int n, sc_error *err);

/* ---- Qwen3-TTS: codec frames from text token ids ------------------------
 * The official qwen-tts generation loop (Qwen3TTSForConditionalGeneration.
 * generate): prompt layout, streaming or non-streaming text, the talker's
 * first code per frame, the code predictor's other G-1 codes, stop at the
 * codec EOS.  Output is a [frames x G] matrix of codec ids (G = 16 for the
 * published models, sc_tts_codebooks), and with a codec decoder session
 * the audio (below).  Callers pass token ids (the tokenizer is
 * compiler/tokenizer.h, not this API). */
typedef struct sc_tts_params {
  /* ids of "<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n" */
  const int32_t *text_ids;
  int n_text;
  /* ids of "<|im_start|>user\n{instruct}<|im_end|>\n", or NULL */
  const int32_t *instruct_ids;
  int n_instruct;
  const char *speaker;      /* a name in config spk_id, or NULL */
  const char *language;     /* a name in config codec_language_id, or NULL / "auto" */
  int non_streaming;        /* all text in the prompt (the official custom-voice path) */
  int max_frames;           /* stop after this many frames (default 2048) */
  int min_frames;           /* EOS is suppressed for the first codes (default 2) */
  sc_sample_params talker;  /* default: top-k 50, top-p 1, temperature 0.9, penalty 1.05 */
  sc_sample_params predictor; /* default: top-k 50, top-p 1, temperature 0.9 */
  struct sc_tts_stats *stats; /* optional: filled with timings */
  /* Audio (optional): a session of a codec decoder (sc_codec_*, built from
   * the checkpoint's speech_tokenizer/), reset at the start and used by
   * sc_tts_generate alone until it returns.  By default a decoder thread
   * that sc_tts_generate starts and joins decodes while the next frames
   * are generated: frame t's codes are queued as soon as on_frame has
   * seen them, and the thread decodes whatever is queued, up to
   * audio_batch frames per codec call (one frame at a time while it keeps
   * up, more when it falls behind; generation waits when it is
   * 2 * audio_batch frames ahead of the audio).  on_audio then runs ON THE
   * DECODER THREAD, once per frame, in frame order, with the frame's codes
   * and samples_per_frame floats in [-1, 1]; on_frame stays on the calling
   * thread.  The two callbacks run concurrently: what they share is the
   * caller's to lock.  A non-zero return from on_audio, or a decoder
   * error, stops generation before its next frame; a stop or error on the
   * generating side lets the decoder finish the frames already queued.
   * Frames a codec call takes at once are computed together, so their
   * samples may differ from one-frame calls at rounding level (OpenBLAS
   * sums f32 GEMMs of 16 rows or more in an order that depends on the
   * rows: runtime/kernels.h); audio_batch = 1 gives the bits of the
   * sequential order.  audio_sequential = 1 keeps that order on the
   * calling thread (no decoder thread: each frame decoded and handed to
   * on_audio before the next is generated).  Frame 1 is generated once
   * frame 0 is decoded (the first audio as soon as sequentially).  When
   * the two sessions' kernel threads together outnumber the physical
   * cores, each uses its share while the other side is busy (the codec
   * session half the cores, the talker the rest) and all of them while
   * the other side is idle. */
  sc_session *codec;
  int (*on_audio)(void *user, const int32_t *codes, int n_codebooks, const float *pcm, int n_samples,
                  int frame);
  void *audio_user;
  int audio_batch;          /* frames per codec call, at most: 0 = the codec's max_frames */
  int audio_sequential;     /* 1: decode on the calling thread, frame by frame (old order) */
  int audio_no_share;       /* 1: while both sides run, each keeps every kernel thread of its
                             * session (default: when the two pools hold more threads than
                             * there are cores, each keeps its share: tts_audio.c) */
} sc_tts_params;
typedef struct sc_tts_stats {
  double prompt_s;          /* prompt embeddings + talker prefill */
  double talker_s;          /* talker decode steps, sampling c0 */
  double predictor_s;       /* code predictor: all G-1 codes of every frame, codec sums
                             * (--target cuda: the whole frame, talker step and c0
                             * included, which run in the same graph) */
  double decoder_s;         /* the codec decoder (with sc_tts_params.codec), timed on
                             * the thread it runs on */
  double first_audio_s;     /* from the call to the first frame's PCM (codec given) */
  double wall_s;            /* the whole call, until the last on_audio returned: with
                             * the decoder overlapped, less than the sum of the parts */
  int prompt_rows, frames;
  int decoder_calls;        /* codec calls (frames decoded / calls = the mean batch) */
  int decoded;              /* frames decoded and handed to on_audio */
  int overlapped;           /* 1: the decoder ran on its own thread */
} sc_tts_stats;
/* qwen-tts' hard defaults (its _merge_generate_kwargs): talker and
 * predictor sampled at temperature 0.9, top-k 50, top-p 1; repetition
 * penalty 1.05 on the talker; 2048 frames at most. */
sc_tts_params sc_tts_defaults(void);
/* The defaults qwen-tts uses for this checkpoint: sc_tts_defaults() with
 * what its generation_config.json sets (do_sample, top_k, top_p,
 * temperature, repetition_penalty, subtalker_dosample, subtalker_top_k,
 * subtalker_top_p, subtalker_temperature, max_new_tokens), as speechc
 * build recorded it in the artifact. */
int sc_tts_model_defaults(const sc_model *m, sc_tts_params *p, sc_error *err);
/* Codebooks per frame (G), or 0 when the model is not a TTS model. */
int sc_tts_codebooks(const sc_model *m);
/* The most frames p's prompt leaves room for in the talker's context
 * (max_context - prompt rows + 1; 0 when the prompt alone fills it) into
 * *frames.  p's ids, speaker and language are checked as sc_tts_generate
 * checks them (SC_EUSAGE); max_frames and sampling are not read. */
int sc_tts_context_frames(const sc_model *m, const sc_tts_params *p, int *frames, sc_error *err);
/* Called after each frame with its G codes; return non-zero to stop (the
 * frame is kept, and with p->codec still decoded). */
typedef int (*sc_frame_cb)(void *user, const int32_t *codes, int n_codebooks, int frame);
/* Generate into codes[max_frames * G]; *n_frames receives the count.  The
 * session is reset first.  A generation that reaches the talker's context
 * end before max_frames or the codec EOS fails there with "context full"
 * (SC_ERUNTIME), the frames made before it kept: sc_tts_context_frames
 * says how many frames the context holds for a prompt. */
int sc_tts_generate(sc_session *s, const sc_tts_params *p, int32_t *codes, int *n_frames,
                    sc_frame_cb on_frame, void *user, sc_error *err);

/* Batched Qwen3-TTS (artifacts built with --max-batch > 1, the
 * default 16): one sc_tts_batch_step makes one frame of every running
 * stream of the batch, the talker's step, the predictor's prefill and each
 * of its steps as one call for all of them (entries "talker_batch",
 * "predictor_prefill_batch", "predictor_decode_batch"), so each weight is
 * read once per call for all the streams.  Each stream keeps its own
 * session (its caches, at its own position), parameters, samplers, seed
 * and history: its codes are exactly those sc_tts_generate gives alone
 * with the same parameters, bit for bit, whatever the other streams do.
 * Streams join (sc_tts_batch_add: the session is reset and the prompt
 * prefilled at once, on that session's threads) and leave between steps;
 * a stream that ends (codec EOS, max_frames, on_frame's stop, or its own
 * error such as a full context) stops being stepped and stays in the
 * batch, with its status, until removed.  Audio is not decoded here:
 * p->codec must be NULL (decode the codes with sc_codec_decode).
 * p->stats, when set, gets prompt_s, prompt_rows, frames and wall_s (from
 * the add to the end).  Thread safety: a step runs on the kernel threads
 * and scratch of the first running stream's session; no session of the
 * batch may be used elsewhere while it is in the batch, and a batch is
 * used by one thread at a time.  More streams than the entries' rows take
 * several calls per step.  The params' pointers (text, instruct, speaker,
 * language) must stay valid while the stream is in the batch. */
typedef struct sc_tts_batch sc_tts_batch;
int sc_tts_batch_new(sc_model *m, sc_tts_batch **out, sc_error *err);
void sc_tts_batch_free(sc_tts_batch *b);      /* removes every stream */
/* codes: [p->max_frames * G], the caller's; *n_frames counts the frames
 * made so far (as sc_tts_generate's). */
int sc_tts_batch_add(sc_tts_batch *b, sc_session *s, const sc_tts_params *p, int32_t *codes, int *n_frames,
                     sc_frame_cb on_frame, void *user, sc_error *err);
/* 0, or -1: not in the batch.  From an on_frame callback of a step (the
 * stream's own or another's) the stream stops at once (its codes and
 * n_frames are not written again, its session not used again: it may be
 * closed) and is freed when the step returns; a callback may not add
 * streams, step or free the batch. */
int sc_tts_batch_remove(sc_tts_batch *b, sc_session *s);
int sc_tts_batch_size(const sc_tts_batch *b);    /* streams in the batch, ended or not */
int sc_tts_batch_running(const sc_tts_batch *b); /* those still running */
/* One frame of each running stream.  A failed call of the entries ends the
 * streams it carried with that error, which is also returned; the other
 * streams go on. */
int sc_tts_batch_step(sc_tts_batch *b, sc_error *err);
enum { SC_TTS_RUNNING = 0, SC_TTS_ENDED = 1, SC_TTS_FAILED = 2 };
/* The stream's state (SC_TTS_*), and for SC_TTS_FAILED its error in err
 * (may be NULL); -1 when s is not in the batch. */
int sc_tts_batch_status(const sc_tts_batch *b, const sc_session *s, sc_error *err);

/* ---- Moshi: the RQ-Transformer's step loop (moshi's LMGen) ----------------
 * One call per 80 ms step: the user's audio codes of the step in, and,
 * once the largest delay has passed, one row [text, audio_1..audio_dep_q]
 * out, exactly the rows LMGen.step returns (its delays, cache of
 * max_delay + 2 steps and initial tokens).  The session is the stream:
 * sc_moshi_open resets it, and the generator borrows it.
 *
 * Sampling is LMGen's sample_token: softmax(logits / temp), the top_k most
 * likely kept, one draw; greedy (argmax, first index on ties) when greedy
 * is set or a temperature is <= 0.  The text token uses temp_text /
 * top_k_text, the audio codebooks temp / top_k.  Draws come from two
 * xoshiro256** generators (sc_sampler) seeded from `seed` (text: seed,
 * audio: seed + 1): the same seed gives the same rows on every platform,
 * but not the package's rows (torch's generator cannot be matched). */
typedef struct sc_moshi sc_moshi;
typedef struct sc_moshi_info {
  int n_q, dep_q, card, text_card;
  int user_codebooks;       /* codes per step sc_moshi_step reads: n_q - dep_q */
  int max_delay;            /* steps that return no row */
} sc_moshi_info;
typedef struct sc_moshi_params {
  int greedy;               /* LMGen's use_sampling = False */
  float temp, temp_text;    /* audio 0.8, text 0.7 (LMGen's defaults) */
  int top_k, top_k_text;    /* audio 250, text 25; 0: off */
  uint64_t seed;            /* default 4242 (run_inference's seed_all) */
} sc_moshi_params;
/* LMGen's defaults with the checkpoint's lm_gen_config (kept in the
 * artifact's config) over them: what the package's run_inference uses. */
int sc_moshi_defaults(const sc_model *m, sc_moshi_params *p, sc_error *err);
/* p NULL: sc_moshi_defaults. */
int sc_moshi_open(sc_session *s, const sc_moshi_params *p, sc_moshi **out, sc_moshi_info *info, sc_error *err);
void sc_moshi_close(sc_moshi *g);
/* user[user_codebooks] in [0, card); row[1 + dep_q]; *has_row 0 while the
 * delays leave nothing to return. */
int sc_moshi_step(sc_moshi *g, const int32_t *user, int32_t *row, int *has_row, sc_error *err);
/* Live use: push the user's frames as they arrive (any number per call,
 * frame-major, user_codebooks codes each; or PCM, sc_moshi_push_pcm below)
 * and get Moshi's frames through on_row, called
 * once per row LMGen.step returns, exactly the rows of sc_moshi_step:
 * row[0] the text token (a SentencePiece id: runtime/spm.h decodes it),
 * row[1..dep_q] Moshi's audio codes of one 80 ms frame, n_row = 1 + dep_q;
 * step is the 0-based index, since sc_moshi_open, of the frame whose step
 * returned it (row r comes from step r + max_delay: the first max_delay
 * frames give no call).  on_row may be NULL (rows dropped).
 *   Threads: on_row runs on the calling thread, before the next frame is
 * stepped and before sc_moshi_push returns; row is valid only during the
 * call.  A generator (like its session) is used by one thread at a time;
 * generators on different sessions run in parallel.  on_row must not
 * step, push or close its own generator (a step or push from it is refused,
 * SC_EUSAGE); it may do anything else, e.g. decode the text or queue the
 * codes for a Mimi decoder session.
 *   Stopping: a non-zero return from on_row stops the push after that
 * frame; sc_moshi_push returns SC_OK and the stream stays consistent, so
 * pushing the remaining frames later continues it.  *n_pushed (may be NULL)
 * receives the frames consumed.  Errors: a code outside [0, card) is
 * SC_EINPUT naming the step, codebook and code, with the stream left as it
 * was before that frame (*n_pushed frames went in and their rows were
 * delivered); after an SC_ERUNTIME the stream is undefined (reopen). */
typedef int (*sc_moshi_row_cb)(void *user, const int32_t *row, int n_row, int step);
int sc_moshi_push(sc_moshi *g, const int32_t *user_codes, int n_frames, sc_moshi_row_cb on_row, void *cb_user,
                  int *n_pushed, sc_error *err);
/* The same with the user's audio and Moshi's: n_frames whole frames of
 * samples_per_frame mono samples (24 kHz floats) are encoded by the Mimi
 * session `codec` (the model's Mimi: its codebooks must be the model's
 * user_codebooks = dep_q, its entries card), stepped as run_inference steps
 * them (the first frame of the stream twice, its first result dropped), and
 * each row's audio codes decoded by the same session: on_audio gets the row
 * and its samples_per_frame samples (valid during the call).  The rules of
 * sc_moshi_push hold (threads, stopping, *n_pushed); the codec session is
 * the generator's during the call. */
typedef int (*sc_moshi_audio_cb)(void *user, const int32_t *row, int n_row, const float *pcm, int n_pcm, int step);
int sc_moshi_push_pcm(sc_moshi *g, sc_session *codec, const float *pcm, int n_frames, sc_moshi_audio_cb on_audio,
                      void *cb_user, int *n_pushed, sc_error *err);

/* Where a generator's time went (sc_moshi_step and its pushes; a batch's
 * steps count in the batch's): whole steps, and within them the temporal
 * transformer's calls and the depformer's dep_q calls; the rest of a step
 * is sampling and bookkeeping. */
typedef struct sc_moshi_times {
  long steps;
  double step_s, temporal_s, depformer_s;
} sc_moshi_times;
void sc_moshi_get_times(const sc_moshi *g, sc_moshi_times *t);

/* Several conversations of one Moshi model stepped together: each weight
 * is read once per step for all of them (the "_batch" entries, built with
 * --max-batch 2 or more, the default; more generators than that take
 * several calls a step).  Each generator keeps its own session, step,
 * token cache and samplers, and its rows are bit-identical to stepping it
 * alone with sc_moshi_step.  Generators may be at different steps, and may
 * join (sc_moshi_batch_add, e.g. just opened) or leave
 * (sc_moshi_batch_remove, then sc_moshi_close) between steps; a generator
 * in a batch may still be stepped alone between batch steps.
 *   Threads: a batch and its generators are used by one thread at a time;
 * the calls run on the first generator's session (its threads).
 *   sc_moshi_batch_step: user[i * user_codebooks ..] are generator i's
 * codes (i in the order of sc_moshi_batch_get); rows[i * (1 + dep_q) ..]
 * and has_row[i] what sc_moshi_step would return.  Every generator's codes
 * and context are checked first: an SC_EINPUT or full context steps none.
 * After an SC_ERUNTIME the generators are undefined (reopen them). */
typedef struct sc_moshi_batch sc_moshi_batch;
int sc_moshi_batch_new(sc_model *m, sc_moshi_batch **out, sc_error *err);
void sc_moshi_batch_free(sc_moshi_batch *b); /* the generators stay open */
int sc_moshi_batch_add(sc_moshi_batch *b, sc_moshi *g, sc_error *err);
int sc_moshi_batch_remove(sc_moshi_batch *b, sc_moshi *g); /* -1: not in the batch */
int sc_moshi_batch_size(const sc_moshi_batch *b);
sc_moshi *sc_moshi_batch_get(const sc_moshi_batch *b, int i);
int sc_moshi_batch_step(sc_moshi_batch *b, const int32_t *user, int32_t *rows, int *has_row, sc_error *err);
void sc_moshi_batch_get_times(const sc_moshi_batch *b, sc_moshi_times *t);

/* ---- codecs: codes to PCM, and (Mimi) PCM to codes -------------------------
 * An artifact built from a Qwen3-TTS checkpoint's speech_tokenizer/ (the
 * 12 Hz tokenizer's decoder) or from a Mimi directory (decoder and
 * encoder).  A session is one audio stream each way: each call continues
 * it, so frames may come one at a time as a talker makes them (decode) or
 * as a microphone gives them (encode); the two directions keep their own
 * state and position. */
typedef struct sc_codec_info {
  int n_codebooks;          /* codes per frame (16) */
  int codebook_size;        /* each code in [0, codebook_size) */
  int samples_per_frame;    /* PCM samples per frame (1920) */
  int sample_rate;          /* Hz (24000) */
  int max_frames;           /* frames per entry call (sc_codec_decode loops) */
  int can_encode;           /* 1: sc_codec_encode works (Mimi) */
} sc_codec_info;
int sc_codec_get_info(const sc_model *m, sc_codec_info *info, sc_error *err);
/* Decode n_frames frames of n_codebooks codes (frame-major) into
 * pcm[n_frames * samples_per_frame], floats in [-1, 1]; the stream's
 * position advances by n_frames.  sc_session_reset starts a new stream. */
int sc_codec_decode(sc_session *s, const int32_t *codes, int n_frames, float *pcm, sc_error *err);
/* Encode n_frames whole frames of samples_per_frame mono samples at
 * sample_rate (floats, as the package takes them: 16-bit PCM is s / 32768)
 * into codes[n_frames * n_codebooks] (frame-major), as the moshi package's
 * streaming Mimi.encode does one frame per call: any split of a stream
 * gives the same codes.  A partial frame is the caller's to hold back
 * until it is whole, as the package asks.  A non-finite sample is refused
 * (SC_EUSAGE).  The encode position advances by n_frames; sc_session_reset
 * starts a new stream both ways.  SC_EUSAGE on a codec without an encoder. */
int sc_codec_encode(sc_session *s, const float *pcm, int n_frames, int32_t *codes, sc_error *err);
/* Where `speechc build` puts the codec decoder of a Qwen3-TTS checkpoint
 * built into model_path: X.so -> X.codec.so (any other name: NAME.codec.so).
 * Non-zero when out (size bytes) is too small, or either is NULL. */
int sc_codec_path(const char *model_path, char *out, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* SPEECHC_H */
