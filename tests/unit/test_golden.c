/*
 * test_golden.c — generated code is a product under regression:
 *   - the C emitted for each tiny checkpoint (fused and --no-fuse; the
 *     dense LMs of tests/data/llm, the Qwen3.5 hybrid of tests/data/gdn and
 *     the Moshi RQ-Transformers of tests/data/moshi, the Qwen3-TTS 0.6B
 *     layout of tests/data/tts with its batched frame entries)
 *     equals the committed tests/golden/<model>.<fuse>.cpu.c byte for byte, and
 *     so do two quantized builds (qwen3_gqa2_hd32_tied, --weights q4_0
 *     and q8_0: the block-decoding embedding gathers; its rows of 64 are
 *     shorter than a group of eight blocks, whose decoding test_quant
 *     checks end to end)
 *     (regenerate with scripts/regen_golden.sh and review the diff);
 *   - the Metal Shading Language of the checkpoints the CUDA target builds
 *     (--target metal: model.metal) equals tests/golden/<model>.fused.metal,
 *     and one q4_0 build's (block decoding);
 *   - two builds of the same checkpoint give identical source and weight
 *     files (determinism).
 */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "parity_util.h"

static char tmpdir[64];

/* model: its directory under tests/data ("llm/qwen3_gqa2_hd32_tied"). */
/* target: "cpu" (model.c is read) or "metal" (model.metal). */
static char *build_target(const char *model, const char *target, int fuse, DType band, const char *tag, long *size,
                          char **weights, long *wsize) {
  char dir[256], out[512], emit[512], path[600];
  snprintf(dir, sizeof dir, "tests/data/%s", model);
  /* the output is always model.so: its weight file's name is in the code */
  snprintf(out, sizeof out, "%s/%s", tmpdir, tag);
  mkdir(out, 0755);
  snprintf(out, sizeof out, "%s/%s/model.so", tmpdir, tag);
  snprintf(emit, sizeof emit, "%s/%s/src", tmpdir, tag);
  BuildOpts o = build_defaults(); /* flags as in scripts/regen_golden.sh */
  o.model_dir = dir;
  o.out_path = out;
  o.emit_dir = emit;
  o.cc = "tcc";
  o.max_context = 64;
  o.prefill_chunk = 16;
  o.fuse = fuse;
  o.band = band;
  o.quiet = 1;
  o.target = target;
  sc_error err = {0};
  CHECK_MSG(sc_build(&o, &err) == 0, "%s: %s", model, err.msg);
  snprintf(path, sizeof path, "%s/%s", emit, strcmp(target, "metal") ? "model.c" : "model.metal");
  char *src = slurp(path, size);
  if (weights) { /* the one weight file beside it, model.<id>.weights */
    glob_t g;
    snprintf(path, sizeof path, "%s/%s/model.*.weights", tmpdir, tag);
    int found = glob(path, 0, NULL, &g) == 0 && g.gl_pathc == 1;
    CHECK_MSG(found, "%s: expected one weight file", path);
    *weights = found ? slurp(g.gl_pathv[0], wsize) : NULL;
    globfree(&g);
  }
  return src;
}

static char *build_src(const char *model, int fuse, DType band, const char *tag, long *size, char **weights,
                       long *wsize) {
  return build_target(model, "cpu", fuse, band, tag, size, weights, wsize);
}

/* The Metal target: the MSL of every checkpoint the CUDA target builds
 * (no device compiler runs at build time, so this needs no toolkit). */
