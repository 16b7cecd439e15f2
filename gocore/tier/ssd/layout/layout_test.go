package layout

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
)

// testSecret is the secret of the tests' MACs; otherSecret stands for a
// writer without it.
var testSecret, otherSecret = [SecretBytes]byte{1, 2, 3}, [SecretBytes]byte{9}

// hmacOf is HMAC-SHA256 under testSecret of the parts, computed apart from
// MAC so the tests check the layout against the algorithm doc.go names.
func hmacOf(parts ...[]byte) []byte {
	h := hmac.New(sha256.New, testSecret[:])
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum(nil)
}

// TestSlotHeaderLayout checks the slot header's byte offsets against the
// table in doc.go, with and without a block record.
func TestSlotHeaderLayout(t *testing.T) {
	for _, rec := range [][]byte{nil, []byte("a block record"), bytes.Repeat([]byte{0xe7}, MaxRecordBytes)} {
		t.Run(fmt.Sprintf("record=%dB", len(rec)), func(t *testing.T) {
			h := SlotHeader{Key: key(0xab, 0x0102030405060708), Meta: Meta{Bytes: 5000, Layers: 7}, Gen: 0x99, Slot: 0x0c0d, Record: rec}
			data := bytes.Repeat([]byte{0x5c}, 8192)
			b := make([]byte, HeaderBytes)
			for i := range b {
				b[i] = 0xff // SealSlotHeader must zero the page
			}
			NewMAC(&testSecret).SealSlotHeader(b, h, [][]byte{data[:4096], data[4096:]})
			le := binary.LittleEndian
			checks := []struct {
				field string
				got   uint64
				want  uint64
			}{
				{"magic at 0", le.Uint64(b[0:]), le.Uint64([]byte("OKVSLOT1"))},
				{"version at 8", uint64(le.Uint32(b[8:])), 2},
				{"slot at 12", uint64(le.Uint32(b[12:])), 0x0c0d},
				{"namespace at 16", uint64(b[16]), 0xab},
				{"hash at 32", le.Uint64(b[32:]), 0x0102030405060708},
				{"bytes at 48", le.Uint64(b[48:]), 5000},
				{"generation at 56", le.Uint64(b[56:]), 0x99},
				{"layers at 64", uint64(le.Uint32(b[64:])), 7},
				{"reserved at 68", uint64(le.Uint32(b[68:])), 0},
				{"record length at 104", uint64(le.Uint32(b[104:])), uint64(len(rec))},
				{"reserved at 108", uint64(le.Uint32(b[108:])), 0},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s: %#x, want %#x", c.field, c.got, c.want)
				}
			}
			if want := hmacOf(b[:72], data[:5000]); !bytes.Equal(b[72:104], want) {
				t.Errorf("block tag at 72 is %x, want HMAC-SHA256 of bytes 0..71 and the block's 5000 bytes, %x", b[72:104], want)
			}
			if want := hmacOf([]byte("OKVSREC1"), b[8:72], b[104:112], rec); !bytes.Equal(b[112:144], want) {
				t.Errorf("record tag at 112 is %x, want HMAC-SHA256 of \"OKVSREC1\", bytes 8..71, bytes 104..111 and the record, %x", b[112:144], want)
			}
			if !bytes.Equal(b[144:144+len(rec)], rec) {
				t.Error("the record is not at 144")
			}
			if end := 144 + len(rec); !bytes.Equal(b[end:], make([]byte, HeaderBytes-end)) {
				t.Error("the header page is not zero after the record")
			}
			h.Tag, h.RecordTag = [TagBytes]byte(b[72:104]), [TagBytes]byte(b[112:144])
			if got, ok := ParseSlotHeader(b); !ok || !sameHeader(got, h) {
				t.Errorf("parse = %+v, %v; want %+v", got, ok, h)
			}
			if !NewMAC(&testSecret).CheckSlot(b, [][]byte{data}) {
				t.Error("CheckSlot refuses the header it sealed")
			}
			if got, ok := NewMAC(&testSecret).CheckRecord(b); !ok || !bytes.Equal(got, rec) || (rec == nil) != (got == nil) {
				t.Errorf("CheckRecord = %q, %v; want %q, true", got, ok, rec)
			}
		})
	}
}

