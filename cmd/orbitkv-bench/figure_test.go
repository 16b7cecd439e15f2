package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestFiguresRecordTheSpreadOfTheRepeats(t *testing.T) {
	tests := []struct {
		name           string
		fig            figure
		value, lo, hi  float64
		repeatsWritten int
	}{
		{"a median figure of three repeats is the middle one", medianFigure("gbps", "GB/s", higherIsBetter, []float64{12, 10, 11}), 11, 10, 12, 3},
		{"a median of four is the mean of the middle two", medianFigure("gbps", "GB/s", higherIsBetter, []float64{4, 1, 2, 3}), 2.5, 1, 4, 4},
		{"a merged percentile inside the repeats keeps their range", newFigure("p50", "ns", lowerIsBetter, 105, []float64{100, 110, 104}), 105, 100, 110, 3},
		{"a value outside the repeats widens the range", newFigure("p50", "ns", lowerIsBetter, 120, []float64{100, 110}), 120, 100, 120, 2},
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
	reps := []*latencyHist{histOf(seq(1, 100)...), histOf(seq(101, 200)...), histOf(seq(201, 300)...)}
	merged := newLatencyHist()
	for _, h := range reps {
		merged.merge(h)
	}
	figs := latencyFigures("back_to_back/orbitkv_ping", merged, reps)
	if len(figs) != 2 || figs[0].Name != "back_to_back/orbitkv_ping/p50" || figs[1].Name != "back_to_back/orbitkv_ping/p99" {
		t.Fatalf("figures = %+v, want p50 and p99", figs)
	}
	if p50 := figs[0]; p50.Value != 150 || p50.Min != 50 || p50.Max != 250 {
		t.Errorf("p50 = %+v, want 150 (merged) in 50..250 (the repeats')", p50)
	}
}

func TestMedianOverSetsEveryFieldAndNamesTheFigures(t *testing.T) {
	reps := []copySize{{BlockBytes: 1 << 20, PublishGBps: 10, MemcpyGBps: 12}, {BlockBytes: 1 << 20, PublishGBps: 14, MemcpyGBps: 11}, {BlockBytes: 1 << 20, PublishGBps: 12, MemcpyGBps: 13}}
	got, figs := medianOver("1.0 MiB", reps, copyFields)
	if got.PublishGBps != 12 || got.MemcpyGBps != 12 || got.BlockBytes != 1<<20 {
		t.Errorf("combined = %+v, want the medians and the first repeat's other fields", got)
	}
	if len(figs) != len(copyFields) || figs[1].Name != "1.0 MiB/publish_gbps" || figs[1].Min != 10 || figs[1].Max != 14 {
		t.Errorf("figures = %+v", figs)
	}
}

func TestFiguresTableShowsValueAndSpread(t *testing.T) {
	var b strings.Builder
	if err := writeFigures(&b, 3, []figure{newFigure("query 32/hot/p50", "ns", lowerIsBetter, 3800, []float64{3700, 3800, 3900})}); err != nil {
		t.Fatal(err)
	}
	want := "spread over 3 repeats (value, then min..max of the repeats):\n  query 32/hot/p50  3.80 µs  3.70 µs .. 3.90 µs\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// The sections emit adds after a suite's table (the spread and the
// validity) are stable text: a golden file.
func TestReportSectionsMatchGolden(t *testing.T) {
	rep := fixtureReport()
	rep.Meta = reportMeta{Schema: reportSchema, Suite: "replay", Repeats: 3}
	rep.Figures = []figure{
		newFigure("hit_ratio", "fraction", higherIsBetter, 0.3581, []float64{0.3579, 0.3581, 0.3584}),
		medianFigure("restore_gbps", "GB/s", higherIsBetter, []float64{6.1, 6.5, 7.2}),
		newFigure("rtt/query/p50", "ns", lowerIsBetter, 4200, []float64{4100, 4200, 4900}),
	}
	rep.Validity = judge(validityInput{Repeats: 3, StatStart: procStat{Total: 1000}, StatEnd: procStat{Total: 2000, Steal: 90},
		Foreign: foreignCPU{Ticks: 300, Span: 1000, CPUs: 2}, HotUnchecked: "the replay has no hot phase"})
	var got bytes.Buffer
	if err := (&suiteCommon{}).emit(&got, io.Discard, rep, func(w io.Writer) error { return writeReplayTable(w, rep) }); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "report_sections.golden", got.Bytes())
}
