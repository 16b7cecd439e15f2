package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/pingpong"
)

func TestParseWakeFlags(t *testing.T) {
	cfg, err := parseWakeFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.samples != 1000 || cfg.sleep != time.Millisecond || cfg.lines != 32 || cfg.repeats != 3 {
		t.Errorf("defaults = samples %d, sleep %v, lines %d, repeats %d; want 1000, 1ms, 32, 3", cfg.samples, cfg.sleep, cfg.lines, cfg.repeats)
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"too few samples", []string{"--samples", "9"}, "--samples must be between 10 and 1000000, got 9"},
		{"a sleep too short to park", []string{"--sleep", "1us"}, "--sleep must be between 10µs and 100ms, got 1µs"},
		{"a run that would sleep for days", []string{"--samples", "1000000", "--sleep", "100ms"}, "sleep for 333h20m0s; want at most 1h0m0s"},
		{"no lines", []string{"--lines", "0"}, "--lines must be between 1 and 4096, got 0"},
		{"a Manager flag", []string{"--manager-bin", "bin/orbitkv-manager"}, "the wake suite starts none"},
		{"an argument", []string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseWakeFlags(tt.args, io.Discard)
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

// The chase visits every line once, each in its own page at line p%64 of
// page p, and ends.
func TestWakeChaseVisitsEveryLineOnce(t *testing.T) {
	const lines = 100
	buf, first := wakeChase(lines)
	var seen []uint64
	for j := first; j != ^uint64(0); j = buf[j] {
		page := j / wakePageWords
		if j%wakePageWords != page%64*8 || len(seen) > lines {
			t.Fatalf("step to %d after %v: not line %d of page %d, or a cycle", j, seen, page%64, page)
		}
		seen = append(seen, page)
	}
	slices.Sort(seen)
	want := make([]uint64, lines)
	for i := range want {
		want[i] = uint64(i)
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("visited pages %v, want each of 0..%d once", seen, lines-1)
	}
}

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
	var rep wakeReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("decoding the report: %v\n%s", err, out.String())
	}
	if rep.SleepNs != 50_000 || rep.Samples != 20 || rep.Lines != 8 || len(rep.Probes) != len(wakeProbes) {
		t.Fatalf("report sleep %d samples %d lines %d probes %d; want 50000, 20, 8, %d", rep.SleepNs, rep.Samples, rep.Lines, len(rep.Probes), len(wakeProbes))
	}
	for _, name := range wakeProbes {
		p, ok := rep.Probes[name]
		if !ok || p.Cold.N != 20 || p.Warm.N != 20 || p.Cold.P50 == 0 || p.Warm.P50 == 0 {
			t.Errorf("probe %s = %+v (present %v); want 20 timed samples each way, nonzero", name, p, ok)
		}
	}
	// One repeat: the median is that repeat's value, from the merged p50s.
	lines, clock := rep.Probes[wakeProbeLines].Cold.P50, rep.Probes[wakeProbeClock].Cold.P50
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
	for _, s := range append(slices.Clone(wakeProbes), "after a 50µs raw futex sleep", "one cold line", "slept again") {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}
