/* cli.c — argument helpers shared by the speechc subcommands. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int usage_error(const char *usage, const char *fmt, const char *arg) {
  fprintf(stderr, "speechc: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n\n%s", usage);
  return SC_EUSAGE;
}

int parse_int(const char *flag, const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "speechc: %s expects an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, s ? s : "");
    return SC_EUSAGE;
  }
  *out = v;
  return SC_OK;
}

int parse_float(const char *flag, const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = s ? strtod(s, &end) : 0;
  if (!s || !*s || *end || errno || !(v >= lo && v <= hi)) {
    fprintf(stderr, "speechc: %s expects a number in [%g, %g], got '%s'\n", flag, lo, hi, s ? s : "");
    return SC_EUSAGE;
  }
  *out = v;
  return SC_OK;
}

/* "--flag value" or "--flag=value" */
const char *flag_value(int argc, char **argv, int *i, const char *flag) {
  size_t n = strlen(flag);
  if (!strncmp(argv[*i], flag, n) && argv[*i][n] == '=') return argv[*i] + n + 1;
  if (!strcmp(argv[*i], flag)) return *i + 1 < argc ? argv[++*i] : NULL;
  return NULL;
}

int is_flag(const char *arg, const char *flag) {
  size_t n = strlen(flag);
  return !strcmp(arg, flag) || (!strncmp(arg, flag, n) && arg[n] == '=');
}

int report(int rc, const sc_error *err) {
  if (rc) fprintf(stderr, "speechc: error: %s\n", err->msg);
  return rc;
}

int check_family(const sc_model *m, const char *path, const char *family, sc_error *err) {
  sc_model_info info;
  sc_model_get_info(m, &info);
  if (!strcmp(info.family, family)) return SC_OK;
  if (!strcmp(info.family, "qwen3_tts"))
    return sc_fail(err, SC_EUSAGE, "%s is a Qwen3-TTS model; use speechc tts", path);
  if (!strcmp(family, "qwen3_tts"))
    return sc_fail(err, SC_EUSAGE, "%s is a %s model, not a Qwen3-TTS model (hint: speechc run drives plain "
                   "LMs)", path, info.family);
  return sc_fail(err, SC_EUSAGE, "%s is a %s model; this command drives %s models", path, info.family, family);
}

int parse_ids(const char *flag, const char *s, int32_t **out, int *n) {
  int cap = 16, k = 0;
  int32_t *ids = malloc((size_t)cap * sizeof *ids);
  if (!ids) return SC_ERUNTIME;
  const char *p = s;
  while (*p) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || errno || v < INT32_MIN || v > INT32_MAX || (*end && *end != ',') ||
        (*end == ',' && !end[1])) {
      fprintf(stderr, "speechc: %s expects comma-separated integers, got '%s'\n", flag, s);
      free(ids);
      return SC_EUSAGE;
    }
    if (k == cap) {
      int32_t *g = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
      if (!g) { free(ids); return SC_ERUNTIME; }
      ids = g;
    }
    ids[k++] = (int32_t)v;
    p = *end ? end + 1 : end;
  }
  if (!k) {
    fprintf(stderr, "speechc: %s is empty\n", flag);
    free(ids);
    return SC_EUSAGE;
  }
  *out = ids;
  *n = k;
  return SC_OK;
}

