/*
 * fe_tts.c — Qwen3-TTS (`qwen3_tts`): the talker and the code predictor.
 * Source: QwenLM/Qwen3-TTS qwen_tts/core/models/modeling_qwen3_tts.py.
 *
 * Both transformers are Qwen3 blocks (fe_qwen3.c).  The talker reads input
 * embeddings built by the runtime's driver (runtime/tts.c) from:
 *   text_embed   P(x) = fc2(silu(fc1(text_embedding[x])))      (biased MLP)
 *   codec_embed  E(c) = talker codec_embedding[c]
 *   codec_sum    E(c0) + sum_{i=1..G-1} predictor.codec_embedding[i-1][c_i]
 * and returns codec_head logits plus its post-norm hidden state.  The
 * predictor runs one frame: predictor_prefill over [h, E(c0)] (positions
 * 0-1, head 0), then predictor_decode for steps k = 1..G-2 (embedding set
 * k-1, head k), through small_to_mtp_projection when the two hidden sizes
 * differ (the 1.7B layout).  Per-step tables and heads are one weight each
 * with G-1 sets, selected by io->step: no per-step copies of code.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"
#include "sc_abi.h"

typedef struct TtsW {
  Qwen3Dims td, pd;                /* talker, predictor blocks */
  int64_t vocab, text_vocab, text_hidden, pvocab;
  int groups;                      /* codebooks per frame (G) */
  int text_emb, fc1, fc1_b, fc2, fc2_b, codec_emb, codec_head, talker_norm;
  int pred_emb, pred_head, pred_norm, proj, proj_b;
  int talker_rope, pred_rope;
  Qwen3Layer *tl, *pl;
} TtsW;

/* all_rows: every row's hidden and logits (the batched entries, one row
 * per stream), else the last row's. */
static int talker_stack(Module *m, Graph *g, const TtsW *w, int x, int all_rows) {
  int rope = ir_weight(m, g, w->talker_rope);
  for (int L = 0; L < w->td.layers; L++) x = fe_qwen3_layer(m, g, x, &w->td, &w->tl[L], rope, "talker.", L);
  int last = all_rows ? x : ir_row(g, x, -1, "talker.last");
  int h = ir_rmsnorm(g, last, ir_weight(m, g, w->talker_norm), (int)w->td.hidden, NORM_PLAIN,
                     (float)w->td.eps, "talker.norm");
  ir_output(g, h, OUT_HIDDEN);
  int logits = ir_linear(g, h, ir_weight(m, g, w->codec_head), -1, "codec_head");
  ir_output(g, logits, OUT_LOGITS);
  return logits;
}

/* x: [T, talker hidden] -> logits of head `io->step` for the last row
 * (all_rows: for every row) */
static void predictor_stack(Module *m, Graph *g, const TtsW *w, int x, int all_rows) {
  if (w->proj >= 0)
    x = ir_linear(g, x, ir_weight(m, g, w->proj), ir_weight(m, g, w->proj_b), "pred.proj");
  int rope = ir_weight(m, g, w->pred_rope);
  for (int L = 0; L < w->pd.layers; L++) x = fe_qwen3_layer(m, g, x, &w->pd, &w->pl[L], rope, "pred.", L);
  int last = all_rows ? x : ir_row(g, x, -1, "pred.last");
  int h = ir_rmsnorm(g, last, ir_weight(m, g, w->pred_norm), (int)w->pd.hidden, NORM_PLAIN,
                     (float)w->pd.eps, "pred.norm");
  int logits = ir_linear(g, h, ir_weight_set(m, g, w->pred_head, SET_STEP, 0), -1, "pred.head");
  ir_output(g, logits, OUT_LOGITS);
}

/* id `v` of `key` within [0, n) of the table `table`; where names the object */
static int id_in(const char *where, const char *key, int64_t v, int64_t n, const char *table, sc_error *err) {
  if (v < 0 || v >= n)
    return sc_fail(err, SC_EINPUT, "%s: %s %lld is outside the %s [0, %lld)", where, key, (long long)v, table,
                   (long long)n);
  return SC_OK;
}

/* A map of name -> codec id (codec_language_id, spk_id), or absent.  A
 * speaker's value may be an id or a one-element list of one: the official
 * generate embeds it as one prompt position (a longer list fails there). */
