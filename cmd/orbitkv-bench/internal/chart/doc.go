// Package chart draws the PNG charts of --plot: lines of GB/s against
// block size (Throughput) with the spread of the repeats, latency CDFs
// (CDF) and plain line charts (Line), each Width × Height pixels and
// titled with the suite, the host and the commit (Host). Errors wrap the
// refusal of a chart that cannot be drawn. Only the suites import it.
package chart
