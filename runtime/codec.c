/*
 * codec.c — drive a codec decoder artifact (family "codec": the
 * Qwen3-TTS-Tokenizer-12Hz decoder, compiler/fe_codec.c, or Mimi's,
 * compiler/fe_mimi.c): frames of codes in, PCM out; and Mimi's encoder, PCM
 * in, codes out (entry "encode").  The entry point "audio" takes up to
 * max_tokens frames and keeps every conv's left context, the transposed
 * convs' carried sums and the attention ring in the session, so decoding an
 * utterance in one call or frame by frame gives the same samples.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

/* A decoder_config value, or the official default when the key is absent. */
static int cfg_int(const cJSON *obj, const char *key, int dflt, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) {
    *out = dflt;
    return 1;
  }
  if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e9) return 0;
  *out = v->valueint;
  return 1;
}

/* An encode entry as compiler/fe_mimi.c makes it: frames of samples in
 * (embeds), every frame's codes out as floats. */
static int enc_matches(const sc_entry *e, const sc_codec_info *ci) {
  return e->input == SC_IN_EMBEDS && e->out_cols == ci->n_codebooks && e->out_all_rows && e->out_rows_mul == 1 &&
         e->max_tokens >= 1;
}

int sc_codec_get_info(const sc_model *m, sc_codec_info *info, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!m || !info) return sc_fail(err, SC_EUSAGE, "sc_codec_get_info: no %s", !m ? "model" : "info");
  memset(info, 0, sizeof *info);
  if (strcmp(m->d->family, "codec"))
    return sc_fail(err, SC_EUSAGE, "%s is a %s model, not a codec decoder (hint: build the checkpoint's "
                   "speech_tokenizer/ directory)", m->path, m->d->family);
  const sc_entry *e = rt_entry(m, "audio");
  cJSON *j = cJSON_Parse(m->d->config_json);
  const cJSON *dc = cJSON_GetObjectItemCaseSensitive(j, "decoder_config");
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j, "model_type");
  int ok;
  if (cJSON_IsString(mt) && !strcmp(mt->valuestring, "mimi")) {
    /* Mimi (compiler/fe_mimi.c): the config gives the rate; codebooks,
     * samples per frame and the codebook size are the entry's */
    ok = e && cfg_int(j, "sample_rate", 24000, &info->sample_rate);
    if (ok) {
      info->n_codebooks = e->ids_cols;
      info->codebook_size = m->d->vocab;
      info->samples_per_frame = e->out_rows_mul;
    }
  } else {
    ok = e && j && cJSON_IsObject(dc) && cfg_int(dc, "num_quantizers", 16, &info->n_codebooks) &&
         cfg_int(dc, "codebook_size", 2048, &info->codebook_size) &&
         cfg_int(j, "output_sample_rate", 24000, &info->sample_rate) &&
         cfg_int(j, "decode_upsample_rate", 1920, &info->samples_per_frame);
  }
  cJSON_Delete(j);
  if (ok && (e->ids_cols != info->n_codebooks || e->out_rows_mul != info->samples_per_frame ||
             m->d->vocab != info->codebook_size))
    ok = 0; /* sc_codec_decode reads these three from the entry table */
  if (!ok) return sc_fail(err, SC_EINPUT, "%s: the embedded codec config or its entry point is damaged", m->path);
  info->max_frames = e->max_tokens;
  const sc_entry *enc = rt_entry(m, "encode");
  info->can_encode = enc && enc_matches(enc, info);
  return SC_OK;
}

int rt_codec_dims(const sc_model *m, sc_codec_info *ci) {
  const sc_entry *e = rt_entry(m, "audio");
  memset(ci, 0, sizeof *ci);
  if (strcmp(m->d->family, "codec") || !e) return -1;
  ci->n_codebooks = e->ids_cols;
  ci->codebook_size = m->d->vocab;
  ci->samples_per_frame = e->out_rows_mul;
  ci->max_frames = e->max_tokens;
  const sc_entry *enc = rt_entry(m, "encode");
  ci->can_encode = enc && enc_matches(enc, ci);
  return 0;
}

int sc_codec_path(const char *model_path, char *out, size_t size) {
  if (!model_path || !out) return 1;
  size_t n = strlen(model_path);
  if (n > 3 && !strcmp(model_path + n - 3, ".so")) n -= 3;
  const int w = snprintf(out, size, "%.*s.codec.so", (int)n, model_path);
  return w < 0 || (size_t)w >= size;
}

