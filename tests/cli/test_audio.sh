#!/usr/bin/env bash
# Speech out on the command line (issue 14): a Qwen3-TTS checkpoint with a
# speech_tokenizer/ builds both artifacts in one command; `speechc tts -o
# out.wav` decodes each frame on a decoder thread while the next is made,
# and its audio equals `speechc decode` of the codes it saved (one frame
# per call) and the sequential order's; `-o -` streams the same samples as
# bare s16le; errors mid-stream on either side end with the error, never a
# hang; bad codes, a missing decoder and the wrong kind of model are
# refused by name.  The talker is the committed tiny official checkpoint,
# its decoder a random codec-tiny from make_random_ckpt (beside speechc).
. "$(dirname "$0")/lib.sh" "$@"
MRC=$(dirname "$BIN")/make_random_ckpt
T=$W/tts
IDS=480,300,198,5,6,7,8,9,10,481,198,480,300,198
SAY0=(--text-ids $IDS --speaker tiny_speaker --language english --seed 3)
SAY=("${SAY0[@]}" --max-frames 12)

setup copy cp -r "$TTS6" "$T" &&
setup codec "$MRC" codec-tiny "$T/speech_tokenizer" --dtype f32 &&
expect build-both 0 "building its decoder into $W/m.codec.so" -- "$BIN" build "$T" -o "$W/m.so"
expect both-artifacts 0 -- test -f "$W/m.so" -a -f "$W/m.codec.so"
mkdir -p "$W/nc"
expect build-no-codec 0 -- "$BIN" build -q "$T" -o "$W/nc/m.so" --no-codec
expect no-codec-artifact 1 -- test -e "$W/nc/m.codec.so"

expect tts-wav 0 "time to first audio" "decoder" "whole pipeline real-time factor" "decoder on its own thread" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]}" -o "$W/out.wav" --codes "$W/codes.json" --decoder-batch 1
# one frame per decoder call, as tts decoded them here: the same calls, so the same bits
expect decode-codes 0 "real-time factor" -- "$BIN" decode "$W/m.codec.so" "$W/codes.json" -o "$W/dec.wav" --chunk 1
expect tts-equals-decode 0 -- cmp "$W/out.wav" "$W/dec.wav"
# names in any case: OUT.WAV is audio, and codes saved as .BIN are the raw
# int32 that decode reads from that name
expect tts-upper-names 0 -- \
  "$BIN" tts "$W/m.so" "${SAY[@]}" -o "$W/UP.WAV" --codes "$W/codes.BIN" --decoder-batch 1 -q
expect upper-wav-is-audio 0 -- cmp "$W/out.wav" "$W/UP.WAV"
expect decode-upper-bin 0 -- "$BIN" decode "$W/m.codec.so" "$W/codes.BIN" -o "$W/dec_bin.wav" --chunk 1 -q
expect upper-bin-equals 0 -- cmp "$W/out.wav" "$W/dec_bin.wav"
# the old order, on one thread: the same bits again
expect tts-sequential 0 "(sequential, 1.00 frames per decoder call)" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]}" -o "$W/seq.wav" --sequential
expect sequential-equals-thread 0 -- cmp "$W/out.wav" "$W/seq.wav"
# batches as the decoder falls behind (bits within rounding: test_tts_audio),
# one kernel thread each side: every frame, the same codes
expect tts-batched 0 "decoder on its own thread" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]}" -o "$W/bat.wav" --codes "$W/bat.json" --threads 1 --decoder-threads 1
expect batched-codes 0 -- cmp "$W/codes.json" "$W/bat.json"
expect batched-size 0 -- test "$(stat -c %s "$W/bat.wav")" -eq "$(stat -c %s "$W/out.wav")"
frames=$(grep -o '"frames": [0-9]*' "$W/codes.json" | grep -o '[0-9]*$')
expect wav-size 0 -- test "$(stat -c %s "$W/out.wav")" -eq $((44 + frames * 1920 * 2))
expect wav-header 0 -- bash -c "head -c 4 '$W/out.wav' | grep -q RIFF"
expect tts-stdout 0 -- bash -c "'$BIN' tts '$W/m.so' ${SAY[*]} -o - -q --decoder-batch 1 > '$W/out.raw'"
expect stdout-is-wav-data 0 -- bash -c "tail -c +45 '$W/out.wav' | cmp - '$W/out.raw'"
expect tts-f32 0 -- "$BIN" tts "$W/m.so" "${SAY[@]}" -o "$W/f.wav" --f32 -q
expect f32-size 0 -- test "$(stat -c %s "$W/f.wav")" -eq $((58 + frames * 1920 * 4))
expect tts-codes-json 0 -- "$BIN" tts "$W/m.so" "${SAY[@]}" -o "$W/c2.json" -q
expect codes-same 0 -- cmp "$W/codes.json" "$W/c2.json"

