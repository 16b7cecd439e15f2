// Package tier places blocks in the tiers below the engine (docs/design.md §7):
// the RAM tier (gocore/tier/ram, chunked frames), the block index over it
// (gocore/index, with the eviction policy of gocore/evict), and, when
// configured, the SSD tier (gocore/tier/ssd) below RAM and the peer tier
// (blocks other Managers advertise, fetched through a Remote) below SSD.
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
//   - Peer fetch (peer.go, with Spec.Remote): a chain that continues past
//     its RAM prefix, with nothing of it on SSD, into blocks a live peer
//     advertises is fetched from that peer as Prefetch reads SSD: the
//     query answers Loading; the fetch runs on a goroutine of its own
//     (Remote.Fetch: open the transfer, READs, release); once the peer
//     says which run it serves and how long each block is, the dispatcher
//     places frames (Publishing replicas) through a place event; the
//     goroutine checks each landed block's CRC32C; Complete seals the
//     blocks that landed whole and checked, and discards the rest (a
//     failed, late or corrupt fetch is a miss, its frames freed). Every
//     fetch has a deadline (Spec.PeerTimeout); Close cancels them and
//     waits. Order: RAM, SSD, peer, cheapest first (Lookup.Fetch, lookup.go).
//   - Domain quotas (quota.go): the blocks of a tenant domain stay within
//     its RAM and SSD quotas; a publish over the RAM quota first evicts
//     the domain's own oldest unpinned blocks (as MakeRoom evicts), and
//     is refused when that would not do; a demotion over the SSD quota
//     first deletes the domain's oldest SSD blocks, and is not admitted
//     when that would not do.
//   - Replicas and advertising (advertise.go): a block fetched from a peer
//     is a replica, evicted before any block this node produced (the
//     index's replica LRU goes first), never demoted to SSD and never
//     advertised; own blocks are advertised to the Advertiser
//     (cluster.Advertiser, which forwards to the catalog) when sealed in
//     RAM and withdrawn when they leave it.
//
// Threading: a Tiers is owned by the dispatcher goroutine; only Counters and
// Outstanding are safe from others. Peer fetch goroutines touch only the
// frames placed for them, and talk to the dispatcher through a bounded
// event queue (at most two events per fetch: a send never blocks). Close has no deadline: an SSD read may
// still write RAM frames, and freeing them first is what docs/design.md §6 rule
// 9 forbids.
package tier
