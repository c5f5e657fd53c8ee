/*
 * cuda_rt.c — running a model built with --target cuda.
 *
 * The CUDA driver API is opened with dlopen (libcuda.so.1, or the file
 * SPEECHC_LIBCUDA names), so the runtime builds and links without CUDA and
 * says "no CUDA driver found" / "no CUDA device" when asked for one.
 *
 *   model    primary context of device SPEECHC_CUDA_DEVICE (default 0),
 *            the descriptor's PTX loaded as one module, a CUfunction per
 *            kernel name, the weight file's data section uploaded once.
 *   session  its own stream, device state (KV caches; zeroed at reset),
 *            scratch of the largest entry, and an io block: a pinned host
 *            mirror of [out | hidden_out | sc_device_io | ids | embeds |
 *            hidden_in | row_pos | row_state] and its device copy.
 *   call     inputs and the sc_device_io header go up in one copy, the
 *            entry function launches its kernels (K->launch), the header
 *            and outputs come back, one synchronisation.  The second call
 *            of an entry with the same token count is captured as a CUDA
 *            graph, later ones replay it: kernels read the position and
 *            step from the device header, so their arguments depend only
 *            on (entry, n).  The entry function still runs first on every
 *            call, with launching switched off, for its checks (context
 *            full, step range).  SPEECHC_CUDA_GRAPHS=0 turns graphs off.
 *   sampled  a call followed by the artifact's sampler kernel (sc_abi.h,
 *            SC_SAMPLE_KERNEL) on its logits: only the token (and the
 *            sampler's generator state) comes back; the logits stay on the
 *            device until sc_logits asks for them.
 *   steps    a step program (backend.h), e.g. a whole Qwen3-TTS frame:
 *            every step has its own device header in a program block,
 *            the sampler kernel draws each token into a token slot that
 *            later steps read as ids, and the whole program is one CUDA
 *            graph from its second run on: one copy up (the samplers'
 *            masks, the IN buffers, headers, samplers, token slots), one
 *            copy down (headers, samplers, tokens, OUT buffers) and one
 *            synchronisation.  Steps up to the last one the device
 *            cannot run (a draw it cannot make) run on the host first,
 *            call by call, the rest on the device as above.
 *
 * Input embeddings (and hidden_in) are rows of the descriptor's `hidden`
 * floats: the width every embedding entry point of today's families takes.
 *
 * An emulator for tests (tests/emu) may stand in for the driver: when the
 * library exports scEmuModuleLoadSource, it gets the CUDA source instead of
 * the PTX.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

enum { CUDA_ERROR_NO_DEVICE = 100, CU_JIT_ERROR_LOG_BUFFER = 5, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
       CU_STREAM_NON_BLOCKING = 1, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1 };

/* The driver entry points speechc uses, by their exported (versioned) names. */
#define CU_FUNCS(X)                                                                               \
  X(cuInit, CUresult, (unsigned))                                                                 \
  X(cuGetErrorName, CUresult, (CUresult, const char **))                                          \
  X(cuGetErrorString, CUresult, (CUresult, const char **))                                        \
  X(cuDeviceGetCount, CUresult, (int *))                                                          \
  X(cuDeviceGet, CUresult, (CUdevice *, int))                                                     \
  X(cuDeviceGetName, CUresult, (char *, int, CUdevice))                                           \
  X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))                                  \
  X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice))                                           \
  X(cuCtxSetCurrent, CUresult, (CUcontext))                                                       \
  X(cuModuleLoadDataEx, CUresult, (CUmodule *, const void *, unsigned, int *, void **))           \
  X(cuModuleUnload, CUresult, (CUmodule))                                                         \
  X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                        \
  X(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                                             \
  X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                        \
  X(cuMemAllocHost_v2, CUresult, (void **, size_t))                                               \
  X(cuMemFreeHost, CUresult, (void *))                                                            \
  X(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr, const void *, size_t))                               \
  X(cuMemcpyHtoDAsync_v2, CUresult, (CUdeviceptr, const void *, size_t, CUstream))                \
  X(cuMemcpyDtoHAsync_v2, CUresult, (void *, CUdeviceptr, size_t, CUstream))                      \
  X(cuMemsetD8Async, CUresult, (CUdeviceptr, unsigned char, size_t, CUstream))                    \
  X(cuLaunchKernel, CUresult, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,      \
                               unsigned, unsigned, CUstream, void **, void **))                   \
  X(cuStreamCreate, CUresult, (CUstream *, unsigned))                                             \
  X(cuStreamDestroy_v2, CUresult, (CUstream))                                                     \
  X(cuStreamSynchronize, CUresult, (CUstream))                                                    \
  X(cuStreamBeginCapture_v2, CUresult, (CUstream, int))                                           \
  X(cuStreamEndCapture, CUresult, (CUstream, CUgraph *))                                          \
  X(cuGraphInstantiateWithFlags, CUresult, (CUgraphExec *, CUgraph, unsigned long long))          \
  X(cuGraphLaunch, CUresult, (CUgraphExec, CUstream))                                             \
  X(cuGraphExecDestroy, CUresult, (CUgraphExec))                                                  \
  X(cuGraphDestroy, CUresult, (CUgraph))

typedef struct CuDriver {
  void *dl;
#define X(name, ret, args) ret(*name) args;
  CU_FUNCS(X)
#undef X
  CUresult (*emu_load_source)(CUmodule *, const char *);
} CuDriver;

typedef struct CuModel {
  CuDriver drv;
  CUdevice dev;
  CUcontext ctx;
  int have_ctx;
  CUmodule mod;
  CUfunction *fn;            /* [n_kernels] */
  CUdeviceptr W;             /* weights */
  char device_name[128];
  size_t io_out, io_hidden, io_ids, io_embeds, io_hin, io_rows; /* region sizes, bytes */
  int sample_kernel;         /* index of SC_SAMPLE_KERNEL in kernel_names, -1: none */
} CuModel;

#define CU_MAX_GRAPHS 64
enum { GRAPH_CALL, GRAPH_SAMPLED, GRAPH_PROG };
typedef struct CuGraph {
  const sc_entry *e;
  int n, kind, seen;         /* kind: GRAPH_* */
  uint64_t key;              /* GRAPH_PROG: the program's shape (prog_layout) */
  CUgraph graph;
  CUgraphExec exec;
} CuGraph;

/* The device block of step programs (cu_run_steps), grown as needed; its
 * layout is computed per program (ProgLayout). */
typedef struct CuProg {
  size_t bytes;
  CUdeviceptr dev;
  unsigned char *host;       /* pinned mirror */
} CuProg;

enum { MODE_DIRECT, MODE_CAPTURE, MODE_REPLAY };