# several requests at once (issue 19): one batch, one output each, each
# what the command with that one text writes (--decoder-batch 1 for audio)
IDS2=480,300,198,15,16,17,481,198,480,300,198
expect tts-other 0 -- "$BIN" tts "$W/m.so" --text-ids $IDS2 "${SAY[@]:2}" -o "$W/o1.wav" -q --decoder-batch 1
expect tts-other-codes 0 -- "$BIN" tts "$W/m.so" --text-ids $IDS2 "${SAY[@]:2}" -o "$W/o1.json" -q
for ms in 16 1; do
  expect "tts-many-$ms" 0 "request 3: " "4 requests, at most $(( ms < 4 ? ms : 4 )) at once" -- \
    "$BIN" tts "$W/m.so" "${SAY[@]:2}" --text-ids $IDS -o "$W/m1.wav" --text-ids $IDS2 -o "$W/m2.json" \
    --text-ids $IDS2 -o "$W/m3.wav" --text-ids $IDS -o "$W/m4.json" --max-streams $ms
  expect "many-$ms-wav" 0 -- cmp "$W/out.wav" "$W/m1.wav"
  expect "many-$ms-other-wav" 0 -- cmp "$W/o1.wav" "$W/m3.wav"
  expect "many-$ms-codes" 0 -- cmp "$W/o1.json" "$W/m2.json"
  expect "many-$ms-codes-2" 0 -- cmp "$W/codes.json" "$W/m4.json"
done
# one bad request fails alone, by name; the others are written
expect tts-many-one-bad 1 "request 2 (-o $W/n2.wav): error: text ids: token 999999" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]:2}" --text-ids $IDS -o "$W/n1.wav" --text-ids 999999,$IDS -o "$W/n2.wav"
expect many-good-kept 0 -- cmp "$W/out.wav" "$W/n1.wav"
expect tts-many-one-bad-quiet 1 "request 2 (-o $W/n2.wav): error: text ids: token 999999" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]:2}" --text-ids $IDS -o "$W/n1.wav" --text-ids 999999,$IDS -o "$W/n2.wav" -q
expect tts-many-count 1 "2 texts (--text, --text-ids) and 1 -o" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]:2}" --text-ids $IDS --text-ids $IDS -o "$W/x.wav"
expect tts-many-stdout 1 "-o - (stdout) takes a single request" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]:2}" --text-ids $IDS -o - --text-ids $IDS -o "$W/x.wav"
expect tts-many-codes 1 "--codes takes a single request" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]:2}" --text-ids $IDS -o "$W/x.wav" --text-ids $IDS -o "$W/y.wav" --codes "$W/c.json"
expect tts-many-max-streams 1 "--max-streams" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]:2}" --text-ids $IDS -o "$W/x.wav" --text-ids $IDS -o "$W/y.wav" --max-streams 0
expect tts-many-no-batch 1 "--max-batch 2 or more" -- \
  bash -c "'$BIN' build -q '$T' -o '$W/nb.so' --max-batch 1 && '$BIN' tts '$W/nb.so' ${SAY[*]:2} --text-ids $IDS \
    -o '$W/x.wav' --text-ids $IDS -o '$W/y.wav'"

# the checkpoint's tokenizer travels beside the model (model.tokenizer/)
TB=tests/data/tokenizer/tiny_bpe
setup tok-copy cp -r "$TTS6" "$W/tk" &&
setup tok-files cp "$TB/vocab.json" "$TB/merges.txt" "$TB/tokenizer_config.json" "$W/tk/" &&
expect build-tokenizer 0 "tokenizer files copied to $W/tk.tokenizer" -- "$BIN" build "$W/tk" -o "$W/tk.so"
expect tokenize-model 0 "out:970,401" -- "$BIN" tokenize "$W/tk.so" "hello world"
expect tokenize-dir 0 "out:970,401" -- "$BIN" tokenize "$TB" "hello world"
setup tok-json-only rm "$W/tk/vocab.json" "$W/tk/merges.txt" &&
setup tok-json cp "$TB/tokenizer.json" "$W/tk/" &&
expect rebuild-tokenizer-json 0 -- "$BIN" build -q "$W/tk" -o "$W/tk.so"
expect no-stale-vocab 1 -- test -e "$W/tk.tokenizer/vocab.json"
expect tokenize-model-json 0 "out:970,401" -- "$BIN" tokenize "$W/tk.so" "hello world"
setup tok-broken bash -c "echo '{broken' > '$W/tk/tokenizer.json'"
expect build-broken-tokenizer 2 "tokenizer.json" -- "$BIN" build -q "$W/tk" -o "$W/tk2.so"
setup tok-fix cp "$TB/tokenizer.json" "$W/tk/"
setup tok-blocker bash -c "echo x > '$W/tk3.tokenizer'"
expect build-tokenizer-blocked 2 "a directory is expected there" -- "$BIN" build -q "$W/tk" -o "$W/tk3.so"

