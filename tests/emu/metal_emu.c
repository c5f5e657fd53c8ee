/*
 * metal_emu.c — a CPU stand-in for the Metal framework (runtime/metal_dev.h),
 * for tests on machines without an Apple GPU (SPEECHC_LIBMETAL=path/to/
 * libsc_metal_emu.so).
 *
 * A library is the model's Metal Shading Language, checked against the
 * subset the generator may use (tests/emu/metal/metal_stdlib says which)
 * and compiled by clang++ for the CPU over that header: the address spaces
 * are clang address spaces, so a pointer that loses its space fails to
 * compile as it would on a Mac.  Threadgroup arrays become static storage
 * (one threadgroup runs at a time).  A dispatch runs its grid threadgroup
 * by threadgroup; the threads of a group are coroutines (emu_threads.c)
 * that switch at barriers and simdgroup exchanges, so threadgroup and
 * simdgroup semantics are the GPU's.  Buffers are host memory with guard
 * bytes (checked after every command list).  Command lists run when they
 * end, in order, as a command buffer does; one at a time (a lock: the
 * coroutine engine is one per process), so sessions on several threads may
 * share the stand-in as they share a GPU.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../runtime/metal_dev.h"
#include "emu_threads.h"

static void say(char *err, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (err && size) vsnprintf(err, size, fmt, ap);
  va_end(ap);
}

/* ---- device and buffers ------------------------------------------------ */

#define GUARD 256
typedef struct Buf {
  unsigned char *base; /* owned: GUARD bytes, size bytes, GUARD bytes; wrapped: NULL */
  void *contents;
  size_t size;
  struct Buf *next, **prev;
} Buf;
static int the_dev;

static void *dev_open(char *name, size_t name_size, char *err, size_t err_size) {
  (void)err, (void)err_size;
  snprintf(name, name_size, "speechc Metal emulator");
  return &the_dev;
}
static void dev_close(void *dev) { (void)dev; }

static Buf *owned;
/* the owned list and the coroutine engine: one command list runs at a time */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;

static void *buffer_new(void *dev, size_t bytes, void **contents, uint64_t *gpu, char *err, size_t err_size) {
  (void)dev;
  Buf *b = calloc(1, sizeof *b);
  if (!b || posix_memalign((void **)&b->base, 256, bytes + 2 * GUARD)) {
    free(b);
    say(err, err_size, "out of memory for a buffer of %zu bytes", bytes);
    return NULL;
  }
  memset(b->base, 0xA5, GUARD);
  memset(b->base + GUARD, 0, bytes);
  memset(b->base + GUARD + bytes, 0xA5, GUARD);
  b->contents = b->base + GUARD;
  b->size = bytes;
  pthread_mutex_lock(&run_lock);
  b->next = owned;
  if (owned) owned->prev = &b->next;
  b->prev = &owned;
  owned = b;
  pthread_mutex_unlock(&run_lock);
  *contents = b->contents;
  *gpu = (uint64_t)(uintptr_t)b->contents; /* one address space: the GPU address is the pointer */
  return b;
}

static void *buffer_wrap(void *dev, void *p, size_t bytes, uint64_t *gpu, char *err, size_t err_size) {
  (void)dev;
  const long page = sysconf(_SC_PAGESIZE);
  if ((uintptr_t)p % (uintptr_t)page || bytes % (size_t)page) {
    say(err, err_size, "buffer_wrap: %p (%zu bytes) is not whole pages", p, bytes);
    return NULL;
  }
  Buf *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->contents = p;
  b->size = bytes;
  *gpu = (uint64_t)(uintptr_t)p;
  return b;
}

static void buffer_free(void *buf) {
  Buf *b = buf;
  if (!b) return;
  if (b->base) {
    pthread_mutex_lock(&run_lock);
    *b->prev = b->next;
    if (b->next) b->next->prev = b->prev;
    pthread_mutex_unlock(&run_lock);
    free(b->base);
  }
  free(b);
}

