// Package index maps block keys (namespace, 16-byte block hash; docs/design.md
// §5.4) to the blocks the RAM tier holds, and drives the eviction policy
// (gocore/evict) over the blocks that may be evicted.
//
// A block is Publishing from the moment its frames are allocated until its
// publish copy completes: it is invisible to lookups and cannot be evicted.
// Seal makes it Sealed and visible (docs/design.md §6 rule 2). A sealed block
// with pins (a lease or an in-flight restore copy) cannot be evicted (rule
// 4). The first pin is an access for the policy; the Index counts it in
// the block and shows it, and the pin, to the policy only when the policy
// proposes the block for eviction (gocore/evict, "Deferred accesses"), in
// the event order gocore/evict.Policy documents (the policy simulator of
// `orbitkv-bench policy` replays the same order). A query therefore reads
// and writes one cache line per block: the block record, which is one line.
//
// Blocks are allocated from slabs of 63 consecutive lines in Insert order,
// so a chain published in order is a dense run of lines, and Prefix reads
// it by address, going to the key → block table only where a run ends
// (Index.Prefix; the memory this can retain: Index.newBlock).
//
// An Index is not safe for concurrent use: the dispatcher goroutine owns it.
package index
