/* check.h — the tiny assertion kit of the unit tests.  A failed CHECK
 * prints file:line and the expression and makes the test exit non-zero. */
#ifndef SC_CHECK_H
#define SC_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;
#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      check_failures++;                                                     \
    }                                                                       \
  } while (0)
#define CHECK_MSG(cond, ...)                                                \
  do {                                                                      \
    if (!(cond)) {                                                          \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                         \
      fputc('\n', stderr);                                                  \
      check_failures++;                                                     \
    }                                                                       \
  } while (0)
/* err.msg must contain every given substring */
#define CHECK_CONTAINS(hay, needle) \
  CHECK_MSG(strstr((hay), (needle)) != NULL, "'%s' lacks '%s'", (hay), (needle))
#define CHECK_DONE()                                                        \
  do {                                                                      \
    if (check_failures) {                                                   \
      fprintf(stderr, "%d check(s) failed\n", check_failures);              \
      return 1;                                                             \
    }                                                                       \
    printf("ok\n");                                                         \
    return 0;                                                               \
  } while (0)
#endif
