// Package index maps block keys (namespace, 16-byte block hash; DESIGN.md
// §5.4) to the blocks the RAM tier holds, and drives the eviction policy
// (gocore/evict) over the blocks that may be evicted.
//
// A block is Publishing from the moment its frames are allocated until its
// publish copy completes: it is invisible to lookups and cannot be evicted.
// Seal makes it Sealed and visible (DESIGN.md §6 rule 2). A sealed block
// with pins (a lease or an in-flight restore copy) is pinned in the policy
// and cannot be evicted (rule 4); the policy sees the first pin as an
// access and the last unpin as the block becoming evictable again, in the
// event order gocore/evict.Policy documents (the policy simulator of
// `orbitkv-bench policy` replays the same order).
//
// An Index is not safe for concurrent use: the dispatcher goroutine owns it.
package index
