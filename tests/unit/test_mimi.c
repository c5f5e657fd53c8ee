/*
 * test_mimi.c — Mimi (model_type "mimi", compiler/fe_mimi.c), decoder and
 * encoder, compiled by speechc against the `moshi` package 0.2.13 on random
 * weights (tests/data/mimi/mimi_tiny, made by tests/parity/make_mimi.py):
 *   - the whole utterance in one sc_codec_decode call: PCM within 1e-4 of
 *     the package's streaming decode (max abs error over max |ref|), and
 *     far from its non-streaming decode, which the ring of the decoder
 *     transformer makes differ from frame 2 on (see make_mimi.py): the
 *     test fails if speechc computed the other one;
 *   - frame by frame, in uneven pieces, after a session reset: the same;
 *   - builds: libtcc and gcc, fused and --no-fuse, 4 frames per call and 1;
 *   - encode of enc_in.wav (8 frames): codes identical to the package's
 *     streaming encode (enc_codes.i32) in one call, frame by frame, in
 *     uneven pieces and interleaved with decode calls on the same session
 *     (each direction its own stream), and not the package's
 *     non-streaming encode (enc_codes_whole.i32), which the encoder
 *     transformer's ring makes differ from frame 2 on; a NaN sample and a
 *     full stream are refused by name;
 *   - bf16 weights: decode SNR and encode codes against f32, gated;
 *   - tests/data/mimi/mimi_wide (64 wide, so that the matrices quantize):
 *     f32 against the package (decode and encode), then bf16, q8_0 and
 *     q4_0 against that f32, with the share of the weights really stored
 *     in the band checked (the convolutions' rearranged matrices too);
 *   - sc_codec_get_info: 4 codebooks of 32, 1920 samples at 24 kHz, an
 *     encoder;
 *   - refusals by name: a code outside the codebook, and config switches
 *     speechc does not lower (or the package would refuse), the quantizer's
 *     input width against the encoder's.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "model_internal.h"
#include "parity_util.h"
#include "speechc.h"
#include "wav.h"

#define DIR "tests/data/mimi/mimi_tiny"
#define T 6
#define K 4
#define SPF 1920
#define TE 8 /* encode fixture frames */

static char tmpdir[64];

static sc_model *build_band(const char *dir, const char *cc, int fuse, int frames, DType band, sc_error *err) {
  char out[256];
  snprintf(out, sizeof out, "%s/mimi_%s_%d_%d_%s.so", tmpdir, cc, fuse, frames, ir_dtype_name(band));
  BuildOpts o = build_defaults();
  o.band = band;
  o.model_dir = dir;
  o.out_path = out;
  o.cc = cc;
  o.fuse = fuse;
  o.quiet = 1;
  o.prefill_chunk = frames;
  if (sc_build(&o, err)) return NULL;
  sc_model *m = NULL;
  CHECK_MSG(sc_model_open(out, NULL, &m, err) == 0, "%s", err->msg);
  return m;
}

static sc_model *build(const char *dir, const char *cc, int fuse, int frames, sc_error *err) {
  return build_band(dir, cc, fuse, frames, DT_F32, err);
}


typedef struct EncRef {
  const float *pcm;        /* [TE * SPF] enc_in.wav */
  const int32_t *codes;    /* [TE, K] the package's streaming encode */
  const int32_t *whole;    /* [TE, K] its non-streaming encode */
} EncRef;

static int same_codes(const int32_t *a, const int32_t *b, int n) { return !memcmp(a, b, (size_t)n * sizeof *a); }

/* Encode, after a reset: one call, frame by frame, uneven pieces, and
 * interleaved with decoding (the two streams apart); the package's codes. */
