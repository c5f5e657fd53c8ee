/*
 * cmd_moshi.c — `speechc moshi model.so --user-codes FILE --codes-out FILE`:
 * Moshi's step loop (runtime/moshi.c, the package's LMGen) over the user's
 * audio codes, one row of the file per 80 ms step, writing every row
 * LMGen.step returns: {"tokens": [[text, a_1..a_dep_q], ...]}.  Sampling
 * flags are LMGen's argument names (run_inference takes them from the
 * checkpoint's lm_gen_config, which gives the defaults here too).
 *
 * The text: the text tokens other than 0 and 3 (the padding ids that
 * run_inference skips) are decoded with the checkpoint's SentencePiece
 * model (runtime/spm.h) as DecodeIds decodes them all at once.  The
 * transcript goes to --text-out; on stderr (unless -q) the text grows as it
 * comes, each step printing what the decode of the ids so far adds — held
 * back while the ids end in a byte piece, which may be half a character.
 * The model is the artifact's OUT.tokenizer/<tokenizer_name> (speechc build
 * copies it there) or --tokenizer FILE|DIR.
 *
 * Several --user-codes / --codes-out pairs are several conversations: one
 * generator each on its own session, all stepped by sc_moshi_batch_step
 * until the last one's codes end (each leaves the batch when its own do),
 * every output the one its pair gives alone.  Several --input / -o pairs
 * are several duplex conversations the same way, each with a Mimi session
 * of its own (encode and decode per conversation, the Moshi steps
 * batched).
 *
 * `--input user.wav -o reply.wav` runs the package's run_inference loop
 * instead of reading codes: the Mimi built beside the model (OUT.codec.so,
 * or --mimi) encodes each whole 1920-sample frame of the WAV, the first
 * frame is stepped twice (its first result dropped, as run_inference
 * does), and every row's audio codes are decoded by the same Mimi session
 * and written as they come; the loop stops at the end of the input.
 */
#include <limits.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "codes.h"
#include "speechc.h"
#include "spm.h"
#include "tokenizer.h"
#include "wav.h"

int cmd_moshi(int argc, char **argv);
extern const char *const usage_moshi;

const char *const usage_moshi =
    "usage: speechc moshi model.so --user-codes FILE --codes-out FILE [options]\n"
    "       speechc moshi model.so --user-codes A --codes-out A.json --user-codes B --codes-out B.json ...\n"
    "       speechc moshi model.so --input user.wav -o reply.wav [--codes-out FILE] [options]\n"
    "       speechc moshi model.so --input A.wav -o A_reply.wav --input B.wav -o B_reply.wav ...\n"
    "  --input WAV        the user's audio (24 kHz mono, PCM of 8-32 bits or float; another rate or\n"
    "                     channel count is refused): run_inference's loop, Mimi encode of\n"
    "                     each whole 1920-sample frame, Moshi's reply decoded as it comes\n"
    "  -o, --output PATH  the reply audio: WAV, .raw/.pcm (s16le) or - (stdout)\n"
    "  --mimi PATH        the Mimi artifact (default: model.codec.so, which speechc build\n"
    "                     writes beside a Moshi model)\n"
    "  --f32              write float32 WAV samples instead of 16-bit\n"
    "  --user-codes FILE  JSON {\"codes\": [[c_1..c_U], ...]} (or [[...], ...], or raw int32): the\n"
    "                     user's codes, one row per 80 ms step, U = n_q - dep_q codebooks\n"
    "  --codes-out FILE   JSON {\"tokens\": [[text, a_1..a_dep_q], ...]}: the rows LMGen.step\n"
    "                     returns, in order (none until the largest delay has passed)\n"
    "                     Several --user-codes / --codes-out pairs (and as many --text-out, or\n"
    "                     none) are several conversations, stepped together (each weight read\n"
    "                     once per step for all; a model built with --max-batch >= 2, the\n"
    "                     default): each output is what the pair gives alone, with the same\n"
    "                     flags; a conversation ends with its codes; no text on stderr.\n"
    "                     Several --input / -o pairs likewise (each with a --codes-out, or\n"
    "                     none): duplex conversations, each reply what its pair gives alone\n"
    "  --greedy           argmax for every token (LMGen's use_sampling=False)\n"
    "  --temp T           audio temperature (default 0.8, or the checkpoint's lm_gen_config;\n"
    "                     0 = greedy)\n"
    "  --temp-text T      text temperature (default 0.7; 0 = greedy)\n"
    "  --top-k K          audio top-k (default 250; 0 = off)\n"
    "  --top-k-text K     text top-k (default 25; 0 = off)\n"
    "  --seed S           sampler seed (default 4242); same seed, same output (not the\n"
    "                     package's draws: torch's generator is not reproduced)\n"
    "  --text-out FILE    the transcript: Moshi's text tokens (all but the padding ids 0 and 3)\n"
    "                     as SentencePiece's DecodeIds gives them, then a newline\n"
    "  --tokenizer PATH   the SentencePiece .model file, or the checkpoint directory holding\n"
    "                     its tokenizer_name (default: what speechc build copied into\n"
    "                     model.tokenizer/)\n"
    "  -q                 no text on stderr (it is printed as it comes when a tokenizer is found)\n"
    "  --threads N        kernel threads (default 0 = one per physical core)\n";

