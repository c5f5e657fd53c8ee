/*
 * checkpoint.c — open a published checkpoint directory and answer typed
 * queries about it.
 *
 * Layouts accepted, in order of preference:
 *   DIR/model.safetensors.index.json naming shards in "weight_map";
 *   DIR/model.safetensors;
 *   exactly one DIR/<anything>.safetensors (or the file the user named);
 *   a Moshi config's moshi_name, the file the moshi package loads.
 * Without config.json, a directory whose weights are Moshi's LM (its
 * text_emb and depformer_text_emb tensors) gets the package's 7B defaults
 * (fe_moshi_7b_config), as its loaders assume the 7B for such a repository.
 * Every tensor of every file is indexed by name; a name in two files is an
 * error, so a lookup has exactly one answer.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "file.h"
#include "json.h"

#define INDEX_NAME "model.safetensors.index.json"
#define HINT_DIR   "hint: pass the checkpoint directory that holds config.json " \
                   "and the *.safetensors files"

/* malloc'd "a/b"; NULL on OOM. */
static char *path_join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", a, b);
  return p;
}

/* Whether a directory entry of this name exists (a dangling link does):
 * the file is then opened, and a FIFO, a directory or a broken link is
 * refused by name rather than taken for absent. */
static int exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* Whether real (a resolved path) is .../models--ORG--NAME/blobs/SHA: a
 * file of a Hugging Face hub cache. */
static int is_hf_blob(const char *real) {
  const char *end = strrchr(real, '/'); /* before SHA */
  if (!end || end == real) return 0;
  const char *p = end;
  while (p > real && p[-1] != '/') p--;
  if ((size_t)(end - p) != 5 || strncmp(p, "blobs", 5)) return 0;
  const char *repo_end = p - 1;
  if (repo_end <= real) return 0;
  const char *q = repo_end;
  while (q > real && q[-1] != '/') q--;
  return repo_end - q > 8 && !strncmp(q, "models--", 8);
}

/* A file of the checkpoint must be a file of its directory: config.json,
 * the index and every shard resolve (realpath) inside the checkpoint
 * directory, or to a blob of a Hugging Face hub cache
 * (.../models--ORG--NAME/blobs/SHA), where the hub's snapshot directories
 * and older `--local-dir` downloads link their files.  A link to any other
 * file is refused, as a '..' in the index is: either would read a file
 * from elsewhere on this machine and pack it into the model.  The
 * directory itself may be a link. */
static int check_inside(const Checkpoint *c, const char *path, sc_error *err) {
  char *real = realpath(path, NULL);
  struct stat sb;
  if (!real || stat(real, &sb) || !S_ISREG(sb.st_mode)) {
    free(real);
    return SC_OK; /* missing, dangling, a FIFO, /dev/zero: opening it says so */
  }
  size_t n = strlen(c->real_dir);
  int ok = !strncmp(real, c->real_dir, n) && (real[n] == '/' || !strcmp(c->real_dir, "/"));
  if (!ok) ok = is_hf_blob(real);
  int rc = ok ? SC_OK : sc_fail(err, SC_EINPUT, "%s: resolves to %s, outside the checkpoint "
                                "directory %s (the files of a checkpoint must be in its "
                                "directory, or links into a Hugging Face cache's "
                                "models--*/blobs/; hint: copy the file in instead of linking "
                                "to it)", path, real, c->real_dir);
  free(real);
  return rc;
}

static int is_safetensors_name(const char *name) {
  static const char ext[] = ".safetensors";
  size_t n = strlen(name), e = sizeof ext - 1;
  return n > e && strcmp(name + n - e, ext) == 0;
}

static int oom(sc_error *err, const char *what) {
  return sc_fail(err, SC_ERUNTIME, "%s: out of memory", what);
}

/* Read a JSON file of the checkpoint (at most SC_JSON_MAX bytes):
 * json_read_file.  Ownership of *text and *json passes to the caller. */
static int read_json(const char *path, const char *missing_hint, char **text,
                     cJSON **json, sc_error *err) {
  return json_read_file(path, SC_JSON_MAX, missing_hint, text, json, err);
}

