#!/usr/bin/env bash
# python-asan.sh — the Python client tests against the ASan/UBSan build of
# liborbitkv. CPython is not instrumented, so libasan is preloaded (it must
# come first) for every process the tests start; leak checking is off
# (CPython's own allocations still live at exit drown the report).
#
# Usage: ci/python-asan.sh LIB
#   LIB  the sanitizer build's liborbitkv.so (absolute path); the run fails
#        when the orbitkv package would load another library
set -euo pipefail
lib_asan=$(gcc -print-file-name=libasan.so)
if [ ! -e "$lib_asan" ]; then
	echo "no libasan.so from gcc -print-file-name (install libasan8)" >&2
	exit 1
fi
export LD_PRELOAD=$lib_asan ORBITKV_LIB=$1
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1
echo "==> LD_PRELOAD=$LD_PRELOAD ORBITKV_LIB=$ORBITKV_LIB"
PYTHONPATH=python /usr/bin/python3 -c 'import orbitkv, sys; print("liborbitkv:", orbitkv.LIBRARY_PATH); sys.exit(orbitkv.LIBRARY_PATH != sys.argv[1])' "$ORBITKV_LIB"
/usr/bin/python3 -m unittest discover -v -s python/tests -t python
