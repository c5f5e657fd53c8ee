/*
 * test_ir.c — the tables the layers share:
 *   - band traits (runtime/sc_bands.h): every band's row size is what its
 *     quantizer writes, the IR and the runtime agree on it, names and the
 *     DType <-> SC_W_* mapping round-trip;
 *   - ops.def's targets column: a graph of ops both targets lower passes
 *     ir_check_target and both emitters print it (INPUT_HIDDEN's builder);
 *   - the target table (compiler/target.h): lookup by name, each target's
 *     ops.def bit, and its weight layout per band (q4_0 grouped on cpu
 *     only);
 *   - ops.def's operand slots: each op's named slots are 0..k-1 without a
 *     hole or a repeat, within its arity;
 *   - the kernel dialect (codegen/cg_dialect.h): every word of the CUDA
 *     instance is spelled, text without words passes unchanged, and a
 *     second instance (Metal-like spellings) respells the same kernel
 *     text: the kernels are not tied to CUDA;
 *   - rows as an affine function of T (IR_T_SCALED): composition, binding,
 *     C text, the verifier's max_tokens rule and the generated T check.
 */
#include <string.h>

#include "cg.h"
#include "cg_dialect.h"
#include "check.h"
#include "ir.h"
#include "kernels.h"
#include "passes.h"
#include "target.h"

static void test_bands(void) {
  for (int w = 0; w < SC_W_COUNT; w++) {
    const sc_band_traits *t = sc_band(w);
    CHECK(t && t->block >= 1 && t->block_bytes >= 1);
    CHECK(sc_band_find(t->name) == w);
    const DType d = ir_dtype_of_wtype(w);
    CHECK_MSG(d != DT_COUNT && ir_wtype(d) == w, "band %s", t->name);
    CHECK(!strcmp(ir_dtype_name(d), t->name));
    for (int cols = 32; cols <= 1024; cols += 32)
      CHECK(ir_band_row_bytes(d, cols) == (int64_t)sc_band_row_bytes(w, cols));
    CHECK(t->cpu_group == 0 || t->cpu_group_bytes == t->cpu_group * t->block_bytes);
  }
  CHECK(ir_wtype(DT_I32) == -1 && !sc_band(-1) && !sc_band(SC_W_COUNT) && sc_band_find("i32") == -1);
  CHECK(sc_band_row_bytes(SC_W_COUNT, 64) == 0);
  /* the quantizers write exactly one row of the table's size */
  float x[256];
  unsigned char a[2 * SC_Q8_0_BLOCK * 8], b[sizeof a];
  for (int i = 0; i < 256; i++) x[i] = (float)(i % 17) - 8.0f;
  void (*quant[])(const float *, int, void *) = {sc_quantize_row_q8_0, sc_quantize_row_q4_0};
  const int wtype[] = {SC_W_Q8_0, SC_W_Q4_0};
  for (int k = 0; k < 2; k++) {
    /* written bytes are the same over two fills; the first one left is at rb */
    memset(a, 0xa5, sizeof a);
    memset(b, 0x5a, sizeof b);
    quant[k](x, 256, a);
    quant[k](x, 256, b);
    size_t n = 0;
    while (n < sizeof a && a[n] == b[n]) n++;
    CHECK_MSG(n == sc_band_row_bytes(wtype[k], 256), "%s: a row of 256 is %zu bytes, the table says %zu",
              sc_band(wtype[k])->name, n, sc_band_row_bytes(wtype[k], 256));
  }
  CHECK(sc_band_quantized(SC_W_Q8_0) && sc_band_quantized(SC_W_Q4_0) && !sc_band_quantized(SC_W_BF16));
}

/* ids -> embed, + hidden_in -> output: every op of it lowered by both
 * targets, which print the extra input. */
