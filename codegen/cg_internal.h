/*
 * cg_internal.h — the codegen state and the pieces shared by all targets
 * (cg_walk.c).  Not used outside codegen/.
 */
#ifndef SC_CG_INTERNAL_H
#define SC_CG_INTERNAL_H

#include "cg.h"
#include "sc_abi.h"

typedef struct Cg {
  const Module *m;
  const Graph *g;           /* the graph being printed */
  StrBuf *o;
  char (*var)[IR_NAME + 8]; /* C identifier of each node of g */
  sc_error *err;
  int check_numerics;       /* CgInfo.check_numerics */
  const struct Target *target; /* CgInfo.target */
} Cg;

#define OUT(...) sb_printf(cg->o, __VA_ARGS__)
/* The input of node n in slot NAME of op OP (ops.def's operand slots). */
#define SRC(n, OP, NAME) ((n)->src[S_##OP##_##NAME])

void c_ident(const char *in, char *out, size_t size);
const char *cg_float(char buf[32], float v); /* a C float literal: "1e-06f", "1.0f" */
const char *wtype_name(DType d);      /* "SC_W_F32", ... */
const IrNode *node(const Cg *cg, int i);
const char *ref(const Cg *cg, int i); /* a value as a C expression */
long long ld(const Cg *cg, int i);    /* its row stride in elements */
const char *rows(const IrNode *n);    /* "T" or a literal */
const char *vtype(const IrNode *n);   /* element type of a view */
void comment_node(Cg *cg, int i);
/* Set cg->g and fill cg->var (allocated by the caller, n_nodes entries). */
void cg_name_values(Cg *cg, const Graph *g);
void cg_emit_layout(Cg *cg);
/* Signature and argument checks of an entry function (cg_walk.c). */
void cg_entry_prologue(Cg *cg, const Graph *g, int host_io, const char *scratch_note, const char *extra);
/* Declare node i's value: a leaf or view whole (1), else its buffer (0). */
int cg_emit_value(Cg *cg, int i, int steps_on_device);
void cg_emit_descriptor(Cg *cg, const CgInfo *info, const char *target);
/* The same with `extra` (the device fields of sc_model_desc, as
 * initializer text) after the tensor table; NULL: the CPU's descriptor. */
void cg_emit_descriptor_ext(Cg *cg, const CgInfo *info, const char *target, const char *extra);

#endif
