#!/usr/bin/env bash
# check-generated.sh — regenerate the protobuf code (ci/gen-proto.sh), the
# BPF probes (ci/gen-ebpf.sh, clang) and the man pages (make man), then fail
# when proto/, native/src/proto/, ebpf/ or docs/man/ differ from git or hold
# generated files that are not committed (make check-generated).
#
# Usage: ci/check-generated.sh
# Environment: MAKE (make), the command that runs `make man`. Outside a git
# checkout the files are regenerated and the diff is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}

if [ -x ci/gen-proto.sh ]; then ci/gen-proto.sh; else echo "no ci/gen-proto.sh yet"; fi
ci/gen-ebpf.sh
$MAKE man

if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "not a git checkout: diff skipped"
	exit 0
fi
# untracked PATH... prints the generated files under PATH that git does not
# know (ignored ones excluded).
untracked() { git ls-files --others --exclude-standard -- "$@"; }

git diff --exit-code -- proto native/src/proto ||
	{ echo "generated code differs from the committed version: run ci/gen-proto.sh and commit"; exit 1; }
git diff --exit-code -- ebpf ||
	{ echo "the BPF object or its loader differs from the committed version: run ci/gen-ebpf.sh and commit ebpf/"; exit 1; }
new=$(untracked ebpf)
if [ -n "$new" ]; then echo "generated BPF files not committed:"; echo "$new"; exit 1; fi
git diff --exit-code -- docs/man ||
	{ echo "man pages differ from the committed version: run make man and commit docs/man"; exit 1; }
new=$(untracked docs/man)
if [ -n "$new" ]; then echo "man pages not committed (run make man and commit):"; echo "$new"; exit 1; fi
if [ -n "$(git ls-files -- proto native/src/proto)" ]; then
	new=$(untracked proto native/src/proto)
	if [ -n "$new" ]; then echo "generated files not committed:"; echo "$new"; exit 1; fi
fi
