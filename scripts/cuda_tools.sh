#!/usr/bin/env bash
# The two CUDA compiler pieces the tests of the CUDA target need, NVRTC
# (speechc build --target cuda) and ptxas (test_cuda assembles the PTX),
# on a machine without the CUDA toolkit: NVIDIA's PyPI wheels of them,
# pinned by version and hash, unpacked to
#   ${SPEECHC_CUDA_TOOLS:-$HOME/.cache/speechc/cuda-tools-13.0.88}/{bin/ptxas,lib/libnvrtc.so.13}
# where tests/tests.cmake looks when the machine has no toolkit of its own.
# Nothing is fetched when a working ptxas and NVRTC are already there.
# About 127 MB downloaded, 150 MB unpacked; needs python3 with pip (only to
# download: nothing is installed into any Python).
#   scripts/cuda_tools.sh          fetch them unless the machine has its own
#   scripts/cuda_tools.sh --force  fetch them even so
#   scripts/cuda_tools.sh --env    fetch nothing; print the environment the
#                                  tests run with (ctest's ENVIRONMENT list):
#                                  empty with a toolkit of the machine's own,
#                                  SPEECHC_NVRTC=...;SPEECHC_PTXAS=... with
#                                  ours, exit 1 with neither
set -euo pipefail
ver=13.0.88
dir=${SPEECHC_CUDA_TOOLS:-$HOME/.cache/speechc/cuda-tools-$ver}
mode=${1:-}
case $mode in
  ""|--force|--env) ;;
  *) echo "usage: $0 [--force|--env]" >&2; exit 2 ;;
esac

# the machine's own toolkit: a ptxas that runs, and an NVRTC the dynamic
# linker or /usr/local/cuda has (what speechc's nvrtc_open tries)
have_system() {
  command -v ptxas >/dev/null && ptxas --version >/dev/null 2>&1 || return 1
  local p
  for p in $(ldconfig -p 2>/dev/null | awk '/libnvrtc\.so/ {print $NF}') /usr/local/cuda/lib64/libnvrtc.so*; do
    [ -f "$p" ] && return 0
  done
  return 1
}
have_ours() { [ -x "$dir/bin/ptxas" ] && [ -f "$dir/lib/libnvrtc.so.13" ] && "$dir/bin/ptxas" --version >/dev/null; }

if [ "$mode" = --env ]; then
  if have_system; then exit 0; fi
  have_ours || exit 1
  echo "SPEECHC_NVRTC=$dir/lib/libnvrtc.so.13;SPEECHC_PTXAS=$dir/bin/ptxas"
  exit 0
fi
if [ "$mode" != --force ] && have_system; then exit 0; fi
if have_ours; then exit 0; fi
if [ "$(uname -m)" != x86_64 ]; then
  echo "cuda_tools.sh: the pinned wheels are for x86_64 only; install the CUDA toolkit" >&2
  exit 1
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
  echo "cuda_tools.sh: python3 with pip is needed to download NVRTC and ptxas" \
       "(hint: scripts/deps.sh installs python3-pip)" >&2
  exit 1
fi
echo "speechc: fetching NVRTC and ptxas $ver (PyPI wheels, ~127 MB) into $dir" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/req.txt" <<EOT
nvidia-cuda-nvrtc==$ver --hash=sha256:ad9b6d2ead2435f11cbb6868809d2adeeee302e9bb94bcf0539c7a40d80e8575
nvidia-cuda-nvcc==$ver --hash=sha256:56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03
EOT
python3 -m pip download -q --no-deps --only-binary=:all: --require-hashes -r "$tmp/req.txt" \
  -d "$tmp/whl" >&2
# only the three files used: ptxas, NVRTC and the builtins NVRTC opens
# from its own directory
python3 - "$tmp/whl" "$tmp/out" <<'EOT'
import os, sys, zipfile, glob
src, out = sys.argv[1], sys.argv[2]
want = {"nvidia/cu13/bin/ptxas": "bin/ptxas",
        "nvidia/cu13/lib/libnvrtc.so.13": "lib/libnvrtc.so.13",
        "nvidia/cu13/lib/libnvrtc-builtins.so.13.0": "lib/libnvrtc-builtins.so.13.0"}
for w in glob.glob(os.path.join(src, "*.whl")):
    with zipfile.ZipFile(w) as z:
        for name in z.namelist():
            if name in want:
                dst = os.path.join(out, want.pop(name))
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                with z.open(name) as f, open(dst, "wb") as g:
                    g.write(f.read())
                os.chmod(dst, 0o755)
if want:
    sys.exit("cuda_tools.sh: the wheels lack " + ", ".join(want))
EOT
mkdir -p "$(dirname "$dir")"
rm -rf "$dir.new"
mv "$tmp/out" "$dir.new"
rm -rf "$dir"
mv "$dir.new" "$dir"
have_ours || { echo "cuda_tools.sh: $dir/bin/ptxas does not run" >&2; exit 1; }
