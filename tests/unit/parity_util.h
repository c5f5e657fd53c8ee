/* parity_util.h — reading the reference traces of tests/data and comparing
 * logits, shared by the parity tests. */
#ifndef SC_PARITY_UTIL_H
#define SC_PARITY_UTIL_H
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Trace {
  int prompt[64], n_prompt;
  int greedy[64], n_greedy;
  int n_rows, vocab;
  float *logits; /* [n_rows, vocab] */
} Trace;

static inline char *slurp(const char *path, long *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
  if (s) s[n] = 0;
  fclose(f);
  if (size) *size = n;
  return s;
}

static inline int int_array(const cJSON *a, int *out, int max) {
  int n = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, a) if (n < max) out[n++] = it->valueint;
  return n;
}

static inline int trace_load(const char *dir, Trace *t) {
  char path[512];
  memset(t, 0, sizeof *t);
  snprintf(path, sizeof path, "%s/trace.json", dir);
  char *text = slurp(path, NULL);
  if (!text) return -1;
  cJSON *j = cJSON_Parse(text);
  free(text);
  if (!j) return -1;
  t->n_prompt = int_array(cJSON_GetObjectItem(j, "prompt"), t->prompt, 64);
  t->n_greedy = int_array(cJSON_GetObjectItem(j, "greedy"), t->greedy, 64);
  t->n_rows = cJSON_GetObjectItem(j, "n_rows")->valueint;
  t->vocab = cJSON_GetObjectItem(j, "vocab")->valueint;
  cJSON_Delete(j);
  snprintf(path, sizeof path, "%s/logits.f32", dir);
  long size;
  t->logits = (float *)slurp(path, &size);
  if (!t->logits || size != (long)t->n_rows * t->vocab * 4) return -1;
  return 0;
}

/* SPEECHC_TEST_TARGET: the --target the parity tests build for (default
 * cpu; "cuda" runs them on a GPU, or on the emulator of tests/emu in CI). */
static inline const char *test_target(void) {
  const char *t = getenv("SPEECHC_TEST_TARGET");
  return t && *t ? t : "cpu";
}

/* max |a-b| / max |b| */
static inline double rel_err(const float *a, const float *b, int n) {
  double num = 0, den = 0;
  for (int i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (d > num || d != d) num = d != d ? INFINITY : d;
    if (fabs(b[i]) > den) den = fabs(b[i]);
  }
  return den > 0 ? num / den : num;
}

/* The kernel tables (SPEECHC_ISA names) this CPU runs besides its default:
 * "portable", and "avx2" where the CPU has it, into isas[2]; their count.
 * Sessions pick their kernels when they open. */
static inline int test_other_isas(const char **isas) {
  int n = 0;
  isas[n++] = "portable";
#if defined(__x86_64__) || defined(__i386__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) isas[n++] = "avx2";
#endif
  return n;
}

#endif
