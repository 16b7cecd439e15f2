package replay

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/internal/launch"
	"github.com/orbitkv/orbitkv/internal/sdstub"
)

// RestartCommand is the suite's name: `orbitkv-bench restart`.
const RestartCommand = "restart"

// The scenarios of orbitkv-bench restart, in report order.
const (
	scenarioNone    = "none"         // no event: the baseline
	scenarioCold    = "cold-restart" // SIGTERM, then a new Manager: an empty RAM tier
	scenarioUpgrade = "upgrade"      // orbitkvctl upgrade: the tier handed over
	scenarioKill    = "kill"         // SIGKILL under the fd store, restarted with the tier
)

var scenarios = []string{scenarioNone, scenarioCold, scenarioUpgrade, scenarioKill}

// restartScenario is one scenario's figures.
type restartScenario struct {
	Name string `json:"scenario"`
	// HitRatioAfter is hit blocks over blocks of the trace's second half
	// (the requests from the event on).
	HitRatioAfter float64 `json:"hit_ratio_after"`
	// RequestsFailed are requests no Manager served within a minute of
	// reconnecting (each client retries a request the event cut short).
	RequestsFailed uint64 `json:"requests_failed"`
	// NoServiceS is from the event to the first Restore that completed
	// after a client saw the event (any client; its reconnect back-off
	// included); NoServiceAllS to the last client's first such Restore.
	NoServiceS    float64 `json:"no_service_s"`
	NoServiceAllS float64 `json:"no_service_all_s"`
	// MismatchedBytes are restored bytes that differ from what was
	// published (every restored byte is checked).
	MismatchedBytes uint64 `json:"mismatched_bytes"`
	Reconnects      uint64 `json:"reconnects"`
	// EventS is how long the event itself took (the stop and start, the
	// upgrade command, the kill and restart); TierBytes the RAM tier's
	// used bytes at the event; AdoptedBlocks and AdoptedBytes what the
	// next Manager adopted and verified and serves; ScanS how long its
	// ledger scan took before it served, VerifyS its verification of the
	// blocks' checksums while it served (its log's took= of each).
	EventS        float64 `json:"event_s"`
	TierBytes     uint64  `json:"tier_bytes"`
	AdoptedBlocks uint64  `json:"adopted_blocks"`
	AdoptedBytes  uint64  `json:"adopted_bytes"`
	ScanS         float64 `json:"scan_s"`
	VerifyS       float64 `json:"verify_s"`
	Requests      uint64  `json:"requests"`
	WallS         float64 `json:"wall_s"`
}

// restartReport is the suite's one JSON object.
type restartReport struct {
	suite.Head
	Trace       string             `json:"trace"`
	Clients     int                `json:"clients"`
	RAMCapacity uint64             `json:"ram_capacity_bytes"`
	BlockBytes  uint64             `json:"block_bytes"`
	EventAt     int                `json:"event_at_request"`
	Scenarios   []*restartScenario `json:"scenarios"`
}

