/*
 * build.c — the whole compiler on one screen:
 *
 *   checkpoint -> frontend -> specialize -> fuse -> plan -> pack weights
 *              -> the target's code -> toolchain -> OUT.so (+ OUT.<id>.weights)
 *
 * The target (--target) is looked up once in the target table (target.h)
 * and asked for everything that differs between targets: its architecture,
 * its part of the build id, its code and the files it adds to --emit-dir.
 * The graphs are verified after every pass and can be printed after any of
 * them (--dump-ir[=PASS]).  The outputs (output.c) are checked before any
 * work (-o is never an input of the build, nor anything but a regular file
 * or a symlink), written as new temporaries beside -o and renamed into place
 * only when everything succeeded: the weight file first, under a name that
 * changes with its content, then the model that names it, so that a reader
 * never sees a mismatched pair.  A failed or interrupted build leaves
 * nothing behind.
 */
#include "build.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cg.h"
#include "checksum.h"
#include "output.h"
#include "passes.h"
#include "sc_abi_text.h"
#include "target.h"
#include "toolchain.h"

BuildOpts build_defaults(void) {
  BuildOpts o;
  memset(&o, 0, sizeof o);
  o.cc = "tcc";
  o.target = "cpu";
  o.band = DT_F32;
  o.prefill_chunk = 0; /* the family's default (fe_chunk) */
  o.fuse = 1;
  o.max_batch = 16;
  o.max_session_mb = SC_SESSION_MB_DEFAULT;
  return o;
}

static int verify_all(const Module *m, const char *pass, const BuildOpts *o, sc_error *err) {
  for (int gi = 0; gi < m->n_graphs; gi++)
    if (ir_verify(m, &m->graphs[gi], err)) {
      size_t len = strlen(err->msg);
      snprintf(err->msg + len, sizeof err->msg - len, " (after pass %s)", pass);
      return err->code;
    }
  if (o->dump_ir && (!o->dump_ir[0] || !strcmp(o->dump_ir, pass))) {
    printf("; after %s\n", pass);
    for (int gi = 0; gi < m->n_graphs; gi++) ir_print(m, &m->graphs[gi], stdout);
  }
  return SC_OK;
}

