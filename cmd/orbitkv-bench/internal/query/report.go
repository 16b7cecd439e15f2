package query

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// Targets of the query suite (bench/README.md "query").
const (
	// queryTarget: a QueryBundle of 32 resident hashes has a hot p50
	// round trip of at most 5 µs.
	queryTarget = 5 * time.Microsecond
	// serverNsPerHashTarget: the Manager's time per hash of the largest
	// row, at 1M resident blocks, on a machine whose probe (probeTable)
	// costs at most probeFastNs per key.
	serverNsPerHashTarget = 50.0
	probeFastNs           = 33.0
	// serverPerProbeTarget: the Manager's time per hash of the largest row
	// at most this multiple of the bare probe's per key, same run.
	serverPerProbeTarget = 1.5
	// linearSlack: "linear in the hash count" holds when the cost per hash
	// never rises by more than this factor from a row to the next larger.
	linearSlack = 1.25
	// pollOverPing: a poll of a pending ticket costs at most a Ping plus this.
	pollOverPing = time.Microsecond
)

// QueryRow is one --hashes count.
type QueryRow struct {
	Hashes           int         `json:"hashes"`
	RTT              latency.RTT `json:"rtt_ns"`              // hot (back to back)
	ColdRTT          latency.RTT `json:"cold_rtt_ns"`         // after --cold-gap
	ServerNsPerHash  float64     `json:"server_ns_per_hash"`  // Δ server ns / Δ hashes over the hot queries
	ServerNsPerQuery float64     `json:"server_ns_per_query"` // the same per query
	ServerHashes     uint64      `json:"server_hashes"`       // Δ orbitkv_query_hashes_total it was computed from
}

// QueryReport is the JSON of `orbitkv-bench query --json`.
type QueryReport struct {
	suite.Head
	ResidentBlocks  int     `json:"resident_blocks"`
	ServerNsPerHash float64 `json:"server_ns_per_hash"` // the largest row's
	// The machine yardstick (probeTable over resident_blocks keys), the
	// median over the repeats, and the largest row's server ns/hash over it.
	ProbeNsPerKey       float64     `json:"probe_ns_per_key"`
	ProbeSerialNsPerKey float64     `json:"probe_serial_ns_per_key"` // the chase: memory latency, context only
	ServerPerProbe      float64     `json:"server_per_probe"`
	Rows                []QueryRow  `json:"rows"`        // ascending hash counts
	PollRTT             latency.RTT `json:"poll_rtt_ns"` // Poll of a pending ticket, hot
	PingRTT             latency.RTT `json:"ping_rtt_ns"` // Ping alternating with it, hot
	PollColdRTT         latency.RTT `json:"poll_cold_rtt_ns"`
	PingColdRTT         latency.RTT `json:"ping_cold_rtt_ns"`
	BlockBytes          uint64      `json:"block_bytes"`
	ManagerBlocks       uint64      `json:"manager_blocks"` // resident blocks the Manager reported
	PublishS            float64     `json:"publish_s"`      // publishing the resident blocks
	ManagerStartS       float64     `json:"manager_start_s"`
	RAMCapacityBytes    uint64      `json:"ram_capacity_bytes"`
	SameChain           bool        `json:"same_chain"`
	Scattered           bool        `json:"scattered"` // --scattered: published in a shuffled order

	// Hists holds the histogram behind each rtt, for plots: keyed
	// "query N/hot", "query N/cold", "ping/hot", "poll/cold", ….
	Hists map[string]*latency.Hist `json:"-"`
}

// marginal is the Manager's extra time per extra hash from row i-1 to row
// i (0 for the first row).
func (rep *QueryReport) marginal(i int) float64 {
	if i == 0 {
		return 0
	}
	a, b := rep.Rows[i-1], rep.Rows[i]
	return (b.ServerNsPerQuery - a.ServerNsPerQuery) / float64(b.Hashes-a.Hashes)
}

