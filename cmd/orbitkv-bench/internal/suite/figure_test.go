package suite

import (
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
)

func TestFiguresRecordTheSpreadOfTheRepeats(t *testing.T) {
	tests := []struct {
		name           string
		fig            Figure
		value, lo, hi  float64
		repeatsWritten int
	}{
		{"a median figure of three repeats is the middle one", MedianFigure("gbps", "GB/s", HigherIsBetter, []float64{12, 10, 11}), 11, 10, 12, 3},
		{"a median of four is the mean of the middle two", MedianFigure("gbps", "GB/s", HigherIsBetter, []float64{4, 1, 2, 3}), 2.5, 1, 4, 4},
		{"a merged percentile inside the repeats keeps their range", NewFigure("p50", "ns", LowerIsBetter, 105, []float64{100, 110, 104}), 105, 100, 110, 3},
		{"a value outside the repeats widens the range", NewFigure("p50", "ns", LowerIsBetter, 120, []float64{100, 110}), 120, 100, 120, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.fig.Value != tt.value || tt.fig.Min != tt.lo || tt.fig.Max != tt.hi || len(tt.fig.Repeats) != tt.repeatsWritten {
				t.Errorf("figure = %+v, want value %v in %v..%v over %d repeats", tt.fig, tt.value, tt.lo, tt.hi, tt.repeatsWritten)
			}
		})
	}
}

func TestLatencyFiguresComeFromTheMergedHistogram(t *testing.T) {
	reps := []*latency.Hist{latency.Of(benchtest.Seq(1, 100)...), latency.Of(benchtest.Seq(101, 200)...), latency.Of(benchtest.Seq(201, 300)...)}
	merged := latency.NewHist()
	for _, h := range reps {
		merged.Merge(h)
	}
	figs := LatencyFigures("back_to_back/orbitkv_ping", merged, reps)
	if len(figs) != 2 || figs[0].Name != "back_to_back/orbitkv_ping/p50" || figs[1].Name != "back_to_back/orbitkv_ping/p99" {
		t.Fatalf("figures = %+v, want p50 and p99", figs)
	}
	if p50 := figs[0]; p50.Value != 150 || p50.Min != 50 || p50.Max != 250 {
		t.Errorf("p50 = %+v, want 150 (merged) in 50..250 (the repeats')", p50)
	}
}

func TestFiguresTableShowsValueAndSpread(t *testing.T) {
	var b strings.Builder
	if err := writeFigures(&b, 3, []Figure{NewFigure("query 32/hot/p50", "ns", LowerIsBetter, 3800, []float64{3700, 3800, 3900})}); err != nil {
		t.Fatal(err)
	}
	want := "spread over 3 repeats (value, then min..max of the repeats):\n  query 32/hot/p50  3.80 µs  3.70 µs .. 3.90 µs\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
