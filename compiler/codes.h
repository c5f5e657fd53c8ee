/*
 * codes.h — reading codec codes: the input of `speechc decode codec.so
 * CODES -o out.wav`.
 *
 * Two formats, both what `speechc tts -o` writes:
 *   JSON  [[c0, ..., c15], ...]  one array per frame; or the object
 *         {"frames": N, "codebooks": G, "codes": [[...], ...]} where
 *         "frames" and "codebooks" are optional but must agree with "codes"
 *         when present, and other keys are ignored.  Read as Python's json
 *         would (json.h: UTF-8 only, no NUL, a repeated key's last value).
 *         Every code must be an integer (1.0 and 1e2 are, 1.5 is not).
 *   raw   little-endian int32 [frames, G], frame-major, no header (.bin,
 *         .i32; tests/data/codec/<name>/codes.i32).
 * The format comes from the name (".json" -> JSON; ".bin", ".i32", ".raw"
 * -> raw) or, for other names and stdin ("-"), from the first byte that is
 * not whitespace: '[' or '{' is JSON, anything else is refused (raw data
 * needs one of the raw names).
 *
 * Checks: at least one frame; exactly G codes per frame (G = the model's
 * number of quantizers, 16 for the published models); every code in
 * [0, vocab) (the codebook size).  Negative codes are refused: qwen-tts pads
 * batches with -1 and its decode clamps them to code 0, which is not a
 * meaningful frame.  Sizes: a JSON file of at most CODES_JSON_MAX bytes
 * (~1.8 hours of 16-code frames as `speechc tts` writes them; cJSON builds a
 * tree of ~80 bytes per value, so a hostile file of that size costs at most
 * ~350 MB) and at most max_frames frames; raw files are limited only by
 * max_frames.  Errors are SC_EINPUT and start with the path (or "stdin"),
 * naming frame and codebook, both counted from 0:
 * "codes.json: frame 3 has 15 codes, expected 16 (one per codebook)".
 */
#ifndef SC_CODES_H
#define SC_CODES_H

#include <stddef.h>
#include <stdint.h>

#include "speechc.h"

#define CODES_JSON_MAX ((size_t)8 << 20)
#define CODES_MAX_FRAMES (1 << 20) /* 23.3 hours at 12.5 frames/s */
#define CODES_MAX_CODEBOOKS 1024

typedef enum CodesFormat {
  CODES_AUTO = 0, /* from the name, else the first byte */
  CODES_JSON,
  CODES_RAW,      /* little-endian int32 */
} CodesFormat;

/* Out-of-range fields (negative, codebooks > CODES_MAX_CODEBOOKS, vocab >
 * 2^31) are SC_EUSAGE. */
typedef struct CodesSpec {
  int codebooks;  /* codes per frame; 0: 16 */
  int64_t vocab;  /* codes lie in [0, vocab); 0: [0, INT32_MAX] */
  int max_frames; /* 0: CODES_MAX_FRAMES */
} CodesSpec;

typedef struct Codes {
  int32_t *codes; /* [frames, codebooks], frame-major; malloc'd, owned */
  int frames, codebooks;
} Codes;

/* The format a name implies (CODES_AUTO when it implies none). */
CodesFormat codes_format_of(const char *name);

/* Parse data[0, len) (need not be NUL-terminated); name is for messages.
 * spec may be NULL (16 codebooks, any non-negative int32, CODES_MAX_FRAMES).
 * On success *out owns the codes; on failure it is zeroed. */
int codes_parse(const void *data, size_t len, CodesFormat fmt, const CodesSpec *spec,
                const char *name, Codes *out, sc_error *err);

/* Read path ("-": stdin, which may be a pipe; any other path must be a
 * regular file) and codes_parse it. */
int codes_read(const char *path, CodesFormat fmt, const CodesSpec *spec, Codes *out,
               sc_error *err);

void codes_free(Codes *c);

/* Write frames x codebooks codes to path ("-": stdout): raw little-endian
 * int32 when codes_format_of(path) is CODES_RAW (.bin, .i32, .raw, any
 * case), else the JSON object
 * {"frames": N, "codebooks": G, "codes": [[...], ...]} that codes_read
 * reads back (speechc tts -o codes.json, speechc encode -o). */
int codes_write(const char *path, const int32_t *codes, int frames, int codebooks, sc_error *err);

#endif
