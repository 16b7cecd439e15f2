#!/usr/bin/env bash
# test-stages.sh — make test: runs each stage (a make target) in order, goes
# on after a failing one, prints each stage's time and result, and exits 1
# naming every stage that failed (0 when all passed).
#
# Usage: ci/test-stages.sh STAGE...
# Environment: MAKE (the make to run the stages with; default make).
# -e is safe: each stage runs as an if condition, so its failure is recorded,
# not fatal.
set -euo pipefail
make=${MAKE:-make}
failed=""
total=$(date +%s)
for stage in "$@"; do
	start=$(date +%s)
	echo "==> $stage"
	if "$make" --no-print-directory "$stage"; then
		echo "<== $stage ok ($(( $(date +%s) - start ))s)"
	else
		echo "<== $stage FAILED ($(( $(date +%s) - start ))s)"
		failed="$failed $stage"
	fi
done
echo "make test: $(( $(date +%s) - total ))s"
if [ -n "$failed" ]; then
	echo "make test: FAILED:$failed"
	exit 1
fi
echo "make test: all stages passed"