int ckpt_read_json_opt(const Checkpoint *c, const char *name, cJSON **json, sc_error *err) {
  *json = NULL;
  char *path = malloc(strlen(c->dir) + strlen(name) + 2);
  if (!path) return oom(err, name);
  sprintf(path, "%s/%s", c->dir, name);
  struct stat sb;
  if (lstat(path, &sb) && errno == ENOENT) { /* none: the defaults */
    free(path);
    return SC_OK;
  }
  char *text = NULL;
  int rc = check_inside(c, path, err);
  if (!rc) rc = read_json(path, NULL, &text, json, err);
  free(text);
  free(path);
  return rc;
}

static const char *json_type_name(const cJSON *j) {
  if (cJSON_IsObject(j)) return "object";
  if (cJSON_IsArray(j)) return "array";
  if (cJSON_IsString(j)) return "string";
  if (cJSON_IsNumber(j)) return "number";
  if (cJSON_IsBool(j)) return "boolean";
  if (cJSON_IsNull(j)) return "null";
  return "invalid value";
}

static int by_name_cmp(const void *a, const void *b) {
  const StTensor *x = *(const StTensor *const *)a;
  const StTensor *y = *(const StTensor *const *)b;
  return strcmp(x->name, y->name);
}

static int key_cmp(const void *key, const void *elem) {
  return strcmp((const char *)key, (*(const StTensor *const *)elem)->name);
}

const StTensor *ckpt_find(const Checkpoint *c, const char *name) {
  if (!c->by_name) return NULL;
  const StTensor *const *p = bsearch(name, c->by_name, (size_t)c->n_tensors,
                                     sizeof *c->by_name, key_cmp);
  return p ? *p : NULL;
}

/* Open the n files in paths[] into c->files (index i -> file i), then index
 * every tensor by name. */
static int open_files(Checkpoint *c, char **paths, int n, sc_error *err) {
  c->files = calloc((size_t)n + 1, sizeof *c->files);
  if (!c->files) return oom(err, c->dir);
  c->n_files = n;
  int total = 0;
  for (int i = 0; i < n; i++) {
    int rc = check_inside(c, paths[i], err);
    if (!rc) rc = st_open(&c->files[i], paths[i], err);
    if (rc) return rc;
    for (int k = 0; k < c->files[i].n_tensors; k++) c->files[i].tensors[k].file = i;
    total += c->files[i].n_tensors;
  }
  c->by_name = malloc(((size_t)total + 1) * sizeof *c->by_name);
  if (!c->by_name) return oom(err, c->dir);
  for (int i = 0; i < n; i++)
    for (int k = 0; k < c->files[i].n_tensors; k++)
      c->by_name[c->n_tensors++] = &c->files[i].tensors[k];
  qsort(c->by_name, (size_t)c->n_tensors, sizeof *c->by_name, by_name_cmp);
  for (int i = 1; i < c->n_tensors; i++) {
    const StTensor *a = c->by_name[i - 1], *b = c->by_name[i];
    if (strcmp(a->name, b->name) == 0)
      return sc_fail(err, SC_EINPUT, "%s: tensor '%s' appears in both %s and %s",
                     c->dir, a->name, c->files[a->file].path,
                     c->files[b->file].path);
  }
  return SC_OK;
}

/* A shard is a file of the checkpoint directory (or below it): an absolute
 * name or a ".." component would have the index read files from elsewhere
 * (and pack them into the model). */
static int shard_name_ok(const char *s) {
  if (!s[0] || s[0] == '/') return 0;
  for (const char *p = s; *p;) {
    size_t n = strcspn(p, "/");
    if (n == 2 && p[0] == '.' && p[1] == '.') return 0;
    p += n;
    while (*p == '/') p++;
  }
  return 1;
}

/* Sharded layout: open each distinct shard of "weight_map" once, then check
 * that every listed tensor is in the shard the index names. */
