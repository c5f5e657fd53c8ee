/*
 * main.c — the speechc command line: build, inspect, run.
 * Exit codes: 0 ok, 1 usage, 2 bad input, 3 runtime failure (speechc.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
#include "file.h"
#include "json.h"
#include "cli.h"
#include "sc_abi.h"
#include "sc_bands.h"
#include "speechc.h"
#include "tokenizer.h"

const sc_model_desc *sc_model_desc_of(const sc_model *m);
int cmd_bench(int argc, char **argv); /* cmd_bench.c */
int cmd_tts(int argc, char **argv);
int cmd_tokenize(int argc, char **argv); /* cmd_tokenize.c */
int cmd_decode(int argc, char **argv);   /* cmd_decode.c */
int cmd_encode(int argc, char **argv);   /* cmd_encode.c */
int cmd_moshi(int argc, char **argv);    /* cmd_moshi.c */
int cmd_serve(int argc, char **argv);    /* cmd_serve.c */
extern const char *const usage_tts, *const usage_bench, *const usage_tokenize, *const usage_decode,
    *const usage_encode, *const usage_serve, *const usage_moshi;

static const char *const usage_main =
    "usage: speechc <command> [options]\n"
    "\n"
    "speechc compiles transformer checkpoints (config.json + safetensors) ahead of time\n"
    "into a shared object plus a packed weight file, and runs them.\n"
    "\n"
    "commands:\n"
    "  build MODEL_DIR -o model.so   compile a checkpoint\n"
    "  inspect model.so              show family, shapes, entry points, weights\n"
    "  run model.so --ids 1,2,3      generate token ids with a plain LM\n"
    "  bench model.so                decode tokens/s against measured read bandwidth\n"
    "  tts model.so --text-ids ...   Qwen3-TTS codec frames from text token ids\n"
    "  tokenize DIR \"text\"          Qwen tokenizer ids of a text (--decode: ids to text)\n"
    "  decode codec.so CODES -o a.wav  codec codes to audio (a speech_tokenizer/ build)\n"
    "  encode mimi.so IN.wav -o codes.json  audio to Mimi codes\n"
    "  moshi model.so --user-codes F --codes-out F   Moshi's step loop on codes (LMGen)\n"
    "  serve model.so [--port N]     a Qwen3-TTS model over HTTP (OpenAI's /v1/audio/speech)\n"
    "  help COMMAND                  options of one command\n"
    "\n"
    "exit codes: 0 ok, 1 usage error, 2 bad input file, 3 runtime failure\n";

