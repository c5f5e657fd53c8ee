/*
 * file.h — opening the files speechc reads: config and index JSON,
 * safetensors shards, model.so, the weight file.
 *
 * Every such file must be a regular file.  It is opened without blocking
 * (a FIFO's open would otherwise wait for a writer forever), checked with
 * fstat (a FIFO, a device or a directory is refused by name, before any
 * read or mmap), and held to a size cap where one is given, so that
 * /dev/zero or a 30 MB config is refused instead of read until memory runs
 * out.  Shared by the runtime and the compiler; errors are SC_EINPUT with a
 * message that starts with the path.
 */
#ifndef SC_FILE_H
#define SC_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "speechc.h"

/* The cap on every JSON file read whole (config.json, the safetensors
 * index): a real config is a few KB, the index of a large model a few MB. */
#define SC_JSON_MAX ((uint64_t)16 << 20)

/* "directory", "FIFO", "character device", ... for a st_mode. */
const char *sc_file_kind(mode_t mode);

/* Open path read-only (O_CLOEXEC, blocking once open) as a regular file of
 * at most max_bytes (0: no cap).  what names the file expected, for the
 * message "PATH: is a FIFO, expected WHAT" (NULL: "a regular file").  On
 * success *fd and *size are set; on failure nothing is left open and errno
 * is that of the failed open (ENOENT for a missing file), or 0. */
int sc_open_regular(const char *path, const char *what, uint64_t max_bytes, int *fd,
                    uint64_t *size, sc_error *err);

/* sc_open_regular, then the whole file into *buf (malloc'd, NUL-terminated,
 * *len bytes before the NUL; the caller frees it). */
int sc_read_regular(const char *path, const char *what, uint64_t max_bytes, char **buf,
                    size_t *len, sc_error *err);

/* Before dlopen: fd holds size bytes that must be an ELF shared object for
 * this machine whose program headers, loadable segments and section headers
 * all lie within the file.  dlopen maps the segments and would die of
 * SIGBUS on the pages past the end of a truncated file.  Error: "PATH: not a
 * loadable model: truncated or not an ELF shared object (DETAIL)". */
int sc_elf_check(int fd, uint64_t size, const char *path, sc_error *err);

#endif
