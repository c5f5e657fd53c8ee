/* build.h — the compiler driver: checkpoint directory to model.so. */
#ifndef SC_BUILD_H
#define SC_BUILD_H
#include "frontend.h"

/* Defaults for every option (tcc, cpu, f32, fused, chunk 128). */
BuildOpts build_defaults(void);
int sc_build(const BuildOpts *o, sc_error *err);

#endif
