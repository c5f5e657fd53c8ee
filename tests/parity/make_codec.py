#!/usr/bin/env python3
"""Reference fixtures for the Qwen3-TTS-Tokenizer-12Hz decoder (the codec).

Run:  /work/venv/bin/python tests/parity/make_codec.py              # codec_tiny -> tests/data/codec/
      /work/venv/bin/python tests/parity/make_codec.py --published /work/codec_pub
                                                 # codec_pub_layout (~450 MB) -> that directory
      /work/venv/bin/python tests/parity/make_codec.py --stats      # per-stage std, writes nothing
      (needs `pip install qwen-tts==0.1.1`, which pins transformers 4.57.3)

For each spec this writes <out>/<name>/:
  config.json        Qwen3TTSTokenizerV2Config (model_type qwen3_tts_tokenizer_12hz),
                     written by the official class's save_pretrained, shaped like
                     a released checkpoint's speech_tokenizer/config.json
  model.safetensors  float32, the decoder's tensors under their published names
                     ("decoder." + Qwen3TTSTokenizerV2Decoder.state_dict() keys);
                     the encoder ("encoder.*", a Mimi encoder) is omitted
  codes.i32          raw little-endian int32 [T, 16], frame-major
  pcm.f32            raw little-endian float32 [T * total_upsample]: the official
                     Qwen3TTSTokenizerV2Decoder.forward on the codes (whole utterance,
                     after the final clamp); equal to Qwen3TTSTokenizerV2Model.decode
                     for T <= 300
  chunked.f32        the official chunked_decode with a small chunk / left context
                     (trace.json "chunked"), same length
  stage.*.f32        intermediate activations of the same forward, channel-major
                     [C, L] (shapes in trace.json "stages")
  trace.json         everything above described: dims, seeds, versions, stats

Nothing is reimplemented: every number comes from the official qwen-tts code
(qwen_tts.core.tokenizer_12hz), float32 on CPU with eager attention, loaded
back from the saved files with the official top-level class
(Qwen3TTSTokenizerV2Model.from_pretrained).  Every parameter is drawn from a
fixed seed (the class defaults -- zero SnakeBeta alpha/beta, unit
cluster_usage, constant LayerScale, ConvNeXt gamma 1e-6, unit norms -- would
hide bugs), so reruns are byte-identical.
"""

import json
import os
import shutil
import sys

import numpy as np
import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT_DIR = os.path.join(ROOT, "tests", "data", "codec")
QWEN_TTS_VERSION = "0.1.1"
MAX_DIR_BYTES = 1_000_000      # per committed fixture directory
MAX_CLAMPED = 0.10             # fraction of samples the final clamp may cut
USAGE_EPS = 1e-5               # EuclideanCodebook epsilon (clamp of cluster_usage)

# The decoder_config of the released checkpoints (Qwen3-TTS-12Hz-*/speech_tokenizer/
# config.json).  NB: it is *not* the class defaults: hidden_size 512 and
# intermediate_size 1024 (defaults 1024 / 3072), head_dim 64 with 16 heads, so
# the attention width 1024 != hidden 512, and codebook_dim 512, which the class
# has no default for (the class reads config.codebook_dim and fails without it).
# num_semantic_quantizers, semantic_codebook_size and
# vector_quantization_hidden_dimension are in the released file but the
# official code never reads them (1 semantic quantizer is hard-coded, both
# RVQs use codebook_size bins of dimension codebook_dim // 2).
PUBLISHED_DECODER = dict(
    attention_bias=False, attention_dropout=0.0, latent_dim=1024, codebook_dim=512,
    codebook_size=2048, decoder_dim=1536, hidden_act="silu", hidden_size=512,
    intermediate_size=1024, layer_scale_initial_scale=0.01, max_position_embeddings=8000,
    head_dim=64, num_attention_heads=16, num_hidden_layers=8, num_key_value_heads=16,
    num_quantizers=16, num_semantic_quantizers=1, rms_norm_eps=1e-5, rope_theta=10000,
    semantic_codebook_size=4096, sliding_window=72, upsample_rates=[8, 5, 4, 3],
    upsampling_ratios=[2, 2], vector_quantization_hidden_dimension=512,
)
# The released encoder_config (a MimiConfig).  The encoder is never run and its
# tensors are not written; it is here so config.json has the released shape.
PUBLISHED_ENCODER = dict(
    frame_rate=12.5, attention_bias=False, attention_dropout=0.0, audio_channels=1,
    codebook_dim=256, codebook_size=2048, compress=2, dilation_growth_rate=2, head_dim=64,
    hidden_size=512, hidden_act="gelu", initializer_range=0.02, intermediate_size=2048,
    kernel_size=7, last_kernel_size=3, layer_scale_initial_scale=0.01,
    max_position_embeddings=8000, norm_eps=1e-5, normalize=False, num_attention_heads=8,
    num_filters=64, num_hidden_layers=8, num_key_value_heads=8, num_quantizers=32,
    num_residual_layers=1, num_semantic_quantizers=1, pad_mode="constant",
    residual_kernel_size=3, rope_theta=10000.0, sampling_rate=24000, sliding_window=250,
    trim_right_ratio=1.0, upsample_groups=512, upsampling_ratios=[8, 6, 5, 4],
    use_cache=False, use_causal_conv=True, use_conv_shortcut=False, use_streaming=False,
    vector_quantization_hidden_dimension=256,
)

