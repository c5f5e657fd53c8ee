#!/usr/bin/env python3
"""Time the official PyTorch Qwen3-TTS code (qwen-tts) on CPU, language model
only: talker + code predictor per frame, no codec decoder (the checkpoint
directory needs no speech_tokenizer/).  Speed only; the weights are noise.

    /work/venv/bin/python bench/peer_torch_tts.py CKPT_DIR --dtype bf16|f32 \
        [--frames 24] [--threads 2] [--seed 1]

Runs Qwen3TTSForConditionalGeneration.generate (custom voice, non-streaming
prompt: all text in the prompt, as the C peer does) with the official
sampling defaults, one warm-up call of 2 frames first.  Prints one line:

  torch: dtype D frames N prompt_s P talker_ms T predictor_ms C frames_per_s F rtf R

talker_ms: per frame, every talker forward after the prompt plus c0 sampling
(generate's own loop); predictor_ms: per frame, code_predictor.generate (the
15 codes) and the codec-sum embedding lookups inside it; prompt_s: the
prefill forward.  frames = codes returned (generate drops the last sampled
c0, so max_new_tokens = frames + 1).  RTF = (talker + predictor) seconds per
second of audio (12.5 frames/s).
"""
import argparse, os, sys, time, warnings

# "<|im_start|>assistant\n" + 12 text ids + "<|im_end|>\n<|im_start|>assistant\n",
# the ids bench/run_tts_06b.sh gives speechc
IDS = [151644, 77091, 198, 9707, 11, 1879, 1246, 525, 498, 3351, 30, 1096, 374, 264, 1273,
       151645, 198, 151644, 77091, 198]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--frames", type=int, default=24)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    import torch
    torch.set_num_threads(a.threads)
    torch.set_grad_enabled(False)
    warnings.filterwarnings("ignore")
    import transformers
    transformers.logging.set_verbosity_error()
    from qwen_tts.core.models import Qwen3TTSForConditionalGeneration as Model
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    # The parent's from_pretrained: the override also wants speech_tokenizer/
    # and generation_config.json, which a talker-only checkpoint lacks.
    model = super(Model, Model).from_pretrained(a.ckpt, dtype=dtype, attn_implementation="sdpa")
    model = model.eval()
    cfg = model.config.talker_config
    speaker = next(iter(cfg.spk_id))
    language = "english" if "english" in cfg.codec_language_id else "auto"

    talker, pred = model.talker, model.talker.code_predictor
    acc = dict(prompt=0.0, pred=0.0, fwd=0.0)
    orig_gen = pred.generate
    started = []

    def timed_gen(*args, **kw):
        t = time.perf_counter()
        try:
            return orig_gen(*args, **kw)
        finally:
            acc["pred"] += time.perf_counter() - t

    # hooks, not a wrapped forward: generate() inspects forward's signature
    def pre(mod, args, kw):
        started.append(time.perf_counter())

    def post(mod, args, kw, out):
        t = started.pop()
        e = kw.get("inputs_embeds")
        if e is not None and e.shape[1] > 1:
            acc["prompt"] += time.perf_counter() - t

    pred.generate = timed_gen
    talker.register_forward_pre_hook(pre, with_kwargs=True)
    talker.register_forward_hook(post, with_kwargs=True)

    def run(n):
        for k in acc:
            acc[k] = 0.0
        torch.manual_seed(a.seed)
        t = time.perf_counter()
        codes, _ = model.generate(input_ids=[torch.tensor([IDS])], instruct_ids=[None],
                                  languages=[language], speakers=[speaker],
                                  non_streaming_mode=True, max_new_tokens=n + 1)
        return time.perf_counter() - t, codes[0].shape[0]

    run(2)                                  # warm-up: first-touch pages, allocator
    total, frames = run(a.frames)
    if frames == 0:
        sys.exit("peer_torch_tts.py: no frames (EOS at once)")
    gen = total - acc["prompt"]
    pred_s = acc["pred"]
    talk_s = gen - pred_s
    print(f"torch: dtype {a.dtype} frames {frames} prompt_s {acc['prompt']:.3f} "
          f"talker_ms {1e3 * talk_s / frames:.1f} predictor_ms {1e3 * pred_s / frames:.1f} "
          f"frames_per_s {frames / gen:.3f} rtf {gen / (frames / 12.5):.3f}", flush=True)


if __name__ == "__main__":
    main()
