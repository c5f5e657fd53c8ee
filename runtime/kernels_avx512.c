/*
 * kernels_avx512.c — AVX-512 inner loops for kernels.c (not written yet:
 * an empty table, so "avx512" never runs).
 */
#include "kernels.h"

const sc_kern_ops sc_kern_avx512 = {0};