SPECS = {
    # Small, but every feature on: GQA (4 q heads / 2 kv heads), head_dim 16 so
    # the attention width 64 != hidden 32 (as in the released 512 / 16x64),
    # sliding window 4 < T, both transposed-conv kinds (k == stride in
    # `upsample`, k == 2*stride with right trimming in the decoder blocks),
    # channel halving, and codebook entries whose cluster_usage is below the
    # 1e-5 clamp.
    "codec_tiny": dict(
        decoder=dict(
            attention_bias=False, attention_dropout=0.0, latent_dim=24, codebook_dim=32,
            codebook_size=64, decoder_dim=32, hidden_act="silu", hidden_size=32,
            intermediate_size=48, layer_scale_initial_scale=0.01, max_position_embeddings=8000,
            head_dim=16, num_attention_heads=4, num_hidden_layers=2, num_key_value_heads=2,
            num_quantizers=16, num_semantic_quantizers=1, rms_norm_eps=1e-5, rope_theta=10000,
            semantic_codebook_size=128, sliding_window=4, upsample_rates=[2, 3],
            upsampling_ratios=[2, 2], vector_quantization_hidden_dimension=32,
        ),
        # A shrunk Mimi, only so that the official top-level class instantiates
        # quickly when it loads this directory; never run, tensors not written.
        encoder=dict(
            frame_rate=1000.0, hidden_size=32, num_filters=4, num_residual_layers=1,
            upsampling_ratios=[3, 2, 2], codebook_size=64, codebook_dim=16, num_quantizers=16,
            vector_quantization_hidden_dimension=16, upsample_groups=32, num_hidden_layers=1,
            intermediate_size=64, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
            sliding_window=8,
        ),
        frames=12,
        chunk=dict(chunk_size=5, left_context_size=2),
        seeds=dict(weights=101, codes=102),
        final_gain=0.2,
    ),
    # The released shapes (~114M decoder parameters, ~450 MB): written only
    # with --published DIR, outside the repository.
    "codec_pub_layout": dict(
        decoder=PUBLISHED_DECODER,
        encoder=PUBLISHED_ENCODER,
        frames=4,
        chunk=dict(chunk_size=2, left_context_size=1),
        seeds=dict(weights=201, codes=202),
        final_gain=0.1,
    ),
}

# Weight scales.  Matrices and conv kernels are N(0, gain^2 / fan_in) with
# fan_in = in_channels/groups * kernel (transposed convs: in * kernel / stride,
# the taps that reach one output sample), so every stage stays O(1):
GAIN = 1.0
GAIN_RES_OUT = 0.4     # residual-unit conv2 (k=1) and the transformer's o_proj/down_proj:
                       # keeps the residual streams from growing block over block
STD_BIAS = 0.1
STD_EMBED = 0.25       # codebook vectors (embedding_sum / usage)
SMALL_USAGE = [0.0, 1e-7, 3e-6]   # cluster_usage values below the clamp


def setup_torch():
    import transformers
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_grad_enabled(False)


