/*
 * cpu.h — x86 CPU features by name: the names an artifact's descriptor lists
 * in cpu_features (compiler/toolchain.c records them, runtime/model.c checks
 * them) and the ones the kernels dispatch on.
 */
#ifndef SC_CPU_H
#define SC_CPU_H

/* The feature names speechc knows, comma-separated: for messages. */
#define SC_CPU_KNOWN "sse4.2,avx,avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"

/* 1: this CPU (and OS) has feature f; 0: it lacks it; -1: f is not a name
 * speechc knows (SC_CPU_KNOWN). */
int sc_cpu_has(const char *f);

/* 1 when this CPU runs 512-bit vector operations as two 256-bit halves
 * (AMD family 19h, Zen 4: the only such AVX-512 CPU so far), else 0. */
int sc_cpu_avx512_split(void);

/* 1 on an Intel x86 CPU (cpuid's vendor GenuineIntel), else 0. */
int sc_cpu_intel(void);

#endif
