/*
 * file.c — regular-file checks before every open, read, mmap and dlopen of
 * a file the user names (file.h).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

const char *sc_file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "regular file";
  if (S_ISDIR(mode)) return "directory";
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISLNK(mode)) return "symbolic link";
  return "special file";
}

/* "16 MiB" for whole MiB, else the byte count. */
static const char *limit_str(char *buf, size_t cap, uint64_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0)
    snprintf(buf, cap, "%llu MiB", (unsigned long long)(n >> 20));
  else
    snprintf(buf, cap, "%llu-byte", (unsigned long long)n);
  return buf;
}

int sc_open_regular(const char *path, const char *what, uint64_t max_bytes, int *fd,
                    uint64_t *size, sc_error *err) {
  *fd = -1;
  *size = 0;
  if (!what) what = "a regular file";
  /* O_NONBLOCK: opening a FIFO for reading must not wait for a writer */
  int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (f < 0) {
    int e = errno;
    sc_fail(err, SC_EINPUT, "%s: cannot open: %s", path, strerror(e));
    errno = e;
    return SC_EINPUT;
  }
  struct stat sb;
  if (fstat(f, &sb) != 0) {
    int e = errno;
    close(f);
    sc_fail(err, SC_EINPUT, "%s: cannot stat: %s", path, strerror(e));
    errno = 0;
    return SC_EINPUT;
  }
  int rc = SC_OK;
  char lim[32];
  if (!S_ISREG(sb.st_mode))
    rc = sc_fail(err, SC_EINPUT, "%s: is a %s, expected %s", path, sc_file_kind(sb.st_mode), what);
  else if (max_bytes && (uint64_t)sb.st_size > max_bytes)
    rc = sc_fail(err, SC_EINPUT, "%s: %lld bytes, larger than the %s limit for %s", path,
                 (long long)sb.st_size, limit_str(lim, sizeof lim, max_bytes), what);
  else if (fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK) != 0)
    rc = sc_fail(err, SC_EINPUT, "%s: cannot read: %s", path, strerror(errno));
  if (rc) {
    close(f);
    errno = 0;
    return rc;
  }
  *fd = f;
  *size = (uint64_t)sb.st_size;
  return SC_OK;
}

