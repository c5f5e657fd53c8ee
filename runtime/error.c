/* error.c — sc_error filling, shared by the runtime and the compiler. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "speechc.h"

#define KEEP_MIN 48 /* a shortened word keeps at least this many characters */

/* Shorten s (len characters) in place until it fits cap - 1: each round
 * cuts the middle of the longest word (a run without spaces: in practice a
 * path) to "head...tail".  Messages put the path first and the reason
 * after it, so a long path would otherwise push the reason off the end of
 * the fixed-size buffer.  Returns the new length; leaves words of KEEP_MIN
 * or fewer characters alone (the caller then cuts the end). */
static size_t elide(char *s, size_t len, size_t cap) {
  while (len >= cap) {
    size_t best = 0, best_len = 0;
    for (size_t i = 0; i < len;) {
      size_t j = i;
      while (j < len && s[j] != ' ') j++;
      if (j - i > best_len) best = i, best_len = j - i;
      i = j + 1;
    }
    if (best_len <= KEEP_MIN + 3) break; /* no gain from cutting it */
    size_t excess = len - (cap - 1);
    size_t keep = best_len > excess + 3 + KEEP_MIN ? best_len - excess - 3 : KEEP_MIN;
    size_t head = keep / 2, tail = keep - head;
    /* s[best, best+head) "..." s[best+best_len-tail, ...) */
    char *dst = s + best + head;
    memcpy(dst, "...", 3);
    memmove(dst + 3, s + best + best_len - tail, len - (best + best_len - tail) + 1);
    len = len - best_len + keep + 3;
  }
  return len;
}

/* The message is formatted aside and then copied in, so an argument may
 * be err->msg itself ("%s: %s", what, err->msg wraps a callee's reason). */
int sc_fail(sc_error *err, int code, const char *fmt, ...) {
  if (err) {
    char msg[sizeof err->msg];
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    if (n < 0) msg[0] = '\0'; /* an encoding error: no message */
    va_end(ap);
    char *full = n >= (int)sizeof msg ? malloc((size_t)n + 1) : NULL;
    if (full) {
      vsnprintf(full, (size_t)n + 1, fmt, ap2);
      size_t len = elide(full, (size_t)n, sizeof msg);
      if (len >= sizeof msg) len = sizeof msg - 1;
      memcpy(msg, full, len);
      msg[len] = '\0';
      free(full);
    }
    va_end(ap2);
    memcpy(err->msg, msg, sizeof msg);
    err->code = code;
  }
  return code;
}
