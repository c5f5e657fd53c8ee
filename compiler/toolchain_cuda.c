/* toolchain_cuda.c — see toolchain_cuda.h. */
#define _GNU_SOURCE
#include "toolchain_cuda.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h"
#include "file.h"

/* The slice of the NVRTC API speechc calls (nvrtc.h; stable since 9.0). */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
typedef struct Nvrtc {
  void *dl;
  char path[512];
  int major, minor;
  const char *(*GetErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int *, int *);
  nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                               const char *const *);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetPTX)(nvrtcProgram, char *);
  nvrtcResult (*DestroyProgram)(nvrtcProgram *);
} Nvrtc;

int tc_cuda_arch(const char *in, char *out, size_t size, sc_error *err) {
  if (!in || !*in) in = TC_CUDA_DEFAULT_ARCH;
  const char *num = !strncmp(in, "sm_", 3) ? in + 3 : !strncmp(in, "compute_", 8) ? in + 8 : NULL;
  int ok = num && isdigit((unsigned char)num[0]) && isdigit((unsigned char)num[1]);
  for (const char *p = num ? num + 2 : NULL; ok && *p; p++)
    if (!isdigit((unsigned char)*p) && !(p[1] == 0 && (*p == 'a' || *p == 'f'))) ok = 0;
  if (!ok || atoi(num) < 50)
    return sc_fail(err, SC_EUSAGE, "--cuda-arch %s: expected sm_XX or compute_XX (e.g. sm_80, sm_90, "
                   "compute_80)", in);
  snprintf(out, size, "compute_%s", num);
  return SC_OK;
}

static int nvrtc_open(Nvrtc *n, sc_error *err) {
  memset(n, 0, sizeof *n);
  char tried[512] = "";
  const char *env = getenv("SPEECHC_NVRTC");
  const char *names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"};
  if (env && *env) {
    n->dl = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    snprintf(tried, sizeof tried, "%s (SPEECHC_NVRTC)", env);
    if (n->dl) snprintf(n->path, sizeof n->path, "%s", env);
  } else {
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !n->dl; i++) {
      n->dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
      if (n->dl) snprintf(n->path, sizeof n->path, "%s", names[i]);
    }
    glob_t gl;
    if (!n->dl && glob("/usr/local/cuda/lib64/libnvrtc.so*", 0, NULL, &gl) == 0) {
      for (size_t i = 0; i < gl.gl_pathc && !n->dl; i++) {
        if (strstr(gl.gl_pathv[i], "builtins") || strstr(gl.gl_pathv[i], ".alt.")) continue;
        n->dl = dlopen(gl.gl_pathv[i], RTLD_NOW | RTLD_LOCAL);
        if (n->dl) snprintf(n->path, sizeof n->path, "%s", gl.gl_pathv[i]);
      }
      globfree(&gl);
    }
    snprintf(tried, sizeof tried, "libnvrtc.so, .so.13, .so.12, .so.11.2, /usr/local/cuda/lib64/libnvrtc.so*");
  }
  if (!n->dl)
    return sc_fail(err, SC_ERUNTIME, "NVRTC not found; install the CUDA toolkit or build with "
                   "--target cpu (tried: %s)", tried);
  struct { void **slot; const char *name; } sym[] = {
      {(void **)&n->GetErrorString, "nvrtcGetErrorString"},
      {(void **)&n->Version, "nvrtcVersion"},
      {(void **)&n->CreateProgram, "nvrtcCreateProgram"},
      {(void **)&n->CompileProgram, "nvrtcCompileProgram"},
      {(void **)&n->GetProgramLogSize, "nvrtcGetProgramLogSize"},
      {(void **)&n->GetProgramLog, "nvrtcGetProgramLog"},
      {(void **)&n->GetPTXSize, "nvrtcGetPTXSize"},
      {(void **)&n->GetPTX, "nvrtcGetPTX"},
      {(void **)&n->DestroyProgram, "nvrtcDestroyProgram"},
  };
  for (size_t i = 0; i < sizeof sym / sizeof sym[0]; i++)
    if (!(*sym[i].slot = dlsym(n->dl, sym[i].name))) {
      dlclose(n->dl);
      n->dl = NULL;
      return sc_fail(err, SC_ERUNTIME, "%s: not a usable NVRTC (no %s); install the CUDA toolkit or "
                     "build with --target cpu", n->path, sym[i].name);
    }
  if (n->Version(&n->major, &n->minor)) n->major = n->minor = 0;
  /* NVRTC opens libnvrtc-builtins.so.MAJOR.MINOR by its bare name at
   * compile time, which finds it only on the loader's path.  Beside an
   * NVRTC opened by path (a toolkit outside ld.so.conf, NVIDIA's pip wheel)
   * load it first, so that the bare name resolves to the loaded copy. */
  const char *slash = strrchr(n->path, '/');
  if (slash && n->major > 0) {
    char builtins[sizeof n->path + 40];
    snprintf(builtins, sizeof builtins, "%.*s/libnvrtc-builtins.so.%d.%d", (int)(slash - n->path), n->path,
             n->major, n->minor);
    if (access(builtins, R_OK) == 0) dlopen(builtins, RTLD_NOW | RTLD_GLOBAL);
  }
  return SC_OK;
}

