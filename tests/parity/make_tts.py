#!/usr/bin/env python3
"""Generate tiny random Qwen3-TTS checkpoints + reference traces.

Run:  /work/venv/bin/python tests/parity/make_tts.py [names...]
      (needs `pip install qwen-tts==0.1.1`, which pins transformers 4.57.3)

For every spec in MODELS this writes tests/data/tts/<name>/:
  config.json          Qwen3TTSConfig (model_type qwen3_tts), written by the
                       official class's save_pretrained
  model.safetensors    bf16, published tensor names (talker.model.*,
                       talker.text_projection.*, talker.codec_head.*,
                       talker.code_predictor.*)
  trace.json           everything below, described
  *.f32                raw little-endian float32, row-major

Every reference number comes from running the official qwen-tts code
(qwen_tts.core.models.modeling_qwen3_tts) in float32 on CPU with eager
attention; the bf16 weights are loaded with dtype=float32, i.e. the exact
bf16-rounded values upcast.  Nothing is reimplemented: the prompt
embeddings, per-frame talker inputs and logits are captured with forward
hooks while `Qwen3TTSForConditionalGeneration.generate` runs.  The script
then *independently* rebuilds the prompt and per-frame inputs from the
documented layout (`layout` in trace.json) using the official sub-modules
and asserts they match what generate() built, and it replays the talker's
logits processors (repetition penalty, suppress_tokens, min_new_tokens) to
check the greedy choices and their top1-top2 margins.

All randomness comes from fixed seeds; rerunning gives byte-identical files.
"""

import json
import os
import shutil
import sys

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT_DIR = os.path.join(ROOT, "tests", "data", "tts")

MIN_MARGIN = 1e-3
MAX_DIR_BYTES = 2_000_000
QWEN_TTS_VERSION = "0.1.1"

# ---------------------------------------------------------------------------
# Text-side token ids.  The real Qwen2 vocab has 151936 entries; a table that
# size does not fit the size budget, so the text vocab is 512 and the special
# ids are remapped.  The ones the official code reads from config
# (tts_*_token_id, im_*_token_id) are config fields; the others ("assistant",
# "user", "\n") only ever appear inside input_ids / instruct_ids, which the
# caller builds.
TEXT_VOCAB = 512
TEXT_IDS = {
    "im_start": 480,   # real 151644 (config im_start_token_id)
    "im_end": 481,     # real 151645 (config im_end_token_id)
    "tts_pad": 491,    # real 151671 (config tts_pad_token_id)
    "tts_bos": 492,    # real 151672 (config tts_bos_token_id)
    "tts_eos": 493,    # real 151673 (config tts_eos_token_id)
    "assistant": 300,  # real 77091 (not a config field)
    "user": 272,       # real 872   (not a config field)
    "newline": 198,    # real 198   (not a config field)
}
REAL_TEXT_IDS = {
    "im_start": 151644, "im_end": 151645, "tts_pad": 151671, "tts_bos": 151672,
    "tts_eos": 151673, "assistant": 77091, "user": 872, "newline": 198,
}

# Codec ids: the real ones (talker codec vocab 3072).
CODEC_IDS = dict(
    codec_pad_id=2148, codec_bos_id=2149, codec_eos_token_id=2150,
    codec_think_id=2154, codec_nothink_id=2155,
    codec_think_bos_id=2156, codec_think_eos_id=2157,
)
LANGUAGE_IDS = {"english": 2050, "chinese": 2055, "sichuan_dialect": 2062}
# Like the released ones (e.g. 2861..3066) the speaker ids lie in the range
# [vocab-1024, vocab) that is suppressed when sampling c0: they are only ever
# inputs.
SPK_ID = {"tiny_speaker": 3000, "tiny_dialect": 3001}
SPK_IS_DIALECT = {"tiny_speaker": False, "tiny_dialect": "sichuan_dialect"}

NUM_CODE_GROUPS = 16
CODEC_VOCAB = 3072
PRED_VOCAB = 64      # real 2048; [PRED_VOCAB, H] x 15 tables must fit 2 MB

MAX_NEW_TOKENS = 16  # -> 15 frames (the last sampled c0 is dropped, see README)

STD_LINEAR = 0.2
STD_HEAD = 0.6       # codec_head and code_predictor.lm_head.*: well-spread logits
STD_EMBED = 1.0
STD_BIAS = 0.1

