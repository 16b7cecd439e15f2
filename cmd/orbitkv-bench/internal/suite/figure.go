package suite

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
)

// Repeats: every suite runs its measurement --repeats times (default
// defaultRepeats) and records, for each headline figure, the value of
// every repeat and their spread. A report of fewer than minValidRepeats
// repeats has no noise band worth the name and is marked invalid.
const (
	defaultRepeats  = 3
	minValidRepeats = 3
	maxRepeats      = 100
)

// Which way a figure improves.
const (
	LowerIsBetter  = "lower"
	HigherIsBetter = "higher"
)

// Figure is one headline number of a report with its spread over the
// repeats: the "figures" array of every --json report, which compare
// matches by Name. Value is what the suite reports for it (a latency
// percentile of the histogram merged over all repeats, or the median of
// the repeats' values for a throughput or ratio); it lies in [Min, Max],
// the lowest and highest of Repeats.
type Figure struct {
	Name    string    `json:"name"`    // unique in the report: "back_to_back/orbitkv_ping/p50"
	Unit    string    `json:"unit"`    // "ns", "GB/s", "ratio", "%", "s"
	Better  string    `json:"better"`  // lowerIsBetter or higherIsBetter
	Value   float64   `json:"value"`   // the reported value
	Min     float64   `json:"min"`     // lowest over Repeats
	Max     float64   `json:"max"`     // highest over Repeats
	Repeats []float64 `json:"repeats"` // one per repeat, in run order
}

// NewFigure is the figure name with value and the repeats' values; Min
// and Max are theirs, widened to include value (they already do for the
// values the suites report, a merged percentile or a median).
func NewFigure(name, unit, better string, value float64, repeats []float64) Figure {
	f := Figure{Name: name, Unit: unit, Better: better, Value: value, Min: value, Max: value, Repeats: slices.Clone(repeats)}
	for _, r := range repeats {
		f.Min, f.Max = min(f.Min, r), max(f.Max, r)
	}
	return f
}

// MedianOf is the median of vs (the mean of the middle two of an even
// count); 0 for none. vs is not changed.
func MedianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MedianFigure is a figure whose value is the median of its repeats.
func MedianFigure(name, unit, better string, repeats []float64) Figure {
	return NewFigure(name, unit, better, MedianOf(repeats), repeats)
}

// LatencyFigures are the p50 and p99 figures (ns, lower is better) of
// name: from merged, the histogram of all repeats, and each repeat's own.
func LatencyFigures(name string, merged *latency.Hist, repeats []*latency.Hist) []Figure {
	var out []Figure
	for _, q := range []struct {
		suffix string
		q      float64
	}{{"p50", 50}, {"p99", 99}} {
		var vs []float64
		for _, h := range repeats {
			vs = append(vs, float64(h.Quantile(q.q)))
		}
		out = append(out, NewFigure(name+"/"+q.suffix, "ns", LowerIsBetter, float64(merged.Quantile(q.q)), vs))
	}
	return out
}

// FormatFigure prints v in unit with the precision the tables use.
func FormatFigure(v float64, unit string) string {
	switch unit {
	case "ns":
		return strconv.FormatFloat(v/1000, 'f', 2, 64) + " µs"
	case "ratio":
		return strconv.FormatFloat(v, 'f', 2, 64) + "x"
	case "GB/s", "s":
		return strconv.FormatFloat(v, 'f', 2, 64) + " " + unit
	case "%":
		return strconv.FormatFloat(v, 'f', 2, 64) + "%"
	case "fraction":
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64) + " " + unit
}

// writeFigures prints the figures section of a table: one line per
// figure with its value and its spread over the repeats.
func writeFigures(w io.Writer, repeats int, figs []Figure) error {
	if len(figs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "spread over %d repeats (value, then min..max of the repeats):\n", repeats)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range figs {
		fmt.Fprintf(tw, "  %s\t%s\t%s .. %s\n", f.Name, FormatFigure(f.Value, f.Unit), FormatFigure(f.Min, f.Unit), FormatFigure(f.Max, f.Unit))
	}
	return tw.Flush()
}

// FloatField names one float64 field of a throughput result T for
// medianOver.
type FloatField[T any] struct {
	Name, Unit, Better string
	Get                func(*T) *float64
}

// MedianOver combines the repeats of one throughput result: a copy of the
// first with every field of fields set to the median of the repeats'
// values, and one figure per field named prefix + "/" + field name.
func MedianOver[T any](prefix string, reps []T, fields []FloatField[T]) (T, []Figure) {
	out := reps[0]
	var figs []Figure
	for _, f := range fields {
		var vs []float64
		for i := range reps {
			vs = append(vs, *f.Get(&reps[i]))
		}
		fig := MedianFigure(prefix+"/"+f.Name, f.Unit, f.Better, vs)
		*f.Get(&out) = fig.Value
		figs = append(figs, fig)
	}
	return out, figs
}
