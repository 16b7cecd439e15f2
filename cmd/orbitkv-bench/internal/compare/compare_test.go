package compare

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/policy"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

func fig(name, better string, value, lo, hi float64) suite.Figure {
	return suite.Figure{Name: name, Unit: "ns", Better: better, Value: value, Min: lo, Max: hi, Repeats: []float64{lo, value, hi}}
}

func TestCompareVerdictsFollowTheNoiseBand(t *testing.T) {
	tests := []struct {
		name string
		a, b suite.Figure
		want string
	}{
		{"overlapping ranges are within noise", fig("p50", suite.LowerIsBetter, 100, 90, 110), fig("p50", suite.LowerIsBetter, 105, 100, 120), verdictNoise},
		{"ranges that touch at one end are within noise", fig("p50", suite.LowerIsBetter, 100, 90, 110), fig("p50", suite.LowerIsBetter, 115, 110, 120), verdictNoise},
		{"a latency wholly above A's range is worse", fig("p50", suite.LowerIsBetter, 100, 90, 110), fig("p50", suite.LowerIsBetter, 130, 111, 140), verdictWorse},
		{"a latency wholly below A's range is better", fig("p50", suite.LowerIsBetter, 100, 90, 110), fig("p50", suite.LowerIsBetter, 50, 40, 60), verdictBetter},
		{"a throughput wholly above A's range is better", fig("gbps", suite.HigherIsBetter, 10, 9, 11), fig("gbps", suite.HigherIsBetter, 14, 12, 15), verdictBetter},
		{"a throughput wholly below A's range is worse", fig("gbps", suite.HigherIsBetter, 10, 9, 11), fig("gbps", suite.HigherIsBetter, 5, 4, 6), verdictWorse},
		{"the 58 µs parked hot phase against 3.8 µs is worse", fig("query 32/hot/p50", suite.LowerIsBetter, 3800, 3700, 3900), fig("query 32/hot/p50", suite.LowerIsBetter, 58000, 57000, 59000), verdictWorse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := compareFigures([]suite.Figure{tt.a}, []suite.Figure{tt.b})
			if len(rows) != 1 || rows[0].verdict != tt.want {
				t.Errorf("verdict = %+v, want %q", rows, tt.want)
			}
		})
	}
	t.Run("a figure whose unit or direction differs between the reports is not compared", func(t *testing.T) {
		inUS := fig("p50", suite.LowerIsBetter, 3.8, 3.7, 3.9)
		inUS.Unit = "µs"
		higher := fig("p50", suite.HigherIsBetter, 100, 90, 110)
		for _, b := range []suite.Figure{inUS, higher} {
			rows := compareFigures([]suite.Figure{fig("p50", suite.LowerIsBetter, 3800, 3700, 3900)}, []suite.Figure{b})
			if len(rows) != 1 || rows[0].verdict != verdictMismatch {
				t.Errorf("B %+v: rows = %+v, want %q", b, rows, verdictMismatch)
			}
		}
	})
	t.Run("figures in one report only are named so", func(t *testing.T) {
		rows := compareFigures([]suite.Figure{fig("x", suite.LowerIsBetter, 1, 1, 1)}, []suite.Figure{fig("y", suite.LowerIsBetter, 1, 1, 1)})
		if len(rows) != 2 || rows[0].verdict != verdictOnlyA || rows[1].verdict != verdictOnlyB {
			t.Errorf("rows = %+v, want x only in A, y only in B", rows)
		}
	})
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

func TestCompareRejectsMalformedReportsNamingTheField(t *testing.T) {
	good := func(edit func(m map[string]any)) []byte {
		m := map[string]any{
			"meta":     map[string]any{"schema": suite.Schema, "suite": "copy"},
			"validity": map[string]any{"valid": true},
			"figures":  []any{map[string]any{"name": "x", "unit": "GB/s", "better": "higher", "value": 2, "min": 1, "max": 3}},
		}
		edit(m)
		b, _ := json.Marshal(m)
		return b
	}
	figureWith := func(k string, v any) func(m map[string]any) {
		return func(m map[string]any) { m["figures"].([]any)[0].(map[string]any)[k] = v }
	}
	tests := []struct {
		name  string
		input []byte
		want  string
	}{
		{"text that is not JSON", []byte("orbitkv-bench query: 2 CPUs"), "r.json: not one JSON object"},
		{"a report without figures (schema 1)", good(func(m map[string]any) { delete(m, "figures") }), `no "figures"`},
		{"a report without meta", good(func(m map[string]any) { delete(m, "meta") }), `no "meta"`},
		{"another schema", good(func(m map[string]any) { m["meta"].(map[string]any)["schema"] = 1 }), "meta.schema is 1, want 2"},
		{"no suite", good(func(m map[string]any) { m["meta"].(map[string]any)["suite"] = "" }), "meta.suite is empty"},
		{"a figure without a name", good(figureWith("name", "")), "figures[0].name is empty"},
		{"a figure with an unknown direction", good(figureWith("better", "up")), `figures[0] (x).better is "up"`},
		{"a value outside its spread", good(figureWith("value", 9)), "figures[0] (x): value 9 outside min 1 .. max 3"},
		{"a negative figure", good(func(m map[string]any) {
			f := m["figures"].([]any)[0].(map[string]any)
			f["min"], f["value"] = -5, -1
		}), "figures[0] (x): min -5 is negative (every figure is a latency, rate, ratio or share)"},
		{"a figure of the wrong type", good(figureWith("value", "fast")), "r.json: figures:"},
		{"a figure named twice", good(func(m map[string]any) { m["figures"] = append(m["figures"].([]any), m["figures"].([]any)[0]) }), `figures[1].name "x" is named twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			_, err := parseComparedReport("r.json", tt.input)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	t.Run("a well-formed report is accepted", func(t *testing.T) {
		if _, err := parseComparedReport("r.json", good(func(map[string]any) {})); err != nil {
			t.Error(err)
		}
	})
}

// FuzzParseComparedReport: compare reads report files from anywhere; the
// parser returns an error or a report whose figures hold its invariants.
func FuzzParseComparedReport(f *testing.F) {
	f.Add([]byte(`{"meta":{"schema":2,"suite":"copy"},"validity":{"valid":true},"figures":[{"name":"x","unit":"s","better":"lower","value":1,"min":1,"max":1}]}`))
	f.Add([]byte(`{"meta":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseComparedReport("f.json", b)
		if err != nil {
			return
		}
		for _, fg := range r.Figures {
			if !(0 <= fg.Min && fg.Min <= fg.Value && fg.Value <= fg.Max) || fg.Name == "" {
				t.Fatalf("accepted figure %+v", fg)
			}
		}
		_ = compareFigures(r.Figures, r.Figures)
		if err := writeComparison(io.Discard, r, r, compareFigures(r.Figures, r.Figures)); err != nil && !errors.Is(err, io.ErrShortWrite) {
			t.Fatal(err)
		}
	})
}

func TestMeasurementFlagsDropWhereTheReportWent(t *testing.T) {
	got := measurementFlags([]string{"--sizes", "1MiB", "--json", "--output", "/tmp/a.json", "-plot=/tmp/p", "--strict", "--iters", "5"})
	if want := []string{"--sizes", "1MiB", "--iters", "5"}; !slices.Equal(got, want) {
		t.Errorf("measurementFlags = %q, want %q", got, want)
	}
}