typedef struct CuSession {
  sc_kernel_ctx kctx;        /* first: K->ctx points here for K->error */
  CuModel *cm;
  const sc_model_desc *d;
  CUstream stream;
  CUdeviceptr state, scratch, io;
  unsigned char *host_io;    /* pinned mirror of the io block */
  size_t io_bytes, off_out, off_hidden, off_hdr, off_smp, off_tok, off_ids, off_embeds, off_hin;
  size_t off_row_pos, off_row_state; /* sc_io.row_pos [max_tokens] ints, row_state [max_tokens] */
  CuGraph graphs[CU_MAX_GRAPHS];
  int n_graphs, use_graphs, mode;
  CuProg prog;
  CUdeviceptr seen;          /* [vocab] bytes: cu_sample_history's mask */
  int seen_ok;               /* set since the last reset */
  size_t pending_out;        /* bytes of logits left on the device by a sampled call */
  float *pending_dst;        /* where sc_logits wants them */
  long long launches;        /* kernels launched or captured (for tests) */
  long long syncs;           /* host round trips: stream synchronisations (for tests) */
} CuSession;

#define ALIGN256(x) (((x) + 255) & ~(size_t)255)

static const char *cu_err(const CuDriver *drv, CUresult r) {
  static _Thread_local char buf[192];
  const char *name = NULL, *text = NULL;
  if (drv->cuGetErrorName) drv->cuGetErrorName(r, &name);
  if (drv->cuGetErrorString) drv->cuGetErrorString(r, &text);
  snprintf(buf, sizeof buf, "%s (%d): %s", name ? name : "CUDA error", r, text ? text : "unknown");
  return buf;
}

static int driver_open(CuDriver *drv, const char *model, sc_error *err) {
  const char *env = getenv("SPEECHC_LIBCUDA");
  const char *lib = env && *env ? env : "libcuda.so.1";
  drv->dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!drv->dl)
    return sc_fail(err, SC_ERUNTIME, "%s: no CUDA driver found (%s: %s); this model was built with "
                   "--target cuda (hint: run it on a machine with an NVIDIA GPU and driver, or "
                   "rebuild with --target cpu)", model, lib, dlerror());
