#!/usr/bin/env bash
# Install the Debian packages speechc builds and tests with, when missing.
# Needs root (or sudo) only if something is missing.
set -euo pipefail
pkgs=(build-essential cmake libtcc-dev tcc libcjson-dev libopenblas-dev clang)
# tests/unit/test_avx512_simde.c: SIMDe's model of the x86 intrinsics
pkgs+=(libsimde-dev)
# scripts/neon.sh (the ctest case neon_qemu): the AArch64 kernels under qemu
[ "$(uname -m)" = x86_64 ] && pkgs+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "speechc: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
