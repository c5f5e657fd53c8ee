/*
 * sample.c — token sampling (speechc.h): greedy, or repetition penalty,
 * temperature, top-k, top-p and a draw from a seeded xoshiro256**.
 *
 * The pipeline follows Hugging Face's logits processors so that settings
 * mean what they mean there:
 *   1. reject non-finite logits (they signal a broken model, not a choice);
 *   2. suppressed ids -> -inf;
 *   3. repetition penalty over the distinct ids of `history`
 *      (score < 0 ? score * p : score / p) — also under greedy, as in HF;
 *   4. greedy or temperature <= 0: argmax, lowest index on ties;
 *   5. otherwise divide by temperature; top-k keeps the k best (ties at the
 *      boundary go to the lower index); top-p keeps the shortest prefix of
 *      the descending order whose probability reaches top_p (at least one);
 *   6. softmax over the kept ids in double and a draw u in [0,1) walked
 *      through the cumulative sum in descending-score order.  With neither
 *      top-k nor top-p active nothing is sorted and the walk goes in id
 *      order (the distribution is the same; a 150k-entry sort per token is
 *      not free).
 * The generator is seeded from `seed` through splitmix64 and uses only
 * integer arithmetic, so a seed gives the same draws on every platform.
 * The arithmetic of a draw (penalty, temperature, ranking, generator,
 * weights and sums) is sc_sample_core.h, which the device sampler of CUDA
 * artifacts compiles too; this file orders the candidates.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "speechc.h"

#define SC_SAMPLE_FN static inline
#define SC_SAMPLE_INF INFINITY
#include "sc_sample_core.h"

struct sc_sampler {
  sc_sample_params p;
  unsigned long long rng[4]; /* xoshiro256** state (sc_sample_core.h) */
  int cap;          /* entries allocated in the arrays below */
  float *score;     /* [cap] working copy of the logits */
  int *idx;         /* [cap] candidate ids, best first once sorted */
  double *w;        /* [cap] exp(score - max) per candidate */
  unsigned char *seen; /* [cap] marks for distinct history ids; kept zero */
};

sc_sample_params sc_sample_defaults(void) {
  sc_sample_params p;
  memset(&p, 0, sizeof p);
  p.greedy = 0;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.repetition_penalty = 1.0f;
  p.seed = 0;
  return p;
}

/* ---- generator ---------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* ---- sampler lifetime --------------------------------------------------- */

int sc_sampler_new(const sc_sample_params *p, sc_sampler **out, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  sc_sample_params d = sc_sample_defaults();
  if (!out) return sc_fail(err, SC_EUSAGE, "sc_sampler_new: out is NULL");
  *out = NULL;
  if (!p) p = &d;
  if (!(p->temperature >= 0) || isinf(p->temperature))
    return sc_fail(err, SC_EUSAGE,
                   "temperature must be a finite number >= 0 (got %g); "
                   "0 means greedy", p->temperature);
  if (p->top_k < 0)
    return sc_fail(err, SC_EUSAGE, "top_k must be >= 0 (got %d); 0 turns it off",
                   p->top_k);
  if (!(p->top_p > 0 && p->top_p <= 1))
    return sc_fail(err, SC_EUSAGE, "top_p must be in (0, 1] (got %g); "
                   "1 turns it off", p->top_p);
  if (!(p->repetition_penalty > 0) || isinf(p->repetition_penalty))
    return sc_fail(err, SC_EUSAGE,
                   "repetition_penalty must be a finite number > 0 (got %g); "
                   "1 turns it off", p->repetition_penalty);
  sc_sampler *s = calloc(1, sizeof *s);
  if (!s) return sc_fail(err, SC_ERUNTIME, "sc_sampler_new: out of memory");
  s->p = *p;
  uint64_t x = p->seed;
  for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
  *out = s;
  return SC_OK;
}

