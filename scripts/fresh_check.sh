#!/usr/bin/env bash
# The fresh-machine runs of CI, in one command: a clean clone of this
# repository's HEAD, then `CI=true bash .ci/run` in it twice,
#   1. as the machine is (the CUDA toolkit visible if it has one), and
#   2. with every CUDA toolkit hidden: in a private mount namespace
#      (unshare -m) an empty directory is bind-mounted over /usr/local/cuda's
#      target and every /usr/local/cuda-*, so neither NVRTC, ptxas nor the
#      stub driver can be found and the tests must get them the way a
#      fresh machine does (scripts/cuda_tools.sh);
# with --remove-deps, the Debian packages scripts/deps.sh installs and
# scripts/cuda_tools.sh's download are removed before each run, so the run
# must install them itself.  A summary (CPU, each run's result and ctest
# totals, time) is printed at the end; logs stay in the work directory.
#   sudo scripts/fresh_check.sh [--remove-deps] [--only 1|2] [--keep]
# Needs root (unshare, mount, apt-get).  Only committed work is checked.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
remove=0 only="" keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --remove-deps) remove=1 ;;
    --only) only=$2; shift ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "fresh_check.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh_check.sh: needs root (unshare -m, mount --bind, apt-get)" >&2
  exit 2
fi
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
  echo "fresh_check.sh: note: uncommitted changes in $repo are not part of the check" >&2
fi
work=$(mktemp -d /tmp/speechc-fresh.XXXXXX)
[ $keep -eq 1 ] || trap 'rm -rf "$work/clone"' EXIT
cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)
isa=$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 || { grep -qw avx2 /proc/cpuinfo && echo AVX2 || echo "no AVX2"; })
head=$(git -C "$repo" rev-parse --short HEAD)

remove_deps() {
  local pkgs=() p
  for p in $("$repo/scripts/deps.sh" --list); do
    dpkg -s "$p" >/dev/null 2>&1 && pkgs+=("$p")
  done
  if [ ${#pkgs[@]} -gt 0 ]; then
    echo "fresh_check.sh: removing ${pkgs[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "${pkgs[@]}" >/dev/null
  fi
  rm -rf "${HOME}"/.cache/speechc/cuda-tools-*
}

# the directories holding a CUDA toolkit, to hide in run 2
cuda_dirs() {
  local d
  { [ -e /usr/local/cuda ] && readlink -f /usr/local/cuda
    for d in /usr/local/cuda-*; do [ -d "$d" ] && readlink -f "$d"; done; } | sort -u
}

declare -A result
run() { # N: one clean clone, one CI run
  local n=$1 log=$work/run$1.log t0 rc
  rm -rf "$work/clone"
  git clone -q "$repo" "$work/clone"
  [ $remove -eq 1 ] && remove_deps
  t0=$(date +%s)
  set +e
  if [ "$n" = 1 ]; then
    (cd "$work/clone" && CI=true bash .ci/run) >"$log" 2>&1
  else
    mkdir -p "$work/empty"
    local mounts="" d
    for d in $(cuda_dirs); do mounts+="mount --bind '$work/empty' '$d' && "; done
    unshare -m bash -c "${mounts} cd '$work/clone' && \
      if command -v ptxas >/dev/null && ptxas --version >/dev/null 2>&1; then echo 'a ptxas still runs'; exit 99; fi; \
      CI=true bash .ci/run" >"$log" 2>&1
  fi
  rc=$?
  set -e
  local totals
  totals=$(grep -E 'tests passed|tests failed' "$log" | tr '\n' ';' || true)
  result[$n]="exit $rc in $(( $(date +%s) - t0 )) s; ctest: ${totals:-none}"
  echo "run $n: ${result[$n]} (log: $log)"
}

[ -z "$only" ] || [ "$only" = 1 ] && run 1
[ -z "$only" ] || [ "$only" = 2 ] && run 2

echo
echo "== fresh_check.sh at $head on: $cpu ($isa, $(nproc) cores)"
[ -n "${result[1]:-}" ] && echo "   1. as the machine is:         ${result[1]}"
[ -n "${result[2]:-}" ] && echo "   2. CUDA toolkit hidden:       ${result[2]}  (hidden: $(cuda_dirs | tr '\n' ' '))"
[ $remove -eq 1 ] && echo "   the packages of scripts/deps.sh --list were removed before each run"
fail=0
for n in 1 2; do
  case ${result[$n]:-} in ""|"exit 0 "*) ;; *) fail=1 ;; esac
done
exit $fail
