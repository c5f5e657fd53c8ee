/*
 * kernels_avx512vnni.c — kernels_avx512.c again, built with -mavx512vnni:
 * the q8_0 / q4_0 byte dot products through VPDPBUSD (four byte products
 * summed into an int32 lane in one instruction) instead of VPMADDUBSW +
 * VPMADDWD.  Both routes reach the same exact int32 sums (no step
 * saturates: kernels_avx512.c), so every result has the bits of the
 * "avx512" table; only the instruction count differs.  The float bands
 * are the same code.
 */
#define SC_AVX512_OPS sc_kern_avx512vnni
#define SC_AVX512_NAME "avx512-vnni"
#define SC_VNNI 1
#include "kernels_avx512.c"