int sc_codec_decode(sc_session *s, const int32_t *codes, int n_frames, float *pcm, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!s || (n_frames > 0 && (!codes || !pcm)))
    return sc_fail(err, SC_EUSAGE, "sc_codec_decode: no %s", !s ? "session" : !codes ? "codes" : "pcm buffer");
  /* per call (a frame at a time in tts): the entry table, not the JSON */
  sc_codec_info ci;
  if (rt_codec_dims(s->m, &ci) && sc_codec_get_info(s->m, &ci, err))
    return err->code; /* not a codec, or a damaged one: its message */
  const sc_entry *e = rt_entry(s->m, "audio");
  if (n_frames < 0) return sc_fail(err, SC_EUSAGE, "negative frame count %d", n_frames);
  if (s->pos + (int64_t)n_frames > s->m->d->max_context)
    return sc_fail(err, SC_ERUNTIME, "the stream is full: frame %d + %d exceeds max_context %d frames "
                   "(hint: rebuild with a larger --max-context, or reset the session)", s->pos, n_frames,
                   s->m->d->max_context);
  for (int64_t i = 0; i < (int64_t)n_frames * ci.n_codebooks; i++)
    if (codes[i] < 0 || codes[i] >= ci.codebook_size)
      return sc_fail(err, SC_EUSAGE, "code %d (frame %lld, codebook %lld) is outside [0, %d)", codes[i],
                     (long long)(i / ci.n_codebooks), (long long)(i % ci.n_codebooks), ci.codebook_size);
  for (int done = 0; done < n_frames;) {
    const int chunk = n_frames - done < e->max_tokens ? n_frames - done : e->max_tokens;
    sc_io io = {.ids = codes + (size_t)done * ci.n_codebooks, .n = chunk, .pos = s->pos,
                .out = pcm + (size_t)done * ci.samples_per_frame};
    if (rt_call(s, e, &io, err)) return err->code;
    s->pos += chunk;
    done += chunk;
  }
  return SC_OK;
}

int sc_codec_encode(sc_session *s, const float *pcm, int n_frames, int32_t *codes, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!s || (n_frames > 0 && (!pcm || !codes)))
    return sc_fail(err, SC_EUSAGE, "sc_codec_encode: no %s", !s ? "session" : !pcm ? "pcm" : "codes buffer");
  /* per call (a frame at a time in the duplex loop): the entry table */
  sc_codec_info ci;
  if (rt_codec_dims(s->m, &ci) && sc_codec_get_info(s->m, &ci, err)) return err->code;
  if (!ci.can_encode)
    return sc_fail(err, SC_EUSAGE, "%s: this codec has no encoder (only Mimi's is built: a Mimi directory, "
                   "model_type mimi)", s->m->path);
  const sc_entry *e = rt_entry(s->m, "encode");
  if (n_frames < 0) return sc_fail(err, SC_EUSAGE, "negative frame count %d", n_frames);
  if (s->enc_pos + (int64_t)n_frames > s->m->d->max_context)
    return sc_fail(err, SC_ERUNTIME, "the encode stream is full: frame %d + %d exceeds max_context %d frames "
                   "(hint: rebuild with a larger --max-context, or reset the session)", s->enc_pos, n_frames,
                   s->m->d->max_context);
  const size_t F = (size_t)ci.samples_per_frame, K = (size_t)ci.n_codebooks;
  for (size_t i = 0; i < (size_t)n_frames * F; i++)
    if (!(pcm[i] - pcm[i] == 0.0f))
      return sc_fail(err, SC_EUSAGE, "sample %zu (frame %zu) is not finite (%g)", i, i / F, (double)pcm[i]);
  float *out = malloc((size_t)e->max_tokens * K * sizeof *out);
  if (!out) return sc_fail(err, SC_ERUNTIME, "out of memory");
  int rc = SC_OK;
  for (int done = 0; !rc && done < n_frames;) {
    const int chunk = n_frames - done < e->max_tokens ? n_frames - done : e->max_tokens;
    sc_io io = {.embeds = pcm + (size_t)done * F, .n = chunk, .pos = s->enc_pos, .out = out};
    if ((rc = rt_call(s, e, &io, err))) break;
    for (size_t i = 0; i < (size_t)chunk * K; i++) {
      const float c = out[i];
      if (!(c >= 0.0f && c < (float)ci.codebook_size && c == (float)(int32_t)c)) {
        rc = sc_fail(err, SC_ERUNTIME, "%s: the encoder gave code %g (frame %zu, codebook %zu), not one of "
                     "[0, %d): a damaged artifact", s->m->path, (double)c, (size_t)done + i / K, i % K,
                     ci.codebook_size);
        break;
      }
      codes[(size_t)done * K + i] = (int32_t)c;
    }
    s->enc_pos += chunk;
    done += chunk;
  }
  free(out);
  return rc;
}
