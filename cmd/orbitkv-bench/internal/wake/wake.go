package wake

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"text/tabwriter"
	"time"
	"unsafe"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/pingpong"
	"golang.org/x/sys/unix"
)

// The wake suite: what a thread pays for its first steps after a sleep on
// this machine, the cost behind the per-ms cadence of the channel suite
// (bench/channel/README.md, "Cold wake broken down"). Each probe is timed
// right after a raw futex sleep of --sleep (how the Manager's dispatcher
// sleeps) and warm (right after the same probe ran), on one goroutine
// locked to its thread.

// Probe names, in report order.
const (
	WakeProbeClock = "clock"    // two clock reads around an empty closure: the timer's own cost
	wakeProbeGo    = "go_call"  // one call of an empty Go function
	wakeProbeCgo   = "cgo_call" // one cgo call of an empty C function (pingpong.CgoNoop)
	WakeProbeLines = "lines"    // a chase of --lines dependent loads, one line in each of --lines pages
)

var WakeProbes = []string{WakeProbeClock, wakeProbeGo, wakeProbeCgo, WakeProbeLines}

// futexWaitPrivate is FUTEX_WAIT | FUTEX_PRIVATE_FLAG (linux/futex.h).
const futexWaitPrivate = 0 | 128

// wakePageWords is the stride of the line chase: one 4 KiB page, in uint64s.
const wakePageWords = 4096 / 8

// wakeConfig is the parsed, validated flag set of `orbitkv-bench wake`.
type wakeConfig struct {
	suite.Common
	samples int           // --samples: timed calls per probe, temperature and repeat
	sleep   time.Duration // --sleep: the raw futex sleep before each cold sample
	lines   int           // --lines: dependent loads of the lines probe
}

func parseWakeFlags(args []string, out io.Writer) (wakeConfig, error) {
	var cfg wakeConfig
	fs := suite.NewFlags("wake", &cfg.Common, out,
		"What a thread pays for its first steps after a sleep on this machine: two clock",
		"reads, an empty Go call, an empty cgo call, and a chase of N dependent cache lines,",
		"each timed right after a raw futex sleep (as the Manager's dispatcher sleeps) and",
		"warm (right after the same probe ran). On a VM whose host runs other work while a",
		"vCPU sleeps, a woken thread starts with cold caches, and a cold wake's cost follows",
		"the lines it touches. Starts no Manager. Method: bench/README.md.")
	fs.IntVar(&cfg.samples, "samples", 1000, "`N` timed calls per probe, cold and warm, per repeat (10..1000000)")
	fs.DurationVar(&cfg.sleep, "sleep", time.Millisecond, "raw futex sleep before each cold sample (10µs..100ms)")
	fs.IntVar(&cfg.lines, "lines", 32, "`N` dependent loads of the lines probe, one in each of N 4 KiB pages (1..4096)")
	fs.DefaultRepeatsOf(3)
	if err := fs.ParseArgs(args); err != nil {
		return cfg, err
	}
	if err := suite.FirstError(suite.Between("samples", cfg.samples, 10, 1_000_000),
		suite.Between("sleep", cfg.sleep, 10*time.Microsecond, 100*time.Millisecond),
		suite.Between("lines", cfg.lines, 1, 4096)); err != nil {
		return cfg, err
	}
	if d := cfg.sleeping(); d > wakeMaxSleeping {
		return cfg, suite.Usagef("--samples %d × --sleep %v × %d probes × --repeats %d sleep for %v; want at most %v",
			cfg.samples, cfg.sleep, len(WakeProbes), cfg.Repeats, d, wakeMaxSleeping)
	}
	return cfg, nil
}

// wakeMaxSleeping bounds the time a run spends in its cold samples' sleeps.
const wakeMaxSleeping = time.Hour

// sleeping is how long the cold samples of a run sleep in all.
func (c *wakeConfig) sleeping() time.Duration {
	return time.Duration(c.samples*len(WakeProbes)*c.Repeats) * c.sleep
}

// wakeProbe is one probe's latency, merged over the repeats; ns include
// the two clock reads around the probe (the clock probe is their cost).
type wakeProbe struct {
	Cold latency.Stats `json:"cold"` // right after the sleep
	Warm latency.Stats `json:"warm"` // right after the same probe ran
}

