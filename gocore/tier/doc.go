// Package tier places blocks in the tiers below the engine (DESIGN.md §7):
// the RAM tier (gocore/tier/ram, chunked frames), the block index over it
// (gocore/index, with the eviction policy of gocore/evict), and, when
// configured, the SSD tier (gocore/tier/ssd) below RAM.
//
//   - Room: MakeRoom evicts the policy's victims, never a pinned block,
//     until enough chunks are free; an evicted block is demoted to SSD
//     first (write-behind: its bytes are copied into a page-aligned staging
//     buffer so its frames are free at once; no staging buffer free, and it
//     is not demoted, counted).
//   - Prefetch: a chain that continues on SSD past its RAM prefix is read
//     into newly allocated frames as Publishing (invisible) blocks; reads
//     complete on store goroutines, which queue the result and ring the
//     dispatcher; Complete seals the block (visible) or, on a checksum or
//     I/O error, discards it: a block that fails its checksum is a miss,
//     never served. A Reader (the session or ticket that asked) hears of
//     each read; warm-ups have none and are bounded by the warmup budget.
//
// Threading: a Tiers is owned by the dispatcher goroutine; only Stats and
// Outstanding are safe from others. Close has no deadline: an SSD read may
// still write RAM frames, and freeing them first is what DESIGN.md §6 rule
// 9 forbids.
package tier
