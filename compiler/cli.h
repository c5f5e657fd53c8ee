/*
 * cli.h — argument helpers shared by the speechc subcommands (main.c,
 * cmd_*.c).  Each prints its own message naming the flag and the accepted
 * values, and returns an SC_* code (SC_EUSAGE for bad arguments).
 */
#ifndef SC_CLI_H
#define SC_CLI_H
#include <stdint.h>

#include "speechc.h"

/* "speechc: <fmt with arg>" then the usage text; returns SC_EUSAGE. */
int usage_error(const char *usage, const char *fmt, const char *arg);
int parse_int(const char *flag, const char *s, long lo, long hi, long *out);
int parse_float(const char *flag, const char *s, double lo, double hi, double *out);
/* The value of "--flag value" or "--flag=value" at argv[*i] (advancing *i),
 * or NULL when absent. */
const char *flag_value(int argc, char **argv, int *i, const char *flag);
int is_flag(const char *arg, const char *flag);
/* Print "speechc: error: <msg>" when rc != 0; returns rc. */
int report(int rc, const sc_error *err);
/* The artifact m (opened from path) must be of `family` ("llm" for run and
 * bench, "qwen3_tts" for tts); otherwise an SC_EUSAGE error naming its
 * family and the command that drives it. */
int check_family(const sc_model *m, const char *path, const char *family, sc_error *err);
/* Comma-separated integers; *out is malloc'ed. */
int parse_ids(const char *flag, const char *s, int32_t **out, int *n);

#endif
