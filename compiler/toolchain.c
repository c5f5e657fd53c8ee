/* toolchain.c — see toolchain.h. */
#include "toolchain.h"

#include <libtcc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpu.h"

typedef struct TccDiag {
  char text[900];
  size_t len;
} TccDiag;

static void tcc_diag(void *opaque, const char *msg) {
  TccDiag *d = opaque;
  if (d->len + 2 >= sizeof d->text) return;
  int n = snprintf(d->text + d->len, sizeof d->text - d->len, "%s%s", d->len ? "; " : "", msg);
  if (n > 0) d->len += (size_t)n;
  if (d->len >= sizeof d->text) d->len = sizeof d->text - 1;
}

static int compile_tcc(const char *src, const char *out, sc_error *err) {
  TCCState *s = tcc_new();
  if (!s) return sc_fail(err, SC_ERUNTIME, "libtcc: cannot create a compiler state");
  TccDiag diag = {{0}, 0};
  tcc_set_error_func(s, &diag, tcc_diag);
  struct stat st;
  char lib[512];
  snprintf(lib, sizeof lib, "%s/libtcc1.a", SPEECHC_TCC_LIBDIR);
  int have_lib = stat(lib, &st) == 0;
  tcc_set_lib_path(s, SPEECHC_TCC_LIBDIR);
  tcc_set_options(s, "-nostdlib -O2");
  tcc_set_output_type(s, TCC_OUTPUT_DLL);
  int rc = tcc_add_file(s, src);
  if (rc == 0 && have_lib) rc = tcc_add_file(s, lib);
  if (rc == 0) rc = tcc_output_file(s, out);
  tcc_delete(s);
  if (rc != 0)
    return sc_fail(err, SC_ERUNTIME, "libtcc failed on %s: %s", src, diag.len ? diag.text : "unknown error");
  return SC_OK;
}

void tc_host_features(char *out, size_t size) {
  static const char *const names[] = {"sse4.2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl"};
  size_t len = 0;
  out[0] = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (sc_cpu_has(names[i]) > 0) {
      int n = snprintf(out + len, size - len, "%s%s", len ? "," : "", names[i]);
      if (n < 0 || (size_t)n >= size - len) break;
      len += (size_t)n;
    }
  }
}

/* With `child`, the compiler runs in its own process group, recorded in
 * *child with every signal blocked, so that a signal handler that sees no
 * pid has no compiler to stop. */
static int compile_system(const char *cc, const char *src, const char *out, volatile pid_t *child,
                          sc_error *err) {
  int pipefd[2];
  if (pipe(pipefd)) return sc_fail(err, SC_ERUNTIME, "pipe failed");
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  pid_t pid = fork();
  if (pid > 0 && child) {
    setpgid(pid, pid);
    *child = pid;
  }
  if (pid != 0) pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    close(pipefd[0]);
    close(pipefd[1]);
    return sc_fail(err, SC_ERUNTIME, "fork failed");
  }
  if (pid == 0) {
    if (child) setpgid(0, 0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    dup2(pipefd[1], 2);
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    execlp(cc, cc, "-std=gnu11", "-O3", "-march=native", "-ffp-contract=off", "-fPIC",
           "-shared", "-w", "-o", out, src, (char *)NULL);
    fprintf(stderr, "cannot run '%s'", cc);
    _exit(127);
  }
  close(pipefd[1]);
  char text[900];
  size_t len = 0;
  ssize_t n;
  char sink[256];
  while (len < sizeof text - 1 && (n = read(pipefd[0], text + len, sizeof text - 1 - len)) > 0)
    len += (size_t)n;
  while (read(pipefd[0], sink, sizeof sink) > 0) {}
  text[len] = 0;
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (child) {
    pthread_sigmask(SIG_BLOCK, &all, &old);
    *child = 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
      return sc_fail(err, SC_EUSAGE, "--cc %s: compiler not found (hint: install it, or use --cc tcc)", cc);
    return sc_fail(err, SC_ERUNTIME, "%s failed on %s: %s", cc, src, text);
  }
  return SC_OK;
}

void tc_features(const char *cc, char *out, size_t size) {
  if (!strcmp(cc, "tcc")) out[0] = 0;
  else tc_host_features(out, size);
}

int tc_compile(const char *cc, const char *src, const char *out, volatile pid_t *child, sc_error *err) {
  if (!strcmp(cc, "tcc")) return compile_tcc(src, out, err);
  if (strcmp(cc, "gcc") && strcmp(cc, "clang"))
    return sc_fail(err, SC_EUSAGE, "--cc: unknown compiler '%s' (accepted: tcc, gcc, clang)", cc);
  return compile_system(cc, src, out, child, err);
}
