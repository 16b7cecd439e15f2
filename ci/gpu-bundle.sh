#!/usr/bin/env bash
# gpu-bundle.sh — packs the GPU check's bundle, BUILD/gpu-bundle.tar.gz
# (under 64 MiB): the stripped Manager and its failpoint build, okv_gpu_check,
# liborbitkv, scripts/gpu-check.sh and its Python probes, the orbitkv Python
# package, and libprotobuf-c and libcrypto (a GPU image may lack them; glibc
# is not carried). The binaries must be built (make gpu-bundle does it).
#
# Usage: ci/gpu-bundle.sh BUILD NATIVE_DIR
#   BUILD       the build directory (build)
#   NATIVE_DIR  the native build holding liborbitkv.so.0 and okv_gpu_check
set -euo pipefail
build=$1 native=$2
out=$build/gpu-bundle
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/python"
strip -o "$out/bin/orbitkv-manager" bin/orbitkv-manager
strip -o "$out/bin/orbitkv-manager-fp" bin/orbitkv-manager-fp
strip -o "$out/bin/okv_gpu_check" "$native/okv_gpu_check"
cp scripts/gpu-check.sh scripts/gpu_ipc_probe.py scripts/gpu_kv_check.py native/tests/gpu/fault.cu "$out/"
cp -r python/orbitkv "$out/python/"
find "$out/python" -name __pycache__ -prune -exec rm -rf {} +
strip -o "$out/lib/liborbitkv.so.0" "$native/liborbitkv.so.0"
for b in "$out"/bin/* "$out/lib/liborbitkv.so.0"; do ldd "$b" | awk '/=> \// {print $3}'; done | sort -u |
	grep -E 'libprotobuf-c|libcrypto' | xargs -r -I{} cp -L {} "$out/lib/"
tar -C "$build" -czf "$build/gpu-bundle.tar.gz" gpu-bundle
size=$(stat -c %s "$build/gpu-bundle.tar.gz")
echo "$build/gpu-bundle.tar.gz: $size bytes"
if [ "$size" -ge 67108864 ]; then
	echo "gpu-bundle: over 64 MiB" >&2
	exit 1
fi
