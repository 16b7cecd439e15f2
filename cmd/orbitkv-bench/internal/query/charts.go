package query

import (
	"fmt"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
)

// QueryCharts is query-cdf-hot.png and query-cdf-cold.png: the CDF of
// round-trip latency of QueryBundle at each --hashes count, of Ping and of
// the Poll of a pending ticket, back to back (hot) and after --cold-gap
// (cold).
func QueryCharts(rep *QueryReport, cfg *QueryConfig) []chart.Line {
	var charts []chart.Line
	for _, ph := range []struct{ key, what string }{{"hot", "hot (back to back)"}, {"cold", fmt.Sprintf("cold (%v before each)", cfg.ColdGap)}} {
		var subjects []chart.CDFSubject
		for _, r := range rep.Rows {
			name := fmt.Sprintf("QueryBundle of %d hashes", r.Hashes)
			if r.Hashes == 1 {
				name = "QueryBundle of 1 hash"
			}
			subjects = append(subjects, chart.CDFSubject{Name: name, Points: chart.HistCDF(rep.Hists, fmt.Sprintf("query %d/%s", r.Hashes, ph.key))})
		}
		subjects = append(subjects,
			chart.CDFSubject{Name: "Ping", Points: chart.HistCDF(rep.Hists, "ping/"+ph.key)},
			chart.CDFSubject{Name: "Poll of a pending ticket", Points: chart.HistCDF(rep.Hists, "poll/"+ph.key)})
		title := fmt.Sprintf("orbitkv-bench query: %s, %d resident blocks", ph.what, rep.ResidentBlocks)
		if cfg.Repeats > 1 {
			title += fmt.Sprintf(", the round trips of %d repeats", cfg.Repeats)
		}
		charts = append(charts, chart.CDF("query-cdf-"+ph.key+".png", title, "round trip", subjects))
	}
	return charts
}
