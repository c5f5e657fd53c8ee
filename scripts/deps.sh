#!/usr/bin/env bash
# Install the Debian packages speechc builds and tests with, when missing,
# and, on a machine without the CUDA toolkit, the NVRTC and ptxas the CUDA
# target's tests need (scripts/cuda_tools.sh; --no-cuda-tools leaves them).
# Needs root (or sudo) only if something is missing.
#   scripts/deps.sh [--no-cuda-tools]
#   scripts/deps.sh --list      the Debian packages, one a line; installs nothing
set -euo pipefail
cuda_tools=1 list=0
case ${1:-} in
  "") ;;
  --no-cuda-tools) cuda_tools=0 ;;
  --list) list=1 ;;
  *) echo "usage: $0 [--no-cuda-tools | --list]" >&2; exit 2 ;;
esac
pkgs=(build-essential cmake libtcc-dev tcc libcjson-dev libopenblas-dev clang)
# compiler/tokenizer.c: the Qwen2 pre-tokenizer regex and NFC
pkgs+=(libpcre2-dev libutf8proc-dev)
# runtime/spm.cc: Moshi's text tokens (SentencePiece ids) to text, exactly
# as the package's DecodeIds (C++; g++ comes with build-essential)
pkgs+=(libsentencepiece-dev)
# speechc serve (compiler/cmd_serve.c): the HTTP server library, so that
# no hand-written HTTP parser faces the network (found with pkg-config)
pkgs+=(libmicrohttpd-dev pkg-config)
# tests/unit/test_avx512_simde.c: SIMDe's model of the x86 intrinsics
pkgs+=(libsimde-dev)
# scripts/neon.sh (the ctest case neon_qemu): the AArch64 kernels under qemu
[ "$(uname -m)" = x86_64 ] && pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
if [ $list -eq 1 ]; then printf '%s\n' "${pkgs[@]}"; exit 0; fi
# scripts/cuda_tools.sh (the CUDA target's tests on a machine without the
# CUDA toolkit) downloads NVRTC and ptxas with pip
cd "$(dirname "$0")/.."
need_cuda_tools=0
[ $cuda_tools -eq 1 ] && { scripts/cuda_tools.sh --env >/dev/null || need_cuda_tools=1; }
if [ $need_cuda_tools -eq 1 ] && ! python3 -m pip --version >/dev/null 2>&1; then
  pkgs+=(python3-pip)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "speechc: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $need_cuda_tools -eq 1 ]; then
  scripts/cuda_tools.sh
fi
