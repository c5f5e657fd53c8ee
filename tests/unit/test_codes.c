/* test_codes.c — compiler/codes.c: the codes files `speechc decode` reads.
 *
 * The codec fixture's codes (tests/data/codec/codec_tiny/codes.i32, from
 * tests/parity/make_codec.py) must read the same as raw int32, as a bare
 * JSON array, as the object `speechc tts -o codes.json` writes, by name, by
 * sniffing and from stdin.  Then hostile inputs, each refused with SC_EINPUT
 * and a message that starts with the file's name and says what is wrong:
 * wrong row lengths, non-integers, negative and out-of-range codes, huge
 * numbers, wrong types, deep nesting, trailing bytes, NUL and bad UTF-8,
 * inconsistent "frames" / "codebooks", too many frames, oversize files, a
 * FIFO, a directory, a missing file, and raw sizes that are not whole
 * frames. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "codes.h"
#include "file.h"

#define FIXTURE "tests/data/codec/codec_tiny/codes.i32"
#define T 12
#define G 16

static int32_t ref[T * G];

/* A growable string for building JSON texts. */
typedef struct Buf {
  char *s;
  size_t n, cap;
} Buf;

static void add(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(Buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->n + (size_t)k + 1 > b->cap) {
    b->cap = (b->n + (size_t)k + 1) * 2;
    b->s = realloc(b->s, b->cap);
    if (!b->s) exit(1);
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->n, (size_t)k + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)k;
}

/* [[...], ...] of ref, or the object speechc tts writes (cmd_tts.c). */
static char *json_of_ref(int object) {
  Buf b = {0};
  if (object) add(&b, "{\"frames\": %d, \"codebooks\": %d, \"codes\": [", T, G);
  else add(&b, "[");
  for (int t = 0; t < T; t++) {
    add(&b, "%s\n  [", t ? "," : "");
    for (int k = 0; k < G; k++) add(&b, "%s%d", k ? ", " : "", ref[t * G + k]);
    add(&b, "]");
  }
  add(&b, object ? "\n]}\n" : "\n]\n");
  return b.s;
}

static void check_ref(const char *what, int rc, const Codes *c, const sc_error *err) {
  CHECK_MSG(rc == 0, "%s: %s", what, err->msg);
  if (rc) return;
  CHECK_MSG(c->frames == T && c->codebooks == G, "%s: %d x %d", what, c->frames, c->codebooks);
  CHECK_MSG(c->codes && !memcmp(c->codes, ref, sizeof ref), "%s: codes differ", what);
}

static const CodesSpec tiny = {G, 64, 0};

static void test_good(void) {
  size_t n;
  char *raw;
  sc_error err = {0};
  CHECK(sc_read_regular(FIXTURE, NULL, 0, &raw, &n, &err) == 0 && n == sizeof ref);
  for (size_t i = 0; i < T * G; i++) {
    const unsigned char *p = (const unsigned char *)raw + 4 * i;
    ref[i] = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                       (uint32_t)p[3] << 24);
  }
  Codes c;
  check_ref("codes.i32", codes_read(FIXTURE, CODES_AUTO, &tiny, &c, &err), &c, &err);
  codes_free(&c);
  check_ref("NULL spec", codes_read(FIXTURE, CODES_AUTO, NULL, &c, &err), &c, &err);
  codes_free(&c);
  CHECK(c.codes == NULL && c.frames == 0);

  char *arr = json_of_ref(0), *obj = json_of_ref(1);
  write_text(P("codes.json"), obj);
  check_ref("tts object", codes_read(P("codes.json"), CODES_AUTO, &tiny, &c, &err), &c, &err);
  codes_free(&c);
  write_text(P("codes.txt"), arr); /* no telling name: sniffed */
  check_ref("sniffed", codes_read(P("codes.txt"), CODES_AUTO, &tiny, &c, &err), &c, &err);
  codes_free(&c);
  write_file(P("codes.bin"), raw, n);
  check_ref("codes.bin", codes_read(P("codes.bin"), CODES_AUTO, &tiny, &c, &err), &c, &err);
  codes_free(&c);
  write_file(P("codes.dat"), raw, n); /* raw under a name that says nothing */
  check_ref("forced raw", codes_read(P("codes.dat"), CODES_RAW, &tiny, &c, &err), &c, &err);
  codes_free(&c);
  CHECK(codes_read(P("codes.dat"), CODES_AUTO, &tiny, &c, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "codes.dat: not JSON (first byte 0x");
  CHECK_CONTAINS(err.msg, "hint: raw int32 codes need a .bin, .i32 or .raw name");

  /* stdin: a pipe holding the object */
  int fds[2], saved = dup(STDIN_FILENO);
  CHECK(pipe(fds) == 0);
  CHECK(write(fds[1], obj, strlen(obj)) == (ssize_t)strlen(obj));
  close(fds[1]);
  dup2(fds[0], STDIN_FILENO);
  close(fds[0]);
  int rc = codes_read("-", CODES_AUTO, &tiny, &c, &err);
  dup2(saved, STDIN_FILENO);
  close(saved);
  check_ref("stdin", rc, &c, &err);
  codes_free(&c);

  /* integral numbers in other spellings, "-0", extra keys, repeated keys */
  const char *ok[] = {
      "[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]",
      "[[0.0,1e0,2E0,3,4,5,6,7,8,9,10,11,12,13,14,1.5e1]]",
      "[[-0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]",
      " \n\t[ [ 0 , 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15 ] ] \n",
      "{\"model\": \"x\", \"codes\": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}",
      "{\"codes\": [[9,9,9,9,9,9,9,9,9,9,9,9,9,9,9,9]], "
      "\"codes\": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}",
      "{\"frames\": 1, \"codebooks\": 16, \"codes\": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}",
  };
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    memset(&err, 0, sizeof err);
    rc = codes_parse(ok[i], strlen(ok[i]), CODES_JSON, &tiny, "ok.json", &c, &err);
    CHECK_MSG(rc == 0, "ok[%zu]: %s", i, err.msg);
    if (!rc) {
      CHECK(c.frames == 1 && c.codebooks == G);
      for (int k = 0; k < G; k++) CHECK_MSG(c.codes[k] == k, "ok[%zu][%d] = %d", i, k, c.codes[k]);
    }
    codes_free(&c);
  }
  /* another codebook count and the largest code */
  const CodesSpec two = {2, 2048, 0};
  rc = codes_parse("[[2047,0],[5,6]]", 16, CODES_JSON, &two, "g2.json", &c, &err);
  CHECK_MSG(rc == 0 && c.frames == 2 && c.codebooks == 2 && c.codes[0] == 2047 && c.codes[3] == 6,
            "%s", err.msg);
  codes_free(&c);
  free(arr);
  free(obj);
  free(raw);
}

