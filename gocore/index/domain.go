package index

// Domain is a group of blocks the Index counts apart: the Manager's tenant
// domains (gocore/tenant.Domain.Index + 1). NoDomain (0), the Domain of
// every block of a Manager without tenants, is not counted.
type Domain uint16

// NoDomain is the Domain of blocks that count against none.
const NoDomain Domain = 0

// domainBlocks is one Domain's blocks in the index, sealed and publishing:
// their bytes, and a FIFO of them in Assign order (oldest at head) linked
// through blockCold.dprev/dnext.
type domainBlocks struct {
	bytes      uint64
	head, tail *Block
}

// Assign counts b, just inserted (Publishing), to domain d: its bytes
// count in DomainBytes(d) until it leaves the index (Abort, Evict, Remove,
// EvictDomain), and it joins d's FIFO last. NoDomain does nothing: blocks
// of no domain cost no list and no counter. Assign of a block already
// assigned panics.
func (x *Index) Assign(b *Block, d Domain) {
	if d == NoDomain {
		return
	}
	if b.domain != NoDomain {
		panic("index: Assign of an assigned block")
	}
	if int(d) >= len(x.doms) {
		x.doms = append(x.doms, make([]domainBlocks, int(d)+1-len(x.doms))...)
	}
	db := &x.doms[d]
	b.domain = d
	b.dprev = db.tail
	if db.tail != nil {
		db.tail.dnext = b
	} else {
		db.head = b
	}
	db.tail = b
	db.bytes += b.Bytes
}

// unassign takes b out of its domain's FIFO and bytes, once, at its
// removal (Abort, unlink).
func (x *Index) unassign(b *Block) {
	d := b.domain
	if d == NoDomain {
		return
	}
	db := &x.doms[d]
	if b.dprev != nil {
		b.dprev.dnext = b.dnext
	} else {
		db.head = b.dnext
	}
	if b.dnext != nil {
		b.dnext.dprev = b.dprev
	} else {
		db.tail = b.dprev
	}
	b.dprev, b.dnext = nil, nil
	db.bytes -= b.Bytes
	// b.domain stays: the tier demotes a removed block to its domain's
	// share of the SSD tier (DomainOf).
}

// DomainOf is the domain b counts against, or counted against before it
// left the index (NoDomain: none).
func (b *Block) DomainOf() Domain {
	if b.blockCold == nil {
		return NoDomain
	}
	return b.domain
}

// DomainBytes is the bytes of d's blocks in the index, sealed and
// publishing (0 for NoDomain).
func (x *Index) DomainBytes(d Domain) uint64 {
	if d == NoDomain || int(d) >= len(x.doms) {
		return 0
	}
	return x.doms[d].bytes
}

// DomainEvictable reports whether d's unpinned sealed blocks, oldest
// first, add up to at least want bytes. It walks d's FIFO from its oldest
// block until it has found them (pinned and publishing blocks are passed
// over), so its cost is the blocks it passes.
func (x *Index) DomainEvictable(d Domain, want uint64) bool {
	if want == 0 {
		return true
	}
	if d == NoDomain || int(d) >= len(x.doms) {
		return false
	}
	var got uint64
	for b := x.doms[d].head; b != nil; b = b.dnext {
		if b.state == Sealed && b.pins == 0 {
			if got += b.Bytes; got >= want {
				return true
			}
		}
	}
	return false
}

// EvictDomain removes d's oldest unpinned sealed block (by Assign order)
// from the index and its policy, as Evict removes the policy's victim,
// and returns it (the caller releases its chunks), or nil when d has
// none. Pinned and publishing blocks are passed over, never removed.
func (x *Index) EvictDomain(d Domain) *Block {
	if d == NoDomain || int(d) >= len(x.doms) {
		return nil
	}
	for b := x.doms[d].head; b != nil; b = b.dnext {
		if b.state == Sealed && b.pins == 0 {
			x.unlink(b)
			return b
		}
	}
	return nil
}
