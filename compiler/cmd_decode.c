/*
 * cmd_decode.c — `speechc decode codec.so CODES -o out.wav`: codec codes
 * (compiler/codes.h: JSON or raw int32) to audio through a codec decoder
 * artifact (runtime/codec.c), written as each chunk of frames is decoded
 * (runtime/wav.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "codes.h"
#include "speechc.h"
#include "wav.h"

int cmd_decode(int argc, char **argv);
extern const char *const usage_decode;

const char *const usage_decode =
    "usage: speechc decode codec.so CODES -o OUT.wav [options]\n"
    "\n"
    "Decodes codec codes into audio with a codec decoder built from a Qwen3-TTS\n"
    "checkpoint's speech_tokenizer/ directory (speechc build MODEL/speech_tokenizer -o\n"
    "codec.so) or from a Mimi directory (model_type mimi; K codes a frame).\n"
    "CODES is a JSON file [[c0, ..., c15], ...] (one array per frame, as\n"
    "speechc tts -o writes), raw little-endian int32 frames (.bin, .i32, .raw), or -\n"
    "for stdin.  The decoder is causal: frames are decoded in order with their left\n"
    "context kept, and each chunk is written as soon as it is decoded.\n"
    "\n"
    "  -o, --output PATH      OUT.wav (24 kHz mono, 16-bit unless --f32), or - for raw\n"
    "                         s16le PCM on stdout (| aplay -f S16_LE -r 24000 -c 1);\n"
    "                         *.raw / *.pcm are raw s16le too (required)\n"
    "  --f32                  write IEEE float32 samples instead of 16-bit PCM\n"
    "  --chunk N              frames per decode call (default: the artifact's largest)\n"
    "  --threads N            kernel threads (default 0 = one per physical core)\n"
    "  -q, --quiet            no timing line on stderr\n";

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cmd_decode(int argc, char **argv) {
  const char *model = NULL, *in = NULL, *out = NULL, *v;
  int f32 = 0, quiet = 0;
  long chunk = 0, threads = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_decode, stdout); return 0; }
    if (!strcmp(a, "-o")) {
      if (i + 1 >= argc) return usage_error(usage_decode, "%s needs a path", a);
      out = argv[++i];
    } else if ((v = flag_value(argc, argv, &i, "--output"))) {
      out = v;
    } else if (is_flag(a, "--output")) {
      return usage_error(usage_decode, "%s needs a path", a);
    } else if (is_flag(a, "--chunk")) {
      if (parse_int("--chunk", flag_value(argc, argv, &i, "--chunk"), 1, 1 << 20, &chunk)) return SC_EUSAGE;
    } else if (is_flag(a, "--threads")) {
      if (parse_int("--threads", flag_value(argc, argv, &i, "--threads"), 0, 1024, &threads)) return SC_EUSAGE;
    } else if (!strcmp(a, "--f32")) {
      f32 = 1;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (a[0] == '-' && a[1]) {
      return usage_error(usage_decode, "unknown option '%s'", a);
    } else if (!model) {
      model = a;
    } else if (!in) {
      in = a;
    } else {
      return usage_error(usage_decode, "unexpected argument '%s'", a);
    }
  }
  if (!model) return usage_error(usage_decode, "%s", "missing codec.so");
  if (!in) return usage_error(usage_decode, "%s", "missing CODES (a .json or raw int32 file, or -)");
  if (!out) return usage_error(usage_decode, "%s", "missing -o OUT.wav (or -o - for raw PCM on stdout)");
  if (!strcmp(in, "-") && !strcmp(out, "-"))
    return usage_error(usage_decode, "%s", "CODES and -o cannot both be - (stdin and stdout)");

  sc_error err = {0};
  sc_model *m = NULL;
  sc_session *s = NULL;
  sc_wav *w = NULL;
  Codes codes = {0};
  float *pcm = NULL;
  sc_codec_info ci;
  sc_open_opts opts = {.verify_weights = 1, .threads = (int)threads};
  int rc = sc_model_open(model, &opts, &m, &err);
  if (!rc) rc = sc_codec_get_info(m, &ci, &err);
  if (!rc) {
    CodesSpec spec = {.codebooks = ci.n_codebooks, .vocab = ci.codebook_size};
    rc = codes_read(in, CODES_AUTO, &spec, &codes, &err);
  }
  sc_model_info mi;
  if (!rc) sc_model_get_info(m, &mi);
  if (!rc && codes.frames > mi.max_context) /* at once, not at the stream's end */
    rc = sc_fail(&err, SC_EUSAGE, "%s: %d frames, more than this decoder's stream holds (%d; hint: rebuild it "
                 "with --max-context %d or more)", in, codes.frames, mi.max_context, codes.frames);
  if (!rc) rc = sc_session_open(m, &s, &err);
  const int step = (int)(chunk ? chunk : ci.max_frames);
  if (!rc && !(pcm = malloc((size_t)step * (size_t)ci.samples_per_frame * sizeof *pcm)))
    rc = sc_fail(&err, SC_ERUNTIME, "out of memory");
  if (!rc) {
    sc_wav_opts wo = sc_wav_opts_for(out);
    wo.sample_rate = ci.sample_rate;
    if (f32) wo.format = SC_WAV_F32;
    rc = sc_wav_open(out, &wo, &w, &err);
  }
  const double t0 = now();
  double first = 0;
  for (int done = 0; !rc && done < codes.frames;) {
    const int n = codes.frames - done < step ? codes.frames - done : step;
    rc = sc_codec_decode(s, codes.codes + (size_t)done * ci.n_codebooks, n, pcm, &err);
    if (!rc) rc = sc_wav_write(w, pcm, (size_t)n * ci.samples_per_frame, &err);
    if (!rc && !done) first = now() - t0;
    done += n;
  }
  const double secs = now() - t0;
  sc_error cerr = {0};
  if (w && sc_wav_close(w, &cerr) && !rc) {
    err = cerr;
    rc = cerr.code;
  }
  if (!rc && !quiet) {
    const double audio = (double)codes.frames * ci.samples_per_frame / ci.sample_rate;
    fprintf(stderr, "speechc: %d frames -> %.2f s of audio in %.3f s (first audio after %.3f s; "
            "%.1f frames/s; real-time factor %.3f)\n", codes.frames, audio, secs, first,
            codes.frames / (secs > 0 ? secs : 1e-9), secs / (audio > 0 ? audio : 1e-9));
  }
  free(pcm);
  codes_free(&codes);
  sc_session_close(s);
  sc_model_close(m);
  return report(rc, &err);
}
