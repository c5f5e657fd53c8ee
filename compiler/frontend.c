/* frontend.c — family table and helpers shared by the frontends. */
#include "frontend.h"

#include <stdio.h>
#include <string.h>

FrontendFn fe_lookup(const char *model_type, const char **family) {
  static const struct { const char *type, *family; FrontendFn fn; } table[] = {
      {"qwen3", "llm", fe_llm},
      {"llama", "llm", fe_llm},
      {"qwen3_tts", "qwen3_tts", fe_tts},
      {"qwen3_tts_tokenizer_12hz", "codec", fe_codec},
      {"qwen3_5", "llm", fe_qwen35},
      {"qwen3_5_text", "llm", fe_qwen35},
      {"qwen3_5_moe", "llm", fe_qwen35},
      {"qwen3_5_moe_text", "llm", fe_qwen35},
      {"qwen3_next", "llm", fe_qwen35},
      {"moshi", "moshi", fe_moshi},
      {"mimi", "codec", fe_mimi},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (!strcmp(model_type, table[i].type)) {
      if (family) *family = table[i].family;
      return table[i].fn;
    }
  return NULL;
}

int fe_chunk(const BuildOpts *o, int dflt, int max_ctx) {
  const int n = o->prefill_chunk > 0 ? o->prefill_chunk : dflt;
  return n < max_ctx ? n : max_ctx;
}

int fe_head_untied(const Checkpoint *c, const char *embed_tensor) {
  const StTensor *h = ckpt_find(c, "lm_head.weight"), *e = ckpt_find(c, embed_tensor);
  if (!h || !e) return 0;
  return h->dtype != e->dtype || h->nbytes != e->nbytes || memcmp(h->data, e->data, (size_t)h->nbytes) != 0;
}

int fe_weight(Module *m, const Checkpoint *c, const char *name, const char *tensor,
              int64_t rows, int64_t cols, DType band, sc_error *err) {
  int64_t shape[2] = {rows, cols};
  const StTensor *t = rows ? ckpt_tensor(c, tensor, 2, shape, err)
                           : ckpt_tensor(c, tensor, 1, &shape[1], err);
  if (!t) return -1;
  int w = ir_weight_add(m, name, band, 1, rows ? rows : 1, cols);
  IrWeight *wt = &m->weights[w];
  wt->src[0].tensor = t;
  wt->src[0].rows = rows ? rows : 1;
  wt->n_src = 1;
  snprintf(wt->source, sizeof wt->source, "%s", tensor);
  return w;
}

int fe_weight_rows(Module *m, const Checkpoint *c, const char *name, const char *tensor, int64_t tensor_rows,
                   int64_t cols, int64_t row0, int64_t run, int64_t stride, int64_t rows, DType band,
                   sc_error *err) {
  int64_t shape[2] = {tensor_rows, cols};
  const StTensor *t = ckpt_tensor(c, tensor, 2, shape, err);
  if (!t) return -1;
  IR_ASSERT(run >= 1 && stride >= run && rows % run == 0 && row0 + (rows / run - 1) * stride + run <= tensor_rows);
  int w = ir_weight_add(m, name, band, 1, rows, cols);
  IrWeight *wt = &m->weights[w];
  wt->src[0] = (IrWeightSrc){.tensor = t, .rows = rows, .row0 = row0, .run = run, .stride = stride};
  wt->n_src = 1;
  snprintf(wt->source, sizeof wt->source, "%.120s rows %lld+%lld of every %lld", tensor, (long long)row0,
           (long long)run, (long long)stride);
  return w;
}

int fe_weight_sets(Module *m, const Checkpoint *c, const char *name, const char *fmt,
                   int sets, int64_t rows, int64_t cols, DType band, sc_error *err) {
  int64_t shape[2] = {rows, cols};
  if (sets < 1 || sets > 16)
    return sc_fail(err, SC_EINPUT, "%s: %d weight sets (supported: 1..16)", c->config_path, sets), -1;
  int w = ir_weight_add(m, name, band, sets, rows, cols);
  for (int i = 0; i < sets; i++) {
    char tensor[200];
    snprintf(tensor, sizeof tensor, fmt, i);
    const StTensor *t = ckpt_tensor(c, tensor, 2, shape, err);
    if (!t) return -1;
    IrWeight *wt = &m->weights[w];
    wt->src[i].tensor = t;
    wt->src[i].rows = rows;
    wt->n_src = i + 1;
    if (i == 0) snprintf(wt->source, sizeof wt->source, "%.150s", tensor);
    if (i == sets - 1 && sets > 1) {
      size_t len = strlen(wt->source);
      snprintf(wt->source + len, sizeof wt->source - len, " .. %s", tensor);
    }
  }
  return w;
}

int fe_rope_table(Module *m, int max_ctx, int rot_dims, double theta) {
  char name[IR_NAME];
  snprintf(name, sizeof name, "rope.r%d.t%g", rot_dims, theta);
  int w = ir_weight_find(m, name);
  if (w >= 0) {
    /* shared: as long as its longest user (no graph reads it yet).  The
     * TTS predictor's G + 1 rows can exceed a short talker context. */
    if (m->weights[w].rows < max_ctx) m->weights[w].rows = max_ctx;
    return w;
  }
  w = ir_weight_add(m, name, DT_F32, 1, max_ctx, rot_dims);
  IrWeight *wt = &m->weights[w];
  wt->gen = WGEN_ROPE;
  wt->gen_theta = theta;
  wt->gen_rot = rot_dims;
  snprintf(wt->source, sizeof wt->source, "computed: cos|sin, theta %g", theta);
  return w;
}
