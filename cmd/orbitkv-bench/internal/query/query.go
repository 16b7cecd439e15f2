package query

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// The query suite's block shape: one layer of 64-byte pages (the smallest
// page liborbitkv accepts), each block one 4 KiB RAM chunk, so a million
// resident blocks cost 4 GiB of RAM tier and almost no copying.
const (
	QueryLayers     = 1
	QueryPageBytes  = 64
	QueryChunkBytes = 4 << 10
	// maxQueryRowHashes bounds --hashes: a 16-byte hash each, in a
	// descriptor area of at most 64 MiB (the Manager's --desc-bytes limit).
	maxQueryRowHashes = 1 << 20
	// maxResidentBlocks bounds --resident-blocks: 64 GiB of 4 KiB chunks.
	maxResidentBlocks = 1 << 24
)

type QueryConfig struct {
	suite.Common
	hashes         []int // ascending, distinct
	residentBlocks int
	iters          int
	coldIters      int
	hashBudget     int
	ColdGap        time.Duration
	sameChain      bool
	scattered      bool
}

func parseQueryFlags(args []string, out io.Writer) (QueryConfig, error) {
	var cfg QueryConfig
	fs := suite.NewFlags("query", &cfg.Common, out,
		"Round trip of a QueryBundle (leased read) of each --hashes count of resident blocks",
		"through liborbitkv with --resident-blocks blocks resident, the Manager's own time",
		"per hash (its /metrics counters), and the Poll of a pending query ticket, beside a",
		"Ping (the channel's floor) in the same run: back to back (hot: both sides spinning)",
		"and after --cold-gap pauses (cold: both parked). The lease of each query is released",
		"between samples (not timed). Starts its own Manager. Method: bench/README.md.")
	fs.ManagerFlags()
	hashes := fs.String("hashes", "1,32,1000,10000", "comma-separated hash `counts`, one row each (each 1.."+strconv.Itoa(maxQueryRowHashes)+")")
	fs.IntVar(&cfg.residentBlocks, "resident-blocks", 1000000, "`N` blocks published before measuring (at least the largest --hashes); the RAM tier is sized to hold them")
	fs.IntVar(&cfg.iters, "iters", 20000, "`N` timed back-to-back round trips per row (capped by --hash-budget), and of Poll and Ping")
	fs.IntVar(&cfg.coldIters, "cold-iters", 500, "`N` timed round trips per row and subject with --cold-gap before each (capped by --hash-budget)")
	fs.IntVar(&cfg.hashBudget, "hash-budget", 10000000, "`N`: the most hashes the timed queries of one row carry in each mode; a row of H hashes makes min(--iters, max(100, N/H)) round trips")
	fs.DurationVar(&cfg.ColdGap, "cold-gap", time.Millisecond, "pause before each cold round trip, long enough for the Manager and the client to park")
	fs.PlotFlag("latency CDFs of every subject, hot and cold")
	fs.BoolVar(&cfg.sameChain, "same-chain", false, "query the first N resident hashes every time (index entries stay in the CPU caches) instead of moving through the resident set")
	fs.BoolVar(&cfg.scattered, "scattered", false, "publish the resident blocks one at a time in a shuffled order (fixed seed), so a query's consecutive hashes were almost never published together and the Manager finds nearly each through the index's hash table rather than as the next block stored beside the one before it")
	if err := fs.ParseArgs(args); err != nil {
		return cfg, err
	}
	var err error
	if cfg.hashes, err = parseHashCounts(*hashes); err != nil {
		return cfg, err
	}
	largest := cfg.hashes[len(cfg.hashes)-1]
	switch {
	case cfg.residentBlocks < largest || cfg.residentBlocks > maxResidentBlocks:
		return cfg, suite.Usagef("--resident-blocks must be between the largest --hashes (%d) and %d, got %d", largest, maxResidentBlocks, cfg.residentBlocks)
	case cfg.iters < 1 || cfg.coldIters < 1:
		return cfg, suite.Usagef("--iters and --cold-iters must be at least 1")
	}
	if err := suite.FirstError(suite.AtLeast("hash-budget", cfg.hashBudget, 1), suite.Between("cold-gap", cfg.ColdGap, 0, time.Second)); err != nil {
		return cfg, err
	}
	if v, ok := launch.LastFlagValue(cfg.ManagerArgs, "http-addr"); ok && v == "" {
		return cfg, suite.Usagef("--manager-args: the query suite reads the Manager's /metrics; --http-addr cannot be empty")
	}
	return cfg, nil
}