static int open_index(Checkpoint *c, const char *index_path, sc_error *err) {
  char *text;
  cJSON *idx;
  int rc = read_json(index_path, NULL, &text, &idx, err);
  if (rc) return rc;
  const cJSON *wm = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
  int n_entries = cJSON_GetArraySize(wm);
  char **paths = calloc((size_t)n_entries + 1, sizeof *paths);
  const char **shards = calloc((size_t)n_entries + 1, sizeof *shards);
  int n = 0;
  if (!paths || !shards) {
    rc = oom(err, index_path);
    goto done;
  }
  if (!cJSON_IsObject(wm)) {
    rc = sc_fail(err, SC_EINPUT, "%s: \"weight_map\" is %s, expected an object "
                 "mapping tensor names to shard files", index_path,
                 wm ? json_type_name(wm) : "missing");
    goto done;
  }
  if (!wm->child) {
    rc = sc_fail(err, SC_EINPUT, "%s: \"weight_map\" is empty", index_path);
    goto done;
  }
  for (const cJSON *e = wm->child; e; e = e->next) {
    if (!cJSON_IsString(e)) {
      rc = sc_fail(err, SC_EINPUT, "%s: weight_map entry for tensor '%s' is %s, "
                   "expected a shard file name", index_path, e->string,
                   json_type_name(e));
      goto done;
    }
    int k = 0;
    while (k < n && strcmp(shards[k], e->valuestring) != 0) k++;
    if (k < n) continue;
    if (!shard_name_ok(e->valuestring)) {
      rc = sc_fail(err, SC_EINPUT, "%s: shard '%s' named for tensor '%s' is not a file name inside "
                   "the checkpoint directory (absolute, empty or with a '..' component)",
                   index_path, e->valuestring, e->string);
      goto done;
    }
    shards[n] = e->valuestring;
    const char *shard_path = paths[n] = path_join(c->dir, e->valuestring);
    if (!shard_path) {
      rc = oom(err, index_path);
      goto done;
    }
    n++;
    if (!exists(shard_path)) {
      rc = sc_fail(err, SC_EINPUT, "%s: shard '%s' named for tensor '%s' is "
                   "missing (expected at %s)", index_path, e->valuestring,
                   e->string, shard_path);
      goto done;
    }
  }
  rc = open_files(c, paths, n, err);
  for (const cJSON *e = wm->child; e && rc == SC_OK; e = e->next) {
    const StTensor *t = ckpt_find(c, e->string);
    const char *in = t ? c->files[t->file].path : NULL;
    int k = 0;
    while (strcmp(shards[k], e->valuestring) != 0) k++;
    if (!t || t->file != k)
      rc = sc_fail(err, SC_EINPUT, "%s: tensor '%s' is listed in shard '%s', "
                   "but %s%s", index_path, e->string, e->valuestring,
                   t ? "it is in " : "no file of the checkpoint holds it",
                   t ? in : "");
  }
done:
  for (int i = 0; i < n; i++) free(paths[i]);
  free(paths);
  free(shards);
  cJSON_Delete(idx);
  free(text);
  return rc;
}

/* Unsharded layout: model.safetensors, else the only *.safetensors. */
static int open_single(Checkpoint *c, sc_error *err) {
  char *path = path_join(c->dir, "model.safetensors");
  if (!path) return oom(err, c->dir);
  if (exists(path)) {
    int rc = open_files(c, &path, 1, err);
    free(path);
    return rc;
  }
  free(path);
  path = NULL;

  DIR *d = opendir(c->dir);
  if (!d)
    return sc_fail(err, SC_EINPUT, "%s: cannot list the directory: %s", c->dir,
                   strerror(errno));
  int found = 0;
  const struct dirent *de;
  char first[2][256] = {{0}};
  while ((de = readdir(d))) {
    if (!is_safetensors_name(de->d_name)) continue;
    char *p = path_join(c->dir, de->d_name);
    if (!p) {
      closedir(d);
      free(path);
      return oom(err, c->dir);
    }
    if (!exists(p)) {
      free(p);
      continue;
    }
    if (found < 2) snprintf(first[found], sizeof first[found], "%s", de->d_name);
    if (found++ == 0) path = p;
    else free(p);
  }
  closedir(d);
  if (found == 0)
    return sc_fail(err, SC_EINPUT, "%s: no model.safetensors (" HINT_DIR ")",
                   c->dir);
  if (found > 1) {
    free(path);
    return sc_fail(err, SC_EINPUT, "%s: %d *.safetensors files (%s, %s%s) but "
                   "no %s (hint: a sharded checkpoint needs its index file; "
                   "pass a single .safetensors file to use just that one)",
                   c->dir, found, first[0], first[1], found > 2 ? ", ..." : "",
                   INDEX_NAME);
  }
  int rc = open_files(c, &path, 1, err);
  free(path);
  return rc;
}

