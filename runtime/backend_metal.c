/*
 * backend_metal.c — running a model built with --target metal, over the
 * Metal operations of metal_dev.h: Apple's framework through metal_rt.m on
 * macOS, or a stand-in named by SPEECHC_LIBMETAL (the tests' CPU emulator,
 * tests/emu/metal_emu.c).
 *
 *   model    the default GPU; the descriptor's .metallib (built with the
 *            model on a Mac with Apple's toolchain) or else its MSL compiled
 *            once into a library (the framework caches compiled shaders),
 *            a pipeline per kernel name; the mmapped weight file wrapped as a buffer
 *            without a copy (the page-aligned range around the weights).
 *   session  shared buffers: the state (KV caches; zeroed at reset), the
 *            scratch of the largest entry, and an io block [out |
 *            hidden_out | sc_device_io | ids | embeds | hidden_in | row_pos
 *            | row_state].  Memory is unified: inputs are written into the
 *            io block and outputs read from it, nothing is copied.
 *   call     one command buffer: the entry function encodes its kernels
 *            (K->launch: each pointer argument is found in one of the
 *            buffers above and bound at its offset), commit, wait, then the
 *            header says whether a kernel failed.
 *
 * Rows placed in other sessions' state blocks (sc_io.row_state: the
 * batched steps) are reached through GPU addresses: a session's state base
 * (state_base) is its buffer's GPU address, so a row's offset leads from
 * the calling session's block to the other's, and every buffer a call
 * reaches that way is made resident for it (use).  The model keeps its
 * sessions' state buffers for that lookup.
 *
 * The device sampler is CUDA's alone (it keeps a double sum, which MSL
 * does not have): tokens are drawn on the host from the logits, which
 * cross once per call.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "metal_dev.h"

#ifdef __APPLE__
const sc_metal_api *sc_metal_api_get(void); /* metal_rt.m */
#endif

/* A buffer and the host range it covers (the entry functions' device
 * addresses are these pointers: the CPU's view of shared memory), and its
 * GPU address. */
typedef struct MtRegion {
  void *buf;
  unsigned char *base;
  size_t bytes;
  uint64_t gpu;
} MtRegion;

typedef struct MtModel {
  const sc_metal_api *api;
  pthread_mutex_t lock;      /* states */
  MtRegion *states;          /* the open sessions' state buffers */
  int n_states, cap_states;
  void *dl;                  /* the stand-in, when one is loaded */
  void *dev, *lib;
  void **pipe;               /* [n_kernels] */
  int *n_bufs;               /* [n_kernels] buffer arguments (io first) */
  void *wbuf;                /* the weights, wrapped */
  unsigned char *wbase;      /* its first byte (page-aligned, <= m->W) */
  size_t wbytes;
  uint64_t wgpu;
  char device_name[128];
  size_t io_out, io_hidden, io_ids, io_embeds, io_hin, io_rows;
} MtModel;

enum { R_WEIGHTS, R_STATE, R_SCRATCH, R_IO, R_COUNT };

typedef struct MtSession {
  sc_kernel_ctx kctx;        /* first: K->ctx points here for K->error */
  MtModel *mm;
  const sc_model_desc *d;
  MtRegion r[R_COUNT];
  uint64_t io_gpu;           /* the io block's GPU address */
  size_t off_out, off_hidden, off_hdr, off_ids, off_embeds, off_hin, off_row_pos, off_row_state, io_bytes;
  void *cmd;                 /* the command list being encoded */
  long long dispatches;
} MtSession;

#define ALIGN256(x) (((x) + 255) & ~(size_t)255)

