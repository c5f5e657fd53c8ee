/*
 * test_codec.c — the 12 Hz codec decoder compiled by speechc against the
 * official qwen-tts decoder on random weights (tests/data/codec, made by
 * tests/parity/make_codec.py):
 *   - the whole utterance in one sc_codec_decode call: PCM within 1e-4 of
 *     the reference (max abs error over max |ref|);
 *   - streamed frame by frame, and in uneven pieces, on one session: the
 *     same bound (every conv's context, the transposed convs' carries and
 *     the attention ring live in the session);
 *   - sc_session_reset starts a new stream: the same PCM again;
 *   - builds: libtcc and gcc, fused and --no-fuse, frames per call 8 and 1
 *     (an exact T = 1 graph: rows are literals everywhere);
 *   - bf16 weights (--weights bf16; bf16 activations on AMX tiles or
 *     AVX512-BF16 where the CPU has them, kernels.h): the waveform's SNR
 *     against the f32 reference at least 30 dB and 3 dB above the official
 *     decoder's own bf16 decode (pcm_bf16.f32: the model cast to
 *     torch.bfloat16), whole and frame by frame; with SPEECHC_BF16_ACT=off
 *     too, and the engine really taken where one runs (its bits differ from
 *     the f32 activations', and frame by frame gives the bits of the whole
 *     call); a bad SPEECHC_BF16_ACT refused at session open;
 *   - refusals: a code outside the codebook, a negative frame count, a
 *     codec call on a model of another family, and rows placed one by one
 *     (sc_io.row_pos / row_state: the conv state follows one sequence).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "kernels_amx.h"
#include "model_internal.h"
#include "parity_util.h"
#include "speechc.h"

#define DIR "tests/data/codec/codec_tiny"

static char tmpdir[64];

static sc_model *build_band(const char *cc, int fuse, int frames, DType band) {
  char out[256];
  snprintf(out, sizeof out, "%s/codec_%s_%d_%d_%d.so", tmpdir, cc, fuse, frames, (int)band);
  BuildOpts o = build_defaults();
  o.band = band;
  o.model_dir = DIR;
  o.out_path = out;
  o.cc = cc;
  o.fuse = fuse;
  o.quiet = 1;
  o.prefill_chunk = frames;
  sc_error err = {0};
  int rc = sc_build(&o, &err);
  CHECK_MSG(rc == 0, "build %s: %s", out, err.msg);
  sc_model *m = NULL;
  if (!rc) CHECK_MSG(sc_model_open(out, NULL, &m, &err) == 0, "%s", err.msg);
  return m;
}

static sc_model *build(const char *cc, int fuse, int frames) { return build_band(cc, fuse, frames, DT_F32); }

/* 10 log10(sum ref^2 / sum (x - ref)^2) */
static double snr_db(const float *x, const float *ref, int n) {
  double s = 0, e = 0;
  for (int i = 0; i < n; i++) {
    s += (double)ref[i] * ref[i];
    e += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]);
  }
  return 10 * log10(s / e);
}