static int id_map(const cJSON *t, const char *tw, const char *key, const char *what, int lists, int64_t vocab,
                  sc_error *err) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(t, key);
  if (!m || cJSON_IsNull(m)) return SC_OK;
  if (!cJSON_IsObject(m))
    return sc_fail(err, SC_EINPUT, "%s: %s must be an object of %s -> id, found %s", tw, key, what,
                   cJSON_IsArray(m) ? "a list" : cJSON_IsString(m) ? "a string" : "a non-object");
  char name[200], where[160];
  snprintf(where, sizeof where, "%s: %s", tw, key);
  for (const cJSON *e = m->child; e; e = e->next) {
    snprintf(name, sizeof name, "%s.%.100s", key, e->string);
    const cJSON *v = e;
    if (lists && cJSON_IsArray(v)) {
      if (cJSON_GetArraySize(v) != 1)
        return sc_fail(err, SC_EINPUT, "%s: %s is a list of %d ids; a speaker id must be an integer or a "
                       "one-element list (the official code embeds it as one prompt position)", tw, name,
                       cJSON_GetArraySize(v));
      v = v->child;
    }
    int64_t id;
    if (cfg_int_val(v, where, e->string, &id, err) || id_in(tw, name, id, vocab, "codec vocabulary", err))
      return err->code;
  }
  return SC_OK;
}

/* Every id the driver (runtime/tts.c) feeds to an embedding or compares
 * with a sampled code, checked here so that a bad config fails the build
 * naming its key rather than a `tts` run: integers (no fractions, strings
 * or out-of-range doubles), text ids within text_vocab_size, codec ids
 * within the talker's vocab_size. */
static int read_ids(const Checkpoint *c, const cJSON *t, const TtsW *w, sc_error *err) {
  const char *top = c->config_path, *tw = "config.json: talker_config";
  static const char *const text_ids[] = {"tts_pad_token_id", "tts_bos_token_id", "tts_eos_token_id"};
  static const char *const opt_text_ids[] = {"im_start_token_id", "im_end_token_id", "assistant_token_id"};
  static const char *const codec_ids[] = {"codec_pad_id", "codec_bos_id", "codec_eos_token_id", "codec_think_id",
                                          "codec_nothink_id", "codec_think_bos_id", "codec_think_eos_id"};
  int64_t id;
  for (size_t i = 0; i < sizeof text_ids / sizeof *text_ids; i++)
    if (cfg_int_req(c->config, top, text_ids[i], &id, err) ||
        id_in(top, text_ids[i], id, w->text_vocab, "text vocabulary", err))
      return err->code;
  for (size_t i = 0; i < sizeof opt_text_ids / sizeof *opt_text_ids; i++)
    if (cfg_int_opt(c->config, top, opt_text_ids[i], 0, &id, err) ||
        id_in(top, opt_text_ids[i], id, w->text_vocab, "text vocabulary", err))
      return err->code;
  for (size_t i = 0; i < sizeof codec_ids / sizeof *codec_ids; i++)
    if (cfg_int_req(t, tw, codec_ids[i], &id, err) || id_in(tw, codec_ids[i], id, w->vocab, "codec vocabulary", err))
      return err->code;
  if (id_map(t, tw, "codec_language_id", "language", 0, w->vocab, err) ||
      id_map(t, tw, "spk_id", "speaker", 1, w->vocab, err))
    return err->code;
  /* a dialect speaker's language replaces the requested one: it must exist */
  const cJSON *dia = cJSON_GetObjectItemCaseSensitive(t, "spk_is_dialect");
  const cJSON *langs = cJSON_GetObjectItemCaseSensitive(t, "codec_language_id");
  if (!dia || cJSON_IsNull(dia)) return SC_OK;
  if (!cJSON_IsObject(dia))
    return sc_fail(err, SC_EINPUT, "%s: spk_is_dialect must be an object of speaker -> dialect name or false", tw);
  for (const cJSON *e = dia->child; e; e = e->next) {
    if (cJSON_IsFalse(e)) continue;
    if (!cJSON_IsString(e))
      return sc_fail(err, SC_EINPUT, "%s: spk_is_dialect.%.100s must be a dialect name or false", tw, e->string);
    if (!cJSON_IsObject(langs) || !cJSON_GetObjectItemCaseSensitive(langs, e->valuestring))
      return sc_fail(err, SC_EINPUT, "%s: spk_is_dialect.%.100s names '%.100s', which is not a key of "
                     "codec_language_id", tw, e->string, e->valuestring);
  }
  return SC_OK;
}

