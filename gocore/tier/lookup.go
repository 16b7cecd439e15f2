package tier

import (
	"sync"
	"sync/atomic"

	"github.com/axiomhq/hyperloglog"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
)

// The read path, one for untracked queries and tickets alike:
//
//	Lookup.Fetch: resident prefix ─► pinned while the SSD tail is read or warmed,
//	              or a peer's run fetched ─► unpinned
//
// then gocore/lease admits and grants the lease over the hits. The RAM
// prefix is pinned while reads make room in RAM, so the eviction they
// cause cannot take a block the caller is about to lease (it would then
// lease, and restore, another block's bytes).

// Chain is one lookup: hash positions [First, End) of a namespace's chain,
// whose block hashes are Hashes (abi.HashSize bytes each, as a descriptor
// carries them; 0 ≤ First ≤ End ≤ len(Hashes)/abi.HashSize).
type Chain struct {
	NS         abi.Namespace
	Hashes     []byte
	First, End int
	// Domain is whose blocks the chain's are: the blocks Fetch reads from
	// SSD or a peer count against it (index.NoDomain: no tenants).
	Domain index.Domain
}

// Hash is the chain's i-th block hash (position i from the chain's start,
// not from First).
func (c Chain) Hash(i int) abi.BlockHash {
	return abi.BlockHash(c.Hashes[i*abi.HashSize:])
}

// Tail is what Fetch does with the part of a chain past its RAM prefix.
type Tail uint8

// Tails.
const (
	SkipTail Tail = iota // nothing
	WarmTail             // warm it with no owner: the caller takes the RAM prefix now, the rest is for its next lookup
	ReadTail             // read it for the caller, who answers Loading meanwhile
)

// Lookup is the read path over the tiers (RAM → SSD → peer) with its
// counters. Fetch runs on the dispatcher goroutine; the counters' readers
// (Blocks, Logical) run on any.
type Lookup struct {
	t       *Tiers
	hits    []*index.Block // Fetch's scratch
	blocks  blockCounts
	logical logicalCounts
}

// NewLookup returns the read path over t.
func NewLookup(t *Tiers) *Lookup {
	return &Lookup{t: t, logical: logicalCounts{sketch: hyperloglog.New14()}}
}

// Fetch finds the resident prefix of c and, when the chain continues on
// SSD, reads the rest for r or warms it, as tail says; with ReadTail,
// when nothing past the prefix is on SSD, it fetches the run a peer
// advertises instead (Tiers.PeerFetch). The order is RAM, SSD, peer:
// cheapest first, each tier asked only for what the cheaper ones lack: a
// local SSD read costs no network round trip and pins nothing on another
// node, and a peer's run is fetched only from the first block neither
// local tier has (the rest of a chain after an SSD run is fetched by the
// lookup after that run landed). Warm-ups never fetch from peers. loading
// reports that the caller must answer Loading (reads run for the block
// after the prefix); started counts the reads begun for r, each of which
// r hears of once. The hits slice is the Lookup's scratch, valid until
// the next Fetch.
func (l *Lookup) Fetch(c Chain, tail Tail, r Reader) (hits []*index.Block, loading bool, started int) {
	t := l.t
	// Cleared, not only truncated: a stale pointer to a block removed
	// since would keep its slab alive (index.Index.newBlock).
	clear(l.hits)
	hits = t.idx.Prefix(c.NS, c.Hashes[c.First*abi.HashSize:c.End*abi.HashSize], l.hits[:0])
	l.hits = hits
	miss := c.First + len(hits)
	l.blocks.ram(len(hits), c.End-miss)
	if miss >= c.End || tail == SkipTail || !t.HasSSD() && (tail != ReadTail || !t.HasPeer()) {
		return hits, false, 0
	}
	t.idx.PinAll(hits)
	if tail == ReadTail {
		if t.HasSSD() {
			loading, started = t.Prefetch(r, c.Domain, c.NS, c.Hash, miss, c.End)
			if !loading || started > 0 { // a tail already loading was counted by the lookup that started it
				l.blocks.ssd(started, c.End-miss-started)
			}
		}
		if !loading {
			loading, started = t.PeerFetch(r, c.Domain, c.NS, c.Hash, miss, c.End) // counts its own lookups
		}
	} else {
		warmed := t.Warm(c.Domain, c.NS, c.Hash, miss, c.End)
		l.blocks.ssd(warmed, c.End-miss-warmed)
	}
	t.idx.UnpinAll(hits)
	return hits, loading, started
}

