package ram

import (
	"errors"
	"testing"
)

func TestSpecValidateNamesTheLimit(t *testing.T) {
	for _, s := range []Spec{
		{CapacityBytes: 1 << 20, ChunkBytes: 1000},
		{CapacityBytes: 1 << 20, ChunkBytes: 2048},
		{CapacityBytes: 4096, ChunkBytes: 8192},
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
