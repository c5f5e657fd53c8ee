/*
 * pool.c — the persistent kernel thread pool (see pool.h).
 *
 * A job is one 64-bit ticket: generation (24 bits) | chunk count (20) |
 * next unclaimed chunk (20).  The caller writes fn and arg, zeroes `done`,
 * then stores a ticket of a new generation; every thread claims chunks by
 * compare-and-swap on the ticket and counts each finished chunk in `done`.
 * A successful claim proves that its job is still the current one (the
 * caller cannot finish a job while a chunk of it is unclaimed), so fn and
 * arg are read only after a claim and are never torn.  The caller returns
 * when done reaches the chunk count; it never waits for a worker that holds
 * no chunk.
 */
#define _GNU_SOURCE
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long an idle worker spins before it sleeps, and how long the caller
 * spins on the barrier before it starts yielding its time slice (ns). */
#define SPIN_WORKER_NS 200000
#define SPIN_CALLER_NS 50000

#define T_GEN(t) ((t) >> 40)
#define T_COUNT(t) (((t) >> 20) & 0xfffff)
#define T_NEXT(t) ((t) & 0xfffff)

typedef struct Worker {
  struct sc_pool *pool;
  int index;                        /* 1..threads-1: takes part while index < active */
  pthread_t tid;
} Worker;

struct sc_pool {
  int threads;
  Worker *workers;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* the current job: written by the caller before its ticket is stored */
  sc_pool_fn fn;
  void *arg;
  atomic_int stop;
  atomic_int active;                /* threads used (sc_pool_limit), the caller included */
  _Alignas(64) _Atomic uint64_t ticket;
  _Alignas(64) atomic_int done;     /* chunks finished in the current job */
  _Alignas(64) atomic_int sleepers; /* workers blocked on cv */
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static inline long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Claim and run chunks of generation gen until none is left. */
static void run_chunks(sc_pool *p, uint64_t gen) {
  uint64_t t = atomic_load_explicit(&p->ticket, memory_order_acquire);
  while (T_GEN(t) == gen && T_NEXT(t) < T_COUNT(t)) {
    if (!atomic_compare_exchange_weak_explicit(&p->ticket, &t, t + 1, memory_order_acq_rel,
                                               memory_order_acquire))
      continue; /* t was reloaded */
    p->fn(p->arg, (int)T_NEXT(t), (int)T_COUNT(t));
    atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    t = atomic_load_explicit(&p->ticket, memory_order_acquire);
  }
}

/* Wait until the ticket's generation differs from seen; returns it. */
static uint64_t wait_job(sc_pool *p, uint64_t seen) {
  uint64_t g;
  long long t0 = 0;
  for (int i = 0;; i++) {
    if ((g = T_GEN(atomic_load_explicit(&p->ticket, memory_order_acquire))) != seen) return g;
    cpu_relax();
    if ((i & 63) == 63) {
      long long t = now_ns();
      if (!t0) t0 = t;
      else if (t - t0 > SPIN_WORKER_NS) break;
    }
  }
  pthread_mutex_lock(&p->mu);
  atomic_fetch_add(&p->sleepers, 1); /* seq_cst: pairs with publish() */
  while ((g = T_GEN(atomic_load(&p->ticket))) == seen) pthread_cond_wait(&p->cv, &p->mu);
  atomic_fetch_sub(&p->sleepers, 1);
  pthread_mutex_unlock(&p->mu);
  return g;
}

static void *worker_main(void *arg) {
  Worker *w = arg;
  sc_pool *p = w->pool;
  uint64_t seen = 0;
  for (;;) {
    seen = wait_job(p, seen);
    if (atomic_load(&p->stop)) return NULL;
    if (w->index < atomic_load_explicit(&p->active, memory_order_relaxed)) {
      run_chunks(p, seen);
      continue;
    }
    /* left out by sc_pool_limit: asleep until it takes this worker back
     * (publish wakes it only when other workers sleep too) */
    pthread_mutex_lock(&p->mu);
    while (w->index >= atomic_load(&p->active) && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
}

/* Store a ticket of the next generation and wake sleeping workers. */
static uint64_t publish(sc_pool *p, int nchunks) {
  uint64_t gen = (T_GEN(atomic_load_explicit(&p->ticket, memory_order_relaxed)) + 1) & 0xffffff;
  atomic_store(&p->ticket, gen << 40 | (uint64_t)nchunks << 20); /* seq_cst */
  if (atomic_load(&p->sleepers)) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
  }
  return gen;
}

sc_pool *sc_pool_new(int threads) {
  if (threads < 1) return NULL;
  sc_pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->threads = threads;
  atomic_init(&p->active, threads);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  if (threads > 1 && !(p->workers = calloc((size_t)threads - 1, sizeof *p->workers))) {
    free(p);
    return NULL;
  }
  for (int i = 1; i < threads; i++) {
    Worker *w = &p->workers[i - 1];
    w->pool = p;
    w->index = i;
    if (pthread_create(&w->tid, NULL, worker_main, w)) {
      p->threads = i; /* join the ones that started */
      sc_pool_free(p);
      return NULL;
    }
  }
  return p;
}

void sc_pool_free(sc_pool *p) {
  if (!p) return;
  if (p->threads > 1) {
    atomic_store(&p->stop, 1);
    publish(p, 0);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv); /* also those between their check and the wait */
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->threads; i++) pthread_join(p->workers[i - 1].tid, NULL);
  }
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->workers);
  free(p);
}

