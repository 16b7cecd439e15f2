#!/usr/bin/env bash
# fuzz-soak.sh — qualification soak: every Go fuzz target and every libFuzzer
# target for FUZZTIME each, JOBS at a time (default 2, one per core), then a
# table of executions, coverage and crashes per target.
#
# Usage: ci/fuzz-soak.sh [FUZZTIME] [JOBS]   (run by hand; no make target)
#   FUZZTIME  per target: 10m, 600s or 600 (seconds); default 10m
#   JOBS      targets running at once, default 2; each Go target runs with
#             -parallel 1 so JOBS is also the number of busy cores
# Output: build/fuzz-soak/<target>.log and build/fuzz-soak/summary.tsv
#   (target, seconds, executions, coverage, crashes). Coverage is libFuzzer's
#   "cov:" edge count, or for Go the corpus size ("new interesting" total),
#   which is what `go test -fuzz` reports. Exit status 1 when any target
#   found a crash. Not part of `make test` (it takes FUZZTIME x targets / JOBS).
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${1:-${FUZZTIME:-10m}}
JOBS=${2:-${JOBS:-2}}
GO=${GO:-go}
OUT=build/fuzz-soak
FUZZ_DIR=build/fuzz
mkdir -p "$OUT"

case "$FUZZTIME" in
*m) secs=$(( ${FUZZTIME%m} * 60 )) ;;
*s) secs=${FUZZTIME%s} ;;
*) secs=$FUZZTIME ;;
esac

list=$OUT/targets.txt
: >"$list"
for pkg in $(grep -rlE --include='*_test.go' --exclude-dir=.git --exclude-dir=build '^func Fuzz[A-Z0-9_]' . |
	xargs -r -n1 dirname | sort -u); do
	for fz in $("$GO" test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "go $pkg $fz" >>"$list"
	done
done
for bin in $(find "$FUZZ_DIR" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x | sort); do
	echo "lib $bin $(basename "$bin")" >>"$list"
done
echo "fuzz-soak: $(wc -l <"$list") targets, ${secs}s each, $JOBS at a time; logs in $OUT/"

run_one() {
	local kind=$1 where=$2 name=$3 log corpus seeds
	log=$OUT/$name.log
	echo "==> $(date +%T) start $name"
	if [ "$kind" = go ]; then
		"$GO" test -run '^$' -fuzz "^$name\$" -fuzztime "${secs}s" -parallel 1 "$where" >"$log" 2>&1 || true
	else
		corpus=$OUT/corpus/$name
		mkdir -p "$corpus" "$OUT/artifacts/$name"
		seeds=native/fuzz/corpus/$name
		[ -d "$seeds" ] || seeds=native/fuzz/corpus/${name#fuzz_}
		[ -d "$seeds" ] && cp -r "$seeds/." "$corpus/"
		"$where" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
			-artifact_prefix="$OUT/artifacts/$name/" "$corpus" >"$log" 2>&1 || true
	fi
	echo "==> $(date +%T) done  $name"
}
export -f run_one
export GO OUT secs

xargs -P "$JOBS" -L 1 bash -c 'run_one "$@"' _ <"$list"

summary=$OUT/summary.tsv
printf 'target\tseconds\texecutions\tcoverage\tcrashes\n' >"$summary"
crashed=0
while read -r kind where name; do
	log=$OUT/$name.log
	if [ "$kind" = go ]; then
		last=$(grep -E '^fuzz: elapsed' "$log" | tail -n1 || true)
		execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
		cov=$(sed -nE 's/.*\(total: ([0-9]+)\).*/corpus \1/p' <<<"$last")
		crashes=0
		grep -qE '^--- FAIL|Failing input written' "$log" && crashes=1
	else
		execs=$(sed -nE 's/^stat::number_of_executed_units: ([0-9]+)/\1/p' "$log" | tail -n1)
		cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n1 | sed 's/cov: /edges /')
		crashes=$(find "$OUT/artifacts/$name" -type f 2>/dev/null | wc -l)
	fi
	[ "${crashes:-0}" -gt 0 ] && crashed=1
	printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$secs" "${execs:-?}" "${cov:-?}" "${crashes:-?}" >>"$summary"
done <"$list"
column -t -s $'\t' "$summary"
exit "$crashed"