#define X(name, ret, args)                                                                      \
  if (!(drv->name = (ret(*) args)dlsym(drv->dl, #name)))                                       \
    return sc_fail(err, SC_ERUNTIME, "%s: the CUDA driver %s lacks %s (hint: update the NVIDIA " \
                   "driver)", model, lib, #name);
  CU_FUNCS(X)
#undef X
  drv->emu_load_source = (CUresult(*)(CUmodule *, const char *))dlsym(drv->dl, "scEmuModuleLoadSource");
  return SC_OK;
}

static void cu_model_close(sc_model *m) {
  CuModel *cm = m->be_data;
  if (!cm) return;
  CuDriver *drv = &cm->drv;
  if (cm->have_ctx) {
    drv->cuCtxSetCurrent(cm->ctx);
    if (cm->W) drv->cuMemFree_v2(cm->W);
    if (cm->mod) drv->cuModuleUnload(cm->mod);
    drv->cuDevicePrimaryCtxRelease_v2(cm->dev);
  }
  /* libcuda stays loaded: unloading a driver library is not supported */
  free(cm->fn);
  free(cm);
  m->be_data = NULL;
}

static int cu_model_open(sc_model *m, sc_error *err) {
  const sc_model_desc *d = m->d;
  if (!d->device_code || !d->kernel_names || d->n_kernels < 1)
    return sc_fail(err, SC_EINPUT, "%s: a cuda model without device code (hint: rebuild)", m->path);
  CuModel *cm = calloc(1, sizeof *cm);
  if (!cm || !(cm->fn = calloc((size_t)d->n_kernels, sizeof *cm->fn))) {
    free(cm);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  m->be_data = cm;
  CuDriver *drv = &cm->drv;
  if (driver_open(drv, m->path, err)) return err->code;
  CUresult r = drv->cuInit(0);
  int count = 0;
  if (!r) r = drv->cuDeviceGetCount(&count);
  if (r == CUDA_ERROR_NO_DEVICE || (!r && count == 0))
    return sc_fail(err, SC_ERUNTIME, "%s: no CUDA device: the driver is installed but finds no GPU "
                   "(hint: check nvidia-smi and CUDA_VISIBLE_DEVICES, or rebuild with --target cpu)", m->path);
  if (r)
    return sc_fail(err, SC_ERUNTIME, "%s: no CUDA device: the driver failed to start: %s (hint: check the NVIDIA "
                   "driver with nvidia-smi, or rebuild with --target cpu)", m->path, cu_err(drv, r));
  const char *ds = getenv("SPEECHC_CUDA_DEVICE");
  int index = ds && *ds ? atoi(ds) : 0;
  if (index < 0 || index >= count)
    return sc_fail(err, SC_EUSAGE, "SPEECHC_CUDA_DEVICE=%s: this machine has %d CUDA device%s",
                   ds ? ds : "", count, count == 1 ? "" : "s");
  if ((r = drv->cuDeviceGet(&cm->dev, index)) || (r = drv->cuDevicePrimaryCtxRetain(&cm->ctx, cm->dev)))
    return sc_fail(err, SC_ERUNTIME, "%s: cannot open CUDA device %d: %s", m->path, index, cu_err(drv, r));
  cm->have_ctx = 1;
  drv->cuDeviceGetName(cm->device_name, sizeof cm->device_name, cm->dev);
  if ((r = drv->cuCtxSetCurrent(cm->ctx)))
    return sc_fail(err, SC_ERUNTIME, "%s: cuCtxSetCurrent: %s", m->path, cu_err(drv, r));

  if (drv->emu_load_source) {
    r = drv->emu_load_source(&cm->mod, d->device_source);
    if (r) return sc_fail(err, SC_ERUNTIME, "%s: the CUDA emulator could not load the source (%d)", m->path, r);
  } else {
    char log[4096] = "";
    int opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *val[2] = {log, (void *)(uintptr_t)sizeof log};
    r = drv->cuModuleLoadDataEx(&cm->mod, d->device_code, 2, opt, val);
    if (r)
      return sc_fail(err, SC_ERUNTIME, "%s: the driver could not load the model's PTX (%s) on %s: %s%s%s "
                     "(hint: the driver may be older than the CUDA toolkit that built the model; "
                     "rebuild with a matching toolkit, or a lower --cuda-arch)", m->path,
                     d->device_arch ? d->device_arch : "?", cm->device_name, cu_err(drv, r),
                     log[0] ? ": " : "", log);
  }
  cm->sample_kernel = -1;
  for (int k = 0; k < d->n_kernels; k++) {
    if ((r = drv->cuModuleGetFunction(&cm->fn[k], cm->mod, d->kernel_names[k])))
      return sc_fail(err, SC_EINPUT, "%s: kernel %s is missing from the device code: %s (hint: rebuild)",
                     m->path, d->kernel_names[k], cu_err(drv, r));
    if (!strcmp(d->kernel_names[k], SC_SAMPLE_KERNEL)) cm->sample_kernel = k;
  }

  size_t wbytes = (size_t)d->weight_bytes;
  if ((r = drv->cuMemAlloc_v2(&cm->W, wbytes ? wbytes : 256)))
    return sc_fail(err, SC_ERUNTIME, "%s: out of device memory for the weights (%zu MB) on %s: %s", m->path,
                   wbytes >> 20, cm->device_name, cu_err(drv, r));
  if (wbytes && (r = drv->cuMemcpyHtoD_v2(cm->W, m->W, wbytes)))
    return sc_fail(err, SC_ERUNTIME, "%s: uploading the weights: %s", m->path, cu_err(drv, r));

  /* the io block's regions, sized for the largest call of any entry */
  for (int i = 0; i < d->n_entries; i++) {
    const sc_entry *e = &d->entries[i];
    if (rt_out_len(e, e->max_tokens) * 4 > cm->io_out) cm->io_out = rt_out_len(e, e->max_tokens) * 4;
    if (rt_hidden_len(e, e->max_tokens) * 4 > cm->io_hidden) cm->io_hidden = rt_hidden_len(e, e->max_tokens) * 4;
    if (rt_ids_len(e, e->max_tokens) * 4 > cm->io_ids) cm->io_ids = rt_ids_len(e, e->max_tokens) * 4;
    if ((size_t)e->max_tokens > cm->io_rows) cm->io_rows = (size_t)e->max_tokens;
    if (e->input == SC_IN_EMBEDS && (size_t)e->max_tokens * d->hidden * 4 > cm->io_embeds)
      cm->io_embeds = (size_t)e->max_tokens * d->hidden * 4;
  }
  cm->io_hin = cm->io_rows * (size_t)d->hidden * 4; /* hidden_in: a row per input row */
  return SC_OK;
}

/* K->launch: the kernel on the session's stream (or nothing when a
 * recorded graph will replay these launches). */
static int cu_launch(void *ctx, int kernel, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                     unsigned by, unsigned bz, unsigned smem, void **args) {
  CuSession *c = ctx;
  c->launches++;
  if (c->mode == MODE_REPLAY) return 0;
  if (kernel < 0 || kernel >= c->d->n_kernels) {
    snprintf(c->kctx.err, sizeof c->kctx.err, "launch of kernel %d: no such kernel", kernel);
    c->kctx.failed = 1;
    return 1;
  }
  CuDriver *drv = &c->cm->drv;
  CUresult r = drv->cuLaunchKernel(c->cm->fn[kernel], gx, gy, gz, bx, by, bz, smem, c->stream, args, NULL);
  if (r) {
    if (!c->kctx.failed)
      snprintf(c->kctx.err, sizeof c->kctx.err, "launch of %s (grid %u x %u x %u, block %u): %s",
               c->d->kernel_names[kernel], gx, gy, gz, bx * by * bz, cu_err(drv, r));
    c->kctx.failed = 1;
    return 1;
  }
  return 0;
}

static void cu_session_close(sc_session *s) {
  CuSession *c = s->be_data;
  if (!c) return;
  CuDriver *drv = &c->cm->drv;
  drv->cuCtxSetCurrent(c->cm->ctx);
  if (c->stream) drv->cuStreamSynchronize(c->stream);
  for (int i = 0; i < c->n_graphs; i++) {
    if (c->graphs[i].exec) drv->cuGraphExecDestroy(c->graphs[i].exec);
    if (c->graphs[i].graph) drv->cuGraphDestroy(c->graphs[i].graph);
  }
  if (c->state) drv->cuMemFree_v2(c->state);
  if (c->scratch) drv->cuMemFree_v2(c->scratch);
  if (c->io) drv->cuMemFree_v2(c->io);
  if (c->host_io) drv->cuMemFreeHost(c->host_io);
  if (c->prog.dev) drv->cuMemFree_v2(c->prog.dev);
  if (c->prog.host) drv->cuMemFreeHost(c->prog.host);
  if (c->seen) drv->cuMemFree_v2(c->seen);
  if (c->stream) drv->cuStreamDestroy_v2(c->stream);
  sc_kernel_ctx_free(&c->kctx);
  free(c);
  s->be_data = NULL;
}

static void cu_session_reset(sc_session *s) {
  CuSession *c = s->be_data;
  CuDriver *drv = &c->cm->drv;
  drv->cuCtxSetCurrent(c->cm->ctx);
  drv->cuMemsetD8Async(c->state, 0, (size_t)c->d->state_bytes ? (size_t)c->d->state_bytes : 256, c->stream);
  drv->cuStreamSynchronize(c->stream);
  c->seen_ok = 0;
}

/* On failure what was made stays in s->be_data for cu_session_close. */
static int cu_session_open(sc_session *s, sc_error *err) {
  sc_model *m = s->m;
  CuModel *cm = m->be_data;
  CuDriver *drv = &cm->drv;
  const sc_model_desc *d = m->d;
  CuSession *c = calloc(1, sizeof *c);
  if (!c) return sc_fail(err, SC_ERUNTIME, "out of memory");
  s->be_data = c;
  c->cm = cm;
  c->d = d;
  const char *g = getenv("SPEECHC_CUDA_GRAPHS");
  c->use_graphs = !(g && !strcmp(g, "0"));
  c->off_out = 0;
  c->off_hidden = ALIGN256(cm->io_out);
  c->off_hdr = c->off_hidden + ALIGN256(cm->io_hidden);
  c->off_smp = c->off_hdr + sizeof(sc_device_io);
  c->off_tok = c->off_smp + sizeof(sc_device_sampler);
  c->off_ids = c->off_tok + 64;
  c->off_embeds = ALIGN256(c->off_ids + cm->io_ids);
  c->off_hin = ALIGN256(c->off_embeds + cm->io_embeds);
  c->off_row_pos = ALIGN256(c->off_hin + cm->io_hin);
  c->off_row_state = ALIGN256(c->off_row_pos + cm->io_rows * sizeof(int));
  c->io_bytes = ALIGN256(c->off_row_state + cm->io_rows * sizeof(long long));
  CUresult r = drv->cuCtxSetCurrent(cm->ctx);
  const char *what = "the stream";
  if (!r) r = drv->cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING);
  if (!r) what = "the state (KV caches)", r = drv->cuMemAlloc_v2(&c->state, d->state_bytes ? (size_t)d->state_bytes : 256);
  if (!r) what = "the scratch", r = drv->cuMemAlloc_v2(&c->scratch, m->scratch_max ? m->scratch_max : 256);
  if (!r) what = "the io block", r = drv->cuMemAlloc_v2(&c->io, c->io_bytes);
  if (!r) what = "the pinned io mirror", r = drv->cuMemAllocHost_v2((void **)&c->host_io, c->io_bytes);
  if (r)
    return sc_fail(err, SC_ERUNTIME, "%s: cannot allocate %s of a session on %s (%llu bytes of state): %s", m->path,
                   what, cm->device_name, (unsigned long long)d->state_bytes, cu_err(drv, r));
  memset(c->host_io, 0, c->io_bytes);
  if (sc_kernels_init(&s->K, &c->kctx)) /* SPEECHC_ISA names kernels that cannot run */
    return sc_fail(err, SC_ERUNTIME, "%s", c->kctx.err);
  s->K.launch = cu_launch;
  s->K.device_io = (void *)(uintptr_t)(c->io + c->off_hdr);
  cu_session_reset(s);
  return SC_OK;
}

static CuGraph *graph_slot(CuSession *c, const sc_entry *e, int n, int kind, uint64_t key) {
  for (int i = 0; i < c->n_graphs; i++)
    if (c->graphs[i].e == e && c->graphs[i].n == n && c->graphs[i].kind == kind && c->graphs[i].key == key)
      return &c->graphs[i];
  if (c->n_graphs == CU_MAX_GRAPHS) return NULL;
  CuGraph *g = &c->graphs[c->n_graphs++];
  memset(g, 0, sizeof *g);
  g->e = e;
  g->n = n;
  g->kind = kind;
  g->key = key;
  return g;
}

/* Run launch(s, arg), which launches kernels through K->launch (and
 * launch_sampler): directly, or recorded into graph slot g on its second
 * use and replayed from then on (launch still runs, with launching off,
 * for its host-side checks).  No graph slot: always directly.  Errors name
 * `what`. */
typedef int (*LaunchFn)(sc_session *s, void *arg);
static int run_launches(sc_session *s, CuGraph *g, LaunchFn launch, void *arg, const char *what, sc_error *err) {
  CuSession *c = s->be_data;
  CuDriver *drv = &c->cm->drv;
  CUresult r = 0;
  c->mode = g && g->exec ? MODE_REPLAY : g && g->seen > 0 ? MODE_CAPTURE : MODE_DIRECT;
  if (g) g->seen++;
  if (c->mode == MODE_CAPTURE &&
      (r = drv->cuStreamBeginCapture_v2(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))) {
    c->mode = MODE_DIRECT; /* capture is an optimisation: run directly */
    g = NULL;
  }
  int rc = launch(s, arg);
  if (c->mode == MODE_CAPTURE) {
    CUgraph graph = NULL;
    r = drv->cuStreamEndCapture(c->stream, &graph);
    if (!r && !rc && !c->kctx.failed && graph && !(r = drv->cuGraphInstantiateWithFlags(&g->exec, graph, 0))) {
      g->graph = graph;
      c->mode = MODE_REPLAY;
    } else {
      if (graph) drv->cuGraphDestroy(graph);
      g->exec = NULL;
      if (r && !rc && !c->kctx.failed) {
        /* the recording failed: never try this one again, run it directly */
        g->seen = -1000000;
        c->mode = MODE_DIRECT;
        rc = launch(s, arg);
      }
    }
  }
  if (!rc && !c->kctx.failed && c->mode == MODE_REPLAY && (r = drv->cuGraphLaunch(g->exec, c->stream))) {
    c->mode = MODE_DIRECT;
    drv->cuStreamSynchronize(c->stream);
    return sc_fail(err, SC_ERUNTIME, "%s: cuGraphLaunch: %s", what, cu_err(drv, r));
  }
  c->mode = MODE_DIRECT;
  if (rc || c->kctx.failed) {
    drv->cuStreamSynchronize(c->stream);
    return sc_fail(err, SC_ERUNTIME, "%s: %s", what, c->kctx.failed ? c->kctx.err : "failed");
  }
  return SC_OK;
}

/* The sampler kernel on n logits: header hdr (errors), token into tok. */
static int launch_sampler(sc_session *s, CUdeviceptr hdr, CUdeviceptr logits, CUdeviceptr smp, CUdeviceptr tok,
                          int n) {
  CuSession *c = s->be_data;
  void *args[] = {&hdr, &logits, &smp, &tok, &n};
  return cu_launch(c, c->cm->sample_kernel, 1, 1, 1, 1024, 1, 1, 0, args);
}

/* The device sampler's generator state back into the host sampler. */
static void sampler_back(sc_sampler *smp, const sc_device_sampler *ds) {
  uint64_t rng[4];
  for (int i = 0; i < 4; i++) rng[i] = ds->rng[i];
  rt_sampler_set_rng(smp, rng);
}

/* The error a kernel recorded in device header h, as the message of the
 * call `what`; SC_OK when none. */
static int device_error(const CuSession *c, const sc_device_io *h, const char *what, sc_error *err) {
  if (h->err_kernel <= 0 || h->err_kernel > c->d->n_kernels) return SC_OK;
  const char *k = c->d->kernel_names[h->err_kernel - 1];
  switch (h->err_what) {
  case SC_DEV_ERR_NONFINITE:
    return sc_fail(err, SC_ERUNTIME, "%s: --check-numerics: NaN or inf written by %s at index %d", what, k,
                   h->err_value);
  case SC_DEV_ERR_LOGIT_NAN:
  case SC_DEV_ERR_LOGIT_INF:
    return sc_fail(err, SC_ERUNTIME, "%s: logits contain %s at index %d (hint: the model produced non-finite "
                   "values; check the weights and the input)", what,
                   h->err_what == SC_DEV_ERR_LOGIT_NAN ? "NaN" : "inf", h->err_value);
  case SC_DEV_ERR_ALL_SUPPRESSED:
    return sc_fail(err, SC_EUSAGE, "%s: %s: every one of the %d tokens is suppressed", what, k, h->err_value);
  case SC_DEV_ERR_SAMPLE_N:
    return sc_fail(err, SC_ERUNTIME, "%s: %s: a draw over %d logits (the device draws from at most %d)", what,
                   k, h->err_value, SC_SAMPLE_MAX);
  default:
    return sc_fail(err, SC_ERUNTIME, "%s: %s: id %d is outside its table", what, k, h->err_value);
  }
}

/* What the device sampler needs of a host sampler; 0 when it cannot draw
 * what this sampler draws (more than SC_SAMPLE_MAX logits). */
static int device_sampler(const sc_sampler *smp, int n, sc_device_sampler *ds) {
  sc_sample_params p;
  uint64_t rng[4];
  memset(ds, 0, sizeof *ds);
  rt_sampler_state(smp, &p, rng);
  for (int i = 0; i < 4; i++) ds->rng[i] = rng[i];
  ds->greedy = p.greedy;
  ds->temperature = p.temperature;
  ds->top_k = p.top_k;
  ds->top_p = p.top_p;
  ds->penalty = 1.0f; /* until a caller gives it a mask */
  ds->ban = -1;
  return p.greedy || p.temperature <= 0 || n <= SC_SAMPLE_MAX;
}

static int cu_can_sample(const sc_session *s, const sc_sampler *smp, int n) {
  const CuSession *c = s->be_data;
  sc_device_sampler ds;
  return c && c->cm->sample_kernel >= 0 && device_sampler(smp, n, &ds);
}

typedef struct CallArgs {
  const sc_entry *e;
  const sc_io *dio;          /* the call, device pointers */
  int sample;                /* then the sampler on io->out */
} CallArgs;

static int call_launches(sc_session *s, void *arg) {
  const CallArgs *a = arg;
  CuSession *c = s->be_data;
  unsigned char *W = (unsigned char *)(uintptr_t)c->cm->W;
  int rc = a->e->fn(&s->K, W, (unsigned char *)(uintptr_t)c->state, (unsigned char *)(uintptr_t)c->scratch, a->dio);
  if (!rc && a->sample)
    rc = launch_sampler(s, c->io + c->off_hdr, c->io + c->off_out, c->io + c->off_smp, c->io + c->off_tok,
                        a->e->out_cols);
  return rc;
}

/* One call of e; with smp, the sampler picks *token from its logits on the
 * device (smp's generator advanced as on the host) and the logits stay
 * there until cu_fetch_logits. */
static int cuda_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_sampler *smp, int32_t *token,
                     sc_error *err) {
  CuSession *c = s->be_data;
  CuModel *cm = c->cm;
  CuDriver *drv = &cm->drv;
  const int H = c->d->hidden;
  sc_kernel_ctx_clear(&c->kctx);
  c->pending_out = 0;
  CUresult r = drv->cuCtxSetCurrent(cm->ctx);
  if (r) return sc_fail(err, SC_ERUNTIME, "%s: cuCtxSetCurrent: %s", e->name, cu_err(drv, r));
  const int n = io->n;
  const int fits = n >= 1 && n <= e->max_tokens;

  /* inputs: header (and sampler), then whichever of ids / embeds /
   * hidden_in the call has */
  sc_device_io *h = (sc_device_io *)(c->host_io + c->off_hdr);
  sc_device_sampler *ds = (sc_device_sampler *)(c->host_io + c->off_smp);
  memset(h, 0, sizeof *h);
  h->n = n;
  h->pos = io->pos;
  h->step = io->step;
  if (smp && !device_sampler(smp, e->out_cols, ds))
    return sc_fail(err, SC_EUSAGE, "%s: the device cannot draw from %d logits (hint: sample on the host)", e->name,
                   e->out_cols);
  if (smp) {
    sc_sample_params sp;
    uint64_t rng[4];
    rt_sampler_state(smp, &sp, rng);
    if (sp.repetition_penalty != 1.0f) {
      if (!c->seen_ok || e->out_cols > c->d->vocab)
        return sc_fail(err, SC_EUSAGE, "%s: a repetition penalty on the device needs the history first "
                       "(sample_history)", e->name);
      ds->penalty = sp.repetition_penalty;
      ds->mask = c->seen;
    }
  }
  size_t up = c->off_ids;
  if (fits && io->ids) {
    memcpy(c->host_io + c->off_ids, io->ids, rt_ids_len(e, n) * 4);
    up = c->off_ids + rt_ids_len(e, n) * 4;
  }
  if (fits && io->embeds && e->input == SC_IN_EMBEDS) {
    memcpy(c->host_io + c->off_embeds, io->embeds, (size_t)n * H * 4);
    up = c->off_embeds + (size_t)n * H * 4;
  }
  if (fits && io->hidden_in) {
    memcpy(c->host_io + c->off_hin, io->hidden_in, (size_t)n * H * 4);
    up = c->off_hin + (size_t)n * H * 4;
  }
  /* rows placed one by one: their positions and state offsets go up too,
   * and the kernels find them through the header */
  if (fits && io->row_pos) {
    memcpy(c->host_io + c->off_row_pos, io->row_pos, (size_t)n * sizeof(int));
    h->row_pos = c->io + c->off_row_pos;
    up = c->off_row_pos + (size_t)n * sizeof(int);
  }
  if (fits && io->row_state) {
    memcpy(c->host_io + c->off_row_state, io->row_state, (size_t)n * sizeof(long long));
    h->row_state = c->io + c->off_row_state;
    up = c->off_row_state + (size_t)n * sizeof(long long);
  }
  if ((r = drv->cuMemcpyHtoDAsync_v2(c->io + c->off_hdr, c->host_io + c->off_hdr, up - c->off_hdr, c->stream)))
    return sc_fail(err, SC_ERUNTIME, "%s: copying the inputs to the device: %s", e->name, cu_err(drv, r));

  /* the device view of the call: every pointer is fixed per session */
  sc_io dio = {
      .ids = (const int *)(uintptr_t)(c->io + c->off_ids),
      .embeds = (const float *)(uintptr_t)(c->io + c->off_embeds),
      .hidden_in = (const float *)(uintptr_t)(c->io + c->off_hin),
      .n = n, .pos = io->pos, .step = io->step,
      .out = (float *)(uintptr_t)(c->io + c->off_out),
      .hidden_out = (float *)(uintptr_t)(c->io + c->off_hidden),
      .row_pos = h->row_pos ? (const int *)(uintptr_t)h->row_pos : NULL,
      .row_state = h->row_state ? (const long long *)(uintptr_t)h->row_state : NULL,
  };
  s->K.device_io = (void *)(uintptr_t)(c->io + c->off_hdr);
  CuGraph *g = fits && c->use_graphs ? graph_slot(c, e, n, smp ? GRAPH_SAMPLED : GRAPH_CALL, 0) : NULL;
  CallArgs a = {e, &dio, smp != NULL};
  if (run_launches(s, g, call_launches, &a, e->name, err)) return err->code;

  /* outputs: the header (errors; sampler and token follow it), then what
   * the caller asked for */
  size_t out_bytes = rt_out_len(e, n) * 4;
  r = drv->cuMemcpyDtoHAsync_v2(h, c->io + c->off_hdr, smp ? c->off_tok + 4 - c->off_hdr : sizeof *h, c->stream);
  if (!r && !smp && io->out && out_bytes)
    r = drv->cuMemcpyDtoHAsync_v2(c->host_io + c->off_out, c->io + c->off_out, out_bytes, c->stream);
  if (!r && io->hidden_out && e->hidden_cols)
    r = drv->cuMemcpyDtoHAsync_v2(c->host_io + c->off_hidden, c->io + c->off_hidden, rt_hidden_len(e, n) * 4,
                                  c->stream);
  CUresult rs = drv->cuStreamSynchronize(c->stream);
  c->syncs++;
  if (r || rs)
    return sc_fail(err, SC_ERUNTIME, "%s: running on %s: %s", e->name, cm->device_name, cu_err(drv, r ? r : rs));
  if (device_error(c, h, e->name, err)) return err->code;
  if (smp) {
    sampler_back(smp, ds);
    memcpy(token, c->host_io + c->off_tok, 4);
    if (io->out && out_bytes) {
      c->pending_out = out_bytes;
      c->pending_dst = io->out;
    }
  } else if (io->out && out_bytes) {
    memcpy(io->out, c->host_io + c->off_out, out_bytes);
  }
  if (io->hidden_out && e->hidden_cols)
    memcpy(io->hidden_out, c->host_io + c->off_hidden, rt_hidden_len(e, n) * 4);
  return SC_OK;
}

static unsigned long long cu_state_base(const sc_session *s) {
  const CuSession *c = s->be_data;
  return c->state;
}

static int cu_state_read(const sc_session *s, size_t off, size_t bytes, void *out, sc_error *err) {
  const CuSession *c = s->be_data;
  CuDriver *drv = &c->cm->drv;
  drv->cuCtxSetCurrent(c->cm->ctx);
  CUresult r = drv->cuMemcpyDtoHAsync_v2(out, c->state + off, bytes, c->stream);
  if (!r) r = drv->cuStreamSynchronize(c->stream);
  if (r) return sc_fail(err, SC_ERUNTIME, "%s: reading the session's state back: %s", s->m->path, cu_err(drv, r));
  return SC_OK;
}

static int cu_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err) {
  return cuda_call(s, e, io, NULL, NULL, err);
}

static int cu_call_sampled(sc_session *s, const sc_entry *e, const sc_io *io, sc_sampler *smp, int32_t *token,
                         sc_error *err) {
  if (!cu_can_sample(s, smp, e->out_cols))
    return sc_fail(err, SC_EUSAGE, "%s: this artifact or sampler cannot sample on the device", e->name);
  return cuda_call(s, e, io, smp, token, err);
}

static int cu_sample_history(sc_session *s, const int32_t *ids, int n, sc_error *err) {
  CuSession *c = s->be_data;
  CuDriver *drv = &c->cm->drv;
  const int V = c->d->vocab > 0 ? c->d->vocab : 1;
  unsigned char *mask = calloc((size_t)V, 1);
  if (!mask) return sc_fail(err, SC_ERUNTIME, "out of memory");
  for (int i = 0; i < n; i++)
    if (ids[i] >= 0 && ids[i] < V) mask[ids[i]] = 1;
  CUresult r = drv->cuCtxSetCurrent(c->cm->ctx);
  if (!r && !c->seen) r = drv->cuMemAlloc_v2(&c->seen, (size_t)V);
  /* after the stream's work: a sampled call in flight may still mark it */
  if (!r) r = drv->cuStreamSynchronize(c->stream);
  if (!r) r = drv->cuMemcpyHtoD_v2(c->seen, mask, (size_t)V);
  c->syncs++;
  free(mask);
  if (r) return sc_fail(err, SC_ERUNTIME, "the sampler's history on %s: %s", c->cm->device_name, cu_err(drv, r));
  c->seen_ok = 1;
  return SC_OK;
}

static void cu_fetch_logits(const sc_session *s) {
  CuSession *c = s->be_data;
  if (!c || !c->pending_out) return;
  CuDriver *drv = &c->cm->drv;
  drv->cuCtxSetCurrent(c->cm->ctx);
  if (!drv->cuMemcpyDtoHAsync_v2(c->host_io + c->off_out, c->io + c->off_out, c->pending_out, c->stream) &&
      !drv->cuStreamSynchronize(c->stream))
    memcpy(c->pending_dst, c->host_io + c->off_out, c->pending_out);
  c->syncs++;
  c->pending_out = 0;
}

/* ---- step programs ----------------------------------------------------- */

/* Drop the recorded graphs of one kind (their pointers into a block that
 * is about to move). */
static void drop_graphs(CuSession *c, int kind) {
  CuDriver *drv = &c->cm->drv;
  for (int i = 0; i < c->n_graphs; i++) {
    CuGraph *g = &c->graphs[i];
    if (g->kind != kind) continue;
    if (g->exec) drv->cuGraphExecDestroy(g->exec);
    if (g->graph) drv->cuGraphDestroy(g->graph);
    g->exec = NULL;
    g->graph = NULL;
    g->seen = 0;
  }
}

#define PROG_MAX_BUFS 16
#define PROG_MAX_SAMPLERS 8

/* Where a program's parts lie in the program block, in this order: a
 * mask per sampler that has a history or suppressions ([vocab] bytes), the
 * IN buffers, a header per step, the samplers, the token slots (`up` ends
 * here), the OUT buffers (`down` ends here), the TMP buffers.  key: a hash
 * of everything the launches' arguments depend on (positions and steps
 * are read from the headers), so that one graph serves every run of a
 * program of the same shape. */
typedef struct ProgLayout {
  size_t mask[PROG_MAX_SAMPLERS], mask_n[PROG_MAX_SAMPLERS]; /* mask_n 0: none */
  size_t buf[PROG_MAX_BUFS];
  size_t hdr, smp, tok, up, down, bytes;
  uint64_t key;
} ProgLayout;

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

static void prog_layout(const sc_step_prog *p, ProgLayout *L) {
  memset(L, 0, sizeof *L);
  uint64_t h = 0xcbf29ce484222325ull;
  for (int i = 0; i < p->n_steps; i++) {
    const sc_step *st = &p->steps[i];
    if (st->sample != SC_NONE && st->vocab > (int)L->mask_n[st->sample]) L->mask_n[st->sample] = (size_t)st->vocab;
    const int f[] = {st->n, st->ids, st->embeds.buf, st->embeds.off, st->out.buf, st->out.off, st->hidden.buf,
                     st->hidden.off, st->sample, st->vocab, st->token};
    h = mix(h, (uint64_t)(uintptr_t)st->entry);
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) h = mix(h, (uint64_t)(uint32_t)f[k]);
  }
  size_t off = 0;
  for (int i = 0; i < p->n_samplers; i++) {
    const sc_step_sampler *sp = &p->samplers[i];
    if (!sp->history && !sp->n_suppress) L->mask_n[i] = 0;
    L->mask[i] = off;
    off = ALIGN256(off + L->mask_n[i]);
    h = mix(h, L->mask_n[i]);
  }
  for (int kind = SC_BUF_IN; kind <= SC_BUF_TMP; kind++) {
    if (kind == SC_BUF_OUT) {
      L->hdr = off;
      L->smp = L->hdr + (size_t)p->n_steps * sizeof(sc_device_io);
      L->tok = L->smp + (size_t)p->n_samplers * sizeof(sc_device_sampler);
      L->up = L->tok + (size_t)p->n_tokens * 4;
      off = ALIGN256(L->up);
    }
    for (int i = 0; i < p->n_bufs; i++)
      if (p->bufs[i].kind == kind) {
        L->buf[i] = off;
        off = ALIGN256(off + (size_t)p->bufs[i].floats * 4);
        h = mix(mix(h, (uint64_t)kind), (uint64_t)p->bufs[i].floats);
      }
    if (kind == SC_BUF_OUT) L->down = off;
  }
  L->bytes = off ? off : 256;
  L->key = mix(mix(mix(h, (uint64_t)p->n_steps), (uint64_t)p->n_samplers), (uint64_t)p->n_tokens);
}

