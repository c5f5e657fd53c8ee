/*
 * model.c — open a compiled model and run sessions on it.
 *
 * sc_model_open checks that model.so is a regular file holding a whole ELF
 * shared object (file.h), loads it with dlopen, checks its descriptor (magic,
 * ABI version, CPU features), then maps the weight file it names from the
 * same directory and checks that file against the descriptor (magic,
 * version, size, build id, checksum).  Weights stay mmapped read-only; each
 * session owns its state block (KV caches), scratch arena and logits.
 * Everything that depends on where the model runs goes through the backend
 * the descriptor's target picks (backend.h): this file names no device.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "checksum.h"
#include "cpu.h"
#include "file.h"
#include "kernels.h"
#include "model_internal.h"
#include "pool.h"
#include "sc_abi.h"
#include "speechc.h"


/* Every feature the artifact was compiled for must be present: running
 * without one dies on an illegal instruction.  A name this runtime does not
 * know is refused too (a newer compiler's feature, or a damaged list): it
 * cannot be checked, so it cannot be assumed. */
static int check_features(const char *path, const char *list, sc_error *err) {
  char buf[256];
  if (!list) list = "";
  if (strlen(list) >= sizeof buf)
    return sc_fail(err, SC_EINPUT, "%s: CPU feature list of %zu characters is too long to check "
                   "(at most %zu)", path, strlen(list), sizeof buf - 1);
  snprintf(buf, sizeof buf, "%s", list);
  for (char *save = NULL, *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
    int has = sc_cpu_has(f);
    if (has < 0)
      return sc_fail(err, SC_EINPUT, "%s: built for CPU features '%s', and '%s' is not a feature "
                     "this runtime knows (known: %s; hint: rebuild the model with this speechc)",
                     path, list, f, SC_CPU_KNOWN);
    if (!has)
      return sc_fail(err, SC_EINPUT, "%s: built for CPU features '%s', and this CPU lacks '%s' "
                     "(hint: rebuild on this machine, or with --cc tcc for portable code)",
                     path, list, f);
  }
  return SC_OK;
}

size_t rt_ids_len(const sc_entry *e, int n) { return (size_t)n * (size_t)e->ids_cols; }

size_t rt_out_len(const sc_entry *e, int n) {
  return (size_t)e->out_cols * (e->out_all_rows ? (size_t)n * (size_t)e->out_rows_mul : 1);
}

size_t rt_hidden_len(const sc_entry *e, int n) {
  return (size_t)e->hidden_cols * (e->out_all_rows ? (size_t)n : 1);
}

/* The entry table as the runtime reads it: every entry takes at least
 * one row and one id per row and returns at least one output row per row.
 * The plain-LM drivers (sc_prefill, sc_decode) also need their entries to
 * take one id per row and to fit their output in the vocab-sized logits. */
static int check_entries(const char *path, const sc_model_desc *d, sc_error *err) {
  for (int i = 0; i < d->n_entries; i++) {
    const sc_entry *e = &d->entries[i];
    const int lm = !strcmp(e->name, "prefill") || !strcmp(e->name, "decode");
    if (e->max_tokens < 1 || e->ids_cols < 1 || e->out_rows_mul < 1)
      return sc_fail(err, SC_EINPUT, "%s: entry %s: max_tokens %d, ids_cols %d, out_rows_mul %d: each must be "
                     ">= 1 (the artifact is damaged; hint: rebuild)", path, e->name, e->max_tokens, e->ids_cols,
                     e->out_rows_mul);
    if (lm && (e->input != SC_IN_IDS || e->ids_cols != 1 || rt_out_len(e, e->max_tokens) > (size_t)d->vocab))
      return sc_fail(err, SC_EINPUT, "%s: entry %s reads %d ids per row and writes %zu floats; an LM entry "
                     "reads one id per row and writes at most the %d logits (hint: rebuild)", path, e->name,
                     e->input == SC_IN_IDS ? e->ids_cols : 0, rt_out_len(e, e->max_tokens), d->vocab);
  }
  return SC_OK;
}

