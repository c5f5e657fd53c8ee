/* error.c — sc_error filling, shared by the runtime and the compiler. */
#include <stdarg.h>
#include <stdio.h>

#include "speechc.h"

int sc_fail(sc_error *err, int code, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->code = code;
  }
  return code;
}
