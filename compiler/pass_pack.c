/*
 * pass_pack.c — lay out and write the packed weight file.
 *
 * Every weight a graph reads is stored once, 64-byte aligned, in its band:
 * f32 as is; bf16 copied bit for bit from a bf16 checkpoint or rounded to
 * nearest-even from f32/f16; q8_0 / q4_0 quantized row by row with GGML's
 * reference quantizers (runtime/kernels.h) from the f32 values, q4_0 then
 * rearranged into the CPU kernels' groups of eight blocks where the
 * target's layout says so (target.h; CUDA keeps GGML's order).  Merged
 * weights are their sources' rows concatenated.
 *
 * Before the layout, each weight's band is settled: a quantized band is
 * kept only for matrices whose every use is a GEMV operand, a fused
 * convolution's matrix, an embedding table or an expert matrix
 * (ir_reads_matrix) and whose rows are whole 32-blocks; otherwise the
 * weight is stored in bf16 (cols not a multiple of 32, or derived other
 * than as a convolution's matrix) or f32 (read directly as floats by
 * generated code), and its WEIGHT nodes are retyped so that codegen and
 * inspect show the band actually stored.  Computed tables (RoPE cos|sin) are written here in f32,
 * replicating the reference's float32 arithmetic: inv_freq = 1/theta^(2i/d)
 * in f32, angle = f32(pos * inv_freq), then cos/sin of that angle.
 * The file is streamed (never held whole) and hashed as it is written.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checksum.h"
#include "kernels.h"
#include "passes.h"
#include "sc_abi.h"
#include "safetensors.h"

#define ALIGN(x) (((x) + SC_WFILE_ALIGN - 1) & ~(int64_t)(SC_WFILE_ALIGN - 1))

static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

typedef struct Writer {
  FILE *f;
  sc_hash hash;
  unsigned char *buf;
  size_t len, cap;
  int64_t written, total;
  double t0, last;
  int quiet, shown;
  int failed;
} Writer;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void progress(Writer *w) {
  double t = now();
  if (w->quiet || t - w->t0 < 1.0 || t - w->last < 0.25) return;
  w->last = t;
  w->shown = 1;
  fprintf(stderr, "\rspeechc: packing weights %3d%% (%lld / %lld MB)",
          (int)(100.0 * w->written / (w->total ? w->total : 1)),
          (long long)(w->written >> 20), (long long)(w->total >> 20));
  fflush(stderr);
}

/* Append n bytes; flushes whole 32-byte multiples into the hash and file. */
static void put(Writer *w, const void *p, size_t n) {
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 1 << 20;
    while (cap < w->len + n) cap *= 2;
    w->buf = realloc(w->buf, cap);
    IR_ASSERT(w->buf);
    w->cap = cap;
  }
  memcpy(w->buf + w->len, p, n);
  w->len += n;
  if (w->len >= (1 << 20)) {
    size_t whole = w->len & ~(size_t)31;
    sc_hash_update(&w->hash, w->buf, whole);
    if (fwrite(w->buf, 1, whole, w->f) != whole) w->failed = 1;
    memmove(w->buf, w->buf + whole, w->len - whole);
    w->len -= whole;
    w->written += (int64_t)whole;
    progress(w);
  }
}

static void pad_to(Writer *w, int64_t pos_in_data, int64_t target) {
  static const unsigned char zero[SC_WFILE_ALIGN];
  while (pos_in_data < target) {
    int64_t n = target - pos_in_data;
    if (n > SC_WFILE_ALIGN) n = SC_WFILE_ALIGN;
    put(w, zero, (size_t)n);
    pos_in_data += n;
  }
}

static void write_rows(Writer *w, const IrWeight *wt, float *row) {
  for (int s = 0; s < wt->n_src; s++) {
    const StTensor *t = wt->src[s].tensor;
    int64_t cols = wt->cols;
    for (int64_t r = 0; r < wt->src[s].rows; r++) {
      const int64_t tr = ir_src_row(&wt->src[s], r);
      if (wt->band == DT_BF16 && t->dtype == ST_BF16) {
        put(w, t->data + (size_t)(tr * cols) * 2, (size_t)cols * 2);
        continue;
      }
      st_read_f32(t, tr * cols, cols, row);
      if (wt->band == DT_F32) {
        put(w, row, (size_t)cols * 4);
      } else {
        IR_ASSERT(wt->band == DT_BF16);
        for (int64_t c = 0; c < cols; c++) {
          uint16_t b = f32_to_bf16(row[c]);
          put(w, &b, 2);
        }
      }
    }
  }
}