// RunRestart is `orbitkv-bench restart`.
func RunRestart(args []string, stdout, stderr io.Writer) error {
	var list string
	cfg, err := parseFlags(RestartCommand, args, suite.Output{Writer: stderr, Help: stdout}, []string{
		"Restarts the Manager at 50% of the replay of a Mooncake trace (the replay's",
		"clients, which reconnect by themselves and retry a request cut short) in each",
		"scenario: none, cold-restart (SIGTERM and a new Manager), upgrade (orbitkvctl",
		"upgrade: the RAM tier handed over) and kill (SIGKILL under a stand-in for",
		"systemd's fd store, restarted with the tier). Reports per scenario the hit",
		"ratio of the second half, failed requests, seconds without service and",
		"mismatched bytes. Method: bench/restart/README.md.",
	}, func(fs *suite.Flags) {
		fs.StringVar(&list, "scenarios", strings.Join(scenarios, ","), "comma-separated `list` of scenarios to run, from "+strings.Join(scenarios, ", "))
	})
	if err != nil {
		return err
	}
	var chosen []string
	for _, s := range strings.Split(list, ",") {
		if !slices.Contains(scenarios, s) {
			return suite.Usagef("--scenarios: %q is not one of %s", s, strings.Join(scenarios, ", "))
		}
		chosen = append(chosen, s)
	}
	switch {
	case cfg.socket != "" || cfg.nodes > 0 || cfg.events != eventsOff:
		return suite.Usagef("restart starts and restarts its own Manager: it takes no --socket, --nodes or --kv-events")
	}
	cfg.ordered = true // the event falls at 50% of the trace, in trace order
	plan, err := loadPlan(&cfg)
	if err != nil {
		return err
	}
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	prog := suite.StartProgress(cfg.Progress, stderr, RestartCommand, "requests", int64(cfg.Repeats*len(chosen)*len(plan.requests)))
	defer prog.Finish()
	out := &restartReport{Trace: plan.tracePath, Clients: cfg.clients, RAMCapacity: cfg.ramCapacity, BlockBytes: cfg.blockBytes,
		EventAt: len(plan.requests) / 2}
	var figs []suite.Figure
	for _, name := range chosen {
		var runs []*restartScenario
		for i := range cfg.Repeats {
			if !cfg.Json {
				fmt.Fprintf(stderr, "%s, repeat %d of %d: replaying %d requests with %d clients, the event at request %d ...\n",
					name, i+1, cfg.Repeats, len(plan.requests), cfg.clients, out.EventAt)
			}
			sc, err := restartOnce(&cfg, plan, name, stderr, prog)
			if err != nil {
				return fmt.Errorf("scenario %s: %w", name, err)
			}
			runs = append(runs, sc)
		}
		sc := medianScenario(runs)
		out.Scenarios = append(out.Scenarios, sc)
		vals := func(f func(*restartScenario) float64) []float64 {
			v := make([]float64, len(runs))
			for i, r := range runs {
				v[i] = f(r)
			}
			return v
		}
		figs = append(figs, suite.NewFigure(name+"_hit_ratio_after", "ratio", suite.HigherIsBetter, sc.HitRatioAfter,
			vals(func(r *restartScenario) float64 { return r.HitRatioAfter })))
		if name != scenarioNone {
			figs = append(figs, suite.NewFigure(name+"_no_service_s", "s", suite.LowerIsBetter, sc.NoServiceS,
				vals(func(r *restartScenario) float64 { return r.NoServiceS })))
		}
	}
	cfg.Finish(&out.Head, mon, suite.ValidityInput{HotUnchecked: "the replay has no hot phase"}, figs)
	emitErr := cfg.Emit(stdout, stderr, out, func(w io.Writer) error { return writeRestartTable(w, out) })
	for _, sc := range out.Scenarios {
		if sc.MismatchedBytes != 0 {
			return fmt.Errorf("scenario %s: %d restored bytes differ from what was published", sc.Name, sc.MismatchedBytes)
		}
	}
	return emitErr
}

// medianScenario is the run of runs with the median hit ratio after.
func medianScenario(runs []*restartScenario) *restartScenario {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b *restartScenario) int { return cmp.Compare(a.HitRatioAfter, b.HitRatioAfter) })
	return s[len(s)/2]
}

func writeRestartTable(w io.Writer, out *restartReport) error {
	fmt.Fprintf(w, "orbitkv-bench restart: %s, %d clients, %s RAM tier, %s blocks, the event at request %d\n\n",
		filepath.Base(out.Trace), out.Clients, humanize.IBytes(out.RAMCapacity), humanize.IBytes(out.BlockBytes), out.EventAt)
	fmt.Fprintf(w, "%-13s %15s %9s %12s %16s %11s %10s %12s %9s %9s %9s\n", "scenario", "hit_ratio_after", "failed", "no_service_s",
		"no_service_all_s", "mismatched", "event_s", "tier", "adopted", "scan_s", "verify_s")
	var none float64
	for _, sc := range out.Scenarios {
		if sc.Name == scenarioNone {
			none = sc.HitRatioAfter
		}
		fmt.Fprintf(w, "%-13s %15.4f %9d %12.3f %16.3f %11d %10.3f %12s %9d %9.3f %9.3f\n", sc.Name, sc.HitRatioAfter, sc.RequestsFailed,
			sc.NoServiceS, sc.NoServiceAllS, sc.MismatchedBytes, sc.EventS, humanize.IBytes(sc.TierBytes), sc.AdoptedBlocks, sc.ScanS, sc.VerifyS)
	}
	if none > 0 {
		fmt.Fprintln(w)
		for _, sc := range out.Scenarios {
			if sc.Name == scenarioUpgrade || sc.Name == scenarioKill {
				ok := sc.RequestsFailed == 0 && sc.MismatchedBytes == 0 && sc.HitRatioAfter >= 0.9*none && sc.NoServiceS <= 1
				fmt.Fprintf(w, "%s: hit_ratio_after %.3f× none's (target ≥ 0.9), %d failed, %d mismatched (targets 0), no_service_s %.3f (target ≤ 1): %s\n",
					sc.Name, sc.HitRatioAfter/none, sc.RequestsFailed, sc.MismatchedBytes, sc.NoServiceS, pass(ok))
			}
		}
	}
	return nil
}

