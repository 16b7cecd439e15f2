package replay

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/content"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/trace"
)

// replayConfig is the parsed, validated flag set of `orbitkv-bench replay`.
type replayConfig struct {
	suite.Common
	tracePath   string // --trace; "" = the default trace, found by findTrace
	clients     int    // worker processes
	blockBytes  uint64 // bytes of one KV block over all layers
	layers      uint32 // layers a block spans; page bytes = blockBytes/layers
	ramCapacity uint64 // --ram-capacity of a Manager the bench starts
	socket      string // running Manager's bootstrap socket; "" = start one
	limit       int    // replay the first limit requests; 0 = all
	nodes       int    // --nodes: 0 = one Manager; N = the cluster comparison (cluster.go)
	etcdBin     string // --etcd-bin; "" = orbitkv-etcd next to this binary
	events      string // --kv-events: off, on or compare (events.go)
	route       string // --route: round-robin or events (--nodes only)
	recordTok   int    // --record-tokens: token ids of each block's record with events on
	ordered     bool   // clients start requests in trace order (order.go); set for --nodes
}

// pageBytes is the bytes of one block in one layer.
func (c *replayConfig) pageBytes() uint64 { return c.blockBytes / uint64(c.layers) }

// replayAbout is the replay suite's --help text.
var replayAbout = []string{
	"The main job: replays a Mooncake trace against a Manager with N client processes",
	"sharing one namespace. Per request: QueryBundle the block hashes, Restore the hit",
	"prefix into the client's engine buffer and verify every byte, fill the missed",
	"pages, Publish them, Release the lease. Reports the hit ratio beside the trace's",
	"infinite-cache bound, mismatched bytes, round-trip percentiles per operation and",
	"copy throughput. Method: bench/README.md.",
}

// replayFlags are the flags of the replay and of the suites built on it
// (name, described by about).
func replayFlags(name string, about []string, cfg *replayConfig, layers *uint, out io.Writer) *suite.Flags {
	fs := suite.NewFlags(name, &cfg.Common, out, about...)
	fs.ManagerFlags()
	cfg.clients, cfg.blockBytes, cfg.ramCapacity = 4, 64<<10, 4<<30
	fs.TraceFlags(&cfg.tracePath, &cfg.limit, "replay")
	fs.ProgressFlag()
	fs.IntVar(&cfg.clients, "clients", cfg.clients, "`N` client processes; client i replays requests i, i+N, i+2N, … in trace order")
	fs.SizeVar(&cfg.blockBytes, "block-bytes", "`size` of one KV block summed over its layers")
	fs.UintVar(layers, "layers", 4, "`N` layers a block spans (page bytes = block-bytes / layers, a multiple of 64)")
	fs.SizeVar(&cfg.ramCapacity, "ram-capacity", "`size` of the RAM tier of a Manager the bench starts (its --ram-capacity)")
	fs.StringVar(&cfg.socket, "socket", "", "bootstrap socket `file` of a running Manager (default: start bin/orbitkv-manager on a temporary socket)")
	fs.IntVar(&cfg.nodes, "nodes", 0, fmt.Sprintf("`N` (1..%d): replay on N Managers with the peer tier (an etcd, node i on 127.0.0.i), on N without it, and on one, each N sharing --ram-capacity; clients spread over the nodes (bench/cluster/README.md)", maxReplayNodes))
	fs.StringVar(&cfg.etcdBin, "etcd-bin", "", "etcd `binary` of --nodes (default: orbitkv-etcd next to this binary)")
	cfg.events, cfg.route, cfg.recordTok = eventsOff, routeRR, 128
	fs.StringVar(&cfg.events, "kv-events", cfg.events, "`mode`: off; on (the bench starts the Manager with --kv-events, the clients publish every block with a block record, and the bench subscribes to the stream); compare (each repeat replays with events off, then on, and reports the ratios: bench/README.md \"KV events\")")
	fs.StringVar(&cfg.route, "route", cfg.route, "`how` --nodes assigns requests to nodes: round-robin (client i on node i mod N), or events (every client subscribes to every node's KV events and sends each request to the node holding its longest prefix, ties to the one it loaded least)")
	fs.IntVar(&cfg.recordTok, "record-tokens", cfg.recordTok, fmt.Sprintf("`N` token ids in each block record with --kv-events on (1..%d; 128 is about 512 bytes)", abi.RecordMaxTokens))
	return fs
}

// ParseReplayFlags parses and validates the replay suite's arguments.
// Errors are *suite.UsageError (or pflag.ErrHelp); each names its flag.
func ParseReplayFlags(args []string, out io.Writer) (replayConfig, error) {
	return parseFlags("replay", args, out, replayAbout, nil)
}

