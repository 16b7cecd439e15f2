package layout

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"slices"
	"testing"
)

// TestSlotHeaderLayout checks the slot header's byte offsets against the
// table in doc.go.
func TestSlotHeaderLayout(t *testing.T) {
	h := SlotHeader{Key: key(0xab, 0x0102030405060708), Meta: Meta{Bytes: 0x11223344, Layers: 7}, CRC: 0xdeadbeef, Gen: 0x99}
	b := make([]byte, HeaderBytes)
	for i := range b {
		b[i] = 0xff // PutSlotHeader must zero the page
	}
	PutSlotHeader(b, h)
	le := binary.LittleEndian
	checks := []struct {
		field string
		got   uint64
		want  uint64
	}{
		{"magic at 0", le.Uint64(b[0:]), le.Uint64([]byte("OKVSLOT1"))},
		{"version at 8", uint64(le.Uint32(b[8:])), 1},
		{"crc32c at 12", uint64(le.Uint32(b[12:])), 0xdeadbeef},
		{"namespace at 16", uint64(b[16]), 0xab},
		{"hash at 32", le.Uint64(b[32:]), 0x0102030405060708},
		{"bytes at 48", le.Uint64(b[48:]), 0x11223344},
		{"generation at 56", le.Uint64(b[56:]), 0x99},
		{"layers at 64", uint64(le.Uint32(b[64:])), 7},
		{"reserved at 68", uint64(le.Uint32(b[68:])), 0},
		{"header crc32c at 72", uint64(le.Uint32(b[72:])), uint64(crc32.Checksum(b[:72], Castagnoli))},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", c.field, c.got, c.want)
		}
	}
	if !bytes.Equal(b[headerUsed:], make([]byte, HeaderBytes-headerUsed)) {
		t.Error("the header page is not zero after its fields")
	}
	if got, ok := ParseSlotHeader(b); !ok || got != h {
		t.Errorf("parse = %+v, %v; want %+v", got, ok, h)
	}
}

// TestRecordLayout checks the index record's byte offsets against doc.go.
func TestRecordLayout(t *testing.T) {
	r := Record{Kind: KindPut, Slot: 0x0a0b, Gen: 0x77, Key: key(0xcd, 5), Meta: Meta{Bytes: 0x5000, Layers: 3}, CRC: 0xcafef00d}
	b := AppendRecord(nil, r)
	le := binary.LittleEndian
	if len(b) != RecordBytes {
		t.Fatalf("record is %d bytes, want %d", len(b), RecordBytes)
	}
	checks := []struct {
		field string
		got   uint64
		want  uint64
	}{
		{"kind at 0", uint64(b[0]), KindPut},
		{"version at 1", uint64(b[1]), 1},
		{"reserved at 2", uint64(le.Uint16(b[2:])), 0},
		{"slot at 4", uint64(le.Uint32(b[4:])), 0x0a0b},
		{"generation at 8", le.Uint64(b[8:]), 0x77},
		{"namespace at 16", uint64(b[16]), 0xcd},
		{"hash at 32", le.Uint64(b[32:]), 5},
		{"bytes at 48", le.Uint64(b[48:]), 0x5000},
		{"layers at 56", uint64(le.Uint32(b[56:])), 3},
		{"data crc32c at 60", uint64(le.Uint32(b[60:])), 0xcafef00d},
		{"record crc32c at 76", uint64(le.Uint32(b[76:])), uint64(crc32.Checksum(b[:76], Castagnoli))},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", c.field, c.got, c.want)
		}
	}
	if got, ok := ParseRecord(b); !ok || got != r {
		t.Errorf("parse = %+v, %v; want %+v", got, ok, r)
	}
	h := AppendIndexHeader(nil, 2<<20)
	if want := "4f4b56494e445831" + "01000000" + "00100000" + "0000200000000000"; hex.EncodeToString(h[:24]) != want {
		t.Errorf("index header starts %x, want %s", h[:24], want)
	}
	if sb, ok := ParseIndexHeader(h); !ok || sb != 2<<20 {
		t.Errorf("ParseIndexHeader = %d, %v", sb, ok)
	}
}

// validLog is an index log of puts and a delete for the fuzz seeds.
func validLog() []byte {
	b := AppendIndexHeader(nil, 64<<10)
	for i := range 5 {
		b = AppendRecord(b, Record{Kind: KindPut, Slot: uint32(i), Gen: uint64(i + 1), Key: key(1, uint64(i)), Meta: Meta{Bytes: 4096, Layers: 1}, CRC: uint32(i)})
	}
	b = AppendRecord(b, Record{Kind: KindDelete, Slot: 2, Gen: 3, Key: key(1, 2)})
	return AppendRecord(b, Record{Kind: KindPut, Slot: 0, Gen: 9, Key: key(1, 7), Meta: Meta{Bytes: 8192, Layers: 2}})
}

