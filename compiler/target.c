/*
 * target.c — the target table (target.h): cpu, cuda and metal.  A target's entry
 * names its emitter and device compiler; the generic sequence that runs
 * them is target_emit.
 */
#include "target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "toolchain_cuda.h"
#include "toolchain_metal.h"

/* cpu: one C file, compiled by libtcc or the system compiler. */
static int emit_cpu(const Module *m, const CgInfo *info, StrBuf *host, StrBuf *device, sc_error *err) {
  return cg_emit_c(m, info, host, err);
}

static const Target target_cpu = {
    .name = "cpu",
    .ir = IR_TARGET_CPU,
    /* q8_0 and q4_0 in the groups of eight blocks the SIMD kernels read
     * whole */
    .layout = {[SC_W_Q8_0] = LAYOUT_CPU_GROUPS, [SC_W_Q4_0] = LAYOUT_CPU_GROUPS},
    .plan_temp = cg_c_temp_bytes,
    .arch = NULL,
    .id_text = "",
    .host_name = "model.c",
    .emit = emit_cpu,
    .device = NULL,
};

/* cuda: the kernels in model.cu, compiled to PTX by NVRTC (or found in the
 * kernel cache); the host C launches them and embeds the PTX and source. */
static int emit_cuda(const Module *m, const CgInfo *info, StrBuf *host, StrBuf *device, sc_error *err) {
  return cg_emit_cuda(m, info, device, host, err);
}

static const TargetDevice device_nvrtc = {
    .source_name = "model.cu",
    .code_name = "model.ptx",
    .compile = tc_cuda_compile,
    .tail = cg_emit_cuda_tail,
};

static const Target target_cuda = {
    .name = "cuda",
    .ir = IR_TARGET_CUDA,
    .layout = {0}, /* every band in its own order: the kernels read GGML's blocks */
    /* The kernels keep their temporaries in registers and shared memory,
     * but the plan has always reserved the C target's.  Dropping them
     * shrinks each fused entry's device scratch (the host code's sizes
     * change; model.cu and the PTX do not): a change of its own, with its
     * golden diff, so they stay reserved for now. */
    .plan_temp = cg_c_temp_bytes,
    .arch = tc_cuda_arch,
    .id_text = " cuda ",
    .host_name = "model.c",
    .emit = emit_cuda,
    .device = &device_nvrtc,
};

/* metal: the same kernels in MSL (model.metal), embedded as source, and
 * as a .metallib where Apple's toolchain is (toolchain_metal.c); else the
 * runtime compiles the source with the Metal framework when the model
 * loads. */
static int emit_metal(const Module *m, const CgInfo *info, StrBuf *host, StrBuf *device, sc_error *err) {
  return cg_emit_metal(m, info, device, host, err);
}

static const TargetDevice device_metal = {
    .source_name = "model.metal",
    .code_name = NULL, /* the .metallib, when there is one, is only embedded */
    .compile = tc_metal_compile,
    .tail = cg_emit_metal_tail,
};

static const Target target_metal = {
    .name = "metal",
    .ir = IR_TARGET_METAL,
    .layout = {0}, /* GGML's blocks, as the CUDA kernels read them */
    .plan_temp = cg_c_temp_bytes, /* as cuda's */
    .arch = NULL,
    .id_text = " metal ",
    .host_name = "model.c",
    .emit = emit_metal,
    .device = &device_metal,
};

static const Target *const targets[] = {&target_cpu, &target_cuda, &target_metal};
#define N_TARGETS (int)(sizeof targets / sizeof targets[0])

const Target *target_find(const char *name, sc_error *err) {
  for (int i = 0; i < N_TARGETS; i++)
    if (name && !strcmp(targets[i]->name, name)) return targets[i];
  char names[128] = "";
  for (int i = 0; i < N_TARGETS; i++) {
    size_t len = strlen(names);
    snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", targets[i]->name);
  }
  sc_fail(err, SC_EUSAGE, "--target %s: unknown target (accepted: %s)", name ? name : "", names);
  return NULL;
}

int target_group(const Target *t, DType band) {
  const int w = ir_wtype(band);
  return w >= 0 && t->layout[w] == LAYOUT_CPU_GROUPS ? sc_band(w)->cpu_group : 0;
}

int target_emit(const Target *t, const Module *m, const CgInfo *info, const char *arch, TargetCode *c,
                sc_error *err) {
  if (t->emit(m, info, &c->host, &c->device, err)) return err->code;
  const TargetDevice *d = t->device;
  if (!d) return SC_OK;
  int from_cache = 0;
  if (d->compile(c->device.s, d->source_name, arch, &c->code, &c->code_bytes, &from_cache, err))
    return err->code;
  CgDevice dev = {c->code, c->code_bytes, c->device.s, arch};
  if (d->tail(m, info, &dev, &c->host, err)) return err->code;
  c->files[c->n_files++] = (TargetFile){d->source_name, c->device.s, c->device.len};
  if (d->code_name) c->files[c->n_files++] = (TargetFile){d->code_name, c->code, strlen(c->code)};
  return SC_OK;
}

void target_code_free(TargetCode *c) {
  sb_free(&c->host);
  sb_free(&c->device);
  free(c->code);
  memset(c, 0, sizeof *c);
}
