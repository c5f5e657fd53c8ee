/*
 * cg_dialect.c — printing kernel text through a dialect (cg_dialect.h):
 * each $word becomes the dialect's spelling of it.
 */
#include <stddef.h>
#include <string.h>

#include "cg_dialect.h"
#include "ir.h"

/* The words, by name ("shfl(": a word that takes its parenthesis). */
static const struct {
  const char *name;
  size_t field;
} words[] = {
    {"tid", offsetof(CgDialect, tid)},
    {"bid_x", offsetof(CgDialect, bid_x)},
    {"bid_y", offsetof(CgDialect, bid_y)},
    {"barrier", offsetof(CgDialect, barrier)},
    {"warp_barrier", offsetof(CgDialect, warp_barrier)},
    {"shared", offsetof(CgDialect, shared)},
    {"align16", offsetof(CgDialect, align16)},
    {"shfl(", offsetof(CgDialect, shfl)},
    {"ldg(", offsetof(CgDialect, ldg)},
    {"restrict", offsetof(CgDialect, restrict_)},
    {"expf", offsetof(CgDialect, expf)},
    {"sqrtf", offsetof(CgDialect, sqrtf)},
    {"logf", offsetof(CgDialect, logf)},
    {"fmaxf", offsetof(CgDialect, fmaxf)},
    {"erff", offsetof(CgDialect, erff)},
    {"dev", offsetof(CgDialect, dev)},
    {"tg", offsetof(CgDialect, tg)},
    {"i64", offsetof(CgDialect, i64)},
    {"ll", offsetof(CgDialect, ll)},
    {"shared16", offsetof(CgDialect, shared16)},
};

static const char *word(const CgDialect *d, const char *name, size_t len) {
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (strlen(words[i].name) == len && !memcmp(words[i].name, name, len))
      return *(const char *const *)((const char *)d + words[i].field);
  return NULL;
}

static int ident(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

void cg_dialect_expand(const CgDialect *d, StrBuf *o, const char *text, size_t len) {
  size_t i = 0;
  while (i < len) {
    const char *dollar = memchr(text + i, '$', len - i);
    size_t plain = dollar ? (size_t)(dollar - text) - i : len - i;
    if (plain) sb_printf(o, "%.*s", (int)plain, text + i);
    i += plain;
    if (!dollar) break;
    size_t n = 1;
    while (i + n < len && ident(text[i + n])) n++;
    const char *s = NULL;
    if (i + n < len && text[i + n] == '(' && (s = word(d, text + i + 1, n)) != NULL) n++;
    else s = word(d, text + i + 1, n - 1);
    IR_ASSERT(s != NULL && "an emitter used a $word the dialect does not have");
    sb_puts(o, s);
    i += n;
    /* a word spelled "" takes its space along: "const $dev float" is
     * "const float" in CUDA, "const device float" in Metal */
    if (!*s && i < len && text[i] == ' ') i++;
  }
}
