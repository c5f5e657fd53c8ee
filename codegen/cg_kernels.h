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
  int n_args;
  CuKernel *k;
  int n_k, cap_k;
  int check_numerics;        /* --check-numerics: OUTPUT kernels check what they write */
} Cu;

/* Kernel text, with the dialect's $words (expanded in cu_kernel_end). */
#define KB(...) sb_printf(&cu->body, __VA_ARGS__)

/* Start a kernel: no arguments, an empty body. */
void cu_kernel_begin(Cu *cu);
/* Add a kernel argument: device type and name, host C expression. */
void cu_karg(Cu *cu, const char *type, const char *name, const char *host);
/* Finish node i's kernel (threads per block, grid expressions): share an
 * identical earlier one or add it, then launch it from the entry. */
int cu_kernel_end(Cu *cu, int i, int threads, const char *gx, const char *gy);
/* The computation of node i (after cg_emit_value declared it): its
 * kernel, or host checks and no kernel (cg_kernels.c). */
int cu_emit_node(Cu *cu, int i);

#endif
