/*
 * serve_metrics.h — what speechc serve counts, and its Prometheus text
 * (GET /metrics).  One ServeMetrics per server, updated from any thread
 * (a lock of its own; each update is a few additions).
 *
 *   speechc_http_requests_total{endpoint, code}   responses sent
 *   speechc_speech_rejected_total                 503s: every stream busy
 *   speechc_speech_disconnects_total              clients gone mid-request
 *   speechc_frames_total, speechc_audio_seconds_total
 *   speechc_generation_seconds_total              wall time of requests that held a stream
 *   speechc_last_frames_per_second                the last such request's frames / wall time
 *   speechc_time_to_first_audio_seconds           histogram: request received -> first PCM decoded
 *   speechc_request_duration_seconds              histogram: request received -> generation over
 *   speechc_active_streams, speechc_max_streams   gauges (no queue: a request beyond the streams is
 *                                                 refused, so the queue depth is always 0)
 *   process_resident_memory_bytes                 /proc/self/statm
 */
#ifndef SC_SERVE_METRICS_H
#define SC_SERVE_METRICS_H

#include <pthread.h>
#include <stddef.h>

#define METRICS_ENDPOINTS 5 /* /v1/audio/speech, /health, /v1/models, /metrics, anything else */
#define METRICS_CODES 10    /* 200 400 404 405 413 499 500 503 504, anything else */
#define METRICS_BUCKETS 10  /* histogram upper bounds, +Inf last */

typedef struct ServeHistogram {
  unsigned long long count[METRICS_BUCKETS]; /* per bucket, not cumulative */
  double sum;
  unsigned long long n;
} ServeHistogram;

typedef struct ServeCounts {
  unsigned long long requests[METRICS_ENDPOINTS][METRICS_CODES];
  unsigned long long rejected, disconnects, frames;
  double audio_s, generation_s, last_fps;
  int active;
  ServeHistogram first_audio, duration;
} ServeCounts;

typedef struct ServeMetrics {
  pthread_mutex_t mu;
  ServeCounts c;
} ServeMetrics;

int metrics_init(ServeMetrics *m);
void metrics_free(ServeMetrics *m);
/* A response with this status on the endpoint at url. */
void metrics_request(ServeMetrics *m, const char *url, unsigned status);
/* A speech request that held a stream: its frames, seconds to the first
 * audio (< 0: none), seconds in all, seconds of audio made. */
void metrics_speech(ServeMetrics *m, int frames, double first_audio_s, double total_s, double audio_s);
void metrics_active(ServeMetrics *m, int active);
void metrics_rejected(ServeMetrics *m);
void metrics_disconnect(ServeMetrics *m);
/* The exposition text, malloc'd (*len bytes, NUL-terminated); NULL when out of memory. */
char *metrics_text(ServeMetrics *m, int max_streams, size_t *len);

#endif
