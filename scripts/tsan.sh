#!/usr/bin/env bash
# ThreadSanitizer: builds build-tsan/ (-DSPEECHC_TSAN=ON) and runs
# test_sessions under it: two sessions of one model in two threads, each
# session with one or two kernel threads, libtcc and gcc builds.  Any data
# race fails the run (halt_on_error).  About a minute on two cores.
#   scripts/tsan.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -DSPEECHC_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-tsan -j"$(nproc)" --target test_sessions speechc >/dev/null
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:exitcode=66}
ctest --test-dir build-tsan --output-on-failure -R '^test_sessions$' "$@"
