#!/usr/bin/env bash
# The whole test suite: unit, parity against the committed HF traces (both
# toolchains), golden generated code, bad input and CLI.  No Python, GPU or
# network needed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j2