/* Whether the device can run step st: a call that fits its entry and has
 * its outputs somewhere, a draw the sampler kernel makes. */
static int step_fits(const sc_session *s, const sc_step_prog *p, const sc_step *st) {
  const sc_entry *e = st->entry;
  if (e && (st->n < 1 || st->n > e->max_tokens || st->out.buf == SC_NONE ||
            (e->hidden_cols && st->hidden.buf == SC_NONE)))
    return 0;
  return st->sample == SC_NONE ||
         (st->out.buf != SC_NONE && cu_can_sample(s, p->samplers[st->sample].smp, st->vocab));
}

/* How many leading steps of p the host runs: 0 when the device runs it
 * all; up to the last step the device cannot run otherwise, the rest then
 * running on the device; n_steps when that split cannot be made (a
 * leading step writes an OUT buffer, whose copy down would overwrite it). */
static int host_prefix(const sc_session *s, const sc_step_prog *p) {
  const CuSession *c = s->be_data;
  if (c->cm->sample_kernel < 0 || p->n_bufs > PROG_MAX_BUFS || p->n_samplers > PROG_MAX_SAMPLERS)
    return p->n_steps;
  int k = 0;
  for (int i = 0; i < p->n_steps; i++)
    if (!step_fits(s, p, &p->steps[i])) k = i + 1;
  for (int i = 0; i < k && k < p->n_steps; i++) {
    const sc_step *st = &p->steps[i];
    if ((st->out.buf != SC_NONE && p->bufs[st->out.buf].kind == SC_BUF_OUT) ||
        (st->hidden.buf != SC_NONE && p->bufs[st->hidden.buf].kind == SC_BUF_OUT))
      return p->n_steps;
  }
  return k;
}