def official():
    import qwen_tts  # noqa: F401
    from importlib.metadata import version
    v = version("qwen-tts")
    if v != QWEN_TTS_VERSION:
        raise SystemExit(f"qwen-tts {v} installed, want {QWEN_TTS_VERSION}")
    from qwen_tts.core.tokenizer_12hz import configuration_qwen3_tts_tokenizer_v2 as C
    from qwen_tts.core.tokenizer_12hz import modeling_qwen3_tts_tokenizer_v2 as M
    return C, M


def total_upsample(dec):
    return int(np.prod(dec["upsample_rates"]) * np.prod(dec["upsampling_ratios"]))


def make_config(spec):
    C, _ = official()
    dec = spec["decoder"]
    up = total_upsample(dec)
    return C.Qwen3TTSTokenizerV2Config(
        encoder_config=dict(spec["encoder"]),
        decoder_config=dict(dec),
        encoder_valid_num_quantizers=16,
        input_sample_rate=24000,
        output_sample_rate=24000,
        decode_upsample_rate=up,       # the official decode trims to frames x this
        encode_downsample_rate=up,
        architectures=["Qwen3TTSTokenizerV2Model"],
    )


def randomize(decoder, spec):
    """Every decoder parameter from one generator, in sorted-name order.

    codebooks: cluster_usage = exp(0.5 N) except 3 entries per codebook set to
      SMALL_USAGE (below the 1e-5 clamp); embedding_sum = max(usage, 1e-5) *
      STD_EMBED * N, so every codebook vector is STD_EMBED * N -- and a decoder
      that forgets the clamp gets 10x..inf on those entries;
    SnakeBeta alpha, beta (log-scale): 0.3 N;
    LayerScale scale, ConvNeXt gamma: 0.3 + 0.1 N;
    RMSNorm / LayerNorm weights: 1 + 0.1 N; biases: STD_BIAS N;
    conv / linear weights: N(0, gain^2 / fan_in), see GAIN*; the last conv
      (to 1 channel) uses spec["final_gain"].
    """
    g = torch.Generator().manual_seed(spec["seeds"]["weights"])
    params = dict(decoder.named_parameters())
    mods = dict(decoder.named_modules())
    n_last = len(decoder.decoder) - 1
    usage_small = {}

    def randn(shape):
        return torch.randn(shape, generator=g, dtype=torch.float32)

    for name in sorted(params):
        p = params[name]
        owner = mods[name.rsplit(".", 1)[0]]
        leaf = name.rsplit(".", 1)[1]
        kind = type(owner).__name__
        if kind == "EuclideanCodebook":
            continue                                   # below, per codebook
        if kind == "SnakeBeta":
            p.copy_(0.3 * randn(p.shape))
        elif leaf in ("scale", "gamma"):               # LayerScale, ConvNeXt gamma
            p.copy_(0.3 + 0.1 * randn(p.shape))
        elif kind in ("Qwen3TTSTokenizerV2DecoderRMSNorm", "LayerNorm") and leaf == "weight":
            p.copy_(1.0 + 0.1 * randn(p.shape))
        elif leaf == "bias":
            p.copy_(STD_BIAS * randn(p.shape))
        elif kind in ("Conv1d", "ConvTranspose1d", "Linear"):
            if kind == "Conv1d":
                fan_in = p.shape[1] * p.shape[2]       # [out, in/groups, k]
            elif kind == "ConvTranspose1d":
                fan_in = p.shape[0] * p.shape[2] / owner.stride[0]   # [in, out, k]
            else:
                fan_in = p.shape[1]                    # [out, in]
            gain = GAIN
            if name.endswith(("conv2.conv.weight", "o_proj.weight", "down_proj.weight")):
                gain = GAIN_RES_OUT
            if name == f"decoder.{n_last}.conv.weight":
                gain = spec["final_gain"]
            p.copy_(gain / fan_in ** 0.5 * randn(p.shape))
        else:
            raise RuntimeError(f"no init rule for {name} ({kind})")

    for name in sorted(n for n, m in mods.items() if type(m).__name__ == "EuclideanCodebook"):
        cb = mods[name]
        K, D = cb.embedding_sum.shape
        usage = torch.exp(0.5 * randn((K,)))
        small = torch.randperm(K, generator=g)[:len(SMALL_USAGE)]
        usage[small] = torch.tensor(SMALL_USAGE)
        emb = STD_EMBED * randn((K, D))
        cb.cluster_usage.copy_(usage)
        cb.embedding_sum.copy_(usage.clamp(min=USAGE_EPS)[:, None] * emb)
        usage_small[name] = sorted(int(i) for i in small)
    return usage_small


