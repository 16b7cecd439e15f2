package index

// Domain is a group of blocks the Index counts apart: the Manager's tenant
// domains (gocore/tenant.Domain.Index + 1). NoDomain (0), the Domain of
// every block of a Manager without tenants, is not counted.
type Domain uint16

// NoDomain is the Domain of blocks that count against none.
const NoDomain Domain = 0

// domainBlocks is one Domain's blocks in the index, sealed and publishing.
//
//   - chunks: the RAM tier chunks they occupy (Block.nChunks summed); a
//     block occupies whole chunks whatever its Bytes, so a quota counts
//     chunks × chunk bytes (DomainChunks).
//   - evChunks, evBlocks: the chunks and number of its evictable blocks
//     (sealed, unpinned), kept at Seal, at a pin's 0→1 and 1→0 of a sealed
//     block and at removal, so DomainEvictable walks nothing.
//   - head, tail: a FIFO in Assign order (oldest at head) linked through
//     blockCold.dprev/dnext. Every evictable block is in it.
//   - phead: the parked blocks, linked the same way: blocks EvictDomain's
//     walk met unevictable (pinned or publishing), taken out of the FIFO
//     so that no later walk passes them again. A parked block returns to
//     the FIFO's tail when it becomes evictable (Seal, last unpin).
type domainBlocks struct {
	chunks            uint64
	evChunks          uint64
	evBlocks          int
	head, tail, phead *Block
}

// Assign counts b, just inserted (Publishing), to domain d: its chunks
// count in DomainChunks(d) until it leaves the index (Abort, Evict,
// Remove, EvictDomain), and it joins d's FIFO last. NoDomain does
// nothing: blocks of no domain cost no list and no counter, and their pins
// one bit test (metaDomain). Assign of a block already assigned panics.
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
	b.meta |= metaDomain
	db.push(b)
	db.chunks += uint64(b.nChunks)
	if b.state == Sealed && b.pins == 0 {
		db.evictable(b, true)
	}
}

// push appends b to db's FIFO.
func (db *domainBlocks) push(b *Block) {
	b.dprev, b.dnext = db.tail, nil
	if db.tail != nil {
		db.tail.dnext = b
	} else {
		db.head = b
	}
	db.tail = b
}

// cut takes b out of whichever of db's lists holds it (FIFO or parked).
func (db *domainBlocks) cut(b *Block) {
	if b.dprev != nil {
		b.dprev.dnext = b.dnext
	} else if b.parked {
		db.phead = b.dnext
	} else {
		db.head = b.dnext
	}
	if b.dnext != nil {
		b.dnext.dprev = b.dprev
	} else if !b.parked {
		db.tail = b.dprev
	}
	b.dprev, b.dnext = nil, nil
	b.parked = false
}

// park moves b, unevictable, from db's FIFO to its parked list.
func (db *domainBlocks) park(b *Block) {
	db.cut(b)
	b.dnext = db.phead
	if db.phead != nil {
		db.phead.dprev = b
	}
	db.phead = b
	b.parked = true
}

// evictable counts b, of db, into (in) or out of db's evictable blocks;
// a parked block coming in returns to the FIFO's tail.
func (db *domainBlocks) evictable(b *Block, in bool) {
	if in {
		db.evChunks += uint64(b.nChunks)
		db.evBlocks++
		if b.parked {
			db.cut(b)
			db.push(b)
		}
		return
	}
	db.evChunks -= uint64(b.nChunks)
	db.evBlocks--
}

// domainMoved counts b, of a domain (metaDomain), into or out of its
// domain's evictable blocks: b was sealed, or a pin of sealed b went
// 0→1 (in false) or 1→0 (in true).
func (x *Index) domainMoved(b *Block, in bool) {
	x.doms[b.domain].evictable(b, in)
}

// unassign takes b out of its domain's lists and counts, once, at its
// removal (Abort of a publishing block, unlink of a sealed unpinned one).
func (x *Index) unassign(b *Block) {
	if b.meta&metaDomain == 0 {
		return
	}
	db := &x.doms[b.domain]
	if b.state == Sealed && b.pins == 0 {
		db.evictable(b, false)
	}
	db.cut(b)
	db.chunks -= uint64(b.nChunks)
	b.meta &^= metaDomain
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

// DomainChunks is the RAM tier chunks d's blocks in the index, sealed and
// publishing, occupy (0 for NoDomain).
func (x *Index) DomainChunks(d Domain) uint64 {
	if d == NoDomain || int(d) >= len(x.doms) {
		return 0
	}
	return x.doms[d].chunks
}

// DomainEvictable reports whether d's unpinned sealed blocks occupy at
// least want chunks. O(1): the count is kept as blocks seal, pin, unpin
// and leave.
func (x *Index) DomainEvictable(d Domain, want uint64) bool {
	if want == 0 {
		return true
	}
	if d == NoDomain || int(d) >= len(x.doms) {
		return false
	}
	return x.doms[d].evChunks >= want
}

// EvictDomain removes d's oldest unpinned sealed block (by Assign order,
// the FIFO's) from the index and its policy, as Evict removes the
// policy's victim, and returns it (the caller releases its chunks), or
// nil when d has none. Pinned and publishing blocks are never removed:
// the walk parks each it meets (domainBlocks), so a block costs one step
// per time it becomes unevictable and is met, amortized O(1) per call.
func (x *Index) EvictDomain(d Domain) *Block {
	if d == NoDomain || int(d) >= len(x.doms) {
		return nil
	}
	db := &x.doms[d]
	if db.evBlocks == 0 {
		return nil
	}
	for b := db.head; b != nil; b = db.head {
		x.domainSteps++
		if b.state == Sealed && b.pins == 0 {
			x.unlink(b)
			return b
		}
		db.park(b)
	}
	panic("index: a domain's evictable blocks are not in its FIFO")
}
