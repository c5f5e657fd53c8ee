/*
 * tokenizer.c — the Qwen2/Qwen3 byte-level BPE tokenizer (tokenizer.h).
 *
 * The pipeline is that of HF `tokenizers` with Qwen2's tokenizer.json:
 *   1. added tokens, leftmost-longest on the raw text (Qwen's are all
 *      "normalized": false, so they are matched before normalization);
 *   2. NFC of each piece between them (utf8proc);
 *   3. the Qwen2 Split regex, behavior Isolated (PCRE2 with UTF and UCP);
 *   4. GPT-2 byte-level: each byte of a pre-token is one initial symbol;
 *   5. BPE: repeatedly merge the adjacent pair of lowest merge rank (ties:
 *      leftmost), with a binary heap of candidate pairs and lazy removal of
 *      stale ones, so a long word costs O(n log n), not O(n^2).
 * Pre-token results are cached in a hash map (the same words recur).
 *
 * lstrip/rstrip/single_word of added tokens are not implemented (Qwen sets
 * them all false); a tokenizer that sets one is refused by name.  So is a
 * tokenizer.json whose pipeline is not this one (check_pipeline: another
 * normalizer, pre-tokenizer, decoder or post-processor, truncation,
 * padding, BPE dropout or affixes); "normalizer": null skips step 2.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <limits.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "file.h"
#include "json.h"
#include "spm.h"
#include "tokenizer.h"

/* transformers' Qwen2Tokenizer PRETOKENIZE_REGEX, the "Split" pattern of
 * Qwen2/Qwen3's tokenizer.json:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
 *    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * with \s written out as the Unicode White_Space property, which is what
 * \s means to Oniguruma, HF's regex engine.  PCRE2's \s (with UCP) also
 * takes U+180E (Mongolian vowel separator, a format character since
 * Unicode 6.3), so "\u180e'll" would split differently from HF. */
#define WS "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
           "\\x{202F}\\x{205F}\\x{3000}"
static const char qwen2_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^" WS "\\p{L}\\p{N}]+[\\r\\n]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+";
#undef WS

#define TOK_MAX_ID (1 << 22) /* Qwen's ids end near 152,000 */

/* Open-addressing hash map from a byte string to an int32 (vocab, cache
 * index) or from a pair of ids to a merge. */
typedef struct {
  const char *key; /* not owned; NULL: empty slot */
  uint32_t len;
  int32_t val;
} StrSlot;

typedef struct {
  StrSlot *slots;
  size_t cap, n; /* cap: a power of two */
} StrMap;

typedef struct {
  uint64_t key; /* (a << 32 | b) + 1; 0: empty slot */
  int32_t rank, merged;
} PairSlot;

typedef struct {
  const char *text; /* owned */
  size_t len;
  int32_t id;
} Added;

typedef struct {
  int32_t id, prev, next; /* prev/next: neighbours, -1 at the ends */
  int alive;
} Sym;

typedef struct {
  int32_t rank, pos, left, right; /* the pair (left, right) at symbol pos */
} Cand;

struct tok_tokenizer {
  StrMap vocab;       /* byte-level token string -> id */
  char **strings;     /* vocab keys, owned */
  size_t n_strings;
  PairSlot *merges;   /* [merge_cap] */
  size_t merge_cap, n_merges;
  int32_t byte_id[256];
  int16_t char_byte[512]; /* GPT-2 alphabet code point -> byte, -1: none */
  char **piece;       /* [n_ids]: the bytes of each id (NULL: no such id) */
  uint32_t *piece_len;
  int n_ids;
  Added *added;
  size_t n_added;
  uint8_t added_first[256]; /* 1 where some added token starts with the byte */
  pcre2_code *re;
  pcre2_match_data *md;
  int no_nfc;         /* tokenizer.json's "normalizer": null: pieces are not normalized */
  /* encode scratch, reused between calls */
  Sym *sym;
  Cand *heap;
  size_t sym_cap, heap_cap;
  /* pre-token cache: word bytes -> index into cache_ids */
  StrMap cache;
  char **cache_keys;
  int32_t **cache_val; /* [0]: count, then the ids */
  size_t cache_n;
};

/* ---- GPT-2 byte-level alphabet ------------------------------------------ */

/* The code point GPT-2's bytes_to_unicode gives byte b. */
static uint32_t byte_char(int b) {
  if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
    return (uint32_t)b;
  int n = 0;
  for (int c = 0; c < b; c++)
    if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) n++;
  return 256u + (uint32_t)n;
}

/* ---- hash maps ------------------------------------------------------------ */

