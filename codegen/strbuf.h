/*
 * strbuf.h — a growable string with printf-style appends and a sticky
 * error flag checked once at the end (out of memory).
 */
#ifndef SC_STRBUF_H
#define SC_STRBUF_H
#include <stddef.h>

typedef struct StrBuf {
  char *s;
  size_t len, cap;
  int failed;
} StrBuf;

void sb_init(StrBuf *b);
void sb_free(StrBuf *b);
void sb_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_puts(StrBuf *b, const char *s);
/* Append s as the body of a C string literal (escaped, no quotes): the
 * only way outside text enters generated code. */
void sb_cstring(StrBuf *b, const char *s);
/* The same with the quotes: a complete C string literal. */
void sb_cquote(StrBuf *b, const char *s);
/* Append s for use inside a C comment (no "*\/", printable ASCII only). */
void sb_comment(StrBuf *b, const char *s);

#endif
