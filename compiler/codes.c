/*
 * codes.c — the codes reader of codes.h: JSON through cJSON (with json.h's
 * Python rules), raw little-endian int32, stdin or a regular file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "codes.h"
#include "file.h"
#include "json.h"

#define CODES_DEFAULT_CODEBOOKS 16

typedef struct Limits {
  int g;           /* codes per frame */
  int64_t vocab;   /* codes in [0, vocab) */
  int max_frames;
} Limits;

static int check_spec(const CodesSpec *s, const char *name, sc_error *err) {
  if (s && (s->codebooks < 0 || s->codebooks > CODES_MAX_CODEBOOKS || s->vocab < 0 ||
            s->vocab > (int64_t)INT32_MAX + 1 || s->max_frames < 0))
    return sc_fail(err, SC_EUSAGE, "%s: bad codes spec (codebooks %d, vocab %lld, max_frames "
                   "%d)", name, s->codebooks, (long long)s->vocab, s->max_frames);
  return SC_OK;
}

static Limits limits_of(const CodesSpec *s) {
  Limits l = {CODES_DEFAULT_CODEBOOKS, (int64_t)INT32_MAX + 1, CODES_MAX_FRAMES};
  if (s && s->codebooks > 0) l.g = s->codebooks;
  if (s && s->vocab > 0 && s->vocab <= (int64_t)INT32_MAX + 1) l.vocab = s->vocab;
  if (s && s->max_frames > 0) l.max_frames = s->max_frames;
  return l;
}

static int has_suffix(const char *s, const char *suf) {
  size_t n = strlen(s), k = strlen(suf);
  return n > k && !strcasecmp(s + n - k, suf);
}

CodesFormat codes_format_of(const char *name) {
  if (!name) return CODES_AUTO;
  if (has_suffix(name, ".json")) return CODES_JSON;
  if (has_suffix(name, ".bin") || has_suffix(name, ".i32") || has_suffix(name, ".raw"))
    return CODES_RAW;
  return CODES_AUTO;
}

void codes_free(Codes *c) {
  if (!c) return;
  free(c->codes);
  memset(c, 0, sizeof *c);
}

static int too_many(const char *name, size_t frames, const Limits *l, sc_error *err) {
  return sc_fail(err, SC_EINPUT, "%s: %zu frames, more than the limit of %d", name, frames,
                 l->max_frames);
}

/* One code, already an integer value v: in range? */
static int put_code(const char *name, int64_t v, size_t t, int k, const Limits *l,
                    int32_t *dst, sc_error *err) {
  if (v < 0 || v >= l->vocab) {
    const char *hint = v == -1 ? " (hint: qwen-tts pads batches with -1; drop the padding frames)"
                               : "";
    return sc_fail(err, SC_EINPUT, "%s: frame %zu, codebook %d: code %lld is out of range "
                   "[0, %lld)%s", name, t, k, (long long)v, (long long)l->vocab, hint);
  }
  *dst = (int32_t)v;
  return SC_OK;
}

static int parse_raw(const unsigned char *d, size_t len, const char *name, const Limits *l,
                     Codes *out, sc_error *err) {
  size_t row = (size_t)l->g * 4;
  if (len == 0) return sc_fail(err, SC_EINPUT, "%s: empty: no frames", name);
  if (len % row)
    return sc_fail(err, SC_EINPUT, "%s: %zu bytes is not a whole number of frames of %d int32 "
                   "codes (%zu bytes each; %zu bytes left over)", name, len, l->g, row, len % row);
  size_t frames = len / row;
  if (frames > (size_t)l->max_frames) return too_many(name, frames, l, err);
  int32_t *c = malloc(len);
  if (!c) return sc_fail(err, SC_ERUNTIME, "%s: out of memory (%zu bytes)", name, len);
  for (size_t i = 0; i < frames * (size_t)l->g; i++) {
    const unsigned char *p = d + 4 * i;
    int32_t v = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                          (uint32_t)p[3] << 24);
    if (put_code(name, v, i / (size_t)l->g, (int)(i % (size_t)l->g), l, &c[i], err)) {
      free(c);
      return err->code;
    }
  }
  *out = (Codes){c, (int)frames, l->g};
  return SC_OK;
}

static const char *type_name(const cJSON *j) {
  if (cJSON_IsArray(j)) return "an array";
  if (cJSON_IsObject(j)) return "an object";
  if (cJSON_IsString(j)) return "a string";
  if (cJSON_IsNumber(j)) return "a number";
  if (cJSON_IsBool(j)) return "a boolean";
  if (cJSON_IsNull(j)) return "null";
  return "an invalid value";
}

