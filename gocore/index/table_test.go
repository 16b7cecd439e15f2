package index

import (
	"math/rand/v2"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

// The table against a Go map: random inserts and deletes (with the table
// small enough to wrap around and grow), every key checked after each step
// batch, and Prefix against Lookup.
func TestTableAgreesWithAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newTable()
	want := map[Key]*Block{}
	var live []*Block
	mk := func(i uint64) Key {
		var k Key
		k.NS[0] = byte(i % 3)
		for b := 0; b < 8; b++ {
			k.Hash[b] = byte(i >> (8 * b))
		}
		return k
	}
	for step := 0; step < 200000; step++ {
		if len(live) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(live))
			b := live[i]
			tab.del(b)
			delete(want, b.Key)
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
		} else {
			k := mk(rng.Uint64N(5000))
			if _, ok := want[k]; ok {
				continue
			}
			b := &Block{Key: k, state: Sealed}
			tab.put(b)
			want[k] = b
			live = append(live, b)
		}
		if step%997 == 0 {
			for i := uint64(0); i < 5000; i++ {
				k := mk(i)
				if got := tab.find(&k, tab.tag(&k)); got != want[k] {
					t.Fatalf("step %d key %d: table %p, map %p", step, i, got, want[k])
				}
			}
			if tab.n != len(want) {
				t.Fatalf("step %d: table holds %d, map %d", step, tab.n, len(want))
			}
		}
	}
}

// chainBytes is hashes h(0..n) as a descriptor's hash list.
func chainBytes(n int, h func(int) abi.BlockHash) []byte {
	b := make([]byte, 0, n*abi.HashSize)
	for i := range n {
		hi := h(i)
		b = append(b, hi[:]...)
	}
	return b
}

func TestPrefixStopsAtTheFirstAbsentOrPublishingBlock(t *testing.T) {
	x := New(evict.NewLRU())
	ns := abi.Namespace{9}
	h := func(i int) abi.BlockHash { return abi.BlockHash{byte(i), 1} }
	for i := 0; i < 30; i++ {
		b := x.Insert(Key{NS: ns, Hash: h(i)}, 64, 1, 0, []uint32{uint32(i)})
		if i != 21 {
			x.Seal(b)
		}
	}
	for _, n := range []int{0, 1, 7, 8, 9, 20, 21, 30} {
		got := x.Prefix(ns, chainBytes(n, h), nil)
		if want := min(n, 21); len(got) != want {
			t.Fatalf("Prefix of %d: %d blocks, want %d", n, len(got), want)
		}
		for i, b := range got {
			if b.Key.Hash != h(i) {
				t.Fatalf("Prefix block %d holds hash %x", i, b.Key.Hash)
			}
		}
	}
	if got := x.Prefix(abi.Namespace{8}, chainBytes(5, h), nil); len(got) != 0 {
		t.Fatalf("another namespace: %d blocks", len(got))
	}
	// A trailing partial hash is not a hash: 7 whole hashes and 9 bytes
	// of the eighth find 7 blocks, and appending keeps out's blocks.
	b := chainBytes(8, h)
	got := x.Prefix(ns, b[:len(b)-abi.HashSize+9], []*Block{nil})
	if len(got) != 8 || got[0] != nil || got[7].Key.Hash != h(6) {
		t.Fatalf("Prefix of 7 hashes and a partial one after one block of out: %d blocks", len(got))
	}
}

// Prefix looks keys up in pipelined groups of prefixGroup: a chain that
// ends (absent or publishing) at any position, including either side of a
// group boundary and inside the group prefetched ahead, gives exactly the
// blocks Lookup finds one by one up to that position.
func TestPrefixAgreesWithLookupAcrossGroupBoundaries(t *testing.T) {
	const chain = 5*prefixGroup + 3
	ns := abi.Namespace{7}
	h := func(i int) abi.BlockHash { return abi.BlockHash{byte(i), byte(i >> 8), 2} }
	for _, stop := range []int{0, 1, prefixGroup - 1, prefixGroup, prefixGroup + 1, 2*prefixGroup - 1, 3 * prefixGroup, chain - 1, chain} {
		for _, how := range []string{"absent", "publishing"} {
			x := New(evict.NewLRU())
			for i := 0; i < chain; i++ {
				if i == stop && how == "absent" {
					continue
				}
				b := x.Insert(Key{NS: ns, Hash: h(i)}, 64, 1, 0, nil)
				if i != stop {
					x.Seal(b)
				}
			}
			for _, n := range []int{stop, stop + 1, chain} {
				got := x.Prefix(ns, chainBytes(n, h), nil)
				var want []*Block
				for i := 0; i < n; i++ {
					b := x.Lookup(Key{NS: ns, Hash: h(i)})
					if b == nil {
						break
					}
					want = append(want, b)
				}
				if len(got) != len(want) {
					t.Fatalf("chain ending at %d (%s), Prefix of %d: %d blocks, Lookup finds %d", stop, how, n, len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("chain ending at %d (%s), Prefix of %d: block %d differs from Lookup's", stop, how, n, i)
					}
				}
			}
		}
	}
}

// A tag shared by two keys (a 2^-64 event for real keys, forced here by
// storing one block under the other's tag) costs Prefix a full probe,
// never a wrong block: the first block of the run with the tag is another
// key's, and Prefix must still return the block stored under its own key.
func TestPrefixComparesTheFullKeyWhenTagsCollide(t *testing.T) {
	x := New(evict.NewLRU())
	ns := abi.Namespace{7}
	want := x.Insert(Key{NS: ns, Hash: abi.BlockHash{1}}, 64, 1, 0, nil)
	x.Seal(want)
	h := x.m.tag(&want.Key)
	// An impostor under want's tag, ahead of it in the run: remove want,
	// place the impostor at the home slot, put want back behind it.
	x.m.del(want)
	impostor := &Block{Key: Key{NS: ns, Hash: abi.BlockHash{2}}, state: Sealed}
	x.m.insert(h, impostor)
	x.m.insert(h, want)
	if got := x.m.findTag(h); got != impostor {
		t.Fatalf("setup: the first block of the run with the tag is %p, want the impostor %p", got, impostor)
	}
	got := x.Prefix(ns, want.Key.Hash[:], nil)
	if len(got) != 1 || got[0] != want {
		t.Fatalf("Prefix under a colliding tag: %v, want [%p] (the block of the key asked for)", got, want)
	}
	// And a namespace differing only there is not matched by the hash.
	if got := x.Prefix(abi.Namespace{8}, want.Key.Hash[:], nil); len(got) != 0 {
		t.Fatalf("Prefix in another namespace found %v", got)
	}
}
