/*
 * model_internal.h — the runtime's model and session, shared by the files
 * that drive entry points (model.c for plain LMs, tts.c for Qwen3-TTS).
 * Not part of the public API.
 */
#ifndef SC_MODEL_INTERNAL_H
#define SC_MODEL_INTERNAL_H

#include <stddef.h>

#include "kernels.h"
#include "sc_abi.h"
#include "speechc.h"

struct sc_model {
  void *dl;
  const sc_model_desc *d;
  char *path, *wpath;
  const unsigned char *wmap;
  size_t wsize;
  const unsigned char *W;       /* weight data section */
  const sc_entry *prefill, *decode;
  size_t scratch_max;           /* largest scratch of any entry */
  int threads;                  /* kernel threads per session (sc_open_opts.threads) */
  const struct sc_backend_i *be; /* the backend of the descriptor's target (backend.h) */
  void *be_data;                /* what it made: driver, module, device weights (cuda_rt.c) */
};

struct sc_session {
  sc_model *m;
  unsigned char *state, *scratch; /* the CPU backend's (backend_cpu.c) */
  float *logits;                /* [vocab] */
  int pos;                      /* tokens in the (main) KV cache */
  sc_kernel_ctx kctx;
  sc_kernels K;
  void *be_data;                /* a device backend's: stream, device state, scratch, io (cuda_rt.c) */
};

/* The entry point called `name`, or NULL. */
const sc_entry *rt_entry(const sc_model *m, const char *name);
/* Run one entry-point call through the session's backend; errors from
 * generated code or kernels become SC_ERUNTIME with their message. */
int rt_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err);

/* The Qwen3-TTS code predictor's frame (tts.c): codes[0] = c0 given,
 * codes[1..groups-1] sampled with smp from the predictor's heads, and the
 * next talker input's codec sum of all groups codes into sum (if not
 * NULL).  hidden: the talker's post-norm hidden [hidden]. */
typedef struct RtTtsFrame {
  const sc_entry *embed, *prefill, *decode, *sum; /* codec_embed, predictor_prefill/decode, codec_sum */
  int groups, hidden, vocab;                      /* G, talker hidden, predictor vocab */
} RtTtsFrame;
/* rt_cuda_tts_frame's answer when the frame must run step by step on the
 * host instead (the device cannot draw for this sampler). */
#define RT_ON_HOST (-1)
int rt_cuda_tts_frame(sc_session *s, const RtTtsFrame *f, const float *hidden, int32_t *codes, sc_sampler *smp,
                      float *sum, sc_error *err);

/* A whole Qwen3-TTS frame on the device (rt_cuda_tts_step): the talker's
 * decode step on input row x at position pos (x NULL: the frame after the
 * prompt, whose logits the last talker call left on the device and whose
 * post-norm hidden is `hidden`), c0 drawn from the talker's logits with
 * ts, then the predictor frame.  The talker's suppression and repetition
 * history live in a device mask: the first frame of a generation (x NULL)
 * sets it from suppress[n_suppress] and an empty history, every c0 drawn
 * adds itself; ban (-1: none) is suppressed for this draw only. */
typedef struct RtTtsTalker {
  const sc_entry *decode;   /* talker_decode */
  int vocab;                /* V */
  const float *x;           /* [hidden] talker input, or NULL (first frame) */
  int pos;
  const int32_t *suppress;  /* first frame: ids never drawn */
  int n_suppress;
  int ban;
  sc_sampler *ts;           /* the talker's sampler */
} RtTtsTalker;
/* RT_ON_HOST when the device cannot draw for ts or smp (nothing ran). */
int rt_cuda_tts_can_step(const sc_session *s, const RtTtsFrame *f, const RtTtsTalker *tk, const sc_sampler *smp);
int rt_cuda_tts_step(sc_session *s, const RtTtsFrame *f, const RtTtsTalker *tk, const float *hidden, int32_t *codes,
                     sc_sampler *smp, float *sum, sc_error *err);
/* Kernels launched or recorded by the session so far (-1: not cuda). */
long long rt_cuda_launches(const sc_session *s);
/* Host round trips (stream synchronisations) so far (-1: not cuda). */
long long rt_cuda_round_trips(const sc_session *s);

/* sample.c, for device samplers: a sampler's parameters and generator
 * state, and the state back after the device drew with it. */
void rt_sampler_state(const sc_sampler *s, sc_sample_params *p, uint64_t rng[4]);
void rt_sampler_set_rng(sc_sampler *s, const uint64_t rng[4]);

#endif
