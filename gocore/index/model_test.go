package index

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/evict"
)

// checkedPolicy wraps a Policy and enforces the owner's side of the
// contract the real policies only partly check: no Pin of a node the
// policy already holds pinned, no Unpin of one it does not, and a bound on
// Victim calls per Evict (a livelock detector).
type checkedPolicy struct {
	evict.Policy
	pinned  map[*evict.Node]bool
	victims int
}

func (p *checkedPolicy) Insert(n *evict.Node) { delete(p.pinned, n); p.Policy.Insert(n) }
func (p *checkedPolicy) Remove(n *evict.Node) { delete(p.pinned, n); p.Policy.Remove(n) }
func (p *checkedPolicy) Pin(n *evict.Node) {
	if p.pinned[n] {
		panic("model: Pin of a node the policy holds pinned")
	}
	p.pinned[n] = true
	p.Policy.Pin(n)
}
func (p *checkedPolicy) Unpin(n *evict.Node) {
	if !p.pinned[n] {
		panic("model: Unpin of a node the policy does not hold pinned")
	}
	delete(p.pinned, n)
	p.Policy.Unpin(n)
}
func (p *checkedPolicy) Victim() *evict.Node {
	p.victims++
	if p.victims > 100000 {
		panic("model: Evict called Victim 100000 times (livelock)")
	}
	return p.Policy.Victim()
}

// refBlock is the reference model's view of one key.
type refBlock struct {
	b       *Block
	sealed  bool
	pins    int
	replica bool
	chunks  int
	bytes   uint64
}

func TestIndexAgreesWithAReferenceModel(t *testing.T) {
	for _, name := range evict.Names() {
		for seed := int64(1); seed <= 200; seed++ {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) { modelRun(t, name, seed) })
		}
	}
}

