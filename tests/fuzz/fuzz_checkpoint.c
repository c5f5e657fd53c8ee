/*
 * fuzz_checkpoint.c — the checkpoint loader (compiler/checkpoint.c), the
 * config readers and the frontends on arbitrary config.json and
 * model.safetensors.index.json.
 *
 * Input: config.json, optionally followed by FUZZ_SEP and the index file
 * (anything after a second FUZZ_SEP is ignored).  Both are written into one
 * scratch directory that also holds real, valid shards from tests/data:
 *   model.safetensors                  llm/qwen3_gqa2_hd32_tied (used when
 *                                      there is no index)
 *   model-0000{1,2}-of-00002.safetensors  llm/llama_gqa4_sharded's two shards
 *   bf16.safetensors                   llm/qwen3_gqa4_hd16_bf16
 *   tts06.safetensors, tts17.safetensors  tts/tts_tiny_{06b,17b}_layout
 * so an index may name any of them, and a config may describe any of the
 * five models (or anything else).  Then, as `speechc build` does:
 * ckpt_open; no object of the parsed config holds a key twice (the last
 * of a repeated key wins, as in Python's json: issue 12); every config key
 * through every typed reader (cfg_*); every
 * indexed tensor through ckpt_tensor; the frontend of the config's
 * model_type, ir_verify, the passes up to planning and the per-session
 * memory check; for Qwen3-TTS, that every id the runtime driver reads from
 * an accepted config is a whole number inside its table.  Packing and code
 * generation are left out (they read no input the loader has not checked).
 */
#include "fuzz_util.h"
#include "build.h"
#include "passes.h"

#define FUZZ_SEP "\n=====\n"

static char dir[512];

static void cleanup(void) { fuzz_rm_tree(dir); }

static void put(const char *src_rel, const char *name) {
  char from[1024], to[1024];
  snprintf(from, sizeof from, "%s/tests/data/%s", SPEECHC_SOURCE_DIR, src_rel);
  snprintf(to, sizeof to, "%s/%s", dir, name);
  if (fuzz_copy(from, to)) {
    fprintf(stderr, "fuzz_checkpoint: cannot copy %s to %s\n", from, to);
    abort();
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_tmpdir(dir, sizeof dir, "ckpt");
  atexit(cleanup);
  put("llm/qwen3_gqa2_hd32_tied/model.safetensors", "model.safetensors");
  put("llm/llama_gqa4_sharded/model-00001-of-00002.safetensors", "model-00001-of-00002.safetensors");
  put("llm/llama_gqa4_sharded/model-00002-of-00002.safetensors", "model-00002-of-00002.safetensors");
  put("llm/qwen3_gqa4_hd16_bf16/model.safetensors", "bf16.safetensors");
  put("tts/tts_tiny_06b_layout/model.safetensors", "tts06.safetensors");
  put("tts/tts_tiny_17b_layout/model.safetensors", "tts17.safetensors");
  return 0;
}

/* An error must be an input error (or out of memory) whose message names
 * where it comes from. */
static void check_err(int rc, const sc_error *err, const char *who) {
  FUZZ_CHECK(rc == err->code, "%s: rc %d, err.code %d", who, rc, err->code);
  FUZZ_CHECK(rc == SC_EINPUT || rc == SC_ERUNTIME, "%s: rc %d: %s", who, rc, err->msg);
  FUZZ_CHECK(err->msg[0], "%s: no message", who);
}

/* Every key of obj (and of nested objects, one level) through every reader. */
static void read_all(const cJSON *obj, const char *where, int depth) {
  for (const cJSON *e = obj->child; e; e = e->next) {
    sc_error err = {0};
    int64_t i;
    double d;
    int b, rc;
    const char *s;
    if ((rc = cfg_int_opt(obj, where, e->string, 0, &i, &err))) check_err(rc, &err, "cfg_int_opt");
    if ((rc = cfg_int_req(obj, where, e->string, &i, &err))) check_err(rc, &err, "cfg_int_req");
    if ((rc = cfg_num_opt(obj, where, e->string, 0, &d, &err))) check_err(rc, &err, "cfg_num_opt");
    if ((rc = cfg_num_req(obj, where, e->string, &d, &err))) check_err(rc, &err, "cfg_num_req");
    else FUZZ_CHECK(d == d && d - d == 0, "cfg_num_req gave a non-finite number for '%s'", e->string);
    if ((rc = cfg_bool_opt(obj, where, e->string, 0, &b, &err))) check_err(rc, &err, "cfg_bool_opt");
    if ((rc = cfg_str_opt(obj, where, e->string, NULL, &s, &err))) check_err(rc, &err, "cfg_str_opt");
    if (depth == 0 && cJSON_IsObject(e)) read_all(e, "nested", depth + 1);
  }
}

/* A Qwen3-TTS config the frontend accepts hands the runtime driver (which
 * reads ids with cJSON's valueint) only whole ids inside their tables. */
static void id_ok(const cJSON *v, double n, const char *key) {
  if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1) v = v->child;
  FUZZ_CHECK(cJSON_IsNumber(v), "accepted a non-number id for '%s'", key);
  double d = v->valuedouble;
  FUZZ_CHECK(d >= 0 && d < n && d == (double)(int)d, "accepted id %g for '%s' (table of %g)", d, key, n);
}

