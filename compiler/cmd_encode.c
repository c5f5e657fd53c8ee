/*
 * cmd_encode.c — `speechc encode mimi.so in.wav -o codes.json`: audio to
 * Mimi codes (runtime/codec.c sc_codec_encode), written in the format
 * `speechc decode` reads (compiler/codes.h).  The WAV must have the
 * codec's sample rate and one channel: speechc neither resamples nor
 * mixes down.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "codes.h"
#include "speechc.h"
#include "wav.h"

int cmd_encode(int argc, char **argv);
extern const char *const usage_encode;

const char *const usage_encode =
    "usage: speechc encode mimi.so IN.wav -o CODES [options]\n"
    "\n"
    "Encodes audio into Mimi codes with a codec built from a Mimi directory\n"
    "(model_type mimi: speechc build MIMI_DIR -o mimi.so), as the moshi package's\n"
    "streaming encode does (one 1920-sample frame per call inside mimi.streaming,\n"
    "as moshi.run_inference feeds it): K codes per 80 ms frame.  IN.wav is PCM\n"
    "(8, 16, 24 or 32 bits) or float (32 or 64 bits), read as libsndfile reads it,\n"
    "at the codec's sample rate (24 kHz), one channel; another rate\n"
    "or channel count is refused (speechc neither resamples nor mixes down).\n"
    "Whole frames only: samples past the last whole frame are dropped, as the\n"
    "package's loop drops them (a note on stderr says how many).\n"
    "\n"
    "  -o, --output PATH      CODES: .json ({\"frames\": N, \"codebooks\": K,\n"
    "                         \"codes\": [[...], ...]}, what speechc decode reads),\n"
    "                         .bin (raw little-endian int32 [frames, K]), or - for\n"
    "                         JSON on stdout (required)\n"
    "  --chunk N              frames per encode call (default: the artifact's largest;\n"
    "                         the codes are the same for any N)\n"
    "  --threads N            kernel threads (default 0 = one per physical core)\n"
    "  -q, --quiet            no notes or timing line on stderr\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cmd_encode(int argc, char **argv) {
  const char *model = NULL, *in = NULL, *out = NULL, *v;
  int quiet = 0;
  long chunk = 0, threads = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_encode, stdout); return 0; }
    if (!strcmp(a, "-o")) {
      if (i + 1 >= argc) return usage_error(usage_encode, "%s needs a path", a);
      out = argv[++i];
    } else if ((v = flag_value(argc, argv, &i, "--output"))) {
      out = v;
    } else if (is_flag(a, "--output")) {
      return usage_error(usage_encode, "%s needs a path", a);
    } else if (is_flag(a, "--chunk")) {
      if (parse_int("--chunk", flag_value(argc, argv, &i, "--chunk"), 1, 1 << 20, &chunk)) return SC_EUSAGE;
    } else if (is_flag(a, "--threads")) {
      if (parse_int("--threads", flag_value(argc, argv, &i, "--threads"), 0, 1024, &threads)) return SC_EUSAGE;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (a[0] == '-' && a[1]) {
      return usage_error(usage_encode, "unknown option '%s'", a);
    } else if (!model) {
      model = a;
    } else if (!in) {
      in = a;
    } else {
      return usage_error(usage_encode, "unexpected argument '%s'", a);
    }
  }
  if (!model) return usage_error(usage_encode, "%s", "missing mimi.so");
  if (!in) return usage_error(usage_encode, "%s", "missing IN.wav");
  if (!out) return usage_error(usage_encode, "%s", "missing -o CODES (.json, .bin, or - for JSON on stdout)");

  sc_error err = {0};
  sc_model *m = NULL;
  sc_session *s = NULL;
  sc_wav_audio audio = {0};
  int32_t *codes = NULL;
  sc_codec_info ci;
  sc_open_opts opts = {.verify_weights = 1, .threads = (int)threads};
  int rc = sc_model_open(model, &opts, &m, &err);
  if (!rc) rc = sc_codec_get_info(m, &ci, &err);
  if (!rc && !ci.can_encode)
    rc = sc_fail(&err, SC_EUSAGE, "%s: this codec has no encoder (speechc encode takes a Mimi build: a directory "
                 "with model_type mimi)", model);
  if (!rc) rc = sc_wav_read(in, &audio, &err);
  if (!rc) rc = sc_wav_expect(&audio, in, ci.sample_rate, 1, &err);
  size_t frames = 0;
  if (!rc) {
    frames = audio.frames / (size_t)ci.samples_per_frame;
    const size_t left = audio.frames - frames * (size_t)ci.samples_per_frame;
    if (!frames)
      rc = sc_fail(&err, SC_EINPUT, "%s: %zu samples, less than one frame of %d (80 ms at %d Hz): nothing to "
                   "encode", in, audio.frames, ci.samples_per_frame, ci.sample_rate);
    else if (frames > (size_t)CODES_MAX_FRAMES)
      rc = sc_fail(&err, SC_EINPUT, "%s: %zu frames, more than %d", in, frames, CODES_MAX_FRAMES);
    sc_model_info mi;
    sc_model_get_info(m, &mi);
    if (!rc && frames > (size_t)mi.max_context) /* at once, not at the stream's end */
      rc = sc_fail(&err, SC_EUSAGE, "%s: %zu frames, more than this encoder's stream holds (%d; hint: rebuild it "
                   "with --max-context %zu or more)", in, frames, mi.max_context, frames);
    if (!rc && left && !quiet)
      fprintf(stderr, "speechc: note: %s: the last %zu samples are not a whole frame of %d and are dropped (as the "
              "package's streaming loop drops them)\n", in, left, ci.samples_per_frame);
  }
  for (size_t i = 0; !rc && i < frames * (size_t)ci.samples_per_frame; i++)
    if (!(audio.pcm[i] - audio.pcm[i] == 0.0f)) /* a float WAV may hold NaN or inf */
      rc = sc_fail(&err, SC_EINPUT, "%s: sample %zu (%.3f s) is not finite (%g): Mimi encodes finite samples only",
                   in, i, (double)i / ci.sample_rate, (double)audio.pcm[i]);
  if (!rc && !(codes = malloc(frames * (size_t)ci.n_codebooks * sizeof *codes)))
    rc = sc_fail(&err, SC_ERUNTIME, "out of memory");
  if (!rc) rc = sc_session_open(m, &s, &err);
  const int step = (int)(chunk ? chunk : ci.max_frames);
  const double t0 = now();
  for (size_t done = 0; !rc && done < frames;) {
    const int n = frames - done < (size_t)step ? (int)(frames - done) : step;
    rc = sc_codec_encode(s, audio.pcm + done * (size_t)ci.samples_per_frame, n,
                         codes + done * (size_t)ci.n_codebooks, &err);
    done += (size_t)n;
  }
  const double secs = now() - t0;
  if (!rc) rc = codes_write(out, codes, (int)frames, ci.n_codebooks, &err);
  if (!rc && !quiet) {
    const double secs_audio = (double)frames * ci.samples_per_frame / ci.sample_rate;
    fprintf(stderr, "speechc: %.2f s of audio -> %zu frames of %d codes in %.3f s (%.1f frames/s; real-time "
            "factor %.3f)\n", secs_audio, frames, ci.n_codebooks, secs, frames / (secs > 0 ? secs : 1e-9),
            secs / (secs_audio > 0 ? secs_audio : 1e-9));
  }
  free(codes);
  sc_wav_audio_free(&audio);
  sc_session_close(s);
  sc_model_close(m);
  return report(rc, &err);
}