static void test_targets(void) {
  Module m;
  ir_module_init(&m);
  Graph *g = ir_graph_exact(&m, "step", SC_IN_IDS, 1);
  int w = ir_weight_add(&m, "embed", DT_F32, 1, 16, 8);
  int e = ir_embed(g, ir_weight(&m, g, w), ir_input_ids(g), "embed");
  ir_output(g, ir_binary(g, OP_ADD, e, ir_input_hidden(g, 8), "mix"), OUT_HIDDEN);
  sc_error err = {0};
  pass_specialize(&m); /* T = 1: embed rows meet hidden_in's one row */
  CHECK_MSG(ir_verify(&m, g, &err) == SC_OK, "%s", err.msg);
  pass_mark_used(&m);
  pass_plan(&m, target_find("cpu", &err));
  for (int t = 0; t < IR_TARGET_COUNT; t++) CHECK(ir_check_target(&m, (IrTarget)t, &err) == SC_OK);
  StrBuf a, b;
  sb_init(&a);
  sb_init(&b);
  CgInfo info = {.weight_file = "m.weights", .band = "f32", .cpu_features = "",
                 .target = target_find("cpu", &err)};
  CHECK_MSG(cg_emit_c(&m, &info, &a, &err) == SC_OK, "%s", err.msg);
  CHECK(a.s && strstr(a.s, "= io->hidden_in;"));
  sb_free(&a);
  sb_init(&a);
  CHECK_MSG(cg_emit_cuda(&m, &info, &a, &b, &err) == SC_OK, "%s", err.msg);
  CHECK(b.s && strstr(b.s, "= io->hidden_in;"));
  sb_free(&a);
  sb_free(&b);
  ir_module_free(&m);
}

static void test_target_table(void) {
  sc_error err = {0};
  const Target *cpu = target_find("cpu", &err), *cuda = target_find("cuda", &err);
  CHECK(cpu && cuda && cpu->ir == IR_TARGET_CPU && cuda->ir == IR_TARGET_CUDA);
  if (!cpu || !cuda) return;
  CHECK(!strcmp(ir_target_names[cpu->ir], cpu->name) && !strcmp(ir_target_names[cuda->ir], cuda->name));
  /* q8_0, q4_0: the CPU kernels' groups of eight on cpu, GGML's order on cuda */
  CHECK(target_group(cpu, DT_Q4_0) == SC_Q4_GROUP && target_group(cuda, DT_Q4_0) == 0);
  CHECK(target_group(cpu, DT_Q8_0) == SC_Q8_GROUP && target_group(cuda, DT_Q8_0) == 0);
  const DType plain[] = {DT_F32, DT_BF16};
  for (int k = 0; k < 2; k++) CHECK(target_group(cpu, plain[k]) == 0 && target_group(cuda, plain[k]) == 0);
  CHECK(!cpu->device && cuda->device && cuda->arch);
  /* metal: the CUDA kernels' layout, a device source and no build-time code */
  const Target *metal = target_find("metal", &err);
  CHECK(metal && metal->ir == IR_TARGET_METAL && !strcmp(ir_target_names[metal->ir], "metal"));
  if (metal) {
    CHECK(target_group(metal, DT_Q4_0) == 0 && target_group(metal, DT_Q8_0) == 0 && metal->device && !metal->arch);
    CHECK(!strcmp(metal->device->source_name, "model.metal") && !metal->device->code_name);
  }
  CHECK(target_find("vulkan", &err) == NULL && err.code == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "--target vulkan: unknown target (accepted: cpu, cuda, metal)");
}

static const struct {
  OpKind op;
  const char *name;
  int index;
} slots[] = {
#define SLOT(op, name, index) {OP_##op, #name, index},
#include "ops.def"
#undef SLOT
};

static void test_slots(void) {
  const int n = (int)(sizeof slots / sizeof slots[0]);
  CHECK(n > 0);
  for (int op = 0; op < OP_COUNT; op++) {
    int seen = 0, count = 0;
    for (int i = 0; i < n; i++) {
      if (slots[i].op != op) continue;
      const int k = slots[i].index;
      CHECK_MSG(k >= 0 && k < IR_MAX_SRC && !(seen >> k & 1), "%s.%s = %d", ir_op_names[op], slots[i].name, k);
      CHECK_MSG(ir_op_nsrc[op] < 0 || k < ir_op_nsrc[op], "%s.%s beyond its arity", ir_op_names[op], slots[i].name);
      for (int j = 0; j < i; j++)
        CHECK(slots[j].op != op || strcmp(slots[j].name, slots[i].name));
      seen |= 1 << (k & 31);
      count++;
    }
    CHECK_MSG(seen == (1 << count) - 1, "%s: slots are not 0..%d", ir_op_names[op], count - 1);
    CHECK_MSG(!(ir_op_flags[op] & F_FUSED) || count > 0, "fused op %s has no named slots", ir_op_names[op]);
  }
}