# "Hot" c0 ids: their codec_head rows (and EOS's) are scaled by HOT_SCALE so
# that greedy c0 is drawn from a small set.  c0s then repeat, so the
# repetition penalty actually changes greedy decisions (asserted: at least
# MIN_REP_FLIPS steps per checkpoint), and EOS can be reached (one run must
# stop on it).  With plain random rows neither ever happens.
HOT_C0 = list(range(37, 2048, 43))   # 47 ids, 37..2015
HOT_SCALE = 3.0
MIN_REP_FLIPS = 2


def talker_rope(head_dim):
    # Real: {"interleaved": true, "mrope_section": [24, 20, 20]} for head_dim
    # 128.  Scaled so the sections sum to head_dim / 2.  All three position
    # rows are equal for TTS, so this is plain 1-D NeoX RoPE.
    half = head_dim // 2
    a = half - 2 * (half * 20 // 64)
    sec = [a, half * 20 // 64, half * 20 // 64]
    assert sum(sec) == half
    return {"interleaved": True, "mrope_section": sec, "rope_type": "default", "type": "default"}


MODELS = [
    dict(
        # 0.6B layout: predictor hidden == talker hidden, so
        # small_to_mtp_projection is nn.Identity (no tensor); like the real
        # 0.6B, heads*head_dim (128) != hidden (64).
        name="tts_tiny_06b_layout",
        model_size="0b6",
        talker=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                    text_hidden_size=48),
        predictor=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=32),
        seed=0,  # filled in below (SEEDS)
    ),
    dict(
        # 1.7B layout: predictor hidden (32) != talker hidden (64), so
        # talker.code_predictor.small_to_mtp_projection.{weight,bias} exist;
        # like the real 1.7B, talker heads*head_dim == hidden.
        name="tts_tiny_17b_layout",
        model_size="1b7",
        talker=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                    text_hidden_size=48),
        predictor=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=16),
        seed=0,
    ),
    dict(
        # The 0.6B layout with sliding windows: the talker's use_sliding_window
        # gives every layer a window of 7 positions (its forward takes
        # create_sliding_window_causal_mask for all layers), the code
        # predictor's max_window_layers 1 makes its second layer slide over 5
        # (the config class writes that out as layer_types).  Prompts of
        # 10-20 rows and 16 predictor positions a frame: both windows cut.
        name="tts_tiny_sliding",
        model_size="0b6",
        talker=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                    text_hidden_size=48, use_sliding_window=True, sliding_window=7),
        predictor=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                       use_sliding_window=True, sliding_window=5, max_window_layers=1),
        seed=0,
    ),
]
# Weight seeds, found by searching upward from 1000 (06b) / 2000 (17b) for
# the first seed whose greedy runs have every top1-top2 margin > MIN_MARGIN,
# no EOS within MAX_NEW_TOKENS (except the EOS run, which must stop on it)
# and >= MIN_REP_FLIPS repetition-penalty flips (`--search` reruns that search).
SEEDS = {"tts_tiny_06b_layout": 1047, "tts_tiny_17b_layout": 2005, "tts_tiny_sliding": 3000}

# Generation runs (same for both checkpoints).  Text/instruct token ids are
# drawn from a fixed generator (see make_ids).
RUNS = [
    dict(name="stream_en_spk", non_streaming_mode=False, language="english",
         speaker="tiny_speaker", text="a", instruct=None),
    dict(name="nonstream_en_spk_instruct", non_streaming_mode=True, language="english",
         speaker="tiny_speaker", text="a", instruct="i"),
    dict(name="stream_auto_nospk_instruct", non_streaming_mode=False, language="auto",
         speaker=None, text="b", instruct="i"),
    dict(name="nonstream_zh_dialect", non_streaming_mode=True, language="chinese",
         speaker="tiny_dialect", text="b", instruct=None),
    # must stop on EOS (codec_eos_token_id) before max_new_tokens
    dict(name="stream_zh_spk_eos", non_streaming_mode=False, language="chinese",
         speaker="tiny_speaker", text="c", instruct=None, max_new_tokens=64, expect_eos=True),
]
TEXT_LEN = {"a": 6, "b": 9, "c": 5}
INSTRUCT_LEN = 4

GEN_KWARGS = dict(
    max_new_tokens=MAX_NEW_TOKENS,
    do_sample=False,
    top_k=50,
    top_p=1.0,
    temperature=0.9,
    subtalker_dosample=False,
    subtalker_top_k=50,
    subtalker_top_p=1.0,
    subtalker_temperature=0.9,
    repetition_penalty=1.05,
)


def gen_kwargs(run):
    kw = dict(GEN_KWARGS)
    if "max_new_tokens" in run:
        kw["max_new_tokens"] = run["max_new_tokens"]
    return kw


