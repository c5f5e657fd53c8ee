#!/usr/bin/env bash
# Build speechc, compile the bundled tiny Qwen3 checkpoint with the embedded
# libtcc toolchain, inspect it and generate 16 tokens greedily.
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
