package suite

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

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// Thresholds of a valid run (bench/README.md "Valid runs"). A run past
// any of them is still reported, marked invalid with the reason; with
// --strict the bench then exits exitInvalid.
const (
	// maxStealFraction: the share of all CPU time the hypervisor gave
	// to other guests (the steal column of /proc/stat) over the run.
	maxStealFraction = 0.05
	// maxForeignCPUs: the CPUs that processes other than the bench's own
	// kept busy on average over the run: the host's user, nice and
	// system time (/proc/stat) less the CPU time of the bench, its
	// child processes and its Manager (/proc/PID/stat utime, stime and,
	// for the bench, the reaped children's cutime, cstime), over the
	// monitor's intervals in which that set of processes did not change.
	// CPU time, not a count of runnable tasks: a count sampled from
	// /proc while the bench's own threads spin and park is racy and read
	// about one task too many on an idle machine.
	maxForeignCPUs = 0.25
	// maxHotParkFraction: in a hot (back-to-back, spinning) phase, the
	// Manager's dispatcher may park at most this share of the phase's
	// round trips (orbitkv_channel_parks_total); a hot phase that parks
	// measures wake-ups, not the spinning channel.
	maxHotParkFraction = 0.01
	// monitorInterval is how often the run monitor samples /proc: a
	// sample walks the bench's process tree and reads /proc/stat and one
	// /proc/PID/stat per process of it, well under 0.1 ms of CPU.
	monitorInterval = 100 * time.Millisecond
)

// ExitInvalid is the exit status of a suite run with --strict whose
// report is marked invalid (and of compare --strict on a regression).
const ExitInvalid = 3

// Check names of validityCheck.
const (
	checkRepeats    = "repeats"
	checkSteal      = "steal"
	checkContention = "contention"
	checkHotParks   = "hot_parks"
	checkOwnManager = "own_manager"
)

// ValidityCheck is one check of a run's conditions.
type ValidityCheck struct {
	Check    string `json:"check"`            // one of the check* names
	Measured string `json:"measured"`         // what the run showed: "0.0123", "2 parks in 20000 round trips"
	Limit    string `json:"limit"`            // the threshold it is held to
	OK       bool   `json:"ok"`               // within the limit (or not applicable)
	Reason   string `json:"reason,omitempty"` // why the run is invalid; "" when OK
}

// Validity is the "validity" object of every report: Valid is false
// exactly when a check failed, and Reasons holds the failed checks'
// reasons in check order.
type Validity struct {
	Valid   bool            `json:"valid"`
	Reasons []string        `json:"reasons"`
	Checks  []ValidityCheck `json:"checks"`
}

// ProcStat is one reading of /proc/stat: the aggregate "cpu" line's
// total, busy (user + nice + system) and steal jiffies, the number of
// "cpuN" lines (CPUs) and procs_running.
type ProcStat struct {
	Total, Busy, Steal uint64
	CPUs               int
	ProcsRunning       int
}

// parseProcStat reads a /proc/stat text: the first line "cpu  user nice
// system idle iowait irq softirq steal …" (steal is the 8th number;
// guest and guest_nice are already inside user and nice, so they are not
// added to the total) and the procs_running line.
func parseProcStat(text string) (ProcStat, error) {
	var st ProcStat
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
				if i < 3 {
					st.Busy += v
				}
				if i == 7 {
					st.Steal = v
				}
			}
			sawCPU = true
		default:
			if strings.HasPrefix(f[0], "cpu") {
				if _, err := strconv.Atoi(f[0][3:]); err == nil {
					st.CPUs++
				}
				continue
			}
			if f[0] != "procs_running" {
				continue
			}
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
func readProcStat() (ProcStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return ProcStat{}, err
	}
	return parseProcStat(string(b))
}

