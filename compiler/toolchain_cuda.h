/*
 * toolchain_cuda.h — CUDA source to PTX with NVRTC, at build time.
 *
 * libnvrtc is opened with dlopen (SPEECHC_NVRTC names it exactly, else
 * libnvrtc.so, .so.13, .so.12, .so.11.2 on the library path, then
 * /usr/local/cuda/lib64), so speechc itself never needs CUDA installed.
 *
 * Kernel cache: the PTX of (source, architecture, NVRTC version, speechc
 * version) is kept under $XDG_CACHE_HOME/speechc (else ~/.cache/speechc)
 * as cuda-<hash>.ptx, so rebuilding unchanged source skips NVRTC.
 * SPEECHC_KERNEL_CACHE=off disables it.  SPEECHC_CUDA_VERBOSE=1 prints one
 * line per compilation to stderr: "speechc: kernel cache hit ..." or
 * "speechc: NVRTC ... compiled ...".
 */
#ifndef SC_TOOLCHAIN_CUDA_H
#define SC_TOOLCHAIN_CUDA_H
#include <stddef.h>

#include "speechc.h"

/* The virtual architecture PTX is generated for, from --cuda-arch:
 * "sm_90" or "compute_90" -> "compute_90".  NULL or "" -> the default,
 * compute_80 (Ampere and later).  SC_EUSAGE for anything else. */
#define TC_CUDA_DEFAULT_ARCH "compute_80"
int tc_cuda_arch(const char *in, char *out, size_t size, sc_error *err);

/* Compile src (name: for messages) to PTX for arch.  On success *ptx is a
 * malloc'd NUL-terminated text of *ptx_bytes bytes (the caller frees it)
 * and *from_cache says whether NVRTC was skipped. */
int tc_cuda_compile(const char *src, const char *name, const char *arch, char **ptx,
                    size_t *ptx_bytes, int *from_cache, sc_error *err);

#endif
