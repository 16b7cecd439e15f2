// Package index maps block keys (namespace, 16-byte block hash; DESIGN.md
// §5.4) to the blocks the RAM tier holds, and keeps the LRU order of the
// blocks that may be evicted.
//
// A block is Publishing from the moment its frames are allocated until its
// publish copy completes: it is invisible to lookups and cannot be evicted.
// Seal makes it Sealed and visible (DESIGN.md §6 rule 2). A sealed block
// with pins (a lease or an in-flight restore copy) is off the LRU list and
// cannot be evicted (rule 4); when its last pin drops it returns to the
// LRU's most-recent end.
//
// An Index is not safe for concurrent use: the dispatcher goroutine owns it.
package index
