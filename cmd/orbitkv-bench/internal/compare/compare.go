package compare

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/spf13/pflag"
)

// Verdicts of compare, B against A.
const (
	verdictNoise  = "within noise"
	verdictBetter = "better"
	verdictWorse  = "WORSE"
	verdictOnlyA  = "only in A"
	verdictOnlyB  = "only in B"
	// verdictMismatch: the figure's unit or direction differs between the
	// reports, so its values cannot be set against each other.
	verdictMismatch = "NOT COMPARABLE"
)

// maxReportBytes bounds a report file compare reads.
const maxReportBytes = 64 << 20

// comparedReport is what compare reads of a --json report: its head.
type comparedReport struct {
	path     string
	Meta     suite.Meta     `json:"meta"`
	Validity suite.Validity `json:"validity"`
	Figures  []suite.Figure `json:"figures"`
}

// Run is `orbitkv-bench compare [--strict] A.json B.json`.
func Run(args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	strict := fs.Bool("strict", false, fmt.Sprintf("exit %d when a figure of B is worse than A's outside the noise band or in another unit or direction, or either report is marked invalid", suite.ExitInvalid))
	fs.Usage = func() {
		fmt.Fprintln(stdout, "usage: orbitkv-bench compare [--strict] A.json B.json")
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "Compares two --json reports of one suite figure by figure: A, B, the ratio B/A, and")
		fmt.Fprintln(stdout, "a verdict. A difference is \"within noise\" when the ranges [min, max] of the two")
		fmt.Fprintln(stdout, "reports' repeats overlap; otherwise B is better or WORSE (NOT COMPARABLE: the")
		fmt.Fprintln(stdout, "figure's unit or direction differs). Method: bench/README.md.")
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, "flags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	if err := suite.ParseGNU(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return suite.Usagef("want two report files (A.json B.json), got %d arguments", fs.NArg())
	}
	a, err := loadComparedReport(fs.Arg(0))
	if err != nil {
		return err
	}
	b, err := loadComparedReport(fs.Arg(1))
	if err != nil {
		return err
	}
	if a.Meta.Suite != b.Meta.Suite {
		return fmt.Errorf("%s is a %s report and %s a %s report: compare reports of one suite", a.path, a.Meta.Suite, b.path, b.Meta.Suite)
	}
	rows := compareFigures(a.Figures, b.Figures)
	if err := writeComparison(stdout, a, b, rows); err != nil {
		return err
	}
	if !*strict {
		return nil
	}
	var reasons []string
	for _, r := range [2]*comparedReport{a, b} {
		if !r.Validity.Valid {
			reasons = append(reasons, r.path+" is marked invalid")
		}
	}
	for _, r := range rows {
		switch r.verdict {
		case verdictWorse:
			reasons = append(reasons, r.name+" is worse outside the noise band")
		case verdictMismatch:
			reasons = append(reasons, fmt.Sprintf("%s is in %s (%s is better) in A and %s (%s is better) in B",
				r.name, r.a.Unit, r.a.Better, r.b.Unit, r.b.Better))
		}
	}
	if len(reasons) > 0 {
		return &suite.InvalidRunError{What: "B does not hold A's figures", Reasons: reasons}
	}
	return nil
}

// loadComparedReport reads and checks the report at path.
func loadComparedReport(path string) (*comparedReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxReportBytes {
		return nil, fmt.Errorf("%s: more than %d bytes, not a report", path, maxReportBytes)
	}
	return parseComparedReport(path, b)
}

// parseComparedReport decodes one --json report (outside bytes) and
// checks what compare relies on; each error names path and the field:
// one JSON object with "meta", "validity" and "figures"; meta.schema
// reportSchema and a suite; every figure with a unique name, a unit,
// better "lower" or "higher", and 0 ≤ min ≤ value ≤ max.
func parseComparedReport(path string, b []byte) (*comparedReport, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(b), &keys); err != nil {
		return nil, fmt.Errorf("%s: not one JSON object: %w", path, err)
	}
	for _, k := range []string{"meta", "validity", "figures"} {
		if v, ok := keys[k]; !ok || string(v) == "null" {
			return nil, fmt.Errorf("%s: no %q (a report of schema %d has meta, validity and figures; older reports cannot be compared)", path, k, suite.Schema)
		}
	}
	r := &comparedReport{path: path}
	for k, dst := range map[string]any{"meta": &r.Meta, "validity": &r.Validity, "figures": &r.Figures} {
		if err := json.Unmarshal(keys[k], dst); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", path, k, err)
		}
	}
	switch {
	case r.Meta.Schema != suite.Schema:
		return nil, fmt.Errorf("%s: meta.schema is %d, want %d (compare reads schema %d reports only)", path, r.Meta.Schema, suite.Schema, suite.Schema)
	case r.Meta.Suite == "":
		return nil, fmt.Errorf("%s: meta.suite is empty", path)
	}
	seen := map[string]bool{}
	for i, f := range r.Figures {
		field := fmt.Sprintf("%s: figures[%d]", path, i)
		switch {
		case f.Name == "":
			return nil, fmt.Errorf("%s.name is empty", field)
		case seen[f.Name]:
			return nil, fmt.Errorf("%s.name %q is named twice", field, f.Name)
		case f.Unit == "":
			return nil, fmt.Errorf("%s (%s).unit is empty", field, f.Name)
		case f.Better != suite.LowerIsBetter && f.Better != suite.HigherIsBetter:
			return nil, fmt.Errorf("%s (%s).better is %q, want %q or %q", field, f.Name, f.Better, suite.LowerIsBetter, suite.HigherIsBetter)
		case !(f.Min <= f.Value && f.Value <= f.Max):
			return nil, fmt.Errorf("%s (%s): value %v outside min %v .. max %v", field, f.Name, f.Value, f.Min, f.Max)
		case f.Min < 0:
			return nil, fmt.Errorf("%s (%s): min %v is negative (every figure is a latency, rate, ratio or share)", field, f.Name, f.Min)
		}
		seen[f.Name] = true
	}
	return r, nil
}

