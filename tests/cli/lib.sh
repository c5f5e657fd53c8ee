# lib.sh — what every command-line test script shares (sourced, not run):
# the speechc binary from $1, a scratch directory $W removed at exit, and
#   expect NAME RC [PATTERN...] -- CMD [ARG...]   one case (see below)
#   setup NAME CMD...                             a step later cases need
#   ck NAME                                       a copy of the qwen3 checkpoint
#   finish                                        the "N passed, N failed" line
# Used by tests/cli/test_cli.sh and tests/cli/hostile/*.sh.
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 path/to/speechc (run from the repository root)" >&2
  exit 2
fi
BIN=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
DATA=tests/data/llm
QWEN=$DATA/qwen3_gqa2_hd32_tied
SHARDED=$DATA/llama_gqa4_sharded
if [ ! -f "$QWEN/config.json" ]; then
  echo "$0: $QWEN not found; run from the repository root" >&2
  exit 2
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/speechc-cli.XXXXXX") || exit 2
trap 'rm -rf "$W"' EXIT

n_pass=0
n_fail=0

fail_case() {
  n_fail=$((n_fail + 1))
  echo "FAIL $1: $2"
  if [ -s "$W/err" ]; then sed -n '1,6s/^/     | /p' "$W/err"; fi
}

# expect NAME RC [PATTERN...] -- CMD [ARG...]
# Runs CMD (a program, not a shell function; stdin empty; killed after
# CASE_TIMEOUT seconds, default 120, which fails the case as a hang);
# passes when it exits with RC, did not crash, and every PATTERN
# occurs (as a fixed string) in its stderr, or in its stdout for "out:TEXT".
expect() {
  local name=$1 want=$2 p why=""
  shift 2
  local pats=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do pats+=("$1"); shift; done
  shift
  timeout -k 5 "${CASE_TIMEOUT:-120}" "$@" >"$W/out" 2>"$W/err" </dev/null
  local rc=$?
  if [ "$rc" -eq 124 ]; then
    why="hung (killed after ${CASE_TIMEOUT:-120} s)"
  elif [ "$rc" -ge 128 ]; then
    why="crashed (exit $rc)"
  elif grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$W/err"; then
    why="sanitizer report"
  elif [ "$rc" -ne "$want" ]; then
    why="exit $rc, expected $want"
  else
    for p in ${pats[@]+"${pats[@]}"}; do
      case $p in
        out:*) grep -qF -- "${p#out:}" "$W/out" || { why="stdout lacks '${p#out:}'"; break; } ;;
        *) grep -qF -- "$p" "$W/err" || { why="stderr lacks '$p'"; break; } ;;
      esac
    done
  fi
  if [ -n "$why" ]; then fail_case "$name" "$why"; return 1; fi
  n_pass=$((n_pass + 1))
  return 0
}

# A setup step that must work for the cases after it to mean anything.
setup() {
  local name=$1
  shift
  if ! "$@" >"$W/out" 2>"$W/err"; then fail_case "$name" "setup failed: $*"; return 1; fi
  return 0
}

# ck NAME: a copy of the qwen3 checkpoint in $W/NAME, to be damaged.
ck() {
  mkdir -p "$W/$1" && cp "$QWEN/config.json" "$QWEN/model.safetensors" "$W/$1/"
}

TTS6=tests/data/tts/tts_tiny_06b_layout
TTS17=tests/data/tts/tts_tiny_17b_layout

finish() {
  echo "$n_pass passed, $n_fail failed"
  [ "$n_fail" -eq 0 ]
}
