/*
 * cmd_serve.c — `speechc serve`: a Qwen3-TTS model behind an
 * OpenAI-compatible HTTP speech endpoint (libmicrohttpd).
 *
 *   POST /v1/audio/speech   text in (compiler/serve_request.h), WAV or PCM out;
 *                           "stream": true sends the audio as it is decoded
 *   GET  /health            {"status":"ok", ...}
 *   GET  /v1/models         the one model served
 *   GET  /metrics           Prometheus text
 *
 * Threads: libmicrohttpd runs one thread per connection, and a request
 * runs on its connection's thread (with sc_tts_generate's decoder thread
 * beside it); a streamed request generates on a thread of its own while
 * the connection's thread sends what is decoded.  Each request takes one
 * of --max-streams streams (compiler/tts_text.h: a talker and a codec
 * session, opened at start and reused); when all are busy the request is
 * refused at once with 503, never queued.  By default the running
 * requests' frames are made together (tts_text.h's TtsSched, the batched
 * step); --no-batch runs each on its own sessions.
 *
 * Audio bytes are those speechc tts writes (sc_wav_header, sc_wav_s16le):
 * a whole WAV has its sizes; a streamed WAV is the header with the
 * 0xFFFFFFFF "unknown length" sizes (what speechc tts -o - to a pipe would
 * write as a WAV, and what players read to the end), then the samples.
 * By default the decoder takes one frame per call (--decoder-batch 1), so
 * that the same request and seed give the same bytes however loaded the
 * server is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cli.h"
#include "json.h"
#include "serve_metrics.h"
#include "serve_request.h"
#include "speechc.h"
#include "tts_text.h"
#include "wav.h"

const char *const usage_serve =
    "usage: speechc serve model.so [--host ADDR] [--port N] [--max-streams N] [options]\n"
    "\n"
    "Serves a Qwen3-TTS model (speechc build of a checkpoint with speech_tokenizer/ and a\n"
    "tokenizer) over HTTP, OpenAI's speech API:\n"
    "  POST /v1/audio/speech   {\"input\": \"Hello.\", \"voice\": SPEAKER, \"response_format\": \"wav\"|\"pcm\",\n"
    "                          \"stream\": false|true, \"stream_format\": \"audio\"|\"sse\" (server-sent\n"
    "                          events), \"language\", \"instructions\", \"seed\", \"temperature\", \"top_k\",\n"
    "                          \"top_p\", \"repetition_penalty\", \"max_frames\", ...} (README)\n"
    "  GET  /health, /v1/models, /metrics (Prometheus text)\n"
    "\n"
    "  --host ADDR             address to listen on (default 127.0.0.1: this machine only;\n"
    "                          0.0.0.0 or :: for every interface, at your own risk: there\n"
    "                          is no authentication)\n"
    "  --port N                TCP port (default 8000; 0: any free port, printed at start)\n"
    "  --max-streams N         requests generating at once (default 4); one more is refused\n"
    "                          at once with HTTP 503, not queued.  Each stream holds a talker\n"
    "                          and a codec session (their KV caches and kernel threads)\n"
    "  --no-batch              each request generates on its own; by default the frames of\n"
    "                          all running requests are made together (the batched step:\n"
    "                          each weight read once per step for all of them; the artifact\n"
    "                          needs it, speechc build's default --max-batch 16)\n"
    "  --max-body-kb N         largest request body, KiB (default 64); more is HTTP 413\n"
    "  --cors ORIGIN           let web pages from ORIGIN (e.g. https://app.example.com, or *\n"
    "                          for any) call the server from a browser: the\n"
    "                          Access-Control-Allow-Origin header on every response, and\n"
    "                          OPTIONS preflights answered (default: no CORS headers)\n"
    "  --timeout S             seconds a connection may sit idle or take to send its whole\n"
    "                          request (headers and body, however it trickles in: it is\n"
    "                          closed once S, rounded up, + 0.5 have passed), and the most\n"
    "                          one request may generate for (default 60; past it a whole\n"
    "                          response is HTTP 504, a stream is cut)\n"
    "  --max-connections N     connections open at once (default 256; more are closed as\n"
    "                          they come); idle keep-alive ones count until --timeout\n"
    "  --max-connections-per-ip N  connections one client address may hold open at once\n"
    "                          (default 0: no limit of its own; behind a reverse proxy every\n"
    "                          client has the proxy's address); more are closed as they come\n"
    "  --max-frames N          the most frames a request may ask for, and the default, lowered\n"
    "                          to what the model's context holds after the request's prompt\n"
    "                          (default 2048; 12.5 frames = 1 s of audio)\n"
    "  --name NAME             the model's id in /v1/models (default: the file name\n"
    "                          without .so); requests may name any model\n"
    "  --tokenizer DIR         the tokenizer (default: model.tokenizer/ beside model.so)\n"
    "  --codec PATH            the codec decoder (default: model.codec.so beside model.so)\n"
    "  --threads N             kernel threads of each stream's talker (default 0 = one per\n"
    "                          physical core; with several streams at once, 1 is often best)\n"
    "  --decoder-threads N     kernel threads of each stream's codec decoder (default: as\n"
    "                          --threads)\n"
    "  --decoder-batch N       with --no-batch: frames per decoder call at most (default 1:\n"
    "                          the same bytes for the same request and seed, however\n"
    "                          loaded; 0 = the codec's chunk, faster when the decoder falls\n"
    "                          behind, equal to rounding only).  Batched requests decode one\n"
    "                          frame per call, each on its own connection's thread\n"
    "  -q                      no access log on stderr\n"
    "\n"
    "Stops cleanly on SIGINT or SIGTERM: generations stop at their next frame (whole\n"
    "responses get 503, streams are cut: no final chunk), the port is closed, exit 0.\n"
    "A stream cut by an error, --timeout or the stop ends without its final chunk, so a\n"
    "client sees a broken transfer, never short audio that looks whole.\n";

#define STREAM_BUFFER_MAX ((size_t)1 << 20) /* bytes a streamed response may run ahead of its client */

/* An open connection, for the watch on slow clients: a request must be
 * whole within --timeout of its connection's start or of the end of the
 * previous response on it, however it trickles in. */
typedef struct Watch {
  int fd;
  double since;                 /* reading a request since (0: one is at work) */
  struct Watch *prev, *next;
} Watch;