/* A non-negative integer count of an object member ("frames": 12). */
static int member_count(const char *name, const cJSON *obj, const char *key, long long *v,
                        sc_error *err) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, key);
  *v = -1;
  if (!m) return SC_OK;
  double d = m->valuedouble;
  if (!cJSON_IsNumber(m))
    return sc_fail(err, SC_EINPUT, "%s: \"%s\" is %s, expected a non-negative integer", name,
                   key, type_name(m));
  if (!isfinite(d) || d != floor(d) || d < 0 || d > INT32_MAX)
    return sc_fail(err, SC_EINPUT, "%s: \"%s\" is %.17g, expected a non-negative integer", name,
                   key, d);
  *v = (long long)d;
  return SC_OK;
}

static int from_tree(const cJSON *root, const char *name, const Limits *l, Codes *out,
                     sc_error *err) {
  const cJSON *rows = root;
  long long want_frames = -1, want_g = -1;
  if (cJSON_IsObject(root)) {
    rows = cJSON_GetObjectItemCaseSensitive(root, "codes");
    if (!rows)
      return sc_fail(err, SC_EINPUT, "%s: an object without \"codes\" (expected [[c0, ..., "
                     "c%d], ...] or {\"codes\": [[...], ...]})", name, l->g - 1);
    if (member_count(name, root, "frames", &want_frames, err) ||
        member_count(name, root, "codebooks", &want_g, err))
      return err->code;
    if (want_g >= 0 && want_g != l->g)
      return sc_fail(err, SC_EINPUT, "%s: \"codebooks\" is %lld, expected %d (the model's "
                     "quantizers)", name, want_g, l->g);
  }
  if (!cJSON_IsArray(rows))
    return sc_fail(err, SC_EINPUT, "%s: %s is %s, expected an array of frames [[c0, ..., c%d], "
                   "...]", name, rows == root ? "the top level" : "\"codes\"", type_name(rows),
                   l->g - 1);
  size_t frames = 0;
  for (const cJSON *r = rows->child; r; r = r->next) frames++;
  if (frames == 0) return sc_fail(err, SC_EINPUT, "%s: no frames (an empty array)", name);
  if (frames > (size_t)l->max_frames) return too_many(name, frames, l, err);
  if (want_frames >= 0 && (size_t)want_frames != frames)
    return sc_fail(err, SC_EINPUT, "%s: \"frames\" is %lld but \"codes\" has %zu frames", name,
                   want_frames, frames);
  int32_t *c = malloc(frames * (size_t)l->g * sizeof *c);
  if (!c) return sc_fail(err, SC_ERUNTIME, "%s: out of memory (%zu frames)", name, frames);
  size_t t = 0;
  int rc = SC_OK;
  for (const cJSON *r = rows->child; r && !rc; r = r->next, t++) {
    if (!cJSON_IsArray(r)) {
      rc = sc_fail(err, SC_EINPUT, "%s: frame %zu is %s, expected an array of %d codes", name, t,
                   type_name(r), l->g);
      break;
    }
    int k = 0;
    for (const cJSON *v = r->child; v; v = v->next, k++) {
      if (k >= l->g) break; /* counted below */
      double d = v->valuedouble;
      if (!cJSON_IsNumber(v)) {
        rc = sc_fail(err, SC_EINPUT, "%s: frame %zu, codebook %d: %s, expected an integer code",
                     name, t, k, type_name(v));
      } else if (!isfinite(d) || d != floor(d)) {
        rc = sc_fail(err, SC_EINPUT, "%s: frame %zu, codebook %d: %.17g is not an integer", name,
                     t, k, d);
      } else if (d < -1e18 || d > 1e18) {
        rc = sc_fail(err, SC_EINPUT, "%s: frame %zu, codebook %d: code %.17g is out of range "
                     "[0, %lld)", name, t, k, d, (long long)l->vocab);
      } else {
        rc = put_code(name, (int64_t)d, t, k, l, &c[t * (size_t)l->g + (size_t)k], err);
      }
      if (rc) break;
    }
    if (!rc) {
      int n = 0;
      for (const cJSON *v = r->child; v; v = v->next) n++;
      if (n != l->g)
        rc = sc_fail(err, SC_EINPUT, "%s: frame %zu has %d codes, expected %d (one per "
                     "codebook)", name, t, n, l->g);
    }
  }
  if (rc) {
    free(c);
    return rc;
  }
  *out = (Codes){c, (int)frames, l->g};
  return SC_OK;
}

static int parse_json(const char *d, size_t len, const char *name, const Limits *l, Codes *out,
                      sc_error *err) {
  if (len > CODES_JSON_MAX)
    return sc_fail(err, SC_EINPUT, "%s: %zu bytes of JSON, more than the %zu MiB limit (hint: "
                   "write the codes as raw little-endian int32, a .bin file)", name, len,
                   CODES_JSON_MAX >> 20);
  if (json_check_text(d, len, name, "key", err)) return err->code;
  char *buf = malloc(len + 1); /* cJSON wants the terminating NUL */
  if (!buf) return sc_fail(err, SC_ERUNTIME, "%s: out of memory", name);
  memcpy(buf, d, len);
  buf[len] = '\0';
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1);
  if (!j || end != buf + len) {
    size_t at = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
    int line = 1;
    for (size_t i = 0; i < at; i++) line += buf[i] == '\n';
    cJSON_Delete(j);
    free(buf);
    return sc_fail(err, SC_EINPUT, "%s: not valid JSON (error near line %d, byte %zu)", name,
                   line, at);
  }
  free(buf);
  int rc = json_last_wins(j, err);
  if (!rc) rc = from_tree(j, name, l, out, err);
  cJSON_Delete(j);
  return rc;
}

