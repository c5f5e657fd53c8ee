/*
 * bench_cuda.c — speed of a --target cuda model on this machine's GPU, in
 * one process (tests/gpu/run.sh runs it):
 *
 *   copy    device-to-device copy bandwidth, 1 GiB by cuMemcpyDtoD, bytes
 *           read + written per second: the ceiling every figure is held to;
 *   gemv    the model's own decode GEMV kernels, loaded from its PTX and
 *           launched on weight copies that together exceed L2 several
 *           times: weight bytes per second;
 *   prefill (plain LMs) sc_prefill of --prefill tokens (default: the
 *           prompt) after a reset, median of 5 after a warm-up: tokens/s;
 *   decode  (plain LMs) sc_decode after a prompt, greedy: tokens/s, weight
 *           bytes read per token / time, fraction of the copy bandwidth;
 *           then sc_generate, greedy, whose decode steps pick the token
 *           on the device (the logits stay there): tokens/s end to end;
 *   tts     (Qwen3-TTS) sc_tts_generate, greedy, EOS suppressed: frames/s,
 *           real-time factor (12.5 frames per second of audio), weight
 *           bytes per frame (talker once, code predictor 15 times) / time;
 *           then again with the default sampling (talker: top-k 50,
 *           temperature 0.9, repetition penalty 1.05; predictor: top-k 50,
 *           temperature 0.9), EOS still suppressed.
 *
 *   bench_cuda model.so [--steps N] [--prompt P] [--prefill P2] [--frames F] [--no-gemv]
 *
 * Prints one `bench:` line per measurement (key=value) for scripts.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sc_abi.h"
#include "speechc.h"

const sc_model_desc *sc_model_desc_of(const sc_model *m); /* runtime/model.c */
long long rt_cuda_launches(const sc_session *s);          /* runtime/cuda_rt.c */
long long rt_cuda_round_trips(const sc_session *s);

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;

static struct {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(int *, int);
  CUresult (*DeviceGetName)(char *, int, int);
  CUresult (*PrimaryCtxRetain)(CUcontext *, int);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)(void);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventRecord)(CUevent, void *);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void *, void **, void **);
} cu;

