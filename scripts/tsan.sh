#!/usr/bin/env bash
# ThreadSanitizer: builds build-tsan/ (-DSPEECHC_TSAN=ON) and runs under it
# test_sessions (two sessions of one model in two threads, each session
# with one or two kernel threads, libtcc and gcc builds) and test_tts_audio
# (Qwen3-TTS with its codec decoder on a thread of its own, stops and
# errors on either side) and test_threads (the pool, sc_pool_limit, results
# for 1-3 kernel threads) and test_serve (speechc serve built with TSan:
# connection threads, generator threads, streams taken and given back,
# clients leaving) and test_batch (batched decode: one session's kernel
# threads writing every row's own session state).  Any data race fails the
# run (halt_on_error; in the server child it fails its exit status).
# About a minute on two cores.
#   scripts/tsan.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-tsan -DSPEECHC_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-tsan -j"$(nproc)" --target test_sessions test_tts_audio test_threads test_serve test_batch make_random_ckpt speechc >/dev/null
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:exitcode=66}
ctest --test-dir build-tsan --output-on-failure -R '^(test_sessions|test_tts_audio|test_threads|test_serve|test_batch)$' "$@"
