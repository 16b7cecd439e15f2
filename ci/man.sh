#!/usr/bin/env bash
# man.sh — make man: regenerate the committed man pages in docs/man/ from
# the commands' flags and help. Each named package's TestManPagesAreCurrent
# writes its command's pages with -update (spf13/cobra's doc package); the
# first package that fails stops the run with its status.
#
# Usage: ci/man.sh PKG...
#   PKG  a Go package with a TestManPagesAreCurrent, e.g. ./cmd/orbitkvctl
# Environment: GO (the go command; default go).
set -euo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
if [ $# -eq 0 ]; then
	echo "usage: ci/man.sh PKG..." >&2
	exit 2
fi
for pkg in "$@"; do
	"$go" test -count=1 -run '^TestManPagesAreCurrent$' "$pkg" -update
done