def setup_torch():
    import transformers
    transformers.logging.set_verbosity_error()  # "Setting pad_token_id ..." noise
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_grad_enabled(False)


def import_official():
    import qwen_tts  # noqa: F401  (package version check below)
    from importlib.metadata import version
    v = version("qwen-tts")
    if v != QWEN_TTS_VERSION:
        raise SystemExit(f"qwen-tts {v} installed, want {QWEN_TTS_VERSION}")
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration
    return Qwen3TTSConfig, Qwen3TTSForConditionalGeneration


def make_config(spec):
    Qwen3TTSConfig, _ = import_official()
    t, p = spec["talker"], spec["predictor"]
    predictor = dict(
        vocab_size=PRED_VOCAB, num_code_groups=NUM_CODE_GROUPS,
        max_position_embeddings=65536, rms_norm_eps=1e-6, rope_theta=1000000.0,
        rope_scaling=None, hidden_act="silu", attention_bias=False,
        initializer_range=STD_LINEAR, **p,
    )
    talker = dict(
        code_predictor_config=predictor, vocab_size=CODEC_VOCAB,
        num_code_groups=NUM_CODE_GROUPS, text_vocab_size=TEXT_VOCAB,
        max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0,
        rope_scaling=talker_rope(t["head_dim"]), hidden_act="silu", attention_bias=False,
        initializer_range=STD_LINEAR, spk_id=dict(SPK_ID), spk_is_dialect=dict(SPK_IS_DIALECT),
        codec_language_id=dict(LANGUAGE_IDS), **CODEC_IDS, **t,
    )
    return Qwen3TTSConfig(
        talker_config=talker,
        tokenizer_type="qwen3_tts_tokenizer_12hz",
        tts_model_size=spec["model_size"],
        tts_model_type="custom_voice",
        im_start_token_id=TEXT_IDS["im_start"],
        im_end_token_id=TEXT_IDS["im_end"],
        tts_pad_token_id=TEXT_IDS["tts_pad"],
        tts_bos_token_id=TEXT_IDS["tts_bos"],
        tts_eos_token_id=TEXT_IDS["tts_eos"],
    )


def randomize(model, seed):
    """Every parameter from a private generator, in sorted-name order.

    Embeddings ~ N(0, 1), output heads ~ N(0, 0.6), other matrices
    ~ N(0, 0.2), biases ~ N(0, 0.1), RMSNorm weights ~ 1 + 0.1 N(0, 1);
    then the codec_head rows of HOT_C0 + EOS are multiplied by HOT_SCALE.
    """
    g = torch.Generator().manual_seed(seed)
    for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
        noise = torch.randn(p.shape, generator=g, dtype=torch.float32)
        if name.endswith("norm.weight"):
            p.copy_(1.0 + 0.1 * noise)
        elif name.endswith(".bias"):
            p.copy_(STD_BIAS * noise)
        elif "embedding" in name:
            assert p.dim() == 2, name
            p.copy_(STD_EMBED * noise)
        elif "codec_head" in name or "lm_head" in name:
            assert p.dim() == 2, name
            p.copy_(STD_HEAD * noise)
            if name == "talker.codec_head.weight":
                hot = HOT_C0 + [CODEC_IDS["codec_eos_token_id"]]
                p[hot] *= HOT_SCALE
        else:
            assert name.endswith(".weight") and p.dim() == 2, name
            p.copy_(STD_LINEAR * noise)


def load_reference(path):
    """Load through transformers' PreTrainedModel.from_pretrained.

    Qwen3TTSForConditionalGeneration.from_pretrained (the override) also
    loads speech_tokenizer/ and generation_config.json, which these talker
    checkpoints do not have; the weights/config path is the parent's.
    """
    _, Model = import_official()
    model, info = super(Model, Model).from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise SystemExit(f"{path}: loading info not clean: {bad}")
    model = model.eval()
    for p in model.parameters():
        assert p.dtype == torch.float32
    assert model.talker.config._attn_implementation == "eager"
    assert model.talker.code_predictor.config._attn_implementation == "eager"
    return model


def make_ids():
    g = torch.Generator().manual_seed(7)

    def draw(n):
        # plain text ids below every special id
        return torch.randint(1, 190, (n,), generator=g).tolist()

    texts = {k: draw(n) for k, n in sorted(TEXT_LEN.items())}
    instr = draw(INSTRUCT_LEN)
    T = TEXT_IDS
    ids = {}
    for k, txt in texts.items():
        # "<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"
        ids[k] = [T["im_start"], T["assistant"], T["newline"]] + txt + \
                 [T["im_end"], T["newline"], T["im_start"], T["assistant"], T["newline"]]
    # "<|im_start|>user\n{instruct}<|im_end|>\n"
    ids["i"] = [T["im_start"], T["user"], T["newline"]] + instr + [T["im_end"], T["newline"]]
    return ids


