/*
 * cg.h — code generation: a planned Module to source text.
 *
 * The C target prints one function per entry point (buffers at planned
 * offsets, every shape a literal, elementwise chains as loops, GEMV/GEMM
 * and attention as calls into the runtime's kernel table), the entry table
 * and the model descriptor.  Output is deterministic: same module, same
 * bytes.
 */
#ifndef SC_CG_H
#define SC_CG_H

#include <stdint.h>

#include "ir.h"
#include "strbuf.h"

typedef struct CgInfo {
  const char *weight_file;   /* basename stored in the descriptor */
  uint64_t weight_bytes, weight_checksum, build_id;
  const char *band;          /* "f32", "bf16", ... for the header */
  int fused;
  const char *cpu_features;  /* "" for portable code */
} CgInfo;

/* Emit the C source of m into out.  Returns SC_OK, or SC_EINPUT when the
 * module uses an op the C target cannot lower yet (message names it). */
int cg_emit_c(const Module *m, const CgInfo *info, StrBuf *out, sc_error *err);

#endif
