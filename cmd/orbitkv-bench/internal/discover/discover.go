package discover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/content"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/query"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/pingpong"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// DiscoverQuantiles are the p50 and p99 of one subject, in nanoseconds.
type DiscoverQuantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// DiscoverFigures are the latency figures of `orbitkv-bench discover`,
// keyed by chain length ("32", "1000"), in the JSON shape bench/README.md names:
// local discovery from the mapped index (okv_discover_local) beside the
// round-trip QueryBundle discovery (a ticket with QueryDiscover) of the
// same chain, in the same run, against the same Manager. Every sample
// includes the timer's own cost (TimerFloorNs: two clock_gettime calls).
type DiscoverFigures struct {
	Local        map[string]DiscoverQuantiles `json:"discover_local_ns"`
	RTT          map[string]DiscoverQuantiles `json:"discover_rtt_ns"`
	TimerFloorNs float64                      `json:"timer_floor_ns"`
}

// DiscoverOptions configures MeasureDiscover; the zero value is the
// bench's default.
type DiscoverOptions struct {
	ManagerBin  string   // "" = launch.Find's default (bin/orbitkv-manager)
	ManagerArgs []string // extra Manager flags; they win
	Iters       int      // timed discoveries per subject and chain; 0 = 20000
	Chains      []int    // chain lengths; nil = 32 and 1000
	// Load adds the Manager-CPU phase (4 clients at 10 kHz each, local vs
	// round trip) to Measure's result; MeasureDiscover leaves it out.
	Load     bool
	LoadTime time.Duration // per subject; 0 = 3s
	Progress io.Writer     // nil = none
}

// MeasureDiscover starts its own Manager, publishes a chain of the longest
// length and returns the discovery latencies of every chain, local beside
// round trip (the figures `orbitkv-bench peers` embeds). Errors name the
// step that failed (start, connect, publish, map, measure) and end with
// the Manager's log tail when it exited.
func MeasureDiscover(o DiscoverOptions) (*DiscoverFigures, error) {
	o.Load = false
	rep, err := measureDiscover(o)
	if err != nil {
		return nil, err
	}
	return &rep.DiscoverFigures, nil
}

// discoverLoad is the Manager-CPU phase of one subject.
type discoverLoad struct {
	Clients        int     `json:"clients"`
	RateHz         float64 `json:"rate_hz_per_client"`
	Seconds        float64 `json:"seconds"`
	Discoveries    int     `json:"discoveries"`
	ManagerCPUPct  float64 `json:"manager_cpu_percent"`
	ManagerReqs    uint64  `json:"manager_requests"`
	ManagerParks   uint64  `json:"manager_parks"`
	ClientP50Ns    float64 `json:"client_p50_ns"`
	ClientP99Ns    float64 `json:"client_p99_ns"`
	MissedDeadline int     `json:"late_calls"`
}

// discoverReport is the suite's --json output.
type discoverReport struct {
	DiscoverFigures
	// Ratios are round trip / local p50 per chain (the ≥ 5x target).
	Ratios map[string]float64 `json:"rtt_over_local_p50"`
	// Wakes are the Manager's requests and parks during the local
	// phases (the 0-wake-up target) and during the round-trip phases.
	LocalRequests uint64 `json:"local_manager_requests"`
	LocalParks    uint64 `json:"local_manager_parks"`
	RTTRequests   uint64 `json:"rtt_manager_requests"`
	RTTParks      uint64 `json:"rtt_manager_parks"`
	// IdleParks are the Manager's parks over an idle spell of IdleSeconds
	// (no client calls at all) just before the load phases: the baseline
	// the local phase's parks compare with (the dispatcher's own timers).
	IdleParks      uint64        `json:"idle_manager_parks"`
	IdleSeconds    float64       `json:"idle_seconds"`
	LoadLocal      *discoverLoad `json:"load_local,omitempty"`
	LoadRTT        *discoverLoad `json:"load_rtt,omitempty"`
	CPUs           int           `json:"cpus"`
	CPUModel       string        `json:"cpu_model,omitempty"`
	ResidentBlocks int           `json:"resident_blocks"`
	Iters          int           `json:"iters"`
}

func quantiles(ns []uint64) DiscoverQuantiles {
	s := slices.Clone(ns)
	slices.Sort(s)
	at := func(q float64) float64 { return float64(s[min(len(s)-1, int(q*float64(len(s))))]) }
	return DiscoverQuantiles{P50: at(0.50), P99: at(0.99)}
}

