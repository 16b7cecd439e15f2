// Package profiling pushes the Manager's continuous profiles to a Grafana
// Pyroscope server (github.com/grafana/pyroscope-go): CPU, heap
// (allocated and in-use objects and bytes), goroutines, mutex contention
// and blocking, each interval, tagged with the node id, the epoch and the
// version so a dashboard can tell Managers and restarts apart.
//
// It is off unless Spec.URL is set. Start never waits for the server: the
// pushes run on pyroscope-go's goroutines, a server that is down or
// refuses them costs one log line when uploads start failing (and one
// when they succeed again), never one per upload, and profiles that
// cannot be sent are dropped.
//
// Pushing sets the runtime's mutex and block profile rates (MutexFraction,
// BlockRate: low enough in overhead for a production Manager) for as long
// as it runs; Stop restores them. While it runs the process's CPU
// profiler is the push's: ServeCPUProfile, the Manager's
// /debug/pprof/profile, shares its samples with a request instead of
// failing as net/http/pprof's would.
//
// Only gocore/manager imports it; it imports gocore/limit for its Spec's
// errors.
package profiling
