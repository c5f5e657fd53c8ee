/*
 * peer_qwen3tts_decode.c — times the speech decoder of the pure-C qwen3-tts
 * engine (gabriele-mastrapasqua/qwen3-tts) alone, on a fixed code sequence,
 * the way `speechc decode` times ours.  Not built by CMake: it links against
 * the peer's object files in its own source tree (bench/codec_side_by_side.sh
 * does it; nothing of the peer is committed here).
 *
 *   peer_qwen3tts_decode MODEL_DIR CODES.i32 THREADS CHUNK [OUT.f32]
 *
 * MODEL_DIR  a directory qwen_tts_load opens (talker + speech_tokenizer/)
 * CODES.i32  raw little-endian int32 [frames, 16]
 * CHUNK      0: one call to qwen_speech_decoder_decode over all frames (its
 *            one-shot path: the whole utterance in one forward); N > 0: its
 *            streaming path, qwen_speech_decoder_decode_streaming_st, N frames
 *            per call
 * OUT.f32    optional: the samples as raw float32, to compare with others
 *
 * Prints one line: frames, seconds of audio, wall seconds of decoding (model
 * load excluded), seconds to the first chunk's audio, frames/s and the
 * real-time factor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qwen_tts.h"
#include "qwen_tts_kernels.h"

extern int qwen_speech_decoder_decode(qwen_tts_ctx_t *ctx, const int *codes, int n_frames,
                                      float **audio_out, int *n_samples);
extern int qwen_speech_decoder_decode_streaming_st(qwen_tts_ctx_t *ctx, qwen_sd_stream_state_t *st,
                                                   const int *new_codes, int new_frames,
                                                   float **audio_out, int *n_samples);
extern void qwen_sd_stream_init(qwen_sd_stream_state_t *st);
extern void qwen_sd_stream_free(qwen_sd_stream_state_t *st);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s MODEL_DIR CODES.i32 THREADS CHUNK [OUT.f32]\n", argv[0]);
    return 1;
  }
  const char *dir = argv[1], *codes_path = argv[2], *out_path = argc > 5 ? argv[5] : NULL;
  const int threads = atoi(argv[3]), chunk = atoi(argv[4]);

  FILE *f = fopen(codes_path, "rb");
  if (!f) { perror(codes_path); return 1; }
  fseek(f, 0, SEEK_END);
  const long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  const int frames = (int)(bytes / (16 * sizeof(int)));
  int *codes = malloc((size_t)bytes);
  if (!codes || frames < 1 || fread(codes, 1, (size_t)bytes, f) != (size_t)bytes) {
    fprintf(stderr, "%s: expected raw int32 [frames, 16]\n", codes_path);
    return 1;
  }
  fclose(f);

  qwen_check_runtime_isa();
  qwen_set_threads(threads);
  qwen_tts_ctx_t *ctx = qwen_tts_load_ex(dir, 1, 0, 0);
  if (!ctx) { fprintf(stderr, "%s: qwen_tts_load failed\n", dir); return 1; }

  float *pcm = malloc((size_t)frames * 1920 * sizeof *pcm);
  size_t n = 0;
  double first = 0;
  const double t0 = now();
  if (chunk <= 0) {
    float *audio = NULL;
    int ns = 0;
    if (qwen_speech_decoder_decode(ctx, codes, frames, &audio, &ns)) { fprintf(stderr, "decode failed\n"); return 1; }
    first = now() - t0;
    memcpy(pcm, audio, (size_t)ns * sizeof *pcm);
    n = (size_t)ns;
    free(audio);
  } else {
    qwen_sd_stream_state_t st;
    qwen_sd_stream_init(&st);
    for (int done = 0; done < frames; done += chunk) {
      const int k = frames - done < chunk ? frames - done : chunk;
      float *audio = NULL;
      int ns = 0;
      if (qwen_speech_decoder_decode_streaming_st(ctx, &st, codes + (size_t)done * 16, k, &audio, &ns)) {
        fprintf(stderr, "streaming decode failed at frame %d\n", done);
        return 1;
      }
      if (!done) first = now() - t0;
      if (n + (size_t)ns <= (size_t)frames * 1920) memcpy(pcm + n, audio, (size_t)ns * sizeof *pcm);
      n += (size_t)ns;
      free(audio);
    }
    qwen_sd_stream_free(&st);
  }
  const double secs = now() - t0;
  const double audio_s = (double)n / 24000.0;
  printf("qwen3-tts decode: %d frames -> %.2f s of audio in %.3f s (first audio after %.3f s; "
         "%.1f frames/s; real-time factor %.3f) chunk %d threads %d\n",
         frames, audio_s, secs, first, frames / secs, secs / audio_s, chunk, threads);
  if (out_path) {
    FILE *o = fopen(out_path, "wb");
    if (!o || fwrite(pcm, sizeof *pcm, n, o) != n) { perror(out_path); return 1; }
    fclose(o);
  }
  free(pcm);
  free(codes);
  qwen_tts_unload(ctx);
  return 0;
}
