/*
 * spm.h — SentencePiece detokenization: Moshi's inner-monologue text tokens
 * (its checkpoint's tokenizer_name, a SentencePiece .model file) to text.
 *
 * A C API over the sentencepiece library (runtime/spm.cc; Debian's
 * libsentencepiece-dev), so that the ids decode exactly as the package's
 * SentencePieceProcessor.DecodeIds does: the U+2581 word marker becomes a
 * space and the first piece's leading one is dropped (when the model adds a
 * dummy prefix), byte-fallback pieces <0xNN> are joined into UTF-8 with
 * each invalid byte replaced by U+FFFD, control pieces decode to nothing
 * and the unknown piece to " \u2047 ".  tests/unit/test_spm.c holds it to
 * the package's DecodeIds on the fixtures of tests/parity/make_spm.py.
 *
 * A loaded model is immutable: any number of threads may decode with it at
 * once.  Errors follow speechc.h: an SC_* code and a message that starts
 * with the file's path (or the ids' position).
 */
#ifndef SC_SPM_H
#define SC_SPM_H

#include <stddef.h>
#include <stdint.h>

#include "speechc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sc_spm sc_spm;

/* The cap on a .model file (a 32k-piece model is under 1 MB). */
#define SC_SPM_FILE_MAX ((uint64_t)64 << 20)

/* Load the .model file at path (a regular file under SC_SPM_FILE_MAX).
 * SC_EINPUT when it is missing or not a SentencePiece model; *out owns
 * everything (sc_spm_free). */
int sc_spm_load(const char *path, sc_spm **out, sc_error *err);
/* The same from the file's bytes; name is the path the messages give. */
int sc_spm_load_mem(const void *data, size_t size, const char *name, sc_spm **out, sc_error *err);
void sc_spm_free(sc_spm *t);

/* The number of pieces: ids lie in [0, sc_spm_size). */
int sc_spm_size(const sc_spm *t);
/* 1 for a byte-fallback piece <0xNN> (its text may be half a character). */
int sc_spm_is_byte(const sc_spm *t, int32_t id);

/* DecodeIds of ids[0, n): *text is malloc'd and NUL-terminated, *len bytes
 * before the NUL (valid UTF-8; it may hold U+0000 from the piece <0x00>).
 * An id outside [0, sc_spm_size) is SC_EUSAGE, naming it and its index. */
int sc_spm_decode(const sc_spm *t, const int32_t *ids, size_t n, char **text, size_t *len, sc_error *err);

#ifdef __cplusplus
}
#endif
#endif
