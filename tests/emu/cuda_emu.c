/*
 * cuda_emu.c — a CPU stand-in for libcuda.so.1, for tests on machines
 * without a GPU (SPEECHC_LIBCUDA=path/to/libsc_cuda_emu.so).
 *
 * It implements the driver calls runtime/cuda_rt.c makes.  Device memory
 * is host memory with guard bytes around every allocation (checked after
 * every kernel: an out-of-bounds write fails the launch).  A module is the
 * model's CUDA source (scEmuModuleLoadSource; PTX is refused) compiled as
 * C by the system compiler with -DSC_EMULATE (sc_cuda_emu.h).  A launch
 * runs the grid block by block; the threads of a block are coroutines that
 * switch at __syncthreads, __syncwarp and warp shuffles (emu_threads.c), so
 * block and warp semantics are those of the GPU (a shuffle or barrier that
 * not every live thread of its warp/block reaches is reported as a
 * deadlock).  Stream
 * capture records launches into a graph that cuGraphLaunch replays, as the
 * real driver does.  Everything runs synchronously, one launch at a time.
 *
 * x86-64 only (the context switch is a few instructions of assembly).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "emu_threads.h"
#include "sc_cuda_emu.h"

typedef int CUresult;
enum { OK = 0, ERR_INVALID_VALUE = 1, ERR_NOT_SUPPORTED = 801, ERR_LAUNCH_FAILED = 719,
       ERR_INVALID_IMAGE = 200, ERR_NOT_FOUND = 500 };

/* ---- memory --------------------------------------------------------------- */

#define GUARD 256
typedef struct Alloc {
  unsigned char *base; /* GUARD bytes, size bytes, GUARD bytes */
  size_t size;
  struct Alloc *next;
} Alloc;
static Alloc *allocs;

static int guards_ok(const char *when) {
  for (Alloc *a = allocs; a; a = a->next)
    for (size_t i = 0; i < GUARD; i++)
      if (a->base[i] != 0xA5 || a->base[GUARD + a->size + i] != 0xA5) {
        fprintf(stderr, "cuda_emu: %s wrote %s device allocation %p (%zu bytes)\n", when,
                i < GUARD && a->base[i] != 0xA5 ? "before" : "past the end of", (void *)(a->base + GUARD), a->size);
        return 0;
      }
  return 1;
}

CUresult cuMemAlloc_v2(unsigned long long *p, size_t n) {
  Alloc *a = calloc(1, sizeof *a);
  if (!a || posix_memalign((void **)&a->base, 256, n + 2 * GUARD)) return 2; /* out of memory */
  memset(a->base, 0xA5, GUARD);
  memset(a->base + GUARD, 0x7F, n); /* not zero: code must not rely on fresh memory */
  memset(a->base + GUARD + n, 0xA5, GUARD);
  a->size = n;
  a->next = allocs;
  allocs = a;
  *p = (unsigned long long)(uintptr_t)(a->base + GUARD);
  return OK;
}

CUresult cuMemFree_v2(unsigned long long p) {
  for (Alloc **pa = &allocs; *pa; pa = &(*pa)->next)
    if ((*pa)->base + GUARD == (unsigned char *)(uintptr_t)p) {
      Alloc *a = *pa;
      *pa = a->next;
      free(a->base);
      free(a);
      return OK;
    }
  return ERR_INVALID_VALUE;
}

CUresult cuMemAllocHost_v2(void **p, size_t n) { return (*p = malloc(n ? n : 1)) ? OK : 2; }
CUresult cuMemFreeHost(void *p) { free(p); return OK; }
CUresult cuMemcpyHtoD_v2(unsigned long long d, const void *s, size_t n) {
  memcpy((void *)(uintptr_t)d, s, n);
  return OK;
}
CUresult cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *st) {
  (void)st;
  return cuMemcpyHtoD_v2(d, s, n);
}
CUresult cuMemcpyDtoHAsync_v2(void *d, unsigned long long s, size_t n, void *st) {
  (void)st;
  memcpy(d, (const void *)(uintptr_t)s, n);
  return OK;
}
CUresult cuMemsetD8Async(unsigned long long d, unsigned char v, size_t n, void *st) {
  (void)st;
  memset((void *)(uintptr_t)d, v, n);
  return OK;
}

