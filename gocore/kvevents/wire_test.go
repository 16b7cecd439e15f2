package kvevents

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func sampleBatch() *Batch {
	rank := int64(2)
	return &Batch{TS: 1.5, DPRank: &rank, Events: []Event{
		{Kind: KindCleared},
		{Kind: KindStored, Hashes: []uint64{1 << 63, 7}, Tokens: []uint32{1, 2, 3, 1<<32 - 1}, BlockSize: 2, Medium: CPU},
		{Kind: KindStored, Hashes: []uint64{9}, HasParent: true, Parent: 7, Tokens: []uint32{5, 6}, BlockSize: 2, Medium: Storage},
		{Kind: KindRemoved, Hashes: []uint64{9}, Medium: Storage},
	}}
}

func TestBatchesRoundTrip(t *testing.T) {
	want := sampleBatch()
	got, err := DecodeBatch(AppendBatch(nil, want))
	if err != nil {
		t.Fatal(err)
	}
	if got.TS != want.TS || got.DPRank == nil || *got.DPRank != 2 || len(got.Events) != len(want.Events) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	for i := range want.Events {
		if !sameEvent(got.Events[i], want.Events[i]) {
			t.Fatalf("event %d: %+v, want %+v", i, got.Events[i], want.Events[i])
		}
	}
	none, err := DecodeBatch(AppendBatch(nil, &Batch{TS: 2}))
	if err != nil || none.DPRank != nil || len(none.Events) != 0 {
		t.Fatalf("an empty batch: %+v, %v", none, err)
	}
}

func TestMalformedBatchesAreRefusedNamingTheField(t *testing.T) {
	good := AppendBatch(nil, sampleBatch())
	for _, tc := range []struct {
		name, want string
		b          []byte
	}{
		{"empty", "batch", nil},
		{"not an array", "batch", []byte{0xc0}},
		{"trailing bytes", "after the batch", append(bytes.Clone(good), 0xc0)},
		{"an unknown type", "type", bytes.Replace(bytes.Clone(good), []byte("BlockRemoved"), []byte("BlockRemovex"), 1)},
		{"an unknown medium", "medium", bytes.Replace(bytes.Clone(good), []byte("STORAGE"), []byte("STORAGX"), 1)},
		{"a cut payload", "event", good[:len(good)/2]},
	} {
		if _, err := DecodeBatch(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// FuzzDecodeBatch: outside bytes never panic, and what decodes encodes
// back to a batch that decodes the same.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(AppendBatch(nil, sampleBatch()))
	f.Add(AppendBatch(nil, &Batch{}))
	f.Add([]byte{0x93, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeBatch(b)
		if err != nil {
			return
		}
		again, err := DecodeBatch(AppendBatch(nil, &got))
		if err != nil || len(again.Events) != len(got.Events) {
			t.Fatalf("re-encoded batch: %v, %d events, want %d", err, len(again.Events), len(got.Events))
		}
	})
}

// libraryBatch encodes b with the msgpack library, field for field in
// AppendBatch's order: a second encoder to hold AppendBatch's bytes to.
func libraryBatch(t testing.TB, b *Batch) []byte {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	uints := func(vs []uint64) {
		must(e.EncodeArrayLen(len(vs)))
		for _, v := range vs {
			must(e.EncodeUint(v))
		}
	}
	must(e.EncodeArrayLen(3))
	must(e.EncodeFloat64(b.TS))
	must(e.EncodeArrayLen(len(b.Events)))
	for _, ev := range b.Events {
		switch ev.Kind {
		case KindStored:
			must(e.EncodeMapLen(8))
			must(e.EncodeString("type"))
			must(e.EncodeString(KindStored))
			must(e.EncodeString("block_hashes"))
			uints(ev.Hashes)
			must(e.EncodeString("parent_block_hash"))
			if ev.HasParent {
				must(e.EncodeUint(ev.Parent))
			} else {
				must(e.EncodeNil())
			}
			must(e.EncodeString("token_ids"))
			must(e.EncodeArrayLen(len(ev.Tokens)))
			for _, tk := range ev.Tokens {
				must(e.EncodeUint(uint64(tk)))
			}
			must(e.EncodeString("block_size"))
			must(e.EncodeUint(uint64(ev.BlockSize)))
			must(e.EncodeString("lora_id"))
			must(e.EncodeNil())
			must(e.EncodeString("medium"))
			must(e.EncodeString(ev.Medium.String()))
			must(e.EncodeString("lora_name"))
			must(e.EncodeNil())
		case KindRemoved:
			must(e.EncodeMapLen(3))
			must(e.EncodeString("type"))
			must(e.EncodeString(KindRemoved))
			must(e.EncodeString("block_hashes"))
			uints(ev.Hashes)
			must(e.EncodeString("medium"))
			must(e.EncodeString(ev.Medium.String()))
		default:
			must(e.EncodeMapLen(1))
			must(e.EncodeString("type"))
			must(e.EncodeString(KindCleared))
		}
	}
	if b.DPRank == nil {
		must(e.EncodeNil())
	} else {
		must(e.EncodeInt(*b.DPRank))
	}
	return buf.Bytes()
}

// bigBatch is a batch of every integer width: hashes and tokens across
// msgpack's 1-, 2-, 3-, 5- and 9-byte forms, and arrays past 15 and
// 65535 items.
func bigBatch() *Batch {
	rank := int64(-40000)
	var tokens []uint32
	for i := range 70000 {
		tokens = append(tokens, uint32(i)*61)
	}
	hashes := []uint64{0, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<64 - 1, 5, 6, 7, 8, 9, 10, 11}
	return &Batch{TS: 1796622084.19, DPRank: &rank, Events: []Event{
		{Kind: KindCleared},
		{Kind: KindStored, Hashes: hashes, HasParent: true, Parent: 1 << 40, Tokens: tokens, BlockSize: 512, Medium: CPU},
		{Kind: KindRemoved, Hashes: hashes, Medium: Storage},
	}}
}

func TestAppendBatchWritesWhatTheMsgpackLibraryWrites(t *testing.T) {
	for _, b := range []*Batch{sampleBatch(), bigBatch(), {TS: 0}} {
		if got, want := AppendBatch(nil, b), libraryBatch(t, b); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes, the library's %d bytes differ", len(got), len(want))
		}
	}
	for _, r := range []int64{-1, -32, -33, -128, -129, -32768, -32769, -1 << 31, -1<<31 - 1, 3} {
		b := &Batch{DPRank: &r}
		if got, want := AppendBatch(nil, b), libraryBatch(t, b); !bytes.Equal(got, want) {
			t.Fatalf("rank %d: %x, the library's %x", r, got, want)
		}
	}
}

// BenchmarkAppendBatch encodes a batch of 64 blocks of 128 token ids.
func BenchmarkAppendBatch(b *testing.B) {
	var evs []Event
	for i := range 64 {
		tokens := make([]uint32, 128)
		for j := range tokens {
			tokens[j] = uint32(i*1000 + j*37)
		}
		evs = append(evs, Event{Kind: KindStored, Hashes: []uint64{uint64(i) << 50}, Tokens: tokens, BlockSize: 128, Medium: CPU})
	}
	batch := &Batch{TS: 1, Events: evs}
	var buf []byte
	b.Run("ours", func(b *testing.B) {
		for range b.N {
			buf = AppendBatch(buf[:0], batch)
		}
	})
	b.Run("library", func(b *testing.B) {
		for range b.N {
			buf = libraryBatch(b, batch)
		}
	})
}