def build_decoder(spec):
    """The official decoder, randomized.  Returns (decoder, small-usage ids)."""
    _, M = official()
    cfg = make_config(spec)
    dc = cfg.decoder_config
    dc._attn_implementation = "eager"
    decoder = M.Qwen3TTSTokenizerV2Decoder(dc).eval()
    small = randomize(decoder, spec)
    return decoder, small


def published_state(decoder):
    """{published name: tensor}: the decoder's state dict under the top-level
    model's prefix "decoder." (persistent tensors only: the RoPE inv_freq
    buffer is non-persistent and is not in checkpoints)."""
    return {"decoder." + k: v.detach().to(torch.float32).contiguous().clone()
            for k, v in decoder.state_dict().items()}


def save_checkpoint(spec, path):
    from safetensors.torch import save_file
    cfg = make_config(spec)
    cfg.save_pretrained(path)
    decoder, small = build_decoder(spec)
    save_file(published_state(decoder), os.path.join(path, "model.safetensors"),
              metadata={"format": "pt"})
    return small


def load_reference(path):
    """The official top-level class, from the saved files.  Missing keys must
    be exactly the encoder's; nothing unexpected or mismatched."""
    _, M = official()
    model, info = M.Qwen3TTSTokenizerV2Model.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    missing = [k for k in info["missing_keys"] if not k.startswith("encoder.")]
    bad = {k: v for k, v in info.items() if k != "missing_keys" and v}
    if missing or bad:
        raise SystemExit(f"{path}: loading info not clean: missing {missing[:5]} {bad}")
    if not any(k.startswith("encoder.") for k in info["missing_keys"]):
        raise SystemExit(f"{path}: expected the encoder's tensors to be missing")
    model = model.eval()
    dec = model.decoder
    assert dec.pre_transformer.config._attn_implementation == "eager", \
        dec.pre_transformer.config._attn_implementation
    for p in dec.parameters():
        assert p.dtype == torch.float32
    return model


def codebook_name(q):
    """Module name of the codebook that decodes code group q."""
    if q == 0:
        return "quantizer.rvq_first.vq.layers.0._codebook"
    return f"quantizer.rvq_rest.vq.layers.{q - 1}._codebook"


def make_codes(spec, small):
    """[T, Q] codes, uniform in [0, codebook_size); then in frame (5q mod T)
    code q is replaced by one of codebook q's entries whose cluster_usage is
    below the clamp, so every fixture exercises the clamp."""
    dec = spec["decoder"]
    T, Q = spec["frames"], dec["num_quantizers"]
    g = torch.Generator().manual_seed(spec["seeds"]["codes"])
    codes = torch.randint(0, dec["codebook_size"], (T, Q), generator=g, dtype=torch.int64)
    for q in range(Q):
        ids = small[codebook_name(q)]
        codes[(5 * q) % T, q] = ids[q % len(ids)]
    return codes


def run_stages(dec, codes_bt):
    """Official forward with hooks.  Returns (pcm [L], {stage: [C, L]}, order)."""
    stages, order = {}, []

    def keep(name, x):
        stages[name] = x[0].detach().clone()
        order.append(name)

    hooks = []

    def hook(name, fn=lambda o: o):
        return lambda m, i, o: keep(name, fn(o))

    hooks.append(dec.pre_conv.register_forward_hook(hook("pre_conv")))
    hooks.append(dec.pre_transformer.register_forward_hook(
        hook("pre_transformer", lambda o: o.last_hidden_state.transpose(1, 2))))
    for i, blocks in enumerate(dec.upsample):
        hooks.append(blocks[0].register_forward_hook(hook(f"upsample.{i}.transconv")))
        hooks.append(blocks[1].register_forward_hook(hook(f"upsample.{i}.convnext")))
    for i, block in enumerate(dec.decoder):
        kind = type(block).__name__
        label = {"Qwen3TTSTokenizerV2CausalConvNet": "conv",
                 "Qwen3TTSTokenizerV2DecoderDecoderBlock": "block",
                 "SnakeBeta": "snake"}[kind]
        hooks.append(block.register_forward_hook(hook(f"decoder.{i}.{label}")))
    try:
        rvq = dec.quantizer.decode(codes_bt)
        keep("rvq", rvq)
        order.remove("rvq")
        order.insert(0, "rvq")
        wav = dec(codes_bt)
    finally:
        for h in hooks:
            h.remove()
    return wav[0, 0], stages, order


