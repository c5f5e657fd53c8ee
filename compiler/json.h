/*
 * json.h — reading a checkpoint's JSON the way Hugging Face does.
 *
 * transformers reads config.json and the safetensors index with Python's
 * json module, and safetensors parses its header with serde_json.  cJSON
 * differs from both in three ways that change what a file means:
 *   - a repeated key: Python keeps the last value (at the first key's
 *     place), cJSON's lookups find the first;
 *   - \u0000 in a string: Python keeps a NUL character, cJSON's C string
 *     ends there ("rope_theta\u0000" became a second "rope_theta", and
 *     "model.norm.weight\u0000evil" became model.norm.weight);
 *   - raw control characters in strings and invalid UTF-8: Python and
 *     serde refuse them, cJSON takes them; and it skips NUL and other
 *     control bytes between tokens as if they were spaces.
 * json_check_text refuses the last two before cJSON sees the text, and
 * json_last_wins applies Python's rule to the parsed tree.
 */
#ifndef SC_JSON_H
#define SC_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "speechc.h"

/* The length (1-4) of the valid UTF-8 character at s[0, n), n >= 1, or 0
 * (a stray or cut sequence, an overlong form, a surrogate, past
 * U+10FFFF). */
size_t json_utf8_len(const unsigned char *s, size_t n);

/* text[0, len) must be UTF-8 without control characters (but for JSON's
 * whitespace outside strings), without \u0000 escapes and without escapes
 * JSON does not have (a backslash before anything but " \ / b f n r t u).  Errors
 * (SC_EINPUT) start with path and give the line; a NUL is reported with
 * the string it is in, as written in the file (key_noun names a key:
 * "key", "tensor name"). */
int json_check_text(const char *text, size_t len, const char *path, const char *key_noun,
                    sc_error *err);

/* In every object of j (recursively), keep only the last of each repeated
 * key, at the position of the first: what Python's json.load gives.
 * SC_ERUNTIME on out of memory (then j is unchanged or partly merged, and
 * still a valid tree). */
int json_last_wins(cJSON *j, sc_error *err);

/* Read the JSON file path (a regular file of at most max_bytes) and parse
 * it as Python's json would: json_check_text, no trailing garbage
 * (errors give the line), json_last_wins.  A missing file is "PATH: not
 * found (MISSING_HINT)".  Ownership of *text and *json passes to the
 * caller. */
int json_read_file(const char *path, uint64_t max_bytes, const char *missing_hint,
                   char **text, cJSON **json, sc_error *err);

#endif
