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
  void *cuda;                   /* target "cuda": driver, module, device weights (cuda_rt.c) */
};

struct sc_session {
  sc_model *m;
  unsigned char *state, *scratch;
  float *logits;                /* [vocab] */
  int pos;                      /* tokens in the (main) KV cache */
  sc_kernel_ctx kctx;
  sc_kernels K;
  void *cuda;                   /* target "cuda": stream, device state, scratch, io (cuda_rt.c) */
};

/* The entry point called `name`, or NULL. */
const sc_entry *rt_entry(const sc_model *m, const char *name);
/* Run one entry-point call on the session's state and scratch; errors from
 * generated code or kernels become SC_ERUNTIME with their message. */
int rt_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err);

/* Target "cuda" (cuda_rt.c): the hooks model.c calls when the descriptor's
 * target is "cuda".  Session open takes the half-made session s (m set)
 * and on failure closes it. */
int rt_cuda_model_open(sc_model *m, sc_error *err);
void rt_cuda_model_close(sc_model *m);
int rt_cuda_session_open(sc_session *s, sc_session **out, sc_error *err);
void rt_cuda_session_close(sc_session *s);
void rt_cuda_session_reset(sc_session *s);
int rt_cuda_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err);
/* Kernels launched or recorded by the session so far (-1: not cuda). */
long long rt_cuda_launches(const sc_session *s);
/* The GPU's name, or NULL when m is not a cuda model. */
const char *rt_cuda_device_name(const sc_model *m);

#endif
