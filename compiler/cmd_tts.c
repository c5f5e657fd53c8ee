/*
 * cmd_tts.c — `speechc tts`: Qwen3-TTS speech from text: the talker and code
 * predictor make codec frames, the codec decoder (OUT.codec.so, built with
 * the model) turns each into audio as soon as it is made, written to a WAV
 * file or a pipe (runtime/wav.h); or the codes themselves.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "codes.h"
#include "file.h"
#include "speechc.h"
#include "tts_text.h"
#include "wav.h"

const char *const usage_tts =
    "usage: speechc tts model.so --text TEXT --tokenizer DIR -o out.wav [options]\n"
    "       speechc tts model.so --text-ids LIST|FILE -o out.wav|-|codes.json|codes.bin\n"
    "\n"
    "Runs the Qwen3-TTS talker and code predictor as the official qwen-tts package does,\n"
    "and decodes each codec frame to 24 kHz audio with the checkpoint's codec decoder as\n"
    "soon as it is made (speechc build of a checkpoint with speech_tokenizer/ writes it\n"
    "beside the model as model.codec.so), so a pipe hears the start while the rest is\n"
    "generated.  Or writes the [frames x 16] matrix of codec ids (.json, .bin).\n"
    "\n"
    "  --text-ids LIST|FILE    ids of '<|im_start|>assistant\\n{text}<|im_end|>\\n<|im_start|>\n"
    "                          assistant\\n': a value of only digits, commas and spaces is\n"
    "                          the list itself (\"1,2,3\", \"1 2 3\"); anything else names a\n"
    "                          file of ids separated by commas, spaces or newlines (\"./5\" for\n"
    "                          a file named 5), or a pipe: /dev/stdin, <(...), read to its end\n"
    "  --instruct-ids LIST|FILE  ids of '<|im_start|>user\\n{instruct}<|im_end|>\\n' (the same\n"
    "                          forms)\n"
    "  --text TEXT             the text: tokenized in that template by the tokenizer in\n"
    "                          --tokenizer DIR (speechc tokenize; instead of --text-ids)\n"
    "  --instruct TEXT         the instruction, in its template (instead of --instruct-ids;\n"
    "                          '' is none; a 0.6B CustomVoice model drops it, as qwen-tts does)\n"
    "  --tokenizer DIR         vocab.json + merges.txt (+ tokenizer_config.json) or\n"
    "                          tokenizer.json: the checkpoint directory (default:\n"
    "                          model.tokenizer/ beside model.so, which speechc build\n"
    "                          copies from a checkpoint that has one)\n"
    "  --speaker NAME          a speaker of the model's config (custom-voice models)\n"
    "  --language NAME|auto    a language of the model's config, any case, not a dialect (a\n"
    "                          dialect comes with its speaker; default auto)\n"
    "  --non-streaming         all text in the prompt (the official custom-voice and\n"
    "                          voice-design path); default: streaming text, one per frame\n"
    "  --max-frames N          stop after N frames (12.5 frames = 1 s); default 2048 (or the\n"
    "                          checkpoint's generation_config.json max_new_tokens), or as\n"
    "                          many as the model's --max-context holds after the prompt\n"
    "                          (a warning says when speech stopped there); more than it\n"
    "                          holds is refused before anything runs\n"
    "  --greedy                argmax for both talker and predictor\n"
    "  --sample                sample both, where generation_config.json says do_sample or\n"
    "                          subtalker_dosample false (the default samples)\n"
    "  --temperature T --top-k K --top-p P --repetition-penalty R\n"
    "                          talker sampling (defaults 0.9, 50, 1.0, 1.05)\n"
    "  --sub-temperature T --sub-top-k K --sub-top-p P\n"
    "                          code predictor sampling (defaults 0.9, 50, 1.0)\n"
    "                          (a default the checkpoint's generation_config.json sets is\n"
    "                          its value, as in qwen-tts: do_sample, top_k, top_p,\n"
    "                          temperature, repetition_penalty, subtalker_*)\n"
    "  --seed S                sampler seed (default 0): same seed, same frames\n"
    "  -o PATH                 .wav: audio, 16-bit PCM (--f32: float); .raw/.pcm: bare\n"
    "                          s16le; -: bare s16le on stdout (| aplay -f S16_LE -r 24000\n"
    "                          -c 1) when a codec decoder is there, else the codes as JSON;\n"
    "                          .json: {\"frames\": N, \"codebooks\": 16, \"codes\": [[...]]};\n"
    "                          .bin: little-endian int32, row-major [frames, codebooks]\n"
    "  --codec PATH            the codec decoder (default: model.codec.so beside model.so)\n"
    "  --codes PATH            also write the codes (.json or .bin) when -o is audio\n"
    "  --f32                   float32 WAV samples\n"
    "  --threads N             kernel threads of the talker and predictor (default 0 = one\n"
    "                          per physical core)\n"
    "  --decoder-threads N     kernel threads of the codec decoder, which runs on a thread of\n"
    "                          its own while the next frames are generated (default 0 = as\n"
    "                          --threads); after the first frame, two sides with more threads\n"
    "                          than cores keep a share each (the decoder half the cores)\n"
    "  --no-share              both sides keep all their threads (four threads on two cores)\n"
    "  --decoder-batch N       frames per decoder call, at most: a decoder that falls behind\n"
    "                          takes up to N queued frames at once (default 0 = the codec's\n"
    "                          --prefill-chunk; 1 = always one: the bits of --sequential)\n"
    "  --sequential            decode each frame before the next is generated, on one thread\n"
    "                          (the order before the decoder thread; for debugging)\n"
    "  -q                      no per-frame progress on stderr\n"
    "\n"
    "Several requests at once: give --text (or --text-ids) and -o once per request, in\n"
    "order; the other options apply to every request.  Their frames are made together\n"
    "(the batched step: each weight read once per step for all of them), and each output\n"
    "is what the same command with that one text writes with --decoder-batch 1.\n"
    "  --max-streams N         requests in the batch at once (default 16); the next one\n"
    "                          starts as soon as one ends\n";

#define IDS_MAX ((size_t)1 << 20) /* bytes of an ids file: ~150k ids */
#define MAX_REQUESTS 1024         /* --text / -o pairs of one command */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A value made only of digits, '-', commas, brackets and whitespace is a
 * list, always: "--text-ids 5" is the id 5 even when a file named 5 is in
 * the working directory.  Anything else names a file ("./5" is the file). */
