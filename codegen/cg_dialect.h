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
 * Instances: dialect_cuda.c and dialect_metal.c (MSL: address spaces on
 * every pointer, positions as kernel parameters, simd_* reductions; its
 * header comment lists the differences).  A word spelled "" takes the
 * space after it along ("const $dev float" is "const float" in CUDA).
 */
#ifndef SC_CG_DIALECT_H
#define SC_CG_DIALECT_H

#include <stddef.h>

#include "strbuf.h"

typedef struct CgDialect {
  const char *name;        /* "cuda" */
  const char *title;       /* "CUDA": in errors and generated comments */
  const char *source_name; /* the device source's file: "model.cu" */
  int shared_bytes;        /* static shared (threadgroup) memory a kernel may declare */
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
  /* Address spaces of pointers ($dev: device memory, $tg: block-shared
   * memory; CUDA needs neither, Metal both), the 64-bit integer type and
   * its literal suffix ($i64, $ll), and a 16-byte aligned shared array
   * ($shared16: the qualifiers in the order the language takes them). */
  const char *dev, *tg, *i64, *ll, *shared16;
  /* The head of a kernel: qualifier, launch bound and name, up to the
   * parameter list ("SC_KERNEL(256) decode_layer0_qkv"). */
  void (*kernel_head)(StrBuf *o, const char *name, int threads);
  /* One parameter, index 0 first (io), with its separator. */
  void (*param)(StrBuf *o, int index, const char *type, const char *name);
  /* After the last parameter (NULL: nothing): Metal's thread and
   * threadgroup positions. */
  const char *params_end;
  /* Whether the device sampler (cg_cuda.c) can be written in it: it keeps
   * a double sum, which Metal does not have. */
  int sampler;
  /* Whether one pointer may point into device or shared memory (CUDA's
   * generic addressing); where not (Metal), a loop reading either is
   * printed once per address space. */
  int generic_ptr;
} CgDialect;

extern const CgDialect cg_dialect_cuda;  /* dialect_cuda.c */
extern const CgDialect cg_dialect_metal; /* dialect_metal.c */

/* Append text to o with every $word replaced by d's spelling. */
void cg_dialect_expand(const CgDialect *d, StrBuf *o, const char *text, size_t len);

#endif
