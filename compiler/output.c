/*
 * output.c — how a build puts OUT.so and its weight file in place.
 *
 * What -o may be.  A file path whose directory exists.  It may replace a
 * regular file (a previous build) or a symlink (the link is replaced, its
 * target is never written), and nothing else: not a directory, FIFO,
 * device or socket, nor a symlink to one, and never a file of the build's
 * own checkpoint (config.json, a safetensors file, the shard index), by
 * any name (compared by device and inode, so symlinks and hard links are
 * caught).  The weight file's name is checked the same way.
 *
 * The pair.  OUT.so names its weight file, "<stem>.<id>.weights" beside
 * it (stem: OUT's file name without ".so"; id: 16 hex digits of a hash of
 * the build id and the weights' checksum, so a different content is a
 * different name).  The runtime opens exactly that name and checks the
 * build id and checksum again.
 *
 * Temporaries.  The weight file is written, and the compiled model copied,
 * into files created with O_CREAT | O_EXCL | O_NOFOLLOW under random names
 * in the output directory (nothing planted there is followed or reused);
 * the compiler itself writes only into a private mkdtemp directory.
 *
 * Installation, with the output directory locked (flock) against other
 * builds:  1. rename the weight file to its final name — a new name, so the
 * model in place still finds its own;  2. rename the model over OUT.so —
 * from this instant a reader opens the new model and finds its weights;
 * 3. remove older "<stem>.<16 hex>.weights" files: after 2, only the model
 * just installed is OUT.so, and with the lock no other build is between 1
 * and 2.  So a reader never sees a mismatched pair, and two builds to the
 * same -o leave the pair of the last one.  (Without the lock — flock
 * refused, e.g. by some network file systems — step 3 is skipped: stale
 * weight files stay, the pair is still consistent.)  A reader that opened
 * the previous model just before step 3 finds its weights gone and fails
 * with "weight file ... is missing"; it never loads a mix.
 *
 * Cleanup.  Every failure removes the temporaries, and a weight file that
 * step 1 installed when step 2 failed.  With signals (the CLI), SIGINT,
 * SIGTERM and SIGHUP do the same from the handler (unlink, rmdir, kill and
 * waitpid only: async-signal-safe), then the process dies by the signal.
 * The OutPair is the handler's list: every change to it is made with those
 * signals blocked.
 */
#define _GNU_SOURCE
#include "output.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checksum.h"
#include "file.h"

#define INDEX_NAME "model.safetensors.index.json" /* as checkpoint.c reads it */
#define ID_HEX 16
#define WEIGHTS_SUFFIX ".weights"

static const int caught[] = {SIGINT, SIGTERM, SIGHUP};
#define N_CAUGHT (int)(sizeof caught / sizeof caught[0])

/* The one piece of process state here: a signal handler is handed no
 * context, so it finds the CLI's build (the only one that asks for
 * handlers) through this pointer. */
static OutPair *volatile sig_pair;
static struct sigaction sig_saved[N_CAUGHT];

static void block_signals(sigset_t *old) {
  sigset_t s;
  sigemptyset(&s);
  for (int i = 0; i < N_CAUGHT; i++) sigaddset(&s, caught[i]);
  pthread_sigmask(SIG_BLOCK, &s, old);
}

static void restore_signals(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* Stop the system compiler (its whole process group), then remove every
 * temporary.  Async-signal-safe. */
static void remove_temps(OutPair *p) {
  if (p->compiler > 0) {
    /* gcc deletes its own temporaries on SIGTERM */
    if (kill(-p->compiler, SIGTERM)) kill(p->compiler, SIGTERM);
    waitpid(p->compiler, NULL, 0);
    p->compiler = 0;
  }
  if (p->dirfd >= 0) {
    if (p->wtmp[0]) unlinkat(p->dirfd, p->wtmp, 0);
    if (p->sotmp[0]) unlinkat(p->dirfd, p->sotmp, 0);
    if (p->wnew[0]) unlinkat(p->dirfd, p->wnew, 0);
  }
  p->wtmp[0] = p->sotmp[0] = p->wnew[0] = 0;
  if (p->scratch_made) {
    for (int i = 0; i < 3; i++) unlink(p->scratch_file[i]);
    rmdir(p->scratch);
    p->scratch_made = 0;
  }
}

static void on_signal(int sig) {
  OutPair *p = sig_pair;
  if (p) remove_temps(p);
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, NULL);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, sig);
  sigprocmask(SIG_UNBLOCK, &s, NULL);
  raise(sig);
}

