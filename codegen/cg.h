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

struct Target;
typedef struct CgInfo {
  const char *weight_file;   /* basename stored in the descriptor */
  uint64_t weight_bytes, weight_checksum, build_id;
  const char *band;          /* "f32", "bf16", ... for the header */
  int fused;
  const char *cpu_features;  /* "" for portable code */
  int check_numerics;        /* entry points fail on a NaN/inf output */
  const struct Target *target; /* the target printed for: its weight layouts (target.h) */
} CgInfo;

/* The temporary the C emitter needs for node n of g at rows rows, in
 * bytes (pass_plan places it at n->aux), 0 for none: the normalised input
 * of a linear with a norm ([rows, x cols]), the rotated q and k rows of
 * ROPE_ATTENTION ([rows, q cols + k cols]). */
int64_t cg_c_temp_bytes(const Graph *g, const IrNode *n, int64_t rows);

/* Emit the C source of m into out.  Returns SC_OK, or SC_EINPUT when the
 * module uses an op the C target cannot lower yet (message names it). */
int cg_emit_c(const Module *m, const CgInfo *info, StrBuf *out, sc_error *err);

/* The CUDA target (cg_cuda.c), in two steps around the device compiler.
 * 1: the device source of m into cu (model.cu) and the host C into host
 *    (launchers and entry functions, without the device code yet).
 * 2: once cu is compiled, append the device code, the source and the
 *    descriptor to host.  SC_EINPUT names an op or band not lowered yet. */
typedef struct CgDevice {
  const char *code;          /* PTX text */
  size_t code_bytes;
  const char *source;        /* the .cu it came from */
  const char *arch;          /* "compute_80", ... */
} CgDevice;
int cg_emit_cuda(const Module *m, const CgInfo *info, StrBuf *cu, StrBuf *host, sc_error *err);
int cg_emit_cuda_tail(const Module *m, const CgInfo *info, const CgDevice *dev, StrBuf *host,
                      sc_error *err);
/* The Metal target: the same two steps, the kernels in MSL (model.metal);
 * the code (a .metallib) may be empty: the runtime compiles the source. */
int cg_emit_metal(const Module *m, const CgInfo *info, StrBuf *msl, StrBuf *host, sc_error *err);
int cg_emit_metal_tail(const Module *m, const CgInfo *info, const CgDevice *dev, StrBuf *host,
                       sc_error *err);

#endif