// halfway runs an event once when the run's done requests reach after.
type halfway struct {
	after int64
	event func() error
	quit  chan struct{}
	fired chan struct{} // closed once the event ended (err set)
	err   error
	once  sync.Once
}

func newHalfway(after int, event func() error) *halfway {
	return &halfway{after: int64(after), event: event, quit: make(chan struct{}), fired: make(chan struct{})}
}

// watch polls done every millisecond until it reaches after, then runs the
// event; stop ends the watch.
func (h *halfway) watch(done *atomic.Int64) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for done.Load() < h.after {
		select {
		case <-h.quit:
			h.once.Do(func() { h.err = errors.New("the run ended before the event"); close(h.fired) })
			return
		case <-t.C:
		}
	}
	h.once.Do(func() { h.err = h.event(); close(h.fired) })
}

func (h *halfway) stop() {
	select {
	case <-h.quit:
	default:
		close(h.quit)
	}
}

// wait is the event's error, once it ran.
func (h *halfway) wait() error {
	<-h.fired
	return h.err
}

var successorPid = regexp.MustCompile(`successor pid (\d+)`)

// The Manager's log lines of an adoption (gocore/tier, adopt.go): the
// ledger scanned, then every block verified.
var (
	scannedLine  = regexp.MustCompile(`ram tier: adopted the blocks a predecessor sealed; [^"]*" blocks=\d+ bytes=\d+ .* took=(\S+)`)
	verifiedLine = regexp.MustCompile(`ram tier: verified the adopted blocks" serving=(\d+) bytes=(\d+) dropped_checksum=\d+ took=(\S+)`)
)

