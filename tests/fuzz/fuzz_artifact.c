/*
 * fuzz_artifact.c — the runtime's artifact loader (runtime/model.c:
 * sc_model_open and the weight-file checks) on arbitrary weight files.
 *
 * Set-up, once: build the bundled tiny Qwen3 with the build API (libtcc,
 * --max-context 16, --check-numerics) into a scratch directory, keep a
 * dlopen reference on its m.so (so that each run's dlopen is a lookup),
 * and record the valid weight file (m.<id>.weights, called m.weights
 * below) and the logits it gives.
 *
 * Input: byte 0 holds flags; bit 0 selects the mode, bit 1 skips the
 * checksum (sc_open_opts.verify_weights = 0).
 *   raw   (bit 0 clear): m.weights = the rest of the input;
 *   patch (bit 0 set):   m.weights = the valid file, resized by the signed
 *                        32-bit delta in bytes 5..8, with the rest of the
 *                        input written at the offset in bytes 1..4;
 * so both wholly foreign files and near misses (one header field, one
 * data byte, a few bytes short) are reached.
 *   cut   (bit 2 set):   the other bits are ignored; cut/m.so is the valid
 *                        m.so less its last K bytes, K the number in bytes
 *                        1..4 modulo its size + 1, next to the valid
 *                        weights (0: the whole file): every proper
 *                        prefix must be refused before dlopen (issue 12: a
 *                        truncated model.so died of SIGBUS inside dlopen),
 *                        the whole file must load.  Only cut, never
 *                        patched: a model.so is code, and a patched one is
 *                        free to do anything once loaded.
 * The contract checked beyond the sanitizers:
 *   - a refused file: SC_EINPUT, and the message names m.weights;
 *   - a file accepted with the checksum on holds exactly the valid data,
 *     and gives the recorded logits bit for bit;
 *   - with the checksum off, whatever the data, prefill and decode either
 *     work or fail with SC_ERUNTIME naming the --check-numerics check: the
 *     weights are numbers, never indices or sizes.
 */
#include "fuzz_util.h"

#include <dlfcn.h>
#include <glob.h>
#include <sys/stat.h>

#include "build.h"
#include "sc_abi.h"
#include "speechc.h"

static char dir[512], so[600], wpath[600], cut_dir[600], cut_so[700];
static unsigned char *valid; /* the valid weight file */
static size_t valid_size;
static unsigned char *so_bytes; /* the valid m.so */
static size_t so_size;
static float *ref_logits;    /* [vocab] after prefilling `prompt` */
static int vocab;
static void *keep;           /* dlopen reference held for the whole run */
static const int32_t prompt[] = {1, 2, 3};

