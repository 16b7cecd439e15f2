package channel

import (
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// Report is the one JSON object `orbitkv-bench channel --json` prints.
// Maps are keyed by subject name; hists holds the histogram behind each
// Stats, keyed "CADENCE/SUBJECT" (cadence back_to_back or per_ms), for
// plots; IdleCPUPercent is null when the idle
// measurement did not run (orbitkv_ping not selected or --idle 0).
type Report struct {
	suite.Head
	BackToBack     map[string]latency.Stats `json:"back_to_back"`
	PerMs          map[string]latency.Stats `json:"per_ms"`
	IdleCPUPercent *float64                 `json:"idle_cpu_percent"`
	// PerMsVsFutex is the cold-wake ratio (bench/channel/README.md): null unless both
	// orbitkv_ping and futex ran at the per-ms cadence.
	PerMsVsFutex *wakeRatio `json:"per_ms_vs_futex"`

	Hists map[string]*latency.Hist `json:"-"`
}

// wakeRatio is orbitkv_ping's per-ms p50 and p99 over futex's, each the
// median over the interleaved repeats of that repeat's own ratio (both
// subjects measured in the same repeat, one after the other).
type wakeRatio struct {
	P50          float64   `json:"p50"`            // median of P50PerRepeat
	P99          float64   `json:"p99"`            // median of P99PerRepeat
	Repeats      int       `json:"repeats"`        // repeats paired
	P50PerRepeat []float64 `json:"p50_per_repeat"` // orbitkv_ping p50 / futex p50, in run order
	P99PerRepeat []float64 `json:"p99_per_repeat"` // the same at p99
}

// wakeRatioOf pairs the per-ms histograms of orbitkv_ping and futex repeat
// by repeat; nil when either has none (or a futex percentile is 0).
func wakeRatioOf(okv, futex []*latency.Hist) *wakeRatio {
	n := min(len(okv), len(futex))
	if n == 0 {
		return nil
	}
	w := &wakeRatio{Repeats: n}
	for i := range n {
		o, f := okv[i].Stats(), futex[i].Stats()
		if f.P50 == 0 || f.P99 == 0 {
			return nil
		}
		w.P50PerRepeat = append(w.P50PerRepeat, float64(o.P50)/float64(f.P50))
		w.P99PerRepeat = append(w.P99PerRepeat, float64(o.P99)/float64(f.P99))
	}
	w.P50, w.P99 = suite.MedianOf(w.P50PerRepeat), suite.MedianOf(w.P99PerRepeat)
	return w
}