// parseFlags parses and validates the arguments of suite name, which
// takes the replay's flags and those more adds.
func parseFlags(name string, args []string, out io.Writer, about []string, more func(*suite.Flags)) (replayConfig, error) {
	var cfg replayConfig
	var layers uint
	fs := replayFlags(name, about, &cfg, &layers, out)
	if more != nil {
		more(fs)
	}
	if err := fs.ParseArgs(args); err != nil {
		return cfg, err
	}
	err := suite.FirstError(
		suite.Between("clients", cfg.clients, 1, content.MaxReplayClients),
		suite.Between("nodes", cfg.nodes, 0, maxReplayNodes),
		suite.Between("layers", layers, 1, content.MaxLayers),
		suite.Between("record-tokens", cfg.recordTok, 1, abi.RecordMaxTokens),
		suite.CheckLimit(cfg.limit))
	if err != nil {
		return cfg, err
	}
	cfg.layers = uint32(layers)
	if cfg.blockBytes == 0 || cfg.blockBytes > 1<<30 {
		return cfg, suite.Usagef("--block-bytes must be between 1 byte and 1GiB, got %d", cfg.blockBytes)
	}
	if cfg.blockBytes%uint64(cfg.layers) != 0 {
		return cfg, suite.Usagef("--block-bytes %s (%d bytes) is not divisible by --layers %d",
			humanize.IBytes(cfg.blockBytes), cfg.blockBytes, cfg.layers)
	}
	if pb := cfg.pageBytes(); pb%content.PageAlign != 0 {
		return cfg, suite.Usagef("--block-bytes %s / --layers %d = %d bytes per page, which must be a multiple of %d",
			humanize.IBytes(cfg.blockBytes), cfg.layers, pb, content.PageAlign)
	}
	if cfg.ramCapacity < cfg.blockBytes {
		return cfg, suite.Usagef("--ram-capacity %s is smaller than one block (--block-bytes %s)",
			humanize.IBytes(cfg.ramCapacity), humanize.IBytes(cfg.blockBytes))
	}
	switch {
	case cfg.events != eventsOff && cfg.events != eventsOn && cfg.events != eventsCompare:
		return cfg, suite.Usagef("--kv-events %q: want off, on or compare", cfg.events)
	case cfg.route != routeRR && cfg.route != routeEvents:
		return cfg, suite.Usagef("--route %q: want round-robin or events", cfg.route)
	case cfg.route == routeEvents && cfg.nodes == 0:
		return cfg, suite.Usagef("--route events needs --nodes: it chooses among nodes")
	case cfg.events != eventsOff && cfg.socket != "":
		return cfg, suite.Usagef("--kv-events %s starts its own Manager with --kv-events: it does not take --socket", cfg.events)
	case cfg.events == eventsCompare && cfg.nodes > 0:
		return cfg, suite.Usagef("--kv-events compare measures one Manager: it does not take --nodes")
	}
	if cfg.nodes > 0 {
		switch {
		case cfg.socket != "":
			return cfg, suite.Usagef("--nodes starts its own Managers: it does not take --socket")
		case cfg.clients < cfg.nodes:
			return cfg, suite.Usagef("--clients %d is fewer than --nodes %d: every node needs a client", cfg.clients, cfg.nodes)
		case cfg.ramCapacity/uint64(cfg.nodes) < cfg.blockBytes:
			return cfg, suite.Usagef("--ram-capacity %s over --nodes %d is less than one block per node", humanize.IBytes(cfg.ramCapacity), cfg.nodes)
		}
	}
	return cfg, fs.RefuseWithSocket(cfg.socket, "manager-bin", "manager-args", "ram-capacity")
}

// replayPlan is the validated work of one run, computed before anything starts.
type replayPlan struct {
	tracePath string
	requests  []trace.Request // after --limit
	bound     trace.Bound     // infinite-cache bound of requests
	unique    uint64          // distinct hash ids: the working set in blocks
	maxBlocks int             // hash ids of the longest request
}

// loadPlan reads and validates the whole trace (a malformed line is an
// error naming its line number) and computes its bound.
func loadPlan(cfg *replayConfig) (*replayPlan, error) {
	path, err := suite.FindTrace(cfg.tracePath)
	if err != nil {
		return nil, err
	}
	reqs, err := trace.Load(path)
	if err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("%s: the trace has no requests", path)
	}
	if cfg.limit > 0 && cfg.limit < len(reqs) {
		reqs = reqs[:cfg.limit]
	}
	p := &replayPlan{tracePath: path, requests: reqs, bound: trace.InfiniteCacheBound(reqs)}
	seen := make(map[uint64]struct{})
	for _, q := range reqs {
		p.maxBlocks = max(p.maxBlocks, len(q.HashIDs))
		for _, h := range q.HashIDs {
			seen[h] = struct{}{}
		}
	}
	p.unique = uint64(len(seen))
	return p, nil
}

