#!/usr/bin/env bash
# gofmt-check.sh — make lint's format check: every Go file of the tree must
# be gofmt-clean. Prints the files gofmt would change and exits 1 when there
# are any, or when gofmt fails (a file that does not parse); exits 0 when
# every file is clean.
#
# Usage: ci/gofmt-check.sh
# Environment: GOFMT (the gofmt to run; default gofmt on PATH), BUILD (the
# build directory, relative to the repository root, whose files are
# skipped; default build). .git/ is skipped too.
set -euo pipefail
cd "$(dirname "$0")/.."
gofmt=${GOFMT:-gofmt}
build=${BUILD:-build}

if ! files=$(find . -name '*.go' -not -path './.git/*' -not -path "./$build/*" -print0 | xargs -0 -r "$gofmt" -l); then
	echo "gofmt failed (see above)" >&2
	exit 1
fi
if [ -n "$files" ]; then
	echo "gofmt would change:"
	echo "$files"
	exit 1
fi
