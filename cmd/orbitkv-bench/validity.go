package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orbitkv/orbitkv/internal/launch"
)

// Thresholds of a valid run (bench/README.md "Valid runs"). A run past
// any of them is still reported, marked invalid with the reason; with
// --strict the bench then exits exitInvalid.
const (
	// maxStealFraction: the share of all CPU time the hypervisor gave
	// to other guests (the steal column of /proc/stat) over the run.
	maxStealFraction = 0.05
	// maxForeignRunnable: the mean number of runnable tasks that are not
	// the bench's own (procs_running of /proc/stat less the running
	// threads of the bench, its child processes and its Manager),
	// sampled every monitorInterval.
	maxForeignRunnable = 0.5
	// maxHotParkFraction: in a hot (back-to-back, spinning) phase, the
	// Manager's dispatcher may park at most this share of the phase's
	// round trips (orbitkv_channel_parks_total); a hot phase that parks
	// measures wake-ups, not the spinning channel.
	maxHotParkFraction = 0.01
	// monitorInterval is how often the run monitor samples /proc: a
	// sample reads /proc/stat and the task states of the bench's own
	// processes, about 0.1 ms of CPU (0.1% of a core).
	monitorInterval = 100 * time.Millisecond
	// monitorTreeEvery: the bench's process tree is walked again every
	// this many samples.
	monitorTreeEvery = 10
)

// exitInvalid is the exit status of a suite run with --strict whose
// report is marked invalid (and of compare --strict on a regression).
const exitInvalid = 3

// Check names of validityCheck.
const (
	checkRepeats    = "repeats"
	checkSteal      = "steal"
	checkContention = "contention"
	checkHotParks   = "hot_parks"
	checkOwnManager = "own_manager"
)

// validityCheck is one check of a run's conditions.
type validityCheck struct {
	Check    string `json:"check"`            // one of the check* names
	Measured string `json:"measured"`         // what the run showed: "0.0123", "2 parks in 20000 round trips"
	Limit    string `json:"limit"`            // the threshold it is held to
	OK       bool   `json:"ok"`               // within the limit (or not applicable)
	Reason   string `json:"reason,omitempty"` // why the run is invalid; "" when OK
}

// validity is the "validity" object of every report: Valid is false
// exactly when a check failed, and Reasons holds the failed checks'
// reasons in check order.
type validity struct {
	Valid   bool            `json:"valid"`
	Reasons []string        `json:"reasons"`
	Checks  []validityCheck `json:"checks"`
}

// procStat is one reading of /proc/stat: the aggregate "cpu" line's
// total and steal jiffies, and procs_running.
type procStat struct {
	Total, Steal uint64
	ProcsRunning int
}

// parseProcStat reads a /proc/stat text: the first line "cpu  user nice
// system idle iowait irq softirq steal …" (steal is the 8th number;
// guest and guest_nice are already inside user and nice, so they are not
// added to the total) and the procs_running line.
func parseProcStat(text string) (procStat, error) {
	var st procStat
	var sawCPU, sawRunning bool
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "cpu":
			if len(f) < 9 {
				return st, fmt.Errorf("/proc/stat: cpu line has %d fields, want at least 9 (through steal)", len(f))
			}
			for i, s := range f[1:min(len(f), 9)] {
				v, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					return st, fmt.Errorf("/proc/stat: cpu field %d %q is not a count", i+1, s)
				}
				st.Total += v
				if i == 7 {
					st.Steal = v
				}
			}
			sawCPU = true
		case "procs_running":
			if len(f) != 2 {
				return st, errors.New("/proc/stat: procs_running line has no single value")
			}
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 0 {
				return st, fmt.Errorf("/proc/stat: procs_running %q is not a count", f[1])
			}
			st.ProcsRunning, sawRunning = n, true
		}
	}
	if !sawCPU || !sawRunning {
		return st, errors.New("/proc/stat: no cpu or procs_running line")
	}
	return st, nil
}

