package latency

import ()

// RTT is a round-trip summary in the JSON of the query suite.
type RTT struct {
	P50  uint64 `json:"p50"`  // ns, as latencyHist.quantile defines it
	P99  uint64 `json:"p99"`  // ns
	P999 uint64 `json:"p999"` // ns
	N    int    `json:"n"`    // timed round trips
}

func RTTOf(s Stats) RTT { return RTT{P50: s.P50, P99: s.P99, P999: s.P999, N: s.N} }
