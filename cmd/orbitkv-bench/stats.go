package main

import "slices"

// Stats summarises the round trips of one subject at one cadence. Field
// names and JSON keys are the report format of bench/channel/README.md.
type Stats struct {
	P50  uint64 `json:"p50_ns"`  // nearest-rank 50th percentile, ns
	P99  uint64 `json:"p99_ns"`  // nearest-rank 99th percentile, ns
	P999 uint64 `json:"p999_ns"` // nearest-rank 99.9th percentile, ns
	N    int    `json:"n"`       // timed round trips (warmup excluded)
}

// Report is the one JSON object `orbitkv-bench channel --json` prints.
// Maps are keyed by subject name; IdleCPUPercent is null when the idle
// measurement did not run (orbitkv_ping not selected or --idle-seconds 0).
type Report struct {
	BackToBack     map[string]Stats `json:"back_to_back"`
	PerMs          map[string]Stats `json:"per_ms"`
	IdleCPUPercent *float64         `json:"idle_cpu_percent"`
}

// summarize sorts samples in place and returns their nearest-rank
// percentiles. An empty slice gives the zero Stats.
func summarize(samples []uint64) Stats {
	slices.Sort(samples)
	return Stats{
		P50:  percentile(samples, 500),
		P99:  percentile(samples, 990),
		P999: percentile(samples, 999),
		N:    len(samples),
	}
}

// percentile returns the nearest-rank percentile of sorted samples, with the
// rank given in per mille (500 = p50, 999 = p99.9): the smallest sample such
// that at least perMille/1000 of all samples are ≤ it, i.e. sorted[r-1] with
// r = ceil(perMille·n/1000), r ≥ 1. It never interpolates, so every value it
// returns was measured. Integer arithmetic keeps p99.9 exact.
func percentile(sorted []uint64, perMille int) uint64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	r := (perMille*n + 999) / 1000
	r = max(r, 1)
	r = min(r, n)
	return sorted[r-1]
}
