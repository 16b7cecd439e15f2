package main

import (
	"fmt"
	"io"
	"slices"

	"gonum.org/v1/plot"

	"github.com/orbitkv/orbitkv/gocore/evict"
)

// writeCharts writes each chart into dir (--plot) and names each file on
// log. With dir "" (no --plot) it writes nothing. The suites build their
// charts from the report they print (copyCharts, ...), so a plot shows
// exactly the figures of the table and the JSON. The first failure is
// returned; files written before it stay.
func writeCharts(dir string, log io.Writer, charts ...lineChart) error {
	if dir == "" {
		return nil
	}
	for i := range charts {
		path, err := charts[i].write(dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "plot: %s\n", path)
	}
	return nil
}

// copyCharts is copy-throughput.png: Publish and Restore GB/s against
// block size beside the memcpy baseline.
func copyCharts(rep *copyReport) []lineChart {
	var sizes []uint64
	pub, res, mem := throughputSubject{name: "Publish"}, throughputSubject{name: "Restore"},
		throughputSubject{name: "memcpy (baseline)", reference: true}
	for _, s := range rep.Sizes {
		sizes = append(sizes, s.BlockBytes)
		pub.gbps, res.gbps, mem.gbps = append(pub.gbps, s.PublishGBps), append(res.gbps, s.RestoreGBps), append(mem.gbps, s.MemcpyGBps)
	}
	title := fmt.Sprintf("orbitkv-bench copy: %d blocks per batch over %d layers, median of %d batches", rep.Blocks, rep.Layers, rep.Iters)
	return []lineChart{throughputChart("copy-throughput.png", title, sizes, []throughputSubject{pub, res, mem})}
}

// ssdCharts is ssd-throughput-KIND.png for each destination memory kind
// measured: Store.Read and Store.Write GB/s against block size beside the
// two O_DIRECT baselines.
func ssdCharts(rep *ssdReport) []lineChart {
	var kinds []string
	for _, s := range rep.Sizes {
		if !slices.Contains(kinds, s.Memory) {
			kinds = append(kinds, s.Memory)
		}
	}
	var charts []lineChart
	for _, kind := range kinds {
		var sizes []uint64
		read, write := throughputSubject{name: "Store.Read"}, throughputSubject{name: "Store.Write (demotion)"}
		base := throughputSubject{name: "O_DIRECT sequential read (baseline)", reference: true}
		reused := throughputSubject{name: "O_DIRECT into one reused buffer (dd-style)", reference: true}
		for _, s := range rep.Sizes {
			if s.Memory != kind {
				continue
			}
			sizes = append(sizes, s.BlockBytes)
			read.gbps, write.gbps = append(read.gbps, s.ReadGBps), append(write.gbps, s.WriteGBps)
			base.gbps, reused.gbps = append(base.gbps, s.BaselineGBps), append(reused.gbps, s.ReusedBufferGBps)
		}
		title := fmt.Sprintf("orbitkv-bench ssd: into %s memory, %d I/O workers, median of %d passes", kind, rep.IOWorkers, rep.Iters)
		charts = append(charts, throughputChart("ssd-throughput-"+kind+".png", title, sizes, []throughputSubject{read, write, base, reused}))
	}
	return charts
}

// policyCharts is policy-hit-ratio.png: hit ratio against capacity (a
// share of the trace's unique blocks), one line per policy, LRU and the
// offline optimum, and the infinite-cache bound.
func policyCharts(rep *policyReport) []lineChart {
	fractions := slices.Clone(rep.fractions)
	slices.Sort(fractions)
	c := lineChart{file: "policy-hit-ratio.png",
		title:  fmt.Sprintf("orbitkv-bench policy: %d requests, %d unique blocks; default policy %s", rep.Requests, rep.UniqueBlocks, rep.DefaultPolicy),
		xLabel: "capacity (% of the trace's unique blocks)", yLabel: "hit ratio (hit blocks / blocks)",
		yFromZero: true, glyphs: true}
	var ticks plot.ConstantTicks
	xs := make([]float64, len(fractions))
	for i, f := range fractions {
		xs[i] = 100 * f
		ticks = append(ticks, plot.Tick{Value: xs[i], Label: percent(f)})
	}
	c.xTicks = ticks
	// The bound spans the x range as a flat line under the others (the
	// optimum reaches it once the working set fits); no policy passes it,
	// so the y axis ends just above it.
	if len(xs) > 0 {
		c.series = append(c.series, plotSeries{name: fmt.Sprintf("infinite-cache bound %.4f", rep.BoundHitRatio),
			xs: []float64{xs[0], xs[len(xs)-1]}, ys: []float64{rep.BoundHitRatio, rep.BoundHitRatio}, bound: true})
	}
	for _, p := range append(slices.Clone(rep.policies), optimumName) {
		s := plotSeries{name: p, xs: xs, reference: p == optimumName || p == evict.NameLRU}
		if p == optimumName {
			s.name = "optimum (offline)"
		}
		for _, f := range fractions {
			if r := rep.row(f, p); r != nil {
				s.ys = append(s.ys, r.HitRatio)
			}
		}
		c.series = append(c.series, s)
	}
	c.yMax = rep.BoundHitRatio * 1.05
	return []lineChart{c}
}
