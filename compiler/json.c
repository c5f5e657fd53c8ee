/*
 * json.c — the text checks, the duplicate-key rule and the file reader of
 * json.h.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "json.h"

/* json.h */
size_t json_utf8_len(const unsigned char *s, size_t n) {
  if (s[0] < 0x80) return 1;
  size_t k;
  uint32_t cp;
  if ((s[0] & 0xe0) == 0xc0) k = 2, cp = s[0] & 0x1f;
  else if ((s[0] & 0xf0) == 0xe0) k = 3, cp = s[0] & 0x0f;
  else if ((s[0] & 0xf8) == 0xf0) k = 4, cp = s[0] & 0x07;
  else return 0;
  if (k > n) return 0;
  for (size_t i = 1; i < k; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (s[i] & 0x3f);
  }
  static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return k;
}

static int is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The string whose opening quote is at text[open], as written (escapes and
 * all), at most 160 bytes of it; whether it is a key (':' follows). */
static int describe(const char *text, size_t len, size_t open, size_t nul_at, char *out,
                    size_t cap, char *prefix, size_t pcap) {
  size_t end = open + 1;
  while (end < len && text[end] != '"') end += text[end] == '\\' ? 2 : 1;
  if (end > len) end = len;
  size_t n = end - open - 1;
  snprintf(out, cap, "\"%.*s%s\"", (int)(n > 160 ? 160 : n), text + open + 1, n > 160 ? "..." : "");
  snprintf(prefix, pcap, "%.*s", (int)(nul_at - open - 1 > 160 ? 160 : nul_at - open - 1),
           text + open + 1);
  size_t k = end + 1;
  while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r')) k++;
  return k < len && text[k] == ':';
}

int json_check_text(const char *text, size_t len, const char *path, const char *key_noun,
                    sc_error *err) {
  const unsigned char *s = (const unsigned char *)text;
  int line = 1, in_str = 0;
  size_t open = 0;
  for (size_t i = 0; i < len;) {
    size_t k = json_utf8_len(s + i, len - i);
    if (!k)
      return sc_fail(err, SC_EINPUT, "%s: not valid UTF-8: byte 0x%02x at line %d (byte %zu); "
                     "JSON files are UTF-8", path, s[i], line, i);
    if (s[i] == '\n') line++;
    if (!in_str) {
      /* cJSON skips every byte <= 0x20 as whitespace, NUL included */
      if (s[i] < 0x20 && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
        return sc_fail(err, SC_EINPUT, "%s: a control character (0x%02x) at line %d (byte %zu), "
                       "outside any string: not JSON", path, s[i], line, i);
      if (s[i] == '"') in_str = 1, open = i;
      i += k;
      continue;
    }
    if (s[i] < 0x20)
      return sc_fail(err, SC_EINPUT, "%s: a raw control character (0x%02x) inside a string at "
                     "line %d (byte %zu); JSON writes it escaped, and Python's json refuses it",
                     path, s[i], line, i);
    if (s[i] == '"') {
      in_str = 0;
    } else if (s[i] == '\\' && i + 1 < len) {
      if (s[i + 1] == 'u' && i + 5 < len && is_hex(text[i + 2]) && is_hex(text[i + 3]) &&
          is_hex(text[i + 4]) && is_hex(text[i + 5]) && !strncmp(text + i + 2, "0000", 4)) {
        char str[200], prefix[170];
        int key = describe(text, len, open, i, str, sizeof str, prefix, sizeof prefix);
        return sc_fail(err, SC_EINPUT, "%s: %s %s at line %d holds a NUL character (\\u0000), "
                       "which would cut it short to \"%s\"", path, key ? key_noun : "string",
                       str, line, prefix);
      }
      const unsigned char e = s[i + 1];
      /* named here: skipping one byte past a multi-byte character would
       * report its next byte as bad UTF-8 */
      if (!e || !strchr("\"\\/bfnrtu", e)) {
        if (e > 0x20 && e < 0x7f)
          return sc_fail(err, SC_EINPUT, "%s: an invalid escape \\%c at line %d (byte %zu); JSON's escapes "
                         "are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX", path, e, line, i);
        return sc_fail(err, SC_EINPUT, "%s: an invalid escape, a backslash before byte 0x%02x, at line %d (byte "
                       "%zu); JSON's escapes are \\\" \\\\ \\/ \\b \\f \\n \\r \\t and \\uXXXX", path, e,
                       line, i);
      }
      i += 2; /* the escaped character: '"', '\\', 'n', 'u', ... */
      continue;
    }
    i += k;
  }
  return SC_OK;
}

typedef struct Member {
  cJSON *item;
  size_t pos;
} Member;

static int member_cmp(const void *a, const void *b) {
  const Member *x = a, *y = b;
  int c = strcmp(x->item->string, y->item->string);
  if (c) return c;
  return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Sort the members by (key, position); each run of equal keys collapses
 * into its last item, placed where its first was.  O(n log n): an index's
 * weight_map has tens of thousands of keys. */
static int dedup_object(cJSON *obj, sc_error *err) {
  size_t n = 0;
  for (cJSON *c = obj->child; c; c = c->next) n++;
  if (n < 2) return SC_OK;
  Member *m = malloc(n * sizeof *m);
  if (!m) return sc_fail(err, SC_ERUNTIME, "out of memory");
  n = 0;
  for (cJSON *c = obj->child; c; c = c->next, n++) m[n] = (Member){c, n};
  qsort(m, n, sizeof *m, member_cmp);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && !strcmp(m[j].item->string, m[i].item->string)) j++;
    if (j - i > 1) {
      cJSON *last = cJSON_DetachItemViaPointer(obj, m[j - 1].item);
      for (size_t k = i + 1; k < j - 1; k++) cJSON_Delete(cJSON_DetachItemViaPointer(obj, m[k].item));
      cJSON_ReplaceItemViaPointer(obj, m[i].item, last); /* frees the first */
    }
    i = j;
  }
  free(m);
  return SC_OK;
}

int json_last_wins(cJSON *j, sc_error *err) {
  if (cJSON_IsObject(j) && dedup_object(j, err)) return err->code;
  if (cJSON_IsObject(j) || cJSON_IsArray(j))
    for (cJSON *c = j->child; c; c = c->next)
      if (json_last_wins(c, err)) return err->code;
  return SC_OK;
}

int json_read_file(const char *path, uint64_t max_bytes, const char *missing_hint,
                   char **text, cJSON **json, sc_error *err) {
  *text = NULL;
  *json = NULL;
  char *buf;
  size_t len;
  if (sc_read_regular(path, "a regular JSON file", max_bytes, &buf, &len, err)) {
    if (errno == ENOENT)
      return sc_fail(err, SC_EINPUT, "%s: not found%s%s%s", path,
                     missing_hint ? " (" : "", missing_hint ? missing_hint : "",
                     missing_hint ? ")" : "");
    return err->code;
  }
  if (json_check_text(buf, len, path, "key", err)) {
    free(buf);
    return err->code;
  }
  const char *end = NULL;
  cJSON *j = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 1);
  if (!j || end != buf + len) {
    size_t at = end && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
    int line = 1;
    for (size_t i = 0; i < at; i++) line += buf[i] == '\n';
    cJSON_Delete(j);
    free(buf);
    return sc_fail(err, SC_EINPUT, "%s: not valid JSON (error near line %d, "
                   "byte %zu)", path, line, at);
  }
  if (json_last_wins(j, err)) {
    cJSON_Delete(j);
    free(buf);
    return err->code;
  }
  *text = buf;
  *json = j;
  return SC_OK;
}
