package channel

import (
	"fmt"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/chart"
)

// ChannelCharts is channel-cdf-back-to-back.png and, when per-ms round
// trips were timed, channel-cdf-per-ms.png: the CDF of round-trip latency
// of each subject, in --subjects order, from the histogram behind its
// Stats.
func ChannelCharts(rep *Report, cfg *ChannelConfig) []chart.Line {
	cadences := []struct{ key, file, what string }{{"back_to_back", "channel-cdf-back-to-back.png", fmt.Sprintf("back to back, %s round trips per subject", chart.TimesRepeats(cfg.N, cfg.Repeats))}}
	if cfg.PerMsN > 0 {
		cadences = append(cadences, struct{ key, file, what string }{"per_ms", "channel-cdf-per-ms.png", fmt.Sprintf("one round trip per ms, %s per subject", chart.TimesRepeats(cfg.PerMsN, cfg.Repeats))})
	}
	var charts []chart.Line
	for _, cd := range cadences {
		title := "orbitkv-bench channel: " + cd.what
		if cfg.needsManager() && cfg.socket == "" {
			title += ", Manager --poll-mode " + cfg.PollMode
		}
		var subjects []chart.CDFSubject
		for _, s := range cfg.Subjects {
			subjects = append(subjects, chart.CDFSubject{Name: s, Points: chart.HistCDF(rep.Hists, cd.key+"/"+s)})
		}
		charts = append(charts, chart.CDF(cd.file, title, "round trip", subjects))
	}
	return charts
}
