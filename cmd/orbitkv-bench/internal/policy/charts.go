package policy

import (
	"fmt"
	"slices"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
	"github.com/orbitkv/orbitkv/gocore/evict"
	"gonum.org/v1/plot"
)

// policyCharts is policy-hit-ratio.png: hit ratio against capacity (a
// share of the trace's unique blocks), one line per policy, LRU and the
// offline optimum, and the infinite-cache bound.
func policyCharts(rep *PolicyReport) []chart.Line {
	fractions := slices.Clone(rep.fractions)
	slices.Sort(fractions)
	c := chart.Line{File: "policy-hit-ratio.png",
		Title:  fmt.Sprintf("orbitkv-bench policy: %d requests, %d unique blocks; default policy %s", rep.Requests, rep.UniqueBlocks, rep.DefaultPolicy),
		XLabel: "capacity (% of the trace's unique blocks)", YLabel: "hit ratio (hit blocks / blocks)",
		YFromZero: true, Glyphs: true}
	var ticks plot.ConstantTicks
	xs := make([]float64, len(fractions))
	for i, f := range fractions {
		xs[i] = 100 * f
		ticks = append(ticks, plot.Tick{Value: xs[i], Label: percent(f)})
	}
	c.XTicks = ticks
	// The bound spans the x range as a flat line under the others (the
	// optimum reaches it once the working set fits); no policy passes it,
	// so the y axis ends just above it.
	if len(xs) > 0 {
		c.Series = append(c.Series, chart.Series{Name: fmt.Sprintf("infinite-cache bound %.4f", rep.BoundHitRatio),
			Xs: []float64{xs[0], xs[len(xs)-1]}, Ys: []float64{rep.BoundHitRatio, rep.BoundHitRatio}, Bound: true})
	}
	for _, p := range append(slices.Clone(rep.policies), optimumName) {
		s := chart.Series{Name: p, Xs: xs, Reference: p == optimumName || p == evict.NameLRU}
		if p == optimumName {
			s.Name = "optimum (offline)"
		}
		for _, f := range fractions {
			if r := rep.row(f, p); r != nil {
				s.Ys = append(s.Ys, r.HitRatio)
			}
		}
		c.Series = append(c.Series, s)
	}
	c.YMax = rep.BoundHitRatio * 1.05
	return []chart.Line{c}
}
