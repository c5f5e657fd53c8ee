/*
 * tokenizer.h — the Qwen2/Qwen3 byte-level BPE tokenizer, as HF
 * `tokenizers` applies it: added (special) tokens matched first on the raw
 * text, then on each piece between them NFC normalization (utf8proc), the
 * Qwen2 pre-tokenizer split (PCRE2, UTF + UCP), GPT-2 byte-level mapping
 * and BPE merges by rank.
 *
 * Loaded from a directory holding vocab.json + merges.txt (+ the added
 * tokens of tokenizer_config.json's added_tokens_decoder, when present), or
 * tokenizer.json when the directory has no vocab.json.  Every file is a
 * regular file under a size cap; errors are SC_EINPUT and start with the
 * file's path (and the line, for merges.txt and JSON syntax).
 */
#ifndef SC_TOKENIZER_H
#define SC_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

#include "speechc.h"

typedef struct tok_tokenizer tok_tokenizer;

/* The cap on each tokenizer file: Qwen's tokenizer.json is about 7 MB. */
#define TOK_FILE_MAX ((uint64_t)64 << 20)

/* Load the tokenizer files of dir.  On success *out owns everything
 * (free with tok_free). */
int tok_load(const char *dir, tok_tokenizer **out, sc_error *err);
void tok_free(tok_tokenizer *t);

/* Number of ids (the largest id + 1, added tokens included). */
int tok_vocab_size(const tok_tokenizer *t);

/* Encode text[0, len): *ids is malloc'd (the caller frees it; NULL when
 * *n is 0).  Text that is not UTF-8 is refused (SC_EINPUT) with the byte
 * offset of the first bad sequence; `what` names the text in that message
 * ("text", a file name). */
int tok_encode(tok_tokenizer *t, const char *text, size_t len, const char *what, int32_t **ids,
               size_t *n, sc_error *err);

/* The bytes of ids[0, n) (added tokens as their text), malloc'd and
 * NUL-terminated in *text, *len bytes before the NUL.  An id outside the
 * vocabulary is SC_EUSAGE.  The bytes need not be UTF-8 (a cut in the
 * middle of a character). */
int tok_decode(const tok_tokenizer *t, const int32_t *ids, size_t n, char **text, size_t *len,
               sc_error *err);

/* NFC of valid UTF-8 text[0, len) into *out (malloc'd, NUL-terminated);
 * what tok_encode applies between added tokens. */
int tok_nfc(const char *text, size_t len, char **out, size_t *out_len, sc_error *err);

/* A built model carries its checkpoint's tokenizer beside it: `speechc
 * build` copies vocab.json, merges.txt, tokenizer_config.json and
 * tokenizer.json (those the checkpoint has, after checking that they load)
 * into OUT.tokenizer/ (X.so -> X.tokenizer).  Nothing when the checkpoint
 * has no tokenizer. */
int tok_install(const char *model_dir, const char *out_path, int quiet, sc_error *err);
/* Moshi's text tokenizer: `speechc build` of a Moshi checkpoint copies its
 * SentencePiece model, the file config.json's tokenizer_name names (the
 * package's default without the key), into OUT.tokenizer/ under that name,
 * after checking that it loads (runtime/spm.h; a broken one fails the
 * build).  A name that is not a plain file name is refused; a file that is
 * not there is a note on stderr (unless quiet), not an error: the LM runs
 * without it, and `speechc moshi --tokenizer FILE` can name it later. */
#define TOK_MOSHI_SPM_DEFAULT "tokenizer_spm_32k_3.model"
int tok_install_spm(const char *model_dir, const char *name, const char *out_path, int quiet, sc_error *err);
/* The tokenizer directory for path: a built model's X.tokenizer, or path
 * itself when it is not a regular file.  Non-zero when dir is too small. */
int tok_dir_of(const char *path, char *dir, size_t size);

#endif
