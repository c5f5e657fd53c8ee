/*
 * safetensors.h — our own reader for the safetensors format.
 *
 * A file is: u64 little-endian N, N bytes of JSON header, then the data.
 * The header maps tensor name -> {dtype, shape, data_offsets [begin, end)}
 * relative to the start of the data; "__metadata__" is ignored.  Every
 * offset and shape is validated against the file size before use, offsets
 * must not overlap, and the data is mmapped read-only, never read whole.
 */
#ifndef SC_SAFETENSORS_H
#define SC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "speechc.h"

typedef enum StDtype {
  ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8,
  ST_BOOL, ST_DTYPE_COUNT
} StDtype;

#define ST_MAX_DIMS 8

typedef struct StTensor {
  const char *name;        /* owned by the StFile */
  StDtype dtype;
  int ndim;
  int64_t shape[ST_MAX_DIMS];
  int64_t numel;
  const uint8_t *data;     /* into the mapping */
  uint64_t nbytes;
  int file;                /* index of the file within a Checkpoint */
} StTensor;

typedef struct StFile {
  char *path;
  const uint8_t *map;      /* whole file, PROT_READ */
  size_t size;
  StTensor *tensors;
  int n_tensors;
  char *strings;           /* name storage */
} StFile;

/* Open and validate path.  On failure the StFile is left closed and err
 * names the file and the problem (code SC_EINPUT). */
int st_open(StFile *f, const char *path, sc_error *err);
void st_close(StFile *f);

const char *st_dtype_name(StDtype d);
size_t st_dtype_size(StDtype d);
/* Convert elements [first, first+n) of a float tensor (F32/F16/BF16) to f32. */
void st_read_f32(const StTensor *t, int64_t first, int64_t n, float *out);

#endif
