/*
 * metal_dev.h — the few Metal operations the Metal backend (backend_metal.c)
 * needs, as a table of C functions, so that the backend itself is portable
 * C and the Objective-C is one small file:
 *
 *   runtime/metal_rt.m      the table over Apple's Metal framework (built on
 *                           macOS only, linked into the runtime there);
 *   tests/emu/metal_emu.c   a CPU stand-in for the tests (the generated MSL
 *                           compiled by clang++ over tests/emu/metal/
 *                           metal_stdlib), loaded from SPEECHC_LIBMETAL.
 *
 * Buffers are shared memory: the CPU reads and writes their contents, the
 * GPU sees them at their GPU address.  A command list is one command
 * buffer with one compute encoder whose dispatches run in order, each
 * seeing the writes of those before it; nothing runs before end(), which
 * commits and waits.  Strings in err (err_size bytes) say what failed.
 * Not part of the public API.
 */
#ifndef SC_METAL_DEV_H
#define SC_METAL_DEV_H

#include <stddef.h>
#include <stdint.h>

#define SC_METAL_API_VERSION 1

typedef struct sc_metal_api {
  int version; /* SC_METAL_API_VERSION */
  /* The system's default GPU; its name into name. */
  void *(*open)(char *name, size_t name_size, char *err, size_t err_size);
  void (*close)(void *dev);
  /* A zero-filled shared buffer of bytes; *contents the CPU's view, *gpu
   * its GPU address (what a device pointer inside a buffer holds). */
  void *(*buffer_new)(void *dev, size_t bytes, void **contents, uint64_t *gpu, char *err, size_t err_size);
  /* Memory the caller owns (page-aligned, a whole number of pages: the
   * mmapped weight file) as a buffer, without a copy. */
  void *(*buffer_wrap)(void *dev, void *p, size_t bytes, uint64_t *gpu, char *err, size_t err_size);
  void (*buffer_free)(void *buf);
  /* The model's kernels: MSL source compiled (precise math: no fast-math
   * reassociation, as the CPU target); one pipeline per kernel name. */
  void *(*library_new)(void *dev, const char *source, char *err, size_t err_size);
  /* The same from a precompiled .metallib (NULL: this layer cannot). */
  void *(*library_data)(void *dev, const void *data, size_t bytes, char *err, size_t err_size);
  void (*library_free)(void *lib);
  void *(*pipeline_new)(void *dev, void *lib, const char *name, char *err, size_t err_size);
  void (*pipeline_free)(void *pipe);
  /* A command list (see above). */
  void *(*begin)(void *dev, char *err, size_t err_size);
  /* One dispatch of grid[0] x grid[1] threadgroups of `threads` threads:
   * buffer i at offset offs[i] bound to [[buffer(i)]] for i < n_bufs, then
   * the int `value` at [[buffer(n_bufs)]] (the kernels' token count T). */
  void (*dispatch)(void *cmd, void *pipe, unsigned gx, unsigned gy, unsigned threads, int n_bufs,
                   void *const *bufs, const size_t *offs, int value);
  /* Make buf resident for the list's dispatches, read and written through
   * GPU addresses rather than a binding (another session's state, reached
   * by a row placed there). */
  void (*use)(void *cmd, void *buf);
  /* Commit, wait, free the list: 0, or non-zero with err set. */
  int (*end)(void *cmd, char *err, size_t err_size);
} sc_metal_api;

/* Exported by metal_rt.m (macOS) and by the stand-in. */
typedef const sc_metal_api *(*sc_metal_api_fn)(void);
#define SC_METAL_API_SYMBOL "sc_metal_api_get"

#endif