/* The bf16 band against the f32 reference, gated on the waveform's SNR. */
static void run_bf16(int frames, const int32_t *codes, int T, const float *ref, const float *ref_bf16) {
  const int n = T * 24;
  const double official = snr_db(ref_bf16, ref, n), gate = official + 3 > 30 ? official + 3 : 30;
  sc_model *m = build_band("tcc", 1, frames, DT_BF16);
  if (!m) return;
  float *pcm = calloc((size_t)n, sizeof *pcm), *pcm_f32act = calloc((size_t)n, sizeof *pcm);
  sc_error err = {0};
  for (int amx = 1; amx >= 0; amx--) {
    if (!amx) setenv("SPEECHC_BF16_ACT", "off", 1);
    sc_session *s = NULL;
    CHECK_MSG(sc_session_open(m, &s, &err) == 0, "%s", err.msg);
    float *out = amx ? pcm : pcm_f32act;
    CHECK_MSG(sc_codec_decode(s, codes, T, out, &err) == 0, "%s", err.msg);
    const double whole = snr_db(out, ref, n);
    sc_session_reset(s);
    float *fbf = calloc((size_t)n, sizeof *fbf);
    for (int t = 0; t < T; t++)
      CHECK_MSG(sc_codec_decode(s, codes + t * 16, 1, fbf + t * 24, &err) == 0, "%s", err.msg);
    const double framewise = snr_db(fbf, ref, n);
    if (amx && sc_bf16act_engine(SC_BF16ACT_BEST))
      CHECK_MSG(!memcmp(fbf, out, (size_t)n * sizeof *fbf), "bf16 %d frames/call: frame by frame != whole call",
                frames);
    printf("bf16, %d frames per call, %s: SNR %.2f dB whole, %.2f dB frame by frame (official bf16 %.2f dB, "
           "gate %.2f dB)\n", frames, amx ? "bf16 activations allowed" : "SPEECHC_BF16_ACT=off", whole, framewise,
           official, gate);
    CHECK_MSG(whole >= gate && framewise >= gate, "bf16 %d frames/call amx %d: SNR %.2f / %.2f dB < %.2f dB",
              frames, amx, whole, framewise, gate);
    free(fbf);
    sc_session_close(s);
  }
  setenv("SPEECHC_BF16_ACT", "tiles", 1);
  sc_session *bad = NULL;
  CHECK(sc_session_open(m, &bad, &err) == SC_EUSAGE && strstr(err.msg, "expected auto, amx, avx512bf16 or off"));
  if (!sc_amx_usable()) {
    setenv("SPEECHC_BF16_ACT", "amx", 1);
    CHECK(sc_session_open(m, &bad, &err) == SC_ERUNTIME && strstr(err.msg, "cannot run it"));
  }
  unsetenv("SPEECHC_BF16_ACT");
  /* AMX or AVX512-BF16 round the activations: other bits than f32 ones */
  const int differ = memcmp(pcm, pcm_f32act, (size_t)n * sizeof *pcm) != 0, engine = sc_bf16act_engine(SC_BF16ACT_BEST);
  if (engine) CHECK_MSG(differ, "bf16 activations: the %s path did not run", engine == SC_BF16ACT_AMX ? "AMX" : "AVX512-BF16");
  if (!engine) CHECK_MSG(!differ, "%s", "SPEECHC_BF16_ACT=off changed the output where no engine runs");
  free(pcm);
  free(pcm_f32act);
  sc_model_close(m);
}

