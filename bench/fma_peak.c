/*
 * fma_peak.c — the machine's measured compute ceilings, for stating what
 * fraction of peak a compute-bound kernel (the 12 Hz codec decoder) reaches.
 *
 *   gcc -O2 -mavx512f -mavx512bf16 -mavx512vnni -mamx-tile -mamx-bf16 -pthread \
 *       bench/fma_peak.c -o build/fma_peak && build/fma_peak [SECONDS]
 *
 * Per thread count (1, 2), best of 5 passes:
 *   clock     a chain of dependent integer adds (1 cycle each): the core
 *             clock the FMA loops run at, in GHz
 *   f32 fma   vfmadd231ps zmm, 16 independent accumulators: GFLOP/s
 *             (2 flops per lane) and flops per cycle per core (64 = two
 *             512-bit FMA ports)
 *   bf16 dot  vdpbf16ps zmm (AVX512_BF16): 32 bf16 products summed into 16
 *             f32 lanes per instruction, counted as 64 flops
 *   amx bf16  tdpbf16ps on 16x32 bf16 tiles (AMX): 16*16*32 MACs per
 *             instruction; skipped if the kernel refuses the tile state
 *   int8 dot  vpdpbusd zmm (AVX512-VNNI): 64 u8 x s8 products summed into
 *             16 int32 lanes per instruction, counted as 128 ops (what
 *             the q8_0 / q4_0 tiles' GFLOP/s count), and instructions per
 *             cycle per core
 * The loops touch no memory, so these are the ALUs' ceilings, not what a
 * GEMM reaches.  x86-64 only.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct Job {
  int kind; /* 0 clock, 1 f32, 2 bf16, 3 amx, 4 vnni */
  long iters;
  double ops, secs; /* ops: flops (or cycles for the clock) */
  pthread_barrier_t *bar;
} Job;

static void run_clock(Job *j) {
  /* add reg, reg: the renamer folds chains of add-immediate on recent Intel
   * cores, so the chain adds a register */
  uint64_t x = 0, one = 1;
  for (long i = 0; i < j->iters; i++)
    __asm__ volatile(".rept 100\n\tadd %1, %0\n\t.endr" : "+r"(x) : "r"(one));
  j->ops = 100.0 * (double)j->iters;
}

/* Sixteen accumulators that start from different values, so the compiler
 * cannot merge their identical chains into one. */
#define ACC16(OP) \
  OP(a0, 0) OP(a1, 1) OP(a2, 2) OP(a3, 3) OP(a4, 4) OP(a5, 5) OP(a6, 6) OP(a7, 7) OP(a8, 8) \
  OP(a9, 9) OP(a10, 10) OP(a11, 11) OP(a12, 12) OP(a13, 13) OP(a14, 14) OP(a15, 15)

/* One runner: b and c the operands, every accumulator a = OP(a, b, c)
 * for iters rounds (b through an empty asm each round, so the loop is not
 * folded), the sum kept alive; ops = the work of one round. */
#define DEFINE_RUN(NAME, VT, BT, B, C, INIT, OP, ZERO, ADD, REDUCE, OPS)    \
  static void NAME(Job *j) {                                               \
    BT b = B, c = C;                                                       \
    ACC16(INIT)                                                            \
    for (long i = 0; i < j->iters; i++) {                                  \
      ACC16(OP)                                                            \
      __asm__ volatile("" : "+v"(b));                                      \
    }                                                                      \
    VT s = ZERO;                                                           \
    ACC16(ADD)                                                             \
    volatile double sink = (double)REDUCE(s);                              \
    (void)sink;                                                            \
    j->ops = (OPS) * (double)j->iters;                                     \
  }

#define F32_INIT(a, i) __m512 a = _mm512_set1_ps(1.0f + (float)(i));
#define F32_OP(a, i) a = _mm512_fmadd_ps(a, b, c);
#define PS_ADD(a, i) s = _mm512_add_ps(s, a);
DEFINE_RUN(run_f32, __m512, __m512, _mm512_set1_ps(1.0000001f), _mm512_set1_ps(1e-7f), F32_INIT, F32_OP,
           _mm512_setzero_ps(), PS_ADD, _mm512_reduce_add_ps, 16.0 * 16 * 2)

