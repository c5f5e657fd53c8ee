/*
 * backend_cpu.c — the host backend: entry points run in this process on
 * the session's state block (KV caches), scratch arena and kernel threads,
 * all in host memory; the weights are read where model.c mapped them.
 * It samples nowhere but on the host, so its sampling hooks are NULL, and
 * runs a step program as a loop of calls and draws (rt_steps_host).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend.h"
#include "pool.h"

static void *alloc64(size_t n) {
  void *p = NULL;
  if (posix_memalign(&p, 64, n ? n : 64)) return NULL;
  memset(p, 0, n ? n : 64);
  return p;
}

/* The state block (KV caches, recurrent states): anonymous pages, zero
 * until written, so a session holds the memory of the positions it used,
 * not its whole max_context; a reset hands the pages back (on Linux,
 * private anonymous pages read back as zeros after MADV_DONTNEED) instead
 * of writing zeros over all of it, which for a 0.6B talker's 470 MB cost
 * more than a frame. */
static void *state_alloc(size_t n) {
  void *p = mmap(NULL, n ? n : 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void state_zero(void *p, size_t n) {
#ifdef __linux__
  if (n && !madvise(p, n, MADV_DONTNEED)) return;
#endif
  memset(p, 0, n);
}

static int cpu_model_open(sc_model *m, sc_error *err) {
  (void)m, (void)err;
  return SC_OK;
}

static void cpu_model_close(sc_model *m) { (void)m; }

/* An LM's calls from this many tokens on take bf16 activations (below). */
#define BF16_ACT_MIN_T 16

static int cpu_session_open(sc_session *s, sc_error *err) {
  const sc_model *m = s->m;
  s->state = state_alloc((size_t)m->d->state_bytes);
  s->scratch = alloc64(m->scratch_max);
  if (!s->state || !s->scratch)
    return sc_fail(err, SC_ERUNTIME, "out of memory allocating a session (%llu bytes of state)",
                   (unsigned long long)m->d->state_bytes);
  /* the session's kernel threads: created here, once, joined at close */
  if (m->threads > 1 && !(s->kctx.pool = sc_pool_new(m->threads)))
    return sc_fail(err, SC_ERUNTIME, "cannot start %d kernel threads (hint: open the model "
                   "with fewer threads)", m->threads);
  if (sc_kernels_init(&s->K, &s->kctx)) /* SPEECHC_ISA names kernels that cannot run */
    return sc_fail(err, SC_ERUNTIME, "%s", s->kctx.err);
  /* bf16 weights may meet activations rounded to bf16 (AMX tiles or
   * AVX512-BF16, kernels.h), as torch's bf16 matmuls and llama.cpp's bf16
   * dots do.  A codec decoder: in every call, so that a frame decoded
   * alone has the bits of a whole call; its gate is the waveform's SNR
   * against f32 (test_codec).  Every other model: only in calls of at
   * least BF16_ACT_MIN_T tokens (prefill, where the products are the
   * work); decode keeps f32 activations, bit for bit the f32 dot, and the
   * batched step (rowwise) never takes it.  SPEECHC_BF16_ACT picks the
   * engine: unset or "auto" the best this CPU runs, "amx" or "avx512bf16"
   * that one (refused where it cannot run), "off" f32 activations
   * everywhere. */
  const char *e = getenv("SPEECHC_BF16_ACT");
  const int want = sc_bf16act_setting(e);
  if (want < 0)
    return sc_fail(err, SC_EUSAGE, "SPEECHC_BF16_ACT=%s: expected auto, amx, avx512bf16 or off", e);
  if (want > SC_BF16ACT_BEST && sc_bf16act_engine(want) != want)
    return sc_fail(err, SC_ERUNTIME, "SPEECHC_BF16_ACT=%s: this CPU (or this build) cannot run it", e);
  s->kctx.bf16_act = want;
  s->kctx.bf16_act_min_t = strcmp(m->d->family, "codec") ? BF16_ACT_MIN_T : 0;
  return SC_OK;
}

static void cpu_session_close(sc_session *s) {
  sc_pool_free(s->kctx.pool);
  sc_kernel_ctx_free(&s->kctx);
  if (s->state) munmap(s->state, s->m->d->state_bytes ? (size_t)s->m->d->state_bytes : 64);
  free(s->scratch);
}

static void cpu_session_reset(sc_session *s) { state_zero(s->state, (size_t)s->m->d->state_bytes); }

static int cpu_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err) {
  sc_kernel_ctx_clear(&s->kctx);
  int rc = e->fn(&s->K, s->m->W, s->state, s->scratch, io);
  if (rc || s->kctx.failed)
    return sc_fail(err, SC_ERUNTIME, "%s: %s", e->name, s->kctx.failed ? s->kctx.err : "failed");
  return SC_OK;
}

static unsigned long long cpu_state_base(const sc_session *s) { return (unsigned long long)(uintptr_t)s->state; }

static int cpu_state_read(const sc_session *s, size_t off, size_t bytes, void *out, sc_error *err) {
  (void)err;
  memcpy(out, s->state + off, bytes);
  return SC_OK;
}

const sc_backend_i rt_backend_cpu = {
    .version = SC_BACKEND_VERSION,
    .target = "cpu",
    .model_open = cpu_model_open,
    .model_close = cpu_model_close,
    .session_open = cpu_session_open,
    .session_close = cpu_session_close,
    .session_reset = cpu_session_reset,
    .call = cpu_call,
    .state_base = cpu_state_base,
    .state_read = cpu_state_read,
    .run_steps = rt_steps_host,
};
