package kvevents

import (
	"bytes"
	"strings"
	"testing"
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