static void run_encode(sc_session *s, const char *cc, int fuse, int frames, const EncRef *er, const int32_t *codes,
                       const float *ref) {
  sc_error err = {0};
  int32_t got[TE * K];
  sc_session_reset(s);
  memset(got, 0xff, sizeof got);
  CHECK_MSG(sc_codec_encode(s, er->pcm, TE, got, &err) == 0, "%s", err.msg);
  CHECK_MSG(same_codes(got, er->codes, TE * K), "%s fuse %d frames/call %d: encode in one call differs from the "
            "package's streaming encode", cc, fuse, frames);
  CHECK_MSG(!same_codes(got, er->whole, TE * K), "%s: equal to the package's non-streaming encode: the fixture no "
            "longer tells the two apart", cc);
  sc_session_reset(s);
  memset(got, 0xff, sizeof got);
  for (int t = 0; t < TE; t++)
    CHECK_MSG(sc_codec_encode(s, er->pcm + t * SPF, 1, got + t * K, &err) == 0, "%s", err.msg);
  CHECK_MSG(same_codes(got, er->codes, TE * K), "%s fuse %d frames/call %d: encode frame by frame differs", cc,
            fuse, frames);
  sc_session_reset(s);
  memset(got, 0xff, sizeof got);
  static const int piece[] = {2, 0, 5, 1};
  for (int k = 0, done = 0; k < 4; done += piece[k++])
    CHECK_MSG(sc_codec_encode(s, er->pcm + done * SPF, piece[k], got + done * K, &err) == 0, "%s", err.msg);
  CHECK_MSG(same_codes(got, er->codes, TE * K), "%s fuse %d frames/call %d: encode in pieces differs", cc, fuse,
            frames);
  /* both directions on one session, a frame of each in turn */
  sc_session_reset(s);
  memset(got, 0xff, sizeof got);
  float *pcm = calloc((size_t)T * SPF, sizeof *pcm);
  for (int t = 0; t < (T > TE ? T : TE); t++) {
    if (t < TE) CHECK_MSG(sc_codec_encode(s, er->pcm + t * SPF, 1, got + t * K, &err) == 0, "%s", err.msg);
    if (t < T) CHECK_MSG(sc_codec_decode(s, codes + t * K, 1, pcm + t * SPF, &err) == 0, "%s", err.msg);
  }
  const double e = rel_err(pcm, ref, T * SPF);
  CHECK_MSG(same_codes(got, er->codes, TE * K) && e <= 1e-4, "%s fuse %d frames/call %d: encode and decode "
            "interleaved: codes %s, decode rel err %.3g", cc, fuse, frames,
            same_codes(got, er->codes, TE * K) ? "equal" : "differ", e);
  free(pcm);
  /* refusals: a NaN sample, by index */
  float bad[SPF];
  memcpy(bad, er->pcm, sizeof bad);
  bad[7] = NAN;
  CHECK(sc_codec_encode(s, bad, 1, got, &err) == SC_EUSAGE && strstr(err.msg, "sample 7 (frame 0) is not finite"));
  printf("  encode: the package's codes in one call, frame by frame, in pieces, interleaved\n");
}