def compute(model, spec, small):
    """Everything derived from the official model: (trace, arrays)."""
    dec = model.decoder
    dcfg = model.config.decoder_config
    up = int(dec.total_upsample)
    T = spec["frames"]
    codes = make_codes(spec, small)                # [T, Q]
    codes_bt = codes.T[None]                       # [1, Q, T], what the decoder takes

    pcm, stages, order = run_stages(dec, codes_bt)
    final = stages[order[-1]][0]                   # last conv, before the clamp
    assert pcm.shape == (T * up,), pcm.shape
    if not torch.equal(pcm, final.clamp(-1, 1)):
        raise RuntimeError("pcm != clamp(last conv output)")
    clamped = float((final.abs() > 1).float().mean())

    # Qwen3TTSTokenizerV2Model.decode: [B, T, Q] codes, clamp at 0, chunked_decode
    # with 300 / 25, trim to frames x decode_upsample_rate.  One chunk for T <= 300.
    via_decode = model.decode(codes[None], return_dict=True).audio_values[0]
    if not torch.equal(via_decode, pcm):
        raise RuntimeError("Qwen3TTSTokenizerV2Model.decode != decoder forward")

    ch = spec["chunk"]
    chunked = dec.chunked_decode(codes_bt, **ch)[0, 0]
    assert chunked.shape == pcm.shape
    chunks, s = [], 0
    while s < T:
        e = min(s + ch["chunk_size"], T)
        ctx = ch["left_context_size"] if s - ch["left_context_size"] > 0 else s
        chunks.append(dict(frames=[s - ctx, e], kept_from_frame=s))
        s = e

    # Causality: decoding a prefix of the codes gives a prefix of the PCM.
    prefix_diff = 0.0
    for k in range(1, T + 1):
        y = dec(codes_bt[..., :k])[0, 0]
        prefix_diff = max(prefix_diff, float((y - pcm[:k * up]).abs().max()))
    if prefix_diff > 1e-4:
        raise RuntimeError(f"prefix decode differs by {prefix_diff}: not causal?")

    # Padding in a batch: decode pads with -1, clamps codes at 0, and trims each
    # item to (#frames with code0 > -1) x decode_upsample_rate.
    n_short = max(1, T - 3)
    padded = torch.full((2, T, codes.shape[1]), -1, dtype=torch.int64)
    padded[0] = codes
    padded[1, :n_short] = codes[:n_short]
    out = model.decode(padded, return_dict=True).audio_values
    if out[1].shape != (n_short * model.config.decode_upsample_rate,) or \
            float((out[1] - pcm[:n_short * up]).abs().max()) > 1e-4 or \
            float((out[0] - pcm).abs().max()) > 1e-4:
        raise RuntimeError("batched decode with -1 padding: unexpected result")

    # The fixture must notice a decoder that ignores the sliding window: rerun
    # with a window covering every frame and record how far the output moves.
    window = dcfg.sliding_window
    dcfg.sliding_window = T + 1
    try:
        no_window_diff = float((dec(codes_bt)[0, 0] - pcm).abs().max())
    finally:
        dcfg.sliding_window = window
    if T > window and no_window_diff < 1e-3:
        raise RuntimeError(f"sliding window has no effect ({no_window_diff})")

    # codebook entries below the clamp actually used by the codes
    mods = dict(dec.named_modules())
    small_hits = 0
    for q in range(codes.shape[1]):
        cb = mods[codebook_name(q)]
        small_hits += int((cb.cluster_usage[codes[:, q]] < USAGE_EPS).sum())

    # A yardstick for reduced-precision decodes: the official decoder with
    # every parameter and activation in bfloat16, as model.to(torch.bfloat16)
    # runs it, on the same codes.
    import copy
    m16 = copy.deepcopy(model).to(torch.bfloat16)
    pcm_bf16 = m16.decode(codes[None], return_dict=True).audio_values[0].to(torch.float64)
    err = pcm_bf16 - pcm.to(torch.float64)
    bf16_snr = float(10 * torch.log10((pcm.to(torch.float64) ** 2).sum() / (err ** 2).sum()))

    import safetensors
    import transformers
    arrays = {"pcm.f32": pcm, "chunked.f32": chunked, "pcm_bf16.f32": pcm_bf16}
    stage_info = []
    for name in order:
        fn = f"stage.{name}.f32"
        arrays[fn] = stages[name]
        stage_info.append(dict(name=name, file=fn, shape=list(stages[name].shape),
                               std=round(float(stages[name].std()), 4)))
    trace = dict(
        model=spec["name"],
        source=f"qwen-tts {QWEN_TTS_VERSION} qwen_tts.core.tokenizer_12hz."
               "modeling_qwen3_tts_tokenizer_v2 (Qwen3TTSTokenizerV2Model loaded with "
               "from_pretrained from this directory; decoder = its .decoder, a "
               "Qwen3TTSTokenizerV2Decoder), float32, CPU, one thread, eager attention",
        versions=dict(qwen_tts=QWEN_TTS_VERSION, transformers=transformers.__version__,
                      torch=torch.__version__.split("+")[0], numpy=np.__version__,
                      safetensors=safetensors.__version__),
        dtype="float32",
        dtype_stored="float32",
        seeds=dict(spec["seeds"]),
        init=dict(
            linear_conv="N(0, gain^2/fan_in), fan_in = in/groups*k (ConvTranspose1d: in*k/stride)",
            gain=GAIN, gain_residual_out=GAIN_RES_OUT, gain_final_conv=spec["final_gain"],
            bias_std=STD_BIAS, norm_weight="1 + 0.1 N", layer_scale_and_gamma="0.3 + 0.1 N",
            snake_alpha_beta="0.3 N (log scale)",
            cluster_usage=f"exp(0.5 N), 3 entries per codebook set to {SMALL_USAGE}",
            embedding_sum=f"max(usage, 1e-5) * {STD_EMBED} N",
        ),
        dims=dict(
            num_quantizers=dcfg.num_quantizers, codebook_size=dcfg.codebook_size,
            codebook_dim=dcfg.codebook_dim, rvq_dim=dcfg.codebook_dim // 2,
            latent_dim=dcfg.latent_dim, hidden_size=dcfg.hidden_size,
            num_attention_heads=dcfg.num_attention_heads,
            num_key_value_heads=dcfg.num_key_value_heads, head_dim=dcfg.head_dim,
            num_hidden_layers=dcfg.num_hidden_layers, intermediate_size=dcfg.intermediate_size,
            sliding_window=dcfg.sliding_window, rope_theta=dcfg.rope_theta,
            rms_norm_eps=dcfg.rms_norm_eps, upsampling_ratios=list(dcfg.upsampling_ratios),
            upsample_rates=list(dcfg.upsample_rates), decoder_dim=dcfg.decoder_dim,
            output_dim=dcfg.decoder_dim // 2 ** len(dcfg.upsample_rates),
        ),
        frames=T,
        total_upsample=up,
        decode_upsample_rate=int(model.config.decode_upsample_rate),
        output_sample_rate=int(model.config.output_sample_rate),
        n_samples=T * up,
        files=dict(
            codes="codes.i32: little-endian int32 [frames, num_quantizers], frame-major "
                  "(row t = the 16 codes of frame t, c0 first); uniform in [0, codebook_size) "
                  "from seeds.codes, then code q of frame (5q mod frames) set to an entry of "
                  "codebook q whose cluster_usage is below the 1e-5 clamp",
            pcm="pcm.f32: little-endian float32 [n_samples], Qwen3TTSTokenizerV2Decoder"
                ".forward(codes.T[None]) after its clamp to [-1, 1]; identical (torch.equal) "
                "to Qwen3TTSTokenizerV2Model.decode(codes[None]) for frames <= 300",
            chunked="chunked.f32: little-endian float32 [n_samples], chunked_decode with "
                    "the chunk/left_context below",
            stages="stage.<name>.f32: little-endian float32 [C, L] channel-major, batch 0",
            pcm_bf16="pcm_bf16.f32: little-endian float32 [n_samples], the official "
                     "decode with the model cast to torch.bfloat16 (weights and "
                     "activations), the same codes",
        ),
        bf16=dict(snr_db_vs_pcm=round(bf16_snr, 2),
                  max_abs_diff_vs_pcm=float(err.abs().max())),
        codes_range=[0, dcfg.codebook_size],
        small_usage_entries=dict(
            clamp=USAGE_EPS,
            per_codebook={k.replace("quantizer.", ""): v for k, v in
                          sorted(small.items())},
            code_hits=small_hits,
        ),
        chunked=dict(
            chunk_size=ch["chunk_size"], left_context_size=ch["left_context_size"],
            chunks=chunks,
            max_abs_diff_vs_pcm=float((chunked - pcm).abs().max()),
            note="each chunk decoded from scratch (RoPE positions restart at 0, zero conv "
                 "state); its first context*total_upsample samples dropped",
        ),
        stages=stage_info,
        pcm_stats=dict(
            std=round(float(pcm.std()), 4), max_abs=round(float(pcm.abs().max()), 4),
            clamped_fraction=round(clamped, 4),
            pre_clamp_max_abs=round(float(final.abs().max()), 4),
        ),
        prefix_decode_max_abs_diff=prefix_diff,
        full_attention_max_abs_diff=no_window_diff,
    )
    return trace, arrays, codes