typedef struct Server {
  const char *path, *name;
  TtsText *tts;
  const TtsTextInfo *info;
  ServeLimits limits;
  sc_tts_params base;           /* the server's decoder settings */
  size_t max_body;
  double timeout;
  int quiet;
  int stopping;                 /* set once, at SIGINT/SIGTERM (under mu) */
  int requests;                 /* requests begun and not yet completed (under mu) */
  /* the streams: slot i is busy[i]; all opened at start */
  pthread_mutex_t mu;
  int max_streams, active;
  TtsSched *sched;              /* the batched step, or NULL (--no-batch, or no batch entries) */
  TtsStream **streams;
  int *busy;
  ServeMetrics metrics;
  Watch *watch;                 /* open connections (under mu) */
  pthread_t watcher;
  pthread_cond_t watch_cv;      /* watch_quit set (under mu) */
  int watch_quit, watching;
  const char *cors;             /* --cors: Access-Control-Allow-Origin, or NULL */
} Server;

/* What a connection carries between calls of the access handler. */
typedef struct Conn {
  char *body;
  size_t len, cap;
  int too_big;
  int http10;                   /* an HTTP/1.0 request: no chunked transfer */
  double t0;                    /* headers received */
} Conn;

/* One speech request at work: the generator's side and the sender's. */
typedef struct Job {
  Server *srv;
  int slot;
  ServeRequest req;
  int32_t *text_ids, *instruct_ids;
  int fd;                       /* the client's socket, for a whole response */
  double t0, deadline, first_audio;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned char *buf;           /* audio bytes not yet sent (streaming) or the whole body */
  size_t len, off, cap;
  int frames, done, cancelled, timed_out, gone, rc;
  int cut;                      /* stopped short: --timeout or the server stopping */
  int http10;                   /* asked over HTTP/1.0: sent whole even with stream: true */
  int sse_done;                 /* stream_format sse: speech.audio.done sent */
  int context_end;              /* ended at the context's end, not at the codec EOS */
  sc_error err;
  pthread_t thread;
  int threaded;
} Job;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- responses ------------------------------------------------------------ */

/* s as the inside of a JSON string, cut to fit cap: always valid UTF-8
 * (messages quote the client's bytes, cut with %.100s and the like, which
 * can split a character): each invalid or cut byte becomes U+FFFD. */
static void json_escape(char *out, size_t cap, const char *s) {
  size_t n = 0;
  const unsigned char *u = (const unsigned char *)s, *end = u + strlen(s);
  while (*u && n + 7 < cap) {
    const unsigned char c = *u;
    size_t k = json_utf8_len(u, (size_t)(end - u));
    if (c == '"' || c == '\\') n += (size_t)snprintf(out + n, cap - n, "\\%c", c);
    else if (c < 0x20) n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
    else if (k) memcpy(out + n, u, k), n += k;
    else n += (size_t)snprintf(out + n, cap - n, "\\ufffd");
    u += k ? k : 1;
  }
  out[n] = 0;
}

/* What every response carries: with --cors, the origin allowed to read it. */
static void common_headers(const Server *srv, struct MHD_Response *r) {
  if (!srv->cors) return;
  MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, srv->cors);
  if (strcmp(srv->cors, "*")) MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Origin");
}

/* The methods of an endpoint, for Allow. */
static const char *methods_of(const char *url) {
  return url && !strcmp(url, "/v1/audio/speech") ? "POST, OPTIONS" : "GET, HEAD, OPTIONS";
}

/* allow: the URL whose methods a 405 names in Allow */
static enum MHD_Result send_buffer_allow(const Server *srv, struct MHD_Connection *c, unsigned status,
                                         const char *type, void *data, size_t len, int must_free, const char *url) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, data, must_free ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_MUST_COPY);
  if (!r) {
    if (must_free) free(data);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, methods_of(url));
  common_headers(srv, r);
  enum MHD_Result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ok;
}

static enum MHD_Result send_buffer(const Server *srv, struct MHD_Connection *c, unsigned status, const char *type,
                                   void *data, size_t len, int must_free) {
  return send_buffer_allow(srv, c, status, type, data, len, must_free, NULL);
}

/* OPTIONS on an endpoint: 204 with its methods, and with --cors the
 * answer to a browser's preflight (the methods, the headers a request may
 * carry, for how long the answer holds). */
static enum MHD_Result send_options(const Server *srv, struct MHD_Connection *c, const char *url) {
  struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, methods_of(url));
  if (srv->cors) {
    /* the headers the page's request will carry, as its preflight names
     * them (OpenAI's JavaScript client adds X-Stainless-* ones), when they
     * are a plain list of header names; else the usual two */
    const char *want = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    size_t k = 0;
    while (want && k <= 2000 && want[k] &&
           (strchr("!#$%&'*+-.^_`|~, \t", want[k]) || (want[k] >= '0' && want[k] <= '9') ||
            ((want[k] | 0x20) >= 'a' && (want[k] | 0x20) <= 'z')))
      k++;
    const int echo = want && *want && !want[k];
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_METHODS, methods_of(url));
    MHD_add_response_header(r, "Access-Control-Allow-Headers", echo ? want : "Content-Type, Authorization");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    MHD_add_response_header(r, MHD_HTTP_HEADER_VARY, "Access-Control-Request-Headers");
  }
  common_headers(srv, r);
  enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
  MHD_destroy_response(r);
  return ok;
}