/* The quantized weights: f32 rows through the GGML quantizers; a band
 * the target lays out in the CPU's groups (q8_0 and q4_0 on cpu, target.h) then
 * rearranged into them. */
static void write_quantized(Writer *w, const Target *t, const IrWeight *wt, float *row, unsigned char *q) {
  int64_t cols = wt->cols;
  size_t qbytes = (size_t)ir_band_row_bytes(wt->band, cols);
  const int grouped = target_group(t, wt->band) != 0;
  for (int s = 0; s < wt->n_src; s++) {
    const StTensor *t = wt->src[s].tensor;
    for (int64_t r = 0; r < wt->src[s].rows; r++) {
      st_read_f32(t, ir_src_row(&wt->src[s], r) * cols, cols, row);
      if (wt->band == DT_Q8_0 && !grouped) {
        sc_quantize_row_q8_0(row, (int)cols, q);
        put(w, q, qbytes);
      } else if (wt->band == DT_Q8_0) {
        sc_quantize_row_q8_0(row, (int)cols, q + qbytes);
        sc_pack_row_q8_0(q + qbytes, (int)cols, q);
        put(w, q, qbytes);
      } else if (!grouped) {
        sc_quantize_row_q4_0(row, (int)cols, q);
        put(w, q, qbytes);
      } else {
        sc_quantize_row_q4_0(row, (int)cols, q + qbytes);
        sc_pack_row_q4_0(q + qbytes, (int)cols, q);
        put(w, q, qbytes);
      }
    }
  }
}

static int quantized(DType d) { return sc_band_quantized(ir_wtype(d)); }

/* Settle the band of every quantized weight (see the file comment). */
static void settle_bands(Module *m) {
  for (int gi = 0; gi < m->n_graphs; gi++) {
    Graph *g = &m->graphs[gi];
    for (int i = 0; i < g->n_nodes; i++) {
      const IrNode *n = &g->nodes[i];
      if (n->dead) continue;
      /* a source not read as a matrix by a kernel or gather is read as floats */
      for (int k = 0; k < n->nsrc; k++) {
        const IrNode *src = &g->nodes[n->src[k]];
        if (src->op != OP_WEIGHT) continue;
        IrWeight *wt = &m->weights[src->weight];
        if (quantized(wt->band) && !ir_reads_matrix(n, k)) wt->band = DT_F32;
      }
    }
  }
  for (int i = 0; i < m->n_weights; i++) {
    IrWeight *wt = &m->weights[i];
    /* a convolution's matrix rearranged from the checkpoint (its rows
     * made in pass_pack's write_derived) is quantized row by row as any */
    const int conv = wt->gen == WGEN_CONV || wt->gen == WGEN_CONVT || wt->gen == WGEN_CONVT_POLY;
    if (quantized(wt->band) && (wt->cols % sc_band(ir_wtype(wt->band))->block || (wt->gen != WGEN_NONE && !conv)))
      wt->band = DT_BF16;
  }
  for (int gi = 0; gi < m->n_graphs; gi++)
    for (int i = 0; i < m->graphs[gi].n_nodes; i++) {
      IrNode *n = &m->graphs[gi].nodes[i];
      if (n->op == OP_WEIGHT) n->dtype = m->weights[n->weight].band;
    }
}

static void write_rope(Writer *w, const IrWeight *wt, float *row) {
  int half = wt->gen_rot / 2;
  float *inv = row + wt->cols;
  for (int i = 0; i < half; i++) {
    float e = (float)(2 * i) / (float)wt->gen_rot;
    float base = (float)pow(wt->gen_theta, (double)e);
    inv[i] = 1.0f / base;
  }
  for (int64_t p = 0; p < wt->rows; p++) {
    for (int i = 0; i < half; i++) {
      float ang = (float)p * inv[i];
      row[i] = (float)cos((double)ang);
      row[half + i] = (float)sin((double)ang);
    }
    put(w, row, (size_t)wt->cols * 4);
  }
}

/* moshi's create_sin_embedding, f32 throughout as the package computes it:
 * phase = p / max_period^(i / (half - 1)), row = scale * [cos | sin]. */
static void write_sinpos(Writer *w, const IrWeight *wt, float *row) {
  int half = (int)(wt->cols / 2);
  for (int64_t p = 0; p < wt->rows; p++) {
    for (int i = 0; i < half; i++) {
      float e = half > 1 ? (float)i / (float)(half - 1) : (float)i / 0.0f;
      float ph = (float)p / powf((float)wt->gen_theta, e);
      row[i] = (float)wt->gen_scale * cosf(ph);
      row[half + i] = (float)wt->gen_scale * sinf(ph);
    }
    put(w, row, (size_t)wt->cols * 4);
  }
}

