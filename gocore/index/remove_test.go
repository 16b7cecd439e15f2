package index

import (
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/evict"
)

func TestMatchingAndRemoveDropOneNamespacesBlocks(t *testing.T) {
	for _, name := range evict.Names() {
		t.Run(name+" forgets a removed block everywhere", func(t *testing.T) {
			pol, err := evict.New(name, 64)
			if err != nil {
				t.Fatal(err)
			}
			x := New(pol)
			a1, a2 := sealed(x, 1), sealed(x, 2)
			other := x.Insert(Key{NS: [16]byte{2}, Hash: [16]byte{1}}, 100, 1, 0, []uint32{9})
			x.Seal(other)
			got := x.Matching(func(ns abi.Namespace) bool { return ns == abi.Namespace{1} })
			if len(got) != 2 || (got[0] != a1 && got[0] != a2) || (got[1] != a1 && got[1] != a2) {
				t.Fatalf("Matching namespace 1 = %v, want its two blocks", got)
			}
			x.Remove(a1)
			if x.Contains(a1.Key) || x.Lookup(a2.Key) != a2 || x.Lookup(other.Key) != other {
				t.Fatal("Remove dropped the wrong blocks")
			}
			if st := x.Stats(); st.Blocks != 2 || st.Evictable != 2 || st.Bytes != 200 || x.Policy().Len() != 2 {
				t.Fatalf("after Remove: %+v, policy holds %d; want 2 sealed evictable blocks", st, x.Policy().Len())
			}
			for b := x.Evict(); b != nil; b = x.Evict() {
				if b == a1 {
					t.Fatal("the policy still chose the removed block")
				}
			}
		})
	}
	t.Run("removing a pinned block panics", func(t *testing.T) {
		x := New(evict.NewLRU())
		b := sealed(x, 1)
		x.Pin(b)
		defer func() {
			if recover() == nil {
				t.Fatal("Remove of a pinned block did not panic")
			}
		}()
		x.Remove(b)
	})
}
