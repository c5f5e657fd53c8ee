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

/* The options of `speechc build` (build_set.c): the model's BuildOpts and
 * what goes beside it. */
typedef struct BuildArgs {
  BuildOpts o;
  int no_codec;     /* --no-codec: the model alone */
  DType codec_band; /* --codec-weights */
  int help;         /* -h / --help was given (nothing else parsed) */
} BuildArgs;
/* argv (without "speechc build") into *a; a bad option is SC_EUSAGE in err,
 * worded as the CLI has always worded it.  a->o's strings point into argv. */
int build_parse_args(int argc, char **argv, BuildArgs *a, sc_error *err);
/* Everything one `speechc build` makes: the model, its tokenizer copy
 * (tok_install, tok_install_spm) and, unless no_codec, the codec decoder of
 * a Qwen3-TTS checkpoint or the Mimi of a Moshi checkpoint as OUT.codec.so. */
int build_set(const BuildArgs *a, sc_error *err);

#endif