// sameHeader compares two headers, their records by content.
func sameHeader(a, b SlotHeader) bool {
	return a.Key == b.Key && a.Meta == b.Meta && a.Gen == b.Gen && a.Slot == b.Slot && a.Tag == b.Tag &&
		bytes.Equal(a.Record, b.Record) && a.RecordTag == b.RecordTag
}

// TestRecordTagCoversFieldsAndRecord: a change to any field of the header,
// the record's length or any byte of the record fails CheckRecord, and so
// does a record sealed under another secret or a block tag copied into the
// record tag; the block's bytes do not count (CheckRecord never sees them).
func TestRecordTagCoversFieldsAndRecord(t *testing.T) {
	mac := NewMAC(&testSecret)
	rec := []byte("parent hash, block hash, token ids")
	h := SlotHeader{Key: key(3, 4), Meta: Meta{Bytes: 4000, Layers: 2}, Gen: 17, Slot: 5, Record: rec}
	data := bytes.Repeat([]byte{0xa1}, 4096)
	sealed := make([]byte, HeaderBytes)
	mac.SealSlotHeader(sealed, h, [][]byte{data})
	for off := 0; off < recordOff+len(rec); off++ {
		if off >= slotTagOff && off < headerUsed {
			continue // the block tag: CheckSlot's
		}
		b := slices.Clone(sealed)
		b[off] ^= 0x10
		if _, ok := mac.CheckRecord(b); ok {
			t.Errorf("header byte %d changed, and CheckRecord accepts it", off)
		}
	}
	b := slices.Clone(sealed)
	binary.LittleEndian.PutUint32(b[recLenOff:], uint32(len(rec)-1))
	if _, ok := mac.CheckRecord(b); ok {
		t.Error("a record cut short by its length field checks")
	}
	b = slices.Clone(sealed)
	b[recordOff+len(rec)] = 1 // past the record: in no tag, as the block's page tail is in none
	if got, ok := mac.CheckRecord(b); !ok || !bytes.Equal(got, rec) {
		t.Error("CheckRecord depends on a byte after the record")
	}
	forged := make([]byte, HeaderBytes)
	NewMAC(&otherSecret).SealSlotHeader(forged, h, [][]byte{data})
	if _, ok := mac.CheckRecord(forged); ok {
		t.Error("CheckRecord accepts a record sealed under another secret")
	}
	// A block whose bytes are a length and a record has a block tag over
	// the same bytes as a record tag would be, but for the magic.
	blockLike := append(binary.LittleEndian.AppendUint32(nil, uint32(len(rec))), 0, 0, 0, 0)
	blockLike = append(blockLike, rec...)
	h2 := h
	h2.Meta.Bytes = uint64(len(blockLike))
	b = make([]byte, HeaderBytes)
	mac.SealSlotHeader(b, h2, [][]byte{blockLike})
	copy(b[recTagOff:recordOff], b[slotTagOff:headerUsed])
	if _, ok := mac.CheckRecord(b); ok {
		t.Error("a block tag copied into the record tag checks")
	}
	d := slices.Clone(data)
	d[0] ^= 1
	if _, ok := mac.CheckRecord(sealed); !ok || mac.CheckSlot(sealed, [][]byte{d}) {
		t.Error("the record's check depends on the block, or the block's does not")
	}
}

// TestRecordLengthIsChecked: a header naming a record longer than
// MaxRecordBytes, or longer than the bytes given, does not parse and its
// record does not check; one of exactly MaxRecordBytes does.
func TestRecordLengthIsChecked(t *testing.T) {
	mac := NewMAC(&testSecret)
	b := make([]byte, HeaderBytes)
	mac.SealSlotHeader(b, SlotHeader{Key: key(1, 1), Meta: Meta{Bytes: 1, Layers: 1}, Gen: 1, Record: make([]byte, MaxRecordBytes)}, [][]byte{{0}})
	if _, ok := ParseSlotHeader(b); !ok {
		t.Fatal("a header with a record of MaxRecordBytes does not parse")
	}
	if _, ok := mac.CheckRecord(b); !ok {
		t.Fatal("a record of MaxRecordBytes does not check")
	}
	for _, c := range []struct {
		name string
		n    uint32
		b    []byte
	}{
		{"one byte over the limit", MaxRecordBytes + 1, b},
		{"the largest length", ^uint32(0), b},
		{"beyond the bytes given", 8, b[:recordOff+7]},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.b)
			binary.LittleEndian.PutUint32(in[recLenOff:], c.n)
			if _, ok := ParseSlotHeader(in); ok {
				t.Error("the header parses")
			}
			if _, ok := mac.CheckRecord(in); ok {
				t.Error("its record checks")
			}
		})
	}
	if _, ok := ParseSlotHeader(b[:recordOff-1]); ok {
		t.Error("a header cut before its record tag parses")
	}
}