static int prog_alloc(CuSession *c, size_t bytes, sc_error *err) {
  CuProg *pb = &c->prog;
  if (pb->dev && pb->bytes >= bytes) return SC_OK;
  CuDriver *drv = &c->cm->drv;
  if (pb->dev) {
    drv->cuStreamSynchronize(c->stream);
    drv->cuMemFree_v2(pb->dev);
    drop_graphs(c, GRAPH_PROG);
  }
  if (pb->host) drv->cuMemFreeHost(pb->host);
  memset(pb, 0, sizeof *pb);
  CUresult r = drv->cuMemAlloc_v2(&pb->dev, bytes);
  if (!r) r = drv->cuMemAllocHost_v2((void **)&pb->host, bytes);
  if (r) {
    if (pb->dev) drv->cuMemFree_v2(pb->dev);
    memset(pb, 0, sizeof *pb);
    return sc_fail(err, SC_ERUNTIME, "step program: cannot allocate %zu bytes on %s: %s", bytes,
                   c->cm->device_name, cu_err(drv, r));
  }
  pb->bytes = bytes;
  memset(pb->host, 0, bytes);
  return SC_OK;
}

typedef struct ProgArgs {
  const sc_step_prog *p;
  const ProgLayout *L;
} ProgArgs;

/* The program's launches: each call with its own header, each draw into
 * its token slot. */
