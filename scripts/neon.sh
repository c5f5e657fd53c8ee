#!/usr/bin/env bash
# The kernel tests on AArch64 without an ARM machine: the runtime library
# cross-compiled by CMake, test_kernels, test_codec_kernels, test_gdn_kernels, test_row_kernels and the kernel
# part of test_quant
# (-DSC_KERNELS_ONLY: no compiler, libtcc or cJSON) linked statically
# against it and run under qemu-aarch64, once as a
# Cortex-A53 (ARMv8.0: "neon", the SMULL integer dots) and once as -cpu max
# (dotprod: "neon-dotprod", SDOT), each ISA against the portable kernels.
# Fails (never skips) without the toolchain: scripts/deps.sh installs it.
#   scripts/neon.sh [out-dir]      (default build-neon/)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build-neon}
CC=${NEON_CC:-aarch64-linux-gnu-gcc}
for tool in "$CC" qemu-aarch64 cmake; do
  if ! command -v "$tool" >/dev/null; then
    echo "neon.sh: $tool not found (hint: scripts/deps.sh installs gcc-aarch64-linux-gnu," \
         "libc6-dev-arm64-cross and qemu-user)" >&2
    exit 1
  fi
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
# The runtime library as a native AArch64 build makes it (CMakeLists.txt's
# per-file flags), cross-compiled.  Only speechc_rt is built, so the
# compiler's libraries (libtcc, cJSON, OpenBLAS, sentencepiece) are never linked: their
# paths only have to satisfy the configure step.
cat > "$out/aarch64.cmake" <<EOT
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER $CC)
EOT
cmake -S . -B "$out/cmake" -DCMAKE_TOOLCHAIN_FILE="$out/aarch64.cmake" -DCMAKE_BUILD_TYPE=Release \
  -DTCC_LIB=unused -DCJSON_LIB=unused -DPCRE2_LIB=unused -DUTF8PROC_LIB=unused \
  -DSPM_LIB=unused -DSPM_INCLUDE=unused \
  -DSPEECHC_OPENBLAS=OFF >/dev/null
cmake --build "$out/cmake" --target speechc_rt -j"$(nproc)" >/dev/null
lib=$out/cmake/libspeechc_rt.a
objs=$out/cmake/CMakeFiles/speechc_rt.dir/runtime
# the SDOT build really uses SDOT, the plain one never does
objdump=${CC%gcc}objdump
n_dot=$("$objdump" -d "$objs/kernels_neon_dotprod.c.o" | grep -c 'sdot' || true)
n_plain=$("$objdump" -d "$objs/kernels_neon.c.o" | grep -c 'sdot' || true)
if [ "$n_dot" -eq 0 ] || [ "$n_plain" -ne 0 ]; then
  echo "neon.sh: sdot in kernels_neon_dotprod.o: $n_dot, in kernels_neon.o: $n_plain" >&2
  exit 1
fi
flags=(-std=gnu11 -O2 -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Werror -Iruntime -Itests/unit)
"$CC" "${flags[@]}" -static tests/unit/test_kernels.c "$lib" -o "$out/test_kernels" -lm -lpthread
"$CC" "${flags[@]}" -DSC_KERNELS_ONLY -static tests/unit/test_quant.c "$lib" -o "$out/test_quant" -lm -lpthread
"$CC" "${flags[@]}" -static tests/unit/test_codec_kernels.c "$lib" -o "$out/test_codec_kernels" -lm -lpthread
"$CC" "${flags[@]}" -static tests/unit/test_gdn_kernels.c "$lib" -o "$out/test_gdn_kernels" -lm -lpthread
"$CC" "${flags[@]}" -static tests/unit/test_row_kernels.c "$lib" -o "$out/test_row_kernels" -lm -lpthread

# cpu, the ISAs that must run there, the one sc_kernels_init must pick
run() {
  local cpu=$1 isas=$2 best=$3 log
  for t in test_kernels test_quant test_codec_kernels test_gdn_kernels test_row_kernels; do
    echo "== qemu-aarch64 -cpu $cpu $t (must run: $isas)"
    log=$(SPEECHC_TEST_ISAS=$isas qemu-aarch64 -cpu "$cpu" "$out/$t" 2>&1) || { echo "$log"; exit 1; }
    echo "$log" | grep -E '^(kernels|testing|quantized kernels|codec kernels|gdn kernels|row kernels|neon and|ok)'
  done
  SPEECHC_TEST_ISAS=$isas qemu-aarch64 -cpu "$cpu" "$out/test_kernels" | grep -qx "kernels: $best" ||
    { echo "neon.sh: -cpu $cpu did not choose $best" >&2; exit 1; }
}
run cortex-a53 neon neon
run max neon,neon-dotprod neon-dotprod
echo "neon.sh: ok"