// readProcStat reads and parses /proc/stat.
func readProcStat() (procStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// hotPhase is one hot (spinning) phase of a suite, how often the
// Manager's dispatcher parked during it and, where the suite checks the
// client side too, how many of its timed round trips took longer than the
// client's spin window (so the client parked on its futex: a round trip
// whose answer came within the window never parks).
type hotPhase struct {
	Name       string
	Parks      uint64
	RoundTrips int
	// Slow is the round trips above the client's spin window, of Timed
	// timed ones; Timed 0 = the client side is not checked.
	Slow, Timed int64
}

// clientSpinDefault is liborbitkv's default spin window
// (okv_connect_options.spin_ns 0): a call spins this long on the response
// line, then parks on the futex.
const clientSpinDefault = 50 * time.Microsecond

// clientSide fills the client-side counts of p from h, the phase's
// histogram, with the client's spin window spin (0 = the default).
func (p hotPhase) clientSide(h *latencyHist, spin time.Duration) hotPhase {
	if spin <= 0 {
		spin = clientSpinDefault
	}
	p.Slow, p.Timed = h.countAbove(uint64(spin)), h.count()
	return p
}

// validityInput is everything a run's validity is judged on; judge is a
// pure function of it, so tests inject readings.
type validityInput struct {
	Repeats         int
	StatStart       procStat
	StatEnd         procStat
	Foreign         []float64  // foreign runnable tasks, one per monitor sample
	HotPhases       []hotPhase // nil: the suite has none, or could not read the Manager's counter
	HotUnchecked    string     // why the hot phases were not checked; "" = checked or none
	ExternalManager string     // the --socket of a Manager not started by the bench; "" = own or none
}

// parkMode reports whether a Manager started with --poll-mode pollMode
// ("" = not given) and then managerArgs (which win) parks after every
// request: then no phase is hot and hot_parks does not apply.
func parkMode(pollMode string, managerArgs []string) bool {
	if v, ok := launch.LastFlagValue(managerArgs, "poll-mode"); ok {
		pollMode = v
	}
	return pollMode == "park"
}

// judge applies the thresholds to in.
func judge(in validityInput) validity {
	var checks []validityCheck
	add := func(c validityCheck, ok bool, reason string) {
		c.OK = ok
		if !ok {
			c.Reason = reason
		}
		checks = append(checks, c)
	}
	add(validityCheck{Check: checkRepeats, Measured: strconv.Itoa(in.Repeats), Limit: fmt.Sprintf("at least %d", minValidRepeats)},
		in.Repeats >= minValidRepeats, fmt.Sprintf("--repeats %d: fewer than %d repeats give no noise band", in.Repeats, minValidRepeats))

	dt, ds := in.StatEnd.Total-in.StatStart.Total, in.StatEnd.Steal-in.StatStart.Steal
	if in.StatEnd.Total < in.StatStart.Total || in.StatEnd.Steal < in.StatStart.Steal {
		dt, ds = 0, 0
	}
	steal := 0.0
	if dt > 0 {
		steal = float64(ds) / float64(dt)
	}
	add(validityCheck{Check: checkSteal, Measured: fmt.Sprintf("%.4f", steal), Limit: fmt.Sprintf("at most %.2f", maxStealFraction)},
		steal <= maxStealFraction, fmt.Sprintf("steal time %.1f%% of the CPU time over the run (limit %.0f%%): the hypervisor ran other guests", 100*steal, 100*maxStealFraction))

	foreign := 0.0
	if len(in.Foreign) > 0 {
		for _, f := range in.Foreign {
			foreign += f
		}
		foreign /= float64(len(in.Foreign))
	}
	add(validityCheck{Check: checkContention, Measured: fmt.Sprintf("%.2f (mean of %d samples)", foreign, len(in.Foreign)), Limit: fmt.Sprintf("at most %.2f", maxForeignRunnable)},
		foreign <= maxForeignRunnable, fmt.Sprintf("%.2f runnable tasks on average were not the bench's (limit %.2f): other work competed for the CPUs", foreign, maxForeignRunnable))

	for _, p := range in.HotPhases {
		limit := maxHotParkFraction * float64(p.RoundTrips)
		add(validityCheck{Check: checkHotParks, Measured: fmt.Sprintf("%s: %d parks in %d round trips", p.Name, p.Parks, p.RoundTrips),
			Limit: fmt.Sprintf("at most %.0f%% of the round trips", 100*maxHotParkFraction)},
			float64(p.Parks) <= limit, fmt.Sprintf("hot phase %s parked: the Manager's dispatcher slept %d times in %d round trips (limit %.0f%%), so it measured wake-ups, not the spinning channel", p.Name, p.Parks, p.RoundTrips, 100*maxHotParkFraction))
		if p.Timed > 0 {
			add(validityCheck{Check: checkHotParks, Measured: fmt.Sprintf("%s: %d of %d round trips beyond the client's spin window", p.Name, p.Slow, p.Timed),
				Limit: fmt.Sprintf("at most %.0f%% of the round trips", 100*maxHotParkFraction)},
				float64(p.Slow) <= maxHotParkFraction*float64(p.Timed), fmt.Sprintf("hot phase %s parked on the client side: %d of %d round trips outlasted the client's spin window (limit %.0f%%), so the client slept on its futex (a descheduled Manager answers late without parking)", p.Name, p.Slow, p.Timed, 100*maxHotParkFraction))
		}
	}
	if in.HotUnchecked != "" {
		add(validityCheck{Check: checkHotParks, Measured: "not checked: " + in.HotUnchecked, Limit: "-"}, true, "")
	}
	if in.ExternalManager != "" {
		add(validityCheck{Check: checkOwnManager, Measured: "--socket " + in.ExternalManager, Limit: "a Manager the bench starts"},
			false, fmt.Sprintf("the Manager at %s is not the bench's own (--socket): its configuration is unknown and other sessions may share it", in.ExternalManager))
	}
	v := validity{Valid: true, Reasons: []string{}, Checks: checks}
	for _, c := range checks {
		if !c.OK {
			v.Valid = false
			v.Reasons = append(v.Reasons, c.Reason)
		}
	}
	return v
}

// writeValidity prints the validity section of a table: "run: valid" or
// "run: INVALID" with one line per reason.
func writeValidity(w io.Writer, v validity) error {
	if v.Checks == nil {
		return nil
	}
	if v.Valid {
		_, err := fmt.Fprintln(w, "run: valid (bench/README.md \"Valid runs\")")
		return err
	}
	fmt.Fprintln(w, "run: INVALID (bench/README.md \"Valid runs\"):")
	for _, r := range v.Reasons {
		fmt.Fprintf(w, "  %s\n", r)
	}
	return nil
}

// invalidRunError is what a suite returns with --strict when its report
// is marked invalid, and compare --strict on a regression or an invalid
// report; dispatch exits exitInvalid on it. what says which ("" = the
// run is invalid).
type invalidRunError struct {
	what    string
	reasons []string
}

func (e *invalidRunError) Error() string {
	what := e.what
	if what == "" {
		what = "the run is invalid"
	}
	return "--strict: " + what + ": " + strings.Join(e.reasons, "; ")
}

// runMonitor watches a run's conditions: /proc/stat at the start and the
// end, and every monitorInterval the runnable tasks that are not the
// bench's own.
type runMonitor struct {
	start   procStat
	startOK bool
	extra   func() []int // pids outside the bench's process tree that are its own (its Manager)

	mu      sync.Mutex
	foreign []float64

	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{}
}

// stop ends the sampling and waits for it; safe to call more than once
// (a suite defers it for its error paths; finish calls it too).
func (m *runMonitor) stop() {
	m.quitOnce.Do(func() { close(m.quit) })
	<-m.done
}

// startMonitor starts watching; extra, if not nil, names further pids
// whose running threads are the bench's own (an external Manager is not).
func startMonitor(extra func() []int) *runMonitor {
	m := &runMonitor{extra: extra, quit: make(chan struct{}), done: make(chan struct{})}
	m.start, m.startOK = mustStat()
	go m.loop()
	return m
}

// mustStat is readProcStat with ok false instead of an error: a machine
// without /proc/stat leaves the steal check at zero, never fails a run.
func mustStat() (procStat, bool) {
	st, err := readProcStat()
	return st, err == nil
}

// loop samples the foreign runnable tasks every monitorInterval until stop.
func (m *runMonitor) loop() {
	defer close(m.done)
	t := time.NewTicker(monitorInterval)
	defer t.Stop()
	self := os.Getpid()
	var tree []int
	for i := 0; ; i++ {
		select {
		case <-m.quit:
			return
		case <-t.C:
		}
		// The process tree changes rarely (workers and peers start with a
		// phase); walking it costs far more than a sample, so it is
		// refreshed every monitorTreeEvery samples.
		if i%monitorTreeEvery == 0 {
			tree = descendants(self)
		}
		st, err := readProcStat()
		if err != nil {
			continue
		}
		var extra []int
		if m.extra != nil {
			extra = m.extra()
		}
		own := runningThreads(append(slices.Clip(tree), extra...))
		m.mu.Lock()
		m.foreign = append(m.foreign, float64(max(0, st.ProcsRunning-own)))
		m.mu.Unlock()
	}
}

// finish stops the monitor and returns its readings in in.
func (m *runMonitor) finish(in *validityInput) {
	m.stop()
	end, ok := mustStat()
	if m.startOK && ok {
		in.StatStart, in.StatEnd = m.start, end
	}
	m.mu.Lock()
	in.Foreign = append(in.Foreign, m.foreign...)
	m.mu.Unlock()
}

// descendants is pid and every process below it: from the children files
// of /proc/PID/task/TID (CONFIG_PROC_CHILDREN), else from the ppid field
// of every /proc/PID/stat.
func descendants(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		kids, ok := children(out[i])
		if !ok {
			return descendantsByScan(pid)
		}
		out = append(out, kids...)
	}
	return out
}

// children lists the child processes of pid from its tasks' children
// files; ok is false when the kernel has none (a vanished pid has none
// and is ok).
func children(pid int) ([]int, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, true
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "children"))
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(filepath.Join(dir, t.Name())); serr == nil {
				return nil, false
			}
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out, true
}

// descendantsByScan is descendants from the ppid of every process.
func descendantsByScan(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if _, ppid, ok := statStateAndPPID(string(b)); ok {
			children[ppid] = append(children[ppid], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// runningThreads counts the threads of pids in state R.
func runningThreads(pids []int) int {
	n := 0
	for _, pid := range pids {
		dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
		tasks, _ := os.ReadDir(dir)
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
			if err != nil {
				continue
			}
			if state, _, ok := statStateAndPPID(string(b)); ok && state == "R" {
				n++
			}
		}
	}
	return n
}

// statStateAndPPID returns the state (field 3) and ppid (field 4) of a
// /proc/PID/stat line, counting fields after the last ')' of the name.
func statStateAndPPID(stat string) (string, int, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 2 {
		return "", 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}
