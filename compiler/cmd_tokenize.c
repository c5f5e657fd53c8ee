/*
 * cmd_tokenize.c — `speechc tokenize DIR "text"`: the ids the Qwen
 * tokenizer in DIR gives a text (compiler/tokenizer.c), or with --decode
 * the text of ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "file.h"
#include "speechc.h"
#include "tokenizer.h"

int cmd_tokenize(int argc, char **argv);
extern const char *const usage_tokenize;

const char *const usage_tokenize =
    "usage: speechc tokenize DIR|model.so \"text\"\n"
    "       speechc tokenize DIR|model.so --file TEXT_FILE\n"
    "       speechc tokenize DIR|model.so --decode 1,2,3\n"
    "\n"
    "Prints the token ids (comma-separated) that the byte-level BPE tokenizer in DIR\n"
    "gives the text, as HF tokenizers does for Qwen2/Qwen3: added tokens such as\n"
    "<|im_start|> first, then NFC, the Qwen2 pre-tokenizer split, BPE.  DIR holds\n"
    "vocab.json + merges.txt (+ tokenizer_config.json for the added tokens), or\n"
    "tokenizer.json; or a built model.so, whose model.tokenizer/ speechc build copied\n"
    "from the checkpoint.  The text must be UTF-8; no special tokens are added.\n"
    "\n"
    "  --                     the next argument is the text even if it starts with '-'\n"
    "  --file PATH            tokenize the contents of PATH instead of an argument\n"
    "  --decode IDS           print the text of comma-separated ids (added tokens\n"
    "                         as their text)\n";

int cmd_tokenize(int argc, char **argv) {
  const char *dir = NULL, *text = NULL, *file = NULL, *decode = NULL, *v;
  int opts = 1;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (opts && !strcmp(a, "--")) { opts = 0; continue; }
    if (!opts) {
      if (!dir) dir = a;
      else if (!text) text = a;
      else return usage_error(usage_tokenize, "unexpected argument '%s'", a);
      continue;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_tokenize, stdout); return 0; }
    if ((v = flag_value(argc, argv, &i, "--decode"))) decode = v;
    else if ((v = flag_value(argc, argv, &i, "--file"))) file = v;
    else if (is_flag(a, "--decode") || is_flag(a, "--file"))
      return usage_error(usage_tokenize, "%s needs a value", a);
    else if (a[0] == '-' && a[1])
      return usage_error(usage_tokenize, "unknown option '%s'", a);
    else if (!dir) dir = a;
    else if (!text) text = a;
    else return usage_error(usage_tokenize, "unexpected argument '%s'", a);
  }
  if (!dir) return usage_error(usage_tokenize, "%s", "missing DIR");
  if ((text != NULL) + (file != NULL) + (decode != NULL) != 1)
    return usage_error(usage_tokenize, "%s", "give exactly one of \"text\", --file, --decode");
  sc_error err = {0};
  tok_tokenizer *t;
  char tdir[4096];
  if (tok_dir_of(dir, tdir, sizeof tdir)) return usage_error(usage_tokenize, "%s", "DIR: path too long");
  if (tok_load(tdir, &t, &err)) return report(err.code, &err);
  int rc = SC_OK;
  if (decode) {
    int32_t *ids;
    int n;
    if ((rc = parse_ids("--decode", decode, &ids, &n))) {
      tok_free(t);
      return rc;
    }
    char *s;
    size_t len;
    rc = tok_decode(t, ids, (size_t)n, &s, &len, &err);
    if (!rc) {
      fwrite(s, 1, len, stdout);
      fputc('\n', stdout);
      free(s);
    }
    free(ids);
  } else {
    char *buf = NULL;
    size_t len = text ? strlen(text) : 0;
    if (file) rc = sc_read_regular(file, "a regular text file", TOK_FILE_MAX, &buf, &len, &err);
    int32_t *ids = NULL;
    size_t n = 0;
    if (!rc) rc = tok_encode(t, file ? buf : text, len, file ? file : "text", &ids, &n, &err);
    for (size_t i = 0; !rc && i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    if (!rc) fputc('\n', stdout);
    free(ids);
    free(buf);
  }
  tok_free(t);
  if (!rc && (fflush(stdout) || ferror(stdout)))
    rc = sc_fail(&err, SC_ERUNTIME, "stdout: write failed");
  return report(rc, &err);
}
