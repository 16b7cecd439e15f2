package ram

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/hugepages"
	"golang.org/x/sys/unix"
)

var adoptSpec = Spec{CapacityBytes: 16 * 4096, ChunkBytes: 4096, Prefault: true}

// handOver duplicates a's memfds as a successor would receive them.
func handOver(t *testing.T, a *Arena) *Handed {
	t.Helper()
	f := a.Files()
	dup := func(x *os.File) *os.File {
		fd, err := unix.Dup(int(x.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		return os.NewFile(uintptr(fd), x.Name())
	}
	return &Handed{Arena: dup(f.Arena), Ledger: dup(f.Ledger)}
}

// sealBlock allocates a block of n bytes filled with fill, with a record
// of tokens, and seals it in the ledger.
func sealBlock(t *testing.T, a *Arena, hash byte, n uint64, fill byte, tokens int) Adopted {
	t.Helper()
	ids, err := a.Alloc(nil, a.ChunksFor(n))
	if err != nil {
		t.Fatal(err)
	}
	left := n
	for _, id := range ids {
		c := a.Chunk(id)
		k := min(left, uint64(len(c)))
		for i := range c[:k] {
			c[i] = fill + byte(i)
		}
		left -= k
	}
	m := BlockMeta{Bytes: n, Layers: 2, Domain: 1}
	m.NS[0], m.Hash[0] = 7, hash
	if tokens > 0 {
		m.Record = make([]byte, abi.RecordBytes(tokens))
		binary.LittleEndian.PutUint64(m.Record, 0xabcdef)
		binary.LittleEndian.PutUint32(m.Record[20:], uint32(tokens))
		for i := range tokens {
			binary.LittleEndian.PutUint32(m.Record[abi.RecordHeaderSize+4*i:], uint32(i*3))
		}
	}
	if !a.Seal(ids, m) {
		t.Fatal("Seal refused a small block")
	}
	return Adopted{BlockMeta: m, Chunks: ids}
}

func adoptFrom(t *testing.T, s Spec, h *Handed) *Arena {
	t.Helper()
	s.Handed = h
	b, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestAdoptKeepsSealedBlocksAndTheirBytes(t *testing.T) {
	a, err := New(adoptSpec)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b1 := sealBlock(t, a, 1, 3*4096+100, 10, 40) // 4 chunks, a record spread over 4 rooms
	b2 := sealBlock(t, a, 2, 4096, 20, 0)
	gone := sealBlock(t, a, 3, 2*4096, 30, 0)
	a.Release(gone.Chunks)
	if _, err := a.Alloc(nil, 1); err != nil { // publishing: allocated, never sealed
		t.Fatal(err)
	}
	b := adoptFrom(t, adoptSpec, handOver(t, a))
	ad := b.Adoption()
	if ad.Refused != nil || len(ad.Blocks) != 2 || ad.Torn+ad.Corrupt+ad.Duplicate != 0 {
		t.Fatalf("adoption %+v", ad)
	}
	for i, want := range []Adopted{b1, b2} {
		got := ad.Blocks[i]
		if got.NS != want.NS || got.Hash != want.Hash || got.Bytes != want.Bytes || got.Layers != 2 || got.Domain != 1 ||
			!bytes.Equal(got.Record, want.Record) || !slicesEqual(got.Chunks, want.Chunks) {
			t.Fatalf("block %d: got %+v, want %+v", i, got, want)
		}
		if !b.Verify(&got) {
			t.Fatalf("block %d: its bytes do not match the checksum taken at its seal", i)
		}
	}
	if b.Free() != 16-5 {
		t.Fatalf("free chunks %d, want 11 (the two blocks hold 5)", b.Free())
	}
	// The successor seals after the adopted ones, and its sequence goes on.
	sealBlock(t, b, 4, 4096, 40, 0)
	c := adoptFrom(t, adoptSpec, handOver(t, b))
	if n := len(c.Adoption().Blocks); n != 3 || c.Adoption().Blocks[2].Hash[0] != 4 {
		t.Fatalf("second adoption: %+v", c.Adoption())
	}
}

func slicesEqual(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Adoption drops a block with a part missing and one with a corrupt entry
// (clearing their entries); a block whose bytes changed after its seal is
// adopted with its checksum, which Verify then refuses.
func TestAdoptDropsTornCorruptAndChangedBlocks(t *testing.T) {
	a, err := New(adoptSpec)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	good := sealBlock(t, a, 1, 2*4096, 1, 8)
	torn := sealBlock(t, a, 2, 2*4096, 2, 0)
	corrupt := sealBlock(t, a, 3, 4096, 3, 0)
	changed := sealBlock(t, a, 4, 4096, 4, 0)
	// A release the predecessor did not finish: one part cleared.
	a.ledger.clear(torn.Chunks[1:])
	// A flipped bit in an entry's key.
	a.ledger.entry(corrupt.Chunks[0])[25] ^= 1
	// Bytes written after the seal.
	a.Chunk(changed.Chunks[0])[100] ^= 0xff
	b := adoptFrom(t, adoptSpec, handOver(t, a))
	ad := b.Adoption()
	if len(ad.Blocks) != 2 || ad.Blocks[0].Hash != good.Hash || ad.Blocks[1].Hash != changed.Hash || ad.Torn != 1 || ad.Corrupt != 1 {
		t.Fatalf("adoption %+v", ad)
	}
	// The block's entries are intact; its bytes are not: Verify says so.
	if !b.Verify(&ad.Blocks[0]) || b.Verify(&ad.Blocks[1]) {
		t.Fatal("Verify: want the good block to pass and the changed one to fail")
	}
	if b.Free() != 16-3 {
		t.Fatalf("free %d: the dropped blocks' chunks must be free", b.Free())
	}
	// Dropped entries were cleared: a third process adopts the same blocks only.
	c := adoptFrom(t, adoptSpec, handOver(t, b))
	if len(c.Adoption().Blocks) != 2 || c.Adoption().Torn+c.Adoption().Corrupt != 0 {
		t.Fatalf("re-adoption %+v", c.Adoption())
	}
}

func TestAdoptRefusesAnotherLayoutByNameAndStartsEmpty(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  func(Spec) Spec
		edit  func(l []byte)
		words string
	}{
		{"layout version", nil, func(l []byte) {
			binary.LittleEndian.PutUint32(l[8:], LedgerVersion+1)
			binary.LittleEndian.PutUint32(l[40:], crcOf(l[:40]))
		}, "layout version 2; this Manager reads version 1"},
		{"magic", nil, func(l []byte) { l[0] = 'X' }, "magic"},
		{"header checksum", nil, func(l []byte) { l[30]++ }, "header checksum"},
		{"chunk size", func(s Spec) Spec { s.ChunkBytes = 8192; return s }, nil, "ram.ChunkBytes is 4096 in the handed-over tier, 8192"},
		{"tag", func(s Spec) Spec { s.Tag = 9; return s }, nil, "ram.Tag (tenant domains) is 0 in the handed-over tier, 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := New(adoptSpec)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			sealBlock(t, a, 1, 4096, 1, 0)
			if tc.edit != nil {
				tc.edit(a.ledger.b)
			}
			s := adoptSpec
			if tc.spec != nil {
				s = tc.spec(s)
			}
			b := adoptFrom(t, s, handOver(t, a))
			ad := b.Adoption()
			if !errors.Is(ad.Refused, ErrLedger) || !bytes.Contains([]byte(ad.Refused.Error()), []byte(tc.words)) {
				t.Fatalf("refusal %v, want ErrLedger naming %q", ad.Refused, tc.words)
			}
			if len(ad.Blocks) != 0 || b.Free() != b.Chunks() {
				t.Fatalf("a refused tier must start empty: %d blocks, %d of %d free", len(ad.Blocks), b.Free(), b.Chunks())
			}
		})
	}
}

func crcOf(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

func TestAdoptRefusesAFileThatIsNotTheTier(t *testing.T) {
	a, err := New(adoptSpec)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	h := handOver(t, a)
	h.Arena, h.Ledger = h.Ledger, h.Arena // swapped
	b := adoptFrom(t, adoptSpec, h)
	if !errors.Is(b.Adoption().Refused, hugepages.ErrNotArena) {
		t.Fatalf("swapped memfds: refusal %v, want ErrNotArena", b.Adoption().Refused)
	}
}

// FuzzAdoptLedger writes arbitrary bytes over a ledger's entries and
// adopts it: adoption never panics, and every block it adopts has bytes
// that match the checksum in its entries, parts that agree, and chunks
// no other adopted block holds.
func FuzzAdoptLedger(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add(bytes.Repeat([]byte{1}, 200), uint16(5))
	f.Fuzz(func(t *testing.T, junk []byte, at uint16) {
		a, err := New(adoptSpec)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		sealBlock(t, a, 1, 3*4096, 1, 30)
		sealBlock(t, a, 2, 4096, 2, 0)
		ents := a.ledger.b[LedgerHeaderBytes:]
		off := int(at) % len(ents)
		copy(ents[off:], junk)
		b := adoptFrom(t, adoptSpec, handOver(t, a))
		held := map[uint32]bool{}
		for _, blk := range b.Adoption().Blocks {
			for _, id := range blk.Chunks {
				if id >= b.Chunks() || held[id] {
					t.Fatalf("chunk %d adopted twice or out of range", id)
				}
				held[id] = true
			}
			if blk.Bytes == 0 || blk.Bytes > uint64(len(blk.Chunks))*4096 {
				t.Fatalf("block of %d bytes in %d chunks", blk.Bytes, len(blk.Chunks))
			}
		}
		if int(b.Free())+len(held) != int(b.Chunks()) {
			t.Fatalf("free %d + held %d != %d", b.Free(), len(held), b.Chunks())
		}
	})
}
