/*
 * fuzz_safetensors.c — the safetensors parser (compiler/safetensors.c) on
 * arbitrary files.
 *
 * The input is the whole file: it is written to one memfd, reused across
 * runs, and opened through /proc/self/fd/N, so st_open runs exactly as on a
 * checkpoint (open, fstat, mmap) without touching the disk.  An accepted
 * file must keep safetensors.h's promise — every tensor's bytes lie inside
 * the mapping, nbytes = numel * dtype size, no two non-empty tensors
 * overlap, every name is free of control characters (a "\u0000" must
 * not cut a name short: issue 12) — and every byte of every tensor is
 * read (floats through st_read_f32), so ASan sees any pointer that
 * escapes.  A refused file must
 * be refused with SC_EINPUT and a message that starts with its path.
 */
#include "fuzz_util.h"

#include <sys/mman.h>

#include "safetensors.h"

static int memfd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  memfd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
  if (memfd < 0) {
    perror("memfd_create");
    abort();
  }
  snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
  return 0;
}

static void check_tensors(const StFile *f) {
  float buf[256];
  for (int i = 0; i < f->n_tensors; i++) {
    const StTensor *t = &f->tensors[i];
    FUZZ_CHECK(t->name && t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "tensor %d", i);
    for (const unsigned char *c = (const unsigned char *)t->name; *c; c++)
      FUZZ_CHECK(*c >= 0x20 && *c != 0x7f, "tensor %d: a control character 0x%02x in its name", i, *c);
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
      FUZZ_CHECK(t->shape[d] >= 0, "'%s': shape[%d] = %lld", t->name, d, (long long)t->shape[d]);
      numel *= t->shape[d]; /* bounded: nbytes <= file size was checked */
    }
    FUZZ_CHECK(numel == t->numel, "'%s': numel %lld, shape says %lld", t->name,
               (long long)t->numel, (long long)numel);
    FUZZ_CHECK(t->nbytes == (uint64_t)numel * st_dtype_size(t->dtype), "'%s': nbytes", t->name);
    FUZZ_CHECK(t->data >= f->map && t->data + t->nbytes <= f->map + f->size,
               "'%s': data outside the mapping", t->name);
    for (int j = 0; j < f->n_tensors && f->n_tensors <= 512; j++) { /* quadratic */
      const StTensor *u = &f->tensors[j];
      if (j == i || !t->nbytes || !u->nbytes) continue;
      FUZZ_CHECK(t->data + t->nbytes <= u->data || u->data + u->nbytes <= t->data,
                 "'%s' and '%s' overlap", t->name, u->name);
      FUZZ_CHECK(strcmp(t->name, u->name) != 0, "'%s' twice", t->name);
    }
    /* read everything: volatile so that the loads are not optimised away */
    volatile unsigned char sink = 0;
    for (uint64_t b = 0; b < t->nbytes; b++) sink ^= t->data[b];
    (void)sink;
    if (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16)
      for (int64_t e = 0; e < t->numel; e += 256)
        st_read_f32(t, e, t->numel - e < 256 ? t->numel - e : 256, buf);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (memfd < 0) LLVMFuzzerInitialize(NULL, NULL);
  if (ftruncate(memfd, 0) || (size && pwrite(memfd, data, size, 0) != (ssize_t)size)) {
    perror("memfd write");
    abort();
  }
  StFile f;
  sc_error err = {0};
  int rc = st_open(&f, path, &err);
  if (rc) {
    FUZZ_CHECK(rc == SC_EINPUT && err.code == SC_EINPUT, "rc %d: %s", rc, err.msg);
    FUZZ_CHECK(!strncmp(err.msg, path, strlen(path)), "message lacks the path: %s", err.msg);
    FUZZ_CHECK(f.map == NULL && f.tensors == NULL, "a refused file left state behind");
    return 0;
  }
  FUZZ_CHECK(f.size == size, "size %zu, file has %zu", f.size, size);
  /* an accepted header has no "\u0000" escape (an odd number of
   * backslashes before "u0000"): it would have cut a string short */
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | data[i];
  for (uint64_t i = 8; i + 6 <= 8 + hlen; i++) {
    if (memcmp(data + i, "\\u0000", 6)) continue;
    uint64_t k = i;
    while (k > 8 && data[k - 1] == '\\') k--;
    FUZZ_CHECK((i - k) % 2 == 1, "accepted a header with \\u0000 at byte %llu", (unsigned long long)i);
  }
  check_tensors(&f);
  st_close(&f);
  return 0;
}