// WakeReport is the one JSON object `orbitkv-bench wake --json` prints.
type WakeReport struct {
	suite.Head
	SleepNs int64                `json:"sleep_ns"`
	Samples int                  `json:"samples"` // per probe, temperature and repeat
	Lines   int                  `json:"lines"`
	Probes  map[string]wakeProbe `json:"probes"`
	// ColdLineNs is the cold cost of one dependent line: (cold lines p50 -
	// cold clock p50) / Lines, the median over the repeats.
	ColdLineNs float64 `json:"cold_line_ns"`
	// InterruptedSleeps counts the sleeps a signal cut short (EINTR); each
	// was slept again in full before its sample.
	InterruptedSleeps int `json:"interrupted_sleeps"`
}

func Run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseWakeFlags(args, suite.Output{Writer: stderr, Help: stdout})
	if err != nil {
		return err
	}
	if _, err := pingpong.CgoNoop(0); err != nil {
		return fmt.Errorf("wake: the cgo_call probe: %w", err)
	}
	fmt.Fprintf(stderr, "wake: %d probes × %d samples cold and warm × %d repeats; the cold samples sleep %v in all\n",
		len(WakeProbes), cfg.samples, cfg.Repeats, cfg.sleeping())
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	rep, figs, err := measureWake(&cfg)
	if err != nil {
		return err
	}
	cfg.Finish(&rep.Head, mon, suite.ValidityInput{HotUnchecked: "the wake suite times single calls: no hot phase"}, figs)
	return cfg.Emit(stdout, stderr, rep, func(w io.Writer) error { return writeWakeTable(w, rep) })
}

// wakeSink keeps the probes' results alive, so that no call is optimised
// away.
var wakeSink uint64

//go:noinline
func wakeGoNoop(x uint64) uint64 { return x + 1 }

// wakeChase builds the line chase: one slot in each of lines pages, at
// line p%64 of page p (so that the lines spread over the cache's sets and
// a warm chase fits in L1), linked in a random order (so that no hardware
// prefetcher guesses the next), each holding the index of the next and
// the last ^0.
func wakeChase(lines int) (buf []uint64, first uint64) {
	buf = make([]uint64, lines*wakePageWords)
	slot := func(p int) uint64 { return uint64(p*wakePageWords + p%64*8) }
	order := rand.Perm(lines)
	for i, p := range order {
		next := ^uint64(0)
		if i+1 < lines {
			next = slot(order[i+1])
		}
		buf[slot(p)] = next
	}
	return buf, slot(order[0])
}

