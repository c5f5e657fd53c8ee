/*
 * toolchain.h — generated C to model.so.
 *
 * "tcc": libtcc in-process (no C compiler needed on the machine; code is
 * compiled with -nostdlib, libtcc1.a linked when present).  "gcc"/"clang":
 * the system compiler with -O3 -march=native -ffp-contract=off (contraction
 * off so that fused and unfused builds round identically).
 */
#ifndef SC_TOOLCHAIN_H
#define SC_TOOLCHAIN_H
#include <stddef.h>
#include <sys/types.h>

#include "speechc.h"

/* Compile src (which includes "sc_abi.h" from its own directory) into the
 * shared object out.  child (may be NULL): the system compiler's pid while
 * it runs, else 0; the compiler then leads its own process group, which a
 * signal handler may stop (output.c). */
int tc_compile(const char *cc, const char *src, const char *out, volatile pid_t *child, sc_error *err);
/* CPU features the code of this compiler assumes ("" for tcc). */
void tc_features(const char *cc, char *out, size_t size);

/* Comma-separated CPU features of this machine that -march=native may use. */
void tc_host_features(char *out, size_t size);

#endif