// TestHeaderWithoutRecordPart: a version-2 slot header with no record
// part (zero from byte 104 on, its block tag over bytes 0..71 and the
// block) parses, its block checks, and it reads as a block with no
// record; a record-less header SealSlotHeader writes has a record tag.
func TestHeaderWithoutRecordPart(t *testing.T) {
	mac := NewMAC(&testSecret)
	data := bytes.Repeat([]byte{0x33}, 4096)
	b := make([]byte, HeaderBytes)
	mac.SealSlotHeader(b, SlotHeader{Key: key(2, 9), Meta: Meta{Bytes: 4096, Layers: 1}, Gen: 4, Slot: 1}, [][]byte{data})
	if allZero(b[recTagOff:recordOff]) {
		t.Error("a header sealed with no record has a zero record tag")
	}
	if rec, ok := mac.CheckRecord(b); !ok || rec != nil {
		t.Errorf("CheckRecord of a header sealed with no record = %q, %v; want nil, true", rec, ok)
	}
	clear(b[headerUsed:]) // what a writer that keeps no records leaves there
	if _, ok := ParseSlotHeader(b); !ok || !mac.CheckSlot(b, [][]byte{data}) {
		t.Fatal("a header with no record part does not parse or its block does not check")
	}
	if rec, ok := mac.CheckRecord(b); !ok || rec != nil {
		t.Errorf("CheckRecord of a header with no record part = %q, %v; want nil, true", rec, ok)
	}
	b[recordOff] = 1 // no record, so in no tag
	if rec, ok := mac.CheckRecord(b); !ok || rec != nil {
		t.Errorf("CheckRecord of a header with no record part with a byte after it = %q, %v; want nil, true", rec, ok)
	}
	binary.LittleEndian.PutUint32(b[recLenOff:], 1) // a record with a zero tag
	if _, ok := mac.CheckRecord(b); ok {
		t.Error("a record with an all-zero record tag checks")
	}
}

// TestSlotTagCoversEveryField: a change to any field of the header or any
// byte of the block fails CheckSlot, and so does a header sealed under
// another secret; bytes after the block (the tail of its last page) do
// not count.
func TestSlotTagCoversEveryField(t *testing.T) {
	mac := NewMAC(&testSecret)
	h := SlotHeader{Key: key(3, 4), Meta: Meta{Bytes: 4000, Layers: 2}, Gen: 17, Slot: 5}
	data := bytes.Repeat([]byte{0xa1}, 4096)
	sealed := make([]byte, HeaderBytes)
	mac.SealSlotHeader(sealed, h, [][]byte{data})
	for off := 0; off < headerUsed; off++ {
		b := slices.Clone(sealed)
		b[off] ^= 0x10
		if mac.CheckSlot(b, [][]byte{data}) {
			t.Errorf("header byte %d changed, and CheckSlot accepts it", off)
		}
	}
	for _, off := range []int{0, 1, 2000, 3999} {
		d := slices.Clone(data)
		d[off] ^= 1
		if mac.CheckSlot(sealed, [][]byte{d}) {
			t.Errorf("block byte %d changed, and CheckSlot accepts it", off)
		}
	}
	d := slices.Clone(data)
	d[4000] ^= 1
	if !mac.CheckSlot(sealed, [][]byte{d[:1000], d[1000:]}) {
		t.Error("CheckSlot depends on a byte after the block, or on how the block is cut into buffers")
	}
	if mac.CheckSlot(sealed, [][]byte{data[:3999]}) {
		t.Error("CheckSlot accepts buffers shorter than the block")
	}
	forged := make([]byte, HeaderBytes)
	NewMAC(&otherSecret).SealSlotHeader(forged, h, [][]byte{data})
	if mac.CheckSlot(forged, [][]byte{data}) {
		t.Error("CheckSlot accepts a header sealed under another secret")
	}
}