static int guards_ok(const char *when, char *err, size_t err_size) {
  for (Buf *b = owned; b; b = b->next)
    for (size_t i = 0; i < GUARD; i++)
      if (b->base[i] != 0xA5 || b->base[GUARD + b->size + i] != 0xA5) {
        say(err, err_size, "metal_emu: %s wrote %s a buffer (%zu bytes)", when,
            b->base[i] != 0xA5 ? "before" : "past the end of", b->size);
        return 0;
      }
  return 1;
}

/* ---- libraries: the MSL compiled as C++ --------------------------------- */

typedef struct sc_metal_emu_api { /* tests/emu/metal/metal_stdlib */
  void (*barrier)(void);
  void (*simd_barrier)(void);
  uint32_t (*shuffle)(uint32_t v, int src);
  void (*gather)(uint32_t v, uint32_t all[32]);
  void (*check16)(const void *p);
} sc_metal_emu_api;

static void check16(const void *p) {
  if ((uintptr_t)p & 15) {
    static char what[96];
    snprintf(what, sizeof what, "misaligned 16-byte vector access at %p", p);
    emu_fault(what);
  }
}
static sc_metal_emu_api api = {emu_barrier, emu_warp_barrier, emu_shuffle, emu_warp_gather, check16};

typedef struct Lib {
  void *dl;
} Lib;

static char emu_dir[] = SC_EMU_DIR;

/* What MSL does not have, which the C++ compiler would accept. */
static const char *outside_subset(const char *src) {
  static const char *const banned[] = {"long long", "double", "__", "#ifdef", "#if ", "#pragma once"};
  for (size_t i = 0; i < sizeof banned / sizeof banned[0]; i++)
    if (strstr(src, banned[i])) return banned[i];
  const char *inc = src;
  while ((inc = strstr(inc, "#include"))) {
    if (strncmp(inc, "#include <metal_stdlib>", 23)) return "#include of anything but <metal_stdlib>";
    inc += 8;
  }
  return NULL;
}

static int is_ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* A line "[alignas(N)] threadgroup TYPE NAME..." that declares variables
 * (no '*' before the first declarator): prefix them with static.  Such a
 * declaration must be at the kernel's scope (the generator indents it by
 * two spaces there): NULL, or what is wrong. */
static const char *write_source(FILE *f, const char *src) {
  const char *line = src, *bad = NULL;
  while (*line) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line + 1) : strlen(line);
    const char *p = line;
    while (*p == ' ') p++;
    const char *decl = p;
    if (!strncmp(p, "alignas(16) ", 12)) p += 12;
    int var = 0;
    if (!strncmp(p, "threadgroup ", 12)) {
      const char *q = p + 12;
      int words = 0;
      for (;;) { /* type words, then the name */
        while (*q == ' ') q++;
        if (!is_ident(*q)) break;
        while (is_ident(*q)) q++;
        words++;
      }
      var = words >= 2 && *q != '*';
    }
    if (var && decl - line != 2 && !bad) bad = "a threadgroup variable declared inside a block (MSL wants them at the kernel's scope)";
    if (var) {
      fwrite(line, 1, (size_t)(decl - line), f);
      if (p != decl) fputs("alignas(16) ", f);
      fputs("static ", f);
      fwrite(p, 1, len - (size_t)(p - line), f);
    } else {
      fwrite(line, 1, len, f);
    }
    line += len;
  }
  return bad;
}

