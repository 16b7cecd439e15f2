package tier

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// testRecord is an abi block record of engine hash h and n tokens.
func testRecord(h uint64, n int) []byte {
	b := make([]byte, abi.RecordBytes(n))
	binary.LittleEndian.PutUint64(b, h)
	binary.LittleEndian.PutUint32(b[20:], uint32(n))
	for i := range n {
		binary.LittleEndian.PutUint32(b[abi.RecordHeaderSize+4*i:], uint32(h)+uint32(i))
	}
	return b
}

func eventTracker(t *testing.T) *kvevents.Tracker {
	t.Helper()
	tr, err := kvevents.New(kvevents.Spec{Endpoint: "tcp://127.0.0.1:0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// A successor's tiers over a handed-over RAM tier hold every block the
// predecessor sealed, sealed, in its domain, with the bytes it had, and
// announce each on the KV event stream (medium CPU) with the record it
// was published with; a block still publishing at the handover is not
// adopted, and its chunks are free.
func TestAdoptedBlocksAreIndexedAndAnnouncedAgain(t *testing.T) {
	spec := Spec{RAM: ram.Spec{CapacityBytes: 16 * qBlock, ChunkBytes: pChunk}, Ring: func() {}}
	spec.Events = eventTracker(t)
	old, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	fresh, _, ok := old.Place(6, func(i int) index.Key { return qKey(nsB, i) }, qBlock, 1, qB, nil)
	if !ok {
		t.Fatal("publish refused")
	}
	for i, b := range fresh {
		for j, id := range b.Chunks {
			c := old.Arena().Chunk(id)
			for k := range c {
				c[k] = byte(i*7 + j + k)
			}
		}
		if i < 5 { // block 5 stays publishing
			old.SealRecord(b, testRecord(uint64(100+i), 16))
		}
	}
	handed, err := old.Arena().Dup()
	if err != nil {
		t.Fatal(err)
	}
	want := map[index.Key][]byte{}
	for i := range 5 {
		b := old.Index().Lookup(qKey(nsB, i))
		var data []byte
		for _, id := range b.Chunks {
			data = append(data, old.Arena().Chunk(id)...)
		}
		want[b.Key] = data
	}
	old.Close()

	spec.Events = eventTracker(t)
	spec.RAM.Handed = &handed
	ts, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	if ad := ts.Arena().Adoption(); ad.Refused != nil || ad.Count != 5 {
		t.Fatalf("adoption %+v", ad)
	}
	for i := range 6 {
		k := qKey(nsB, i)
		b := ts.Index().Lookup(k)
		if i == 5 {
			if b != nil {
				t.Fatal("a block still publishing at the handover was adopted")
			}
			continue
		}
		if b == nil || b.State() != index.Sealed || b.DomainOf() != qB {
			t.Fatalf("block %d: %+v", i, b)
		}
		var data []byte
		for _, id := range b.Chunks {
			data = append(data, ts.Arena().Chunk(id)...)
		}
		if !bytes.Equal(data, want[k]) {
			t.Fatalf("block %d: bytes differ after adoption", i)
		}
		if rec := spec.Events.Record(kvevents.Key(k)); !bytes.Equal(rec, testRecord(uint64(100+i), 16)) {
			t.Fatalf("block %d: the event stream holds record %x, want the published one", i, rec)
		}
	}
	if free := ts.Arena().Free(); free != ts.Arena().Chunks()-5*2 {
		t.Fatalf("%d chunks free, want all but the 5 blocks' 10", free)
	}
}