static const char *const usage_build =
    "usage: speechc build MODEL_DIR -o OUT.so [options]\n"
    "\n"
    "Compiles the checkpoint in MODEL_DIR (config.json plus model.safetensors, or shards\n"
    "listed by model.safetensors.index.json) into OUT.so and, beside it, the weight file\n"
    "OUT.<id>.weights that OUT.so names (<id>: 16 hex digits that change with the weights).\n"
    "OUT may replace a previous build, never an input of the build nor a non-regular file.\n"
    "\n"
    "  -o, --output PATH      the shared object to write (required)\n"
    "  --cc tcc|gcc|clang     toolchain: tcc = embedded libtcc (default, needs no C\n"
    "                         compiler; portable code); gcc/clang = system compiler\n"
    "                         with -O3 -march=native (the artifact then needs this CPU's\n"
    "                         features)\n"
    "  --target cpu|cuda|metal  code target (default cpu).\n"
    "                         cuda: kernels compiled to PTX by NVRTC at build time\n"
    "                         (needs the CUDA toolkit here, a GPU and driver at run time)\n"
    "                         metal: kernels in Metal Shading Language, compiled by the\n"
    "                         Metal framework when the model loads (macOS, Apple GPU)\n"
    "  --cuda-arch ARCH       sm_80, sm_90, compute_80, ... (default compute_80: PTX for\n"
    "                         Ampere and later, compiled by the driver at load)\n"
    "  --weights f32|bf16|q8_0|q4_0  weight band (default f32; q8_0/q4_0: GGML blocks of 32)\n"
    "  --max-context N        KV cache length in tokens (default min(2048,\n"
    "                         max_position_embeddings)); a codec decoder: frames per\n"
    "                         stream (default max_position_embeddings, 8000 = 10.7 min);\n"
    "                         Moshi: 80 ms steps a conversation holds (default 8192 =\n"
    "                         10.9 min; its attention keeps the config's context ring,\n"
    "                         and each step costs a row of RoPE table, 512 B at the 7B)\n"
    "  --prefill-chunk N      tokens per prefill call (default 128); a codec decoder:\n"
    "                         frames per call (default 8; the later blocks run a frame\n"
    "                         at a time within a call)\n"
    "  --max-batch N          Qwen3/Llama and Qwen3-TTS: sessions one batched step carries\n"
    "                         (sc_batch_step, sc_tts_batch_step, bench --streams, tts with\n"
    "                         several --text; default 16; 1: no batch entries)\n"
    "  --delta-chunk N        Gated DeltaNet prompts (Qwen3.5, Qwen3-Next) in the chunkwise\n"
    "                         form, N tokens per chunk (1..256; default 0: token by token,\n"
    "                         faster on the CPUs measured so far; same function)\n"
    "  --emit-dir DIR         keep the generated source (model.c, sc_abi.h) in DIR\n"
    "  --dump-ir[=PASS]       print the IR after every pass, or after PASS only\n"
    "                         (frontend, specialize, fuse, plan)\n"
    "  --no-fuse              skip the fusion pass (same numbers, slower)\n"
    "  --max-session-mb N     refuse a build whose session (KV caches, scratch, logits)\n"
    "                         needs more than N MB (default 65536 = 64 GiB)\n"
    "  --check-numerics       every entry point checks its outputs and fails (exit 3)\n"
    "                         naming the entry and the first NaN/inf index\n"
    "  --no-codec             a Qwen3-TTS checkpoint with speech_tokenizer/: build only\n"
    "                         the talker (default: also its codec decoder, OUT.codec.so,\n"
    "                         which speechc tts uses for audio; cpu); a Moshi checkpoint\n"
    "                         whose mimi_name file is present: build only the LM (default:\n"
    "                         also that Mimi, as OUT.codec.so; cpu)\n"
    "  --codec-weights f32|bf16  the codec decoder's weight band (default f32, the exact\n"
    "                         path; bf16: ~3x faster on CPUs with AMX, whose tiles then\n"
    "                         multiply bf16 activations too: a waveform ~33 dB SNR from\n"
    "                         f32's on the test decoder, above the official bf16 decode's)\n"
    "  -q, --quiet            no progress lines\n";

static const char *const usage_inspect =
    "usage: speechc inspect model.so\n"
    "\n"
    "Prints the model family, config, entry points with their buffer sizes, the weight\n"
    "file and every packed tensor.  Also verifies the weight file's checksum.\n";

static const char *const usage_run =
    "usage: speechc run model.so --ids 1,2,3 [--ids 4,5 ...] [options]\n"
    "\n"
    "Feeds the prompt token ids and prints the generated ids, space-separated.\n"
    "Several --ids: one line per prompt, in order, the prompts generated together\n"
    "(one batched step for all of them, sc_generate_batch; each line is what that\n"
    "prompt alone gives, with the same sampling options and seed).\n"
    "\n"
    "  --ids LIST             prompt token ids, comma-separated (required; repeat for\n"
    "                         several prompts, up to 1024)\n"
    "  -n N                   tokens to generate (default 16, or as many as the model's\n"
    "                         --max-context holds after the prompt); more than it holds\n"
    "                         is refused before anything runs\n"
    "  --greedy               argmax decoding (lowest id wins ties)\n"
    "  --temperature T        sampling temperature (default 1.0; 0 = greedy)\n"
    "  --top-k K              keep the K most likely tokens (default 0 = off)\n"
    "  --top-p P              nucleus sampling (default 1.0 = off)\n"
    "  --repetition-penalty R HF-style penalty over earlier tokens (default 1.0)\n"
    "  --seed S               sampler seed (default 0); same seed, same output\n"
    "  --eos ID               stop after this token\n"
    "  --threads N            kernel threads (default 0 = one per physical core)\n";

static int cmd_build(int argc, char **argv) {
  BuildArgs a;
  sc_error err = {0};
  int rc = build_parse_args(argc, argv, &a, &err);
  if (rc) {
    fprintf(stderr, "speechc: %s\n\n%s", err.msg, usage_build);
    return rc;
  }
  if (a.help) {
    fputs(usage_build, stdout);
    return 0;
  }
  a.o.signals = 1;
  return report(build_set(&a, &err), &err);
}

