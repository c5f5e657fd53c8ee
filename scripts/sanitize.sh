#!/usr/bin/env bash
# The whole test suite again, built with AddressSanitizer + UBSan
# (-DSPEECHC_SANITIZE=ON) in build-asan/.  Any sanitizer report fails the
# run: UBSan is built with -fno-sanitize-recover, ASan aborts on its first
# error, and LeakSanitizer runs at every exit.
#   scripts/sanitize.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-asan -DSPEECHC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-asan -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir build-asan --output-on-failure -j2 "$@"