static void run_one(const char *cc, int fuse, int frames, const int32_t *codes, const float *ref,
                    const float *whole_ref, const EncRef *er) {
  sc_error err = {0};
  sc_model *m = build(DIR, cc, fuse, frames, &err);
  CHECK_MSG(m, "build %s fuse %d frames %d: %s", cc, fuse, frames, err.msg);
  if (!m) return;
  sc_codec_info ci;
  CHECK_MSG(sc_codec_get_info(m, &ci, &err) == 0, "%s", err.msg);
  CHECK(ci.n_codebooks == K && ci.codebook_size == 32 && ci.samples_per_frame == SPF && ci.sample_rate == 24000 &&
        ci.max_frames == frames && ci.can_encode);
  sc_session *s = NULL;
  CHECK_MSG(sc_session_open(m, &s, &err) == 0, "%s", err.msg);
  const int n = T * SPF;
  float *pcm = calloc((size_t)n, sizeof *pcm);
  const double tol = 1e-4;

  CHECK_MSG(sc_codec_decode(s, codes, T, pcm, &err) == 0, "%s", err.msg);
  double e = rel_err(pcm, ref, n);
  printf("%s fuse %d, %d frames per call: whole %.3g of the peak", cc, fuse, frames, e);
  CHECK_MSG(e <= tol, "%s fuse %d frames/call %d: whole: rel err %.3g", cc, fuse, frames, e);
  const double other = rel_err(pcm, whole_ref, n);
  CHECK_MSG(other > 1e-2, "%s: within %.3g of the package's non-streaming decode: the fixture no longer tells the "
            "two apart", cc, other);

  sc_session_reset(s);
  memset(pcm, 0, (size_t)n * sizeof *pcm);
  for (int t = 0; t < T; t++)
    CHECK_MSG(sc_codec_decode(s, codes + t * K, 1, pcm + t * SPF, &err) == 0, "%s", err.msg);
  e = rel_err(pcm, ref, n);
  printf(", frame by frame %.3g", e);
  CHECK_MSG(e <= tol, "%s fuse %d frames/call %d: frame by frame: rel err %.3g", cc, fuse, frames, e);

  sc_session_reset(s);
  memset(pcm, 0, (size_t)n * sizeof *pcm);
  static const int piece[] = {3, 0, 2, 1};
  int done = 0;
  for (int k = 0; k < 4; k++) {
    CHECK_MSG(sc_codec_decode(s, codes + done * K, piece[k], pcm + done * SPF, &err) == 0, "%s", err.msg);
    done += piece[k];
  }
  e = rel_err(pcm, ref, n);
  printf(", pieces %.3g\n", e);
  CHECK_MSG(e <= tol, "%s fuse %d frames/call %d: pieces: rel err %.3g", cc, fuse, frames, e);

  int32_t bad[K];
  memcpy(bad, codes, sizeof bad);
  bad[2] = 32;
  CHECK(sc_codec_decode(s, bad, 1, pcm, &err) == SC_EUSAGE && strstr(err.msg, "codebook 2") &&
        strstr(err.msg, "[0, 32)"));
  run_encode(s, cc, fuse, frames, er, codes, ref);
  free(pcm);
  sc_session_close(s);
  sc_model_close(m);
}

/* bf16 weights (and bf16 activations where an engine runs) against the
 * package's f32: the decode's SNR on the fixture's codes and the encode's
 * codes on enc_in.wav.  (The fixture is 16 wide: q8_0 / q4_0 would fall
 * back to bf16 on every matrix, so only bf16 is a band here.)  Gates at
 * 40 dB and 90 % of the codes (measured on Zen 5, AVX512-BF16: 54.6 dB,
 * 32 of 32). */
static void bf16_band(const int32_t *codes, const float *ref, const EncRef *er) {
  sc_error err = {0};
  sc_model *m = build_band(DIR, "tcc", 1, 4, DT_BF16, &err);
  sc_session *s = NULL;
  if (!m || sc_session_open(m, &s, &err)) {
    CHECK_MSG(0, "bf16 build: %s", err.msg);
    sc_model_close(m);
    return;
  }
  const int n = T * SPF;
  float *pcm = calloc((size_t)n, sizeof *pcm);
  int32_t got[TE * K];
  CHECK_MSG(sc_codec_decode(s, codes, T, pcm, &err) == 0, "%s", err.msg);
  double sig = 0, noise = 0;
  for (int i = 0; i < n; i++) sig += (double)ref[i] * ref[i], noise += ((double)pcm[i] - ref[i]) * (pcm[i] - ref[i]);
  const double snr = 10 * log10(sig / noise);
  CHECK_MSG(sc_codec_encode(s, er->pcm, TE, got, &err) == 0, "%s", err.msg);
  int same = 0;
  for (int i = 0; i < TE * K; i++) same += got[i] == er->codes[i];
  printf("bf16: decode SNR %.2f dB against the package's f32; encode: %d of %d codes as f32's\n", snr, same, TE * K);
  CHECK_MSG(snr >= 40, "bf16 decode SNR %.2f dB < 40 dB", snr);
  CHECK_MSG(same >= TE * K * 9 / 10, "bf16 encode: %d of %d codes equal (< 90 %%)", same, TE * K);
  free(pcm);
  sc_session_close(s);
  sc_model_close(m);
}

/* DIR's checkpoint with config.json edited by `edit` (a sed expression on
 * the JSON text): the build must fail naming `want`. */
