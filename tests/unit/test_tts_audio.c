/*
 * test_tts_audio.c — sc_tts_generate with a codec decoder: the decoder
 * thread (runtime/tts_audio.c) against the sequential order.
 *
 * The talker is the committed tiny official checkpoint
 * (tests/data/tts/tts_tiny_06b_layout), the decoder a random codec-tiny
 * from bench/make_random_ckpt (1920 samples per frame, so its GEMMs reach
 * OpenBLAS's 16 rows), both built with libtcc.  What holds:
 *   - audio_batch = 1 (one frame per codec call, the default whenever the
 *     decoder keeps up): the PCM bits of audio_sequential, the same codes;
 *   - a forced split (callbacks that hold each side until the other has
 *     reached a given frame, so the decoder takes frames {0}, {1..8},
 *     {9..11}): every on_audio on the decoder thread, in order, and the
 *     PCM bits of sc_codec_decode over the same split on a fresh session;
 *     against one-frame calls only within rounding amplified through the
 *     decoder (OpenBLAS's f32 order depends on the rows: kernels.h), the
 *     bound below;
 *   - free running (whatever it batches): the codes of the sequential run,
 *     every frame heard, PCM within that bound;
 *   - stops and errors, neither side left waiting: on_audio's stop and a
 *     codec error mid-stream (a stream of 6 frames at most) stop the
 *     generator before its next frame, the error returned; a talker error
 *     mid-stream (context full) still lets every frame made before it be
 *     decoded, the same bits as the sequential order.
 * scripts/tsan.sh runs it under ThreadSanitizer too.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "speechc.h"

#define MAX_FRAMES 24
#define SPF 1920
/* peak-relative bound between batched and one-frame decoding, this codec */
#define BATCH_TOL 1e-2

static char tmpdir[64];
static const int32_t text_ids[] = {480, 300, 198, 5, 6, 7, 8, 9, 10, 481, 198, 480, 300, 198};

static sc_model *build(const char *dir, const char *name, int max_context) {
  char out[256];
  snprintf(out, sizeof out, "%s/%s.so", tmpdir, name);
  BuildOpts o = build_defaults();
  o.model_dir = dir;
  o.out_path = out;
  o.cc = "tcc";
  o.quiet = 1;
  o.max_context = max_context;
  sc_error err = {0};
  int rc = sc_build(&o, &err);
  CHECK_MSG(rc == 0, "build %s: %s", out, err.msg);
  sc_model *m = NULL;
  if (!rc) CHECK_MSG(sc_model_open(out, NULL, &m, &err) == 0, "%s", err.msg);
  return m;
}

/* What the callbacks saw, and the handshake that forces a split. */
typedef struct Run {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t gen_thread;     /* sc_tts_generate's caller */
  float pcm[MAX_FRAMES * SPF];
  int heard;                /* frames given to on_audio */
  int entered;              /* the last frame on_frame was called for */
  int out_of_order, on_gen_thread, audio_on_gen_thread;
  int stop_audio_at;        /* on_audio returns non-zero at this frame (-1: never) */
  /* forced split: batches start at split[0] = 0, split[1], ...; on_frame
   * stops generation at split[n_split - 1] */
  const int *split;
  int n_split;
} Run;

static int on_frame(void *user, const int32_t *codes, int g, int frame) {
  Run *r = user;
  (void)codes, (void)g;
  r->on_gen_thread += pthread_equal(pthread_self(), r->gen_thread) != 0;
  if (!r->split) return 0;
  pthread_mutex_lock(&r->mu);
  r->entered = frame;
  pthread_cond_broadcast(&r->cv);
  /* frame split[j] is queued only once the batch at split[j-1] is taken */
  for (int j = 1; j < r->n_split; j++)
    if (frame == r->split[j])
      while (r->heard <= r->split[j - 1]) pthread_cond_wait(&r->cv, &r->mu);
  pthread_mutex_unlock(&r->mu);
  return frame == r->split[r->n_split - 1];
}