// TestRecordLayout checks the index record's byte offsets against doc.go.
func TestRecordLayout(t *testing.T) {
	mac := NewMAC(&testSecret)
	r := Record{Kind: KindPut, Slot: 0x0a0b, Gen: 0x77, Key: key(0xcd, 5), Meta: Meta{Bytes: 0x5000, Layers: 3}}
	b := mac.AppendRecord(nil, r)
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
		{"version at 1", uint64(b[1]), 2},
		{"reserved at 2", uint64(le.Uint16(b[2:])), 0},
		{"slot at 4", uint64(le.Uint32(b[4:])), 0x0a0b},
		{"generation at 8", le.Uint64(b[8:]), 0x77},
		{"namespace at 16", uint64(b[16]), 0xcd},
		{"hash at 32", le.Uint64(b[32:]), 5},
		{"bytes at 48", le.Uint64(b[48:]), 0x5000},
		{"layers at 56", uint64(le.Uint32(b[56:])), 3},
		{"reserved at 60", uint64(le.Uint32(b[60:])), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %#x, want %#x", c.field, c.got, c.want)
		}
	}
	if want := hmacOf(b[:64]); !bytes.Equal(b[64:96], want) {
		t.Errorf("record tag at 64 is %x, want HMAC-SHA256 of bytes 0..63, %x", b[64:96], want)
	}
	if got, ok := mac.ParseRecord(b); !ok || got != r {
		t.Errorf("parse = %+v, %v; want %+v", got, ok, r)
	}
	h := mac.AppendIndexHeader(nil, 2<<20)
	if want := "4f4b56494e445831" + "02000000" + "00100000" + "0000200000000000"; hex.EncodeToString(h[:24]) != want {
		t.Errorf("index header starts %x, want %s", h[:24], want)
	}
	if want := hmacOf(h[:64]); !bytes.Equal(h[64:96], want) {
		t.Errorf("index header tag at 64 is %x, want %x", h[64:96], want)
	}
	if sb, ok := mac.ParseIndexHeader(h); !ok || sb != 2<<20 {
		t.Errorf("ParseIndexHeader = %d, %v", sb, ok)
	}
}

// TestRecordWithoutTheSecretIsRefused: a record or header whose tag was
// computed under another secret, or whose fields changed after it was
// tagged (a CRC would have been recomputed; a tag cannot be without the
// secret), does not parse, and Replay stops before it.
func TestRecordWithoutTheSecretIsRefused(t *testing.T) {
	mac, other := NewMAC(&testSecret), NewMAC(&otherSecret)
	put := Record{Kind: KindPut, Slot: 1, Gen: 2, Key: key(1, 1), Meta: Meta{Bytes: 4096, Layers: 1}}
	if _, ok := mac.ParseRecord(other.AppendRecord(nil, put)); ok {
		t.Error("a record tagged under another secret parses")
	}
	b := mac.AppendRecord(nil, put)
	for off := range recordTagOff {
		c := slices.Clone(b)
		c[off] ^= 0x40
		if _, ok := mac.ParseRecord(c); ok {
			t.Errorf("record byte %d changed, and the record still parses", off)
		}
	}
	if _, ok := mac.ParseIndexHeader(other.AppendIndexHeader(nil, 64<<10)); ok {
		t.Error("an index header tagged under another secret parses")
	}
	log := mac.AppendIndexHeader(nil, 64<<10)
	log = mac.AppendRecord(log, put)
	forged := put
	forged.Key.NS[0] = 7 // another namespace's block, claimed for slot 1
	log = other.AppendRecord(log, forged)
	r := Replay(mac, log, 64<<10, 8)
	if len(r.Blocks) != 1 || r.Blocks[0].Key != put.Key || r.GoodLen != 2*RecordBytes {
		t.Errorf("Replay = %+v; want the one genuine record, cut before the forged one", r)
	}
	if r := Replay(mac, other.AppendIndexHeader(nil, 64<<10), 64<<10, 8); r.Reset == "" {
		t.Error("Replay of a log whose header was tagged under another secret is not reset")
	}
}

