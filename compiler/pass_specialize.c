/*
 * pass_specialize.c — bind the token dimension.
 *
 * Every dimension but T is a config constant from the frontend.  A graph
 * whose calls carry exactly one token (decode) gets T = 1 everywhere, so
 * its generated code has no token loop bounds left to read at run time.
 */
#include "passes.h"

void pass_specialize(Module *m) {
  for (int gi = 0; gi < m->n_graphs; gi++) {
    Graph *g = &m->graphs[gi];
    if (g->max_tokens != 1) continue;
    for (int i = 0; i < g->n_nodes; i++)
      if (g->nodes[i].rows == IR_T) g->nodes[i].rows = 1;
  }
}
