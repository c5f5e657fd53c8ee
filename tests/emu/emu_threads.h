/*
 * emu_threads.h — the execution model the GPU emulators share (cuda_emu.c,
 * metal_emu.c): the threads of one block (threadgroup) are coroutines on
 * one CPU thread, switching at barriers and warp (simdgroup) exchanges, so
 * kernels run with their real block and warp semantics, one block at a
 * time.  Warps are 32 threads.  A barrier or exchange that not every live
 * thread of its block or warp reaches is reported as a deadlock, a warp
 * exchange that not all 32 lanes reach as divergence.
 *
 * x86-64 only (the context switch is a few instructions of assembly).
 */
#ifndef SC_EMU_THREADS_H
#define SC_EMU_THREADS_H

#include <stdint.h>

#define EMU_MAX_THREADS 1024

/* The body of every thread; on_switch (may be NULL) runs before a thread
 * is resumed, with its index (an emulator points its built-in variables
 * at that thread's). */
typedef void (*EmuBody)(int thread, void *arg);
typedef void (*EmuSwitch)(int thread, void *arg);

/* Run n threads of body to completion: NULL, or what went wrong (a
 * deadlock, divergence, or a fault a thread reported).  strict: a block
 * barrier needs every thread of the block (Metal's rule), not only those
 * that have not returned (what CUDA hardware does). */
const char *emu_run_block(int n, EmuBody body, EmuSwitch on_switch, void *arg, int strict);

/* From inside a thread: */
void emu_barrier(void);                       /* every live thread of the block */
void emu_warp_barrier(void);                  /* every live thread of the warp */
uint32_t emu_shuffle(uint32_t v, int lane);   /* lane's v (all 32 lanes take part) */
uint32_t emu_shuffle_xor(uint32_t v, int mask);
void emu_warp_gather(uint32_t v, uint32_t all[32]); /* every lane's v, in lane order */
void emu_fault(const char *what);             /* the block fails with what */

#endif