static uint64_t hash_bytes(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

static int32_t *strmap_find(const StrMap *m, const char *s, size_t n) {
  if (!m->cap) return NULL;
  for (size_t i = hash_bytes(s, n) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    StrSlot *e = &m->slots[i];
    if (!e->key) return NULL;
    if (e->len == n && !memcmp(e->key, s, n)) return &e->val;
  }
}

/* Insert (s, n) -> val; 1 if already present (value left), 0 inserted,
 * -1 out of memory. */
static int strmap_put(StrMap *m, const char *s, size_t n, int32_t val) {
  if ((m->n + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    StrSlot *ns = calloc(cap, sizeof *ns);
    if (!ns) return -1;
    for (size_t i = 0; i < m->cap; i++) {
      StrSlot *e = &m->slots[i];
      if (!e->key) continue;
      size_t j = hash_bytes(e->key, e->len) & (cap - 1);
      while (ns[j].key) j = (j + 1) & (cap - 1);
      ns[j] = *e;
    }
    free(m->slots);
    m->slots = ns;
    m->cap = cap;
  }
  size_t i = hash_bytes(s, n) & (m->cap - 1);
  for (; m->slots[i].key; i = (i + 1) & (m->cap - 1))
    if (m->slots[i].len == n && !memcmp(m->slots[i].key, s, n)) return 1;
  m->slots[i] = (StrSlot){s, (uint32_t)n, val};
  m->n++;
  return 0;
}

static uint64_t pair_key(int32_t a, int32_t b) {
  return (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
}

static size_t pair_hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (size_t)k;
}

static const PairSlot *merge_find(const tok_tokenizer *t, int32_t a, int32_t b) {
  uint64_t k = pair_key(a, b);
  for (size_t i = pair_hash(k) & (t->merge_cap - 1);; i = (i + 1) & (t->merge_cap - 1)) {
    if (!t->merges[i].key) return NULL;
    if (t->merges[i].key == k) return &t->merges[i];
  }
}

/* ---- loading ---------------------------------------------------------------- */

void tok_free(tok_tokenizer *t) {
  if (!t) return;
  for (size_t i = 0; i < t->n_strings; i++) free(t->strings[i]);
  free(t->strings);
  free(t->vocab.slots);
  free(t->merges);
  for (int i = 0; i < t->n_ids; i++) free(t->piece[i]);
  free(t->piece);
  free(t->piece_len);
  for (size_t i = 0; i < t->n_added; i++) free((char *)t->added[i].text);
  free(t->added);
  pcre2_match_data_free(t->md);
  pcre2_code_free(t->re);
  free(t->sym);
  free(t->heap);
  for (size_t i = 0; i < t->cache_n; i++) {
    free(t->cache_keys[i]);
    free(t->cache_val[i]);
  }
  free(t->cache_keys);
  free(t->cache_val);
  free(t->cache.slots);
  free(t);
}

int tok_vocab_size(const tok_tokenizer *t) { return t->n_ids; }

static int oom(sc_error *err) { return sc_fail(err, SC_ERUNTIME, "tokenizer: out of memory"); }

/* Make room for ids up to id in piece[]. */
static int grow_ids(tok_tokenizer *t, int32_t id) {
  if (id < t->n_ids) return 0;
  int n = id + 1;
  char **p = realloc(t->piece, (size_t)n * sizeof *p);
  if (!p) return -1;
  t->piece = p;
  uint32_t *l = realloc(t->piece_len, (size_t)n * sizeof *l);
  if (!l) return -1;
  t->piece_len = l;
  for (int i = t->n_ids; i < n; i++) p[i] = NULL, l[i] = 0;
  t->n_ids = n;
  return 0;
}

/* The bytes a byte-level token string stands for: each code point of the
 * GPT-2 alphabet is its byte; any other (not in a trained vocabulary) is
 * kept as its UTF-8, as the ByteLevel decoder does. */
static int set_piece(tok_tokenizer *t, int32_t id, const char *s, size_t n) {
  char *b = malloc(n + 1);
  if (!b) return -1;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
    if (k <= 0) k = 1, c = -1;
    int byte = c >= 0 && c < 512 ? t->char_byte[c] : -1;
    if (byte >= 0) b[o++] = (char)byte;
    else memcpy(b + o, s + i, (size_t)k), o += (size_t)k;
    i += (size_t)k;
  }
  b[o] = 0;
  free(t->piece[id]);
  t->piece[id] = b;
  t->piece_len[id] = (uint32_t)o;
  return 0;
}

/* One vocabulary entry: token string (byte-level, UTF-8) -> id. */
static int add_token(tok_tokenizer *t, const char *path, const char *s, double v, sc_error *err) {
  if (!(v >= 0 && v < TOK_MAX_ID) || v != (double)(int32_t)v)
    return sc_fail(err, SC_EINPUT, "%s: token \"%.60s\": id %g is not a whole number in [0, %d)",
                   path, s, v, TOK_MAX_ID);
  int32_t id = (int32_t)v;
  size_t n = strlen(s);
  char *key = malloc(n + 1);
  if (!key) return oom(err);
  memcpy(key, s, n + 1);
  if (t->n_strings % 1024 == 0) {
    char **ns = realloc(t->strings, (t->n_strings + 1024) * sizeof *ns);
    if (!ns) return free(key), oom(err);
    t->strings = ns;
  }
  t->strings[t->n_strings++] = key;
  int r = strmap_put(&t->vocab, key, n, id);
  if (r < 0 || grow_ids(t, id)) return oom(err);
  if (r == 1) return sc_fail(err, SC_EINPUT, "%s: token \"%.60s\" appears twice", path, s);
  if (t->piece[id])
    return sc_fail(err, SC_EINPUT, "%s: id %d is given to two tokens (\"%.60s\" and another)",
                   path, id, s);
  if (set_piece(t, id, key, n)) return oom(err);
  return SC_OK;
}

static int load_vocab_object(tok_tokenizer *t, const char *path, const cJSON *v, sc_error *err) {
  if (!cJSON_IsObject(v))
    return sc_fail(err, SC_EINPUT, "%s: expected an object of token -> id", path);
  for (const cJSON *e = v->child; e; e = e->next) {
    if (!cJSON_IsNumber(e))
      return sc_fail(err, SC_EINPUT, "%s: token \"%.60s\": expected an integer id", path,
                     e->string);
    if (add_token(t, path, e->string, e->valuedouble, err)) return err->code;
  }
  if (!t->n_strings) return sc_fail(err, SC_EINPUT, "%s: the vocabulary is empty", path);
  return SC_OK;
}

/* One merge "a b" of rank `rank`; where names it in errors.  A repeat
 * keeps the first rank (merges.txt, as transformers reads it) or takes
 * the last (last: tokenizer.json, whose merges HF tokenizers puts in a map
 * in order). */
static int add_merge(tok_tokenizer *t, const char *where, const char *a, size_t na,
                     const char *b, size_t nb, int32_t rank, int last, sc_error *err) {
  const int32_t *ia = strmap_find(&t->vocab, a, na), *ib = strmap_find(&t->vocab, b, nb);
  char buf[512];
  if (na + nb >= sizeof buf)
    return sc_fail(err, SC_EINPUT, "%s: merge longer than %zu bytes", where, sizeof buf - 1);
  memcpy(buf, a, na);
  memcpy(buf + na, b, nb);
  const int32_t *im = strmap_find(&t->vocab, buf, na + nb);
  if (!ia || !ib || !im) {
    buf[na + nb] = 0;
    return sc_fail(err, SC_EINPUT, "%s: merge \"%.*s %.*s\": %s \"%.*s\" is not in the vocabulary",
                   where, (int)na, a, (int)nb, b, !ia ? "token" : !ib ? "token" : "merged token",
                   !ia ? (int)na : !ib ? (int)nb : (int)(na + nb), !ia ? a : !ib ? b : buf);
  }
  if ((t->n_merges + 1) * 2 > t->merge_cap) {
    size_t cap = t->merge_cap ? t->merge_cap * 2 : 1024;
    PairSlot *ns = calloc(cap, sizeof *ns);
    if (!ns) return oom(err);
    for (size_t i = 0; i < t->merge_cap; i++) {
      if (!t->merges[i].key) continue;
      size_t j = pair_hash(t->merges[i].key) & (cap - 1);
      while (ns[j].key) j = (j + 1) & (cap - 1);
      ns[j] = t->merges[i];
    }
    free(t->merges);
    t->merges = ns;
    t->merge_cap = cap;
  }
  uint64_t k = pair_key(*ia, *ib);
  size_t i = pair_hash(k) & (t->merge_cap - 1);
  for (; t->merges[i].key; i = (i + 1) & (t->merge_cap - 1))
    if (t->merges[i].key == k) {
      if (last) t->merges[i].rank = rank;
      return SC_OK;
    }
  t->merges[i] = (PairSlot){k, rank, *im};
  t->n_merges++;
  return SC_OK;
}

/* merges.txt: "#version" first line optional, then "A B" per line. */
static int load_merges_txt(tok_tokenizer *t, const char *path, sc_error *err) {
  char *buf;
  size_t len;
  if (sc_read_regular(path, "a regular merges file", TOK_FILE_MAX, &buf, &len, err))
    return errno == ENOENT ? sc_fail(err, SC_EINPUT, "%s: not found (vocab.json needs merges.txt "
                                     "beside it)", path)
                           : err->code;
  int rc = SC_OK, line = 0;
  int32_t rank = 0;
  for (size_t at = 0; at < len && !rc;) {
    size_t end = at;
    while (end < len && buf[end] != '\n') end++;
    line++;
    size_t e = end;
    if (e > at && buf[e - 1] == '\r') e--;
    const char *s = buf + at;
    size_t n = e - at;
    at = end + 1;
    if (line == 1 && n >= 8 && !memcmp(s, "#version", 8)) continue;
    if (n == 0) continue;
    const char *sp = memchr(s, ' ', n);
    char where[4200];
    snprintf(where, sizeof where, "%s:%d", path, line);
    if (!sp || sp == s || sp == s + n - 1 || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)) ||
        memchr(s, 0, n))
      rc = sc_fail(err, SC_EINPUT, "%s: expected two tokens separated by one space, found \"%.*s\"",
                   where, (int)(n > 60 ? 60 : n), s);
    else
      rc = add_merge(t, where, s, (size_t)(sp - s), sp + 1, (size_t)(s + n - sp - 1), rank++, 0, err);
  }
  free(buf);
  return rc;
}