int sc_read_regular(const char *path, const char *what, uint64_t max_bytes, char **buf,
                    size_t *len, sc_error *err) {
  *buf = NULL;
  *len = 0;
  int fd;
  uint64_t size;
  if (sc_open_regular(path, what, max_bytes, &fd, &size, err)) return err->code;
  /* read to the end, but never more than the size seen (plus one byte, to
   * notice a file that grows while it is read) */
  char *b = malloc((size_t)size + 2);
  if (!b) {
    close(fd);
    return sc_fail(err, SC_ERUNTIME, "%s: out of memory (%llu bytes)", path,
                   (unsigned long long)size);
  }
  size_t n = 0;
  while (n < size + 1) {
    ssize_t r = read(fd, b + n, (size_t)size + 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      free(b);
      return sc_fail(err, SC_EINPUT, "%s: read error: %s", path, strerror(e));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  if (n != size) {
    free(b);
    return sc_fail(err, SC_EINPUT, "%s: changed size while being read (%llu bytes, then %zu%s)",
                   path, (unsigned long long)size, n, n > size ? " or more" : "");
  }
  b[n] = '\0';
  *buf = b;
  *len = n;
  return SC_OK;
}

/* --- the ELF check before dlopen ------------------------------------------ */

#if defined(__x86_64__)
#define SC_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define SC_ELF_MACHINE EM_AARCH64
#elif defined(__i386__)
#define SC_ELF_MACHINE EM_386
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SC_ELF_DATA ELFDATA2LSB
#else
#define SC_ELF_DATA ELFDATA2MSB
#endif

#define SC_ELF_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)
#define SC_ELF_MAX_PHDRS 4096 /* a linker writes ~10; more is damage */

static int not_elf(const char *path, sc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int not_elf(const char *path, sc_error *err, const char *fmt, ...) {
  char detail[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return sc_fail(err, SC_EINPUT, "%s: not a loadable model: truncated or not an ELF shared "
                 "object (%s; hint: rebuild it with speechc build, or copy it again)", path, detail);
}

/* [off, off + len) within size, without overflow. */
static int fits(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

static int read_at(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

int sc_elf_check(int fd, uint64_t size, const char *path, sc_error *err) {
  ElfW(Ehdr) eh;
  if (size < sizeof eh)
    return not_elf(path, err, "%llu bytes, shorter than an ELF header of %zu",
                   (unsigned long long)size, sizeof eh);
  if (read_at(fd, &eh, sizeof eh, 0))
    return sc_fail(err, SC_EINPUT, "%s: read error: %s", path, strerror(errno));
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG))
    return not_elf(path, err, "no ELF magic at its start");
  if (eh.e_ident[EI_CLASS] != SC_ELF_CLASS || eh.e_ident[EI_DATA] != SC_ELF_DATA)
    return sc_fail(err, SC_EINPUT, "%s: not a loadable model: an ELF file of class %d, byte "
                   "order %d; this runtime loads class %d, byte order %d (hint: rebuild the model "
                   "on this machine)", path, eh.e_ident[EI_CLASS], eh.e_ident[EI_DATA],
                   (int)SC_ELF_CLASS, SC_ELF_DATA);
#ifdef SC_ELF_MACHINE
  if (eh.e_machine != SC_ELF_MACHINE)
    return sc_fail(err, SC_EINPUT, "%s: not a loadable model: built for ELF machine %u, this "
                   "runtime runs on machine %u (hint: rebuild the model on this machine)", path,
                   eh.e_machine, (unsigned)SC_ELF_MACHINE);
#endif
  if (eh.e_type != ET_DYN)
    return not_elf(path, err, "ELF type %u, expected %u (a shared object)", (unsigned)eh.e_type,
                   (unsigned)ET_DYN);
  if (eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > SC_ELF_MAX_PHDRS)
    return not_elf(path, err, "%u program headers of %u bytes", (unsigned)eh.e_phnum,
                   (unsigned)eh.e_phentsize);
  uint64_t ph_bytes = (uint64_t)eh.e_phnum * eh.e_phentsize;
  if (!fits(eh.e_phoff, ph_bytes, size))
    return not_elf(path, err, "its program headers end at byte %llu, the file has %llu",
                   (unsigned long long)eh.e_phoff + ph_bytes, (unsigned long long)size);
  /* section headers: not used by the loader, but a linker writes them
   * last, so they catch a file cut anywhere */
  if (eh.e_shnum && !fits(eh.e_shoff, (uint64_t)eh.e_shnum * eh.e_shentsize, size))
    return not_elf(path, err, "its section headers end at byte %llu, the file has %llu",
                   (unsigned long long)eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize,
                   (unsigned long long)size);
  if (!eh.e_shnum && eh.e_shoff > size)
    return not_elf(path, err, "its section headers start at byte %llu, the file has %llu",
                   (unsigned long long)eh.e_shoff, (unsigned long long)size);

  ElfW(Phdr) *ph = malloc(ph_bytes);
  if (!ph) return sc_fail(err, SC_ERUNTIME, "%s: out of memory", path);
  int rc = SC_OK;
  if (read_at(fd, ph, ph_bytes, eh.e_phoff)) {
    rc = sc_fail(err, SC_EINPUT, "%s: read error: %s", path, strerror(errno));
  } else {
    int n_load = 0;
    for (int i = 0; i < eh.e_phnum && !rc; i++) {
      if (ph[i].p_type != PT_LOAD && ph[i].p_type != PT_DYNAMIC) continue;
      n_load += ph[i].p_type == PT_LOAD;
      if (!fits(ph[i].p_offset, ph[i].p_filesz, size))
        rc = not_elf(path, err, "segment %d ends at byte %llu, the file has %llu", i,
                     (unsigned long long)ph[i].p_offset + ph[i].p_filesz, (unsigned long long)size);
    }
    if (!rc && !n_load) rc = not_elf(path, err, "no loadable segment");
  }
  free(ph);
  return rc;
}
