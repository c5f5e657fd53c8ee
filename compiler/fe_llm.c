/*
 * fe_llm.c — the dense decoder LM: Qwen3 (`qwen3`) and Llama (`llama`,
 * the same block without QK-norm), from HF modeling_qwen3.py /
 * modeling_llama.py:
 *   x = embed(ids);  x = qwen3_block(x) for each layer (fe_qwen3.c)
 *   logits = rmsnorm(x_last)·Wlm   (Wlm = embed_tokens when tied)
 * Entry points: "prefill" (up to prefill_chunk tokens) and "decode" (one).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "sc_abi.h"

/* Beyond the block's dimensions: what only the plain LM has. */
static int read_config(const Checkpoint *c, int qwen3, Qwen3Dims *d, int64_t *vocab,
                       int64_t *max_pos, int *tied, sc_error *err) {
  const cJSON *j = c->config;
  if (fe_qwen3_dims(j, c->config_path, qwen3 ? &FE_QWEN3 : &FE_LLAMA, d, err) ||
      cfg_int_req(j, c->config_path, "vocab_size", vocab, err) ||
      cfg_int_opt(j, c->config_path, "max_position_embeddings", 4096, max_pos, err) ||
      cfg_bool_opt(j, c->config_path, "tie_word_embeddings", 0, tied, err))
    return err->code;
  if (*vocab < 1) return sc_fail(err, SC_EINPUT, "%s: vocab_size must be positive", c->config_path);
  if (*max_pos < 1)
    return sc_fail(err, SC_EINPUT, "%s: max_position_embeddings must be positive, found %lld",
                   c->config_path, (long long)*max_pos);
  d->qk_norm = qwen3;
  return SC_OK;
}

/* all_rows: every row's logits (decode_batch), else the last row's. */
static void build_graph(Module *m, Graph *g, const Qwen3Dims *d, const Qwen3Layer *lw,
                        int embed, int final_norm, int head, int rope, int all_rows) {
  int ids = ir_input_ids(g);
  int x = ir_embed(g, ir_weight(m, g, embed), ids, "embed");
  int rope_w = ir_weight(m, g, rope);
  for (int L = 0; L < d->layers; L++) x = fe_qwen3_layer(m, g, x, d, &lw[L], rope_w, "", L);
  int last = all_rows ? x : ir_row(g, x, -1, "last");
  int f = ir_rmsnorm(g, last, ir_weight(m, g, final_norm), (int)d->hidden, NORM_PLAIN,
                     (float)d->eps, "final_norm");
  int logits = ir_linear(g, f, ir_weight(m, g, head), -1, "lm_head");
  ir_output(g, logits, OUT_LOGITS);
}

int fe_llm(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  Qwen3Dims d;
  int64_t vocab, max_pos;
  int tied;
  if (read_config(c, !strcmp(m->model_type, "qwen3"), &d, &vocab, &max_pos, &tied, err))
    return err->code;
  const int64_t H = d.hidden;
  int max_ctx = o->max_context ? o->max_context : (int)(max_pos < 2048 ? max_pos : 2048);
  m->vocab = (int)vocab;
  m->hidden = (int)H;
  m->n_layers = (int)d.layers;
  m->max_context = max_ctx;

  Qwen3Layer *lw = calloc((size_t)d.layers, sizeof *lw);
  if (!lw) return sc_fail(err, SC_ERUNTIME, "out of memory");
  int embed = fe_weight(m, c, "embed_tokens", "model.embed_tokens.weight", vocab, H, o->band, err);
  if (embed < 0) goto fail;
  for (int L = 0; L < d.layers; L++)
    if (fe_qwen3_layer_weights(m, c, &d, "model.layers.", "", L, max_ctx, o->band, &lw[L], err))
      goto fail;
  int final_norm = fe_weight(m, c, "final_norm", "model.norm.weight", 0, H, DT_F32, err);
  if (final_norm < 0) goto fail;
  int head = embed;
  if (tied && fe_head_untied(c, "model.embed_tokens.weight")) {
    sc_fail(err, SC_EINPUT, "%s: tie_word_embeddings is true, but the checkpoint's lm_head.weight is not "
            "model.embed_tokens.weight: transformers 4.x ties them (the embedding's values), 5.x keeps lm_head; "
            "set tie_word_embeddings to false to use lm_head.weight, or leave it out of the checkpoint",
            c->config_path);
    goto fail;
  }
  if (!tied) {
    head = fe_weight(m, c, "lm_head", "lm_head.weight", vocab, H, o->band, err);
    if (head < 0) {
      if (!ckpt_find(c, "lm_head.weight"))
        snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
                 " (hint: config.json says tie_word_embeddings is false)");
      goto fail;
    }
  }
  int rope = fe_rope_table(m, max_ctx, (int)d.head_dim, d.theta);
  build_graph(m, ir_graph_new(m, "prefill", SC_IN_IDS, fe_chunk(o, 128, max_ctx)),
              &d, lw, embed, final_norm, head, rope, 0);
  build_graph(m, ir_graph_new(m, "decode", SC_IN_IDS, 1), &d, lw, embed, final_norm, head, rope, 0);
  /* one decode step of up to --max-batch sessions, each row at its own
   * position in its own caches (sc_io.row_pos / row_state): sc_batch_step. */
  if (o->max_batch > 1)
    build_graph(m, ir_graph_new(m, "decode_batch", SC_IN_IDS, o->max_batch < max_ctx ? o->max_batch : max_ctx), &d,
                lw, embed, final_norm, head, rope, 1);
  free(lw);
  return SC_OK;
fail:
  free(lw);
  return err->code;
}