static void refuse(const char *edit, const char *want) {
  char d[96], cmd[768];
  snprintf(d, sizeof d, "%s/bad", tmpdir);
  snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir %s && cp " DIR "/model.safetensors %s/ && "
           "sed -e '%s' " DIR "/config.json > %s/config.json", d, d, d, edit, d);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  sc_error err = {0};
  sc_model *m = build(d, "tcc", 1, 4, &err);
  CHECK_MSG(!m && strstr(err.msg, want), "edit '%s': expected a refusal naming '%s', got: %s", edit, want,
            m ? "a model" : err.msg);
  if (m) sc_model_close(m);
}

/* tests/data/mimi/mimi_wide: the same switches, wide enough that most
 * matrices quantize whole.  f32 against the package (decode within 1e-4
 * of the peak, the streaming encode's codes); then bf16, q8_0 and q4_0
 * against that f32: the share of the matrix bytes each band really holds
 * (>= 90 % for q8_0 / q4_0: the fixture does not fall back), the decode's
 * SNR and the encode's codes.  Gates measured on Zen 5 (bf16 / q8_0 /
 * q4_0): see the printout and README. */
#define WDIR "tests/data/mimi/mimi_wide"
enum { WT = 4, WK = 4, WTE = 6 };

static sc_model *build_wide(DType band, sc_error *err) {
  char out[256];
  snprintf(out, sizeof out, "%s/wide_%s.so", tmpdir, ir_dtype_name(band));
  BuildOpts o = build_defaults();
  o.band = band;
  o.model_dir = WDIR;
  o.out_path = out;
  o.quiet = 1;
  o.prefill_chunk = 4;
  if (sc_build(&o, err)) return NULL;
  sc_model *m = NULL;
  CHECK_MSG(sc_model_open(out, NULL, &m, err) == 0, "%s", err->msg);
  return m;
}

/* Decode codes and encode pcm with a fresh session of m. */
static int wide_run(sc_model *m, const int32_t *codes, const float *pcm, float *out, int32_t *enc, sc_error *err) {
  sc_session *s = NULL;
  int rc = sc_session_open(m, &s, err);
  if (!rc) rc = sc_codec_decode(s, codes, WT, out, err);
  if (!rc) rc = sc_codec_encode(s, pcm, WTE, enc, err);
  sc_session_close(s);
  return rc;
}

