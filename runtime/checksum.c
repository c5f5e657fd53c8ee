/* checksum.c — see checksum.h. */
#include "checksum.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

void sc_hash_init(sc_hash *h) {
  h->lane[0] = P1 + P2;
  h->lane[1] = P2;
  h->lane[2] = 0;
  h->lane[3] = (uint64_t)0 - P1;
  h->len = 0;
}

void sc_hash_update(sc_hash *h, const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t a = h->lane[0], b = h->lane[1], c = h->lane[2], d = h->lane[3];
  for (size_t i = 0; i + 32 <= n; i += 32) {
    uint64_t w[4];
    memcpy(w, p + i, 32);
    a = rotl(a + w[0] * P2, 31) * P1;
    b = rotl(b + w[1] * P2, 31) * P1;
    c = rotl(c + w[2] * P2, 31) * P1;
    d = rotl(d + w[3] * P2, 31) * P1;
  }
  h->lane[0] = a, h->lane[1] = b, h->lane[2] = c, h->lane[3] = d;
  h->len += n;
}

uint64_t sc_hash_final(const sc_hash *h) {
  uint64_t x = rotl(h->lane[0], 1) + rotl(h->lane[1], 7) + rotl(h->lane[2], 12) +
               rotl(h->lane[3], 18) + h->len * P1;
  x ^= x >> 33;
  x *= P2;
  x ^= x >> 29;
  return x;
}

uint64_t sc_checksum64(const void *data, size_t n) {
  sc_hash h;
  sc_hash_init(&h);
  sc_hash_update(&h, data, n);
  return sc_hash_final(&h);
}

uint64_t sc_fnv1a(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