static void log_line(const Server *srv, const char *method, const char *url, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void log_line(const Server *srv, const char *method, const char *url, unsigned status, const char *fmt, ...) {
  if (srv->quiet) return;
  char more[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(more, sizeof more, fmt, ap);
  va_end(ap);
  fprintf(stderr, "speechc serve: %s %.200s %u%s%s\n", method, url, status, more[0] ? " " : "", more);
}

/* OpenAI's error shape: {"error": {"message", "type", "param", "code"}}. */
static enum MHD_Result send_error(Server *srv, struct MHD_Connection *c, const char *method, const char *url,
                                  unsigned status, const char *type, const char *msg) {
  char esc[2048], body[2300];
  json_escape(esc, sizeof esc, msg);
  int n = snprintf(body, sizeof body, "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"param\":null,"
                   "\"code\":null}}\n", esc, type);
  metrics_request(&srv->metrics, url, status);
  log_line(srv, method, url, status, "%s", msg);
  return send_buffer_allow(srv, c, status, "application/json", body, (size_t)n, 0, url);
}

/* ---- streams -------------------------------------------------------------- */

/* A free slot (its stream opened at start); -1 when all are busy
 * (err: 503), or when the stream cannot be opened (err: 500). */
/* The active-streams gauge is set under mu (metrics_active takes only the
 * metrics' own lock), so two changes cannot reach it in the other order. */
static int take_slot(Server *srv, unsigned *status, sc_error *err) {
  pthread_mutex_lock(&srv->mu);
  int slot = -1;
  const int stopping = srv->stopping;
  for (int i = 0; i < srv->max_streams && slot < 0 && !stopping; i++)
    if (!srv->busy[i]) slot = i;
  if (slot >= 0) {
    srv->busy[slot] = 1;
    metrics_active(&srv->metrics, ++srv->active);
  }
  pthread_mutex_unlock(&srv->mu);
  if (slot < 0) {
    *status = MHD_HTTP_SERVICE_UNAVAILABLE;
    sc_fail(err, SC_ERUNTIME, stopping ? "the server is shutting down"
            : "all %d streams are busy (speechc serve --max-streams %d); retry later", srv->max_streams,
            srv->max_streams);
    return -1;
  }
  if (!srv->streams[slot] && tts_stream_open(srv->tts, &srv->streams[slot], err)) {
    pthread_mutex_lock(&srv->mu);
    srv->busy[slot] = 0;
    metrics_active(&srv->metrics, --srv->active);
    pthread_mutex_unlock(&srv->mu);
    *status = MHD_HTTP_INTERNAL_SERVER_ERROR;
    return -1;
  }
  return slot;
}

static void give_slot(Server *srv, int slot) {
  tts_stream_idle(srv->streams[slot]); /* an idle stream holds no state memory */
  pthread_mutex_lock(&srv->mu);
  srv->busy[slot] = 0;
  metrics_active(&srv->metrics, --srv->active);
  pthread_mutex_unlock(&srv->mu);
}

/* ---- a speech request ----------------------------------------------------- */

static int stopping(Server *srv) {
  pthread_mutex_lock(&srv->mu);
  int s = srv->stopping;
  pthread_mutex_unlock(&srv->mu);
  return s;
}

/* Whether the client has closed its end (for a whole response, which has
 * nothing to send until the end: the stream's sender finds out by
 * sending).  A client that half-closes after its request reads as gone. */
static int client_gone(int fd) {
  char c;
  if (fd < 0) return 0;
  ssize_t r = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Generation goes on while this is 0: not cancelled by the sender, the
 * client still there, the deadline not passed, the server not stopping.
 * Called with j->mu held. */
static int should_stop(Job *j) {
  if (j->cancelled) return 1;
  if (now_s() > j->deadline) return j->timed_out = j->cut = 1;
  if (!j->threaded && client_gone(j->fd)) return j->gone = 1;
  return j->cut = stopping(j->srv);
}

static int on_frame(void *user, const int32_t *codes, int g, int frame) {
  Job *j = user;
  (void)codes, (void)g, (void)frame;
  pthread_mutex_lock(&j->mu);
  int stop = should_stop(j);
  pthread_mutex_unlock(&j->mu);
  return stop;
}

/* A frame's samples as s16le, appended (on the decoder thread).  A stream
 * that runs STREAM_BUFFER_MAX ahead of its client waits for it. */
static int on_pcm(void *user, const float *pcm, int n, int frame) {
  Job *j = user;
  (void)frame;
  pthread_mutex_lock(&j->mu);
  int stop = 0;
  while (!(stop = should_stop(j)) && j->threaded && j->len - j->off > STREAM_BUFFER_MAX) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100000000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
  }
  if (!stop && j->off && j->off == j->len) j->off = j->len = 0; /* all sent: start over */
  size_t need = j->len + 2 * (size_t)n;
  if (!stop && need > j->cap) {
    size_t cap = j->cap ? j->cap : 1 << 16;
    while (cap < need) cap *= 2;
    unsigned char *b = realloc(j->buf, cap);
    if (!b) {
      sc_fail(&j->err, SC_ERUNTIME, "out of memory for the audio");
      j->rc = SC_ERUNTIME;
      stop = 1;
    } else {
      j->buf = b;
      j->cap = cap;
    }
  }
  if (!stop) {
    sc_wav_s16le(pcm, (size_t)n, j->buf + j->len);
    j->len += 2 * (size_t)n;
    j->frames++;
    if (!j->first_audio) j->first_audio = now_s();
    pthread_cond_broadcast(&j->cv);
  }
  pthread_mutex_unlock(&j->mu);
  return stop;
}

/* Generate the request's audio into j->buf (after whatever is there). */
static void generate(Job *j) {
  Server *srv = j->srv;
  TtsTextRequest tr = {.params = j->req.params, .on_pcm = on_pcm, .on_frame = on_frame, .user = j,
                       .frames_to_context = !j->req.max_frames_given, .text_what = "input",
                       .instruct_what = "instructions"}; /* the request's names in its errors */
  tr.params.text_ids = j->text_ids;
  tr.params.instruct_ids = j->instruct_ids;
  tr.params.audio_batch = srv->base.audio_batch;
  int frames = 0;
  sc_error err = {0};
  int rc = srv->sched ? tts_sched_speak(srv->sched, srv->streams[j->slot], &tr, &frames, &err)
                      : tts_text_speak(srv->streams[j->slot], &tr, &frames, &err);
  pthread_mutex_lock(&j->mu);
  if (rc && !j->rc) {
    j->rc = rc;
    j->err = err;
  }
  j->context_end = !rc && frames && frames == tts_stream_limited(srv->streams[j->slot]);
  j->done = 1;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
}

static void *generate_thread(void *arg) {
  generate(arg);
  return NULL;
}

static void job_free(Job *j) {
  if (!j) return;
  serve_request_free(&j->req);
  free(j->text_ids);
  free(j->instruct_ids);
  free(j->buf);
  pthread_mutex_destroy(&j->mu);
  pthread_cond_destroy(&j->cv);
  free(j);
}

/* The end of a request that held a slot: metrics, the log line of a
 * success (send_error logs the others), the slot back. */
static void job_finish(Job *j, unsigned status, const char *how) {
  Server *srv = j->srv;
  const double t = now_s() - j->t0;
  metrics_speech(&srv->metrics, j->frames, j->first_audio ? j->first_audio - j->t0 : -1, t,
                 j->frames * (double)srv->info->samples_per_frame / srv->info->sample_rate);
  if (status == 200)
    log_line(srv, "POST", "/v1/audio/speech", 200, "%s: %d frames in %.3f s, first audio %.3f s%s", how, j->frames,
             t, j->first_audio ? j->first_audio - j->t0 : 0.0, j->context_end ? "; stopped at the context's end, "
             "before the model ended its speech (hint: rebuild with a larger --max-context)" : "");
  give_slot(srv, j->slot);
}

/* stream_format "sse": the bytes not yet sent (as many as fit max) as one
 * OpenAI speech.audio.delta event, base64; 0 when max holds no event. */
#define SSE_DELTA_HEAD "data: {\"type\":\"speech.audio.delta\",\"audio\":\""
#define SSE_DELTA_TAIL "\"}\n\n"
static size_t sse_delta(Job *j, char *out, size_t max) {
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const size_t head = sizeof SSE_DELTA_HEAD - 1, tail = sizeof SSE_DELTA_TAIL - 1;
  if (max < head + tail + 8) return 0;
  size_t k = j->len - j->off, room = (max - head - tail) / 4 * 3;
  if (k > room) k = room / 6 * 6; /* whole samples, no padding inside the stream */
  const unsigned char *in = j->buf + j->off;
  char *o = out + head;
  memcpy(out, SSE_DELTA_HEAD, head);
  for (size_t i = 0; i < k; i += 3) {
    const unsigned v = (unsigned)in[i] << 16 | (i + 1 < k ? (unsigned)in[i + 1] << 8 : 0) | (i + 2 < k ? in[i + 2] : 0);
    *o++ = b64[v >> 18 & 63];
    *o++ = b64[v >> 12 & 63];
    *o++ = i + 1 < k ? b64[v >> 6 & 63] : '=';
    *o++ = i + 2 < k ? b64[v & 63] : '=';
  }
  memcpy(o, SSE_DELTA_TAIL, tail);
  j->off += k;
  return (size_t)(o + tail - out);
}

/* The sender of a stream (the connection's thread): what is decoded, as
 * soon as it is; it waits for the generator while there is nothing.  With
 * stream_format "sse" each piece is a speech.audio.delta event, and a
 * whole stream ends with speech.audio.done (its usage: the ids the model
 * read, the frames it made). */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
  Job *j = cls;
  (void)pos;
  pthread_mutex_lock(&j->mu);
  while (j->len == j->off && !j->done) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100000000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
  }
  ssize_t n;
  if (j->len > j->off && j->req.sse) {
    n = (ssize_t)sse_delta(j, out, max);
    pthread_cond_broadcast(&j->cv);
  } else if (j->len > j->off) {
    size_t k = j->len - j->off < max ? j->len - j->off : max;
    memcpy(out, j->buf + j->off, k);
    j->off += k;
    n = (ssize_t)k;
    pthread_cond_broadcast(&j->cv);
  } else if (j->req.sse && !j->rc && !j->cut && !j->sse_done) {
    const int in = j->req.params.n_text + j->req.params.n_instruct;
    const int k = snprintf(out, max, "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":%d,"
                           "\"output_tokens\":%d,\"total_tokens\":%d}}\n\n", in, j->frames, in + j->frames);
    n = k > 0 && (size_t)k < max ? (j->sse_done = 1, k) : 0;
  } else {
    /* an error, --timeout or a shutdown mid-stream ends the chunked body
     * without its last chunk: the client sees a broken transfer, not
     * short audio that looks whole */
    n = j->rc || j->cut ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
  }
  pthread_mutex_unlock(&j->mu);
  return n;
}

