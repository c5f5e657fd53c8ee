/* test_loader.c — safetensors reader and checkpoint loader.
 *
 * Every malformed input is written by hand into a fresh directory under
 * /tmp; each case checks that the loader refuses it with SC_EINPUT, leaves
 * its struct zeroed, and says which file and what is wrong.  The positive
 * cases read back known bit patterns (F32, F16 incl. subnormals/inf/nan,
 * BF16) and open a two-shard checkpoint.  Run under ASan/UBSan as well. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "scratch.h"
#include "checkpoint.h"
#include "safetensors.h"

/* A safetensors image: u64 LE header length, header, data.  malloc'd. */
static uint8_t *st_image(const char *hdr, const void *data, size_t dlen,
                         size_t *size) {
  size_t hlen = strlen(hdr);
  *size = 8 + hlen + dlen;
  uint8_t *b = malloc(*size);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  memcpy(b + 8, hdr, hlen);
  if (dlen) memcpy(b + 8 + hlen, data, dlen);
  return b;
}

static void write_st(const char *path, const char *hdr, const void *data,
                     size_t dlen) {
  size_t size;
  uint8_t *b = st_image(hdr, data, dlen, &size);
  write_file(path, b, size);
  free(b);
}

static int is_zero(const void *p, size_t n) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i]) return 0;
  return 1;
}

/* st_open(path) must fail with SC_EINPUT, name the file, contain phrase,
 * and leave the StFile zeroed. */
static void expect_st_fail(const char *path, const char *phrase) {
  StFile f;
  memset(&f, 0xab, sizeof f);
  sc_error err = {0};
  int rc = st_open(&f, path, &err);
  CHECK_MSG(rc == SC_EINPUT, "st_open(%s) = %d, want SC_EINPUT (%s)", path, rc,
            err.msg);
  CHECK(err.code == SC_EINPUT);
  CHECK_CONTAINS(err.msg, path);
  CHECK_CONTAINS(err.msg, phrase);
  CHECK(is_zero(&f, sizeof f));
  if (rc == SC_OK) st_close(&f);
}

/* Same for a safetensors file with this header and data. */
static void expect_hdr_fail(const char *name, const char *hdr, size_t dlen,
                            const char *phrase) {
  static const uint8_t zeros[256];
  const char *path = P(name);
  write_st(path, hdr, zeros, dlen);
  expect_st_fail(path, phrase);
}

static void expect_ckpt_fail(const char *dir, const char *p1, const char *p2) {
  Checkpoint c;
  memset(&c, 0xab, sizeof c);
  sc_error err = {0};
  int rc = ckpt_open(&c, dir, &err);
  CHECK_MSG(rc == SC_EINPUT, "ckpt_open(%s) = %d, want SC_EINPUT (%s)", dir, rc,
            err.msg);
  CHECK_CONTAINS(err.msg, p1);
  if (p2) CHECK_CONTAINS(err.msg, p2);
  CHECK(is_zero(&c, sizeof c));
  if (rc == SC_OK) ckpt_close(&c);
}

static int same_bits(float a, float b) { return memcmp(&a, &b, 4) == 0; }

/* --- the reference file ---------------------------------------------------
 * Offsets are deliberately unaligned (the F32 tensor starts at byte 6 of the
 * data) and the data is fully covered, so that cutting any byte breaks it. */
static const char ref_hdr[] =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
    "\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[6,22]},"
    "\"h\":{\"dtype\":\"F16\",\"shape\":[10],\"data_offsets\":[22,42]},"
    "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[42,50]},"
    "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[50,50]},"
    "\"z\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[50,54]}}   ";
static const uint16_t ref_bf16[3] = {0x3F80, 0xC040, 0x4049};
static const float ref_f32[4] = {1.0f, -2.0f, 3.5f, 1e-3f};
static const uint16_t ref_f16[10] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF,
                                     0x0400, 0x7C00, 0xFC00, 0x7E00, 0x8000};
static const int64_t ref_i64 = -7;
static const float ref_z = 42.0f;

static uint8_t *ref_image(size_t *size) {
  uint8_t d[54];
  memcpy(d, ref_bf16, 6);
  memcpy(d + 6, ref_f32, 16);
  memcpy(d + 22, ref_f16, 20);
  memcpy(d + 42, &ref_i64, 8);
  memcpy(d + 50, &ref_z, 4);
  return st_image(ref_hdr, d, sizeof d, size);
}