static int is_list(const char *arg) {
  return arg[strspn(arg, "0123456789-,[] \t\r\n")] == '\0';
}

/* The ids file's text, NUL-terminated, in *text (malloc'd).  A regular
 * file or a pipe (a FIFO, /dev/stdin, bash's <(...)) is read to its end,
 * at most IDS_MAX bytes; the size is never taken from st_size, which is 0
 * for a pipe.  The open does not block, and a FIFO with no writer is
 * refused at once instead of waited on; one with a writer is waited on as
 * `cat` would.  A NUL byte is an error naming its offset. */
static int slurp_ids(const char *flag, const char *path, char **text) {
  *text = NULL;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    fprintf(stderr, "speechc: error: %s %s: cannot open: %s\n", flag, path, strerror(errno));
    return SC_EINPUT;
  }
  struct stat st;
  if (fstat(fd, &st)) {
    fprintf(stderr, "speechc: error: %s %s: cannot stat: %s\n", flag, path, strerror(errno));
    close(fd);
    return SC_EINPUT;
  }
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    fprintf(stderr, "speechc: error: %s %s: is a %s, expected a file of ids or a pipe\n", flag,
            path, sc_file_kind(st.st_mode));
    close(fd);
    return SC_EINPUT;
  }
  char *buf = malloc(IDS_MAX + 1);
  size_t n = 0;
  int rc = buf ? SC_OK : SC_ERUNTIME;
  while (!rc) {
    ssize_t r = read(fd, buf + n, IDS_MAX + 1 - n);
    if (r > 0) {
      n += (size_t)r;
      if (n > IDS_MAX) {
        fprintf(stderr, "speechc: error: %s %s: more than %zu bytes of ids\n", flag, path, IDS_MAX);
        rc = SC_EINPUT;
      }
    } else if (r == 0) {
      if (n == 0 && S_ISFIFO(st.st_mode)) {
        fprintf(stderr, "speechc: error: %s %s: a FIFO or pipe with no data: no process is "
                "writing to it\n", flag, path);
        rc = SC_EINPUT;
      }
      break;
    } else if (errno == EAGAIN) { /* a writer, no data yet */
      struct pollfd p = {.fd = fd, .events = POLLIN};
      poll(&p, 1, -1);
    } else if (errno != EINTR) {
      fprintf(stderr, "speechc: error: %s %s: read error: %s\n", flag, path, strerror(errno));
      rc = SC_EINPUT;
    }
  }
  close(fd);
  const char *nul = rc ? NULL : memchr(buf, '\0', n);
  if (nul) {
    fprintf(stderr, "speechc: error: %s %s: NUL byte at offset %zu (expected text: integers "
            "separated by commas, spaces or newlines)\n", flag, path, (size_t)(nul - buf));
    rc = SC_EINPUT;
  }
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *text = buf;
  return SC_OK;
}

