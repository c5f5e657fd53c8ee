#!/usr/bin/env bash
# Run one libFuzzer target for SECONDS seconds.
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   TARGET: safetensors | checkpoint | artifact | tokenizer | codes | wav | request   (tests/fuzz/fuzz_TARGET.c)
#
# Builds build-fuzz/ (clang, -DSPEECHC_FUZZ=ON: libFuzzer + ASan + UBSan)
# when needed, writes the seed corpus made from tests/data into
# build-fuzz/seeds/TARGET/, and fuzzes with the growing corpus in
# build-fuzz/corpus/TARGET/ (kept between runs), the seeds and
# tests/fuzz/regress/TARGET/.  A crash is written to
# build-fuzz/crashes/TARGET/; after fixing it, copy the input into
# tests/fuzz/regress/TARGET/ so that ctest replays it (fuzz_regress_TARGET).
# Run one fuzzer at a time on a shared machine: each uses a core.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 safetensors|checkpoint|artifact|tokenizer|codes|wav|request SECONDS [libFuzzer flags...]" >&2; exit 1; }
[ $# -ge 2 ] || usage
t=$1 secs=$2
shift 2
case $t in safetensors|checkpoint|artifact|tokenizer|codes|wav|request) ;; *) usage ;; esac
case $secs in ''|*[!0-9]*) usage ;; esac

B=build-fuzz
if [ ! -f $B/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B $B -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DSPEECHC_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build $B -j2 --target fuzz_$t speechc >/dev/null

SEEDS=$B/seeds/$t
rm -rf "$SEEDS"
mkdir -p "$SEEDS" $B/corpus/$t $B/crashes/$t
D=tests/data/llm

# u64le N -> 8 raw bytes
u64le() { local n=$1 i s=""; for i in 0 1 2 3 4 5 6 7; do s+=$(printf '\\x%02x' $(((n >> (8 * i)) & 255))); done; printf "$s"; }
u32le() { local n=$1 i s=""; for i in 0 1 2 3; do s+=$(printf '\\x%02x' $(((n >> (8 * i)) & 255))); done; printf "$s"; }
# header JSON + data bytes -> a safetensors file on stdout
st() { u64le ${#1}; printf '%s' "$1"; head -c "$2" /dev/zero | tr '\0' '\1'; }
# the tensor names in a safetensors file's header
st_names() {
  local len; len=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  head -c $((8 + len)) "$1" | tail -c "$len" | grep -o '"[^"]*":{"dtype"' | sed 's/:{"dtype"$//' | grep -v __metadata__
}

case $t in
safetensors)
  for m in qwen3_gqa2_hd32_tied qwen3_gqa4_hd16_bf16; do cp $D/$m/model.safetensors "$SEEDS/$m"; done
  cp $D/llama_gqa4_sharded/model-00002-of-00002.safetensors "$SEEDS/llama_shard2"
  st '{"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},"__metadata__":{"format":"pt"}}' 22 >"$SEEDS/small"
  st '{"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},"e":{"dtype":"I64","shape":[0,7],"data_offsets":[8,8]},"s":{"dtype":"U8","shape":[],"data_offsets":[8,9]}}' 9 >"$SEEDS/dtypes"
  st '{}' 0 >"$SEEDS/empty"
  # issue 12: a NUL that would cut a name short, a control character, bad UTF-8
  st '{"w\u0000evil":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' 1 >"$SEEDS/nul_name"
  st '{"w\\u0000":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' 1 >"$SEEDS/escaped_backslash"
  st '{"w\nx":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' 1 >"$SEEDS/ctl_name"
  st $'{"w\xc3(":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' 1 >"$SEEDS/bad_utf8"
  ;;
checkpoint)
  SEP=$'\n=====\n'
  cp $D/qwen3_gqa2_hd32_tied/config.json "$SEEDS/qwen3_tied"
  { cat $D/llama_gqa4_sharded/config.json; printf '%s' "$SEP"; cat $D/llama_gqa4_sharded/model.safetensors.index.json; } >"$SEEDS/llama_sharded"
  { cat $D/qwen3_gqa4_hd16_bf16/config.json; printf '%s' "$SEP"; printf '{"weight_map": {'
    st_names $D/qwen3_gqa4_hd16_bf16/model.safetensors | sed 's/$/: "bf16.safetensors"/' | paste -sd, -
    printf '}}\n'; } >"$SEEDS/qwen3_bf16_indexed"
  # issue 12: repeated keys (the last wins), at the top, nested and in the
  # index; a key that differs by a NUL; NUL bytes after the JSON
  q=$D/qwen3_gqa2_hd32_tied/config.json
  sed 's/"rope_theta": 1000000.0,/"rope_theta": 1000000.0, "rope_theta": 10.0,/' $q >"$SEEDS/dup_rope_theta"
  sed 's/"rope_scaling": null,/"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "factor": 2.0}, "rope_scaling": null,/' $q >"$SEEDS/dup_nested"
  sed 's/"rope_theta": 1000000.0,/"rope_theta": 1000000.0, "rope_theta\\u0000": 10.0,/' $q >"$SEEDS/nul_key"
  { cat $q; head -c 16 /dev/zero; } >"$SEEDS/nul_padding"
  { cat $D/llama_gqa4_sharded/config.json; printf '%s' "$SEP"
    sed 's/"weight_map": {/"weight_map": {"lm_head.weight": "model-00001-of-00002.safetensors", /' \
      $D/llama_gqa4_sharded/model.safetensors.index.json; } >"$SEEDS/dup_weight_map"
  for l in 06b 17b; do  # Qwen3-TTS: nested talker / code predictor configs
    { cat tests/data/tts/tts_tiny_${l}_layout/config.json; printf '%s' "$SEP"; printf '{"weight_map": {'
      st_names tests/data/tts/tts_tiny_${l}_layout/model.safetensors | sed "s/\$/: \"tts${l%b}.safetensors\"/" | paste -sd, -
      printf '}}\n'; } >"$SEEDS/tts_${l}_indexed"
  done
  ;;
artifact)
  # the same build as the target's set-up: identical weights, byte for byte
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  $B/speechc build -q $D/qwen3_gqa2_hd32_tied -o "$tmp/m.so" --max-context 16 --check-numerics
  { printf '\x00'; cat "$tmp"/m.*.weights; } >"$SEEDS/raw_valid"
  { printf '\x02'; cat "$tmp"/m.*.weights; } >"$SEEDS/raw_valid_nocheck"
  p() { printf "$1"; u32le "$2"; u32le "$3"; printf "$4"; }   # flags offset delta bytes
  p '\x01' 0 0 '' >"$SEEDS/patch_same"
  p '\x01' 0 0 'SCWGHT02' >"$SEEDS/patch_magic"
  p '\x01' 8 0 '\x02\x00\x00\x00' >"$SEEDS/patch_version"
  p '\x01' 16 0 '\x00\x00\x00\x00\x00\x00\x00\x01' >"$SEEDS/patch_data_bytes"
  p '\x01' 24 0 '\x01' >"$SEEDS/patch_checksum"
  p '\x01' 32 0 '\x01' >"$SEEDS/patch_build_id"
  p '\x01' 5000 0 '\xff' >"$SEEDS/patch_data"
  p '\x03' 5000 0 '\x00\x00\xc0\x7f' >"$SEEDS/patch_nan_nocheck"
  p '\x01' 0 $(((1 << 32) - 100)) '' >"$SEEDS/patch_truncated"
  p '\x01' 0 1 '' >"$SEEDS/patch_longer"
  # issue 12: model.so less its last K bytes (0: whole), refused before dlopen
  for k in 0 1 100 10000 28000 1000000 4294967295; do { printf '\x04'; u32le $k; } >"$SEEDS/cut_less_$k"; done
  ;;
