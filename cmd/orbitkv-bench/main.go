// Command orbitkv-bench runs OrbitKV's system benchmark suites. Each suite is
// a subcommand with its own flags and a README under bench/ stating its
// method:
//
//	orbitkv-bench replay    the main job: a Mooncake trace replayed by N client
//	                        processes (query, restore + verify, publish, release)
//	orbitkv-bench copy      Publish and Restore throughput beside memcpy
//	orbitkv-bench ssd       the SSD tier's Store.Read GB/s beside a plain
//	                        O_DIRECT sequential read of the same file
//	orbitkv-bench query     QueryBundle of 1 to 10,000 hashes among 1M resident
//	                        blocks and a pending ticket's Poll, beside Ping
//	orbitkv-bench discover  discovery from the shared-memory index beside the
//	                        QueryBundle round trip; Manager CPU under 4 clients
//	orbitkv-bench policy    eviction policies beside LRU and the offline
//	                        optimum on a trace, simulated at 5-50% capacity
//	orbitkv-bench transfer  the transfer engine between Managers beside a
//	                        plain TCP stream and one slice in flight
//	orbitkv-bench channel   round-trip latency of Ping through liborbitkv
//	                        beside raw shm spin, futex, UDS and gRPC baselines
//	orbitkv-bench wake      what a thread pays right after a sleep: two clock
//	                        reads, a Go call, a cgo call, N dependent lines, cold vs warm
//	orbitkv-bench peers     OrbitKV beside LMCache's multiprocess server: lookup
//	                        round trips, store and retrieve GB/s, ratios
//	orbitkv-bench compare   two --json reports of one suite, figure by figure
//
// Flags are GNU style (spf13/pflag): --name value or --name=value after the
// suite's name; a single-dash long flag (-clients) is refused, exit 2,
// naming its two-dash spelling. `orbitkv-bench help SUITE` or
// `orbitkv-bench SUITE --help` prints a suite's flags to stdout;
// `orbitkv-bench --version` the build's version lines. The hidden
// subcommands __peer (the other end of a baseline) and __replay-worker (one
// replay client) are started by the bench re-executing itself (never
// fork() from Go).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/channel"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/compare"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/copy"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/discover"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/peers"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/policy"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/query"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/replay"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/ssd"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/transfer"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/wake"
	"github.com/orbitkv/orbitkv/gocore/buildinfo"
	"github.com/spf13/pflag"
)

// command is one subcommand of the dispatcher.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
	hidden  bool
}

func commands() []command {
	return []command{
		{name: "replay", summary: "the main job: replay a Mooncake trace with N clients; hit ratio vs bound, verified bytes, latency", run: replay.Run},
		{name: replay.RestartCommand, summary: "restart the Manager at 50% of the replay (none, cold-restart, upgrade, kill): hit ratio after, failed requests, seconds without service", run: replay.RunRestart},
		{name: "copy", summary: "Publish and Restore GB/s for 256KiB-2MiB blocks vs memcpy in the same run", run: copy.Run},
		{name: "ssd", summary: "SSD tier: Store.Read GB/s for 256KiB-2MiB blocks vs a plain O_DIRECT sequential read of the same file", run: ssd.Run},
		{name: "query", summary: "QueryBundle of 1..10,000 hashes at 1M resident blocks (round trip, server ns per hash) and a pending-ticket Poll, beside Ping", run: query.Run},
		{name: "discover", summary: "discovery of 32 and 1,000 hashes from the shared-memory index vs the QueryBundle round trip, and Manager CPU with 4 clients at 10 kHz", run: discover.Run},
		{name: "policy", summary: "eviction policies vs LRU and the offline optimum on a trace, simulated at 5-50% capacity", run: policy.Run},
		{name: "transfer", summary: "transfer engine GB/s for 64KiB-4MiB blocks on loopback vs a plain TCP stream and one slice in flight, in the same run", run: transfer.Run},
		{name: "channel", summary: "round-trip latency of Ping through liborbitkv vs raw shm spin, futex, UDS and gRPC", run: channel.Run},
		{name: "wake", summary: "what a thread pays right after a sleep: two clock reads, a Go call, a cgo call, N dependent cache lines, cold vs warm", run: wake.Run},
		{name: "peers", summary: "OrbitKV beside LMCache's multiprocess server in the same run: lookup p50/p99, store and retrieve GB/s, ratios", run: peers.Run},
		{name: "compare", summary: "compare two --json reports of one suite: ratios, and which differences lie within the noise band", run: compare.Run},
		{name: channel.PeerCommand, summary: "internal: the echoing side of a baseline", run: channel.RunPeer, hidden: true},
		{name: replay.WorkerCommand, summary: "internal: one replay client", run: replay.RunWorker, hidden: true},
	}
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand named by args[0] and returns the exit status:
// 0 on success, 2 on a usage error, exitInvalid (3) when --strict finds
// the run invalid (or compare --strict a regression), 1 on any other
// failure.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help":
		if len(args) > 1 {
			return dispatch([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return 0
	case "--version", "version":
		fmt.Fprint(stdout, buildinfo.Get().String("orbitkv-bench"))
		return 0
	}
	if len(name) > 1 && name[0] == '-' {
		fmt.Fprintf(stderr, "orbitkv-bench: unknown flag %s (the flags are --help and --version; a suite's flags follow its name)\n", name)
		return 2
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(args[1:], stdout, stderr)
		switch {
		case err == nil, errors.Is(err, pflag.ErrHelp):
			return 0
		case errors.As(err, new(*suite.UsageError)):
			fmt.Fprintf(stderr, "orbitkv-bench %s: %v\n", name, err)
			return 2
		case errors.As(err, new(*suite.InvalidRunError)):
			fmt.Fprintf(stderr, "orbitkv-bench %s: %v\n", name, err)
			return suite.ExitInvalid
		default:
			fmt.Fprintf(stderr, "orbitkv-bench %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "orbitkv-bench: unknown suite %q\n", name)
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: orbitkv-bench SUITE [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "suites:")
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "orbitkv-bench help SUITE prints a suite's flags; bench/README.md describes the suites.")
	fmt.Fprintln(w, "orbitkv-bench --version prints the version, commit, build date and Go version.")
}
