/*
 * build_set.c — everything one `speechc build` makes, as a library call:
 * the model (sc_build), its tokenizer copied beside it, and the codec a
 * Qwen3-TTS checkpoint (speech_tokenizer/) or a Moshi checkpoint (its Mimi)
 * carries, built as OUT.codec.so.  The command line (main.c) and the shared
 * library's sc_build_argv (speechc_build.h: Python's speechc.build) parse
 * the same options here, so the two cannot drift apart; usage errors land in
 * the sc_error instead of on stderr, and only the CLI installs signal
 * handlers (a library must not take SIGINT from its host process).
 */
#include "build.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "file.h"
#include "json.h"
#include "sc_bands.h"
#include "speechc_build.h"
#include "tokenizer.h"

/* The options of a model built beside OUT.so (a codec): the build's
 * toolchain, checks and limits, the CPU, band `band`. */
static BuildOpts side_build(const BuildOpts *o, const char *dir, const char *out, DType band) {
  BuildOpts c = build_defaults();
  c.model_dir = dir;
  c.out_path = out;
  c.cc = o->cc;
  c.fuse = o->fuse;
  c.quiet = o->quiet;
  c.check_numerics = o->check_numerics;
  c.max_session_mb = o->max_session_mb;
  c.signals = o->signals;
  c.band = band;
  return c;
}

/* A Qwen3-TTS checkpoint directory that holds speech_tokenizer/ gets its
 * codec decoder built beside OUT.so as OUT.codec.so (sc_codec_path), for the
 * CPU (the codec ops have no device lowering yet) in band `band` (f32, the
 * exact path, unless --codec-weights says otherwise).  Nothing to do for
 * other directories. */
static int build_codec(const BuildOpts *o, DType band, sc_error *err) {
  char dir[PATH_MAX], cfg[PATH_MAX + 16], out[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/speech_tokenizer", o->model_dir) >= (int)sizeof dir) return SC_OK;
  snprintf(cfg, sizeof cfg, "%s/config.json", dir);
  if (access(cfg, F_OK)) return SC_OK;
  if (sc_codec_path(o->out_path, out, sizeof out))
    return sc_fail(err, SC_EUSAGE, "%s: too long to name the codec decoder beside it", o->out_path);
  BuildOpts c = side_build(o, dir, out, band);
  if (!o->quiet) fprintf(stderr, "speechc: %s has a speech tokenizer: building its decoder into %s\n",
                         o->model_dir, out);
  return sc_build(&c, err);
}

/* A Moshi checkpoint whose mimi_name file is present gets its Mimi built
 * beside OUT.so as OUT.codec.so, as the package's CheckpointInfo.get_mimi
 * makes it: num_codebooks max(dep_q, n_q - dep_q), the Mimi config of
 * mimi_config_name (else the published defaults).  CPU (the codec ops
 * have no device lowering yet). */
static int build_mimi(const BuildOpts *o, DType band, sc_error *err) {
  Checkpoint c;
  if (ckpt_open(&c, o->model_dir, err)) return err->code;
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c.config, "model_type");
  const cJSON *mn = cJSON_GetObjectItemCaseSensitive(c.config, "mimi_name");
  const cJSON *mc = cJSON_GetObjectItemCaseSensitive(c.config, "mimi_config_name");
  char path[PATH_MAX], out[PATH_MAX];
  int rc = SC_OK;
  cJSON *cfg = NULL;
  char *text = NULL, *ctext = NULL;
  if (!cJSON_IsString(mt) || strcmp(mt->valuestring, "moshi") || !cJSON_IsString(mn) ||
      strchr(mn->valuestring, '/') || snprintf(path, sizeof path, "%s/%s", c.dir, mn->valuestring) >= (int)sizeof path ||
      access(path, F_OK))
    goto done; /* not a Moshi checkpoint, or its Mimi is not here */
  int64_t n_q, dep_q;
  if ((rc = cfg_int_opt(c.config, c.config_path, "n_q", 8, &n_q, err)) ||
      (rc = cfg_int_opt(c.config, c.config_path, "dep_q", 8, &dep_q, err)))
    goto done;
  if (cJSON_IsString(mc)) {
    if (strchr(mc->valuestring, '/') ||
        snprintf(path, sizeof path, "%s/%s", c.dir, mc->valuestring) >= (int)sizeof path) {
      rc = sc_fail(err, SC_EINPUT, "%s: mimi_config_name '%s' must name a file of the directory", c.config_path,
                   mc->valuestring);
      goto done;
    }
    if ((rc = json_read_file(path, SC_JSON_MAX, "hint: mimi_config_name names it", &ctext, &cfg, err))) goto done;
    if (!cJSON_IsObject(cfg)) {
      rc = sc_fail(err, SC_EINPUT, "%s: expected a JSON object (the Mimi config get_mimi takes)", path);
      goto done;
    }
  } else if (!(cfg = cJSON_CreateObject())) {
    rc = sc_fail(err, SC_ERUNTIME, "out of memory");
    goto done;
  }
  cJSON_DeleteItemFromObjectCaseSensitive(cfg, "model_type");
  cJSON_DeleteItemFromObjectCaseSensitive(cfg, "num_codebooks");
  cJSON_AddStringToObject(cfg, "model_type", "mimi");
  cJSON_AddNumberToObject(cfg, "num_codebooks", (double)(dep_q > n_q - dep_q ? dep_q : n_q - dep_q));
  if (!(text = cJSON_PrintUnformatted(cfg))) {
    rc = sc_fail(err, SC_ERUNTIME, "out of memory");
    goto done;
  }
  if (sc_codec_path(o->out_path, out, sizeof out)) {
    rc = sc_fail(err, SC_EUSAGE, "%s: too long to name the Mimi codec beside it", o->out_path);
    goto done;
  }
  CkptAs as = {.config_text = text, .config_where = "its mimi_name, mimi_config_name", .weights_name = mn->valuestring};
  BuildOpts b = side_build(o, c.dir, out, band);
  b.ckpt_as = &as;
  b.max_context = o->max_context; /* a step is a Mimi frame: the conversation's length for both */
  if (!o->quiet) fprintf(stderr, "speechc: %s names its Mimi (%s): building it into %s\n", o->model_dir, mn->valuestring, out);
  rc = sc_build(&b, err);
done:
  cJSON_free(text);
  cJSON_Delete(cfg);
  free(ctext);
  ckpt_close(&c);
  return rc;
}