tokenizer)
  # the whole tokenizer.json of the tiny BPE (mode 3) and the test strings
  # as text (mode 0); tests/fuzz/regress/tokenizer has the other modes
  T=tests/data/tokenizer/tiny_bpe
  { printf '\x03'; cat $T/tokenizer.json; printf '\n=====\nHello, 世界 <|im_end|>'; } >"$SEEDS/tokenizer_json"
  { printf '\x00'; grep -o '"text": "[^"]*"' $T/cases.json | sed 's/^"text": "//; s/"$//'; } >"$SEEDS/cases"
  ;;
codes)
  # the codec fixture's codes as raw int32 (mode 1) and as the JSON object
  # speechc tts writes (mode 0); tests/fuzz/regress/codes has the rest
  C=tests/data/codec/codec_tiny/codes.i32
  { printf '\x01'; cat $C; } >"$SEEDS/raw_tiny"
  { printf '\x00{"frames": 12, "codebooks": 16, "codes": ['
    od -An -v -td4 -w64 $C | sed 's/^ *//; s/  */, /g; s/^/[/; s/$/]/' | paste -sd, -
    printf ']}'; } >"$SEEDS/json_tiny"
  ;;
wav)
  # the WAV fixtures Python wrote (s16, stereo, f32, empty); tests/fuzz/regress/wav
  # has malformed ones
  for f in tests/data/wav/*.wav; do cp "$f" "$SEEDS/"; done
  ;;
request)
  # speechc serve's request bodies: tests/fuzz/regress/request holds good
  # and bad ones; the dictionary has the field names
  ;;
esac

dict=()
[ -f tests/fuzz/$t.dict ] && dict=(-dict=tests/fuzz/$t.dict)
echo "fuzz_$t: ${secs}s, corpus $B/corpus/$t, crashes to $B/crashes/$t/" >&2
exec $B/fuzz_$t -max_total_time="$secs" -artifact_prefix=$B/crashes/$t/ -print_final_stats=1 \
  ${dict[@]+"${dict[@]}"} "$@" $B/corpus/$t "$SEEDS" tests/fuzz/regress/$t