def prompt_layout(run, input_ids, instruct_ids):
    """Expected prefill layout: one {"text": id|None, "codec": id|None} per
    position, meaning P(text) + E(codec) (either term may be absent)."""
    T = TEXT_IDS
    lay = []
    if instruct_ids is not None:
        lay += [{"text": t, "codec": None} for t in instruct_ids]
    lay += [{"text": t, "codec": None} for t in input_ids[:3]]
    lang = run["language"].lower()
    spk = run["speaker"]
    lang_id = None if lang == "auto" else LANGUAGE_IDS[lang]
    if lang in ("chinese", "auto") and spk and SPK_IS_DIALECT[spk] is not False:
        lang_id = LANGUAGE_IDS[SPK_IS_DIALECT[spk]]
    if lang_id is None:
        codec = [CODEC_IDS["codec_nothink_id"], CODEC_IDS["codec_think_bos_id"],
                 CODEC_IDS["codec_think_eos_id"]]
    else:
        codec = [CODEC_IDS["codec_think_id"], CODEC_IDS["codec_think_bos_id"], lang_id,
                 CODEC_IDS["codec_think_eos_id"]]
    if spk:
        codec.append(SPK_ID[spk])
    lay += [{"text": T["tts_pad"], "codec": c} for c in codec]
    lay.append({"text": T["tts_bos"], "codec": CODEC_IDS["codec_pad_id"]})
    text = input_ids[3:-5]
    if run["non_streaming_mode"]:
        lay += [{"text": t, "codec": CODEC_IDS["codec_pad_id"]} for t in text]
        lay.append({"text": T["tts_eos"], "codec": CODEC_IDS["codec_pad_id"]})
        lay.append({"text": T["tts_pad"], "codec": CODEC_IDS["codec_bos_id"]})
        trailing = []  # always P(tts_pad)
    else:
        lay.append({"text": text[0], "codec": CODEC_IDS["codec_bos_id"]})
        trailing = text[1:] + [T["tts_eos"]]  # then P(tts_pad)
    return lay, trailing


def P(model, ids):
    t = model.talker
    return t.text_projection(t.get_text_embeddings()(torch.tensor([ids])))[0]


def E(model, ids):
    return model.talker.get_input_embeddings()(torch.tensor([ids]))[0]


def rebuild_prompt(model, lay):
    rows = []
    for item in lay:
        v = torch.zeros(model.config.talker_config.hidden_size)
        if item["text"] is not None:
            v = v + P(model, [item["text"]])[0]
        if item["codec"] is not None:
            v = v + E(model, [item["codec"]])[0]
        rows.append(v)
    return torch.stack(rows)


def process_c0_logits(raw, history, step, cfg):
    """Replay the talker's HF logits processors for greedy decoding:
    RepetitionPenalty(1.05) over earlier c0s, MinNewTokensLength(2) on EOS,
    SuppressTokens([vocab-1024, vocab) minus EOS)."""
    s = raw.clone()
    if history:
        idx = torch.tensor(sorted(set(history)))
        sc = s[idx]
        s[idx] = torch.where(sc < 0, sc * GEN_KWARGS["repetition_penalty"],
                             sc / GEN_KWARGS["repetition_penalty"])
    eos = cfg.talker_config.codec_eos_token_id
    if step < 2:
        s[eos] = -float("inf")
    v = cfg.talker_config.vocab_size
    keep = s[eos].clone()
    s[v - 1024:] = -float("inf")
    s[eos] = keep
    return s


def margin(v):
    top = torch.topk(v, 2).values
    return float(top[0] - top[1])