static void cleanup(void) {
  if (keep) dlclose(keep);
  free(valid);
  free(so_bytes);
  free(ref_logits);
  fuzz_rm_tree(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_tmpdir(dir, sizeof dir, "artifact");
  atexit(cleanup);
  snprintf(so, sizeof so, "%s/m.so", dir);
  BuildOpts o = build_defaults();
  o.model_dir = SPEECHC_SOURCE_DIR "/tests/data/llm/qwen3_gqa2_hd32_tied";
  o.out_path = so;
  o.max_context = 16;
  o.check_numerics = 1;
  o.quiet = 1;
  sc_error err = {0};
  if (sc_build(&o, &err)) {
    fprintf(stderr, "fuzz_artifact: cannot build the tiny model: %s\n", err.msg);
    abort();
  }
  glob_t g;
  snprintf(wpath, sizeof wpath, "%s/m.*.weights", dir);
  if (glob(wpath, 0, NULL, &g) || g.gl_pathc != 1) {
    fprintf(stderr, "fuzz_artifact: %s: expected one weight file\n", wpath);
    abort();
  }
  snprintf(wpath, sizeof wpath, "%s", g.gl_pathv[0]);
  globfree(&g);
  if (!(valid = fuzz_slurp(wpath, &valid_size)) || !(so_bytes = fuzz_slurp(so, &so_size)) ||
      !(keep = dlopen(so, RTLD_NOW | RTLD_LOCAL))) {
    fprintf(stderr, "fuzz_artifact: %s: cannot read the build's outputs\n", dir);
    abort();
  }
  snprintf(cut_dir, sizeof cut_dir, "%s/cut", dir);
  snprintf(cut_so, sizeof cut_so, "%s/m.so", cut_dir);
  char cut_w[1400]; /* the weight file's own name: the model names it */
  snprintf(cut_w, sizeof cut_w, "%s/%s", cut_dir, strrchr(wpath, '/') + 1);
  if (mkdir(cut_dir, 0700) || fuzz_write(cut_w, valid, valid_size)) {
    fprintf(stderr, "fuzz_artifact: %s: cannot set up\n", cut_dir);
    abort();
  }
  sc_open_opts opts = {.verify_weights = 1, .threads = 1};
  sc_model *m;
  sc_session *s;
  if (sc_model_open(so, &opts, &m, &err) || sc_session_open(m, &s, &err) ||
      sc_prefill(s, prompt, 3, &err)) {
    fprintf(stderr, "fuzz_artifact: the valid model does not run: %s\n", err.msg);
    abort();
  }
  const float *lg = sc_logits(s, &vocab);
  ref_logits = malloc((size_t)vocab * sizeof *ref_logits);
  memcpy(ref_logits, lg, (size_t)vocab * sizeof *ref_logits);
  sc_session_close(s);
  sc_model_close(m);
  return 0;
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Write m.weights from the input; returns 0 when the input is too short. */
static int make_weights(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (!(data[0] & 1)) return fuzz_write(wpath, data + 1, size - 1) == 0;
  if (size < 9) return 0;
  uint32_t off = le32(data + 1);
  int64_t delta = (int32_t)le32(data + 5);
  /* at most 64 KiB longer than the valid file: the checks must not care */
  int64_t n = (int64_t)valid_size + (delta % 65536);
  if (n < 0) n = 0;
  unsigned char *buf = calloc((size_t)n + 1, 1);
  if (!buf) abort();
  memcpy(buf, valid, (size_t)n < valid_size ? (size_t)n : valid_size);
  size_t at = n ? off % (uint64_t)n : 0, len = size - 9;
  if (len > (size_t)n - at) len = (size_t)n - at;
  memcpy(buf + at, data + 9, len);
  int ok = fuzz_write(wpath, buf, (size_t)n) == 0;
  free(buf);
  return ok;
}

static void run_model(sc_model *m, int verified) {
  sc_session *s;
  sc_error err = {0};
  FUZZ_CHECK(sc_session_open(m, &s, &err) == SC_OK, "%s", err.msg);
  int rc = sc_prefill(s, prompt, 3, &err);
  if (verified) {
    FUZZ_CHECK(rc == SC_OK, "the valid weights failed: %s", err.msg);
    FUZZ_CHECK(!memcmp(sc_logits(s, NULL), ref_logits, (size_t)vocab * sizeof *ref_logits),
               "the valid weights gave other logits");
  }
  sc_sample_params p = sc_sample_defaults();
  p.greedy = 1;
  int32_t out[4];
  int n_out;
  if (rc == SC_OK) {
    sc_session_reset(s);
    rc = sc_generate(s, prompt, 3, 4, &p, -1, out, &n_out, NULL, NULL, &err);
  }
  if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz_artifact: run: rc %d %s\n", rc, rc ? err.msg : "");
  if (rc) {
    FUZZ_CHECK(rc == SC_ERUNTIME && strstr(err.msg, "--check-numerics"), "rc %d: %s", rc, err.msg);
    FUZZ_CHECK(!verified, "the valid weights failed: %s", err.msg);
  }
  sc_session_close(s);
}

/* cut mode: a prefix of the valid m.so, opened as a model. */
static void run_cut(const uint8_t *data, size_t size) {
  if (size < 5) return;
  size_t n = so_size - le32(data + 1) % (so_size + 1);
  unlink(cut_so); /* a new inode: the last one may still be mapped */
  if (fuzz_write(cut_so, so_bytes, n)) abort();
  sc_open_opts opts = {.verify_weights = 0, .threads = 1};
  sc_model *m = NULL;
  sc_error err = {0};
  int rc = sc_model_open(cut_so, &opts, &m, &err);
  if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz_artifact: cut %zu of %zu: rc %d %s\n", n, so_size, rc, rc ? err.msg : "");
  if (n < so_size) {
    FUZZ_CHECK(rc == SC_EINPUT && err.code == SC_EINPUT, "a model.so cut to %zu of %zu bytes: rc %d: %s",
               n, so_size, rc, err.msg);
    FUZZ_CHECK(strstr(err.msg, cut_so) && strstr(err.msg, "truncated or not an ELF shared object"),
               "message: %s", err.msg);
    FUZZ_CHECK(m == NULL, "a refused model was returned");
  } else {
    FUZZ_CHECK(rc == SC_OK, "the whole model.so was refused: %s", err.msg);
    sc_model_close(m);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) LLVMFuzzerInitialize(NULL, NULL);
  if (size >= 1 && (data[0] & 4)) {
    run_cut(data, size);
    return 0;
  }
  if (!make_weights(data, size)) return 0;
  int verify = !(data[0] & 2);
  sc_open_opts opts = {.verify_weights = verify, .threads = 1};
  sc_model *m = NULL;
  sc_error err = {0};
  int rc = sc_model_open(so, &opts, &m, &err);
  if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz_artifact: open: rc %d %s\n", rc, rc ? err.msg : "");
  if (rc) {
    FUZZ_CHECK(rc == SC_EINPUT && err.code == SC_EINPUT, "rc %d: %s", rc, err.msg);
    FUZZ_CHECK(strstr(err.msg, strrchr(wpath, '/') + 1) != NULL, "message lacks the weight file: %s", err.msg);
    FUZZ_CHECK(m == NULL, "a refused model was returned");
    return 0;
  }
  size_t n;
  unsigned char *now = fuzz_slurp(wpath, &n);
  FUZZ_CHECK(now && n == valid_size, "accepted a weight file of %zu bytes, expected %zu", n, valid_size);
  int same = !memcmp(now + SC_WFILE_HEADER, valid + SC_WFILE_HEADER, valid_size - SC_WFILE_HEADER);
  free(now);
  if (verify) FUZZ_CHECK(same, "accepted modified weight data with the checksum on");
  run_model(m, same);
  sc_model_close(m);
  return 0;
}
