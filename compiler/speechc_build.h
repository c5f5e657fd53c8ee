/*
 * speechc_build.h — the compiler as a library call: what `speechc build`
 * does, in the calling process (libspeechc.so exports it; Python's
 * speechc.build calls it).
 */
#ifndef SPEECHC_BUILD_H
#define SPEECHC_BUILD_H

#include "speechc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Build as `speechc build ARGS...` would: argv holds the command's
 * arguments without "speechc build" (e.g. {"ckpt/", "-o", "m.so",
 * "--weights", "bf16", "-q"}), the same options with the same meaning.
 * Writes OUT.so, its weight file, OUT.tokenizer/ and OUT.codec.so when the
 * checkpoint has them.  Errors, usage errors included, are in err (nothing
 * is printed but the progress lines, which -q silences).  No signal
 * handlers are installed: an interrupted process may leave temporaries
 * beside OUT.  One build at a time per process (the embedded libtcc keeps
 * global state): callers serialize. */
int sc_build_argv(int argc, const char *const *argv, sc_error *err);

#ifdef __cplusplus
}
#endif
#endif
