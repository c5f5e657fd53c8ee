/* test_spm.c — runtime/spm.h against the sentencepiece package's DecodeIds.
 *
 * tests/data/spm/ was made by tests/parity/make_spm.py: two tiny models
 * trained by the package (unigram with Moshi's special ids, user-defined
 * and control symbols, byte fallback and NFKC; BPE without the dummy
 * prefix) and, for each, DecodeIds of about a thousand id sequences —
 * encodings of text in several scripts with emoji, every single id, random
 * ids over the whole vocabulary, invalid UTF-8 made of byte pieces — as the
 * UTF-8 bytes of the string it returned.  Every one must come out byte for
 * byte.  Then the refusals: ids outside the vocabulary (those the package
 * refuses too), a missing file, a directory, an empty file, a truncated or
 * altered model, a JSON file: each SC_EINPUT / SC_EUSAGE with a message
 * naming the file or the id, never a crash. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "check.h"
#include "file.h"
#include "scratch.h"
#include "spm.h"

#define DATA "tests/data/spm/"

static char *slurp(const char *path, size_t *len) {
  char *buf;
  sc_error err = {0};
  if (sc_read_regular(path, NULL, 0, &buf, len, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
  }
  return buf;
}

static int hexval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

/* Every case of DATA/name.json through sc_spm_decode. */
static void check_fixture(const char *name) {
  char mpath[256], jpath[256];
  snprintf(mpath, sizeof mpath, DATA "%s.model", name);
  snprintf(jpath, sizeof jpath, DATA "%s.json", name);
  sc_error err = {0};
  sc_spm *t = NULL;
  if (sc_spm_load(mpath, &t, &err)) {
    CHECK_MSG(0, "%s", err.msg);
    return;
  }
  size_t jlen;
  char *jtext = slurp(jpath, &jlen);
  cJSON *doc = cJSON_Parse(jtext);
  CHECK(doc);
  const cJSON *pieces = cJSON_GetObjectItem(doc, "pieces");
  CHECK(cJSON_IsNumber(pieces) && pieces->valueint == sc_spm_size(t));
  const cJSON *c;
  int n_ok = 0, n_err = 0, n_bytes = 0, n_bad = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(doc, "cases")) {
    const cJSON *jids = cJSON_GetObjectItem(c, "ids"), *hex = cJSON_GetObjectItem(c, "hex");
    int n = cJSON_GetArraySize(jids), k = 0;
    int32_t *ids = malloc(sizeof *ids * (n + 1));
    const cJSON *e;
    cJSON_ArrayForEach(e, jids) {
      ids[k] = (int32_t)e->valuedouble;
      n_bytes += sc_spm_is_byte(t, ids[k]);
      k++;
    }
    char *text = NULL;
    size_t len = 0;
    int rc = sc_spm_decode(t, ids, (size_t)n, &text, &len, &err);
    if (!hex) { /* the package refused it: an id outside the vocabulary */
      CHECK_MSG(rc == SC_EUSAGE, "%s case %d: accepted an id outside [0, %d)", name, n_ok + n_err,
                sc_spm_size(t));
      if (rc) CHECK_CONTAINS(err.msg, "outside the SentencePiece vocabulary");
      CHECK(!text && !len);
      n_err++;
    } else if (rc) {
      CHECK_MSG(0, "%s case %d: %s", name, n_ok + n_err, err.msg);
    } else {
      const char *h = hex->valuestring;
      size_t want = strlen(h) / 2;
      int same = len == want && text[len] == 0;
      for (size_t i = 0; same && i < want; i++)
        same = (unsigned char)text[i] == (hexval(h[2 * i]) << 4 | hexval(h[2 * i + 1]));
      if (!same) {
        n_bad++;
        if (n_bad <= 10)
          CHECK_MSG(0, "%s case %d: decoded '%s' (%zu bytes), the package '%s' (%zu bytes)", name,
                    n_ok + n_err, text, len, cJSON_GetObjectItem(c, "text")->valuestring, want);
      }
      n_ok++;
    }
    free(text);
    free(ids);
  }
  CHECK_MSG(n_bad == 0, "%s: %d of %d decodes differ", name, n_bad, n_ok);
  /* the fixture covers what it claims to */
  CHECK(n_ok > 900 && n_err >= 4 && n_bytes > 500);
  printf("%s: %d decodes identical to DecodeIds (%d byte pieces), %d refusals\n", name, n_ok, n_bytes, n_err);
  cJSON_Delete(doc);
  free(jtext);
  sc_spm_free(t);
}

