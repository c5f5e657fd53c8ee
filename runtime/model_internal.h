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
};

struct sc_session {
  sc_model *m;
  unsigned char *state, *scratch;
  float *logits;                /* [vocab] */
  int pos;                      /* tokens in the (main) KV cache */
  sc_kernel_ctx kctx;
  sc_kernels K;
};

/* The entry point called `name`, or NULL. */
const sc_entry *rt_entry(const sc_model *m, const char *name);
/* Run one entry-point call on the session's state and scratch; errors from
 * generated code or kernels become SC_ERUNTIME with their message. */
int rt_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err);

#endif