const sc_entry *rt_entry(const sc_model *m, const char *name) {
  const sc_model_desc *d = m->d;
  for (int i = 0; i < d->n_entries; i++)
    if (!strcmp(d->entries[i].name, name)) return &d->entries[i];
  return NULL;
}

/* *missing: set when the weight file does not exist. */
static int open_weights(sc_model *m, int verify, int *missing, sc_error *err) {
  const sc_model_desc *d = m->d;
  const char *slash = strrchr(m->path, '/');
  int dirlen = slash ? (int)(slash - m->path + 1) : 0;
  m->wpath = malloc((size_t)dirlen + strlen(d->weight_file) + 1);
  if (!m->wpath) return sc_fail(err, SC_ERUNTIME, "out of memory");
  sprintf(m->wpath, "%.*s%s", dirlen, m->path, d->weight_file);
  int fd;
  uint64_t fsize;
  if (sc_open_regular(m->wpath, "the weight file written by speechc build", 0, &fd, &fsize, err)) {
    *missing = errno == ENOENT;
    if (errno == ENOENT)
      return sc_fail(err, SC_EINPUT, "%s: weight file of %s is missing: %s (hint: it is written next "
                     "to model.so by speechc build; keep the two together)", m->wpath, m->path,
                     strerror(ENOENT));
    return err->code;
  }
  uint64_t want = SC_WFILE_HEADER + d->weight_bytes;
  if (fsize < sizeof(sc_wfile_header)) {
    close(fd);
    return sc_fail(err, SC_EINPUT, "%s: truncated: %lld bytes, expected %llu for %s", m->wpath,
                   (long long)fsize, (unsigned long long)want, m->path);
  }
  void *map = mmap(NULL, (size_t)fsize, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return sc_fail(err, SC_EINPUT, "%s: mmap failed: %s", m->wpath, strerror(errno));
  m->wmap = map;
  m->wsize = (size_t)fsize;
  sc_wfile_header h;
  memcpy(&h, map, sizeof h);
  if (memcmp(h.magic, SC_WFILE_MAGIC, 8))
    return sc_fail(err, SC_EINPUT, "%s: not a speechc weight file (bad magic)", m->wpath);
  if (h.version != SC_WFILE_VERSION)
    return sc_fail(err, SC_EINPUT, "%s: weight file version %u, this runtime reads %u (hint: rebuild)",
                   m->wpath, h.version, SC_WFILE_VERSION);
  if (h.header_bytes != SC_WFILE_HEADER)
    return sc_fail(err, SC_EINPUT, "%s: header of %u bytes, expected %u (the file is damaged; hint: rebuild)",
                   m->wpath, h.header_bytes, SC_WFILE_HEADER);
  if (h.data_bytes != d->weight_bytes)
    return sc_fail(err, SC_EINPUT, "%s: holds %llu bytes of weights, but %s expects %llu (from another "
                   "build; hint: rebuild, or copy the matching pair)", m->wpath,
                   (unsigned long long)h.data_bytes, m->path, (unsigned long long)d->weight_bytes);
  if (fsize != want)
    return sc_fail(err, SC_EINPUT, "%s: %lld bytes, expected %llu for %s (%s)", m->wpath,
                   (long long)fsize, (unsigned long long)want, m->path,
                   fsize < want ? "truncated" : "bytes after the end of the data");
  if (h.build_id != d->build_id || h.checksum != d->weight_checksum)
    return sc_fail(err, SC_EINPUT, "%s: from another build: build %016llx checksum %016llx, but %s "
                   "expects build %016llx checksum %016llx (hint: rebuild, or copy the matching pair)",
                   m->wpath, (unsigned long long)h.build_id, (unsigned long long)h.checksum, m->path,
                   (unsigned long long)d->build_id, (unsigned long long)d->weight_checksum);
  m->W = m->wmap + SC_WFILE_HEADER;
  if (verify) {
    uint64_t sum = sc_checksum64(m->W, (size_t)d->weight_bytes);
    if (sum != d->weight_checksum)
      return sc_fail(err, SC_EINPUT, "%s: weight data was modified: checksum %016llx, expected %016llx",
                     m->wpath, (unsigned long long)sum, (unsigned long long)d->weight_checksum);
    /* Reading every page made it resident in this process; let it go, so
     * that what stays resident is what decoding touches (a 150k-row text
     * table contributes one row per token).  The pages stay in the page
     * cache: touching them again costs a soft fault, not a disk read. */
    madvise((void *)m->wmap, m->wsize, MADV_DONTNEED);
  }
  return SC_OK;
}

/* One attempt of sc_model_open.  *replaced: the weight file was missing
 * because the model at path was replaced since it was loaded. */
static int open_once(const char *path, const sc_open_opts *opts, sc_model **out, int *replaced,
                     sc_error *err) {
  *out = NULL;
  *replaced = 0;
  if (!path) return sc_fail(err, SC_EUSAGE, "no model path given");
  sc_model *m = calloc(1, sizeof *m);
  if (!m) return sc_fail(err, SC_ERUNTIME, "out of memory");
  atomic_init(&m->refs, 1);
  /* dlopen searches the library path for names without a slash */
  m->path = malloc(strlen(path) + 3);
  if (!m->path) { free(m); return sc_fail(err, SC_ERUNTIME, "out of memory"); }
  sprintf(m->path, "%s%s", strchr(path, '/') ? "" : "./", path);
  int rc = SC_OK;
  /* a regular file whose ELF headers fit in it: dlopen would block on a
   * FIFO and die of SIGBUS on a truncated file */
  int fd;
  uint64_t size;
  if ((rc = sc_open_regular(path, NULL, 0, &fd, &size, err))) goto fail;
  struct stat st; /* the file loaded, to tell a rebuild that replaced it (open_weights) */
  if (fstat(fd, &st)) memset(&st, 0, sizeof st);
  rc = sc_elf_check(fd, size, path, err);
  close(fd);
  if (rc) goto fail;
  m->dl = dlopen(m->path, RTLD_NOW | RTLD_LOCAL);
  if (!m->dl) {
    rc = sc_fail(err, SC_EINPUT, "%s: not a loadable model: %s", path, dlerror());
    goto fail;
  }
  const sc_model_desc *(*fn)(void) = (const sc_model_desc *(*)(void))dlsym(m->dl, SC_DESC_SYMBOL);
  if (!fn) {
    rc = sc_fail(err, SC_EINPUT, "%s: not a speechc model (no %s symbol)", path, SC_DESC_SYMBOL);
    goto fail;
  }
  m->d = fn();
  if (!m->d || m->d->magic != SC_DESC_MAGIC) {
    rc = sc_fail(err, SC_EINPUT, "%s: not a speechc model (bad descriptor magic)", path);
    goto fail;
  }
  if (m->d->abi_version != SC_ABI_VERSION) {
    rc = sc_fail(err, SC_EINPUT, "%s: built for artifact ABI version %d, this runtime reads version %d "
                 "(hint: rebuild the model with this speechc)", path, m->d->abi_version, SC_ABI_VERSION);
    goto fail;
  }
  if ((rc = check_features(path, m->d->cpu_features, err)) || (rc = check_entries(path, m->d, err))) goto fail;
  int missing = 0;
  if ((rc = open_weights(m, opts ? opts->verify_weights : 1, &missing, err))) {
    struct stat now;
    *replaced = missing && !stat(m->path, &now) && (now.st_dev != st.st_dev || now.st_ino != st.st_ino);
    goto fail;
  }
  if (!(m->be = rt_backend_for(m->d->target))) {
    rc = sc_fail(err, SC_EINPUT, "%s: built for target '%s'; this runtime runs cpu, cuda and metal models",
                 path, m->d->target);
    goto fail;
  }
  if (m->be->version != SC_BACKEND_VERSION) {
    rc = sc_fail(err, SC_ERUNTIME, "%s: the %s backend has interface version %d, this runtime calls "
                 "version %d", path, m->be->target, m->be->version, SC_BACKEND_VERSION);
    m->be = NULL;
    goto fail;
  }
  if ((rc = m->be->model_open(m, err))) goto fail;
  m->threads = opts && opts->threads > 0 ? opts->threads : sc_physical_cores();
  if (opts && (opts->threads < 0 || opts->threads > 1024)) {
    rc = sc_fail(err, SC_EUSAGE, "threads must be 0 (one per physical core) to 1024, got %d",
                 opts->threads);
    goto fail;
  }
  m->prefill = rt_entry(m, "prefill");
  m->decode = rt_entry(m, "decode");
  for (int i = 0; i < m->d->n_entries; i++)
    if (m->d->entries[i].scratch_bytes > m->scratch_max) m->scratch_max = m->d->entries[i].scratch_bytes;
  *out = m;
  return SC_OK;
fail:
  sc_model_close(m);
  return rc;
}

/* A build that replaces the model while it is being opened renames the new
 * pair into place and then removes the old weight file (compiler/output.c),
 * which can happen between this process's dlopen and its open of the
 * weights: then the model now at path is opened instead, a few times at
 * most.  A mismatched pair is never loaded either way. */
int sc_model_open(const char *path, const sc_open_opts *opts, sc_model **out, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!path || !out) return sc_fail(err, SC_EUSAGE, "sc_model_open: no %s", !path ? "path" : "out");
  int rc = SC_OK, replaced = 0;
  for (int tries = 0; tries < 4; tries++)
    if (!(rc = open_once(path, opts, out, &replaced, err)) || !replaced) break;
  return rc;
}