#define BF16_INIT(a, i) __m512 a = _mm512_set1_ps((float)(i));
#define BF16_OP(a, i) a = _mm512_dpbf16_ps(a, b, c);
DEFINE_RUN(run_bf16, __m512, __m512bh, (__m512bh)_mm512_set1_epi16(0x3f80), (__m512bh)_mm512_set1_epi16(0x3c00),
           BF16_INIT, BF16_OP, _mm512_setzero_ps(), PS_ADD, _mm512_reduce_add_ps, 16.0 * 32 * 2)

#define VNNI_INIT(a, i) __m512i a = _mm512_set1_epi32(i);
#define VNNI_OP(a, i) a = _mm512_dpbusd_epi32(a, b, c);
#define EPI32_ADD(a, i) s = _mm512_add_epi32(s, a);
DEFINE_RUN(run_vnni, __m512i, __m512i, _mm512_set1_epi8(3), _mm512_set1_epi8(-5), VNNI_INIT, VNNI_OP,
           _mm512_setzero_si512(), EPI32_ADD, _mm512_reduce_add_epi32, 16.0 * 64 * 2)

typedef struct TileCfg {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} TileCfg;

static int amx_ok;

static void run_amx(Job *j) {
  static _Alignas(64) uint16_t A[16 * 32], B[16 * 32];
  for (int i = 0; i < 16 * 32; i++) A[i] = B[i] = 0x3c00;
  TileCfg cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; t++) { cfg.colsb[t] = 64; cfg.rows[t] = 16; }
  _tile_loadconfig(&cfg);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, A, 64); _tile_loadd(5, B, 64); _tile_loadd(6, A, 64); _tile_loadd(7, B, 64);
  for (long i = 0; i < j->iters; i++) {
    _tile_dpbf16ps(0, 4, 5); _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 6, 5); _tile_dpbf16ps(3, 6, 7);
  }
  static _Alignas(64) float C[16 * 16];
  _tile_stored(0, C, 64);
  _tile_release();
  j->ops = 4.0 * 16 * 16 * 32 * 2 * (double)j->iters;
}

static void *worker(void *p) {
  Job *j = p;
  if (j->kind == 3 && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) return NULL;
  pthread_barrier_wait(j->bar);
  double t0 = now();
  switch (j->kind) {
  case 0: run_clock(j); break;
  case 1: run_f32(j); break;
  case 2: run_bf16(j); break;
  case 3: run_amx(j); break;
  case 4: run_vnni(j); break;
  }
  j->secs = now() - t0;
  return NULL;
}

/* ops per second over all threads, best of 5 passes */
static double measure(int kind, int threads, long iters) {
  double best = 0;
  for (int pass = 0; pass < 5; pass++) {
    pthread_t th[8];
    Job jobs[8];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
      jobs[t] = (Job){.kind = kind, .iters = iters, .bar = &bar};
      pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    double ops = 0, secs = 0;
    for (int t = 0; t < threads; t++) {
      pthread_join(th[t], NULL);
      ops += jobs[t].ops;
      if (jobs[t].secs > secs) secs = jobs[t].secs;
    }
    pthread_barrier_destroy(&bar);
    if (secs > 0 && ops / secs > best) best = ops / secs;
  }
  return best;
}

int main(int argc, char **argv) {
  const double target = argc > 1 ? atof(argv[1]) : 0.3; /* seconds per pass, roughly */
  amx_ok = !syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA);
  printf("# fma_peak: best of 5 passes of ~%.2f s; AMX tile state %s\n", target,
         amx_ok ? "granted" : "refused (amx skipped)");
  printf("%-8s %7s %10s %14s %16s %16s %14s %14s\n", "threads", "GHz", "f32 GF/s", "f32 flop/cyc", "bf16dot GF/s",
         "amx bf16 GF/s", "int8dot GOP/s", "dpbusd/cyc");
  for (int threads = 1; threads <= 2; threads++) {
    /* iterations for ~target seconds at 4 GHz: 100 cycles, 8, 16 and 64 per iteration */
    const double hz = measure(0, threads, (long)(target * 4e7)) / threads;
    const double f32 = measure(1, threads, (long)(target * 5e8));
    const double bf = measure(2, threads, (long)(target * 2.5e8));
    const double amx = amx_ok ? measure(3, threads, (long)(target * 6e7)) : 0;
    const double i8 = measure(4, threads, (long)(target * 2.5e8));
    printf("%-8d %7.2f %10.1f %14.1f %16.1f %16.1f %14.1f %14.2f\n", threads, hz / 1e9, f32 / 1e9, f32 / hz / threads,
           bf / 1e9, amx / 1e9, i8 / 1e9, i8 / 128 / hz / threads);
  }
  return 0;
}
