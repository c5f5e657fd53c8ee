/*
 * emu_threads.c — threads of a block as coroutines (emu_threads.h).
 */
#define _GNU_SOURCE
#include "emu_threads.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

__asm__(".text\n"
        ".globl sc_emu_switch_ctx\n"
        ".hidden sc_emu_switch_ctx\n"
        ".type sc_emu_switch_ctx,@function\n"
        "sc_emu_switch_ctx:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n"
        ".size sc_emu_switch_ctx, .-sc_emu_switch_ctx\n");
void sc_emu_switch_ctx(void **save_sp, void *load_sp);

enum { T_READY, T_BLOCK_BAR, T_WARP_BAR, T_SHFL_BAR, T_DONE };
#define STACK (16 * 1024)

typedef struct Thread {
  void *sp;
  unsigned char *stack;
  int state;
  int lane, warp;
  int shfl_parity;  /* alternating slot sets: one barrier per shuffle */
} Thread;

typedef struct Block {
  Thread th[EMU_MAX_THREADS];
  int n;
  void *sched_sp;
  Thread *cur;
  EmuBody body;
  EmuSwitch on_switch;
  void *arg;
  uint32_t shfl[2][EMU_MAX_THREADS];
  unsigned char *stacks; /* EMU_MAX_THREADS stacks in one mapping (huge pages when possible) */
  const char *fault;
} Block;
static Block blk;

/* Leave the running thread in `state` and run the next ready thread of
 * this pass directly, the one the scheduler's loop would run next (only
 * the scheduler makes a thread ready, so the order is the same as going
 * back to it between threads, with half the switches); back to the
 * scheduler after the pass's last one, or at once after a fault. */
static void yield_to_scheduler(int state) {
  Thread *t = blk.cur;
  t->state = state;
  if (!blk.fault)
    for (Thread *u = t + 1; u < blk.th + blk.n; u++)
      if (u->state == T_READY) {
        blk.cur = u;
        if (blk.on_switch) blk.on_switch((int)(u - blk.th), blk.arg);
        sc_emu_switch_ctx(&t->sp, u->sp);
        return;
      }
  sc_emu_switch_ctx(&t->sp, blk.sched_sp);
}

void emu_barrier(void) { yield_to_scheduler(T_BLOCK_BAR); }
void emu_warp_barrier(void) { yield_to_scheduler(T_WARP_BAR); }
void emu_fault(const char *what) {
  if (!blk.fault) blk.fault = what;
}

/* A lane can run ahead to its next exchange (the other slot set) but not
 * to the one after, which waits for every lane to have read this one. */
static uint32_t exchange(uint32_t v, int src) {
  Thread *t = blk.cur;
  int me = (int)(t - blk.th), p = t->shfl_parity;
  t->shfl_parity ^= 1;
  blk.shfl[p][me] = v;
  yield_to_scheduler(T_SHFL_BAR); /* released only with all 32 lanes there */
  return blk.shfl[p][t->warp * 32 + (src & 31)];
}
uint32_t emu_shuffle(uint32_t v, int lane) { return exchange(v, lane); }
void emu_warp_gather(uint32_t v, uint32_t all[32]) {
  Thread *t = blk.cur;
  int me = (int)(t - blk.th), p = t->shfl_parity;
  t->shfl_parity ^= 1;
  blk.shfl[p][me] = v;
  yield_to_scheduler(T_SHFL_BAR);
  memcpy(all, &blk.shfl[p][t->warp * 32], 32 * sizeof *all);
}
uint32_t emu_shuffle_xor(uint32_t v, int mask) { return exchange(v, blk.cur->lane ^ mask); }

static void thread_main(void) {
  blk.body((int)(blk.cur - blk.th), blk.arg);
  yield_to_scheduler(T_DONE);
  abort(); /* never resumed */
}

const char *emu_run_block(int n, EmuBody body, EmuSwitch on_switch, void *arg, int strict) {
  if (n < 1 || n > EMU_MAX_THREADS) return "bad block size";
  if (!blk.stacks) {
    void *p = mmap(NULL, (size_t)EMU_MAX_THREADS * STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                   0);
    if (p == MAP_FAILED) return "out of memory for thread stacks";
    madvise(p, (size_t)EMU_MAX_THREADS * STACK, MADV_HUGEPAGE);
    blk.stacks = p;
  }
  blk.n = n;
  blk.body = body;
  blk.on_switch = on_switch;
  blk.arg = arg;
  blk.fault = NULL;
  for (int i = 0; i < n; i++) {
    Thread *t = &blk.th[i];
    t->stack = blk.stacks + (size_t)i * STACK;
    t->shfl_parity = 0;
    uintptr_t top = ((uintptr_t)t->stack + STACK) & ~(uintptr_t)15;
    void **sp = (void **)(top - 16);
    sp[0] = (void *)thread_main; /* "returned" into */
    sp[1] = 0;
    sp -= 6;                     /* the six callee-saved registers */
    memset(sp, 0, 6 * sizeof *sp);
    t->sp = sp;
    t->state = T_READY;
    t->lane = i % 32;
    t->warp = i / 32;
  }
  for (;;) {
    int progressed = 0, done = 0, at_block = 0;
    /* one pass: the first ready thread runs, and each hands over to the
     * next (yield_to_scheduler) */
    for (int i = 0; i < n; i++) {
      Thread *t = &blk.th[i];
      if (t->state != T_READY) continue;
      blk.cur = t;
      if (on_switch) on_switch(i, arg);
      sc_emu_switch_ctx(&blk.sched_sp, t->sp);
      progressed = 1;
      break;
    }
    if (blk.fault) return blk.fault;
    for (int i = 0; i < n; i++) {
      done += blk.th[i].state == T_DONE;
      at_block += blk.th[i].state == T_BLOCK_BAR;
    }
    if (done == n) return NULL;
    /* release warps whose live threads all wait at a warp barrier */
    int released = 0;
    for (int w = 0; w * 32 < n; w++) {
      int live = 0, waiting = 0, shfl = 0;
      for (int i = w * 32; i < n && i < w * 32 + 32; i++) {
        live += blk.th[i].state != T_DONE;
        waiting += blk.th[i].state == T_WARP_BAR || blk.th[i].state == T_SHFL_BAR;
        shfl += blk.th[i].state == T_SHFL_BAR;
      }
      if (waiting && waiting == live) {
        if (shfl && (shfl != 32 || waiting != 32))
          return "a full-warp shuffle that not all 32 lanes reach (divergence or exited lanes)";
        for (int i = w * 32; i < n && i < w * 32 + 32; i++)
          if (blk.th[i].state == T_WARP_BAR || blk.th[i].state == T_SHFL_BAR) blk.th[i].state = T_READY;
        released = 1;
      }
    }
    if (released) continue;
    if (at_block && at_block == n - done) {
      if (strict && done) return "a threadgroup barrier that not every thread reaches (some returned before it)";
      for (int i = 0; i < n; i++)
        if (blk.th[i].state == T_BLOCK_BAR) blk.th[i].state = T_READY;
      continue;
    }
    if (!progressed) return "deadlock: threads wait at different barriers (divergent barrier or shuffle)";
  }
}