/* Handlers for the caught signals, except those ignored on entry (nohup,
 * a background job of a shell without job control): they stay ignored. */
static void catch_signals(OutPair *p) {
  sig_pair = p;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < N_CAUGHT; i++) sigaddset(&sa.sa_mask, caught[i]);
  for (int i = 0; i < N_CAUGHT; i++) {
    sigaction(caught[i], NULL, &sig_saved[i]);
    if (sig_saved[i].sa_handler != SIG_IGN) sigaction(caught[i], &sa, NULL);
  }
  p->signals = 1;
}

/* The input that st is, or NULL. */
static const char *input_of(const OutPair *p, const struct stat *st) {
  for (int i = 0; i < p->n_inputs; i++)
    if (p->input_dev[i] == st->st_dev && p->input_ino[i] == st->st_ino) return p->input[i];
  return NULL;
}

/* May `name` (in the output directory) be replaced by a build's output?
 * See the top of the file.  For -o, flag is "-o " and shown the path; for
 * the weight file, flag is "" and shown its path. */
static int check_target(const OutPair *p, const char *name, const char *flag, const char *shown,
                        sc_error *err) {
  struct stat st;
  if (fstatat(p->dirfd, name, &st, AT_SYMLINK_NOFOLLOW)) {
    if (errno == ENOENT) return SC_OK;
    return sc_fail(err, SC_EINPUT, "%s%s: cannot stat: %s", flag, shown, strerror(errno));
  }
  const char *link = "";
  if (S_ISLNK(st.st_mode)) {
    if (fstatat(p->dirfd, name, &st, 0)) return SC_OK; /* dangling: only the link is replaced */
    link = "a symlink to ";
  }
  char hint[PATH_MAX + 64];
  if (flag[0]) snprintf(hint, sizeof hint, "expected a new file path such as out/model.so");
  else snprintf(hint, sizeof hint, "the weight file of -o %s goes there; hint: move it away", p->path);
  if (S_ISDIR(st.st_mode))
    return sc_fail(err, SC_EINPUT, "%s%s: is %sa directory (%s)", flag, shown, link, hint);
  if (!S_ISREG(st.st_mode))
    return sc_fail(err, SC_EINPUT, "%s%s: is %sa %s, not a regular file (%s)", flag, shown, link,
                   sc_file_kind(st.st_mode), hint);
  const char *in = input_of(p, &st);
  if (in)
    return sc_fail(err, SC_EINPUT, "%s%s: is %san input of the build, %s (%s)", flag, shown, link, in, hint);
  return SC_OK;
}

static int add_input(OutPair *p, const char *path, int optional, sc_error *err) {
  struct stat st;
  if (stat(path, &st)) {
    if (optional && errno == ENOENT) return SC_OK;
    return sc_fail(err, SC_EINPUT, "%s: cannot stat: %s", path, strerror(errno));
  }
  p->input[p->n_inputs] = path;
  p->input_dev[p->n_inputs] = st.st_dev;
  p->input_ino[p->n_inputs] = st.st_ino;
  p->n_inputs++;
  return SC_OK;
}

int out_open(OutPair *p, const char *path, const Checkpoint *c, int signals, sc_error *err) {
  memset(p, 0, sizeof *p);
  p->dirfd = -1;
  p->path = path;
  if (!path[0]) return sc_fail(err, SC_EUSAGE, "-o '': expected a file path such as out/model.so");
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t plen = (size_t)(base - path), blen = strlen(base);
  if (!base[0] || !strcmp(base, ".") || !strcmp(base, ".."))
    return sc_fail(err, SC_EINPUT, "-o %s: names a directory; expected a file path such as "
                   "out/model.so", path);
  if (plen >= sizeof p->prefix || blen >= sizeof p->base)
    return sc_fail(err, SC_EINPUT, "-o %s: %s", path, strerror(ENAMETOOLONG));
  memcpy(p->prefix, path, plen);
  memcpy(p->base, base, blen + 1);
  size_t slen = blen > 3 && !strcmp(base + blen - 3, ".so") ? blen - 3 : blen;
  memcpy(p->stem, base, slen);
  if (slen + 2 + ID_HEX + strlen(WEIGHTS_SUFFIX) > NAME_MAX)
    return sc_fail(err, SC_EINPUT, "-o %s: file name too long for the weight file beside it "
                   "(<name>.<%d hex digits>.weights; at most %d bytes)", path, ID_HEX, NAME_MAX);

  /* the checkpoint's files: config.json, every safetensors file, the index */
  p->input = malloc(((size_t)c->n_files + 2) * sizeof *p->input);
  p->input_dev = malloc(((size_t)c->n_files + 2) * sizeof *p->input_dev);
  p->input_ino = malloc(((size_t)c->n_files + 2) * sizeof *p->input_ino);
  int rc = SC_OK;
  if (!p->input || !p->input_dev || !p->input_ino) {
    rc = sc_fail(err, SC_ERUNTIME, "out of memory");
    goto fail;
  }
  snprintf(p->index, sizeof p->index, "%s/%s", c->dir, INDEX_NAME);
  rc = c->config_given ? SC_OK : add_input(p, c->config_path, 0, err);
  for (int i = 0; !rc && i < c->n_files; i++) rc = add_input(p, c->files[i].path, 0, err);
  if (!rc) rc = add_input(p, p->index, 1, err);
  if (rc) goto fail;

  const char *dir = plen ? p->prefix : ".";
  p->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (p->dirfd < 0) {
    rc = sc_fail(err, SC_EINPUT, "-o %s: cannot open the directory %s: %s", path, dir, strerror(errno));
    goto fail;
  }
  if ((rc = check_target(p, p->base, "-o ", path, err))) goto fail;
  if (signals) catch_signals(p);
  return SC_OK;
fail:
  out_close(p);
  return rc;
}