static int add_added(tok_tokenizer *t, const char *path, const cJSON *tok, double idv,
                     sc_error *err) {
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(tok, "content");
  if (!cJSON_IsString(c) || !c->valuestring[0])
    return sc_fail(err, SC_EINPUT, "%s: added token %g: expected a non-empty \"content\" string",
                   path, idv);
  static const char *const unsupported[] = {"lstrip", "rstrip", "single_word"};
  for (int i = 0; i < 3; i++)
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tok, unsupported[i])))
      return sc_fail(err, SC_EINPUT, "%s: added token \"%.60s\": \"%s\": true is not supported "
                     "(Qwen's tokenizers set it false)", path, c->valuestring, unsupported[i]);
  if (!(idv >= 0 && idv < TOK_MAX_ID) || idv != (double)(int32_t)idv)
    return sc_fail(err, SC_EINPUT, "%s: added token \"%.60s\": id %g is not a whole number in "
                   "[0, %d)", path, c->valuestring, idv, TOK_MAX_ID);
  int32_t id = (int32_t)idv;
  size_t n = strlen(c->valuestring);
  Added *na = realloc(t->added, (t->n_added + 1) * sizeof *na);
  if (!na) return oom(err);
  t->added = na;
  char *s = malloc(n + 1);
  if (!s || grow_ids(t, id)) return free(s), oom(err);
  memcpy(s, c->valuestring, n + 1);
  t->added[t->n_added++] = (Added){s, n, id};
  t->added_first[(uint8_t)s[0]] = 1;
  /* an added token's text is itself, not byte-level; an id the vocabulary
   * gives another string would decode two ways */
  if (t->piece[id] && (t->piece_len[id] != n || memcmp(t->piece[id], s, n)))
    return sc_fail(err, SC_EINPUT, "%s: added token \"%.60s\": id %d already stands for "
                   "another token", path, s, id);
  char *p = malloc(n + 1);
  if (!p) return oom(err);
  memcpy(p, s, n + 1);
  free(t->piece[id]);
  t->piece[id] = p;
  t->piece_len[id] = (uint32_t)n;
  return SC_OK;
}