/* A Moshi checkpoint's text tokenizer (the SentencePiece model its
 * tokenizer_name names) goes beside OUT.so in OUT.tokenizer/, where
 * `speechc moshi` finds it (tok_install_spm). */
static int build_spm(const BuildOpts *o, sc_error *err) {
  Checkpoint c;
  if (ckpt_open(&c, o->model_dir, err)) return err->code;
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c.config, "model_type");
  const cJSON *tn = cJSON_GetObjectItemCaseSensitive(c.config, "tokenizer_name");
  int rc = SC_OK;
  if (cJSON_IsString(mt) && !strcmp(mt->valuestring, "moshi"))
    rc = tok_install_spm(c.dir, cJSON_IsString(tn) ? tn->valuestring : TOK_MOSHI_SPM_DEFAULT, o->out_path, o->quiet,
                         err);
  ckpt_close(&c);
  return rc;
}


/* An integer flag value in [lo, hi], with the CLI's wording (parse_int). */
static int arg_int(const char *flag, const char *s, long lo, long hi, long *out, sc_error *err) {
  char *end;
  errno = 0;
  long v = s ? strtol(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < lo || v > hi)
    return sc_fail(err, SC_EUSAGE, "%s expects an integer in [%ld, %ld], got '%s'", flag, lo, hi, s ? s : "");
  *out = v;
  return SC_OK;
}