/* JSON text that must be refused: rc SC_EINPUT, the message starts with
 * the name and contains `want`. */
static void bad_json(const char *text, size_t len, const CodesSpec *spec, const char *want) {
  Codes c = {(int32_t *)1, 7, 7};
  sc_error err = {0};
  int rc = codes_parse(text, len, CODES_JSON, spec, "bad.json", &c, &err);
  CHECK_MSG(rc == SC_EINPUT && err.code == SC_EINPUT, "'%.60s': rc %d (%s)", text, rc, err.msg);
  CHECK_MSG(!strncmp(err.msg, "bad.json: ", 10), "'%.60s': %s", text, err.msg);
  CHECK_MSG(strstr(err.msg, want) != NULL, "'%.60s': '%s' lacks '%s'", text, err.msg, want);
  CHECK(c.codes == NULL && c.frames == 0 && c.codebooks == 0);
}
#define BAD(text, want) bad_json(text, strlen(text), &tiny, want)

static void test_bad_json(void) {
  BAD("", "not valid JSON");
  BAD("[]", "no frames (an empty array)");
  BAD("[[]]", "frame 0 has 0 codes, expected 16");
  BAD("[[1,2,3]]", "frame 0 has 3 codes, expected 16");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]]",
      "frame 1 has 17 codes, expected 16");
  BAD("[1,2]", "frame 0 is a number, expected an array of 16 codes");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15], {\"a\": 1}]", "frame 1 is an object");
  BAD("[[\"0\",1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]", "frame 0, codebook 0: a string, expected an integer");
  BAD("[[0,1,2,3,null,5,6,7,8,9,10,11,12,13,14,15]]", "frame 0, codebook 4: null");
  BAD("[[0,1,2,3,4,true,6,7,8,9,10,11,12,13,14,15]]", "frame 0, codebook 5: a boolean");
  BAD("[[0,1,2,3,4,5,[6],7,8,9,10,11,12,13,14,15]]", "frame 0, codebook 6: an array");
  BAD("[[0,1,2,3,4,5,6,7.5,8,9,10,11,12,13,14,15]]", "frame 0, codebook 7: 7.5 is not an integer");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,1e400]]", "codebook 15: inf is not an integer");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,-1]]",
      "frame 0, codebook 15: code -1 is out of range [0, 64) (hint: qwen-tts pads batches with -1");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,64]]", "codebook 15: code 64 is out of range [0, 64)");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,-7]]", "code -7 is out of range");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,99999999999999999999]]",
      "code 1e+20 is out of range [0, 64)");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,4294967296]]", "code 4294967296 is out of range");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]] x", "not valid JSON (error near line 1");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]\n\n[]", "not valid JSON (error near line 3");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],]", "not valid JSON");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]", "not valid JSON");
  BAD("[[0x10,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]", "not valid JSON");
  /* escapes JSON does not have, named (a multi-byte one was reported as
   * bad UTF-8); every escape JSON has passes the check */
  BAD("{\"c\\qdes\": []}", "an invalid escape \\q at line 1 (byte 3); JSON's escapes are");
  BAD("{\"c\\\xc3\xa9\": []}", "an invalid escape, a backslash before byte 0xc3, at line 1 (byte 3)");
  BAD("{\"frames\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"}", "an object without \"codes\"");
  BAD("\"codes\"", "the top level is a string, expected an array of frames");
  BAD("42", "the top level is a number");
  BAD("{\"frames\": 1}", "an object without \"codes\"");
  BAD("{\"codes\": {\"0\": [1]}}", "\"codes\" is an object, expected an array of frames");
  BAD("{\"frames\": 2, \"codes\": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}",
      "\"frames\" is 2 but \"codes\" has 1 frames");
  BAD("{\"codebooks\": 8, \"codes\": [[0,1,2,3,4,5,6,7]]}", "\"codebooks\" is 8, expected 16");
  BAD("{\"frames\": \"1\", \"codes\": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]}",
      "\"frames\" is a string, expected a non-negative integer");
  BAD("{\"frames\": -1, \"codes\": []}", "\"frames\" is -1, expected a non-negative integer");
  BAD("{\"codes\": [[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]], \"codes\": []}",
      "no frames"); /* the last of a repeated key wins, as in Python */
  /* text-level refusals (json.h) */
  bad_json("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]\0", 42, &tiny, "control character (0x00)");
  BAD("[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]\xff", "not valid UTF-8: byte 0xff");
  BAD("{\"co\\u0000des\": [[1]]}", "holds a NUL character");
  /* deep nesting: cJSON's limit, not the stack */
  size_t depth = 100000;
  char *deep = malloc(2 * depth + 1);
  memset(deep, '[', depth);
  memset(deep + depth, ']', depth);
  deep[2 * depth] = '\0';
  BAD(deep, "not valid JSON");
  free(deep);
  /* too many frames */
  const CodesSpec two_frames = {G, 64, 2};
  const char *three = "[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15],"
                      "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]";
  bad_json(three, strlen(three), &two_frames, "3 frames, more than the limit of 2");
  /* the JSON size cap, on a buffer */
  size_t big = CODES_JSON_MAX + 1;
  char *blank = malloc(big);
  memset(blank, ' ', big);
  bad_json(blank, big, &tiny, "bytes of JSON, more than the 8 MiB limit (hint: write the codes as raw");
  free(blank);
}