/* 8 random characters for a temporary's name. */
static void random_name(char out[9]) {
  static const char digits[] = "abcdefghijklmnopqrstuvwxyz234567";
  unsigned char r[8];
  if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x[3] = {(uint64_t)ts.tv_nsec, (uint64_t)ts.tv_sec, (uint64_t)getpid()};
    uint64_t h = sc_fnv1a(x, sizeof x);
    memcpy(r, &h, sizeof r);
  }
  for (int i = 0; i < 8; i++) out[i] = digits[r[i] & 31];
  out[8] = 0;
}

/* Create a new file "speechc-XXXXXXXX<suffix>" in the output directory,
 * its name recorded in slot[32] before it exists.  Returns the fd or -1. */
static int create_temp(OutPair *p, char *slot, const char *suffix, mode_t mode, sc_error *err) {
  for (int tries = 0; tries < 64; tries++) {
    char rnd[9], name[32];
    random_name(rnd);
    snprintf(name, sizeof name, "speechc-%s%s", rnd, suffix);
    sigset_t old;
    block_signals(&old);
    memcpy(slot, name, sizeof name);
    int fd = openat(p->dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    int e = errno;
    if (fd < 0) slot[0] = 0;
    restore_signals(&old);
    if (fd >= 0) return fd;
    if (e != EEXIST) {
      sc_fail(err, SC_EINPUT, "-o %s: cannot create a file in its directory: %s", p->path, strerror(e));
      return -1;
    }
  }
  sc_fail(err, SC_EINPUT, "-o %s: cannot create a file in its directory: every name tried exists",
          p->path);
  return -1;
}

int out_weights(OutPair *p, FILE **f, const char **shown, sc_error *err) {
  static _Thread_local char path[PATH_MAX + 32];
  *f = NULL;
  int fd = create_temp(p, p->wtmp, ".weights.tmp", 0666, err);
  if (fd < 0) return err->code;
  snprintf(path, sizeof path, "%s%s", p->prefix, p->wtmp);
  *shown = path;
  if (!(*f = fdopen(fd, "wb"))) {
    close(fd);
    return sc_fail(err, SC_ERUNTIME, "%s: %s", path, strerror(errno));
  }
  return SC_OK;
}

int out_scratch(OutPair *p, sc_error *err) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !tmp[0]) tmp = "/tmp";
  static const char *const files[3] = {"model.c", "sc_abi.h", "model.so"};
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/speechc-XXXXXX", tmp) >= (int)sizeof dir - 16)
    return sc_fail(err, SC_EINPUT, "TMPDIR=%s: %s", tmp, strerror(ENAMETOOLONG));
  sigset_t old;
  block_signals(&old);
  int made = mkdtemp(dir) != NULL;
  int e = errno;
  if (made) {
    memcpy(p->scratch, dir, sizeof dir);
    for (int i = 0; i < 3; i++) snprintf(p->scratch_file[i], sizeof p->scratch_file[i], "%s/%s", dir, files[i]);
    p->scratch_made = 1;
  }
  restore_signals(&old);
  if (!made)
    return sc_fail(err, SC_ERUNTIME, "cannot create a temporary directory in %s: %s (hint: set "
                   "TMPDIR to a writable directory)", tmp, strerror(e));
  return SC_OK;
}