CUresult cuMemsetD8_v2(unsigned long long d, unsigned char v, size_t n) { return cuMemsetD8Async(d, v, n, NULL); }
CUresult cuMemcpyDtoD_v2(unsigned long long d, unsigned long long s, size_t n) {
  memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)s, n);
  return OK;
}

/* ---- device, context, events, errors ---------------------------------------- */

typedef struct Event { double t; } Event;
static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
CUresult cuEventCreate(Event **e, unsigned flags) { (void)flags; return (*e = calloc(1, sizeof **e)) ? OK : 2; }
CUresult cuEventRecord(Event *e, void *stream) { (void)stream; e->t = seconds(); return OK; }
CUresult cuEventSynchronize(Event *e) { (void)e; return OK; }
CUresult cuEventElapsedTime(float *ms, Event *a, Event *b) { *ms = (float)((b->t - a->t) * 1e3); return OK; }
CUresult cuCtxSynchronize(void) { return OK; }
CUresult cuModuleLoadData(void **m, const void *image) { (void)m; (void)image; return ERR_NOT_SUPPORTED; }

CUresult cuInit(unsigned flags) { (void)flags; return OK; }
CUresult cuDeviceGetCount(int *n) { *n = 1; return OK; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return i == 0 ? OK : ERR_INVALID_VALUE; }
CUresult cuDeviceGetName(char *s, int n, int d) {
  (void)d;
  snprintf(s, (size_t)n, "speechc CUDA emulator");
  return OK;
}
static int the_ctx;
CUresult cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = &the_ctx; return OK; }
CUresult cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return OK; }
CUresult cuCtxSetCurrent(void *c) { (void)c; return OK; }
CUresult cuGetErrorName(CUresult r, const char **s) {
  *s = r == ERR_LAUNCH_FAILED ? "CUDA_ERROR_LAUNCH_FAILED" : r == ERR_NOT_SUPPORTED ? "CUDA_ERROR_NOT_SUPPORTED"
       : "CUDA_ERROR";
  return OK;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == ERR_LAUNCH_FAILED ? "emulated kernel failed (see stderr)" : "emulator error";
  return OK;
}

/* ---- modules: the source compiled as C ------------------------------------- */

typedef struct Func {
  void (*fn)(void);
  int n_params, size[16]; /* 8: pointer, 4: int */
  int max_threads;        /* SC_KERNEL(threads) */
  char name[96];
} Func;

typedef struct Module {
  void *dl;
  char *source;
  Func funcs[4096];
  int n_funcs;
} Module;

static char emu_dir[] = SC_EMU_DIR;
static sc_emu_api api; /* what the compiled kernels call (sc_cuda_emu.h); defined below */

CUresult scEmuModuleLoadSource(Module **out, const char *source) {
  char dir[] = "/tmp/sc-cuda-emu-XXXXXX";
  if (!mkdtemp(dir)) return ERR_INVALID_VALUE;
  char src[128], so[128], cmd[1024];
  snprintf(src, sizeof src, "%s/model.cu.c", dir);
  snprintf(so, sizeof so, "%s/model.so", dir);
  FILE *f = fopen(src, "w");
  if (!f) return ERR_INVALID_VALUE;
  fputs(source, f);
  fclose(f);
  const char *cc = getenv("CC");
  snprintf(cmd, sizeof cmd, "%s -std=gnu11 -O1 -fPIC -shared -w -DSC_EMULATE -I'%s' -o '%s' '%s' -lm",
           cc && *cc ? cc : "cc", emu_dir, so, src);
  int rc = system(cmd);
  void *dl = rc == 0 ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!dl) fprintf(stderr, "cuda_emu: compiling the CUDA source as C failed: %s\n", rc ? cmd : dlerror());
  unlink(src);
  unlink(so);
  rmdir(dir);
  if (!dl) return ERR_INVALID_IMAGE;
  sc_emu_api **slot = (sc_emu_api **)dlsym(dl, "sc_emu");
  if (!slot) {
    dlclose(dl);
    return ERR_INVALID_IMAGE;
  }
  *slot = &api;
  Module *m = calloc(1, sizeof *m);
  m->dl = dl;
  m->source = strdup(source);
  *out = m;
  return OK;
}

