/*
 * fuzz_tokenizer.c — the tokenizer (compiler/tokenizer.c) on arbitrary
 * text and arbitrary tokenizer files.
 *
 * Input: one mode byte, then a body.
 *   mode % 4 == 0, 1: the body is text for the HF-trained tiny BPE of
 *                     tests/data/tokenizer/tiny_bpe (loaded once);
 *   mode % 4 == 2:    body = merges.txt, FUZZ_SEP, text: merges.txt beside
 *                     the tiny BPE's vocab.json and tokenizer_config.json;
 *   mode % 4 == 3:    body = tokenizer.json, FUZZ_SEP, text: that file
 *                     alone in a directory.
 * The contract: no crash; a refused file is SC_EINPUT with a message that
 * names it; text that is not UTF-8 is SC_EINPUT with "not valid UTF-8 at
 * byte"; valid UTF-8 text encodes, and decode(encode(x)) == NFC(x).
 */
#include "fuzz_util.h"

#include <sys/stat.h>

#include "tokenizer.h"

#define FUZZ_SEP "\n=====\n"

static char dir[512], split_dir[600], single_dir[600];
static tok_tokenizer *tiny;

static void cleanup(void) {
  tok_free(tiny);
  fuzz_rm_tree(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_tmpdir(dir, sizeof dir, "tok");
  atexit(cleanup);
  snprintf(split_dir, sizeof split_dir, "%s/split", dir);
  snprintf(single_dir, sizeof single_dir, "%s/single", dir);
  if (mkdir(split_dir, 0700) || mkdir(single_dir, 0700)) abort();
  static const char *const files[] = {"vocab.json", "tokenizer_config.json"};
  for (int i = 0; i < 2; i++) {
    char from[1024], to[1024];
    snprintf(from, sizeof from, "%s/tests/data/tokenizer/tiny_bpe/%s", SPEECHC_SOURCE_DIR, files[i]);
    snprintf(to, sizeof to, "%s/%s", split_dir, files[i]);
    if (fuzz_copy(from, to)) {
      fprintf(stderr, "fuzz_tokenizer: cannot copy %s\n", from);
      abort();
    }
  }
  char tiny_dir[1024];
  snprintf(tiny_dir, sizeof tiny_dir, "%s/tests/data/tokenizer/tiny_bpe", SPEECHC_SOURCE_DIR);
  sc_error err = {0};
  if (tok_load(tiny_dir, &tiny, &err)) {
    fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
    abort();
  }
  return 0;
}

static int valid_utf8(const uint8_t *s, size_t n) {
  for (size_t i = 0; i < n;) {
    uint8_t c = s[i];
    size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!k || i + k > n) return 0;
    uint32_t cp = k == 1 ? c : k == 2 ? c & 0x1F : k == 3 ? c & 0x0F : c & 0x07;
    for (size_t j = 1; j < k; j++) {
      if ((s[i + j] & 0xC0) != 0x80) return 0;
      cp = cp << 6 | (s[i + j] & 0x3F);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += k;
  }
  return 1;
}

/* decode(encode(x)) against x.  Always: the same text up to NFC.  Not
 * byte for byte NFC(x) in general: added tokens are matched on the raw
 * text and NFC runs on the pieces between them (as HF does for tokens with
 * normalized: false), so a combining mark after an added token stays
 * uncomposed ("<|im_end|>" U+0338 is not NFC's "<|im_end|" U+226F), and a
 * tokenizer.json without a normalizer gives x back as it is.  Exactly
 * NFC(x) where `exact` says neither applies: the tiny tokenizer (NFC) on a
 * text without "<|", where none of its added tokens can match. */
static void check_text(tok_tokenizer *t, const uint8_t *s, size_t n, int exact) {
  int32_t *ids;
  size_t k;
  sc_error err = {0};
  int rc = tok_encode(t, (const char *)s, n, "text", &ids, &k, &err);
  if (!valid_utf8(s, n)) {
    FUZZ_CHECK(rc == SC_EINPUT && strstr(err.msg, "text: not valid UTF-8 at byte"), "rc %d: %s",
               rc, err.msg);
    return;
  }
  FUZZ_CHECK(rc == 0, "valid UTF-8 refused: %s", err.msg);
  char *back, *nfc, *back_nfc;
  size_t blen, nlen, bnlen;
  FUZZ_CHECK(tok_decode(t, ids, k, &back, &blen, &err) == 0, "%s", err.msg);
  FUZZ_CHECK(tok_nfc((const char *)s, n, &nfc, &nlen, &err) == 0, "%s", err.msg);
  FUZZ_CHECK(tok_nfc(back, blen, &back_nfc, &bnlen, &err) == 0, "%s", err.msg);
  FUZZ_CHECK(bnlen == nlen && !memcmp(back_nfc, nfc, nlen), "NFC(decode(encode(x))) != NFC(x)");
  if (exact) FUZZ_CHECK(blen == nlen && !memcmp(back, nfc, nlen), "decode(encode(x)) != NFC(x)");
  free(back);
  free(nfc);
  free(back_nfc);
  free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!tiny) LLVMFuzzerInitialize(NULL, NULL);
  if (!size) return 0;
  int mode = data[0] % 4;
  data++, size--;
  if (mode < 2) {
    check_text(tiny, data, size, !memmem(data, size, "<|", 2));
    return 0;
  }
  const uint8_t *sep = memmem(data, size, FUZZ_SEP, strlen(FUZZ_SEP));
  size_t flen = sep ? (size_t)(sep - data) : size;
  const uint8_t *text = sep ? sep + strlen(FUZZ_SEP) : data + size;
  size_t tlen = (size_t)(data + size - text);
  const char *d = mode == 2 ? split_dir : single_dir;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", d, mode == 2 ? "merges.txt" : "tokenizer.json");
  if (fuzz_write(path, data, flen)) abort();
  tok_tokenizer *t;
  sc_error err = {0};
  int rc = tok_load(d, &t, &err);
  if (rc) {
    FUZZ_CHECK((rc == SC_EINPUT || rc == SC_ERUNTIME) && rc == err.code, "rc %d: %s", rc, err.msg);
    FUZZ_CHECK(rc != SC_EINPUT || strstr(err.msg, d), "the message does not name the file: %s",
               err.msg);
    return 0;
  }
  check_text(t, text, tlen, 0);
  tok_free(t);
  return 0;
}