/* The response is gone (sent, or the client left): stop the generator,
 * wait for it, free the job. */
static void stream_free(void *cls) {
  Job *j = cls;
  pthread_mutex_lock(&j->mu);
  const int finished = j->done && j->off == j->len;
  j->cancelled = 1;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
  pthread_join(j->thread, NULL);
  if (!finished && !j->rc && !j->cut) metrics_disconnect(&j->srv->metrics);
  job_finish(j, 200, j->rc ? j->err.msg : j->timed_out ? "stream: cut at --timeout" : j->cut ? "stream: cut by "
             "the shutdown" : finished ? "stream" : "stream: the client left");
  job_free(j);
}

static unsigned status_of(const Job *j, const char **type) {
  if (j->timed_out) return *type = "timeout", MHD_HTTP_GATEWAY_TIMEOUT;
  if (j->rc == SC_EUSAGE) return *type = "invalid_request_error", MHD_HTTP_BAD_REQUEST;
  return *type = "server_error", MHD_HTTP_INTERNAL_SERVER_ERROR;
}

/* A whole response: generated here, on the connection's thread (a client
 * that leaves is noticed at the next frame: client_gone), then sent. */
static enum MHD_Result respond_whole(Job *j, struct MHD_Connection *c, const char *ctype) {
  Server *srv = j->srv;
  const char *url = "/v1/audio/speech", *type = "server_busy";
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  j->fd = ci ? ci->connect_fd : -1;
  generate(j);
  if (j->gone) { /* nobody to answer: counted as nginx's 499, the connection closed */
    metrics_disconnect(&srv->metrics);
    metrics_request(&srv->metrics, url, 499);
    log_line(srv, "POST", url, 499, "the client left after %d frames", j->frames);
    job_finish(j, 499, "the client left");
    job_free(j);
    return MHD_NO;
  }
  if (j->rc || j->cut) {
    unsigned st = MHD_HTTP_SERVICE_UNAVAILABLE; /* the server is stopping */
    char msg[1100];
    if (j->rc || j->timed_out) st = status_of(j, &type);
    if (j->timed_out)
      snprintf(msg, sizeof msg, "the request ran past --timeout %g s after %d frames (hint: a smaller max_frames, "
               "or stream: true%s)", srv->timeout, j->frames,
               j->http10 ? " over HTTP/1.1 (over HTTP/1.0 a response is sent whole), or stream_format \"sse\", "
               "which streams over HTTP/1.0 too" : "");
    else
      snprintf(msg, sizeof msg, "%s", j->rc ? j->err.msg : "the server is shutting down");
    job_finish(j, st, msg);
    job_free(j);
    return send_error(srv, c, "POST", url, st, type, msg);
  }
  if (j->req.format == SERVE_WAV) { /* the sizes, now that they are known */
    sc_wav_opts wo = sc_wav_opts_for(NULL);
    wo.sample_rate = srv->info->sample_rate;
    sc_wav_header(&wo, j->frames * (int64_t)srv->info->samples_per_frame, j->buf);
  }
  metrics_request(&srv->metrics, url, 200);
  job_finish(j, 200, j->req.format == SERVE_WAV ? "wav" : "pcm");
  unsigned char *body = j->buf;
  size_t len = j->len;
  j->buf = NULL;
  job_free(j);
  if (!body) body = malloc(1); /* no frames at all: an empty body */
  return send_buffer(srv, c, 200, ctype, body, len, 1);
}

/* A streamed response: the generator on a thread of its own, the
 * connection's thread sending what it decodes (stream_read).  The first
 * audio, or an error before it, decides the status. */
