package latency

import ()

// Stats summarises the round trips of one subject at one cadence. Field
// names and JSON keys are the report format of bench/channel/README.md.
type Stats struct {
	P50  uint64 `json:"p50_ns"`  // 50th percentile, ns, as latencyHist.quantile defines it
	P99  uint64 `json:"p99_ns"`  // 99th percentile, ns
	P999 uint64 `json:"p999_ns"` // 99.9th percentile, ns
	N    int    `json:"n"`       // timed round trips (warmup excluded)
}