static void bad_raw(const void *data, size_t len, const CodesSpec *spec, const char *want) {
  Codes c;
  sc_error err = {0};
  int rc = codes_parse(data, len, CODES_RAW, spec, "bad.bin", &c, &err);
  CHECK_MSG(rc == SC_EINPUT && !strncmp(err.msg, "bad.bin: ", 9), "raw %zu: rc %d %s", len, rc,
            err.msg);
  CHECK_MSG(strstr(err.msg, want) != NULL, "'%s' lacks '%s'", err.msg, want);
  CHECK(c.codes == NULL);
}

static void test_bad_raw(void) {
  unsigned char b[3 * G * 4];
  memset(b, 0, sizeof b);
  bad_raw(b, 0, &tiny, "empty: no frames");
  bad_raw(b, 63, &tiny, "63 bytes is not a whole number of frames of 16 int32 codes (64 bytes "
          "each; 63 bytes left over)");
  bad_raw(b, 65, &tiny, "1 bytes left over");
  memcpy(b + 4 * (G + 3), "\x40\x00\x00\x00", 4); /* frame 1, codebook 3: 64 */
  bad_raw(b, 2 * G * 4, &tiny, "frame 1, codebook 3: code 64 is out of range [0, 64)");
  memcpy(b + 4 * (G + 3), "\x00\x00\x00\x80", 4); /* INT32_MIN */
  bad_raw(b, 2 * G * 4, &tiny, "code -2147483648 is out of range");
  memcpy(b + 4 * (G + 3), "\xff\xff\xff\xff", 4); /* -1: the hint */
  bad_raw(b, 2 * G * 4, &tiny, "hint: qwen-tts pads batches with -1");
  memset(b, 0, sizeof b);
  const CodesSpec two_frames = {G, 64, 2};
  bad_raw(b, 3 * G * 4, &two_frames, "3 frames, more than the limit of 2");
  /* byte order: 0x0102 little-endian is 258 */
  Codes c;
  sc_error err = {0};
  memcpy(b, "\x02\x01\x00\x00", 4);
  const CodesSpec wide = {G, 4096, 0};
  CHECK(codes_parse(b, G * 4, CODES_RAW, &wide, "le.bin", &c, &err) == 0 && c.codes[0] == 258);
  codes_free(&c);
}