/* Generation settings a sub-config may carry.  transformers builds the
 * talker's and the code predictor's GenerationConfig from their configs,
 * so a setting the official generate calls do not pass themselves still
 * acts on their tokens (modeling_qwen3_tts.py: the talker's call passes
 * repetition_penalty, suppress_tokens, eos_token_id and min_new_tokens,
 * both pass max_new_tokens, do_sample, top_k, top_p and temperature).
 * speechc samples as those calls' arguments say, so any other setting
 * away from its default is refused by name.  Those only beam search reads
 * (length_penalty, early_stopping, diversity_penalty: num_beams must be
 * 1), output switches, and max_length (max_new_tokens wins) change no
 * token and are not read. */
static int generation_keys(const cJSON *obj, const char *where, int talker, sc_error *err) {
  static const struct { const char *key; double dflt; int talker_passes; } keys[] = {
      /* numbers, with transformers' defaults (GenerationConfig) */
      {"num_beams", 1, 0}, {"num_beam_groups", 1, 0}, {"num_return_sequences", 1, 0}, {"min_length", 0, 0},
      {"typical_p", 1, 0}, {"epsilon_cutoff", 0, 0}, {"eta_cutoff", 0, 0}, {"repetition_penalty", 1, 1},
      {"encoder_repetition_penalty", 1, 0}, {"no_repeat_ngram_size", 0, 0},
      /* null (or an empty list) by default: NAN */
      {"min_p", NAN, 0}, {"min_new_tokens", NAN, 1}, {"eos_token_id", NAN, 1}, {"bad_words_ids", NAN, 0},
      {"force_words_ids", NAN, 0}, {"constraints", NAN, 0}, {"forced_bos_token_id", NAN, 0},
      {"forced_eos_token_id", NAN, 0}, {"exponential_decay_length_penalty", NAN, 0}, {"suppress_tokens", NAN, 1},
      {"begin_suppress_tokens", NAN, 0}, {"sequence_bias", NAN, 0}, {"penalty_alpha", NAN, 0},
      {"guidance_scale", NAN, 0}, {"dola_layers", NAN, 0}, {"watermarking_config", NAN, 0},
  };
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    if (talker && keys[i].talker_passes) continue;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, keys[i].key);
    if (!v || cJSON_IsNull(v)) continue;
    if (isnan(keys[i].dflt) ? (cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child
                            : cJSON_IsNumber(v) && v->valuedouble == keys[i].dflt)
      continue;
    char *text = cJSON_PrintUnformatted(v);
    sc_fail(err, SC_EINPUT, "%s: %s %.60s is not supported (the official generate applies it to the %s's "
            "tokens; speechc samples without it: expected %s)", where, keys[i].key, text ? text : "(value)",
            talker ? "talker" : "code predictor", isnan(keys[i].dflt) ? "null" : keys[i].dflt == 1 ? "1" : "0");
    free(text);
    return err->code;
  }
  return SC_OK;
}

static int read_config(const Checkpoint *c, TtsW *w, const cJSON **talker, sc_error *err) {
  const char *top = c->config_path;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(c->config, "talker_config");
  if (!cJSON_IsObject(t))
    return sc_fail(err, SC_EINPUT, "%s: key 'talker_config' is missing or not an object", top);
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(t, "code_predictor_config");
  if (!cJSON_IsObject(p))
    return sc_fail(err, SC_EINPUT, "%s: key 'talker_config.code_predictor_config' is missing or not an object", top);
  const char *tw = "config.json: talker_config", *pw = "config.json: talker_config.code_predictor_config";
  int64_t groups = 0, pgroups = 0;
  if (fe_qwen3_dims(t, tw, &FE_TTS_TALKER, &w->td, err) || fe_qwen3_dims(p, pw, &FE_TTS_PREDICTOR, &w->pd, err) ||
      generation_keys(t, tw, 1, err) || generation_keys(p, pw, 0, err) ||
      cfg_int_req(t, tw, "vocab_size", &w->vocab, err) ||
      cfg_int_req(t, tw, "text_vocab_size", &w->text_vocab, err) ||
      cfg_int_req(t, tw, "text_hidden_size", &w->text_hidden, err) ||
      cfg_int_req(t, tw, "num_code_groups", &groups, err) ||
      cfg_int_req(p, pw, "vocab_size", &w->pvocab, err) ||
      cfg_int_opt(p, pw, "num_code_groups", groups, &pgroups, err))
    return err->code;
  if (groups < 2 || groups > 17)
    return sc_fail(err, SC_EINPUT, "%s: num_code_groups %lld is not supported (2..17)", tw, (long long)groups);
  if (pgroups != groups)
    return sc_fail(err, SC_EINPUT, "%s: num_code_groups %lld differs from the talker's %lld", pw,
                   (long long)pgroups, (long long)groups);
  if (w->vocab < 1 || w->text_vocab < 1 || w->text_hidden < 1 || w->pvocab < 1)
    return sc_fail(err, SC_EINPUT, "%s: vocab_size, text_vocab_size, text_hidden_size must be positive", tw);
  w->groups = (int)groups;
  *talker = t;
  return read_ids(c, t, w, err);
}