/* A list (is_list), or the name of a file holding one: ids separated by
 * commas, spaces or newlines, optionally in [brackets]. */
static int read_ids(const char *flag, const char *arg, int32_t **ids, int *n) {
  char *text = NULL;
  if (is_list(arg)) {
    text = strdup(arg);
    if (!text) return SC_ERUNTIME;
  } else {
    int rc = slurp_ids(flag, arg, &text);
    if (rc) return rc;
  }
  /* normalise separators to commas */
  char *w = text;
  int sep = 0;
  for (char *r = text; *r; r++) {
    if (*r == ',' || *r == ' ' || *r == '\n' || *r == '\t' || *r == '\r' || *r == '[' || *r == ']') {
      sep = w != text;
    } else {
      if (sep) *w++ = ',';
      sep = 0;
      *w++ = *r;
    }
  }
  *w = 0;
  int rc = parse_ids(flag, text, ids, n);
  free(text);
  return rc;
}

/* on_frame runs on the generating thread and on_pcm on the decoder's:
 * they share nothing but `quiet` (read only). */
typedef struct Progress {
  int quiet;
  const char *out;    /* audio out: opened by on_start */
  sc_wav_opts wo;
  sc_wav *wav;        /* audio out, or NULL */
  sc_error err;       /* a write error (on_pcm's; never the generator's err) */
  int failed;
} Progress;

static int on_frame(void *user, const int32_t *codes, int g, int frame) {
  Progress *p = user;
  if (!p->quiet) fprintf(stderr, "\rspeechc: frame %d (c0 %d)", frame + 1, codes[0]);
  (void)g;
  return 0;
}

/* Each frame's audio goes out as soon as it is decoded (on the decoder
 * thread, while the next frames are generated); a write error stops both. */
static int on_pcm(void *user, const float *pcm, int n, int frame) {
  Progress *p = user;
  (void)frame;
  if (sc_wav_write(p->wav, pcm, (size_t)n, &p->err)) p->failed = 1;
  return p->failed;
}

/* The request is checked: the audio out is opened (truncated) now, not
 * before, so that a refused request leaves an existing file as it was. */
static int on_start(void *user, sc_error *err) {
  Progress *p = user;
  return p->out ? sc_wav_open(p->out, &p->wo, &p->wav, err) : SC_OK;
}

/* -o names audio: a WAV file or bare PCM (runtime/wav.h's conventions). */
static int audio_name(const char *out) {
  size_t n = strlen(out);
  static const char *const ext[] = {".wav", ".raw", ".pcm"};
  for (int i = 0; i < 3; i++)
    if (n > 4 && !strcasecmp(out + n - 4, ext[i])) return 1; /* any case (OUT.WAV), as codes_format_of */
  return 0;
}

/* ---- several requests: one batch ---------------------------------------- */

typedef struct Many {
  TtsText *tt;
  TtsSched *q;
  sc_tts_params p;          /* shared: sampling, speaker, language, instruct ids */
  const char *instruct_s;
  const char **texts, **outs;
  const int *is_ids;
  int n, next, f32, quiet;
  int frames_to_context;    /* no --max-frames: up to the context's end */
  pthread_mutex_t mu;       /* next, and the lines on stderr */
  int rc;                   /* the first error's code */
} Many;

