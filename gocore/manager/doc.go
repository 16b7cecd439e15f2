// Package manager builds a whole Manager from one Spec: the session table
// (gocore/session), the channel dispatcher (gocore/channel) serving the
// cache service (gocore/cache: tiers, leases, tickets, copy engine), the
// bootstrap server (gocore/bootstrap), the shared-memory discovery indexes
// (gocore/discover, fed by the block index, handed out by the bootstrap
// server's MapDiscovery), the operator socket (gocore/operator: its
// commands are this package's operator.go, run on the dispatcher), this
// node's part in a cluster when Spec.Cluster is set (gocore/cluster:
// manager.go and cluster.go hand its Fetcher and Advertiser to the tiers
// and the cache's transfer pins to peer control), and the HTTP endpoints
// on a loopback address (/livez, /readyz, /health, /metrics, pprof).
// cmd/orbitkv-manager turns flags into a Spec and calls Run; tests and
// harnesses use New, Serve and Close.
//
// Every limit is declared once, beside the Spec it bounds, and Validate
// reports each violation as a *limit.Error naming the field. Dependencies
// run one way: the Manager wires the transport (channel) to its handler
// (cache), and the cluster to the tiers and the cache; none of them knows
// the others' packages. layout_test.go keeps the module's import graph to
// its layers (docs/design.md §4.2).
//
// Threading: the cache and everything below it belong to the dispatcher
// goroutine; the operator's commands and the cluster's transfer pins reach
// them only through channel.Dispatcher.Do. New builds in order and, on an
// error, undoes what it made, newest first. Close stops the operator
// socket and the sessions, leaves the cluster while the dispatcher still
// runs, stops the dispatcher and the cache, closes the cluster's
// requester side and stops the HTTP endpoints last; Run's shutdown takes
// the same steps (and stops the profiling push) under one deadline,
// Spec.ShutdownTimeout.
package manager
