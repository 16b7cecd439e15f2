package lease

import (
	"math/rand"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/index"
)

func poolBook(t *testing.T) (*Book[int], *index.Index) {
	idx := index.New(evict.NewLRU())
	return NewBook[int](1, idx, Limits{Budget: 1 << 40}), idx
}

// Acquire of an empty hit list grants a lease of no blocks (no caller asks
// for one today; blockSlices.get(0) once indexed past its classes).
func TestAcquireOfNoBlocksLeasesNothing(t *testing.T) {
	b, _ := poolBook(t)
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Acquire(nil) panicked: %v", r)
		}
	}()
	v, l := b.Acquire(Owner{Slot: 1, Token: 1}, nil, false)
	if v != Grant || l == nil {
		t.Fatalf("verdict %v lease %v", v, l)
	}
	b.End(l)
}

// Random Acquire/End/EndAll: no two live leases share a backing array, no
// live lease sees another's blocks, Check holds, pins match.
func TestPooledSlicesNeverServeTwoLiveLeases(t *testing.T) {
	b, idx := poolBook(t)
	var blks []*index.Block
	for i := 0; i < 64; i++ {
		blk := idx.Insert(index.Key{NS: [16]byte{9}, Hash: [16]byte{byte(i)}}, 4096, 1, 0, nil)
		idx.Seal(blk)
		blks = append(blks, blk)
	}
	rng := rand.New(rand.NewSource(1))
	type rec struct {
		l    *Lease
		want []*index.Block
	}
	var live []rec
	owners := []Owner{{Slot: 1, Token: 1}, {Slot: 2, Token: 2}, {Slot: 3, Token: 3}}
	for step := 0; step < 20000; step++ {
		switch r := rng.Intn(10); {
		case r < 5:
			n := 1 + rng.Intn(40)
			hits := make([]*index.Block, n)
			for i := range hits {
				hits[i] = blks[rng.Intn(len(blks))]
			}
			o := owners[rng.Intn(len(owners))]
			v, l := b.Acquire(o, hits, false)
			if v != Grant {
				continue
			}
			live = append(live, rec{l, append([]*index.Block(nil), hits...)})
		case r < 9:
			if len(live) == 0 {
				continue
			}
			i := rng.Intn(len(live))
			b.End(live[i].l)
			if live[i].l.Blocks != nil {
				t.Fatal("ended pooled lease kept Blocks")
			}
			live = append(live[:i], live[i+1:]...)
		default:
			o := owners[rng.Intn(len(owners))]
			b.EndAll(o)
			k := live[:0]
			for _, r := range live {
				if r.l.Owner != o {
					k = append(k, r)
				}
			}
			live = k
		}
		seen := map[**index.Block]bool{}
		for _, r := range live {
			if len(r.l.Blocks) != len(r.want) {
				t.Fatalf("step %d: lease %d len %d want %d", step, r.l.ID, len(r.l.Blocks), len(r.want))
			}
			for j := range r.want {
				if r.l.Blocks[j] != r.want[j] {
					t.Fatalf("step %d: lease %d block %d changed", step, r.l.ID, j)
				}
			}
			p := &r.l.Blocks[:1][0]
			if seen[p] {
				t.Fatalf("step %d: two live leases share a slice", step)
			}
			seen[p] = true
		}
		if err := b.Check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	pins := map[*index.Block]int32{}
	for _, r := range live {
		for _, blk := range r.want {
			pins[blk]++
		}
	}
	for _, blk := range blks {
		if blk.Pins() != pins[blk] {
			t.Fatalf("block pins %d want %d", blk.Pins(), pins[blk])
		}
	}
}
