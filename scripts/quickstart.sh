#!/usr/bin/env bash
# Build speechc, compile the bundled tiny Qwen3 checkpoint with the embedded
# libtcc toolchain, inspect it and generate 16 tokens greedily; then speak
# with the tiny Qwen3-TTS checkpoint and a random codec decoder into a WAV.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --no-cuda-tools
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
mkdir -p out
build/speechc build tests/data/llm/qwen3_gqa2_hd32_tied -o out/tiny-qwen3.so
build/speechc inspect out/tiny-qwen3.so | head -12
echo "prompt:                   0 4 134 16 186 230 101 208"
echo "HF transformers (greedy):  111 17 145 233 252 95 92 171 131 226 124 167 128 54 160 205"
echo -n "speechc (greedy):          "
build/speechc run out/tiny-qwen3.so --ids 0,4,134,16,186,230,101,208 -n 16 --greedy

# Speech out: the bundled tiny Qwen3-TTS checkpoint (official classes, random
# weights) with a random 12 Hz codec decoder in its speech_tokenizer/, built
# in one command and spoken to a WAV file.  Random weights make noise: this
# shows the path works, not what a real voice sounds like.
rm -rf out/tiny-tts && cp -r tests/data/tts/tts_tiny_06b_layout out/tiny-tts
build/make_random_ckpt codec-tiny out/tiny-tts/speech_tokenizer --dtype f32 >/dev/null
build/speechc build out/tiny-tts -o out/tiny-tts.so -q
build/speechc tts out/tiny-tts.so --text-ids 480,300,198,5,6,7,8,9,10,481,198,480,300,198 \
  --speaker tiny_speaker --language english --max-frames 25 -q -o out/tiny-tts.wav
echo "wrote out/tiny-tts.wav ($(stat -c %s out/tiny-tts.wav) bytes of 24 kHz 16-bit noise from random weights)"
