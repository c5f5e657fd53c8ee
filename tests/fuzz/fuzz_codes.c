/*
 * fuzz_codes.c — the codes reader (compiler/codes.c) on arbitrary bytes.
 *
 * Input: one mode byte, then a body.
 *   mode % 4 == 0: the body as JSON, 16 codebooks, codes < 2048 (the
 *                  published codec);
 *   mode % 4 == 1: the body as raw int32, same spec;
 *   mode % 4 == 2: the body written to a file named "codes" and read back
 *                  with codes_read (format sniffed from the first byte);
 *   mode % 4 == 3: five more bytes choose the spec and the format:
 *                  codebooks 1 + b0 % 20, vocab 1 + (b1 | b2 << 8),
 *                  max_frames 1 + b3 % 64, format b4 % 3 (auto, JSON, raw).
 * The contract: no crash; a refusal is SC_EINPUT (SC_ERUNTIME only for out
 * of memory) with a message that starts with the input's name, and leaves
 * the output zeroed; an accepted input has 1..max_frames frames of exactly
 * `codebooks` codes, each in [0, vocab); raw input is exactly those codes,
 * little-endian; JSON input reads back the same after being written again
 * as [[...], ...].
 */
#include "fuzz_util.h"

#include "codes.h"

static char dir[512], file[600];

static void cleanup(void) { fuzz_rm_tree(dir); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_tmpdir(dir, sizeof dir, "codes");
  atexit(cleanup);
  snprintf(file, sizeof file, "%s/codes", dir);
  return 0;
}

/* [[c, ...], ...] of c; malloc'd. */
static char *to_json(const Codes *c, size_t *len) {
  size_t cap = 16 + (size_t)c->frames * ((size_t)c->codebooks * 12 + 4), n = 0;
  char *s = malloc(cap);
  if (!s) abort();
  n += (size_t)snprintf(s + n, cap - n, "[");
  for (int t = 0; t < c->frames; t++) {
    n += (size_t)snprintf(s + n, cap - n, "%s[", t ? "," : "");
    for (int k = 0; k < c->codebooks; k++)
      n += (size_t)snprintf(s + n, cap - n, "%s%d", k ? "," : "",
                            c->codes[(size_t)t * c->codebooks + k]);
    n += (size_t)snprintf(s + n, cap - n, "]");
  }
  n += (size_t)snprintf(s + n, cap - n, "]");
  *len = n;
  return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) LLVMFuzzerInitialize(NULL, NULL);
  if (!size) return 0;
  int mode = data[0] % 4;
  data++, size--;
  CodesSpec spec = {16, 2048, 0};
  CodesFormat fmt = mode == 1 ? CODES_RAW : mode == 0 ? CODES_JSON : CODES_AUTO;
  if (mode == 3) {
    if (size < 5) return 0;
    spec = (CodesSpec){1 + data[0] % 20, 1 + (data[1] | data[2] << 8), 1 + data[3] % 64};
    fmt = (CodesFormat)(data[4] % 3);
    data += 5, size -= 5;
  }
  Codes c = {(int32_t *)1, -1, -1};
  sc_error err = {0};
  const char *name = mode == 2 ? file : "input";
  int rc;
  if (mode == 2) {
    if (fuzz_write(file, data, size)) abort();
    rc = codes_read(file, fmt, &spec, &c, &err);
  } else {
    rc = codes_parse(data, size, fmt, &spec, name, &c, &err);
  }
  if (rc) {
    FUZZ_CHECK((rc == SC_EINPUT || rc == SC_ERUNTIME) && rc == err.code, "rc %d: %s", rc, err.msg);
    FUZZ_CHECK(!strncmp(err.msg, name, strlen(name)) && err.msg[strlen(name)] == ':',
               "the message does not start with the name: %s", err.msg);
    FUZZ_CHECK(!c.codes && !c.frames && !c.codebooks, "output not zeroed on failure");
    return 0;
  }
  int max_frames = spec.max_frames ? spec.max_frames : CODES_MAX_FRAMES;
  FUZZ_CHECK(c.frames >= 1 && c.frames <= max_frames && c.codebooks == spec.codebooks,
             "%d frames x %d codes", c.frames, c.codebooks);
  size_t n = (size_t)c.frames * c.codebooks;
  for (size_t i = 0; i < n; i++)
    FUZZ_CHECK(c.codes[i] >= 0 && c.codes[i] < spec.vocab, "code %d at %zu", c.codes[i], i);
  if (fmt == CODES_RAW) {
    FUZZ_CHECK(size == n * 4, "%zu bytes for %zu codes", size, n);
    for (size_t i = 0; i < n; i++) {
      const uint8_t *p = data + 4 * i;
      int32_t v = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                            (uint32_t)p[3] << 24);
      FUZZ_CHECK(v == c.codes[i], "code %zu: %d, bytes say %d", i, c.codes[i], v);
    }
  } else {
    size_t len;
    char *again = to_json(&c, &len);
    Codes d;
    rc = codes_parse(again, len, CODES_JSON, &spec, "again", &d, &err);
    FUZZ_CHECK(rc == 0, "written again, refused: %s", err.msg);
    FUZZ_CHECK(d.frames == c.frames && !memcmp(d.codes, c.codes, n * sizeof *c.codes),
               "written again, read differently");
    codes_free(&d);
    free(again);
  }
  codes_free(&c);
  return 0;
}
