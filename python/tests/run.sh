#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest's python/pytest: build railio._railio against BUILD_DIR's librailio.so
# into BUILD_DIR/python (never the source tree), then run the pytest suite
# with Debian's /usr/bin/python3 (python3-numpy, python3-torch and
# python3-pytest are Debian packages; a python3 earlier in PATH may lack them).
#
#   python/tests/run.sh BUILD_DIR SOURCE_DIR [pytest arguments]
#
# Exits 77 (skip) when python3-dev, python3-setuptools, python3-pytest or
# python3-numpy is missing (`make deps-test` installs them).
set -euo pipefail

build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
shift 2
py=${RIO_PYTHON:-/usr/bin/python3}

skip() {
    echo "python/pytest: SKIP: $* (scripts/install-deps.sh test installs it)"
    exit 77
}
[ -x "$py" ] || skip "$py not found"
"$py" - <<'PY' || skip "python3-dev, python3-setuptools, python3-pytest or python3-numpy is missing"
import os, sysconfig
assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")), "python3-dev"
import setuptools, pytest, numpy  # noqa: F401
PY
[ -e "$build/librailio.so" ] || { echo "python/pytest: $build/librailio.so not built" >&2; exit 1; }

out=$build/python
mkdir -p "$out"
# build_py copies the package's .py files (and py-extras' modules), build_ext
# compiles the extension next to them; both only redo what changed.
(cd "$src/python" && RAILIO_BUILD_DIR=$build "$py" setup.py -q \
    build_py --build-lib "$out/lib" \
    build_ext --build-lib "$out/lib" --build-temp "$out/tmp") >"$out/build.log" 2>&1 || {
    cat "$out/build.log" >&2
    echo "python/pytest: building the extension failed" >&2
    exit 1
}

export PYTHONPATH=$out/lib
export RAILIO_BUILD_DIR=$build
export RAILIOD=${RAILIOD:-$build/railiod}
export PYTHONDONTWRITEBYTECODE=1
cd "$src"
exec "$py" -m pytest -q -p no:cacheprovider "$@" python/tests
