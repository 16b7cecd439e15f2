package channel

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
)

func TestTableMatchesGolden(t *testing.T) {
	idle := 0.33
	rep := &Report{
		BackToBack: map[string]latency.Stats{
			subjectOrbitKV: {P50: 1200, P99: 4800, P999: 9100, N: 100000},
			subjectShmSpin: {P50: 470, P99: 650, P999: 20190, N: 100000},
			subjectFutex:   {P50: 40410, P99: 68090, P999: 116760, N: 100000},
			subjectUDS:     {P50: 47480, P99: 65470, P999: 91030, N: 100000},
			subjectGRPC:    {P50: 166000, P99: 303990, P999: 874600, N: 100000},
		},
		PerMs: map[string]latency.Stats{
			subjectOrbitKV: {P50: 7500, P99: 13000, P999: 20000, N: 2000},
			subjectFutex:   {P50: 7000, P99: 12630, P999: 20180, N: 2000},
		},
		IdleCPUPercent: &idle,
		PerMsVsFutex: &wakeRatio{P50: 1.05, P99: 1.2, Repeats: 5,
			P50PerRepeat: []float64{1.0, 1.05, 1.1, 0.98, 1.2}, P99PerRepeat: []float64{1.2, 1.3, 0.9, 1.1, 1.25}},
	}
	var got bytes.Buffer
	if err := writeTable(&got, "orbitkv-bench channel: fixture", rep, allSubjects); err != nil {
		t.Fatal(err)
	}
	benchtest.CheckGolden(t, "channel_table.golden", got.Bytes())
}

func TestTableWithoutOrbitKVHasNoRatios(t *testing.T) {
	rep := &Report{BackToBack: map[string]latency.Stats{subjectUDS: {P50: 1000, N: 1}}, PerMs: map[string]latency.Stats{}}
	var got bytes.Buffer
	if err := writeTable(&got, "", rep, []string{subjectUDS}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(got.Bytes(), []byte("x ")) || bytes.Contains(got.Bytes(), []byte("targets")) {
		t.Errorf("table without orbitkv_ping shows ratios or targets:\n%s", got.String())
	}
}

func TestWakeRatioIsTheMedianOfEachRepeatsOwnRatio(t *testing.T) {
	hist := func(samples ...uint64) *latency.Hist {
		h := latency.NewHist()
		h.RecordAll(samples)
		return h
	}
	// Repeat by repeat, orbitkv_ping's samples are 1.5x, 1x and 3x futex's
	// (p50 and p99 alike): the median is the middle repeat's, 1.5x, not a
	// ratio of the merged histograms.
	okv := []*latency.Hist{hist(15000, 15000, 30000), hist(10000, 10000, 20000), hist(30000, 30000, 60000)}
	futex := []*latency.Hist{hist(10000, 10000, 20000), hist(10000, 10000, 20000), hist(10000, 10000, 20000)}
	w := wakeRatioOf(okv, futex)
	if w == nil || w.Repeats != 3 || math.Abs(w.P50-1.5) > 0.01 || math.Abs(w.P99-1.5) > 0.01 || len(w.P50PerRepeat) != 3 {
		t.Fatalf("wakeRatioOf = %+v, want 3 repeats with median ratio 1.5 at p50 and p99", w)
	}
	if wakeRatioOf(okv, nil) != nil {
		t.Errorf("without futex repeats the ratio is not nil")
	}
}

func TestColdWakeTargetNeedsFiveRepeats(t *testing.T) {
	for _, tt := range []struct {
		name    string
		repeats int
		ratio   float64
		ok      bool
	}{
		{"five repeats under 1.1x meet it", 5, 1.05, true},
		{"five repeats over 1.1x miss it", 5, 1.2, false},
		{"three repeats under 1.1x still miss it", 3, 1.0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rep := &Report{BackToBack: map[string]latency.Stats{}, PerMs: map[string]latency.Stats{subjectOrbitKV: {P50: 1, P99: 1, N: 1}, subjectFutex: {P50: 1, P99: 1, N: 1}},
				PerMsVsFutex: &wakeRatio{P50: tt.ratio, P99: tt.ratio, Repeats: tt.repeats}}
			var n int
			for _, tg := range targets(rep) {
				if strings.HasPrefix(tg.Name, "per-ms orbitkv_ping p") && strings.Contains(tg.Name, "futex") {
					n++
					if tg.Ok != tt.ok {
						t.Errorf("%s: %s ok=%v, want %v", tg.Name, tg.Measured, tg.Ok, tt.ok)
					}
				}
			}
			if n != 2 {
				t.Errorf("%d cold-wake targets, want 2 (p50 and p99)", n)
			}
		})
	}
}
