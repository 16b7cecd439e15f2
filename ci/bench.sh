#!/usr/bin/env bash
# bench.sh — make bench: runs each named suite of orbitkv-bench in order
# with its defaults, goes on after a failing one, and exits 1 naming every
# suite that failed (0 when all ran). Each suite prints its own report; its
# method is in bench/README.md.
#
# Usage: ci/bench.sh SUITE...
#   SUITE  an orbitkv-bench subcommand, e.g. channel, replay, copy
# Environment: BENCH (the orbitkv-bench binary; default bin/orbitkv-bench,
# relative to the repository root).
set -euo pipefail
cd "$(dirname "$0")/.."
bench=${BENCH:-bin/orbitkv-bench}
if [ $# -eq 0 ]; then
	echo "usage: ci/bench.sh SUITE..." >&2
	exit 2
fi
failed=""
for suite in "$@"; do
	echo "==> orbitkv-bench $suite"
	if ! "$bench" "$suite"; then
		echo "<== orbitkv-bench $suite FAILED"
		failed="$failed $suite"
	fi
done
if [ -n "$failed" ]; then
	echo "make bench: FAILED:$failed"
	exit 1
fi