void rt_model_ref(sc_model *m) { atomic_fetch_add(&m->refs, 1); }

/* The caller's reference goes; the model with the last one (a session or
 * batch still open keeps it until it is closed). */
void sc_model_close(sc_model *m) {
  if (!m || atomic_fetch_sub(&m->refs, 1) != 1) return;
  if (m->be) m->be->model_close(m);
  if (m->wmap) munmap((void *)m->wmap, m->wsize);
  if (m->dl) dlclose(m->dl);
  free(m->path);
  free(m->wpath);
  free(m);
}

void sc_model_get_info(const sc_model *m, sc_model_info *i) {
  if (!i) return;
  if (!m) {
    memset(i, 0, sizeof *i);
    return;
  }
  const sc_model_desc *d = m->d;
  i->family = d->family;
  i->model_type = d->model_type;
  i->target = d->target;
  i->compiler_version = d->compiler_version;
  i->weight_file = m->wpath;
  i->config_json = d->config_json;
  i->vocab = d->vocab;
  i->hidden = d->hidden;
  i->n_layers = d->n_layers;
  i->max_context = d->max_context;
  i->weight_bytes = d->weight_bytes;
  i->state_bytes = d->state_bytes;
  i->config_hash = d->config_hash;
}

const sc_model_desc *sc_model_desc_of(const sc_model *m) { return m->d; }