// restartOnce is one replay with the scenario's event at its half.
func restartOnce(cfg *replayConfig, plan *replayPlan, scenario string, stderr io.Writer, prog *suite.Progress) (*restartScenario, error) {
	dir, err := os.MkdirTemp("", "orbitkv-bench-restart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	spec := managerproc.RAMSpec(cfg.ManagerBin, cfg.ramCapacity, cfg.ManagerArgs)
	spec.Dir, spec.Socket = dir, filepath.Join(dir, "manager.sock")
	if spec.HTTPAddr, err = launch.FreeLoopbackAddr(); err != nil {
		return nil, err
	}
	var stub *sdstub.Stub
	if scenario == scenarioKill {
		if stub, err = sdstub.Start(dir); err != nil {
			return nil, err
		}
		defer stub.Close()
		spec.Env = []string{stub.Env()}
	}
	m, err := managerproc.Launch(spec)
	if err != nil {
		return nil, err
	}
	ms := []*managerproc.Manager{m}
	successor := 0
	var run *replayRun
	defer func() {
		if run != nil && run.at != nil {
			run.at.stop()
			<-run.at.fired // the event, if it began, ended
		}
		for _, x := range ms {
			x.Stop()
		}
		if successor > 0 {
			stopPid(successor)
		}
	}()
	sc := &restartScenario{Name: scenario}
	var eventNS int64
	run = &replayRun{cfg: *cfg, plan: plan, manager: m, stderr: stderr, progress: prog,
		salt: fmt.Sprintf("run-%d-%d", os.Getpid(), time.Now().UnixNano()), reconnect: true, afterFrom: len(plan.requests) / 2}
	logOf := func() string { return ms[len(ms)-1].Log() }
	if scenario != scenarioNone {
		run.at = newHalfway(len(plan.requests)/2, func() error {
			if h, err := managerproc.ReadHealth(m.Http); err == nil {
				sc.TierBytes = h.RAMUsedBytes
			}
			start := time.Now()
			eventNS = start.UnixNano()
			defer func() { sc.EventS = time.Since(start).Seconds() }()
			switch scenario {
			case scenarioCold:
				m.Stop()
				m2, err := managerproc.Launch(spec)
				if err != nil {
					return err
				}
				ms = append(ms, m2)
				run.manager = m2
			case scenarioKill:
				m.Kill()
				files, names, err := stub.Files()
				if err != nil {
					return err
				}
				s2 := spec
				s2.Env, s2.ExtraFiles, s2.ListenFDs = []string{stub.Env(), names}, files, true
				m2, err := managerproc.Launch(s2)
				for _, f := range files {
					f.Close()
				}
				if err != nil {
					return err
				}
				ms = append(ms, m2)
				run.manager = m2
			case scenarioUpgrade:
				ctl := filepath.Join(filepath.Dir(launchBin(cfg.ManagerBin)), "orbitkvctl")
				out, err := exec.Command(ctl, "--socket", spec.Socket, "upgrade", "--timeout", "30s").CombinedOutput()
				if m := successorPid.FindSubmatch(out); m != nil {
					successor, _ = strconv.Atoi(string(m[1]))
				}
				if err != nil {
					return fmt.Errorf("orbitkvctl upgrade: %v\n%s", err, out)
				}
			}
			return nil
		})
	}
	defer managerproc.StopOnSignal(RestartCommand, m, stderr, run.killWorkers)()
	rep, err := run.execute()
	if err != nil {
		return nil, fmt.Errorf("%w\nManager log (tail):\n%s", err, ms[len(ms)-1].LogTail(3000))
	}
	sc.Requests, sc.WallS, sc.MismatchedBytes = rep.Requests, rep.WallS, rep.Mismatches
	var after, hitsAfter uint64
	var first, last int64
	for _, res := range rep.results {
		after += res.BlocksAfter
		hitsAfter += res.HitBlocksAfter
		sc.RequestsFailed += res.RequestsFailed
		sc.Reconnects += res.Reconnects
		if res.FirstRestoreNS != 0 {
			if first == 0 || res.FirstRestoreNS < first {
				first = res.FirstRestoreNS
			}
			last = max(last, res.FirstRestoreNS)
		}
	}
	if after > 0 {
		sc.HitRatioAfter = float64(hitsAfter) / float64(after)
	}
	if eventNS != 0 && first != 0 {
		sc.NoServiceS = float64(first-eventNS) / 1e9
		sc.NoServiceAllS = float64(last-eventNS) / 1e9
	}
	log := logOf()
	if mm := verifiedLine.FindStringSubmatch(log); mm != nil {
		sc.AdoptedBlocks, _ = strconv.ParseUint(mm[1], 10, 64)
		sc.AdoptedBytes, _ = strconv.ParseUint(mm[2], 10, 64)
		if d, err := time.ParseDuration(mm[3]); err == nil {
			sc.VerifyS = d.Seconds()
		}
	}
	if mm := scannedLine.FindStringSubmatch(log); mm != nil {
		if d, err := time.ParseDuration(mm[1]); err == nil {
			sc.ScanS = d.Seconds()
		}
	}
	return sc, nil
}

// launchBin is the Manager binary the bench starts (flag, else
// launch.Find's default), for the orbitkvctl beside it.
func launchBin(flag string) string {
	bin, err := launch.Find(flag)
	if err != nil {
		return flag
	}
	return bin
}

// stopPid ends a Manager the bench did not start (an upgrade's
// successor): SIGTERM, then SIGKILL after managerproc.StopGrace.
func stopPid(pid int) {
	syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(managerproc.StopGrace)
	for time.Now().Before(deadline) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}
