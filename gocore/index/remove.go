package index

import "github.com/orbitkv/orbitkv/gocore/abi"

// Matching returns every block (sealed or publishing) whose namespace
// match accepts, in table order. It walks the whole table: O(capacity),
// for operator commands (evict, flush), never a request path.
func (x *Index) Matching(match func(abi.Namespace) bool) []*Block {
	var out []*Block
	for _, s := range x.m.slots {
		if s.blk != nil && match(s.blk.Key.NS) {
			out = append(out, s.blk)
		}
	}
	return out
}

// Remove takes a sealed, unpinned block out of the index and the policy,
// as Evict does for the policy's victim (the caller releases its chunks).
// It panics for a pinned or unsealed block: those must stay.
func (x *Index) Remove(b *Block) {
	if b.pins != 0 || b.state != Sealed {
		panic("index: Remove of a pinned or unsealed block")
	}
	x.unlink(b)
}

// unlink takes a sealed, unpinned block out of the policy, the map and
// the counters: the one removal Remove and eviction share.
func (x *Index) unlink(b *Block) {
	x.policyOf(b).Remove(&b.node)
	x.m.del(b)
	x.unassign(b)
	x.sealed--
	if b.Replica() {
		x.replicas--
	}
	x.bytes -= b.Bytes
	x.evictable -= uint64(b.nChunks)
	x.nEvict--
	b.state = 0
	if x.obs != nil {
		x.obs.Removed(b.Key)
	}
}