void rt_sampler_state(const sc_sampler *s, sc_sample_params *p, uint64_t rng[4]) {
  *p = s->p;
  for (int i = 0; i < 4; i++) rng[i] = s->rng[i];
}

void rt_sampler_set_rng(sc_sampler *s, const uint64_t rng[4]) {
  for (int i = 0; i < 4; i++) s->rng[i] = rng[i];
}

void sc_sampler_free(sc_sampler *s) {
  if (!s) return;
  free(s->score);
  free(s->idx);
  free(s->w);
  free(s->seen);
  free(s);
}

static int grow(sc_sampler *s, int n) {
  if (n <= s->cap) return 1;
  float *score = realloc(s->score, (size_t)n * sizeof *score);
  if (score) s->score = score;
  int *idx = realloc(s->idx, (size_t)n * sizeof *idx);
  if (idx) s->idx = idx;
  double *w = realloc(s->w, (size_t)n * sizeof *w);
  if (w) s->w = w;
  unsigned char *seen = realloc(s->seen, (size_t)n);
  if (seen) {
    memset(seen + s->cap, 0, (size_t)(n - s->cap));
    s->seen = seen;
  }
  if (!score || !idx || !w || !seen) return 0;
  s->cap = n;
  return 1;
}

/* ---- ordering ----------------------------------------------------------- */

/* Whether id a ranks before id b (sc_ranks_before). */
static int better(const float *score, int a, int b) { return sc_ranks_before(score[a], a, score[b], b); }

/* Restore a heap of ids[0..n) that keeps its worst id at the root. */
static void sift_down(const float *score, int *h, int n, int i) {
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && better(score, h[m], h[l])) m = l;
    if (r < n && better(score, h[m], h[r])) m = r;
    if (m == i) return;
    int t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* Sort ids[0..n) best first (heapsort; no recursion, no worst case). */
static void sort_best_first(const float *score, int *ids, int n) {
  for (int i = n / 2 - 1; i >= 0; i--) sift_down(score, ids, n, i);
  for (int end = n - 1; end > 0; end--) {
    int t = ids[0];
    ids[0] = ids[end];
    ids[end] = t;
    sift_down(score, ids, end, 0);
  }
}

/* Move the k best of ids[0..n) (k < n) to ids[0..k), sorted best first,
 * in O(n log k): a size-k heap whose root is the worst kept so far. */
static void top_k_select(const float *score, int *ids, int n, int k) {
  for (int i = k / 2 - 1; i >= 0; i--) sift_down(score, ids, k, i);
  for (int i = k; i < n; i++)
    if (better(score, ids[i], ids[0])) {
      ids[0] = ids[i];
      sift_down(score, ids, k, 0);
    }
  sort_best_first(score, ids, k);
}

/* ---- sampling ----------------------------------------------------------- */

static int argmax(const float *score, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (score[i] > score[best]) best = i;
  return best;
}

/* w[0..n) = the weights of c's first n candidates (c computes them: its
 * w is NULL), kept for the passes that read each of them again. */
static void fill_weights(const sc_cands *c, double *w, int n) {
  for (int i = 0; i < n; i++) w[i] = sc_cand_weight(c, i);
}

/* Top-p over the candidates ids[0..n) (best first already when `sorted`):
 * leaves the kept ids best first in ids[0..k) with w[i] = exp(score - top)
 * and returns k >= 1.  Unsorted candidates are not all sorted: only those
 * with weight >= 1e-9 of the best, and if they reach top_p the prefix is
 * the one the full order has (every id left out ranks below them);
 * otherwise the whole set is sorted after all. */