static const char *wtype_name(int w) { return sc_band(w) ? sc_band(w)->name : "?"; }

static int cmd_inspect(int argc, char **argv) {
  const char *path = NULL;
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(usage_inspect, stdout); return 0; }
    if (argv[i][0] == '-') return usage_error(usage_inspect, "unknown option '%s'", argv[i]);
    if (path) return usage_error(usage_inspect, "unexpected argument '%s'", argv[i]);
    path = argv[i];
  }
  if (!path) return usage_error(usage_inspect, "%s", "missing model.so");
  sc_model *m;
  sc_error err = {0};
  if (sc_model_open(path, NULL, &m, &err)) return report(err.code, &err);
  const sc_model_desc *d = sc_model_desc_of(m);
  sc_model_info info;
  sc_model_get_info(m, &info);
  printf("model        %s\n", path);
  printf("family       %s (model_type %s)\n", d->family, d->model_type);
  printf("compiler     speechc %s, target %s, cpu features '%s', ABI %d\n", d->compiler_version,
         d->target, d->cpu_features, d->abi_version);
  printf("shapes       vocab %d, hidden %d, layers %d, max context %d\n", d->vocab, d->hidden,
         d->n_layers, d->max_context);
  printf("config hash  %016llx\n", (unsigned long long)d->config_hash);
  printf("weights      %s: %.2f MB, checksum %016llx (verified)\n", info.weight_file,
         d->weight_bytes / 1048576.0, (unsigned long long)d->weight_checksum);
  printf("state        %.2f MB per session\n", d->state_bytes / 1048576.0);
  if (d->notes && *d->notes) printf("notes        %s\n", d->notes);
  printf("entry points\n");
  int width = 10; /* the longest name ("predictor_prefill", "decode_batch") sets the column */
  for (int i = 0; i < d->n_entries; i++)
    if ((int)strlen(d->entries[i].name) > width) width = (int)strlen(d->entries[i].name);
  for (int i = 0; i < d->n_entries; i++) {
    const sc_entry *e = &d->entries[i];
    printf("  %-*s input %s, up to %d tokens, out %d, scratch %.1f KB\n", width, e->name,
           e->input == SC_IN_IDS ? "ids" : "embeds", e->max_tokens, e->out_cols, e->scratch_bytes / 1024.0);
  }
  printf("tensors (%d)\n", d->n_tensors);
  for (int i = 0; i < d->n_tensors; i++) {
    const sc_tensor_info *t = &d->tensors[i];
    printf("  %-24s %-5s [", t->name, wtype_name(t->wtype));
    if (t->sets > 1) printf("%d, ", t->sets);
    printf("%d, %d]  %10llu bytes  <- %s\n", t->rows, t->cols, (unsigned long long)t->bytes, t->source);
  }
  sc_model_close(m);
  return 0;
}

#define RUN_MAX_PROMPTS 1024

/* Without -n: 16 new tokens, or as many as the context holds after the
 * prompt (with a note); -n given is sc_generate's to refuse. */
static int run_default_n(const sc_model *m, int n_ids, int n_new, int given, int prompt) {
  sc_model_info mi;
  sc_model_get_info(m, &mi);
  const long room = (long)mi.max_context - n_ids + 1;
  if (given || n_ids > mi.max_context || n_new <= room) return n_new;
  char which[32] = "";
  if (prompt) snprintf(which, sizeof which, " (prompt %d)", prompt);
  fprintf(stderr, "speechc: note%s: -n lowered to %ld, what max_context %d holds after the prompt's %d tokens\n",
          which, room, mi.max_context, n_ids);
  return (int)room;
}

/* Several prompts: sessions of m generated together (sc_generate_batch),
 * or one after the other when m has no batch entry.  One line each. */
