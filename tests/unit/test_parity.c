/*
 * test_parity.c — compiled models against the official HF transformers
 * traces in tests/data/llm (made by tests/parity/make_llm.py):
 *   - prefill of the prompt: last-token logits vs the reference row;
 *   - decode, one token at a time, over prompt + greedy continuation: every
 *     row of logits (f32 weights: max relative error <= 1e-4);
 *   - greedy generation: identical tokens;
 * for both toolchains (libtcc and gcc), and fused vs --no-fuse builds give
 * bit-identical logits.  The bf16-stored checkpoint is also built with
 * --weights bf16 (exact same values, so the same tolerance applies).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "parity_util.h"
#include "kernels.h"
#include "speechc.h"

static const char *const models[] = {"qwen3_gqa2_hd32_tied", "qwen3_gqa4_hd16_bf16", "llama_gqa4_sharded", "qwen3_sliding",
                                     "qwen3_trained_tiny"};

static char tmpdir[64];

/* Build, run every check, and leave all logits rows (decode path) in rows. */
static int run_one(const char *name, const char *cc, DType band, int fuse, int chunk, float *rows) {
  char dir[256], out[512];
  snprintf(dir, sizeof dir, "tests/data/llm/%s", name);
  snprintf(out, sizeof out, "%s/%s_%s_%s_%d.so", tmpdir, name, cc, ir_dtype_name(band), fuse);
  Trace t;
  CHECK(trace_load(dir, &t) == 0);
  if (!t.logits) return 1;
  BuildOpts o = build_defaults();
  o.model_dir = dir;
  o.out_path = out;
  o.cc = cc;
  o.target = test_target();
  o.band = band;
  o.fuse = fuse;
  o.quiet = 1;
  o.max_context = 64;
  o.prefill_chunk = chunk;
  sc_error err = {0};
  int rc = sc_build(&o, &err);
  CHECK_MSG(rc == 0, "build %s: %s", out, err.msg);
  if (rc) return 1;
  sc_model *m = NULL;
  sc_session *s = NULL;
  CHECK_MSG(sc_model_open(out, NULL, &m, &err) == 0, "%s", err.msg);
  CHECK_MSG(sc_session_open(m, &s, &err) == 0, "%s", err.msg);
  if (!s) return 1;
  int V = t.vocab, nv = 0;
  const double tol = 1e-4;

  /* prefill: the prompt in chunks, last row */
  CHECK_MSG(sc_prefill(s, t.prompt, t.n_prompt, &err) == 0, "%s", err.msg);
  const float *lg = sc_logits(s, &nv);
  CHECK(nv == V);
  double e = rel_err(lg, t.logits + (size_t)(t.n_prompt - 1) * V, V);
  CHECK_MSG(e <= tol, "%s %s prefill: rel err %g", name, cc, e);
  /* continue with decode over the greedy tokens */
  for (int i = 0; i + 1 < t.n_greedy; i++) {
    CHECK_MSG(sc_decode(s, t.greedy[i], &err) == 0, "%s", err.msg);
    e = rel_err(sc_logits(s, NULL), t.logits + (size_t)(t.n_prompt + i) * V, V);
    CHECK_MSG(e <= tol, "%s %s prefill+decode row %d: rel err %g", name, cc, t.n_prompt + i, e);
  }
  /* decode only, every row */
  sc_session_reset(s);
  for (int r = 0; r < t.n_rows; r++) {
    int tok = r < t.n_prompt ? t.prompt[r] : t.greedy[r - t.n_prompt];
    CHECK_MSG(sc_decode(s, tok, &err) == 0, "%s", err.msg);
    memcpy(rows + (size_t)r * V, sc_logits(s, NULL), (size_t)V * sizeof(float));
    e = rel_err(rows + (size_t)r * V, t.logits + (size_t)r * V, V);
    CHECK_MSG(e <= tol, "%s %s decode row %d: rel err %g", name, cc, r, e);
  }
  /* bf16 weights: a prefill of 16 tokens or more may take bf16-rounded
   * activations (SPEECHC_BF16_ACT, on CPUs with AMX or AVX512-BF16): every
   * row at once, the last row within bf16's rounding of the trace and
   * with its argmax; where no engine runs, the f32 activations' tolerance */
  if (band == DT_BF16 && t.n_rows >= 16) {
    sc_session_reset(s);
    int32_t all[64];
    for (int r = 0; r < t.n_rows && r < 64; r++) all[r] = r < t.n_prompt ? t.prompt[r] : t.greedy[r - t.n_prompt];
    CHECK_MSG(sc_prefill(s, all, t.n_rows, &err) == 0, "%s", err.msg);
    const float *ref = t.logits + (size_t)(t.n_rows - 1) * V;
    const float *got = sc_logits(s, NULL);
    const double bound = sc_bf16act_engine(SC_BF16ACT_BEST) ? 2e-2 : tol;
    e = rel_err(got, ref, V);
    CHECK_MSG(e <= bound, "%s %s bf16 prefill of %d rows: rel err %g (bound %g)", name, cc, t.n_rows, e, bound);
    int ag = 0, ar = 0;
    for (int i = 1; i < V; i++) ag = got[i] > got[ag] ? i : ag, ar = ref[i] > ref[ar] ? i : ar;
    CHECK_MSG(ag == ar, "%s %s bf16 prefill of %d rows: argmax %d, trace %d", name, cc, t.n_rows, ag, ar);
  }
  /* greedy generation */
  sc_session_reset(s);
  sc_sample_params p = sc_sample_defaults();
  p.greedy = 1;
  int32_t prompt[64], gen[64];
  for (int i = 0; i < t.n_prompt; i++) prompt[i] = t.prompt[i];
  int n_out = 0;
  CHECK_MSG(sc_generate(s, prompt, t.n_prompt, t.n_greedy, &p, -1, gen, &n_out, NULL, NULL, &err) == 0,
            "%s", err.msg);
  CHECK(n_out == t.n_greedy);
  for (int i = 0; i < n_out && i < t.n_greedy; i++)
    CHECK_MSG(gen[i] == t.greedy[i], "%s %s greedy token %d: %d, expected %d", name, cc, i, gen[i], t.greedy[i]);
  sc_session_close(s);
  sc_model_close(m);
  free(t.logits);
  return 0;
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc-parity-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    Trace t;
    CHECK(trace_load(strcat(strcpy((char[256]){0}, "tests/data/llm/"), models[i]), &t) == 0);
    size_t n = (size_t)t.n_rows * t.vocab;
    float *fused = calloc(n, 4), *unfused = calloc(n, 4), *other = calloc(n, 4);
    run_one(models[i], "tcc", DT_F32, 1, 5, fused);
    run_one(models[i], "tcc", DT_F32, 0, 5, unfused);
    /* on a GPU, fused kernels round differently: each row met the tolerance */
    const int bitwise = !strcmp(test_target(), "cpu");
    CHECK_MSG(!bitwise || !memcmp(fused, unfused, n * 4), "%s: fused and unfused logits differ", models[i]);
    if (bitwise) { /* the host code of a device target is launches only: one toolchain */
      run_one(models[i], "gcc", DT_F32, 1, 128, other);
      run_one(models[i], "gcc", DT_F32, 0, 128, unfused);
      CHECK_MSG(!memcmp(other, unfused, n * 4), "%s gcc: fused and unfused logits differ", models[i]);
    }
    if (strstr(models[i], "bf16")) run_one(models[i], "tcc", DT_BF16, 1, 128, other);
    free(fused);
    free(unfused);
    free(other);
    free(t.logits);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) {}
  CHECK_DONE();
}