static int on_audio(void *user, const int32_t *codes, int g, const float *pcm, int n, int frame) {
  Run *r = user;
  (void)codes, (void)g;
  r->audio_on_gen_thread += pthread_equal(pthread_self(), r->gen_thread) != 0;
  pthread_mutex_lock(&r->mu);
  if (frame != r->heard || n != SPF || frame >= MAX_FRAMES) r->out_of_order++;
  else memcpy(r->pcm + (size_t)frame * SPF, pcm, SPF * sizeof *pcm);
  r->heard = frame + 1;
  pthread_cond_broadcast(&r->cv);
  /* the last frame of a batch: the next batch's frames all queued first */
  for (int j = 1; r->split && j + 1 < r->n_split; j++)
    if (frame + 1 == r->split[j])
      while (r->entered < r->split[j + 1]) pthread_cond_wait(&r->cv, &r->mu);
  pthread_mutex_unlock(&r->mu);
  return frame == r->stop_audio_at;
}

typedef struct Result {
  int rc, frames;
  char msg[1024];
  int32_t codes[MAX_FRAMES * 16];
  sc_tts_stats st;
} Result;

static Run *run(sc_session *s, sc_session *codec, int sequential, int batch, const int *split, int n_split,
                int stop_audio_at, Result *res) {
  Run *r = calloc(1, sizeof *r);
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->gen_thread = pthread_self();
  r->entered = -1;
  r->split = split;
  r->n_split = n_split;
  r->stop_audio_at = stop_audio_at;
  sc_tts_params p = sc_tts_defaults();
  p.text_ids = text_ids;
  p.n_text = (int)(sizeof text_ids / sizeof *text_ids);
  p.speaker = "tiny_speaker";
  p.language = "english";
  p.max_frames = MAX_FRAMES;
  p.min_frames = MAX_FRAMES; /* no EOS: every run makes its frames */
  p.talker.seed = p.predictor.seed = 3;
  p.codec = codec;
  p.on_audio = on_audio;
  p.audio_user = r;
  p.audio_sequential = sequential;
  p.audio_batch = batch;
  p.stats = &res->st;
  sc_error err = {0};
  memset(res, 0, sizeof *res);
  res->rc = sc_tts_generate(s, &p, res->codes, &res->frames, on_frame, r, &err);
  snprintf(res->msg, sizeof res->msg, "%s", res->rc ? err.msg : "");
  CHECK_MSG(!r->out_of_order, "on_audio out of order");
  CHECK_MSG(r->on_gen_thread == res->frames, "on_frame ran %d times of %d on the calling thread", r->on_gen_thread,
            res->frames);
  CHECK_MSG(r->audio_on_gen_thread == (sequential ? r->heard : 0), "on_audio on the calling thread %d times",
            r->audio_on_gen_thread);
  CHECK(res->st.decoded == r->heard && res->st.overlapped == !sequential);
  return r;
}

static void free_run(Run *r) {
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r);
}

