#!/usr/bin/env bash
# serve_load.sh — speechc serve under N concurrent clients for a bounded
# time, on loopback only, beside the pure-C qwen3-tts engine's server
# (`qwen_tts --serve`).  Not a test: it prints a table for docs/PERFORMANCE.md.
#
# Two checkpoints, random weights, made here without Python:
#   tiny  the committed tiny official TTS talker (tests/data/tts/tts_tiny_06b_layout)
#         with make_random_ckpt's codec-tiny: the server's own cost (HTTP,
#         streams, threads), speechc only (the peer reads special token ids
#         of the published vocabulary, which the tiny one does not have)
#   06b   make_random_ckpt qwen3-tts-0.6b --with-codec (the published shapes,
#         the 12 Hz codec at its published shapes), speechc at q8_0 with the
#         bf16 decoder against the peer at --int8
# Both get a byte-level tokenizer (256 byte ids, no merges, the chat template's
# special tokens at the model's ids), so a text of N ASCII characters is N ids.
#
# Each engine: start the server, one warm-up request, RSS, then for each
# client count: whole responses for SECONDS, streamed responses for SECONDS
# (bench/serve_load.c: a fresh connection per request, the next at once;
# time to first audio is the first body byte, so for a whole response it is
# the whole response), RSS after each.  Requests ask for FRAMES frames
# (speechc: max_frames; the peer: -m); with random weights either may stop
# earlier at a sampled EOS, so compare audio seconds per second, not
# requests per second, between engines.  Everything runs under
# flock $LOCK (one benchmark at a time on a shared machine).
#
# The peer: QWEN3TTS_BIN, default /tmp/peers/qwen3-tts/qwen_tts.  Its
# qwen_tts_server.c calls strcasestr without _GNU_SOURCE; built with gcc's
# default it gets an implicit int declaration and crashes on the first
# request (64-bit pointer cut to 32 bits).  Build it with
# `make blas SIMD=avx512bf16 EXTRA_CFLAGS=-D_GNU_SOURCE` (outside this
# repository) and point QWEN3TTS_BIN at that binary.
#
#   bench/serve_load.sh
#   CONFIGS=tiny CLIENTS="1 4" SECONDS_PER=10 bench/serve_load.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=${WORK:-/tmp/speechc-bench/serve}
CONFIGS=${CONFIGS:-"tiny 06b"}
CLIENTS=${CLIENTS:-"1 2 4"}
SECONDS_PER=${SECONDS_PER:-60}
MAX_REQUESTS=${MAX_REQUESTS:-100000}
FRAMES=${FRAMES:-25}
THREADS=${THREADS:-2}
DECODER_THREADS=${DECODER_THREADS:-0} # speechc serve --decoder-threads (0: as THREADS)
ENGINES=${ENGINES:-"speechc qwen3-tts"}
QWEN3TTS_BIN=${QWEN3TTS_BIN:-/tmp/peers/qwen3-tts/qwen_tts}
# streams each server takes at once: speechc's --max-streams (its running
# requests stepped together), the peer's --batch-size (its request
# batching); default the largest client count, at least 4 for speechc
MAX_CLIENTS=$(printf '%s\n' $CLIENTS | sort -n | tail -1)
MAX_STREAMS=${MAX_STREAMS:-$(( MAX_CLIENTS > 4 ? MAX_CLIENTS : 4 ))}
PEER_BATCH=${PEER_BATCH:-$MAX_CLIENTS}
PEER_PORT=${PEER_PORT:-18080}
LOCK=${LOCK:-/tmp/speechc-bench.lock}
TEXT="Hello world, this is a test of the speech server."
bin=$ROOT/build/speechc load=$ROOT/build/serve_load mrc=$ROOT/build/make_random_ckpt
for b in "$bin" "$load" "$mrc"; do
  [ -x "$b" ] || { echo "serve_load.sh: build first (cmake --build build): $b" >&2; exit 2; }
done
mkdir -p "$WORK"
has() { case " $ENGINES " in *" $1 "*) return 0;; esac; return 1; }

# tokenizer DIR ASSISTANT IM_START IM_END: GPT-2's byte alphabet as ids
# 0..255, no merges, the template's three special tokens at these ids
tokenizer() {
  local dir=$1 id=0 extra=0 b
  { printf '{'
    for b in $(seq 0 255); do
      if { [ $b -ge 33 ] && [ $b -le 126 ]; } || { [ $b -ge 161 ] && [ $b -le 172 ]; } || [ $b -ge 174 ]; then :; else continue; fi
      printf '"\\u%04x": %d,' $b $id; id=$((id + 1))
    done
    for b in $(seq 0 255); do
      if { [ $b -ge 33 ] && [ $b -le 126 ]; } || { [ $b -ge 161 ] && [ $b -le 172 ]; } || [ $b -ge 174 ]; then continue; fi
      printf '"\\u%04x": %d' $((256 + extra)) $id; id=$((id + 1)); extra=$((extra + 1))
      [ $id -lt 256 ] && printf ','
    done
    printf '}\n'; } > "$dir/vocab.json"
  printf '#version: 0.2\n' > "$dir/merges.txt"
  printf '{"added_tokens_decoder": {"%s": {"content": "assistant"}, "%s": {"content": "<|im_start|>"}, "%s": {"content": "<|im_end|>"}}}\n' \
    "$2" "$3" "$4" > "$dir/tokenizer_config.json"
}

