package replay

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// rttStats are percentiles of one operation's round trips, ns, as
// latencyHist.quantile defines them.
type rttStats struct {
	P50  uint64 `json:"p50"`
	P99  uint64 `json:"p99"`
	P999 uint64 `json:"p999"`
	N    int    `json:"n"`
}

// replayReport is the one JSON object `orbitkv-bench replay --json` prints
// (bench/README.md describes every field). Throughputs are GB/s of 10^9
// bytes; RAMCapacityBytes is 0 when unknown (an external Manager that does
// not report it).
type replayReport struct {
	results []*workerResult // each worker's, for orbitkv-bench restart

	suite.Head
	Trace               string              `json:"trace"`
	Requests            uint64              `json:"requests"`
	Blocks              uint64              `json:"blocks"`
	HitBlocks           uint64              `json:"hit_blocks"`
	HitRatio            float64             `json:"hit_ratio"`
	BoundBlocks         uint64              `json:"bound_blocks"`
	BoundHitBlocks      uint64              `json:"bound_hit_blocks"`
	BoundHitRatio       float64             `json:"bound_hit_ratio"`
	WorkingSetBytes     uint64              `json:"working_set_bytes"` // distinct blocks × block bytes
	Mismatches          uint64              `json:"mismatches"`
	Unadmitted          uint64              `json:"unadmitted"`        // Publish calls refused for capacity
	UnadmittedBlocks    uint64              `json:"unadmitted_blocks"` // blocks those calls did not store
	LoadingWaits        uint64              `json:"loading_waits"`     // queries answered Loading (SSD prefetch) and asked again
	StoredBlocks        uint64              `json:"stored_blocks"`
	PresentBlocks       uint64              `json:"present_blocks"` // published, but another client had stored them
	RestoredBytes       uint64              `json:"restored_bytes"`
	PublishedBytes      uint64              `json:"published_bytes"`
	RTT                 map[string]rttStats `json:"rtt_ns"`
	RestoreGBps         float64             `json:"restore_gbps"`
	PublishGBps         float64             `json:"publish_gbps"`
	WallS               float64             `json:"wall_s"`
	Clients             int                 `json:"clients"`
	BlockBytes          uint64              `json:"block_bytes"`
	Layers              uint32              `json:"layers"`
	RAMCapacityBytes    uint64              `json:"ram_capacity_bytes"`
	ManagerBlocks       uint64              `json:"manager_blocks"`            // resident after the run
	ManagerRAMUsedBytes uint64              `json:"manager_ram_used_bytes"`    // after the run
	IdleInvariant       string              `json:"idle_invariant"`            // "ok", "not checked: …" or "violated: …"
	EventsReceived      uint64              `json:"events_received,omitempty"` // --kv-events on: events the bench's subscriber decoded

	hists         map[string]*latency.Hist // merged over the workers, keyed by op name, for plots
	remoteHist    *latency.Hist            // queries that waited for Loading, first ask to lease (nil: none)
	header        string                   // conditions of the run, first line of the table
	idleViolation string                   // non-empty: the run fails
	restoreNS     uint64                   // time inside restore ops, summed over the workers (and replays)
	publishNS     uint64                   // time inside Publish calls, likewise
}

// header describes the conditions of a run in one line.
func (r *replayRun) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "orbitkv-bench replay: %d CPUs", runtime.NumCPU())
	if m := suite.CpuModel(); m != "" {
		fmt.Fprintf(&b, " (%s)", m)
	}
	if r.manager.Started() {
		fmt.Fprintf(&b, ", Manager pid %d started by the bench", r.manager.Pid)
	} else {
		fmt.Fprintf(&b, ", Manager at %s", r.manager.Socket)
	}
	return b.String()
}