/* One row of f32 values in a quantized band, as write_quantized writes a
 * checkpoint's row (q: scratch of two quantized rows). */
static void put_quantized(Writer *w, const Target *t, const IrWeight *wt, const float *row, unsigned char *q) {
  const size_t qbytes = (size_t)ir_band_row_bytes(wt->band, wt->cols);
  if (wt->band == DT_Q8_0 && !target_group(t, wt->band)) {
    sc_quantize_row_q8_0(row, (int)wt->cols, q);
  } else if (wt->band == DT_Q8_0) {
    sc_quantize_row_q8_0(row, (int)wt->cols, q + qbytes);
    sc_pack_row_q8_0(q + qbytes, (int)wt->cols, q);
  } else if (!target_group(t, wt->band)) {
    sc_quantize_row_q4_0(row, (int)wt->cols, q);
  } else {
    sc_quantize_row_q4_0(row, (int)wt->cols, q + qbytes);
    sc_pack_row_q4_0(q + qbytes, (int)wt->cols, q);
  }
  put(w, q, qbytes);
}

/* One f32 row in the weight's band (f32 or bf16; a derived weight is
 * quantized only when it is a convolution's matrix: write_derived). */
static void put_row(Writer *w, const IrWeight *wt, const float *row) {
  if (wt->band == DT_F32) {
    put(w, row, (size_t)wt->cols * 4);
    return;
  }
  IR_ASSERT(wt->band == DT_BF16);
  for (int64_t c = 0; c < wt->cols; c++) {
    uint16_t b = f32_to_bf16(row[c]);
    put(w, &b, 2);
  }
}

/* The whole of a source tensor as f32 (a conv weight: at most a few
 * hundred MB in published models); NULL when memory runs out. */
static float *read_all(const IrWeight *wt, int s) {
  const StTensor *t = wt->src[s].tensor;
  float *a = malloc((size_t)t->numel * sizeof *a);
  if (a) st_read_f32(t, 0, t->numel, a);
  return a;
}

/* The WGEN_CODEBOOK / _CONV / _CONVT / _CONVT_DW / _NEG_EXP / _REPEAT /
 * _CONVT_POLY weights (ir.h). */
static int write_derived(Writer *w, const Target *t, const IrWeight *wt, float *row, unsigned char *q) {
  float *a = read_all(wt, 0), *b = wt->gen == WGEN_CODEBOOK ? read_all(wt, 1) : NULL;
  if (!a || (wt->gen == WGEN_CODEBOOK && !b)) {
    free(a);
    free(b);
    return -1;
  }
  const int64_t R = wt->rows, C = wt->cols, k = wt->gen_k;
  for (int64_t r = 0; r < R; r++) {
    if (wt->gen == WGEN_CODEBOOK) {
      const float u = b[r] > 1e-5f ? b[r] : 1e-5f; /* clamp(min=epsilon) */
      for (int64_t c = 0; c < C; c++) row[c] = a[r * C + c] / u;
    } else if (wt->gen == WGEN_NEG_EXP) { /* torch: -A_log.float().exp() */
      for (int64_t c = 0; c < C; c++) row[c] = -expf(a[r * C + c]);
    } else if (wt->gen == WGEN_REPEAT) {
      const int64_t n = ((const StTensor *)wt->src[0].tensor)->numel;
      for (int64_t c = 0; c < C; c++) row[c] = a[c % n];
    } else if (wt->gen == WGEN_CONVT_POLY) { /* row m*Cout + o, column j*Cin + c */
      const int64_t s = wt->gen_stride, cout = R / s, n = (k + s - 1) / s, cin = C / n;
      const int64_t m = r / cout, o = r % cout;
      for (int64_t j = 0; j < n; j++) {
        const int64_t tap = m + (n - 1 - j) * s;
        for (int64_t c = 0; c < cin; c++) row[j * cin + c] = tap < k ? a[(c * cout + o) * k + tap] : 0.0f;
      }
    } else if (wt->gen == WGEN_CONVT_DW) { /* row j*C + o: tap j of channel o alone */
      const int64_t j = r / C, o = r % C;
      for (int64_t c = 0; c < C; c++) row[c] = c == o ? a[c * k + j] : 0.0f;
    } else { /* the layouts IM2COL and OVERLAP_ADD read (kernels.h) */
      const int conv = wt->gen == WGEN_CONV;
      const int kind = conv ? SC_CONV_IM2COL : SC_CONV_TRANSPOSED;
      const int d0 = conv ? (int)R : (int)C, d1 = conv ? (int)(C / k) : (int)(R / k);
      for (int64_t c = 0; c < C; c++) row[c] = a[sc_conv_weight_src(kind, d0, d1, (int)k, (size_t)r, (size_t)c)];
    }
    if (quantized(wt->band)) put_quantized(w, t, wt, row, q);
    else put_row(w, wt, row);
  }
  free(a);
  free(b);
  return 0;
}

