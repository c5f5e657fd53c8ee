/* strbuf.c — see strbuf.h. */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_init(StrBuf *b) { memset(b, 0, sizeof *b); }

void sb_free(StrBuf *b) {
  free(b->s);
  memset(b, 0, sizeof *b);
}

static int reserve(StrBuf *b, size_t extra) {
  if (b->failed) return 0;
  if (b->len + extra + 1 <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + extra + 1) cap *= 2;
  char *s = realloc(b->s, cap);
  if (!s) {
    b->failed = 1;
    return 0;
  }
  b->s = s;
  b->cap = cap;
  return 1;
}

void sb_printf(StrBuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || !reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void sb_puts(StrBuf *b, const char *s) {
  size_t n = strlen(s);
  if (!reserve(b, n)) return;
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}

/* The one way a string from outside (a file name, a tensor name, config
 * text) enters generated code: every byte outside printable ASCII as a
 * three-digit octal escape (so a following digit never extends it), and
 * '?' too (no trigraphs, whatever the compiler's dialect). */
void sb_cstring(StrBuf *b, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') sb_printf(b, "\\%c", c);
    else if (c == '\n') sb_puts(b, "\\n");
    else if (c < 32 || c >= 127 || c == '?') sb_printf(b, "\\%03o", c);
    else sb_printf(b, "%c", c);
  }
}

void sb_cquote(StrBuf *b, const char *s) {
  sb_puts(b, "\"");
  sb_cstring(b, s);
  sb_puts(b, "\"");
}

/* Text inside a C comment: printable ASCII, except that "*\/" is broken
 * up; other bytes become '?'. */
void sb_comment(StrBuf *b, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '*' && s[1] == '/') sb_puts(b, "* ");
    else if (c < 32 || c >= 127) sb_puts(b, "?");
    else sb_printf(b, "%c", c);
  }
}
