#!/usr/bin/env bash
# Regenerate the golden generated sources under tests/golden/ from the tiny
# checkpoints in tests/data/llm (and the Qwen3.5 / Qwen3-Next ones in tests/data/gdn, the Moshi ones in tests/data/moshi,
# the Mimi and 12 Hz codec ones in tests/data/mimi and tests/data/codec).  Review the diff (git diff tests/golden)
# before committing: a change to generated code is a reviewed change.
#   scripts/regen_golden.sh [path/to/speechc]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/speechc}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The flags must match tests/unit/test_golden.c.
for model in llm/qwen3_gqa2_hd32_tied llm/qwen3_gqa4_hd16_bf16 llm/llama_gqa4_sharded gdn/qwen35_dense_tiny \
             gdn/qwen3_next_moe_tiny moshi/moshi7b_tiny moshi/family_tiny mimi/mimi_tiny codec/codec_tiny \
             tts/tts_tiny_06b_layout; do
  for fuse in fused unfused; do
    flags=(--cc tcc --max-context 64 --prefill-chunk 16 -q)
    [ "$fuse" = unfused ] && flags+=(--no-fuse)
    "$bin" build "tests/data/$model" -o "$work/model.so" --emit-dir "$work/src" "${flags[@]}"
    cp "$work/src/model.c" "tests/golden/${model#*/}.$fuse.cpu.c"
  done
done
# two quantized builds: the block-decoding embedding gathers
for band in q4_0 q8_0; do
  "$bin" build tests/data/llm/qwen3_gqa2_hd32_tied -o "$work/model.so" --emit-dir "$work/src" \
    --cc tcc --max-context 64 --prefill-chunk 16 --weights $band -q
  cp "$work/src/model.c" tests/golden/qwen3_gqa2_hd32_tied.fused.$band.cpu.c
done
# CUDA: the device source of every tiny checkpoint (needs NVRTC, since the
# build compiles it).  The flags must match tests/unit/test_cuda.c.
for model in llm/qwen3_gqa2_hd32_tied llm/qwen3_gqa4_hd16_bf16 llm/llama_gqa4_sharded \
             tts/tts_tiny_06b_layout tts/tts_tiny_17b_layout gdn/qwen35_dense_tiny gdn/qwen35_moe_tiny \
             gdn/qwen3_next_moe_tiny moshi/moshi7b_tiny moshi/family_tiny; do
  "$bin" build "tests/data/$model" -o "$work/model.so" --emit-dir "$work/cu" --target cuda \
    --cc tcc --max-context 64 --prefill-chunk 16 -q
  cp "$work/cu/model.cu" "tests/golden/${model#*/}.fused.cuda.cu"
done
# Metal: the MSL of the same checkpoints (no compiler runs at build time).
# The flags must match tests/unit/test_golden.c.
for model in llm/qwen3_gqa2_hd32_tied llm/qwen3_gqa4_hd16_bf16 llm/llama_gqa4_sharded \
             tts/tts_tiny_06b_layout tts/tts_tiny_17b_layout gdn/qwen35_dense_tiny gdn/qwen35_moe_tiny \
             gdn/qwen3_next_moe_tiny moshi/moshi7b_tiny moshi/family_tiny; do
  "$bin" build "tests/data/$model" -o "$work/model.so" --emit-dir "$work/mt" --target metal \
    --cc tcc --max-context 64 --prefill-chunk 16 -q
  cp "$work/mt/model.metal" "tests/golden/${model#*/}.fused.metal"
done
"$bin" build tests/data/llm/qwen3_gqa2_hd32_tied -o "$work/model.so" --emit-dir "$work/mt" --target metal \
  --cc tcc --max-context 64 --prefill-chunk 16 --weights q4_0 -q
cp "$work/mt/model.metal" tests/golden/qwen3_gqa2_hd32_tied.fused.q4_0.metal
echo "golden files written; review with: git diff --stat tests/golden"
