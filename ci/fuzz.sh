#!/usr/bin/env bash
# fuzz.sh — every Go fuzz target and every libFuzzer target for SECONDS each
# (make fuzz-smoke, make fuzz).
#
# Usage: ci/fuzz.sh SECONDS CORPUS-MODE
#   SECONDS       fuzzing time per target, e.g. 10 or 10s
#   CORPUS-MODE   "tmp": libFuzzer works on a temporary copy of the committed
#                 seeds, native/fuzz/corpus/<name>/ or, without the fuzz_
#                 prefix, corpus/<short>/; "keep": on build/fuzz/corpus/<name>/,
#                 seeded from it and kept between runs
#
# Go targets are found with `go test -list`; the libFuzzer binaries are the
# executables fuzz_* in FUZZ_DIR (make fuzz-build). Crash inputs land in
# FUZZ_DIR/artifacts/<name>/, logs in FUZZ_DIR/<name>.log (Go keeps its
# crashers in the package's testdata/fuzz/, to be committed as regression
# seeds). Exits 1 naming every failed target.
#
# Environment (the Makefile sets each): GO (go), BUILD (build), FUZZ_DIR
# (build/fuzz), FUZZ_MINIMIZETIME (2s: Go's minimization of a new or failing
# input), FUZZ_RETRY_EXECS (executions of the one rerun of a Go target whose
# own shutdown timed out without a failing input).
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -eq 2 ] || { echo "usage: ci/fuzz.sh SECONDS tmp|keep" >&2; exit 2; }
secs=${1%s}
mode=$2
GO=${GO:-go}
BUILD=${BUILD:-build}
FUZZ_DIR=${FUZZ_DIR:-$BUILD/fuzz}
FUZZ_MINIMIZETIME=${FUZZ_MINIMIZETIME:-2s}
FUZZ_RETRY_EXECS=${FUZZ_RETRY_EXECS:-200000}
failed=""

pkgs=$(grep -rlE --include='*_test.go' --exclude-dir=.git --exclude-dir="$BUILD" '^func Fuzz[A-Z0-9_]' . |
	xargs -r -n1 dirname | sort -u || true)
for pkg in $pkgs; do
	for fz in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "==> go fuzz $pkg $fz (${secs}s)"
		log=$(mktemp)
		if ! $GO test -run '^$' -fuzz "^$fz\$" -fuzztime "${secs}s" -fuzzminimizetime "$FUZZ_MINIMIZETIME" "$pkg" 2>&1 | tee "$log"; then
			if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
				echo "==> $fz: the fuzzer's own shutdown timed out (no failing input): running it once more for $FUZZ_RETRY_EXECS executions (a count has no deadline to time out)"
				$GO test -run '^$' -fuzz "^$fz\$" -fuzztime "${FUZZ_RETRY_EXECS}x" -fuzzminimizetime "$FUZZ_MINIMIZETIME" "$pkg" || failed="$failed $fz"
			else
				failed="$failed $fz"
			fi
		fi
		rm -f "$log"
	done
done

for bin in $(find "$FUZZ_DIR" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x | sort); do
	name=$(basename "$bin")
	if [ "$mode" = keep ]; then
		corpus=$FUZZ_DIR/corpus/$name
		mkdir -p "$corpus"
	else
		corpus=$(mktemp -d)
	fi
	seeds=native/fuzz/corpus/$name
	[ -d "$seeds" ] || seeds=native/fuzz/corpus/${name#fuzz_}
	if [ -d "$seeds" ]; then cp -r "$seeds"/. "$corpus"/; else echo "no seed corpus for $name"; fi
	mkdir -p "$FUZZ_DIR/artifacts/$name"
	echo "==> libFuzzer $name (${secs}s, corpus $corpus)"
	"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		-artifact_prefix="$FUZZ_DIR/artifacts/$name/" "$corpus" \
		>"$FUZZ_DIR/$name.log" 2>&1 || { tail -n 60 "$FUZZ_DIR/$name.log"; failed="$failed $name"; }
	grep -E '^stat::number_of_executed_units|^Done' "$FUZZ_DIR/$name.log" || true
	if [ "$mode" != keep ]; then rm -rf "$corpus"; fi
done

if [ -n "$failed" ]; then
	echo "fuzz targets failed:$failed"
	exit 1
fi