static int load_driver(void) {
  const char *lib = getenv("SPEECHC_LIBCUDA"); /* as the runtime: tests may use the emulator */
  void *dl = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!dl) return 0;
  struct { void **p; const char *n; } s[] = {
      {(void **)&cu.Init, "cuInit"}, {(void **)&cu.DeviceGet, "cuDeviceGet"},
      {(void **)&cu.DeviceGetName, "cuDeviceGetName"},
      {(void **)&cu.PrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
      {(void **)&cu.CtxSetCurrent, "cuCtxSetCurrent"}, {(void **)&cu.CtxSynchronize, "cuCtxSynchronize"},
      {(void **)&cu.MemAlloc, "cuMemAlloc_v2"}, {(void **)&cu.MemFree, "cuMemFree_v2"},
      {(void **)&cu.MemsetD8, "cuMemsetD8_v2"}, {(void **)&cu.MemcpyDtoD, "cuMemcpyDtoD_v2"},
      {(void **)&cu.EventCreate, "cuEventCreate"}, {(void **)&cu.EventRecord, "cuEventRecord"},
      {(void **)&cu.EventSynchronize, "cuEventSynchronize"},
      {(void **)&cu.EventElapsedTime, "cuEventElapsedTime"},
      {(void **)&cu.ModuleLoadData, "cuModuleLoadData"},
      {(void **)&cu.ModuleGetFunction, "cuModuleGetFunction"}, {(void **)&cu.LaunchKernel, "cuLaunchKernel"},
  };
  for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
    if (!(*s[i].p = dlsym(dl, s[i].n))) return 0;
  int dev = 0;
  CUcontext ctx;
  return !cu.Init(0) && !cu.DeviceGet(&dev, 0) && !cu.PrimaryCtxRetain(&ctx, dev) && !cu.CtxSetCurrent(ctx);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* GB/s (1e9 bytes) of a device-to-device copy, read + write counted. */
static double copy_bandwidth(void) {
  const size_t n = (size_t)1 << 30;
  CUdeviceptr a = 0, b = 0;
  CUevent e0, e1;
  if (cu.MemAlloc(&a, n) || cu.MemAlloc(&b, n)) return 0;
  cu.MemsetD8(a, 1, n);
  cu.EventCreate(&e0, 0);
  cu.EventCreate(&e1, 0);
  for (int i = 0; i < 2; i++) cu.MemcpyDtoD(b, a, n);
  const int reps = 10;
  cu.EventRecord(e0, NULL);
  for (int i = 0; i < reps; i++) cu.MemcpyDtoD(i & 1 ? a : b, i & 1 ? b : a, n);
  cu.EventRecord(e1, NULL);
  cu.EventSynchronize(e1);
  float ms = 0;
  cu.EventElapsedTime(&ms, e0, e1);
  cu.MemFree(a);
  cu.MemFree(b);
  return 2.0 * n * reps / (ms * 1e-3) / 1e9;
}

static const sc_tensor_info *tensor(const sc_model_desc *d, const char *name) {
  for (int i = 0; i < d->n_tensors; i++)
    if (!strcmp(d->tensors[i].name, name)) return &d->tensors[i];
  return NULL;
}

/* One decode GEMV kernel of the model on rotating weight copies.  The
 * arguments follow codegen/cg_cuda.c: kind 0 NORM_LINEAR (io, x, nw, w, y, T),
 * 1 LINEAR_SWIGLU (io, x, w, y, T), 2 LINEAR_ADD (io, x, w, r, y, T),
 * 3 LINEAR (io, x, w, y, T), 4 LINEAR_SWIGLU with its norm (io, x, nw, w,
 * y, T); grid ceil(rows / (8 * clamp(rows / 4096, 1, 4))) blocks of 256. */
static void gemv(CUmodule mod, const sc_model_desc *d, const char *kernel, const char *weight, int kind,
                 double copy_gbps) {
  const sc_tensor_info *t = tensor(d, weight);
  CUfunction f;
  char alt[160];
  /* identical kernels are shared under the first user's name: the prefill
   * graph's head reads one row too, and comes first */
  const char *dec = strstr(kernel, "decode_");
  if (dec) snprintf(alt, sizeof alt, "%.*sprefill_%s", (int)(dec - kernel), kernel, dec + 7);
  else snprintf(alt, sizeof alt, "%s", kernel);
  if (!t || (cu.ModuleGetFunction(&f, mod, kernel) && cu.ModuleGetFunction(&f, mod, (kernel = alt)))) {
    printf("gemv %-28s (not in this model)\n", kernel);
    return;
  }
  long long R = kind == 1 || kind == 4 ? t->rows / 2 : t->rows, C = t->cols;
  size_t wbytes = (size_t)t->bytes / (size_t)(t->sets > 0 ? t->sets : 1);
  int copies = (int)((((size_t)1 << 30) + wbytes - 1) / wbytes);
  if (copies < 2) copies = 2;
  CUdeviceptr w = 0, io = 0, x = 0, nw = 0, y = 0, r = 0;
  if (cu.MemAlloc(&w, wbytes * copies) || cu.MemAlloc(&io, 64) || cu.MemAlloc(&x, C * 4) ||
      cu.MemAlloc(&nw, C * 4) || cu.MemAlloc(&y, (size_t)R * 4 + 256) || cu.MemAlloc(&r, (size_t)R * 4 + 256)) {
    printf("gemv %-28s (out of device memory)\n", kernel);
    return;
  }
  cu.MemsetD8(w, 0x3c, wbytes * copies); /* small finite values in f32 and bf16 */
  cu.MemsetD8(io, 0, 64);
  cu.MemsetD8(x, 0x3c, C * 4);
  cu.MemsetD8(nw, 0x3f, C * 4);
  cu.MemsetD8(r, 0, (size_t)R * 4);
  long long rw = R / 4096;
  rw = rw < 1 ? 1 : rw > 4 ? 4 : rw;
  unsigned gx = (unsigned)((R + 8 * rw - 1) / (8 * rw));
  int T = 1;
  CUdeviceptr wk = w;
  void *a_norm[] = {&io, &x, &nw, &wk, &y, &T}, *a_swiglu[] = {&io, &x, &wk, &y, &T},
       *a_add[] = {&io, &x, &wk, &r, &y, &T};
  void **args = kind == 0 || kind == 4 ? a_norm : kind == 2 ? a_add : a_swiglu; /* 3: LINEAR (io, x, w, y, T) */
  CUevent e0, e1;
  cu.EventCreate(&e0, 0);
  cu.EventCreate(&e1, 0);
  int reps = copies * 4 < 40 ? 40 : copies * 4, bad = 0;
  for (int i = 0; i < copies; i++) {
    wk = w + (CUdeviceptr)i * wbytes;
    bad |= cu.LaunchKernel(f, gx, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
  }
  cu.EventRecord(e0, NULL);
  for (int i = 0; i < reps; i++) {
    wk = w + (CUdeviceptr)(i % copies) * wbytes;
    bad |= cu.LaunchKernel(f, gx, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
  }
  cu.EventRecord(e1, NULL);
  cu.EventSynchronize(e1);
  float ms = 0;
  cu.EventElapsedTime(&ms, e0, e1);
  double us = ms * 1e3 / reps, gbps = wbytes / (us * 1e-6) / 1e9;
  if (bad) printf("gemv %-28s launch failed\n", kernel);
  else
    printf("gemv %-28s [%lld x %lld] %s %7.2f MB: %8.2f us  %7.1f GB/s  %5.1f%% of copy\n", kernel, R, C,
           t->wtype == SC_W_BF16 ? "bf16" : t->wtype == SC_W_Q8_0 ? "q8_0" : t->wtype == SC_W_Q4_0 ? "q4_0" : "f32",
           wbytes / 1e6, us, gbps, 100 * gbps / copy_gbps);
  printf("bench: what=gemv kernel=%s rows=%lld cols=%lld us=%.3f gbps=%.1f frac=%.3f\n", kernel, R, C, us, gbps,
         gbps / copy_gbps);
  cu.MemFree(w), cu.MemFree(io), cu.MemFree(x), cu.MemFree(nw), cu.MemFree(y), cu.MemFree(r);
}

static int argmax(const float *v, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  int steps = 128, prompt = 32, frames = 64, do_gemv = 1, prefill = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--prompt") && i + 1 < argc) prompt = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--frames") && i + 1 < argc) frames = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--prefill") && i + 1 < argc) prefill = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-gemv")) do_gemv = 0;
    else path = argv[i];
  }
  if (!path) {
    fprintf(stderr, "usage: bench_cuda model.so [--steps N] [--prompt P] [--prefill P2] [--frames F] [--no-gemv]\n");
    return 1;
  }
  if (!load_driver()) {
    fprintf(stderr, "bench_cuda: no CUDA driver or device\n");
    return 3;
  }
  char gpu[128] = "?";
  cu.DeviceGetName(gpu, sizeof gpu, 0);
  double copy = copy_bandwidth();
  printf("gpu %s: device-to-device copy %.1f GB/s (read + write)\n", gpu, copy);
  printf("bench: what=copy gbps=%.1f\n", copy);

  sc_model *m = NULL;
  sc_session *s = NULL;
  sc_error err = {0};
  double t0 = now();
  if (sc_model_open(path, NULL, &m, &err) || sc_session_open(m, &s, &err)) {
    fprintf(stderr, "bench_cuda: %s\n", err.msg);
    return err.code;
  }
  const sc_model_desc *d = sc_model_desc_of(m);
  printf("model %s: %s %s, %.1f MB of weights, opened (upload included) in %.2f s\n", path, d->family,
         d->model_type, d->weight_bytes / 1e6, now() - t0);
  int tts = !strcmp(d->family, "qwen3_tts");

  if (do_gemv) {
    CUmodule mod;
    if (cu.ModuleLoadData(&mod, d->device_code)) {
      printf("gemv: cannot load the model's PTX\n");
    } else {
      const char *g = tts ? "talker_decode_talker_layer0_" : "decode_layer0_";
      const char *w = tts ? "talker.layer0." : "layer0.";
      char kn[128], wn[128];
      struct { const char *k, *w; int kind; } list[] = {
          {"qkv", "qkv", 0}, {"attn_res", "o_proj", 2}, {"swiglu", "gateup", 4}, {"mlp_res", "down_proj", 2}};
      for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) {
        snprintf(kn, sizeof kn, "%s%s", g, list[i].k);
        snprintf(wn, sizeof wn, "%s%s", w, list[i].w);
        gemv(mod, d, kn, wn, list[i].kind, copy);
      }
      if (!tts) gemv(mod, d, "decode_lm_head", tensor(d, "lm_head") ? "lm_head" : "embed_tokens", 0, copy);
      else gemv(mod, d, "talker_decode_codec_head", "codec_head", 3, copy);
    }
  }

  /* weight bytes one step reads */
  double step_bytes = 0, frame_bytes = 0;
  for (int i = 0; i < d->n_tensors; i++) {
    const sc_tensor_info *t = &d->tensors[i];
    const char *n = t->name;
    if (!tts) {
      int table = !strcmp(n, "embed_tokens") && tensor(d, "lm_head");
      if (!table && strncmp(n, "rope", 4)) step_bytes += t->bytes;
    } else if (!strncmp(n, "talker.", 7) || !strcmp(n, "codec_head")) {
      frame_bytes += t->bytes;
    } else if (!strncmp(n, "pred.layer", 10) || !strcmp(n, "pred.norm") || !strncmp(n, "pred.proj", 9)) {
      frame_bytes += 15.0 * t->bytes;
    } else if (!strcmp(n, "pred.lm_head")) {
      frame_bytes += t->bytes;
    }
  }

  if (!tts) {
    int32_t *ids = malloc((size_t)prompt * sizeof *ids);
    for (int i = 0; i < prompt; i++) ids[i] = (i * 7919 + 13) % d->vocab;
    if (prompt + 8 + steps > d->max_context) steps = d->max_context - prompt - 8;
    t0 = now();
    int rc = sc_prefill(s, ids, prompt, &err);
    double tp = now() - t0;
    int vocab = 0, tok = argmax(sc_logits(s, &vocab), d->vocab);
    for (int i = 0; i < 8 && !rc; i++) { /* warm-up: the decode graph is captured here */
      rc = sc_decode(s, tok, &err);
      tok = argmax(sc_logits(s, NULL), vocab);
    }
    double td = 0, ta = 0;
    long long k0 = rt_cuda_launches(s);
    for (int i = 0; i < steps && !rc; i++) {
      double a = now();
      rc = sc_decode(s, tok, &err);
      double b = now();
      tok = argmax(sc_logits(s, NULL), vocab);
      td += b - a;
      ta += now() - b;
    }
    double kernels = (double)(rt_cuda_launches(s) - k0) / (steps > 0 ? steps : 1);
    /* sc_generate: greedy, the decode steps' argmax on the device */
    sc_sample_params gp = sc_sample_defaults();
    gp.greedy = 1;
    int32_t *gen = malloc((size_t)(steps + 1) * sizeof *gen);
    int n_gen = 0;
    sc_session_reset(s);
    if (!rc) rc = sc_generate(s, ids, prompt, 9, &gp, -1, gen, &n_gen, NULL, NULL, &err); /* warm-up */
    sc_session_reset(s);
    double tg0 = now(), tgp = 0;
    if (!rc) rc = sc_prefill(s, ids, prompt, &err);
    tgp = now() - tg0;
    sc_session_reset(s);
    long long trips = rt_cuda_round_trips(s);
    tg0 = now();
    if (!rc) rc = sc_generate(s, ids, prompt, steps + 1, &gp, -1, gen, &n_gen, NULL, NULL, &err);
    double tg = now() - tg0 - tgp; /* the decode steps: generate less one prefill */
    trips = rt_cuda_round_trips(s) - trips;
    free(gen);
    if (rc) {
      fprintf(stderr, "bench_cuda: %s\n", err.msg);
      return rc;
    }
    double tps = steps / td, gbps = step_bytes * tps / 1e9;
    printf("prefill %d tokens: %.2f ms (%.0f tokens/s)\n", prompt, tp * 1e3, prompt / tp);
    printf("decode %d steps at positions %d..%d: %.3f ms/token (sc_decode, logits copied back), %.1f tokens/s; "
           "%.1f MB of weights per token -> %.1f GB/s = %.1f%% of copy; host argmax %.3f ms/token\n",
           steps, prompt + 8, prompt + 8 + steps, td / steps * 1e3, tps, step_bytes / 1e6, gbps,
           100 * gbps / copy, ta / steps * 1e3);
    printf("bench: what=decode tok_s=%.2f ms=%.4f mb=%.1f gbps=%.1f frac=%.3f kernels=%.0f\n", tps,
           td / steps * 1e3, step_bytes / 1e6, gbps, gbps / copy, kernels);
    double gtps = steps / tg, ggbps = step_bytes * gtps / 1e9;
    printf("generate %d tokens (sc_generate, greedy, argmax on the device): %.3f ms/token, %.1f tokens/s -> "
           "%.1f GB/s = %.1f%% of copy; %lld host round trips; %.0f kernels per decode step\n",
           steps, tg / steps * 1e3, gtps, ggbps, 100 * ggbps / copy, trips, kernels);
    printf("bench: what=generate tok_s=%.2f ms=%.4f gbps=%.1f frac=%.3f trips=%lld\n", gtps, tg / steps * 1e3,
           ggbps, ggbps / copy, trips);
    free(ids);
    /* prefill alone: P2 tokens from an empty cache, warm */
    const int P2 = prefill > 0 ? (prefill < d->max_context ? prefill : d->max_context) : prompt;
    ids = malloc((size_t)P2 * sizeof *ids);
    for (int i = 0; i < P2; i++) ids[i] = (i * 7919 + 13) % d->vocab;
    double tpf[5];
    for (int r = -1; r < 5 && !rc; r++) {
      sc_session_reset(s);
      t0 = now();
      rc = sc_prefill(s, ids, P2, &err);
      sc_logits(s, NULL);
      if (r >= 0) tpf[r] = now() - t0;
    }
    free(ids);
    if (rc) {
      fprintf(stderr, "bench_cuda: %s\n", err.msg);
      return rc;
    }
    for (int i = 0; i < 5; i++) /* median */
      for (int j = i + 1; j < 5; j++)
        if (tpf[j] < tpf[i]) { double x = tpf[i]; tpf[i] = tpf[j]; tpf[j] = x; }
    printf("prefill %d tokens from an empty cache (median of 5, warm): %.2f ms, %.0f tokens/s\n", P2,
           tpf[2] * 1e3, P2 / tpf[2]);
    printf("bench: what=prefill tokens=%d ms=%.3f tok_s=%.1f\n", P2, tpf[2] * 1e3, P2 / tpf[2]);
  } else {
    int32_t text[24];
    for (int i = 0; i < 24; i++) text[i] = (i * 37 + 5) % 480; /* inside every text vocabulary */
    sc_tts_params p = sc_tts_defaults();
    p.text_ids = text;
    p.n_text = 24;
    p.talker.greedy = p.predictor.greedy = 1;
    p.max_frames = frames;
    p.min_frames = frames; /* no EOS: every run makes `frames` frames */
    int G = sc_tts_codebooks(m), n = 0;
    int32_t *codes = malloc((size_t)frames * (G > 0 ? G : 16) * sizeof *codes);
    p.max_frames = 4;
    p.min_frames = 4;
    int rc = sc_tts_generate(s, &p, codes, &n, NULL, NULL, &err); /* warm-up, graphs */
    p.max_frames = p.min_frames = frames;
    long long k0 = rt_cuda_launches(s), trips = rt_cuda_round_trips(s);
    t0 = now();
    if (!rc) rc = sc_tts_generate(s, &p, codes, &n, NULL, NULL, &err);
    double t = now() - t0;
    double kernels = n ? (double)(rt_cuda_launches(s) - k0) / n : 0, rt = n ? (double)(rt_cuda_round_trips(s) - trips) / n : 0;
    if (rc) {
      fprintf(stderr, "bench_cuda: %s\n", err.msg);
      return rc;
    }
    double fps = n / t, gbps = frame_bytes * fps / 1e9;
    printf("tts %d frames (prompt included): %.2f ms/frame, %.1f frames/s = %.1fx real time; "
           "%.1f MB of weights per frame -> %.1f GB/s = %.1f%% of copy; %.0f kernels and %.1f host round "
           "trips per frame\n",
           n, t / n * 1e3, fps, fps / 12.5, frame_bytes / 1e6, gbps, 100 * gbps / copy, kernels, rt);
    printf("bench: what=tts frames=%d fps=%.2f rtf=%.2f mb=%.1f gbps=%.1f frac=%.3f kernels=%.0f trips=%.1f\n", n,
           fps, fps / 12.5, frame_bytes / 1e6, gbps, gbps / copy, kernels, rt);
    /* the default sampling (EOS still suppressed, so that every run makes
     * `frames` frames) */
    sc_tts_params q = sc_tts_defaults();
    q.text_ids = text;
    q.n_text = 24;
    q.talker.seed = q.predictor.seed = 1;
    q.max_frames = q.min_frames = 4;
    rc = sc_tts_generate(s, &q, codes, &n, NULL, NULL, &err); /* warm-up, graphs */
    q.max_frames = q.min_frames = frames;
    trips = rt_cuda_round_trips(s);
    t0 = now();
    if (!rc) rc = sc_tts_generate(s, &q, codes, &n, NULL, NULL, &err);
    t = now() - t0;
    rt = n ? (double)(rt_cuda_round_trips(s) - trips) / n : 0;
    if (rc) {
      fprintf(stderr, "bench_cuda: %s\n", err.msg);
      return rc;
    }
    fps = n / t;
    printf("tts sampled (top-k 50, temperature 0.9, talker penalty 1.05) %d frames: %.2f ms/frame, %.1f frames/s "
           "= %.1fx real time; %.1f host round trips per frame\n", n, t / n * 1e3, fps, fps / 12.5, rt);
    printf("bench: what=tts_sampled frames=%d fps=%.2f rtf=%.2f trips=%.1f\n", n, fps, fps / 12.5, rt);
    free(codes);
  }
  sc_session_close(s);
  sc_model_close(m);
  return 0;
}