def run_generate(model, run, ids):
    """Call the official generate with hooks; return everything captured."""
    talker = model.talker
    cap = dict(talker_in=[], talker_kw=[], c0_logits=[], hidden=[], pred_logits=[])

    def talker_pre(mod, args, kwargs):
        cap["talker_kw"].append({k: kwargs.get(k) for k in
                                 ("trailing_text_hidden", "tts_pad_embed", "generation_step")})

    def inner_pre(mod, args, kwargs):
        cap["talker_in"].append(kwargs["inputs_embeds"][0].clone())

    def inner_post(mod, args, kwargs, out):
        cap["hidden"].append(out.last_hidden_state[0, -1].clone())

    def head_post(mod, args, out):
        cap["c0_logits"].append(out[0, -1].clone())

    def pred_post(mod, args, kwargs, out):
        cap["pred_logits"].append(out.logits[0, -1].clone())

    hs = [talker.register_forward_pre_hook(talker_pre, with_kwargs=True),
          talker.model.register_forward_pre_hook(inner_pre, with_kwargs=True),
          talker.model.register_forward_hook(inner_post, with_kwargs=True),
          talker.codec_head.register_forward_hook(head_post),
          talker.code_predictor.register_forward_hook(pred_post, with_kwargs=True)]
    input_ids = ids[run["text"]]
    instruct_ids = ids[run["instruct"]] if run["instruct"] else None
    call_kwargs = dict(
        input_ids=[torch.tensor([input_ids])],
        instruct_ids=[torch.tensor([instruct_ids]) if instruct_ids else None],
        languages=[run["language"]],
        speakers=[run["speaker"]],
        non_streaming_mode=run["non_streaming_mode"],
        **gen_kwargs(run),
    )
    try:
        codes_list, hidden_list = model.generate(**call_kwargs)
    finally:
        for h in hs:
            h.remove()
    codes = codes_list[0].tolist()
    return codes, cap, input_ids, instruct_ids


def analyse_run(model, run, ids, name):
    """Run generate, cross-check the captured tensors against the documented
    layout and the HF processors; return (record, arrays, margins)."""
    cfg = model.config
    H = cfg.talker_config.hidden_size
    G = cfg.talker_config.num_code_groups
    codes, cap, input_ids, instruct_ids = run_generate(model, run, ids)
    n_steps = len(cap["c0_logits"])          # talker sampling steps
    n_frames = len(codes)
    assert len(cap["talker_in"]) == n_steps and len(cap["hidden"]) == n_steps

    # -- c0 choices: replay processors, margins --------------------------------
    c0s, m_c0, flips = [], [], []
    for s in range(n_steps):
        proc = process_c0_logits(cap["c0_logits"][s], c0s, s, cfg)
        unpenalized = int(torch.argmax(process_c0_logits(cap["c0_logits"][s], [], s, cfg)))
        c0s.append(int(torch.argmax(proc)))
        if c0s[-1] != unpenalized:
            flips.append(s)
        m_c0.append(margin(proc))
    eos = cfg.talker_config.codec_eos_token_id
    max_new = gen_kwargs(run)["max_new_tokens"]
    if run.get("expect_eos"):
        if c0s[-1] != eos or eos in c0s[:-1]:
            raise RuntimeError(f"{name}/{run['name']}: no EOS within {max_new} steps")
    else:
        if eos in c0s:
            raise RuntimeError(f"{name}/{run['name']}: EOS at step {c0s.index(eos)}")
        assert n_steps == max_new
    if n_frames != n_steps - 1:
        raise RuntimeError(f"{name}: {n_frames} frames for {n_steps} talker steps")
    if [c[0] for c in codes] != c0s[:n_frames]:
        raise RuntimeError(f"{name}: replayed c0 {c0s} != generated {[c[0] for c in codes]}")

    # -- predictor: 15 calls per frame, argmax == code, margins ---------------
    assert len(cap["pred_logits"]) == n_frames * (G - 1)
    m_pred = []
    for f in range(n_frames):
        for k in range(G - 1):
            lg = cap["pred_logits"][f * (G - 1) + k]
            if int(torch.argmax(lg)) != codes[f][k + 1]:
                raise RuntimeError(f"{name}: predictor argmax mismatch frame {f} k {k}")
            m_pred.append(margin(lg))

    # -- prompt layout: rebuild from the official sub-modules ---------------
    prompt = cap["talker_in"][0]
    lay, trailing_ids = prompt_layout(run, input_ids, instruct_ids)
    rebuilt = rebuild_prompt(model, lay)
    if rebuilt.shape != prompt.shape or not torch.allclose(rebuilt, prompt, atol=1e-5, rtol=0):
        raise RuntimeError(f"{name}/{run['name']}: prompt layout mismatch "
                           f"{tuple(rebuilt.shape)} vs {tuple(prompt.shape)}")
    kw = cap["talker_kw"][0]
    trailing = kw["trailing_text_hidden"][0]
    pad_embed = kw["tts_pad_embed"][0, 0]
    want_tr = P(model, trailing_ids) if trailing_ids else pad_embed[None]
    assert torch.allclose(want_tr, trailing, atol=1e-5, rtol=0), "trailing text mismatch"
    assert torch.allclose(P(model, [TEXT_IDS["tts_pad"]])[0], pad_embed, atol=1e-5, rtol=0), \
        float((P(model, [TEXT_IDS["tts_pad"]])[0] - pad_embed).abs().max())

    # -- per-frame talker inputs: E(c0) + sum pred_emb[i](c_{i+1}) + text ---
    step_in = torch.stack([x[0] for x in cap["talker_in"][1:]]) if n_steps > 1 else torch.zeros(0, H)
    pe = model.talker.code_predictor.get_input_embeddings()
    for f in range(n_frames):
        v = E(model, [codes[f][0]])[0]
        for i in range(G - 1):
            v = v + pe[i](torch.tensor([codes[f][i + 1]]))[0]
        v = v + (trailing[f] if f < trailing.shape[0] else pad_embed)
        if not torch.allclose(v, step_in[f], atol=1e-5, rtol=0):
            raise RuntimeError(f"{name}/{run['name']}: frame {f} talker input mismatch")

    rec = dict(
        name=run["name"],
        call=dict(
            function="qwen_tts.core.models.modeling_qwen3_tts."
                     "Qwen3TTSForConditionalGeneration.generate",
            kwargs=dict(
                input_ids="[tensor([input_ids])]",
                instruct_ids="[tensor([instruct_ids])]" if instruct_ids else "[None]",
                languages=[run["language"]],
                speakers=[run["speaker"]],
                non_streaming_mode=run["non_streaming_mode"],
                **gen_kwargs(run),
            ),
            fixed_inside_generate=dict(
                min_new_tokens=2,
                eos_token_id=eos,
                suppress_tokens=f"[{cfg.talker_config.vocab_size - 1024}, "
                                f"{cfg.talker_config.vocab_size}) minus {eos}",
            ),
        ),
        language=run["language"],
        speaker=run["speaker"],
        non_streaming_mode=run["non_streaming_mode"],
        input_ids=input_ids,
        instruct_ids=instruct_ids,
        text_ids=input_ids[3:-5],
        codes=codes,
        n_frames=n_frames,
        n_talker_steps=n_steps,
        c0_steps=c0s,
        stopped_on_eos=c0s[-1] == eos,
        rep_penalty_flip_steps=flips,
        prompt_len=int(prompt.shape[0]),
        prompt_file=f"{run['name']}.prompt.f32",
        layout=lay,
        trailing_text_ids=trailing_ids,
        trailing_len=int(trailing.shape[0]),
        trailing_file=f"{run['name']}.trailing.f32",
        step_inputs_file=f"{run['name']}.step_inputs.f32",
        talker_hidden_file=f"{run['name']}.talker_hidden.f32",
        min_margin_c0=min(m_c0),
        min_margin_predictor=min(m_pred),
    )
    arrays = {
        rec["prompt_file"]: prompt,
        rec["trailing_file"]: trailing,
        rec["step_inputs_file"]: step_in,
        rec["talker_hidden_file"]: torch.stack(cap["hidden"]),
    }
    return rec, arrays, cap


