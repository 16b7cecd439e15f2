package policy

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

func TestPlotDirIsCheckedWhenTheFlagsAreParsed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		want string // "" = accepted
	}{
		{"a missing directory is made", filepath.Join(t.TempDir(), "a", "b"), ""},
		{"a directory below a regular file is refused", filepath.Join(file, "sub"), "--plot " + filepath.Join(file, "sub") + ": cannot make the directory"},
		{"a directory nobody can write is refused", "/proc", "--plot /proc: the directory is not writable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePolicyFlags([]string{"--plot", tt.dir}, &bytes.Buffer{})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if fi, err := os.Stat(tt.dir); err != nil || !fi.IsDir() {
					t.Errorf("--plot %s was not made: %v", tt.dir, err)
				}
				if entries, _ := os.ReadDir(tt.dir); len(entries) != 0 {
					t.Errorf("the writability probe left %d files", len(entries))
				}
				return
			}
			var ue *suite.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
}

func TestPolicyChartShowsTheReportsRowsInCapacityOrder(t *testing.T) {
	rep := &PolicyReport{Requests: 10, UniqueBlocks: 100, DefaultPolicy: "slru", BoundHitRatio: 0.4,
		policies: []string{evict.NameLRU, "slru"}, fractions: []float64{0.5, 0.1}}
	for _, r := range []struct {
		f    float64
		p    string
		hits float64
	}{{0.5, "lru", 0.3}, {0.5, "slru", 0.32}, {0.5, optimumName, 0.38}, {0.1, "lru", 0.1}, {0.1, "slru", 0.15}, {0.1, optimumName, 0.25}} {
		rep.Rows = append(rep.Rows, policyRow{CapacityFraction: r.f, Policy: r.p, HitRatio: r.hits})
	}
	c := policyCharts(rep)[0]
	want := map[string][]float64{"lru": {0.1, 0.3}, "slru": {0.15, 0.32}, "optimum (offline)": {0.25, 0.38}, "infinite-cache bound 0.4000": {0.4, 0.4}}
	if len(c.Series) != len(want) {
		t.Fatalf("%d series, want %d", len(c.Series), len(want))
	}
	for _, s := range c.Series {
		if !slices.Equal(s.Ys, want[s.Name]) || !slices.Equal(s.Xs, []float64{10, 50}) {
			t.Errorf("series %q = %v at %v, want %v at [10 50]", s.Name, s.Ys, s.Xs, want[s.Name])
		}
	}
}

func TestAPlotThatCannotBeWrittenStillLeavesTheReport(t *testing.T) {
	dir := t.TempDir()
	// A directory where the PNG should go: the directory passes the check
	// at parse time, the rename onto it fails after the run.
	if err := os.Mkdir(filepath.Join(dir, "policy-hit-ratio.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := Run([]string{"--trace", benchtest.TestTrace, "--limit", "200", "--fractions", "0.5", "--plot", dir, "--json"}, &out, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "--plot: writing "+filepath.Join(dir, "policy-hit-ratio.png")) {
		t.Errorf("err = %v, want the failed plot named", err)
	}
	if !strings.Contains(out.String(), `"rows"`) {
		t.Errorf("stdout = %q, want the JSON report printed before the plot failed", out.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%s holds %d entries, want only the directory in the way (a temporary file is left)", dir, len(entries))
	}
}