static int path_join(char *out, size_t cap, const char *dir, const char *name, sc_error *err) {
  if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap)
    return sc_fail(err, SC_EUSAGE, "%s: path too long", dir);
  return SC_OK;
}

/* added_tokens.json (optional; the split form's older place for added
 * tokens, {"content": id, ...}), which transformers adds to those of
 * tokenizer_config.json: each one not already there. */
static int load_added_json(tok_tokenizer *t, const char *dir, sc_error *err) {
  char path[4096];
  char *text;
  cJSON *j;
  struct stat st;
  if (path_join(path, sizeof path, dir, "added_tokens.json", err)) return err->code;
  if (stat(path, &st) && errno == ENOENT) return SC_OK;
  if (json_read_file(path, TOK_FILE_MAX, NULL, &text, &j, err)) return err->code;
  int rc = cJSON_IsObject(j) ? SC_OK : sc_fail(err, SC_EINPUT, "%s: expected an object of token -> id", path);
  for (const cJSON *e = cJSON_IsObject(j) ? j->child : NULL; e && !rc; e = e->next) {
    if (!cJSON_IsNumber(e)) {
      rc = sc_fail(err, SC_EINPUT, "%s: token \"%.60s\": expected an integer id", path, e->string);
      break;
    }
    int have = 0;
    for (size_t i = 0; i < t->n_added && !have; i++)
      have = t->added[i].id == e->valuedouble && !strcmp(t->added[i].text, e->string);
    if (have) continue;
    cJSON *tok = cJSON_CreateObject();
    if (!tok || !cJSON_AddStringToObject(tok, "content", e->string)) {
      cJSON_Delete(tok);
      rc = oom(err);
      break;
    }
    rc = add_added(t, path, tok, e->valuedouble, err);
    cJSON_Delete(tok);
  }
  cJSON_Delete(j);
  free(text);
  return rc;
}

/* vocab.json + merges.txt + tokenizer_config.json and added_tokens.json
 * (both optional). */
static int load_split(tok_tokenizer *t, const char *dir, sc_error *err) {
  char path[4096];
  char *text;
  cJSON *j;
  if (path_join(path, sizeof path, dir, "vocab.json", err) ||
      json_read_file(path, TOK_FILE_MAX, NULL, &text, &j, err))
    return err->code;
  int rc = load_vocab_object(t, path, j, err);
  cJSON_Delete(j);
  free(text);
  if (rc) return rc;
  if (path_join(path, sizeof path, dir, "merges.txt", err)) return err->code;
  if (load_merges_txt(t, path, err)) return err->code;
  if (path_join(path, sizeof path, dir, "tokenizer_config.json", err)) return err->code;
  struct stat st;
  if (stat(path, &st) && errno == ENOENT) return load_added_json(t, dir, err); /* no config */
  if (json_read_file(path, TOK_FILE_MAX, NULL, &text, &j, err)) return err->code;
  const cJSON *dec = cJSON_GetObjectItemCaseSensitive(j, "added_tokens_decoder");
  if (dec && !cJSON_IsObject(dec))
    rc = sc_fail(err, SC_EINPUT, "%s: \"added_tokens_decoder\": expected an object of id -> token",
                 path);
  for (const cJSON *e = dec ? dec->child : NULL; e && !rc; e = e->next) {
    char *endp;
    errno = 0;
    double idv = strtod(e->string, &endp);
    if (!e->string[0] || *endp || errno)
      rc = sc_fail(err, SC_EINPUT, "%s: \"added_tokens_decoder\": key \"%.40s\" is not an id",
                   path, e->string);
    else
      rc = add_added(t, path, e, idv, err);
  }
  cJSON_Delete(j);
  free(text);
  return rc ? rc : load_added_json(t, dir, err);
}

/* The Split pattern of Qwen2/Qwen3's tokenizer.json, as written there. */
static const char qwen2_split_json[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static int is_type(const cJSON *o, const char *type) {
  const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
  return cJSON_IsObject(o) && cJSON_IsString(ty) && !strcmp(ty->valuestring, type);
}

static const char *type_of(const cJSON *o) {
  const cJSON *ty = cJSON_GetObjectItemCaseSensitive(o, "type");
  return cJSON_IsNull(o) || !o ? "null" : cJSON_IsString(ty) ? ty->valuestring : "(no type)";
}

/* A flag of o that must be `want` (absent: dflt). */
static int flag_is(const cJSON *o, const char *key, int dflt, int want) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return (v && !cJSON_IsNull(v) ? cJSON_IsTrue(v) : dflt) == want && (!v || cJSON_IsBool(v) || cJSON_IsNull(v));
}

/* tokenizer.json's pipeline, around the model: speechc runs Qwen2's
 * (normalizer NFC or none; Split on Qwen2's pattern, Isolated, then
 * ByteLevel without a prefix space or regex; the ByteLevel decoder; no
 * truncation or padding; a post-processor that adds no tokens).  Any
 * other is refused by name: HF would give other ids or text. */