func modelRun(t *testing.T, name string, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	pol, err := evict.New(name, 32)
	if err != nil {
		t.Fatal(err)
	}
	cp := &checkedPolicy{Policy: pol, pinned: map[*evict.Node]bool{}}
	cr := &checkedPolicy{Policy: evict.NewLRU(), pinned: map[*evict.Node]bool{}}
	x := New(cp)
	x.rep = cr
	model := map[Key]*refBlock{}
	nkeys := 8 + rng.Intn(40)
	key := func(i int) Key { return Key{NS: [16]byte{1}, Hash: [16]byte{byte(i), byte(i >> 8)}} }
	pick := func(ok func(*refBlock) bool) *refBlock {
		var c []*refBlock
		for i := 0; i < nkeys; i++ { // deterministic order
			if r := model[key(i)]; r != nil && ok(r) {
				c = append(c, r)
			}
		}
		if len(c) == 0 {
			return nil
		}
		return c[rng.Intn(len(c))]
	}
	var log []string
	fail := func(format string, a ...any) {
		t.Helper()
		tail := log
		if len(tail) > 40 {
			tail = tail[len(tail)-40:]
		}
		t.Fatalf("%s\nlast ops: %v", fmt.Sprintf(format, a...), tail)
	}
	for step := 0; step < 3000; step++ {
		op := rng.Intn(100)
		switch {
		case op < 15: // Insert / InsertReplica
			i := rng.Intn(nkeys)
			k := key(i)
			if x.Contains(k) != (model[k] != nil) {
				fail("Contains(%d) = %v, model %v", i, x.Contains(k), model[k] != nil)
			}
			if model[k] != nil {
				continue
			}
			nch := rng.Intn(4)
			chunks := make([]uint32, nch)
			rep := rng.Intn(4) == 0
			bytes := uint64(1 + rng.Intn(1000))
			var b *Block
			if rep {
				b = x.InsertReplica(k, bytes, 1, uint32(rng.Intn(4)), chunks)
			} else {
				b = x.Insert(k, bytes, 1, uint32(rng.Intn(4)), chunks)
			}
			model[k] = &refBlock{b: b, replica: rep, chunks: nch, bytes: bytes}
			log = append(log, fmt.Sprintf("ins%d(r=%v,c=%d)", i, rep, nch))
		case op < 30: // Seal
			r := pick(func(r *refBlock) bool { return !r.sealed })
			if r == nil {
				continue
			}
			x.Seal(r.b)
			r.sealed = true
			log = append(log, fmt.Sprintf("seal%d", r.b.Key.Hash[0]))
		case op < 34: // Abort (unpinned publishing)
			r := pick(func(r *refBlock) bool { return !r.sealed && r.pins == 0 })
			if r == nil {
				continue
			}
			x.Abort(r.b)
			delete(model, r.b.Key)
			log = append(log, fmt.Sprintf("abort%d", r.b.Key.Hash[0]))
		case op < 55: // Pin (sealed, rarely publishing)
			r := pick(func(r *refBlock) bool { return r.sealed || rng.Intn(8) == 0 })
			if r == nil {
				continue
			}
			if rng.Intn(2) == 0 {
				x.Pin(r.b)
				r.pins++
				log = append(log, fmt.Sprintf("pin%d", r.b.Key.Hash[0]))
				break
			}
			// PinAll over a lease's worth: 1-4 blocks, repeats allowed.
			bs := []*Block{r.b}
			r.pins++
			for k := rng.Intn(4); k > 0; k-- {
				if q := pick(func(r *refBlock) bool { return r.sealed || rng.Intn(8) == 0 }); q != nil {
					bs = append(bs, q.b)
					q.pins++
				}
			}
			x.PinAll(bs)
			log = append(log, fmt.Sprintf("pinall%d", len(bs)))
		case op < 75: // Unpin
			r := pick(func(r *refBlock) bool { return r.pins > 0 })
			if r == nil {
				continue
			}
			if rng.Intn(2) == 0 {
				x.Unpin(r.b)
				r.pins--
				log = append(log, fmt.Sprintf("unpin%d", r.b.Key.Hash[0]))
				break
			}
			// UnpinAll over 1-4 pinned blocks, repeats allowed while pins last.
			bs := []*Block{r.b}
			r.pins--
			for k := rng.Intn(4); k > 0; k-- {
				if q := pick(func(r *refBlock) bool { return r.pins > 0 }); q != nil {
					bs = append(bs, q.b)
					q.pins--
				}
			}
			x.UnpinAll(bs)
			log = append(log, fmt.Sprintf("unpinall%d", len(bs)))
		case op < 92: // Evict
			cp.victims, cr.victims = 0, 0
			v := x.Evict()
			log = append(log, fmt.Sprintf("evict->%v", v != nil))
			var cands, repCands int
			for _, r := range model {
				if r.sealed && r.pins == 0 {
					cands++
					if r.replica {
						repCands++
					}
				}
			}
			if v == nil {
				if cands != 0 {
					fail("Evict returned nil with %d sealed unpinned blocks", cands)
				}
				continue
			}
			r := model[v.Key]
			if r == nil || r.b != v {
				fail("Evict returned a block the model does not hold")
			}
			if !r.sealed || r.pins != 0 {
				fail("Evict returned a block with %d pins, sealed %v", r.pins, r.sealed)
			}
			if repCands > 0 && !r.replica {
				fail("Evict returned an own block while %d replicas were evictable", repCands)
			}
			delete(model, v.Key)
		default: // Remove
			r := pick(func(r *refBlock) bool { return r.sealed && r.pins == 0 })
			if r == nil {
				continue
			}
			x.Remove(r.b)
			delete(model, r.b.Key)
			log = append(log, fmt.Sprintf("rm%d", r.b.Key.Hash[0]))
		}
		// Brute-force recount.
		var want Stats
		var chunks uint64
		var own, reps int
		for _, r := range model {
			want.Entries++
			want.Pins += int64(r.pins)
			if !r.sealed {
				continue
			}
			want.Blocks++
			want.Bytes += r.bytes
			if r.replica {
				want.Replicas++
				reps++
			} else {
				own++
			}
			if r.pins == 0 {
				want.Evictable++
				chunks += uint64(r.chunks)
			}
			b := r.b
			if b.shown && b.pins == 0 {
				fail("block %d shown with no pins", b.Key.Hash[0])
			}
			if b.access > evict.MaxAccesses {
				fail("block %d has %d deferred accesses", b.Key.Hash[0], b.access)
			}
			if int(b.nChunks) != len(b.Chunks) {
				fail("nChunks %d != len(Chunks) %d", b.nChunks, len(b.Chunks))
			}
			if pinnedInPol := x.policyOf(b) == cp && cp.pinned[&b.node] || x.policyOf(b) == cr && cr.pinned[&b.node]; pinnedInPol != b.shown {
				fail("block %d: policy holds it pinned %v, shown %v", b.Key.Hash[0], pinnedInPol, b.shown)
			}
		}
		if got := x.Stats(); got != want {
			fail("step %d: Stats %+v, recount %+v", step, got, want)
		}
		if got := x.EvictableChunks(); got != chunks {
			fail("step %d: EvictableChunks %d, recount %d", step, got, chunks)
		}
		if cp.Len() != own || cr.Len() != reps {
			fail("step %d: policies hold %d+%d, sealed own %d replicas %d", step, cp.Len(), cr.Len(), own, reps)
		}
	}
	// Drain: unpin everything, evict all.
	for _, r := range model {
		for ; r.pins > 0; r.pins-- {
			x.Unpin(r.b)
		}
	}
	sealed := 0
	for _, r := range model {
		if r.sealed {
			sealed++
		}
	}
	for i := 0; i < sealed; i++ {
		cp.victims, cr.victims = 0, 0
		if x.Evict() == nil {
			t.Fatalf("drain: Evict nil after %d of %d", i, sealed)
		}
	}
	if x.Evict() != nil || x.EvictableChunks() != 0 || x.Stats().Evictable != 0 || cp.Len() != 0 || cr.Len() != 0 {
		t.Fatalf("drain: left %+v", x.Stats())
	}
}

