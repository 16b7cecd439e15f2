package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
)

// queryTarget is issue 3's target: QueryBundle of 32 resident hashes, p50
// round trip at most 5 µs (hot).
const queryTarget = 5 * time.Microsecond

type queryConfig struct {
	hashes      int
	iters       int
	coldIters   int
	coldGap     time.Duration
	json        bool
	managerBin  string
	managerArgs []string
}

func parseQueryFlags(args []string, out io.Writer) (queryConfig, error) {
	var cfg queryConfig
	fs := newSuiteFlags("query", out,
		"Round trip of a QueryBundle (leased read) of --hashes resident blocks through",
		"liborbitkv, beside a Ping (the channel's floor) in the same run: back to back",
		"(hot: both sides spinning) and after --cold-gap pauses (cold: both parked).",
		"The lease of each query is released between samples (not timed).",
		"Starts its own Manager. Method: bench/README.md.")
	fs.IntVar(&cfg.hashes, "hashes", 32, "resident hashes per QueryBundle (`count`, 1..1024)")
	fs.IntVar(&cfg.iters, "iters", 20000, "timed back-to-back round trips per subject")
	fs.IntVar(&cfg.coldIters, "cold-iters", 500, "timed round trips per subject with --cold-gap between them")
	fs.DurationVar(&cfg.coldGap, "cold-gap", time.Millisecond, "pause before each cold round trip (`duration`): long enough for the Manager and the client to park")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object instead of the table")
	if err := fs.parse(args); err != nil {
		return cfg, err
	}
	cfg.managerBin, cfg.managerArgs = fs.manager()
	switch {
	case cfg.hashes < 1 || cfg.hashes > 1024:
		return cfg, usagef("--hashes must be between 1 and 1024, got %d", cfg.hashes)
	case cfg.iters < 1 || cfg.coldIters < 1:
		return cfg, usagef("--iters and --cold-iters must be at least 1")
	case cfg.coldGap < 0 || cfg.coldGap > time.Second:
		return cfg, usagef("--cold-gap must be between 0 and 1s, got %v", cfg.coldGap)
	}
	return cfg, nil
}

// queryReport is the JSON of `orbitkv-bench query --json`.
type queryReport struct {
	Hashes int              `json:"hashes"`
	Hot    map[string]Stats `json:"hot"`  // "query", "ping"
	Cold   map[string]Stats `json:"cold"` // "query", "ping"
	header string
}

func runQuery(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseQueryFlags(args, stderr)
	if err != nil {
		return err
	}
	const layers, pageBytes = 4, 4 << 10
	m, err := launchManager(ramManager(cfg.managerBin, 64<<20, cfg.managerArgs))
	if err != nil {
		return err
	}
	defer m.stop()
	c, err := client.Connect(client.Options{SocketPath: m.socket, InstanceID: fmt.Sprintf("query-%d", os.Getpid()), Role: uint32(abi.RoleBench)})
	if err != nil {
		return fmt.Errorf("connecting to the Manager at %s: %w", m.socket, err)
	}
	buf, err := client.AllocBuffer(layers, pageBytes, uint64(cfg.hashes))
	if err != nil {
		c.Close()
		return fmt.Errorf("allocating the engine buffer: %w", err)
	}
	defer func() { c.Close(); buf.Free() }()
	id, err := c.RegisterBuffer(buf)
	if err != nil {
		return fmt.Errorf("registering the engine buffer: %w", err)
	}
	spec := replayNamespace
	spec.KVLayout = "orbitkv-bench-query"
	ns, err := client.Fingerprint(spec)
	if err != nil {
		return err
	}
	hashes := make([]client.BlockHash, cfg.hashes)
	pages := make([]uint32, cfg.hashes)
	for i := range hashes {
		hashes[i], pages[i] = blockHash(uint64(i)), uint32(i)
	}
	if _, err := c.Publish(ns, id, hashes, pages); err != nil {
		return fmt.Errorf("publishing %d blocks: %w", cfg.hashes, err)
	}
	// Each subject times its own round trip; the query's Release is not timed.
	query := func() (time.Duration, error) {
		t := time.Now()
		l, err := c.Query(ns, hashes)
		d := time.Since(t)
		if err != nil {
			return 0, err
		}
		if int(l.Hits) != cfg.hashes {
			return 0, fmt.Errorf("query hit %d of %d resident blocks", l.Hits, cfg.hashes)
		}
		return d, c.Release(l.ID)
	}
	ping := func() (time.Duration, error) {
		t := time.Now()
		_, err := c.Ping(1)
		return time.Since(t), err
	}
	rep := &queryReport{Hashes: cfg.hashes, Hot: map[string]Stats{}, Cold: map[string]Stats{}}
	for _, sub := range []struct {
		name string
		f    func() (time.Duration, error)
	}{{"query", query}, {"ping", ping}} {
		for _, mode := range []struct {
			n   int
			gap time.Duration
			out map[string]Stats
		}{{cfg.iters, 0, rep.Hot}, {cfg.coldIters, cfg.coldGap, rep.Cold}} {
			s, err := timeRoundTrips(sub.f, mode.n, mode.gap)
			if err != nil {
				return fmt.Errorf("%s: %w%s", sub.name, err, managerExit(m))
			}
			mode.out[sub.name] = s
		}
	}
	if cfg.json {
		return json.NewEncoder(stdout).Encode(rep)
	}
	rep.header = fmt.Sprintf("orbitkv-bench query: %d CPUs", runtime.NumCPU())
	if model := cpuModel(); model != "" {
		rep.header += " (" + model + ")"
	}
	rep.header += fmt.Sprintf(", Manager pid %d started by the bench; QueryBundle of %d resident hashes vs Ping", m.pid, cfg.hashes)
	return writeQueryTable(stdout, rep)
}

// timeRoundTrips collects n samples of f after a warmup of up to 1000
// calls, pausing gap before each.
func timeRoundTrips(f func() (time.Duration, error), n int, gap time.Duration) (Stats, error) {
	samples := make([]uint64, 0, n)
	for i := -min(n/10+1, 1000); i < n; i++ {
		if gap > 0 {
			time.Sleep(gap)
		}
		d, err := f()
		if err != nil {
			return Stats{}, err
		}
		if i >= 0 {
			samples = append(samples, uint64(d))
		}
	}
	return summarize(samples), nil
}

func writeQueryTable(w io.Writer, rep *queryReport) error {
	fmt.Fprintln(w, rep.header)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\top\tp50 µs\tp99 µs\tp99.9 µs\tn\tp50 / ping\t")
	for _, mode := range []struct {
		name string
		m    map[string]Stats
	}{{"hot", rep.Hot}, {"cold", rep.Cold}} {
		for _, op := range []string{"query", "ping"} {
			s := mode.m[op]
			ratio := float64(s.P50) / float64(max(mode.m["ping"].P50, 1))
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%.1f\t\n", mode.name, op, us(s.P50), us(s.P99), us(s.P999), s.N, ratio)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "targets (bench/README.md):")
	fmt.Fprintln(w, "  informational: a MISSED target does not fail the run (exit status stays 0)")
	t := target{fmt.Sprintf("QueryBundle of %d resident hashes, hot p50 ≤ %v", rep.Hashes, queryTarget),
		us(rep.Hot["query"].P50) + " µs", time.Duration(rep.Hot["query"].P50) <= queryTarget}
	_, err := fmt.Fprintf(w, "  %s  %s  %s\n", t.name, t.measured, t.verdict())
	return err
}
