#!/usr/bin/env bash
# Mimi on the command line (issue 15): `speechc encode mimi.so in.wav -o
# codes` gives the moshi package's streaming codes (tests/data/mimi/mimi_tiny,
# tests/parity/make_mimi.py) as JSON that `speechc decode` reads, as raw
# int32, for any --chunk; a partial last frame is dropped with a note, as
# the package's loop drops it; a WAV of another rate or channel count, a
# codec without an encoder, an LM and bad flags are refused by name.
. "$(dirname "$0")/lib.sh" "$@"
M=tests/data/mimi/mimi_tiny
IN=$M/enc_in.wav

# wav RATE CHANNELS DATA_FILE OUT [f32]: a 16-bit PCM (or IEEE float32)
# RIFF header around DATA_FILE
wav() {
  local rate=$1 ch=$2 data=$3 out=$4 fmt=1 bytes=2 n
  [ "${5:-}" = f32 ] && fmt=3 bytes=4
  n=$(stat -c %s "$data")
  le32() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 24 & 255)))"; }
  le16() { printf "\\x$(printf %02x $(($1 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))"; }
  { printf RIFF; le32 $((36 + n)); printf WAVEfmt\ ; le32 16; le16 $fmt; le16 "$ch"; le32 "$rate"
    le32 $((rate * ch * bytes)); le16 $((ch * bytes)); le16 $((8 * bytes)); printf data; le32 "$n"; cat "$data"; } \
    > "$out"
}

setup build "$BIN" build -q "$M" -o "$W/mimi.so"
expect encode-json 0 "0.64 s of audio -> 8 frames of 4 codes" "real-time factor" -- \
  "$BIN" encode "$W/mimi.so" "$IN" -o "$W/codes.json"
expect encode-bin 0 -- "$BIN" encode "$W/mimi.so" "$IN" -o "$W/codes.bin" -q
expect encode-is-package 0 -- cmp "$W/codes.bin" "$M/enc_codes.i32"
expect encode-chunk1 0 -- "$BIN" encode "$W/mimi.so" "$IN" -o "$W/c1.bin" --chunk 1 -q
expect chunk1-same 0 -- cmp "$W/codes.bin" "$W/c1.bin"
expect encode-stdout 0 'out:"codebooks": 4' -- "$BIN" encode "$W/mimi.so" "$IN" -o - -q
expect stdout-same 0 -- bash -c "'$BIN' encode '$W/mimi.so' '$IN' -o - -q | cmp - '$W/codes.json'"
expect decode-encoded 0 "8 frames -> 0.64 s of audio" -- "$BIN" decode "$W/mimi.so" "$W/codes.json" -o "$W/back.wav"
expect decode-size 0 -- test "$(stat -c %s "$W/back.wav")" -eq $((44 + 8 * 1920 * 2))
expect help 0 "out:Whole frames only" -- "$BIN" help encode
# a Mimi whose streams hold 4 frames: 8 refused before any work, either way
setup build4 "$BIN" build -q "$M" -o "$W/mimi4.so" --max-context 4
expect encode-too-long 1 "8 frames, more than this encoder's stream holds (4" -- \
  "$BIN" encode "$W/mimi4.so" "$IN" -o "$W/c4.json"
expect encode-too-long-no-file 1 -- test -e "$W/c4.json"
expect decode-too-long 1 "8 frames, more than this decoder's stream holds (4" -- \
  "$BIN" decode "$W/mimi4.so" "$W/codes.json" -o "$W/c4.wav"

# the data of enc_in.wav, whole and cut
setup data bash -c "tail -c +45 '$IN' > '$W/data'"
expect data-size 0 -- test "$(stat -c %s "$W/data")" -eq $((8 * 1920 * 2))
setup cut bash -c "head -c $(((2 * 1920 + 100) * 2)) '$W/data' > '$W/cut'"
setup wav-cut wav 24000 1 "$W/cut" "$W/cut.wav"
expect partial-frame 0 "the last 100 samples are not a whole frame of 1920 and are dropped" -- \
  "$BIN" encode "$W/mimi.so" "$W/cut.wav" -o "$W/cut.bin"
expect partial-codes 0 -- cmp "$W/cut.bin" <(head -c $((2 * 4 * 4)) "$M/enc_codes.i32")
setup short bash -c "head -c 3000 '$W/data' > '$W/short'"
setup wav-short wav 24000 1 "$W/short" "$W/short.wav"
expect under-a-frame 2 "1500 samples, less than one frame of 1920" -- \
  "$BIN" encode "$W/mimi.so" "$W/short.wav" -o "$W/x.bin"
cp "$W/err" "$W/uaf.err" # the refusal's stderr, before the next case writes its own
expect under-a-frame-no-note 1 -- grep -q "are dropped" "$W/uaf.err"
setup wav-16k wav 16000 1 "$W/data" "$W/16k.wav"
expect other-rate 2 "16k.wav" "16000" "24000" -- "$BIN" encode "$W/mimi.so" "$W/16k.wav" -o "$W/x.bin"
setup wav-stereo wav 24000 2 "$W/data" "$W/st.wav"
expect stereo 2 "st.wav" "2 channels" -- "$BIN" encode "$W/mimi.so" "$W/st.wav" -o "$W/x.bin"

# float32: silence with one NaN at sample 1000 of frame 1
setup nan bash -c "{ head -c \$((2920 * 4)) /dev/zero; printf '\\x00\\x00\\xc0\\x7f'; head -c \$((919 * 4)) /dev/zero; } > '$W/nan'"
setup wav-nan wav 24000 1 "$W/nan" "$W/nan.wav" f32
expect nan-sample 2 "nan.wav: sample 2920 (0.122 s) is not finite" -- "$BIN" encode "$W/mimi.so" "$W/nan.wav" -o "$W/x.bin"
setup zero bash -c "head -c \$((3840 * 4)) /dev/zero > '$W/zero'"
setup wav-f32 wav 24000 1 "$W/zero" "$W/zero.wav" f32
expect f32-wav 0 "0.16 s of audio -> 2 frames" -- "$BIN" encode "$W/mimi.so" "$W/zero.wav" -o "$W/z.bin"

# refusals
setup lm "$BIN" build -q "$QWEN" -o "$W/lm.so"
expect encode-lm 1 "not a codec decoder" -- "$BIN" encode "$W/lm.so" "$IN" -o "$W/x.bin"
MRC=$(dirname "$BIN")/make_random_ckpt
setup qcodec "$MRC" codec-tiny "$W/ct" --dtype f32 &&
setup qcodec-build "$BIN" build -q "$W/ct" -o "$W/ct.so" &&
expect encode-12hz-codec 1 "this codec has no encoder" -- "$BIN" encode "$W/ct.so" "$IN" -o "$W/x.bin"
expect encode-no-output 1 "missing -o" -- "$BIN" encode "$W/mimi.so" "$IN"
expect encode-no-input 1 "missing IN.wav" -- "$BIN" encode "$W/mimi.so"
expect encode-missing-wav 2 "nope.wav" -- "$BIN" encode "$W/mimi.so" "$W/nope.wav" -o "$W/x.bin"
expect encode-not-wav 2 "codes.json" -- "$BIN" encode "$W/mimi.so" "$W/codes.json" -o "$W/x.bin"
expect encode-unknown-flag 1 "unknown option '--bogus'" -- "$BIN" encode "$W/mimi.so" "$IN" -o "$W/x.bin" --bogus
expect encode-bad-chunk 1 "--chunk" -- "$BIN" encode "$W/mimi.so" "$IN" -o "$W/x.bin" --chunk 0
finish