int build_parse_args(int argc, char **argv, BuildArgs *a, sc_error *err) {
  memset(a, 0, sizeof *a);
  BuildOpts *o = &a->o;
  *o = build_defaults();
  a->codec_band = DT_F32;
  long v;
  for (int i = 0; i < argc; i++) {
    const char *s = argv[i], *val;
    if (!s) return sc_fail(err, SC_EUSAGE, "argument %d is NULL", i);
    if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
      a->help = 1;
      return SC_OK;
    }
    if (!strcmp(s, "-o") || is_flag(s, "--output")) {
      val = !strcmp(s, "-o") ? (i + 1 < argc ? argv[++i] : NULL) : flag_value(argc, argv, &i, "--output");
      if (!val) return sc_fail(err, SC_EUSAGE, "%s needs a path", s);
      o->out_path = val;
    } else if (is_flag(s, "--cc")) {
      val = flag_value(argc, argv, &i, "--cc");
      if (!val || (strcmp(val, "tcc") && strcmp(val, "gcc") && strcmp(val, "clang")))
        return sc_fail(err, SC_EUSAGE, "--cc expects tcc, gcc or clang, got '%s'", val ? val : "");
      o->cc = val;
    } else if (is_flag(s, "--target")) {
      val = flag_value(argc, argv, &i, "--target");
      if (!val || (strcmp(val, "cpu") && strcmp(val, "cuda") && strcmp(val, "metal")))
        return sc_fail(err, SC_EUSAGE, "--target expects cpu, cuda or metal, got '%s'", val ? val : "");
      o->target = val;
    } else if (is_flag(s, "--cuda-arch")) {
      if (!(o->arch = flag_value(argc, argv, &i, "--cuda-arch")))
        return sc_fail(err, SC_EUSAGE, "%s needs an architecture (sm_80, sm_90, compute_80, ...)", s);
    } else if (is_flag(s, "--weights")) {
      val = flag_value(argc, argv, &i, "--weights");
      const int band = sc_band_find(val);
      if (band < 0 || !sc_band(band)->linear)
        return sc_fail(err, SC_EUSAGE, "--weights expects f32, bf16, q8_0 or q4_0, got '%s'", val ? val : "");
      o->band = ir_dtype_of_wtype(band);
    } else if (is_flag(s, "--max-context")) {
      if (arg_int("--max-context", flag_value(argc, argv, &i, "--max-context"), 1, 1 << 20, &v, err))
        return SC_EUSAGE;
      o->max_context = (int)v;
    } else if (is_flag(s, "--delta-chunk")) {
      if (arg_int("--delta-chunk", flag_value(argc, argv, &i, "--delta-chunk"), 0, 256, &v, err)) return SC_EUSAGE;
      o->delta_chunk = (int)v;
    } else if (is_flag(s, "--prefill-chunk")) {
      if (arg_int("--prefill-chunk", flag_value(argc, argv, &i, "--prefill-chunk"), 1, 4096, &v, err))
        return SC_EUSAGE;
      o->prefill_chunk = (int)v;
    } else if (is_flag(s, "--max-session-mb")) {
      if (arg_int("--max-session-mb", flag_value(argc, argv, &i, "--max-session-mb"), 1, 1L << 40, &v, err))
        return SC_EUSAGE;
      o->max_session_mb = v;
    } else if (is_flag(s, "--emit-dir")) {
      if (!(o->emit_dir = flag_value(argc, argv, &i, "--emit-dir")))
        return sc_fail(err, SC_EUSAGE, "%s needs a directory", s);
    } else if (!strcmp(s, "--dump-ir")) {
      o->dump_ir = "";
    } else if (!strncmp(s, "--dump-ir=", 10)) {
      o->dump_ir = s + 10;
      if (strcmp(o->dump_ir, "frontend") && strcmp(o->dump_ir, "specialize") && strcmp(o->dump_ir, "fuse") &&
          strcmp(o->dump_ir, "plan"))
        return sc_fail(err, SC_EUSAGE, "--dump-ir expects frontend, specialize, fuse or plan, got '%s'", o->dump_ir);
    } else if (is_flag(s, "--max-batch")) {
      if (arg_int("--max-batch", flag_value(argc, argv, &i, "--max-batch"), 1, 1024, &v, err)) return SC_EUSAGE;
      o->max_batch = (int)v;
    } else if (!strcmp(s, "--no-fuse")) {
      o->fuse = 0;
    } else if (!strcmp(s, "--check-numerics")) {
      o->check_numerics = 1;
    } else if (!strcmp(s, "--no-codec")) {
      a->no_codec = 1;
    } else if (is_flag(s, "--codec-weights")) {
      val = flag_value(argc, argv, &i, "--codec-weights");
      if (!val || (strcmp(val, "f32") && strcmp(val, "bf16")))
        return sc_fail(err, SC_EUSAGE, "--codec-weights expects f32 or bf16, got '%s'", val ? val : "");
      a->codec_band = ir_dtype_of_wtype(sc_band_find(val));
    } else if (!strcmp(s, "-q") || !strcmp(s, "--quiet")) {
      o->quiet = 1;
    } else if (s[0] == '-') {
      return sc_fail(err, SC_EUSAGE, "unknown option '%s'", s);
    } else if (!o->model_dir) {
      o->model_dir = s;
    } else {
      return sc_fail(err, SC_EUSAGE, "unexpected argument '%s'", s);
    }
  }
  if (!o->model_dir) return sc_fail(err, SC_EUSAGE, "missing MODEL_DIR");
  if (!o->out_path) return sc_fail(err, SC_EUSAGE, "missing -o OUT.so");
  return SC_OK;
}

int build_set(const BuildArgs *a, sc_error *err) {
  const BuildOpts *o = &a->o;
  int rc = sc_build(o, err);
  if (!rc) rc = tok_install(o->model_dir, o->out_path, o->quiet, err);
  if (!rc) rc = build_spm(o, err);
  if (rc || a->no_codec) return rc;
  rc = build_codec(o, a->codec_band, err);
  if (!rc) rc = build_mimi(o, a->codec_band, err);
  return rc;
}

int sc_build_argv(int argc, const char *const *argv, sc_error *err) {
  if (argc < 0 || (argc && !argv)) return sc_fail(err, SC_EUSAGE, "sc_build_argv: no arguments");
  BuildArgs a;
  int rc = build_parse_args(argc, (char **)argv, &a, err);
  if (rc) return rc;
  if (a.help) return sc_fail(err, SC_EUSAGE, "sc_build_argv: --help is for the command line (speechc help build)");
  a.o.signals = 0; /* the host process owns its signals */
  return build_set(&a, err);
}