// parseHashCounts parses --hashes: distinct counts in 1..maxQueryRowHashes,
// returned in ascending order.
func parseHashCounts(value string) ([]int, error) {
	out, err := suite.ParseList(suite.ListFlag{Name: "hashes", Noun: "count"}, value, func(s string) (int, error) {
		n, err := strconv.Atoi(strings.ReplaceAll(s, "_", ""))
		switch {
		case err != nil:
			return 0, suite.Usagef("--hashes: %q is not a count", s)
		case n < 1 || n > maxQueryRowHashes:
			return 0, suite.Usagef("--hashes: %d must be between 1 and %d", n, maxQueryRowHashes)
		}
		return n, nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// rowIters is how many round trips a row of n hashes makes in a mode whose
// limit is iters (--iters or --cold-iters).
func (cfg *QueryConfig) rowIters(iters, n int) int {
	return min(iters, max(100, cfg.hashBudget/n))
}

// queryManagerArgs are the Manager flags the suite needs: a RAM tier of 4 KiB
// chunks that holds every resident block, a descriptor area that carries the
// largest row, a lease budget of exactly the largest row's blocks (so one
// held lease of that row makes a ticket wait: the pending ticket of the
// poll), and the HTTP port whose /metrics the suite reads.
func (cfg *QueryConfig) queryManagerArgs(httpAddr string) (args []string, capacity uint64) {
	const align = 2 << 20 // a whole number of 2 MiB pages, should the tier get hugepages
	capacity = (uint64(cfg.residentBlocks)*QueryChunkBytes + align - 1) / align * align
	largest := uint64(cfg.hashes[len(cfg.hashes)-1])
	desc := max(64<<10, (abi.DescHeaderSize+abi.HashSize*largest+4095)/4096*4096)
	args = []string{
		"--ram-chunk-bytes", strconv.Itoa(QueryChunkBytes),
		"--desc-bytes", strconv.FormatUint(desc, 10),
		"--lease-budget", strconv.FormatUint(largest*QueryLayers*QueryPageBytes, 10),
		"--op-expiry", "1h", // the pending ticket outlives a long cold poll phase
		"--http-addr", httpAddr,
	}
	return args, capacity
}

func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseQueryFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	httpAddr, ok := launch.LastFlagValue(cfg.ManagerArgs, "http-addr")
	if !ok {
		if httpAddr, err = launch.FreeLoopbackAddr(); err != nil {
			return err
		}
	}
	own, capacity := cfg.queryManagerArgs(httpAddr)
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	start := time.Now()
	m, err := managerproc.Launch(managerproc.RAMSpec(cfg.ManagerBin, capacity, append(own, cfg.ManagerArgs...)))
	if err != nil {
		return err
	}
	defer m.Stop()
	startS := suite.ElapsedSeconds(time.Since(start))
	defer managerproc.StopOnSignal("query", m, stderr, nil)()
	c, err := managerproc.Connect(m, "query")
	if err != nil {
		return err
	}
	r := &queryRun{cfg: &cfg, c: c, m: m, metricsAddr: httpAddr, progress: stderr}
	defer func() { c.Close(); r.freeBuffer() }() // a registered buffer outlives its session
	if cfg.Json {
		r.progress = io.Discard
	}
	rep, err := r.run()
	if err != nil {
		return fmt.Errorf("%w%s", err, m.ExitNote())
	}
	rep.ManagerStartS, rep.RAMCapacityBytes = startS, capacity
	in := suite.ValidityInput{HotPhases: r.hot}
	if suite.ParkMode("", cfg.ManagerArgs) {
		in.HotPhases, in.HotUnchecked = nil, "the Manager runs --poll-mode park: it parks by design, no phase is hot"
	}
	cfg.Finish(&rep.Head, mon, in, r.figures(rep))
	header := fmt.Sprintf("orbitkv-bench query: %d CPUs", runtime.NumCPU())
	if model := suite.CpuModel(); model != "" {
		header += " (" + model + ")"
	}
	chains := "moving through the resident set"
	if cfg.sameChain {
		chains = "the same chain every time"
	}
	if cfg.scattered {
		chains += ", published in a shuffled order"
	}
	header += fmt.Sprintf(", Manager pid %d started by the bench (%.1f s; %s RAM tier of 4 KiB chunks); %d resident blocks of %d B published in %.2f s; queries %s",
		m.Pid, startS, humanize.IBytes(capacity), rep.ResidentBlocks, rep.BlockBytes, rep.PublishS, chains)
	// The report first: a plot that fails does not lose a run's figures.
	err = cfg.Emit(stdout, stderr, rep, func(w io.Writer) error { return writeQueryTable(w, header, rep) })
	return errors.Join(err, chart.WriteCharts(cfg.PlotDir, stderr, &rep.Head, QueryCharts(rep, &cfg)...))
}

// timeRoundTrips records n samples of f after a warmup of up to 1000
// calls, pausing gap before each, into a histogram.
func timeRoundTrips(f func() (time.Duration, error), n int, gap time.Duration) (*latency.Hist, error) {
	h := latency.NewHist()
	for i := -min(n/10+1, 1000); i < n; i++ {
		if gap > 0 {
			time.Sleep(gap)
		}
		d, err := f()
		if err != nil {
			return nil, err
		}
		if i >= 0 {
			h.RecordDuration(d)
		}
	}
	return h, nil
}