/* A request that made as many frames as the contexts hold ran to their
 * end, not to the codec EOS: its speech may be cut. */
static void context_end_note(int frames, int request) {
  char which[32] = "";
  if (request) snprintf(which, sizeof which, "request %d: ", request);
  fprintf(stderr, "speechc: warning: %sstopped at the context's end after %d frames, before the model ended "
          "its speech (hint: rebuild with a larger --max-context for longer speech)\n", which, frames);
}

/* One request: its text or ids, its output (audio or codes) written as
 * the single-request command would. */
static int many_one(Many *m, TtsStream *ts, int i, sc_error *err) {
  const TtsTextInfo *ti = tts_text_info(m->tt);
  const char *out = m->outs[i];
  const int audio = audio_name(out);
  if (audio && !ti->has_codec)
    return sc_fail(err, SC_EUSAGE, "-o %s names audio but there is no codec decoder beside the model", out);
  char what[64];
  snprintf(what, sizeof what, "--text (request %d)", i + 1);
  sc_tts_stats st = {0};
  TtsTextRequest req = {.params = m->p, .text_what = what, .instruct = m->instruct_s,
                        .frames_to_context = m->frames_to_context};
  req.params.stats = &st;
  int32_t *ids = NULL;
  int rc = SC_OK;
  if (m->is_ids[i]) {
    rc = read_ids("--text-ids", m->texts[i], &ids, &req.params.n_text);
    if (rc) return sc_fail(err, rc, "--text-ids of request %d: unreadable (the line above says why)", i + 1);
    req.params.text_ids = ids;
  } else {
    req.text = m->texts[i];
  }
  Progress prog = {.quiet = 1};
  if (audio) {
    prog.out = out;
    prog.wo = sc_wav_opts_for(out);
    prog.wo.sample_rate = ti->sample_rate;
    if (m->f32) prog.wo.format = SC_WAV_F32;
    req.on_pcm = on_pcm;
    req.on_start = on_start;
    req.user = &prog;
  }
  int frames = 0;
  if (!rc) rc = tts_sched_speak(m->q, ts, &req, &frames, err);
  if (prog.failed && !rc) {
    *err = prog.err;
    rc = err->code;
  }
  sc_error werr = {0};
  if (prog.wav && sc_wav_close(prog.wav, &werr) && !rc) {
    *err = werr;
    rc = werr.code;
  }
  if (!rc && !audio) rc = codes_write(out, tts_stream_codes(ts), frames, ti->codebooks, err);
  pthread_mutex_lock(&m->mu); /* errors always; the progress lines unless -q */
  if (rc) fprintf(stderr, "speechc: request %d (-o %s): error: %s\n", i + 1, out, err->msg);
  else if (frames && frames == tts_stream_limited(ts)) context_end_note(frames, i + 1);
  if (!rc && !m->quiet)
    fprintf(stderr, "speechc: request %d: %d frames (%.2f s of audio) in %.3f s -> %s\n", i + 1, frames,
            frames / 12.5, st.wall_s, out);
  pthread_mutex_unlock(&m->mu);
  free(ids);
  return rc;
}

/* A worker: one stream, requests taken in order until none are left. */
static void *many_worker(void *arg) {
  Many *m = arg;
  TtsStream *ts = NULL;
  sc_error err = {0};
  int rc = tts_stream_open(m->tt, &ts, &err);
  for (;;) {
    pthread_mutex_lock(&m->mu);
    const int i = m->next < m->n ? m->next++ : -1;
    if (rc && !m->rc) {
      m->rc = rc;
      fprintf(stderr, "speechc: error: %s\n", err.msg);
    }
    pthread_mutex_unlock(&m->mu);
    if (i < 0 || rc) break;
    memset(&err, 0, sizeof err);
    const int r = many_one(m, ts, i, &err);
    pthread_mutex_lock(&m->mu);
    if (r && !m->rc) m->rc = r;
    pthread_mutex_unlock(&m->mu);
  }
  tts_stream_close(ts);
  return NULL;
}

