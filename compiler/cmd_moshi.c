/*
 * cmd_moshi.c — `speechc moshi model.so --user-codes FILE --codes-out FILE`:
 * Moshi's step loop (runtime/moshi.c, the package's LMGen) over the user's
 * audio codes, one row of the file per 80 ms step, writing every row
 * LMGen.step returns: {"tokens": [[text, a_1..a_dep_q], ...]}.  Sampling
 * flags are LMGen's argument names (run_inference takes them from the
 * checkpoint's lm_gen_config, which gives the defaults here too).
 */
#include <limits.h>
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
    "usage: speechc moshi model.so --user-codes FILE --codes-out FILE [options]\n"
    "  --user-codes FILE  JSON {\"codes\": [[c_1..c_U], ...]} (or [[...], ...], or raw int32): the\n"
    "                     user's codes, one row per 80 ms step, U = n_q - dep_q codebooks\n"
    "  --codes-out FILE   JSON {\"tokens\": [[text, a_1..a_dep_q], ...]}: the rows LMGen.step\n"
    "                     returns, in order (none until the largest delay has passed)\n"
    "  --greedy           argmax for every token (LMGen's use_sampling=False)\n"
    "  --temp T           audio temperature (default 0.8, or the checkpoint's lm_gen_config;\n"
    "                     0 = greedy)\n"
    "  --temp-text T      text temperature (default 0.7; 0 = greedy)\n"
    "  --top-k K          audio top-k (default 250; 0 = off)\n"
    "  --top-k-text K     text top-k (default 25; 0 = off)\n"
    "  --seed S           sampler seed (default 4242); same seed, same output (not the\n"
    "                     package's draws: torch's generator is not reproduced)\n"
    "  --threads N        kernel threads (default 0 = one per physical core)\n";

/* A sampling flag given on the command line, over the checkpoint's value. */
typedef struct Over {
  int set;
  double v;
} Over;

int cmd_moshi(int argc, char **argv) {
  const char *model = NULL, *in = NULL, *out = NULL, *v;
  int greedy = 0;
  long threads = 0, lv;
  uint64_t seed_u = 0;
  Over temp = {0}, temp_text = {0}, top_k = {0}, top_k_text = {0}, seed = {0};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_moshi, stdout); return 0; }
    if ((v = flag_value(argc, argv, &i, "--user-codes"))) in = v;
    else if ((v = flag_value(argc, argv, &i, "--codes-out"))) out = v;
    else if (!strcmp(a, "--greedy")) greedy = 1;
    else if (is_flag(a, "--temp-text") || is_flag(a, "--temp")) {
      const char *f = is_flag(a, "--temp") ? "--temp" : "--temp-text";
      Over *o = f[6] ? &temp_text : &temp;
      if (parse_float(f, flag_value(argc, argv, &i, f), 0, 100, &o->v)) return SC_EUSAGE;
      o->set = 1;
    } else if (is_flag(a, "--top-k-text") || is_flag(a, "--top-k")) {
      const char *f = is_flag(a, "--top-k") ? "--top-k" : "--top-k-text";
      Over *o = f[7] ? &top_k_text : &top_k;
      if (parse_int(f, flag_value(argc, argv, &i, f), 0, INT_MAX, &lv)) return SC_EUSAGE;
      o->v = (double)lv, o->set = 1;
    } else if (is_flag(a, "--seed")) {
      if (parse_int("--seed", flag_value(argc, argv, &i, "--seed"), 0, LONG_MAX, &lv)) return SC_EUSAGE;
      seed.v = (double)lv, seed.set = 1;
      seed_u = (uint64_t)lv;
    }
    else if (is_flag(a, "--threads")) {
      if (parse_int("--threads", flag_value(argc, argv, &i, "--threads"), 0, 1024, &threads)) return SC_EUSAGE;
    } else if (a[0] == '-' && a[1]) return usage_error(usage_moshi, "unknown option '%s'", a);
    else if (!model) model = a;
    else return usage_error(usage_moshi, "unexpected argument '%s'", a);
  }
  if (!model) return usage_error(usage_moshi, "%s", "missing model.so");
  if (!in || !out) return usage_error(usage_moshi, "%s", "--user-codes FILE and --codes-out FILE are needed");
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
  sc_moshi_params p;
  if (!rc) rc = sc_moshi_defaults(m, &p, &err);
  if (!rc) {
    p.greedy |= greedy;
    if (temp.set) p.temp = (float)temp.v;
    if (temp_text.set) p.temp_text = (float)temp_text.v;
    if (top_k.set) p.top_k = (int)top_k.v;
    if (top_k_text.set) p.top_k_text = (int)top_k_text.v;
    if (seed.set) p.seed = seed_u;
    rc = sc_moshi_open(s, &p, &g, &info, &err);
  }
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