static void wide_bands(void) {
  long size = 0;
  int32_t *codes = (int32_t *)slurp(WDIR "/codes.i32", &size);
  CHECK(codes && size == WT * WK * 4);
  float *ref = (float *)slurp(WDIR "/pcm.f32", &size);
  CHECK(ref && size == WT * SPF * 4);
  int32_t *enc_ref = (int32_t *)slurp(WDIR "/enc_codes.i32", &size);
  CHECK(enc_ref && size == WTE * WK * 4);
  sc_wav_audio in = {0};
  sc_error err = {0};
  CHECK_MSG(sc_wav_read(WDIR "/enc_in.wav", &in, &err) == 0, "%s", err.msg);
  CHECK(in.frames == WTE * SPF);
  float *f32 = calloc(WT * SPF, sizeof *f32), *pcm = calloc(WT * SPF, sizeof *pcm);
  int32_t enc32[WTE * WK], enc[WTE * WK];
  sc_model *m = codes && ref && enc_ref && in.pcm ? build_wide(DT_F32, &err) : NULL;
  CHECK_MSG(m && wide_run(m, codes, in.pcm, f32, enc32, &err) == 0, "mimi_wide f32: %s", err.msg);
  sc_model_close(m);
  if (!m) goto done;
  float peak = 0, worst = 0;
  for (int i = 0; i < WT * SPF; i++) {
    peak = fabsf(ref[i]) > peak ? fabsf(ref[i]) : peak;
    worst = fabsf(f32[i] - ref[i]) > worst ? fabsf(f32[i] - ref[i]) : worst;
  }
  printf("mimi_wide f32: decode within %.3g of a %.3g peak; encode codes %s the package's\n", worst, peak,
         memcmp(enc32, enc_ref, sizeof enc32) ? "DIFFER from" : "identical to");
  CHECK_MSG(worst <= 1e-4f * peak, "mimi_wide f32 decode: %g from the package's, peak %g", worst, peak);
  CHECK_MSG(!memcmp(enc32, enc_ref, sizeof enc32), "mimi_wide f32 encode: codes differ from the package's");
  static const DType bands[] = {DT_BF16, DT_Q8_0, DT_Q4_0};
  static const double min_snr[] = {35, 25, 8}, min_same[] = {0.9, 0.75, 0.4};
  for (size_t b = 0; b < sizeof bands / sizeof *bands; b++) {
    m = build_wide(bands[b], &err);
    CHECK_MSG(m && wide_run(m, codes, in.pcm, pcm, enc, &err) == 0, "mimi_wide %s: %s", ir_dtype_name(bands[b]),
              err.msg);
    if (!m) continue;
    /* the share of the matrices' bytes stored in the band (vectors and
     * tables aside: tensors of one row or column are not matrices) */
    const sc_model_desc *d = m->d;
    unsigned long long in_band = 0, all = 0;
    for (int i = 0; i < d->n_tensors; i++) {
      const sc_tensor_info *t = &d->tensors[i];
      if (t->rows < 2 || t->cols < 2 || strstr(t->name, "codebook") || strstr(t->name, "rope")) continue;
      const unsigned long long elems = (unsigned long long)t->rows * t->cols * (t->sets > 0 ? t->sets : 1);
      all += elems;
      if (t->wtype == ir_wtype(bands[b])) in_band += elems;
    }
    double sig = 0, noise = 0;
    for (int i = 0; i < WT * SPF; i++) sig += (double)f32[i] * f32[i], noise += ((double)pcm[i] - f32[i]) * (pcm[i] - f32[i]);
    const double snr = 10 * log10(sig / noise), share = all ? (double)in_band / all : 0;
    int same = 0;
    for (int i = 0; i < WTE * WK; i++) same += enc[i] == enc32[i];
    printf("mimi_wide %s: %.1f %% of the matrices' weights in the band; decode SNR %.2f dB against f32; encode %d "
           "of %d codes as f32's\n", ir_dtype_name(bands[b]), 100 * share, snr, same, WTE * WK);
    CHECK_MSG(bands[b] == DT_BF16 || share >= 0.9, "mimi_wide %s: only %.1f %% of the matrices' weights quantized",
              ir_dtype_name(bands[b]), 100 * share);
    CHECK_MSG(snr >= min_snr[b], "mimi_wide %s decode SNR %.2f dB < %.0f dB", ir_dtype_name(bands[b]), snr,
              min_snr[b]);
    CHECK_MSG(same >= min_same[b] * WTE * WK, "mimi_wide %s encode: %d of %d codes as f32's (< %.0f %%)",
              ir_dtype_name(bands[b]), same, WTE * WK, 100 * min_same[b]);
    sc_model_close(m);
  }
done:
  free(codes), free(ref), free(enc_ref), free(f32), free(pcm);
  sc_wav_audio_free(&in);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc_mimi_XXXXXX");
  CHECK(mkdtemp(tmpdir) != NULL);
  long size = 0;
  int32_t *codes = (int32_t *)slurp(DIR "/codes.i32", &size);
  CHECK(codes && size == T * K * 4);
  float *ref = (float *)slurp(DIR "/pcm.f32", &size);
  CHECK(ref && size == T * SPF * 4);
  float *whole = (float *)slurp(DIR "/pcm_whole.f32", &size);
  CHECK(whole && size == T * SPF * 4);
  sc_wav_audio in = {0};
  sc_error err = {0};
  CHECK_MSG(sc_wav_read(DIR "/enc_in.wav", &in, &err) == 0, "%s", err.msg);
  CHECK(in.frames == TE * SPF && in.channels == 1 && in.sample_rate == 24000);
  int32_t *enc = (int32_t *)slurp(DIR "/enc_codes.i32", &size);
  CHECK(enc && size == TE * K * 4);
  int32_t *enc_whole = (int32_t *)slurp(DIR "/enc_codes_whole.i32", &size);
  CHECK(enc_whole && size == TE * K * 4);
  if (!codes || !ref || !whole || !in.pcm || !enc || !enc_whole) CHECK_DONE();
  const EncRef er = {in.pcm, enc, enc_whole};
  const char *ccs[] = {"tcc", "gcc"};
  for (int c = 0; c < 2; c++)
    for (int fuse = 1; fuse >= 0; fuse--)
      for (int frames = 4; frames >= 1; frames -= 3) run_one(ccs[c], fuse, frames, codes, ref, whole, &er);
  bf16_band(codes, ref, &er);
  wide_bands();

  /* max_context 3: three frames each way, one a call, then the streams are full, by name */
  {
    BuildOpts o = build_defaults();
    char out[256];
    snprintf(out, sizeof out, "%s/mimi_ctx3.so", tmpdir);
    o.model_dir = DIR;
    o.out_path = out;
    o.quiet = 1;
    o.max_context = 3;
    sc_model *m = NULL;
    sc_session *s = NULL;
    int32_t got[TE * K];
    CHECK_MSG(sc_build(&o, &err) == 0 && sc_model_open(out, NULL, &m, &err) == 0 &&
              sc_session_open(m, &s, &err) == 0, "%s", err.msg);
    if (s) {
      /* one frame a call up to the last: max_context counts frames, not the transformer's steps */
      for (int t = 0; t < 3; t++)
        CHECK_MSG(sc_codec_encode(s, in.pcm + t * SPF, 1, got + t * K, &err) == 0, "frame %d: %s", t, err.msg);
      CHECK(same_codes(got, enc, 3 * K));
      CHECK(sc_codec_encode(s, in.pcm, 1, got, &err) == SC_ERUNTIME && strstr(err.msg, "the encode stream is full"));
      float *pcm = calloc(3 * SPF, sizeof *pcm);
      for (int t = 0; t < 3; t++)
        CHECK_MSG(sc_codec_decode(s, codes + t * K, 1, pcm + t * SPF, &err) == 0, "decode frame %d after a full "
                  "encode stream: %s", t, err.msg);
      const double e = rel_err(pcm, ref, 3 * SPF);
      CHECK_MSG(e < 1e-4, "max_context 3: decode rel err %.3g", e);
      CHECK(sc_codec_decode(s, codes, 1, pcm, &err) == SC_ERUNTIME && strstr(err.msg, "the stream is full"));
      free(pcm);
    }
    sc_session_close(s);
    sc_model_close(m);
  }

  refuse("s/\"pad_mode\": \"constant\"/\"pad_mode\": \"replicate\"/", "pad_mode 'replicate'");
  refuse("s/\"norm\": \"none\"/\"norm\": \"weight_norm\"/", "norm 'weight_norm'");
  refuse("s/\"activation\": \"ELU\"/\"activation\": \"GELU\"/", "activation 'GELU'");
  refuse("s/\"true_skip\": true/\"true_skip\": true, \"final_activation\": \"Tanh\"/", "final_activation");
  refuse("s/\"conv_layout\": true/\"conv_layout\": false/", "conv_layout false");
  refuse("s/\"context\": 5/\"context\": null/", "context 0");
  refuse("s/\"num_codebooks\": 4/\"num_codebooks\": 7/", "num_codebooks 7");
  refuse("s/\"num_codebooks\": 4/\"num_codebooks\": 4, \"speed\": 2/", "key 'speed'");
  refuse("s/\"frame_rate\": 12.5/\"frame_rate\": 10/", "frame_rate 10");
  refuse("/\"sample_rate\"/d", "sample_rate is missing");
  refuse("s/\"context\": 5/\"context\": 1/", "context 1 is shorter");
  refuse("/\"bins\": 32/{n;s/\"input_dimension\": 16/\"input_dimension\": 12/}",
         "the quantizer takes 12 channels (input_dimension) but the encoder gives 16");
  free(codes);
  free(ref);
  free(whole);
  free(enc);
  free(enc_whole);
  sc_wav_audio_free(&in);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  CHECK(system(cmd) == 0);
  CHECK_DONE();
}
