// Package latency holds orbitkv-bench's HDR histogram of durations in
// nanoseconds (Hist: 3 significant digits, 1 ns to 1 h), its summary
// (Stats: p50, p99, p99.9 and the count, ns), its CDF points, its compact
// encoding between a replay worker and its parent (DecodeHist bounds
// hostile input), and RTT, the round-trip summary the reports print.
// Only packages of cmd/orbitkv-bench import it.
package latency