static int write_file(const char *path, const void *data, size_t n, sc_error *err) {
  FILE *f = fopen(path, "wb");
  if (!f) return sc_fail(err, SC_EINPUT, "%s: cannot write: %s", path, strerror(errno));
  size_t w = fwrite(data, 1, n, f);
  if (fclose(f) || w != n) return sc_fail(err, SC_EINPUT, "%s: write failed", path);
  return SC_OK;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --weights: a band the linear kernels multiply (sc_bands.h). */
static int check_band(DType band, sc_error *err) {
  const sc_band_traits *bt = sc_band(ir_wtype(band));
  if (bt && bt->linear) return SC_OK;
  char names[128] = "";
  for (int w = 0; w < SC_W_COUNT; w++)
    if (sc_band_table[w].linear) {
      size_t len = strlen(names);
      snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", sc_band_table[w].name);
    }
  return sc_fail(err, SC_EUSAGE, "--weights %s: not a weight band (accepted: %s)", ir_dtype_name(band), names);
}

/* qwen-tts takes its generation defaults from the checkpoint's
 * generation_config.json (Qwen3TTSModel._merge_generate_kwargs: a value the
 * caller leaves out comes from there, else from its hard defaults): the
 * ten keys it reads, checked as its sampling would take them, go into the
 * embedded config under "speechc_generation_defaults", where
 * sc_tts_model_defaults reads them.  Other keys are not read by qwen-tts'
 * generate and are left alone. */
static int tts_generation_defaults(const Checkpoint *c, Module *m, char **minified, sc_error *err) {
  cJSON *g = NULL;
  if (ckpt_read_json_opt(c, "generation_config.json", &g, err)) return err->code;
  if (!g) return SC_OK;
  static const struct {
    const char *key;
    char kind; /* b: true / false; i: a whole number >= lo; n: a finite number in (lo, hi], [lo, hi] with lo_ok */
    double lo, hi;
    int lo_ok;
  } keys[] = {{"do_sample", 'b', 0, 0, 0},
              {"top_k", 'i', 0, 0, 0},
              {"top_p", 'n', 0, 1, 0},
              {"temperature", 'n', 0, 100, 1},
              {"repetition_penalty", 'n', 0, 1e6, 0},
              {"subtalker_dosample", 'b', 0, 0, 0},
              {"subtalker_top_k", 'i', 0, 0, 0},
              {"subtalker_top_p", 'n', 0, 1, 0},
              {"subtalker_temperature", 'n', 0, 100, 1},
              {"max_new_tokens", 'i', 1, 0, 0}};
  char where[4200];
  snprintf(where, sizeof where, "%s/generation_config.json", c->dir);
  int rc = SC_OK;
  cJSON *keep = NULL, *j = NULL;
  if (!cJSON_IsObject(g)) {
    rc = sc_fail(err, SC_EINPUT, "%s: not a JSON object", where);
    goto done;
  }
  if (!(keep = cJSON_CreateObject())) goto oom;
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(g, keys[k].key);
    if (!v) continue;
    const double x = v->valuedouble;
    if (keys[k].kind == 'b' && !cJSON_IsBool(v))
      rc = sc_fail(err, SC_EINPUT, "%s: %s is not true or false (qwen-tts generates with it as given)", where,
                   keys[k].key);
    else if (keys[k].kind == 'i' && (!cJSON_IsNumber(v) || x != floor(x) || x < keys[k].lo || x > INT_MAX))
      rc = sc_fail(err, SC_EINPUT, "%s: %s is not a whole number of at least %g", where, keys[k].key, keys[k].lo);
    else if (keys[k].kind == 'n' && (!cJSON_IsNumber(v) || !isfinite(x) || x > keys[k].hi ||
                                     (keys[k].lo_ok ? x < keys[k].lo : x <= keys[k].lo)))
      rc = sc_fail(err, SC_EINPUT, "%s: %s is not a number in %s%g, %g]", where, keys[k].key,
                   keys[k].lo_ok ? "[" : "(", keys[k].lo, keys[k].hi);
    if (rc) goto done;
    if (!cJSON_AddItemToObject(keep, keys[k].key, cJSON_Duplicate(v, 1))) goto oom;
  }
  if (!keep->child) goto done;
  if (!(j = cJSON_Parse(*minified)) || !cJSON_AddItemToObject(j, "speechc_generation_defaults", keep)) goto oom;
  keep = NULL;
  char *s = cJSON_PrintUnformatted(j);
  if (!s) goto oom;
  cJSON_free(*minified);
  *minified = s;
  m->config_json = s;
  m->config_hash = sc_fnv1a(s, strlen(s));
  goto done;
oom:
  rc = sc_fail(err, SC_ERUNTIME, "%s: out of memory", where);
done:
  cJSON_Delete(keep);
  cJSON_Delete(j);
  cJSON_Delete(g);
  return rc;
}

