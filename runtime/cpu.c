/*
 * cpu.c — CPU feature queries by name (cpu.h).
 *
 * __builtin_cpu_supports takes literals only, hence the table; and clang
 * before 16 does not know "f16c", so that one bit is read with cpuid
 * (leaf 1, ecx bit 29), requiring AVX too: F16C's instructions use the
 * ymm state that the OS must have enabled, which the builtin's "avx" checks.
 */
#include <string.h>

#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static int has_f16c(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  return (c >> 29 & 1) && __builtin_cpu_supports("avx");
}

int sc_cpu_has(const char *f) {
  __builtin_cpu_init();
  if (!strcmp(f, "sse4.2")) return __builtin_cpu_supports("sse4.2") != 0;
  if (!strcmp(f, "avx")) return __builtin_cpu_supports("avx") != 0;
  if (!strcmp(f, "avx2")) return __builtin_cpu_supports("avx2") != 0;
  if (!strcmp(f, "fma")) return __builtin_cpu_supports("fma") != 0;
  if (!strcmp(f, "f16c")) return has_f16c();
  if (!strcmp(f, "avx512f")) return __builtin_cpu_supports("avx512f") != 0;
  if (!strcmp(f, "avx512bw")) return __builtin_cpu_supports("avx512bw") != 0;
  if (!strcmp(f, "avx512vl")) return __builtin_cpu_supports("avx512vl") != 0;
  if (!strcmp(f, "avx512vnni")) return __builtin_cpu_supports("avx512vnni") != 0;
  return -1;
}

/* cpuid's vendor string, "" if cpuid has no leaf 0. */
static void cpu_vendor(char vendor[13]) {
  unsigned a, b, c, d;
  vendor[0] = '\0';
  if (!__get_cpuid(0, &a, &b, &c, &d)) return;
  memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4), vendor[12] = '\0';
}

int sc_cpu_intel(void) {
  char vendor[13];
  cpu_vendor(vendor);
  return !strcmp(vendor, "GenuineIntel");
}

int sc_cpu_avx512_split(void) {
  unsigned a, b, c, d;
  char vendor[13];
  cpu_vendor(vendor);
  if (strcmp(vendor, "AuthenticAMD") || !__get_cpuid(1, &a, &b, &c, &d)) return 0;
  const unsigned family = (a >> 8 & 0xf) == 0xf ? 0xf + (a >> 20 & 0xff) : a >> 8 & 0xf;
  return family == 0x19 && sc_cpu_has("avx512f") > 0; /* Zen 3 (19h too) has no AVX-512 */
}
#else
int sc_cpu_has(const char *f) {
  static const char known[] = "," SC_CPU_KNOWN ",";
  char key[32];
  if (strlen(f) + 3 > sizeof key) return -1;
  strcpy(key, ",");
  strcat(key, f);
  strcat(key, ",");
  return strstr(known, key) ? 0 : -1;
}

int sc_cpu_avx512_split(void) { return 0; }
int sc_cpu_intel(void) { return 0; }
#endif
