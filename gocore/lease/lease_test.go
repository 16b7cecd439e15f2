package lease

import (
	"testing"

	"github.com/orbitkv/orbitkv/gocore/index"
)

func TestLeasesBelongToTheirSession(t *testing.T) {
	tb := New()
	a := Owner{Slot: 1, Token: 11}
	b := Owner{Slot: 1, Token: 12} // same slot index, a later session
	blocks := []*index.Block{{Bytes: 100}, {Bytes: 50}}
	l := tb.Add(a, blocks)
	if l.ID == 0 || l.Bytes != 150 || tb.ReservedBytes() != 150 || tb.Len() != 1 {
		t.Fatalf("lease %+v reserved %d", l, tb.ReservedBytes())
	}
	if tb.Get(b, l.ID) != nil {
		t.Fatal("another session's lease was returned")
	}
	if tb.Get(a, l.ID) != l || len(tb.Owned(a)) != 1 || len(tb.Owned(b)) != 0 {
		t.Fatal("owner lookup wrong")
	}
	l2 := tb.Add(a, blocks[:1])
	if l2.ID == l.ID {
		t.Fatal("lease id reused")
	}
	tb.Remove(l)
	tb.Remove(l) // idempotent
	if tb.Get(a, l.ID) != nil || tb.ReservedBytes() != 100 || tb.Len() != 1 {
		t.Fatalf("after remove: reserved %d len %d", tb.ReservedBytes(), tb.Len())
	}
}

// Owned and OwnedBytes see only the owner's leases, and stay exact as leases
// come and go (the per-owner index behind a session's Health).
func TestOwnedCountsOnlyTheOwnersLeases(t *testing.T) {
	tb := New()
	a, b := Owner{Slot: 1, Token: 1}, Owner{Slot: 2, Token: 2}
	blk := []*index.Block{{Bytes: 10}}
	var as []*Lease
	for i := 0; i < 5; i++ {
		as = append(as, tb.Add(a, blk))
	}
	for i := 0; i < 100; i++ {
		tb.Add(b, blk)
	}
	if got := len(tb.Owned(a)); got != 5 || tb.OwnedBytes(a) != 50 || tb.OwnedBytes(b) != 1000 {
		t.Fatalf("a owns %d leases of %d bytes, b %d bytes; want 5, 50, 1000", got, tb.OwnedBytes(a), tb.OwnedBytes(b))
	}
	for _, l := range as {
		tb.Remove(l)
	}
	if tb.Owned(a) != nil || tb.OwnedBytes(a) != 0 || tb.ReservedBytes() != 1000 || tb.Len() != 100 {
		t.Fatalf("after removing a's leases: owned %v bytes %d reserved %d len %d", tb.Owned(a), tb.OwnedBytes(a), tb.ReservedBytes(), tb.Len())
	}
}

// A lease's block slice goes back to the Book at End, cleared, and serves
// the next lease of a size of its class; a lease granted with a caller's
// slice keeps it.
func TestEndedLeaseSlicesAreClearedAndReused(t *testing.T) {
	var p blockSlices
	blks := []*index.Block{{}, {}, {}}
	s := p.get(3)
	if len(s) != 3 || cap(s) != 4 {
		t.Fatalf("get(3): len %d cap %d, want 3 and 4", len(s), cap(s))
	}
	copy(s, blks)
	p.put(s)
	for i, b := range s[:cap(s)] {
		if b != nil {
			t.Fatalf("a pooled slice still names a block at %d", i)
		}
	}
	again := p.get(4)
	if &again[0] != &s[0] {
		t.Fatal("a slice of the same class was not reused")
	}
	if other := p.get(3); &other[0] == &s[0] {
		t.Fatal("one pooled slice was handed out twice")
	}
	odd := make([]*index.Block, 3) // not of a pooled class: dropped
	p.put(odd)
	if len(p.free[2]) != 0 {
		t.Fatal("a slice whose capacity is not a power of two was pooled")
	}
}
