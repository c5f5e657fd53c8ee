#!/usr/bin/env bash
# The kernel tests on AArch64 without an ARM machine: test_kernels and the
# kernel part of test_quant (-DSC_KERNELS_ONLY: no compiler, libtcc or
# cJSON) cross-compiled statically and run under qemu-aarch64, once as a
# Cortex-A53 (ARMv8.0: "neon", the SMULL integer dots) and once as -cpu max
# (dotprod: "neon-dotprod", SDOT), each ISA against the portable kernels.
# Fails (never skips) without the toolchain: scripts/deps.sh installs it.
#   scripts/neon.sh [out-dir]      (default build-neon/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-neon}
CC=${NEON_CC:-aarch64-linux-gnu-gcc}
for tool in "$CC" qemu-aarch64; do
  if ! command -v "$tool" >/dev/null; then
    echo "neon.sh: $tool not found (hint: scripts/deps.sh installs gcc-aarch64-linux-gnu," \
         "libc6-dev-arm64-cross and qemu-user)" >&2
    exit 1
  fi
done
mkdir -p "$out"
# The runtime files the kernels need, with CMakeLists.txt's per-file flags.
flags=(-std=gnu11 -O3 -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Werror -Iruntime -Itests/unit)
objs=()
for src in kernels kernels_avx2 kernels_avx512 kernels_neon kernels_neon_dotprod cpu pool; do
  extra=()
  [ "$src" = kernels_neon_dotprod ] && extra=(-march=armv8.2-a+dotprod)
  "$CC" "${flags[@]}" "${extra[@]}" -c "runtime/$src.c" -o "$out/$src.o"
  objs+=("$out/$src.o")
done
# the SDOT build really uses SDOT, the plain one never does
objdump=${CC%gcc}objdump
n_dot=$("$objdump" -d "$out/kernels_neon_dotprod.o" | grep -c 'sdot' || true)
n_plain=$("$objdump" -d "$out/kernels_neon.o" | grep -c 'sdot' || true)
if [ "$n_dot" -eq 0 ] || [ "$n_plain" -ne 0 ]; then
  echo "neon.sh: sdot in kernels_neon_dotprod.o: $n_dot, in kernels_neon.o: $n_plain" >&2
  exit 1
fi
"$CC" "${flags[@]}" -static tests/unit/test_kernels.c "${objs[@]}" -o "$out/test_kernels" -lm -lpthread
"$CC" "${flags[@]}" -DSC_KERNELS_ONLY -static tests/unit/test_quant.c "${objs[@]}" -o "$out/test_quant" -lm -lpthread

# cpu, the ISAs that must run there, the one sc_kernels_init must pick
run() {
  local cpu=$1 isas=$2 best=$3 log
  for t in test_kernels test_quant; do
    echo "== qemu-aarch64 -cpu $cpu $t (must run: $isas)"
    log=$(SPEECHC_TEST_ISAS=$isas qemu-aarch64 -cpu "$cpu" "$out/$t" 2>&1) || { echo "$log"; exit 1; }
    echo "$log" | grep -E '^(kernels|testing|quantized kernels|neon and|ok)'
  done
  SPEECHC_TEST_ISAS=$isas qemu-aarch64 -cpu "$cpu" "$out/test_kernels" | grep -qx "kernels: $best" ||
    { echo "neon.sh: -cpu $cpu did not choose $best" >&2; exit 1; }
}
run cortex-a53 neon neon
run max neon,neon-dotprod neon-dotprod
echo "neon.sh: ok"