static int open_named(Checkpoint *c, const char *file, sc_error *err) {
  char *p = strdup(file);
  int rc = p ? open_files(c, &p, 1, err) : oom(err, c->dir);
  free(p);
  return rc;
}

/* dir: a directory, or a .safetensors file whose directory holds
 * config.json.  A named file is used as is unless the directory is
 * sharded (has an index), in which case the index wins: a shard alone is
 * never a whole model. */
static int ckpt_open_impl(Checkpoint *c, const char *dir, const CkptAs *as, sc_error *err) {
  struct stat sb;
  if (stat(dir, &sb) != 0)
    return sc_fail(err, SC_EINPUT, "%s: %s (" HINT_DIR ")", dir, strerror(errno));
  const char *named_file = NULL;
  if (S_ISREG(sb.st_mode)) {
    if (!is_safetensors_name(dir))
      return sc_fail(err, SC_EINPUT, "%s: not a .safetensors file (" HINT_DIR
                     ")", dir);
    named_file = dir;
    const char *slash = strrchr(dir, '/');
    c->dir = slash ? strndup(dir, slash == dir ? 1 : (size_t)(slash - dir))
                   : strdup(".");
  } else if (S_ISDIR(sb.st_mode)) {
    c->dir = strdup(dir);
  } else {
    return sc_fail(err, SC_EINPUT, "%s: neither a directory nor a file (" HINT_DIR
                   ")", dir);
  }
  if (!c->dir) return oom(err, dir);
  size_t len = strlen(c->dir);
  while (len > 1 && c->dir[len - 1] == '/') c->dir[--len] = '\0';

  c->real_dir = realpath(c->dir, NULL);
  if (!c->real_dir)
    return sc_fail(err, SC_EINPUT, "%s: cannot resolve the directory: %s", c->dir,
                   strerror(errno));
  int rc;
  const char *text = as ? as->config_text : NULL, *where = as ? as->config_where : NULL;
  const char *weights = as ? as->weights_name : NULL;
  c->config_path = path_join(c->dir, "config.json");
  if (!c->config_path) return oom(err, dir);
  if (!text && !exists(c->config_path)) {
    /* no config.json: Moshi's LM gets the 7B defaults, anything else the
     * usual message */
    rc = named_file ? open_named(c, named_file, err) : open_single(c, err);
    if (!rc && ckpt_find(c, "text_emb.weight") && ckpt_find(c, "depformer_text_emb.weight")) {
      text = fe_moshi_7b_config;
      where = "no config.json: the moshi package's 7B defaults";
    } else {
      return read_json(c->config_path, HINT_DIR, &c->config_text, &c->config, err);
    }
  }
  if (text) {
    free(c->config_path);
    c->config_path = malloc(strlen(c->dir) + strlen(where) + 4);
    if (!c->config_path) return oom(err, dir);
    sprintf(c->config_path, "%s (%s)", c->dir, where);
    c->config_given = 1;
    c->config_text = strdup(text);
    if (!c->config_text) return oom(err, dir);
    c->config = cJSON_Parse(c->config_text);
    if (!c->config) return sc_fail(err, SC_EINPUT, "%s: not valid JSON", c->config_path);
  } else {
    rc = check_inside(c, c->config_path, err);
    if (rc) return rc;
    rc = read_json(c->config_path, HINT_DIR, &c->config_text, &c->config, err);
    if (rc) return rc;
  }
  if (!cJSON_IsObject(c->config))
    return sc_fail(err, SC_EINPUT, "%s: top level is a JSON %s, expected an "
                   "object", c->config_path, json_type_name(c->config));
  if (c->files) return SC_OK; /* opened above */

  /* a Moshi config names its LM's file: the package loads that one */
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(c->config, "model_type");
  const cJSON *mn = cJSON_GetObjectItemCaseSensitive(c->config, "moshi_name");
  if (!weights && !named_file && cJSON_IsString(mn) && (!mt || (cJSON_IsString(mt) && !strcmp(mt->valuestring, "moshi"))))
    weights = mn->valuestring;
  if (weights) {
    if (strchr(weights, '/') || !is_safetensors_name(weights))
      return sc_fail(err, SC_EINPUT, "%s: '%s' must be the name of a .safetensors file in %s (hint: a file of another "
                     "repository: download it into the directory and name it there)", c->config_path, weights, c->dir);
    char *p = path_join(c->dir, weights);
    if (!p) return oom(err, dir);
    rc = exists(p) ? open_files(c, &p, 1, err)
                   : sc_fail(err, SC_EINPUT, "%s: missing (%s names it)", p, c->config_path);
    free(p);
    return rc;
  }
  char *index_path = path_join(c->dir, INDEX_NAME);
  if (!index_path) return oom(err, dir);
  if (exists(index_path)) {
    rc = check_inside(c, index_path, err);
    if (!rc) rc = open_index(c, index_path, err);
  } else if (named_file) {
    rc = open_named(c, named_file, err);
  } else {
    rc = open_single(c, err);
  }
  free(index_path);
  return rc;
}

