/* build.h — the compiler driver: checkpoint directory to model.so. */
#ifndef SC_BUILD_H
#define SC_BUILD_H
#include "frontend.h"

/* The default cap on one session's memory (state + scratch + logits), in
 * MB: 64 GiB.  Real models at their full context fit with room to spare
 * (f32 KV caches): Qwen3-8B at 40960 positions 11.3 GiB, Qwen3-32B at 40960
 * 20 GiB, Llama-3.1-8B at 131072 32 GiB, Qwen3-TTS 1.7B at 32768 7 GiB. */
#define SC_SESSION_MB_DEFAULT 65536

/* Defaults for every option (tcc, cpu, f32, fused, chunk 128, 64 GiB). */
BuildOpts build_defaults(void);
int sc_build(const BuildOpts *o, sc_error *err);

#endif
