package ssd

import (
	"slices"
	"testing"
)

func TestSSDChartsAreOnePerMemoryKind(t *testing.T) {
	rep := &ssdReport{IOWorkers: 4, Iters: 3, Sizes: []ssdSize{
		{BlockBytes: 256 << 10, Memory: "4k", ReadGBps: 1, WriteGBps: 2, BaselineGBps: 3, ReusedBufferGBps: 4},
		{BlockBytes: 256 << 10, Memory: "thp", ReadGBps: 5, WriteGBps: 6, BaselineGBps: 7, ReusedBufferGBps: 8},
		{BlockBytes: 2 << 20, Memory: "4k", ReadGBps: 9, WriteGBps: 10, BaselineGBps: 11, ReusedBufferGBps: 12},
		{BlockBytes: 2 << 20, Memory: "thp", ReadGBps: 13, WriteGBps: 14, BaselineGBps: 15, ReusedBufferGBps: 16},
	}}
	want := map[string][][]float64{
		"ssd-throughput-4k.png":  {{1, 9}, {2, 10}, {3, 11}, {4, 12}},
		"ssd-throughput-thp.png": {{5, 13}, {6, 14}, {7, 15}, {8, 16}},
	}
	charts := ssdCharts(rep)
	if len(charts) != len(want) {
		t.Fatalf("%d charts, want %d", len(charts), len(want))
	}
	for _, c := range charts {
		w, ok := want[c.File]
		if !ok || len(c.Series) != len(w) {
			t.Fatalf("chart %s with %d series is not expected", c.File, len(c.Series))
		}
		for i, s := range c.Series {
			if !slices.Equal(s.Ys, w[i]) || !slices.Equal(s.Xs, []float64{256 << 10, 2 << 20}) {
				t.Errorf("%s: series %q = %v at %v, want %v", c.File, s.Name, s.Ys, s.Xs, w[i])
			}
		}
	}
}
