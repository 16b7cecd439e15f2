// Package evict holds the RAM tier's eviction policies, the trace-driven
// simulator that measures them, and the offline optimum they are measured
// against.
//
// A Policy decides which resident block to evict; it never frees anything
// itself. gocore/index embeds a Node in every block and drives the policy
// with the event sequence Policy documents; Simulate drives it with the
// same sequence from a trace, so `orbitkv-bench policy` predicts what the
// Manager's --eviction choice does (the live replay agrees within 0.01).
// New and Names serve the --eviction flag; Default is the Manager's choice.
//
// # Policies
//
//   - lru: least recently used: Insert and Unpin push to the front, Pin
//     takes a node off the list, Victim is the back (with deferred accesses,
//     below: CLOCK).
//   - slru (Default): segmented LRU (Karedla, Love and Wherry, 1994). New
//     blocks enter probation; a block accessed twice (two leases, or a lease
//     and a publish that found it present) moves to the protected segment, at
//     most 20% of the resident blocks, whose overflow is demoted to the front
//     of probation with one access left. A ghost (2Q's A1out) remembers the
//     keys of as many probation evictions as there are resident blocks; a
//     block published again while its key is remembered was evicted too early
//     and enters protected directly.
//   - s3fifo: S3-FIFO (Yang et al., SOSP'23) with the paper's sizes: a small
//     FIFO (10%) that new blocks enter, a main FIFO with a 2-bit frequency and
//     reinsertion, a ghost FIFO (90%) of keys evicted from small.
//
// Both slru and s3fifo are prefix-aware. A Publish's fresh blocks reach the
// policy as consecutive Inserts with increasing Depth (chainRun); the newest
// of such a run, the chain's tail, waits in a list evicted before anything
// else until the next block of its chain arrives, and the chain's blocks
// queue head newest so that a chain is evicted tail first. The tail is the
// prompt's partial last block in the Mooncake traces: 0.8% of chain tails
// are ever reused against 24% of other blocks, and evicting a tail never
// strands the blocks before it, while evicting a head makes every block
// after it useless.
//
// Queue fractions apply to the number of resident blocks: eviction runs
// only when the cache is full, when that number is the capacity, so the
// capacityBlocks the constructors take only presizes the ghost; the
// Manager's approximate block count (bytes over block bytes) cannot skew a
// policy. Measured against sizing by the exact capacity: the same hit
// ratios to 0.0005.
//
// # Pins
//
// A pinned block (a lease, a restore copy, a publish that found it
// present) is never returned by Victim, keeps the frequency it has, and is
// never rescanned: lru and slru unlink it on Pin and relink it on Unpin;
// s3fifo leaves it in place (Pin only counts the access, as S3-FIFO's hits
// do) and Victim sets it aside, off every list, the first time it meets it,
// to return to the new end of its queue on Unpin. So Victim is amortised
// O(1) and returns nil when every resident block is pinned.
//
// # Deferred accesses
//
// gocore/index and Simulate do not call Pin and Unpin on every lookup:
// they count each block's accesses beside its pin count and show them to
// the policy only when Victim proposes the block (Reveal, deferred.go). A
// query then touches no policy state, and no other block's node (a list
// unlink touches both neighbours: two cache misses per block at a million
// resident). The policies see accesses in the order their blocks reach the
// eviction end, so lru behaves as CLOCK and slru as a segmented CLOCK. On
// the Mooncake conversation trace against the eager order (bench/README.md,
// policy): slru +0.0022 at 5% capacity, +0.0005 at 10%, −0.0013 at 25%,
// −0.0005 at 50%; lru +0.0063 at 5%, −0.0004 at 50%; s3fifo (whose Pin
// only counted the access already) within 0.0001.
//
// # Measurements
//
// bench/README.md (policy) has the table. On the Mooncake conversation
// trace slru closes 10% (5% capacity) and 16% (10%) of the gap between lru
// and the optimum and beats lru at every capacity of the default run
// (with eager accesses: at every capacity tried from 1% to 100%);
// s3fifo loses to lru from 7.5% up, because its small queue evicts blocks
// long before their first reuse (a median 7,700 new blocks later).
// The trace is a prefix tree in which 76% of blocks are never reused and
// nothing visible at insertion predicts which: even an LRU told by an
// oracle never to store those blocks closes only 69% of the gap at 5%.
//
// # Simulator and optimum
//
// Simulate replays a trace as one client (query, publish, release; see its
// comment for the exact events). Optimum is Belady's MIN with bypass under
// the prefix-hit rule, using next uses that could hit at all; it is not a
// proven optimum under that rule but bounds every policy here in practice,
// and on the conversation trace reaches the infinite-cache bound at 5%
// capacity.
//
// Importers: gocore/index (the Manager's block index), cmd/orbitkv-bench.
package evict
