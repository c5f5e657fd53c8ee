/*
 * passes.h — the passes between the frontend and codegen, in the order the
 * driver runs them (compiler/build.c).  Each is one file; each leaves every
 * graph verifiable by ir_verify.
 */
#ifndef SC_PASSES_H
#define SC_PASSES_H

#include <stdio.h>

#include "frontend.h"
#include "ir.h"
#include "target.h"

/* Bind the token dimension: graphs with max_tokens == 1 get rows = 1. */
void pass_specialize(Module *m);
/* Form the fused ops of ops.def from their unfused definitions; merges
 * sibling linears that read the same input into one packed weight. */
void pass_fuse(Module *m);
/* Mark the weights any graph still reads (pack writes only those). */
void pass_mark_used(Module *m);
/* Plan one static scratch arena per graph (liveness, first-fit reuse,
 * in-place residual updates, the temporaries target t's emitter needs) and
 * the session state layout. */
void pass_plan(Module *m, const Target *t);
/* After pass_plan: what one session allocates (state, the largest scratch
 * arena, the logits row) against cap_mb megabytes (2^20 bytes); an error
 * names the numbers and the flag that raises the cap. */
int pass_plan_check_session(const Module *m, int64_t cap_mb, sc_error *err);
/* Lay out and write the packed weight file (aligned, each band in target
 * t's layout, checksummed).  f: the weight file, empty and open for writing; pass_pack
 * closes it.  path names it in messages.  Returns SC_OK or an error. */
int pass_pack(Module *m, const Target *t, FILE *f, const char *path, uint64_t *checksum, uint64_t *data_bytes,
              uint64_t build_id, int quiet, sc_error *err);

#endif
