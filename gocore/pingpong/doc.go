// Package pingpong gives the bench tools (cmd/orbitkv-bench) the round-trip
// measurement loops that live in gocore/internal/native: the raw baselines
// (shared-memory spin, futex, Unix socket) and okv_ping through liborbitkv.
//
// It exists because Go's internal rule lets only packages under gocore/
// import gocore/internal/native, while the bench binary lives under cmd/.
// It adds no logic: every name is an alias of, or a thin call into, the
// native package, so the one-cgo-crossing-per-run property of the loops is
// kept (bench/channel/README.md states the method).
//
// Who may import it: bench tools and tests. The Manager must not.
package pingpong
