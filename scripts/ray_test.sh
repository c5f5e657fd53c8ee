#!/usr/bin/env bash
# The Ray Serve deployment's test (examples/ray_serve/test_ray_serve.py): a
# local Ray cluster on 127.0.0.1, two replicas, concurrent requests checked
# against Model.tts.  Installs ray[serve] into the virtual environment of
# scripts/pytest.sh (build/pyenv; made and filled by that script first), for
# this test only: the package's own tests do not need Ray.
#   Loopback only: Ray's own servers (GCS, raylet, object manager, agents,
# workers) listen on every interface whatever node address they are given,
# so the test runs in a network namespace of its own (unshare -n, root)
# whose only interface is lo: nothing it opens can be reached from outside.
# Where no namespace can be made, it runs as it is and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${SPEECHC_BUILD_DIR:-$ROOT/build}
VENV=${PYENV_DIR:-$BUILD/pyenv}
t0=$(date +%s)
scripts/pytest.sh --install-only  # the venv, numpy, pytest, the package as this build makes it
"$VENV/bin/python" -m pip -q --disable-pip-version-check install "ray[serve]"
t1=$(date +%s)
cd "$BUILD"
ISOLATE=()
if ! command -v ip >/dev/null && command -v apt-get >/dev/null; then
  apt-get install -y -q iproute2 >/dev/null 2>&1 || true
fi
if command -v ip >/dev/null && unshare -n ip link set lo up 2>/dev/null; then
  ISOLATE=(unshare -n sh -c 'ip link set lo up && exec "$@"' sh)
else
  echo "ray_test.sh: NOTE: no network namespace here (unshare -n needs root and iproute2): Ray's ports are" \
       "open on every interface while the test runs" >&2
fi
"${ISOLATE[@]}" env -u SPEECHC_LIBRARY SPEECHC_BUILD_DIR="$BUILD" RAY_USAGE_STATS_ENABLED=0 \
  "$VENV/bin/python" -m pytest -q -p no:cacheprovider -W ignore::DeprecationWarning \
  "$ROOT/examples/ray_serve/test_ray_serve.py" "$@"
echo "ray_test.sh: set-up $((t1 - t0)) s, tests $(( $(date +%s) - t1 )) s"