int sc_build(const BuildOpts *o, sc_error *err) {
  double t0 = now();
  int rc;
  const Target *t = target_find(o->target, err);
  if (!t) return err->code;
  char arch[32] = "";
  if (t->arch && t->arch(o->arch, arch, sizeof arch, err)) return err->code;
  if ((rc = check_band(o->band, err))) return rc;
  Checkpoint c;
  if (ckpt_open_as(&c, o->model_dir, o->ckpt_as, err)) return err->code;
  OutPair out;
  if (out_open(&out, o->out_path, &c, o->signals, err)) {
    ckpt_close(&c);
    return err->code;
  }
  Module m;
  ir_module_init(&m);
  char *minified = NULL;
  TargetCode code;
  memset(&code, 0, sizeof code);
  rc = SC_OK;

  const char *model_type = NULL, *family = NULL;
  if ((rc = cfg_str_opt(c.config, "config.json", "model_type", NULL, &model_type, err))) goto done;
  FrontendFn fe = fe_lookup(model_type, &family);
  if (!fe) {
    rc = sc_fail(err, SC_EINPUT, "%s: model_type '%s' is not supported (supported: qwen3, llama, qwen3_5, "
                 "qwen3_5_text, qwen3_tts, qwen3_tts_tokenizer_12hz, moshi, mimi)",
                 c.config_path, model_type);
    goto done;
  }
  snprintf(m.family, sizeof m.family, "%s", family);
  snprintf(m.model_type, sizeof m.model_type, "%s", model_type);
  minified = cJSON_PrintUnformatted(c.config);
  m.config_json = minified;
  m.config_hash = sc_fnv1a(minified, strlen(minified));

  /* frontend and passes */
  if ((rc = fe(&m, &c, o, err))) goto done;
  if (!strcmp(family, "qwen3_tts") && (rc = tts_generation_defaults(&c, &m, &minified, err))) goto done;
  if ((rc = verify_all(&m, "frontend", o, err))) goto done;
  pass_specialize(&m);
  if ((rc = verify_all(&m, "specialize", o, err))) goto done;
  if (o->fuse) {
    pass_fuse(&m);
    if ((rc = verify_all(&m, "fuse", o, err))) goto done;
  }
  pass_mark_used(&m);
  pass_plan(&m, t);
  if ((rc = verify_all(&m, "plan", o, err))) goto done;
  if ((rc = pass_plan_check_session(&m, o->max_session_mb, err))) goto done;
  /* an op the target cannot lower is refused by name before any packing */
  if ((rc = ir_check_target(&m, t->ir, err))) goto done;

  /* weights; the file's name carries a hash of the build id and checksum */
  char idtext[512];
  snprintf(idtext, sizeof idtext, "%016llx %s %s %d %d %d%s%s", (unsigned long long)m.config_hash,
           SPEECHC_VERSION, ir_dtype_name(o->band), m.max_context, o->fuse, o->prefill_chunk,
           t->id_text, arch);
  uint64_t build_id = sc_fnv1a(idtext, strlen(idtext));
  uint64_t checksum = 0, data_bytes = 0;
  FILE *wf;
  const char *wtmp;
  if ((rc = out_weights(&out, &wf, &wtmp, err))) goto done;
  if ((rc = pass_pack(&m, t, wf, wtmp, &checksum, &data_bytes, build_id, o->quiet, err))) goto done;
  const uint64_t pair[2] = {build_id, checksum};
  const char *wname = out_weight_name(&out, sc_fnv1a(pair, sizeof pair));

  /* code */
  char features[128];
  tc_features(o->cc, features, sizeof features);
  CgInfo info = {wname, data_bytes, checksum, build_id, ir_dtype_name(o->band), o->fuse, features,
                 o->check_numerics, t};
  if ((rc = target_emit(t, &m, &info, arch, &code, err))) goto done;
  if ((rc = out_scratch(&out, err))) goto done;
  char src_path[PATH_MAX + 16], abi_path[PATH_MAX + 16];
  snprintf(src_path, sizeof src_path, "%s", out.scratch_file[0]);
  snprintf(abi_path, sizeof abi_path, "%s", out.scratch_file[1]);
  if (o->emit_dir) { /* sources for humans; the compiler's output stays private */
    if (mkdir(o->emit_dir, 0755) && errno != EEXIST) {
      rc = sc_fail(err, SC_EUSAGE, "--emit-dir %s: cannot create: %s", o->emit_dir, strerror(errno));
      goto done;
    }
    snprintf(src_path, sizeof src_path, "%s/%s", o->emit_dir, t->host_name);
    snprintf(abi_path, sizeof abi_path, "%s/sc_abi.h", o->emit_dir);
  }
  rc = write_file(abi_path, sc_abi_text, strlen((const char *)sc_abi_text), err);
  if (!rc) rc = write_file(src_path, code.host.s, code.host.len, err);
  for (int k = 0; !rc && o->emit_dir && k < code.n_files; k++) {
    /* a device source and its code (model.cu, model.ptx), for humans and
     * for the device's own tools (ptxas) */
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", o->emit_dir, code.files[k].name);
    rc = write_file(path, code.files[k].text, code.files[k].len, err);
  }
  if (!rc) {
    if (!o->quiet && now() - t0 > 1.0) fprintf(stderr, "speechc: compiling with %s\n", o->cc);
    rc = tc_compile(o->cc, src_path, out.scratch_file[2], o->signals ? &out.compiler : NULL, err);
  }
  if (rc) goto done;
  if ((rc = out_install(&out, err))) goto done;
  if (!o->quiet && now() - t0 > 1.0)
    fprintf(stderr, "speechc: built %s (+ %s, %llu MB) in %.1f s\n", o->out_path, wname,
            (unsigned long long)(data_bytes >> 20), now() - t0);
done:
  out_close(&out);
  target_code_free(&code);
  ir_module_free(&m);
  cJSON_free(minified);
  ckpt_close(&c);
  return rc;
}