CUresult cuModuleLoadDataEx(void **m, const void *image, unsigned n, int *o, void **v) {
  (void)m; (void)image; (void)n; (void)o; (void)v;
  return ERR_NOT_SUPPORTED; /* the emulator runs CUDA source, not PTX */
}

CUresult cuModuleUnload(Module *m) {
  dlclose(m->dl);
  free(m->source);
  free(m);
  return OK;
}

/* Parameter sizes from the kernel's signature in the source:
 * "SC_KERNEL(N) name(type a, type *b, ..., int T)". */
CUresult cuModuleGetFunction(Func **out, Module *m, const char *name) {
  if (m->n_funcs == 4096) return ERR_INVALID_VALUE;
  Func *f = &m->funcs[m->n_funcs];
  memset(f, 0, sizeof *f);
  *(void **)&f->fn = dlsym(m->dl, name);
  char pat[128];
  snprintf(pat, sizeof pat, ") %s(", name);
  const char *at = strstr(m->source, pat);
  if (!f->fn || !at) return ERR_NOT_FOUND;
  const char *k = at;
  while (k > m->source && strncmp(k, "SC_KERNEL(", 10)) k--;
  f->max_threads = atoi(k + 10);
  const char *p = at + strlen(pat), *end = strchr(p, ')');
  while (p < end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    if (!comma) comma = end;
    f->size[f->n_params++] = memchr(p, '*', (size_t)(comma - p)) ? 8 : 4;
    p = comma + 1;
    if (f->n_params == 16) break;
  }
  snprintf(f->name, sizeof f->name, "%s", name);
  m->n_funcs++;
  *out = f;
  return OK;
}

/* ---- blocks (emu_threads.c runs their threads as coroutines) ------------------ */

static struct {
  const Func *f;
  unsigned long long args[16];
  sc_emu_dim3 bid, bdim, gdim;
  sc_emu_dim3 tid[EMU_MAX_THREADS];
} blk;

static void emu_syncthreads(void) { emu_barrier(); }
static void emu_syncwarp(void) { emu_warp_barrier(); }
static float emu_shfl_xor(float v, int mask) {
  uint32_t u;
  memcpy(&u, &v, 4);
  u = emu_shuffle_xor(u, mask);
  memcpy(&v, &u, 4);
  return v;
}
static float emu_shfl(float v, int src) {
  uint32_t u;
  memcpy(&u, &v, 4);
  u = emu_shuffle(u, src);
  memcpy(&v, &u, 4);
  return v;
}
static int emu_atomic_cas(int *p, int c, int v) {
  int old = *p;
  if (old == c) *p = v;
  return old;
}
static void emu_check16(const void *p) {
  if ((uintptr_t)p & 15) emu_fault("misaligned 16-byte load");
}

static sc_emu_api api = {NULL, NULL, NULL, NULL, emu_syncthreads, emu_syncwarp, emu_shfl_xor,
                         emu_shfl, emu_atomic_cas, emu_check16};

static void thread_body(int thread, void *arg) {
  (void)thread, (void)arg;
  unsigned long long *a = blk.args;
  typedef void (*K16)(unsigned long long, unsigned long long, unsigned long long, unsigned long long,
                      unsigned long long, unsigned long long, unsigned long long, unsigned long long,
                      unsigned long long, unsigned long long, unsigned long long, unsigned long long,
                      unsigned long long, unsigned long long, unsigned long long, unsigned long long);
  ((K16)blk.f->fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
                   a[14], a[15]);
}

/* threadIdx of the thread about to run */
static void thread_switch(int thread, void *arg) {
  (void)arg;
  api.tid = &blk.tid[thread];
}

typedef struct Launch {
  const Func *f;
  unsigned g[3], b[3];
  unsigned long long args[16];
} Launch;