static int tts_many(Many *m, int max_streams) {
  sc_error err = {0};
  const double t0 = now_s();
  int rc = tts_sched_open(m->tt, &m->q, &err);
  if (rc) return report(rc, &err);
  const int nw = m->n < max_streams ? m->n : max_streams;
  pthread_t *th = calloc((size_t)nw, sizeof *th);
  int started = 0;
  pthread_mutex_init(&m->mu, NULL);
  for (; th && started < nw; started++)
    if (pthread_create(&th[started], NULL, many_worker, m)) break;
  if (!started) m->rc = sc_fail(&err, SC_ERUNTIME, "cannot start the request threads");
  for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
  tts_sched_close(m->q);
  pthread_mutex_destroy(&m->mu);
  free(th);
  if (!m->rc && !m->quiet)
    fprintf(stderr, "speechc: %d requests, at most %d at once, in %.3f s\n", m->n, nw, now_s() - t0);
  return m->rc && !started ? report(m->rc, &err) : m->rc;
}

int cmd_tts(int argc, char **argv) {
  const char *path = NULL, *text = NULL, *instruct = NULL, *out = NULL;
  const char *texts[MAX_REQUESTS], *outs[MAX_REQUESTS];
  int is_ids[MAX_REQUESTS] = {0};
  int n_texts = 0, n_outs = 0, max_streams = 16;
  const char *text_s = NULL, *instruct_s = NULL, *tokdir = NULL;
  const char *codec_path = NULL, *codes_out = NULL;
  int f32 = 0;
  /* the sampling left unset (NAN, -1) until the model's defaults fill what
   * no flag gave (its generation_config.json, as qwen-tts reads it) */
  sc_tts_params p = sc_tts_defaults();
  p.max_frames = 0; /* given or not */
  p.talker.greedy = p.predictor.greedy = -1;
  p.talker.temperature = p.talker.top_p = p.talker.repetition_penalty = NAN;
  p.predictor.temperature = p.predictor.top_p = NAN;
  p.talker.top_k = p.predictor.top_k = -1;
  Progress prog = {0};
  sc_open_opts opts = {.verify_weights = 1, .threads = 0};
  int dec_threads = 0;
  long v;
  double f;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_tts, stdout); return 0; }
#define FLOAT(flag, lo, hi, dst)                                                         \
  else if (is_flag(a, flag)) {                                                           \
    if (parse_float(flag, flag_value(argc, argv, &i, flag), lo, hi, &f)) return SC_EUSAGE; \
    dst = (float)f;                                                                      \
  }
