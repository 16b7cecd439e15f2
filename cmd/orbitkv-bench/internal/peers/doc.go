// Package peers is the peers suite (orbitkv-bench peers): OrbitKV beside
// LMCache's multiprocess server in one run: lookup round trips (p50/p99,
// µs), store and retrieve GB/s, and their ratios; LMCache is driven by a
// Python driver from the engines' environment.
package peers
