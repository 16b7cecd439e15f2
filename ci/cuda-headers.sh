#!/usr/bin/env bash
# cuda-headers.sh — put the CUDA driver API header (cuda.h) into
# build/cuda/include, idempotently, for the CUDA copy backend
# (native/src/copy_cuda.c; docs/cuda.md).
#
# The header comes from the wheel pinned in native/cuda/headers.lock
# (NVIDIA's nvidia-cuda-runtime-cu12 on PyPI), downloaded by pip with
# --require-hashes into a throwaway virtual environment of Debian's
# python3, and only nvidia/cuda_runtime/include/ is unpacked. Nothing of
# CUDA is installed or linked: the Manager dlopens libcuda.so.1 at run time.
#
# Where the CUDA toolkit is installed (ORBITKV_CUDA_HOME, default
# /usr/local/cuda, holding include/cuda.h) its header is used instead and
# nothing is downloaded. A second run with the header in place does nothing.
#
# Usage: ci/cuda-headers.sh            (prints nothing when done already)
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/cuda/include
lock=native/cuda/headers.lock
stamp=build/cuda/.stamp
want=$(sha256sum "$lock" | cut -c1-16)

[ -f "$out/cuda.h" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && exit 0

die() { echo "ci/cuda-headers.sh: $*" >&2; exit 1; }
mkdir -p build/cuda
toolkit=${ORBITKV_CUDA_HOME:-/usr/local/cuda}
if [ -f "$toolkit/include/cuda.h" ]; then
	rm -rf "$out"
	mkdir -p "$out"
	cp "$toolkit/include/cuda.h" "$out/"
	echo "$want" >"$stamp"
	echo "ci/cuda-headers.sh: cuda.h from the toolkit in $toolkit"
	exit 0
fi
py=${ORBITKV_ENGINE_PYTHON:-/usr/bin/python3}
venv=build/cuda/venv
[ -x "$venv/bin/pip" ] || "$py" -m venv "$venv" || die "$py -m venv failed (Debian: apt-get install python3-venv)"
rm -rf build/cuda/wheel
"$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --require-hashes \
	--only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.11 \
	-r "$lock" -d build/cuda/wheel ||
	die "downloading the wheel of $lock failed (needs the package index; or install the CUDA toolkit and set ORBITKV_CUDA_HOME)"
whl=$(ls build/cuda/wheel/*.whl)
rm -rf "$out" build/cuda/unpack
"$venv/bin/python" - "$whl" build/cuda/unpack <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for n in z.namelist():
        if n.startswith("nvidia/cuda_runtime/include/"):
            z.extract(n, sys.argv[2])
PY
mv build/cuda/unpack/nvidia/cuda_runtime/include "$out"
rm -rf build/cuda/unpack build/cuda/wheel
[ -f "$out/cuda.h" ] || die "the wheel of $lock has no nvidia/cuda_runtime/include/cuda.h"
echo "$want" >"$stamp"
echo "ci/cuda-headers.sh: cuda.h ($(grep -m1 -o 'define CUDA_VERSION [0-9]*' "$out/cuda.h")) into $out"