# --codec-weights bf16: the decoder beside the talker in bf16, still decoding
mkdir -p "$W/bf"
expect build-codec-bf16 0 -- "$BIN" build -q "$T" -o "$W/bf/m.so" --codec-weights bf16
expect codec-bf16-band 0 -- bash -c "'$BIN' inspect '$W/bf/m.codec.so' | grep -q ' bf16 '"
expect talker-stays-f32 1 -- bash -c "'$BIN' inspect '$W/bf/m.so' | grep -q ' bf16 '"
expect decode-bf16 0 "real-time factor" -- "$BIN" decode "$W/bf/m.codec.so" "$W/codes.json" -o "$W/bf.wav"
expect codec-weights-bad 1 "--codec-weights expects f32 or bf16, got 'q4_0'" -- \
  "$BIN" build -q "$T" -o "$W/bf/n.so" --codec-weights q4_0

# a decoder whose stream holds 4 frames: more asked for is refused before
# anything runs; by default the request ends there (its decoder failing
# mid-stream is test_tts_audio's); a write error ends it with the error
setup codec-4 "$BIN" build -q "$T/speech_tokenizer" -o "$W/c4.so" --max-context 4
for mode in --decoder-batch=0 --sequential; do
  expect "decoder-too-many$mode" 1 "max_frames 12: the codec decoder's context holds 4 frames" -- \
    "$BIN" tts "$W/m.so" "${SAY[@]}" --codec "$W/c4.so" -o "$W/x.wav" -q $mode
  expect "decoder-ends$mode" 0 "stopped at the context's end after 4 frames" -- \
    "$BIN" tts "$W/m.so" "${SAY0[@]}" --codec "$W/c4.so" -o "$W/x.wav" -q $mode
  expect "decoder-ends-frames$mode" 0 -- test "$(stat -c %s "$W/x.wav")" -eq $((44 + 4 * 1920 * 2))
done
# more frames than the decoder's stream holds: refused before any work
expect decode-too-long 1 "codes.json: $frames frames, more than this decoder's stream holds (4" -- \
  "$BIN" decode "$W/c4.so" "$W/codes.json" -o "$W/c4.wav"
expect decode-too-long-no-file 1 -- test -e "$W/c4.wav"
expect write-fails 2 "stdout: write failed" -- bash -c "'$BIN' tts '$W/m.so' ${SAY[*]} -o - -q > /dev/full"
# the talker's context holds 8 frames after a 10-row prompt (17 positions):
# without --max-frames the request ends there, as at max_frames, with a
# warning, every frame heard, in either order; asking for more is refused
# before anything runs, the -o file left as it was
setup talker-17 "$BIN" build -q "$T" -o "$W/t17.so" --max-context 17 --no-codec
expect talker-ends-seq 0 "warning: stopped at the context's end after 8 frames" -- \
  "$BIN" tts "$W/t17.so" "${SAY0[@]}" --codec "$W/m.codec.so" -o "$W/t17s.wav" -q --sequential
expect talker-ends 0 "warning: stopped at the context's end after 8 frames" -- \
  "$BIN" tts "$W/t17.so" "${SAY0[@]}" --codec "$W/m.codec.so" -o "$W/t17.wav" -q --decoder-batch 1
expect talker-ends-same-audio 0 -- cmp "$W/t17s.wav" "$W/t17.wav"
expect talker-ends-frames 0 -- test "$(stat -c %s "$W/t17.wav")" -eq $((44 + 8 * 1920 * 2))
# the same frames as the first 8 of a longer context's
expect talker-ends-prefix 0 -- cmp -n $((44 + 8 * 1920 * 2 - 44)) -i 44 "$W/t17s.wav" "$W/seq.wav"
echo kept > "$W/t17k.wav"
expect talker-too-many 1 "max_frames 12: the prompt's 10 rows leave room for 8 frames in the talker's context of 17 positions" -- \
  "$BIN" tts "$W/t17.so" "${SAY[@]}" --codec "$W/m.codec.so" -o "$W/t17k.wav" -q
