/*
 * cg_kernels.h — the GPU emitter's state, shared by cg_cuda.c (kernel
 * sharing, host launchers, entry functions, sampler, device code in the
 * artifact) and cg_kernels.c (the kernel of each op, over a dialect).
 * Not used outside codegen/.
 */
#ifndef SC_CG_KERNELS_H
#define SC_CG_KERNELS_H

#include "cg_dialect.h"
#include "cg_internal.h"

typedef struct CuArg {
  const char *type;          /* device parameter type */
  char name[16];
  char host[IR_NAME + 96];   /* host C expression of its value */
} CuArg;

typedef struct CuKernel {
  char name[80];
  char *key;                 /* signature + body + launch shape: equal keys share */
} CuKernel;

typedef struct Cu {
  Cg cg;                     /* cg.o: the host entry functions */
  const CgDialect *d;        /* the kernel dialect the $words of kernel text print in */
  StrBuf *cu;                /* device source */
  StrBuf launch;             /* host launchers */
  StrBuf body;               /* the kernel being built */
  CuArg args[IR_MAX_SRC + 4];
  const char *suffix;        /* added to the kernel's name ("_gate_up"): a node with two kernels */
  int n_args;
  CuKernel *k;
  int n_k, cap_k;
  int check_numerics;        /* --check-numerics: OUTPUT kernels check what they write */
} Cu;

/* Kernel text, with the dialect's $words (expanded in cu_kernel_end). */
#define KB(...) sb_printf(&cu->body, __VA_ARGS__)

/* Shared memory a block may declare, in floats (the staging limit of the
 * GEMV, router and expert kernels). */
#define CU_SHARED_FLOATS(cu) ((cu)->d->shared_bytes / 4)
/* SC_EINPUT with "<Title> target: " before the message. */
int cu_fail(Cu *cu, const char *fmt, ...);

/* Start a kernel: no arguments, an empty body. */
void cu_kernel_begin(Cu *cu);
/* Add a kernel argument: device type and name, host C expression. */
void cu_karg(Cu *cu, const char *type, const char *name, const char *host);
/* Finish node i's kernel (threads per block, grid expressions): share an
 * identical earlier one or add it, then launch it from the entry. */
int cu_kernel_end(Cu *cu, int i, int threads, const char *gx, const char *gy);
/* A weight argument `name` of node wi as the kernel reads it (a set
 * chosen by io->step offset on the device); a node's weight band (f32
 * for an activation); a grid of per_block-thread blocks over v's rows
 * times count items (cg_kernels.c). */
const char *cu_wptr(Cu *cu, int wi, const char *name);
DType cu_band_of(const Cu *cu, int wi);
void cu_grid_items(const IrNode *v, long long count, int per_block, char *gx, size_t size);
/* The dot loop of one warp over a weight row against staged input rows
 * (cg_kernels.c has the contract): the GEMV kernel's, and the MoE
 * kernels'. */
void cu_dot_row(Cu *cu, DType band, long long C, int nw, int TB, int pf);
/* Indent the text of b after byte `from` by two spaces per line. */
void cu_indent_from(StrBuf *b, size_t from);
/* The kernels of the Gated DeltaNet and mixture-of-experts ops
 * (cg_kernels_gdn.c); SC_EINPUT names what they cannot lower. */
int cu_emit_dwconv(Cu *cu, int i);
int cu_emit_group_norm(Cu *cu, int i);
int cu_emit_delta_rule(Cu *cu, int i);
int cu_emit_topk_route(Cu *cu, int i);
int cu_emit_moe(Cu *cu, int i);
/* The computation of node i (after cg_emit_value declared it): its
 * kernel, or host checks and no kernel (cg_kernels.c). */
int cu_emit_node(Cu *cu, int i);

#endif