// TestOldVersionIndexIsReset: a log of layout version 1 (80-byte records
// with CRC32C) resets, and Reset names the version.
func TestOldVersionIndexIsReset(t *testing.T) {
	old := make([]byte, 80)
	copy(old, "OKVINDX1")
	binary.LittleEndian.PutUint32(old[8:], 1)
	binary.LittleEndian.PutUint32(old[12:], HeaderBytes)
	binary.LittleEndian.PutUint64(old[16:], 64<<10)
	r := Replay(NewMAC(&testSecret), old, 64<<10, 8)
	if want := "the index is layout version 1; this Manager reads version 2 only"; r.Reset != want {
		t.Errorf("Reset = %q, want %q", r.Reset, want)
	}
}

// validLog is an index log of puts and a delete for the fuzz seeds.
func validLog() []byte {
	mac := NewMAC(&testSecret)
	b := mac.AppendIndexHeader(nil, 64<<10)
	for i := range 5 {
		b = mac.AppendRecord(b, Record{Kind: KindPut, Slot: uint32(i), Gen: uint64(i + 1), Key: key(1, uint64(i)), Meta: Meta{Bytes: 4096, Layers: 1}})
	}
	b = mac.AppendRecord(b, Record{Kind: KindDelete, Slot: 2, Gen: 3, Key: key(1, 2)})
	return mac.AppendRecord(b, Record{Kind: KindPut, Slot: 0, Gen: 9, Key: key(1, 7), Meta: Meta{Bytes: 8192, Layers: 2}})
}

// FuzzReplay feeds arbitrary index logs to replay, as they are and turned
// into well-formed logs (every 8 input bytes become one record tagged
// under testSecret, or under otherSecret when the kind byte says so:
// kind, slot, generation, key and size from the bytes, so puts, deletes,
// stale deletes, reused slots, out-of-range slots and forged records mix).
func FuzzReplay(f *testing.F) {
	good := validLog()
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(good[:len(good)-RecordBytes/2])
	f.Add(good[:RecordBytes-1])
	f.Add(append(slices.Clone(good), bytes.Repeat([]byte{0x5a}, 100)...))
	f.Add(NewMAC(&testSecret).AppendIndexHeader(nil, 128<<10))
	f.Add(NewMAC(&otherSecret).AppendIndexHeader(nil, 64<<10))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 1, 0, 1, 0, 1, 2, 1, 1, 2, 3, 0, 1, 0, 2, 2, 0, 1, 0, 1, 0, 1, 2})
	mac, other := NewMAC(&testSecret), NewMAC(&otherSecret)
	f.Fuzz(func(t *testing.T, b []byte) {
		checkReplay(t, b)
		log := mac.AppendIndexHeader(nil, 64<<10)
		forgedAt := -1 // the first record tagged under otherSecret
		for i := 0; i+8 <= len(b); i += 8 {
			c := b[i : i+8]
			r := Record{Kind: KindPut, Slot: uint32(c[1] % 12), Gen: uint64(c[2]), Key: key(c[3]%2, uint64(c[4]%16)),
				Meta: Meta{Bytes: uint64(binary.LittleEndian.Uint16(c[5:])) << 1, Layers: uint32(c[7] % 3)}}
			if c[0]%3 == 0 {
				r.Kind, r.Meta = KindDelete, Meta{}
			}
			if c[0] == 0xff {
				if forgedAt < 0 {
					forgedAt = i / 8
				}
				log = other.AppendRecord(log, r)
				continue
			}
			log = mac.AppendRecord(log, r)
		}
		r := checkReplay(t, log)
		if forgedAt >= 0 && r.Records != forgedAt {
			t.Fatalf("replay kept %d records; the first forged one is record %d", r.Records, forgedAt)
		}
	})
}