/* The cache directory (created), or 0 when there is none. */
static int cache_dir(char *out, size_t size) {
  const char *off = getenv("SPEECHC_KERNEL_CACHE");
  if (off && (!strcmp(off, "off") || !strcmp(off, "0"))) return 0;
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char base[400];
  if (xdg && *xdg) snprintf(base, sizeof base, "%s", xdg);
  else if (home && *home) snprintf(base, sizeof base, "%s/.cache", home);
  else return 0;
  mkdir(base, 0755);
  snprintf(out, size, "%s/speechc", base);
  if (mkdir(out, 0755) && errno != EEXIST) return 0;
  return 1;
}

/* A cached file's contents, or NULL (missing, unreadable, or not a regular
 * file: a FIFO in the cache must not block the build). */
static char *read_all(const char *path, size_t *n) {
  char *s;
  sc_error err;
  if (sc_read_regular(path, NULL, 0, &s, n, &err) || !*n) {
    free(s);
    return NULL;
  }
  return s;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int tc_cuda_compile(const char *src, const char *name, const char *arch, char **ptx,
                    size_t *ptx_bytes, int *from_cache, sc_error *err) {
  *ptx = NULL;
  *ptx_bytes = 0;
  *from_cache = 0;
  const char *verbose = getenv("SPEECHC_CUDA_VERBOSE");
  int loud = verbose && *verbose && strcmp(verbose, "0");
  Nvrtc nv;
  if (nvrtc_open(&nv, err)) return err->code;

  /* the cache key: everything the PTX depends on */
  char idtext[160];
  snprintf(idtext, sizeof idtext, "\n%s\nnvrtc %d.%d\nspeechc %s\n", arch, nv.major, nv.minor,
           SPEECHC_VERSION);
  size_t slen = strlen(src), ilen = strlen(idtext);
  char *keytext = malloc(slen + ilen);
  if (!keytext) {
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  memcpy(keytext, src, slen);
  memcpy(keytext + slen, idtext, ilen);
  unsigned long long key = (unsigned long long)sc_fnv1a(keytext, slen + ilen);
  free(keytext);
  char dir[480], path[560] = "";
  int cached = cache_dir(dir, sizeof dir);
  if (cached) {
    snprintf(path, sizeof path, "%s/cuda-%016llx.ptx", dir, key);
    size_t n = 0;
    char *hit = read_all(path, &n);
    if (hit && strstr(hit, ".version") && (strstr(hit, ".entry") || !strstr(src, "SC_KERNEL("))) {
      if (loud) fprintf(stderr, "speechc: kernel cache hit %s (%s, NVRTC %d.%d)\n", path, arch, nv.major, nv.minor);
      *ptx = hit;
      *ptx_bytes = n;
      *from_cache = 1;
      return SC_OK;
    }
    free(hit);
  }

  double t0 = now();
  nvrtcProgram prog = NULL;
  int rc = SC_OK;
  nvrtcResult r = nv.CreateProgram(&prog, src, name, 0, NULL, NULL);
  if (r) {
    rc = sc_fail(err, SC_ERUNTIME, "NVRTC (%s): cannot create a program: %s", nv.path, nv.GetErrorString(r));
    goto done;
  }
  char archopt[64];
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
  const char *opts[] = {archopt, "--std=c++14", "-default-device"};
  r = nv.CompileProgram(prog, 3, opts);
  if (r) {
    size_t ln = 0;
    char *log = NULL;
    if (!nv.GetProgramLogSize(prog, &ln) && ln > 1 && (log = malloc(ln + 1)) && !nv.GetProgramLog(prog, log))
      log[ln] = 0;
    rc = sc_fail(err, SC_ERUNTIME, "NVRTC %d.%d failed on %s for %s (%s): %s", nv.major, nv.minor, name,
                 arch, nv.GetErrorString(r), log && *log ? log : "no log");
    free(log);
    goto done;
  }
  size_t n = 0;
  if (nv.GetPTXSize(prog, &n) || n < 1 || !(*ptx = malloc(n + 1)) || nv.GetPTX(prog, *ptx)) {
    free(*ptx);
    *ptx = NULL;
    rc = sc_fail(err, SC_ERUNTIME, "NVRTC (%s): cannot read the PTX of %s", nv.path, name);
    goto done;
  }
  (*ptx)[n] = 0;
  *ptx_bytes = strlen(*ptx);
  if (loud)
    fprintf(stderr, "speechc: NVRTC %d.%d compiled %s for %s in %.2f s (%zu bytes of PTX)%s%s\n",
            nv.major, nv.minor, name, arch, now() - t0, *ptx_bytes, cached ? ", cached as " : "",
            cached ? path : "");
  if (cached) {
    /* write under a unique name, then rename: readers never see a part */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (f) {
      int ok = fwrite(*ptx, 1, *ptx_bytes, f) == *ptx_bytes;
      if (fclose(f) || !ok || rename(tmp, path)) unlink(tmp);
    }
  }
done:
  if (prog) nv.DestroyProgram(&prog);
  /* libnvrtc stays loaded (dlopen counts references): unloading it would
   * leak its C++ runtime's allocations, and the next build reuses it */
  return rc;
}
