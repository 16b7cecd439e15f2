package lease

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/tier"
)

// The lookup path, one for untracked queries and tickets alike:
//
//	Fetch:   resident prefix ─► pinned while the SSD tail is read or warmed ─► unpinned
//	Acquire: lease limits and byte budget ─► lease granted, queued, or refused
//
// The RAM prefix is pinned while reads make room in RAM, so the eviction
// they cause cannot take a block the caller is about to lease (it would
// then lease, and restore, another block's bytes).

// Chain is one lookup: hash positions [First, End) of a namespace's chain,
// whose block hashes are Hashes (abi.HashSize bytes each, as a descriptor
// carries them; 0 ≤ First ≤ End ≤ len(Hashes)/abi.HashSize).
type Chain struct {
	NS         abi.Namespace
	Hashes     []byte
	First, End int
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

// Fetch finds the resident prefix of c and, when the chain continues on
// SSD, reads the rest for r or warms it, as t says; with ReadTail, when
// nothing past the prefix is on SSD, it fetches the run a peer advertises
// instead (tier.Tiers.PeerFetch). The order is RAM, SSD, peer: cheapest
// first, each tier asked only for what the cheaper ones lack: a local SSD
// read costs no network round trip and pins nothing on another node, and
// a peer's run is fetched only from the first block neither local tier
// has (the rest of a chain after an SSD run is fetched by the lookup
// after that run landed). Warm-ups never fetch from peers. loading reports that
// the caller must answer Loading (reads run for the block after the
// prefix); started counts the reads begun for r, each of which r hears of
// once. The hits slice is the Book's scratch, valid until the next Fetch.
func (b *Book[W]) Fetch(c Chain, t Tail, r tier.Reader) (hits []*index.Block, loading bool, started int) {
	// Cleared, not only truncated: a stale pointer to a block removed
	// since would keep its slab alive (index.Index.newBlock).
	clear(b.hits)
	hits = b.idx.Prefix(c.NS, c.Hashes[c.First*abi.HashSize:c.End*abi.HashSize], b.hits[:0])
	b.hits = hits
	miss := c.First + len(hits)
	b.looked.ram(len(hits), c.End-miss)
	if miss >= c.End || t == SkipTail || !b.tiers.HasSSD() && (t != ReadTail || !b.tiers.HasPeer()) {
		return hits, false, 0
	}
	b.idx.PinAll(hits)
	if t == ReadTail {
		if b.tiers.HasSSD() {
			loading, started = b.tiers.Prefetch(r, c.NS, c.Hash, miss, c.End)
			if !loading || started > 0 { // a tail already loading was counted by the lookup that started it
				b.looked.ssd(started, c.End-miss-started)
			}
		}
		if !loading {
			loading, started = b.tiers.PeerFetch(r, c.NS, c.Hash, miss, c.End) // counts its own lookups
		}
	} else {
		warmed := b.tiers.Warm(c.NS, c.Hash, miss, c.End)
		b.looked.ssd(warmed, c.End-miss-warmed)
	}
	b.idx.UnpinAll(hits)
	return hits, loading, started
}

// Acquire leases hits (copied into a slice of the Book's, which End takes
// back) for o if Admit grants it; queued says the caller already waits in
// the budget queue.
func (b *Book[W]) Acquire(o Owner, hits []*index.Block, queued bool) (Verdict, *Lease) {
	bytes := sumBytes(hits)
	ow := b.t.byOwner[o] // one lookup serves the limits and the grant: this is every query's path
	v := b.admit(ow, len(hits), bytes, queued)
	if v != Grant {
		return v, nil
	}
	blocks := b.slices.get(len(hits))
	copy(blocks, hits)
	l := b.grant(o, ow, blocks, bytes)
	l.pooled = true
	return v, l
}
