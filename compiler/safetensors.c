/*
 * safetensors.c — open, validate and read safetensors files.
 *
 * The file is mmapped read-only and never read whole.  Only the JSON header
 * is copied (into a NUL-terminated buffer, so that the JSON parser cannot
 * run past it); every tensor's dtype, shape and byte range is checked
 * against the file before a pointer into the mapping is handed out, so the
 * rest of the compiler may read t->data[0 .. t->nbytes) without checks.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "file.h"
#include "json.h"
#include "safetensors.h"

#define ST_MAX_HEADER (100u * 1000 * 1000) /* bytes; real headers are < 10 MB */
#define ST_MAX_INT    (1ull << 53)         /* largest integer a double holds exactly */

static const struct {
  const char *name;
  size_t size;
} dtype_info[ST_DTYPE_COUNT] = {
  [ST_F32] = {"F32", 4}, [ST_F16] = {"F16", 2},  [ST_BF16] = {"BF16", 2},
  [ST_F64] = {"F64", 8}, [ST_I64] = {"I64", 8},  [ST_I32] = {"I32", 4},
  [ST_I16] = {"I16", 2}, [ST_I8] = {"I8", 1},    [ST_U8] = {"U8", 1},
  [ST_BOOL] = {"BOOL", 1},
};

const char *st_dtype_name(StDtype d) {
  return (unsigned)d < ST_DTYPE_COUNT ? dtype_info[d].name : "?";
}

size_t st_dtype_size(StDtype d) {
  return (unsigned)d < ST_DTYPE_COUNT ? dtype_info[d].size : 0;
}

static int dtype_from_name(const char *s, StDtype *out) {
  for (int d = 0; d < ST_DTYPE_COUNT; d++)
    if (strcmp(s, dtype_info[d].name) == 0) {
      *out = (StDtype)d;
      return 1;
    }
  return 0;
}

/* Munmap and free everything; leaves *f zeroed.  Safe on a zeroed or
 * partially opened StFile. */
void st_close(StFile *f) {
  if (f->map) munmap((void *)f->map, f->size);
  free(f->path);
  free(f->tensors);
  free(f->strings);
  memset(f, 0, sizeof *f);
}

/* "[2, 3]" into buf. */
static const char *shape_str(char *buf, size_t cap, int ndim,
                             const int64_t *shape) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && n < cap; i++)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "",
                          (long long)shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

/* A JSON number that is a whole number in [0, 2^53]. */
static int json_uint(const cJSON *j, uint64_t *out) {
  if (!cJSON_IsNumber(j)) return 0;
  double v = j->valuedouble;
  if (!(v >= 0 && v <= (double)ST_MAX_INT)) return 0;
  if ((double)(uint64_t)v != v) return 0;
  *out = (uint64_t)v;
  return 1;
}

/* Parse one header entry into t (name not yet set).  data_size bounds the
 * offsets; begin/end are returned for the overlap check. */
static int parse_entry(StTensor *t, const cJSON *e, const char *path,
                       uint64_t data_size, uint64_t *begin, uint64_t *end,
                       sc_error *err) {
  const char *name = e->string;
  if (!cJSON_IsObject(e))
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': entry is not a JSON object",
                   path, name);

  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  if (!cJSON_IsString(dt))
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': \"dtype\" is %s",
                   path, name, dt ? "not a string" : "missing");
  if (!dtype_from_name(dt->valuestring, &t->dtype))
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': unknown dtype '%s' "
                   "(known: F32 F16 BF16 F64 I64 I32 I16 I8 U8 BOOL)",
                   path, name, dt->valuestring);

  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
  if (!cJSON_IsArray(sh))
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': \"shape\" is %s", path,
                   name, sh ? "not an array" : "missing");
  int ndim = cJSON_GetArraySize(sh);
  if (ndim > ST_MAX_DIMS)
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': shape has %d dims, at most "
                   "%d are supported", path, name, ndim, ST_MAX_DIMS);
  t->ndim = ndim;
  t->numel = 1;
  int i = 0;
  for (const cJSON *d = sh->child; d; d = d->next, i++) {
    uint64_t v;
    if (!json_uint(d, &v)) {
      char *txt = cJSON_PrintUnformatted(d);
      sc_fail(err, SC_EINPUT, "%s: tensor '%s': shape[%d] is %s, expected a "
              "non-negative integer", path, name, i, txt ? txt : "invalid");
      free(txt);
      return SC_EINPUT;
    }
    t->shape[i] = (int64_t)v;
    if (__builtin_mul_overflow(t->numel, t->shape[i], &t->numel))
      return sc_fail(err, SC_EINPUT, "%s: tensor '%s': shape overflows the "
                     "element count", path, name);
  }
  uint64_t want;
  if (__builtin_mul_overflow((uint64_t)t->numel, st_dtype_size(t->dtype), &want))
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': shape overflows the byte "
                   "count", path, name);

  const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
      !json_uint(off->child, begin) || !json_uint(off->child->next, end))
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': \"data_offsets\" is %s, "
                   "expected [begin, end] with non-negative integers", path,
                   name, off ? "malformed" : "missing");
  if (*begin > *end)
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': data_offsets [%llu, %llu] "
                   "has begin > end", path, name, (unsigned long long)*begin,
                   (unsigned long long)*end);
  if (*end > data_size)
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': data_offsets [%llu, %llu] "
                   "run past the end of the data (%llu bytes; the file may be "
                   "truncated)", path, name, (unsigned long long)*begin,
                   (unsigned long long)*end, (unsigned long long)data_size);
  if (*end - *begin != want) {
    char s[256];
    return sc_fail(err, SC_EINPUT, "%s: tensor '%s': data_offsets [%llu, %llu] "
                   "hold %llu bytes, but shape %s of %s needs %llu", path, name,
                   (unsigned long long)*begin, (unsigned long long)*end,
                   (unsigned long long)(*end - *begin),
                   shape_str(s, sizeof s, t->ndim, t->shape),
                   st_dtype_name(t->dtype), (unsigned long long)want);
  }
  t->nbytes = want;
  return SC_OK;
}

