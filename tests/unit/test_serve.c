/*
 * test_serve.c — `speechc serve` over real sockets, with a small HTTP
 * client of its own (no curl, no Python).
 *
 * The model is the committed tiny official TTS checkpoint with a random
 * codec-tiny decoder (bench/make_random_ckpt) and a byte-level tokenizer
 * whose ids fit its 512-entry text vocabulary (the one test_cli.sh writes),
 * built by `speechc build` into a scratch directory.  What holds:
 *   - a WAV response is byte for byte what `speechc tts --text ... --seed S
 *     -o x.wav` writes for the same text, speaker and seed; a streamed PCM
 *     response (chunked) is the same samples, a streamed WAV the same
 *     samples after a header with the 0xFFFFFFFF sizes;
 *   - malformed JSON, an oversize body (by Content-Length and chunked), an
 *     unknown voice, a wrong method or path, a bad response_format, speed,
 *     garbage instead of HTTP: the right status, an OpenAI-shaped error
 *     naming the problem, and /health still answers;
 *   - a client that leaves mid-stream stops its generation (the stream is
 *     free again at once, far fewer frames made than the request would
 *     have), and the server keeps serving;
 *   - requests are stepped together by default: one made while a long
 *     stream runs is the same bytes; with --no-batch as well;
 *   - with --max-streams 2 held by two streams, a third request gets 503;
 *   - a whole response is stopped as well when its client leaves (its
 *     socket checked at each frame);
 *   - --timeout 1: a long whole response is 504, an idle connection closed,
 *     and so is one that trickles its headers or body in without ever
 *     being idle, once its request has taken longer than --timeout;
 *   - /metrics counts what happened; SIGINT, and SIGTERM with a stream in
 *     progress, exit 0 (under ASan: no leaks either).
 */
#define _GNU_SOURCE /* memmem, strcasestr */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static char tmp[64];
static int port;

/* ---- a tiny HTTP/1.1 client ------------------------------------------------ */

typedef struct Resp {
  int status;
  char headers[4096];
  unsigned char *body; /* de-chunked */
  size_t len;
  int chunks;          /* chunks of a chunked body (0: not chunked) */
  int ended;           /* a chunked body's last chunk came (not a cut stream) */
} Resp;

static int connect_to(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct timeval tv = {60, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  return fd;
}

static int send_all(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n) {
    ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
    if (k <= 0) return -1;
    s += k, n -= (size_t)k;
  }
  return 0;
}

/* Send a request: method path, a JSON body (or NULL), extra header lines. */
static int send_request(int fd, const char *method, const char *path, const char *body, const char *extra) {
  char head[1024];
  snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s", method, path,
           extra ? extra : "");
  if (body && !(extra && strstr(extra, "Transfer-Encoding")))
    snprintf(head + strlen(head), sizeof head - strlen(head), "Content-Type: application/json\r\n"
             "Content-Length: %zu\r\n", strlen(body));
  strcat(head, "\r\n");
  return send_all(fd, head, strlen(head)) || (body && send_all(fd, body, strlen(body)));
}

/* Read to EOF; parse the status line, the headers and the (chunked) body. */
static int read_response(int fd, Resp *r) {
  memset(r, 0, sizeof *r);
  size_t cap = 1 << 16, n = 0;
  unsigned char *buf = malloc(cap);
  for (;;) {
    if (n == cap) buf = realloc(buf, cap *= 2);
    ssize_t k = recv(fd, buf + n, cap - n, 0);
    if (k <= 0) break;
    n += (size_t)k;
  }
  unsigned char *end = n >= 4 ? memmem(buf, n, "\r\n\r\n", 4) : NULL;
  if (!end || sscanf((char *)buf, "HTTP/1.%*d %d", &r->status) != 1) {
    free(buf);
    return -1;
  }
  size_t hl = (size_t)(end - buf) + 2; /* each header with its CRLF, the last one's too */
  memcpy(r->headers, buf, hl < sizeof r->headers - 1 ? hl : sizeof r->headers - 1);
  const unsigned char *p = end + 4, *lim = buf + n;
  r->body = malloc(n + 1);
  if (strcasestr(r->headers, "Transfer-Encoding: chunked")) {
    for (;;) {
      unsigned long k = strtoul((const char *)p, NULL, 16);
      const unsigned char *nl = memmem(p, (size_t)(lim - p), "\r\n", 2);
      if (!nl || (size_t)(lim - nl - 2) < k) break; /* a cut body */
      p = nl + 2;
      if (!k) {
        r->ended = 1;
        break;
      }
      memcpy(r->body + r->len, p, k);
      r->len += k;
      r->chunks++;
      p += k + 2;
    }
  } else {
    r->len = (size_t)(lim - p);
    memcpy(r->body, p, r->len);
  }
  r->body[r->len] = 0;
  free(buf);
  return 0;
}

static int request(const char *method, const char *path, const char *body, const char *extra, Resp *r) {
  int fd = connect_to();
  memset(r, 0, sizeof *r);
  if (fd < 0) return -1;
  int rc = send_request(fd, method, path, body, extra) ? -1 : read_response(fd, r);
  close(fd);
  return rc;
}

static int post(const char *body, Resp *r) { return request("POST", "/v1/audio/speech", body, NULL, r); }

static int health_ok(void) {
  Resp r;
  int ok = !request("GET", "/health", NULL, NULL, &r) && r.status == 200 && strstr((char *)r.body, "\"ok\"");
  free(r.body);
  return ok;
}

