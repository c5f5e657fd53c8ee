#!/usr/bin/env bash
# files.sh — hostile input files (issue 12, items 5, 6, 8, 9, 12 and the
# input-file parts of 14): FIFOs, devices and directories where a file is
# expected, truncated artifacts, oversized and duplicate-key JSON, a NUL in
# a tensor name, --text-ids from pipes, symlinks out of the checkpoint, and
# paths too long for a message.
#
#   usage: tests/cli/hostile/files.sh path/to/speechc   (cwd: the repository root)
#
# A case that hung before its fix runs under a short CASE_TIMEOUT, so a
# regression fails in seconds instead of stalling ctest.
set -u
. "$(dirname "$0")/../lib.sh"

# u64le N: 8 raw little-endian bytes
u64le() { local n=$1 i s=""; for i in 0 1 2 3 4 5 6 7; do s+=$(printf '\\x%02x' $(((n >> (8 * i)) & 255))); done; printf "$s"; }

mkdir -p "$W/a" "$W/tts"
setup build-llm "$BIN" build -q "$QWEN" -o "$W/a/m.so" || { finish; exit; }
WN=$(cd "$W/a" && echo m.*.weights)   # the weight file's name, which m.so names
setup build-tts "$BIN" build -q "$TTS6" -o "$W/tts/m.so" || { finish; exit; }
ids=480,300,198,118,14,98,93,149,124,481,198,480,300,198
FO=$W/failed_out
mkdir -p "$FO"

# ------------------------------------------ item 5: FIFOs as model files
# Each of these blocked forever in open() (dlopen of a FIFO, too).
mkdir -p "$W/fw" && cp "$W/a/m.so" "$W/fw/" && mkfifo "$W/fw/$WN"
CASE_TIMEOUT=10 expect fifo-weights-inspect 2 "$W/fw/$WN: is a FIFO, expected" -- "$BIN" inspect "$W/fw/m.so"
CASE_TIMEOUT=10 expect fifo-weights-run 2 "$W/fw/$WN: is a FIFO, expected" -- "$BIN" run "$W/fw/m.so" --ids 1 -n 1

mkdir -p "$W/fso" && mkfifo "$W/fso/m.so" && cp "$W/a/$WN" "$W/fso/"
CASE_TIMEOUT=10 expect fifo-model-so 2 "$W/fso/m.so: is a FIFO, expected a regular" -- "$BIN" inspect "$W/fso/m.so"

# ------------------------------------------- item 6: truncated model.so
# dlopen mapped the missing pages and died of SIGBUS; now the ELF headers
# are checked against the file size first.
so_size=$(wc -c <"$W/a/m.so")
mkdir -p "$W/trunc"
cp "$W/a/$WN" "$W/trunc/$WN"
for n in 10000 $((so_size / 2)) $((so_size - 1)) 4096 200 64 10 0; do
  head -c "$n" "$W/a/m.so" >"$W/trunc/m.so"
  expect "truncated-so-$n-inspect" 2 "$W/trunc/m.so" "truncated or not an ELF shared object" -- \
    "$BIN" inspect "$W/trunc/m.so"
done
head -c 10000 "$W/a/m.so" >"$W/trunc/m.so"
expect truncated-so-run 2 "truncated or not an ELF shared object" -- "$BIN" run "$W/trunc/m.so" --ids 1 -n 1
expect truncated-so-bench 2 "truncated or not an ELF shared object" -- "$BIN" bench "$W/trunc/m.so" --probe-mb 16
expect truncated-so-tts 2 "truncated or not an ELF shared object" -- \
  "$BIN" tts "$W/trunc/m.so" --text-ids "$ids" -o -
# the whole file still loads (the check is not off by one)
cp "$W/a/m.so" "$W/trunc/m.so"
expect untruncated-so 0 "out:(verified)" -- "$BIN" inspect "$W/trunc/m.so"

# ----------------------------- item 14: weights path a directory or device
# a directory said "mmap failed: No such device"
mkdir -p "$W/wd/$WN" && cp "$W/a/m.so" "$W/wd/"
expect weights-is-directory 2 "$W/wd/$WN: is a directory, expected the weight file written by speechc build" -- \
  "$BIN" inspect "$W/wd/m.so"
mkdir -p "$W/wdev" && cp "$W/a/m.so" "$W/wdev/" && ln -s /dev/zero "$W/wdev/$WN"
CASE_TIMEOUT=20 expect weights-dev-zero 2 "$W/wdev/$WN: is a character device" -- "$BIN" inspect "$W/wdev/m.so"