/* What the row callback writes: the rows to --codes-out, the text ids. */
typedef struct Run {
  FILE *f;
  int n_rows, quiet;
  const sc_spm *spm;
  int32_t *text;  /* [cap]: the text ids, padding removed */
  size_t n_text, cap;
  size_t shown;   /* bytes of the decode already on stderr */
  int rc;         /* an error inside the callback (stops the push) */
  sc_error *err;
} Run;

/* Print what the decode of the ids so far adds to the text on stderr (at
 * the end: everything, the last bytes included).  The decode of more ids
 * starts with the decode of fewer, except that trailing byte pieces that
 * are not yet a whole character are U+FFFD: those are held back. */
static int show(Run *r, int final) {
  if (!r->n_text || (!final && sc_spm_is_byte(r->spm, r->text[r->n_text - 1]))) return SC_OK;
  char *t;
  size_t len;
  if (sc_spm_decode(r->spm, r->text, r->n_text, &t, &len, r->err)) return r->err->code;
  if (len > r->shown) fwrite(t + r->shown, 1, len - r->shown, stderr);
  if (final && len) fputc('\n', stderr);
  fflush(stderr);
  r->shown = len;
  free(t);
  return SC_OK;
}

static int on_row(void *user, const int32_t *row, int n_row, int step) {
  Run *r = user;
  fprintf(r->f, "%s\n  [", r->n_rows++ ? "," : "");
  for (int k = 0; k < n_row; k++) fprintf(r->f, "%s%d", k ? ", " : "", row[k]);
  fputc(']', r->f);
  if (!r->spm || row[0] == 0 || row[0] == 3) return 0;
  if (row[0] >= sc_spm_size(r->spm)) {
    r->rc = sc_fail(r->err, SC_EINPUT, "step %d: text token %d is outside the SentencePiece model's %d pieces "
                    "(hint: is --tokenizer the checkpoint's tokenizer_name?)", step, row[0], sc_spm_size(r->spm));
    return 1;
  }
  if (r->n_text == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 256;
    int32_t *p = realloc(r->text, sizeof *p * cap);
    if (!p) {
      r->rc = sc_fail(r->err, SC_ERUNTIME, "out of memory");
      return 1;
    }
    r->text = p, r->cap = cap;
  }
  r->text[r->n_text++] = row[0];
  if (!r->quiet && (r->rc = show(r, 0))) return 1;
  return 0;
}

/* The SentencePiece model for the text: --tokenizer (a file, or a directory
 * holding the config's tokenizer_name), else model.tokenizer/<name>.  A
 * model that is not there is an error only when the transcript is asked
 * for (*out stays NULL: no text on stderr). */
