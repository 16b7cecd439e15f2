package suite

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
)

const procStatText = `cpu  1000 10 500 8000 40 0 10 %d 0 0
cpu0 500 5 250 4000 20 0 5 0 0 0
intr 1 2 3
ctxt 547206654
procs_running %d
procs_blocked 0
`

func TestParseProcStatReadsBusyStealCPUsAndRunnable(t *testing.T) {
	st, err := parseProcStat(fmt.Sprintf(procStatText, 40, 3))
	if err != nil {
		t.Fatal(err)
	}
	if want := (ProcStat{Total: 1000 + 10 + 500 + 8000 + 40 + 0 + 10 + 40, Busy: 1000 + 10 + 500, Steal: 40, CPUs: 1, ProcsRunning: 3}); st != want {
		t.Errorf("parseProcStat = %+v, want %+v", st, want)
	}
	bad := []struct {
		name string
		text string
		want string
	}{
		{"a short cpu line", "cpu 1 2 3\nprocs_running 1\n", "cpu line has 4 fields"},
		{"a cpu field that is not a count", "cpu 1 2 3 4 5 6 7 x 0 0\nprocs_running 1\n", `cpu field 8 "x"`},
		{"no procs_running line", "cpu 1 2 3 4 5 6 7 8 0 0\n", "no cpu or procs_running"},
		{"a negative procs_running", "cpu 1 2 3 4 5 6 7 8 0 0\nprocs_running -1\n", `procs_running "-1"`},
	}
	for _, tt := range bad {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			if _, err := parseProcStat(tt.text); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestJudgeMarksEachCondition(t *testing.T) {
	quiet := ValidityInput{Repeats: 3, StatStart: ProcStat{Total: 1000, Steal: 10}, StatEnd: ProcStat{Total: 2000, Steal: 20}, Foreign: ForeignCPU{Ticks: 20, Span: 1000, CPUs: 2}}
	tests := []struct {
		name  string
		edit  func(in *ValidityInput)
		valid bool
		want  string // in the one reason, "" when valid
	}{
		{"a quiet run of 3 repeats is valid", func(*ValidityInput) {}, true, ""},
		{"two repeats give no noise band", func(in *ValidityInput) { in.Repeats = 2 }, false, "--repeats 2: fewer than 3"},
		{"steal of 6% of the CPU time is too much", func(in *ValidityInput) { in.StatEnd.Steal = 10 + 60 }, false, "steal time 6.0%"},
		{"steal of exactly 5% is allowed", func(in *ValidityInput) { in.StatEnd.Steal = 10 + 50 }, true, ""},
		{"other processes keeping one CPU of two busy is contention", func(in *ValidityInput) { in.Foreign.Ticks = 500 }, false, "other processes kept 1.00 CPUs busy on average"},
		{"a quarter of a CPU is allowed", func(in *ValidityInput) { in.Foreign.Ticks = 125 }, true, ""},
		{"negative foreign time (rounding on an idle machine) is none", func(in *ValidityInput) { in.Foreign.Ticks = -30 }, true, ""},
		{"a hot phase that parked every round trip is invalid", func(in *ValidityInput) {
			in.HotPhases = []HotPhase{{Name: "query 32/hot repeat 1", Parks: 20000, RoundTrips: 21000}}
		}, false, "hot phase query 32/hot repeat 1 parked"},
		{"a hot phase that parked 1% of its round trips is allowed", func(in *ValidityInput) {
			in.HotPhases = []HotPhase{{Name: "h", Parks: 10, RoundTrips: 1000}}
		}, true, ""},
		{"parks of a hot phase whose requests keep the Manager busy half the spin window are not held against the run", func(in *ValidityInput) {
			in.HotPhases = []HotPhase{{Name: "query 10000/hot repeat 1", Parks: 568, RoundTrips: 1101, Long: true}}
		}, true, ""},
		{"a Manager named by --socket is not the bench's own", func(in *ValidityInput) { in.ExternalManager = "/run/orbitkv.sock" }, false, "the Manager at /run/orbitkv.sock is not the bench's own"},
		{"counters that went backwards count as no steal", func(in *ValidityInput) { in.StatEnd = ProcStat{} }, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := quiet
			tt.edit(&in)
			v := Judge(in)
			if v.Valid != tt.valid {
				t.Fatalf("valid = %v, want %v (reasons %q)", v.Valid, tt.valid, v.Reasons)
			}
			switch {
			case tt.valid && len(v.Reasons) != 0:
				t.Errorf("a valid run has reasons %q", v.Reasons)
			case !tt.valid && (len(v.Reasons) != 1 || !strings.Contains(v.Reasons[0], tt.want)):
				t.Errorf("reasons = %q, want one containing %q", v.Reasons, tt.want)
			}
			for _, c := range v.Checks {
				if c.OK == (c.Reason != "") {
					t.Errorf("check %+v: a reason exactly when not ok", c)
				}
			}
		})
	}
}

func TestStatStateAndPPIDCountsFieldsAfterTheName(t *testing.T) {
	state, ppid, ok := statStateAndPPID("42 (a) b) (c) R 7 42 42 0")
	if !ok || state != "R" || ppid != 7 {
		t.Errorf("= %q, %d, %v; want R, 7, true", state, ppid, ok)
	}
	if _, _, ok := statStateAndPPID("42 (x"); ok {
		t.Errorf("a line without ')' parsed")
	}
}

func TestStatCPUTicksReadsUtimeStimeAndChildren(t *testing.T) {
	// Fields after the name: 3 state, 4 ppid ... 14 utime, 15 stime, 16 cutime, 17 cstime.
	const line = "42 (a) b) (c) R 7 42 42 0 -1 4194560 100 0 0 0 30 12 5 3 20 0 1 0"
	for _, tt := range []struct {
		name     string
		children bool
		want     uint64
	}{
		{"utime and stime of the process itself", false, 30 + 12},
		{"plus its reaped children's cutime and cstime", true, 30 + 12 + 5 + 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := statCPUTicks(line, tt.children); !ok || got != tt.want {
				t.Errorf("statCPUTicks = %d, %v; want %d, true", got, ok, tt.want)
			}
		})
	}
	if _, ok := statCPUTicks("42 (x) R 7", false); ok {
		t.Errorf("a short line parsed")
	}
}