int ckpt_open(Checkpoint *c, const char *dir, sc_error *err) { return ckpt_open_as(c, dir, NULL, err); }

int ckpt_open_as(Checkpoint *c, const char *dir, const CkptAs *as, sc_error *err) {
  memset(c, 0, sizeof *c);
  int rc = ckpt_open_impl(c, dir, as, err);
  if (rc) ckpt_close(c);
  return rc;
}

void ckpt_close(Checkpoint *c) {
  for (int i = 0; c->files && i < c->n_files; i++) st_close(&c->files[i]);
  free(c->files);
  free(c->by_name);
  cJSON_Delete(c->config);
  free(c->config_text);
  free(c->config_path);
  free(c->dir);
  free(c->real_dir);
  memset(c, 0, sizeof *c);
}

/* "[a, b]" with '?' for negative (wildcard) dims. */
static const char *dims_str(char *buf, size_t cap, int ndim,
                            const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && n < cap; i++) {
    if (shape[i] < 0) n += (size_t)snprintf(buf + n, cap - n, "%s?", i ? ", " : "");
    else n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "",
                               (long long)shape[i]);
  }
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

const StTensor *ckpt_tensor(const Checkpoint *c, const char *name, int ndim,
                            const int64_t *shape, sc_error *err) {
  const StTensor *t = ckpt_find(c, name);
  if (!t) {
    sc_fail(err, SC_EINPUT, "%s: tensor '%s' is missing", c->dir, name);
    return NULL;
  }
  const char *path = c->files[t->file].path;
  int ok = t->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++)
    ok = shape[i] < 0 || shape[i] == t->shape[i];
  if (!ok) {
    char have[256], want[256];
    sc_fail(err, SC_EINPUT, "%s: tensor '%s' has shape %s, expected %s", path,
            name, dims_str(have, sizeof have, t->ndim, t->shape),
            dims_str(want, sizeof want, ndim, shape));
    return NULL;
  }
  if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16) {
    sc_fail(err, SC_EINPUT, "%s: tensor '%s' has dtype %s, expected a float "
            "type (F32, F16, BF16)", path, name, st_dtype_name(t->dtype));
    return NULL;
  }
  return t;
}

/* --- config values --------------------------------------------------------
 * A JSON null counts as absent: Hugging Face configs write "key": null for
 * "not set" (sliding_window, rope_scaling), and the default is what that
 * means.  For the _req forms, null is then "missing". */