static void *library_new(void *dev, const char *source, char *err, size_t err_size) {
  (void)dev;
  const char *bad = outside_subset(source);
  if (bad) {
    say(err, err_size, "metal_emu: the source uses '%s', which is outside the MSL subset "
        "(tests/emu/metal/metal_stdlib)", bad);
    return NULL;
  }
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  char dir[96];
  if (snprintf(dir, sizeof dir, "%s/sc-metal-emu-XXXXXX", tmp) >= (int)sizeof dir || !mkdtemp(dir)) {
    say(err, err_size, "metal_emu: cannot make a directory under %s", tmp);
    return NULL;
  }
  char src[128], so[128], log[128], cmd[1024];
  snprintf(src, sizeof src, "%s/model.metal.cc", dir);
  snprintf(so, sizeof so, "%s/model.so", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  FILE *f = fopen(src, "w");
  if (!f) {
    say(err, err_size, "metal_emu: cannot write %s", src);
    rmdir(dir);
    return NULL;
  }
  const char *misplaced = write_source(f, source);
  fclose(f);
  if (misplaced) {
    say(err, err_size, "metal_emu: %s", misplaced);
    unlink(src);
    rmdir(dir);
    return NULL;
  }
  const char *cxx = getenv("SPEECHC_METAL_EMU_CXX");
  /* clang: its address_space attribute is what checks the address spaces */
  snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -fPIC -shared -Wno-unknown-attributes -I'%s/metal' -o '%s' '%s' "
           "> '%s' 2>&1", cxx && *cxx ? cxx : "clang++", emu_dir, so, src, log);
  int rc = system(cmd);
  void *dl = rc == 0 ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!dl) {
    char text[2048] = "";
    FILE *lf = fopen(log, "r");
    if (lf) {
      size_t n = fread(text, 1, sizeof text - 1, lf);
      text[n] = 0;
      fclose(lf);
    }
    fprintf(stderr, "metal_emu: compiling the MSL with clang++ failed:\n%s\n", text);
    say(err, err_size, "metal_emu: the MSL does not compile (%s)", rc ? "clang++ failed, see stderr" : dlerror());
  }
  /* the library stays mapped after its file goes; the directory last,
   * once it is empty (it was left behind, one per library, before) */
  unlink(so);
  unlink(log);
  if (!getenv("SPEECHC_METAL_EMU_KEEP")) {
    unlink(src);
    rmdir(dir);
  }
  if (!dl) return NULL;
  sc_metal_emu_api **slot = (sc_metal_emu_api **)dlsym(dl, "sc_metal_emu");
  if (!slot) { /* the source never included <metal_stdlib> */
    dlclose(dl);
    say(err, err_size, "metal_emu: the source does not include <metal_stdlib>");
    return NULL;
  }
  *slot = &api;
  Lib *l = calloc(1, sizeof *l);
  l->dl = dl;
  return l;
}

static void library_free(void *lib) {
  Lib *l = lib;
  if (!l) return;
  dlclose(l->dl);
  free(l);
}

typedef struct Pipe {
  void (*fn)(void);
  char name[96];
} Pipe;

static void *pipeline_new(void *dev, void *lib, const char *name, char *err, size_t err_size) {
  (void)dev;
  Lib *l = lib;
  Pipe *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  *(void **)&p->fn = dlsym(l->dl, name);
  if (!p->fn) {
    say(err, err_size, "metal_emu: no kernel function %s", name);
    free(p);
    return NULL;
  }
  snprintf(p->name, sizeof p->name, "%s", name);
  return p;
}

static void pipeline_free(void *pipe) { free(pipe); }

/* ---- command lists ------------------------------------------------------ */

#define MAX_ARGS 20
typedef struct Dispatch {
  const Pipe *pipe;
  unsigned gx, gy, threads;
  int n_bufs;
  uint64_t args[MAX_ARGS];
  int value;
} Dispatch;
typedef struct Cmd {
  Dispatch *d;
  int n, cap;
  int bad;             /* a dispatch that could not be recorded */
  char why[160];
} Cmd;

static void *begin(void *dev, char *err, size_t err_size) {
  (void)dev;
  Cmd *c = calloc(1, sizeof *c);
  if (!c) say(err, err_size, "out of memory");
  return c;
}

