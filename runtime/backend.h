/*
 * backend.h — how the runtime reaches a device: one interface, a table of
 * hooks with a version (after ggml's ggml_backend_i).  model.c and the
 * family drivers (tts.c) call only through it, so they name no device API
 * and a new backend (Metal) is a file that fills one of these in and a
 * line in rt_backend_for.  Not part of the public API.
 *
 * The model and session keep what a backend made in m->be_data and
 * s->be_data; the CPU backend uses the session's own state, scratch and
 * kernel context instead.
 */
#ifndef SC_BACKEND_H
#define SC_BACKEND_H

#include "model_internal.h"

/* Bumped when a hook is added, removed or changes its contract. */
#define SC_BACKEND_VERSION 1

typedef struct sc_backend_i {
  int version;              /* SC_BACKEND_VERSION of the table */
  const char *target;       /* the descriptor target it runs: "cpu", "cuda" */

  /* After the weights are mapped (m->d, m->W set): the backend's model
   * (device, module, weights).  On failure it leaves what it made in
   * m->be_data for model_close. */
  int (*model_open)(sc_model *m, sc_error *err);
  void (*model_close)(sc_model *m);       /* also after a failed open */
  /* s->m and s->logits are set by model.c; the backend adds state and
   * scratch.  On failure it leaves what it made for session_close, which
   * model.c calls: a backend never frees the session itself. */
  int (*session_open)(sc_session *s, sc_error *err);
  void (*session_close)(sc_session *s);   /* also a half-opened session */
  void (*session_reset)(sc_session *s);   /* state zeroed */

  /* One entry-point call; outputs land where io points (host memory). */
  int (*call)(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err);

  /* Sampling where the logits are (NULL: the backend cannot; the caller
   * samples on the host).  can_sample: whether it can draw for smp over n
   * logits.  call_sampled: call, then *token drawn as sc_sample would
   * without suppression, smp's generator advanced as on the host; the
   * logits stay with the backend until fetch_logits.  A repetition
   * penalty needs sample_history first: the ids the next sampled calls
   * penalise, to which each of them adds its token. */
  int (*can_sample)(const sc_session *s, const sc_sampler *smp, int n);
  int (*call_sampled)(sc_session *s, const sc_entry *e, const sc_io *io, sc_sampler *smp, int32_t *token,
                      sc_error *err);
  int (*sample_history)(sc_session *s, const int32_t *ids, int n, sc_error *err);
  /* Copy logits a sampled call left behind into s->logits (NULL: none). */
  void (*fetch_logits)(const sc_session *s);

  /* The device's name, or NULL for the host. */
  const char *(*device_name)(const sc_model *m);
} sc_backend_i;

/* The backend that runs models built for `target`, or NULL. */
const sc_backend_i *rt_backend_for(const char *target);

extern const sc_backend_i rt_backend_cpu;  /* backend_cpu.c */
extern const sc_backend_i rt_backend_cuda; /* cuda_rt.c */

#endif