/* The value of key, or NULL when obj lacks it or holds null there. */
static const cJSON *cfg_get(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsNull(v) ? NULL : v;
}

static int missing(const char *where, const char *key, sc_error *err) {
  return sc_fail(err, SC_EINPUT, "%s: key '%s' is missing", where, key);
}

static int wrong_type(const char *where, const char *key, const char *want,
                      const cJSON *v, sc_error *err) {
  if (cJSON_IsNumber(v)) {
    /* the shortest form that reads back as the same double: 491.7, not
     * 491.69999999999999 */
    char num[32];
    for (int prec = 15; prec <= 17; prec++) {
      snprintf(num, sizeof num, "%.*g", prec, v->valuedouble);
      if (strtod(num, NULL) == v->valuedouble) break;
    }
    return sc_fail(err, SC_EINPUT, "%s: key '%s' must be %s, found %s", where, key, want, num);
  }
  if (cJSON_IsString(v))
    return sc_fail(err, SC_EINPUT, "%s: key '%s' must be %s, found string \"%.40s\"", where, key, want,
                   v->valuestring);
  return sc_fail(err, SC_EINPUT, "%s: key '%s' must be %s, found %s", where,
                 key, want, json_type_name(v));
}

/* Whole numbers within +-2^53, where a double is exact. */
static int get_int(const cJSON *v, const char *where, const char *key,
                   int64_t *out, sc_error *err) {
  const double lim = 9007199254740992.0;
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= -lim && v->valuedouble <= lim) ||
      (double)(int64_t)v->valuedouble != v->valuedouble)
    return wrong_type(where, key, "an integer", v, err);
  *out = (int64_t)v->valuedouble;
  return SC_OK;
}

static int get_num(const cJSON *v, const char *where, const char *key,
                   double *out, sc_error *err) {
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
    return wrong_type(where, key, "a finite number", v, err);
  *out = v->valuedouble;
  return SC_OK;
}

int cfg_int_req(const cJSON *obj, const char *where, const char *key,
                int64_t *out, sc_error *err) {
  const cJSON *v = cfg_get(obj, key);
  return v ? get_int(v, where, key, out, err) : missing(where, key, err);
}

int cfg_int_val(const cJSON *v, const char *where, const char *key, int64_t *out, sc_error *err) {
  return get_int(v, where, key, out, err);
}

int cfg_int_opt(const cJSON *obj, const char *where, const char *key,
                int64_t dflt, int64_t *out, sc_error *err) {
  const cJSON *v = cfg_get(obj, key);
  if (!v) {
    *out = dflt;
    return SC_OK;
  }
  return get_int(v, where, key, out, err);
}

int cfg_num_req(const cJSON *obj, const char *where, const char *key,
                double *out, sc_error *err) {
  const cJSON *v = cfg_get(obj, key);
  return v ? get_num(v, where, key, out, err) : missing(where, key, err);
}

int cfg_num_opt(const cJSON *obj, const char *where, const char *key,
                double dflt, double *out, sc_error *err) {
  const cJSON *v = cfg_get(obj, key);
  if (!v) {
    *out = dflt;
    return SC_OK;
  }
  return get_num(v, where, key, out, err);
}

int cfg_bool_opt(const cJSON *obj, const char *where, const char *key,
                 int dflt, int *out, sc_error *err) {
  const cJSON *v = cfg_get(obj, key);
  if (!v) {
    *out = dflt;
    return SC_OK;
  }
  if (!cJSON_IsBool(v)) return wrong_type(where, key, "true or false", v, err);
  *out = cJSON_IsTrue(v);
  return SC_OK;
}

int cfg_str_opt(const cJSON *obj, const char *where, const char *key,
                const char *dflt, const char **out, sc_error *err) {
  const cJSON *v = cfg_get(obj, key);
  if (!v) {
    if (!dflt) return missing(where, key, err);
    *out = dflt;
    return SC_OK;
  }
  if (!cJSON_IsString(v)) return wrong_type(where, key, "a string", v, err);
  *out = v->valuestring;
  return SC_OK;
}