// HotPhase is one hot (spinning) phase of a suite, how often the
// Manager's dispatcher parked during it and, where the suite checks the
// client side too, how many of its timed round trips took longer than the
// client's spin window (so the client parked on its futex: a round trip
// whose answer came within the window never parks).
type HotPhase struct {
	Name       string
	Parks      uint64
	RoundTrips int
	// Slow is the round trips above the client's spin window, of Timed
	// timed ones; Timed 0 = the client side is not checked.
	Slow, Timed int64
	// Long: the Manager spends at least half the client's spin window
	// per request, so the client's own work between requests (reading a
	// long answer, building the next) outlasts the dispatcher's spin and
	// it parks by design; Parks is then reported, not checked.
	Long bool
}

// ClientSpinDefault is liborbitkv's default spin window
// (okv_connect_options.spin_ns 0): a call spins this long on the response
// line, then parks on the futex.
const ClientSpinDefault = 50 * time.Microsecond

// ClientSide fills the client-side counts of p from h, the phase's
// histogram, with the client's spin window spin (0 = the default).
func (p HotPhase) ClientSide(h *latency.Hist, spin time.Duration) HotPhase {
	if spin <= 0 {
		spin = ClientSpinDefault
	}
	p.Slow, p.Timed = h.CountAbove(uint64(spin)), h.Count()
	return p
}

// ForeignCPU is the CPU time of processes other than the bench's own over
// the monitor's valid intervals: Ticks (may be negative from rounding
// where the machine was idle) of Span jiffies of the whole machine, which
// has CPUs CPUs.
type ForeignCPU struct {
	Ticks int64
	Span  uint64
	CPUs  int
}

// cpus is the mean number of CPUs the foreign processes kept busy; 0
// when nothing was measured.
func (f ForeignCPU) cpus() float64 {
	if f.Span == 0 || f.Ticks <= 0 {
		return 0
	}
	return float64(f.Ticks) / float64(f.Span) * float64(max(f.CPUs, 1))
}

// ValidityInput is everything a run's validity is judged on; judge is a
// pure function of it, so tests inject readings.
type ValidityInput struct {
	Repeats         int
	StatStart       ProcStat
	StatEnd         ProcStat
	Foreign         ForeignCPU // the CPU time of processes not the bench's, from the monitor
	HotPhases       []HotPhase // nil: the suite has none, or could not read the Manager's counter
	HotUnchecked    string     // why the hot phases were not checked; "" = checked or none
	ExternalManager string     // the --socket of a Manager not started by the bench; "" = own or none
}

// ParkMode reports whether a Manager started with --poll-mode pollMode
// ("" = not given) and then managerArgs (which win) parks after every
// request: then no phase is hot and hot_parks does not apply.
func ParkMode(pollMode string, managerArgs []string) bool {
	if v, ok := launch.LastFlagValue(managerArgs, "poll-mode"); ok {
		pollMode = v
	}
	return pollMode == "park"
}