func measureDiscover(o DiscoverOptions) (*discoverReport, error) {
	if o.Iters == 0 {
		o.Iters = 20000
	}
	if o.Chains == nil {
		o.Chains = []int{32, 1000}
	}
	if o.LoadTime == 0 {
		o.LoadTime = 3 * time.Second
	}
	if o.Iters < 1 || o.LoadTime < minDiscoverLoad || len(o.Chains) == 0 || slices.Min(o.Chains) < 1 {
		return nil, fmt.Errorf("discover: Iters %d (want at least 1), LoadTime %v (want at least %v), chains %v (want each at least 1)",
			o.Iters, o.LoadTime, minDiscoverLoad, o.Chains)
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	longest := slices.Max(o.Chains)
	httpAddr, ok := launch.LastFlagValue(o.ManagerArgs, "http-addr")
	if !ok {
		var err error
		if httpAddr, err = launch.FreeLoopbackAddr(); err != nil {
			return nil, err
		}
	}
	const capacity = 64 << 20 // 16,384 chunks of 4 KiB: a 1 MiB discovery index
	args := append([]string{"--ram-chunk-bytes", strconv.Itoa(query.QueryChunkBytes), "--http-addr", httpAddr}, o.ManagerArgs...)
	fmt.Fprintf(progress, "starting a Manager ...\n")
	m, err := managerproc.Launch(managerproc.RAMSpec(o.ManagerBin, capacity, args))
	if err != nil {
		return nil, err
	}
	defer m.Stop()
	c, err := managerproc.Connect(m, "discover")
	if err != nil {
		return nil, err
	}
	spec := content.Namespace
	spec.KVLayout = "orbitkv-bench-discover"
	ns, err := client.Fingerprint(spec)
	if err != nil {
		c.Close()
		return nil, err
	}
	hashes := make([]client.BlockHash, longest)
	for i := range hashes {
		hashes[i] = content.BlockHash(uint64(i) + 1<<40)
	}
	buf, err := client.AllocBuffer(query.QueryLayers, query.QueryPageBytes, uint64(longest))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("allocating the engine buffer: %w", err)
	}
	defer func() { c.Close(); buf.Free() }() // a registered buffer outlives its session
	id, err := c.RegisterBuffer(buf)
	if err != nil {
		return nil, fmt.Errorf("registering the engine buffer: %w", err)
	}
	pages := make([]uint32, longest)
	for i := range pages {
		pages[i] = uint32(i)
	}
	fmt.Fprintf(progress, "publishing %d blocks ...\n", longest)
	if res, err := c.Publish(ns, id, hashes, pages); err != nil || int(res.Stored) != longest {
		return nil, fmt.Errorf("publishing %d blocks: %d stored: %v%s", longest, res.Stored, err, m.ExitNote())
	}
	if err := c.DiscoverOpen(ns); err != nil {
		return nil, fmt.Errorf("mapping the discovery index: %w%s", err, m.ExitNote())
	}
	rep := &discoverReport{DiscoverFigures: DiscoverFigures{Local: map[string]DiscoverQuantiles{}, RTT: map[string]DiscoverQuantiles{}},
		Ratios: map[string]float64{}, CPUs: runtime.NumCPU(), CPUModel: suite.CpuModel(), ResidentBlocks: longest, Iters: o.Iters}
	out := make([]uint64, o.Iters)
	warm := min(o.Iters/10+1, 1000)
	if err := client.BenchDiscover(c, ns, hashes[:1], 1, client.DiscoverEmptyMode, warm, 0, out); err != nil {
		return nil, err
	}
	rep.TimerFloorNs = quantiles(out).P50
	counters := func() (uint64, uint64, error) {
		r, err := managerproc.ScrapeMetrics(httpAddr, func(r io.Reader) (uint64, error) {
			return managerproc.ParseCounter(r, "orbitkv_channel_requests_total")
		})
		if err != nil {
			return 0, 0, err
		}
		p, err := managerproc.ScrapeParks(httpAddr)
		return r, p, err
	}
	for _, n := range o.Chains {
		key := strconv.Itoa(n)
		// Interleaved: local, round trip, local again, so drift on a
		// loaded machine touches both subjects alike.
		var local, rtt []uint64
		for rep2 := 0; rep2 < 2; rep2++ {
			fmt.Fprintf(progress, "chain %d: local discovery ...\n", n)
			r0, p0, err := counters()
			if err != nil {
				return nil, err
			}
			if err := client.BenchDiscover(c, ns, hashes[:n], uint32(n), client.DiscoverLocalMode, warm, 0, out); err != nil {
				return nil, fmt.Errorf("local discovery of %d hashes: %w", n, err)
			}
			local = append(local, out...)
			r1, p1, err := counters()
			if err != nil {
				return nil, err
			}
			// Each scrape is an HTTP request, not a channel request; the
			// counters move only for channel requests and parks.
			rep.LocalRequests += r1 - r0
			rep.LocalParks += p1 - p0
			fmt.Fprintf(progress, "chain %d: round-trip discovery ...\n", n)
			if err := client.BenchDiscover(c, ns, hashes[:n], uint32(n), client.DiscoverRTTMode, warm, 0, out); err != nil {
				return nil, fmt.Errorf("round-trip discovery of %d hashes: %w%s", n, err, m.ExitNote())
			}
			rtt = append(rtt, out...)
			r2, p2, err := counters()
			if err != nil {
				return nil, err
			}
			rep.RTTRequests += r2 - r1
			rep.RTTParks += p2 - p1
		}
		rep.Local[key], rep.RTT[key] = quantiles(local), quantiles(rtt)
		rep.Ratios[key] = rep.RTT[key].P50 / rep.Local[key].P50
	}
	if o.Load {
		fmt.Fprintf(progress, "an idle spell of %v (the Manager's own wake-ups) ...\n", o.LoadTime)
		_, p0, err := counters()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		time.Sleep(o.LoadTime)
		_, p1, err := counters()
		if err != nil {
			return nil, err
		}
		rep.IdleParks, rep.IdleSeconds = p1-p0, time.Since(start).Seconds()
		for _, mode := range []client.DiscoverMode{client.DiscoverLocalMode, client.DiscoverRTTMode} {
			fmt.Fprintf(progress, "4 clients at 10 kHz each, %v ...\n", map[client.DiscoverMode]string{client.DiscoverLocalMode: "local", client.DiscoverRTTMode: "round trip"}[mode])
			l, err := discoverUnderLoad(m, httpAddr, ns, hashes[:min(32, longest)], mode, o.LoadTime, counters)
			if err != nil {
				return nil, err
			}
			if mode == client.DiscoverLocalMode {
				rep.LoadLocal = l
			} else {
				rep.LoadRTT = l
			}
		}
	}
	return rep, nil
}

