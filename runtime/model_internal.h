/*
 * model_internal.h — the runtime's model and session, shared by the files
 * that drive entry points (model.c for plain LMs, tts.c for Qwen3-TTS).
 * Not part of the public API.
 */
#ifndef SC_MODEL_INTERNAL_H
#define SC_MODEL_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>

#include "kernels.h"
#include "sc_abi.h"
#include "speechc.h"

/* The public entry points (speechc.h) take err == NULL, the message then
 * dropped: this points err at a local so that nothing below checks. */
#define SC_ERR_OR_LOCAL(err)      \
  sc_error err##_dropped;         \
  if (!(err)) {                   \
    err##_dropped.code = 0;       \
    err##_dropped.msg[0] = '\0'; \
    (err) = &err##_dropped;       \
  }

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
  atomic_int refs;              /* the caller's 1 + one per open session or batch: freed at 0 */
};

struct sc_session {
  sc_model *m;
  unsigned char *state, *scratch; /* the CPU backend's (backend_cpu.c) */
  float *logits;                /* [vocab] */
  int pos;                      /* tokens in the (main) KV cache */
  int enc_pos;                  /* a codec's encoded frames (its encoder's own stream) */
  sc_kernel_ctx kctx;
  sc_kernels K;
  void *be_data;                /* a device backend's: stream, device state, scratch, io (cuda_rt.c) */
};

/* One more reference on m (a batch's): sc_model_close gives it back. */
void rt_model_ref(sc_model *m);

/* The entry point called `name`, or NULL. */
const sc_entry *rt_entry(const sc_model *m, const char *name);
/* Run one entry-point call through the session's backend; errors from
 * generated code or kernels become SC_ERUNTIME with their message.  Rows
 * placed one by one (io->row_pos) are checked against the context first. */
int rt_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err);
/* SC_EUSAGE naming the numbers when n_new tokens after n_prompt more at
 * s's position would not fit max_context (sc_generate's and
 * sc_generate_batch's check before any work). */
int rt_generate_room(const sc_session *s, int n_prompt, int n_new, sc_error *err);
/* The token ids and the output floats of an n-row call of e: what
 * io->ids holds and io->out receives (sc_entry's ids_cols, out_cols,
 * out_all_rows, out_rows_mul). */
size_t rt_ids_len(const sc_entry *e, int n);
size_t rt_out_len(const sc_entry *e, int n);
/* The floats io->hidden_out receives: every row's when the entry writes
 * all rows (the batched frame's talker), else the last row's. */
size_t rt_hidden_len(const sc_entry *e, int n);
/* The session's state block as its entry functions see it (backend.h):
 * sc_io.row_state offsets are differences of these. */
unsigned long long rt_state_base(const sc_session *s);
/* bytes of the session's state block from offset off into out (host
 * memory): SC_EUSAGE outside the block, SC_ERUNTIME if the device fails. */
int rt_state_read(const sc_session *s, size_t off, size_t bytes, void *out, sc_error *err);
/* A codec's dimensions from its entry table alone (no JSON: per-frame
 * calls use it): 0 and *ci filled (max_frames, can_encode included), or -1
 * when m is not a codec or its "audio" entry is missing (then
 * sc_codec_get_info says why). */
int rt_codec_dims(const sc_model *m, sc_codec_info *ci);

/* Kernels launched or recorded by the session so far (-1: not cuda). */
long long rt_cuda_launches(const sc_session *s);
/* Host round trips (stream synchronisations) so far (-1: not cuda). */
long long rt_cuda_round_trips(const sc_session *s);

/* Kernels dispatched by the session so far (-1: not metal). */
long long rt_metal_dispatches(const sc_session *s);

/* sample.c, for device samplers: a sampler's parameters and generator
 * state, and the state back after the device drew with it. */
void rt_sampler_state(const sc_sampler *s, sc_sample_params *p, uint64_t rng[4]);
void rt_sampler_set_rng(sc_sampler *s, const uint64_t rng[4]);

#endif
