package index

import (
	"testing"

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