/* The session's logits are host memory on every backend; the backend adds
 * its state and scratch, and a failure of its open is closed here. */
int sc_session_open(sc_model *m, sc_session **out, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!out) return sc_fail(err, SC_EUSAGE, "sc_session_open: out is NULL");
  *out = NULL;
  if (!m) return sc_fail(err, SC_EUSAGE, "sc_session_open: no model (sc_model_open failed?)");
  sc_session *s = calloc(1, sizeof *s);
  if (!s) return sc_fail(err, SC_ERUNTIME, "out of memory");
  s->m = m;
  atomic_fetch_add(&m->refs, 1);
  s->logits = calloc((size_t)(m->d->vocab > 0 ? m->d->vocab : 1), sizeof(float));
  int rc = s->logits ? m->be->session_open(s, err) : sc_fail(err, SC_ERUNTIME, "out of memory");
  if (rc) {
    sc_session_close(s);
    return rc;
  }
  *out = s;
  return SC_OK;
}

void sc_session_close(sc_session *s) {
  if (!s) return;
  sc_model *m = s->m;
  m->be->session_close(s);
  free(s->logits);
  free(s);
  sc_model_close(m); /* the session's reference */
}

void sc_session_reset(sc_session *s) {
  if (!s) return;
  s->m->be->session_reset(s);
  s->pos = 0;
  s->enc_pos = 0;
}

int sc_session_pos(const sc_session *s) { return s ? s->pos : -1; }

