#!/usr/bin/env bash
# The Python package's tests (python/tests) against the installed package:
# a virtual environment under build/ (build/pyenv; PYENV_DIR moves it),
# numpy and pytest from the package index, the package installed from
# python/ with build/libspeechc.so bundled into it (python/setup.py), then
# pytest with no SPEECHC_LIBRARY, so the bundled copy is what is tested.
# Needs the build (scripts/test.sh makes it): build/libspeechc.so,
# build/speechc and build/make_random_ckpt.  --install-only stops before
# pytest (scripts/ray_test.sh); other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${SPEECHC_BUILD_DIR:-$ROOT/build}
VENV=${PYENV_DIR:-$BUILD/pyenv}
for f in libspeechc.so speechc make_random_ckpt; do
  [ -e "$BUILD/$f" ] || { echo "pytest.sh: $BUILD/$f is missing (hint: cmake --build build)" >&2; exit 1; }
done
t0=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    # Debian's python3 keeps venv (ensurepip) in its own package
    rm -rf "$VENV"
    if command -v apt-get >/dev/null; then
      apt-get install -y -q python3-venv >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q python3-venv >/dev/null; }
    fi
    python3 -m venv "$VENV"
  fi
fi
PIP=("$VENV/bin/python" -m pip -q --disable-pip-version-check)
"${PIP[@]}" install numpy pytest
# a fresh copy of the library every run: --force-reinstall, the package only
SPEECHC_LIBRARY="$BUILD/libspeechc.so" "${PIP[@]}" install --force-reinstall --no-deps "$ROOT/python"
rm -rf "$ROOT/python/build" "$ROOT/python/speechc.egg-info"  # setuptools' leftovers in the tree
t1=$(date +%s)
if [ "${1:-}" = --install-only ]; then
  echo "pytest.sh: $VENV ready in $((t1 - t0)) s"
  exit 0
fi
# from another directory, so that `import speechc` is the installed package
cd "$BUILD"
env -u SPEECHC_LIBRARY SPEECHC_EXPECT_BUNDLED=1 SPEECHC_BUILD_DIR="$BUILD" \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$ROOT/python/tests" "$@"
echo "pytest.sh: set-up $((t1 - t0)) s, tests $(( $(date +%s) - t1 )) s"
