/*
 * pass_specialize.c — bind the token dimension.
 *
 * Every dimension but T is a config constant from the frontend.  A graph
 * whose calls carry an exact token count (decode: 1; a code predictor's
 * two-position prefill: 2) gets that literal everywhere, so its generated
 * code has no token loop bounds left to read at run time.
 */
#include "passes.h"

void pass_specialize(Module *m) {
  for (int gi = 0; gi < m->n_graphs; gi++) {
    Graph *g = &m->graphs[gi];
    if (g->max_tokens != 1 && !g->exact) continue;
    g->exact = 1;
    for (int i = 0; i < g->n_nodes; i++)
      g->nodes[i].rows = ir_rows_eval(g->nodes[i].rows, g->max_tokens);
  }
}