static int copy_into(int to, const char *from, const char *shown, sc_error *err) {
  int fd = open(from, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return sc_fail(err, SC_ERUNTIME, "%s: cannot open: %s", from, strerror(errno));
  char buf[1 << 16];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t w = 0, k; w < n; w += k)
      if ((k = write(to, buf + w, (size_t)(n - w))) < 0) {
        if (errno == EINTR) { k = 0; continue; }
        close(fd);
        return sc_fail(err, SC_EINPUT, "%s: write failed: %s", shown, strerror(errno));
      }
  int e = errno;
  close(fd);
  if (n < 0) return sc_fail(err, SC_ERUNTIME, "%s: read failed: %s", from, strerror(e));
  return SC_OK;
}

/* "<stem>.<16 lowercase hex>.weights" */
static int is_weight_name(const OutPair *p, const char *name) {
  size_t s = strlen(p->stem);
  if (strlen(name) != s + 1 + ID_HEX + strlen(WEIGHTS_SUFFIX)) return 0;
  if (strncmp(name, p->stem, s) || name[s] != '.' || strcmp(name + s + 1 + ID_HEX, WEIGHTS_SUFFIX)) return 0;
  for (int i = 0; i < ID_HEX; i++)
    if (!strchr("0123456789abcdef", name[s + 1 + i]) || !name[s + 1 + i]) return 0;
  return 1;
}

/* Step 3: the weight files of earlier builds of this -o. */
static void remove_stale(const OutPair *p) {
  int fd = openat(p->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return;
  }
  for (struct dirent *de; (de = readdir(d));) {
    struct stat st;
    if (!is_weight_name(p, de->d_name) || !strcmp(de->d_name, p->wname)) continue;
    if (fstatat(p->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || input_of(p, &st)) continue;
    unlinkat(p->dirfd, de->d_name, 0);
  }
  closedir(d);
}

const char *out_weight_name(OutPair *p, uint64_t id) {
  snprintf(p->wname, sizeof p->wname, "%s.%016llx%s", p->stem, (unsigned long long)id, WEIGHTS_SUFFIX);
  return p->wname;
}

int out_install(OutPair *p, sc_error *err) {
  char shown[sizeof p->prefix + sizeof p->wname];
  snprintf(shown, sizeof shown, "%s%s", p->prefix, p->wname);
  int fd = create_temp(p, p->sotmp, ".so.tmp", 0777, err);
  if (fd < 0) return err->code;
  int rc = copy_into(fd, p->scratch_file[2], p->path, err);
  if (close(fd) && !rc) rc = sc_fail(err, SC_EINPUT, "%s: write failed: %s", p->path, strerror(errno));
  if (rc) return rc;

  int locked = flock(p->dirfd, LOCK_EX) == 0;
  sigset_t old;
  block_signals(&old);
  struct stat st;
  int existed = fstatat(p->dirfd, p->wname, &st, AT_SYMLINK_NOFOLLOW) == 0;
  /* -o is checked again: a file may have appeared there since out_open */
  if (!(rc = check_target(p, p->wname, "", shown, err)) && !(rc = check_target(p, p->base, "-o ", p->path, err))) {
    if (renameat(p->dirfd, p->wtmp, p->dirfd, p->wname)) {
      rc = sc_fail(err, SC_EINPUT, "%s: cannot move the weight file into place: %s", shown, strerror(errno));
    } else {
      if (!existed) memcpy(p->wnew, p->wname, sizeof p->wname);
      p->wtmp[0] = 0;
      if (renameat(p->dirfd, p->sotmp, p->dirfd, p->base)) {
        rc = sc_fail(err, SC_EINPUT, "-o %s: cannot move the model into place: %s", p->path, strerror(errno));
      } else {
        p->sotmp[0] = p->wnew[0] = 0;
        if (locked) remove_stale(p);
      }
    }
  }
  restore_signals(&old);
  if (locked) flock(p->dirfd, LOCK_UN);
  return rc;
}

void out_close(OutPair *p) {
  sigset_t old;
  block_signals(&old);
  remove_temps(p);
  if (p->signals) {
    for (int i = 0; i < N_CAUGHT; i++) sigaction(caught[i], &sig_saved[i], NULL);
    sig_pair = NULL;
    p->signals = 0;
  }
  if (p->dirfd >= 0) close(p->dirfd);
  p->dirfd = -1;
  restore_signals(&old);
  free(p->input);
  free(p->input_dev);
  free(p->input_ino);
  p->input = NULL;
  p->input_dev = NULL;
  p->input_ino = NULL;
}
