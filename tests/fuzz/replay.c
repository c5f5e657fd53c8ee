/*
 * replay.c — a main() for a fuzz target without libFuzzer: feed it every
 * file named on the command line (directories: every regular file in them,
 * in name order), once each, like `fuzz_TARGET FILE...` does.  The regular
 * build links each target with this, and ctest replays
 * tests/fuzz/regress/<target>/ with it, so an input that once crashed keeps
 * being run by CI on machines without clang or libFuzzer (and under ASan by
 * scripts/sanitize.sh).  A crash or a FUZZ_CHECK abort fails the test.
 */
#include "fuzz_util.h"

#include <dirent.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path) {
  size_t n = 0;
  unsigned char *data = fuzz_slurp(path, &n);
  if (!data) {
    fprintf(stderr, "replay: %s: cannot read\n", path);
    return 1;
  }
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
  LLVMFuzzerTestOneInput(data, n);
  free(data);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int bad = 0, runs = 0;
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) != 0) {
      fprintf(stderr, "replay: %s: not found\n", argv[i]);
      bad++;
    } else if (S_ISDIR(sb.st_mode)) {
      struct dirent **list;
      int n = scandir(argv[i], &list, NULL, by_name);
      for (int k = 0; k < n; k++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", argv[i], list[k]->d_name);
        if (list[k]->d_name[0] != '.' && stat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
          bad += run_file(p);
          runs++;
        }
        free(list[k]);
      }
      if (n >= 0) free(list);
    } else {
      bad += run_file(argv[i]);
      runs++;
    }
  }
  printf("replayed %d input(s)%s\n", runs, bad ? ", some unreadable" : "");
  return bad || runs == 0;
}
