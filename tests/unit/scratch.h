/* scratch.h — a test's scratch directory and the files it writes there
 * (test_loader.c, test_tokenizer.c).  The test fills root (mkdtemp) first. */
#ifndef SC_SCRATCH_H
#define SC_SCRATCH_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char root[64]; /* the mkdtemp directory */

/* root/name in a rotating static buffer: several may be live at once. */
static const char *P(const char *name) {
  static char bufs[8][512];
  static int next;
  char *b = bufs[next++ % 8];
  snprintf(b, sizeof bufs[0], "%s/%s", root, name);
  return b;
}

static void write_file(const char *path, const void *data, size_t len) {
  FILE *fp = fopen(path, "wb");
  if (!fp || fwrite(data, 1, len, fp) != len || fclose(fp) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(1);
  }
}

static void write_text(const char *path, const char *text) {
  write_file(path, text, strlen(text));
}
#endif