static int check_pipeline(tok_tokenizer *t, const cJSON *j, const char *path, sc_error *err) {
  const cJSON *norm = cJSON_GetObjectItemCaseSensitive(j, "normalizer");
  if (!norm || cJSON_IsNull(norm)) t->no_nfc = 1;
  else if (!is_type(norm, "NFC"))
    return sc_fail(err, SC_EINPUT, "%s: \"normalizer\" %.40s is not supported (Qwen2's pipeline: NFC, or none)",
                   path, type_of(norm));
  const cJSON *pre = cJSON_GetObjectItemCaseSensitive(j, "pre_tokenizer");
  const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
  const cJSON *split = cJSON_IsArray(seq) ? seq->child : NULL, *bl = split ? split->next : NULL;
  const cJSON *pat = cJSON_GetObjectItemCaseSensitive(split, "pattern");
  const cJSON *rx = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
  const cJSON *beh = cJSON_GetObjectItemCaseSensitive(split, "behavior");
  if (!is_type(pre, "Sequence") || cJSON_GetArraySize(seq) != 2 || !is_type(split, "Split") ||
      !cJSON_IsString(rx) || strcmp(rx->valuestring, qwen2_split_json) || !cJSON_IsString(beh) ||
      strcmp(beh->valuestring, "Isolated") || !flag_is(split, "invert", 0, 0) || !is_type(bl, "ByteLevel") ||
      !flag_is(bl, "add_prefix_space", 1, 0) || !flag_is(bl, "use_regex", 1, 0))
    return sc_fail(err, SC_EINPUT, "%s: \"pre_tokenizer\" %.40s is not Qwen2's (a Sequence of Split on its "
                   "pattern, behavior Isolated, then ByteLevel with add_prefix_space and use_regex false): "
                   "not supported", path, type_of(pre));
  const cJSON *dec = cJSON_GetObjectItemCaseSensitive(j, "decoder");
  if (!is_type(dec, "ByteLevel"))
    return sc_fail(err, SC_EINPUT, "%s: \"decoder\" %.40s is not supported (expected ByteLevel)", path,
                   type_of(dec));
  const cJSON *post = cJSON_GetObjectItemCaseSensitive(j, "post_processor");
  if (post && !cJSON_IsNull(post) && !is_type(post, "ByteLevel"))
    return sc_fail(err, SC_EINPUT, "%s: \"post_processor\" %.40s is not supported (it may add tokens; "
                   "expected ByteLevel or null)", path, type_of(post));
  static const char *const off[] = {"truncation", "padding"};
  for (int i = 0; i < 2; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, off[i]);
    if (v && !cJSON_IsNull(v))
      return sc_fail(err, SC_EINPUT, "%s: \"%s\" is set: not supported (expected null)", path, off[i]);
  }
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
  static const char *const none[] = {"dropout", "continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 3; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, none[i]);
    if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !*v->valuestring))
      return sc_fail(err, SC_EINPUT, "%s: \"model.%s\" is set: not supported (expected null)", path, none[i]);
  }
  return SC_OK;
}

/* tokenizer.json: model.vocab, model.merges ("a b" strings or [a, b]
 * pairs), added_tokens.  The pipeline it names must be Qwen2's
 * (check_pipeline). */
static int load_single(tok_tokenizer *t, const char *dir, sc_error *err) {
  char path[4096];
  char *text;
  cJSON *j;
  if (path_join(path, sizeof path, dir, "tokenizer.json", err)) return err->code;
  if (json_read_file(path, TOK_FILE_MAX,
                     "hint: the directory needs vocab.json + merges.txt, or tokenizer.json",
                     &text, &j, err))
    return err->code;
  int rc = SC_OK;
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(j, "model");
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
  const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(j, "added_tokens");
  if (!cJSON_IsObject(model) || !cJSON_IsString(type) || strcmp(type->valuestring, "BPE"))
    rc = sc_fail(err, SC_EINPUT, "%s: expected \"model\": {\"type\": \"BPE\", ...}", path);
  else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(model, "ignore_merges")))
    rc = sc_fail(err, SC_EINPUT, "%s: \"ignore_merges\": true is not supported", path);
  else if (!cJSON_IsArray(merges))
    rc = sc_fail(err, SC_EINPUT, "%s: \"model\": expected a \"merges\" array", path);
  else
    rc = check_pipeline(t, j, path, err);
  if (!rc) {
    char vpath[4200];
    snprintf(vpath, sizeof vpath, "%s: \"model.vocab\"", path);
    rc = load_vocab_object(t, vpath, cJSON_GetObjectItemCaseSensitive(model, "vocab"), err);
  }
  int32_t rank = 0;
  for (const cJSON *m = merges ? merges->child : NULL; m && !rc; m = m->next, rank++) {
    char where[4200];
    snprintf(where, sizeof where, "%s: merge %d", path, rank);
    if (cJSON_IsString(m)) {
      const char *s = m->valuestring, *sp = strchr(s, ' ');
      if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' '))
        rc = sc_fail(err, SC_EINPUT, "%s: expected \"A B\", found \"%.60s\"", where, s);
      else
        rc = add_merge(t, where, s, (size_t)(sp - s), sp + 1, strlen(sp + 1), rank, 1, err);
    } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
               cJSON_IsString(m->child->next)) {
      const char *a = m->child->valuestring, *b = m->child->next->valuestring;
      rc = add_merge(t, where, a, strlen(a), b, strlen(b), rank, 1, err);
    } else {
      rc = sc_fail(err, SC_EINPUT, "%s: expected \"A B\" or [\"A\", \"B\"]", where);
    }
  }
  if (!rc && added && !cJSON_IsArray(added))
    rc = sc_fail(err, SC_EINPUT, "%s: \"added_tokens\": expected an array", path);
  for (const cJSON *a = added ? added->child : NULL; a && !rc; a = a->next) {
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
    rc = cJSON_IsNumber(id) ? add_added(t, path, a, id->valuedouble, err)
                            : sc_fail(err, SC_EINPUT, "%s: \"added_tokens\": expected objects "
                                      "with a numeric \"id\"", path);
  }
  cJSON_Delete(j);
  free(text);
  return rc;
}