const float *sc_logits(const sc_session *s, int *n_vocab) {
  if (n_vocab) *n_vocab = s ? s->m->d->vocab : 0;
  if (!s) return NULL;
  if (s->m->be->fetch_logits) s->m->be->fetch_logits(s); /* a device-sampled decode left them there */
  return s->logits;
}

unsigned long long rt_state_base(const sc_session *s) { return s->m->be->state_base(s); }

int rt_state_read(const sc_session *s, size_t off, size_t bytes, void *out, sc_error *err) {
  const size_t total = (size_t)s->m->d->state_bytes;
  if (off > total || bytes > total - off)
    return sc_fail(err, SC_EUSAGE, "%s: state bytes %zu..%zu are outside the session's %zu", s->m->path, off,
                   off + bytes, total);
  return s->m->be->state_read(s, off, bytes, out, err);
}

/* Rows placed one by one must each lie inside the context: the C
 * target's code checks them again, but a device's host code cannot read
 * them, so every backend relies on this check. */
static int check_rows(const sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err) {
  if (!io->row_pos) return SC_OK;
  if (io->n < 1 || io->n > e->max_tokens)
    return sc_fail(err, SC_EUSAGE, "%s: %d rows, expected 1 to %d", e->name, io->n, e->max_tokens);
  const int max = s->m->d->max_context;
  for (int t = 0; t < io->n; t++)
    if (io->row_pos[t] < 0 || io->row_pos[t] >= max)
      return sc_fail(err, SC_EUSAGE, "%s: row %d is at position %d, outside the context [0, %d) (hint: rebuild "
                     "with a larger --max-context)", e->name, t, io->row_pos[t], max);
  return SC_OK;
}

int rt_call(sc_session *s, const sc_entry *e, const sc_io *io, sc_error *err) {
  if (check_rows(s, e, io, err)) return err->code;
  return s->m->be->call(s, e, io, err);
}

static int check_tokens(sc_session *s, const int32_t *ids, int n, sc_error *err) {
  const sc_model_desc *d = s->m->d;
  if (n < 1 || !ids) return sc_fail(err, SC_EUSAGE, "no tokens given%s", n >= 1 ? " (ids NULL)" : "");
  if (s->pos + (int64_t)n > d->max_context)
    return sc_fail(err, SC_ERUNTIME, "context full: position %d + %d tokens exceeds max_context %d "
                   "(hint: rebuild with a larger --max-context)", s->pos, n, d->max_context);
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= d->vocab)
      return sc_fail(err, SC_EUSAGE, "token %d (index %d) is outside the vocabulary [0, %d)", ids[i], i, d->vocab);
  return SC_OK;
}

int sc_prefill(sc_session *s, const int32_t *ids, int n, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!s) return sc_fail(err, SC_EUSAGE, "sc_prefill: no session (sc_session_open failed?)");
  if (!s->m->prefill)
    return sc_fail(err, SC_EUSAGE, "%s: a %s model has no prefill entry point%s", s->m->path, s->m->d->family,
                   strcmp(s->m->d->family, "qwen3_tts") ? "" : " (hint: speechc tts drives Qwen3-TTS models)");
  if (check_tokens(s, ids, n, err)) return err->code;
  const sc_entry *e = s->m->prefill;
  for (int done = 0; done < n;) {
    int chunk = n - done < e->max_tokens ? n - done : e->max_tokens;
    sc_io io = {.ids = ids + done, .n = chunk, .pos = s->pos, .out = s->logits};
    if (rt_call(s, e, &io, err)) return err->code;
    s->pos += chunk;
    done += chunk;
  }
  return SC_OK;
}

int sc_decode(sc_session *s, int32_t id, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!s) return sc_fail(err, SC_EUSAGE, "sc_decode: no session (sc_session_open failed?)");
  if (!s->m->decode)
    return sc_fail(err, SC_EUSAGE, "%s: a %s model has no decode entry point%s", s->m->path, s->m->d->family,
                   strcmp(s->m->d->family, "qwen3_tts") ? "" : " (hint: speechc tts drives Qwen3-TTS models)");
  if (check_tokens(s, &id, 1, err)) return err->code;
  sc_io io = {.ids = &id, .n = 1, .pos = s->pos, .out = s->logits};
  if (rt_call(s, s->m->decode, &io, err)) return err->code;
  s->pos++;
  return SC_OK;
}

