// Package wake is the wake suite (orbitkv-bench wake): what a thread pays
// right after a sleep (two clock reads, a Go call, a cgo call, N dependent
// cache lines), cold against warm, in ns.
package wake