int sc_pool_threads(const sc_pool *p) {
  return p ? atomic_load_explicit(&((sc_pool *)p)->active, memory_order_relaxed) : 1;
}

void sc_pool_limit(sc_pool *p, int n) {
  if (!p) return;
  n = n < 1 ? 1 : n > p->threads ? p->threads : n;
  if (n == atomic_load(&p->active)) return;
  atomic_store(&p->active, n);
  pthread_mutex_lock(&p->mu); /* wake the workers taken back */
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

void sc_pool_run(sc_pool *p, sc_pool_fn fn, void *arg, int nchunks) {
  if (nchunks <= 0) return;
  if (nchunks > SC_POOL_MAX_CHUNKS) nchunks = SC_POOL_MAX_CHUNKS;
  if (!p || atomic_load_explicit(&p->active, memory_order_relaxed) == 1 || nchunks == 1) {
    for (int c = 0; c < nchunks; c++) fn(arg, c, nchunks);
    return;
  }
  p->fn = fn;
  p->arg = arg;
  atomic_store_explicit(&p->done, 0, memory_order_relaxed);
  run_chunks(p, publish(p, nchunks));
  long long t0 = 0;
  for (int i = 0; atomic_load_explicit(&p->done, memory_order_acquire) < nchunks; i++) {
    if ((i & 63) != 63) {
      cpu_relax();
      continue;
    }
    long long t = now_ns();
    if (!t0) t0 = t;
    else if (t - t0 > SPIN_CALLER_NS) sched_yield(); /* a worker lost its core mid-chunk */
  }
}

/* Count distinct (package, core) pairs among the CPUs we may run on. */
int sc_physical_cores(void) {
  cpu_set_t set;
  int n_cpu = 0;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n_cpu = CPU_COUNT(&set);
  else {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    CPU_ZERO(&set);
    for (long i = 0; i < n && i < CPU_SETSIZE; i++) CPU_SET((int)i, &set);
    n_cpu = n > 0 ? (int)n : 1;
  }
  long ids[CPU_SETSIZE];
  int cores = 0, known = 1;
  for (int c = 0; c < CPU_SETSIZE && known; c++) {
    if (!CPU_ISSET(c, &set)) continue;
    long pkg = -1, core = -1;
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
    FILE *f = fopen(path, "r");
    if (f) { if (fscanf(f, "%ld", &pkg) != 1) pkg = -1; fclose(f); }
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", c);
    if ((f = fopen(path, "r"))) { if (fscanf(f, "%ld", &core) != 1) core = -1; fclose(f); }
    if (pkg < 0 || core < 0) { known = 0; break; }
    long id = pkg << 20 | core;
    int dup = 0;
    for (int k = 0; k < cores && !dup; k++) dup = ids[k] == id;
    if (!dup) ids[cores++] = id;
  }
  if (!known || cores == 0) cores = n_cpu;
  return cores > 0 ? cores : 1;
}
