package replay

import (
	"bytes"
	"io"
	"testing"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// The sections emit adds after a suite's table (the spread and the
// validity) are stable text: a golden file.
func TestReportSectionsMatchGolden(t *testing.T) {
	rep := fixtureReport()
	rep.Meta = suite.Meta{Schema: suite.Schema, Suite: "replay", Repeats: 3}
	rep.Figures = []suite.Figure{
		suite.NewFigure("hit_ratio", "fraction", suite.HigherIsBetter, 0.3581, []float64{0.3579, 0.3581, 0.3584}),
		suite.MedianFigure("restore_gbps", "GB/s", suite.HigherIsBetter, []float64{6.1, 6.5, 7.2}),
		suite.NewFigure("rtt/query/p50", "ns", suite.LowerIsBetter, 4200, []float64{4100, 4200, 4900}),
	}
	rep.Validity = suite.Judge(suite.ValidityInput{Repeats: 3, StatStart: suite.ProcStat{Total: 1000}, StatEnd: suite.ProcStat{Total: 2000, Steal: 90},
		Foreign: suite.ForeignCPU{Ticks: 300, Span: 1000, CPUs: 2}, HotUnchecked: "the replay has no hot phase"})
	var got bytes.Buffer
	if err := (&suite.Common{}).Emit(&got, io.Discard, rep, func(w io.Writer) error { return writeReplayTable(w, rep) }); err != nil {
		t.Fatal(err)
	}
	benchtest.CheckGolden(t, "report_sections.golden", got.Bytes())
}