static int prog_launches(sc_session *s, void *arg) {
  const ProgArgs *a = arg;
  const sc_step_prog *p = a->p;
  const ProgLayout *L = a->L;
  CuSession *c = s->be_data;
  const CUdeviceptr D = c->prog.dev;
  unsigned char *W = (unsigned char *)(uintptr_t)c->cm->W;
#define REF(t, r) ((r).buf == SC_NONE ? NULL : (t)(uintptr_t)(D + L->buf[(r).buf] + (size_t)(r).off * 4))
  int rc = 0;
  for (int i = 0; i < p->n_steps && !rc; i++) {
    const sc_step *st = &p->steps[i];
    const CUdeviceptr hdr = D + L->hdr + (size_t)i * sizeof(sc_device_io);
    if (st->entry) {
      sc_io io = {.ids = st->ids == SC_NONE ? NULL : (const int *)(uintptr_t)(D + L->tok + (size_t)st->ids * 4),
                  .embeds = REF(const float *, st->embeds), .n = st->n, .pos = st->pos, .step = st->step,
                  .out = REF(float *, st->out), .hidden_out = REF(float *, st->hidden)};
      s->K.device_io = (void *)(uintptr_t)hdr;
      rc = st->entry->fn(&s->K, W, (unsigned char *)(uintptr_t)c->state, (unsigned char *)(uintptr_t)c->scratch,
                         &io);
    }
    if (!rc && st->sample != SC_NONE)
      rc = launch_sampler(s, hdr, (CUdeviceptr)(uintptr_t)REF(float *, st->out),
                          D + L->smp + (size_t)st->sample * sizeof(sc_device_sampler), D + L->tok + (size_t)st->token * 4,
                          st->vocab);
  }
#undef REF
  return rc;
}