static int active_streams(void) {
  Resp r;
  int n = -1;
  if (!request("GET", "/health", NULL, NULL, &r) && r.status == 200) {
    const char *a = strstr((char *)r.body, "\"active_streams\":");
    if (a) n = atoi(a + 17);
  }
  free(r.body);
  return n;
}

/* The value of a metric line "NAME VALUE" (-1 when missing). */
static double metric(const char *name) {
  Resp r;
  double v = -1;
  if (!request("GET", "/metrics", NULL, NULL, &r) && r.status == 200) {
    char *at = (char *)r.body;
    size_t n = strlen(name);
    while ((at = strstr(at, name)))
      if ((at == (char *)r.body || at[-1] == '\n') && at[n] == ' ') {
        v = atof(at + n + 1);
        break;
      } else {
        at += n;
      }
  }
  free(r.body);
  return v;
}

/* Wait (at most secs) until no stream is active; 1 when it happened. */
static int idle_within(double secs) {
  for (int i = 0; i < (int)(secs * 50); i++) {
    if (active_streams() == 0) return 1;
    usleep(20000);
  }
  return 0;
}

/* A long streamed request on its own connection, its status and first
 * bytes read, the rest left unread.  seed 5 at temperature 100 makes no
 * EOS: without max_frames the tiny talker runs to its context's end,
 * ~2000 frames. */
#define LONG_STREAM "{\"input\":\"Hello world\",\"seed\":5,\"temperature\":100,\"top_k\":0," \
                    "\"response_format\":\"pcm\",\"stream\":true}"
static int open_long_stream(void) {
  int fd = connect_to();
  if (fd < 0 || send_request(fd, "POST", "/v1/audio/speech", LONG_STREAM, NULL)) return -1;
  char buf[4096];
  size_t n = 0;
  while (n < sizeof buf) { /* the headers and some audio */
    ssize_t k = recv(fd, buf + n, sizeof buf - n, 0);
    if (k <= 0) break;
    n += (size_t)k;
  }
  if (n < 12 || strncmp(buf, "HTTP/1.1 200", 12)) {
    fprintf(stderr, "long stream: %.*s\n", (int)(n < 200 ? n : 200), buf);
    close(fd);
    return -1;
  }
  return fd;
}

/* ---- the fixture ------------------------------------------------------------ */

/* GPT-2's byte-level alphabet as vocab.json: ids 0..255 in bytes_to_unicode
 * order, plus the chat template's added tokens at the tiny model's ids. */
static void write_tokenizer(const char *dir) {
  char path[2200];
  snprintf(path, sizeof path, "%s/vocab.json", dir);
  FILE *f = fopen(path, "w");
  int id = 0, extra = 0;
  fputc('{', f);
  for (int pass = 0; pass < 2; pass++)
    for (int b = 0; b < 256; b++) {
      int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      if (printable != !pass) continue;
      fprintf(f, "%s\"\\u%04x\": %d", id ? "," : "", pass ? 256 + extra++ : b, id);
      id++;
    }
  fputs("}\n", f);
  fclose(f);
  snprintf(path, sizeof path, "%s/merges.txt", dir);
  fclose(fopen(path, "w"));
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  f = fopen(path, "w");
  fputs("{\"added_tokens_decoder\": {\"300\": {\"content\": \"assistant\"}, \"480\": {\"content\": "
        "\"<|im_start|>\"}, \"481\": {\"content\": \"<|im_end|>\"}}}\n", f);
  fclose(f);
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  *n = 0;
  if (!f) return NULL;
  unsigned char *b = malloc(1 << 24);
  *n = fread(b, 1, 1 << 24, f);
  fclose(f);
  return b;
}

/* stream_format "sse": the audio bytes of a body's speech.audio.delta
 * events into out (their count: *deltas), the speech.audio.done event's
 * line into done (empty: none).  -1 on an event that is not one of these
 * or not whole. */