static char *expand(const CgDialect *d, const char *text, StrBuf *b) {
  sb_init(b);
  cg_dialect_expand(d, b, text, strlen(text));
  CHECK(!b->failed);
  return b->s ? b->s : "";
}

static void test_dialect(void) {
  const CgDialect *cu = &cg_dialect_cuda;
  StrBuf b;
  /* every word: none left unexpanded, none NULL */
  const char *all = "$tid $bid_x $bid_y $barrier; $warp_barrier; $shared $align16 float s[4]; "
                    "$shfl(v, 1) $ldg(p) $restrict $expf(x) $sqrtf(x) $logf(x) $fmaxf(a, b) $erff(x) "
                    "$dev $tg $i64 1$ll $shared16";
  CHECK_CONTAINS(expand(cu, all, &b), "threadIdx.x blockIdx.x blockIdx.y __syncthreads(); __syncwarp(); "
                 "__shared__ __align__(16) float s[4]; __shfl_sync(0xffffffffu, v, 1) __ldg(p) __restrict__ "
                 "expf(x) sqrtf(x) logf(x) fmaxf(a, b) erff(x) long long 1LL __shared__ __align__(16)");
  CHECK(!strchr(b.s, '$'));
  sb_free(&b);
  CHECK(!strchr(expand(&cg_dialect_metal, all, &b), '$'));
  sb_free(&b);
  CHECK(!strcmp(expand(cu, "  y[i] = 100% * x; /* no words */\n", &b), "  y[i] = 100% * x; /* no words */\n"));
  sb_free(&b);
  CHECK(cu->prelude && strstr(cu->prelude, "sc_warp_sum") && cu->kernel_head && cu->param && cu->warp == 32);
  sb_init(&b);
  cu->kernel_head(&b, "decode_x", 256);
  cu->param(&b, 0, "sc_device_io *", "io");
  cu->param(&b, 1, "const float *", "x");
  CHECK(!strcmp(b.s, "SC_KERNEL(256) decode_x(sc_device_io *io, const float *x"));
  sb_free(&b);
  /* the same kernel text in Metal */
  const CgDialect *mt = &cg_dialect_metal;
  const char *k = "  $shared float s[32];\n  s[$tid] = $expf(v);\n  $barrier;\n  v = $shfl(v, 3);\n";
  CHECK(!strcmp(expand(mt, k, &b), "  threadgroup float s[32];\n  s[sc_tid] = exp(v);\n"
                "  threadgroup_barrier(mem_flags::mem_threadgroup);\n  v = simd_shuffle(v, 3);\n"));
  sb_free(&b);
  /* address spaces, 64-bit integers, an empty word taking its space along */
  const char *a = "const $dev float *x = ($dev float *)y + ($i64)t * 4$ll; $tg float *s; $shared16 float q[4];";
  CHECK(!strcmp(expand(cu, a, &b), "const float *x = (float *)y + (long long)t * 4LL; float *s; "
                "__shared__ __align__(16) float q[4];"));
  sb_free(&b);
  CHECK(!strcmp(expand(mt, a, &b), "const device float *x = (device float *)y + (long)t * 4L; threadgroup float *s; "
                "alignas(16) threadgroup float q[4];"));
  sb_free(&b);
  CHECK(!strcmp(expand(mt, "$ldg(p) $restrict x $erff(v)", &b), "*(p) x sc_erf(v)"));
  sb_free(&b);
  /* Metal's kernel signature: buffers in device memory, T by reference in
   * constant memory, positions as attributed parameters */
  sb_init(&b);
  mt->kernel_head(&b, "decode_x", 256);
  mt->param(&b, 0, "sc_device_io *", "io");
  mt->param(&b, 1, "const float *", "x");
  mt->param(&b, 2, "int ", "T");
  sb_puts(&b, mt->params_end);
  CHECK(!strcmp(b.s, "kernel void decode_x(device sc_device_io *io [[buffer(0)]],\n    device const float *x "
                "[[buffer(1)]],\n    constant int &T [[buffer(2)]],\n    uint sc_tid [[thread_position_in_threadgroup]],"
                "\n    uint2 sc_bid [[threadgroup_position_in_grid]]"));
  sb_free(&b);
  CHECK(cu->sampler && !mt->sampler && cu->generic_ptr && !mt->generic_ptr && mt->warp == 32);
  CHECK(!strstr(mt->prelude, "double") && !strstr(mt->prelude, "long long") && strstr(mt->prelude, "simd_sum"));
}