// partition returns the hash ids of the requests client i of n replays:
// requests i, i+n, i+2n, … in trace order.
func partition(reqs []trace.Request, i, n int) [][]uint64 {
	var out [][]uint64
	for j := i; j < len(reqs); j += n {
		out = append(out, reqs[j].HashIDs)
	}
	return out
}

// Run is `orbitkv-bench replay`: --repeats replays of the trace,
// each against a fresh Manager when the bench starts it (so every repeat
// starts from an empty RAM tier), or against the --socket Manager under a
// fresh namespace salt; the report combines them (combineReplays).
func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := ParseReplayFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	plan, err := loadPlan(&cfg)
	if err != nil {
		return err
	}
	if cfg.nodes > 0 {
		return runClusterReplay(&cfg, plan, stdout, stderr)
	}
	if cfg.events == eventsCompare {
		return runEventsCompare(&cfg, plan, stdout, stderr)
	}
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	prog := suite.StartProgress(cfg.Progress, stderr, "replay", "requests", int64(cfg.Repeats*len(plan.requests)))
	defer prog.Finish()
	var reps []*replayReport
	for i := range cfg.Repeats {
		if !cfg.Json {
			fmt.Fprintf(stderr, "repeat %d of %d: replaying %d requests (%d blocks) of %s with %d clients ...\n",
				i+1, cfg.Repeats, len(plan.requests), plan.bound.Blocks, plan.tracePath, cfg.clients)
		}
		rep, err := replayOnce(&cfg, plan, stderr, prog)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	rep := combineReplays(reps)
	in := suite.ValidityInput{HotUnchecked: "the replay has no hot phase"}
	if cfg.socket != "" {
		in.ExternalManager = cfg.socket
	}
	cfg.Finish(&rep.Head, mon, in, replayFigures(rep, reps))
	emitErr := cfg.Emit(stdout, stderr, rep, func(w io.Writer) error { return writeReplayTable(w, rep) })
	if emitErr != nil && !errors.As(emitErr, new(*suite.InvalidRunError)) {
		return emitErr
	}
	if rep.Mismatches != 0 {
		return fmt.Errorf("%d restored bytes differ from what was published", rep.Mismatches)
	}
	if rep.idleViolation != "" {
		return fmt.Errorf("the Manager is not idle after the clients exited: %s", rep.idleViolation)
	}
	return emitErr
}

// replayOnce is one replay of the plan: it starts a Manager unless
// --socket names one, runs the workers (counting their requests on prog)
// and stops what it started.
func replayOnce(cfg *replayConfig, plan *replayPlan, stderr io.Writer, prog *suite.Progress) (*replayReport, error) {
	var m *managerproc.Manager
	var endpoints []string
	if cfg.socket != "" {
		m = managerproc.External(cfg.socket)
	} else {
		args := cfg.ManagerArgs
		if cfg.events == eventsOn {
			dir, remove, err := eventsDir()
			if err != nil {
				return nil, err
			}
			defer remove()
			endpoints = []string{eventEndpoint(dir, 0)}
			args = append([]string{"--kv-events", endpoints[0]}, args...)
		}
		var err error
		if m, err = managerproc.Launch(managerproc.RAMSpec(cfg.ManagerBin, cfg.ramCapacity, args)); err != nil {
			return nil, err
		}
	}
	defer m.Stop()
	run := &replayRun{cfg: *cfg, plan: plan, manager: m, stderr: stderr, progress: prog,
		salt: fmt.Sprintf("run-%d-%d", os.Getpid(), time.Now().UnixNano())}
	if endpoints != nil {
		run.recordTokens = cfg.recordTok
		seen, err := watchEvents(endpoints)
		if err != nil {
			return nil, err
		}
		run.watch = seen
	}
	// Interrupted: kill the workers, stop a Manager the bench started and
	// remove its temporary directory, exit 130.
	defer managerproc.StopOnSignal("replay", m, stderr, run.killWorkers)()
	rep, err := run.execute()
	if run.watch != nil {
		n, werr := run.watch.stop()
		if err == nil && werr != nil {
			err = fmt.Errorf("the bench's event subscriber: %w", werr)
		}
		if rep != nil {
			rep.EventsReceived = n
		}
	}
	return rep, err
}
