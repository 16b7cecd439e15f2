package ram

import (
	"errors"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/hugepages"
	"github.com/orbitkv/orbitkv/hugepages/hugepagestest"
)

func TestSpecValidateNamesTheLimit(t *testing.T) {
	for _, s := range []Spec{
		{CapacityBytes: 1 << 20, ChunkBytes: 1000},
		{CapacityBytes: 1 << 20, ChunkBytes: 2048},
		{CapacityBytes: 4096, ChunkBytes: 8192},
		{CapacityBytes: 1 << 20, ChunkBytes: 4096, Hugepages: 9},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
}

func TestAllocReleaseAndAddresses(t *testing.T) {
	a, err := New(Spec{CapacityBytes: 10*4096 + 100, ChunkBytes: 4096, Prefault: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Chunks() != 10 || a.CapacityBytes() != 40960 || a.Free() != 10 {
		t.Fatalf("chunks %d capacity %d free %d", a.Chunks(), a.CapacityBytes(), a.Free())
	}
	if a.ChunksFor(4097) != 2 || a.ChunksFor(4096) != 1 {
		t.Fatal("ChunksFor rounds wrong")
	}
	ids, err := a.Alloc(nil, 7)
	if err != nil || len(ids) != 7 || a.Free() != 3 {
		t.Fatalf("alloc 7: %v %v free %d", ids, err, a.Free())
	}
	if _, err := a.Alloc(nil, 4); !errors.Is(err, ErrNoSpace) || a.Free() != 3 {
		t.Fatalf("alloc beyond free: %v, free %d", err, a.Free())
	}
	seen := map[uint32]bool{}
	for _, id := range ids {
		if seen[id] || id >= 10 {
			t.Fatalf("chunk %d repeated or out of range", id)
		}
		seen[id] = true
		c := a.Chunk(id)
		c[0], c[4095] = byte(id), byte(id)
		if a.Addr(id)-a.Addr(0) != uintptr(id)*4096 {
			t.Fatal("Addr is not base + id*chunk")
		}
	}
	a.Release(ids)
	if a.Free() != 10 {
		t.Fatalf("free after release %d", a.Free())
	}
}

func TestAnArenaWithoutHugepagesSaysSo(t *testing.T) {
	a, err := New(Spec{CapacityBytes: 1 << 20, ChunkBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Huge() || a.Fallback() != "mode off" {
		t.Fatalf("huge %v fallback %q, want the zero Spec to be a plain memfd", a.Huge(), a.Fallback())
	}
}

func TestHugepageArenaIsFaultedInTwoMiBPages(t *testing.T) {
	hugepagestest.Reserve(t, 4)
	before, err := hugepages.ReadPool()
	if err != nil {
		t.Fatal(err)
	}
	// 12 KiB chunks do not divide 2 MiB: 341 chunks (4,190,208 bytes) take
	// two hugepages, and the chunk size is untouched.
	a, err := New(Spec{CapacityBytes: 4<<20 + 100, ChunkBytes: 12 << 10, Prefault: true, Hugepages: hugepages.Require})
	if err != nil {
		t.Fatalf("the pool has %d free pages and a Require tier failed: %v", before.Available(), err)
	}
	defer a.Close()
	if !a.Huge() || a.Fallback() != "" {
		t.Fatalf("huge %v fallback %q, want hugetlb", a.Huge(), a.Fallback())
	}
	if a.Chunks() != 341 || a.ChunkBytes() != 12<<10 || a.CapacityBytes() != 341*12<<10 {
		t.Fatalf("chunks %d of %d bytes, capacity %d; want 341 of 12 KiB", a.Chunks(), a.ChunkBytes(), a.CapacityBytes())
	}
	if a.Addr(0)%hugepages.HugePageSize != 0 {
		t.Fatalf("arena at %#x, not 2 MiB aligned", a.Addr(0))
	}
	ids, err := a.Alloc(nil, a.Chunks())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		c := a.Chunk(id)
		c[0], c[len(c)-1] = byte(id), byte(id)
	}
	for _, id := range ids {
		if c := a.Chunk(id); c[0] != byte(id) || c[len(c)-1] != byte(id) {
			t.Fatalf("chunk %d lost its bytes", id)
		}
	}
	a.Release(ids)
	after, err := hugepages.ReadPool()
	if err != nil {
		t.Fatal(err)
	}
	if after.Free > before.Free-2 {
		t.Fatalf("HugePages_Free %d before, %d after filling the tier; want a drop of 2", before.Free, after.Free)
	}
}

func TestRequireWithoutHugepagesFailsAndNamesTheFix(t *testing.T) {
	hugepagestest.Drain(t)
	_, err := New(Spec{CapacityBytes: 4 << 20, ChunkBytes: 16 << 10, Prefault: true, Hugepages: hugepages.Require})
	if !errors.Is(err, hugepages.ErrUnavailable) || !strings.Contains(err.Error(), "nr_hugepages") {
		t.Fatalf("New = %v, want ErrUnavailable naming nr_hugepages", err)
	}
	a, err := New(Spec{CapacityBytes: 4 << 20, ChunkBytes: 16 << 10, Prefault: true, Hugepages: hugepages.Prefer})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Huge() || !strings.Contains(a.Fallback(), "2 needed") {
		t.Fatalf("Prefer with an empty pool: huge %v fallback %q", a.Huge(), a.Fallback())
	}
}
