#!/usr/bin/env bash
# Soak benchmark (not in CI): 10,000 decode steps round-robin over 8
# sessions of the bundled tiny Qwen3, built with --max-context 256 so that
# every session fills its KV cache several times (a full session is reset
# and prefilled again).  RSS is printed every 1,000 steps; the run fails if
# RSS grows by more than 1 MiB after every cache has been full once.
#   scripts/soak.sh [bench/soak.c flags: --sessions N --steps N --every N --threads N]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target speechc soak >/dev/null
d=$(mktemp -d "${TMPDIR:-/tmp}/speechc-soak.XXXXXX")
trap 'rm -rf "$d"' EXIT
build/speechc build -q tests/data/llm/qwen3_gqa2_hd32_tied -o "$d/m.so" --max-context 256 --cc gcc
build/soak "$d/m.so" --sessions 8 --steps 10000 --every 1000 "$@"