# -------------------------------- item 14: paths longer than a message
long=$W
for i in 1 2 3 4 5 6 7 8; do long=$long/$(printf 'd%.0s' $(seq 250)); done
mkdir -p "$long"
expect long-path-reason-kept 2 "No such file or directory" "hint: pass the checkpoint directory" -- \
  "$BIN" build "$long/nonexistent" -o "$FO/m.so"
cp "$W/a/m.so" "$long/"
expect long-path-weights-missing 2 "is missing" "hint: it is written next to model.so" -- "$BIN" inspect "$long/m.so"

# ---------------------- items 5 and 8: checkpoint files, regular and bounded
# A FIFO blocked the open forever; a FIFO index or shard was taken for
# absent; /dev/zero and a 30 MB config were read whole.
if setup fifo-config ck fcfg; then
  rm "$W/fcfg/config.json" && mkfifo "$W/fcfg/config.json"
  CASE_TIMEOUT=10 expect fifo-config 2 "$W/fcfg/config.json: is a FIFO, expected a regular" -- \
    "$BIN" build "$W/fcfg" -o "$FO/m.so"
fi
if setup fifo-shard ck fst; then
  rm "$W/fst/model.safetensors" && mkfifo "$W/fst/model.safetensors"
  CASE_TIMEOUT=10 expect fifo-shard 2 "$W/fst/model.safetensors: is a FIFO, expected a regular" -- \
    "$BIN" build "$W/fst" -o "$FO/m.so"
fi
if setup fifo-index cp -r "$SHARDED" "$W/fidx"; then
  rm "$W/fidx/model.safetensors.index.json" && mkfifo "$W/fidx/model.safetensors.index.json"
  CASE_TIMEOUT=10 expect fifo-index 2 "$W/fidx/model.safetensors.index.json: is a FIFO, expected a regular" -- \
    "$BIN" build "$W/fidx" -o "$FO/m.so"
fi
if setup config-dev-zero ck zero; then
  rm "$W/zero/config.json" && ln -s /dev/zero "$W/zero/config.json"
  CASE_TIMEOUT=20 expect config-dev-zero 2 "$W/zero/config.json: is a character device, expected a regular" -- \
    "$BIN" build "$W/zero" -o "$FO/m.so"
fi
if setup config-30mb ck big; then
  # a valid config followed by 30 MB of spaces: valid JSON, refused by size
  { cat "$QWEN/config.json"; head -c 30000000 /dev/zero | tr '\0' ' '; } >"$W/big/config.json"
  expect config-30mb 2 "$W/big/config.json" "larger than the 16 MiB limit" -- "$BIN" build "$W/big" -o "$FO/m.so"
fi
if setup index-30mb cp -r "$SHARDED" "$W/bigidx"; then
  truncate -s 30000000 "$W/bigidx/model.safetensors.index.json"
  expect index-30mb 2 "$W/bigidx/model.safetensors.index.json" "larger than the 16 MiB limit" -- \
    "$BIN" build "$W/bigidx" -o "$FO/m.so"
fi

# --------------------------------- item 9: duplicate JSON keys, last wins
# Python's json (and so Hugging Face) keeps the last value of a repeated
# key; cJSON kept the first.  The tokens must be those of rope_theta 10.
if setup dup-key ck dup && setup dup-key-ten ck ten; then
  sed -i 's/"rope_theta": 1000000.0,/"rope_theta": 1000000.0, "rope_theta": 10.0,/' "$W/dup/config.json"
  sed -i 's/"rope_theta": 1000000.0,/"rope_theta": 10.0,/' "$W/ten/config.json"
  mkdir -p "$W/dupo" "$W/teno"
  if [ "$(grep -c rope_theta "$W/dup/config.json")" -ne 1 ] || ! grep -q '"rope_theta": 10.0' "$W/dup/config.json" ||
     ! grep -q '"rope_theta": 10.0' "$W/ten/config.json"; then
    : >"$W/err"
    fail_case dup-key "setup: the config edits did not apply"
  elif setup dup-key-build "$BIN" build -q "$W/dup" -o "$W/dupo/m.so" --emit-dir "$W/dupe" &&
       setup dup-key-build-ten "$BIN" build -q "$W/ten" -o "$W/teno/m.so"; then
    # the embedded config holds one rope_theta, the last
    if grep -q 'rope_theta\\":10' "$W/dupe/model.c" && ! grep -q 'rope_theta\\":1000000' "$W/dupe/model.c"; then
      n_pass=$((n_pass + 1))
    else
      : >"$W/err"
      fail_case dup-key-embedded "the embedded config is not rope_theta 10: $(grep -o 'rope_theta[^,]*' "$W/dupe/model.c" | head -2 | tr '\n' ' ')"
    fi
    orig=$("$BIN" run "$W/a/m.so" --ids 1,2,3,4 -n 16 --greedy)
    ten=$("$BIN" run "$W/teno/m.so" --ids 1,2,3,4 -n 16 --greedy)
    if [ "$orig" = "$ten" ]; then
      : >"$W/err"
      fail_case dup-key-tokens "setup: rope_theta 10 and 1e6 give the same tokens; the case proves nothing"
    else
      expect dup-key-tokens 0 "out:$ten" -- "$BIN" run "$W/dupo/m.so" --ids 1,2,3,4 -n 16 --greedy
    fi
  fi
