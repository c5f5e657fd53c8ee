/*
 * libspeechc.c — what libspeechc.so adds to the archives it is made of:
 * its version; a free() for the buffers its functions hand out
 * (tok_encode's ids, tok_decode's text), so that a caller in another
 * language (Python's ctypes) returns them to the allocator that made them;
 * and its struct sizes (sc_sizeof), so that a binding can check its mirrors.
 * The exported symbols are listed in libspeechc.map.
 */
#include <stdlib.h>
#include <string.h>

#include "sc_abi.h"
#include "speechc.h"
#include "serve_request.h"
#include "tts_text.h"
#include "wav.h"

/* "speechc 0.1.0 (artifact ABI N)": the compiler version and the artifact
 * ABI this library writes and loads. */
const char *sc_library_version(void) {
#define SC_STR2(x) #x
#define SC_STR(x) SC_STR2(x)
  return "speechc " SPEECHC_VERSION " (artifact ABI " SC_STR(SC_ABI_VERSION) ")";
}

/* Free a buffer this library malloc'd for the caller (NULL is fine). */
void sc_free(void *p) { free(p); }

/* sizeof the named struct of the API, or 0 for a name not listed: a
 * binding that mirrors these structs (python/speechc/_lib.py) checks its
 * layout against the library it loaded before calling it. */
size_t sc_sizeof(const char *name) {
  static const struct { const char *name; size_t size; } t[] = {
      {"sc_error", sizeof(sc_error)},
      {"sc_open_opts", sizeof(sc_open_opts)},
      {"sc_model_info", sizeof(sc_model_info)},
      {"sc_sample_params", sizeof(sc_sample_params)},
      {"sc_gen_request", sizeof(sc_gen_request)},
      {"sc_codec_info", sizeof(sc_codec_info)},
      {"sc_tts_params", sizeof(sc_tts_params)},
      {"TtsTextOpts", sizeof(TtsTextOpts)},
      {"TtsTextInfo", sizeof(TtsTextInfo)},
      {"TtsTextRequest", sizeof(TtsTextRequest)},
      {"ServeLimits", sizeof(ServeLimits)},
      {"ServeRequest", sizeof(ServeRequest)},
      {"sc_wav_opts", sizeof(sc_wav_opts)},
      {"sc_moshi_info", sizeof(sc_moshi_info)},
      {"sc_moshi_params", sizeof(sc_moshi_params)},
  };
  for (size_t i = 0; name && i < sizeof t / sizeof t[0]; i++)
    if (!strcmp(name, t[i].name)) return t[i].size;
  return 0;
}

/* Debian's libtcc.a is built as position-dependent code that reads libc's
 * stdout, stderr and environ directly (R_X86_64_PC32), which a shared
 * library cannot do.  CMakeLists.txt links a copy of it whose references
 * are renamed to these three (objcopy --redefine-sym); they are local to
 * the library and take libc's values when it is loaded.  libtcc reads them
 * only to print its own diagnostics (speechc routes those through an error
 * callback) and for tcc_run (not used). */
#include <stdio.h>
extern char **environ;
FILE *sc_tcc_stdout, *sc_tcc_stderr;
char **sc_tcc_environ;
__attribute__((constructor)) static void sc_tcc_streams(void) {
  sc_tcc_stdout = stdout;
  sc_tcc_stderr = stderr;
  sc_tcc_environ = environ;
}
