package lease

import (
	"testing"

	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/index"
)

// A tenant's leases hold at most its share of the budget: beyond it a
// lease is refused (never queued, so it holds no other tenant's ticket
// behind it), another tenant still leases, and ending a lease frees the
// share again. A session without a tenant is bound by the budget only.
func TestATenantLeasesUpToItsShareOnly(t *testing.T) {
	idx := index.New(evict.NewLRU())
	var blks []*index.Block
	for i := range 8 {
		blk := idx.Insert(index.Key{NS: [16]byte{7}, Hash: [16]byte{byte(i)}}, 4096, 1, 0, nil)
		idx.Seal(blk)
		blks = append(blks, blk)
	}
	b := NewBook[int](1, idx, Limits{Budget: 8 * 4096, TenantBudget: []uint64{3 * 4096, 4 * 4096}})
	hostile := Owner{Slot: 1, Token: 1, Tenant: 1}
	honest := Owner{Slot: 2, Token: 2, Tenant: 2}
	v, l1 := b.Acquire(hostile, blks[0:3], false)
	if v != Grant {
		t.Fatalf("tenant 1's first 3 blocks: %v, want Grant", v)
	}
	if v, _ := b.Acquire(hostile, blks[3:4], false); v != Refuse {
		t.Fatalf("tenant 1 beyond its 3-block share: %v, want Refuse", v)
	}
	if v := b.Admit(hostile, 1, 4096, false); v != Refuse {
		t.Fatalf("Admit of tenant 1 beyond its share: %v, want Refuse", v)
	}
	if got := b.TenantLeased(0); got != 3*4096 {
		t.Fatalf("tenant 1 leased %d bytes, want %d", got, 3*4096)
	}
	if v, _ := b.Acquire(honest, blks[3:7], false); v != Grant {
		t.Fatalf("tenant 2 within its share while tenant 1 is at its own: %v, want Grant", v)
	}
	b.End(l1)
	if got := b.TenantLeased(0); got != 0 {
		t.Fatalf("tenant 1 holds %d bytes after its lease ended", got)
	}
	if v, _ := b.Acquire(hostile, blks[7:8], false); v != Grant {
		t.Fatalf("tenant 1 after its lease ended: %v, want Grant", v)
	}
	if v, _ := b.Acquire(Owner{Slot: 3, Token: 3}, blks[0:1], false); v != Grant {
		t.Fatalf("a session without a tenant within the budget: %v, want Grant", v)
	}
}

// Restores reserve no bytes of their own: however many restores of one
// lease are in flight (one block into 32 pages), the budget and the
// tenant count the lease's bytes once; a lease that ends while they run
// keeps its bytes reserved until the last one lands.
func TestRestoresOfALeaseReserveItsBytesOnce(t *testing.T) {
	idx := index.New(evict.NewLRU())
	blk := idx.Insert(index.Key{NS: [16]byte{7}, Hash: [16]byte{1}}, 4096, 1, 0, nil)
	idx.Seal(blk)
	b := NewBook[int](1, idx, Limits{Budget: 8 * 4096, TenantBudget: []uint64{4096}})
	o := Owner{Slot: 1, Token: 1, Tenant: 1}
	v, l := b.Acquire(o, []*index.Block{blk}, false)
	if v != Grant {
		t.Fatalf("lease: %v", v)
	}
	for range 32 {
		b.RestoreStarted(l)
	}
	if b.Reserved() != 4096 || b.TenantLeased(0) != 4096 {
		t.Fatalf("32 restores of a 4096-byte lease reserve %d bytes, the tenant %d; want 4096 each", b.Reserved(), b.TenantLeased(0))
	}
	b.End(l)
	if b.Reserved() != 4096 || b.TenantLeased(0) != 4096 || !l.Ended() {
		t.Fatalf("ended with restores in flight: reserved %d, tenant %d, Ended %v; want 4096, 4096, true", b.Reserved(), b.TenantLeased(0), l.Ended())
	}
	for i := range 32 {
		b.RestoreLanded(l)
		if want := uint64(4096); i == 31 {
			want = 0
			if b.Reserved() != want || b.TenantLeased(0) != want {
				t.Fatalf("after the last restore landed: reserved %d, tenant %d; want 0", b.Reserved(), b.TenantLeased(0))
			}
		} else if b.Reserved() != want {
			t.Fatalf("after %d of 32 restores landed: reserved %d, want %d", i+1, b.Reserved(), want)
		}
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
}
