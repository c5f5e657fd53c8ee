/*
 * fuzz_wav.c — the WAV reader (runtime/wav_read.c) on arbitrary bytes.
 *
 * The contract: no crash; a refusal is SC_EINPUT (SC_ERUNTIME only for out
 * of memory) with a message that starts with the input's name, and leaves
 * the output zeroed; an accepted file has 1..SC_WAV_MAX_CHANNELS channels,
 * a rate in 1..SC_WAV_MAX_RATE, and no more samples than its bytes can
 * hold; its integer samples lie in [-1, 1] (s32 rounds to float: 2^31 - 1 is 1).
 */
#include "fuzz_util.h"

#include "wav.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sc_wav_audio a = {(float *)1, 7, 7, 7, 0};
  sc_error err = {0};
  int rc = sc_wav_parse(data, size, "input", &a, &err);
  if (rc) {
    FUZZ_CHECK((rc == SC_EINPUT || rc == SC_ERUNTIME) && rc == err.code, "rc %d: %s", rc, err.msg);
    FUZZ_CHECK(!strncmp(err.msg, "input: ", 7), "the message does not start with the name: %s", err.msg);
    FUZZ_CHECK(!a.pcm && !a.frames && !a.channels && !a.sample_rate, "output not zeroed on failure");
    return 0;
  }
  FUZZ_CHECK(a.channels >= 1 && a.channels <= SC_WAV_MAX_CHANNELS, "%d channels", a.channels);
  FUZZ_CHECK(a.sample_rate >= 1 && a.sample_rate <= SC_WAV_MAX_RATE, "rate %d", a.sample_rate);
  const size_t bytes = sc_wav_sample_bytes(a.format);
  FUZZ_CHECK(a.frames * a.channels * bytes + 44 <= size, "%zu frames from %zu bytes", a.frames, size);
  const int ints = a.format != SC_WAV_F32 && a.format != SC_WAV_F64;
  for (size_t i = 0; ints && i < a.frames * a.channels; i++)
    FUZZ_CHECK(a.pcm[i] >= -1.0f && a.pcm[i] <= 1.0f, "integer sample %zu is %g", i, a.pcm[i]);
  sc_wav_audio_free(&a);
  return 0;
}
