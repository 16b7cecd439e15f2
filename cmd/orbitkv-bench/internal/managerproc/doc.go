// Package managerproc is the Manager process a suite measures: started
// from a binary with a RAM tier (Launch, RAMSpec), or one already serving a
// socket (External); stopped on SIGTERM then SIGKILL after StopGrace, and
// on the bench's own SIGINT/SIGTERM (StopOnSignal); connected to
// (Connect); read through GET /health (ReadHealth) and /metrics
// (ScrapeMetrics, ScrapeParks); its CPU time from /proc (CPUTicks, in clock
// ticks).
package managerproc
