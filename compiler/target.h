/*
 * target.h — the code targets as a table, in the spirit of QBE's
 * `struct Target`: each target is a description plus a few hooks, and the
 * driver (build.c) looks one up by name once and asks it, never which one
 * it is.
 *
 *   name, ir       --target's name; its bit in ops.def's targets column
 *   layout[]       how it lays out each weight band's rows in the weight file
 *                  (read by pass_pack, and by the emitter through CgInfo)
 *   plan_temp      the per-node temporaries its emitter needs (pass_plan)
 *   arch, id_text  its architecture option, and what both add to the build id
 *   emit, device   its emitter, and the device compiler that turns the
 *                  emitter's device source into code embedded in the host C
 *   host_name, device->source_name, device->code_name
 *                  the files it writes to --emit-dir
 *
 * The table is in target.c: cpu (C compiled by libtcc or the system
 * compiler) and cuda (host C plus CUDA C compiled to PTX by NVRTC).  A new
 * target (metal: MSL, compiled by the Metal runtime at load) is one more
 * entry and its emitter, not a case in the driver.
 */
#ifndef SC_TARGET_H
#define SC_TARGET_H

#include <stddef.h>
#include <stdint.h>

#include "cg.h"
#include "ir.h"
#include "sc_bands.h"
#include "strbuf.h"

/* How a target stores one band's rows in the weight file. */
typedef enum TargetLayout {
  LAYOUT_BLOCKS,     /* the band's own order: elements, or GGML's blocks one after another */
  LAYOUT_CPU_GROUPS, /* the CPU kernels' groups of sc_band_traits.cpu_group blocks
                      * (runtime/kernels.h); the band's own order where it has none */
} TargetLayout;

/* A file a target adds to --emit-dir: name, and text of len bytes. */
typedef struct TargetFile {
  const char *name;
  const char *text;
  size_t len;
} TargetFile;

/* What target_emit produces.  host: the C source the toolchain compiles
 * into OUT.so; device, code: the device source and the code compiled from
 * it (empty for a host-only target); files: what --emit-dir gets besides
 * the host source (pointing into this struct).  target_code_free releases
 * it all. */
#define TARGET_MAX_FILES 2
typedef struct TargetCode {
  StrBuf host;
  StrBuf device;
  char *code;        /* malloc'd, NUL-terminated */
  size_t code_bytes;
  TargetFile files[TARGET_MAX_FILES];
  int n_files;
} TargetCode;

/* A device compiler: the emitter's device source to code the host C
 * embeds (CUDA: NVRTC to PTX).  The tail hook appends that code, the source
 * and the descriptor to the host C. */
typedef struct TargetDevice {
  const char *source_name;   /* --emit-dir name of the device source: "model.cu" */
  const char *code_name;     /* --emit-dir name of its code: "model.ptx" */
  /* src to *code (malloc'd, NUL-terminated, *bytes long) for arch */
  int (*compile)(const char *src, const char *name, const char *arch, char **code, size_t *bytes,
                 int *from_cache, sc_error *err);
  int (*tail)(const Module *m, const CgInfo *info, const CgDevice *dev, StrBuf *host, sc_error *err);
} TargetDevice;

typedef struct Target {
  const char *name;            /* --target: "cpu", "cuda" */
  IrTarget ir;                 /* its bit in ops.def's targets column (ir_check_target) */
  TargetLayout layout[SC_W_COUNT]; /* per SC_W_* band: what its kernels read */
  /* Bytes of the temporary node n of g needs while it runs, for rows rows
   * (pass_plan places it at n->aux); 0 for none.  NULL: no temporaries. */
  int64_t (*plan_temp)(const Graph *g, const IrNode *n, int64_t rows);
  /* --cuda-arch and the like: in (NULL = the default) to the canonical
   * architecture in out, or SC_EUSAGE; NULL for a target without one (its
   * architecture is then ""). */
  int (*arch)(const char *in, char *out, size_t size, sc_error *err);
  /* Added to the build id text, before the architecture: "" (cpu), " cuda "
   * (cuda).  The build id is embedded in the code and the weight file, and
   * names it: changing this text changes every artifact and golden file. */
  const char *id_text;
  const char *host_name;       /* --emit-dir name of the host source: "model.c" */
  /* The host C into host and, for a target with a device, the device
   * source into device.  SC_EINPUT names what it cannot lower. */
  int (*emit)(const Module *m, const CgInfo *info, StrBuf *host, StrBuf *device, sc_error *err);
  const TargetDevice *device;  /* NULL: the host C is all there is */
} Target;

/* The target named name, or NULL with SC_EUSAGE in err naming the
 * accepted ones. */
const Target *target_find(const char *name, sc_error *err);

/* Blocks per rearranged group of band's rows on target t: the CPU kernels'
 * group size where t lays the band out in groups, 0 for the band's own
 * (GGML) block order. */
int target_group(const Target *t, DType band);

/* Generate m's code for target t (architecture arch, from t->arch): the
 * emitter, then the device compiler and the emitter's tail where t has a
 * device.  c: zeroed by the caller; target_code_free releases it, also
 * after a failure. */
int target_emit(const Target *t, const Module *m, const CgInfo *info, const char *arch, TargetCode *c,
                sc_error *err);
void target_code_free(TargetCode *c);

#endif
