/*
 * checksum.h — the weight file checksum: four 64-bit multiply-rotate lanes
 * over 32-byte blocks, fast enough to verify a 1.5 GB file at open.  Data is
 * fed in pieces whose sizes are multiples of 32 bytes (the weight file pads
 * every tensor to 64), so the writer can hash as it streams.
 */
#ifndef SC_CHECKSUM_H
#define SC_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>

typedef struct sc_hash {
  uint64_t lane[4];
  uint64_t len;
} sc_hash;

void sc_hash_init(sc_hash *h);
void sc_hash_update(sc_hash *h, const void *data, size_t n); /* n % 32 == 0 */
uint64_t sc_hash_final(const sc_hash *h);
uint64_t sc_checksum64(const void *data, size_t n);          /* n % 32 == 0 */
/* FNV-1a of a string, for config hashes. */
uint64_t sc_fnv1a(const void *data, size_t n);

#endif
