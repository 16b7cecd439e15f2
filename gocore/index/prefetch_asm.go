//go:build amd64 || arm64

package index

import "unsafe"

// prefetch asks the CPU to bring the cache line at p into its caches
// (PREFETCHT0 on amd64, PRFM PLDL1KEEP on arm64) and returns at once: unlike
// a load, it does not hold up the instructions behind it until the line
// arrives. A hint only: p is never dereferenced, any address is safe.
//
//go:noescape
func prefetch(p unsafe.Pointer)
