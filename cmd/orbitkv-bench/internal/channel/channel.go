package channel

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/pingpong"
)

// idleSessions is the number of idle orbitkv sessions held open while the
// Manager's CPU time is read (the target: an idle Manager with 4
// connected sessions uses at most 1% of a core).
const idleSessions = 4

// idleSettle is how long the idle sessions sit before the CPU window opens,
// so connect work and an adaptive spin window are not counted.
const idleSettle = 500 * time.Millisecond

// channelRun holds one run's results.
type channelRun struct {
	cfg        ChannelConfig
	report     Report
	manager    *managerproc.Manager
	pollMode   string // from Health when known
	idleWindow time.Duration

	repeats   map[string][]*latency.Hist // "CADENCE/SUBJECT" → one histogram per repeat
	idleReps  []float64                  // idle CPU % of each repeat's window
	hot       []suite.HotPhase           // back-to-back orbitkv_ping phases and the Manager's parks in each
	hotReason string                     // why the hot phases were not checked

	externalPID atomic.Int64 // an external Manager's pid once known, for the run monitor
}

// Run is `orbitkv-bench channel`.
func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseChannelFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	run := &channelRun{cfg: cfg, report: Report{BackToBack: map[string]latency.Stats{}, PerMs: map[string]latency.Stats{}}, repeats: map[string][]*latency.Hist{}}
	// An external Manager is not in the bench's process tree; once its pid
	// is known (from Health) its running threads count as the bench's own.
	mon := suite.StartMonitor(func() []int {
		if p := run.externalPID.Load(); p > 0 {
			return []int{int(p)}
		}
		return nil
	})
	defer mon.Stop()
	if cfg.needsManager() {
		if cfg.socket != "" {
			run.manager = managerproc.External(cfg.socket)
		} else {
			if run.manager, err = startManager(&cfg); err != nil {
				return err
			}
		}
		defer run.manager.Stop()
		// Interrupted: stop a Manager the bench started and remove its
		// temporary directory (peers die with us by PR_SET_PDEATHSIG).
		defer managerproc.StopOnSignal("channel", run.manager, stderr, nil)()
	}
	// One sample buffer, reused by every subject and cadence. Repeats are
	// interleaved: each runs every subject once, so a ratio of two
	// subjects' repeats compares the same stretch of machine state.
	buf := make([]uint64, max(cfg.N, cfg.PerMsN))
	for rep := range cfg.Repeats {
		for _, s := range cfg.Subjects {
			if !cfg.Json {
				fmt.Fprintf(stderr, "repeat %d of %d: measuring %s ...\n", rep+1, cfg.Repeats, s)
			}
			if err := run.measure(s, buf, rep); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
	}
	run.summarise()
	if cfg.needsManager() && cfg.idle > 0 {
		if !cfg.Json {
			fmt.Fprintf(stderr, "measuring idle Manager CPU with %d sessions for %v ...\n", idleSessions, cfg.idle)
		}
		for range cfg.Repeats {
			pct, err := run.idleCPU()
			if err != nil {
				return fmt.Errorf("idle CPU: %w", err)
			}
			run.idleReps = append(run.idleReps, pct)
		}
		pct := suite.MedianOf(run.idleReps)
		run.report.IdleCPUPercent = &pct
	}
	in := suite.ValidityInput{HotPhases: run.hot, HotUnchecked: run.hotReason}
	if run.manager != nil && !run.manager.Started() {
		in.ExternalManager = run.manager.Socket
	}
	cfg.Finish(&run.report.Head, mon, in, run.figures())
	// The report first: a plot that fails does not lose a run's figures.
	err = cfg.Emit(stdout, stderr, &run.report, func(w io.Writer) error {
		return writeTable(w, run.header(), &run.report, cfg.Subjects)
	})
	return errors.Join(err, chart.WriteCharts(cfg.PlotDir, stderr, &run.report.Head, ChannelCharts(&run.report, &cfg)...))
}