// A lookup between two publishes ends the chain run (gocore/evict/chain.go)
// though the policy never hears of its pin (evict.EndRun): a later publish
// whose first fresh block has a higher Depth (present blocks before it)
// starts a chain of its own, and the earlier chain's tail stays the first
// victim. Without EndRun the later publish continued the earlier chain.
func TestALookupBetweenTwoPublishesEndsTheChainRun(t *testing.T) {
	for _, how := range []string{"Pin", "PinAll", "UnpinAll"} {
		for _, replica := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/replica=%v", how, replica), func(t *testing.T) {
				pol, _ := evict.New("slru", 0)
				x := New(pol)
				if replica {
					x.rep, _ = evict.New("slru", 0) // a chain-aware replica policy, so its runs show
				}
				k := func(i byte) Key { return Key{NS: [16]byte{3}, Hash: [16]byte{i}} }
				seal := func(i byte, d uint32) *Block {
					var b *Block
					if replica {
						b = x.InsertReplica(k(i), 1, 1, d, nil)
					} else {
						b = x.Insert(k(i), 1, 1, d, nil)
					}
					x.Seal(b)
					return b
				}
				a0 := seal(0, 0)
				a1 := seal(1, 1) // chain A's tail
				// A lookup of chain A between the two publishes.
				switch how {
				case "Pin":
					x.Pin(a0)
					x.Unpin(a0)
				case "PinAll": // and a0 stays pinned: only PinAll's transition ends the run
					x.PinAll([]*Block{a0})
				case "UnpinAll":
					x.Pin(a0)
					x.moved = [2]bool{} // only UnpinAll's transition is left to end the run
					x.UnpinAll([]*Block{a0})
				}
				seal(5, 2) // publish B: two present blocks, then fresh ones at depth 2, 3
				seal(6, 3)
				if v := x.Evict(); v != a1 {
					t.Fatalf("first victim %x, want chain A's tail (block 1), evicted first as in the eager order", v.Key.Hash[0])
				}
			})
		}
	}
}