/* max |a - b| over max |b| */
static double peak_err(const float *a, const float *b, size_t n) {
  double e = 0, peak = 0;
  for (size_t i = 0; i < n; i++) {
    e = fmax(e, fabs((double)a[i] - b[i]));
    peak = fmax(peak, fabs((double)b[i]));
  }
  return peak > 0 ? e / peak : e;
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc_tts_audio_XXXXXX");
  CHECK(mkdtemp(tmpdir) != NULL);
  const char *bin = getenv("SPEECHC_BIN");
  CHECK_MSG(bin && access(bin, X_OK) == 0, "SPEECHC_BIN must name the speechc binary (ctest sets it)");
  if (!bin) CHECK_DONE();
  char cmd[1024], codec_dir[128];
  snprintf(codec_dir, sizeof codec_dir, "%s/codec", tmpdir);
  const char *slash = strrchr(bin, '/');
  snprintf(cmd, sizeof cmd, "'%.*smake_random_ckpt' codec-tiny '%s' --dtype f32 >/dev/null",
           slash ? (int)(slash - bin + 1) : 0, bin, codec_dir);
  CHECK_MSG(system(cmd) == 0, "%s failed", cmd);

  sc_model *tm = build("tests/data/tts/tts_tiny_06b_layout", "talker", 128);
  sc_model *tm_short = build("tests/data/tts/tts_tiny_06b_layout", "talker24", 24);
  sc_model *cm = build(codec_dir, "codec", 0);
  sc_model *cm_short = build(codec_dir, "codec6", 6);
  sc_session *s = NULL, *s_short = NULL, *cs = NULL, *cs_short = NULL, *ref = NULL;
  sc_error err = {0};
  if (!tm || !tm_short || !cm || !cm_short) CHECK_DONE();
  CHECK_MSG(sc_session_open(tm, &s, &err) == 0 && sc_session_open(tm_short, &s_short, &err) == 0 &&
            sc_session_open(cm, &cs, &err) == 0 && sc_session_open(cm_short, &cs_short, &err) == 0 &&
            sc_session_open(cm, &ref, &err) == 0, "%s", err.msg);
  sc_codec_info ci;
  CHECK(sc_codec_get_info(cm, &ci, &err) == 0 && ci.samples_per_frame == SPF && ci.max_frames == 8);
  if (!s || !s_short || !cs || !cs_short || !ref) CHECK_DONE();
  static Result seq, one, forced, free_, res;
  const size_t all = (size_t)MAX_FRAMES * SPF;

  /* the sequential order, and the thread one frame per call: same bits */
  Run *rs = run(s, cs, 1, 0, NULL, 0, -1, &seq);
  CHECK_MSG(seq.rc == 0 && seq.frames == MAX_FRAMES && rs->heard == MAX_FRAMES, "%s", seq.msg);
  CHECK(seq.st.decoder_calls == MAX_FRAMES && seq.st.first_audio_s > 0 && seq.st.wall_s >= seq.st.decoder_s);
  Run *r1 = run(s, cs, 0, 1, NULL, 0, -1, &one);
  CHECK_MSG(one.rc == 0 && one.frames == MAX_FRAMES && r1->heard == MAX_FRAMES, "%s", one.msg);
  CHECK(one.st.decoder_calls == MAX_FRAMES);
  CHECK(!memcmp(one.codes, seq.codes, sizeof seq.codes));
  CHECK_MSG(!memcmp(r1->pcm, rs->pcm, all * sizeof(float)), "batch 1: not the sequential bits (%.3g)",
            peak_err(r1->pcm, rs->pcm, all));

  /* a forced split {0}, {1..8}, {9..11}, stopped by on_frame at 12: the
   * frame it stops at is kept and decoded too, {12} */
  static const int split[] = {0, 1, 9, 12, 13};
  Run *rf = run(s, cs, 0, 0, split, 4, -1, &forced);
  CHECK_MSG(forced.rc == 0 && forced.frames == 13 && rf->heard == 13, "rc %d frames %d heard %d: %s", forced.rc,
            forced.frames, rf->heard, forced.msg);
  CHECK_MSG(forced.st.decoder_calls == 4 && forced.st.decoded == 13, "%d calls, %d frames decoded",
            forced.st.decoder_calls, forced.st.decoded);
  CHECK(!memcmp(forced.codes, seq.codes, 13 * 16 * sizeof(int32_t)));
  static float want[MAX_FRAMES * SPF];
  sc_session_reset(ref);
  for (int j = 0; j + 1 < 5; j++)
    CHECK_MSG(sc_codec_decode(ref, seq.codes + split[j] * 16, split[j + 1] - split[j], want + (size_t)split[j] * SPF,
                              &err) == 0, "%s", err.msg);
  CHECK_MSG(!memcmp(rf->pcm, want, 13 * SPF * sizeof(float)), "forced split: not the bits of the same split "
            "(%.3g)", peak_err(rf->pcm, want, 13 * SPF));
  const double e_split = peak_err(rf->pcm, rs->pcm, 13 * SPF);
  CHECK_MSG(e_split <= BATCH_TOL, "forced split against one frame per call: %.3g", e_split);

  /* free running: whatever it batched */
  Run *rr = run(s, cs, 0, 0, NULL, 0, -1, &free_);
  CHECK_MSG(free_.rc == 0 && free_.frames == MAX_FRAMES && rr->heard == MAX_FRAMES, "%s", free_.msg);
  CHECK(!memcmp(free_.codes, seq.codes, sizeof seq.codes));
  const double e_free = peak_err(rr->pcm, rs->pcm, all);
  CHECK_MSG(e_free <= BATCH_TOL, "free running against sequential: %.3g", e_free);
  printf("batched against one frame per call: forced split %.3g, free running %.3g (%d calls for %d frames)\n",
         e_split, e_free, free_.st.decoder_calls, MAX_FRAMES);

  /* audio_batch past what one codec call takes is the codec's own (it
   * overflowed into a terabyte's allocation) */
  Run *rb = run(s, cs, 0, INT_MAX, NULL, 0, -1, &res);
  CHECK_MSG(res.rc == 0 && res.frames == MAX_FRAMES && rb->heard == MAX_FRAMES, "audio_batch INT_MAX: %s", res.msg);
  CHECK(!memcmp(res.codes, seq.codes, sizeof seq.codes));
  free_run(rb);

  /* on_audio stops at frame 3: generation stops soon after, no error */
  Run *ra = run(s, cs, 0, 0, NULL, 0, 3, &res);
  CHECK_MSG(res.rc == 0 && ra->heard == 4 && res.frames >= 4 && res.frames <= 4 + 2 * 8 + 1,
            "rc %d heard %d frames %d: %s", res.rc, ra->heard, res.frames, res.msg);
  free_run(ra);

  /* the codec fails mid-stream: a stream of at most 6 frames */
  for (int sequential = 0; sequential < 2; sequential++) {
    Run *rc = run(s, cs_short, sequential, 0, NULL, 0, -1, &res);
    CHECK_MSG(res.rc == SC_ERUNTIME && strstr(res.msg, "the stream is full"), "rc %d: %s", res.rc, res.msg);
    CHECK_MSG(rc->heard <= 6 && res.frames >= rc->heard && res.frames <= 6 + 2 * 8 + 1, "heard %d frames %d",
              rc->heard, res.frames);
    CHECK(!memcmp(res.codes, seq.codes, (size_t)res.frames * 16 * sizeof(int32_t)));
    if (sequential) CHECK(rc->heard == 6 && res.frames == 7);
    free_run(rc);
  }

  /* the talker fails mid-stream (context full): every frame made is heard */
  static Result gseq;
  Run *gs = run(s_short, cs, 1, 0, NULL, 0, -1, &gseq);
  Run *gt = run(s_short, cs, 0, 1, NULL, 0, -1, &res);
  CHECK_MSG(gseq.rc == SC_ERUNTIME && strstr(gseq.msg, "context full") && gseq.frames > 2 &&
            gs->heard == gseq.frames, "rc %d frames %d heard %d: %s", gseq.rc, gseq.frames, gs->heard, gseq.msg);
  CHECK_MSG(res.rc == SC_ERUNTIME && strstr(res.msg, "context full") && res.frames == gseq.frames &&
            gt->heard == res.frames, "rc %d frames %d heard %d: %s", res.rc, res.frames, gt->heard, res.msg);
  CHECK(!memcmp(gt->pcm, gs->pcm, (size_t)gseq.frames * SPF * sizeof(float)));
  free_run(gs);
  free_run(gt);

  /* the codec session is reset by each call: the first run again */
  Run *again = run(s, cs, 0, 1, NULL, 0, -1, &res);
  CHECK(res.rc == 0 && !memcmp(again->pcm, rs->pcm, all * sizeof(float)));
  free_run(again);

  free_run(rs), free_run(r1), free_run(rf), free_run(rr);
  sc_session_close(s), sc_session_close(s_short), sc_session_close(cs), sc_session_close(cs_short);
  sc_session_close(ref);
  sc_model_close(tm), sc_model_close(tm_short), sc_model_close(cm), sc_model_close(cm_short);
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  CHECK(system(cmd) == 0);
  CHECK_DONE();
}
