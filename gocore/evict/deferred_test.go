package evict

import "testing"

// deferOwner is an owner's record of a bare node's pins and deferred
// accesses, for NextVictim.
type deferOwner struct {
	pins     int32
	accesses uint8
	shown    bool
}

// evictWithReveal evicts as gocore/index's Evict does, over bare nodes.
func evictWithReveal(p Policy) *Node {
	n, err := NextVictim(p, func(n *Node) (int32, *uint8, *bool) {
		o := n.Owner.(*deferOwner)
		return o.pins, &o.accesses, &o.shown
	})
	if err != nil {
		panic(err)
	}
	if n != nil {
		p.Remove(n)
	}
	return n
}

// A node Victim proposed from the small queue and Reveal then kept (it had
// an access) moves to main without its ghost mark: a later Remove that is
// not an eviction (operator evict/flush, tier.Drop) must not put a
// main-queue block's key in the ghost, or its next publish would skip the
// small queue.
func TestAnS3FIFOVictimKeptByRevealIsNoGhostCandidate(t *testing.T) {
	p := NewS3FIFO(0).(*s3fifo)
	a := &Node{Key: 1, Depth: 0, Owner: &deferOwner{accesses: 1}}
	b := &Node{Key: 2, Depth: 1, Owner: &deferOwner{accesses: 1}}
	p.Insert(a)
	p.Insert(b)
	if v := evictWithReveal(p); v != b {
		t.Fatalf("evicted %v, want b", v)
	}
	if a.home != qMain {
		t.Fatalf("a home %d, want main", a.home)
	}
	p.Remove(a) // a discard, not an eviction
	if _, ok := p.ghost.m[a.Key]; ok {
		t.Fatal("Remove of a main-queue block (never evicted from small) put its key in the ghost: stale flagGhost from a proposal Reveal overruled")
	}
}

func TestSimulateKeepsThePolicyContractOnRandomTraces(t *testing.T) {
	for _, name := range Names() {
		for seed := uint64(1); seed <= 300; seed++ {
			s := seed * 0x9e3779b97f4a7c15
			rnd := func(n int) int { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return int(s % uint64(n)) }
			var reqs [][]uint64
			for r := 0; r < 200; r++ {
				var h []uint64
				base := uint64(rnd(20)) * 100
				for i, n := 0, 1+rnd(12); i < n; i++ {
					h = append(h, base+uint64(rnd(3)*i+rnd(2)))
				}
				reqs = append(reqs, h)
			}
			if _, _, err := Simulate(reqs, 1+rnd(30), name); err != nil {
				t.Fatalf("%s seed %d: %v", name, seed, err)
			}
		}
	}
}