def to_f32(t):
    return t.detach().to(torch.float32).contiguous().numpy().astype("<f4")


def write(path, trace, arrays, codes):
    codes.numpy().astype("<i4").tofile(os.path.join(path, "codes.i32"))
    for fn, t in sorted(arrays.items()):
        to_f32(t).tofile(os.path.join(path, fn))
    with open(os.path.join(path, "trace.json"), "w") as f:
        json.dump(trace, f, indent=1)
        f.write("\n")


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))


def build(name, out_dir, limit=True):
    spec = dict(SPECS[name], name=name)
    path = os.path.join(out_dir, name)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    small = save_checkpoint(spec, path)
    model = load_reference(path)
    trace, arrays, codes = compute(model, spec, small)
    clamped = trace["pcm_stats"]["clamped_fraction"]
    if not 0 < clamped < MAX_CLAMPED:
        raise SystemExit(f"{name}: {clamped:.3f} of the samples clamped (want some, "
                         f"< {MAX_CLAMPED}: the clamp must be exercised, not saturated)")
    if trace["small_usage_entries"]["code_hits"] == 0:
        raise SystemExit(f"{name}: no code hits a cluster_usage below the clamp")
    write(path, trace, arrays, codes)
    total = dir_bytes(path)
    if limit and total >= MAX_DIR_BYTES:
        raise SystemExit(f"{name}: {total} bytes >= {MAX_DIR_BYTES}")
    st = trace["pcm_stats"]
    print(f"{name}: {path} bytes={total} samples={trace['n_samples']} std={st['std']} "
          f"clamped={st['clamped_fraction']} chunked_diff={trace['chunked']['max_abs_diff_vs_pcm']:.3g} "
          f"small_usage_hits={trace['small_usage_entries']['code_hits']}")
    return trace


