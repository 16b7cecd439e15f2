package index

import (
	"testing"
	"unsafe"

	"github.com/orbitkv/orbitkv/gocore/evict"
)

func key(i byte) Key { return Key{NS: [16]byte{1}, Hash: [16]byte{i}} }

func sealed(x *Index, i byte) *Block {
	b := x.Insert(key(i), 100, 1, 0, []uint32{uint32(i)})
	x.Seal(b)
	return b
}

func TestPublishingBlocksAreInvisibleUntilSealed(t *testing.T) {
	x := New(evict.NewLRU())
	b := x.Insert(key(1), 100, 1, 0, []uint32{1})
	if x.Lookup(key(1)) != nil {
		t.Fatal("a publishing block is visible")
	}
	if !x.Contains(key(1)) {
		t.Fatal("Contains misses a publishing block")
	}
	if x.Evict() != nil {
		t.Fatal("a publishing block was evictable")
	}
	x.Seal(b)
	if x.Lookup(key(1)) != b {
		t.Fatal("sealed block not visible")
	}
}

func TestNamespacesNeverShareABlock(t *testing.T) {
	x := New(evict.NewLRU())
	sealed(x, 1)
	other := key(1)
	other.NS[0] = 2
	if x.Lookup(other) != nil {
		t.Fatal("a block of namespace 1 was found under namespace 2")
	}
}

func TestEvictionIsLeastRecentlyUsedAndSkipsPinnedBlocks(t *testing.T) {
	x := New(evict.NewLRU())
	a, b, c := sealed(x, 1), sealed(x, 2), sealed(x, 3)
	x.Pin(a) // an access: most recent first a c b
	x.Unpin(a)
	x.Pin(b) // b is leased
	if got := x.EvictableChunks(); got != 2 {
		t.Fatalf("evictable chunks %d, want 2", got)
	}
	if v := x.Evict(); v != c {
		t.Fatalf("evicted %v, want block 3", v.Key.Hash[0])
	}
	if v := x.Evict(); v != a {
		t.Fatalf("evicted %v, want block 1", v.Key.Hash[0])
	}
	if v := x.Evict(); v != nil {
		t.Fatalf("evicted pinned block %v", v.Key.Hash[0])
	}
	x.Unpin(b)
	if v := x.Evict(); v != b {
		t.Fatal("unpinned block not evictable")
	}
	if st := x.Stats(); st.Blocks != 0 || st.Pins != 0 || st.Entries != 0 || st.Bytes != 0 {
		t.Fatalf("stats after evicting everything: %+v", st)
	}
}

func TestAbortRemovesAPublishingBlock(t *testing.T) {
	x := New(evict.NewLRU())
	b := x.Insert(key(1), 100, 1, 0, []uint32{1})
	x.Abort(b)
	if x.Contains(key(1)) || x.Stats().Entries != 0 {
		t.Fatal("aborted block still present")
	}
}

func TestPinsCountEveryHolder(t *testing.T) {
	x := New(evict.NewLRU())
	b := sealed(x, 1)
	x.Pin(b)
	x.Pin(b)
	x.Unpin(b)
	if x.Evict() != nil || b.Pins() != 1 || x.Stats().Pins != 1 {
		t.Fatal("block with one pin left was evictable")
	}
	x.Unpin(b)
	defer func() {
		if recover() == nil {
			t.Fatal("unpin below zero did not panic")
		}
	}()
	x.Unpin(b)
}

// Pins reach the policy lazily (evict.Reveal): a query's pin and unpin
// touch no policy node, the policy learns of them when it proposes the
// block, a block pinned then is set aside until its last pin goes, and a
// block accessed since the policy last saw it outlives an untouched one
// inserted after it.
func TestThePolicySeesAccessesAndPinsWhenItProposesTheBlock(t *testing.T) {
	x := New(evict.NewLRU())
	a, b, c := sealed(x, 1), sealed(x, 2), sealed(x, 3)
	x.Pin(a)
	x.Unpin(a)
	x.Pin(b)
	if a.access != 1 || a.shown {
		t.Fatalf("after a pin and an unpin: %d deferred accesses, shown %v; want 1, false", a.access, a.shown)
	}
	if v := x.Evict(); v != c {
		t.Fatalf("evicted block %d, want block 3 (block 1 was accessed, block 2 is pinned)", v.Key.Hash[0])
	}
	if a.access != 0 || b.access != 0 || !b.shown {
		t.Fatalf("after Evict: block 1 has %d deferred accesses, block 2 %d and shown %v; want 0, 0, true", a.access, b.access, b.shown)
	}
	x.Unpin(b) // the policy holds b pinned: this Unpin reaches it
	if b.shown {
		t.Fatal("the last unpin of a shown block left it shown")
	}
	if v := x.Evict(); v != a {
		t.Fatalf("evicted block %d, want block 1 (block 2 returned to the front on its unpin)", v.Key.Hash[0])
	}
	if v := x.Evict(); v != b {
		t.Fatal("block 2 not evictable after its last unpin")
	}
	if st := x.Stats(); st.Blocks != 0 || st.Pins != 0 || st.Evictable != 0 || x.EvictableChunks() != 0 {
		t.Fatalf("stats after evicting everything: %+v, %d evictable chunks", st, x.EvictableChunks())
	}
}

// Every Block starts a cache line, so a Block (all a query reads) is
// one line.
func TestBlocksStartACacheLine(t *testing.T) {
	x := New(evict.NewLRU())
	for i := 0; i < 256; i++ {
		b := x.Insert(Key{NS: [16]byte{2}, Hash: [16]byte{byte(i), byte(i >> 8)}}, 64, 1, 0, nil)
		if p := uintptr(unsafe.Pointer(b)); p%64 != 0 {
			t.Fatalf("block %d at %#x: not 64-byte aligned", i, p)
		}
	}
}
