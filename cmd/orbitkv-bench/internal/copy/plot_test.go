package copy

import (
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func TestCopyChartBarsSpanTheRepeatsOfEachFigure(t *testing.T) {
	rep := &copyReport{Blocks: 8, Layers: 4, Iters: 3, Sizes: []copySize{{BlockBytes: 256 << 10, PublishGBps: 10, RestoreGBps: 11, MemcpyGBps: 12}, {BlockBytes: 1 << 20, PublishGBps: 20, RestoreGBps: 21, MemcpyGBps: 22}}}
	for _, size := range []string{"256 KiB", "1.0 MiB"} {
		for _, f := range []string{"publish_gbps", "restore_gbps", "memcpy_gbps"} {
			base := map[string]float64{"256 KiB": 10, "1.0 MiB": 20}[size] + map[string]float64{"publish_gbps": 0, "restore_gbps": 1, "memcpy_gbps": 2}[f]
			rep.Figures = append(rep.Figures, suite.NewFigure(size+"/"+f, "GB/s", suite.HigherIsBetter, base, []float64{base - 1, base, base + 0.5}))
		}
	}
	tests := []struct {
		name    string
		repeats int
		lo, hi  map[string][]float64 // by series name; nil = no bars
	}{
		{"three repeats give each point the range of its figure", 3,
			map[string][]float64{"Publish": {9, 19}, "Restore": {10, 20}, "memcpy (baseline)": {11, 21}},
			map[string][]float64{"Publish": {10.5, 20.5}, "Restore": {11.5, 21.5}, "memcpy (baseline)": {12.5, 22.5}}},
		{"one repeat draws no bars", 1, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep.Meta.Repeats = tt.repeats
			c := copyCharts(rep)[0]
			if err := c.Check(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(c.Title, "bars: min to max of 3 repeats"); got != (tt.lo != nil) {
				t.Errorf("title %q: names the bars = %v, want %v", c.Title, got, tt.lo != nil)
			}
			for _, s := range c.Series {
				if !slices.Equal(s.Lo, tt.lo[s.Name]) || !slices.Equal(s.Hi, tt.hi[s.Name]) {
					t.Errorf("%s: spread [%v, %v], want [%v, %v]", s.Name, s.Lo, s.Hi, tt.lo[s.Name], tt.hi[s.Name])
				}
			}
		})
	}
}
