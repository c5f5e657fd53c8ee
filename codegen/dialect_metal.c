/*
 * dialect_metal.c — the Metal Shading Language dialect (cg_dialect.h):
 * the same kernels as dialect_cuda.c spelled for Apple GPUs, and the
 * prelude of helpers they use.
 *
 * Differences from CUDA that the spellings carry:
 *   - every pointer names its address space: kernel parameters `device`
 *     (buffers) or `constant` (the token count T, by reference), pointers
 *     into threadgroup arrays `threadgroup` ($dev, $tg);
 *   - thread and threadgroup positions are parameters
 *     (`sc_tid [[thread_position_in_threadgroup]]`, `sc_bid
 *     [[threadgroup_position_in_grid]]`) instead of built-in variables;
 *   - 64-bit integers are `long` ($i64), literals `L` ($ll);
 *   - no read-only-cache load ($ldg is a plain load), no `double` (the
 *     device sampler is not written in Metal: the host samples), no erf
 *     (sc_erf below);
 *   - sc_device_io's row_pos and row_state are device pointers (the
 *     runtime writes GPU addresses there), where CUDA has integers it
 *     casts.
 * The subset of MSL the generator may print is written down in
 * tests/emu/metal/metal_stdlib, the stand-in that compiles these kernels
 * for the CPU in the tests.
 */
#include <string.h>

#include "cg_dialect.h"

static const char prelude[] =
    "#include <metal_stdlib>\n"
    "using namespace metal;\n"
    "\n"
    "#define SC_DEVICE static inline\n"
    "#define SC_INF INFINITY\n"
    "\n"
    "typedef struct sc_device_io { /* sc_abi.h; row_pos, row_state: GPU addresses or 0 */\n"
    "  int n, pos, step, err_kernel, err_value, err_what;\n"
    "  device const int *row_pos;\n"
    "  device const long *row_state;\n"
    "  int pad[6];\n"
    "} sc_device_io;\n"
    "\n"
    "SC_DEVICE float sc_bf16(unsigned short b) { return as_type<float>((uint)b << 16); }\n"
    "SC_DEVICE float sc_lo(uint u) { return as_type<float>(u << 16); }        /* bf16 pair: first */\n"
    "SC_DEVICE float sc_hi(uint u) { return as_type<float>(u & 0xffff0000u); } /* second */\n"
    "/* IEEE half, exact (subnormals too) */\n"
    "SC_DEVICE float sc_f16(uint h) {\n"
    "  const uint e = h >> 10 & 31, mant = h & 1023;\n"
    "  float d = e == 31 ? as_type<float>(0x7f800000u | mant << 13)\n"
    "          : e ? as_type<float>((e + 112) << 23 | mant << 13) : (float)mant * 5.9604644775390625e-8f;\n"
    "  return h & 0x8000 ? -d : d;\n"
    "}\n"
    "SC_DEVICE float sc_warp_sum(float v) { return simd_sum(v); }\n"
    "SC_DEVICE float sc_warp_max(float v) { return simd_max(v); }\n"
    "/* erf (Metal has none): Abramowitz and Stegun 7.1.26, |error| < 1.5e-7 */\n"
    "SC_DEVICE float sc_erf(float x) {\n"
    "  const float a = fabs(x), t = 1.0f / (1.0f + 0.3275911f * a);\n"
    "  const float p = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f +\n"
    "                  t * 1.061405429f))));\n"
    "  const float r = 1.0f - p * exp(-a * a);\n"
    "  return x < 0.0f ? -r : r;\n"
    "}\n"
    "/* Row t's position and the byte offset of its state block from S\n"
    " * (sc_io.row_pos, row_state; by default one sequence at pos in S) */\n"
    "SC_DEVICE int sc_row_pos(device const sc_device_io *io, int t) {\n"
    "  return io->row_pos ? io->row_pos[t] : io->pos + t;\n"
    "}\n"
    "SC_DEVICE long sc_row_state(device const sc_device_io *io, int t) {\n"
    "  return io->row_state ? io->row_state[t] : 0;\n"
    "}\n"
    "/* The first of rows t0..t in row t's state block */\n"
    "SC_DEVICE int sc_row_group(device const sc_device_io *io, int t0, int t) {\n"
    "  if (!io->row_state) return t0;\n"
    "  device const long *rs = io->row_state;\n"
    "  while (rs[t0] != rs[t]) t0++;\n"
    "  return t0;\n"
    "}\n"
    "/* The first failing kernel of a call records itself, what (1: an id\n"
    " * outside its table, 2: a NaN/inf output) and the value. */\n"
    "SC_DEVICE void sc_fail(device sc_device_io *io, int kid, int what, int value) {\n"
    "  device atomic_int *k = (device atomic_int *)&io->err_kernel;\n"
    "  int expected = 0;\n"
    "  while (!atomic_compare_exchange_weak_explicit(k, &expected, kid + 1, memory_order_relaxed,\n"
    "                                                memory_order_relaxed))\n"
    "    if (expected != 0) return; /* another kernel was first */\n"
    "  io->err_value = value;\n"
    "  io->err_what = what;\n"
    "}\n";

static void kernel_head(StrBuf *o, const char *name, int threads) {
  (void)threads; /* the runtime launches at most 256 threads a group: within every Apple GPU's limit */
  sb_printf(o, "kernel void %s", name);
}

/* Buffers (pointers) in the device address space, the token count by
 * reference in the constant one; the buffer index is the argument's. */
static void param(StrBuf *o, int index, const char *type, const char *name) {
  const char *sep = index ? ",\n    " : "(";
  if (strchr(type, '*')) sb_printf(o, "%sdevice %s%s [[buffer(%d)]]", sep, type, name, index);
  else sb_printf(o, "%sconstant %s&%s [[buffer(%d)]]", sep, type, name, index);
}

const CgDialect cg_dialect_metal = {
    .name = "metal",
    .title = "Metal",
    .source_name = "model.metal",
    .shared_bytes = 32 * 1024, /* every Apple GPU's threadgroup memory */
    .warp = 32, /* Apple GPUs' simdgroups */
    .prelude = prelude,
    .tid = "sc_tid",
    .bid_x = "sc_bid.x",
    .bid_y = "sc_bid.y",
    .barrier = "threadgroup_barrier(mem_flags::mem_threadgroup)",
    .warp_barrier = "simdgroup_barrier(mem_flags::mem_threadgroup)",
    .shared = "threadgroup",
    .align16 = "alignas(16)",
    .shfl = "simd_shuffle(",
    .ldg = "*(",
    .restrict_ = "",
    .expf = "exp",
    .sqrtf = "sqrt",
    .logf = "log",
    .fmaxf = "fmax",
    .erff = "sc_erf",
    .dev = "device",
    .tg = "threadgroup",
    .i64 = "long",
    .ll = "L",
    .shared16 = "alignas(16) threadgroup",
    .kernel_head = kernel_head,
    .param = param,
    .params_end = ",\n    uint sc_tid [[thread_position_in_threadgroup]],"
                  "\n    uint2 sc_bid [[threadgroup_position_in_grid]]",
    .generic_ptr = 0,
    .sampler = 0,
};