// measure runs repeat rep of one subject at both cadences and records its
// samples; the subject's client, peer or Manager lives for this repeat only.
func (r *channelRun) measure(subject string, buf []uint64, rep int) error {
	var (
		timeRun func(warmup int, period time.Duration, out []uint64) error
		cleanup func() error
	)
	switch subject {
	case subjectOrbitKV:
		c, err := r.connect("orbitkv-bench-ping")
		if err != nil {
			return err
		}
		if h, err := c.Health(); err == nil {
			r.pollMode = h.PollMode
			if r.manager.Pid == 0 {
				r.manager.Pid = int(h.ManagerPID)
				r.externalPID.Store(int64(h.ManagerPID))
				r.externalPID.Store(int64(h.ManagerPID))
			}
		}
		next := uint64(1)
		timeRun = func(warmup int, period time.Duration, out []uint64) error {
			err := pingpong.Ping(c, next, warmup, period, out)
			next += uint64(warmup + len(out))
			return err
		}
		cleanup = func() error { c.Close(); return nil }
	case subjectOKVIox2:
		// A second Manager of its own, serving the channel over iceoryx2
		// (--channel-transport iceoryx2), with the run's poll mode and
		// --manager-args; it runs only while this subject is measured.
		m, err := managerproc.Launch(managerproc.RAMSpec(r.cfg.ManagerBin, channelRAMCapacity,
			append([]string{"--poll-mode", r.cfg.PollMode, "--channel-transport", "iceoryx2"}, r.cfg.ManagerArgs...)))
		if err != nil {
			return fmt.Errorf("starting a Manager with --channel-transport iceoryx2: %w", err)
		}
		c, err := client.Connect(client.Options{
			SocketPath: m.Socket, InstanceID: fmt.Sprintf("orbitkv-bench-ping-iox2-%d", os.Getpid()),
			Role: pingpong.RoleBench, Spin: r.cfg.clientSpin,
		})
		if err != nil {
			m.Stop()
			return fmt.Errorf("connecting to the iceoryx2 Manager at %s: %w", m.Socket, err)
		}
		next := uint64(1)
		timeRun = func(warmup int, period time.Duration, out []uint64) error {
			err := pingpong.Ping(c, next, warmup, period, out)
			next += uint64(warmup + len(out))
			return err
		}
		cleanup = func() error { c.Close(); m.Stop(); return nil }
	case subjectGRPC:
		stdin, stdinW, err := os.Pipe()
		if err != nil {
			return err
		}
		stdoutR, stdoutW, err := os.Pipe()
		if err != nil {
			stdin.Close()
			stdinW.Close()
			return err
		}
		p, err := startPeer(subjectGRPC, nil, r.cfg.peerIdle, stdin, stdoutW)
		stdin.Close()
		stdoutW.Close()
		if err != nil {
			stdinW.Close()
			stdoutR.Close()
			return err
		}
		stop := func() error { stdinW.Close(); err := p.wait(5 * time.Second); stdoutR.Close(); return err }
		port, err := readPortLine(stdoutR, 10*time.Second)
		if err != nil {
			return errors.Join(err, stop())
		}
		g, err := dialGRPC(port)
		if err != nil {
			return errors.Join(err, stop())
		}
		timeRun = g.measure
		cleanup = func() error { g.close(); return stop() }
	default:
		kind, err := pingpong.ParseKind(subject)
		if err != nil {
			return err
		}
		b, peerFile, err := pingpong.NewBaseline(kind)
		if err != nil {
			return err
		}
		p, err := startPeer(subject, peerFile, r.cfg.peerIdle, nil, nil)
		if err != nil {
			b.Close()
			return err
		}
		timeRun = b.Measure
		cleanup = func() error {
			b.Close() // stop flag / EOF: the peer exits by itself
			return p.wait(3 * time.Second)
		}
	}

	err := r.cadences(subject, timeRun, buf, rep)
	if cerr := cleanup(); err == nil && cerr != nil {
		err = fmt.Errorf("stopping: %w", cerr)
	}
	return err
}

// cadences times repeat rep of subject back-to-back and then at one round
// trip per ms, each into histograms of its own, which the report's Stats
// merge (summarise). The back-to-back phases of orbitkv_ping are hot: the
// Manager's park counter is read around each.
func (r *channelRun) cadences(subject string, timeRun func(int, time.Duration, []uint64) error, buf []uint64, rep int) error {
	{
		out := buf[:r.cfg.N]
		watch := subject == subjectOrbitKV && r.manager.Http != "" && !suite.ParkMode(r.cfg.PollMode, r.cfg.ManagerArgs)
		var before uint64
		if watch {
			var err error
			if before, err = managerproc.ScrapeParks(r.manager.Http); err != nil {
				return err
			}
		}
		if err := timeRun(r.cfg.warmup, 0, out); err != nil {
			return fmt.Errorf("back-to-back: %w", err)
		}
		if watch {
			after, err := managerproc.ScrapeParks(r.manager.Http)
			if err != nil {
				return err
			}
			h := latency.NewHist()
			h.RecordAll(out)
			r.hot = append(r.hot, suite.HotPhase{Name: fmt.Sprintf("back_to_back/%s repeat %d", subject, rep+1), Parks: after - before,
				RoundTrips: r.cfg.N + r.cfg.warmup}.ClientSide(h, r.cfg.clientSpin))
		} else if subject == subjectOrbitKV && r.manager.Http == "" {
			r.hotReason = "an external Manager's /metrics address is unknown"
		} else if subject == subjectOrbitKV {
			r.hotReason = "the Manager runs --poll-mode park: it parks by design, no phase is hot"
		}
		r.record("back_to_back", subject, out)
		if r.cfg.PerMsN > 0 {
			out = buf[:r.cfg.PerMsN]
			if err := timeRun(r.cfg.perMsWarmup, perMsPeriod, out); err != nil {
				return fmt.Errorf("per-ms: %w", err)
			}
			r.record("per_ms", subject, out)
		}
		if r.manager != nil {
			if err := r.manager.Alive(); err != nil {
				return err
			}
		}
	}
	return nil
}

