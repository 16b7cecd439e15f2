package tier

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

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
// predecessor sealed, invisible until its bytes matched the checksum taken
// at its seal, then sealed, in its domain, with the bytes it had, and
// announced on the KV event stream (medium CPU) with the record it was
// published with; a block whose bytes changed after its seal is dropped,
// a block still publishing at the handover is not adopted, and their
// chunks are free.
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
	old.Arena().Chunk(fresh[4].Chunks[1])[9] ^= 0xff // block 4 changes after its seal
	handed, err := old.Arena().Dup()
	if err != nil {
		t.Fatal(err)
	}
	want := map[index.Key][]byte{}
	for i := range 4 {
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
	// Block 4's bytes change after its seal (before the successor maps
	// them): it is adopted, fails its checksum, and is never served.
	ts, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	if ad := ts.Arena().Adoption(); ad.Refused != nil || ad.Count != 5 {
		t.Fatalf("adoption %+v", ad)
	}
	for i := range 6 {
		if ts.Index().Lookup(qKey(nsB, i)) != nil {
			t.Fatalf("block %d is visible before its verification", i)
		}
	}
	verified(t, ts)
	if st, _ := ts.Adopted(); st.Blocks != 4 || st.DroppedChecksum != 1 || st.Bytes != 4*qBlock {
		t.Fatalf("verification %+v, want 4 blocks served and 1 dropped", st)
	}
	for i := range 6 {
		k := qKey(nsB, i)
		b := ts.Index().Lookup(k)
		if i >= 4 {
			if b != nil || ts.Index().Contains(k) {
				t.Fatalf("block %d (changed after its seal, or still publishing at the handover) was kept", i)
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
	if free := ts.Arena().Free(); free != ts.Arena().Chunks()-4*2 {
		t.Fatalf("%d chunks free, want all but the 4 blocks' 8", free)
	}
}

// verified runs the dispatcher's Complete until the adopted blocks are
// all verified.
func verified(t *testing.T, ts *Tiers) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ts.Complete(64)
		if _, verifying := ts.Adopted(); !verifying {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the adopted blocks were not verified within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// An operator's drop while the adopted blocks are being verified removes
// them too: none becomes visible afterwards.
func TestADropDuringTheVerificationRemovesTheAdoptedBlocks(t *testing.T) {
	spec := Spec{RAM: ram.Spec{CapacityBytes: 16 * qBlock, ChunkBytes: pChunk}, Ring: func() {}}
	old, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	if !publish(old, qB, nsB, 0, 4) {
		t.Fatal("publish refused")
	}
	handed, err := old.Arena().Dup()
	if err != nil {
		t.Fatal(err)
	}
	old.Close()
	spec.RAM.Handed = &handed
	ts, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	if d := ts.Drop(func(abi.Namespace) bool { return true }, true); d.Publishing != 4 {
		t.Fatalf("drop during the verification: %+v, want the 4 adopted blocks counted as publishing", d)
	}
	verified(t, ts)
	for i := range 4 {
		if ts.Index().Contains(qKey(nsB, i)) {
			t.Fatalf("block %d came back after the drop", i)
		}
	}
	if ts.Arena().Free() != ts.Arena().Chunks() {
		t.Fatalf("%d of %d chunks free after the drop", ts.Arena().Free(), ts.Arena().Chunks())
	}
}
