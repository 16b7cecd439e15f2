//go:build amd64 || arm64

package index

// prefetchN asks the CPU to bring the cache line at each of the n
// addresses p[0..n) into its caches (PREFETCHT0 on amd64, PRFM PLDL1KEEP
// on arm64) and returns at once: unlike a load, a prefetch does not hold
// up the instructions behind it until the line arrives. One call serves a
// whole group of Prefix's keys: a call per address cost a fifth of a
// chain lookup (orbitkv-bench query). A hint only: the addresses are never
// dereferenced, any value is safe, and they need not keep anything alive.
// n ≤ 0 prefetches nothing.
//
//go:noescape
func prefetchN(p *uintptr, n int)