// Extent is how many leading blocks of c's chain are resident in RAM, and
// how many are in RAM and then on SSD (a discovery query's answer); it
// reads nothing, and counts the RAM part as a Fetch with SkipTail does.
func (l *Lookup) Extent(c Chain) (ram, avail int) {
	hits, _, _ := l.Fetch(c, SkipTail, nil)
	ram = c.First + len(hits)
	avail = ram
	for avail < c.End && l.t.OnSSD(index.Key{NS: c.NS, Hash: c.Hash(avail)}) {
		avail++
	}
	return ram, avail
}

// Warm starts reading c's SSD run past its RAM prefix with no owner (a
// warm-up query), within the warm-up budget; it returns the RAM prefix and
// the blocks whose reads started.
func (l *Lookup) Warm(c Chain) (ram, warming int) {
	hits, _, _ := l.Fetch(c, SkipTail, nil)
	ram = c.First + len(hits)
	if ram < c.End {
		warming = l.t.Warm(c.Domain, c.NS, c.Hash, ram, c.End)
	}
	return ram, warming
}

// Index is the block index the lookups read (the caller pins the blocks
// it holds there).
func (l *Lookup) Index() *index.Index { return l.t.idx }

// LookupBlocks counts the blocks Fetch looked up, per tier and result,
// since start. RAM: the chain's resident prefix is a hit, the rest of the
// chain a miss (every Fetch, whatever its Tail). SSD: only lookups that
// consult the SSD tier (a Tail other than SkipTail, an SSD tier, a RAM
// miss): the blocks whose read the lookup started are hits, the rest of
// the RAM misses are misses (not on SSD, past a prefetch run, or skipped
// for the warm-up budget); a lookup whose tail is already being read by
// an earlier one counts no SSD blocks. A ticket resolved again after its
// reads looks up again and counts again. Peer lookups are PeerStats'.
type LookupBlocks struct {
	RAMHit, RAMMiss, SSDHit, SSDMiss uint64
}

// Blocks returns the block counters; safe from any goroutine.
func (l *Lookup) Blocks() LookupBlocks {
	b := &l.blocks
	return LookupBlocks{RAMHit: b.ramHit.Load(), RAMMiss: b.ramMiss.Load(), SSDHit: b.ssdHit.Load(), SSDMiss: b.ssdMiss.Load()}
}

// blockCounts is written by the dispatcher goroutine and read by Blocks
// from any goroutine: each counter is its own atomic, so a snapshot may
// mix two lookups' figures, never tear one counter.
type blockCounts struct {
	ramHit, ramMiss, ssdHit, ssdMiss atomic.Uint64
}

func (b *blockCounts) ram(hit, miss int) {
	b.ramHit.Add(uint64(hit))
	if miss > 0 {
		b.ramMiss.Add(uint64(miss))
	}
}

func (b *blockCounts) ssd(hit, miss int) {
	if hit > 0 {
		b.ssdHit.Add(uint64(hit))
	}
	if miss > 0 {
		b.ssdMiss.Add(uint64(miss))
	}
}

// Count counts one logical lookup of the chain of ns ending in last (an
// untracked query, or a ticket but for recovery reads and warm-ups; the
// caller decides). Lookups are keyed by namespace and the last block hash
// of the chain: block hashes are chained, so the last one names the whole
// prefix. Dispatcher goroutine.
func (l *Lookup) Count(ns abi.Namespace, last abi.BlockHash) {
	var key [32]byte
	copy(key[:16], ns[:])
	copy(key[16:], last[:])
	c := &l.logical
	c.mu.Lock()
	c.sketch.Insert(key[:])
	c.total++
	c.mu.Unlock()
}

// Logical returns the logical lookups counted and an estimate of how many
// were distinct; safe from any goroutine.
func (l *Lookup) Logical() (total, distinct uint64) {
	c := &l.logical
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.sketch.Estimate()
}

// logicalCounts estimates distinct lookups with a HyperLogLog sketch
// (github.com/axiomhq/hyperloglog, precision 14: about 0.8% standard
// error in 16 KiB). A mutex (uncontended but for Health and /metrics
// reads) guards the sketch.
type logicalCounts struct {
	mu     sync.Mutex
	sketch *hyperloglog.Sketch
	total  uint64
}