static const StTensor *st_get(const StFile *f, const char *name) {
  for (int i = 0; i < f->n_tensors; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}

static void test_valid_file(void) {
  size_t size;
  uint8_t *img = ref_image(&size);
  const char *path = P("ref.safetensors");
  write_file(path, img, size);
  free(img);

  StFile f;
  sc_error err = {0};
  int rc = st_open(&f, path, &err);
  CHECK_MSG(rc == SC_OK, "%s", err.msg);
  if (rc) return;
  CHECK(strcmp(f.path, path) == 0);
  CHECK(f.size == size);
  CHECK(f.n_tensors == 6); /* __metadata__ is not a tensor */

  const StTensor *a = st_get(&f, "a"), *b = st_get(&f, "b"), *h = st_get(&f, "h");
  const StTensor *i = st_get(&f, "i"), *e = st_get(&f, "e"), *z = st_get(&f, "z");
  CHECK(a && b && h && i && e && z && !st_get(&f, "__metadata__"));
  if (!(a && b && h && i && e && z)) goto out;

  CHECK(a->dtype == ST_F32 && a->ndim == 2 && a->shape[0] == 2 &&
        a->shape[1] == 2 && a->numel == 4 && a->nbytes == 16);
  CHECK(a->data == f.map + 8 + strlen(ref_hdr) + 6);
  float out[10];
  st_read_f32(a, 0, 4, out);
  for (int k = 0; k < 4; k++) CHECK(same_bits(out[k], ref_f32[k]));
  st_read_f32(a, 2, 2, out); /* a sub-range */
  CHECK(out[0] == 3.5f && out[1] == 1e-3f);

  CHECK(b->dtype == ST_BF16 && b->numel == 3 && b->nbytes == 6);
  st_read_f32(b, 0, 3, out);
  CHECK(out[0] == 1.0f && out[1] == -3.0f && out[2] == 3.140625f);

  CHECK(h->dtype == ST_F16 && h->numel == 10 && h->nbytes == 20);
  st_read_f32(h, 0, 10, out);
  CHECK(out[0] == 1.0f);
  CHECK(out[1] == -2.0f);
  CHECK(out[2] == 65504.0f);
  CHECK(out[3] == ldexpf(1.0f, -24));         /* smallest subnormal */
  CHECK(out[4] == ldexpf(1023.0f, -24));      /* largest subnormal */
  CHECK(out[5] == ldexpf(1.0f, -14));         /* smallest normal */
  CHECK(isinf(out[6]) && out[6] > 0);
  CHECK(isinf(out[7]) && out[7] < 0);
  CHECK(isnan(out[8]));
  CHECK(out[9] == 0.0f && signbit(out[9]));
  st_read_f32(h, 5, 1, out);
  CHECK(out[0] == ldexpf(1.0f, -14));

  CHECK(i->dtype == ST_I64 && i->nbytes == 8);
  int64_t iv;
  memcpy(&iv, i->data, 8);
  CHECK(iv == -7);
  CHECK(e->ndim == 2 && e->numel == 0 && e->nbytes == 0);
  CHECK(z->ndim == 0 && z->numel == 1);
  st_read_f32(z, 0, 1, out);
  CHECK(out[0] == 42.0f);

  CHECK(strcmp(st_dtype_name(ST_BF16), "BF16") == 0);
  CHECK(strcmp(st_dtype_name(ST_BOOL), "BOOL") == 0);
  CHECK(st_dtype_size(ST_F64) == 8 && st_dtype_size(ST_F16) == 2 &&
        st_dtype_size(ST_U8) == 1);
out:
  st_close(&f);
  CHECK(is_zero(&f, sizeof f));
  st_close(&f); /* closing twice is harmless */
}

/* Every proper prefix of the reference file must be refused cleanly, and
 * single-byte corruptions must either be refused or yield tensors that can
 * be read end to end (ASan checks the "within the mapping" part). */
static void test_prefixes_and_corruption(void) {
  size_t size;
  uint8_t *img = ref_image(&size);
  const char *path = P("cut.safetensors");
  for (size_t len = 0; len < size; len++) {
    write_file(path, img, len);
    expect_st_fail(path, len < 8 ? "truncated" : ":");
  }

  static const uint8_t subst[] = {0x00, 0xff, '"', '}', '9', '-', ',', '['};
  int opened = 0;
  for (size_t pos = 0; pos < size; pos++)
    for (size_t s = 0; s < sizeof subst; s++) {
      uint8_t saved = img[pos];
      img[pos] = subst[s];
      write_file(path, img, size);
      img[pos] = saved;
      StFile f;
      sc_error err = {0};
      if (st_open(&f, path, &err) != SC_OK) {
        CHECK(err.code == SC_EINPUT && strstr(err.msg, path) == err.msg);
        CHECK(is_zero(&f, sizeof f));
        continue;
      }
      opened++;
      for (int k = 0; k < f.n_tensors; k++) {
        const StTensor *t = &f.tensors[k];
        CHECK((uint64_t)t->numel * st_dtype_size(t->dtype) == t->nbytes);
        CHECK(t->data >= f.map && t->data + t->nbytes <= f.map + f.size);
        if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
          continue;
        float *buf = malloc(((size_t)t->numel + 1) * sizeof *buf);
        st_read_f32(t, 0, t->numel, buf);
        free(buf);
      }
      st_close(&f);
    }
  CHECK(opened > 0); /* data-byte corruptions still open */
  free(img);
}

static void test_malformed_files(void) {
  write_file(P("short.safetensors"), "\x02\0\0\0\0", 5);
  expect_st_fail(P("short.safetensors"), "truncated: 5 bytes, expected at least 8");

  uint8_t past[10] = {0xe8, 0x03, 0, 0, 0, 0, 0, 0, '{', '}'}; /* 1000 */
  write_file(P("past.safetensors"), past, sizeof past);
  expect_st_fail(P("past.safetensors"),
                 "header length 1000 runs past the end of the file (size 10)");

  /* A sparse 200 MB file whose header claims 150 MB: inside the file, but
   * beyond any real header. */
  {
    const char *path = P("huge.safetensors");
    uint8_t len[8] = {0x80, 0xd1, 0xf0, 0x08, 0, 0, 0, 0}; /* 150000000 */
    write_file(path, len, 8);
    CHECK(truncate(path, 200000000) == 0);
    expect_st_fail(path, "implausibly large");
    unlink(path);
  }

  expect_st_fail(P("does-not-exist.safetensors"), "cannot open");
  expect_st_fail(root, "is a directory, expected a regular safetensors file");
  CHECK(mkfifo(P("fifo.safetensors"), 0600) == 0); /* open() must not wait for a writer */
  expect_st_fail(P("fifo.safetensors"), "is a FIFO, expected a regular safetensors file");
  expect_st_fail("/dev/zero", "is a character device");

  expect_hdr_fail("notjson.safetensors", "{\"a\": {\"dtype\": ", 0,
                  "header is not valid JSON");
  expect_hdr_fail("empty_hdr.safetensors", "", 0, "header is not valid JSON");
  expect_hdr_fail("trailing.safetensors", "{} x", 0, "header is not valid JSON");
  expect_hdr_fail("array.safetensors", "[1, 2]", 0, "header is not valid JSON");
  expect_hdr_fail("entry.safetensors", "{\"a\": 3}", 0,
                  "tensor 'a': entry is not a JSON object");

  expect_hdr_fail("range.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                  4, "tensor 'w': data_offsets [0, 8] run past the end of the data");
  expect_hdr_fail("backwards.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}",
                  8, "begin > end");
  expect_hdr_fail("overlap.safetensors",
                  "{\"p\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"q\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                  12, "tensors 'p' and 'q' overlap");
  /* An empty tensor inside another's range owns no bytes: not an overlap. */
  {
    const char *path = P("empty_inside.safetensors");
    static const uint8_t z[8];
    write_st(path,
             "{\"p\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"q\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
             z, 8);
    StFile f;
    sc_error err = {0};
    CHECK_MSG(st_open(&f, path, &err) == SC_OK, "%s", err.msg);
    st_close(&f);
  }
  expect_hdr_fail("size.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
                  8, "tensor 'w': data_offsets [0, 8] hold 8 bytes, but shape [3] "
                  "of F32 needs 12");
  expect_hdr_fail("size16.safetensors",
                  "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}",
                  16, "shape [2, 2] of BF16 needs 8");
  expect_hdr_fail("dtype.safetensors",
                  "{\"w\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}",
                  2, "tensor 'w': unknown dtype 'F8_E4M3'");
  expect_hdr_fail("nodtype.safetensors",
                  "{\"w\":{\"shape\":[2],\"data_offsets\":[0,2]}}", 2,
                  "\"dtype\" is missing");
  expect_hdr_fail("negshape.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,8]}}",
                  8, "tensor 'w': shape[1] is -1, expected a non-negative integer");
  expect_hdr_fail("fracshape.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}",
                  8, "shape[0] is 2.5, expected a non-negative integer");
  expect_hdr_fail("strshape.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}",
                  8, "expected a non-negative integer");
  expect_hdr_fail("noshape.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}",
                  8, "\"shape\" is not an array");
  expect_hdr_fail("dims.safetensors",
                  "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                  "\"data_offsets\":[0,1]}}", 1, "9 dims");
  expect_hdr_fail("overflow.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,"
                  "4294967296],\"data_offsets\":[0,0]}}", 0, "overflows");
  expect_hdr_fail("bytesoverflow.safetensors",
                  "{\"w\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],"
                  "\"data_offsets\":[0,0]}}", 0, "overflows");
  expect_hdr_fail("offsets.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}",
                  4, "\"data_offsets\" is malformed");
  expect_hdr_fail("fracoff.safetensors",
                  "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4.5]}}",
                  8, "\"data_offsets\" is malformed");
  /* a NUL in a name: cJSON would end the string there and use "w" */
  expect_hdr_fail("nul.safetensors",
                  "{\"w\\u0000evil\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                  1, "tensor name \"w\\u0000evil\" at line 1 holds a NUL character");
  expect_hdr_fail("nulval.safetensors",
                  "{\"w\":{\"dtype\":\"F32\\u0000\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                  4, "string \"F32\\u0000\" at line 1 holds a NUL character");
  expect_hdr_fail("ctl.safetensors",
                  "{\"a\\nb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                  1, "tensor name \"a\\u000ab\" holds a control character (\\u000a)");
  expect_hdr_fail("rawctl.safetensors",
                  "{\"a\tb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                  1, "a raw control character (0x09) inside a string at line 1");
  expect_hdr_fail("utf8.safetensors",
                  "{\"\xc3\x28\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
                  1, "not valid UTF-8: byte 0xc3 at line 1 (byte 2)");
  {
    /* escapes that are not NUL, and UTF-8 names, are fine */
    const char *path = P("names.safetensors");
    write_st(path,
             "{\"caf\xc3\xa9\\u00e9\\\\u0000\":{\"dtype\":\"U8\",\"shape\":[1],"
             "\"data_offsets\":[0,1]}}", "\x01", 1);
    StFile f;
    sc_error err = {0};
    CHECK_MSG(st_open(&f, path, &err) == SC_OK, "%s", err.msg);
    if (!err.code) {
      CHECK(f.n_tensors == 1 && !strcmp(f.tensors[0].name, "caf\xc3\xa9\xc3\xa9\\u0000"));
      st_close(&f);
    }
  }
  expect_hdr_fail("dup.safetensors",
                  "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                  "\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                  2, "tensor 'w' appears twice");
}

/* --- checkpoints ---------------------------------------------------------- */

static void mkdir_p(const char *path) {
  if (mkdir(path, 0700) != 0) {
    fprintf(stderr, "cannot mkdir %s\n", path);
    exit(1);
  }
}

static const char cfg_text[] =
    "{\"hidden_size\": 64, \"rms_norm_eps\": 1e-6, \"tie_word_embeddings\": true,\n"
    " \"model_type\": \"llama\", \"sliding_window\": null, \"frac\": 64.5,\n"
    " \"name\": \"x\", \"neg\": -3, \"flag_str\": \"true\",\n"
    " \"talker_config\": {\"num_layers\": 3}}\n";

/* ck2/: two shards and an index; "extra.buf" is in shard 2 but not in the
 * weight_map, and must still be found. */
static void make_sharded(const char *dir) {
  char p[512];
  mkdir_p(dir);
  snprintf(p, sizeof p, "%s/config.json", dir);
  write_text(p, cfg_text);

  float emb[6] = {0, 1, 2, 3, 4, 5};
  uint16_t norm[3] = {0x3F80, 0x4000, 0x4040}; /* bf16 1, 2, 3 */
  uint8_t d1[30];
  memcpy(d1, emb, 24);
  memcpy(d1 + 24, norm, 6);
  snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
  write_st(p,
           "{\"model.embed.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],"
           "\"data_offsets\":[0,24]},"
           "\"model.norm.weight\":{\"dtype\":\"BF16\",\"shape\":[3],"
           "\"data_offsets\":[24,30]}}", d1, sizeof d1);

  uint16_t head[6] = {0x3C00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600}; /* 1..6 */
  int64_t buf[2] = {7, 8};
  uint8_t d2[28];
  memcpy(d2, head, 12);
  memcpy(d2 + 12, buf, 16);
  snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
  write_st(p,
           "{\"lm_head.weight\":{\"dtype\":\"F16\",\"shape\":[2,3],"
           "\"data_offsets\":[0,12]},"
           "\"extra.buf\":{\"dtype\":\"I64\",\"shape\":[2],"
           "\"data_offsets\":[12,28]}}", d2, sizeof d2);

  snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
  write_text(p,
             "{\"metadata\": {\"total_size\": 42}, \"weight_map\": {\n"
             " \"model.embed.weight\": \"model-00001-of-00002.safetensors\",\n"
             " \"lm_head.weight\": \"model-00002-of-00002.safetensors\",\n"
             " \"model.norm.weight\": \"model-00001-of-00002.safetensors\"}}\n");
}

static void test_sharded_checkpoint(void) {
  const char *dir = P("ck2");
  make_sharded(dir);
  Checkpoint c;
  sc_error err = {0};
  int rc = ckpt_open(&c, dir, &err);
  CHECK_MSG(rc == SC_OK, "%s", err.msg);
  if (rc) return;
  CHECK(c.n_files == 2 && c.n_tensors == 4);
  CHECK(strcmp(c.dir, dir) == 0);
  CHECK(c.config && c.config_text && strstr(c.config_path, "ck2/config.json"));
  for (int i = 1; i < c.n_tensors; i++)
    CHECK(strcmp(c.by_name[i - 1]->name, c.by_name[i]->name) < 0);

  const StTensor *emb = ckpt_find(&c, "model.embed.weight");
  const StTensor *head = ckpt_find(&c, "lm_head.weight");
  const StTensor *norm = ckpt_find(&c, "model.norm.weight");
  const StTensor *extra = ckpt_find(&c, "extra.buf");
  CHECK(emb && head && norm && extra && !ckpt_find(&c, "nope"));
  if (!(emb && head && norm && extra)) goto out;
  CHECK(emb->file == 0 && norm->file == 0 && head->file == 1 && extra->file == 1);
  CHECK(strstr(c.files[head->file].path, "model-00002-of-00002.safetensors"));

  const StTensor *t = ckpt_tensor(&c, "lm_head.weight", 2, (int64_t[]){2, -1}, &err);
  CHECK_MSG(t == head, "%s", err.msg);
  float v[6];
  st_read_f32(head, 0, 6, v);
  for (int i = 0; i < 6; i++) CHECK(v[i] == (float)(i + 1));
  st_read_f32(emb, 0, 6, v);
  for (int i = 0; i < 6; i++) CHECK(v[i] == (float)i);
  st_read_f32(norm, 0, 3, v);
  CHECK(v[0] == 1 && v[1] == 2 && v[2] == 3);

  /* ckpt_tensor failures */
  memset(&err, 0, sizeof err);
  CHECK(!ckpt_tensor(&c, "model.layers.0.weight", 1, (int64_t[]){3}, &err));
  CHECK(err.code == SC_EINPUT);
  CHECK_CONTAINS(err.msg, dir);
  CHECK_CONTAINS(err.msg, "tensor 'model.layers.0.weight' is missing");

  memset(&err, 0, sizeof err);
  CHECK(!ckpt_tensor(&c, "model.embed.weight", 2, (int64_t[]){3, -1}, &err));
  CHECK(err.code == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "ck2/model-00001-of-00002.safetensors: tensor "
                 "'model.embed.weight' has shape [2, 3], expected [3, ?]");

  memset(&err, 0, sizeof err);
  CHECK(!ckpt_tensor(&c, "model.norm.weight", 2, (int64_t[]){3, 1}, &err));
  CHECK_CONTAINS(err.msg, "has shape [3], expected [3, 1]");

  memset(&err, 0, sizeof err);
  CHECK(!ckpt_tensor(&c, "extra.buf", 1, (int64_t[]){2}, &err));
  CHECK(err.code == SC_EINPUT);
  CHECK_CONTAINS(err.msg, "model-00002-of-00002.safetensors");
  CHECK_CONTAINS(err.msg, "has dtype I64, expected a float type");

  /* config values */
  const cJSON *cfg = c.config;
  int64_t i64 = 0;
  double d = 0;
  int b = 0;
  const char *s = NULL;
  CHECK(cfg_int_req(cfg, "config.json", "hidden_size", &i64, &err) == SC_OK &&
        i64 == 64);
  CHECK(cfg_int_req(cfg, "config.json", "neg", &i64, &err) == SC_OK && i64 == -3);
  CHECK(cfg_int_opt(cfg, "config.json", "num_heads", 8, &i64, &err) == SC_OK &&
        i64 == 8);
  CHECK(cfg_int_opt(cfg, "config.json", "sliding_window", 0, &i64, &err) == SC_OK &&
        i64 == 0); /* null means "not set" */
  CHECK(cfg_num_req(cfg, "config.json", "rms_norm_eps", &d, &err) == SC_OK &&
        d == 1e-6);
  CHECK(cfg_num_req(cfg, "config.json", "hidden_size", &d, &err) == SC_OK &&
        d == 64); /* an integer is a number */
  CHECK(cfg_num_opt(cfg, "config.json", "rope_theta", 1e4, &d, &err) == SC_OK &&
        d == 1e4);
  CHECK(cfg_bool_opt(cfg, "config.json", "tie_word_embeddings", 0, &b, &err) ==
            SC_OK && b == 1);
  CHECK(cfg_bool_opt(cfg, "config.json", "absent", 1, &b, &err) == SC_OK && b == 1);
  CHECK(cfg_str_opt(cfg, "config.json", "model_type", NULL, &s, &err) == SC_OK &&
        s && strcmp(s, "llama") == 0);
  CHECK(cfg_str_opt(cfg, "config.json", "absent", "dflt", &s, &err) == SC_OK &&
        strcmp(s, "dflt") == 0);
  const cJSON *talker = cJSON_GetObjectItemCaseSensitive(cfg, "talker_config");
  CHECK(cfg_int_req(talker, "config.json: talker_config", "num_layers", &i64,
                    &err) == SC_OK && i64 == 3);

#define EXPECT_CFG_FAIL(call, text)                                         \
  do {                                                                      \
    memset(&err, 0, sizeof err);                                            \
    CHECK((call) == SC_EINPUT && err.code == SC_EINPUT);                    \
    CHECK_CONTAINS(err.msg, text);                                          \
  } while (0)
  EXPECT_CFG_FAIL(cfg_int_req(cfg, "config.json", "vocab_size", &i64, &err),
                  "config.json: key 'vocab_size' is missing");
  EXPECT_CFG_FAIL(cfg_int_req(cfg, "config.json", "name", &i64, &err),
                  "config.json: key 'name' must be an integer, found string");
  EXPECT_CFG_FAIL(cfg_int_req(cfg, "config.json", "frac", &i64, &err),
                  "config.json: key 'frac' must be an integer, found 64.5");
  EXPECT_CFG_FAIL(cfg_int_opt(cfg, "config.json", "frac", 1, &i64, &err),
                  "key 'frac' must be an integer, found 64.5");
  EXPECT_CFG_FAIL(cfg_int_req(cfg, "config.json", "sliding_window", &i64, &err),
                  "key 'sliding_window' is missing");
  EXPECT_CFG_FAIL(cfg_num_req(cfg, "config.json", "model_type", &d, &err),
                  "key 'model_type' must be a finite number, found string");
  EXPECT_CFG_FAIL(cfg_num_req(cfg, "config.json", "eps", &d, &err),
                  "key 'eps' is missing");
  EXPECT_CFG_FAIL(cfg_bool_opt(cfg, "config.json", "flag_str", 0, &b, &err),
                  "key 'flag_str' must be true or false, found string");
  EXPECT_CFG_FAIL(cfg_bool_opt(cfg, "config.json", "hidden_size", 0, &b, &err),
                  "key 'hidden_size' must be true or false, found 64");
  EXPECT_CFG_FAIL(cfg_str_opt(cfg, "config.json", "hidden_size", "x", &s, &err),
                  "key 'hidden_size' must be a string, found 64");
  EXPECT_CFG_FAIL(cfg_str_opt(cfg, "config.json", "architectures", NULL, &s, &err),
                  "config.json: key 'architectures' is missing");
  EXPECT_CFG_FAIL(cfg_int_req(talker, "config.json: talker_config", "hidden_size",
                              &i64, &err),
                  "config.json: talker_config: key 'hidden_size' is missing");
  EXPECT_CFG_FAIL(cfg_int_req(cfg, "config.json", "talker_config", &i64, &err),
                  "must be an integer, found object");
out:
  ckpt_close(&c);
  CHECK(is_zero(&c, sizeof c));
  ckpt_close(&c);

  /* A shard path, or the directory with a trailing slash, opens the whole
   * checkpoint through the index. */
  char p[600];
  snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
  rc = ckpt_open(&c, p, &err);
  CHECK_MSG(rc == SC_OK, "%s", err.msg);
  if (rc == SC_OK) {
    CHECK(c.n_tensors == 4 && strcmp(c.dir, dir) == 0);
    ckpt_close(&c);
  }
  snprintf(p, sizeof p, "%s//", dir);
  rc = ckpt_open(&c, p, &err);
  CHECK_MSG(rc == SC_OK, "%s", err.msg);
  if (rc == SC_OK) {
    CHECK(c.n_tensors == 4 && strcmp(c.dir, dir) == 0);
    ckpt_close(&c);
  }
}

static const char u8_hdr[] =
    "{\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";

static void write_u8(const char *dir, const char *file, const char *tensor) {
  char p[512], hdr[256];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  snprintf(hdr, sizeof hdr, u8_hdr, tensor);
  write_st(p, hdr, "\x01", 1);
}

static void write_in(const char *dir, const char *file, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  write_text(p, text);
}

static void test_bad_checkpoints(void) {
  char p[600];

  /* config.json problems */
  const char *dir = P("nocfg");
  mkdir_p(dir);
  write_u8(dir, "model.safetensors", "w");
  snprintf(p, sizeof p, "%s/config.json: not found", dir);
  expect_ckpt_fail(dir, p, "hint:");

  dir = P("badcfg");
  mkdir_p(dir);
  write_u8(dir, "model.safetensors", "w");
  write_in(dir, "config.json", "{\"hidden_size\": 64,\n \"x\": }");
  snprintf(p, sizeof p, "%s/config.json: not valid JSON", dir);
  expect_ckpt_fail(dir, p, "line 2");

  dir = P("arraycfg");
  mkdir_p(dir);
  write_u8(dir, "model.safetensors", "w");
  write_in(dir, "config.json", "[1, 2]");
  snprintf(p, sizeof p, "%s/config.json: top level is a JSON array", dir);
  expect_ckpt_fail(dir, p, NULL);

  expect_ckpt_fail(P("no-such-dir"), "no-such-dir", "hint:");
  snprintf(p, sizeof p, "%s/config.json", dir);
  expect_ckpt_fail(p, "config.json: not a .safetensors file", "hint:");

  /* weight file layout problems */
  dir = P("noweights");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  snprintf(p, sizeof p, "%s: no model.safetensors", dir);
  expect_ckpt_fail(dir, p, "hint:");

  dir = P("two");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_u8(dir, "model-00001-of-00002.safetensors", "a");
  write_u8(dir, "model-00002-of-00002.safetensors", "b");
  expect_ckpt_fail(dir, "2 *.safetensors files", "no model.safetensors.index.json");
  {
    /* naming one of them explicitly picks just that file */
    Checkpoint c;
    sc_error err = {0};
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    CHECK_MSG(ckpt_open(&c, p, &err) == SC_OK, "%s", err.msg);
    CHECK(c.n_tensors == 1 && ckpt_find(&c, "b") && !ckpt_find(&c, "a"));
    ckpt_close(&c);
  }

  dir = P("oddname");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_u8(dir, "weights.safetensors", "w");
  {
    Checkpoint c;
    sc_error err = {0};
    CHECK_MSG(ckpt_open(&c, dir, &err) == SC_OK, "%s", err.msg);
    CHECK(c.n_files == 1 && ckpt_find(&c, "w"));
    ckpt_close(&c);
  }

  /* a broken weight file is reported under its own path */
  dir = P("badweights");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_in(dir, "model.safetensors", "abc");
  snprintf(p, sizeof p, "%s/model.safetensors: truncated", dir);
  expect_ckpt_fail(dir, p, NULL);

  /* index problems */
  dir = P("dup");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_u8(dir, "s1.safetensors", "x");
  write_u8(dir, "s2.safetensors", "x");
  write_in(dir, "model.safetensors.index.json",
           "{\"weight_map\": {\"x\": \"s1.safetensors\", \"y\": \"s2.safetensors\"}}");
  expect_ckpt_fail(dir, "tensor 'x' appears in both", "s2.safetensors");

  dir = P("missingshard");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_u8(dir, "model-00001-of-00002.safetensors", "a");
  write_in(dir, "model.safetensors.index.json",
           "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\","
           " \"b\": \"model-00002-of-00002.safetensors\"}}");
  snprintf(p, sizeof p, "%s/model.safetensors.index.json: shard "
           "'model-00002-of-00002.safetensors' named for tensor 'b' is missing", dir);
  expect_ckpt_fail(dir, p, NULL);

  dir = P("unlisted");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_u8(dir, "s1.safetensors", "a");
  write_u8(dir, "s2.safetensors", "b");
  write_in(dir, "model.safetensors.index.json",
           "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s1.safetensors\","
           " \"c\": \"s2.safetensors\"}}");
  expect_ckpt_fail(dir, "tensor 'b' is listed in shard 's1.safetensors', but it "
                   "is in", "s2.safetensors");

  dir = P("nowhere");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_u8(dir, "s1.safetensors", "a");
  write_in(dir, "model.safetensors.index.json",
           "{\"weight_map\": {\"a\": \"s1.safetensors\", \"ghost\": \"s1.safetensors\"}}");
  expect_ckpt_fail(dir, "model.safetensors.index.json: tensor 'ghost' is listed",
                   "no file of the checkpoint holds it");

  dir = P("badindex");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_in(dir, "model.safetensors.index.json", "{\"weight_map\": [1]}");
  expect_ckpt_fail(dir, "model.safetensors.index.json: \"weight_map\" is array", NULL);
  write_in(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": 3}}");
  expect_ckpt_fail(dir, "weight_map entry for tensor 'a' is number", NULL);
  write_in(dir, "model.safetensors.index.json", "{\"weight_map\": {}}");
  expect_ckpt_fail(dir, "model.safetensors.index.json: \"weight_map\" is empty",
                   NULL);
  write_in(dir, "model.safetensors.index.json", "{\"weight_map\": ");
  expect_ckpt_fail(dir, "model.safetensors.index.json: not valid JSON", NULL);

  /* shards outside the directory: ck2/ (a valid checkpoint) is next door */
  dir = P("escape");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_u8(dir, "s1.safetensors", "a");
  write_in(dir, "model.safetensors.index.json",
           "{\"weight_map\": {\"a\": \"s1.safetensors\","
           " \"lm_head.weight\": \"../ck2/model-00002-of-00002.safetensors\"}}");
  expect_ckpt_fail(dir, "shard '../ck2/model-00002-of-00002.safetensors' named for tensor "
                   "'lm_head.weight' is not a file name inside the checkpoint directory", NULL);
  write_in(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"/etc/passwd\"}}");
  expect_ckpt_fail(dir, "shard '/etc/passwd'", "not a file name inside");
  write_in(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"sub/../../x\"}}");
  expect_ckpt_fail(dir, "shard 'sub/../../x'", "'..' component");
  write_in(dir, "model.safetensors.index.json", "{\"weight_map\": {\"a\": \"\"}}");
  expect_ckpt_fail(dir, "shard ''", "not a file name inside");
}

/* Issue 12, item 5 and 8: config.json, the index and the shards are regular
 * files, and JSON is read up to SC_JSON_MAX bytes; a FIFO would block the
 * open, /dev/zero would be read until memory runs out. */
static void test_not_regular(void) {
  char p[600];
  const char *dir;
  dir = P("fifocfg");
  mkdir_p(dir);
  write_u8(dir, "model.safetensors", "w");
  snprintf(p, sizeof p, "%s/config.json", dir);
  CHECK(mkfifo(p, 0600) == 0);
  expect_ckpt_fail(dir, "config.json: is a FIFO, expected a regular JSON file", NULL);
  unlink(p);
  CHECK(symlink("/dev/zero", p) == 0);
  expect_ckpt_fail(dir, "config.json: is a character device", NULL);
  unlink(p);
  write_in(dir, "config.json", "{}");
  CHECK(truncate(p, (16 << 20) + 1) == 0); /* sparse */
  expect_ckpt_fail(dir, "config.json: 16777217 bytes, larger than the 16 MiB limit", NULL);
  CHECK(truncate(p, 16 << 20) == 0); /* at the limit: read, then refused for its NULs */
  expect_ckpt_fail(dir, "config.json: a control character (0x00) at line 1 (byte 2)", NULL);
  write_in(dir, "config.json", "{}");
  snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
  CHECK(mkfifo(p, 0600) == 0); /* a FIFO index is not "no index" */
  expect_ckpt_fail(dir, "model.safetensors.index.json: is a FIFO", NULL);
  unlink(p);
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  unlink(p);
  CHECK(mkdir(p, 0700) == 0); /* nor is a directory "no model.safetensors" */
  expect_ckpt_fail(dir, "model.safetensors: is a directory", NULL);

}

/* Issue 12, items 9 and 12: JSON read as Python reads it. */
static void test_json_like_python(void) {
  char p[600], q[600];
  sc_error err = {0};
  Checkpoint c;
  const char *dir;
  (void)p, (void)q;
  /* duplicate keys: the last wins, at the first one's place, in nested
   * objects and in objects inside arrays too (Python's json.load) */
  dir = P("dupkeys");
  mkdir_p(dir);
  write_u8(dir, "model.safetensors", "w");
  write_in(dir, "config.json",
           "{\"rope_theta\": 1000000.0, \"model_type\": \"qwen3\",\n"
           " \"rope_theta\": 10.0, \"n\": {\"a\": 1, \"b\": 2, \"a\": 3, \"a\": 4},\n"
           " \"l\": [{\"x\": 1, \"x\": null}], \"rope_theta\": 20.0}");
  CHECK_MSG(ckpt_open(&c, dir, &err) == SC_OK, "%s", err.msg);
  if (!err.code) {
    double d = 0;
    int64_t i = 0;
    CHECK(cfg_num_req(c.config, "config.json", "rope_theta", &d, &err) == SC_OK && d == 20.0);
    CHECK(!strcmp(c.config->child->string, "rope_theta")); /* the first one's place */
    CHECK(cJSON_GetArraySize(c.config) == 4);
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(c.config, "n");
    CHECK(cJSON_GetArraySize(n) == 2 && !strcmp(n->child->string, "a"));
    CHECK(cfg_int_req(n, "n", "a", &i, &err) == SC_OK && i == 4);
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(c.config, "l");
    CHECK(cJSON_GetArraySize(l->child) == 1 && cJSON_IsNull(l->child->child));
    char *min = cJSON_PrintUnformatted(c.config);
    CHECK_MSG(min && !strcmp(min, "{\"rope_theta\":20,\"model_type\":\"qwen3\",\"n\":{\"a\":4,"
              "\"b\":2},\"l\":[{\"x\":null}]}"), "%s", min ? min : "(null)");
    free(min);
    ckpt_close(&c);
  }
  /* a key that differs by a NUL is not the same key: refused */
  write_in(dir, "config.json", "{\"rope_theta\": 1e6,\n \"rope_theta\\u0000\": 10}");
  expect_ckpt_fail(dir, "config.json: key \"rope_theta\\u0000\" at line 2 holds a NUL character",
                   "cut it short to \"rope_theta\"");
  write_in(dir, "config.json", "{\"a\": \"\xff\"}");
  expect_ckpt_fail(dir, "config.json: not valid UTF-8: byte 0xff at line 1 (byte 7)", NULL);

  /* duplicate tensors of the index's weight_map: the last shard named wins */
  dir = P("dupindex");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  write_u8(dir, "s1.safetensors", "a");
  write_u8(dir, "s2.safetensors", "b");
  write_in(dir, "model.safetensors.index.json",
           "{\"weight_map\": {\"a\": \"s2.safetensors\", \"b\": \"s2.safetensors\","
           " \"a\": \"s1.safetensors\"}}");
  CHECK_MSG(ckpt_open(&c, dir, &err) == SC_OK, "%s", err.msg);
  if (!err.code) ckpt_close(&c);

}

/* Issue 12, item 14: links out of the checkpoint directory. */
static void test_links(void) {
  char p[600], q[600];
  sc_error err = {0};
  Checkpoint c;
  const char *dir;
  /* links out of the checkpoint directory; ck2/ is a valid checkpoint */
  dir = P("linkout");
  mkdir_p(dir);
  write_in(dir, "config.json", "{}");
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  snprintf(q, sizeof q, "%s/model-00002-of-00002.safetensors", P("ck2"));
  CHECK(symlink(q, p) == 0);
  expect_ckpt_fail(dir, "linkout/model.safetensors: resolves to", "outside the checkpoint directory");
  unlink(p);
  CHECK(symlink("../ck2/model-00002-of-00002.safetensors", p) == 0);
  expect_ckpt_fail(dir, "outside the checkpoint directory", "hint: copy the file in");
  unlink(p);
  write_u8(dir, "model.safetensors", "w");
  snprintf(p, sizeof p, "%s/config.json", dir);
  unlink(p);
  snprintf(q, sizeof q, "%s/config.json", P("ck2"));
  CHECK(symlink(q, p) == 0);
  expect_ckpt_fail(dir, "linkout/config.json: resolves to", "outside the checkpoint directory");
  /* a link inside the directory is fine */
  unlink(p);
  write_in(dir, "real.json", "{}");
  CHECK(symlink("real.json", p) == 0);
  CHECK_MSG(ckpt_open(&c, dir, &err) == SC_OK, "%s", err.msg);
  if (!err.code) ckpt_close(&c);

  /* the Hugging Face hub cache: snapshots/REV/... -> ../../blobs/SHA */
  mkdir_p(P("models--org--tiny"));
  mkdir_p(P("models--org--tiny/blobs"));
  mkdir_p(P("models--org--tiny/snapshots"));
  dir = P("models--org--tiny/snapshots/abc123");
  mkdir_p(dir);
  write_in(P("models--org--tiny/blobs"), "c0ffee", "{\"model_type\": \"x\"}");
  write_u8(P("models--org--tiny/blobs"), "beef", "w");
  snprintf(p, sizeof p, "%s/config.json", dir);
  CHECK(symlink("../../blobs/c0ffee", p) == 0);
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  CHECK(symlink("../../blobs/beef", p) == 0);
  CHECK_MSG(ckpt_open(&c, dir, &err) == SC_OK, "%s", err.msg);
  if (!err.code) {
    CHECK(ckpt_find(&c, "w") != NULL);
    ckpt_close(&c);
  }
  /* ... but not a blobs/ directory of just any name */
  mkdir_p(P("other"));
  mkdir_p(P("other/blobs"));
  write_u8(P("other/blobs"), "beef", "w");
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  unlink(p);
  CHECK(symlink("../../../other/blobs/beef", p) == 0);
  expect_ckpt_fail(dir, "model.safetensors: resolves to", "outside the checkpoint directory");
}

/* Messages longer than sc_error.msg keep their end (the reason, the hint):
 * the longest words, the paths, are cut in the middle instead. */
static void test_long_messages(void) {
  char a[3000], b[1500];
  memset(a, 'a', sizeof a - 1);
  a[sizeof a - 1] = '\0';
  memset(b, 'b', sizeof b - 1);
  b[sizeof b - 1] = '\0';
  a[0] = '/', b[0] = '/';
  sc_error err = {0};
  CHECK(sc_fail(&err, SC_EINPUT, "%s: weight file of %s is missing: No such file (hint: keep "
                "the two together)", a, b) == SC_EINPUT);
  CHECK(err.code == SC_EINPUT && strlen(err.msg) <= sizeof err.msg - 1);
  CHECK_CONTAINS(err.msg, "aaa...aaa");
  CHECK_CONTAINS(err.msg, "aaa: weight file of /bbb");
  CHECK_CONTAINS(err.msg, "bbb...bbb");
  CHECK_CONTAINS(err.msg, "bbb is missing: No such file (hint: keep the two together)");
  CHECK(!strncmp(err.msg, "/aaa", 4));
  /* short messages are untouched, one just at the limit too */
  sc_fail(&err, SC_EINPUT, "%s", "short");
  CHECK(!strcmp(err.msg, "short"));
  a[sizeof err.msg - 1] = '\0';
  sc_fail(&err, SC_EINPUT, "%s", a);
  CHECK(!strcmp(err.msg, a));
  /* no long word to cut: the end goes, as snprintf would cut it */
  char words[2000] = "";
  for (int i = 0; i < 300; i++) strcat(words, "word ");
  sc_fail(&err, SC_EINPUT, "%s", words);
  CHECK(strlen(err.msg) == sizeof err.msg - 1 && !strncmp(err.msg, words, sizeof err.msg - 1));
  /* a callee's message wrapped in the same buffer (sc_fail formats aside) */
  sc_fail(&err, SC_EUSAGE, "top_k must be >= 0 (got -1)");
  sc_fail(&err, err.code, "audio sampling: %s", err.msg);
  CHECK(!strcmp(err.msg, "audio sampling: top_k must be >= 0 (got -1)") && err.code == SC_EUSAGE);

  /* through the loader: a 2000-character checkpoint path */
  char dir[2100];
  snprintf(dir, sizeof dir, "%s/", root);
  while (strlen(dir) < 2000) strcat(dir, "dddddddddddddddddddddddddddddddddddddddd/");
  strcat(dir, "x");
  Checkpoint c;
  expect_ckpt_fail(dir, "No such file or directory (hint: pass the checkpoint directory", "...");
  (void)c;
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
                    struct FTW *ftw) {
  return remove(path);
}

int main(void) {
  alarm(120); /* a blocking open (a FIFO, issue 12) fails the test instead of stalling it */
  snprintf(root, sizeof root, "/tmp/test_loader.XXXXXX");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  test_valid_file();
  test_prefixes_and_corruption();
  test_malformed_files();
  test_sharded_checkpoint();
  test_bad_checkpoints();
  test_not_regular();
  test_json_like_python();
  test_links();
  test_long_messages();
  nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  CHECK_DONE();
}
