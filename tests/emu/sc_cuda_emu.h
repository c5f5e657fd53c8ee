/*
 * sc_cuda_emu.h — what generated CUDA source (model.cu) needs to compile
 * as C11 for the CPU emulator (cuda_emu.c), when built with -DSC_EMULATE.
 *
 * Every CUDA thread of a block is a coroutine: barriers, warp
 * synchronisation and shuffles switch between them, so the kernels run
 * with their real block and warp semantics, one block at a time.  Shared
 * memory is `static` (blocks never overlap).  The emulator fills sc_emu
 * after loading the compiled source.
 */
#ifndef SC_CUDA_EMU_H
#define SC_CUDA_EMU_H
#include <math.h>
#include <string.h>

typedef struct { unsigned x, y, z; } sc_emu_dim3;
/* 16-byte alignment, as on the GPU: a misaligned vector access faults. */
typedef struct { float x, y, z, w; } __attribute__((aligned(16))) float4;
typedef struct { unsigned x, y, z, w; } __attribute__((aligned(16))) uint4;

typedef struct sc_emu_api {
  const sc_emu_dim3 *tid, *bid, *bdim, *gdim; /* of the running thread */
  void (*syncthreads)(void);
  void (*syncwarp)(void);
  float (*shfl_xor)(float v, int lane_mask);
  float (*shfl)(float v, int src_lane);
  int (*atomic_cas)(int *p, int compare, int value);
  void (*check16)(const void *p); /* a 16-byte vector load's alignment */
} sc_emu_api;
sc_emu_api *sc_emu;

#define SC_KERNEL(threads) void
#define SC_DEVICE static inline
#define SC_INF INFINITY
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define threadIdx (*sc_emu->tid)
#define blockIdx (*sc_emu->bid)
#define blockDim (*sc_emu->bdim)
#define gridDim (*sc_emu->gdim)
#define __syncthreads() sc_emu->syncthreads()
#define __syncwarp() sc_emu->syncwarp()
#define __shfl_xor_sync(mask, v, o) sc_emu->shfl_xor((v), (o))
#define __shfl_sync(mask, v, j) sc_emu->shfl((v), (j))
#define atomicCAS(p, c, v) sc_emu->atomic_cas((p), (c), (v))
#define __ldg(p) (sc_emu->check16((const void *)(p)), *(p))

static inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline float __int_as_float(int u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

#endif
