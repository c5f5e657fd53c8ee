#!/usr/bin/env bash
# configs.sh — config.json values that change the math or index a table
# (issue 12, items 7, 10, 11, 13 and parts of 14), and the messages around
# them.  Each case damages a copy of a test checkpoint with sed and checks
# that the build either honours the value (same greedy trace) or refuses it
# naming the key, the value and the limit.
#
#   usage: tests/cli/hostile/configs.sh path/to/speechc   (cwd: the repository root)
set -u
. "$(dirname "$0")/../lib.sh"

# cfg NAME RC 'sed expression' [PATTERN...] [-- EXTRA BUILD ARGS]: the qwen3
# checkpoint with its config edited, built into $W/out-NAME.
cfg() {
  local name=$1 rc=$2 expr=$3
  shift 3
  local pats=() extra=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do pats+=("$1"); shift; done
  [ $# -gt 0 ] && shift && extra=("$@")
  ck "c-$name" && sed -i "$expr" "$W/c-$name/config.json"
  if cmp -s "$QWEN/config.json" "$W/c-$name/config.json"; then
    : >"$W/err"
    fail_case "$name" "setup: the config edit did not apply"
    return 1
  fi
  mkdir -p "$W/out-$name"
  expect "$name" "$rc" ${pats[@]+"${pats[@]}"} -- \
    "$BIN" build -q "$W/c-$name" -o "$W/out-$name/m.so" ${extra[@]+"${extra[@]}"}
}

# tts NAME RC 'sed expression' [PATTERN...]: the same over the 0.6B-layout
# Qwen3-TTS checkpoint.
tts() {
  local name=$1 rc=$2 expr=$3
  shift 3
  mkdir -p "$W/t-$name" "$W/tout-$name" && cp "$TTS6/config.json" "$TTS6/model.safetensors" "$W/t-$name/" &&
    sed -i "$expr" "$W/t-$name/config.json"
  if cmp -s "$TTS6/config.json" "$W/t-$name/config.json"; then
    : >"$W/err"
    fail_case "$name" "setup: the config edit did not apply"
    return 1
  fi
  expect "$name" "$rc" "$@" -- "$BIN" build -q "$W/t-$name" -o "$W/tout-$name/m.so"
}

# The greedy trace of the qwen3 checkpoint: a value that is honoured must
# give the same tokens.
trace=$(tr -d ' \n\t\r' <"$QWEN/trace.json")
prompt=$(echo "$trace" | grep -o '"prompt":\[[0-9,]*\]' | grep -o '[0-9,]*\]' | tr -d ']')
greedy=$(echo "$trace" | grep -o '"greedy":\[[0-9,]*\]' | grep -o '[0-9,]*\]' | tr -d ']' | tr ',' ' ')
same_trace() {  # NAME: the artifact $W/out-NAME/m.so gives the greedy trace
  expect "$1-trace" 0 "out:$greedy" -- "$BIN" run "$W/out-$1/m.so" --ids "$prompt" -n 16 --greedy
}

# ------------------------------------------------ item 7: head_dim and memory
# head_dim is read before any tensor: the checkpoint's shapes never matter.
cfg head-dim-2e20 2 's/"head_dim": 32/"head_dim": 1048576/' "head_dim 1048576" "at most 512"
cfg head-dim-262144 2 's/"head_dim": 32/"head_dim": 262144/' "head_dim 262144" "at most 512"
cfg head-dim-1024 2 's/"head_dim": 32/"head_dim": 1024/' "head_dim 1024" "at most 512"

# per-session memory: state (the KV caches) + scratch + logits, against
# --max-session-mb (default 65536); 1024 positions of this model need 1 MiB
# of KV cache alone.
mkdir -p "$W/mem1" "$W/mem2" "$W/mem3"
expect session-over-cap 2 "per-session memory" "MB of state" "MB of scratch" "--max-session-mb 1" \
  "hint:" -- "$BIN" build -q "$QWEN" -o "$W/mem1/m.so" --max-context 1024 --max-session-mb 1
[ -n "$(ls -A "$W/mem1")" ] &&
  { : >"$W/err"; fail_case session-over-cap-no-output "a refused build left output behind"; }
expect session-under-cap 0 -- "$BIN" build -q "$QWEN" -o "$W/mem2/m.so" --max-context 1024 --max-session-mb 4
expect session-cap-0 1 "--max-session-mb expects an integer" "'0'" -- \
  "$BIN" build -q "$QWEN" -o "$W/mem3/m.so" --max-session-mb 0
expect session-cap-help 0 "out:--max-session-mb" -- "$BIN" help build

# -------------------------------------- item 10: rope_scaling, rope_parameters
cfg rope-type-linear 2 's/"rope_scaling": null/"rope_scaling": {"type": "linear", "factor": 4}/' \
  "rope_scaling" "'linear'" "not supported"
cfg rope-type-dynamic 2 's/"rope_scaling": null/"rope_scaling": {"type": "dynamic", "factor": 4}/' \
  "rope_scaling" "'dynamic'"
cfg rope-type-yarn 2 's/"rope_scaling": null/"rope_scaling": {"type": "yarn", "factor": 4}/' \
  "rope_scaling" "'yarn'"
cfg rope-rope-type-llama3 2 's/"rope_scaling": null/"rope_scaling": {"rope_type": "llama3", "factor": 8}/' \
  "rope_scaling" "'llama3'"
cfg rope-type-disagree 2 's/"rope_scaling": null/"rope_scaling": {"rope_type": "default", "type": "linear"}/' \
  "rope_scaling" "'default'" "'linear'"
cfg rope-no-type 2 's/"rope_scaling": null/"rope_scaling": {"factor": 4}/' "rope_scaling" "rope_type"
cfg rope-scaling-string 2 's/"rope_scaling": null/"rope_scaling": "linear"/' "rope_scaling" "must be an object"
if cfg rope-type-default 0 's/"rope_scaling": null/"rope_scaling": {"type": "default"}/'; then
  same_trace rope-type-default
fi
# transformers 5.x: rope_parameters holds the type and theta
cfg rope-params-linear 2 's/"rope_scaling": null/"rope_parameters": {"rope_type": "linear", "factor": 4, "rope_theta": 1000000.0}/' \
  "rope_parameters" "'linear'"
if cfg rope-params-theta 0 's/"rope_theta": 1000000.0,//; s/"rope_scaling": null/"rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}/'; then
  same_trace rope-params-theta
fi
cfg rope-params-theta-differs 2 's/"rope_scaling": null/"rope_parameters": {"rope_theta": 10000.0}/' \
  "rope_theta" "1e+06" "10000"
cfg rope-params-per-layer 2 's/"rope_scaling": null/"rope_parameters": {"full_attention": {"rope_theta": 1000000.0}}/' \
  "rope_parameters" "full_attention"
cfg rope-theta-zero 2 's/"rope_theta": 1000000.0/"rope_theta": 0/' "rope_theta must be positive"
cfg rope-params-theta-zero 2 's/"rope_theta": 1000000.0,//; s/"rope_scaling": null/"rope_parameters": {"rope_theta": 0}/' \
  "rope_theta must be positive"
cfg partial-rotary 2 's/"rope_scaling": null/"partial_rotary_factor": 0.5/' "partial_rotary_factor" "0.5"
cfg partial-rotary-params 2 's/"rope_scaling": null/"rope_parameters": {"partial_rotary_factor": 0.5}/' \
  "partial_rotary_factor" "0.5"
if cfg partial-rotary-one 0 's/"rope_scaling": null/"partial_rotary_factor": 1.0/'; then
  same_trace partial-rotary-one
fi
# a theta or factor inside rope_scaling: transformers 4.x ignores it, 5.x
# takes it over every other; the same value is the same model either way
cfg rope-scaling-theta 2 's/"rope_scaling": null/"rope_scaling": {"rope_type": "default", "rope_theta": 100}/' \
  "rope_scaling.rope_theta 100 differs from rope_theta 1e+06" "give one value"
cfg rope-scaling-factor 2 's/"rope_scaling": null/"rope_scaling": {"rope_type": "default", "partial_rotary_factor": 0.5}/' \
  "rope_scaling.partial_rotary_factor 0.5 differs from partial_rotary_factor 1"
if cfg rope-scaling-theta-same 0 's/"rope_scaling": null/"rope_scaling": {"rope_type": "default", "rope_theta": 1000000}/'; then
  same_trace rope-scaling-theta-same
fi
# both: 5.x takes rope_scaling whole in place of rope_parameters, 4.x never
# reads rope_parameters; what it says would be dropped silently
cfg rope-both 2 's/"rope_scaling": null/"rope_scaling": {"rope_type": "default"}, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}/' \
  "rope_scaling and rope_parameters both given"
# tie_word_embeddings true with a stored lm_head that is not the embedding:
# transformers 4.x ties them (the embedding), 5.x keeps the head
U=$DATA/qwen3_gqa4_hd16_bf16
if mkdir -p "$W/c-tied-head" "$W/out-tied-head" && cp "$U/config.json" "$U/model.safetensors" "$W/c-tied-head/" &&
  sed -i 's/"tie_word_embeddings": false/"tie_word_embeddings": true/' "$W/c-tied-head/config.json" &&
  grep -q '"tie_word_embeddings": true' "$W/c-tied-head/config.json"; then
  expect tied-head 2 "tie_word_embeddings is true, but the checkpoint's lm_head.weight is not model.embed_tokens.weight" \
    -- "$BIN" build -q "$W/c-tied-head" -o "$W/out-tied-head/m.so"
else
  : >"$W/err"
  fail_case tied-head "setup: the config edit did not apply"
fi
# the TTS classes' sliding layers (tts_tiny_sliding is their parity
# fixture; lines of this one: the predictor's layer_types at 79,
# sliding_window at 111, use_sliding_window at 125; the talker's
# sliding_window at 163, use_sliding_window at 175).  A sliding layer
# without a window makes transformers' mask raise: refused by name; the
# talker's use_sliding_window without a window is no window (its forward
# takes the plain causal mask then); a window of 0 hides every position
tts tts-predictor-sliding 0 '79s/full_attention/sliding_attention/; 111s/null/3/; 125s/false/true/'
tts tts-predictor-sliding-nowindow 2 '79s/full_attention/sliding_attention/' \
  "code_predictor_config: layer_types[0] is 'sliding_attention' without a window (use_sliding_window false)"
tts tts-talker-sliding-null 0 '175s/false/true/'
tts tts-talker-sliding-zero 2 '163s/null/0/; 175s/false/true/' "talker_config: sliding_window 0: expected 1.."
# the TTS talker reads rope_scaling through the same code
tts tts-rope-linear 2 's/"rope_type": "default",/"rope_type": "linear", "factor": 2,/; s/"type": "default"/"type": "linear"/' \
  "talker_config" "rope_scaling" "'linear'"

# ------------------------------------- item 11: biases and other math keys
# Qwen3's MLP has no biases: Qwen3Config's mlp_bias is never read (Llama's is)
if cfg mlp-bias 0 's/"attention_bias": false/"attention_bias": false, "mlp_bias": true/'; then
  same_trace mlp-bias
fi
if cfg mlp-bias-false 0 's/"attention_bias": false/"attention_bias": false, "mlp_bias": false/'; then
  same_trace mlp-bias-false
fi
cfg attention-bias-string 2 's/"attention_bias": false/"attention_bias": "yes"/' \
  "attention_bias" "must be true or false"
# Llama's MLP reads mlp_bias: refused there, by name (a sharded checkpoint)
mkdir -p "$W/l-mlp-bias" "$W/lout-mlp-bias" && cp "$SHARDED"/* "$W/l-mlp-bias/" &&
  sed -i 's/"mlp_bias": false/"mlp_bias": true/' "$W/l-mlp-bias/config.json"
expect llama-mlp-bias 2 "mlp_bias true is not supported" -- \
  "$BIN" build -q "$W/l-mlp-bias" -o "$W/lout-mlp-bias/m.so"
cfg attention-bias 2 's/"attention_bias": false/"attention_bias": true/' "attention_bias" "not supported"
cfg layer-types-chunked 2 '0,/"full_attention"/s/"full_attention"/"chunked_attention"/' \
  "layer_types[0] is 'chunked_attention'" "expected full_attention or sliding_attention"
cfg layer-types-short 2 '0,/"full_attention",/s/"full_attention",//' "layer_types" "1 entries" "num_hidden_layers 2"
cfg hidden-act-gelu 2 's/"hidden_act": "silu"/"hidden_act": "gelu"/' "hidden_act 'gelu'"
if cfg hidden-act-swish 0 's/"hidden_act": "silu"/"hidden_act": "swish"/'; then  # transformers: nn.SiLU
  same_trace hidden-act-swish
fi
# use_sliding_window gives a window only to the layers layer_types (or,
# without it, max_window_layers) makes sliding: here none
if cfg sliding-window 0 's/"use_sliding_window": false/"use_sliding_window": true/'; then
  same_trace sliding-window
fi
if cfg sliding-window-mwl 0 's/"use_sliding_window": false/"use_sliding_window": true/; /"layer_types": \[/,/\]/c\  "layer_types": null,'; then
  same_trace sliding-window-mwl
fi
# sliding_window null: no window, so no layer slides (Qwen3Config's rule)
if cfg sliding-window-null 0 's/"use_sliding_window": false/"use_sliding_window": true/; s/"max_window_layers": 28/"max_window_layers": 1/; /"layer_types": \[/,/\]/c\  "layer_types": null,'; then
  same_trace sliding-window-null
fi
cfg sliding-window-zero 2 's/"use_sliding_window": false/"use_sliding_window": true/; s/"sliding_window": null/"sliding_window": 0/; s/"max_window_layers": 28/"max_window_layers": 1/' \
  "sliding_window 0: expected 1.."
cfg layer-types-no-window 2 '0,/"full_attention"/s/"full_attention"/"sliding_attention"/' \
  "layer_types[0] is 'sliding_attention' without a window (use_sliding_window false)"
# absent keys take Qwen3Config's defaults (32 key/value heads of 128), not
# Llama's: the shapes then disagree, and the messages say where from
cfg kv-heads-absent 2 's/"num_key_value_heads": 2,//' "num_key_value_heads (32, the default of an absent key)"
cfg head-dim-absent 2 's/"head_dim": 32,//' "q_proj.weight" "head_dim 128" "default"
cfg kv-heads-null 2 's/"num_key_value_heads": 2,/"num_key_value_heads": null,/' "k_proj.weight" \
  "num_key_value_heads 4"

# --------------------------------------- item 13: Qwen3-TTS ids at build time
# codec vocabulary 3072, text vocabulary 512 in this checkpoint
tts tts-eos-99999 2 's/"codec_eos_token_id": 2150/"codec_eos_token_id": 99999/' \
  "codec_eos_token_id" "99999" "codec vocabulary [0, 3072)"
tts tts-eos-neg 2 's/"codec_eos_token_id": 2150/"codec_eos_token_id": -1/' "codec_eos_token_id" "-1"
tts tts-lang-neg 2 's/"english": 2050/"english": -7/' "codec_language_id.english" "-7"
tts tts-pad-frac 2 's/"tts_pad_token_id": 491/"tts_pad_token_id": 491.7/' "tts_pad_token_id" "491.7" "an integer"
tts tts-pad-1e20 2 's/"tts_pad_token_id": 491/"tts_pad_token_id": 1e20/' "tts_pad_token_id" "1e+20"
tts tts-pad-vocab 2 's/"tts_pad_token_id": 491/"tts_pad_token_id": 512/' \
  "tts_pad_token_id" "512" "text vocabulary [0, 512)"
tts tts-bos-codec 2 's/"codec_bos_id": 2149/"codec_bos_id": 5000/' "codec_bos_id" "5000" "codec vocabulary"
tts tts-think-missing 2 's/"codec_think_id": 2154,//' "codec_think_id" "missing"
tts tts-spk-vocab 2 's/"tiny_speaker": 3000/"tiny_speaker": 3072/' "spk_id.tiny_speaker" "3072"
tts tts-dialect-unknown 2 's/"tiny_dialect": "sichuan_dialect"/"tiny_dialect": "klingon_dialect"/' \
  "spk_is_dialect.tiny_dialect" "klingon_dialect" "codec_language_id"
# ----------------------------------------------- item 14: messages for types
tts tts-pad-string 2 's/"tts_pad_token_id": 491/"tts_pad_token_id": "491"/' \
  "tts_pad_token_id" 'must be an integer, found string "491"'
tts tts-lang-array 2 's/"codec_language_id": {/"codec_language_id": [1, 2], "x": {/' \
  "codec_language_id" "must be an object of language -> id"
tts tts-spk-two 2 's/"tiny_speaker": 3000/"tiny_speaker": [3000, 1]/' \
  "spk_id.tiny_speaker" "one-element list"
# a one-element list is what the official code accepts: same frames as 3000
ids=480,300,198,118,14,98,93,149,124,481,198,480,300,198
if tts tts-spk-list 0 's/"tiny_speaker": 3000/"tiny_speaker": [3000]/'; then
  expect tts-spk-list-frames 0 'out:[897, 25, 1, 47, 41, 37, 51, 51, 3, 13, 43, 31, 5, 4, 45, 46]' -- \
    "$BIN" tts "$W/tout-tts-spk-list/m.so" --text-ids "$ids" --speaker tiny_speaker --language english \
    --greedy --max-frames 2 -q -o -
fi

# the 12 Hz codec: decode_upsample_rate absent is the official class's 1920,
# which this codec's factors (24) do not give: refused at build, by name
mkdir -p "$W/codec-dur" "$W/codec-dur-out" && cp tests/data/codec/codec_tiny/* "$W/codec-dur/" &&
  sed -i '/"decode_upsample_rate": 24,/d' "$W/codec-dur/config.json"
expect codec-upsample-absent 2 "decode_upsample_rate is 1920 (the default of an absent key)" "multiply to 24" -- \
  "$BIN" build -q "$W/codec-dur" -o "$W/codec-dur-out/c.so"

# generation settings in a sub-config: transformers builds the sub-model's
# GenerationConfig from it, so one the official calls do not pass
# themselves changes tokens: refused by name; the talker's own
# repetition_penalty (its call passes one) and a rope_parameters block
# (qwen-tts' transformers 4.x never reads it) change nothing
tts tts-pred-repetition 2 '0,/"repetition_penalty": 1.0/s//"repetition_penalty": 3.0/' \
  "code_predictor_config: repetition_penalty 3 is not supported" "code predictor"
tts tts-talker-ngram 2 '175s/false,/false, "no_repeat_ngram_size": 1,/' \
  "talker_config: no_repeat_ngram_size 1 is not supported" "talker's"
tts tts-pred-suppress 2 '0,/"suppress_tokens": null/s//"suppress_tokens": [35, 46]/' \
  "code_predictor_config: suppress_tokens [35,46] is not supported"
frames='out:[897, 25, 1, 47, 41, 37, 51, 51, 3, 13, 43, 31, 5, 4, 45, 46]'
for c in talker-repetition rope-parameters; do
  case $c in
  talker-repetition) e='175s/false,/false, "repetition_penalty": 2.0, "suppress_tokens": [1],/' ;;
  rope-parameters) e='162s/"rope_theta": 1000000.0,/"rope_theta": 1000000.0, "rope_parameters": {"rope_type": "linear", "rope_theta": 5},/' ;;
  esac
  if tts "tts-$c" 0 "$e"; then
    expect "tts-$c-frames" 0 "$frames" -- "$BIN" tts "$W/tout-tts-$c/m.so" --text-ids "$ids" \
      --speaker tiny_speaker --language english --greedy --max-frames 2 -q -o -
  fi
done

# its transformer: hidden_act swish (nn.SiLU) and a plain rope_scaling are
# the same model (the same PCM, bit for bit); a scaled RoPE is refused
mkdir -p "$W/codec-base" && cp tests/data/codec/codec_tiny/* "$W/codec-base/"
if setup codec-base-build "$BIN" build -q "$W/codec-base" -o "$W/codec-base/c.so" &&
   setup codec-base-decode "$BIN" decode "$W/codec-base/c.so" tests/data/codec/codec_tiny/codes.i32 -o "$W/codec-base/a.wav"; then
  for c in swish rope-default; do
    case $c in
    swish) e='0,/"hidden_act": "silu"/s//"hidden_act": "swish"/' ;;
    rope-default) e='0,/"rope_theta": 10000,/s//"rope_theta": 10000, "rope_scaling": {"rope_type": "default"},/' ;;
    esac
    mkdir -p "$W/codec-$c" && cp tests/data/codec/codec_tiny/* "$W/codec-$c/" && sed -i "$e" "$W/codec-$c/config.json"
    if expect "codec-$c" 0 -- "$BIN" build -q "$W/codec-$c" -o "$W/codec-$c/c.so" &&
       expect "codec-$c-decode" 0 -- "$BIN" decode "$W/codec-$c/c.so" tests/data/codec/codec_tiny/codes.i32 -o "$W/codec-$c/a.wav"; then
      expect "codec-$c-same-pcm" 0 -- cmp "$W/codec-base/a.wav" "$W/codec-$c/a.wav"
    fi
  done
fi
mkdir -p "$W/codec-rope-linear" && cp tests/data/codec/codec_tiny/* "$W/codec-rope-linear/" &&
  sed -i '0,/"rope_theta": 10000,/s//"rope_theta": 10000, "rope_scaling": {"rope_type": "linear", "factor": 2},/' \
    "$W/codec-rope-linear/config.json"
expect codec-rope-linear 2 "decoder_config: rope_scaling" "'linear' is not supported" -- \
  "$BIN" build -q "$W/codec-rope-linear" -o "$W/codec-rope-linear/c.so"

mkdir -p "$W/tts" "$W/llm"
if setup tts-build "$BIN" build -q "$TTS6" -o "$W/tts/m.so" && setup llm-build "$BIN" build -q "$QWEN" -o "$W/llm/m.so"; then
  # one error line, not the message and then an empty "error:" line
  if expect tts-out-unwritable 2 "/nonexistent/x.json" "cannot write" -- \
       "$BIN" tts "$W/tts/m.so" --text-ids "$ids" --max-frames 2 -q -o /nonexistent/x.json; then
    if [ "$(wc -l <"$W/err")" -ne 1 ]; then
      fail_case tts-out-one-line "stderr has $(wc -l <"$W/err") lines"
    else
      n_pass=$((n_pass + 1))
    fi
  fi
  expect run-on-tts 1 "is a Qwen3-TTS model" "speechc tts" -- "$BIN" run "$W/tts/m.so" --ids 1,2,3
  expect tts-on-llm 1 "is a llm model, not a Qwen3-TTS model" "speechc run" -- \
    "$BIN" tts "$W/llm/m.so" --text-ids "$ids" -o -
fi

# every command's help, and only its own
for c in build inspect run bench tts; do
  expect "help-$c" 0 "out:usage: speechc $c" -- "$BIN" help "$c"
done
expect help-unknown 1 "unknown command 'nonsense'" -- "$BIN" help nonsense

finish