static void test_files(void) {
  Codes c;
  sc_error err = {0};
  CHECK(codes_read(P("missing.json"), CODES_AUTO, &tiny, &c, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "missing.json: cannot open: No such file or directory");
  CHECK(codes_read(root, CODES_JSON, &tiny, &c, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "is a directory, expected a regular file of codes");
  CHECK(mkfifo(P("fifo.json"), 0600) == 0);
  CHECK(codes_read(P("fifo.json"), CODES_AUTO, &tiny, &c, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "fifo.json: is a FIFO, expected a regular file of codes");
  /* oversize: refused by its size, before any read (sparse files) */
  int fd = open(P("big.json"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && ftruncate(fd, (off_t)CODES_JSON_MAX + 1) == 0);
  close(fd);
  CHECK(codes_read(P("big.json"), CODES_AUTO, &tiny, &c, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "big.json: 8388609 bytes, larger than the 8 MiB limit");
  fd = open(P("big.bin"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && ftruncate(fd, (off_t)CODES_MAX_FRAMES * G * 4 + 64) == 0);
  close(fd);
  CHECK(codes_read(P("big.bin"), CODES_AUTO, &tiny, &c, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "big.bin: 67108928 bytes, larger than the 64 MiB limit");
  /* a bad spec is the caller's error */
  const CodesSpec bad = {-1, 64, 0}, huge = {CODES_MAX_CODEBOOKS + 1, 0, 0};
  CHECK(codes_read(FIXTURE, CODES_AUTO, &bad, &c, &err) == SC_EUSAGE);
  CHECK(codes_parse("[]", 2, CODES_JSON, &huge, "x", &c, &err) == SC_EUSAGE);
  CHECK(codes_parse("[]", 2, (CodesFormat)9, &tiny, "x", &c, &err) == SC_EUSAGE);
  /* formats by name */
  CHECK(codes_format_of("a.JSON") == CODES_JSON && codes_format_of("a.bin") == CODES_RAW &&
        codes_format_of("a.i32") == CODES_RAW && codes_format_of("a.raw") == CODES_RAW &&
        codes_format_of("-") == CODES_AUTO && codes_format_of(".json") == CODES_AUTO &&
        codes_format_of(NULL) == CODES_AUTO);
  /* sniffing */
  CHECK(codes_parse(" \n ", 3, CODES_AUTO, &tiny, "blank", &c, &err) == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "blank: empty: no frames");
  unlink(P("missing.json"));
  unlink(P("fifo.json"));
  unlink(P("big.json"));
  unlink(P("big.bin"));
}

/* What codes_write writes, codes_read reads back by the same name: raw
 * int32 for the names read as raw (any case), JSON otherwise. */
static void test_write_read(void) {
  const char *names[] = {"w.bin", "w.i32", "w.raw", "w.BIN", "w.json", "w.txt"};
  const CodesSpec wide = {G, 1 << 20, 0};
  for (int i = 0; i < 6; i++) {
    sc_error err = {0};
    CHECK_MSG(codes_write(P(names[i]), ref, T, G, &err) == 0, "%s: %s", names[i], err.msg);
    size_t len = 0;
    char *buf = NULL;
    CHECK(sc_read_regular(P(names[i]), "codes", 1 << 20, &buf, &len, &err) == 0);
    const int raw = i < 4;
    CHECK_MSG(raw ? len == sizeof ref && !memcmp(buf, ref, sizeof ref) : len > 0 && buf[0] == '{',
              "%s: %zu bytes, expected %s", names[i], len, raw ? "the raw codes" : "a JSON object");
    free(buf);
    Codes c;
    CHECK_MSG(codes_read(P(names[i]), CODES_AUTO, &wide, &c, &err) == 0, "%s: %s", names[i], err.msg);
    CHECK_MSG(c.frames == T && c.codebooks == G && !memcmp(c.codes, ref, sizeof ref), "%s read back",
              names[i]);
    codes_free(&c);
    unlink(P(names[i]));
  }
}

int main(void) {
  strcpy(root, "/tmp/sc-codes-XXXXXX");
  if (!mkdtemp(root)) return 1;
  test_good();
  test_bad_json();
  test_bad_raw();
  test_files();
  test_write_read();
  const char *files[] = {"codes.json", "codes.txt", "codes.bin", "codes.dat"};
  for (int i = 0; i < 4; i++) unlink(P(files[i]));
  rmdir(root);
  CHECK_DONE();
}
