package replay

import (
	"errors"
	"fmt"
	"io"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// eventsReport is the one JSON object of `orbitkv-bench replay --kv-events
// compare`: the same plan replayed with events off and on, alternating,
// each repeat on fresh Managers, and the cost of the events as ratios of
// the medians over the repeats (on ÷ off). Repeats alternate which runs
// first (off then on, on then off, ...).
type eventsReport struct {
	suite.Head
	Repeats int `json:"repeats"`
	// ThroughputRatio is requests per second with events on over off (≥ 0.97
	// is the target); QueryP50Ratio and PublishP50Ratio the medians'
	// ratios of the query and publish round trips (≤ 1.05).
	ThroughputRatio float64 `json:"throughput_ratio"`
	QueryP50Ratio   float64 `json:"query_p50_ratio"`
	PublishP50Ratio float64 `json:"publish_p50_ratio"`
	RecordTokens    int     `json:"record_tokens"`
	// EventsReceived are the events the bench's subscriber decoded with
	// events on, over every repeat.
	EventsReceived uint64        `json:"events_received"`
	Off            *replayReport `json:"events_off"`
	On             *replayReport `json:"events_on"`
}

// runEventsCompare is --kv-events compare.
func runEventsCompare(cfg *replayConfig, plan *replayPlan, stdout, stderr io.Writer) error {
	mon := suite.StartMonitor(nil)
	defer mon.Stop()
	prog := suite.StartProgress(cfg.Progress, stderr, "replay", "requests", int64(2*cfg.Repeats*len(plan.requests)))
	defer prog.Finish()
	var offs, ons []*replayReport
	var tput, q50, p50 []float64
	out := &eventsReport{Repeats: cfg.Repeats, RecordTokens: cfg.recordTok}
	for i := range cfg.Repeats {
		var pair [2]*replayReport
		order := []int{0, 1} // pair's index: 0 events off, 1 on
		if i%2 == 1 {
			order = []int{1, 0} // every other repeat runs on first: a machine that favours the first or second run of a pair biases neither
		}
		for _, j := range order {
			mode := []string{eventsOff, eventsOn}[j]
			if !cfg.Json {
				fmt.Fprintf(stderr, "repeat %d of %d, events %s: replaying %d requests with %d clients ...\n", i+1, cfg.Repeats, mode, len(plan.requests), cfg.clients)
			}
			c := *cfg
			c.events = mode
			rep, err := replayOnce(&c, plan, stderr, prog)
			if err != nil {
				return err
			}
			if rep.Mismatches != 0 {
				return fmt.Errorf("events %s: %d restored bytes differ from what was published", mode, rep.Mismatches)
			}
			pair[j] = rep
		}
		off, on := pair[0], pair[1]
		offs, ons = append(offs, off), append(ons, on)
		out.EventsReceived += on.EventsReceived
		tput = append(tput, (float64(on.Requests)/on.WallS)/(float64(off.Requests)/off.WallS))
		q50 = append(q50, float64(on.RTT["query"].P50)/float64(max(off.RTT["query"].P50, 1)))
		p50 = append(p50, float64(on.RTT["publish"].P50)/float64(max(off.RTT["publish"].P50, 1)))
	}
	out.Off, out.On = combineReplays(offs), combineReplays(ons)
	out.ThroughputRatio, out.QueryP50Ratio, out.PublishP50Ratio = suite.MedianOf(tput), suite.MedianOf(q50), suite.MedianOf(p50)
	if out.EventsReceived == 0 {
		return errors.New("events on: the bench's subscriber received no event")
	}
	figs := []suite.Figure{
		suite.NewFigure("throughput_ratio", "on/off", suite.HigherIsBetter, out.ThroughputRatio, tput),
		suite.NewFigure("query_p50_ratio", "on/off", suite.LowerIsBetter, out.QueryP50Ratio, q50),
		suite.NewFigure("publish_p50_ratio", "on/off", suite.LowerIsBetter, out.PublishP50Ratio, p50),
	}
	cfg.Finish(&out.Head, mon, suite.ValidityInput{HotUnchecked: "the replay has no hot phase"}, figs)
	return cfg.Emit(stdout, stderr, out, func(w io.Writer) error {
		fmt.Fprintf(w, "orbitkv-bench replay --kv-events compare: %d requests, %d clients, %d repeats, records of %d token ids\n\n",
			out.Off.Requests/uint64(max(cfg.Repeats, 1)), cfg.clients, cfg.Repeats, cfg.recordTok)
		fmt.Fprintf(w, "%-10s %14s %14s %14s %10s\n", "events", "requests/s", "query p50 ns", "publish p50 ns", "hit ratio")
		for _, r := range []struct {
			name string
			rep  *replayReport
		}{{"off", out.Off}, {"on", out.On}} {
			fmt.Fprintf(w, "%-10s %14.0f %14d %14d %10.4f\n", r.name, float64(r.rep.Requests)/r.rep.WallS, r.rep.RTT["query"].P50, r.rep.RTT["publish"].P50, r.rep.HitRatio)
		}
		fmt.Fprintf(w, "\nthroughput on/off %.3f (target ≥ 0.97), query p50 on/off %.3f (target ≤ 1.05), events received %d\n",
			out.ThroughputRatio, out.QueryP50Ratio, out.EventsReceived)
		return nil
	})
}