// discoverUnderLoad runs 4 clients, each discovering chain at 10 kHz for
// d, and returns the Manager's CPU share and counters over the phase.
func discoverUnderLoad(m *managerproc.Manager, httpAddr string, ns client.Namespace, chain []client.BlockHash, mode client.DiscoverMode, d time.Duration,
	counters func() (uint64, uint64, error)) (*discoverLoad, error) {
	const clients, period = 4, 100 * time.Microsecond
	iters := int(d / period)
	cs := make([]*client.Client, clients)
	for i := range cs {
		c, err := managerproc.Connect(m, "discover-load")
		if err != nil {
			return nil, err
		}
		defer c.Close()
		if err := c.DiscoverOpen(ns); err != nil {
			return nil, err
		}
		cs[i] = c
	}
	outs := make([][]uint64, clients)
	errs := make([]error, clients)
	r0, p0, err := counters()
	if err != nil {
		return nil, err
	}
	t0, err := managerproc.CPUTicks(m.Pid)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i, c := range cs {
		outs[i] = make([]uint64, iters)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = client.BenchDiscover(c, ns, chain, uint32(len(chain)), mode, 10, period, outs[i])
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	t1, err := managerproc.CPUTicks(m.Pid)
	if err != nil {
		return nil, err
	}
	r1, p1, err := counters()
	if err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var all []uint64
	late := 0
	for _, o := range outs {
		all = append(all, o...)
		for _, v := range o {
			if v > uint64(period) {
				late++
			}
		}
	}
	q := quantiles(all)
	return &discoverLoad{Clients: clients, RateHz: 1 / period.Seconds(), Seconds: wall.Seconds(), Discoveries: len(all),
		ManagerCPUPct: 100 * float64(t1-t0) / float64(pingpong.ClockTicksPerSecond()) / wall.Seconds(),
		ManagerReqs:   r1 - r0, ManagerParks: p1 - p0, ClientP50Ns: q.P50, ClientP99Ns: q.P99, MissedDeadline: late}, nil
}

// Limits of the discover suite's flags.
const (
	minDiscoverIters = 100
	maxDiscoverIters = 10000000 // 80 MB of samples per subject and chain
	minDiscoverLoad  = 100 * time.Millisecond
	maxDiscoverLoad  = 10 * time.Minute
)

// discoverConfig is the discover suite's flags.
type discoverConfig struct {
	json        bool
	output      string // --output; "" = stdout
	iters       int
	loadTime    time.Duration
	managerBin  string
	managerArgs []string
}

// parseDiscoverFlags parses the discover suite's flags; every value out of
// range is a *suite.UsageError naming the flag and its limits (pflag.ErrHelp for
// --help, after the usage text went to out).
func parseDiscoverFlags(args []string, out io.Writer) (discoverConfig, error) {
	var cfg discoverConfig
	fs := suite.StandaloneFlags("discover", out,
		"Discovery of 32 and 1,000 resident hashes from the Manager's shared-memory index",
		"(okv_discover_local: no syscall, no Manager wake-up) beside the round-trip QueryBundle",
		"discovery (a ticket with OKV_QUERY_DISCOVER) of the same chain in the same run, p50/p99;",
		"the Manager's channel requests and parks during the local phases and while idle; and",
		"the Manager's CPU with 4 clients discovering at 10 kHz each, local against round trip",
		"(--load-time each). Starts its own Manager. Method: bench/README.md, \"discover\".",
	)
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object instead of the table")
	fs.StringVar(&cfg.output, "output", "", "write the report (JSON with --json, else the table) to this `file` instead of stdout")
	fs.IntVar(&cfg.iters, "iters", 20000, fmt.Sprintf("`N` timed discoveries per subject, chain and repetition (%d..%d)", minDiscoverIters, maxDiscoverIters))
	fs.DurationVar(&cfg.loadTime, "load-time", 3*time.Second, fmt.Sprintf("length of each Manager-CPU phase, 4 clients at 10 kHz each (%v..%v)", minDiscoverLoad, maxDiscoverLoad))
	fs.StringVar(&cfg.managerBin, "manager-bin", "", "Manager `binary` to start (default: orbitkv-manager next to this binary, then ./bin/orbitkv-manager)")
	managerArgs := fs.String("manager-args", "", "extra space-separated `arguments` for the Manager the bench starts (e.g. \"--ram-capacity 1GiB\"); they come last and win")
	if err := suite.ParseStandalone(fs, args); err != nil {
		return cfg, err
	}
	cfg.managerArgs = strings.Fields(*managerArgs)
	return cfg, suite.FirstError(suite.Between("iters", cfg.iters, minDiscoverIters, maxDiscoverIters),
		suite.Between("load-time", cfg.loadTime, minDiscoverLoad, maxDiscoverLoad), suite.CheckOutput(cfg.output))
}

func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseDiscoverFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	asJSON := &cfg.json
	o := DiscoverOptions{ManagerBin: cfg.managerBin, ManagerArgs: cfg.managerArgs, Iters: cfg.iters, Load: true, LoadTime: cfg.loadTime, Progress: stderr}
	if *asJSON {
		o.Progress = nil
	}
	rep, err := measureDiscover(o)
	if err != nil {
		return err
	}
	write := func(w io.Writer) error { return writeDiscover(w, rep, *asJSON) }
	if cfg.output == "" {
		return write(stdout)
	}
	if err := suite.WriteReportFile(cfg.output, write); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "report written to %s\n", cfg.output)
	return nil
}