// comparedFigure is one line of a comparison; a or b is nil for a figure
// only one report has.
type comparedFigure struct {
	name    string
	a, b    *suite.Figure
	verdict string
}

// compareFigures matches the figures of A and B by name, in A's order
// then B's extra ones, and gives each a verdict: not comparable when
// its unit or direction differs between A and B, within noise when the
// ranges [A.min, A.max] and [B.min, B.max] overlap (ends included), else
// better or worse by the figure's direction.
func compareFigures(a, b []suite.Figure) []comparedFigure {
	var out []comparedFigure
	inA := map[string]bool{}
	for i := range a {
		fa := &a[i]
		inA[fa.Name] = true
		j := slices.IndexFunc(b, func(f suite.Figure) bool { return f.Name == fa.Name })
		if j < 0 {
			out = append(out, comparedFigure{name: fa.Name, a: fa, verdict: verdictOnlyA})
			continue
		}
		verdict := noiseVerdict(*fa, b[j])
		if fa.Unit != b[j].Unit || fa.Better != b[j].Better {
			verdict = verdictMismatch
		}
		out = append(out, comparedFigure{name: fa.Name, a: fa, b: &b[j], verdict: verdict})
	}
	for i := range b {
		if !inA[b[i].Name] {
			out = append(out, comparedFigure{name: b[i].Name, b: &b[i], verdict: verdictOnlyB})
		}
	}
	return out
}

// noiseVerdict is B's verdict against A (see compareFigures).
func noiseVerdict(a, b suite.Figure) string {
	if a.Min <= b.Max && b.Min <= a.Max {
		return verdictNoise
	}
	higher := b.Min > a.Max
	if higher == (a.Better == suite.HigherIsBetter) {
		return verdictBetter
	}
	return verdictWorse
}

// describeReport is a line on a report: path, suite, when, what built it
// and how often it repeated, and its validity; an invalid report's
// reasons follow, one per line.
func describeReport(label string, r *comparedReport) string {
	state := "valid"
	if !r.Validity.Valid {
		plural := "s"
		if len(r.Validity.Reasons) == 1 {
			plural = ""
		}
		state = fmt.Sprintf("INVALID (%d reason%s)", len(r.Validity.Reasons), plural)
		for _, why := range r.Validity.Reasons {
			state += "\n  - " + why
		}
	}
	return fmt.Sprintf("%s: %s (%s, %s, version %s, %d repeats, %d cores %s): %s",
		label, r.path, r.Meta.Suite, r.Meta.Timestamp, r.Meta.Version, r.Meta.Repeats, r.Meta.Cores, r.Meta.CPUModel, state)
}

// reportFlags are the flags that shape a report but not the measurement;
// the value says whether the flag takes an argument.
var reportFlags = map[string]bool{"json": false, "strict": false, "output": true, "plot": true}

// measurementFlags is flags without the reportFlags (and their values), so
// two runs that differ only in where their reports went compare as alike.
func measurementFlags(flags []string) []string {
	out := []string{}
	for i := 0; i < len(flags); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(flags[i], "-"), "=")
		takesArg, ok := reportFlags[name]
		if !ok || !strings.HasPrefix(flags[i], "-") {
			out = append(out, flags[i])
			continue
		}
		if takesArg && !hasValue {
			i++ // the value is the next argument
		}
	}
	return out
}

// writeComparison prints the comparison table.
func writeComparison(w io.Writer, a, b *comparedReport, rows []comparedFigure) error {
	fmt.Fprintln(w, describeReport("A", a))
	fmt.Fprintln(w, describeReport("B", b))
	if fa, fb := measurementFlags(a.Meta.Flags), measurementFlags(b.Meta.Flags); !slices.Equal(fa, fb) {
		fmt.Fprintf(w, "note: the flags differ: A %q, B %q\n", fa, fb)
	}
	fmt.Fprintln(w, "within noise: the ranges min..max of the two reports' repeats overlap")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tA\tA min..max\tB\tB min..max\tB/A\tverdict")
	side := func(f *suite.Figure) (string, string) {
		if f == nil {
			return "-", "-"
		}
		return suite.FormatFigure(f.Value, f.Unit), suite.FormatFigure(f.Min, f.Unit) + " .. " + suite.FormatFigure(f.Max, f.Unit)
	}
	for _, r := range rows {
		av, ar := side(r.a)
		bv, br := side(r.b)
		ratio := "-"
		if r.a != nil && r.b != nil && r.a.Value != 0 && r.verdict != verdictMismatch {
			ratio = fmt.Sprintf("%.3fx", r.b.Value/r.a.Value)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.name, av, ar, bv, br, ratio, r.verdict)
	}
	return tw.Flush()
}
