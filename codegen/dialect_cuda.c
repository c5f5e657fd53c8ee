/*
 * dialect_cuda.c — the CUDA kernel dialect (cg_dialect.h): the spellings
 * the kernels of cg_kernels.c print, and the prelude of helpers every
 * kernel uses.
 */
#include "cg_dialect.h"

/* Helpers every kernel uses.  The SC_EMULATE branch lets the same text
 * compile as C11 for the CPU emulator of the tests (tests/emu). */
static const char prelude[] =
    "#ifdef SC_EMULATE\n"
    "#include \"sc_cuda_emu.h\"\n"
    "#else\n"
    "#define SC_KERNEL(threads) extern \"C\" __global__ void __launch_bounds__(threads)\n"
    "#define SC_DEVICE static __device__ __forceinline__\n"
    "#define SC_INF __int_as_float(0x7f800000)\n"
    "#endif\n"
    "\n"
    "typedef struct sc_device_io { /* sc_abi.h */\n"
    "  int n, pos, step, err_kernel, err_value, err_what;\n"
    "  unsigned long long row_pos, row_state;\n"
    "  int pad[6];\n"
    "} sc_device_io;\n"
    "typedef struct sc_device_sampler { /* sc_abi.h */\n"
    "  unsigned long long rng[4];\n"
    "  int greedy;\n"
    "  float temperature, top_p;\n"
    "  int top_k;\n"
    "  float penalty;\n"
    "  int ban;\n"
    "  unsigned long long mask;\n"
    "} sc_device_sampler;\n"
    "\n"
    "SC_DEVICE float sc_bf16(unsigned short b) { return __uint_as_float((unsigned)b << 16); }\n"
    "SC_DEVICE float sc_lo(unsigned u) { return __uint_as_float(u << 16); }   /* bf16 pair: first */\n"
    "SC_DEVICE float sc_hi(unsigned u) { return __uint_as_float(u & 0xffff0000u); } /* second */\n"
    "/* IEEE half, exact (subnormals too) */\n"
    "SC_DEVICE float sc_f16(unsigned h) {\n"
    "  const unsigned e = h >> 10 & 31, mant = h & 1023;\n"
    "  float d = e == 31 ? __uint_as_float(0x7f800000u | mant << 13)\n"
    "          : e ? __uint_as_float((e + 112) << 23 | mant << 13) : (float)mant * 5.9604644775390625e-8f;\n"
    "  return h & 0x8000 ? -d : d;\n"
    "}\n"
    "SC_DEVICE float sc_warp_sum(float v) {\n"
    "  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);\n"
    "  return v;\n"
    "}\n"
    "SC_DEVICE float sc_warp_max(float v) {\n"
    "  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));\n"
    "  return v;\n"
    "}\n"
    "/* Row t's position and the byte offset of its state block from S\n"
    " * (sc_io.row_pos, row_state; by default one sequence at pos in S) */\n"
    "SC_DEVICE int sc_row_pos(const sc_device_io *io, int t) {\n"
    "  return io->row_pos ? ((const int *)io->row_pos)[t] : io->pos + t;\n"
    "}\n"
    "SC_DEVICE long long sc_row_state(const sc_device_io *io, int t) {\n"
    "  return io->row_state ? ((const long long *)io->row_state)[t] : 0;\n"
    "}\n"
    "/* The first of rows t0..t in row t's state block */\n"
    "SC_DEVICE int sc_row_group(const sc_device_io *io, int t0, int t) {\n"
    "  if (!io->row_state) return t0;\n"
    "  const long long *rs = (const long long *)io->row_state;\n"
    "  while (rs[t0] != rs[t]) t0++;\n"
    "  return t0;\n"
    "}\n"
    "/* The first failing kernel of a call records itself, what (1: an id\n"
    " * outside its table, 2: a NaN/inf output) and the value. */\n"
    "SC_DEVICE void sc_fail(sc_device_io *io, int kernel, int what, int value) {\n"
    "  if (atomicCAS(&io->err_kernel, 0, kernel + 1) == 0) {\n"
    "    io->err_value = value;\n"
    "    io->err_what = what;\n"
    "  }\n"
    "}\n";

static void kernel_head(StrBuf *o, const char *name, int threads) {
  sb_printf(o, "SC_KERNEL(%d) %s", threads, name);
}

static void param(StrBuf *o, int index, const char *type, const char *name) {
  sb_printf(o, "%s%s%s", index ? ", " : "(", type, name);
}

const CgDialect cg_dialect_cuda = {
    .name = "cuda",
    .title = "CUDA",
    .source_name = "model.cu",
    .shared_bytes = 48 * 1024, /* the static limit of every CUDA GPU */
    .warp = 32,
    .prelude = prelude,
    .tid = "threadIdx.x",
    .bid_x = "blockIdx.x",
    .bid_y = "blockIdx.y",
    .barrier = "__syncthreads()",
    .warp_barrier = "__syncwarp()",
    .shared = "__shared__",
    .align16 = "__align__(16)",
    .shfl = "__shfl_sync(0xffffffffu, ",
    .ldg = "__ldg(",
    .restrict_ = "__restrict__",
    .expf = "expf",
    .sqrtf = "sqrtf",
    .logf = "logf",
    .fmaxf = "fmaxf",
    .erff = "erff",
    .dev = "",
    .tg = "",
    .i64 = "long long",
    .ll = "LL",
    .shared16 = "__shared__ __align__(16)",
    .kernel_head = kernel_head,
    .param = param,
    .params_end = NULL,
    .generic_ptr = 1,
    .sampler = 1,
};