typedef struct Span {
  uint64_t begin, end;
  int tensor;
} Span;

static int span_cmp(const void *a, const void *b) {
  const Span *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Overlap and duplicate-name checks over the parsed tensors.  Sorted by
 * begin, two non-empty ranges overlap iff some neighbouring pair does;
 * empty tensors own no bytes and cannot overlap anything. */
static int check_tensors(const StFile *f, Span *spans, sc_error *err) {
  int n = 0;
  for (int i = 0; i < f->n_tensors; i++)
    if (spans[i].end > spans[i].begin) spans[n++] = spans[i];
  qsort(spans, (size_t)n, sizeof *spans, span_cmp);
  for (int i = 1; i < n; i++)
    if (spans[i - 1].end > spans[i].begin)
      return sc_fail(err, SC_EINPUT, "%s: tensors '%s' and '%s' overlap (bytes "
                     "[%llu, %llu) and [%llu, %llu) of the data)", f->path,
                     f->tensors[spans[i - 1].tensor].name,
                     f->tensors[spans[i].tensor].name,
                     (unsigned long long)spans[i - 1].begin,
                     (unsigned long long)spans[i - 1].end,
                     (unsigned long long)spans[i].begin,
                     (unsigned long long)spans[i].end);

  const char **names = malloc(((size_t)f->n_tensors + 1) * sizeof *names);
  if (!names) return sc_fail(err, SC_ERUNTIME, "%s: out of memory", f->path);
  for (int i = 0; i < f->n_tensors; i++) names[i] = f->tensors[i].name;
  qsort(names, (size_t)f->n_tensors, sizeof *names, name_cmp);
  int rc = SC_OK;
  for (int i = 1; i < f->n_tensors && rc == SC_OK; i++)
    if (strcmp(names[i - 1], names[i]) == 0)
      rc = sc_fail(err, SC_EINPUT, "%s: tensor '%s' appears twice in the header",
                   f->path, names[i]);
  free(names);
  return rc;
}

/* A tensor name is printable: a control character (escaped in the JSON:
 * "\n", "\u001b") has no place in a PyTorch parameter name, and would be
 * printed raw by every message and by `speechc inspect`.  (\u0000 was
 * refused before parsing: json_check_text.) */
static int check_name(const char *name, const char *path, sc_error *err) {
  const unsigned char *p = (const unsigned char *)name;
  while (*p && *p >= 0x20 && *p != 0x7f) p++;
  if (!*p) return SC_OK;
  char esc[160];
  size_t n = 0;
  const unsigned char *q = (const unsigned char *)name;
  for (; *q && n + 8 < sizeof esc; q++) {
    if (*q < 0x20 || *q == 0x7f) n += (size_t)snprintf(esc + n, sizeof esc - n, "\\u%04x", *q);
    else esc[n++] = (char)*q;
  }
  esc[n] = '\0';
  return sc_fail(err, SC_EINPUT, "%s: tensor name \"%s%s\" holds a control character "
                 "(\\u%04x)", path, esc, *q ? "..." : "", *p);
}

/* Build f->tensors from the parsed header.  The data section is
 * map[data_start, size). */
static int load_header(StFile *f, const cJSON *hdr, size_t data_start,
                       sc_error *err) {
  int n = 0;
  size_t strbytes = 0;
  for (const cJSON *e = hdr->child; e; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) continue;
    if (check_name(e->string, f->path, err)) return err->code;
    n++;
    strbytes += strlen(e->string) + 1;
  }
  f->tensors = calloc((size_t)n + 1, sizeof *f->tensors);
  f->strings = malloc(strbytes + 1);
  Span *spans = malloc(((size_t)n + 1) * sizeof *spans);
  if (!f->tensors || !f->strings || !spans) {
    free(spans);
    return sc_fail(err, SC_ERUNTIME, "%s: out of memory", f->path);
  }

  uint64_t data_size = f->size - data_start;
  char *s = f->strings;
  for (const cJSON *e = hdr->child; e; e = e->next) {
    if (strcmp(e->string, "__metadata__") == 0) continue;
    StTensor *t = &f->tensors[f->n_tensors];
    Span *sp = &spans[f->n_tensors];
    int rc = parse_entry(t, e, f->path, data_size, &sp->begin, &sp->end, err);
    if (rc) {
      free(spans);
      return rc;
    }
    size_t len = strlen(e->string) + 1;
    memcpy(s, e->string, len);
    t->name = s;
    s += len;
    t->data = f->map + data_start + sp->begin;
    t->file = 0;
    sp->tensor = f->n_tensors++;
  }
  int rc = check_tensors(f, spans, err);
  free(spans);
  return rc;
}