/* The whole of p on the device: one copy up, the launches (one graph from
 * the second run of a program of this shape on), one copy down, one
 * synchronisation. */
static int run_on_device(sc_session *s, sc_step_prog *p, sc_error *err) {
  CuSession *c = s->be_data;
  CuModel *cm = c->cm;
  CuDriver *drv = &cm->drv;
  const char *what = "step program";
  p->mark_s = 0;
  p->ran = p->n_steps;
  sc_kernel_ctx_clear(&c->kctx);
  c->pending_out = 0;
  CUresult r = drv->cuCtxSetCurrent(cm->ctx);
  if (r) return sc_fail(err, SC_ERUNTIME, "%s: cuCtxSetCurrent: %s", what, cu_err(drv, r));
  ProgLayout L;
  prog_layout(p, &L);
  if (prog_alloc(c, L.bytes, err)) return err->code;
  unsigned char *host = c->prog.host;

  /* up: the masks (bit 1 suppressed, bit 0 penalised), IN buffers,
   * headers, samplers, token slots */
  sc_device_sampler *ds = (sc_device_sampler *)(host + L.smp);
  for (int i = 0; i < p->n_samplers; i++) {
    const sc_step_sampler *sp = &p->samplers[i];
    device_sampler(sp->smp, 0, &ds[i]);
    if (!L.mask_n[i]) continue;
    unsigned char *mask = host + L.mask[i];
    const int n = (int)L.mask_n[i];
    memset(mask, 0, (size_t)n);
    for (int k = 0; k < sp->n_history; k++)
      if (sp->history[k] >= 0 && sp->history[k] < n) mask[sp->history[k]] |= 1;
    for (int k = 0; k < sp->n_suppress; k++)
      if (sp->suppress[k] >= 0 && sp->suppress[k] < n) mask[sp->suppress[k]] |= 2;
    sc_sample_params sp_params;
    uint64_t rng[4];
    rt_sampler_state(sp->smp, &sp_params, rng);
    if (sp->history) ds[i].penalty = sp_params.repetition_penalty;
    ds[i].mask = c->prog.dev + L.mask[i];
  }
  for (int i = 0; i < p->n_bufs; i++)
    if (p->bufs[i].kind == SC_BUF_IN && p->bufs[i].floats)
      memcpy(host + L.buf[i], p->bufs[i].host, (size_t)p->bufs[i].floats * 4);
  sc_device_io *hd = (sc_device_io *)(host + L.hdr);
  for (int i = 0; i < p->n_steps; i++) {
    memset(&hd[i], 0, sizeof hd[i]);
    hd[i].n = p->steps[i].n;
    hd[i].pos = p->steps[i].pos;
    hd[i].step = p->steps[i].step;
  }
  memcpy(host + L.tok, p->tokens, (size_t)p->n_tokens * 4);
  if ((r = drv->cuMemcpyHtoDAsync_v2(c->prog.dev, host, L.up, c->stream)))
    return sc_fail(err, SC_ERUNTIME, "%s: copying the inputs to the device: %s", what, cu_err(drv, r));

  CuGraph *g = c->use_graphs ? graph_slot(c, NULL, 0, GRAPH_PROG, L.key) : NULL;
  ProgArgs pa = {p, &L};
  int rc = run_launches(s, g, prog_launches, &pa, what, err);
  s->K.device_io = (void *)(uintptr_t)(c->io + c->off_hdr);
  if (rc) return rc;

  /* down: headers, samplers, token slots, OUT buffers */
  r = drv->cuMemcpyDtoHAsync_v2(host + L.hdr, c->prog.dev + L.hdr, L.down - L.hdr, c->stream);
  CUresult rs = drv->cuStreamSynchronize(c->stream);
  c->syncs++;
  if (r || rs)
    return sc_fail(err, SC_ERUNTIME, "%s: running on %s: %s", what, cm->device_name, cu_err(drv, r ? r : rs));
  for (int i = 0; i < p->n_steps; i++) {
    const sc_step *st = &p->steps[i];
    if (device_error(c, &hd[i], st->entry ? st->entry->name : p->samplers[st->sample].name, err)) return err->code;
  }
  for (int i = 0; i < p->n_samplers; i++) sampler_back(p->samplers[i].smp, &ds[i]);
  memcpy(p->tokens, host + L.tok, (size_t)p->n_tokens * 4);
  for (int i = 0; i < p->n_bufs; i++)
    if (p->bufs[i].kind == SC_BUF_OUT && p->bufs[i].floats)
      memcpy(p->bufs[i].host, host + L.buf[i], (size_t)p->bufs[i].floats * 4);
  return SC_OK;
}

