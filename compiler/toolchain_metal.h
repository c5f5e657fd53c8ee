/*
 * toolchain_metal.h — the Metal target's build-time compiler
 * (toolchain_metal.c): model.metal to a .metallib where Apple's toolchain
 * is (a Mac with Xcode; SPEECHC_METALLIB=0 skips it), else nothing.
 */
#ifndef SC_TOOLCHAIN_METAL_H
#define SC_TOOLCHAIN_METAL_H
#include <stddef.h>

#include "speechc.h"

/* src to *code (malloc'd, NUL-terminated, *bytes long: 0 where nothing
 * was compiled, the runtime then compiles the source). */
int tc_metal_compile(const char *src, const char *name, const char *arch, char **code, size_t *bytes,
                     int *from_cache, sc_error *err);

#endif