fi
# nested objects too, and the index's weight_map
if setup dup-nested ck dupn; then
  sed -i 's/"rope_scaling": null,/"rope_scaling": {"rope_type": "bogus"}, "rope_scaling": null,/' "$W/dupn/config.json"
  mkdir -p "$W/dupno"
  expect dup-key-null-wins 0 -- "$BIN" build -q "$W/dupn" -o "$W/dupno/m.so"
fi
# a key that differs only by an escaped NUL must not become a duplicate
if setup nul-key ck nulkey; then
  sed -i 's/"rope_theta": 1000000.0,/"rope_theta": 1000000.0, "rope_theta\\u0000": 10.0,/' "$W/nulkey/config.json"
  expect config-nul-in-key 2 "$W/nulkey/config.json" '"rope_theta\u0000"' "NUL" -- \
    "$BIN" build "$W/nulkey" -o "$FO/m.so"
fi

# ------------------------------------- item 12: NUL in a tensor name
# model.norm.weight renamed to "model.norm.weight\u0000evil" in the header
# (10 bytes longer; the data and its offsets are unchanged).  cJSON cut the
# name at the NUL and the build used it as model.norm.weight.
if setup nul-name ck nul; then
  f=$QWEN/model.safetensors
  hlen=$(od -An -tu8 -N8 "$f" | tr -d ' ')
  hdr=$(head -c $((8 + hlen)) "$f" | tail -c "$hlen")
  new=${hdr/\"model.norm.weight\"/\"model.norm.weight\\u0000evil\"}
  if [ "$new" = "$hdr" ]; then
    : >"$W/err"
    fail_case nul-tensor-name "setup: model.norm.weight not in the header"
  else
    { u64le ${#new}; printf '%s' "$new"; tail -c +$((8 + hlen + 1)) "$f"; } >"$W/nul/model.safetensors"
    expect nul-tensor-name 2 "$W/nul/model.safetensors" 'tensor name "model.norm.weight\u0000evil"' "NUL" -- \
      "$BIN" build "$W/nul" -o "$FO/m.so"
  fi
fi

# ------------------------- item 14: symlinks out of the checkpoint directory
# A shard that is a link to a file elsewhere was followed, bypassing the
# index's '..' check.  Hugging Face's cache layout (snapshots/REV/* ->
# ../../blobs/SHA) and a linked checkpoint directory keep working.
mkdir -p "$W/elsewhere"
cp "$QWEN/model.safetensors" "$W/elsewhere/other.safetensors"
if setup link-out ck linkout; then
  rm "$W/linkout/model.safetensors" && ln -s "$W/elsewhere/other.safetensors" "$W/linkout/model.safetensors"
  expect shard-symlink-outside 2 "$W/linkout/model.safetensors" "outside the checkpoint directory" -- \
    "$BIN" build "$W/linkout" -o "$FO/m.so"
fi
if setup link-out-shard cp -r "$SHARDED" "$W/linkidx"; then
  mv "$W/linkidx/model-00002-of-00002.safetensors" "$W/elsewhere/"
  ln -s ../elsewhere/model-00002-of-00002.safetensors "$W/linkidx/model-00002-of-00002.safetensors"
  expect index-shard-symlink-outside 2 "model-00002-of-00002.safetensors" "outside the checkpoint directory" -- \
    "$BIN" build "$W/linkidx" -o "$FO/m.so"
fi
if setup link-out-config ck linkcfg; then
  cp "$QWEN/config.json" "$W/elsewhere/config.json"
  rm "$W/linkcfg/config.json" && ln -s "$W/elsewhere/config.json" "$W/linkcfg/config.json"
  expect config-symlink-outside 2 "$W/linkcfg/config.json" "outside the checkpoint directory" -- \
    "$BIN" build "$W/linkcfg" -o "$FO/m.so"
fi
# the Hugging Face hub cache
hf=$W/hub/models--Qwen--tiny
mkdir -p "$hf/blobs" "$hf/snapshots/0123abcd" "$W/hfo"
cp "$QWEN/config.json" "$hf/blobs/1111"
cp "$QWEN/model.safetensors" "$hf/blobs/2222"
ln -s ../../blobs/1111 "$hf/snapshots/0123abcd/config.json"
ln -s ../../blobs/2222 "$hf/snapshots/0123abcd/model.safetensors"
expect hf-cache-layout 0 -- "$BIN" build -q "$hf/snapshots/0123abcd" -o "$W/hfo/m.so"
# a --local-dir download of older huggingface_hub: links into the cache
mkdir -p "$W/local" "$W/localo"
ln -s "$hf/blobs/1111" "$W/local/config.json"
ln -s "$hf/blobs/2222" "$W/local/model.safetensors"
expect hf-local-dir-links 0 -- "$BIN" build -q "$W/local" -o "$W/localo/m.so"
# a linked checkpoint directory
mkdir -p "$W/linkdo"
ln -s "$(cd "$QWEN" && pwd)" "$W/linked-ckpt"
expect linked-checkpoint-dir 0 -- "$BIN" build -q "$W/linked-ckpt" -o "$W/linkdo/m.so"

# ----------------------------------------- items 5 and 14: --text-ids
# --text-ids may be a pipe (see below), but a FIFO nobody writes to is
# refused at once instead of waited on
mkfifo "$W/ids.fifo"
CASE_TIMEOUT=10 expect fifo-text-ids-no-writer 2 "$W/ids.fifo" "no process is writing to it" -- \
  "$BIN" tts "$W/tts/m.so" --text-ids "$W/ids.fifo" -o -
# a FIFO with a writer is read like a pipe
CASE_TIMEOUT=30 expect fifo-text-ids-writer 0 'out:"frames": 1' -- bash -c \
  'echo "$2" >"$1" & w=$!; "$0" tts "$3" --text-ids "$1" --max-frames 1 -q -o -; rc=$?; kill $w 2>/dev/null; exit $rc' \
  "$BIN" "$W/ids.fifo" "$ids" "$W/tts/m.so"

# a pipe: read to its end (was "empty": sized by st_size, which is 0)
expect text-ids-stdin-pipe 0 'out:"frames": 1' -- bash -c \
  'echo "$2" | "$0" tts "$1" --text-ids /dev/stdin --max-frames 1 -q -o -' "$BIN" "$W/tts/m.so" "$ids"
expect text-ids-process-substitution 0 'out:"frames": 1' -- bash -c \
  'exec "$0" tts "$1" --text-ids <(echo "$2") --max-frames 1 -q -o -' "$BIN" "$W/tts/m.so" "$ids"
# stdin of expect is /dev/null: a device, not a file of ids
expect text-ids-dev-null 2 "/dev/stdin" "is a character device" -- \
  "$BIN" tts "$W/tts/m.so" --text-ids /dev/stdin -o -
# a NUL byte cut the file short; now it is an error naming the offset
printf '480,300,198\0,118,14,98,93,149,124,481,198,480,300,198\n' >"$W/ids-nul.txt"
expect text-ids-nul 2 "$W/ids-nul.txt" "NUL byte at offset 11" -- \
  "$BIN" tts "$W/tts/m.so" --text-ids "$W/ids-nul.txt" -o -
# a directory
expect text-ids-dir 2 "$W: is a directory" -- "$BIN" tts "$W/tts/m.so" --text-ids "$W" -o -
# a file named 5 in the working directory: "5" is still the list [5] ...
mkdir -p "$W/cwd" && echo "$ids" >"$W/cwd/5"
expect text-ids-digits-are-a-list 1 "text ids: 1 tokens" -- \
  env -C "$W/cwd" "$BIN" tts "$W/tts/m.so" --text-ids 5 -o -
# ... and ./5 the file; a space-separated list works as the help says
expect text-ids-dot-slash-file 0 'out:"frames": 1' -- \
  env -C "$W/cwd" "$BIN" tts "$W/tts/m.so" --text-ids ./5 --max-frames 1 -q -o -
expect text-ids-space-list 0 'out:"frames": 1' -- \
  "$BIN" tts "$W/tts/m.so" --text-ids "${ids//,/ }" --max-frames 1 -q -o -
expect text-ids-missing-file 2 "$W/no-such-ids.txt: cannot open" -- \
  "$BIN" tts "$W/tts/m.so" --text-ids "$W/no-such-ids.txt" -o -
expect tts-help-ids-rule 0 "out:only digits" -- "$BIN" tts --help

left=$(ls -A "$FO")
if [ -n "$left" ]; then
  : >"$W/err"
  fail_case failures-leave-nothing "left behind in the output directory: $(echo $left)"
else
  n_pass=$((n_pass + 1))
fi

finish
