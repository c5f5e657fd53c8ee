/*
 * cmd_moshi.c — `speechc moshi model.so --user-codes FILE --codes-out FILE
 * --greedy`: Moshi's step loop (runtime/moshi.c, the package's LMGen) over
 * the user's audio codes, one row of the file per 80 ms step, writing
 * every row LMGen.step returns: {"tokens": [[text, a_1..a_dep_q], ...]}.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "codes.h"
#include "speechc.h"

int cmd_moshi(int argc, char **argv);
extern const char *const usage_moshi;

const char *const usage_moshi =
    "usage: speechc moshi model.so --user-codes FILE --codes-out FILE --greedy [--threads N]\n"
    "  --user-codes FILE  JSON {\"codes\": [[c_1..c_U], ...]} (or [[...], ...], or raw int32): the\n"
    "                     user's codes, one row per 80 ms step, U = n_q - dep_q codebooks\n"
    "  --codes-out FILE   JSON {\"tokens\": [[text, a_1..a_dep_q], ...]}: the rows LMGen.step\n"
    "                     returns, in order (none until the largest delay has passed)\n"
    "  --greedy           argmax sampling (the only mode built yet)\n";

int cmd_moshi(int argc, char **argv) {
  const char *model = NULL, *in = NULL, *out = NULL, *v;
  int greedy = 0;
  long threads = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_moshi, stdout); return 0; }
    if ((v = flag_value(argc, argv, &i, "--user-codes"))) in = v;
    else if ((v = flag_value(argc, argv, &i, "--codes-out"))) out = v;
    else if (!strcmp(a, "--greedy")) greedy = 1;
    else if (is_flag(a, "--threads")) {
      if (parse_int("--threads", flag_value(argc, argv, &i, "--threads"), 0, 1024, &threads)) return SC_EUSAGE;
    } else if (a[0] == '-' && a[1]) return usage_error(usage_moshi, "unknown option '%s'", a);
    else if (!model) model = a;
    else return usage_error(usage_moshi, "unexpected argument '%s'", a);
  }
  if (!model) return usage_error(usage_moshi, "%s", "missing model.so");
  if (!in || !out) return usage_error(usage_moshi, "%s", "--user-codes FILE and --codes-out FILE are needed");
  if (!greedy)
    return usage_error(usage_moshi, "%s", "only --greedy is built yet (LMGen's sampling is not)");
  sc_error err = {0};
  sc_model *m = NULL;
  sc_session *s = NULL;
  sc_moshi *g = NULL;
  sc_moshi_info info;
  Codes codes = {0};
  FILE *f = NULL;
  sc_open_opts opts = {.verify_weights = 1, .threads = (int)threads};
  int rc = sc_model_open(model, &opts, &m, &err);
  if (!rc) rc = sc_session_open(m, &s, &err);
  if (!rc) rc = sc_moshi_open(s, &g, &info, &err);
  if (!rc) {
    CodesSpec spec = {.codebooks = info.user_codebooks, .vocab = info.card};
    rc = codes_read(in, CODES_AUTO, &spec, &codes, &err);
  }
  if (!rc && !(f = strcmp(out, "-") ? fopen(out, "w") : stdout))
    rc = sc_fail(&err, SC_EINPUT, "%s: cannot write: %s", out, strerror(errno));
  if (!rc) fputs("{\"tokens\": [", f);
  int32_t row[65];
  for (int st = 0, n = 0, has; !rc && st < codes.frames; st++) {
    rc = sc_moshi_step(g, codes.codes + (size_t)st * info.user_codebooks, row, &has, &err);
    if (rc || !has) continue;
    fprintf(f, "%s\n  [", n++ ? "," : "");
    for (int k = 0; k <= info.dep_q; k++) fprintf(f, "%s%d", k ? ", " : "", row[k]);
    fputc(']', f);
  }
  if (!rc) fputs("\n]}\n", f);
  if (f && f != stdout && fclose(f) && !rc) rc = sc_fail(&err, SC_EINPUT, "%s: write failed", out);
  codes_free(&codes);
  sc_moshi_close(g);
  if (s) sc_session_close(s);
  if (m) sc_model_close(m);
  return report(rc, &err);
}
