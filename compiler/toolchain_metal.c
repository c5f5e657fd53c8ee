/*
 * toolchain_metal.c — the Metal target's build-time compiler: on a Mac
 * with Xcode's Metal toolchain, `xcrun -sdk macosx metal` and `metallib`
 * turn model.metal into a .metallib that the artifact embeds beside the
 * source, so that loading the model skips compiling its kernels.
 * Anywhere else (or with SPEECHC_METALLIB=0) nothing is compiled and the
 * code is empty: the runtime compiles the embedded source at load.
 *
 * Status: the Mac branch has not run in this project's tests (no Mac
 * there); tests/metal/run.sh exercises it.
 */
#include "toolchain_metal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef __APPLE__
/* The whole file at path into *out (malloc'd, NUL-terminated). */
static int slurp_file(const char *path, char **out, size_t *bytes) {
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    fclose(f);
    return -1;
  }
  fclose(f);
  b[n] = 0;
  *out = b;
  *bytes = (size_t)n;
  return 0;
}

static int metallib(const char *src, char **code, size_t *bytes, sc_error *err) {
  char dir[] = "/tmp/speechc-metal-XXXXXX";
  if (!mkdtemp(dir)) return sc_fail(err, SC_ERUNTIME, "metal: mkdtemp failed");
  char metal[96], air[96], lib[96], log[96], cmd[1024];
  snprintf(metal, sizeof metal, "%s/model.metal", dir);
  snprintf(air, sizeof air, "%s/model.air", dir);
  snprintf(lib, sizeof lib, "%s/model.metallib", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  FILE *f = fopen(metal, "w");
  int rc = !f || fputs(src, f) < 0;
  if (f) fclose(f);
  if (!rc) {
    /* precise math, as the runtime asks of newLibraryWithSource */
    snprintf(cmd, sizeof cmd, "xcrun -sdk macosx metal -std=metal3.0 -fno-fast-math -c '%s' -o '%s' > '%s' 2>&1 && "
             "xcrun -sdk macosx metallib '%s' -o '%s' >> '%s' 2>&1", metal, air, log, air, lib, log);
    rc = system(cmd) != 0;
  }
  char text[1024] = "";
  if (rc) {
    FILE *lf = fopen(log, "r");
    if (lf) {
      size_t n = fread(text, 1, sizeof text - 1, lf);
      text[n] = 0;
      fclose(lf);
    }
  }
  char *b = NULL;
  size_t n = 0;
  if (!rc) rc = slurp_file(lib, &b, &n) != 0;
  unlink(metal), unlink(air), unlink(lib), unlink(log), rmdir(dir);
  if (rc) return sc_fail(err, SC_ERUNTIME, "metal: Apple's Metal compiler refused the generated model.metal: %s "
                         "(hint: SPEECHC_METALLIB=0 builds without a .metallib)", text[0] ? text : "(no output)");
  free(*code);
  *code = b;
  *bytes = n;
  return SC_OK;
}
#endif

int tc_metal_compile(const char *src, const char *name, const char *arch, char **code, size_t *bytes,
                     int *from_cache, sc_error *err) {
  (void)name, (void)arch;
  *from_cache = 0;
  *bytes = 0;
  if (!(*code = calloc(1, 1))) return sc_fail(err, SC_ERUNTIME, "out of memory");
#ifdef __APPLE__
  const char *want = getenv("SPEECHC_METALLIB");
  if (want && !strcmp(want, "0")) return SC_OK;
  if (system("xcrun -sdk macosx --find metal > /dev/null 2>&1") != 0) return SC_OK; /* no toolchain */
  return metallib(src, code, bytes, err);
#else
  (void)src;
  return SC_OK;
#endif
}