static void mt_model_close(sc_model *m) {
  MtModel *mm = m->be_data;
  if (!mm) return;
  const sc_metal_api *a = mm->api;
  if (a) {
    if (mm->pipe)
      for (int k = 0; k < m->d->n_kernels; k++)
        if (mm->pipe[k]) a->pipeline_free(mm->pipe[k]);
    if (mm->lib) a->library_free(mm->lib);
    if (mm->wbuf) a->buffer_free(mm->wbuf);
    if (mm->dev) a->close(mm->dev);
  }
  /* a stand-in stays loaded, as a driver does */
  pthread_mutex_destroy(&mm->lock);
  free(mm->states);
  free(mm->pipe);
  free(mm->n_bufs);
  free(mm);
  m->be_data = NULL;
}

static int api_open(MtModel *mm, const char *model, sc_error *err) {
  const char *env = getenv("SPEECHC_LIBMETAL");
  if (env && *env) {
    if (!(mm->dl = dlopen(env, RTLD_NOW | RTLD_LOCAL)))
      return sc_fail(err, SC_ERUNTIME, "%s: SPEECHC_LIBMETAL=%s cannot be loaded: %s", model, env, dlerror());
    sc_metal_api_fn get = (sc_metal_api_fn)dlsym(mm->dl, SC_METAL_API_SYMBOL);
    if (!get || !(mm->api = get()))
      return sc_fail(err, SC_ERUNTIME, "%s: SPEECHC_LIBMETAL=%s has no %s", model, env, SC_METAL_API_SYMBOL);
  } else {
#ifdef __APPLE__
    mm->api = sc_metal_api_get();
#else
    return sc_fail(err, SC_ERUNTIME, "%s: no Metal device: this model was built with --target metal, which runs "
                   "on macOS with an Apple GPU (hint: rebuild with --target cpu, or --target cuda for an "
                   "NVIDIA GPU)", model);
#endif
  }
  if (mm->api->version != SC_METAL_API_VERSION)
    return sc_fail(err, SC_ERUNTIME, "%s: the Metal layer has interface version %d, this runtime calls %d", model,
                   mm->api->version, SC_METAL_API_VERSION);
  return SC_OK;
}

/* Buffer arguments of kernel `name` in the MSL: its [[buffer(i)]]
 * parameters but the last (the token count). */
static int count_buffers(const char *src, const char *name) {
  char pat[160];
  snprintf(pat, sizeof pat, "kernel void %s(", name);
  const char *p = strstr(src, pat), *end = p ? strstr(p, ") {") : NULL;
  if (!p || !end) return -1;
  int n = 0;
  for (const char *q = p; (q = strstr(q, "[[buffer(")) && q < end; q++) n++;
  return n - 1;
}