static int run_many(sc_model *m, const char *const *texts, int n, int n_new, int n_given,
                    const sc_sample_params *sp, int32_t eos, sc_error *err) {
  sc_gen_request *req = calloc((size_t)n, sizeof *req);
  int rc = req ? SC_OK : sc_fail(err, SC_ERUNTIME, "out of memory");
  for (int i = 0; i < n && !rc; i++) {
    int32_t *ids = NULL;
    int n_ids = 0;
    if ((rc = parse_ids("--ids", texts[i], &ids, &n_ids))) {
      sc_fail(err, rc, "--ids (prompt %d): not a list of token ids", i + 1);
      break;
    }
    const int k = run_default_n(m, n_ids, n_new, n_given, i + 1);
    req[i] = (sc_gen_request){NULL, ids, n_ids, k, *sp, eos, malloc(((size_t)k + 1) * sizeof(int32_t)), 0};
    if (!req[i].out) rc = sc_fail(err, SC_ERUNTIME, "out of memory");
    if (!rc) rc = sc_session_open(m, &req[i].session, err);
  }
  if (!rc) {
    sc_batch *probe = NULL;
    sc_error ignored = {0};
    const int batched = sc_batch_new(m, &probe, &ignored) == SC_OK; /* has the batch entry */
    sc_batch_free(probe);
    if (batched) rc = sc_generate_batch(m, req, n, err);
    for (int i = 0; i < n && !rc && !batched; i++)
      rc = sc_generate(req[i].session, req[i].prompt, req[i].n_prompt, req[i].n_new, sp, eos, req[i].out,
                       &req[i].n_out, NULL, NULL, err);
  }
  for (int i = 0; i < n && !rc; i++) {
    for (int k = 0; k < req[i].n_out; k++) printf("%s%d", k ? " " : "", req[i].out[k]);
    printf("\n");
  }
  for (int i = 0; req && i < n; i++) {
    sc_session_close(req[i].session);
    free((int32_t *)req[i].prompt);
    free(req[i].out);
  }
  free(req);
  return rc;
}