static void dispatch(void *cmd, void *pipe, unsigned gx, unsigned gy, unsigned threads, int n_bufs,
                     void *const *bufs, const size_t *offs, int value) {
  Cmd *c = cmd;
  if (c->bad) return;
  if (n_bufs + 3 > MAX_ARGS || !gx || !gy || !threads || threads > EMU_MAX_THREADS) {
    c->bad = 1;
    snprintf(c->why, sizeof c->why, "bad dispatch of %s (%u x %u groups of %u, %d buffers)", ((Pipe *)pipe)->name,
             gx, gy, threads, n_bufs);
    return;
  }
  if (c->n == c->cap) {
    c->cap = c->cap ? 2 * c->cap : 64;
    c->d = realloc(c->d, (size_t)c->cap * sizeof *c->d);
  }
  Dispatch *d = &c->d[c->n++];
  memset(d, 0, sizeof *d);
  d->pipe = pipe;
  d->gx = gx;
  d->gy = gy;
  d->threads = threads;
  d->n_bufs = n_bufs;
  for (int i = 0; i < n_bufs; i++)
    d->args[i] = (uint64_t)(uintptr_t)((unsigned char *)((Buf *)bufs[i])->contents + offs[i]);
  d->value = value;
}

/* One address space here: every buffer is reachable, residency is moot. */
static void use(void *cmd, void *buf) { (void)cmd, (void)buf; }

static struct {
  Dispatch *d;
  unsigned x, y;
} run;

/* kernel(buffers..., constant int &T, uint sc_tid, uint2 sc_bid): every
 * argument is one 64-bit register or stack slot (pointers, the reference,
 * the uint, and uint2 {x, y} as x | y << 32) */
static void thread_body(int thread, void *arg) {
  (void)arg;
  const Dispatch *d = run.d;
  uint64_t a[MAX_ARGS] = {0};
  memcpy(a, d->args, (size_t)d->n_bufs * sizeof a[0]);
  a[d->n_bufs] = (uint64_t)(uintptr_t)&d->value;
  a[d->n_bufs + 1] = (uint64_t)thread;
  a[d->n_bufs + 2] = (uint64_t)run.x | (uint64_t)run.y << 32;
  typedef void (*K)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                    uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                    uint64_t, uint64_t);
  ((K)d->pipe->fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14],
                   a[15], a[16], a[17], a[18], a[19]);
}

static int end(void *cmd, char *err, size_t err_size) {
  Cmd *c = cmd;
  int rc = 0;
  pthread_mutex_lock(&run_lock);
  if (c->bad) {
    say(err, err_size, "metal_emu: %s", c->why);
    rc = 1;
  }
  for (int i = 0; i < c->n && !rc; i++) {
    run.d = &c->d[i];
    for (unsigned y = 0; y < run.d->gy && !rc; y++)
      for (unsigned x = 0; x < run.d->gx && !rc; x++) {
        run.x = x;
        run.y = y;
        const char *e = emu_run_block((int)run.d->threads, thread_body, NULL, NULL, 1);
        if (e) {
          say(err, err_size, "metal_emu: %s threadgroup (%u, %u): %s", run.d->pipe->name, x, y, e);
          rc = 1;
        }
      }
    if (!rc && !guards_ok(run.d->pipe->name, err, err_size)) rc = 1;
  }
  pthread_mutex_unlock(&run_lock);
  free(c->d);
  free(c);
  return rc;
}

static const sc_metal_api the_api = {
    .version = SC_METAL_API_VERSION,
    .open = dev_open,
    .close = dev_close,
    .buffer_new = buffer_new,
    .buffer_wrap = buffer_wrap,
    .buffer_free = buffer_free,
    .library_new = library_new,
    .library_data = NULL, /* a .metallib is Apple GPU code: the stand-in runs the source */
    .library_free = library_free,
    .pipeline_new = pipeline_new,
    .pipeline_free = pipeline_free,
    .begin = begin,
    .dispatch = dispatch,
    .use = use,
    .end = end,
};

const sc_metal_api *sc_metal_api_get(void) { return &the_api; }
