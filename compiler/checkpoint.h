/*
 * checkpoint.h — a published checkpoint directory: config.json plus one
 * model.safetensors, or shards listed by model.safetensors.index.json.
 * Frontends query tensors by name with shape checks, and read config values
 * with type checks; every error names the file, the key or tensor, and what
 * was expected.
 */
#ifndef SC_CHECKPOINT_H
#define SC_CHECKPOINT_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "safetensors.h"

typedef struct Checkpoint {
  char *dir;
  char *real_dir;          /* realpath(dir): the files must resolve inside */
  char *config_path;       /* DIR/config.json, or "DIR (where)" for a config given (CkptAs) or implied */
  int config_given;        /* the config is not a file of DIR */
  char *config_text;       /* file contents */
  cJSON *config;           /* parsed */
  StFile *files;
  int n_files;
  const StTensor **by_name; /* all tensors, sorted by name */
  int n_tensors;
} Checkpoint;

/* dir may also be a path to a single .safetensors file whose directory
 * holds config.json. */
int ckpt_open(Checkpoint *c, const char *dir, sc_error *err);
void ckpt_close(Checkpoint *c);

/* A checkpoint inside another's directory (Moshi's Mimi): config_text is
 * its config (config_where names it in messages), weights_name the one
 * .safetensors file of DIR it reads.  NULL fields: as ckpt_open. */
typedef struct CkptAs {
  const char *config_text, *config_where, *weights_name;
} CkptAs;
int ckpt_open_as(Checkpoint *c, const char *dir, const CkptAs *as, sc_error *err);

/* The moshi package's _lm_kwargs (the 7B) and the names its loaders assume
 * for a repository without config.json (fe_moshi.c). */
extern const char fe_moshi_7b_config[];

/* An optional JSON file of the checkpoint's directory (name: a file name,
 * e.g. generation_config.json): *json NULL when there is none; else read
 * as config.json is (inside the directory or a hub cache's blobs, at most
 * SC_JSON_MAX bytes, Python's json rules).  *json is the caller's. */
int ckpt_read_json_opt(const Checkpoint *c, const char *name, cJSON **json, sc_error *err);

/* NULL when absent. */
const StTensor *ckpt_find(const Checkpoint *c, const char *name);
/* Required tensor with ndim dims; shape[i] < 0 means any.  Errors:
 * "DIR: tensor 'NAME' is missing" / "... has shape [a, b], expected [c, d]"
 * / "... has dtype I64, expected a float type (F32, F16, BF16)". */
const StTensor *ckpt_tensor(const Checkpoint *c, const char *name, int ndim,
                            const int64_t *shape, sc_error *err);

/* Config values.  obj is c->config or a nested object; `where` names it in
 * messages (e.g. "config.json" or "config.json: talker_config").  The _req
 * forms fail when the key is absent; all fail on a wrong JSON type. */
int cfg_int_req(const cJSON *obj, const char *where, const char *key,
                int64_t *out, sc_error *err);
/* A value already in hand (a list element, a map entry) as cfg_int_req
 * reads one: key names it in messages. */
int cfg_int_val(const cJSON *v, const char *where, const char *key, int64_t *out, sc_error *err);
int cfg_int_opt(const cJSON *obj, const char *where, const char *key,
                int64_t dflt, int64_t *out, sc_error *err);
int cfg_num_req(const cJSON *obj, const char *where, const char *key,
                double *out, sc_error *err);
int cfg_num_opt(const cJSON *obj, const char *where, const char *key,
                double dflt, double *out, sc_error *err);
int cfg_bool_opt(const cJSON *obj, const char *where, const char *key,
                 int dflt, int *out, sc_error *err);
/* *out points into obj; NULL dflt with an absent key is an error. */
int cfg_str_opt(const cJSON *obj, const char *where, const char *key,
                const char *dflt, const char **out, sc_error *err);

#endif
