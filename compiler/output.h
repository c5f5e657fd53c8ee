/*
 * output.h — the two files a build writes: -o OUT.so and, beside it, the
 * weight file OUT.<id>.weights that OUT.so names.  See output.c for the
 * rules (what -o may replace, temporaries, installation order, signals).
 *
 *   out_open -> out_weights -> out_weight_name -> out_scratch -> out_install
 *            -> out_close
 */
#ifndef SC_OUTPUT_H
#define SC_OUTPUT_H
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "checkpoint.h"

typedef struct OutPair {
  const char *path;            /* -o as given (borrowed) */
  char prefix[PATH_MAX];       /* -o up to and including its last '/' ("" for none) */
  char base[NAME_MAX + 1];     /* -o's file name */
  char stem[NAME_MAX + 1];     /* base without ".so" */
  char wname[NAME_MAX + 32];   /* the weight file's name: "<stem>.<id>.weights" */
  int dirfd;                   /* the output directory, open; -1 when not */
  /* Temporaries this build made and has not installed.  A name is set (with
   * the signals blocked) before its file exists and cleared once the file is
   * renamed or removed, so that out_close, or a signal, removes exactly them. */
  char wtmp[32];               /* the weight file being written, in the output directory */
  char sotmp[32];              /* the model, copied beside -o before its rename */
  char wnew[NAME_MAX + 32];    /* wname, installed ahead of the model it belongs to */
  char scratch[PATH_MAX];      /* private directory: sources and the compiler's model.so */
  char scratch_file[3][PATH_MAX + 16]; /* its files: model.c, sc_abi.h, model.so */
  volatile sig_atomic_t scratch_made;
  volatile pid_t compiler;     /* the system compiler's process group while it runs */
  int n_inputs;                /* the checkpoint's files, which no output may be */
  const char **input;          /* [n_inputs] paths (borrowed from the Checkpoint, or index) */
  char index[PATH_MAX];        /* the checkpoint's model.safetensors.index.json */
  dev_t *input_dev;            /* [n_inputs] */
  ino_t *input_ino;            /* [n_inputs] */
  int signals;                 /* SIGINT/SIGTERM/SIGHUP handlers installed */
} OutPair;

/* Check -o against the rules (exit codes: SC_EUSAGE for an empty -o,
 * SC_EINPUT for the rest), open its directory, and when `signals` is set
 * install handlers that remove the temporaries and die by the signal (the
 * CLI's one build per process).  c: the checkpoint, open; it must outlive
 * the pair.  On failure the pair is closed. */
int out_open(OutPair *p, const char *path, const Checkpoint *c, int signals, sc_error *err);
/* A new temporary weight file beside -o, open for writing.  *shown: its
 * path for messages (inside p). */
int out_weights(OutPair *p, FILE **f, const char **shown, sc_error *err);
/* The private directory for the generated sources and the compiler's
 * output ($TMPDIR, else /tmp); the compiler writes p->scratch_file[2]. */
int out_scratch(OutPair *p, sc_error *err);
/* The weight file's final name, "<stem>.<id>.weights" (id: a hash that
 * changes with its content, in 16 hex digits); kept in p->wname. */
const char *out_weight_name(OutPair *p, uint64_t id);
/* Move the pair into place: the weight file under p->wname, then the
 * model.  Older weight files of the same -o are removed after. */
int out_install(OutPair *p, sc_error *err);
/* Remove whatever was not installed, restore the signal handlers. */
void out_close(OutPair *p);

#endif