int codes_parse(const void *data, size_t len, CodesFormat fmt, const CodesSpec *spec,
                const char *name, Codes *out, sc_error *err) {
  memset(out, 0, sizeof *out);
  if (!name) name = "codes";
  if (check_spec(spec, name, err)) return err->code;
  Limits l = limits_of(spec);
  const unsigned char *d = data;
  if (fmt == CODES_AUTO) fmt = codes_format_of(name);
  if (fmt == CODES_AUTO) {
    size_t i = 0;
    while (i < len && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r')) i++;
    if (i == len) return sc_fail(err, SC_EINPUT, "%s: empty: no frames", name);
    if (d[i] != '[' && d[i] != '{')
      return sc_fail(err, SC_EINPUT, "%s: not JSON (first byte 0x%02x) (hint: raw int32 codes "
                     "need a .bin, .i32 or .raw name)", name, d[i]);
    fmt = CODES_JSON;
  }
  if (fmt == CODES_RAW) return parse_raw(d, len, name, &l, out, err);
  if (fmt == CODES_JSON) return parse_json((const char *)d, len, name, &l, out, err);
  return sc_fail(err, SC_EUSAGE, "%s: unknown codes format %d", name, (int)fmt);
}

/* All of stdin, at most max bytes (one more is an error). */
static int read_stdin(size_t max, char **buf, size_t *len, sc_error *err) {
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  if (!b) return sc_fail(err, SC_ERUNTIME, "stdin: out of memory");
  for (;;) {
    if (n == cap) {
      if (cap > max) break;
      char *nb = realloc(b, cap *= 2);
      if (!nb) {
        free(b);
        return sc_fail(err, SC_ERUNTIME, "stdin: out of memory");
      }
      b = nb;
    }
    ssize_t r = read(STDIN_FILENO, b + n, cap - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(b);
      return sc_fail(err, SC_EINPUT, "stdin: read error: %s", strerror(e));
    }
    if (r == 0) break;
    n += (size_t)r;
    if (n > max) break;
  }
  if (n > max) {
    free(b);
    return sc_fail(err, SC_EINPUT, "stdin: more than %zu bytes of codes", max);
  }
  *buf = b;
  *len = n;
  return SC_OK;
}

int codes_read(const char *path, CodesFormat fmt, const CodesSpec *spec, Codes *out,
               sc_error *err) {
  memset(out, 0, sizeof *out);
  if (check_spec(spec, path, err)) return err->code;
  Limits l = limits_of(spec);
  if (fmt == CODES_AUTO) fmt = codes_format_of(path);
  size_t raw_max = (size_t)l.max_frames * (size_t)l.g * 4;
  size_t max = fmt == CODES_JSON ? CODES_JSON_MAX
             : fmt == CODES_RAW  ? raw_max
             : raw_max > CODES_JSON_MAX ? raw_max : CODES_JSON_MAX;
  char *buf;
  size_t len;
  int stdin_ = !strcmp(path, "-");
  if (stdin_ ? read_stdin(max, &buf, &len, err)
             : sc_read_regular(path, "a regular file of codes", max, &buf, &len, err))
    return err->code;
  int rc = codes_parse(buf, len, fmt, spec, stdin_ ? "stdin" : path, out, err);
  free(buf);
  return rc;
}

/* codes.h: the JSON object or raw int32, by the name. */
int codes_write(const char *path, const int32_t *codes, int frames, int g, sc_error *err) {
  const int bin = codes_format_of(path) == CODES_RAW; /* the names codes_read takes as raw */
  FILE *f = strcmp(path, "-") ? fopen(path, "wb") : stdout;
  if (!f) return sc_fail(err, SC_EINPUT, "%s: cannot write: %s", path, strerror(errno));
  if (bin) {
    fwrite(codes, sizeof *codes, (size_t)frames * g, f);
  } else {
    fprintf(f, "{\"frames\": %d, \"codebooks\": %d, \"codes\": [", frames, g);
    for (int t = 0; t < frames; t++) {
      fprintf(f, "%s\n  [", t ? "," : "");
      for (int k = 0; k < g; k++) fprintf(f, "%s%d", k ? ", " : "", codes[(size_t)t * g + k]);
      fputc(']', f);
    }
    fprintf(f, "\n]}\n");
  }
  int bad = ferror(f);
  if (f != stdout && fclose(f)) bad = 1;
  if (bad) return sc_fail(err, SC_EINPUT, "%s: write failed", path);
  return SC_OK;
}