static CUresult run_launch(const Launch *l) {
  const Func *f = l->f;
  unsigned nt = l->b[0] * l->b[1] * l->b[2];
  if (!l->g[0] || !l->g[1] || !l->g[2] || !nt || nt > EMU_MAX_THREADS || (f->max_threads && (int)nt > f->max_threads)) {
    fprintf(stderr, "cuda_emu: %s: bad launch (grid %u x %u x %u, block %u, bound %d)\n", f->name, l->g[0], l->g[1],
            l->g[2], nt, f->max_threads);
    return ERR_INVALID_VALUE;
  }
  blk.f = f;
  memcpy(blk.args, l->args, sizeof blk.args);
  blk.bdim = (sc_emu_dim3){l->b[0], l->b[1], l->b[2]};
  blk.gdim = (sc_emu_dim3){l->g[0], l->g[1], l->g[2]};
  for (unsigned i = 0; i < nt; i++)
    blk.tid[i] = (sc_emu_dim3){i % l->b[0], i / l->b[0] % l->b[1], i / (l->b[0] * l->b[1])};
  api.bid = &blk.bid;
  api.bdim = &blk.bdim;
  api.gdim = &blk.gdim;
  for (unsigned z = 0; z < l->g[2]; z++)
    for (unsigned y = 0; y < l->g[1]; y++)
      for (unsigned x = 0; x < l->g[0]; x++) {
        blk.bid = (sc_emu_dim3){x, y, z};
        const char *e = emu_run_block((int)nt, thread_body, thread_switch, NULL, 0);
        if (e) {
          fprintf(stderr, "cuda_emu: %s block (%u, %u, %u): %s\n", f->name, x, y, z, e);
          return ERR_LAUNCH_FAILED;
        }
      }
  if (!guards_ok(f->name)) return ERR_LAUNCH_FAILED;
  return OK;
}

/* ---- streams and graphs ---------------------------------------------------- */

typedef struct Graph {
  Launch *l;
  int n, cap;
} Graph;
typedef struct Stream {
  Graph *capture; /* non-NULL while capturing */
} Stream;

CUresult cuStreamCreate(Stream **s, unsigned flags) {
  (void)flags;
  *s = calloc(1, sizeof **s);
  return *s ? OK : 2;
}
CUresult cuStreamDestroy_v2(Stream *s) { free(s); return OK; }
CUresult cuStreamSynchronize(Stream *s) { (void)s; return OK; }
CUresult cuStreamBeginCapture_v2(Stream *s, int mode) {
  (void)mode;
  if (s->capture) return ERR_INVALID_VALUE;
  s->capture = calloc(1, sizeof *s->capture);
  return OK;
}
CUresult cuStreamEndCapture(Stream *s, Graph **g) {
  if (!s->capture) return ERR_INVALID_VALUE;
  *g = s->capture;
  s->capture = NULL;
  return OK;
}
CUresult cuGraphInstantiateWithFlags(Graph **exec, Graph *g, unsigned long long flags) {
  (void)flags;
  Graph *e = calloc(1, sizeof *e);
  e->l = malloc((size_t)(g->n ? g->n : 1) * sizeof *e->l);
  memcpy(e->l, g->l, (size_t)g->n * sizeof *e->l);
  e->n = g->n;
  *exec = e;
  return OK;
}
CUresult cuGraphLaunch(Graph *e, Stream *s) {
  (void)s;
  for (int i = 0; i < e->n; i++) {
    CUresult r = run_launch(&e->l[i]);
    if (r) return r;
  }
  return OK;
}
CUresult cuGraphExecDestroy(Graph *e) {
  free(e->l);
  free(e);
  return OK;
}
CUresult cuGraphDestroy(Graph *g) { return cuGraphExecDestroy(g); }

CUresult cuLaunchKernel(Func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, Stream *s, void **params, void **extra) {
  (void)extra;
  if (smem) return ERR_NOT_SUPPORTED;
  Launch l = {f, {gx, gy, gz}, {bx, by, bz}, {0}};
  for (int i = 0; i < f->n_params; i++) {
    if (f->size[i] == 8) memcpy(&l.args[i], params[i], 8);
    else l.args[i] = (unsigned long long)(long long)*(const int *)params[i];
  }
  if (s && s->capture) {
    Graph *g = s->capture;
    if (g->n == g->cap) {
      g->cap = g->cap ? 2 * g->cap : 64;
      g->l = realloc(g->l, (size_t)g->cap * sizeof *g->l);
    }
    g->l[g->n++] = l;
    return OK;
  }
  return run_launch(&l);
}
