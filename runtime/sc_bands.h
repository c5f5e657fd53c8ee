/*
 * sc_bands.h — the weight bands' traits: one row per SC_W_* band (sc_abi.h)
 * with its block size, block bytes, name and CPU layout, read by every
 * layer that stores or reads weights: the IR (ir_band_row_bytes), the
 * packer, codegen (the rows it addresses, the SC_W_* names it prints) and
 * the runtime's kernels.  As ggml's type_traits: a new band is one row here
 * and its kernels, not a case in each layer.
 *
 * The sizes are also macros, so that the kernels' inner loops keep
 * compile-time constants (and test arrays can be sized by them); the table
 * is filled from the macros, so there is still one definition of each.
 * The runtime owns this header: the compiler includes it, never the
 * reverse.  Not part of sc_abi.h (generated code does not need it).
 */
#ifndef SC_BANDS_H
#define SC_BANDS_H

#include <stddef.h>
#include <stdint.h>

#include "sc_abi.h"

/* Elements per block of the quantized bands (GGML's QK8_0 = QK4_0). */
#define SC_QK 32
/* Bytes of one q8_0 block: f16 scale d, then 32 int8. */
#define SC_Q8_0_BLOCK (2 + SC_QK)
/* Bytes of one q4_0 block: f16 scale d, then 16 bytes of nibbles. */
#define SC_Q4_0_BLOCK (2 + SC_QK / 2)
/* The CPU's q4_0 layout (kernels.h): blocks per group, and the bytes of a
 * whole group (eight scales, then four 32-byte chunks of nibbles). */
#define SC_Q4_GROUP 8
#define SC_Q4_GROUP_BYTES (SC_Q4_GROUP * SC_Q4_0_BLOCK)
/* q8_0's grouped order (kernels.h; not yet the artifacts' layout): blocks
 * per group and the bytes of a whole group (eight scales, then eight
 * 32-byte chunks). */
#define SC_Q8_GROUP 8
#define SC_Q8_GROUP_BYTES (SC_Q8_GROUP * SC_Q8_0_BLOCK)

#define SC_W_COUNT 5 /* SC_W_F32 .. SC_W_Q4_0 */

typedef struct sc_band_traits {
  const char *name;     /* "q4_0": --weights, inspect, IR dumps */
  const char *abi_name; /* "SC_W_Q4_0": the enum constant generated code names */
  int block;            /* elements per block (1: a plain element type) */
  int block_bytes;      /* bytes of one block */
  int linear;           /* sc_kernels.linear multiplies it (and --weights stores it) */
  int cpu_group;        /* CPU row layout: blocks per rearranged group (kernels.h),
                         * 0 = GGML's block order */
  int cpu_group_bytes;  /* bytes of one whole group */
} sc_band_traits;

/* Indexed by SC_W_*; defined in sc_bands.c. */
extern const sc_band_traits sc_band_table[SC_W_COUNT];

/* The traits of band wtype, or NULL when wtype is not a band. */
static inline const sc_band_traits *sc_band(int wtype) {
  return wtype >= 0 && wtype < SC_W_COUNT ? &sc_band_table[wtype] : NULL;
}

/* Blocks with a scale (q8_0, q4_0): rows are whole blocks. */
static inline int sc_band_quantized(int wtype) {
  const sc_band_traits *t = sc_band(wtype);
  return t && t->block > 1;
}

/* Bytes of one row of `cols` (a multiple of the block) in band wtype; 0
 * for an unknown band.  Not for inner loops: callers hoist it. */
static inline size_t sc_band_row_bytes(int wtype, int64_t cols) {
  const sc_band_traits *t = sc_band(wtype);
  return t ? (size_t)(cols / t->block) * (size_t)t->block_bytes : 0;
}

/* The band named `name` ("bf16"), or -1. */
int sc_band_find(const char *name);

#endif /* SC_BANDS_H */
