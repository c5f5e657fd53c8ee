/*
 * spm.cc — the C API of spm.h over the sentencepiece library (C++).
 *
 * Only decoding is used.  The file is read by sc_read_regular (a FIFO, a
 * directory or a huge file is refused before the library sees it) and
 * handed to LoadFromSerializedProto; ids are range-checked here, so the
 * library's Decode only ever sees ids it knows.  No C++ exception crosses
 * the C boundary: an allocation failure is SC_ERUNTIME.
 */
#include "spm.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

extern "C" {
#include "file.h"
}

struct sc_spm {
  sentencepiece::SentencePieceProcessor sp;
  int size;
};

extern "C" int sc_spm_load_mem(const void *data, size_t size, const char *name, sc_spm **out, sc_error *err) {
  *out = nullptr;
  try {
    sc_spm *t = new sc_spm;
    const auto st = t->sp.LoadFromSerializedProto(std::string_view(static_cast<const char *>(data), size));
    if (!st.ok() || t->sp.GetPieceSize() <= 0) {
      std::string why = st.ok() ? "it has no pieces" : st.ToString();
      delete t;
      return sc_fail(err, SC_EINPUT, "%s: not a SentencePiece model (%s)", name, why.c_str());
    }
    t->size = t->sp.GetPieceSize();
    *out = t;
    return SC_OK;
  } catch (const std::bad_alloc &) {
    return sc_fail(err, SC_ERUNTIME, "%s: out of memory loading the SentencePiece model", name);
  } catch (...) {
    return sc_fail(err, SC_EINPUT, "%s: not a SentencePiece model (the library threw)", name);
  }
}

extern "C" int sc_spm_load(const char *path, sc_spm **out, sc_error *err) {
  *out = nullptr;
  char *buf = nullptr;
  size_t len = 0;
  if (sc_read_regular(path, "a SentencePiece .model file", SC_SPM_FILE_MAX, &buf, &len, err)) return err->code;
  const int rc = sc_spm_load_mem(buf, len, path, out, err);
  free(buf);
  return rc;
}

extern "C" void sc_spm_free(sc_spm *t) { delete t; }

extern "C" int sc_spm_size(const sc_spm *t) { return t->size; }

extern "C" int sc_spm_is_byte(const sc_spm *t, int32_t id) {
  return id >= 0 && id < t->size && t->sp.IsByte(id);
}

extern "C" int sc_spm_decode(const sc_spm *t, const int32_t *ids, size_t n, char **text, size_t *len,
                             sc_error *err) {
  *text = nullptr;
  *len = 0;
  for (size_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= t->size)
      return sc_fail(err, SC_EUSAGE, "text id %d (index %zu) is outside the SentencePiece vocabulary [0, %d)",
                     (int)ids[i], i, t->size);
  try {
    const std::vector<int> v(ids, ids + n);
    std::string s;
    const auto st = t->sp.Decode(v, &s);
    if (!st.ok()) return sc_fail(err, SC_ERUNTIME, "SentencePiece decode: %s", st.ToString().c_str());
    char *p = static_cast<char *>(malloc(s.size() + 1));
    if (!p) return sc_fail(err, SC_ERUNTIME, "out of memory");
    memcpy(p, s.data(), s.size());
    p[s.size()] = 0;
    *text = p;
    *len = s.size();
    return SC_OK;
  } catch (const std::bad_alloc &) {
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  } catch (...) {
    return sc_fail(err, SC_ERUNTIME, "SentencePiece decode failed (the library threw)");
  }
}
