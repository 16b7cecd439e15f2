#!/usr/bin/env bash
# demo.sh — the demos of make demo-replay, demo-cluster and demo-channel,
# run with the binaries in bin/ (make all builds them).
#
# Usage: ci/demo.sh replay|cluster|channel
#   replay    bin/orbitkv-bench replay of the Mooncake conversation trace with
#             4 clients; the bench starts and stops its own Managers
#   cluster   the same trace with 6 clients on 3 Managers and a real etcd
#             (--nodes 3), beside 3 Managers without the peer tier and one
#   channel   starts bin/orbitkv-manager on its embedded defaults but the
#             bootstrap socket, which is MANAGER_SOCK (not a unit's
#             /run/orbitkv/manager.sock where one exists), runs
#             bin/orbitkv-bench channel against its socket, stops it (SIGTERM,
#             SIGKILL after 10 s), and prints the tail of its log
#
# The bench's progress and errors go to a log file in /tmp, printed when it
# fails; the exit status is the bench's. Environment of channel:
# MANAGER_SOCK (the Manager's bootstrap socket, required) and
# MANAGER_ADDR (its HTTP address, shown only). A socket file left from an
# earlier run is not taken for the new Manager's: the wait is for a socket
# with a different inode (10 s at most).
set -euo pipefail
cd "$(dirname "$0")/.."
trace=bench/traces/mooncake-conversation.jsonl.gz

# replay LOG-TEMPLATE WHAT ARGS...: bin/orbitkv-bench replay ARGS with its
# stderr in a log that is printed (and the status kept) when it fails.
replay() {
	local log rc=0 template=$1 what=$2
	shift 2
	log=$(mktemp "$template")
	echo "==> bin/orbitkv-bench replay $what; log $log)"
	bin/orbitkv-bench replay "$@" --trace "$trace" 2>"$log" || rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "==> orbitkv-bench replay ${what%% (*} failed (exit $rc); its log:"
		cat "$log"
	fi
	rm -f "$log"
	return "$rc"
}

channel() {
	: "${MANAGER_SOCK:?MANAGER_SOCK must name the bootstrap socket of the Manager}"
	local log old pid
	log=$(mktemp /tmp/orbitkv-demo.XXXXXX.log)
	old=$(stat -c %i "$MANAGER_SOCK" 2>/dev/null || echo none)
	bin/orbitkv-manager --bootstrap-socket "$MANAGER_SOCK" >"$log" 2>&1 &
	pid=$!
	trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
	echo "==> orbitkv-manager pid $pid on ${MANAGER_ADDR:-its default address} (log $log)"
	for _ in $(seq 100); do
		[ -S "$MANAGER_SOCK" ] && [ "$(stat -c %i "$MANAGER_SOCK")" != "$old" ] && break
		kill -0 "$pid" 2>/dev/null || { echo "orbitkv-manager exited:"; cat "$log"; exit 1; }
		sleep 0.1
	done
	[ -S "$MANAGER_SOCK" ] || { echo "no socket $MANAGER_SOCK after 10s:"; cat "$log"; exit 1; }
	echo "==> orbitkv-bench channel --socket $MANAGER_SOCK"
	bin/orbitkv-bench channel --socket "$MANAGER_SOCK"
	kill "$pid"
	for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		echo "orbitkv-manager did not stop within 10s of SIGTERM; killing it"
		kill -9 "$pid"
	fi
	wait "$pid" || true
	trap - EXIT
	echo "==> orbitkv-manager stopped; its log:"
	tail -n 20 "$log"
	rm -f "$log"
}

case "${1:-}" in
replay) replay /tmp/orbitkv-demo.XXXXXX.log "--clients 4 (3 replays, each with a fresh Manager started and stopped by the bench; about a minute" --clients 4 ;;
cluster) replay /tmp/orbitkv-demo-cluster.XXXXXX.log "--nodes 3 --clients 6 (one Manager, 3 without peers, 3 with an etcd and the peer tier; a few minutes" --nodes 3 --clients 6 --repeats 1 ;;
channel) channel ;;
*) echo "usage: ci/demo.sh replay|cluster|channel" >&2; exit 2 ;;
esac