// writeDiscover writes rep to stdout: one JSON object when asJSON, else
// the table.
func writeDiscover(stdout io.Writer, rep *discoverReport, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "orbitkv-bench discover: %d CPUs (%s), %d resident blocks, %d samples per subject and chain; timer floor %.0f ns (in every sample)\n",
		rep.CPUs, rep.CPUModel, rep.ResidentBlocks, 2*rep.Iters, rep.TimerFloorNs)
	fmt.Fprintf(stdout, "%-8s %14s %14s %14s %14s %10s\n", "hashes", "local p50 ns", "local p99 ns", "rtt p50 ns", "rtt p99 ns", "rtt/local")
	for _, n := range []string{"32", "1000"} {
		l, ok := rep.Local[n]
		if !ok {
			continue
		}
		r := rep.RTT[n]
		fmt.Fprintf(stdout, "%-8s %14.0f %14.0f %14.0f %14.0f %9.1fx\n", n, l.P50, l.P99, r.P50, r.P99, rep.Ratios[n])
	}
	fmt.Fprintf(stdout, "Manager during the local phases: %d channel requests, %d parks; during the round-trip phases: %d requests, %d parks\n",
		rep.LocalRequests, rep.LocalParks, rep.RTTRequests, rep.RTTParks)
	if rep.IdleSeconds > 0 {
		fmt.Fprintf(stdout, "Manager idle (no client calls) for %.1f s: %d parks\n", rep.IdleSeconds, rep.IdleParks)
	}
	for _, l := range []struct {
		name string
		l    *discoverLoad
	}{{"local", rep.LoadLocal}, {"round trip", rep.LoadRTT}} {
		if l.l == nil {
			continue
		}
		fmt.Fprintf(stdout, "4 clients x 10 kHz, %s: Manager CPU %.1f%% over %.1f s (%d requests, %d parks); client p50 %.0f ns p99 %.0f ns\n",
			l.name, l.l.ManagerCPUPct, l.l.Seconds, l.l.ManagerReqs, l.l.ManagerParks, l.l.ClientP50Ns, l.l.ClientP99Ns)
	}
	return nil
}
