package index

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/evict"
)

// PinAll and UnpinAll update the index's totals once per slice; they must
// leave exactly what Pin and Unpin in a loop leave. Two indexes get the
// same random operations (inserts of own blocks and replicas, seals, pins
// and unpins of 1-40 blocks with repeats and publishing blocks, evictions,
// which reveal deferred accesses), one through the loops and one through
// PinAll/UnpinAll; after every step their Stats, evictable chunks and
// chain-run marks must agree, and every eviction must take the same key.
func TestPinAllAndUnpinAllAgreeWithPinAndUnpinLoops(t *testing.T) {
	for _, name := range evict.Names() {
		for seed := int64(1); seed <= 300; seed++ {
			t.Run(fmt.Sprintf("%s/%d", name, seed), func(t *testing.T) { pinAllDiffRun(t, name, seed) })
		}
	}
}

func pinAllDiffRun(t *testing.T, name string, seed int64) {
	mk := func() *Index {
		p, err := evict.New(name, 32)
		if err != nil {
			t.Fatal(err)
		}
		x := New(p)
		if seed%2 == 0 {
			x.rep, _ = evict.New(name, 32)
		}
		return x
	}
	a, b := mk(), mk()
	rng := rand.New(rand.NewSource(seed))
	nkeys := 4 + rng.Intn(30)
	key := func(i int) Key { return Key{NS: [16]byte{1}, Hash: [16]byte{byte(i), byte(i >> 8)}} }
	type pair struct{ a, b *Block }
	live := map[int]*pair{}
	pins := map[int]int{}
	var order []int
	keysOf := func(f func(i int) bool) []int {
		var c []int
		for _, i := range order {
			if live[i] != nil && f(i) {
				c = append(c, i)
			}
		}
		return c
	}
	check := func(step int, what string) {
		if a.Stats() != b.Stats() || a.EvictableChunks() != b.EvictableChunks() || a.moved != b.moved {
			t.Fatalf("step %d %s: loop %+v %d %v, all %+v %d %v", step, what, a.Stats(), a.EvictableChunks(), a.moved, b.Stats(), b.EvictableChunks(), b.moved)
		}
	}
	for step := 0; step < 2000; step++ {
		op := rng.Intn(100)
		switch {
		case op < 15:
			i := rng.Intn(nkeys)
			if live[i] != nil {
				continue
			}
			ch := make([]uint32, rng.Intn(4))
			d := uint32(rng.Intn(4))
			rep := rng.Intn(3) == 0
			var p pair
			if rep {
				p = pair{a.InsertReplica(key(i), 10, 1, d, ch), b.InsertReplica(key(i), 10, 1, d, ch)}
			} else {
				p = pair{a.Insert(key(i), 10, 1, d, ch), b.Insert(key(i), 10, 1, d, ch)}
			}
			live[i] = &p
			order = append(order, i)
		case op < 32:
			c := keysOf(func(i int) bool { return live[i].a.state == Publishing })
			if len(c) == 0 {
				continue
			}
			i := c[rng.Intn(len(c))]
			a.Seal(live[i].a)
			b.Seal(live[i].b)
		case op < 55:
			c := keysOf(func(int) bool { return true })
			if len(c) == 0 {
				continue
			}
			var as, bs []*Block
			for k := 1 + rng.Intn(40); k > 0; k-- {
				i := c[rng.Intn(len(c))]
				as, bs = append(as, live[i].a), append(bs, live[i].b)
				pins[i]++
			}
			for _, blk := range as {
				a.Pin(blk)
			}
			b.PinAll(bs)
			check(step, "pin")
		case op < 80:
			c := keysOf(func(i int) bool { return pins[i] > 0 })
			if len(c) == 0 {
				continue
			}
			var as, bs []*Block
			for k := 1 + rng.Intn(40); k > 0; k-- {
				i := c[rng.Intn(len(c))]
				if pins[i] == 0 {
					continue
				}
				as, bs = append(as, live[i].a), append(bs, live[i].b)
				pins[i]--
			}
			for _, blk := range as {
				a.Unpin(blk)
			}
			b.UnpinAll(bs)
			check(step, "unpin")
		default:
			va, vb := a.Evict(), b.Evict()
			if (va == nil) != (vb == nil) || va != nil && va.Key != vb.Key {
				t.Fatalf("step %d: victims differ %v %v", step, va, vb)
			}
			if va != nil {
				i := int(va.Key.Hash[0]) | int(va.Key.Hash[1])<<8
				delete(live, i)
			}
		}
		check(step, "any")
	}
}
