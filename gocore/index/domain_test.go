package index

import (
	"encoding/binary"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/evict"
)

// domainKey is block i's key in the domain tests.
func domainKey(i int) Key {
	var k Key
	k.NS[0] = 7
	binary.LittleEndian.PutUint64(k.Hash[:], uint64(i))
	return k
}

// domainBlock inserts block i of one chunk for d and seals it.
func domainBlock(x *Index, d Domain, i int) *Block {
	b := x.Insert(domainKey(i), 64, 1, 0, []uint32{uint32(i)})
	x.Assign(b, d)
	x.Seal(b)
	return b
}

func TestEvictDomainPassesEachPinnedBlockOnceNotOncePerEviction(t *testing.T) {
	const d, pinned, free = Domain(1), 5000, 100
	x := New(evict.NewLRU())
	var held []*Block
	for i := range pinned {
		held = append(held, domainBlock(x, d, i))
	}
	x.PinAll(held)
	for i := range free {
		domainBlock(x, d, pinned+i)
	}
	if x.DomainChunks(d) != pinned+free || !x.DomainEvictable(d, free) || x.DomainEvictable(d, free+1) {
		t.Fatalf("%d chunks, evictable %d: %v, %d: %v; want %d, true, false",
			x.DomainChunks(d), free, x.DomainEvictable(d, free), free+1, x.DomainEvictable(d, free+1), pinned+free)
	}
	for i := range free {
		b := x.EvictDomain(d)
		if b == nil || b.Key != domainKey(pinned+i) {
			t.Fatalf("eviction %d took %v, want the oldest unpinned block %d", i, b, pinned+i)
		}
	}
	if b := x.EvictDomain(d); b != nil {
		t.Fatalf("evicted %v with every block left pinned", b)
	}
	// One pass over the pinned blocks in all, not one per eviction.
	if x.domainSteps > pinned+free {
		t.Fatalf("%d evictions walked %d blocks; want at most %d, each pinned block once", free, x.domainSteps, pinned+free)
	}
	if x.DomainChunks(d) != pinned || x.DomainEvictable(d, 1) {
		t.Fatalf("%d chunks left, evictable %v; want %d pinned, none evictable", x.DomainChunks(d), x.DomainEvictable(d, 1), pinned)
	}
	// Unpinned, a parked block is evictable again, and found in one step.
	x.Unpin(held[7])
	steps := x.domainSteps
	if !x.DomainEvictable(d, 1) || x.EvictDomain(d) != held[7] || x.domainSteps != steps+1 {
		t.Fatalf("after an unpin: evicted with %d steps; want block 7 in 1", x.domainSteps-steps)
	}
	x.UnpinAll(held[8:])
	for i := 8; i < pinned; i++ {
		if b := x.EvictDomain(d); b != held[i] {
			t.Fatalf("after unpinning: took %v, want block %d", b, i)
		}
	}
	x.Unpin(held[0])
	if x.EvictDomain(d) != held[0] {
		t.Fatal("block 0 was not evicted last")
	}
	if x.DomainChunks(d) != 6 || x.DomainEvictable(d, 1) {
		t.Fatalf("%d chunks left; want 6 pinned", x.DomainChunks(d))
	}
}

func TestAPublishingBlockParkedByEvictDomainIsEvictableOnceSealed(t *testing.T) {
	const d = Domain(2)
	x := New(evict.NewLRU())
	pub := x.Insert(domainKey(0), 64, 1, 0, []uint32{0})
	x.Assign(pub, d)
	old := domainBlock(x, d, 1)
	if x.EvictDomain(d) != old {
		t.Fatal("the sealed block was not evicted")
	}
	if x.EvictDomain(d) != nil {
		t.Fatal("a publishing block was evicted")
	}
	x.Seal(pub)
	if x.EvictDomain(d) != pub {
		t.Fatal("the sealed block was not evicted after it was parked publishing")
	}
	other := x.Insert(domainKey(2), 64, 1, 0, []uint32{2})
	x.Assign(other, d)
	x.EvictDomain(d) // parks it
	x.Abort(other)
	if x.DomainChunks(d) != 0 || x.DomainEvictable(d, 1) || x.EvictDomain(d) != nil {
		t.Fatalf("after an abort of a parked block: %d chunks; want none", x.DomainChunks(d))
	}
}