int tok_load(const char *dir, tok_tokenizer **out, sc_error *err) {
  *out = NULL;
  struct stat st;
  if (stat(dir, &st))
    return sc_fail(err, SC_EINPUT, "%s: %s (expected a directory with the tokenizer files)", dir,
                   strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return sc_fail(err, SC_EINPUT, "%s: is a %s, expected a directory with vocab.json + "
                   "merges.txt or tokenizer.json", dir, sc_file_kind(st.st_mode));
  tok_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return oom(err);
  for (int c = 0; c < 512; c++) t->char_byte[c] = -1;
  for (int b = 0; b < 256; b++) t->char_byte[byte_char(b)] = (int16_t)b;
  char path[4096];
  int rc = path_join(path, sizeof path, dir, "vocab.json", err);
  if (!rc) rc = lstat(path, &st) == 0 ? load_split(t, dir, err) : load_single(t, dir, err);
  for (int b = 0; b < 256 && !rc; b++) {
    char s[4];
    utf8proc_ssize_t n = utf8proc_encode_char((utf8proc_int32_t)byte_char(b), (utf8proc_uint8_t *)s);
    const int32_t *id = strmap_find(&t->vocab, s, (size_t)n);
    if (!id)
      rc = sc_fail(err, SC_EINPUT, "%s: the vocabulary has no token for byte 0x%02x (\"%.*s\"); "
                   "expected a byte-level BPE with all 256 byte tokens", dir, b, (int)n, s);
    else
      t->byte_id[b] = *id;
  }
  if (!rc && !t->merge_cap) { /* no merges: a valid, if odd, tokenizer */
    t->merges = calloc(1, sizeof *t->merges);
    t->merge_cap = 1;
    if (!t->merges) rc = oom(err);
  }
  if (!rc) {
    int ec;
    PCRE2_SIZE eo;
    t->re = pcre2_compile((PCRE2_SPTR)qwen2_pattern, PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &ec, &eo, NULL);
    t->md = t->re ? pcre2_match_data_create_from_pattern(t->re, NULL) : NULL;
    if (!t->re || !t->md) rc = sc_fail(err, SC_ERUNTIME, "tokenizer: PCRE2 cannot compile the "
                                       "Qwen2 pattern (error %d at %zu)", ec, (size_t)eo);
    if (!rc) pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* optional: falls back */
  }
  if (rc) {
    tok_free(t);
    return rc;
  }
  *out = t;
  return SC_OK;
}

/* ---- encoding ----------------------------------------------------------- */

typedef struct {
  int32_t *v;
  size_t n, cap;
} Ids;

static int ids_push(Ids *o, int32_t id) {
  if (o->n == o->cap) {
    size_t cap = o->cap ? o->cap * 2 : 256;
    int32_t *nv = realloc(o->v, cap * sizeof *nv);
    if (!nv) return -1;
    o->v = nv;
    o->cap = cap;
  }
  o->v[o->n++] = id;
  return 0;
}

static int cand_less(const Cand *a, const Cand *b) {
  return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(Cand *h, size_t *n, Cand c) {
  size_t i = (*n)++;
  while (i && cand_less(&c, &h[(i - 1) / 2])) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = c;
}

static Cand heap_pop(Cand *h, size_t *n) {
  Cand top = h[0], last = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
    if (!cand_less(&h[c], &last)) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = last;
  return top;
}

static void push_pair(tok_tokenizer *t, size_t *hn, int32_t pos) {
  int32_t nx = t->sym[pos].next;
  if (nx < 0) return;
  const PairSlot *m = merge_find(t, t->sym[pos].id, t->sym[nx].id);
  if (m) heap_push(t->heap, hn, (Cand){m->rank, pos, t->sym[pos].id, t->sym[nx].id});
}

/* BPE of one pre-token's bytes w[0, n), appended to o. */
static int bpe_word(tok_tokenizer *t, const char *w, size_t n, Ids *o) {
  if (!n) return 0;
  if (n > t->sym_cap) {
    /* sym_cap covers both buffers, so it grows only once both have: a
     * failed heap realloc after a grown sym would leave a heap too small
     * for the next word that fits sym_cap */
    size_t cap = n < 64 ? 64 : n;
    Sym *s = realloc(t->sym, cap * sizeof *s);
    if (!s) return -1;
    t->sym = s;
    Cand *h = realloc(t->heap, 2 * cap * sizeof *h);
    if (!h) return -1;
    t->heap = h;
    t->heap_cap = 2 * cap;
    t->sym_cap = cap;
  }
  for (size_t i = 0; i < n; i++)
    t->sym[i] = (Sym){t->byte_id[(uint8_t)w[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, 1};
  size_t hn = 0;
  for (size_t i = 0; i + 1 < n; i++) push_pair(t, &hn, (int32_t)i);
  /* each merge pushes at most 2 and removes a symbol: the heap stays < 2n */
  while (hn) {
    Cand c = heap_pop(t->heap, &hn);
    Sym *a = &t->sym[c.pos];
    if (!a->alive || a->id != c.left || a->next < 0 || t->sym[a->next].id != c.right) continue;
    Sym *b = &t->sym[a->next];
    a->id = merge_find(t, c.left, c.right)->merged;
    b->alive = 0;
    a->next = b->next;
    if (b->next >= 0) t->sym[b->next].prev = c.pos;
    if (a->prev >= 0) push_pair(t, &hn, a->prev);
    push_pair(t, &hn, c.pos);
  }
  for (int32_t i = 0; i >= 0; i = t->sym[i].next)
    if (ids_push(o, t->sym[i].id)) return -1;
  return 0;
}

/* The ids of one pre-token, through the cache. */
static int encode_word(tok_tokenizer *t, const char *w, size_t n, Ids *o) {
  const int32_t *hit = strmap_find(&t->cache, w, n);
  if (hit) {
    const int32_t *v = t->cache_val[*hit];
    for (int32_t i = 1; i <= v[0]; i++)
      if (ids_push(o, v[i])) return -1;
    return 0;
  }
  size_t first = o->n;
  if (bpe_word(t, w, n, o)) return -1;
  /* cache short words only, and at most 2^18 of them: under 20 MB */
  if (n > 64 || t->cache_n >= (1u << 18)) return 0;
  size_t k = o->n - first;
  char *key = malloc(n ? n : 1);
  int32_t *val = malloc((k + 1) * sizeof *val);
  if (t->cache_n % 1024 == 0) {
    char **nk = realloc(t->cache_keys, (t->cache_n + 1024) * sizeof *nk);
    int32_t **nv = nk ? realloc(t->cache_val, (t->cache_n + 1024) * sizeof *nv) : NULL;
    if (nk) t->cache_keys = nk;
    if (nv) t->cache_val = nv;
    if (!nk || !nv) return free(key), free(val), -1;
  }
  if (!key || !val) return free(key), free(val), -1;
  memcpy(key, w, n);
  val[0] = (int32_t)k;
  memcpy(val + 1, o->v + first, k * sizeof *val);
  t->cache_keys[t->cache_n] = key;
  t->cache_val[t->cache_n] = val;
  if (strmap_put(&t->cache, key, n, (int32_t)t->cache_n) < 0) return free(key), free(val), -1;
  t->cache_n++;
  return 0;
}

int tok_nfc(const char *text, size_t len, char **out, size_t *out_len, sc_error *err) {
  utf8proc_uint8_t *r = NULL;
  utf8proc_ssize_t n = len ? utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len,
                                          &r, UTF8PROC_STABLE | UTF8PROC_COMPOSE)
                           : 0;
  if (!len) r = calloc(1, 1);
  if (n < 0 || !r) {
    free(r);
    return n == UTF8PROC_ERROR_NOMEM || !r ? oom(err)
               : sc_fail(err, SC_EINPUT, "tokenizer: NFC: %s", utf8proc_errmsg(n));
  }
  *out = (char *)r;
  *out_len = (size_t)n;
  return SC_OK;
}

/* NFC, split, BPE of one piece between added tokens. */
static int encode_piece(tok_tokenizer *t, const char *s, size_t len, Ids *o, sc_error *err) {
  char *nf;
  size_t n = len;
  if (t->no_nfc) {
    if (!(nf = malloc(len ? len : 1))) return oom(err);
    memcpy(nf, s, len);
  } else if (tok_nfc(s, len, &nf, &n, err)) {
    return err->code;
  }
  size_t at = 0;
  while (at < n) {
    int r = pcre2_match(t->re, (PCRE2_SPTR)nf, n, at, PCRE2_NO_UTF_CHECK, t->md, NULL);
    size_t ms = n, me = n;
    if (r >= 0) {
      PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
      ms = ov[0], me = ov[1];
    } else if (r != PCRE2_ERROR_NOMATCH) {
      free(nf);
      return sc_fail(err, SC_ERUNTIME, "tokenizer: PCRE2 match failed (error %d)", r);
    }
    if (me == ms && ms < n) { /* cannot happen with this pattern; step past one char */
      me = ms + 1;
      while (me < n && ((uint8_t)nf[me] & 0xC0) == 0x80) me++;
    }
    /* Isolated: the text between matches is a pre-token too */
    if ((ms > at && encode_word(t, nf + at, ms - at, o)) ||
        (me > ms && encode_word(t, nf + ms, me - ms, o))) {
      free(nf);
      return oom(err);
    }
    at = me;
  }
  free(nf);
  return SC_OK;
}

int tok_encode(tok_tokenizer *t, const char *text, size_t len, const char *what, int32_t **ids,
               size_t *n, sc_error *err) {
  *ids = NULL;
  *n = 0;
  for (size_t i = 0; i < len;) {
    if ((uint8_t)text[i] < 0x80) { i++; continue; }
    utf8proc_int32_t c;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i,
                                          (utf8proc_ssize_t)(len - i), &c);
    if (k <= 0)
      return sc_fail(err, SC_EINPUT, "%s: not valid UTF-8 at byte %zu (0x%02x)",
                     what ? what : "text", i, (uint8_t)text[i]);
    i += (size_t)k;
  }
  Ids o = {0};
  size_t start = 0;
  int rc = SC_OK;
  for (size_t i = 0; i <= len && !rc;) {
    const Added *best = NULL;
    if (i < len && t->added_first[(uint8_t)text[i]])
      for (size_t a = 0; a < t->n_added; a++) {
        const Added *d = &t->added[a];
        if (d->len <= len - i && (!best || d->len > best->len) && !memcmp(text + i, d->text, d->len))
          best = d;
      }
    if (!best && i < len) { i++; continue; }
    if (i > start) rc = encode_piece(t, text + start, i - start, &o, err);
    if (!best) break;
    if (!rc && ids_push(&o, best->id)) rc = oom(err);
    i += best->len;
    start = i;
  }
  if (rc) {
    free(o.v);
    return rc;
  }
  *ids = o.v;
  *n = o.n;
  return SC_OK;
}

/* ---- decoding ------------------------------------------------------------- */

int tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len,
               sc_error *err) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) {
    if (ids[i] < 0 || ids[i] >= t->n_ids || !t->piece[ids[i]])
      return sc_fail(err, SC_EUSAGE, "id %d (at position %zu) is not in the vocabulary "
                     "(%d ids)", ids[i], i, t->n_ids);
    total += t->piece_len[ids[i]];
  }
  char *s = malloc(total + 1);
  if (!s) return oom(err);
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    memcpy(s + o, t->piece[ids[i]], t->piece_len[ids[i]]);
    o += t->piece_len[ids[i]];
  }
  s[o] = 0;
  *text = s;
  *len = o;
  return SC_OK;
}

