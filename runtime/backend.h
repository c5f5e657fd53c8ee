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
#define SC_BACKEND_VERSION 3

/*
 * A step program: the calls of one unit of a family driver's work (a
 * Qwen3-TTS frame: talker step, c0 drawn, the predictor's steps each
 * drawn, the codec sum), written as data so that each backend runs it its
 * own way: the host as a loop of calls and sc_sample draws
 * (rt_steps_host), CUDA as one graph with one copy up and one down, Metal
 * as one command buffer.  The driver builds it; the program names only
 * entry points, its own buffers and token slots, never a device address.
 *
 * Buffers are host memory the driver owns.  Their kind says what a device
 * must move: IN is read by the steps (sent before), OUT written by them
 * (returned after), TMP lives between steps only (its host copy is used
 * by the host loop alone).  Token slots hold drawn tokens, which later
 * steps read as ids; all of them come back, and any the driver set before
 * the run go in.
 */
#define SC_NONE (-1)
enum { SC_BUF_IN, SC_BUF_OUT, SC_BUF_TMP };

typedef struct sc_step_buf {
  float *host;              /* [floats] */
  int floats;
  int kind;                 /* SC_BUF_* */
} sc_step_buf;

typedef struct sc_step_ref {
  int buf, off;             /* buffer index (SC_NONE: none), offset in floats */
} sc_step_ref;

typedef struct sc_step {
  const sc_entry *entry;    /* NULL: a draw alone */
  int n, pos, step;         /* as in sc_io */
  int ids;                  /* first of the n token slots read as ids, or SC_NONE */
  sc_step_ref embeds;       /* input rows */
  sc_step_ref out, hidden;  /* where out and hidden_out go */
  int sample;               /* sampler drawing from out's first `vocab` floats, or SC_NONE */
  int vocab;
  int token;                /* the slot the draw writes */
  int stop;                 /* a draw of this id may end the program (the host loop stops;
                             * a device runs the rest, whose results then mean nothing);
                             * SC_NONE: never */
} sc_step;

typedef struct sc_step_sampler {
  sc_sampler *smp;
  const char *name;         /* for errors of a draw alone */
  const int32_t *history;   /* penalised as sc_sample's history, or NULL */
  int n_history;
  const int32_t *suppress;  /* never drawn */
  int n_suppress;
} sc_step_sampler;

typedef struct sc_step_prog {
  const sc_step *steps;
  int n_steps;
  sc_step_buf *bufs;
  int n_bufs;
  sc_step_sampler *samplers;
  int n_samplers;
  int32_t *tokens;          /* [n_tokens] slots */
  int n_tokens;
  int mark;                 /* a step after which the host loop reads the clock, or SC_NONE */
  double mark_s;            /* out: that time (CLOCK_MONOTONIC seconds); 0 when the backend
                             * ran that step as part of one unit */
  int ran;                  /* out: steps run, fewer than n_steps when a draw hit its stop */
} sc_step_prog;

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
  /* The session's state block as entry functions see it (their S: a host
   * address on the CPU, a device address on a device): a call that places
   * rows of several sessions (sc_io.row_state) gives each row's block as
   * its offset from the calling session's. */
  unsigned long long (*state_base)(const sc_session *s);
  /* Copy bytes of the state block from offset off into out (host
   * memory), after the calls made so far: what the tests compare with a
   * reference cache (a GDN layer's conv window and recurrent state). */
  int (*state_read)(const sc_session *s, size_t off, size_t bytes, void *out, sc_error *err);

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

  /* Run a step program: every draw as sc_sample makes it from the same
   * logits, each sampler's generator advanced as on the host. */
  int (*run_steps)(sc_session *s, sc_step_prog *p, sc_error *err);

  /* The device's name, or NULL for the host. */
  const char *(*device_name)(const sc_model *m);
} sc_backend_i;

/* Run p through the session's backend (backend.c). */
int rt_run_steps(sc_session *s, sc_step_prog *p, sc_error *err);
/* Run p on the host, one rt_call and one sc_sample at a time: the CPU
 * backend's run_steps, and a device's when it cannot run p itself. */
int rt_steps_host(sc_session *s, sc_step_prog *p, sc_error *err);

/* The backend that runs models built for `target`, or NULL. */
const sc_backend_i *rt_backend_for(const char *target);

extern const sc_backend_i rt_backend_cpu;  /* backend_cpu.c */
extern const sc_backend_i rt_backend_cuda; /* cuda_rt.c */
extern const sc_backend_i rt_backend_metal; /* backend_metal.c */

#endif