static enum MHD_Result respond_stream(Job *j, struct MHD_Connection *c, const char *ctype) {
  Server *srv = j->srv;
  const char *url = "/v1/audio/speech", *type = "server_busy";
  j->threaded = 1;
  if (pthread_create(&j->thread, NULL, generate_thread, j)) {
    job_finish(j, 500, "cannot start a generator thread");
    job_free(j);
    return send_error(srv, c, "POST", url, 500, "server_error", "cannot start a generator thread");
  }
  pthread_mutex_lock(&j->mu);
  while (!j->frames && !j->done) pthread_cond_wait(&j->cv, &j->mu);
  const int failed = !j->frames;
  pthread_mutex_unlock(&j->mu);
  if (failed) {
    pthread_join(j->thread, NULL);
    unsigned st = MHD_HTTP_SERVICE_UNAVAILABLE;
    if (j->rc || j->timed_out) st = status_of(j, &type);
    char msg[1100];
    snprintf(msg, sizeof msg, "%s", j->timed_out ? "the request ran past --timeout before its first audio"
             : j->rc ? j->err.msg : "the server is shutting down");
    job_finish(j, st, msg);
    job_free(j);
    return send_error(srv, c, "POST", url, st, type, msg);
  }
  struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1 << 16, stream_read, j,
                                                             stream_free);
  if (!r) {
    stream_free(j);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  common_headers(srv, r);
  metrics_request(&srv->metrics, url, 200);
  enum MHD_Result ok = MHD_queue_response(c, 200, r);
  MHD_destroy_response(r); /* stream_free runs when the connection is done with it */
  return ok;
}

/* POST /v1/audio/speech: the body parsed and tokenized (the client's
 * errors are 400 before anything runs), a stream taken (503 when none is
 * free), the WAV header put first (a whole WAV's sizes are patched at the
 * end), then the audio whole or streamed. */
static enum MHD_Result speech(Server *srv, struct MHD_Connection *c, Conn *conn) {
  const char *url = "/v1/audio/speech";
  Job *j = calloc(1, sizeof *j);
  if (!j) return send_error(srv, c, "POST", url, 500, "server_error", "out of memory");
  j->srv = srv;
  j->slot = -1;
  j->fd = -1;
  pthread_mutex_init(&j->mu, NULL);
  pthread_cond_init(&j->cv, NULL);
  sc_error err = {0};
  unsigned status = MHD_HTTP_BAD_REQUEST;
  const char *type = "invalid_request_error";
  int rc = serve_request_parse(conn->body, conn->len, &srv->limits, &j->req, &err);
  int n_text = 0, n_instruct = 0;
  if (!rc) rc = tts_text_ids(srv->tts, 0, "input", j->req.input, &j->text_ids, &n_text, &err);
  /* an empty instruction is none, as the official generate reads "" */
  if (!rc && j->req.instruct && *j->req.instruct)
    rc = tts_text_ids(srv->tts, 1, "instructions", j->req.instruct, &j->instruct_ids, &n_instruct, &err);
  if (rc) {
    if (rc != SC_EUSAGE) status = 500, type = "server_error";
    job_free(j);
    return send_error(srv, c, "POST", url, status, type, err.msg);
  }
  j->req.params.n_text = n_text;
  j->req.params.n_instruct = n_instruct;
  /* HTTP/1.0 has no chunked transfer: a stream cut short would end as a
   * whole one does (the connection closes), so it is sent whole, with its
   * length, which a client can check */
  if ((j->http10 = conn->http10) && !j->req.sse) j->req.stream = 0; /* sse: the done event tells a whole one */
  if ((j->slot = take_slot(srv, &status, &err)) < 0) {
    job_free(j);
    if (status == MHD_HTTP_SERVICE_UNAVAILABLE) metrics_rejected(&srv->metrics);
    return send_error(srv, c, "POST", url, status, status == 503 ? "server_busy" : "server_error", err.msg);
  }
  j->t0 = conn->t0;
  j->deadline = j->t0 + srv->timeout;
  const int wav = j->req.format == SERVE_WAV;
  if (wav) {
    sc_wav_opts wo = sc_wav_opts_for(NULL);
    wo.sample_rate = srv->info->sample_rate;
    if (!(j->buf = malloc(1 << 16))) {
      job_finish(j, 500, "out of memory");
      job_free(j);
      return send_error(srv, c, "POST", url, 500, "server_error", "out of memory");
    }
    j->cap = 1 << 16;
    j->len = sc_wav_header(&wo, j->req.stream ? -1 : 0, j->buf);
  }
  const char *ctype = j->req.sse ? "text/event-stream" : wav ? "audio/wav" : "audio/pcm";
  return j->req.stream ? respond_stream(j, c, ctype) : respond_whole(j, c, ctype);
}

/* ---- the other endpoints ---------------------------------------------------- */

static void json_list(char *out, size_t cap, const char *const *names, int n) {
  size_t at = (size_t)snprintf(out, cap, "[");
  for (int i = 0; i < n && at < cap; i++) {
    char esc[256];
    json_escape(esc, sizeof esc, names[i]);
    at += (size_t)snprintf(out + at, cap - at, "%s\"%s\"", i ? "," : "", esc);
  }
  if (at < cap) snprintf(out + at, cap - at, "]");
}

static enum MHD_Result models(Server *srv, struct MHD_Connection *c) {
  char name[512], voices[4096], langs[2048], body[8192];
  json_escape(name, sizeof name, srv->name);
  json_list(voices, sizeof voices, srv->info->speakers, srv->info->n_speakers);
  json_list(langs, sizeof langs, srv->info->languages, srv->info->n_languages);
  int n = snprintf(body, sizeof body, "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\","
                   "\"created\":0,\"owned_by\":\"speechc\",\"voices\":%s,\"languages\":%s,\"sample_rate\":%d,"
                   "\"response_formats\":[\"wav\",\"pcm\"]}]}\n", name, voices, langs, srv->info->sample_rate);
  metrics_request(&srv->metrics, "/v1/models", 200);
  return send_buffer(srv, c, 200, "application/json", body, (size_t)n < sizeof body ? (size_t)n : sizeof body - 1, 0);
}

static enum MHD_Result health(Server *srv, struct MHD_Connection *c) {
  char body[256];
  pthread_mutex_lock(&srv->mu);
  int n = snprintf(body, sizeof body, "{\"status\":\"%s\",\"active_streams\":%d,\"max_streams\":%d}\n",
                   srv->stopping ? "stopping" : "ok", srv->active, srv->max_streams);
  pthread_mutex_unlock(&srv->mu);
  metrics_request(&srv->metrics, "/health", 200);
  return send_buffer(srv, c, 200, "application/json", body, (size_t)n, 0);
}