static int mt_model_open(sc_model *m, sc_error *err) {
  const sc_model_desc *d = m->d;
  if (!d->device_source || !d->kernel_names || d->n_kernels < 1)
    return sc_fail(err, SC_EINPUT, "%s: a metal model without its kernels' source (hint: rebuild)", m->path);
  MtModel *mm = calloc(1, sizeof *mm);
  if (!mm || !(mm->pipe = calloc((size_t)d->n_kernels, sizeof *mm->pipe)) ||
      !(mm->n_bufs = calloc((size_t)d->n_kernels, sizeof *mm->n_bufs))) {
    if (mm) free(mm->pipe);
    free(mm);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  m->be_data = mm;
  pthread_mutex_init(&mm->lock, NULL);
  if (api_open(mm, m->path, err)) return err->code;
  const sc_metal_api *a = mm->api;
  char why[1024] = "";
  if (!(mm->dev = a->open(mm->device_name, sizeof mm->device_name, why, sizeof why)))
    return sc_fail(err, SC_ERUNTIME, "%s: no Metal device: %s (hint: rebuild with --target cpu)", m->path, why);
  /* the .metallib built with the model when there is one, else the source */
  if (d->device_code_bytes && a->library_data)
    mm->lib = a->library_data(mm->dev, d->device_code, (size_t)d->device_code_bytes, why, sizeof why);
  if (!mm->lib && !(mm->lib = a->library_new(mm->dev, d->device_source, why, sizeof why)))
    return sc_fail(err, SC_ERUNTIME, "%s: compiling the model's Metal kernels on %s: %s (hint: rebuild with the "
                   "speechc that runs it)", m->path, mm->device_name, why);
  for (int k = 0; k < d->n_kernels; k++) {
    if ((mm->n_bufs[k] = count_buffers(d->device_source, d->kernel_names[k])) < 1 ||
        !(mm->pipe[k] = a->pipeline_new(mm->dev, mm->lib, d->kernel_names[k], why, sizeof why)))
      return sc_fail(err, SC_EINPUT, "%s: kernel %s is missing from the model's Metal source%s%s (hint: rebuild)",
                     m->path, d->kernel_names[k], why[0] ? ": " : "", why);
  }
  /* the weights: the whole pages around them, as the file is mapped */
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char *W = (unsigned char *)m->W;
  mm->wbase = (unsigned char *)((uintptr_t)W & ~(uintptr_t)(page - 1));
  mm->wbytes = ((size_t)(W - mm->wbase) + (size_t)d->weight_bytes + page - 1) / page * page;
  if (!mm->wbytes) mm->wbytes = page;
  if (!(mm->wbuf = a->buffer_wrap(mm->dev, mm->wbase, mm->wbytes, &mm->wgpu, why, sizeof why)))
    return sc_fail(err, SC_ERUNTIME, "%s: the weights (%zu MB) as a Metal buffer on %s: %s", m->path,
                   mm->wbytes >> 20, mm->device_name, why);

  /* the io block's regions, sized for the largest call of any entry */
  for (int i = 0; i < d->n_entries; i++) {
    const sc_entry *e = &d->entries[i];
    if (rt_out_len(e, e->max_tokens) * 4 > mm->io_out) mm->io_out = rt_out_len(e, e->max_tokens) * 4;
    if (rt_hidden_len(e, e->max_tokens) * 4 > mm->io_hidden) mm->io_hidden = rt_hidden_len(e, e->max_tokens) * 4;
    if (rt_ids_len(e, e->max_tokens) * 4 > mm->io_ids) mm->io_ids = rt_ids_len(e, e->max_tokens) * 4;
    if ((size_t)e->max_tokens > mm->io_rows) mm->io_rows = (size_t)e->max_tokens;
    if (e->input == SC_IN_EMBEDS && (size_t)e->max_tokens * d->hidden * 4 > mm->io_embeds)
      mm->io_embeds = (size_t)e->max_tokens * d->hidden * 4;
  }
  mm->io_hin = mm->io_rows * (size_t)d->hidden * 4; /* hidden_in: a row per input row */
  return SC_OK;
}

/* K->launch: one dispatch into the session's command list; every pointer
 * argument (io first) is found in the session's buffers, the last
 * argument is the token count. */
static int mt_launch(void *ctx, int kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                     unsigned bz, unsigned smem, void **args) {
  MtSession *c = ctx;
  MtModel *mm = c->mm;
  if (kernel < 0 || kernel >= c->d->n_kernels || gz != 1 || by != 1 || bz != 1 || smem) {
    snprintf(c->kctx.err, sizeof c->kctx.err, "launch of kernel %d: not a launch this backend makes", kernel);
    c->kctx.failed = 1;
    return 1;
  }
  const int n = mm->n_bufs[kernel];
  void *bufs[24];
  size_t offs[24];
  if (n > 24) {
    snprintf(c->kctx.err, sizeof c->kctx.err, "%s: %d buffers", c->d->kernel_names[kernel], n);
    c->kctx.failed = 1;
    return 1;
  }
  for (int i = 0; i < n; i++) {
    const unsigned char *p = *(unsigned char *const *)args[i];
    int r = 0;
    while (r < R_COUNT && !(c->r[r].buf && p >= c->r[r].base && p < c->r[r].base + c->r[r].bytes)) r++;
    if (r == R_COUNT) {
      snprintf(c->kctx.err, sizeof c->kctx.err, "%s: argument %d is in none of the session's buffers",
               c->d->kernel_names[kernel], i);
      c->kctx.failed = 1;
      return 1;
    }
    bufs[i] = c->r[r].buf;
    offs[i] = (size_t)(p - c->r[r].base);
  }
  mm->api->dispatch(c->cmd, mm->pipe[kernel], gx, gy, bx, n, bufs, offs, *(const int *)args[n]);
  c->dispatches++;
  return 0;
}

static void mt_session_close(sc_session *s) {
  MtSession *c = s->be_data;
  if (!c) return;
  MtModel *mm = c->mm;
  const sc_metal_api *a = mm->api;
  pthread_mutex_lock(&mm->lock);
  for (int i = 0; i < mm->n_states; i++)
    if (mm->states[i].buf == c->r[R_STATE].buf) mm->states[i] = mm->states[--mm->n_states];
  pthread_mutex_unlock(&mm->lock);
  for (int r = R_STATE; r < R_COUNT; r++)
    if (c->r[r].buf) a->buffer_free(c->r[r].buf);
  sc_kernel_ctx_free(&c->kctx);
  free(c);
  s->be_data = NULL;
}

static void mt_session_reset(sc_session *s) {
  MtSession *c = s->be_data;
  memset(c->r[R_STATE].base, 0, c->r[R_STATE].bytes);
}

static int mt_session_open(sc_session *s, sc_error *err) {
  sc_model *m = s->m;
  MtModel *mm = m->be_data;
  const sc_model_desc *d = m->d;
  MtSession *c = calloc(1, sizeof *c);
  if (!c) return sc_fail(err, SC_ERUNTIME, "out of memory");
  s->be_data = c;
  c->mm = mm;
  c->d = d;
  c->r[R_WEIGHTS] = (MtRegion){mm->wbuf, mm->wbase, mm->wbytes, mm->wgpu};
  c->off_out = 0;
  c->off_hidden = ALIGN256(mm->io_out);
  c->off_hdr = c->off_hidden + ALIGN256(mm->io_hidden);
  c->off_ids = ALIGN256(c->off_hdr + sizeof(sc_device_io));
  c->off_embeds = ALIGN256(c->off_ids + mm->io_ids);
  c->off_hin = ALIGN256(c->off_embeds + mm->io_embeds);
  c->off_row_pos = ALIGN256(c->off_hin + mm->io_hin);
  c->off_row_state = ALIGN256(c->off_row_pos + mm->io_rows * sizeof(int));
  c->io_bytes = ALIGN256(c->off_row_state + mm->io_rows * sizeof(long long));
  const size_t sizes[R_COUNT] = {0, d->state_bytes ? (size_t)d->state_bytes : 256,
                                 m->scratch_max ? m->scratch_max : 256, c->io_bytes};
  const char *what[R_COUNT] = {"", "the state (KV caches)", "the scratch", "the io block"};
  char why[512] = "";
  for (int r = R_STATE; r < R_COUNT; r++) {
    void *contents = NULL;
    uint64_t gpu = 0;
    if (!(c->r[r].buf = mm->api->buffer_new(mm->dev, sizes[r], &contents, &gpu, why, sizeof why)))
      return sc_fail(err, SC_ERUNTIME, "%s: cannot allocate %s of a session on %s (%zu bytes): %s", m->path,
                     what[r], mm->device_name, sizes[r], why);
    c->r[r].base = contents;
    c->r[r].bytes = sizes[r];
    c->r[r].gpu = gpu;
    if (r == R_IO) c->io_gpu = gpu;
  }
  pthread_mutex_lock(&mm->lock);
  if (mm->n_states == mm->cap_states) {
    int cap = mm->cap_states ? 2 * mm->cap_states : 16;
    MtRegion *ns = realloc(mm->states, (size_t)cap * sizeof *ns);
    if (ns) mm->states = ns, mm->cap_states = cap;
  }
  const int listed = mm->n_states < mm->cap_states;
  if (listed) mm->states[mm->n_states++] = c->r[R_STATE];
  pthread_mutex_unlock(&mm->lock);
  if (!listed) return sc_fail(err, SC_ERUNTIME, "out of memory");
  if (sc_kernels_init(&s->K, &c->kctx)) /* SPEECHC_ISA names kernels that cannot run */
    return sc_fail(err, SC_ERUNTIME, "%s", c->kctx.err);
  s->K.launch = mt_launch;
  s->K.device_io = c->r[R_IO].base + c->off_hdr;
  mt_session_reset(s);
  return SC_OK;
}

/* The error a kernel recorded in header h, as the message of call `what`. */
static int device_error(const MtSession *c, const sc_device_io *h, const char *what, sc_error *err) {
  if (h->err_kernel <= 0 || h->err_kernel > c->d->n_kernels) return SC_OK;
  const char *k = c->d->kernel_names[h->err_kernel - 1];
  if (h->err_what == SC_DEV_ERR_NONFINITE)
    return sc_fail(err, SC_ERUNTIME, "%s: --check-numerics: NaN or inf written by %s at index %d", what, k,
                   h->err_value);
  return sc_fail(err, SC_ERUNTIME, "%s: %s: id %d is outside its table", what, k, h->err_value);
}

static int mt_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err) {
  MtSession *c = s->be_data;
  MtModel *mm = c->mm;
  const int H = c->d->hidden;
  const int n = io->n;
  const int fits = n >= 1 && n <= e->max_tokens;
  unsigned char *base = c->r[R_IO].base;
  sc_kernel_ctx_clear(&c->kctx);
  /* the state buffers rows placed elsewhere reach (row_state: offsets of
   * GPU addresses from this session's) */
  void *reach[64];
  int n_reach = 0;
  if (fits && io->row_state)
    for (int t = 0; t < n; t++) {
      if (!io->row_state[t]) continue;
      const uint64_t at = c->r[R_STATE].gpu + (uint64_t)io->row_state[t];
      void *buf = NULL;
      pthread_mutex_lock(&mm->lock);
      for (int i = 0; i < mm->n_states && !buf; i++)
        if (at >= mm->states[i].gpu && at - mm->states[i].gpu + c->d->state_bytes <= mm->states[i].bytes)
          buf = mm->states[i].buf;
      pthread_mutex_unlock(&mm->lock);
      if (!buf)
        return sc_fail(err, SC_EUSAGE, "%s: row %d is placed at state offset %lld, which is no open session's "
                       "state block", e->name, t, (long long)io->row_state[t]);
      int seen = 0;
      for (int i = 0; i < n_reach; i++) seen |= reach[i] == buf;
      if (!seen && n_reach == (int)(sizeof reach / sizeof reach[0]))
        return sc_fail(err, SC_EUSAGE, "%s: rows of more than %d other sessions in one call", e->name, n_reach);
      if (!seen) reach[n_reach++] = buf;
    }

  sc_device_io *h = (sc_device_io *)(base + c->off_hdr);
  memset(h, 0, sizeof *h);
  h->n = n;
  h->pos = io->pos;
  h->step = io->step;
  if (fits && io->ids) memcpy(base + c->off_ids, io->ids, rt_ids_len(e, n) * 4);
  if (fits && io->embeds && e->input == SC_IN_EMBEDS) memcpy(base + c->off_embeds, io->embeds, (size_t)n * H * 4);
  if (fits && io->hidden_in) memcpy(base + c->off_hin, io->hidden_in, (size_t)n * H * 4);
  if (fits && io->row_pos) {
    memcpy(base + c->off_row_pos, io->row_pos, (size_t)n * sizeof(int));
    h->row_pos = c->io_gpu + c->off_row_pos;
  }
  if (fits && io->row_state) {
    memcpy(base + c->off_row_state, io->row_state, (size_t)n * sizeof(long long));
    h->row_state = c->io_gpu + c->off_row_state;
  }
  /* the device view of the call: host pointers into the shared io block */
  sc_io dio = {
      .ids = (const int *)(base + c->off_ids),
      .embeds = (const float *)(base + c->off_embeds),
      .hidden_in = (const float *)(base + c->off_hin),
      .n = n, .pos = io->pos, .step = io->step,
      .out = (float *)(base + c->off_out),
      .hidden_out = (float *)(base + c->off_hidden),
      .row_pos = io->row_pos ? (const int *)(base + c->off_row_pos) : NULL,
      .row_state = io->row_state ? (const long long *)(base + c->off_row_state) : NULL,
  };
  char why[1024] = "";
  if (!(c->cmd = mm->api->begin(mm->dev, why, sizeof why)))
    return sc_fail(err, SC_ERUNTIME, "%s: a command buffer on %s: %s", e->name, mm->device_name, why);
  for (int i = 0; i < n_reach; i++) mm->api->use(c->cmd, reach[i]);
  int rc = e->fn(&s->K, (unsigned char *)s->m->W, c->r[R_STATE].base, c->r[R_SCRATCH].base, &dio);
  /* the entry's own checks may stop it half-encoded: the list still ends */
  int rd = mm->api->end(c->cmd, why, sizeof why);
  c->cmd = NULL;
  if (rc || c->kctx.failed)
    return sc_fail(err, SC_ERUNTIME, "%s: %s", e->name, c->kctx.failed ? c->kctx.err : "failed");
  if (rd) return sc_fail(err, SC_ERUNTIME, "%s: running on %s: %s", e->name, mm->device_name, why);
  if (device_error(c, h, e->name, err)) return err->code;
  if (io->out && rt_out_len(e, n)) memcpy(io->out, base + c->off_out, rt_out_len(e, n) * 4);
  if (io->hidden_out && e->hidden_cols) memcpy(io->hidden_out, base + c->off_hidden, rt_hidden_len(e, n) * 4);
  return SC_OK;
}