def teacher_forced(model, prompt, c0, seed):
    """Item 1: talker logits over a fixed prefill; predictor logits for one
    (h, c0) with teacher-forced codes c1..c14."""
    talker = model.talker
    L = prompt.shape[0]
    out = talker(inputs_embeds=prompt[None], attention_mask=torch.ones(1, L, dtype=torch.long),
                 use_cache=True, output_hidden_states=True)
    logits = out.logits[0]
    hidden = out.hidden_states[0][-1][0]       # post-norm, [L, H]
    h = hidden[-1]

    cp = talker.code_predictor
    Vp = cp.config.vocab_size
    G = talker.config.num_code_groups
    g = torch.Generator().manual_seed(seed)
    codes_in = torch.randint(0, Vp, (G - 2,), generator=g).tolist()   # c1..c14
    # exactly what Qwen3TTSTalkerForConditionalGeneration.forward hands to
    # code_predictor.generate, stepped by hand with the official forward
    o = cp(inputs_embeds=torch.cat((h[None, None], talker.get_input_embeddings()(torch.tensor([[c0]]))), dim=1),
           use_cache=True)
    rows = [o.logits[0, -1]]
    pkv, steps = o.past_key_values, o.generation_steps
    for c in codes_in:
        o = cp(input_ids=torch.tensor([[c]]), past_key_values=pkv, generation_steps=steps, use_cache=True)
        rows.append(o.logits[0, -1])
        pkv, steps = o.past_key_values, o.generation_steps
    pl = torch.stack(rows)                       # [15, Vp]
    # cross-check with the official full-sequence (fine-tune) path
    full, _ = talker.forward_sub_talker_finetune(
        torch.tensor([[c0] + codes_in + [0]]), h[None])
    if not torch.allclose(full[0], pl, atol=1e-4, rtol=0):
        raise RuntimeError("predictor: cached steps != forward_sub_talker_finetune "
                           f"(max diff {float((full[0] - pl).abs().max())})")
    return logits, hidden, h, codes_in, pl


