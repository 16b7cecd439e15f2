package wake

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func TestParseWakeFlags(t *testing.T) {
	cfg, err := parseWakeFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.samples != 1000 || cfg.sleep != time.Millisecond || cfg.lines != 32 || cfg.Repeats != 3 {
		t.Errorf("defaults = samples %d, sleep %v, lines %d, repeats %d; want 1000, 1ms, 32, 3", cfg.samples, cfg.sleep, cfg.lines, cfg.Repeats)
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
		{"a Manager flag", []string{"--manager-bin", "bin/orbitkv-manager"}, "unknown flag: --manager-bin"},
		{"an argument", []string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseWakeFlags(tt.args, io.Discard)
			var ue *suite.UsageError
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