static int cmd_run(int argc, char **argv) {
  const char *path = NULL, *ids_text = NULL;
  const char *texts[RUN_MAX_PROMPTS];
  int n_texts = 0;
  long n_new = 16, eos = -1, v;
  int n_given = 0;
  double f;
  sc_sample_params sp = sc_sample_defaults();
  sc_open_opts opts = {.verify_weights = 1, .threads = 0};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage_run, stdout); return 0; }
    if (is_flag(a, "--ids")) {
      if (!(ids_text = flag_value(argc, argv, &i, "--ids"))) return usage_error(usage_run, "%s needs a list", a);
      if (n_texts == RUN_MAX_PROMPTS)
        return usage_error(usage_run, "%s: at most 1024 prompts in one run", "--ids");
      texts[n_texts++] = ids_text;
    } else if (!strcmp(a, "-n")) {
      if (parse_int("-n", i + 1 < argc ? argv[++i] : NULL, 0, 1 << 24, &n_new)) return SC_EUSAGE;
      n_given = 1;
    } else if (!strcmp(a, "--greedy")) {
      sp.greedy = 1;
    } else if (is_flag(a, "--temperature")) {
      if (parse_float("--temperature", flag_value(argc, argv, &i, "--temperature"), 0, 100, &f)) return SC_EUSAGE;
      sp.temperature = (float)f;
    } else if (is_flag(a, "--top-k")) {
      if (parse_int("--top-k", flag_value(argc, argv, &i, "--top-k"), 0, INT_MAX, &v)) return SC_EUSAGE;
      sp.top_k = (int)v;
    } else if (is_flag(a, "--top-p")) {
      if (parse_float("--top-p", flag_value(argc, argv, &i, "--top-p"), 1e-9, 1, &f)) return SC_EUSAGE;
      sp.top_p = (float)f;
    } else if (is_flag(a, "--repetition-penalty")) {
      if (parse_float("--repetition-penalty", flag_value(argc, argv, &i, "--repetition-penalty"), 1e-6, 1e6, &f))
        return SC_EUSAGE;
      sp.repetition_penalty = (float)f;
    } else if (is_flag(a, "--seed")) {
      if (parse_int("--seed", flag_value(argc, argv, &i, "--seed"), 0, LONG_MAX, &v)) return SC_EUSAGE;
      sp.seed = (uint64_t)v;
    } else if (is_flag(a, "--eos")) {
      if (parse_int("--eos", flag_value(argc, argv, &i, "--eos"), 0, INT32_MAX, &eos)) return SC_EUSAGE;
    } else if (is_flag(a, "--threads")) {
      if (parse_int("--threads", flag_value(argc, argv, &i, "--threads"), 0, 1024, &v)) return SC_EUSAGE;
      opts.threads = (int)v;
    } else if (a[0] == '-') {
      return usage_error(usage_run, "unknown option '%s'", a);
    } else if (!path) {
      path = a;
    } else {
      return usage_error(usage_run, "unexpected argument '%s'", a);
    }
  }
  if (!path) return usage_error(usage_run, "%s", "missing model.so");
  if (!ids_text) return usage_error(usage_run, "%s", "missing --ids");
  if (n_texts > 1) {
    for (int i = 0; i < n_texts; i++) { /* every list checked before the model opens */
      int32_t *ids = NULL;
      int n_ids = 0;
      int rc = parse_ids("--ids", texts[i], &ids, &n_ids);
      free(ids);
      if (rc) return rc;
    }
    sc_error err = {0};
    sc_model *m = NULL;
    int rc = sc_model_open(path, &opts, &m, &err);
    if (!rc) rc = check_family(m, path, "llm", &err);
    if (!rc) rc = run_many(m, texts, n_texts, (int)n_new, n_given, &sp, (int32_t)eos, &err);
    sc_model_close(m);
    return report(rc, &err);
  }
  int32_t *ids = NULL, *out = NULL;
  int n_ids = 0, n_out = 0;
  int rc = parse_ids("--ids", ids_text, &ids, &n_ids);
  if (rc) return rc;
  sc_error err = {0};
  sc_model *m = NULL;
  sc_session *s = NULL;
  out = malloc(((size_t)n_new + 1) * sizeof *out);
  if (!out) { free(ids); return SC_ERUNTIME; }
  rc = sc_model_open(path, &opts, &m, &err);
  if (!rc) rc = check_family(m, path, "llm", &err);
  if (!rc) n_new = run_default_n(m, n_ids, (int)n_new, n_given, 0);
  if (!rc) rc = sc_session_open(m, &s, &err);
  if (!rc) rc = sc_generate(s, ids, n_ids, (int)n_new, &sp, (int32_t)eos, out, &n_out, NULL, NULL, &err);
  if (!rc) {
    for (int i = 0; i < n_out; i++) printf("%s%d", i ? " " : "", out[i]);
    printf("\n");
  }
  sc_session_close(s);
  sc_model_close(m);
  free(ids);
  free(out);
  return report(rc, &err);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_main, stderr);
    return SC_EUSAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) { fputs(usage_main, stdout); return 0; }
  if (!strcmp(cmd, "--version")) { printf("speechc %s (artifact ABI %d)\n", SPEECHC_VERSION, SC_ABI_VERSION); return 0; }
  if (!strcmp(cmd, "help")) {
    static const struct { const char *name; const char *const *usage; } help[] = {
        {"build", &usage_build}, {"inspect", &usage_inspect}, {"run", &usage_run},
        {"bench", &usage_bench}, {"tts", &usage_tts}, {"tokenize", &usage_tokenize}, {"decode", &usage_decode},
        {"encode", &usage_encode}, {"moshi", &usage_moshi}, {"serve", &usage_serve},
        {"help", &usage_main}};
    const char *what = argc > 2 ? argv[2] : "help";
    for (size_t i = 0; i < sizeof help / sizeof help[0]; i++)
      if (!strcmp(what, help[i].name)) {
        fputs(*help[i].usage, stdout);
        return 0;
      }
    fprintf(stderr, "speechc: help: unknown command '%s'\n\n%s", what, usage_main);
    return SC_EUSAGE;
  }
  if (!strcmp(cmd, "build")) return cmd_build(argc - 2, argv + 2);
  if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 2, argv + 2);
  if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
  if (!strcmp(cmd, "bench")) return cmd_bench(argc - 2, argv + 2);
  if (!strcmp(cmd, "tts")) return cmd_tts(argc - 2, argv + 2);
  if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc - 2, argv + 2);
  if (!strcmp(cmd, "decode")) return cmd_decode(argc - 2, argv + 2);
  if (!strcmp(cmd, "encode")) return cmd_encode(argc - 2, argv + 2);
  if (!strcmp(cmd, "moshi")) return cmd_moshi(argc - 2, argv + 2);
  if (!strcmp(cmd, "serve")) return cmd_serve(argc - 2, argv + 2);
  fprintf(stderr, "speechc: unknown command '%s'\n\n%s", cmd, usage_main);
  return SC_EUSAGE;
}
