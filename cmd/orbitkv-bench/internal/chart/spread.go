package chart

import (
	"fmt"
	"io"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// WriteCharts writes each chart into dir (--plot DIR), titled with the host, commit and
// verdict of the report whose head is h (plotHost; call it after finish),
// and names each file on log. Without
// --plot it writes nothing. The suites build their charts from the report
// they print (copyCharts, ...), so a plot shows exactly the figures of the
// table and the JSON. The first failure is returned; files written before
// it stay.
func WriteCharts(dir string, log io.Writer, h *suite.Head, charts ...Line) error {
	if dir == "" {
		return nil
	}
	host := plotHost(h)
	for i := range charts {
		path, err := charts[i].write(dir, host)
		if err != nil {
			return err
		}
		fmt.Fprintf(log, "plot: %s\n", path)
	}
	return nil
}

// WithSpread gives each subject the spread of its figures over the
// repeats, the figure of size i being prefix(i) + "/" + the subject's
// figure name (copyFields, ssdFields), and returns the title's note on
// the bars. With fewer than 2 repeats, or a figure missing, a subject has
// no spread and the note is "".
func WithSpread(head *suite.Head, subjects []ThroughputSubject, figureNames []string, sizes int, prefix func(i int) string) string {
	if head.Meta.Repeats < 2 {
		return ""
	}
	byName := map[string]suite.Figure{}
	for _, f := range head.Figures {
		byName[f.Name] = f
	}
	note := ""
	for j := range subjects {
		var lo, hi []float64
		for i := range sizes {
			f, ok := byName[prefix(i)+"/"+figureNames[j]]
			if !ok {
				lo, hi = nil, nil
				break
			}
			lo, hi = append(lo, f.Min), append(hi, f.Max)
		}
		if lo != nil {
			subjects[j].lo, subjects[j].hi = lo, hi
			note = fmt.Sprintf("; bars: min to max of %d repeats", head.Meta.Repeats)
		}
	}
	return note
}

// TimesRepeats is n, or "R × n" for R > 1 repeats of n each: the samples
// behind a histogram merged over the repeats.
func TimesRepeats(n, repeats int) string {
	if repeats > 1 {
		return fmt.Sprintf("%d × %d", repeats, n)
	}
	return fmt.Sprint(n)
}

// HistCDF is the CDF of hists[key], or nil (a series the chart refuses,
// naming it) when there is no such histogram.
func HistCDF(hists map[string]*latency.Hist, key string) []latency.CDFPoint {
	if h := hists[key]; h != nil {
		return h.CDF()
	}
	return nil
}