int fe_tts(Module *m, const Checkpoint *c, const BuildOpts *o, sc_error *err) {
  TtsW w;
  memset(&w, 0, sizeof w);
  const cJSON *tcfg = NULL;
  if (read_config(c, &w, &tcfg, err)) return err->code;
  int64_t max_pos;
  if (cfg_int_opt(tcfg, "config.json: talker_config", "max_position_embeddings", 32768, &max_pos, err))
    return err->code;
  if (max_pos < 1)
    return sc_fail(err, SC_EINPUT, "config.json: talker_config: max_position_embeddings must be positive, "
                   "found %lld", (long long)max_pos);
  const int64_t H = w.td.hidden, Hp = w.pd.hidden, TH = w.text_hidden;
  const int G = w.groups;
  int max_ctx = o->max_context ? o->max_context : (int)(max_pos < 2048 ? max_pos : 2048);
  m->vocab = (int)w.vocab;
  m->hidden = (int)H;
  m->n_layers = (int)w.td.layers;
  m->max_context = max_ctx;
  w.tl = calloc((size_t)w.td.layers, sizeof *w.tl);
  w.pl = calloc((size_t)w.pd.layers, sizeof *w.pl);
  if (!w.tl || !w.pl) {
    free(w.tl);
    free(w.pl);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  int rc = SC_EINPUT;
  /* The text table is read one row per token (mmapped, never converted whole
   * at run time): it is stored in the band like every matrix. */
#define W(var, call) if ((w.var = (call)) < 0) goto done
  W(text_emb, fe_weight(m, c, "text_embedding", "talker.model.text_embedding.weight", w.text_vocab, TH, o->band, err));
  W(fc1, fe_weight(m, c, "text_fc1", "talker.text_projection.linear_fc1.weight", TH, TH, o->band, err));
  W(fc1_b, fe_weight(m, c, "text_fc1_bias", "talker.text_projection.linear_fc1.bias", 0, TH, DT_F32, err));
  W(fc2, fe_weight(m, c, "text_fc2", "talker.text_projection.linear_fc2.weight", H, TH, o->band, err));
  W(fc2_b, fe_weight(m, c, "text_fc2_bias", "talker.text_projection.linear_fc2.bias", 0, H, DT_F32, err));
  W(codec_emb, fe_weight(m, c, "codec_embedding", "talker.model.codec_embedding.weight", w.vocab, H, o->band, err));
  W(codec_head, fe_weight(m, c, "codec_head", "talker.codec_head.weight", w.vocab, H, o->band, err));
  W(talker_norm, fe_weight(m, c, "talker.norm", "talker.model.norm.weight", 0, H, DT_F32, err));
  for (int L = 0; L < w.td.layers; L++)
    if (fe_qwen3_layer_weights(m, c, &w.td, "talker.model.layers.", "talker.", L, max_ctx, o->band, &w.tl[L], err))
      goto done;
  W(pred_emb, fe_weight_sets(m, c, "pred.codec_embedding", "talker.code_predictor.model.codec_embedding.%d.weight",
                             G - 1, w.pvocab, H, o->band, err));
  W(pred_head, fe_weight_sets(m, c, "pred.lm_head", "talker.code_predictor.lm_head.%d.weight", G - 1,
                              w.pvocab, Hp, o->band, err));
  W(pred_norm, fe_weight(m, c, "pred.norm", "talker.code_predictor.model.norm.weight", 0, Hp, DT_F32, err));
  for (int L = 0; L < w.pd.layers; L++)
    if (fe_qwen3_layer_weights(m, c, &w.pd, "talker.code_predictor.model.layers.", "pred.", L, G + 1,
                               o->band, &w.pl[L], err))
      goto done;
  w.proj = w.proj_b = -1;
  if (Hp != H) {
    const char *pt = "talker.code_predictor.small_to_mtp_projection.weight";
    if (!ckpt_find(c, pt)) {
      rc = sc_fail(err, SC_EINPUT, "%s: tensor '%s' is missing: the predictor hidden size (%lld) "
                   "differs from the talker's (%lld), so the 1.7B layout's projection is required",
                   c->dir, pt, (long long)Hp, (long long)H);
      goto done;
    }
    W(proj, fe_weight(m, c, "pred.proj", pt, Hp, H, o->band, err));
    W(proj_b, fe_weight(m, c, "pred.proj_bias", "talker.code_predictor.small_to_mtp_projection.bias", 0, Hp,
                        DT_F32, err));
  }
#undef W
  /* talker first: a shared table must be created at its longest */
  w.talker_rope = fe_rope_table(m, max_ctx, (int)w.td.head_dim, w.td.theta);
  w.pred_rope = fe_rope_table(m, G + 1, (int)w.pd.head_dim, w.pd.theta);

  int chunk = fe_chunk(o, 128, max_ctx);
  Graph *g = ir_graph_new(m, "text_embed", SC_IN_IDS, chunk);
  int x = ir_embed(g, ir_weight(m, g, w.text_emb), ir_input_ids(g), "text_embed");
  x = ir_linear(g, x, ir_weight(m, g, w.fc1), ir_weight(m, g, w.fc1_b), "text_fc1");
  x = ir_unary(g, OP_SILU, x, "text_fc1_silu");
  x = ir_linear(g, x, ir_weight(m, g, w.fc2), ir_weight(m, g, w.fc2_b), "text_proj");
  ir_output(g, x, OUT_LOGITS);

  g = ir_graph_new(m, "codec_embed", SC_IN_IDS, chunk);
  ir_output(g, ir_embed(g, ir_weight(m, g, w.codec_emb), ir_input_ids(g), "codec_embed"), OUT_LOGITS);

  g = ir_graph_exact(m, "codec_sum", SC_IN_IDS, G);
  int ids = ir_input_ids(g);
  x = ir_embed(g, ir_weight(m, g, w.codec_emb), ir_row(g, ids, 0, "c0"), "codec_sum.0");
  for (int i = 1; i < G; i++) {
    char nm[IR_NAME];
    snprintf(nm, sizeof nm, "c%d", i);
    int e = ir_embed(g, ir_weight_set(m, g, w.pred_emb, SET_FIXED, i - 1), ir_row(g, ids, i, nm), NULL);
    snprintf(nm, sizeof nm, "codec_sum.%d", i);
    x = ir_binary(g, OP_ADD, x, e, nm);
  }
  ir_output(g, x, OUT_LOGITS);

  g = ir_graph_new(m, "talker_prefill", SC_IN_EMBEDS, chunk);
  talker_stack(m, g, &w, ir_input_embeds(g, H), 0);
  g = ir_graph_exact(m, "talker_decode", SC_IN_EMBEDS, 1);
  talker_stack(m, g, &w, ir_input_embeds(g, H), 0);

  g = ir_graph_exact(m, "predictor_prefill", SC_IN_EMBEDS, 2);
  predictor_stack(m, g, &w, ir_input_embeds(g, H), 0);
  g = ir_graph_exact(m, "predictor_decode", SC_IN_IDS, 1);
  x = ir_embed(g, ir_weight_set(m, g, w.pred_emb, SET_STEP, -1), ir_input_ids(g), "pred.embed");
  predictor_stack(m, g, &w, x, 0);

  /* A frame of up to --max-batch streams at once (sc_tts_batch_step): each
   * row at its own position in its own session's caches (sc_io.row_pos /
   * row_state), every row's outputs.  The predictor's prefill carries two
   * rows per stream ([h, E(c0)] at positions 0 and 1). */
  if (o->max_batch > 1) {
    const int B = o->max_batch < max_ctx ? o->max_batch : max_ctx;
    g = ir_graph_new(m, "talker_batch", SC_IN_EMBEDS, B);
    talker_stack(m, g, &w, ir_input_embeds(g, H), 1);
    g = ir_graph_new(m, "predictor_prefill_batch", SC_IN_EMBEDS, 2 * o->max_batch);
    predictor_stack(m, g, &w, ir_input_embeds(g, H), 1);
    g = ir_graph_new(m, "predictor_decode_batch", SC_IN_IDS, o->max_batch);
    x = ir_embed(g, ir_weight_set(m, g, w.pred_emb, SET_STEP, -1), ir_input_ids(g), "pred.embed");
    predictor_stack(m, g, &w, x, 1);
  }
  rc = SC_OK;
done:
  free(w.tl);
  free(w.pl);
  return rc;
}
