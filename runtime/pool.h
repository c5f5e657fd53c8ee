/*
 * pool.h — a persistent pool of kernel threads.
 *
 * One pool per session (runtime/model.c): sessions are independent and may
 * run in different threads of the caller, so each owns its workers rather
 * than queueing on a pool shared by the model.  The workers are created
 * once, when the session opens, and joined when it closes; no thread is
 * created per step.
 *
 * sc_pool_run is the only synchronisation point: it publishes one job cut
 * into `nchunks` chunks, the caller and the workers claim chunks until none
 * is left, and it returns once every chunk is done — one barrier per kernel
 * call.  Chunks are claimed, not assigned: a worker that the OS has not
 * scheduled yet (the machine is shared) holds nothing up, the threads that
 * run take its share.  Idle workers spin briefly (a decode step issues the
 * next kernel call within microseconds), then sleep on a condition
 * variable, so an idle session costs no CPU.
 */
#ifndef SC_POOL_H
#define SC_POOL_H

/* Chunk `chunk` of a job cut into `nchunks` (0 <= chunk < nchunks).  Which
 * thread runs a chunk is not defined: a chunk's result must depend only on
 * the chunk. */
typedef void (*sc_pool_fn)(void *arg, int chunk, int nchunks);

typedef struct sc_pool sc_pool;

/* Most chunks one job may have. */
#define SC_POOL_MAX_CHUNKS (1 << 20)

/* A pool of `threads` threads in all, the caller included (threads - 1
 * workers; 1 = run everything on the caller).  NULL when threads < 1 or a
 * thread could not be created.  Free with sc_pool_free. */
sc_pool *sc_pool_new(int threads);
void sc_pool_free(sc_pool *p);
/* Threads the pool uses, the caller included (1 for a NULL pool): its
 * size, or what sc_pool_limit left. */
int sc_pool_threads(const sc_pool *p);
/* Use only n of the pool's threads (clamped to 1..size; the caller and
 * the first n - 1 workers) for the jobs that follow, or all of them again
 * with n >= size.  The others sleep on the condition variable, not in the
 * spin, so two pools that share the cores can stop competing for them
 * (the Qwen3-TTS driver's generator and decoder, runtime/tts_audio.c).
 * Results do not change: they never depend on the thread count.  Called
 * by whoever runs the pool's jobs, between jobs. */
void sc_pool_limit(sc_pool *p, int n);
/* Run fn(arg, c, nchunks) for every chunk c < nchunks (at most
 * SC_POOL_MAX_CHUNKS) on the pool's threads and return when all have
 * returned.  A NULL pool, a one-thread pool or a one-chunk job runs the
 * chunks in order on the caller.  Not reentrant: one job at a time per
 * pool, and fn must not call sc_pool_run on the same pool. */
void sc_pool_run(sc_pool *p, sc_pool_fn fn, void *arg, int nchunks);

/* Physical cores this process may run on (hyperthread siblings counted
 * once; at least 1).  The default for sc_open_opts.threads = 0. */
int sc_physical_cores(void);

#endif
