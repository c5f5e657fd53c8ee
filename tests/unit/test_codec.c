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
 *   - refusals: a code outside the codebook, a negative frame count, a
 *     codec call on a model of another family, and rows placed one by one
 *     (sc_io.row_pos / row_state: the conv state follows one sequence).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "model_internal.h"
#include "parity_util.h"
#include "speechc.h"

#define DIR "tests/data/codec/codec_tiny"

static char tmpdir[64];

static sc_model *build(const char *cc, int fuse, int frames) {
  char out[256];
  snprintf(out, sizeof out, "%s/codec_%s_%d_%d.so", tmpdir, cc, fuse, frames);
  BuildOpts o = build_defaults();
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
