// Package replay is the replay suite (orbitkv-bench replay), the main
// job: a Mooncake trace replayed by N client processes (the hidden
// __replay-worker subcommand, RunWorker), each request a query, a restore
// verified byte by byte, a publish and a release; hit ratio against the
// bound, verified bytes, latency; on one node or a cluster of Managers
// under etcd. Method: bench/README.md "replay".
package replay