#define INT(flag, lo, hi, dst)                                                           \
  else if (is_flag(a, flag)) {                                                           \
    if (parse_int(flag, flag_value(argc, argv, &i, flag), lo, hi, &v)) return SC_EUSAGE; \
    dst = (int)v;                                                                        \
  }
    if (is_flag(a, "--text-ids")) {
      if (!(text = flag_value(argc, argv, &i, "--text-ids"))) return usage_error(usage_tts, "%s needs ids", a);
      if (n_texts == MAX_REQUESTS) return usage_error(usage_tts, "%s", "more than 1024 requests");
      is_ids[n_texts] = 1;
      texts[n_texts++] = text;
    } else if (is_flag(a, "--instruct-ids")) {
      if (!(instruct = flag_value(argc, argv, &i, "--instruct-ids"))) return usage_error(usage_tts, "%s needs ids", a);
    } else if (is_flag(a, "--text")) {
      if (!(text_s = flag_value(argc, argv, &i, "--text"))) return usage_error(usage_tts, "%s needs a text", a);
      if (n_texts == MAX_REQUESTS) return usage_error(usage_tts, "%s", "more than 1024 requests");
      texts[n_texts++] = text_s;
    } else if (is_flag(a, "--instruct")) {
      if (!(instruct_s = flag_value(argc, argv, &i, "--instruct"))) return usage_error(usage_tts, "%s needs a text", a);
    } else if (is_flag(a, "--tokenizer")) {
      if (!(tokdir = flag_value(argc, argv, &i, "--tokenizer"))) return usage_error(usage_tts, "%s needs a directory", a);
    } else if (is_flag(a, "--speaker")) {
      if (!(p.speaker = flag_value(argc, argv, &i, "--speaker"))) return usage_error(usage_tts, "%s needs a name", a);
    } else if (is_flag(a, "--language")) {
      if (!(p.language = flag_value(argc, argv, &i, "--language"))) return usage_error(usage_tts, "%s needs a name", a);
    } else if (is_flag(a, "--codec")) {
      if (!(codec_path = flag_value(argc, argv, &i, "--codec"))) return usage_error(usage_tts, "%s needs a path", a);
    } else if (is_flag(a, "--codes")) {
      if (!(codes_out = flag_value(argc, argv, &i, "--codes"))) return usage_error(usage_tts, "%s needs a path", a);
    } else if (!strcmp(a, "--f32")) {
      f32 = 1;
    } else if (!strcmp(a, "--sequential")) {
      p.audio_sequential = 1;
    } else if (!strcmp(a, "--no-share")) {
      p.audio_no_share = 1;
    } else if (!strcmp(a, "--non-streaming")) {
      p.non_streaming = 1;
    } else if (!strcmp(a, "--greedy")) {
      p.talker.greedy = p.predictor.greedy = 1;
    } else if (!strcmp(a, "--sample")) {
      p.talker.greedy = p.predictor.greedy = 0;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      prog.quiet = 1;
    } else if (!strcmp(a, "-o")) {
      if (!(out = i + 1 < argc ? argv[++i] : NULL)) return usage_error(usage_tts, "%s needs a path", a);
      if (n_outs == MAX_REQUESTS) return usage_error(usage_tts, "%s", "more than 1024 outputs");
      outs[n_outs++] = out;
    }
    INT("--max-frames", 1, 1 << 20, p.max_frames)
    INT("--threads", 0, 1024, opts.threads)
    INT("--decoder-threads", 0, 1024, dec_threads)
    INT("--decoder-batch", 0, 1 << 20, p.audio_batch)
    INT("--max-streams", 1, 1024, max_streams)
    FLOAT("--temperature", 0, 100, p.talker.temperature)
    INT("--top-k", 0, INT_MAX, p.talker.top_k)
    FLOAT("--top-p", 1e-9, 1, p.talker.top_p)
    FLOAT("--repetition-penalty", 1e-6, 1e6, p.talker.repetition_penalty)
    FLOAT("--sub-temperature", 0, 100, p.predictor.temperature)
    INT("--sub-top-k", 0, INT_MAX, p.predictor.top_k)
    FLOAT("--sub-top-p", 1e-9, 1, p.predictor.top_p)
    else if (is_flag(a, "--seed")) {
      if (parse_int("--seed", flag_value(argc, argv, &i, "--seed"), 0, LONG_MAX, &v)) return SC_EUSAGE;
      p.talker.seed = p.predictor.seed = (uint64_t)v;
    } else if (a[0] == '-' && a[1]) {
      return usage_error(usage_tts, "unknown option '%s'", a);
    } else if (!path) {
      path = a;
    } else {
      return usage_error(usage_tts, "unexpected argument '%s'", a);
    }