// writeReplayTable prints the human-readable report: the counts, the
// throughputs, a row per operation and the targets of bench/README.md.
// Lines carry no trailing blanks.
func writeReplayTable(w io.Writer, rep *replayReport) error {
	var b strings.Builder
	if err := replayTable(&b, rep); err != nil {
		return err
	}
	lines := strings.SplitAfter(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(strings.TrimSuffix(l, "\n"), " ")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	return err
}

func replayTable(w io.Writer, rep *replayReport) error {
	if rep.header != "" {
		fmt.Fprintln(w, rep.header)
	}
	capacity := "unknown"
	if rep.RAMCapacityBytes != 0 {
		capacity = humanize.IBytes(rep.RAMCapacityBytes)
	}
	fmt.Fprintf(w, "trace %s: %d clients, %s blocks (%d layers × %s), RAM capacity %s, working set %s\n\n",
		rep.Trace, rep.Clients, humanize.IBytes(rep.BlockBytes), rep.Layers,
		humanize.IBytes(rep.BlockBytes/uint64(max(rep.Layers, 1))), capacity, humanize.IBytes(rep.WorkingSetBytes))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "requests\t%d\t\n", rep.Requests)
	fmt.Fprintf(tw, "blocks\t%d\t\n", rep.Blocks)
	fmt.Fprintf(tw, "hit blocks\t%d\t\n", rep.HitBlocks)
	fmt.Fprintf(tw, "hit ratio\t%.4f\t\n", rep.HitRatio)
	fmt.Fprintf(tw, "bound hit ratio\t%.4f\tinfinite cache: %d of %d blocks\n", rep.BoundHitRatio, rep.BoundHitBlocks, rep.BoundBlocks)
	fmt.Fprintf(tw, "mismatched bytes\t%d\tmust be 0\n", rep.Mismatches)
	fmt.Fprintf(tw, "unadmitted publishes\t%d\t%d blocks not stored for capacity\n", rep.Unadmitted, rep.UnadmittedBlocks)
	if rep.LoadingWaits > 0 {
		fmt.Fprintf(tw, "loading waits\t%d\tqueries answered Loading while the SSD tier prefetched\n", rep.LoadingWaits)
	}
	fmt.Fprintf(tw, "restore\t%.2f GB/s\t%s restored\n", rep.RestoreGBps, humanize.IBytes(rep.RestoredBytes))
	fmt.Fprintf(tw, "publish\t%.2f GB/s\t%s stored, %d blocks already present\n", rep.PublishGBps, humanize.IBytes(rep.PublishedBytes), rep.PresentBlocks)
	fmt.Fprintf(tw, "wall time\t%.2f s\t\n", rep.WallS)
	fmt.Fprintf(tw, "Manager after the run\t%d blocks\t%s RAM used; idle invariant %s\n",
		rep.ManagerBlocks, humanize.IBytes(rep.ManagerRAMUsedBytes), rep.IdleInvariant)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tp50 µs\tp99 µs\tp99.9 µs\tn\t")
	for _, op := range opNames {
		st := rep.RTT[op]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t\n", op, suite.Us(st.P50), suite.Us(st.P99), suite.Us(st.P999), st.N)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)

	if err := suite.WriteTargets(w, suite.TargetsSource, "informational, except mismatched bytes: a nonzero count fails the run (exit status 1)", replayTargets(rep)); err != nil {
		return err
	}
	if !boundReachable(rep) {
		fmt.Fprintf(w, "  hit ratio vs bound: %+.4f, no target (the RAM capacity is below the working set, so the eviction policy evicts)\n",
			rep.HitRatio-rep.BoundHitRatio)
	}
	return nil
}

// boundReachable reports whether the RAM tier holds the whole working set.
func boundReachable(rep *replayReport) bool {
	return rep.RAMCapacityBytes != 0 && rep.RAMCapacityBytes >= rep.WorkingSetBytes
}

// replayTargets checks the replay's targets. The bound is reachable only
// when the RAM tier holds the whole working set: then one client matches
// it exactly and several clients, whose requests interleave differently
// from the trace order, come within 0.01.
func replayTargets(rep *replayReport) []suite.Target {
	out := []suite.Target{{Name: "0 mismatched bytes", Measured: fmt.Sprint(rep.Mismatches), Ok: rep.Mismatches == 0}}
	diff := rep.HitRatio - rep.BoundHitRatio
	// Over several replays the counts are summed: the bound's hits scale
	// with the replays (blocks = replays × bound blocks).
	boundHits := rep.BoundHitBlocks
	if rep.BoundBlocks > 0 && rep.Blocks > rep.BoundBlocks {
		boundHits = rep.BoundHitBlocks * (rep.Blocks / rep.BoundBlocks)
	}
	measured := fmt.Sprintf("%+.4f (%+d blocks)", diff, int64(rep.HitBlocks)-int64(boundHits))
	switch {
	case !boundReachable(rep):
	case rep.Clients == 1:
		out = append(out, suite.Target{Name: "hit ratio = bound (1 client, capacity ≥ working set)", Measured: measured, Ok: rep.HitBlocks == boundHits})
	default:
		out = append(out, suite.Target{Name: "hit ratio within 0.01 of the bound (capacity ≥ working set)", Measured: measured, Ok: math.Abs(diff) <= 0.01})
	}
	return out
}

// combineReplays is the report of several replays of one plan: the counts
// (requests, blocks, hits, mismatches, bytes, wall time …) summed over
// them, so the hit ratio is the pooled one; the round trips from the
// histograms merged over them; GB/s from the summed bytes and times. The
// bound_* and working-set keys describe the trace (one replay); the
// Manager's figures are the last replay's. The idle invariant holds only
// when it held after every replay.
func combineReplays(reps []*replayReport) *replayReport {
	if len(reps) == 1 {
		return reps[0]
	}
	out := *reps[len(reps)-1]
	out.Requests, out.Blocks, out.HitBlocks, out.Mismatches = 0, 0, 0, 0
	out.Unadmitted, out.UnadmittedBlocks, out.LoadingWaits, out.StoredBlocks, out.PresentBlocks = 0, 0, 0, 0, 0
	out.RestoredBytes, out.PublishedBytes, out.restoreNS, out.publishNS, out.WallS = 0, 0, 0, 0, 0
	out.IdleInvariant, out.idleViolation = "ok", ""
	out.RTT, out.hists, out.remoteHist = map[string]rttStats{}, map[string]*latency.Hist{}, nil
	for _, r := range reps {
		out.Requests += r.Requests
		out.Blocks += r.Blocks
		out.HitBlocks += r.HitBlocks
		out.Mismatches += r.Mismatches
		out.Unadmitted += r.Unadmitted
		out.UnadmittedBlocks += r.UnadmittedBlocks
		out.LoadingWaits += r.LoadingWaits
		out.StoredBlocks += r.StoredBlocks
		out.PresentBlocks += r.PresentBlocks
		out.RestoredBytes += r.RestoredBytes
		out.PublishedBytes += r.PublishedBytes
		out.restoreNS += r.restoreNS
		out.publishNS += r.publishNS
		out.WallS += r.WallS
		if r.IdleInvariant != "ok" && out.IdleInvariant == "ok" {
			out.IdleInvariant = r.IdleInvariant
		}
		if r.idleViolation != "" && out.idleViolation == "" {
			out.idleViolation = r.idleViolation
		}
		if r.remoteHist != nil {
			if out.remoteHist == nil {
				out.remoteHist = latency.NewHist()
			}
			out.remoteHist.Merge(r.remoteHist)
		}
		for op, h := range r.hists {
			if out.hists[op] == nil {
				out.hists[op] = latency.NewHist()
			}
			out.hists[op].Merge(h)
		}
	}
	if out.Blocks > 0 {
		out.HitRatio = float64(out.HitBlocks) / float64(out.Blocks)
	}
	out.RestoreGBps, out.PublishGBps = suite.GBps(out.RestoredBytes, out.restoreNS), suite.GBps(out.PublishedBytes, out.publishNS)
	for op, h := range out.hists {
		st := h.Stats()
		out.RTT[op] = rttStats{P50: st.P50, P99: st.P99, P999: st.P999, N: st.N}
	}
	return &out
}

// replayFigures are the replay's headline figures over the replays reps
// combined into rep: hit ratio, restore and publish GB/s, wall time per
// replay, and p50 and p99 of every operation.
func replayFigures(rep *replayReport, reps []*replayReport) []suite.Figure {
	each := func(f func(r *replayReport) float64) []float64 {
		var out []float64
		for _, r := range reps {
			out = append(out, f(r))
		}
		return out
	}
	out := []suite.Figure{
		suite.NewFigure("hit_ratio", "fraction", suite.HigherIsBetter, rep.HitRatio, each(func(r *replayReport) float64 { return r.HitRatio })),
		suite.NewFigure("restore_gbps", "GB/s", suite.HigherIsBetter, rep.RestoreGBps, each(func(r *replayReport) float64 { return r.RestoreGBps })),
		suite.NewFigure("publish_gbps", "GB/s", suite.HigherIsBetter, rep.PublishGBps, each(func(r *replayReport) float64 { return r.PublishGBps })),
		suite.MedianFigure("wall_s", "s", suite.LowerIsBetter, each(func(r *replayReport) float64 { return r.WallS })),
	}
	for _, op := range opNames {
		var hs []*latency.Hist
		for _, r := range reps {
			hs = append(hs, r.hists[op])
		}
		out = append(out, suite.LatencyFigures("rtt/"+op, rep.hists[op], hs)...)
	}
	return out
}