static int find_spm(const sc_model *m, const char *model, const char *given, int needed, sc_spm **out,
                    sc_error *err) {
  *out = NULL;
  sc_model_info mi;
  sc_model_get_info(m, &mi);
  cJSON *c = cJSON_Parse(mi.config_json);
  const cJSON *tn = cJSON_GetObjectItemCaseSensitive(c, "tokenizer_name");
  char name[256], path[4096], dir[4096];
  snprintf(name, sizeof name, "%s", cJSON_IsString(tn) ? tn->valuestring : TOK_MOSHI_SPM_DEFAULT);
  cJSON_Delete(c);
  struct stat st;
  if (given && !(stat(given, &st) == 0 && S_ISDIR(st.st_mode))) return sc_spm_load(given, out, err);
  if (given) snprintf(path, sizeof path, "%s/%s", given, name);
  else if (tok_dir_of(model, dir, sizeof dir) || snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
    return sc_fail(err, SC_EUSAGE, "%s: path too long", model);
  if (!given && !needed && access(path, F_OK)) return SC_OK;
  if (!given && access(path, F_OK))
    return sc_fail(err, SC_EINPUT, "%s: no SentencePiece model for --text-out (speechc build copies the checkpoint's "
                   "tokenizer_name there when the checkpoint has it; hint: --tokenizer FILE)", path);
  return sc_spm_load(path, out, err);
}

/* What sc_moshi_push_pcm hands back: the row to run (codes-out, text) as
 * with --user-codes, the audio to the WAV. */
typedef struct Duplex {
  Run *run;
  sc_wav *w;
  int rc;
  sc_error *err;
} Duplex;

static int on_audio(void *user, const int32_t *row, int n_row, const float *pcm, int n_pcm, int step) {
  Duplex *d = user;
  if (on_row(d->run, row, n_row, step)) {
    d->rc = d->run->rc;
    return 1;
  }
  return (d->rc = sc_wav_write(d->w, pcm, (size_t)n_pcm, d->err)) != SC_OK;
}

/* The Mimi that encodes and decodes a duplex run: --mimi, else the one
 * speechc build writes beside the model (model.codec.so). */
static int open_mimi(const char *model, const char *mimi, int threads, sc_model **cm, sc_codec_info *ci,
                     sc_error *err) {
  char path[4096];
  if (!mimi) {
    if (sc_codec_path(model, path, sizeof path)) return sc_fail(err, SC_EUSAGE, "%s: path too long", model);
    mimi = path;
  }
  sc_open_opts opts = {.verify_weights = 1, .threads = threads};
  int rc = sc_model_open(mimi, &opts, cm, err);
  if (rc && mimi == path)
    snprintf(err->msg + strlen(err->msg), sizeof err->msg - strlen(err->msg),
             " (hint: speechc build of a Moshi checkpoint writes its Mimi there; or name one with --mimi)");
  if (!rc) rc = sc_codec_get_info(*cm, ci, err);
  return rc;
}

/* The user's WAV at the Mimi's rate, mono, and its whole frames (samples
 * past the last are dropped, as run_inference drops them: noted unless
 * quiet). */
static int read_input(const char *in, const sc_codec_info *ci, int quiet, sc_wav_audio *audio, size_t *frames,
                      sc_error *err) {
  const int spf = ci->samples_per_frame;
  int rc = sc_wav_read(in, audio, err);
  if (!rc) rc = sc_wav_expect(audio, in, ci->sample_rate, 1, err);
  *frames = rc ? 0 : audio->frames / (size_t)spf;
  if (!rc && !*frames)
    rc = sc_fail(err, SC_EINPUT, "%s: %zu samples, less than one frame of %d", in, audio->frames, spf);
  if (!rc && audio->frames % (size_t)spf && !quiet)
    fprintf(stderr, "speechc: note: %s: the last %zu samples are not a whole frame of %d and are dropped (as "
            "run_inference drops them)\n", in, audio->frames % (size_t)spf, spf);
  /* a float WAV may hold NaN or inf: refused here, naming the file,
   * before any output is written */
  for (size_t i = 0; !rc && i < *frames * (size_t)spf; i++)
    if (!(audio->pcm[i] - audio->pcm[i] == 0.0f))
      rc = sc_fail(err, SC_EINPUT, "%s: sample %zu (%.3f s) is not finite (%g): Mimi encodes finite samples only",
                   in, i, (double)i / ci->sample_rate, (double)audio->pcm[i]);
  return rc;
}

/* A conversation of `frames` user frames must fit the model's steps (a
 * WAV's first frame is stepped twice, as run_inference does) and, with a
 * Mimi (cm), its encode and decode streams of `frames` each: checked
 * before any work, so
 * that a long input is refused at once, not at the context's end. */
static int fits(const char *in, size_t frames, const sc_model *m, const sc_model *cm, sc_error *err) {
  sc_model_info mi;
  sc_model_get_info(m, &mi);
  const size_t steps = frames + (cm ? 1 : 0);
  if (steps > (size_t)mi.max_context)
    return sc_fail(err, SC_EUSAGE, "%s: %zu frames make %zu steps, more than the model's context of %d (hint: "
                   "rebuild it with --max-context %zu or more)", in, frames, steps, mi.max_context, steps);
  if (!cm) return SC_OK;
  /* the Mimi encodes the frames, and decodes at most as many rows (the
   * doubled first step's is dropped) */
  sc_model_get_info(cm, &mi);
  if (frames > (size_t)mi.max_context)
    return sc_fail(err, SC_EUSAGE, "%s: %zu frames, more than the Mimi's stream of %d holds (hint: rebuild the "
                   "Mimi with --max-context %zu or more)", in, frames, mi.max_context, frames);
  return SC_OK;
}

/* run_inference over a WAV (sc_moshi_push_pcm: encode a frame, step, the
 * first frame twice, decode what each step returns), written as it comes. */
static int duplex(const sc_model *m, sc_moshi *g, const char *model, const char *mimi, const char *in,
                  const char *out, int f32, int threads, Run *run, sc_error *err) {
  sc_model *cm = NULL;
  sc_session *cs = NULL;
  sc_codec_info ci = {0};
  sc_wav_audio audio = {0};
  sc_wav *w = NULL;
  size_t frames = 0;
  int rc = open_mimi(model, mimi, threads, &cm, &ci, err);
  if (!rc) rc = sc_session_open(cm, &cs, err);
  if (!rc) rc = read_input(in, &ci, run->quiet, &audio, &frames, err);
  if (!rc) rc = fits(in, frames, m, cm, err);
  if (!rc) {
    sc_wav_opts wo = sc_wav_opts_for(out);
    wo.sample_rate = ci.sample_rate;
    if (f32) wo.format = SC_WAV_F32;
    rc = sc_wav_open(out, &wo, &w, err);
  }
  Duplex d = {.run = run, .w = w, .err = err};
  if (!rc) rc = sc_moshi_push_pcm(g, cs, audio.pcm, (int)frames, on_audio, &d, NULL, err);
  if (!rc) rc = d.rc;
  const int crc = sc_wav_close(w, err);
  if (!rc) rc = crc;
  sc_wav_audio_free(&audio);
  sc_session_close(cs);
  sc_model_close(cm);
  return rc;
}

/* A sampling flag given on the command line, over the checkpoint's value. */
typedef struct Over {
  int set;
  double v;
} Over;

/* --text-out: the transcript of a run's text ids, then a newline. */
static int write_text(const sc_spm *spm, const Run *run, const char *path, sc_error *err) {
  char *t = NULL;
  size_t len = 0;
  FILE *tf = NULL;
  int rc = sc_spm_decode(spm, run->text, run->n_text, &t, &len, err);
  if (!rc && !(tf = strcmp(path, "-") ? fopen(path, "w") : stdout))
    rc = sc_fail(err, SC_EINPUT, "%s: cannot write: %s", path, strerror(errno));
  if (!rc && (fwrite(t, 1, len, tf) != len || fputc('\n', tf) == EOF))
    rc = sc_fail(err, SC_EINPUT, "%s: write failed", path);
  if (tf && tf != stdout && fclose(tf) && !rc) rc = sc_fail(err, SC_EINPUT, "%s: write failed", path);
  free(t);
  return rc;
}

#define MAX_CONVERSATIONS 256

/* Several conversations (the file's comment): ins[i] -> outs[i] (and
 * texts[i] when texts), each with the parameters p. */
static int several(sc_model *m, const sc_moshi_params *p, const char *model, const char *tokenizer, const char **ins,
                   const char **outs, const char **texts, int n, sc_error *err) {
  sc_session *s[MAX_CONVERSATIONS] = {0};
  sc_moshi *g[MAX_CONVERSATIONS] = {0};
  Codes codes[MAX_CONVERSATIONS] = {0};
  Run run[MAX_CONVERSATIONS] = {0};
  int at[MAX_CONVERSATIONS] = {0};
  sc_moshi_info info = {0};
  sc_moshi_batch *b = NULL;
  sc_spm *spm = NULL;
  int32_t *user = NULL, *rows = NULL;
  int *has = NULL;
  int rc = sc_moshi_batch_new(m, &b, err);
  for (int i = 0; !rc && i < n; i++) {
    rc = sc_session_open(m, &s[i], err);
    if (!rc) rc = sc_moshi_open(s[i], p, &g[i], &info, err);
  }
  if (!rc && (texts || tokenizer)) rc = find_spm(m, model, tokenizer, 1, &spm, err);
  if (!rc && spm && sc_spm_size(spm) < info.text_card)
    rc = sc_fail(err, SC_EINPUT, "the SentencePiece model has %d pieces, fewer than the model's text_card %d "
                 "(hint: is --tokenizer the checkpoint's tokenizer_name?)", sc_spm_size(spm), info.text_card);
  const int U = info.user_codebooks, W = 1 + info.dep_q;
  for (int i = 0; !rc && i < n; i++) {
    CodesSpec spec = {.codebooks = U, .vocab = info.card};
    rc = codes_read(ins[i], CODES_AUTO, &spec, &codes[i], err);
    if (!rc) rc = fits(ins[i], (size_t)codes[i].frames, m, NULL, err);
    run[i] = (Run){.quiet = 1, .spm = texts ? spm : NULL, .err = err};
    if (!rc && !(run[i].f = strcmp(outs[i], "-") ? fopen(outs[i], "w") : stdout))
      rc = sc_fail(err, SC_EINPUT, "%s: cannot write: %s", outs[i], strerror(errno));
    if (!rc) fputs("{\"tokens\": [", run[i].f);
    if (!rc && codes[i].frames > 0) rc = sc_moshi_batch_add(b, g[i], err);
  }
  if (!rc && (!(user = malloc(sizeof *user * (size_t)n * (size_t)(U ? U : 1))) ||
              !(rows = malloc(sizeof *rows * (size_t)n * (size_t)W)) || !(has = malloc(sizeof *has * (size_t)n))))
    rc = sc_fail(err, SC_ERUNTIME, "out of memory");
  int who[MAX_CONVERSATIONS];
  while (!rc && sc_moshi_batch_size(b) > 0) {
    const int nb = sc_moshi_batch_size(b);
    for (int j = 0; j < nb; j++) {
      int i = 0;
      while (g[i] != sc_moshi_batch_get(b, j)) i++;
      who[j] = i;
      memcpy(user + (size_t)j * U, codes[i].codes + (size_t)at[i] * U, sizeof *user * (size_t)U);
    }
    if ((rc = sc_moshi_batch_step(b, user, rows, has, err))) {
      /* "generator j of the batch: ..." names conversation who[j]'s file */
      char msg[sizeof err->msg];
      int j = -1, len = 0;
      if (sscanf(err->msg, "generator %d of the batch: %n", &j, &len) == 1 && len > 0 && j >= 0 && j < nb)
        snprintf(msg, sizeof msg, "%s: %.900s", ins[who[j]], err->msg + len);
      else
        snprintf(msg, sizeof msg, "%d conversations stepped together: %.900s", nb, err->msg);
      sc_fail(err, rc, "%s", msg);
      break;
    }
    for (int j = 0; j < nb && !rc; j++) {
      const int i = who[j], step = at[i]++;
      if (has[j] && on_row(&run[i], rows + (size_t)j * W, W, step)) rc = run[i].rc;
      if (at[i] == codes[i].frames) sc_moshi_batch_remove(b, g[i]);
    }
  }
  for (int i = 0; i < n; i++) {
    if (!rc && run[i].f) fputs("\n]}\n", run[i].f);
    if (run[i].f && run[i].f != stdout && fclose(run[i].f) && !rc)
      rc = sc_fail(err, SC_EINPUT, "%s: write failed", outs[i]);
    if (!rc && texts) rc = write_text(spm, &run[i], texts[i], err);
    free(run[i].text);
    codes_free(&codes[i]);
    sc_moshi_close(g[i]);
    sc_session_close(s[i]);
  }
  sc_moshi_batch_free(b);
  sc_spm_free(spm);
  free(user);
  free(rows);
  free(has);
  return rc;
}

/* Several duplex conversations (the file's comment): wavs[i] in, replies[i]
 * out (and outs[i] / texts[i] when given), each as duplex() runs it alone
 * (sc_moshi_push_pcm's loop: encode a frame, the first frame stepped
 * twice, decode each returned row), the Moshi steps batched, each
 * conversation's Mimi a session of its own. */
static int several_audio(sc_model *m, const sc_moshi_params *p, const char *model, const char *tokenizer,
                         const char *mimi, const char **wavs, const char **replies, const char **outs,
                         const char **texts, int n, int f32, int threads, int quiet, sc_error *err) {
  sc_session *s[MAX_CONVERSATIONS] = {0}, *cs[MAX_CONVERSATIONS] = {0};
  sc_moshi *g[MAX_CONVERSATIONS] = {0};
  sc_wav_audio audio[MAX_CONVERSATIONS] = {0};
  sc_wav *w[MAX_CONVERSATIONS] = {0};
  Run run[MAX_CONVERSATIONS] = {0};
  size_t frames[MAX_CONVERSATIONS] = {0};
  int who[MAX_CONVERSATIONS];
  sc_moshi_info info = {0};
  sc_codec_info ci = {0};
  sc_model *cm = NULL;
  sc_moshi_batch *b = NULL;
  sc_spm *spm = NULL;
  int32_t *user = NULL, *rows = NULL;
  int *has = NULL;
  float *pcm = NULL;
  int rc = open_mimi(model, mimi, threads, &cm, &ci, err);
  if (!rc) rc = sc_moshi_batch_new(m, &b, err);
  for (int i = 0; !rc && i < n; i++) {
    rc = sc_session_open(m, &s[i], err);
    if (!rc) rc = sc_moshi_open(s[i], p, &g[i], &info, err);
    if (!rc) rc = sc_session_open(cm, &cs[i], err);
  }
  if (!rc && (!ci.can_encode || ci.n_codebooks != info.user_codebooks || ci.n_codebooks != info.dep_q ||
              ci.codebook_size != info.card))
    rc = sc_fail(err, SC_EINPUT, "%s: the Mimi gives %d codebooks of %d entries%s, but the model reads %d user "
                 "codebooks and writes %d, of %d entries", mimi, ci.n_codebooks, ci.codebook_size,
                 ci.can_encode ? "" : " and has no encoder", info.user_codebooks, info.dep_q, info.card);
  if (!rc && (texts || tokenizer)) rc = find_spm(m, model, tokenizer, 1, &spm, err);
  const int spf = ci.samples_per_frame, U = info.user_codebooks, W = 1 + info.dep_q;
  for (int i = 0; !rc && i < n; i++) {
    rc = read_input(wavs[i], &ci, quiet, &audio[i], &frames[i], err);
    if (!rc) rc = fits(wavs[i], frames[i], m, cm, err);
    run[i] = (Run){.quiet = 1, .spm = texts ? spm : NULL, .err = err};
    if (!rc && !(run[i].f = outs ? (strcmp(outs[i], "-") ? fopen(outs[i], "w") : stdout) : fopen("/dev/null", "w")))
      rc = sc_fail(err, SC_EINPUT, "%s: cannot write: %s", outs ? outs[i] : "/dev/null", strerror(errno));
    if (!rc) fputs("{\"tokens\": [", run[i].f);
    if (!rc) {
      sc_wav_opts wo = sc_wav_opts_for(replies[i]);
      wo.sample_rate = ci.sample_rate;
      if (f32) wo.format = SC_WAV_F32;
      rc = sc_wav_open(replies[i], &wo, &w[i], err);
    }
    if (!rc) rc = sc_moshi_batch_add(b, g[i], err);
  }
  if (!rc && (!(user = malloc(sizeof *user * (size_t)n * (size_t)U)) ||
              !(rows = malloc(sizeof *rows * (size_t)n * (size_t)W)) || !(has = malloc(sizeof *has * (size_t)n)) ||
              !(pcm = malloc(sizeof *pcm * (size_t)spf))))
    rc = sc_fail(err, SC_ERUNTIME, "out of memory");
  for (size_t t = 0; !rc && sc_moshi_batch_size(b) > 0; t++) {
    const int nb = sc_moshi_batch_size(b);
    for (int j = 0; j < nb && !rc; j++) {
      int i = 0;
      while (g[i] != sc_moshi_batch_get(b, j)) i++;
      who[j] = i;
      rc = sc_codec_encode(cs[i], audio[i].pcm + t * (size_t)spf, 1, user + (size_t)j * U, err);
    }
    /* run_inference steps a stream's first frame twice, the first result dropped */
    if (!rc && !t) rc = sc_moshi_batch_step(b, user, rows, has, err);
    if (!rc) rc = sc_moshi_batch_step(b, user, rows, has, err);
    for (int j = 0; j < nb && !rc; j++) {
      const int i = who[j];
      if (has[j]) {
        if (on_row(&run[i], rows + (size_t)j * W, W, (int)t + 1)) rc = run[i].rc;
        if (!rc) rc = sc_codec_decode(cs[i], rows + (size_t)j * W + 1, 1, pcm, err);
        if (!rc) rc = sc_wav_write(w[i], pcm, (size_t)spf, err);
      }
      if (!rc && t + 1 == frames[i]) sc_moshi_batch_remove(b, g[i]);
    }
  }
  for (int i = 0; i < n; i++) {
    if (!rc && run[i].f) fputs("\n]}\n", run[i].f);
    if (run[i].f && run[i].f != stdout && fclose(run[i].f) && !rc)
      rc = sc_fail(err, SC_EINPUT, "%s: write failed", outs ? outs[i] : "/dev/null");
    const int crc = w[i] ? sc_wav_close(w[i], err) : SC_OK;
    if (!rc) rc = crc;
    if (!rc && texts) rc = write_text(spm, &run[i], texts[i], err);
    free(run[i].text);
    sc_wav_audio_free(&audio[i]);
    sc_moshi_close(g[i]);
    sc_session_close(s[i]);
    sc_session_close(cs[i]);
  }
  sc_moshi_batch_free(b);
  sc_model_close(cm);
  sc_spm_free(spm);
  free(user);
  free(rows);
  free(has);
  free(pcm);
  return rc;
}

int cmd_moshi(int argc, char **argv) {
  const char *model = NULL, *in = NULL, *out = NULL, *text_out = NULL, *tokenizer = NULL, *v;
  const char *ins[MAX_CONVERSATIONS], *outs[MAX_CONVERSATIONS], *texts[MAX_CONVERSATIONS];
  int n_in = 0, n_out = 0, n_text = 0;
  const char *inputs[MAX_CONVERSATIONS], *aouts[MAX_CONVERSATIONS];
  int n_input = 0, n_aout = 0;
  char msg[300];
  const char *input = NULL, *audio_out = NULL, *mimi = NULL;
  int greedy = 0, quiet = 0, f32 = 0;
  long threads = 0, lv;
  uint64_t seed_u = 0;
  Over temp = {0}, temp_text = {0}, top_k = {0}, top_k_text = {0}, seed = {0};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_moshi, stdout); return 0; }
    if ((is_flag(a, "--user-codes") || is_flag(a, "--codes-out") || is_flag(a, "--text-out")) &&
        (v = flag_value(argc, argv, &i, is_flag(a, "--user-codes") ? "--user-codes"
                                        : is_flag(a, "--codes-out") ? "--codes-out" : "--text-out"))) {
      const char kind = a[2]; /* u, c or t */
      int *k = kind == 'u' ? &n_in : kind == 'c' ? &n_out : &n_text;
      if (*k == MAX_CONVERSATIONS) {
        snprintf(msg, sizeof msg, "more than %d conversations (%s)", MAX_CONVERSATIONS, a);
        return usage_error(usage_moshi, "%s", msg);
      }
      (kind == 'u' ? ins : kind == 'c' ? outs : texts)[(*k)++] = v;
      if (kind == 'u') in = v;
      else if (kind == 'c') out = v;
      else text_out = v;
    }
    else if ((v = flag_value(argc, argv, &i, "--tokenizer"))) tokenizer = v;
    else if ((v = flag_value(argc, argv, &i, "--input"))) {
      if (n_input == MAX_CONVERSATIONS) return usage_error(usage_moshi, "%s", "too many --input");
      inputs[n_input++] = input = v;
    }
    else if ((v = flag_value(argc, argv, &i, "--mimi"))) mimi = v;
    else if (!strcmp(a, "-o") || ((v = flag_value(argc, argv, &i, "--output")))) {
      if (!strcmp(a, "-o")) {
        if (i + 1 >= argc) return usage_error(usage_moshi, "%s", "-o needs a path");
        v = argv[++i];
      }
      if (n_aout == MAX_CONVERSATIONS) return usage_error(usage_moshi, "%s", "too many -o");
      aouts[n_aout++] = audio_out = v;
    }
    else if (!strcmp(a, "--f32")) f32 = 1;
    else if (!strcmp(a, "--greedy")) greedy = 1;
    else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) quiet = 1;
    else if (is_flag(a, "--temp-text") || is_flag(a, "--temp")) {
      const char *f = is_flag(a, "--temp") ? "--temp" : "--temp-text";
      Over *o = f[6] ? &temp_text : &temp;
      if (parse_float(f, flag_value(argc, argv, &i, f), 0, 100, &o->v)) return SC_EUSAGE;
      o->set = 1;
    } else if (is_flag(a, "--top-k-text") || is_flag(a, "--top-k")) {
      const char *f = is_flag(a, "--top-k") ? "--top-k" : "--top-k-text";
      Over *o = f[7] ? &top_k_text : &top_k;
      if (parse_int(f, flag_value(argc, argv, &i, f), 0, INT_MAX, &lv)) return SC_EUSAGE;
      o->v = (double)lv, o->set = 1;
    } else if (is_flag(a, "--seed")) {
      if (parse_int("--seed", flag_value(argc, argv, &i, "--seed"), 0, LONG_MAX, &lv)) return SC_EUSAGE;
      seed.v = (double)lv, seed.set = 1;
      seed_u = (uint64_t)lv;
    }
    else if (is_flag(a, "--threads")) {
      if (parse_int("--threads", flag_value(argc, argv, &i, "--threads"), 0, 1024, &threads)) return SC_EUSAGE;
    } else if (a[0] == '-' && a[1]) return usage_error(usage_moshi, "unknown option '%s'", a);
    else if (!model) model = a;
    else return usage_error(usage_moshi, "unexpected argument '%s'", a);
  }
  if (!model) return usage_error(usage_moshi, "%s", "missing model.so");
  if (input && in) return usage_error(usage_moshi, "%s", "--input and --user-codes are two ways in: give one");
  if (input && !audio_out) return usage_error(usage_moshi, "%s", "--input needs -o for the reply audio");
  if (!input && (audio_out || mimi || f32))
    return usage_error(usage_moshi, "%s", "-o, --mimi and --f32 go with --input (codes in, codes out: --codes-out)");
  if (!input && (!in || !out))
    return usage_error(usage_moshi, "%s", "--user-codes FILE and --codes-out FILE are needed (or --input WAV -o OUT)");
  /* several conversations: --user-codes / --codes-out pairs, or --input /
   * -o pairs (each with a --codes-out, or none); as many --text-out, or none */
  const int n_conv = input ? n_input : n_in;
  if (n_in > 1 || n_out > 1 || n_text > 1 || n_input > 1 || n_aout > 1) {
    if (input && n_aout != n_input) {
      snprintf(msg, sizeof msg, "%d --input but %d -o: give one reply per conversation", n_input, n_aout);
      return usage_error(usage_moshi, "%s", msg);
    }
    if (!input && n_out != n_in) {
      snprintf(msg, sizeof msg, "%d --user-codes but %d --codes-out: give one output per conversation", n_in, n_out);
      return usage_error(usage_moshi, "%s", msg);
    }
    if (input && n_out && n_out != n_input) {
      snprintf(msg, sizeof msg, "%d conversations but %d --codes-out: give one per conversation, or none", n_input,
               n_out);
      return usage_error(usage_moshi, "%s", msg);
    }
    if (n_text && n_text != n_conv) {
      snprintf(msg, sizeof msg, "%d conversations but %d --text-out: give one per conversation, or none", n_conv,
               n_text);
      return usage_error(usage_moshi, "%s", msg);
    }
    /* every file written, once */
    const char *all[3 * MAX_CONVERSATIONS];
    int n_all = 0;
    for (int i = 0; i < n_out; i++) all[n_all++] = outs[i];
    for (int i = 0; i < n_text; i++) all[n_all++] = texts[i];
    for (int i = 0; input && i < n_aout; i++) all[n_all++] = aouts[i];
    for (int i = 0; i < n_all; i++)
      for (int j = 0; j < i; j++)
        if (!strcmp(all[i], all[j]) && strcmp(all[i], "-")) {
          snprintf(msg, sizeof msg, "two outputs write the same file '%s'", all[i]);
          return usage_error(usage_moshi, "%s", msg);
        }
  }
  sc_error err = {0};
  sc_model *m = NULL;
  sc_session *s = NULL;
  sc_moshi *g = NULL;
  sc_moshi_info info;
  Codes codes = {0};
  FILE *f = NULL;
  sc_open_opts opts = {.verify_weights = 1, .threads = (int)threads};
  int rc = sc_model_open(model, &opts, &m, &err);
  if (!rc) rc = sc_session_open(m, &s, &err);
  sc_moshi_params p;
  if (!rc) rc = sc_moshi_defaults(m, &p, &err);
  if (!rc) {
    p.greedy |= greedy;
    if (temp.set) p.temp = (float)temp.v;
    if (temp_text.set) p.temp_text = (float)temp_text.v;
    if (top_k.set) p.top_k = (int)top_k.v;
    if (top_k_text.set) p.top_k_text = (int)top_k_text.v;
    if (seed.set) p.seed = seed_u;
    if (n_conv > 1) {
      rc = input ? several_audio(m, &p, model, tokenizer, mimi, inputs, aouts, n_out ? outs : NULL,
                                 n_text ? texts : NULL, n_input, f32, (int)threads, quiet, &err)
                 : several(m, &p, model, tokenizer, ins, outs, n_text ? texts : NULL, n_in, &err);
      sc_session_close(s);
      sc_model_close(m);
      return report(rc, &err);
    }
    rc = sc_moshi_open(s, &p, &g, &info, &err);
  }
  sc_spm *spm = NULL;
  if (!rc && (text_out || tokenizer || !quiet)) rc = find_spm(m, model, tokenizer, text_out || tokenizer, &spm, &err);
  if (!rc && spm && sc_spm_size(spm) < info.text_card)
    rc = sc_fail(&err, SC_EINPUT, "the SentencePiece model has %d pieces, fewer than the model's text_card %d "
                 "(hint: is --tokenizer the checkpoint's tokenizer_name?)", sc_spm_size(spm), info.text_card);
  if (!rc && in) {
    CodesSpec spec = {.codebooks = info.user_codebooks, .vocab = info.card};
    rc = codes_read(in, CODES_AUTO, &spec, &codes, &err);
    if (!rc) rc = fits(in, (size_t)codes.frames, m, NULL, &err);
  }
  if (!rc && out && !(f = strcmp(out, "-") ? fopen(out, "w") : stdout))
    rc = sc_fail(&err, SC_EINPUT, "%s: cannot write: %s", out, strerror(errno));
  if (!rc && !f && !(f = fopen("/dev/null", "w"))) rc = sc_fail(&err, SC_ERUNTIME, "/dev/null: %s", strerror(errno));
  Run run = {.f = f, .quiet = quiet, .spm = spm, .err = &err};
  if (!rc) {
    fputs("{\"tokens\": [", f);
    if (input) rc = duplex(m, g, model, mimi, input, audio_out, f32, (int)threads, &run, &err);
    else rc = sc_moshi_push(g, codes.codes, codes.frames, on_row, &run, NULL, &err);
    if (!rc) rc = run.rc;
    if (!rc) fputs("\n]}\n", f);
  }
  if (f && f != stdout && fclose(f) && !rc) rc = sc_fail(&err, SC_EINPUT, "%s: write failed", out ? out : "/dev/null");
  if (!rc && spm && !quiet) rc = show(&run, 1);
  if (!rc && text_out) rc = write_text(spm, &run, text_out, &err);
  free(run.text);
  sc_spm_free(spm);
  codes_free(&codes);
  sc_moshi_close(g);
  if (s) sc_session_close(s);
  if (m) sc_model_close(m);
  return report(rc, &err);
}