def to_f32(t):
    return t.detach().to(torch.float32).contiguous().numpy().astype("<f4")


def compute(model, spec):
    """Everything derived from the official model: (trace, arrays, margins)."""
    ids = make_ids()
    runs, arrays, caps = [], {}, []
    for run in RUNS:
        rec, arr, cap = analyse_run(model, run, ids, spec["name"])
        runs.append(rec)
        arrays.update(arr)
        caps.append(cap)
    # raw c0 logits of every talker step of run 0 (prefill last row first)
    r0 = runs[0]
    c0_logits = torch.stack(caps[0]["c0_logits"])
    r0["c0_logits_file"] = f"{r0['name']}.c0_logits.f32"
    arrays[r0["c0_logits_file"]] = c0_logits

    prompt0 = arrays[r0["prompt_file"]]
    tf_logits, tf_hidden, h, codes_in, pl = teacher_forced(model, prompt0, r0["codes"][0][0], seed=11)
    if not torch.allclose(tf_logits[-1], c0_logits[0], atol=1e-5, rtol=0):
        raise RuntimeError("prefill logits != generate's first step")
    tf = dict(
        input=f"the prompt of run {r0['name']} ({r0['prompt_file']})",
        n_rows=int(tf_logits.shape[0]),
        talker_logits_file="tf.talker_logits.f32",
        talker_hidden_file="tf.talker_hidden.f32",
        predictor=dict(
            h="last row of tf.talker_hidden.f32 (post-norm talker hidden)",
            c0=r0["codes"][0][0],
            codes_in=codes_in,
            logits_file="tf.predictor_logits.f32",
            note="row 0: prefill [h, E_talker(c0)] -> lm_head[0]; row k (1..14): feed "
                 "codes_in[k-1] (= c_k) through codec_embedding[k-1] -> lm_head[k]",
        ),
    )
    arrays["tf.talker_logits.f32"] = tf_logits
    arrays["tf.talker_hidden.f32"] = tf_hidden
    arrays["tf.predictor_logits.f32"] = pl

    cfg = model.config
    tc, pc = cfg.talker_config, cfg.talker_config.code_predictor_config
    import transformers
    trace = dict(
        model=spec["name"],
        source=f"qwen-tts {QWEN_TTS_VERSION} Qwen3TTSForConditionalGeneration "
               f"(transformers {transformers.__version__}), float32 CPU, eager attention",
        dtype_stored="bfloat16",
        seed=spec["seed"],
        dims=dict(
            talker_hidden=tc.hidden_size, talker_layers=tc.num_hidden_layers,
            talker_heads=tc.num_attention_heads, talker_kv_heads=tc.num_key_value_heads,
            talker_head_dim=tc.head_dim, talker_intermediate=tc.intermediate_size,
            codec_vocab=tc.vocab_size, text_vocab=tc.text_vocab_size,
            text_hidden=tc.text_hidden_size, num_code_groups=tc.num_code_groups,
            predictor_hidden=pc.hidden_size, predictor_layers=pc.num_hidden_layers,
            predictor_heads=pc.num_attention_heads, predictor_kv_heads=pc.num_key_value_heads,
            predictor_head_dim=pc.head_dim, predictor_intermediate=pc.intermediate_size,
            predictor_vocab=pc.vocab_size,
            small_to_mtp_projection=pc.hidden_size != tc.hidden_size,
        ),
        text_token_ids=dict(TEXT_IDS),
        real_text_token_ids=dict(REAL_TEXT_IDS),
        files_note="*.f32: raw little-endian float32, row-major; shapes: prompt [prompt_len, "
                   "talker_hidden], trailing [trailing_len, talker_hidden], step_inputs "
                   "[n_talker_steps-1, talker_hidden] (talker input of decode step t = frame t), "
                   "talker_hidden [n_talker_steps, talker_hidden] (post-norm hidden of the last "
                   "position of each talker call), c0_logits [n_talker_steps, codec_vocab] (raw "
                   "codec_head logits before repetition penalty / suppression), tf.talker_logits "
                   "[n_rows, codec_vocab], tf.talker_hidden [n_rows, talker_hidden], "
                   "tf.predictor_logits [num_code_groups-1, predictor_vocab]",
        layout_note="layout[i] = P(text) + E(codec) for prompt row i (absent term = null); "
                    "P(x) = text_projection(text_embedding(x)), E = talker codec_embedding",
        teacher_forced=tf,
        runs=runs,
        min_margin_c0=min(r["min_margin_c0"] for r in runs),
        min_margin_predictor=min(r["min_margin_predictor"] for r in runs),
        rep_penalty_flips=sum(len(r["rep_penalty_flip_steps"]) for r in runs),
        hot_c0=dict(ids=HOT_C0 + [CODEC_IDS["codec_eos_token_id"]], codec_head_row_scale=HOT_SCALE),
    )
    return trace, arrays