/* The GPU address: what the kernels add a row's offset to. */
static unsigned long long mt_state_base(const sc_session *s) {
  const MtSession *c = s->be_data;
  return c->r[R_STATE].gpu;
}

static int mt_state_read(const sc_session *s, size_t off, size_t bytes, void *out, sc_error *err) {
  const MtSession *c = s->be_data;
  if (off > c->r[R_STATE].bytes || bytes > c->r[R_STATE].bytes - off)
    return sc_fail(err, SC_EUSAGE, "%s: reading %zu bytes of state at %zu: the state has %zu", s->m->path, bytes,
                   off, c->r[R_STATE].bytes);
  memcpy(out, c->r[R_STATE].base + off, bytes);
  return SC_OK;
}

static const char *mt_device_name(const sc_model *m) {
  const MtModel *mm = m->be_data;
  return mm ? mm->device_name : NULL;
}

long long rt_metal_dispatches(const sc_session *s) {
  if (!s || !s->m || s->m->be != &rt_backend_metal || !s->be_data) return -1;
  return ((const MtSession *)s->be_data)->dispatches;
}

const sc_backend_i rt_backend_metal = {
    .version = SC_BACKEND_VERSION,
    .target = "metal",
    .model_open = mt_model_open,
    .model_close = mt_model_close,
    .session_open = mt_session_open,
    .session_close = mt_session_close,
    .session_reset = mt_session_reset,
    .call = mt_call,
    .state_base = mt_state_base,
    .state_read = mt_state_read,
    .can_sample = NULL,       /* the host draws */
    .call_sampled = NULL,
    .sample_history = NULL,
    .fetch_logits = NULL,
    .run_steps = NULL,        /* the host loop: a command buffer per call */
    .device_name = mt_device_name,
};