int pass_pack(Module *m, const Target *t, FILE *f, const char *path, uint64_t *checksum, uint64_t *data_bytes,
              uint64_t build_id, int quiet, sc_error *err) {
  int64_t off = 0, max_cols = 0;
  settle_bands(m);
  for (int i = 0; i < m->n_weights; i++) {
    IrWeight *wt = &m->weights[i];
    if (!wt->used) continue;
    wt->offset = ALIGN(off);
    wt->bytes = wt->sets * wt->rows * ir_band_row_bytes(wt->band, wt->cols);
    off = wt->offset + wt->bytes;
    if (wt->cols > max_cols) max_cols = wt->cols;
  }
  int64_t total = ALIGN(off);
  Writer w = {0};
  w.f = f;
  sc_hash_init(&w.hash);
  w.total = total;
  w.quiet = quiet;
  w.t0 = w.last = now();
  /* header placeholder; rewritten once the checksum is known */
  unsigned char header[SC_WFILE_HEADER] = {0};
  if (fwrite(header, 1, sizeof header, w.f) != sizeof header) w.failed = 1;
  float *row = malloc((size_t)(2 * max_cols + 16) * sizeof *row);
  unsigned char *qrow = malloc(2 * (size_t)ir_band_row_bytes(DT_Q8_0, max_cols) + 64);
  IR_ASSERT(row && qrow);
  int64_t pos = 0;
  for (int i = 0; i < m->n_weights; i++) {
    IrWeight *wt = &m->weights[i];
    if (!wt->used) continue;
    pad_to(&w, pos, wt->offset);
    if (wt->gen == WGEN_ROPE) write_rope(&w, wt, row);
    else if (wt->gen == WGEN_SINPOS) write_sinpos(&w, wt, row);
    else if (wt->gen == WGEN_ZERO) {
      memset(row, 0, (size_t)wt->cols * sizeof *row);
      for (int64_t r = 0; r < wt->sets * wt->rows; r++) put_row(&w, wt, row);
    }
    else if (wt->gen != WGEN_NONE) {
      if (write_derived(&w, t, wt, row, qrow)) {
        free(row);
        free(qrow);
        free(w.buf);
        fclose(w.f);
        return sc_fail(err, SC_ERUNTIME, "%s: out of memory deriving weight %s", path, wt->name);
      }
    } else if (quantized(wt->band)) write_quantized(&w, t, wt, row, qrow);
    else write_rows(&w, wt, row);
    pos = wt->offset + wt->bytes;
  }
  pad_to(&w, pos, total);
  free(row);
  free(qrow);
  IR_ASSERT(w.len % 32 == 0);
  sc_hash_update(&w.hash, w.buf, w.len);
  if (fwrite(w.buf, 1, w.len, w.f) != w.len) w.failed = 1;
  free(w.buf);
  *checksum = sc_hash_final(&w.hash);
  *data_bytes = (uint64_t)total;
  sc_wfile_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, SC_WFILE_MAGIC, 8);
  h.version = SC_WFILE_VERSION;
  h.header_bytes = SC_WFILE_HEADER;
  h.data_bytes = (uint64_t)total;
  h.checksum = *checksum;
  h.build_id = build_id;
  snprintf(h.model_type, sizeof h.model_type, "%s", m->model_type);
  memcpy(header, &h, sizeof h);
  if (fseek(w.f, 0, SEEK_SET) || fwrite(header, 1, sizeof header, w.f) != sizeof header) w.failed = 1;
  if (fclose(w.f)) w.failed = 1;
  if (w.shown) fprintf(stderr, "\rspeechc: packing weights 100%% (%lld MB)          \n", (long long)(total >> 20));
  if (w.failed) return sc_fail(err, SC_EINPUT, "%s: write failed (disk full?)", path);
  return SC_OK;
}