// checkReplay replays b under testSecret and checks: it never panics, it
// cuts at a record boundary, it keeps only in-range blocks with one block
// per slot and per key in generation order, and a log rewritten from its
// result (what compaction does) replays to the same blocks.
func checkReplay(t *testing.T, b []byte) Replayed {
	const slotBytes, nslots = 64 << 10, 8
	mac := NewMAC(&testSecret)
	r := Replay(mac, b, slotBytes, nslots)
	if r.Reset != "" {
		if r.GoodLen != 0 || len(r.Blocks) != 0 {
			t.Fatalf("a reset log kept %d bytes and %d blocks", r.GoodLen, len(r.Blocks))
		}
		return r
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
	log := mac.AppendIndexHeader(nil, slotBytes)
	for _, e := range r.Blocks {
		log = mac.AppendRecord(log, Record{Kind: KindPut, Slot: e.Slot, Gen: e.Gen, Key: e.Key, Meta: e.Meta})
	}
	r2 := Replay(mac, log, slotBytes, nslots)
	if len(r2.Blocks) != len(r.Blocks) {
		t.Fatalf("rewritten log replays to %d blocks, want %d", len(r2.Blocks), len(r.Blocks))
	}
	for i := range r.Blocks {
		a, b := r.Blocks[i], r2.Blocks[i]
		if a != b {
			t.Fatalf("block %d differs after the rewrite: %+v vs %+v", i, a, b)
		}
	}
	return r
}

// FuzzSlotHeader: parsing arbitrary bytes (a header up to the end of its
// record followed by the block the header is checked against) never panics, a header that parses
// encodes back to the same bytes up to the end of its record, one that
// also passes CheckSlot and CheckRecord is the one SealSlotHeader makes of
// its fields, record and that block, and a record that checks is the one
// ParseSlotHeader located.
func FuzzSlotHeader(f *testing.F) {
	mac := NewMAC(&testSecret)
	data := bytes.Repeat([]byte{7}, 100)
	for _, rec := range [][]byte{nil, []byte("r"), bytes.Repeat([]byte{0x42}, 300)} {
		b := make([]byte, HeaderBytes)
		mac.SealSlotHeader(b, SlotHeader{Key: key(1, 2), Meta: Meta{Bytes: 100, Layers: 1}, Gen: 6, Slot: 3, Record: rec}, [][]byte{data})
		end := recordOff + len(rec)
		f.Add(append(slices.Clone(b[:end]), data...))
		f.Add(slices.Clone(b[:end]))
		f.Add(slices.Clone(b[:end-1]))
		long := slices.Clone(b[:end])
		binary.LittleEndian.PutUint32(long[recLenOff:], MaxRecordBytes+1)
		f.Add(append(long, make([]byte, MaxRecordBytes+1)...))
	}
	old := make([]byte, HeaderBytes) // a header with no record part: zero after the block tag
	mac.SealSlotHeader(old, SlotHeader{Key: key(1, 2), Meta: Meta{Bytes: 100, Layers: 1}, Gen: 6, Slot: 3}, [][]byte{data})
	clear(old[headerUsed:])
	f.Add(append(old[:recordOff], data...))
	f.Add([]byte("OKVSLOT1"))
	f.Fuzz(func(t *testing.T, in []byte) {
		rec, recOK := mac.CheckRecord(in)
		h, ok := ParseSlotHeader(in)
		if !ok {
			if recOK {
				t.Fatal("a header that does not parse has a record that checks")
			}
			return
		}
		end := recordOff + len(h.Record)
		out := make([]byte, HeaderBytes)
		PutSlotHeader(out, h)
		if !bytes.Equal(out[:end], in[:end]) {
			t.Fatalf("header %x re-encodes as %x", in[:end], out[:end])
		}
		if recOK && !bytes.Equal(rec, h.Record) {
			t.Fatalf("CheckRecord returns %x, ParseSlotHeader locates %x", rec, h.Record)
		}
		block := [][]byte{in[end:]}
		if !mac.CheckSlot(in, block) || !recOK || allZero(h.RecordTag[:]) {
			return
		}
		mac.SealSlotHeader(out, h, block)
		if !bytes.Equal(out[:end], in[:end]) {
			t.Fatalf("a header that passes CheckSlot and CheckRecord, %x, is sealed as %x", in[:end], out[:end])
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