# The fixtures (made once, kept in WORK).
fixture() {
  case $1 in
    tiny)
      if [ ! -f "$WORK/tiny.so" ]; then
        rm -rf "$WORK/tiny"
        cp -r tests/data/tts/tts_tiny_06b_layout "$WORK/tiny"
        "$mrc" codec-tiny "$WORK/tiny/speech_tokenizer" --dtype f32 >/dev/null
        tokenizer "$WORK/tiny" 300 480 481
        "$bin" build -q "$WORK/tiny" -o "$WORK/tiny.so" --cc gcc
      fi
      SO=$WORK/tiny.so VOICE=tiny_speaker ;;
    06b)
      # an artifact from before the batched frame entries is rebuilt
      if [ ! -f "$WORK/t06q8.so" ] || ! "$bin" inspect "$WORK/t06q8.so" | grep -q talker_batch; then
        [ -f "$WORK/t06/model.safetensors" ] || "$mrc" qwen3-tts-0.6b "$WORK/t06" --dtype bf16 --with-codec >/dev/null
        tokenizer "$WORK/t06" 77091 151644 151645
        "$bin" build -q "$WORK/t06" -o "$WORK/t06q8.so" --cc gcc --weights q8_0 --codec-weights bf16
      fi
      SO=$WORK/t06q8.so VOICE=random_speaker ;;
  esac
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# run ENGINE CONFIG PORT PID WHOLE_PATH WHOLE_BODY STREAM_PATH STREAM_BODY
run() {
  local engine=$1 config=$2 port=$3 pid=$4 c mode path body line
  local r0 r1
  r0=$(rss_kb "$pid")
  for c in $CLIENTS; do
    for mode in whole stream; do
      if [ $mode = whole ]; then path=$5 body=$6; else path=$7 body=$8; fi
      line=$(flock "$LOCK" "$load" "$port" "$path" "$body" --clients "$c" --seconds "$SECONDS_PER" \
             --max-requests "$MAX_REQUESTS") || true
      r1=$(rss_kb "$pid")
      printf '%-9s %-5s %-6s rss_kb_before=%s rss_kb_after=%s %s\n' "$engine" "$config" "$mode" "$r0" "$r1" "$line"
    done
  done
}

echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg); ${SECONDS_PER} s per row, FRAMES=$FRAMES, THREADS=$THREADS," \
     "MAX_STREAMS=$MAX_STREAMS, PEER_BATCH=$PEER_BATCH"
for config in $CONFIGS; do
  fixture "$config"
  if has speechc; then
    out=$WORK/speechc.out
    "$bin" serve "$SO" --port 0 --max-streams "$MAX_STREAMS" --threads "$THREADS" \
      --decoder-threads "$DECODER_THREADS" --max-frames "$FRAMES" -q >"$out" 2>"$WORK/speechc.err" &
    pid=$!
    for _ in $(seq 1 300); do grep -q listening "$out" 2>/dev/null && break; sleep 0.1; done
    port=$(sed -n 's/.*:\([0-9][0-9]*\) (model.*/\1/p' "$out")
    base="\"input\":\"$TEXT\",\"voice\":\"$VOICE\",\"seed\":1,\"max_frames\":$FRAMES"
    "$load" "$port" /v1/audio/speech "{$base}" --clients 1 --max-requests 1 >/dev/null # warm-up
    run speechc "$config" "$port" "$pid" /v1/audio/speech "{$base}" /v1/audio/speech \
      "{$base,\"stream\":true,\"response_format\":\"pcm\"}"
    kill -INT "$pid"; wait "$pid" || true
  fi
  if has qwen3-tts && [ "$config" = 06b ]; then
    [ -x "$QWEN3TTS_BIN" ] || { echo "serve_load.sh: no peer at $QWEN3TTS_BIN" >&2; continue; }
    # its stdin a FIFO held open here: the peer's server stops at end of input
    rm -f "$WORK/peer.in"
    mkfifo "$WORK/peer.in"
    batch=()
    [ "$PEER_BATCH" -ge 2 ] && batch=(--batch-size "$PEER_BATCH")
    "$QWEN3TTS_BIN" -d "$WORK/t06" --serve "$PEER_PORT" -j "$THREADS" -m "$FRAMES" --int8 "${batch[@]}" <"$WORK/peer.in" \
      >"$WORK/peer.log" 2>&1 &
    pid=$!
    exec 3>"$WORK/peer.in"
    for _ in $(seq 1 600); do grep -q "Server listening" "$WORK/peer.log" 2>/dev/null && break; sleep 0.1; done
    "$load" "$PEER_PORT" /v1/audio/speech "{\"input\":\"$TEXT\",\"voice\":\"ryan\",\"seed\":1}" --clients 1 \
      --max-requests 1 >/dev/null # warm-up
    run qwen3-tts "$config" "$PEER_PORT" "$pid" /v1/audio/speech "{\"input\":\"$TEXT\",\"voice\":\"ryan\",\"seed\":1}" \
      /v1/tts/stream "{\"text\":\"$TEXT\",\"speaker\":\"ryan\",\"seed\":1}"
    exec 3>&-
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" || true
    rm -f "$WORK/peer.in"
  fi
done