#undef FLOAT
#undef INT
  }
  if (!path) return usage_error(usage_tts, "%s", "missing model.so");
  const int frames_given = p.max_frames > 0;
  if (!text && !text_s) return usage_error(usage_tts, "%s", "missing --text-ids or --text");
  if (text && text_s && n_outs <= 1)
    return usage_error(usage_tts, "%s", "give one of --text and --text-ids (several requests: one -o after each)");
  if (n_texts > 1 || n_outs > 1) {
    char msg[160];
    snprintf(msg, sizeof msg, "%d texts (--text, --text-ids) and %d -o: several requests need one -o each, "
             "in the same order", n_texts, n_outs);
    if (n_texts != n_outs) return usage_error(usage_tts, "%s", msg);
    for (int k = 0; k < n_outs; k++)
      if (!strcmp(outs[k], "-"))
        return usage_error(usage_tts, "%s", "-o - (stdout) takes a single request");
    if (codes_out) return usage_error(usage_tts, "%s", "--codes takes a single request (with several, -o "
                                      "codes.json or codes.bin per request)");
    if (p.audio_sequential) return usage_error(usage_tts, "%s", "--sequential takes a single request");
  }
  if (instruct && instruct_s)
    return usage_error(usage_tts, "%s", "give one of --instruct and --instruct-ids");
  /* what speechc build wrote beside the model: its tokenizer, its decoder */
  char tokbeside[4096], sibling[4096];
  TtsTextOpts to = tts_text_defaults();
  to.tokenizer = tokdir;
  to.codec = codec_path;
  to.threads = opts.threads;
  to.decoder_threads = dec_threads;
  tts_text_resolve(path, &to, tokbeside, sibling);
  if ((text_s || instruct_s) && !to.tokenizer)
    return usage_error(usage_tts, "%s", "--text and --instruct need --tokenizer DIR, or the model.tokenizer/ "
                       "directory that speechc build writes beside model.so when the checkpoint has a tokenizer "
                       "(hint: the checkpoint directory the model was built from)");
  if (!out) return usage_error(usage_tts, "%s", "missing -o out.wav (or -, out.raw, codes.json, codes.bin)");
  /* audio when -o names it, or for - when a codec decoder is there */
  int audio = audio_name(out) || (!strcmp(out, "-") && to.codec);
  for (int k = 0; n_outs > 1 && k < n_outs; k++) audio |= audio_name(outs[k]);
  if (audio && !to.codec)
    return usage_error(usage_tts, "%s", "-o names audio but there is no codec decoder beside the model "
                       "(hint: build the checkpoint directory that holds speech_tokenizer/, or pass --codec)");
  if (codes_out && !audio) return usage_error(usage_tts, "%s", "--codes goes with an audio -o (the codes are -o here)");
  if (codes_out && !strcmp(codes_out, "-") && !strcmp(out, "-"))
    return usage_error(usage_tts, "%s", "--codes and -o cannot both be - (stdout)");
  if (!text_s && !instruct_s) to.tokenizer = NULL; /* ids given: the tokenizer is not read */
  if (!audio) to.codec = NULL;
  int32_t *text_ids = NULL, *instruct_ids = NULL;
  int rc = SC_OK;
  if (text && n_texts == 1) rc = read_ids("--text-ids", text, &text_ids, &p.n_text);
  if (!rc && instruct) rc = read_ids("--instruct-ids", instruct, &instruct_ids, &p.n_instruct);
  if (rc) {
    free(text_ids);
    return rc;
  }
  sc_error err = {0};
  TtsText *tt = NULL;
  TtsStream *ts = NULL;
  int frames = 0, g = 0;
  rc = tts_text_open(path, &to, &tt, &err);
  if (!rc) { /* what no flag set: the model's defaults */
    const sc_tts_params *d = &tts_text_info(tt)->defaults;
    if (!frames_given) p.max_frames = d->max_frames;
    if (p.talker.greedy < 0) p.talker.greedy = d->talker.greedy;
    if (p.predictor.greedy < 0) p.predictor.greedy = d->predictor.greedy;
    if (isnan(p.talker.temperature)) p.talker.temperature = d->talker.temperature;
    if (isnan(p.talker.top_p)) p.talker.top_p = d->talker.top_p;
    if (isnan(p.talker.repetition_penalty)) p.talker.repetition_penalty = d->talker.repetition_penalty;
    if (isnan(p.predictor.temperature)) p.predictor.temperature = d->predictor.temperature;
    if (isnan(p.predictor.top_p)) p.predictor.top_p = d->predictor.top_p;
    if (p.talker.top_k < 0) p.talker.top_k = d->talker.top_k;
    if (p.predictor.top_k < 0) p.predictor.top_k = d->predictor.top_k;
  }
  if (!rc) rc = tts_text_language(tt, "--language", p.language, &err);
  if (!rc && n_texts > 1) {
    Many m = {.tt = tt, .p = p, .instruct_s = instruct_s, .texts = texts, .outs = outs, .is_ids = is_ids,
              .n = n_texts, .f32 = f32, .quiet = prog.quiet, .frames_to_context = !frames_given};
    m.p.instruct_ids = instruct_ids;
    rc = tts_many(&m, max_streams);
    free(instruct_ids);
    tts_text_close(tt);
    return rc;
  }
  if (!rc && text_s) rc = tts_text_ids(tt, 0, "--text", text_s, &text_ids, &p.n_text, &err);
  /* an empty instruction is none, as the official generate reads "" */
  if (!rc && instruct_s && *instruct_s)
    rc = tts_text_ids(tt, 1, "--instruct", instruct_s, &instruct_ids, &p.n_instruct, &err);
  p.text_ids = text_ids;
  p.instruct_ids = instruct_ids;
  if (!rc) rc = tts_stream_open(tt, &ts, &err);
  const TtsTextInfo *ti = rc ? NULL : tts_text_info(tt);
  if (ti) g = ti->codebooks;
  if (ti && ti->drops_instruct && (instruct || (instruct_s && *instruct_s)) && !prog.quiet)
    fprintf(stderr, "speechc: note: the instruction is dropped: this is a 0.6B CustomVoice model, which "
            "qwen-tts' generate_custom_voice runs without one\n");
  if (!rc && audio) {
    prog.out = out;
    prog.wo = sc_wav_opts_for(out);
    prog.wo.sample_rate = ti->sample_rate;
    if (f32) prog.wo.format = SC_WAV_F32;
  }
  sc_tts_stats st;
  p.stats = &st;
  TtsTextRequest req = {.params = p, .on_pcm = audio ? on_pcm : NULL, .on_frame = on_frame, .user = &prog,
                        .frames_to_context = !frames_given, .on_start = on_start,
                        .text_what = text_s ? "--text" : "--text-ids"};
  if (!rc) rc = tts_text_speak(ts, &req, &frames, &err);
  if (prog.failed && !rc) { /* on_pcm stopped it: the write error */
    err = prog.err;
    rc = err.code;
  }
  sc_error werr = {0};
  if (prog.wav && sc_wav_close(prog.wav, &werr) && !rc) {
    err = werr;
    rc = werr.code;
  }
  if (!prog.quiet && frames) fputc('\n', stderr);
  if (!rc && frames && frames == tts_stream_limited(ts)) context_end_note(frames, 0);
  if (!rc && !prog.quiet && frames) {
    double gen = st.talker_s + st.predictor_s;
    fprintf(stderr, "speechc: prompt %d rows in %.3f s; %d frames in %.3f s: %.2f frames/s, "
            "real-time factor %.2f ", st.prompt_rows, st.prompt_s, frames, gen, frames / gen, gen / (frames / 12.5));
    if (st.talker_s > 0) /* the CPU: the two halves timed apart */
      fprintf(stderr, "(talker %.1f ms/frame, predictor %.1f ms/frame)\n", 1e3 * st.talker_s / frames,
              1e3 * st.predictor_s / frames);
    else /* a device runs a whole frame as one graph */
      fprintf(stderr, "(talker + predictor in one device graph: %.1f ms/frame)\n", 1e3 * st.predictor_s / frames);
    if (audio) {
      /* the parts are each timed on their own thread; the whole is the wall clock */
      const double secs = (double)frames * ti->samples_per_frame / ti->sample_rate, sum = gen + st.decoder_s;
      const double whole = st.wall_s - st.prompt_s;
      fprintf(stderr, "speechc: %.2f s of audio; time to first audio %.3f s; real-time factors: talker %.3f, "
              "predictor %.3f, decoder %.3f (%.1f ms/frame); whole pipeline real-time factor %.3f (prompt "
              "included: %.3f), %.2f frames/s; the parts sum to %.3f (%s, %.2f frames per decoder call)\n",
              secs, st.first_audio_s, st.talker_s / secs, st.predictor_s / secs, st.decoder_s / secs,
              1e3 * st.decoder_s / frames, whole / secs, st.wall_s / secs, frames / whole, sum / secs,
              st.overlapped ? "decoder on its own thread" : "sequential",
              st.decoder_calls ? (double)st.decoded / st.decoder_calls : 0.0);
    }
  }
  if (!rc && !audio) rc = codes_write(out, tts_stream_codes(ts), frames, g, &err);
  if (!rc && codes_out) rc = codes_write(codes_out, tts_stream_codes(ts), frames, g, &err);
  free(text_ids);
  free(instruct_ids);
  tts_stream_close(ts);
  tts_text_close(tt);
  return report(rc, &err);
}
