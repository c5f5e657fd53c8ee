/*
 * frontend.h — model families lowered to IR.
 *
 * A frontend reads config.json and the tensor table of a Checkpoint, checks
 * every tensor it needs against the shapes the config implies, declares the
 * module's weights, states and entry-point graphs, and builds each graph
 * from the unfused IR ops.  Fusion and everything after are passes.
 */
#ifndef SC_FRONTEND_H
#define SC_FRONTEND_H

#include "checkpoint.h"
#include "ir.h"

typedef struct BuildOpts {
  const char *model_dir;
  const char *out_path;      /* model.so */
  const char *cc;            /* "tcc", "gcc", "clang" */
  const char *target;        /* "cpu" */
  DType band;                /* --weights */
  int max_context;           /* 0: family default */
  int prefill_chunk;         /* tokens per prefill call */
  int fuse;                  /* 0 with --no-fuse */
  const char *emit_dir;      /* keep generated sources here */
  const char *dump_ir;       /* NULL, "" (all passes) or a pass name */
  int quiet;
} BuildOpts;

typedef int (*FrontendFn)(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);

/* Family lookup by config.json model_type; NULL when unknown. */
FrontendFn fe_lookup(const char *model_type, const char **family);

int fe_llm(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err);

/* Shared helpers. */
/* Declare weight `name` from checkpoint tensor `tensor` of shape
 * [rows, cols] (cols only when rows == 0: a 1-D vector), stored in band.
 * Returns the weight index, or -1 with err set. */
int fe_weight(Module *m, const Checkpoint *c, const char *name, const char *tensor,
              int64_t rows, int64_t cols, DType band, sc_error *err);
/* Declare the cos|sin table of a rotary embedding. */
int fe_rope_table(Module *m, int max_ctx, int rot_dims, double theta);

#endif
