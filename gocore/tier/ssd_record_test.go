package tier

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// residentRecords is an ssd.BlockObserver keeping the record each
// resident block was written with.
type residentRecords struct {
	mu   sync.Mutex
	recs map[ssd.Key][]byte
}

func (r *residentRecords) Resident(k ssd.Key, _ ssd.Class, rec []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs[k] = rec
}

func (r *residentRecords) Gone(k ssd.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.recs, k)
}

func (r *residentRecords) snapshot() map[ssd.Key][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[ssd.Key][]byte, len(r.recs))
	for k, v := range r.recs {
		out[k] = v
	}
	return out
}

// A block demoted to SSD is written with the record Spec.Records gives
// for its key: the store's observer hears it resident with that record,
// and Record reads it back from the disk.
func TestDemotedBlocksCarryTheirRecords(t *testing.T) {
	dir, err := os.MkdirTemp("/var/tmp", "orbitkv-tier-records-")
	if err != nil {
		t.Skipf("no directory under /var/tmp for the SSD tier: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	obs := &residentRecords{recs: map[ssd.Key][]byte{}}
	recordOf := func(k index.Key) []byte { return []byte(fmt.Sprintf("record of %x", k.Hash[:2])) }
	var asked sync.Map
	spec := Spec{RAM: ram.Spec{CapacityBytes: 8 * qBlock, ChunkBytes: pChunk}, Ring: func() {},
		SSD: &ssd.Spec{Dir: dir, CapacityBytes: 32 * (ssd.HeaderBytes + qBlock), SlotBytes: qBlock, Admission: ssd.AdmitAll, Blocks: obs},
		Records: func(k index.Key) []byte {
			asked.Store(k, true)
			return recordOf(k)
		}}
	ts, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Close)
	for i := 0; i < 12; i += 4 { // 4 more than RAM holds: the 4 oldest are demoted
		if !publish(ts, qB, nsB, i, i+4) {
			t.Fatalf("publish of blocks %d..%d refused", i, i+4)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(obs.snapshot()) < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	recs := obs.snapshot()
	if len(recs) != 4 {
		t.Fatalf("%d blocks heard resident on SSD, want the 4 demoted", len(recs))
	}
	for sk, rec := range recs { // whichever 4 the eviction policy chose
		k := index.Key{NS: sk.NS, Hash: sk.Hash}
		if _, ok := asked.Load(k); !ok {
			t.Errorf("Records was not asked for demoted block %x", k.Hash[:2])
		}
		if string(rec) != string(recordOf(k)) {
			t.Errorf("block %x heard resident with record %q, want %q", k.Hash[:2], rec, recordOf(k))
		}
		if got, err := ts.ssd.store.Record(sk); err != nil || string(got) != string(recordOf(k)) {
			t.Errorf("Record of block %x = %q, %v; want %q", k.Hash[:2], got, err, recordOf(k))
		}
	}
}
