#!/usr/bin/env bash
# gen-ebpf.sh — regenerate the committed BPF object and its Go loader from
# ebpf/bpf/probes.c.
#
# Outputs (committed; `make check-generated` reruns this script and fails on
# `git diff --exit-code -- ebpf`):
#   ebpf/probes_x86_bpfel.o    clang -target bpfel, stripped of DWARF (BTF kept)
#   ebpf/probes_x86_bpfel.go   bpf2go's loader and the Go mirrors of its types
#
# bpf2go is built from go.mod's `tool` directive, so its version is the one
# pinned there. clang and llvm-strip come from the system (Debian 12: clang
# 14, packages clang and llvm); libbpf-dev gives bpf_helpers.h,
# bpf_tracing.h and bpf_core_read.h. Another clang may compile to other
# bytes, hence a diff: the script warns when its version differs from the
# one the committed object was built with.
#
# Deterministic: bpf2go compiles with paths relative to ebpf/ and strips the
# DWARF, so the clone's location leaks nowhere; two runs give identical
# bytes (the script checks that by running bpf2go twice).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

want_clang="Debian clang version 14.0.6"

for tool in clang llvm-strip; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "gen-ebpf: $tool not found (apt-get install clang llvm)" >&2
		exit 1
	fi
done
if [ ! -f /usr/include/bpf/bpf_helpers.h ]; then
	echo "gen-ebpf: /usr/include/bpf/bpf_helpers.h not found (apt-get install libbpf-dev)" >&2
	exit 1
fi
have_clang="$(clang --version | sed -n 1p)"
if [ "$have_clang" != "$want_clang" ]; then
	echo "gen-ebpf: warning: $have_clang differs from $want_clang used for the committed object" >&2
fi

outputs=(ebpf/probes_x86_bpfel.o ebpf/probes_x86_bpfel.go)
go generate ./ebpf
first="$(sha256sum "${outputs[@]}")"
go generate ./ebpf
if [ "$(sha256sum "${outputs[@]}")" != "$first" ]; then
	echo "gen-ebpf: two runs of bpf2go gave different bytes; the generation is not deterministic" >&2
	exit 1
fi
echo "gen-ebpf: regenerated ${outputs[*]}"