static void check_metal(const char *model, DType band, const char *suffix) {
  char golden[256];
  snprintf(golden, sizeof golden, "tests/golden/%s.fused%s.metal", strchr(model, '/') + 1, suffix);
  long gsize = 0, size = 0;
  char *want = slurp(golden, &gsize);
  CHECK_MSG(want != NULL, "missing %s (run scripts/regen_golden.sh)", golden);
  char *got = build_target(model, "metal", 1, band, "m", &size, NULL, NULL);
  CHECK_MSG(got && want && size == gsize && !memcmp(got, want, (size_t)size),
            "%s: generated code differs from the golden file (review, then scripts/regen_golden.sh)", golden);
  free(want);
  free(got);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc-golden-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  const char *models[] = {"llm/qwen3_gqa2_hd32_tied", "llm/qwen3_gqa4_hd16_bf16", "llm/llama_gqa4_sharded",
                          "gdn/qwen35_dense_tiny", "gdn/qwen3_next_moe_tiny", "moshi/moshi7b_tiny",
                          "moshi/family_tiny", "mimi/mimi_tiny", "codec/codec_tiny", "tts/tts_tiny_06b_layout"};
  for (size_t i = 0; i < sizeof models / sizeof *models; i++)
    for (int fuse = 0; fuse < 2; fuse++) {
      char golden[256];
      snprintf(golden, sizeof golden, "tests/golden/%s.%s.cpu.c", strchr(models[i], '/') + 1,
               fuse ? "fused" : "unfused");
      long gsize = 0, size = 0;
      char *want = slurp(golden, &gsize);
      CHECK_MSG(want != NULL, "missing %s (run scripts/regen_golden.sh)", golden);
      char *got = build_src(models[i], fuse, DT_F32, "a", &size, NULL, NULL);
      CHECK_MSG(got && want && size == gsize && !memcmp(got, want, (size_t)size),
                "%s: generated code differs from the golden file (review, then scripts/regen_golden.sh)", golden);
      free(want);
      free(got);
    }
  for (int q = 0; q < 2; q++) {
    const char *golden = q ? "tests/golden/qwen3_gqa2_hd32_tied.fused.q8_0.cpu.c"
                           : "tests/golden/qwen3_gqa2_hd32_tied.fused.q4_0.cpu.c";
    long gsize = 0, size = 0;
    char *want = slurp(golden, &gsize);
    CHECK_MSG(want != NULL, "missing %s (run scripts/regen_golden.sh)", golden);
    char *got = build_src("llm/qwen3_gqa2_hd32_tied", 1, q ? DT_Q8_0 : DT_Q4_0, "q", &size, NULL, NULL);
    CHECK_MSG(got && want && size == gsize && !memcmp(got, want, (size_t)size),
              "%s: generated code differs from the golden file (review, then scripts/regen_golden.sh)", golden);
    free(want);
    free(got);
  }
  const char *metal[] = {"llm/qwen3_gqa2_hd32_tied", "llm/qwen3_gqa4_hd16_bf16", "llm/llama_gqa4_sharded",
                         "tts/tts_tiny_06b_layout", "tts/tts_tiny_17b_layout", "gdn/qwen35_dense_tiny",
                         "gdn/qwen35_moe_tiny", "gdn/qwen3_next_moe_tiny", "moshi/moshi7b_tiny",
                         "moshi/family_tiny"};
  for (size_t i = 0; i < sizeof metal / sizeof *metal; i++) check_metal(metal[i], DT_F32, "");
  check_metal("llm/qwen3_gqa2_hd32_tied", DT_Q4_0, ".q4_0");
  /* determinism: same input, same bytes */
  long s1, s2, w1, w2;
  char *wa, *wb;
  char *a = build_src("llm/qwen3_gqa4_hd16_bf16", 1, DT_F32, "d1", &s1, &wa, &w1);
  char *b = build_src("llm/qwen3_gqa4_hd16_bf16", 1, DT_F32, "d2", &s2, &wb, &w2);
  CHECK(a && b && s1 == s2 && !memcmp(a, b, (size_t)s1));
  CHECK(wa && wb && w1 == w2 && w1 > 4096 && !memcmp(wa, wb, (size_t)w1));
  free(a); free(b); free(wa); free(wb);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) {}
  CHECK_DONE();
}