/* ---- the tokenizer beside a built model ----------------------------------- */

static const char *const tok_files[] = {"vocab.json", "merges.txt", "tokenizer_config.json", "added_tokens.json",
                                        "tokenizer.json"};

int tok_dir_of(const char *path, char *dir, size_t size) {
  struct stat st;
  size_t n = strlen(path);
  if (stat(path, &st) || !S_ISREG(st.st_mode)) return snprintf(dir, size, "%s", path) >= (int)size;
  if (n > 3 && !strcmp(path + n - 3, ".so")) n -= 3;
  const int w = snprintf(dir, size, "%.*s.tokenizer", (int)n, path);
  return w < 0 || (size_t)w >= size;
}

/* One file into dir, through a temporary that is renamed over the name. */
static int install_file(const char *dir, const char *name, const char *data, size_t len, sc_error *err) {
  char tmp[PATH_MAX], dst[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s/.%s.XXXXXX", dir, name) >= (int)sizeof tmp ||
      snprintf(dst, sizeof dst, "%s/%s", dir, name) >= (int)sizeof dst)
    return sc_fail(err, SC_EUSAGE, "%s: path too long", dir);
  int fd = mkstemp(tmp);
  if (fd < 0) return sc_fail(err, SC_EINPUT, "%s: cannot write: %s", dir, strerror(errno));
  size_t done = 0;
  while (done < len) {
    ssize_t k = write(fd, data + done, len - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    done += (size_t)k;
  }
  int bad = done != len || fchmod(fd, 0644);
  if (close(fd)) bad = 1;
  if (bad || rename(tmp, dst)) {
    int e = errno;
    unlink(tmp);
    return sc_fail(err, SC_EINPUT, "%s: write failed: %s", dst, strerror(e));
  }
  return SC_OK;
}

/* OUT.tokenizer/ for out_path, made when missing (a directory must be there,
 * not a file or a link). */
static int tok_make_dir(const char *out_path, char *dir, size_t size, sc_error *err) {
  size_t n = strlen(out_path);
  if (n > 3 && !strcmp(out_path + n - 3, ".so")) n -= 3;
  if (snprintf(dir, size, "%.*s.tokenizer", (int)n, out_path) >= (int)size)
    return sc_fail(err, SC_EUSAGE, "%s: too long to name the tokenizer directory beside it", out_path);
  struct stat st;
  if (mkdir(dir, 0755) && !(errno == EEXIST && !lstat(dir, &st) && S_ISDIR(st.st_mode)))
    return sc_fail(err, SC_EINPUT, "%s: cannot make the tokenizer directory (%s; a directory is expected "
                   "there, not a file or a link)", dir, errno == EEXIST ? "something else is there" : strerror(errno));
  return SC_OK;
}

int tok_install_spm(const char *model_dir, const char *name, const char *out_path, int quiet, sc_error *err) {
  char src[PATH_MAX], dir[PATH_MAX];
  if (!name[0] || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
    return sc_fail(err, SC_EINPUT, "%s: tokenizer_name '%s' must name a file of the directory", model_dir, name);
  if (snprintf(src, sizeof src, "%s/%s", model_dir, name) >= (int)sizeof src)
    return sc_fail(err, SC_EUSAGE, "%s: path too long", model_dir);
  if (access(src, F_OK)) {
    size_t n = strlen(out_path); /* absent now: no stale copy from an earlier build */
    if (n > 3 && !strcmp(out_path + n - 3, ".so")) n -= 3;
    if (snprintf(dir, sizeof dir, "%.*s.tokenizer/%s", (int)n, out_path, name) < (int)sizeof dir) unlink(dir);
    if (!quiet)
      fprintf(stderr, "speechc: note: %s (tokenizer_name) is not there: the text (speechc moshi --text-out) will "
              "need --tokenizer FILE\n", src);
    return SC_OK;
  }
  char *data = NULL;
  size_t len = 0;
  sc_spm *t = NULL;
  int rc = sc_read_regular(src, "a SentencePiece .model file", SC_SPM_FILE_MAX, &data, &len, err);
  /* only a model that loads is installed: a broken one fails the build */
  if (!rc) rc = sc_spm_load_mem(data, len, src, &t, err);
  sc_spm_free(t);
  if (!rc) rc = tok_make_dir(out_path, dir, sizeof dir, err);
  if (!rc) rc = install_file(dir, name, data, len, err);
  free(data);
  if (!rc && !quiet) fprintf(stderr, "speechc: SentencePiece model copied to %s/%s\n", dir, name);
  return rc;
}

int tok_install(const char *model_dir, const char *out_path, int quiet, sc_error *err) {
  char src[PATH_MAX], dir[PATH_MAX];
  int have = 0;
  static const char *const main_files[] = {"vocab.json", "tokenizer.json"};
  for (int i = 0; i < 2; i++) {
    snprintf(src, sizeof src, "%s/%s", model_dir, main_files[i]);
    if (!access(src, F_OK)) have = 1;
  }
  if (!have) return SC_OK;
  /* only a tokenizer that loads is installed: a broken one fails the build */
  tok_tokenizer *t = NULL;
  if (tok_load(model_dir, &t, err)) return err->code;
  tok_free(t);
  if (tok_make_dir(out_path, dir, sizeof dir, err)) return err->code;
  for (size_t i = 0; i < sizeof tok_files / sizeof *tok_files; i++) {
    char *data = NULL;
    size_t len = 0;
    snprintf(src, sizeof src, "%s/%s", model_dir, tok_files[i]);
    if (access(src, F_OK)) { /* absent now: no stale copy from an earlier build */
      char stale[PATH_MAX + 32];
      snprintf(stale, sizeof stale, "%s/%s", dir, tok_files[i]);
      unlink(stale);
      continue;
    }
    if (sc_read_regular(src, "a tokenizer file", TOK_FILE_MAX, &data, &len, err)) return err->code;
    int rc = install_file(dir, tok_files[i], data, len, err);
    free(data);
    if (rc) return rc;
  }
  if (!quiet) fprintf(stderr, "speechc: tokenizer files copied to %s\n", dir);
  return SC_OK;
}