static int top_p_keep(const float *score, int *ids, double *w, int n,
                      int sorted, float top, double top_p) {
  const sc_cands fresh = {score, ids, NULL, top}, kept = {score, ids, w, top};
  const double z = sc_cand_sum(&fresh, n);
  int head = n;
  if (!sorted) {
    head = 0;
    for (int i = 0; i < n; i++)
      if (sc_cand_weight(&fresh, i) >= 1e-9) {
        int t = ids[head];
        ids[head++] = ids[i];
        ids[i] = t;
      }
    sort_best_first(score, ids, head);
  }
  fill_weights(&fresh, w, head);
  int k = sc_top_p_prefix(&kept, head, z, top_p);
  if (!k && head < n) {
    sort_best_first(score, ids, n);
    fill_weights(&fresh, w, n);
    k = sc_top_p_prefix(&kept, n, z, top_p);
  }
  return k ? k : n; /* rounding can leave the total a hair below top_p */
}

int sc_sample(sc_sampler *s, const float *logits, int n, const int32_t *history,
              int n_history, const int32_t *suppress, int n_suppress,
              int32_t *token, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!s || !logits || !token || n <= 0 || (n_history > 0 && !history) ||
      (n_suppress > 0 && !suppress))
    return sc_fail(err, SC_EUSAGE,
                   "sc_sample: bad arguments (n = %d; sampler, logits and "
                   "token must be non-NULL)", n);
  /* a negative count would drop the penalty or the suppression silently */
  if (n_history < 0 || n_suppress < 0)
    return sc_fail(err, SC_EUSAGE, "sc_sample: negative %s count %d",
                   n_history < 0 ? "history" : "suppress",
                   n_history < 0 ? n_history : n_suppress);
  for (int i = 0; i < n; i++)
    if (!isfinite(logits[i]))
      return sc_fail(err, SC_ERUNTIME,
                     "logits contain %s at index %d (hint: the model produced "
                     "non-finite values; check the weights and the input)",
                     isnan(logits[i]) ? "NaN" : "inf", i);
  if (!grow(s, n))
    return sc_fail(err, SC_ERUNTIME, "sc_sample: out of memory for %d logits", n);

  float *score = s->score;
  memcpy(score, logits, (size_t)n * sizeof *score);
  for (int i = 0; i < n_suppress; i++)
    if (suppress[i] >= 0 && suppress[i] < n) score[suppress[i]] = -INFINITY;

  float pen = s->p.repetition_penalty;
  if (pen != 1.0f && n_history > 0) {
    for (int i = 0; i < n_history; i++) {
      int id = history[i];
      if (id < 0 || id >= n || s->seen[id]) continue;
      s->seen[id] = 1;
      score[id] = sc_penalized(score[id], pen);
    }
    for (int i = 0; i < n_history; i++)
      if (history[i] >= 0 && history[i] < n) s->seen[history[i]] = 0;
  }

  int best = argmax(score, n);
  if (score[best] == -INFINITY)
    return sc_fail(err, SC_EUSAGE,
                   "sc_sample: every one of the %d tokens is suppressed", n);
  if (s->p.greedy || s->p.temperature <= 0) {
    *token = best;
    return SC_OK;
  }

  /* Candidates: every id not suppressed. */
  float temp = s->p.temperature;
  int *ids = s->idx, m = 0;
  for (int i = 0; i < n; i++)
    if (score[i] != -INFINITY) {
      score[i] = sc_tempered(score[i], temp);
      ids[m++] = i;
    }
  float top = score[best];
  if (isinf(top)) { /* a tiny temperature overflowed: its limit is argmax */
    *token = best;
    return SC_OK;
  }
  double *w = s->w;
  int kept = m;
  int sorted = 0;
  if (s->p.top_k > 0 && s->p.top_k < m) {
    top_k_select(score, ids, m, s->p.top_k);
    kept = s->p.top_k;
    sorted = 1;
  }
  if (s->p.top_p < 1.0f)
    kept = top_p_keep(score, ids, w, kept, sorted, top, s->p.top_p);
  else
    fill_weights(&(sc_cands){score, ids, NULL, top}, w, kept);
  *token = ids[sc_draw(&(sc_cands){score, ids, w, top}, kept, s->rng)];
  return SC_OK;
}