static enum MHD_Result metrics(Server *srv, struct MHD_Connection *c) {
  metrics_request(&srv->metrics, "/metrics", 200);
  size_t len = 0;
  char *text = metrics_text(&srv->metrics, srv->max_streams, &len);
  if (!text) return send_error(srv, c, "GET", "/metrics", 500, "server_error", "out of memory");
  return send_buffer(srv, c, 200, "text/plain; version=0.0.4", text, len, 1);
}

/* The connection's watch entry: reading a request since `since` (0: one
 * is at work, not to be cut). */
static void watch_set(Server *srv, struct MHD_Connection *c, double since) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  pthread_mutex_lock(&srv->mu);
  if (ci && ci->socket_context) ((Watch *)ci->socket_context)->since = since;
  pthread_mutex_unlock(&srv->mu);
}

/* Connections in and out of the watch.  libmicrohttpd reports a
 * connection closed before it closes its socket, so the watcher, which
 * shuts sockets down under mu, never touches a descriptor reused by
 * another. */
static void notify_connection(void *cls, struct MHD_Connection *c, void **ctx,
                              enum MHD_ConnectionNotificationCode toe) {
  Server *srv = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    Watch *w = ci ? calloc(1, sizeof *w) : NULL;
    *ctx = w;
    if (!w) return; /* not watched: the idle timeout still applies */
    w->fd = ci->connect_fd;
    w->since = now_s();
    pthread_mutex_lock(&srv->mu);
    w->next = srv->watch;
    if (srv->watch) srv->watch->prev = w;
    srv->watch = w;
    pthread_mutex_unlock(&srv->mu);
  } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED && *ctx) {
    Watch *w = *ctx;
    pthread_mutex_lock(&srv->mu);
    if (w->prev) w->prev->next = w->next;
    else srv->watch = w->next;
    if (w->next) w->next->prev = w->prev;
    pthread_mutex_unlock(&srv->mu);
    free(w);
    *ctx = NULL;
  }
}

/* Four times a second: a connection still reading its request --timeout
 * after it began is shut down (its thread then sees the end and closes
 * it), so that clients trickling a byte now and then cannot hold the
 * connections for ever; libmicrohttpd's own timeout closes only idle ones. */
static void *watcher(void *arg) {
  Server *srv = arg;
  pthread_mutex_lock(&srv->mu);
  while (!srv->watch_quit) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 250000000;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&srv->watch_cv, &srv->mu, &ts);
    /* past libmicrohttpd's own idle cut (whole seconds): a connection that
     * sent nothing is closed by it, silently, before the watch sees it */
    const double t = now_s(), limit = ceil(srv->timeout) + 0.5;
    int cut = 0;
    for (Watch *w = srv->watch; w; w = w->next)
      if (w->since > 0 && t - w->since > limit) {
        shutdown(w->fd, SHUT_RDWR);
        w->since = 0;
        cut++;
      }
    if (cut) {
      pthread_mutex_unlock(&srv->mu);
      log_line(srv, "-", "-", 408, "closed %d connection%s that had not sent a whole request in %g s (--timeout "
               "%g, rounded up, + 0.5)", cut, cut > 1 ? "s" : "", ceil(srv->timeout) + 0.5, srv->timeout);
      pthread_mutex_lock(&srv->mu);
    }
  }
  pthread_mutex_unlock(&srv->mu);
  return NULL;
}