// Judge applies the thresholds to in.
func Judge(in ValidityInput) Validity {
	var checks []ValidityCheck
	add := func(c ValidityCheck, ok bool, reason string) {
		c.OK = ok
		if !ok {
			c.Reason = reason
		}
		checks = append(checks, c)
	}
	add(ValidityCheck{Check: checkRepeats, Measured: strconv.Itoa(in.Repeats), Limit: fmt.Sprintf("at least %d", minValidRepeats)},
		in.Repeats >= minValidRepeats, fmt.Sprintf("--repeats %d: fewer than %d repeats give no noise band", in.Repeats, minValidRepeats))

	dt, ds := in.StatEnd.Total-in.StatStart.Total, in.StatEnd.Steal-in.StatStart.Steal
	if in.StatEnd.Total < in.StatStart.Total || in.StatEnd.Steal < in.StatStart.Steal {
		dt, ds = 0, 0
	}
	steal := 0.0
	if dt > 0 {
		steal = float64(ds) / float64(dt)
	}
	add(ValidityCheck{Check: checkSteal, Measured: fmt.Sprintf("%.4f", steal), Limit: fmt.Sprintf("at most %.2f", maxStealFraction)},
		steal <= maxStealFraction, fmt.Sprintf("steal time %.1f%% of the CPU time over the run (limit %.0f%%): the hypervisor ran other guests", 100*steal, 100*maxStealFraction))

	foreign, seconds := in.Foreign.cpus(), 0.0
	if in.Foreign.CPUs > 0 {
		seconds = float64(in.Foreign.Span) / float64(in.Foreign.CPUs) / clockTicks
	}
	add(ValidityCheck{Check: checkContention, Measured: fmt.Sprintf("%.2f CPUs busy with other processes (over %.1f s)", foreign, seconds), Limit: fmt.Sprintf("at most %.2f CPUs", maxForeignCPUs)},
		foreign <= maxForeignCPUs, fmt.Sprintf("other processes kept %.2f CPUs busy on average (limit %.2f): other work competed for the CPUs", foreign, maxForeignCPUs))

	for _, p := range in.HotPhases {
		if p.Long {
			add(ValidityCheck{Check: checkHotParks, Measured: fmt.Sprintf("%s: %d parks in %d round trips, not checked: each request keeps the Manager busy for at least half the client's spin window, so the dispatcher parks between requests by design", p.Name, p.Parks, p.RoundTrips),
				Limit: "-"}, true, "")
			continue
		}
		limit := maxHotParkFraction * float64(p.RoundTrips)
		add(ValidityCheck{Check: checkHotParks, Measured: fmt.Sprintf("%s: %d parks in %d round trips", p.Name, p.Parks, p.RoundTrips),
			Limit: fmt.Sprintf("at most %.0f%% of the round trips", 100*maxHotParkFraction)},
			float64(p.Parks) <= limit, fmt.Sprintf("hot phase %s parked: the Manager's dispatcher slept %d times in %d round trips (limit %.0f%%), so it measured wake-ups, not the spinning channel", p.Name, p.Parks, p.RoundTrips, 100*maxHotParkFraction))
		if p.Timed > 0 {
			add(ValidityCheck{Check: checkHotParks, Measured: fmt.Sprintf("%s: %d of %d round trips beyond the client's spin window", p.Name, p.Slow, p.Timed),
				Limit: fmt.Sprintf("at most %.0f%% of the round trips", 100*maxHotParkFraction)},
				float64(p.Slow) <= maxHotParkFraction*float64(p.Timed), fmt.Sprintf("hot phase %s parked on the client side: %d of %d round trips outlasted the client's spin window (limit %.0f%%), so the client slept on its futex (a descheduled Manager answers late without parking)", p.Name, p.Slow, p.Timed, 100*maxHotParkFraction))
		}
	}
	if in.HotUnchecked != "" {
		add(ValidityCheck{Check: checkHotParks, Measured: "not checked: " + in.HotUnchecked, Limit: "-"}, true, "")
	}
	if in.ExternalManager != "" {
		add(ValidityCheck{Check: checkOwnManager, Measured: "--socket " + in.ExternalManager, Limit: "a Manager the bench starts"},
			false, fmt.Sprintf("the Manager at %s is not the bench's own (--socket): its configuration is unknown and other sessions may share it", in.ExternalManager))
	}
	v := Validity{Valid: true, Reasons: []string{}, Checks: checks}
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
func writeValidity(w io.Writer, v Validity) error {
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

// InvalidRunError is what a suite returns with --strict when its report
// is marked invalid, and compare --strict on a regression or an invalid
// report; dispatch exits exitInvalid on it. what says which ("" = the
// run is invalid).
type InvalidRunError struct {
	What    string
	Reasons []string
}

func (e *InvalidRunError) Error() string {
	what := e.What
	if what == "" {
		what = "the run is invalid"
	}
	return "--strict: " + what + ": " + strings.Join(e.Reasons, "; ")
}

// runMonitor watches a run's conditions: /proc/stat at the start and the
// end, and every monitorInterval the runnable tasks that are not the
// bench's own.
type runMonitor struct {
	start   ProcStat
	startOK bool
	extra   func() []int // pids outside the bench's process tree that are its own (its Manager)

	mu      sync.Mutex
	foreign ForeignCPU

	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{}
}

// Stop ends the sampling and waits for it; safe to call more than once
// (a suite defers it for its error paths; finish calls it too).
func (m *runMonitor) Stop() {
	m.quitOnce.Do(func() { close(m.quit) })
	<-m.done
}

// StartMonitor starts watching; extra, if not nil, names further pids
// whose running threads are the bench's own (an external Manager is not).
func StartMonitor(extra func() []int) *runMonitor {
	m := &runMonitor{extra: extra, quit: make(chan struct{}), done: make(chan struct{})}
	m.start, m.startOK = mustStat()
	go m.loop()
	return m
}

// mustStat is readProcStat with ok false instead of an error: a machine
// without /proc/stat leaves the steal check at zero, never fails a run.
func mustStat() (ProcStat, bool) {
	st, err := readProcStat()
	return st, err == nil
}

// loop samples, every monitorInterval until stop, the host's busy time
// and the CPU time of the bench's own processes; an interval counts only
// when both readings worked and the set of own processes is the one of
// the interval's start (a process that starts or is reaped in it would
// count its life before, or lose its last moments).
func (m *runMonitor) loop() {
	defer close(m.done)
	t := time.NewTicker(monitorInterval)
	defer t.Stop()
	self := os.Getpid()
	var prevPIDs []int
	var prevStat ProcStat
	var prevOwn uint64
	havePrev := false
	for {
		select {
		case <-m.quit:
			return
		case <-t.C:
		}
		pids := Descendants(self)
		if m.extra != nil {
			pids = append(pids, m.extra()...)
		}
		st, err := readProcStat()
		own, ok := ownCPUTicks(pids, self)
		ok = ok && err == nil
		if ok && havePrev && slices.Equal(pids, prevPIDs) && st.Total >= prevStat.Total && st.Busy >= prevStat.Busy {
			m.mu.Lock()
			m.foreign.Ticks += int64(st.Busy-prevStat.Busy) - (int64(own) - int64(prevOwn))
			m.foreign.Span += st.Total - prevStat.Total
			m.foreign.CPUs = st.CPUs
			m.mu.Unlock()
		}
		prevPIDs, prevStat, prevOwn, havePrev = pids, st, own, ok
	}
}

// finish stops the monitor and returns its readings in in.
func (m *runMonitor) finish(in *ValidityInput) {
	m.Stop()
	end, ok := mustStat()
	if m.startOK && ok {
		in.StatStart, in.StatEnd = m.start, end
	}
	m.mu.Lock()
	in.Foreign = m.foreign
	m.mu.Unlock()
}

// Descendants is pid and every process below it: from the children files
// of /proc/PID/task/TID (CONFIG_PROC_CHILDREN), else from the ppid field
// of every /proc/PID/stat.
func Descendants(pid int) []int {
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

// clockTicks is USER_HZ, the unit of /proc/stat and /proc/PID/stat
// times: 100 on every Linux architecture Go supports.
const clockTicks = 100

// ownCPUTicks is the CPU time (utime + stime, jiffies) of pids, plus
// for self the reaped children's (cutime + cstime); ok is false when a
// process's stat could not be read (it exited).
func ownCPUTicks(pids []int, self int) (uint64, bool) {
	var total uint64
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			return 0, false
		}
		t, ok := statCPUTicks(string(b), pid == self)
		if !ok {
			return 0, false
		}
		total += t
	}
	return total, true
}

// statCPUTicks is utime + stime (fields 14 and 15) of a /proc/PID/stat
// line, plus cutime + cstime (16 and 17) when children is set.
func statCPUTicks(stat string, children bool) (uint64, bool) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3
	if len(f) < 15 {
		return 0, false
	}
	last := 13 // stime, field 15
	if children {
		last = 15 // cstime, field 17
	}
	var total uint64
	for _, s := range f[11:last] {
		v, err := strconv.ParseInt(s, 10, 64) // cutime and cstime are signed in proc(5)
		if err != nil || v < 0 {
			return 0, false
		}
		total += uint64(v)
	}
	return total, true
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