// measureWake runs every probe, cold then warm, cfg.repeats times, on this
// goroutine locked to its thread. Errors are a sleep's other than EINTR.
func measureWake(cfg *wakeConfig) (*WakeReport, []suite.Figure, error) {
	// The raw sleep keeps its P (as the dispatcher's does): the rest of
	// the bench, its monitor, needs another.
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf, first := wakeChase(cfg.lines)
	probe := map[string]func(){
		WakeProbeClock: func() {},
		wakeProbeGo:    func() { wakeSink = wakeGoNoop(wakeSink) },
		wakeProbeCgo:   func() { wakeSink, _ = pingpong.CgoNoop(wakeSink) },
		WakeProbeLines: func() {
			for j := first; j != ^uint64(0); j = buf[j] {
				wakeSink += j
			}
		},
	}
	var word uint32
	ts := unix.NsecToTimespec(cfg.sleep.Nanoseconds())
	interrupted := 0
	var resched time.Time
	sleep := func() error {
		// A goroutine that never reschedules gets a preemption signal
		// from sysmon every 10-20 ms, which ends the sleep early (EINTR)
		// and costs thread handoffs at the next call. Rescheduling before
		// the sleep at most every 5 ms keeps it from coming (the
		// dispatcher does the same: reschedEvery, gocore/internal/native).
		if now := time.Now(); now.Sub(resched) >= 5*time.Millisecond {
			resched = now
			runtime.Gosched()
		}
		for {
			// FUTEX_WAIT_PRIVATE on a word nobody changes: ETIMEDOUT
			// after cfg.sleep.
			_, _, errno := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(&word)), futexWaitPrivate, 0,
				uintptr(unsafe.Pointer(&ts)), 0, 0)
			switch errno {
			case unix.ETIMEDOUT:
				return nil
			case unix.EINTR:
				// A signal: the runtime's preemption, or a GC's stack scan,
				// which signals again until this goroutine passes a safe
				// point. Let it, then sleep again in full: the sample
				// follows a whole sleep.
				interrupted++
				runtime.Gosched()
			default:
				return fmt.Errorf("wake: FUTEX_WAIT of %v: %w", cfg.sleep, errno)
			}
		}
	}
	merged := map[string][2]*latency.Hist{}
	perRepeat := map[string][]float64{} // each figure's name: its value in every repeat so far
	for _, name := range WakeProbes {
		merged[name] = [2]*latency.Hist{latency.NewHist(), latency.NewHist()}
	}
	last := func(key string) float64 { v := perRepeat[key]; return v[len(v)-1] }
	for range cfg.Repeats {
		for _, name := range WakeProbes {
			f := probe[name]
			for t, temp := range []string{"cold", "warm"} {
				h := latency.NewHist()
				for range cfg.samples {
					if t == 0 {
						if err := sleep(); err != nil {
							return nil, nil, err
						}
					} else {
						f()
					}
					t0 := time.Now()
					f()
					h.RecordDuration(time.Since(t0))
				}
				merged[name][t].Merge(h)
				st, key := h.Stats(), temp+"/"+name
				perRepeat[key+"/p50"] = append(perRepeat[key+"/p50"], float64(st.P50))
				if temp == "cold" {
					perRepeat[key+"/p99"] = append(perRepeat[key+"/p99"], float64(st.P99))
				}
			}
		}
		line := max(0, last("cold/"+WakeProbeLines+"/p50")-last("cold/"+WakeProbeClock+"/p50")) / float64(cfg.lines)
		perRepeat["cold_line"] = append(perRepeat["cold_line"], line)
	}
	rep := &WakeReport{SleepNs: cfg.sleep.Nanoseconds(), Samples: cfg.samples, Lines: cfg.lines,
		Probes: map[string]wakeProbe{}, ColdLineNs: suite.MedianOf(perRepeat["cold_line"]), InterruptedSleeps: interrupted}
	var figs []suite.Figure
	for _, name := range WakeProbes {
		rep.Probes[name] = wakeProbe{Cold: merged[name][0].Stats(), Warm: merged[name][1].Stats()}
		for _, key := range []string{"cold/" + name + "/p50", "cold/" + name + "/p99", "warm/" + name + "/p50"} {
			figs = append(figs, suite.MedianFigure(key, "ns", suite.LowerIsBetter, perRepeat[key]))
		}
	}
	figs = append(figs, suite.MedianFigure("cold_line", "ns", suite.LowerIsBetter, perRepeat["cold_line"]))
	return rep, figs, nil
}

// writeWakeTable prints one row per probe: cold and warm percentiles and
// their ratio at p50.
func writeWakeTable(w io.Writer, rep *WakeReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "probe (after a %v raw futex sleep, %d samples)\tcold p50 ns\tcold p99 ns\twarm p50 ns\tcold / warm p50\t\n",
		time.Duration(rep.SleepNs), rep.Samples)
	for _, name := range WakeProbes {
		p := rep.Probes[name]
		label := name
		if name == WakeProbeLines {
			label = fmt.Sprintf("%s (%d dependent, one per 4 KiB page)", name, rep.Lines)
		}
		ratio := "-"
		if p.Warm.P50 > 0 {
			ratio = fmt.Sprintf("%.1fx", float64(p.Cold.P50)/float64(p.Warm.P50))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", label, p.Cold.P50, p.Cold.P99, p.Warm.P50, ratio)
	}
	fmt.Fprintf(tw, "one cold line: (cold lines p50 - cold clock p50) / %d\t%.0f ns\t\t\t\t\n", rep.Lines, rep.ColdLineNs)
	fmt.Fprintf(tw, "sleeps cut short by a signal and slept again\t%d\t\t\t\t\n", rep.InterruptedSleeps)
	return tw.Flush()
}
