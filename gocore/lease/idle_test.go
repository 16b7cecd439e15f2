package lease

import (
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/index"
)

// Handed leases stall in the order of their last progress; a lease never
// handed never stalls; End takes a lease out of the order.
func TestHandedLeasesStallInTheOrderOfTheirLastProgress(t *testing.T) {
	idx := index.New(evict.NewLRU())
	b := NewBook[int](1, idx, Limits{Budget: 1 << 20})
	o := Owner{Slot: 1, Token: 1}
	t0 := time.Unix(1_800_000_000, 0)
	lease := func() *Lease {
		blk := idx.Insert(index.Key{Hash: [16]byte{byte(b.Leases() + 1)}}, 4096, 1, 0, nil)
		idx.Seal(blk)
		_, l := b.Acquire(o, []*index.Block{blk}, false)
		return l
	}
	a, c, kept := lease(), lease(), lease() // kept is never handed (a ticket's undelivered lease)
	b.Hand(a, t0)
	b.Hand(c, t0.Add(time.Second))
	b.Hand(a, t0.Add(5*time.Second)) // handing twice changes nothing
	if l := b.Stalled(t0); l != nil {
		t.Fatalf("lease %d stalled before any timeout passed", l.ID)
	}
	if l := b.Stalled(t0.Add(time.Nanosecond)); l != a {
		t.Fatalf("stalled %v, want a (oldest progress)", l)
	}
	b.Touch(a, t0.Add(2*time.Second)) // a made progress: c is now the oldest
	if p, ok := b.OldestProgress(); !ok || !p.Equal(t0.Add(time.Second)) {
		t.Fatalf("oldest progress %v %v, want c's", p, ok)
	}
	if l := b.Stalled(t0.Add(3 * time.Second)); l != c {
		t.Fatalf("stalled %v, want c", l)
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	b.End(c)
	if l := b.Stalled(t0.Add(3 * time.Second)); l != a {
		t.Fatalf("after c ended, stalled %v, want a", l)
	}
	b.End(a)
	b.Touch(a, t0.Add(4*time.Second)) // an ended lease is left alone
	if l := b.Stalled(t0.Add(time.Hour)); l != nil {
		t.Fatalf("lease %d stalled, but only the unhanded one is live", l.ID)
	}
	if _, ok := b.OldestProgress(); ok {
		t.Fatal("OldestProgress with no handed lease")
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	b.End(kept)
}
