package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/wake"
	"github.com/orbitkv/orbitkv/gocore/pingpong"
)

// A short run prints every probe, cold and warm, with the counts asked for,
// the headline figures, and the cold line cost computed from its own p50s.
func TestWakeRunsThroughTheDispatcher(t *testing.T) {
	if _, err := pingpong.CgoNoop(0); err != nil {
		t.Skipf("the cgo_call probe needs cgo: %v", err)
	}
	var out, errOut bytes.Buffer
	args := []string{"wake", "--samples", "20", "--sleep", "50us", "--lines", "8", "--repeats", "1", "--json"}
	if code := dispatch(args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var rep wake.WakeReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, out.String())
	}
	if rep.SleepNs != 50_000 || rep.Samples != 20 || rep.Lines != 8 || len(rep.Probes) != len(wake.WakeProbes) {
		t.Fatalf("report sleep %d samples %d lines %d probes %d; want 50000, 20, 8, %d", rep.SleepNs, rep.Samples, rep.Lines, len(rep.Probes), len(wake.WakeProbes))
	}
	for _, name := range wake.WakeProbes {
		p, ok := rep.Probes[name]
		if !ok || p.Cold.N != 20 || p.Warm.N != 20 || p.Cold.P50 == 0 || p.Warm.P50 == 0 {
			t.Errorf("probe %s = %+v (present %v); want 20 timed samples each way, nonzero", name, p, ok)
		}
	}
	// One repeat: the median is that repeat's value, from the merged p50s.
	lines, clock := rep.Probes[wake.WakeProbeLines].Cold.P50, rep.Probes[wake.WakeProbeClock].Cold.P50
	if want := max(0, float64(lines)-float64(clock)) / 8; rep.ColdLineNs != want {
		t.Errorf("cold_line_ns = %v, want (%d - %d) / 8 = %v", rep.ColdLineNs, lines, clock, want)
	}
	var names []string
	for _, f := range rep.Figures {
		names = append(names, f.Name)
	}
	for _, want := range []string{"cold/cgo_call/p50", "warm/cgo_call/p50", "cold/lines/p99", "cold_line"} {
		if !slices.Contains(names, want) {
			t.Errorf("figures %v lack %s", names, want)
		}
	}
	out.Reset()
	if code := dispatch(args[:len(args)-1], &out, &errOut); code != 0 {
		t.Fatalf("table: exit %d: %s", code, errOut.String())
	}
	for _, s := range append(slices.Clone(wake.WakeProbes), "after a 50µs raw futex sleep", "one cold line", "slept again") {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}
