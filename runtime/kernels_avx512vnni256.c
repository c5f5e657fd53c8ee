/*
 * kernels_avx512vnni256.c — kernels_avx512vnni.c again, with the bf16
 * band's one-token dot (GEMV) at 256-bit width: every 512-bit accumulator
 * of that loop becomes its two 256-bit halves, which see the same lanes'
 * operations in the same order, so every result has the bits of the
 * "avx512-vnni" table (test_avx512_simde checks them against its GEMM
 * tiles; test_kernels against that table where a CPU runs both).  The
 * q8_0 dot is 256-bit wide in every AVX-512 table (kernels_avx512.c).
 * The GEMM tiles, attention and the rest are that table's.
 *
 * For CPUs whose 512-bit operations are split into two 256-bit halves
 * (AMD Zen 4): there the 512-bit bf16 loop reads DRAM a third slower
 * (docs/PERFORMANCE.md, "Zen 4").
 */
#define SC_AVX512_OPS sc_kern_avx512vnni256
#define SC_AVX512_NAME "avx512-vnni-256"
#define SC_VNNI 1
#define SC_GEMV_256 1
#include "kernels_avx512.c"