static long sse_audio(const char *body, unsigned char *out, size_t cap, int *deltas, char *done, size_t done_cap) {
  static const char head[] = "data: {\"type\":\"speech.audio.delta\",\"audio\":\"", tail[] = "\"}",
                    done_head[] = "data: {\"type\":\"speech.audio.done\",";
  size_t n = 0;
  *deltas = 0;
  done[0] = 0;
  for (const char *e = body; *e;) {
    const char *end = strstr(e, "\n\n");
    if (!end || done[0]) return -1; /* not whole, or something after the done event */
    if (!strncmp(e, head, sizeof head - 1) && !strncmp(end - 2, tail, 2)) {
      unsigned v = 0;
      int bits = 0;
      for (const char *c = e + sizeof head - 1; c < end - 2 && *c != '='; c++) {
        const char *at = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", *c);
        if (!at || !*c) return -1;
        v = v << 6 | (unsigned)(at - "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
        if ((bits += 6) >= 8) {
          if (n == cap) return -1;
          out[n++] = (unsigned char)(v >> (bits -= 8));
        }
      }
      ++*deltas;
    } else if (!strncmp(e, done_head, sizeof done_head - 1)) {
      snprintf(done, done_cap, "%.*s", (int)(end - e), e);
    } else {
      return -1;
    }
    e = end + 2;
  }
  return (long)n;
}

static char started_line[512]; /* the line the last server started printed */

/* Every server started and not yet reaped.  A failed check lets the test
 * run on and return early; a server left running would hold ctest's
 * output pipe (its stderr) and ctest would wait for it until its timeout
 * instead of reporting the failure.  So they are killed at exit, and each
 * dies with the test if the test itself is killed (PR_SET_PDEATHSIG). */
static pid_t servers[8];

static void forget_server(pid_t pid) {
  for (int i = 0; i < (int)(sizeof servers / sizeof *servers); i++)
    if (servers[i] == pid) servers[i] = 0;
}

static void kill_servers(void) {
  for (int i = 0; i < (int)(sizeof servers / sizeof *servers); i++)
    if (servers[i] > 0) {
      kill(servers[i], SIGKILL);
      waitpid(servers[i], NULL, 0);
      servers[i] = 0;
    }
}

/* Start the server; its port from the line it prints.  *pid its process.
 * extra: one more flag, or NULL; log: a file for its access log (stderr),
 * or NULL: -q. */
static int start_server(const char *bin, const char *model, pid_t *pid, const char *timeout, const char *extra,
                        const char *log) {
  int pfd[2];
  if (pipe(pfd)) return -1;
  pid_t parent = getpid();
  *pid = fork();
  if (*pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(125);
    dup2(pfd[1], 1);
    close(pfd[0]);
    close(pfd[1]);
    if (log && !freopen(log, "w", stderr)) _exit(126);
    const char *args[] = {bin, "serve", model, "--port", "0", "--max-streams", "2", "--max-body-kb", "4",
                          "--max-frames", "20000", "--threads", "1", "--timeout", timeout, NULL, NULL, NULL};
    int k = 15;
    if (!log) args[k++] = "-q";
    if (extra) args[k++] = extra;
    execv(bin, (char *const *)args);
    _exit(127);
  }
  close(pfd[1]);
  for (int i = 0; *pid > 0 && i < (int)(sizeof servers / sizeof *servers); i++)
    if (!servers[i]) {
      servers[i] = *pid;
      break;
    }
  char line[512];
  size_t n = 0;
  while (n < sizeof line - 1) {
    ssize_t k = read(pfd[0], line + n, 1);
    if (k <= 0 || line[n] == '\n') break;
    n++;
  }
  line[n] = 0;
  close(pfd[0]);
  snprintf(started_line, sizeof started_line, "%s", line);
  const char *at = strstr(line, "127.0.0.1:");
  return at ? atoi(at + 10) : -1;
}

/* Wait for pid (at most secs): its wait status, or -1 on timeout. */
static int wait_exit(pid_t pid, double secs) {
  for (int i = 0; i < (int)(secs * 100); i++) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) {
      forget_server(pid);
      return st;
    }
    usleep(10000);
  }
  return -1;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  atexit(kill_servers);
  const char *bin = getenv("SPEECHC_BIN");
  CHECK_MSG(bin && access(bin, X_OK) == 0, "SPEECHC_BIN must name the speechc binary (ctest sets it)");
  if (!bin) CHECK_DONE();
  snprintf(tmp, sizeof tmp, "/tmp/speechc_serve_XXXXXX");
  CHECK(mkdtemp(tmp) != NULL);
  char cmd[2048], model[128], ref[128];
  const char *slash = strrchr(bin, '/');
  snprintf(cmd, sizeof cmd, "cp -r tests/data/tts/tts_tiny_06b_layout %s/tts && '%.*smake_random_ckpt' codec-tiny "
           "%s/tts/speech_tokenizer --dtype f32 >/dev/null", tmp, slash ? (int)(slash - bin + 1) : 0, bin, tmp);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  snprintf(cmd, sizeof cmd, "%s/tts", tmp);
  write_tokenizer(cmd);
  snprintf(model, sizeof model, "%s/m.so", tmp);
  snprintf(ref, sizeof ref, "%s/ref.wav", tmp);
  snprintf(cmd, sizeof cmd, "'%s' build -q %s/tts -o %s && '%s' tts %s --text 'Hello world' --speaker tiny_speaker "
           "--seed 3 --max-frames 12 --decoder-batch 1 -q -o %s", bin, tmp, model, bin, model, ref);
  CHECK_MSG(system(cmd) == 0, "%s", cmd);
  size_t ref_len;
  unsigned char *want = slurp(ref, &ref_len);
  CHECK(want && ref_len > 44 + 1920 * 2);
  if (check_failures) CHECK_DONE();

  /* refusals before it listens: exit codes, messages on stderr */
  static const struct {
    const char *args;
    int rc;
    const char *says;
  } refuse[] = {
      {"serve %s/none.so", 2, "none.so"},
      {"serve %s/m.so --port 99999", 1, "--port expects an integer in [0, 65535]"},
      {"serve %s/m.so --tokenizer /nonexistent", 2, "/nonexistent"},
      {"serve %s/m.so --bogus", 1, "unknown option '--bogus'"},
      {"serve %s/m.so --max-connections 0", 1, "--max-connections expects an integer in [1, 4096]"},
      {"serve %s/m.so --cors 'a b'", 1, "--cors 'a b': expected * (any origin) or one origin"},
      {"serve %s/m.so --cors https://app.example.com/", 1, "no path, no trailing /"},
      {"serve %s/m.so --cors https://a.example.com,https://b.example.com", 1, "--cors 'https://a.example.com,"},
      {"serve %s/m.so --cors app.example.com", 1, "scheme://host[:port]"},
      {"serve %s/m.so --cors https://app.example.com:443", 1, "no :80 on http or :443 on https"},
      {"serve %s/m.so --cors http://a:99999", 1, "--cors 'http://a:99999'"},
      {"serve %s/m.so --cors http://a:0080", 1, "--cors 'http://a:0080'"},
      /* origins taken: on to the (missing) model, exit 2 */
      {"serve %s/none.so --cors http://[::1]:8080", 2, "none.so"},
      {"serve %s/none.so --cors http://my_host.example:8443", 2, "none.so"},
      {"serve %s/none.so --cors chrome-extension://abcdefgh", 2, "none.so"},
      {"serve", 1, "missing model.so"},
  };
  for (size_t i = 0; i < sizeof refuse / sizeof *refuse; i++) {
    char args[256], line[1024];
    snprintf(args, sizeof args, refuse[i].args, tmp);
    snprintf(cmd, sizeof cmd, "'%s' %s 2>%s/err", bin, args, tmp);
    int st = system(cmd);
    snprintf(line, sizeof line, "%s/err", tmp);
    size_t n;
    unsigned char *err = slurp(line, &n);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == refuse[i].rc, "%s: status %d", args, st);
    CHECK_MSG(err && memmem(err, n, refuse[i].says, strlen(refuse[i].says)), "%s: stderr lacks '%s'", args,
              refuse[i].says);
    free(err);
  }
  snprintf(cmd, sizeof cmd, "'%s' serve --help | grep -q -- --max-body-kb", bin);
  CHECK(system(cmd) == 0);

  pid_t pid = -1;
  port = start_server(bin, model, &pid, "60", NULL, NULL);
  CHECK_CONTAINS(started_line, "2 streams stepped together");
  CHECK_MSG(port > 0, "the server did not print its port");
  if (port <= 0) CHECK_DONE();
  Resp r;

  /* the same bytes as speechc tts: whole, streamed PCM, streamed WAV */
  const char *say = "{\"model\":\"m\",\"input\":\"Hello world\",\"voice\":\"tiny_speaker\",\"seed\":3,\"max_frames\":12%s}";
  char body[512];
  snprintf(body, sizeof body, say, "");
  CHECK(post(body, &r) == 0 && r.status == 200);
  CHECK_CONTAINS(r.headers, "audio/wav");
  CHECK_MSG(r.len == ref_len && !memcmp(r.body, want, ref_len), "WAV: %zu bytes, speechc tts wrote %zu", r.len,
            ref_len);
  free(r.body);
  snprintf(body, sizeof body, say, ",\"stream\":true,\"response_format\":\"pcm\"");
  CHECK(post(body, &r) == 0 && r.status == 200 && r.chunks >= 1);
  CHECK_CONTAINS(r.headers, "audio/pcm");
  CHECK_MSG(r.len == ref_len - 44 && !memcmp(r.body, want + 44, ref_len - 44), "streamed PCM: %zu bytes in %d "
            "chunks, want %zu", r.len, r.chunks, ref_len - 44);
  free(r.body);
  /* this 0.6B CustomVoice model drops any instruction, as qwen-tts'
   * generate_custom_voice does: the same bytes ("" as none is held on the
   * 1.7B model by tests/cli/test_cli.sh, through the same rule) */
  snprintf(body, sizeof body, say, ",\"instructions\":\"\"");
  CHECK(post(body, &r) == 0 && r.status == 200);
  CHECK_MSG(r.len == ref_len && !memcmp(r.body, want, ref_len), "instructions \"\": not the same WAV");
  free(r.body);
  snprintf(body, sizeof body, say, ",\"instructions\":\"be glad\"");
  CHECK(post(body, &r) == 0 && r.status == 200);
  CHECK_MSG(r.len == ref_len && !memcmp(r.body, want, ref_len), "an instruction changed the 0.6B model's WAV");
  free(r.body);
  /* null is the field absent (OpenAI's clients send it so); stream_format
   * "audio" is the audio itself, as always */
  snprintf(body, sizeof body, say, ",\"speed\":null,\"language\":null,\"temperature\":null,\"stream\":null,"
           "\"stream_format\":\"audio\",\"instructions\":null");
  CHECK(post(body, &r) == 0 && r.status == 200);
  CHECK_MSG(r.len == ref_len && !memcmp(r.body, want, ref_len), "nulls and stream_format audio: not the same WAV");
  free(r.body);
  /* stream_format "sse": OpenAI's events, their audio the same bytes,
   * usage at the end (the frames made); over HTTP/1.0 too */
  for (int v10 = 0; v10 < 2; v10++) {
    snprintf(body, sizeof body, say, ",\"stream_format\":\"sse\",\"response_format\":\"pcm\"");
    int ok = 0;
    if (!v10) {
      ok = post(body, &r) == 0;
    } else {
      int fd = connect_to();
      char head[256];
      snprintf(head, sizeof head, "POST /v1/audio/speech HTTP/1.0\r\nContent-Type: application/json\r\n"
               "Content-Length: %zu\r\n\r\n", strlen(body));
      ok = fd >= 0 && !send_all(fd, head, strlen(head)) && !send_all(fd, body, strlen(body)) &&
           read_response(fd, &r) == 0;
      if (fd >= 0) close(fd);
    }
    CHECK(ok && r.status == 200);
    CHECK_CONTAINS(r.headers, "Content-Type: text/event-stream\r\n");
    CHECK(v10 ? !strcasestr(r.headers, "chunked") : r.chunks >= 1);
    static unsigned char pcm[1 << 20];
    char done[256];
    int deltas = 0;
    const long got = ok ? sse_audio((char *)r.body, pcm, sizeof pcm, &deltas, done, sizeof done) : -1;
    CHECK_MSG(got == (long)ref_len - 44 && !memcmp(pcm, want + 44, ref_len - 44) && deltas >= 1,
              "sse%s: %ld audio bytes in %d events, want %zu: '%.300s'", v10 ? " over HTTP/1.0" : "", got, deltas,
              ref_len - 44, ok ? (char *)r.body : "");
    const int frames = (int)((ref_len - 44) / (2 * 1920));
    int in = -1, outk = -1, total = -1;
    CHECK_MSG(sscanf(done, "data: {\"type\":\"speech.audio.done\",\"usage\":{\"input_tokens\":%d,"
                     "\"output_tokens\":%d,\"total_tokens\":%d}}", &in, &outk, &total) == 3 &&
              in > 8 && outk == frames && total == in + outk, "sse: the done event '%s' (%d frames)", done, frames);
    free(r.body);
  }
  snprintf(body, sizeof body, say, ",\"stream\":true");
  CHECK(post(body, &r) == 0 && r.status == 200 && r.len == ref_len);
  static const unsigned char unknown[4] = {0xff, 0xff, 0xff, 0xff};
  CHECK(r.len == ref_len && !memcmp(r.body, want, 4) && !memcmp(r.body + 4, unknown, 4) &&
        !memcmp(r.body + 8, want + 8, 32) && !memcmp(r.body + 40, unknown, 4) &&
        !memcmp(r.body + 44, want + 44, ref_len - 44));
  free(r.body);

  /* HTTP/1.0 has no chunked transfer: a stream is sent whole, with its
   * length (the same bytes as the whole WAV), so a cut one can be told */
  {
    int fd = connect_to();
    snprintf(body, sizeof body, say, ",\"stream\":true");
    char head[256];
    snprintf(head, sizeof head, "POST /v1/audio/speech HTTP/1.0\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n", strlen(body));
    CHECK(fd >= 0 && !send_all(fd, head, strlen(head)) && !send_all(fd, body, strlen(body)));
    CHECK(fd >= 0 && read_response(fd, &r) == 0 && r.status == 200);
    CHECK_MSG(!strcasestr(r.headers, "chunked") && strcasestr(r.headers, "Content-Length:"), "HTTP/1.0 stream: %s",
              r.headers);
    CHECK_MSG(r.len == ref_len && !memcmp(r.body, want, ref_len), "HTTP/1.0 stream: %zu bytes, want the whole WAV's "
              "%zu", r.len, ref_len);
    free(r.body);
    if (fd >= 0) close(fd);
  }

  /* refusals: status, message, and the server still answers */
  static const struct {
    const char *method, *path, *body, *extra;
    int status;
    const char *says;
  } bad[] = {
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\",", NULL, 400, "not valid JSON"},
      {"POST", "/v1/audio/speech", "[1, 2]", NULL, 400, "expected a JSON object"},
      {"POST", "/v1/audio/speech", "{\"voice\": \"tiny_speaker\"}", NULL, 400, "input: missing"},
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"voice\": \"alloy\"}", NULL, 400,
       "voice: 'alloy' is not one of this model's: tiny_dialect, tiny_speaker"},
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"language\": \"sichuan_dialect\"}", NULL, 400,
       "language: 'sichuan_dialect' is not one of this model's: auto, chinese, english"},
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"response_format\": \"mp3\"}", NULL, 400,
       "response_format: 'mp3' is not supported"},
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"speed\": 1.25}", NULL, 400, "speed: 1.25 is not supported"},
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"temprature\": 0.5}", NULL, 400,
       "unknown field 'temprature'"},
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"max_frames\": 20001}", NULL, 400,
       "max_frames: 20001 is outside [1, 20000]"},
      /* asked for more than the talker's context (2048) holds after the
       * prompt: refused before anything runs (8 rows: the role's 3, 4
       * codec ids, the text's first token) */
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"max_frames\": 2042}", NULL, 400,
       "max_frames 2042: the prompt's 8 rows leave room for 2041 frames in the talker's context of 2048 positions"},
      {"POST", "/v1/audio/speech", "{\"input\": null}", NULL, 400, "input: missing"},
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"stream_format\": \"sse\", \"stream\": false}", NULL, 400,
       "server-sent events are streamed (leave stream out"},
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"stream_format\": \"mp3\"}", NULL, 400,
       "stream_format: 'mp3' is not supported; expected"},
      {"GET", "/v1/audio/speech", NULL, NULL, 405, "method not allowed; use POST"},
      {"POST", "/health", "{}", NULL, 405, "method not allowed; use GET"},
      {"GET", "/v1/audio/speeches", NULL, NULL, 404, "no endpoint /v1/audio/speeches"},
      {"POST", "/v1/audio/speech", NULL, "Content-Length: 5000\r\n", 413, "this server takes at most 4096"},
      /* the message quotes the first 100 bytes of the voice, which cut its
       * 'é' in two: the body stays UTF-8, the cut byte a U+FFFD */
