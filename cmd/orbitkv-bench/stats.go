package main

// Stats summarises the round trips of one subject at one cadence. Field
// names and JSON keys are the report format of bench/channel/README.md.
type Stats struct {
	P50  uint64 `json:"p50_ns"`  // 50th percentile, ns, as latencyHist.quantile defines it
	P99  uint64 `json:"p99_ns"`  // 99th percentile, ns
	P999 uint64 `json:"p999_ns"` // 99.9th percentile, ns
	N    int    `json:"n"`       // timed round trips (warmup excluded)
}

// Report is the one JSON object `orbitkv-bench channel --json` prints.
// Maps are keyed by subject name; hists holds the histogram behind each
// Stats, keyed "CADENCE/SUBJECT" (cadence back_to_back or per_ms), for
// plots; IdleCPUPercent is null when the idle
// measurement did not run (orbitkv_ping not selected or --idle-seconds 0).
type Report struct {
	reportHead
	BackToBack     map[string]Stats `json:"back_to_back"`
	PerMs          map[string]Stats `json:"per_ms"`
	IdleCPUPercent *float64         `json:"idle_cpu_percent"`

	hists map[string]*latencyHist
}
