/*
 * backend.c — the table of backends (backend.h), picked once per model by
 * the descriptor's target.
 */
#include <string.h>

#include "backend.h"

static const sc_backend_i *const backends[] = {&rt_backend_cpu, &rt_backend_cuda};

const sc_backend_i *rt_backend_for(const char *target) {
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
    if (target && !strcmp(backends[i]->target, target)) return backends[i];
  return NULL;
}
