/*
 * soak.c — a long run of many sessions on one model, watching memory.
 *
 *   soak model.so [--sessions 8] [--steps 10000] [--every 1000] [--threads 1]
 *
 * Opens --sessions sessions on one model, prefills each with a short
 * prompt, then makes --steps decode steps in all, round-robin over the
 * sessions: sample the next token (seeded temperature/top-k sampling, one
 * sampler per session) and decode it.  A session whose KV cache is full is
 * reset and prefilled again, so a run of any length keeps going.  Every
 * --every steps it prints the resident set size (/proc/self/statm), the
 * steps per second and how many sessions have filled their cache so far.
 *
 * The check: once every session has filled its cache once, nothing new
 * should be allocated — RSS at the end must not exceed RSS at that point by
 * more than 1 MiB (exit 1 otherwise, exit 0 when it holds).  scripts/soak.sh
 * builds the tiny model and runs this; not part of CI.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "speechc.h"

static long rss_kib(void) {
  long pages_total = 0, pages_res = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  if (fscanf(f, "%ld %ld", &pages_total, &pages_res) != 2) pages_res = -1;
  fclose(f);
  return pages_res < 0 ? -1 : pages_res * (sysconf(_SC_PAGESIZE) / 1024);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int die(const sc_error *err) {
  fprintf(stderr, "soak: %s\n", err->msg);
  return err->code ? err->code : 1;
}

/* The value after the last `name` among the options, or dflt. */
static long arg_long(int argc, char **argv, const char *name, long dflt) {
  for (int i = 2; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) dflt = strtol(argv[i + 1], NULL, 10);
  return dflt;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s model.so [--sessions N] [--steps N] [--every N] [--threads N]\n", argv[0]);
    return 1;
  }
  int n_sess = (int)arg_long(argc, argv, "--sessions", 8);
  long steps = arg_long(argc, argv, "--steps", 10000), every = arg_long(argc, argv, "--every", 1000);
  sc_open_opts opts = {.verify_weights = 1, .threads = (int)arg_long(argc, argv, "--threads", 1)};
  if (n_sess < 1 || n_sess > 1024 || steps < 1 || every < 1) {
    fprintf(stderr, "soak: bad --sessions, --steps or --every\n");
    return 1;
  }
  sc_error err = {0};
  sc_model *m;
  if (sc_model_open(argv[1], &opts, &m, &err)) return die(&err);
  sc_model_info info;
  sc_model_get_info(m, &info);
  sc_session **s = calloc((size_t)n_sess, sizeof *s);
  sc_sampler **smp = calloc((size_t)n_sess, sizeof *smp);
  int *filled = calloc((size_t)n_sess, sizeof *filled);
  const int32_t prompt[] = {1, 2, 3, 4};
  const int n_prompt = 4;
  printf("soak: %s, %d sessions, max context %d, %.2f MB state per session, %ld steps\n", argv[1],
         n_sess, info.max_context, info.state_bytes / 1048576.0, steps);
  long rss0 = rss_kib();
  for (int i = 0; i < n_sess; i++) {
    sc_sample_params p = sc_sample_defaults();
    p.temperature = 0.9f;
    p.top_k = 40;
    p.seed = (uint64_t)i + 1;
    if (sc_session_open(m, &s[i], &err) || sc_sampler_new(&p, &smp[i], &err) ||
        sc_prefill(s[i], prompt, n_prompt, &err))
      return die(&err);
  }
  printf("%8s %10s %10s %8s %7s\n", "step", "rss_kib", "delta_kib", "steps/s", "filled");
  long prev = rss_kib();
  printf("%8d %10ld %10s %8s %7d\n", 0, prev, "", "", 0);
  long rss_full = -1, resets = 0;
  int n_filled = 0;
  double t0 = now(), t_last = t0;
  for (long step = 1; step <= steps; step++) {
    int i = (int)(step % n_sess);
    int vocab;
    const float *logits = sc_logits(s[i], &vocab);
    int32_t tok;
    if (sc_sample(smp[i], logits, vocab, NULL, 0, NULL, 0, &tok, &err)) return die(&err);
    if (sc_session_pos(s[i]) >= info.max_context) {
      if (!filled[i]) {
        filled[i] = 1;
        if (++n_filled == n_sess) rss_full = rss_kib();
      }
      sc_session_reset(s[i]);
      resets++;
      if (sc_prefill(s[i], prompt, n_prompt, &err)) return die(&err);
    } else if (sc_decode(s[i], tok, &err)) {
      return die(&err);
    }
    if (step % every == 0 || step == steps) {
      long r = rss_kib();
      double t = now();
      printf("%8ld %10ld %+10ld %8.0f %7d\n", step, r, r - prev, every / (t - t_last), n_filled);
      fflush(stdout);
      prev = r;
      t_last = t;
    }
  }
  long rss_end = rss_kib();
  printf("soak: %.1f s, %ld resets; rss before sessions %ld KiB, when every cache had filled %ld KiB, "
         "at the end %ld KiB\n", now() - t0, resets, rss0, rss_full, rss_end);
  for (int i = 0; i < n_sess; i++) {
    sc_sampler_free(smp[i]);
    sc_session_close(s[i]);
  }
  free(s);
  free(smp);
  free(filled);
  sc_model_close(m);
  if (rss_full < 0) {
    printf("soak: not every session filled its cache; run more --steps or build with a smaller --max-context\n");
    return 1;
  }
  long growth = rss_end - rss_full;
  printf("soak: growth after the caches were full: %+ld KiB (%s)\n", growth, growth <= 1024 ? "ok" : "FAIL: > 1 MiB");
  return growth <= 1024 ? 0 : 1;
}