func writeQueryTable(w io.Writer, header string, rep *QueryReport) error {
	fmt.Fprintln(w, header)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\thashes\tp50 µs\tp99 µs\tp99.9 µs\tn\tp50 / ping\tserver ns/hash\tserver µs/query\tmarginal ns/hash\tcold p50 µs\tcold p99 µs\tcold p50 / ping\t")
	ping, pingCold := rep.PingRTT.P50, rep.PingColdRTT.P50
	for i, r := range rep.Rows {
		marginal := "-"
		if i > 0 {
			marginal = fmt.Sprintf("%.1f", rep.marginal(i))
		}
		fmt.Fprintf(tw, "query\t%d\t%s\t%s\t%s\t%d\t%s\t%.1f\t%.2f\t%s\t%s\t%s\t%s\t\n", r.Hashes,
			suite.Us(r.RTT.P50), suite.Us(r.RTT.P99), suite.Us(r.RTT.P999), r.RTT.N, suite.Ratio(r.RTT.P50, ping),
			r.ServerNsPerHash, r.ServerNsPerQuery/1000, marginal,
			suite.Us(r.ColdRTT.P50), suite.Us(r.ColdRTT.P99), suite.Ratio(r.ColdRTT.P50, pingCold))
	}
	for _, op := range []struct {
		name      string
		hot, cold latency.RTT
	}{{"ping", rep.PingRTT, rep.PingColdRTT}, {"poll (pending)", rep.PollRTT, rep.PollColdRTT}} {
		fmt.Fprintf(tw, "%s\t-\t%s\t%s\t%s\t%d\t%s\t-\t-\t-\t%s\t%s\t%s\t\n", op.name,
			suite.Us(op.hot.P50), suite.Us(op.hot.P99), suite.Us(op.hot.P999), op.hot.N, suite.Ratio(op.hot.P50, ping),
			suite.Us(op.cold.P50), suite.Us(op.cold.P99), suite.Ratio(op.cold.P50, pingCold))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return suite.WriteTargets(w, suite.TargetsSource, suite.TargetsInformational, queryTargets(rep))
}

// queryTargets checks the targets the report has the numbers for.
func queryTargets(rep *QueryReport) []suite.Target {
	var out []suite.Target
	for _, r := range rep.Rows {
		if r.Hashes == 32 {
			out = append(out, suite.Target{Name: fmt.Sprintf("QueryBundle of 32 resident hashes, hot p50 ≤ %v", queryTarget),
				Measured: suite.Us(r.RTT.P50) + " µs", Ok: time.Duration(r.RTT.P50) <= queryTarget})
		}
	}
	last := rep.Rows[len(rep.Rows)-1]
	at := fmt.Sprintf("%d resident blocks", rep.ResidentBlocks)
	if rep.ResidentBlocks < 1000000 {
		at += "; the target is stated at 1,000,000"
	}
	out = append(out, suite.Target{Name: fmt.Sprintf("server time per hash, %d hashes (%s) ≤ %.1fx the bare probe", last.Hashes, at, serverPerProbeTarget),
		Measured: fmt.Sprintf("%.1f ns / %.1f ns = %.2fx", rep.ServerNsPerHash, rep.ProbeNsPerKey, rep.ServerPerProbe), Ok: rep.ServerPerProbe > 0 && rep.ServerPerProbe <= serverPerProbeTarget})
	abs := fmt.Sprintf("server time per hash, %d hashes (%s) ≤ %.0f ns where the probe is ≤ %.0f ns", last.Hashes, at, serverNsPerHashTarget, probeFastNs)
	if rep.ProbeNsPerKey > probeFastNs {
		abs += fmt.Sprintf(" (the probe is %.1f ns here: not this machine's target)", rep.ProbeNsPerKey)
	}
	out = append(out, suite.Target{Name: abs, Measured: fmt.Sprintf("%.1f ns", rep.ServerNsPerHash), Ok: rep.ServerNsPerHash <= serverNsPerHashTarget})
	if len(rep.Rows) > 1 {
		var server, client []string
		serverOK, clientOK := true, true
		for i, r := range rep.Rows {
			server = append(server, fmt.Sprintf("%.1f", r.ServerNsPerHash))
			client = append(client, fmt.Sprintf("%.1f", float64(r.RTT.P50)/float64(r.Hashes)))
			if i > 0 {
				p := rep.Rows[i-1]
				serverOK = serverOK && r.ServerNsPerHash <= linearSlack*p.ServerNsPerHash
				clientOK = clientOK && float64(r.RTT.P50)/float64(r.Hashes) <= linearSlack*float64(p.RTT.P50)/float64(p.Hashes)
			}
		}
		out = append(out,
			suite.Target{Name: fmt.Sprintf("linear: server ns/hash never rises > %.2fx to the next row", linearSlack), Measured: strings.Join(server, ", "), Ok: serverOK},
			suite.Target{Name: fmt.Sprintf("linear: round-trip p50 ns/hash never rises > %.2fx to the next row", linearSlack), Measured: strings.Join(client, ", "), Ok: clientOK})
	}
	for _, p := range []struct {
		name       string
		poll, ping uint64
	}{{"p50", rep.PollRTT.P50, rep.PingRTT.P50}, {"p99", rep.PollRTT.P99, rep.PingRTT.P99}} {
		out = append(out, suite.Target{Name: fmt.Sprintf("poll of a pending ticket, hot %s ≤ ping + %v", p.name, pollOverPing),
			Measured: fmt.Sprintf("%s µs vs ping %s µs (%+.2f µs)", suite.Us(p.poll), suite.Us(p.ping), (float64(p.poll)-float64(p.ping))/1000),
			Ok:       time.Duration(p.poll) <= time.Duration(p.ping)+pollOverPing})
	}
	return out
}
