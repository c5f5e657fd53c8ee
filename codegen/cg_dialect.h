/*
 * cg_dialect.h — a kernel dialect: the strings and hooks in which one GPU
 * language differs from another, so that the device kernels
 * (cg_kernels.c, and cg_cuda.c's sampler) are written once over it.  In the
 * spirit of tinygrad's CStyleLanguage: a record of spellings plus a few
 * hooks, one small instance per language (dialect_cuda.c).
 *
 * Kernel text names a dialect word as `$name` (`$tid`, `$barrier`,
 * `$shared float xs[256];`); cg_dialect_expand replaces each one with the
 * instance's spelling.  A word written `$name(` whose table entry ends in
 * "(" (the shuffle) takes its parenthesis along, so `$shfl(v, j)` can
 * become `__shfl_sync(0xffffffffu, v, j)` in CUDA and `simd_shuffle(v, j)`
 * in Metal.  No generated text contains `$` otherwise, and an unknown word
 * is a bug in the emitter (it asserts).
 *
 * What a Metal instance fills in (a later increment):
 *   prelude      SC_KERNEL / SC_DEVICE as `kernel void` / `static inline`,
 *                SC_INF as INFINITY, sc_bf16 / sc_f16 over as_type<float>,
 *                sc_warp_sum / sc_warp_max over simd_sum / simd_max,
 *                sc_fail over atomic_compare_exchange_weak_explicit
 *   tid, bid_x, bid_y   the [[thread_position_in_threadgroup]] and
 *                [[threadgroup_position_in_grid]] parameters (param adds
 *                them after the last one, `uint3 sc_tid [[...]]`; the
 *                word is then "sc_tid.x")
 *   barrier      threadgroup_barrier(mem_flags::mem_threadgroup)
 *   warp_barrier simdgroup_barrier(mem_flags::mem_threadgroup)
 *   shared       threadgroup;  align16: alignas(16)
 *   shfl(        simd_shuffle(  (CUDA's full mask has no Metal counterpart)
 *   ldg(         "(" (Metal has no read-only-cache load; a plain load)
 *   restrict     "" ; expf/sqrtf/logf/fmaxf: exp, sqrt, log, fmax
 *   erff         Metal has no erf: a prelude helper (sc_erf) and its name
 *   kernel_head / param: `kernel void name(device sc_device_io *io
 *                [[buffer(0)]], device const float *x [[buffer(1)]], ...,
 *                constant int &T [[buffer(n)]], uint3 sc_tid [[...]])`:
 *                the address space and buffer index go in param.
 * Still CUDA-shaped in the kernels and to be words before Metal: pointer
 * casts without an address space (`(const float4 *)w`, Metal needs
 * `device`), `long long` (Metal: `long`), and the warp size 32 the
 * emitters assume in their index arithmetic (`>> 5`, `& 31`; warp below
 * records it, Apple GPUs have 32-wide simdgroups too).
 */
#ifndef SC_CG_DIALECT_H
#define SC_CG_DIALECT_H

#include <stddef.h>

#include "strbuf.h"

typedef struct CgDialect {
  const char *name;        /* "cuda" */
  int warp;                /* threads of a warp / simdgroup: 32, all cg_kernels.c's
                            * lane arithmetic supports yet (cg_emit_cuda asserts it) */
  /* Printed once before the kernels: kernel and device-function
   * qualifiers (SC_KERNEL, SC_DEVICE), SC_INF, the device ABI structs and
   * the helpers (bf16/f16 decoding, warp reductions, sc_fail). */
  const char *prelude;
  /* The words of kernel text ($name). */
  const char *tid;         /* $tid: thread index in the block, x */
  const char *bid_x;       /* $bid_x, $bid_y: block index in the grid */
  const char *bid_y;
  const char *barrier;     /* $barrier: block-wide barrier (a statement, no ';') */
  const char *warp_barrier; /* $warp_barrier: the same within a warp */
  const char *shared;      /* $shared: block-shared storage qualifier */
  const char *align16;     /* $align16: 16-byte alignment of a shared array */
  const char *shfl;        /* $shfl(v, lane): read v of another lane; ends in "(" */
  const char *ldg;         /* $ldg(p): read-only load; ends in "(" */
  const char *restrict_;   /* $restrict: no-alias pointer qualifier */
  const char *expf, *sqrtf, *logf, *fmaxf, *erff; /* float math */
  /* The head of a kernel: qualifier, launch bound and name, up to the
   * parameter list ("SC_KERNEL(256) decode_layer0_qkv"). */
  void (*kernel_head)(StrBuf *o, const char *name, int threads);
  /* One parameter, index 0 first (io), with its separator. */
  void (*param)(StrBuf *o, int index, const char *type, const char *name);
} CgDialect;

extern const CgDialect cg_dialect_cuda; /* dialect_cuda.c */

/* Append text to o with every $word replaced by d's spelling. */
void cg_dialect_expand(const CgDialect *d, StrBuf *o, const char *text, size_t len);

#endif