#define A10 "aaaaaaaaaa"
      {"POST", "/v1/audio/speech", "{\"input\": \"hi\", \"voice\": \"" A10 A10 A10 A10 A10 A10 A10 A10 A10
       "aaaaaaaaa\xc3\xa9\"}", NULL, 400, "voice: '" A10 A10 A10 A10 A10 A10 A10 A10 A10 "aaaaaaaaa\\ufffd' is not "
       "one of this model's"},
#undef A10
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK(request(bad[i].method, bad[i].path, bad[i].body, bad[i].extra, &r) == 0);
    CHECK_MSG(r.status == bad[i].status, "%s %s %s: %d, want %d", bad[i].method, bad[i].path,
              bad[i].body ? bad[i].body : "", r.status, bad[i].status);
    CHECK_CONTAINS((char *)r.body, bad[i].says);
    CHECK_CONTAINS((char *)r.body, "{\"error\":{\"message\":");
    CHECK_CONTAINS(r.headers, "application/json");
    free(r.body);
    CHECK(health_ok());
  }
  /* a 405's Allow names the methods of the URL asked for */
  CHECK(request("GET", "/v1/audio/speech", NULL, NULL, &r) == 0 && r.status == 405);
  CHECK_CONTAINS(r.headers, "Allow: POST, OPTIONS\r\n");
  CHECK_MSG(!strcasestr(r.headers, "Access-Control"), "CORS headers without --cors: %s", r.headers);
  free(r.body);
  CHECK(request("POST", "/health", "{}", NULL, &r) == 0 && r.status == 405);
  CHECK_CONTAINS(r.headers, "Allow: GET, HEAD, OPTIONS\r\n");
  free(r.body);
  /* OPTIONS: 204 and the methods, no CORS headers without --cors; an
   * unknown path is still 404 */
  CHECK(request("OPTIONS", "/v1/audio/speech", NULL, NULL, &r) == 0 && r.status == 204);
  CHECK_CONTAINS(r.headers, "Allow: POST, OPTIONS\r\n");
  CHECK_MSG(!strcasestr(r.headers, "Access-Control"), "CORS headers without --cors: %s", r.headers);
  free(r.body);
  CHECK(request("OPTIONS", "/nowhere", NULL, NULL, &r) == 0 && r.status == 404);
  free(r.body);
  /* a chunked body past the limit: refused once it is read */
  {
    int fd = connect_to();
    CHECK(fd >= 0 && send_request(fd, "POST", "/v1/audio/speech", NULL, "Transfer-Encoding: chunked\r\n") == 0);
    static char chunk[1100];
    memset(chunk, 'a', sizeof chunk);
    memcpy(chunk, "400\r\n", 5);
    memcpy(chunk + 5 + 1024, "\r\n", 2);
    for (int k = 0; k < 6; k++) send_all(fd, chunk, 5 + 1024 + 2);
    send_all(fd, "0\r\n\r\n", 5);
    CHECK(read_response(fd, &r) == 0 && r.status == 413);
    CHECK_CONTAINS((char *)r.body, "more than 4096 bytes");
    free(r.body);
    close(fd);
    CHECK(health_ok());
  }
  /* not HTTP at all */
  {
    int fd = connect_to();
    CHECK(fd >= 0 && send_all(fd, "\x01\x02 garbage\r\n\r\n", 14) == 0);
    read_response(fd, &r);
    CHECK_MSG(r.status == 0 || r.status == 400, "garbage: %d", r.status);
    free(r.body);
    close(fd);
    CHECK(health_ok());
  }

  /* a client that leaves mid-stream: its generation stops */
  double frames0 = metric("speechc_frames_total");
  int fd = open_long_stream();
  CHECK(fd >= 0);
  close(fd);
  CHECK_MSG(idle_within(3), "the stream is still generating after its client left");
  double made = metric("speechc_frames_total") - frames0;
  CHECK_MSG(made > 0 && made < 1000, "%g frames made for a client that left", made);
  CHECK(metric("speechc_speech_disconnects_total") == 1);
  CHECK(health_ok());

  /* the same for a whole response: its socket is checked each frame */
  fd = connect_to();
  char whole[512];
  snprintf(whole, sizeof whole, "%.*s}", (int)(strstr(LONG_STREAM, ",\"stream\"") - LONG_STREAM), LONG_STREAM);
  CHECK(fd >= 0 && send_request(fd, "POST", "/v1/audio/speech", whole, NULL) == 0);
  for (int i = 0; i < 100 && active_streams() != 1; i++) usleep(10000); /* it has started */
  frames0 = metric("speechc_frames_total");
  close(fd);
  CHECK_MSG(idle_within(3), "the whole response is still generating after its client left");
  made = metric("speechc_frames_total") - frames0;
  CHECK_MSG(made >= 0 && made < 1000, "%g frames made for a client that left", made);
  CHECK(metric("speechc_speech_disconnects_total") == 2);
  CHECK(health_ok());

  /* a request made in the same batched steps as another: the same bytes */
  fd = open_long_stream();
  CHECK(fd >= 0 && active_streams() == 1);
  snprintf(body, sizeof body, say, "");
  CHECK(post(body, &r) == 0 && r.status == 200 && r.len == ref_len && !memcmp(r.body, want, ref_len));
  free(r.body);
  CHECK_MSG(active_streams() == 1, "the long stream ended while the other request ran");
  close(fd);
  CHECK(idle_within(3));

  /* both streams busy: the third request is refused at once */
  int a = open_long_stream(), b = open_long_stream();
  CHECK(a >= 0 && b >= 0 && active_streams() == 2);
  snprintf(body, sizeof body, say, "");
  CHECK(post(body, &r) == 0 && r.status == 503);
  CHECK_CONTAINS((char *)r.body, "all 2 streams are busy");
  CHECK_CONTAINS((char *)r.body, "\"type\":\"server_busy\"");
  free(r.body);
  close(a);
  close(b);
  CHECK(idle_within(3));
  CHECK(post(body, &r) == 0 && r.status == 200 && r.len == ref_len && !memcmp(r.body, want, ref_len));
  free(r.body);

  /* what /metrics counted */
  CHECK(metric("speechc_speech_rejected_total") == 1);
  CHECK(metric("speechc_http_requests_total{endpoint=\"/v1/audio/speech\",code=\"503\"}") == 1);
  CHECK(metric("speechc_http_requests_total{endpoint=\"/v1/audio/speech\",code=\"413\"}") == 2);
  CHECK(metric("speechc_time_to_first_audio_seconds_count") >= 7);
  CHECK(metric("speechc_active_streams") == 0 && metric("speechc_max_streams") == 2);
  CHECK(request("GET", "/v1/models", NULL, NULL, &r) == 0 && r.status == 200);
  CHECK_CONTAINS((char *)r.body, "\"id\":\"m\"");
  CHECK_CONTAINS((char *)r.body, "\"voices\":[\"tiny_dialect\",\"tiny_speaker\"]");
  free(r.body);

  /* --timeout: a whole response past it is 504, an idle connection is closed */
  pid_t pid2 = -1;
  int port1 = port;
  port = start_server(bin, model, &pid2, "1", "--no-batch", NULL);
  CHECK(port > 0);
  CHECK_CONTAINS(started_line, "2 streams each on its own");
  /* each request on its own: the same bytes */
  CHECK(post(body, &r) == 0 && r.status == 200 && r.len == ref_len && !memcmp(r.body, want, ref_len));
  free(r.body);
  CHECK(post(whole, &r) == 0 && r.status == 504);
  CHECK_CONTAINS((char *)r.body, "ran past --timeout 1 s");
  CHECK_CONTAINS((char *)r.body, "\"type\":\"timeout\"");
  CHECK_MSG(!strstr((char *)r.body, "HTTP/1.0"), "%s", (char *)r.body);
  free(r.body);
  /* over HTTP/1.0 a stream is sent whole: the hint says so */
  fd = connect_to();
  {
    char head[256];
    snprintf(head, sizeof head, "POST /v1/audio/speech HTTP/1.0\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n", strlen(whole));
    CHECK(fd >= 0 && !send_all(fd, head, strlen(head)) && !send_all(fd, whole, strlen(whole)));
    CHECK(fd >= 0 && read_response(fd, &r) == 0 && r.status == 504);
    CHECK_CONTAINS((char *)r.body, "or stream: true over HTTP/1.1 (over HTTP/1.0 a response is sent whole), or "
                   "stream_format \\\"sse\\\", which streams over HTTP/1.0 too");
    free(r.body);
    if (fd >= 0) close(fd);
  }
  fd = connect_to();
  char c;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK_MSG(fd >= 0 && recv(fd, &c, 1, 0) == 0, "an idle connection was not closed");
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CHECK_MSG(t1.tv_sec - t0.tv_sec < 10, "closed after %ld s", (long)(t1.tv_sec - t0.tv_sec));
  if (fd >= 0) close(fd);
  CHECK(health_ok());
  /* a client trickling its request, a byte every 0.2 s, never idle for
   * --timeout: closed once its request has taken longer than --timeout
   * (within a few seconds; it would have taken 12 s to send); then the
   * same for a body after whole headers */
  for (int part = 0; part < 2; part++) {
    const char *slow = part ? "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Length: 60\r\n\r\n"
                              "{\"input\": \"Hello world, said slowly, a byte at a time\"}"
                            : "POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
    const size_t head = part ? strstr(slow, "\r\n\r\n") + 4 - slow : 0;
    fd = connect_to();
    CHECK(fd >= 0);
    if (fd < 0) break;
    if (head) CHECK(send(fd, slow, head, 0) == (ssize_t)head);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int closed = 0;
    for (size_t i = head; slow[i] && !closed; i++) {
      if (send(fd, slow + i, 1, MSG_NOSIGNAL) != 1) closed = 1;
      for (int k = 0; k < 4 && !closed; k++) { /* 0.2 s, watching for the close */
        struct timeval tv = {0, 50000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ssize_t got = recv(fd, &c, 1, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) closed = 1;
      }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK_MSG(closed && took >= 0.9 && took < 4, "a trickling %s: %s after %.2f s", part ? "body" : "header",
              closed ? "closed" : "still open", took);
    close(fd);
  }
  CHECK(health_ok());
  /* SIGINT with a whole response in progress: its 503 goes out before the
   * daemon closes the connections (they were closed first, and the
   * client saw no response at all) */
  int wf = connect_to();
  CHECK(wf >= 0 && send_request(wf, "POST", "/v1/audio/speech",
                                "{\"input\":\"Hello world\",\"seed\":5,\"temperature\":100,\"top_k\":0}",
                                NULL) == 0);
  for (int i = 0; i < 500 && active_streams() < 1; i++) usleep(2000);
  kill(pid2, SIGINT);
  {
    struct timeval tv = {10, 0};
    setsockopt(wf, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[2048];
    size_t n = 0;
    for (ssize_t k; wf >= 0 && n < sizeof buf - 1 && (k = recv(wf, buf + n, sizeof buf - 1 - n, 0)) > 0;)
      n += (size_t)k;
    buf[n] = 0;
    CHECK_MSG(!strncmp(buf, "HTTP/1.1 503", 12) && strstr(buf, "the server is shutting down"),
              "a whole response at SIGINT: '%.200s'", buf);
    if (wf >= 0) close(wf);
  }
  int st = wait_exit(pid2, 20);
  CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "after SIGINT: wait status %d", st);
  port = port1;

  /* a talker context of 30: without max_frames a request that makes no
   * EOS ends at the context's end, 30 - 8 + 1 = 23 frames (whole and
   * streamed, the stream ended by its last chunk, not cut); max_frames 23
   * is the same request; 24 is refused */
  {
    char m30[128];
    snprintf(m30, sizeof m30, "%s/m30.so", tmp);
    snprintf(cmd, sizeof cmd, "'%s' build -q %s/tts -o %s --max-context 30", bin, tmp, m30);
    CHECK_MSG(system(cmd) == 0, "%s", cmd);
    pid_t pid3 = -1;
    char log30[160];
    snprintf(log30, sizeof log30, "%s/m30.log", tmp);
    port = start_server(bin, m30, &pid3, "60", "--cors=HTTPS://App.Example.com", log30); /* sent lower case */
    CHECK(port > 0);
    /* --cors: a browser's preflight answered, every response marked */
    /* the headers asked for are allowed as asked (OpenAI's JavaScript
     * client sends X-Stainless-* ones), unless they are not header names */
    CHECK(request("OPTIONS", "/v1/audio/speech", NULL, "Origin: https://app.example.com\r\n"
                  "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization,"
                  "content-type,x-stainless-os,x-stainless-retry-count\r\n", &r) == 0 && r.status == 204);
    CHECK_CONTAINS(r.headers, "Access-Control-Allow-Origin: https://app.example.com\r\n");
    CHECK_CONTAINS(r.headers, "Access-Control-Allow-Methods: POST, OPTIONS\r\n");
    CHECK_CONTAINS(r.headers, "Access-Control-Allow-Headers: authorization,content-type,x-stainless-os,"
                   "x-stainless-retry-count\r\n");
    CHECK_CONTAINS(r.headers, "Vary: Origin\r\n");
    CHECK_CONTAINS(r.headers, "Vary: Access-Control-Request-Headers\r\n");
    free(r.body);
    CHECK(request("OPTIONS", "/v1/audio/speech", NULL, "Origin: https://app.example.com\r\n"
                  "Access-Control-Request-Headers: x-a;b=c\r\n", &r) == 0 && r.status == 204);
    CHECK_CONTAINS(r.headers, "Access-Control-Allow-Headers: Content-Type, Authorization\r\n");
    free(r.body);
    CHECK(request("GET", "/health", NULL, NULL, &r) == 0 && r.status == 200);
    CHECK_CONTAINS(r.headers, "Access-Control-Allow-Origin: https://app.example.com\r\n");
    free(r.body);
    CHECK(request("GET", "/v1/audio/speech", NULL, NULL, &r) == 0 && r.status == 405);
    CHECK_CONTAINS(r.headers, "Access-Control-Allow-Origin: https://app.example.com\r\n");
    free(r.body);
    const char *noeos = "{\"input\":\"Hello world\",\"seed\":5,\"temperature\":100,\"top_k\":0,"
                        "\"response_format\":\"pcm\"%s}";
    const size_t full = 23 * 1920 * 2;
    unsigned char *whole23 = NULL;
    snprintf(body, sizeof body, noeos, "");
    CHECK(post(body, &r) == 0 && r.status == 200);
    CHECK_MSG(r.len == full, "to the context's end: %zu bytes, want %zu (23 frames)", r.len, full);
    whole23 = r.body;
    snprintf(body, sizeof body, noeos, ",\"stream\":true");
    CHECK(post(body, &r) == 0 && r.status == 200 && r.chunks >= 1 && r.ended);
    CHECK_CONTAINS(r.headers, "Access-Control-Allow-Origin: https://app.example.com\r\n");
    CHECK_MSG(r.len == full && whole23 && !memcmp(r.body, whole23, full), "streamed to the context's end: %zu "
              "bytes", r.len);
    free(r.body);
    snprintf(body, sizeof body, noeos, ",\"max_frames\":23");
    CHECK(post(body, &r) == 0 && r.status == 200 && r.len == full && whole23 && !memcmp(r.body, whole23, full));
    free(r.body);
    snprintf(body, sizeof body, noeos, ",\"max_frames\":24");
    CHECK(post(body, &r) == 0 && r.status == 400);
    CHECK_CONTAINS((char *)r.body, "max_frames 24: the prompt's 8 rows leave room for 23 frames in the talker's "
                   "context of 30 positions");
    free(r.body);
    free(whole23);
    kill(pid3, SIGTERM);
    st = wait_exit(pid3, 20);
    CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "context-30 server: wait status %d", st);
    /* its log says which requests ended at the context's end: the three
     * of 23 frames, not the refused one */
    size_t log_len;
    char *log = (char *)slurp(log30, &log_len);
    int ends = 0;
    const char *end_line = "stopped at the context's end";
    for (const char *at = log; at && (at = memmem(at, log_len - (size_t)(at - log), end_line, strlen(end_line)));
         at++)
      ends++;
    CHECK_MSG(log && ends == 3, "the log has %d lines of a request stopped at the context's end:\n%.*s", ends,
              log ? (int)log_len : 0, log ? log : "");
    free(log);
    port = port1;
  }

  /* --max-connections-per-ip 2: two idle connections from this address
   * are all it may hold; a third is closed unanswered, and once one of the
   * two is closed a request goes through again */
  {
    pid_t pid4 = -1;
    port = start_server(bin, model, &pid4, "60", "--max-connections-per-ip=2", NULL);
    CHECK(port > 0);
    int held[2] = {connect_to(), connect_to()};
    CHECK(held[0] >= 0 && held[1] >= 0);
    usleep(200000); /* both accepted before the third comes */
    CHECK_MSG(!health_ok(), "a third connection from one address was answered with --max-connections-per-ip 2");
    if (held[0] >= 0) close(held[0]);
    int ok = 0;
    for (int i = 0; i < 100 && !(ok = health_ok()); i++) usleep(50000);
    CHECK_MSG(ok, "no request went through after one of the two connections was closed");
    if (held[1] >= 0) close(held[1]);
    kill(pid4, SIGTERM);
    st = wait_exit(pid4, 20);
    CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "per-ip server: wait status %d", st);
    port = port1;
  }

  /* SIGTERM with a stream in progress: the stream ends, the server exits 0 */
  fd = open_long_stream();
  CHECK(fd >= 0);
  kill(pid, SIGTERM);
  st = wait_exit(pid, 20);
  CHECK_MSG(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "after SIGTERM: wait status %d", st);
  if (st == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    forget_server(pid);
  }
  if (fd >= 0) close(fd);

  free(want);
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  CHECK(system(cmd) == 0);
  CHECK_DONE();
}