/* p on the device where it can run there; a head of draws the device
 * cannot make (a sampled draw over more than SC_SAMPLE_MAX logits) runs on
 * the host first, its TMP buffers then going up as IN. */
static int cu_run_steps(sc_session *s, sc_step_prog *p, sc_error *err) {
  const int k = host_prefix(s, p);
  if (k == p->n_steps) return rt_steps_host(s, p, err);
  if (!k) return run_on_device(s, p, err);
  sc_step_prog head = *p, tail = *p;
  head.n_steps = k;
  if (rt_steps_host(s, &head, err)) return err->code;
  if (head.ran < k) { /* a draw hit its stop */
    p->mark_s = head.mark_s;
    p->ran = head.ran;
    return SC_OK;
  }
  /* the tail's buffers: what the head wrote goes up, what the tail does
   * not touch is left out */
  sc_step_buf bufs[PROG_MAX_BUFS];
  unsigned char used[PROG_MAX_BUFS] = {0};
  memcpy(bufs, p->bufs, (size_t)p->n_bufs * sizeof *bufs);
  for (int i = 0; i < p->n_steps; i++) {
    const sc_step *st = &p->steps[i];
    const int b[3] = {st->embeds.buf, st->out.buf, st->hidden.buf};
    for (int j = 0; j < 3; j++)
      if (b[j] != SC_NONE && i >= k) used[b[j]] = 1;
      else if (b[j] != SC_NONE && j && bufs[b[j]].kind == SC_BUF_TMP) bufs[b[j]].kind = SC_BUF_IN;
  }
  for (int i = 0; i < p->n_bufs; i++)
    if (!used[i]) bufs[i].floats = 0;
  tail.steps += k;
  tail.n_steps -= k;
  tail.bufs = bufs;
  int rc = run_on_device(s, &tail, err);
  p->mark_s = head.mark_s;
  p->ran = k + tail.ran;
  return rc;
}

long long rt_cuda_launches(const sc_session *s) {
  const CuSession *c = s->be_data;
  return c ? c->launches : -1;
}

long long rt_cuda_round_trips(const sc_session *s) {
  const CuSession *c = s->be_data;
  return c ? c->syncs : -1;
}

static const char *cu_device_name(const sc_model *m) {
  const CuModel *cm = m->be_data;
  return cm ? cm->device_name : NULL;
}

const sc_backend_i rt_backend_cuda = {
    .version = SC_BACKEND_VERSION,
    .target = "cuda",
    .model_open = cu_model_open,
    .model_close = cu_model_close,
    .session_open = cu_session_open,
    .session_close = cu_session_close,
    .session_reset = cu_session_reset,
    .call = cu_call,
    .state_base = cu_state_base,
    .state_read = cu_state_read,
    .can_sample = cu_can_sample,
    .call_sampled = cu_call_sampled,
    .sample_history = cu_sample_history,
    .fetch_logits = cu_fetch_logits,
    .run_steps = cu_run_steps,
    .device_name = cu_device_name,
};
