/*
 * isa_tables.h — run a kernel test on the table of every ISA this build
 * and CPU run (SC_KERNEL_ISAS, those sc_kern_ops_isa accepts), printing
 * "<what>: <isa>" before each (scripts/neon.sh greps those lines).  fn
 * gets the table, its context (freed after fn returns) and the ISA's
 * name; it must not use strtok.
 */
#ifndef SC_TEST_ISA_TABLES_H
#define SC_TEST_ISA_TABLES_H

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kernels.h"

static void each_isa_table(const char *what, void (*fn)(sc_kernels *K, sc_kernel_ctx *c, const char *isa)) {
  char all[] = SC_KERNEL_ISAS;
  for (char *n = strtok(all, ","); n; n = strtok(NULL, ",")) {
    if (!sc_kern_ops_isa(n)) continue;
    sc_kernel_ctx c = {0};
    sc_kernels K;
    CHECK(sc_kernels_init_isa(&K, &c, n) == 0);
    printf("%s: %s\n", what, n);
    fn(&K, &c, n);
    sc_kernel_ctx_free(&c);
  }
}

#endif