/* ---- libmicrohttpd's callbacks --------------------------------------------- */

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
  Server *srv = cls;
  Conn *conn = *state;
  if (!conn) { /* the headers: the first call */
    if (!(conn = calloc(1, sizeof *conn))) return MHD_NO;
    conn->t0 = now_s();
    conn->http10 = version && !strcmp(version, MHD_HTTP_VERSION_1_0);
    *state = conn;
    pthread_mutex_lock(&srv->mu);
    srv->requests++;
    pthread_mutex_unlock(&srv->mu);
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    char *end;
    errno = 0;
    unsigned long long n = cl ? strtoull(cl, &end, 10) : 0;
    if (cl && (errno || *end || n > srv->max_body)) {
      char msg[200];
      snprintf(msg, sizeof msg, "the request body is %s bytes; this server takes at most %zu (speechc serve "
               "--max-body-kb %zu)", cl, srv->max_body, srv->max_body / 1024);
      return send_error(srv, c, method, url, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error", msg);
    }
    return MHD_YES;
  }
  if (*upload_size) { /* a piece of the body */
    if (conn->too_big || conn->len + *upload_size > srv->max_body) {
      conn->too_big = 1;
    } else {
      if (conn->len + *upload_size > conn->cap) {
        size_t cap = conn->cap ? conn->cap : 4096;
        while (cap < conn->len + *upload_size) cap *= 2;
        char *b = realloc(conn->body, cap);
        if (!b) return MHD_NO;
        conn->body = b;
        conn->cap = cap;
      }
      memcpy(conn->body + conn->len, upload, *upload_size);
      conn->len += *upload_size;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  /* the whole request is here: its work is not cut by the watch */
  watch_set(srv, c, 0);
  if (conn->too_big) {
    char msg[200];
    snprintf(msg, sizeof msg, "the request body is more than %zu bytes, the most this server takes (speechc "
             "serve --max-body-kb %zu)", srv->max_body, srv->max_body / 1024);
    return send_error(srv, c, method, url, MHD_HTTP_CONTENT_TOO_LARGE, "invalid_request_error", msg);
  }
  const int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
  const int known = !strcmp(url, "/v1/audio/speech") || !strcmp(url, "/health") || !strcmp(url, "/v1/models") ||
                    !strcmp(url, "/metrics");
  if (known && !strcmp(method, "OPTIONS")) {
    metrics_request(&srv->metrics, url, MHD_HTTP_NO_CONTENT);
    log_line(srv, method, url, MHD_HTTP_NO_CONTENT, "%s", "");
    return send_options(srv, c, url);
  }
  if (!strcmp(url, "/v1/audio/speech")) {
    if (post) return speech(srv, c, conn);
  } else if (!strcmp(url, "/health")) {
    if (get) return health(srv, c);
  } else if (!strcmp(url, "/v1/models")) {
    if (get) return models(srv, c);
  } else if (!strcmp(url, "/metrics")) {
    if (get) return metrics(srv, c);
  } else {
    char msg[400];
    snprintf(msg, sizeof msg, "no endpoint %.200s (endpoints: POST /v1/audio/speech, GET /health, GET /v1/models, "
             "GET /metrics)", url);
    return send_error(srv, c, method, url, MHD_HTTP_NOT_FOUND, "invalid_request_error", msg);
  }
  char msg[300];
  snprintf(msg, sizeof msg, "%.20s %.200s: method not allowed; use %s", method, url,
           !strcmp(url, "/v1/audio/speech") ? "POST" : "GET");
  return send_error(srv, c, method, url, MHD_HTTP_METHOD_NOT_ALLOWED, "invalid_request_error", msg);
}

static void completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode toe) {
  Server *srv = cls;
  Conn *conn = *state;
  (void)toe;
  watch_set(srv, c, now_s()); /* the next request's time starts */
  if (conn) {
    pthread_mutex_lock(&srv->mu);
    srv->requests--;
    pthread_mutex_unlock(&srv->mu);
    free(conn->body);
  }
  free(conn);
  *state = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  const Server *srv = cls;
  if (srv->quiet) return;
  fprintf(stderr, "speechc serve: libmicrohttpd: ");
  vfprintf(stderr, fmt, ap);
}

/* ---- the command ------------------------------------------------------------ */

/* --cors: "*", or an origin as browsers serialize and compare it,
 * scheme://host[:port]: written into out (at most 200 bytes) in lower
 * case, as they send it; the default port of http and https, a port out
 * of range or with leading zeros, a path or anything after is refused. */
static int cors_origin(const char *o, char out[201]) {
  const size_t n = strlen(o);
  if (n > 200) return 0;
  for (size_t k = 0; k <= n; k++) out[k] = (char)(o[k] >= 'A' && o[k] <= 'Z' ? o[k] | 0x20 : o[k]);
  if (!strcmp(out, "*")) return 1;
  o = out;
  size_t i = 0;
  if (!(o[0] >= 'a' && o[0] <= 'z')) return 0;
  while (i < n && ((o[i] >= 'a' && o[i] <= 'z') || (o[i] >= '0' && o[i] <= '9') || strchr("+-.", o[i]))) i++;
  const size_t scheme = i;
  if (strncmp(o + i, "://", 3)) return 0;
  i += 3;
  const size_t host = i;
  if (o[i] == '[') { /* an IPv6 address */
    i++;
    while (i < n && (strchr(":.", o[i]) || (o[i] >= '0' && o[i] <= '9') || (o[i] >= 'a' && o[i] <= 'f'))) i++;
    if (i == host + 1 || o[i++] != ']') return 0;
  } else {
    while (i < n && ((o[i] >= 'a' && o[i] <= 'z') || (o[i] >= '0' && o[i] <= '9') || strchr("-._", o[i]))) i++;
    if (i == host) return 0;
  }
  if (o[i] == ':') {
    const size_t port = ++i;
    long v = 0;
    while (i < n && o[i] >= '0' && o[i] <= '9' && i - port < 6) v = 10 * v + (o[i++] - '0');
    if (i == port || o[port] == '0' || v > 65535) return 0;
    if ((scheme == 4 && !strncmp(o, "http", 4) && v == 80) || (scheme == 5 && !strncmp(o, "https", 5) && v == 443))
      return 0; /* browsers leave the default port out */
  }
  return i == n;
}

/* The address to bind: a numeric IPv4 or IPv6 address or a host name. */
static int bind_address(const char *host, int port, struct sockaddr_storage *ss, int *v6) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
  char ports[16];
  snprintf(ports, sizeof ports, "%d", port);
  int e = getaddrinfo(host, ports, &hints, &res);
  if (e) {
    fprintf(stderr, "speechc: error: --host %s: %s\n", host, gai_strerror(e));
    return SC_EUSAGE;
  }
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *v6 = res->ai_family == AF_INET6;
  freeaddrinfo(res);
  return SC_OK;
}