static void tts_ids_in_range(const cJSON *cfg) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "talker_config");
  const double V = cJSON_GetObjectItemCaseSensitive(t, "vocab_size")->valuedouble;
  const double TV = cJSON_GetObjectItemCaseSensitive(t, "text_vocab_size")->valuedouble;
  static const char *const text[] = {"tts_pad_token_id", "tts_bos_token_id", "tts_eos_token_id"};
  static const char *const codec[] = {"codec_pad_id", "codec_bos_id", "codec_eos_token_id", "codec_think_id",
                                      "codec_nothink_id", "codec_think_bos_id", "codec_think_eos_id"};
  for (size_t i = 0; i < sizeof text / sizeof *text; i++)
    id_ok(cJSON_GetObjectItemCaseSensitive(cfg, text[i]), TV, text[i]);
  for (size_t i = 0; i < sizeof codec / sizeof *codec; i++)
    id_ok(cJSON_GetObjectItemCaseSensitive(t, codec[i]), V, codec[i]);
  static const char *const maps[] = {"codec_language_id", "spk_id"};
  for (int k = 0; k < 2; k++) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(t, maps[k]);
    FUZZ_CHECK(!m || cJSON_IsNull(m) || cJSON_IsObject(m), "accepted a non-object '%s'", maps[k]);
    for (const cJSON *e = m ? m->child : NULL; e && cJSON_IsObject(m); e = e->next) id_ok(e, V, maps[k]);
  }
}

/* No object in j (recursively) has two members of the same key. */
static void check_unique_keys(const cJSON *j) {
  if (cJSON_IsObject(j))
    for (const cJSON *a = j->child; a; a = a->next)
      for (const cJSON *b = a->next; b; b = b->next)
        FUZZ_CHECK(strcmp(a->string, b->string) != 0, "key '%s' twice after ckpt_open", a->string);
  if (cJSON_IsObject(j) || cJSON_IsArray(j))
    for (const cJSON *c = j->child; c; c = c->next) check_unique_keys(c);
}

static void run_frontend(const Checkpoint *c) {
  sc_error err = {0};
  const char *model_type = NULL, *family = NULL;
  if (cfg_str_opt(c->config, "config.json", "model_type", NULL, &model_type, &err)) return;
  FrontendFn fe = fe_lookup(model_type, &family);
  if (!fe) return;
  BuildOpts o = build_defaults();
  o.model_dir = dir;
  o.quiet = 1;
  Module m;
  ir_module_init(&m);
  snprintf(m.family, sizeof m.family, "%s", family);
  snprintf(m.model_type, sizeof m.model_type, "%s", model_type);
  int rc = fe(&m, c, &o, &err);
  if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz_checkpoint: frontend %s: rc %d %s\n", model_type, rc, rc ? err.msg : "");
  if (rc) {
    check_err(rc, &err, "frontend");
  } else {
    /* a config the frontend accepts must give valid graphs: a bad value
     * caught only by the verifier is an "internal error" to the user */
    for (int gi = 0; gi < m.n_graphs; gi++)
      FUZZ_CHECK(ir_verify(&m, &m.graphs[gi], &err) == SC_OK, "the frontend accepted it: %s", err.msg);
    pass_specialize(&m);
    pass_fuse(&m);
    pass_mark_used(&m);
    pass_plan(&m, target_find(o.target, &err));
    for (int gi = 0; gi < m.n_graphs; gi++)
      FUZZ_CHECK(ir_verify(&m, &m.graphs[gi], &err) == SC_OK, "after the passes: %s", err.msg);
    if ((rc = pass_plan_check_session(&m, o.max_session_mb, &err))) check_err(rc, &err, "session memory");
    if (!strcmp(family, "qwen3_tts")) tts_ids_in_range(c->config);
  }
  ir_module_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) LLVMFuzzerInitialize(NULL, NULL);
  const char *text = (const char *)data, *end = text + size;
  const char *sep = memmem(text, size, FUZZ_SEP, sizeof FUZZ_SEP - 1);
  const char *idx = sep ? sep + sizeof FUZZ_SEP - 1 : NULL;
  const char *idx_end = idx ? memmem(idx, (size_t)(end - idx), FUZZ_SEP, sizeof FUZZ_SEP - 1) : NULL;
  if (idx && !idx_end) idx_end = end;

  char config_path[1024], index_path[1024];
  snprintf(config_path, sizeof config_path, "%s/config.json", dir);
  snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
  if (fuzz_write(config_path, text, sep ? (size_t)(sep - text) : size)) abort();
  unlink(index_path);
  if (idx && fuzz_write(index_path, idx, (size_t)(idx_end - idx))) abort();

  Checkpoint c;
  sc_error err = {0};
  int rc = ckpt_open(&c, dir, &err);
  if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz_checkpoint: ckpt_open: rc %d %s\n", rc, rc ? err.msg : "");
  if (rc) {
    check_err(rc, &err, "ckpt_open");
    FUZZ_CHECK(strstr(err.msg, dir) != NULL, "message lacks the directory: %s", err.msg);
    FUZZ_CHECK(c.files == NULL && c.config == NULL, "a refused checkpoint left state behind");
    return 0;
  }
  check_unique_keys(c.config);
  read_all(c.config, "config.json", 0);
  for (int i = 0; i < c.n_tensors; i++) {
    const StTensor *t = c.by_name[i];
    FUZZ_CHECK(ckpt_find(&c, t->name) == t, "'%s' not found by name", t->name);
    int64_t any[ST_MAX_DIMS];
    for (int d = 0; d < ST_MAX_DIMS; d++) any[d] = -1;
    sc_error e2 = {0};
    if (!ckpt_tensor(&c, t->name, t->ndim, any, &e2))
      FUZZ_CHECK(strstr(e2.msg, "dtype") != NULL, "'%s': %s", t->name, e2.msg);
  }
  run_frontend(&c);
  ckpt_close(&c);
  return 0;
}
