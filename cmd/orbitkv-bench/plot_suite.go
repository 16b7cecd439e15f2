package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/dustin/go-humanize"
	"gonum.org/v1/plot"

	"github.com/orbitkv/orbitkv/gocore/evict"
)

// plot writes each chart into --plot DIR, titled with the host, commit and
// verdict of the report whose head is h (plotHost; call it after finish),
// and names each file on log. Without
// --plot it writes nothing. The suites build their charts from the report
// they print (copyCharts, ...), so a plot shows exactly the figures of the
// table and the JSON. The first failure is returned; files written before
// it stay.
func (c *suiteCommon) plot(log io.Writer, h *reportHead, charts ...lineChart) error {
	if c.plotDir == "" {
		return nil
	}
	host := plotHost(h)
	for i := range charts {
		path, err := charts[i].write(c.plotDir, host)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "plot: %s\n", path)
	}
	return nil
}

// withSpread gives each subject the spread of its figures over the
// repeats, the figure of size i being prefix(i) + "/" + the subject's
// figure name (copyFields, ssdFields), and returns the title's note on
// the bars. With fewer than 2 repeats, or a figure missing, a subject has
// no spread and the note is "".
func withSpread(head *reportHead, subjects []throughputSubject, figureNames []string, sizes int, prefix func(i int) string) string {
	if head.Meta.Repeats < 2 {
		return ""
	}
	byName := map[string]figure{}
	for _, f := range head.Figures {
		byName[f.Name] = f
	}
	note := ""
	for j := range subjects {
		var lo, hi []float64
		for i := range sizes {
			f, ok := byName[prefix(i)+"/"+figureNames[j]]
			if !ok {
				lo, hi = nil, nil
				break
			}
			lo, hi = append(lo, f.Min), append(hi, f.Max)
		}
		if lo != nil {
			subjects[j].lo, subjects[j].hi = lo, hi
			note = fmt.Sprintf("; bars: min to max of %d repeats", head.Meta.Repeats)
		}
	}
	return note
}

// copyCharts is copy-throughput.png: Publish and Restore GB/s against
// block size beside the memcpy baseline, each point the median of the
// repeats with a bar over their range.
func copyCharts(rep *copyReport) []lineChart {
	var sizes []uint64
	pub, res, mem := throughputSubject{name: "Publish"}, throughputSubject{name: "Restore"},
		throughputSubject{name: "memcpy (baseline)", reference: true}
	for _, s := range rep.Sizes {
		sizes = append(sizes, s.BlockBytes)
		pub.gbps, res.gbps, mem.gbps = append(pub.gbps, s.PublishGBps), append(res.gbps, s.RestoreGBps), append(mem.gbps, s.MemcpyGBps)
	}
	subjects := []throughputSubject{pub, res, mem}
	note := withSpread(&rep.reportHead, subjects, []string{"publish_gbps", "restore_gbps", "memcpy_gbps"}, len(sizes),
		func(i int) string { return humanize.IBytes(sizes[i]) })
	title := fmt.Sprintf("orbitkv-bench copy: %d blocks per batch over %d layers, median of %d batches%s", rep.Blocks, rep.Layers, rep.Iters, note)
	return []lineChart{throughputChart("copy-throughput.png", title, sizes, subjects)}
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
		subjects := []throughputSubject{read, write, base, reused}
		note := withSpread(&rep.reportHead, subjects, []string{"read_gbps", "write_gbps", "baseline_gbps", "reused_buffer_gbps"}, len(sizes),
			func(i int) string { return humanize.IBytes(sizes[i]) + "/" + kind })
		title := fmt.Sprintf("orbitkv-bench ssd: into %s memory, %d I/O workers, median of %d passes%s", kind, rep.IOWorkers, rep.Iters, note)
		charts = append(charts, throughputChart("ssd-throughput-"+kind+".png", title, sizes, subjects))
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

// channelCharts is channel-cdf-back-to-back.png and, when per-ms round
// trips were timed, channel-cdf-per-ms.png: the CDF of round-trip latency
// of each subject, in --subjects order, from the histogram behind its
// Stats.
func channelCharts(rep *Report, cfg *channelConfig) []lineChart {
	cadences := []struct{ key, file, what string }{{"back_to_back", "channel-cdf-back-to-back.png", fmt.Sprintf("back to back, %s round trips per subject", timesRepeats(cfg.n, cfg.repeats))}}
	if cfg.perMsN > 0 {
		cadences = append(cadences, struct{ key, file, what string }{"per_ms", "channel-cdf-per-ms.png", fmt.Sprintf("one round trip per ms, %s per subject", timesRepeats(cfg.perMsN, cfg.repeats))})
	}
	var charts []lineChart
	for _, cd := range cadences {
		title := "orbitkv-bench channel: " + cd.what
		if cfg.needsManager() && cfg.socket == "" {
			title += ", Manager --poll-mode " + cfg.pollMode
		}
		var subjects []cdfSubject
		for _, s := range cfg.subjects {
			subjects = append(subjects, cdfSubject{name: s, points: histCDF(rep.hists, cd.key+"/"+s)})
		}
		charts = append(charts, cdfChart(cd.file, title, "round trip", subjects))
	}
	return charts
}

// queryCharts is query-cdf-hot.png and query-cdf-cold.png: the CDF of
// round-trip latency of QueryBundle at each --hashes count, of Ping and of
// the Poll of a pending ticket, back to back (hot) and after --cold-gap
// (cold).
func queryCharts(rep *queryReport, cfg *queryConfig) []lineChart {
	var charts []lineChart
	for _, ph := range []struct{ key, what string }{{"hot", "hot (back to back)"}, {"cold", fmt.Sprintf("cold (%v before each)", cfg.coldGap)}} {
		var subjects []cdfSubject
		for _, r := range rep.Rows {
			name := fmt.Sprintf("QueryBundle of %d hashes", r.Hashes)
			if r.Hashes == 1 {
				name = "QueryBundle of 1 hash"
			}
			subjects = append(subjects, cdfSubject{name: name, points: histCDF(rep.hists, fmt.Sprintf("query %d/%s", r.Hashes, ph.key))})
		}
		subjects = append(subjects,
			cdfSubject{name: "Ping", points: histCDF(rep.hists, "ping/"+ph.key)},
			cdfSubject{name: "Poll of a pending ticket", points: histCDF(rep.hists, "poll/"+ph.key)})
		title := fmt.Sprintf("orbitkv-bench query: %s, %d resident blocks", ph.what, rep.ResidentBlocks)
		if cfg.repeats > 1 {
			title += fmt.Sprintf(", the round trips of %d repeats", cfg.repeats)
		}
		charts = append(charts, cdfChart("query-cdf-"+ph.key+".png", title, "round trip", subjects))
	}
	return charts
}

// timesRepeats is n, or "R × n" for R > 1 repeats of n each: the samples
// behind a histogram merged over the repeats.
func timesRepeats(n, repeats int) string {
	if repeats > 1 {
		return fmt.Sprintf("%d × %d", repeats, n)
	}
	return fmt.Sprint(n)
}

// histCDF is the CDF of hists[key], or nil (a series the chart refuses,
// naming it) when there is no such histogram.
func histCDF(hists map[string]*latencyHist, key string) []cdfPoint {
	if h := hists[key]; h != nil {
		return h.cdf()
	}
	return nil
}