/* Map the file, then parse a NUL-terminated copy of the header: cJSON must
 * not be trusted to stop at a length when the header ends the mapping. */
static int st_open_impl(StFile *f, const char *path, sc_error *err) {
  int fd;
  uint64_t size;
  if (sc_open_regular(path, "a regular safetensors file", 0, &fd, &size, err))
    return err->code;
  if (size < 8) {
    close(fd);
    return sc_fail(err, SC_EINPUT, "%s: truncated: %lld bytes, expected at "
                   "least 8", path, (long long)size);
  }
  void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  close(fd);
  if (map == MAP_FAILED)
    return sc_fail(err, SC_EINPUT, "%s: mmap failed: %s", path,
                   strerror(map_errno));
  f->map = map;
  f->size = (size_t)size;

  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->map[i];
  if (hlen > f->size - 8)
    return sc_fail(err, SC_EINPUT, "%s: header length %llu runs past the end "
                   "of the file (size %zu)", path, (unsigned long long)hlen,
                   f->size);
  if (hlen > ST_MAX_HEADER)
    return sc_fail(err, SC_EINPUT, "%s: header length %llu is implausibly "
                   "large (limit %u)", path, (unsigned long long)hlen,
                   ST_MAX_HEADER);

  char *text = malloc((size_t)hlen + 1);
  if (!text) return sc_fail(err, SC_ERUNTIME, "%s: out of memory", path);
  memcpy(text, f->map + 8, (size_t)hlen);
  text[hlen] = '\0';
  /* UTF-8 (as the safetensors crate requires) and no \u0000: cJSON would
   * end the name at the NUL, and "w\u0000x" would be read as "w" */
  if (json_check_text(text, (size_t)hlen, path, "tensor name", err)) {
    free(text);
    return err->code;
  }
  const char *end = NULL;
  cJSON *hdr = cJSON_ParseWithLengthOpts(text, (size_t)hlen + 1, &end, 1);
  if (!hdr || end != text + hlen) {
    size_t at = end && end >= text && end <= text + hlen ? (size_t)(end - text) : 0;
    cJSON_Delete(hdr);
    free(text);
    return sc_fail(err, SC_EINPUT, "%s: header is not valid JSON (error near "
                   "byte %zu of %llu)", path, at, (unsigned long long)hlen);
  }
  free(text);
  int rc;
  if (!cJSON_IsObject(hdr))
    rc = sc_fail(err, SC_EINPUT, "%s: header is not valid JSON: expected an "
                 "object at the top level", path);
  else
    rc = load_header(f, hdr, 8 + (size_t)hlen, err);
  cJSON_Delete(hdr);
  return rc;
}

int st_open(StFile *f, const char *path, sc_error *err) {
  memset(f, 0, sizeof *f);
  f->path = strdup(path);
  if (!f->path) return sc_fail(err, SC_ERUNTIME, "%s: out of memory", path);
  int rc = st_open_impl(f, path, err);
  if (rc) st_close(f);
  return rc;
}

/* IEEE binary16 -> binary32, exact for every input including subnormals,
 * infinities and NaN payloads. */
static float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    float v = (float)mant * (1.0f / 16777216.0f); /* mant * 2^-24 */
    memcpy(&bits, &v, 4);
    bits |= sign;
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 112) << 23 | mant << 13; /* rebias 15 -> 127 */
  }
  float out;
  memcpy(&out, &bits, 4);
  return out;
}

/* The data need not be aligned (offsets are arbitrary), so elements are
 * loaded with memcpy; the host is little-endian like the format. */
void st_read_f32(const StTensor *t, int64_t first, int64_t n, float *out) {
  assert(first >= 0 && n >= 0 && first + n <= t->numel);
  if (n == 0) return;
  const uint8_t *p = t->data + (size_t)first * st_dtype_size(t->dtype);
  switch (t->dtype) {
  case ST_F32:
    memcpy(out, p, (size_t)n * 4);
    break;
  case ST_F16:
    for (int64_t i = 0; i < n; i++) {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      out[i] = f16_to_f32(h);
    }
    break;
  case ST_BF16:
    for (int64_t i = 0; i < n; i++) {
      uint16_t h;
      memcpy(&h, p + 2 * i, 2);
      uint32_t bits = (uint32_t)h << 16;
      memcpy(&out[i], &bits, 4);
    }
    break;
  default:
    assert(!"st_read_f32: not a float tensor");
  }
}
