/*
 * serve_metrics.c — speechc serve's counters and their Prometheus text
 * exposition (serve_metrics.h).
 */
#include "serve_metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const endpoints[METRICS_ENDPOINTS] = {"/v1/audio/speech", "/health", "/v1/models", "/metrics",
                                                         "other"};
/* 499: nginx's "client closed request", for a whole response whose client left */
static const unsigned codes[METRICS_CODES - 1] = {200, 400, 404, 405, 413, 499, 500, 503, 504};
/* seconds: from a tiny model's milliseconds to a long request's tens of seconds */
static const double bounds[METRICS_BUCKETS - 1] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};

int metrics_init(ServeMetrics *m) {
  memset(m, 0, sizeof *m);
  return pthread_mutex_init(&m->mu, NULL);
}

void metrics_free(ServeMetrics *m) { pthread_mutex_destroy(&m->mu); }

void metrics_request(ServeMetrics *m, const char *url, unsigned status) {
  int e = 0, c = 0;
  while (e < METRICS_ENDPOINTS - 1 && strcmp(url, endpoints[e])) e++;
  while (c < METRICS_CODES - 1 && codes[c] != status) c++;
  pthread_mutex_lock(&m->mu);
  m->c.requests[e][c]++;
  pthread_mutex_unlock(&m->mu);
}

static void observe(ServeHistogram *h, double v) {
  int b = 0;
  while (b < METRICS_BUCKETS - 1 && v > bounds[b]) b++;
  h->count[b]++;
  h->sum += v;
  h->n++;
}

void metrics_speech(ServeMetrics *m, int frames, double first_audio_s, double total_s, double audio_s) {
  pthread_mutex_lock(&m->mu);
  m->c.frames += (unsigned long long)frames;
  m->c.audio_s += audio_s;
  m->c.generation_s += total_s;
  if (total_s > 0) m->c.last_fps = frames / total_s;
  if (first_audio_s >= 0) observe(&m->c.first_audio, first_audio_s);
  observe(&m->c.duration, total_s);
  pthread_mutex_unlock(&m->mu);
}

void metrics_active(ServeMetrics *m, int active) {
  pthread_mutex_lock(&m->mu);
  m->c.active = active;
  pthread_mutex_unlock(&m->mu);
}

void metrics_rejected(ServeMetrics *m) {
  pthread_mutex_lock(&m->mu);
  m->c.rejected++;
  pthread_mutex_unlock(&m->mu);
}

void metrics_disconnect(ServeMetrics *m) {
  pthread_mutex_lock(&m->mu);
  m->c.disconnects++;
  pthread_mutex_unlock(&m->mu);
}

/* A growing string with a sticky error (STYLE.md's emit helpers). */
typedef struct Out {
  char *s;
  size_t len, cap;
  int failed;
} Out;

static void put(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(Out *o, const char *fmt, ...) {
  if (o->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->s + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      o->failed = 1;
      return;
    }
    if ((size_t)n < o->cap - o->len) {
      o->len += (size_t)n;
      return;
    }
    char *s = realloc(o->s, o->cap * 2 + (size_t)n);
    if (!s) {
      o->failed = 1;
      return;
    }
    o->s = s;
    o->cap = o->cap * 2 + (size_t)n;
  }
}

static void histogram(Out *o, const char *name, const char *help, const ServeHistogram *h) {
  put(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
  unsigned long long cum = 0;
  for (int b = 0; b < METRICS_BUCKETS; b++) {
    cum += h->count[b];
    if (b < METRICS_BUCKETS - 1) put(o, "%s_bucket{le=\"%g\"} %llu\n", name, bounds[b], cum);
    else put(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, cum);
  }
  put(o, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name, h->n);
}

static long rss_bytes(void) {
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  return rss * sysconf(_SC_PAGESIZE);
}

char *metrics_text(ServeMetrics *m, int max_streams, size_t *len) {
  Out o = {malloc(4096), 0, 4096, 0};
  if (!o.s) return NULL;
  o.s[0] = 0;
  pthread_mutex_lock(&m->mu);
  ServeCounts c = m->c; /* a consistent copy, printed without the lock */
  pthread_mutex_unlock(&m->mu);
  put(&o, "# HELP speechc_http_requests_total HTTP responses sent, by endpoint and status code.\n"
          "# TYPE speechc_http_requests_total counter\n");
  for (int e = 0; e < METRICS_ENDPOINTS; e++)
    for (int k = 0; k < METRICS_CODES; k++)
      if (c.requests[e][k]) {
        char code[16];
        if (k < METRICS_CODES - 1) snprintf(code, sizeof code, "%u", codes[k]);
        else snprintf(code, sizeof code, "other");
        put(&o, "speechc_http_requests_total{endpoint=\"%s\",code=\"%s\"} %llu\n", endpoints[e], code,
            c.requests[e][k]);
      }
  put(&o, "# HELP speechc_speech_rejected_total Speech requests refused with 503: every stream was busy.\n"
          "# TYPE speechc_speech_rejected_total counter\nspeechc_speech_rejected_total %llu\n", c.rejected);
  put(&o, "# HELP speechc_speech_disconnects_total Speech requests whose client left before the end.\n"
          "# TYPE speechc_speech_disconnects_total counter\nspeechc_speech_disconnects_total %llu\n",
      c.disconnects);
  put(&o, "# HELP speechc_frames_total Codec frames generated and decoded (12.5 per second of audio).\n"
          "# TYPE speechc_frames_total counter\nspeechc_frames_total %llu\n", c.frames);
  put(&o, "# HELP speechc_audio_seconds_total Seconds of audio generated.\n"
          "# TYPE speechc_audio_seconds_total counter\nspeechc_audio_seconds_total %.6f\n", c.audio_s);
  put(&o, "# HELP speechc_generation_seconds_total Wall time of speech requests, summed over requests.\n"
          "# TYPE speechc_generation_seconds_total counter\nspeechc_generation_seconds_total %.6f\n",
      c.generation_s);
  put(&o, "# HELP speechc_last_frames_per_second Frames per second of the last speech request.\n"
          "# TYPE speechc_last_frames_per_second gauge\nspeechc_last_frames_per_second %.3f\n", c.last_fps);
  histogram(&o, "speechc_time_to_first_audio_seconds", "From the request received to its first audio decoded.",
            &c.first_audio);
  histogram(&o, "speechc_request_duration_seconds", "From the request received to the end of its generation.",
            &c.duration);
  put(&o, "# HELP speechc_active_streams Speech requests generating now.\n"
          "# TYPE speechc_active_streams gauge\nspeechc_active_streams %d\n", c.active);
  put(&o, "# HELP speechc_max_streams Speech requests that may generate at once (--max-streams).\n"
          "# TYPE speechc_max_streams gauge\nspeechc_max_streams %d\n", max_streams);
  put(&o, "# HELP speechc_queue_depth Speech requests waiting for a stream: always 0, a request beyond "
          "--max-streams is refused (503), not queued.\n"
          "# TYPE speechc_queue_depth gauge\nspeechc_queue_depth 0\n");
  put(&o, "# HELP process_resident_memory_bytes Resident memory of the server.\n"
          "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %ld\n", rss_bytes());
  if (o.failed) {
    free(o.s);
    return NULL;
  }
  *len = o.len;
  return o.s;
}