expect talker-too-many-kept 0 -- grep -qx kept "$W/t17k.wav"
expect talker-exact 0 -- "$BIN" tts "$W/t17.so" "${SAY0[@]}" --max-frames 8 --codec "$W/m.codec.so" -o "$W/t17e.wav" -q --sequential
expect talker-exact-same 0 -- cmp "$W/t17s.wav" "$W/t17e.wav"

# refusals
expect tts-wav-no-codec 1 "no codec decoder beside the model" -- \
  "$BIN" tts "$W/nc/m.so" "${SAY[@]}" -o "$W/x.wav"
expect tts-codes-with-json 1 "--codes goes with an audio -o" -- \
  "$BIN" tts "$W/m.so" "${SAY[@]}" -o "$W/x.json" --codes "$W/y.json"
expect decode-lm 1 "not a codec decoder" -- "$BIN" decode "$W/m.so" "$W/codes.json" -o "$W/x.wav"
echo '[[1,2,3]]' > "$W/short.json"
expect decode-short-frame 2 "frame 0 has 3 codes, expected 16" -- \
  "$BIN" decode "$W/m.codec.so" "$W/short.json" -o "$W/x.wav"
echo '[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,2048]]' > "$W/big.json"
expect decode-code-range 2 "2048" -- "$BIN" decode "$W/m.codec.so" "$W/big.json" -o "$W/x.wav"
expect decode-no-output 1 "missing -o" -- "$BIN" decode "$W/m.codec.so" "$W/codes.json"
expect decode-both-stdio 1 "cannot both be -" -- "$BIN" decode "$W/m.codec.so" - -o -
expect decode-missing-codes 2 "nope.json" -- "$BIN" decode "$W/m.codec.so" "$W/nope.json" -o "$W/x.wav"
expect decode-unknown-flag 1 "unknown option '--bogus'" -- "$BIN" decode "$W/m.codec.so" "$W/codes.json" -o "$W/x.wav" --bogus

# generation_config.json's defaults, as qwen-tts' _merge_generate_kwargs
# takes them: greedy talker and predictor and 5 frames at most, unless a
# flag says otherwise; a value qwen-tts could not sample with is refused
T2=$W/tts_gen
GEN='{"do_sample": false, "subtalker_dosample": false, "max_new_tokens": 5, "temperature": 1.5,
  "subtalker_temperature": 1.5, "pad_token_id": 7}'
setup copy-gen cp -r "$TTS6" "$T2" && printf '%s\n' "$GEN" >"$T2/generation_config.json"
expect build-gen 0 -- "$BIN" build -q "$T2" -o "$W/gen.so" --no-codec
expect tts-gen-defaults 0 " 5 frames in " -- "$BIN" tts "$W/gen.so" "${SAY0[@]}" -o "$W/gen.json"
expect tts-plain-greedy 0 -- "$BIN" tts "$W/nc/m.so" "${SAY0[@]}" -o "$W/greedy.json" --greedy --max-frames 5
expect gen-is-greedy 0 -- cmp "$W/gen.json" "$W/greedy.json"
expect tts-plain-greedy6 0 -- "$BIN" tts "$W/nc/m.so" "${SAY0[@]}" -o "$W/greedy6.json" --greedy --max-frames 6
# a flag wins over the file: sampled, as the plain model samples with this seed
expect tts-gen-flags 0 -- "$BIN" tts "$W/gen.so" "${SAY0[@]}" -o "$W/gen_s.json" --max-frames 6 --sample \
  --temperature 0.9 --sub-temperature 0.9
expect tts-plain-sampled 0 -- "$BIN" tts "$W/nc/m.so" "${SAY0[@]}" -o "$W/plain_s.json" --max-frames 6
expect gen-flags-win 0 -- cmp "$W/gen_s.json" "$W/plain_s.json"
expect gen-sampled-differs 1 -- cmp -s "$W/gen_s.json" "$W/greedy6.json"
printf '{"do_sample": true, "top_p": 2}\n' >"$T2/generation_config.json"
expect build-gen-bad 2 "generation_config.json: top_p is not a number in (0, 1]" -- \
  "$BIN" build -q "$T2" -o "$W/gen_bad.so" --no-codec
printf '{"do_sample": "yes"}\n' >"$T2/generation_config.json"
expect build-gen-type 2 "generation_config.json: do_sample is not true or false" -- \
  "$BIN" build -q "$T2" -o "$W/gen_bad.so" --no-codec
finish
