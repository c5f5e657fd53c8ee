/*
 * kernels_avx512vnni256.c — kernels_avx512vnni.c again, with the one-token
 * dots (GEMV) of the bf16 and q8_0 bands at 256-bit width: every 512-bit
 * accumulator of those loops becomes its two 256-bit halves, which see the
 * same lanes' operations in the same order, so every result has the bits
 * of the "avx512-vnni" table (test_avx512_simde checks them against its
 * GEMM tiles; test_kernels against that table where a CPU runs both).
 * The GEMM tiles, attention and the rest are that table's.
 *
 * For CPUs whose 512-bit operations are split into two 256-bit halves
 * (AMD Zen 4): there the 512-bit bf16 loop reads DRAM a third slower and
 * the q8_0 one runs below avx2's in cache (docs/PERFORMANCE.md, "Zen 4").
 */
#define SC_AVX512_OPS sc_kern_avx512vnni256
#define SC_AVX512_NAME "avx512-vnni-256"
#define SC_VNNI 1
#define SC_GEMV_256 1
#include "kernels_avx512.c"