static void run_one(const char *cc, int fuse, int frames, const int32_t *codes, int T, const float *ref) {
  sc_model *m = build(cc, fuse, frames);
  if (!m) return;
  sc_error err = {0};
  sc_codec_info ci;
  CHECK_MSG(sc_codec_get_info(m, &ci, &err) == 0, "%s", err.msg);
  CHECK(ci.n_codebooks == 16 && ci.codebook_size == 64 && ci.samples_per_frame == 24 &&
        ci.sample_rate == 24000 && ci.max_frames == frames);
  sc_session *s = NULL;
  CHECK_MSG(sc_session_open(m, &s, &err) == 0, "%s", err.msg);
  const int n = T * 24;
  float *pcm = calloc((size_t)n, sizeof *pcm);
  const double tol = 1e-4;

  /* missing buffers are refused (err may be NULL), nothing decoded */
  CHECK(sc_codec_decode(s, NULL, T, pcm, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "sc_codec_decode: no codes");
  CHECK(sc_codec_decode(s, codes, T, NULL, NULL) == SC_EUSAGE);
  /* whole utterance */
  CHECK_MSG(sc_codec_decode(s, codes, T, pcm, &err) == 0, "%s", err.msg);
  double e = rel_err(pcm, ref, n);
  CHECK_MSG(e <= tol, "%s fuse %d frames/call %d: whole: rel err %.3g", cc, fuse, frames, e);

  /* a new stream, frame by frame */
  sc_session_reset(s);
  memset(pcm, 0, (size_t)n * sizeof *pcm);
  for (int t = 0; t < T; t++)
    CHECK_MSG(sc_codec_decode(s, codes + t * 16, 1, pcm + t * 24, &err) == 0, "%s", err.msg);
  e = rel_err(pcm, ref, n);
  CHECK_MSG(e <= tol, "%s fuse %d frames/call %d: frame by frame: rel err %.3g", cc, fuse, frames, e);

  /* uneven pieces: 3, 0, 5, then the rest */
  sc_session_reset(s);
  memset(pcm, 0, (size_t)n * sizeof *pcm);
  int done = 0;
  const int piece[] = {3, 0, 5, T - 8};
  for (int k = 0; k < 4; k++) {
    CHECK_MSG(sc_codec_decode(s, codes + done * 16, piece[k], pcm + done * 24, &err) == 0, "%s", err.msg);
    done += piece[k];
  }
  e = rel_err(pcm, ref, n);
  CHECK_MSG(e <= tol, "%s fuse %d frames/call %d: pieces: rel err %.3g", cc, fuse, frames, e);

  /* refusals, and the session is still usable after them */
  int32_t bad[16];
  memcpy(bad, codes, sizeof bad);
  bad[7] = 64;
  CHECK(sc_codec_decode(s, bad, 1, pcm, &err) == SC_EUSAGE && strstr(err.msg, "codebook 7") &&
        strstr(err.msg, "[0, 64)"));
  CHECK(sc_codec_decode(s, codes, -1, pcm, &err) == SC_EUSAGE);
  const int row_pos[1] = {0};
  sc_io io = {.ids = codes, .n = 1, .out = pcm, .row_pos = row_pos};
  CHECK(rt_call(s, rt_entry(m, "audio"), &io, &err) != 0 && strstr(err.msg, "rows placed one by one"));
  free(pcm);
  sc_session_close(s);
  sc_model_close(m);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc_codec_XXXXXX");
  CHECK(mkdtemp(tmpdir) != NULL);
  long size = 0;
  int32_t *codes = (int32_t *)slurp(DIR "/codes.i32", &size);
  CHECK(codes && size == 12 * 16 * 4);
  float *ref = (float *)slurp(DIR "/pcm.f32", &size);
  CHECK(ref && size == 12 * 24 * 4);
  if (!codes || !ref) CHECK_DONE();
  const char *ccs[] = {"tcc", "gcc"};
  for (int c = 0; c < 2; c++)
    for (int fuse = 1; fuse >= 0; fuse--)
      for (int frames = 8; frames >= 1; frames -= 7) run_one(ccs[c], fuse, frames, codes, 12, ref);
  float *ref_bf16 = (float *)slurp(DIR "/pcm_bf16.f32", &size);
  CHECK(ref_bf16 && size == 12 * 24 * 4);
  if (ref_bf16) {
    run_bf16(8, codes, 12, ref, ref_bf16);
    run_bf16(1, codes, 12, ref, ref_bf16);
  }
  free(ref_bf16);

  /* a plain LM is not a codec */
  BuildOpts o = build_defaults();
  char out[256];
  snprintf(out, sizeof out, "%s/lm.so", tmpdir);
  o.model_dir = "tests/data/llm/qwen3_gqa2_hd32_tied";
  o.out_path = out;
  o.quiet = 1;
  sc_error err = {0};
  CHECK_MSG(sc_build(&o, &err) == 0, "%s", err.msg);
  sc_model *m = NULL;
  sc_codec_info ci;
  if (sc_model_open(out, NULL, &m, &err) == 0) {
    CHECK(sc_codec_get_info(m, &ci, &err) == SC_EUSAGE && strstr(err.msg, "not a codec decoder"));
    sc_model_close(m);
  }
  free(codes);
  free(ref);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  CHECK(system(cmd) == 0);
  CHECK_DONE();
}
