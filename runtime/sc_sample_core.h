/*
 * sc_sample_core.h — the arithmetic of a draw, written once for the host
 * sampler (runtime/sample.c) and the device sampler (the sc_sample kernel
 * every CUDA artifact carries, codegen/cg_cuda.c).  The host C compiler
 * compiles this file where sample.c includes it; the build embeds the
 * same text as a string (CMake: gen/sc_sample_core_text.h) that cg_cuda.c
 * prints into model.cu, where NVRTC (or the emulator of tests/emu)
 * compiles it.  So a seed draws the same tokens on both sides by
 * construction: the penalty, the temperature, the order of candidates,
 * the generator, the double weights and the order of every sum are these
 * functions.  Only the search differs, by what each side runs well: the
 * host finds the argmax in a loop and the top-k with a heap, the device
 * with a block reduction and a bitonic sort, both ranking by
 * sc_ranks_before.
 *
 * Self-contained (no includes, C and CUDA alike): the includer defines
 * SC_SAMPLE_FN (the functions' qualifiers: `static inline`, or the
 * device's) and SC_SAMPLE_INF (float +infinity), and provides exp(double).
 */
#ifndef SC_SAMPLE_CORE_H
#define SC_SAMPLE_CORE_H

/* "a ranks before b": the higher score, then the lower id.  A strict total
 * order, so every argmax, selection and sort is deterministic. */
SC_SAMPLE_FN int sc_ranks_before(float score_a, int id_a, float score_b, int id_b) {
  return score_a > score_b || (score_a == score_b && id_a < id_b);
}

/* A seen id's score under a repetition penalty p (HF's processor):
 * divided when positive, multiplied when negative. */
SC_SAMPLE_FN float sc_penalized(float score, float p) { return score < 0.0f ? score * p : score / p; }

/* A score under temperature t > 0. */
SC_SAMPLE_FN float sc_tempered(float score, float t) { return score / t; }

/* xoshiro256** (integers only: the same draws on every platform). */
SC_SAMPLE_FN unsigned long long sc_rotl64(unsigned long long x, int k) { return (x << k) | (x >> (64 - k)); }

SC_SAMPLE_FN unsigned long long sc_xoshiro_next(unsigned long long s[4]) {
  const unsigned long long out = sc_rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = sc_rotl64(s[3], 45);
  return out;
}

/* Uniform in [0, 1) with 53 random bits. */
SC_SAMPLE_FN double sc_uniform01(unsigned long long s[4]) {
  return (double)(sc_xoshiro_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/*
 * Candidates in the order a draw walks them: candidate i has the tempered
 * score key[ids ? ids[i] : i] (-inf: suppressed) and the weight
 * exp(score - top) in double, top being the best score.  w: the weights
 * when the caller keeps them (the host, which reads each several times),
 * NULL to compute them again (the device has no room for them); the
 * values are the same either way.
 */
typedef struct sc_cands {
  const float *key;
  const int *ids;
  const double *w;
  float top;
} sc_cands;

SC_SAMPLE_FN float sc_cand_score(const sc_cands *c, int i) { return c->key[c->ids ? c->ids[i] : i]; }

SC_SAMPLE_FN double sc_cand_weight(const sc_cands *c, int i) {
  return c->w ? c->w[i] : exp((double)sc_cand_score(c, i) - c->top);
}

/* The weights of the first n, summed in order. */
SC_SAMPLE_FN double sc_cand_sum(const sc_cands *c, int n) {
  double z = 0;
  for (int i = 0; i < n; i++) z += sc_cand_weight(c, i);
  return z;
}

/* Top-p over the first n (best first): the shortest prefix whose share of
 * z reaches top_p, or 0 when rounding leaves all of them below it. */
SC_SAMPLE_FN int sc_top_p_prefix(const sc_cands *c, int n, double z, double top_p) {
  double cum = 0;
  for (int i = 0; i < n; i++) {
    cum += sc_cand_weight(c, i);
    if (cum / z >= top_p) return i + 1;
  }
  return 0;
}

/* One draw from the first n: u in [0, total) from the generator, walked
 * through the cumulative weights.  Returns the candidate's index; when
 * rounding lets u pass every weight, the last one not suppressed. */
SC_SAMPLE_FN int sc_draw(const sc_cands *c, int n, unsigned long long rng[4]) {
  double total = 0, cum = 0;
  int last = 0;
  for (int i = 0; i < n; i++) {
    total += sc_cand_weight(c, i);
    if (sc_cand_score(c, i) != -SC_SAMPLE_INF) last = i;
  }
  const double u = sc_uniform01(rng) * total;
  for (int i = 0; i < n; i++) {
    cum += sc_cand_weight(c, i);
    if (u < cum) return i;
  }
  return last;
}

#endif /* SC_SAMPLE_CORE_H */