int rt_generate_room(const sc_session *s, int n_prompt, int n_new, sc_error *err) {
  /* the prompt fills [pos, pos + n_prompt); the first new token comes from
   * its logits, each later one is decoded at the next position */
  const int max = s->m->d->max_context;
  const long room = (long)max - s->pos - n_prompt + 1;
  /* an overlong prompt: prefill says so */
  if (n_prompt < 0 || s->pos + (long)n_prompt > max || n_new <= room) return SC_OK;
  char after[64] = "";
  if (s->pos) snprintf(after, sizeof after, " after the session's %d", s->pos);
  return sc_fail(err, SC_EUSAGE, "n_new %d: the prompt's %d tokens%s leave room for %ld new tokens in max_context %d "
                 "(hint: ask for fewer, or rebuild with a larger --max-context)", n_new, n_prompt, after, room, max);
}

int sc_generate(sc_session *s, const int32_t *prompt, int n_prompt, int n_new,
                const sc_sample_params *p, int32_t eos, int32_t *out, int *n_out,
                sc_token_cb on_token, void *user, sc_error *err) {
  SC_ERR_OR_LOCAL(err);
  if (!s || !n_out) return sc_fail(err, SC_EUSAGE, "sc_generate: no %s", !s ? "session" : "n_out");
  *n_out = 0;
  if (n_new < 0) return sc_fail(err, SC_EUSAGE, "-n must be >= 0, got %d", n_new);
  if (n_prompt < 1 || !prompt || (n_new && !out))
    return sc_fail(err, SC_EUSAGE, "a prompt of at least one token%s is needed (got %d prompt tokens%s)",
                   n_new ? " and room for the new tokens (out)" : "", n_prompt,
                   !prompt ? " at NULL" : n_new && !out ? ", out NULL" : "");
  if (rt_generate_room(s, n_prompt, n_new, err)) return err->code;
  sc_sampler *smp = NULL;
  if (sc_sampler_new(p, &smp, err)) return err->code;
  int32_t *hist = malloc(((size_t)n_prompt + (size_t)n_new + 1) * sizeof *hist);
  int rc = SC_OK;
  if (!hist) { rc = sc_fail(err, SC_ERUNTIME, "out of memory"); goto done; }
  memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
  int n_hist = n_prompt;
  /* on a device, decode steps sample there: only the token comes back (a
   * repetition penalty's history goes up once, after the first token, and
   * each draw adds to it there) */
  const int vocab = s->m->d->vocab;
  const sc_backend_i *be = s->m->be;
  const int dev = be->can_sample && s->m->decode && be->can_sample(s, smp, vocab);
  const int penalty = p && p->repetition_penalty != 1.0f;
  int32_t next = -1;
  if ((rc = sc_prefill(s, prompt, n_prompt, err))) goto done;
  for (int i = 0; i < n_new; i++) {
    int32_t tok = next;
    if ((i == 0 || !dev) && (rc = sc_sample(smp, s->logits, vocab, hist, n_hist, NULL, 0, &tok, err))) goto done;
    out[(*n_out)++] = tok;
    hist[n_hist++] = tok;
    if (on_token && on_token(user, tok, i)) break;
    if (tok == eos || i + 1 == n_new) break;
    if (dev) {
      if ((rc = check_tokens(s, &tok, 1, err))) goto done;
      if (i == 0 && penalty && (rc = be->sample_history(s, hist, n_hist, err))) goto done;
      sc_io io = {.ids = &tok, .n = 1, .pos = s->pos, .out = s->logits};
      if ((rc = be->call_sampled(s, s->m->decode, &io, smp, &next, err))) goto done;
      s->pos++;
    } else if ((rc = sc_decode(s, tok, err))) {
      goto done;
    }
  }
done:
  free(hist);
  sc_sampler_free(smp);
  return rc;
}