def stats(name):
    """Per-stage std of a randomized decoder (for tuning the gains)."""
    spec = dict(SPECS[name], name=name)
    dec, small = build_decoder(spec)
    codes = make_codes(spec, small)
    pcm, stages, order = run_stages(dec, codes.T[None])
    for n in order:
        x = stages[n]
        print(f"  {n:28s} {str(tuple(x.shape)):14s} std {float(x.std()):8.4f} "
              f"mean {float(x.mean()):8.4f} max {float(x.abs().max()):8.4f}")
    final = stages[order[-1]]
    print(f"  clamped fraction {float((final.abs() > 1).float().mean()):.4f}")


def main():
    setup_torch()
    args = sys.argv[1:]
    if "--stats" in args:
        for name in [a for a in args if not a.startswith("--")] or ["codec_tiny"]:
            print(name)
            stats(name)
        return
    if "--published" in args:
        i = args.index("--published")
        if i + 1 >= len(args):
            raise SystemExit("--published needs an output directory (outside the repository)")
        out = os.path.abspath(args[i + 1])
        if out == ROOT or out.startswith(ROOT + os.sep):
            raise SystemExit(f"{out}: codec_pub_layout is ~450 MB; write it outside the repository")
        build("codec_pub_layout", out, limit=False)
        return
    build("codec_tiny", OUT_DIR)


if __name__ == "__main__":
    main()