// The monitor's own CPU time of the bench grows while one of its
// goroutines spins, so its work is never counted as another process's.
func TestOwnCPUTicksCountsTheBenchsWork(t *testing.T) {
	self := os.Getpid()
	before, ok := ownCPUTicks(Descendants(self), self)
	if !ok {
		t.Fatal("ownCPUTicks of this process: not readable")
	}
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
	}
	after, ok := ownCPUTicks(Descendants(self), self)
	if !ok || after < before+5 {
		t.Errorf("own CPU %d then %d jiffies after spinning 200 ms, want at least 5 more", before, after)
	}
	if _, ok := ownCPUTicks([]int{1 << 30}, self); ok {
		t.Errorf("a pid that does not exist was read")
	}
}

func TestParkModeTurnsTheHotCheckOff(t *testing.T) {
	tests := []struct {
		name     string
		pollMode string
		args     []string
		want     bool
	}{
		{"adaptive polling has hot phases", "adaptive", nil, false},
		{"--poll-mode park parks by design", "park", nil, true},
		{"--manager-args --poll-mode park wins over the suite's flag", "adaptive", []string{"--poll-mode", "park"}, true},
		{"--manager-args --poll-mode=spin wins over park", "park", []string{"--poll-mode=spin"}, false},
		{"a suite without the flag and no args is not park", "", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParkMode(tt.pollMode, tt.args); got != tt.want {
				t.Errorf("parkMode(%q, %q) = %v, want %v", tt.pollMode, tt.args, got, tt.want)
			}
		})
	}
}

func TestClientSideCountsRoundTripsBeyondTheSpinWindow(t *testing.T) {
	h := latency.Of(append(benchtest.Seq(1000, 1099), 60_000, 70_000, 2_000_000)...)
	p := HotPhase{Name: "ping/hot", RoundTrips: 103}.ClientSide(h, 0)
	if p.Slow != 3 || p.Timed != 103 {
		t.Fatalf("clientSide = %+v, want 3 of 103 beyond 50 µs", p)
	}
	tests := []struct {
		name  string
		phase HotPhase
		valid bool
	}{
		{"3% of the round trips beyond the window is a parked client", p, false},
		{"1 in 200 is allowed", HotPhase{Name: "x", RoundTrips: 200, Slow: 1, Timed: 200}, true},
		{"a wider window takes the slow ones in", HotPhase{Name: "x", RoundTrips: 103}.ClientSide(h, 3*time.Millisecond), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(ValidityInput{Repeats: 3, HotPhases: []HotPhase{tt.phase}})
			if v.Valid != tt.valid || (!tt.valid && !strings.Contains(v.Reasons[0], "parked on the client side")) {
				t.Errorf("valid %v reasons %q, want valid %v", v.Valid, v.Reasons, tt.valid)
			}
		})
	}
}

func TestDescendantsFindAChildProcess(t *testing.T) {
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep(1) to start: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	for name, find := range map[string]func(int) []int{"children files": Descendants, "a scan of /proc": descendantsByScan} {
		t.Run("the child is found by "+name, func(t *testing.T) {
			if got := find(os.Getpid()); !slices.Contains(got, cmd.Process.Pid) || got[0] != os.Getpid() {
				t.Errorf("descendants = %v, want this process first and the child %d", got, cmd.Process.Pid)
			}
		})
	}
}