/* A load that must fail with code and a message holding `what`. */
static void check_refused(const char *path, int code, const char *what) {
  sc_error err = {0};
  sc_spm *t = (sc_spm *)1;
  int rc = sc_spm_load(path, &t, &err);
  CHECK_MSG(rc == code, "%s: rc %d, expected %d (%s)", path, rc, code, err.msg);
  CHECK(t == NULL);
  CHECK_CONTAINS(err.msg, path);
  CHECK_CONTAINS(err.msg, what);
  sc_spm_free(rc ? NULL : t);
}

int main(void) {
  check_fixture("unigram_bf");
  check_fixture("bpe_nodummy");

  /* decode by hand: the word marker, the dummy prefix, byte pieces */
  sc_error err = {0};
  sc_spm *t = NULL;
  CHECK(!sc_spm_load(DATA "unigram_bf.model", &t, &err));
  if (t) {
    CHECK(sc_spm_size(t) == 420);
    CHECK(!sc_spm_is_byte(t, 0) && !sc_spm_is_byte(t, -1) && !sc_spm_is_byte(t, 420));
    int32_t bad[] = {5, 420, 7};
    char *text = (char *)1;
    size_t len = 9;
    CHECK(sc_spm_decode(t, bad, 3, &text, &len, &err) == SC_EUSAGE);
    CHECK(!text && !len);
    CHECK_CONTAINS(err.msg, "text id 420 (index 1) is outside the SentencePiece vocabulary [0, 420)");
    int32_t neg[] = {-3};
    CHECK(sc_spm_decode(t, neg, 1, &text, &len, &err) == SC_EUSAGE);
    CHECK_CONTAINS(err.msg, "text id -3 (index 0)");
    CHECK(sc_spm_decode(t, NULL, 0, &text, &len, &err) == SC_OK && len == 0 && text && !text[0]);
    free(text);
    sc_spm_free(t);
  }

  /* files that are not models */
  strcpy(root, "/tmp/sc_spm_XXXXXX");
  if (!mkdtemp(root)) return 1;
  check_refused(P("missing.model"), SC_EINPUT, "No such file");
  check_refused(root, SC_EINPUT, "directory");
  write_file(P("empty.model"), "", 0);
  check_refused(P("empty.model"), SC_EINPUT, "not a SentencePiece model");
  write_text(P("config.json"), "{\"model_type\": \"moshi\"}\n");
  check_refused(P("config.json"), SC_EINPUT, "not a SentencePiece model");
  size_t len;
  char *model = slurp(DATA "unigram_bf.model", &len);
  int refused = 0, loaded = 0;
  for (size_t cut = 1; cut < len; cut = cut * 3 / 2 + 1) { /* truncated */
    write_file(P("cut.model"), model, cut);
    sc_spm *u = NULL;
    int rc = sc_spm_load(P("cut.model"), &u, &err);
    CHECK_MSG(rc == SC_OK || rc == SC_EINPUT, "cut at %zu: rc %d", cut, rc);
    if (rc) CHECK_CONTAINS(err.msg, "not a SentencePiece model");
    refused += rc != 0, loaded += rc == 0;
    sc_spm_free(u);
  }
  CHECK(refused > 10);
  for (size_t i = 0; i < len; i += 97) { /* one byte altered: refused or still a model */
    model[i] ^= 0x5a;
    sc_spm *u = NULL;
    int rc = sc_spm_load_mem(model, len, "altered", &u, &err);
    CHECK_MSG(rc == SC_OK || rc == SC_EINPUT, "byte %zu altered: rc %d", i, rc);
    if (!rc) {
      int32_t ids[] = {0, 5, sc_spm_size(u) - 1};
      char *text = NULL;
      size_t tl;
      CHECK(!sc_spm_decode(u, ids, 3, &text, &tl, &err));
      free(text);
    }
    sc_spm_free(u);
    model[i] ^= 0x5a;
  }
  free(model);
  unlink(P("empty.model"));
  unlink(P("config.json"));
  unlink(P("cut.model"));
  rmdir(root);
  CHECK_DONE();
}