/* Rows T*m/d: scale composes and reduces, literals stay literals, equal
 * factors give equal integers (the verifier compares rows as integers). */
static void test_affine_rows(void) {
  char buf[48];
  CHECK(IR_ROWS_MUL(IR_T) == 1 && IR_ROWS_DIV(IR_T) == 1);
  CHECK(ir_rows_scale(IR_T, 1, 1) == IR_T);
  const int64_t t8 = ir_rows_scale(ir_rows_scale(IR_T, 2, 1), 4, 1);
  CHECK(t8 == IR_T_SCALED(8, 1) && IR_ROWS_ON_T(t8));
  CHECK(ir_rows_scale(t8, 3, 8) == IR_T_SCALED(3, 1)); /* 8T*3/8 = 3T */
  CHECK(ir_rows_scale(ir_rows_scale(IR_T, 1, 2), 2, 1) == IR_T);
  CHECK(ir_rows_scale(12, 5, 3) == 20 && ir_rows_scale(7, 1, 2) == 0);
  CHECK(ir_rows_scale(IR_T_SCALED(1 << 19, 1), 4, 1) == 0); /* past the encoding */
  CHECK(ir_rows_eval(IR_T_SCALED(1920, 1), 3) == 5760 && ir_rows_eval(IR_T_SCALED(1, 4), 8) == 2);
  CHECK(ir_rows_eval(17, 3) == 17);
  CHECK(!strcmp(ir_rows_text(IR_T, buf, sizeof buf), "T"));
  CHECK(!strcmp(ir_rows_text(IR_T_SCALED(4, 1), buf, sizeof buf), "(T * 4)"));
  CHECK(!strcmp(ir_rows_text(IR_T_SCALED(1, 2), buf, sizeof buf), "(T / 2)"));
  CHECK(!strcmp(ir_rows_text(IR_T_SCALED(3, 2), buf, sizeof buf), "(T * 3 / 2)"));
  CHECK(!strcmp(ir_rows_text(9, buf, sizeof buf), "9"));

  /* a value of T/2 rows: max_tokens must be even, and the entry checks T */
  for (int max = 7; max <= 8; max++) {
    Module m;
    ir_module_init(&m);
    Graph *g = ir_graph_new(&m, "half", SC_IN_EMBEDS, max);
    int x = ir_node(g, OP_INPUT_EMBEDS, DT_F32, IR_T_SCALED(1, 2), 8, NULL, 0, "embeds");
    ir_output(g, ir_unary(g, OP_SILU, x, "act"), OUT_HIDDEN);
    sc_error err = {0};
    const int rc = ir_verify(&m, g, &err);
    if (max == 7) {
      CHECK(rc != SC_OK && strstr(err.msg, "T/2") && strstr(err.msg, "max_tokens 7"));
    } else {
      CHECK_MSG(rc == SC_OK, "%s", err.msg);
      CHECK(ir_graph_t_align(g) == 2);
      pass_mark_used(&m);
      pass_plan(&m, target_find("cpu", &err));
      StrBuf a;
      sb_init(&a);
      CgInfo info = {.weight_file = "m.weights", .band = "f32", .cpu_features = "",
                     .target = target_find("cpu", &err)};
      CHECK_MSG(cg_emit_c(&m, &info, &a, &err) == SC_OK, "%s", err.msg);
      CHECK(a.s && strstr(a.s, "if (T % 2)") && strstr(a.s, "(T / 2)"));
      sb_free(&a);
    }
    ir_module_free(&m);
  }
}

int main(void) {
  test_bands();
  test_affine_rows();
  test_targets();
  test_target_table();
  test_slots();
  test_dialect();
  CHECK_DONE();
}