def build_model(spec, seed):
    _, Model = import_official()
    cfg = make_config(spec)
    model = Model(cfg).eval()
    randomize(model, seed)
    return model


def try_seed(spec, seed, tmp):
    """Build, save, reload, compute.  Returns (trace, arrays) or raises."""
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    model = build_model(spec, seed).to(torch.bfloat16)
    model.save_pretrained(tmp, safe_serialization=True)
    gen = os.path.join(tmp, "generation_config.json")
    if os.path.exists(gen):
        os.remove(gen)
    fix_config_json(tmp)
    ref = load_reference(tmp)
    spec = dict(spec, seed=seed)
    trace, arrays = compute(ref, spec)
    return trace, arrays


def fix_config_json(path):
    """Post-process the config.json that save_pretrained wrote.

    * Qwen3TTSSpeakerEncoderConfig.__init__ does not call
      PretrainedConfig.__init__ and accepts only its own arguments, yet
      save_pretrained serialises it with PretrainedConfig's extras
      ("model_type": "", ...), which the official class then refuses to load.
      Keep only its constructor arguments (as the released configs do).
    * transformers 4.57 writes the stored dtype as "dtype"; also write the
      older "torch_dtype" spelling.
    """
    import inspect
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig
    cfg_path = os.path.join(path, "config.json")
    with open(cfg_path) as f:
        cfg_json = json.load(f)
    assert cfg_json.get("dtype") == "bfloat16", cfg_json.get("dtype")
    cfg_json["torch_dtype"] = "bfloat16"
    allowed = set(inspect.signature(Qwen3TTSSpeakerEncoderConfig.__init__).parameters) - {"self"}
    cfg_json["speaker_encoder_config"] = {
        k: v for k, v in cfg_json["speaker_encoder_config"].items() if k in allowed}
    with open(cfg_path, "w") as f:
        json.dump(cfg_json, f, indent=2, sort_keys=True)
        f.write("\n")


def write(path, trace, arrays):
    for fn, t in sorted(arrays.items()):
        to_f32(t).tofile(os.path.join(path, fn))
    with open(os.path.join(path, "trace.json"), "w") as f:
        json.dump(trace, f, indent=1)
        f.write("\n")


def build(spec, search=False):
    name = spec["name"]
    path = os.path.join(OUT_DIR, name)
    seed = SEEDS[name]
    while True:
        try:
            trace, arrays = try_seed(spec, seed, path)
            if trace["min_margin_c0"] > MIN_MARGIN and trace["min_margin_predictor"] > MIN_MARGIN \
                    and trace["rep_penalty_flips"] >= MIN_REP_FLIPS:
                break
            why = (f"margins c0 {trace['min_margin_c0']:.2e} pred {trace['min_margin_predictor']:.2e}"
                   f" rep-penalty flips {trace['rep_penalty_flips']}")
        except RuntimeError as e:
            why = str(e)
        if not search:
            raise SystemExit(f"{name}: seed {seed} rejected ({why}); rerun with --search")
        print(f"{name}: seed {seed} rejected: {why}")
        seed += 1
    write(path, trace, arrays)
    total = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    if total >= MAX_DIR_BYTES:
        raise SystemExit(f"{name}: {total} bytes >= {MAX_DIR_BYTES}")
    print(f"{name}: seed={seed} bytes={total} min_margin c0={trace['min_margin_c0']:.4f} "
          f"predictor={trace['min_margin_predictor']:.4f}")
    for r in trace["runs"]:
        print(f"  {r['name']}: prompt_len={r['prompt_len']} frames={r['n_frames']} "
              f"eos={r['stopped_on_eos']} flips={r['rep_penalty_flip_steps']} "
              f"margins={r['min_margin_c0']:.4f}/{r['min_margin_predictor']:.4f} "
              f"c0={r['c0_steps']}")


def main():
    setup_torch()
    args = sys.argv[1:]
    search = "--search" in args
    only = set(a for a in args if not a.startswith("--"))
    for spec in MODELS:
        if only and spec["name"] not in only:
            continue
        build(spec, search=search)


if __name__ == "__main__":
    main()
