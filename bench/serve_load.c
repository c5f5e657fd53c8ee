/*
 * serve_load.c — N concurrent clients against a speech server on loopback
 * for a bounded time (bench/serve_load.sh drives it; not a test).
 *
 *   serve_load PORT PATH BODY [--clients N] [--seconds S] [--max-requests M]
 *
 * Each client POSTs BODY (JSON) to 127.0.0.1:PORT PATH over a fresh
 * connection, reads the whole response (chunked or not), and starts the
 * next request at once, until S seconds have passed or M requests were
 * started in all.  Per request: time to first audio (the first byte of the
 * body after the headers; a streamed response's first chunk) and total
 * time.  Prints one line of key=value: requests ok and failed, requests/s,
 * audio seconds per wall second (bytes of s16le mono at --rate Hz, minus a
 * 44-byte WAV header when the body starts with RIFF), p50/p99 of both
 * times.  Any response other than 200 counts as failed (its status is
 * printed once).
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct Shared {
  int port, rate, max_requests;
  const char *path, *body;
  double t_end;
  pthread_mutex_t mu;
  int started, ok, failed, reported;
  double *ttfa, *total; /* [max_requests] */
  double audio_s;
} Shared;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One request; 0 and the times and audio bytes on a 200. */
static int one(const Shared *sh, double *ttfa, double *total, size_t *audio, int *status) {
  const double t0 = now_s();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)sh->port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  *status = 0;
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
    if (fd >= 0) close(fd);
    return -1;
  }
  char head[512];
  int n = snprintf(head, sizeof head, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: "
                   "application/json\r\nContent-Length: %zu\r\n\r\n", sh->path, strlen(sh->body));
  if (send(fd, head, (size_t)n, MSG_NOSIGNAL) != n ||
      send(fd, sh->body, strlen(sh->body), MSG_NOSIGNAL) != (ssize_t)strlen(sh->body)) {
    close(fd);
    return -1;
  }
  size_t cap = 1 << 20, len = 0, body_at = 0;
  char *buf = malloc(cap);
  *ttfa = -1;
  for (;;) {
    if (len == cap) buf = realloc(buf, cap *= 2);
    ssize_t k = recv(fd, buf + len, cap - len, 0);
    if (k <= 0) break;
    len += (size_t)k;
    if (!body_at) {
      char *e = memmem(buf, len, "\r\n\r\n", 4);
      if (e) body_at = (size_t)(e - buf) + 4;
    }
    /* the first audio: body bytes past a chunk-size line, when chunked */
    if (*ttfa < 0 && body_at && len > body_at + 8) *ttfa = now_s() - t0;
  }
  close(fd);
  *total = now_s() - t0;
  if (*ttfa < 0) *ttfa = *total;
  sscanf(buf, "HTTP/1.%*d %d", status);
  /* audio bytes: the body, less chunk framing (estimated from the sizes) */
  size_t body = body_at && len > body_at ? len - body_at : 0;
  if (body_at && strcasestr(buf, "Transfer-Encoding: chunked")) {
    size_t at = body_at, sum = 0;
    while (at < len) {
      unsigned long c = strtoul(buf + at, NULL, 16);
      char *nl = memmem(buf + at, len - at, "\r\n", 2);
      if (!nl || !c) break;
      sum += c;
      at = (size_t)(nl - buf) + 2 + c + 2;
    }
    body = sum;
  }
  if (body >= 44 && !memcmp(buf + body_at, "RIFF", 4)) body -= 44;
  *audio = body;
  free(buf);
  return *status == 200 ? 0 : -1;
}

static void *client(void *arg) {
  Shared *sh = arg;
  for (;;) {
    pthread_mutex_lock(&sh->mu);
    int i = sh->started < sh->max_requests && now_s() < sh->t_end ? sh->started++ : -1;
    pthread_mutex_unlock(&sh->mu);
    if (i < 0) return NULL;
    double ttfa = 0, total = 0;
    size_t audio = 0;
    int status = 0, rc = one(sh, &ttfa, &total, &audio, &status);
    pthread_mutex_lock(&sh->mu);
    if (rc) {
      sh->failed++;
      if (!sh->reported++) fprintf(stderr, "serve_load: a request failed (HTTP status %d)\n", status);
      sh->ttfa[i] = sh->total[i] = -1;
    } else {
      sh->ok++;
      sh->ttfa[i] = ttfa;
      sh->total[i] = total;
      sh->audio_s += (double)audio / 2.0 / sh->rate;
    }
    pthread_mutex_unlock(&sh->mu);
  }
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The q-quantile (nearest rank) of the non-negative values among v[n]. */
static double quantile(const double *v, int n, double q) {
  double *w = malloc((size_t)(n ? n : 1) * sizeof *w);
  int k = 0;
  for (int i = 0; i < n; i++)
    if (v[i] >= 0) w[k++] = v[i];
  double x = 0;
  if (k) {
    qsort(w, (size_t)k, sizeof *w, by_value);
    int r = (int)(q * k + 0.999999) - 1;
    x = w[r < 0 ? 0 : r >= k ? k - 1 : r];
  }
  free(w);
  return x;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: serve_load PORT PATH BODY [--clients N] [--seconds S] [--max-requests M] [--rate HZ]\n");
    return 2;
  }
  Shared sh = {.port = atoi(argv[1]), .path = argv[2], .body = argv[3], .rate = 24000, .max_requests = 100000};
  int clients = 1;
  double seconds = 60;
  for (int i = 4; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--clients")) clients = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--max-requests")) sh.max_requests = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--rate")) sh.rate = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "serve_load: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (clients < 1 || clients > 256 || seconds <= 0 || sh.max_requests < 1 || sh.port <= 0) {
    fprintf(stderr, "serve_load: bad arguments\n");
    return 2;
  }
  sh.ttfa = calloc((size_t)sh.max_requests, sizeof *sh.ttfa);
  sh.total = calloc((size_t)sh.max_requests, sizeof *sh.total);
  pthread_mutex_init(&sh.mu, NULL);
  pthread_t th[256];
  const double t0 = now_s();
  sh.t_end = t0 + seconds;
  for (int i = 0; i < clients; i++) pthread_create(&th[i], NULL, client, &sh);
  for (int i = 0; i < clients; i++) pthread_join(th[i], NULL);
  const double wall = now_s() - t0;
  printf("clients=%d wall_s=%.2f ok=%d failed=%d req_per_s=%.3f audio_s_per_s=%.3f ttfa_p50_ms=%.1f "
         "ttfa_p99_ms=%.1f total_p50_ms=%.1f total_p99_ms=%.1f\n", clients, wall, sh.ok, sh.failed, sh.ok / wall,
         sh.audio_s / wall, 1e3 * quantile(sh.ttfa, sh.started, 0.5), 1e3 * quantile(sh.ttfa, sh.started, 0.99),
         1e3 * quantile(sh.total, sh.started, 0.5), 1e3 * quantile(sh.total, sh.started, 0.99));
  free(sh.ttfa);
  free(sh.total);
  return sh.failed ? 1 : 0;
}
