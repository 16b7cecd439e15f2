package suite

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// NewBaselineTable starts the table of a suite measured against a
// baseline: header (if not ""), a line saying how the baseline was
// measured and a blank line; the rows go to the returned right-aligned
// tabwriter, which the caller flushes.
func NewBaselineTable(w io.Writer, header, baseline string) *tabwriter.Writer {
	if header != "" {
		fmt.Fprintln(w, header)
	}
	fmt.Fprintf(w, "baseline: %s\n\n", baseline)
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}

// TargetsSource is where most suites' targets are stated.
const TargetsSource = "bench/README.md"

// TargetsInformational is the note of a suite whose missed targets do not
// change its exit status.
const TargetsInformational = "informational: a MISSED target does not fail the run (exit status stays 0)"

// Target is one line of a suite's targets footer: what is promised, the
// figure measured, and whether it holds.
type Target struct {
	Name     string
	Measured string
	Ok       bool
}

// verdict is "ok" or "MISSED".
func (t Target) verdict() string {
	if t.Ok {
		return "ok"
	}
	return "MISSED"
}

// WriteTargets prints a suite's targets footer, the one shape every suite
// with per-figure targets shares: "targets (SOURCE):", then note, then a
// line per target, indented by two spaces, with name, measured figure and
// verdict in columns two spaces apart. Errors are w's.
func WriteTargets(w io.Writer, source, note string, ts []Target) error {
	fmt.Fprintf(w, "targets (%s):\n", source)
	fmt.Fprintf(w, "  %s\n", note)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range ts {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", t.Name, t.Measured, t.verdict())
	}
	return tw.Flush()
}
