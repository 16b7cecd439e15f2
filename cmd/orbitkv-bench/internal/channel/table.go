package channel

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// header describes the conditions of a run in one line.
func (r *channelRun) header() string {
	var b strings.Builder
	fmt.Fprintf(&b, "orbitkv-bench channel: %d CPUs", runtime.NumCPU())
	if m := suite.CpuModel(); m != "" {
		fmt.Fprintf(&b, " (%s)", m)
	}
	switch {
	case r.manager == nil:
	case r.manager.Started():
		fmt.Fprintf(&b, ", Manager pid %d started by the bench, --poll-mode %s", r.manager.Pid, r.cfg.PollMode)
	default:
		fmt.Fprintf(&b, ", Manager pid %d at %s", r.manager.Pid, r.manager.Socket)
		if r.pollMode != "" {
			fmt.Fprintf(&b, ", poll mode %s", r.pollMode)
		}
	}
	fmt.Fprintf(&b, ", n=%d back-to-back, %d per ms", r.cfg.N, r.cfg.PerMsN)
	return b.String()
}

// writeTable prints the human-readable report: one row per subject and
// cadence with the subject's p50 and p99 over orbitkv_ping's at the same
// cadence, then the idle CPU and the targets of bench/README.md (informational).
func writeTable(w io.Writer, header string, rep *Report, subjects []string) error {
	if header != "" {
		fmt.Fprintln(w, header)
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "subject\tcadence\tp50 µs\tp99 µs\tp99.9 µs\tn\tp50 / orbitkv\tp99 / orbitkv\t")
	for _, cad := range []struct {
		name  string
		stats map[string]latency.Stats
	}{{"back_to_back", rep.BackToBack}, {"per_ms", rep.PerMs}} {
		ref, hasRef := cad.stats[subjectOrbitKV]
		for _, s := range subjects {
			st, ok := cad.stats[s]
			if !ok {
				continue
			}
			r50, r99 := "-", "-"
			if hasRef {
				r50, r99 = suite.Ratio(st.P50, ref.P50), suite.Ratio(st.P99, ref.P99)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", s, cad.name, suite.Us(st.P50), suite.Us(st.P99), suite.Us(st.P999), st.N, r50, r99)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if rep.IdleCPUPercent != nil {
		fmt.Fprintf(w, "idle Manager CPU with %d sessions: %.2f%% of one core\n\n", idleSessions, *rep.IdleCPUPercent)
	}
	lines := targets(rep)
	if len(lines) == 0 {
		return nil
	}
	return suite.WriteTargets(w, suite.TargetsSource, suite.TargetsInformational, lines)
}

// The cold-wake target: orbitkv_ping at one request per ms at
// most coldWakeTarget times the raw futex ping-pong at p50 and at p99, as
// the median of at least coldWakeRepeats interleaved repeats.
const (
	coldWakeTarget  = 1.1
	coldWakeRepeats = 5
)

// targets checks the targets of bench/README.md that the report has the numbers for.
// Ratios compare p50 unless the name says otherwise.
func targets(rep *Report) []suite.Target {
	var out []suite.Target
	b2b, perMs := rep.BackToBack, rep.PerMs
	okv, hasOKV := b2b[subjectOrbitKV]
	if hasOKV {
		out = append(out,
			suite.Target{Name: "back-to-back orbitkv_ping p50 ≤ 2 µs", Measured: suite.Us(okv.P50) + " µs", Ok: okv.P50 <= 2000},
			suite.Target{Name: "back-to-back orbitkv_ping p99 ≤ 10 µs", Measured: suite.Us(okv.P99) + " µs", Ok: okv.P99 <= 10000})
		if s, ok := b2b[subjectShmSpin]; ok && s.P50 > 0 {
			out = append(out, suite.Target{Name: "orbitkv_ping p50 within 10x of shm_spin", Measured: suite.Ratio(okv.P50, s.P50), Ok: okv.P50 <= 10*s.P50})
		}
		if s, ok := b2b[subjectUDS]; ok && okv.P50 > 0 {
			out = append(out, suite.Target{Name: "uds p50 ≥ 30x orbitkv_ping", Measured: suite.Ratio(s.P50, okv.P50), Ok: s.P50 >= 30*okv.P50})
		}
		if s, ok := b2b[subjectIox2Raw]; ok && s.P50 > 0 {
			out = append(out, suite.Target{Name: "back-to-back orbitkv_ping p50 ≤ 0.5x iceoryx2_raw", Measured: suite.Ratio(okv.P50, s.P50), Ok: okv.P50*2 <= s.P50})
		}
		if s, ok := b2b[subjectGRPC]; ok && okv.P50 > 0 {
			out = append(out, suite.Target{Name: "grpc p50 ≥ 100x orbitkv_ping", Measured: suite.Ratio(s.P50, okv.P50), Ok: s.P50 >= 100*okv.P50})
		}
	}
	if o, ok := perMs[subjectOrbitKV]; ok {
		if s, ok := perMs[subjectIox2Raw]; ok && s.P50 > 0 {
			out = append(out, suite.Target{Name: "per-ms orbitkv_ping p50 ≤ 0.5x iceoryx2_raw", Measured: suite.Ratio(o.P50, s.P50), Ok: o.P50*2 <= s.P50})
		}
		if w := rep.PerMsVsFutex; w != nil && o.N > 0 {
			// The median of at least coldWakeRepeats interleaved
			// repeats' own ratios.
			enough := w.Repeats >= coldWakeRepeats
			note := fmt.Sprintf("median of %d interleaved repeats", w.Repeats)
			if !enough {
				note += fmt.Sprintf(", fewer than %d", coldWakeRepeats)
			}
			out = append(out,
				suite.Target{Name: fmt.Sprintf("per-ms orbitkv_ping p50 ≤ %.1fx futex (median of ≥ %d interleaved repeats)", coldWakeTarget, coldWakeRepeats),
					Measured: fmt.Sprintf("%.2fx (%s)", w.P50, note), Ok: enough && w.P50 <= coldWakeTarget},
				suite.Target{Name: fmt.Sprintf("per-ms orbitkv_ping p99 ≤ %.1fx futex (median of ≥ %d interleaved repeats)", coldWakeTarget, coldWakeRepeats),
					Measured: fmt.Sprintf("%.2fx (%s)", w.P99, note), Ok: enough && w.P99 <= coldWakeTarget})
		}
	}
	// The spec's substrate in the same run (its targets): our Ping
	// over shm at most half iceoryx2's bare round trip, and over iceoryx2
	// at most 1.5 times it.
	for _, cad := range []struct {
		name  string
		stats map[string]latency.Stats
	}{{"back-to-back", b2b}, {"per-ms", perMs}} {
		raw, ok := cad.stats[subjectIox2Raw]
		if !ok || raw.P50 == 0 {
			continue
		}
		if o, ok := cad.stats[subjectOKVIox2]; ok {
			out = append(out, suite.Target{Name: cad.name + " orbitkv_ping_iceoryx2 p50 ≤ 1.5x iceoryx2_raw", Measured: suite.Ratio(o.P50, raw.P50), Ok: o.P50*2 <= raw.P50*3})
		}
	}
	if rep.IdleCPUPercent != nil {
		p := *rep.IdleCPUPercent
		out = append(out, suite.Target{Name: fmt.Sprintf("idle Manager, %d sessions, ≤ 1%% of a core", idleSessions), Measured: fmt.Sprintf("%.2f%%", p), Ok: p <= 1})
	}
	return out
}