// summarise files every subject's Stats, from its histograms merged over
// the repeats, and the per-ms wake ratio of orbitkv_ping to futex.
func (r *channelRun) summarise() {
	for _, subject := range r.cfg.Subjects {
		r.report.BackToBack[subject] = r.merged("back_to_back", subject).Stats()
		if r.cfg.PerMsN > 0 {
			r.report.PerMs[subject] = r.merged("per_ms", subject).Stats()
		}
	}
	r.report.PerMsVsFutex = wakeRatioOf(r.repeats["per_ms/"+subjectOrbitKV], r.repeats["per_ms/"+subjectFutex])
}

// figures are the channel report's headline figures: p50 and p99 of every
// subject at every cadence, and the idle CPU.
func (r *channelRun) figures() []suite.Figure {
	var out []suite.Figure
	for _, cadence := range []string{"back_to_back", "per_ms"} {
		for _, s := range r.cfg.Subjects {
			key := cadence + "/" + s
			if reps := r.repeats[key]; len(reps) > 0 {
				out = append(out, suite.LatencyFigures(key, r.report.Hists[key], reps)...)
			}
		}
	}
	if w := r.report.PerMsVsFutex; w != nil {
		out = append(out,
			suite.MedianFigure("per_ms/orbitkv_ping_vs_futex/p50", "ratio", suite.LowerIsBetter, w.P50PerRepeat),
			suite.MedianFigure("per_ms/orbitkv_ping_vs_futex/p99", "ratio", suite.LowerIsBetter, w.P99PerRepeat))
	}
	if r.report.IdleCPUPercent != nil {
		out = append(out, suite.NewFigure("idle_cpu_percent", "%", suite.LowerIsBetter, *r.report.IdleCPUPercent, r.idleReps))
	}
	return out
}

// record files one repeat's samples (ns) of cadence and subject as a
// histogram of their own.
func (r *channelRun) record(cadence, subject string, samples []uint64) {
	h := latency.NewHist()
	h.RecordAll(samples)
	key := cadence + "/" + subject
	r.repeats[key] = append(r.repeats[key], h)
}

// merged merges the repeats' histograms of cadence and subject into the
// one the report keeps for plots, and returns it.
func (r *channelRun) merged(cadence, subject string) *latency.Hist {
	key := cadence + "/" + subject
	h := latency.NewHist()
	for _, rh := range r.repeats[key] {
		h.Merge(rh)
	}
	if r.report.Hists == nil {
		r.report.Hists = map[string]*latency.Hist{}
	}
	r.report.Hists[key] = h
	return h
}

func (r *channelRun) connect(instance string) (*client.Client, error) {
	c, err := client.Connect(client.Options{
		SocketPath: r.manager.Socket,
		InstanceID: fmt.Sprintf("%s-%d", instance, os.Getpid()),
		Role:       pingpong.RoleBench,
		Spin:       r.cfg.clientSpin,
	})
	if err != nil {
		return nil, fmt.Errorf("connecting to the Manager at %s: %w", r.manager.Socket, err)
	}
	return c, nil
}

// idleCPU holds idleSessions sessions open and returns the Manager's CPU
// time over the window as a percentage of one core.
func (r *channelRun) idleCPU() (float64, error) {
	var clients []*client.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for i := range idleSessions {
		c, err := r.connect(fmt.Sprintf("orbitkv-bench-idle%d", i))
		if err != nil {
			return 0, err
		}
		clients = append(clients, c)
	}
	if r.manager.Pid == 0 {
		h, err := clients[0].Health()
		if err != nil {
			return 0, fmt.Errorf("asking the Manager for its pid: %w", err)
		}
		r.manager.Pid = int(h.ManagerPID)
	}
	time.Sleep(idleSettle)
	t0, err := managerproc.CPUTicks(r.manager.Pid)
	if err != nil {
		return 0, err
	}
	w0 := time.Now()
	time.Sleep(r.cfg.idle)
	t1, err := managerproc.CPUTicks(r.manager.Pid)
	if err != nil {
		return 0, err
	}
	r.idleWindow = time.Since(w0)
	if err := r.manager.Alive(); err != nil {
		return 0, err
	}
	return cpuPercent(t1-t0, pingpong.ClockTicksPerSecond(), r.idleWindow), nil
}

// cpuPercent converts ticks of CPU time over wall into percent of one core.
func cpuPercent(ticks uint64, ticksPerSecond int, wall time.Duration) float64 {
	if ticksPerSecond <= 0 || wall <= 0 {
		return 0
	}
	return float64(ticks) / float64(ticksPerSecond) / wall.Seconds() * 100
}
