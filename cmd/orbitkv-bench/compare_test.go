package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/policy"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func TestCompareCommand(t *testing.T) {
	base := reportFile(t, "query", true, fig("query 32/hot/p50", suite.LowerIsBetter, 3800, 3700, 3900), fig("ping/hot/p50", suite.LowerIsBetter, 300, 290, 310))
	same := reportFile(t, "query", true, fig("query 32/hot/p50", suite.LowerIsBetter, 3850, 3750, 3950), fig("ping/hot/p50", suite.LowerIsBetter, 305, 300, 320))
	slower := reportFile(t, "query", true, fig("query 32/hot/p50", suite.LowerIsBetter, 58000, 57000, 59000), fig("ping/hot/p50", suite.LowerIsBetter, 300, 290, 310))
	invalid := reportFile(t, "query", false, fig("query 32/hot/p50", suite.LowerIsBetter, 3800, 3700, 3900))
	usFig := fig("ping/hot/p50", suite.LowerIsBetter, 0.3, 0.29, 0.31)
	usFig.Unit = "µs"
	inUS := reportFile(t, "query", true, fig("query 32/hot/p50", suite.LowerIsBetter, 3800, 3700, 3900), usFig)
	channel := reportFile(t, "channel", true, fig("per_ms/futex/p50", suite.LowerIsBetter, 7000, 6900, 7100))
	tests := []struct {
		name string
		args []string
		exit int
		want string // in stdout (exit 0 or 3) or stderr
	}{
		{"two runs alike are within noise and exit 0", []string{base, same}, 0, "within noise"},
		{"a regression is marked WORSE with the ratio", []string{base, slower}, 0, "15.263x"},
		{"a regression with --strict exits 3", []string{"--strict", base, slower}, suite.ExitInvalid, "query 32/hot/p50 is worse outside the noise band"},
		{"an invalid report with --strict exits 3", []string{"--strict", base, invalid}, suite.ExitInvalid, "is marked invalid"},
		{"an invalid report's reasons are listed one per line", []string{base, invalid}, 0, "INVALID (1 reason)\n  - steal time 9.0%\n"},
		{"runs alike with --strict exit 0", []string{"--strict", base, same}, 0, "within noise"},
		{"a figure in other units with --strict exits 3 naming both", []string{"--strict", base, inUS}, suite.ExitInvalid, "ping/hot/p50 is in ns (lower is better) in A and µs (lower is better) in B"},
		{"the same file twice is within noise", []string{base, base}, 0, "1.000x"},
		{"reports of different suites are refused", []string{base, channel}, 1, "a query report and"},
		{"one file is a usage error", []string{base}, 2, "want two report files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(append([]string{"compare"}, tt.args...), &stdout, &stderr)
			if code != tt.exit || !strings.Contains(stdout.String()+stderr.String(), tt.want) {
				t.Errorf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tt.exit, stdout.String(), stderr.String(), tt.want)
			}
		})
	}
}

func fig(name, better string, value, lo, hi float64) suite.Figure {
	return suite.Figure{Name: name, Unit: "ns", Better: better, Value: value, Min: lo, Max: hi, Repeats: []float64{lo, value, hi}}
}

// reportFile writes a schema-2 report of suite name with figs and validity
// valid, and returns its path.
func reportFile(t *testing.T, name string, valid bool, figs ...suite.Figure) string {
	t.Helper()
	rep := &policy.PolicyReport{Head: suite.Head{Meta: suite.Meta{Schema: suite.Schema, Suite: name, Repeats: 3}, Figures: figs,
		Validity: suite.Validity{Valid: valid, Reasons: []string{}, Checks: []suite.ValidityCheck{}}}}
	if !valid {
		rep.Validity.Reasons = []string{"steal time 9.0%"}
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