int cmd_serve(int argc, char **argv) {
  const char *path = NULL, *host = "127.0.0.1", *name = NULL, *cors = NULL;
  char cors_buf[201];
  TtsTextOpts to = tts_text_defaults();
  int port = 8000, max_streams = 4, quiet = 0, max_frames = 2048, decoder_batch = 1, batch = 1;
  int max_connections = 256, max_per_ip = 0;
  long max_body_kb = 64, v;
  double timeout = 60;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
#define INT(flag, lo, hi, dst)                                                           \
  else if (is_flag(a, flag)) {                                                           \
    if (parse_int(flag, flag_value(argc, argv, &i, flag), lo, hi, &v)) return SC_EUSAGE; \
    dst = (int)v;                                                                        \
  }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage_serve, stdout);
      return 0;
    } else if (is_flag(a, "--host")) {
      if (!(host = flag_value(argc, argv, &i, "--host"))) return usage_error(usage_serve, "%s needs an address", a);
    } else if (is_flag(a, "--name")) {
      if (!(name = flag_value(argc, argv, &i, "--name"))) return usage_error(usage_serve, "%s needs a name", a);
    } else if (is_flag(a, "--tokenizer")) {
      if (!(to.tokenizer = flag_value(argc, argv, &i, "--tokenizer")))
        return usage_error(usage_serve, "%s needs a directory", a);
    } else if (is_flag(a, "--codec")) {
      if (!(to.codec = flag_value(argc, argv, &i, "--codec"))) return usage_error(usage_serve, "%s needs a path", a);
    } else if (is_flag(a, "--cors")) {
      if (!(cors = flag_value(argc, argv, &i, "--cors"))) return usage_error(usage_serve, "%s needs an origin", a);
      if (!cors_origin(cors, cors_buf))
        return usage_error(usage_serve, "--cors '%.60s': expected * (any origin) or one origin as a browser sends "
                           "it, scheme://host[:port] (e.g. https://app.example.com; no path, no trailing /, "
                           "no :80 on http or :443 on https, at most 200 characters)", cors);
      cors = cors_buf;
    } else if (is_flag(a, "--max-body-kb")) {
      if (parse_int("--max-body-kb", flag_value(argc, argv, &i, "--max-body-kb"), 1, 1 << 20, &max_body_kb))
        return SC_EUSAGE;
    } else if (is_flag(a, "--timeout")) {
      if (parse_float("--timeout", flag_value(argc, argv, &i, "--timeout"), 1, 86400, &timeout)) return SC_EUSAGE;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (!strcmp(a, "--no-batch")) {
      batch = 0;
    }
    INT("--port", 0, 65535, port)
    INT("--max-streams", 1, 256, max_streams)
    INT("--max-connections", 1, 4096, max_connections)
    INT("--max-connections-per-ip", 0, 4096, max_per_ip)
    INT("--max-frames", 1, 1 << 20, max_frames)
    INT("--threads", 0, 1024, to.threads)
    INT("--decoder-threads", 0, 1024, to.decoder_threads)
    INT("--decoder-batch", 0, 1 << 20, decoder_batch)
    else if (a[0] == '-' && a[1]) {
      return usage_error(usage_serve, "unknown option '%s'", a);
    } else if (!path) {
      path = a;
    } else {
      return usage_error(usage_serve, "unexpected argument '%s'", a);
    }
#undef INT
  }
  if (!path) return usage_error(usage_serve, "%s", "missing model.so");
  if (batch && decoder_batch != 1)
    return usage_error(usage_serve, "%s", "--decoder-batch goes with --no-batch (the batched step decodes each "
                       "request's frames one per call)");
  char tokbeside[4096], codecbeside[4096], namebuf[256];
  tts_text_resolve(path, &to, tokbeside, codecbeside);
  if (!name) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 3 && !strcmp(base + n - 3, ".so")) n -= 3;
    snprintf(namebuf, sizeof namebuf, "%.*s", (int)n, base);
    name = namebuf;
  }
  struct sockaddr_storage addr;
  int v6 = 0;
  if (bind_address(host, port, &addr, &v6)) return SC_EUSAGE;

  Server srv = {.path = path, .name = name, .max_body = (size_t)max_body_kb * 1024, .timeout = timeout,
                .quiet = quiet, .max_streams = max_streams, .cors = cors};
  sc_error err = {0};
  int rc = tts_text_open(path, &to, &srv.tts, &err);
  if (!rc && !to.tokenizer)
    rc = sc_fail(&err, SC_EUSAGE, "%s has no tokenizer beside it (hint: pass --tokenizer DIR, or build the model "
                 "from a checkpoint directory with one: speechc build writes it beside model.so as "
                 "model.tokenizer/)", path);
  if (!rc && !to.codec)
    rc = sc_fail(&err, SC_EUSAGE, "%s has no codec decoder beside it (hint: build the checkpoint directory that "
                 "holds speech_tokenizer/, or pass --codec)", path);
  if (rc) {
    tts_text_close(srv.tts);
    return report(rc, &err);
  }
  if (batch && (rc = tts_sched_open(srv.tts, &srv.sched, &err))) {
    if (err.code != SC_EUSAGE) {
      tts_text_close(srv.tts);
      return report(rc, &err);
    }
    /* an artifact built with --max-batch 1 has no batched entries */
    fprintf(stderr, "speechc serve: %s; each request runs on its own\n", err.msg);
    rc = SC_OK;
  }
  srv.info = tts_text_info(srv.tts);
  srv.limits = (ServeLimits){max_frames, srv.info->speakers, srv.info->n_speakers, srv.info->languages,
                             srv.info->n_languages, &srv.info->defaults};
  srv.base = srv.info->defaults;
  srv.base.audio_batch = decoder_batch;
  srv.streams = calloc((size_t)max_streams, sizeof *srv.streams);
  srv.busy = calloc((size_t)max_streams, sizeof *srv.busy);
  pthread_mutex_init(&srv.mu, NULL);
  pthread_cond_init(&srv.watch_cv, NULL);
  if (!srv.streams || !srv.busy || metrics_init(&srv.metrics)) {
    rc = sc_fail(&err, SC_ERUNTIME, "out of memory");
    goto out;
  }
  /* every stream now, before listening: a server that cannot hold
   * --max-streams says so at start, and its memory does not grow with
   * the load (a session's state pages come and go with its requests) */
  for (int i = 0; i < max_streams && !rc; i++)
    if ((rc = tts_stream_open(srv.tts, &srv.streams[i], &err)))
      snprintf(err.msg + strlen(err.msg), sizeof err.msg - strlen(err.msg),
               " (stream %d of --max-streams %d)", i + 1, max_streams);
  if (rc) goto out;

  /* SIGINT and SIGTERM are taken by sigwait below: blocked in every thread
   * (libmicrohttpd's inherit the mask); a client gone mid-write is EPIPE,
   * not a signal */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);
  if (pthread_create(&srv.watcher, NULL, watcher, &srv)) {
    rc = sc_fail(&err, SC_ERUNTIME, "cannot start the connection watcher thread");
    goto out;
  }
  srv.watching = 1;
  /* poll(), not select(): descriptors past FD_SETSIZE work */
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
          (v6 ? MHD_USE_IPv6 : 0),
      (uint16_t)port, NULL, NULL, handle, &srv, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, &srv,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ceil(timeout), MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)max_per_ip,
      MHD_OPTION_NOTIFY_COMPLETED, completed, &srv, MHD_OPTION_NOTIFY_CONNECTION,
      notify_connection, &srv, MHD_OPTION_END);
  if (!d) {
    rc = sc_fail(&err, SC_EUSAGE, "cannot listen on %s port %d: %s (hint: another server there? --port 0 takes "
                 "any free port)", host, port, strerror(errno));
    goto out;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  int bound = di ? di->port : port;
  printf("speechc serve: listening on http://%s%s%s:%d (model %s, %d streams%s, %d Hz)\n", v6 ? "[" : "", host,
         v6 ? "]" : "", bound, name, max_streams, srv.sched ? " stepped together" : " each on its own",
         srv.info->sample_rate);
  fflush(stdout);
  int sig = 0;
  while (sigwait(&sigs, &sig)) {}
  if (!quiet) fprintf(stderr, "speechc serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  pthread_mutex_lock(&srv.mu);
  srv.stopping = 1; /* generators stop at their next frame; new requests get 503 */
  pthread_mutex_unlock(&srv.mu);
  /* no new connections; then the requests in progress end as promised
   * (whole responses: their 503 sent; streams: cut) before the daemon
   * closes every connection, waiting at most 5 s (a client stalled in
   * its upload does not hold the exit longer) */
  MHD_socket lsock = MHD_quiesce_daemon(d);
  if (lsock != MHD_INVALID_SOCKET) close(lsock);
  for (int waited = 0; waited < 500; waited++) {
    pthread_mutex_lock(&srv.mu);
    const int left = srv.requests;
    pthread_mutex_unlock(&srv.mu);
    if (!left) break;
    usleep(10000);
  }
  MHD_stop_daemon(d); /* every request has returned */
out:
  if (srv.watching) {
    pthread_mutex_lock(&srv.mu);
    srv.watch_quit = 1;
    pthread_cond_signal(&srv.watch_cv);
    pthread_mutex_unlock(&srv.mu);
    pthread_join(srv.watcher, NULL);
  }
  tts_sched_close(srv.sched);
  for (int i = 0; srv.streams && i < max_streams; i++) tts_stream_close(srv.streams[i]);
  free(srv.streams);
  free(srv.busy);
  metrics_free(&srv.metrics);
  pthread_cond_destroy(&srv.watch_cv);
  pthread_mutex_destroy(&srv.mu);
  tts_text_close(srv.tts);
  return report(rc, &err);
}