// FuzzReplay feeds arbitrary index logs to replay, as they are and turned
// into well-formed logs (every 8 input bytes become one checksummed
// record: kind, slot, generation, key and size from the bytes, so puts,
// deletes, stale deletes, reused slots and out-of-range slots mix).
func FuzzReplay(f *testing.F) {
	good := validLog()
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(good[:len(good)-RecordBytes/2])
	f.Add(good[:RecordBytes-1])
	f.Add(append(slices.Clone(good), bytes.Repeat([]byte{0x5a}, 100)...))
	f.Add(AppendIndexHeader(nil, 128<<10))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 1, 0, 1, 0, 1, 2, 1, 1, 2, 3, 0, 1, 0, 2, 2, 0, 1, 0, 1, 0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkReplay(t, b)
		log := AppendIndexHeader(nil, 64<<10)
		for i := 0; i+8 <= len(b); i += 8 {
			c := b[i : i+8]
			r := Record{Kind: KindPut, Slot: uint32(c[1] % 12), Gen: uint64(c[2]), Key: key(c[3]%2, uint64(c[4]%16)),
				Meta: Meta{Bytes: uint64(binary.LittleEndian.Uint16(c[5:])) << 1, Layers: uint32(c[7] % 3)}}
			if c[0]%3 == 0 {
				r.Kind, r.Meta = KindDelete, Meta{}
			}
			log = AppendRecord(log, r)
		}
		checkReplay(t, log)
	})
}

// checkReplay replays b and checks: it never panics, it cuts at a record
// boundary, it keeps only in-range blocks with one block per slot and per
// key in generation order, and a log rewritten from its result (what
// compaction does) replays to the same blocks.
func checkReplay(t *testing.T, b []byte) {
	const slotBytes, nslots = 64 << 10, 8
	r := Replay(b, slotBytes, nslots)
	if r.Reset != "" {
		if r.GoodLen != 0 || len(r.Blocks) != 0 {
			t.Fatalf("a reset log kept %d bytes and %d blocks", r.GoodLen, len(r.Blocks))
		}
		return
	}
	if r.GoodLen > int64(len(b)) || r.GoodLen != int64(RecordBytes*(1+r.Records)) {
		t.Fatalf("goodLen %d of %d bytes, %d records", r.GoodLen, len(b), r.Records)
	}
	slots, keys := map[uint32]bool{}, map[Key]bool{}
	for i, e := range r.Blocks {
		if e.Slot >= nslots || slots[e.Slot] || keys[e.Key] || e.Meta.Bytes == 0 || e.Meta.Bytes > slotBytes || e.Meta.Layers == 0 {
			t.Fatalf("entry %d: %+v", i, e)
		}
		if i > 0 && r.Blocks[i-1].Gen > e.Gen {
			t.Fatalf("entries out of generation order at %d", i)
		}
		slots[e.Slot], keys[e.Key] = true, true
	}
	log := AppendIndexHeader(nil, slotBytes)
	for _, e := range r.Blocks {
		log = AppendRecord(log, Record{Kind: KindPut, Slot: e.Slot, Gen: e.Gen, Key: e.Key, Meta: e.Meta, CRC: e.CRC})
	}
	r2 := Replay(log, slotBytes, nslots)
	if len(r2.Blocks) != len(r.Blocks) {
		t.Fatalf("rewritten log replays to %d blocks, want %d", len(r2.Blocks), len(r.Blocks))
	}
	for i := range r.Blocks {
		a, b := r.Blocks[i], r2.Blocks[i]
		if a.Key != b.Key || a.Slot != b.Slot || a.Gen != b.Gen || a.Meta != b.Meta || a.CRC != b.CRC {
			t.Fatalf("block %d differs after the rewrite: %+v vs %+v", i, a, b)
		}
	}
}

// FuzzSlotHeader: parsing arbitrary bytes never panics, and a header that
// parses encodes back to the same bytes.
func FuzzSlotHeader(f *testing.F) {
	b := make([]byte, HeaderBytes)
	PutSlotHeader(b, SlotHeader{Key: key(1, 2), Meta: Meta{Bytes: 100, Layers: 1}, CRC: 5, Gen: 6})
	f.Add(b[:headerUsed])
	f.Add(b[:headerUsed-1])
	f.Add([]byte("OKVSLOT1"))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, ok := ParseSlotHeader(in)
		if !ok {
			return
		}
		out := make([]byte, HeaderBytes)
		PutSlotHeader(out, h)
		if !bytes.Equal(out[:headerUsed], in[:headerUsed]) {
			t.Fatalf("header %x re-encodes as %x", in[:headerUsed], out[:headerUsed])
		}
	})
}

// key is a test key: namespace ns, hash i.
func key(ns byte, i uint64) Key {
	var k Key
	k.NS[0] = ns
	binary.LittleEndian.PutUint64(k.Hash[:], i)
	binary.LittleEndian.PutUint64(k.Hash[8:], ^i)
	return k
}
