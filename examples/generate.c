/*
 * generate.c — the smallest complete use of the speechc runtime:
 * open a compiled model, open a session, greedy-generate from token ids.
 *
 *   generate model.so 1 2 3
 */
#include <stdio.h>
#include <stdlib.h>

#include "speechc.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s model.so TOKEN_ID...\n", argv[0]);
    return 1;
  }
  int n_prompt = argc - 2;
  int32_t prompt[64], out[16];
  if (n_prompt > 64) n_prompt = 64;
  for (int i = 0; i < n_prompt; i++) prompt[i] = (int32_t)atoi(argv[i + 2]);

  sc_error err = {0};
  sc_model *model = NULL;
  sc_session *session = NULL;
  if (sc_model_open(argv[1], NULL, &model, &err) || sc_session_open(model, &session, &err)) {
    fprintf(stderr, "error: %s\n", err.msg);
    sc_model_close(model);
    return err.code;
  }
  sc_sample_params params = sc_sample_defaults();
  params.greedy = 1;
  int n_out = 0;
  if (sc_generate(session, prompt, n_prompt, 16, &params, -1, out, &n_out, NULL, NULL, &err)) {
    fprintf(stderr, "error: %s\n", err.msg);
  } else {
    for (int i = 0; i < n_out; i++) printf("%s%d", i ? " " : "", out[i]);
    printf("\n");
  }
  sc_session_close(session);
  sc_model_close(model);
  return err.code;
}
