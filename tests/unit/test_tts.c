/*
 * test_tts.c — Qwen3-TTS against the official qwen-tts 0.1.1 traces in
 * tests/data/tts (made by tests/parity/make_tts.py):
 *   - talker logits and post-norm hidden per position, teacher-forced;
 *   - predictor logits for the 15 steps of one frame, teacher-forced;
 *   - the prompt and trailing-text embeddings of every run (streaming and
 *     non-streaming, instruct, speaker, language, dialect);
 *   - full greedy generation: identical [frames x 16] codes;
 * at 1e-4 relative max error (f32), for the 0.6B layout and the 1.7B
 * layout with small_to_mtp_projection, and the 0.6B layout with sliding
 * windows (the talker's in every layer, the predictor's in its second),
 * libtcc and gcc builds.  Plus the
 * errors a user can cause: unknown speaker or language, bad text ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "check.h"
#include "parity_util.h"
#include "tts_internal.h"

static char tmpdir[64];

static float *load_f32(const char *dir, const char *file, long want_floats) {
  char path[512];
  long size = 0;
  snprintf(path, sizeof path, "%s/%s", dir, file);
  float *f = (float *)slurp(path, &size);
  CHECK_MSG(f && size == want_floats * 4, "%s: %ld bytes, expected %ld", path, size, want_floats * 4);
  return f;
}

static int ids_of(const cJSON *a, int32_t *out, int max) {
  int n = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, a) if (n < max) out[n++] = it->valueint;
  return n;
}

static void check_rows(const char *what, const float *got, const float *want, int rows, int cols, double tol) {
  for (int r = 0; r < rows; r++) {
    double e = rel_err(got + (size_t)r * cols, want + (size_t)r * cols, cols);
    CHECK_MSG(e <= tol, "%s row %d: rel err %g", what, r, e);
  }
}

static void run_model(const char *name, const char *cc) {
  char dir[256], out[512], path[600];
  snprintf(dir, sizeof dir, "tests/data/tts/%s", name);
  snprintf(out, sizeof out, "%s/%s_%s.so", tmpdir, name, cc);
  snprintf(path, sizeof path, "%s/trace.json", dir);
  char *text = slurp(path, NULL);
  CHECK_MSG(text != NULL, "%s missing", path);
  if (!text) return;
  cJSON *tr = cJSON_Parse(text);
  free(text);
  BuildOpts o = build_defaults();
  o.model_dir = dir;
  o.out_path = out;
  o.cc = cc;
  o.target = test_target();
  o.quiet = 1;
  o.max_context = 128;
  o.prefill_chunk = 7; /* prompts span several chunks */
  sc_error err = {0};
  int built = sc_build(&o, &err) == 0;
  CHECK_MSG(built, "build %s: %s", name, err.msg);
  sc_model *m = NULL;
  sc_session *s = NULL;
  if (built) CHECK_MSG(sc_model_open(out, NULL, &m, &err) == 0, "%s", err.msg);
  if (!m) {
    cJSON_Delete(tr);
    return;
  }
  CHECK_MSG(sc_session_open(m, &s, &err) == 0, "%s", err.msg);
  TtsConfig c;
  CHECK_MSG(tts_config(m, &c, &err) == 0, "%s", err.msg);
  if (!s || !c.json) return;
  const int H = c.hidden, V = c.vocab, PV = c.pvocab, G = c.groups;
  CHECK(sc_tts_codebooks(m) == G);
  const double tol = 1e-4;
  float *logits = malloc((size_t)V * 4), *hidden = malloc((size_t)H * 4), *pl = malloc((size_t)PV * 4);
  float *hc0 = malloc((size_t)2 * H * 4);

  /* teacher-forced talker: one row at a time, then the whole prefill */
  const cJSON *tf = cJSON_GetObjectItem(tr, "teacher_forced");
  const cJSON *run0 = cJSON_GetArrayItem(cJSON_GetObjectItem(tr, "runs"), 0);
  int n_rows = cJSON_GetObjectItem(tf, "n_rows")->valueint;
  float *prompt = load_f32(dir, cJSON_GetObjectItem(run0, "prompt_file")->valuestring, (long)n_rows * H);
  float *tl = load_f32(dir, cJSON_GetObjectItem(tf, "talker_logits_file")->valuestring, (long)n_rows * V);
  float *th = load_f32(dir, cJSON_GetObjectItem(tf, "talker_hidden_file")->valuestring, (long)n_rows * H);
  if (!prompt || !tl || !th) return;
  sc_session_reset(s);
  for (int r = 0; r < n_rows; r++) {
    CHECK_MSG(tts_talker(s, &c, prompt + (size_t)r * H, 1, logits, hidden, &err) == 0, "%s", err.msg);
    double e1 = rel_err(logits, tl + (size_t)r * V, V), e2 = rel_err(hidden, th + (size_t)r * H, H);
    CHECK_MSG(e1 <= tol && e2 <= tol, "%s %s talker row %d: logits %g hidden %g", name, cc, r, e1, e2);
  }
  sc_session_reset(s);
  CHECK_MSG(tts_talker(s, &c, prompt, n_rows, logits, hidden, &err) == 0, "%s", err.msg);
  double e = rel_err(logits, tl + (size_t)(n_rows - 1) * V, V);
  CHECK_MSG(e <= tol, "%s %s talker prefill: rel err %g", name, cc, e);

  /* teacher-forced predictor */
  const cJSON *pt = cJSON_GetObjectItem(tf, "predictor");
  int32_t c0 = cJSON_GetObjectItem(pt, "c0")->valueint, codes_in[32];
  int n_in = ids_of(cJSON_GetObjectItem(pt, "codes_in"), codes_in, 32);
  CHECK(n_in == G - 2);
  float *plw = load_f32(dir, cJSON_GetObjectItem(pt, "logits_file")->valuestring, (long)(G - 1) * PV);
  memcpy(hc0, th + (size_t)(n_rows - 1) * H, (size_t)H * 4);
  sc_io io = {.ids = &c0, .n = 1, .out = hc0 + H};
  CHECK_MSG(rt_call(s, c.codec_embed, &io, &err) == 0, "%s", err.msg);
  for (int k = 0; k < G - 1 && plw; k++) {
    CHECK_MSG(tts_predictor_step(s, &c, k, hc0, k ? codes_in[k - 1] : 0, pl, &err) == 0, "%s", err.msg);
    e = rel_err(pl, plw + (size_t)k * PV, PV);
    CHECK_MSG(e <= tol, "%s %s predictor step %d: rel err %g", name, cc, k, e);
  }

  /* every run: prompt layout, then greedy generation */
  const cJSON *run;
  cJSON_ArrayForEach(run, cJSON_GetObjectItem(tr, "runs")) {
    const char *rn = cJSON_GetObjectItem(run, "name")->valuestring;
    int32_t text_ids[256], instruct[256], want[64 * 17];
    sc_tts_params p = sc_tts_defaults();
    p.text_ids = text_ids;
    p.n_text = ids_of(cJSON_GetObjectItem(run, "input_ids"), text_ids, 256);
    const cJSON *ins = cJSON_GetObjectItem(run, "instruct_ids");
    if (cJSON_IsArray(ins)) {
      p.instruct_ids = instruct;
      p.n_instruct = ids_of(ins, instruct, 256);
    }
    const cJSON *spk = cJSON_GetObjectItem(run, "speaker");
    p.speaker = cJSON_IsString(spk) ? spk->valuestring : NULL;
    p.language = cJSON_GetObjectItem(run, "language")->valuestring;
    p.non_streaming = cJSON_IsTrue(cJSON_GetObjectItem(run, "non_streaming_mode"));
    int plen = cJSON_GetObjectItem(run, "prompt_len")->valueint;
    int tlen = cJSON_GetObjectItem(run, "trailing_len")->valueint;
    float *wp = load_f32(dir, cJSON_GetObjectItem(run, "prompt_file")->valuestring, (long)plen * H);
    float *wt = load_f32(dir, cJSON_GetObjectItem(run, "trailing_file")->valuestring, (long)tlen * H);
    TtsPrompt pr;
    CHECK_MSG(tts_build_prompt(s, &c, &p, &pr, &err) == 0, "%s: %s", rn, err.msg);
    CHECK_MSG(pr.rows == plen && pr.trail == tlen, "%s: prompt %d rows (want %d), trailing %d (want %d)",
              rn, pr.rows, plen, pr.trail, tlen);
    if (wp && pr.rows == plen) check_rows(rn, pr.prompt, wp, plen, H, tol);
    if (wt && pr.trail == tlen) check_rows(rn, pr.trailing, wt, tlen, H, tol);
    tts_prompt_free(&pr);
    free(wp);
    free(wt);

    int nf = cJSON_GetObjectItem(run, "n_frames")->valueint, k = 0;
    const cJSON *fr;
    cJSON_ArrayForEach(fr, cJSON_GetObjectItem(run, "codes")) k += ids_of(fr, want + k, G);
    CHECK(k == nf * G);
    p.talker.greedy = p.predictor.greedy = 1;
    p.max_frames = nf;
    int32_t *got = calloc((size_t)nf * G, sizeof *got);
    int n_frames = 0;
    CHECK_MSG(sc_tts_generate(s, &p, got, &n_frames, NULL, NULL, &err) == 0, "%s: %s", rn, err.msg);
    CHECK_MSG(n_frames == nf, "%s: %d frames, expected %d", rn, n_frames, nf);
    for (int i = 0; i < nf * G && i < n_frames * G; i++)
      if (got[i] != want[i]) {
        CHECK_MSG(0, "%s %s %s: frame %d code %d is %d, expected %d", name, cc, rn, i / G, i % G, got[i], want[i]);
        break;
      }
    /* seeded sampling is reproducible (host code: checked on the CPU target) */
    if (!strcmp(cc, "tcc") && k && !strcmp(test_target(), "cpu")) {
      sc_tts_params q = p;
      q.talker = sc_tts_defaults().talker;
      q.predictor = sc_tts_defaults().predictor;
      q.talker.seed = q.predictor.seed = 7;
      int32_t *a = calloc((size_t)nf * G, 4), *b = calloc((size_t)nf * G, 4);
      int na = 0, nb = 0;
      CHECK(sc_tts_generate(s, &q, NULL, &na, NULL, NULL, &err) == SC_EUSAGE); /* refused, err may be NULL */
      CHECK_CONTAINS(err.msg, "sc_tts_generate: no codes buffer");
      CHECK(sc_tts_generate(s, NULL, a, &na, NULL, NULL, NULL) == SC_EUSAGE);
      CHECK(sc_tts_generate(s, &q, a, &na, NULL, NULL, &err) == 0);
      CHECK(sc_tts_generate(s, &q, b, &nb, NULL, NULL, &err) == 0);
      CHECK(na == nb && !memcmp(a, b, (size_t)na * G * 4));
      free(a);
      free(b);
    }
    free(got);
  }

  /* user errors */
  int32_t ids[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, codes[64];
  int nf = 0;
  sc_tts_params p = sc_tts_defaults();
  p.text_ids = ids;
  p.n_text = 12;
  p.speaker = "nobody";
  CHECK(sc_tts_generate(s, &p, codes, &nf, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "nobody");
  CHECK_CONTAINS(err.msg, "tiny_speaker");
  p.speaker = NULL;
  p.language = "klingon";
  CHECK(sc_tts_generate(s, &p, codes, &nf, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "english");
  p.language = NULL;
  ids[5] = 1 << 20;
  CHECK(sc_tts_generate(s, &p, codes, &nf, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "outside the text vocabulary");
  p.n_text = 4;
  CHECK(sc_tts_generate(s, &p, codes, &nf, NULL, NULL, &err) == SC_EUSAGE);
  /* a negative instruction length, or no text at all: refused, no prompt
   * built from them (it wrote before its buffer, ASan) */
  ids[5] = 5;
  p.n_text = 12;
  p.instruct_ids = ids;
  p.n_instruct = -3;
  int room = -1;
  CHECK(sc_tts_context_frames(m, &p, &room, &err) == SC_EUSAGE && room == 0);
  CHECK_CONTAINS(err.msg, "instruct ids: n_instruct -3; expected 0 or more");
  CHECK(sc_tts_generate(s, &p, codes, &nf, NULL, NULL, &err) == SC_EUSAGE && nf == 0);
  CHECK_CONTAINS(err.msg, "n_instruct -3");
  p.instruct_ids = NULL;
  p.text_ids = NULL;
  CHECK(sc_tts_generate(s, &p, codes, &nf, NULL, NULL, &err) == SC_EUSAGE);
  CHECK_CONTAINS(err.msg, "12 tokens at NULL");

  free(prompt); free(tl); free(th); free(plw);
  free(logits); free(hidden); free(pl); free(hc0);
  tts_config_free(&c);
  sc_session_close(s);
  sc_model_close(m);
  cJSON_Delete(tr);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/speechc-tts-XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  const char *models[] = {"tts_tiny_06b_layout", "tts_tiny_17b_layout", "tts_tiny_sliding"};
  for (int i = 0; i < 3; i++) {
    run_model(models[i], "tcc");
    /* the host code of a device target is launches only: one toolchain */
    if (!strcmp(test_target(), "cpu")) run_model(models[i], "gcc");
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd)) {}
  CHECK_DONE();
}
