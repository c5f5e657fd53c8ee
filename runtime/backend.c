/*
 * backend.c — the table of backends (backend.h), picked once per model by
 * the descriptor's target.
 */
#include <string.h>
#include <time.h>

#include "backend.h"

static const sc_backend_i *const backends[] = {&rt_backend_cpu, &rt_backend_cuda, &rt_backend_metal};

const sc_backend_i *rt_backend_for(const char *target) {
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (target && !strcmp(backends[i]->target, target)) return backends[i];
  return NULL;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *ref(const sc_step_prog *p, sc_step_ref r) {
  return r.buf == SC_NONE ? NULL : p->bufs[r.buf].host + r.off;
}

int rt_steps_host(sc_session *s, sc_step_prog *p, sc_error *err) {
  p->mark_s = 0;
  p->ran = p->n_steps;
  for (int i = 0; i < p->n_steps; i++) {
    const sc_step *st = &p->steps[i];
    float *out = ref(p, st->out);
    if (st->entry) {
      sc_io io = {.ids = st->ids == SC_NONE ? NULL : p->tokens + st->ids, .embeds = ref(p, st->embeds),
                  .n = st->n, .pos = st->pos, .step = st->step, .out = out, .hidden_out = ref(p, st->hidden)};
      if (rt_call(s, st->entry, &io, err)) return err->code;
    }
    int32_t *tok = st->sample == SC_NONE ? NULL : &p->tokens[st->token];
    if (tok) {
      const sc_step_sampler *sp = &p->samplers[st->sample];
      if (sc_sample(sp->smp, out, st->vocab, sp->history, sp->n_history, sp->suppress, sp->n_suppress, tok, err))
        return err->code;
    }
    if (i == p->mark) p->mark_s = now();
    if (tok && st->stop != SC_NONE && *tok == st->stop) {
      p->ran = i + 1;
      break;
    }
  }
  return SC_OK;
}

int rt_run_steps(sc_session *s, sc_step_prog *p, sc_error *err) {
  const sc_backend_i *be = s->m->be;
  return be->run_steps ? be->run_steps(s, p, err) : rt_steps_host(s, p, err);
}
