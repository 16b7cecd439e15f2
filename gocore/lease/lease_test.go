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
