package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// bigItems is a full batch of stored items whose token ids take 5 bytes
// each (about 660 KB encoded).
func bigItems(base uint64) []item {
	toks := make([]uint32, 128)
	for i := range toks {
		toks[i] = 1 << 20
	}
	items := make([]item, 1024)
	for i := range items {
		h := base + uint64(i)
		items[i] = item{kind: itemStored, medium: CPU, hash: h, rec: record(h, 0, toks...)}
	}
	return items
}

// The replay buffer is bounded by the capacity of the buffers it keeps,
// not only their payloads: resyncs (one message of every block, any size)
// between small batches leave no resync-sized buffers beyond ReplayBytes
// (a buffer over maxPooledBytes is not pooled again).
func TestTheReplayBufferCountsItsBuffersCapacity(t *testing.T) {
	const replayBytes = 4 << 20
	tr := newTracker(t, Spec{FlushInterval: time.Hour, ReplayBatches: 200, ReplayBytes: replayBytes})
	s := tr.streams[0] // its goroutine sleeps: no events, no tick
	small := []item{{kind: itemRemoved, medium: CPU, hash: 1}}
	var resync []item // about 5 MB encoded
	for i := range 8 {
		resync = append(resync, bigItems(uint64(i*1024))...)
	}
	for range 20 {
		s.publish(resync)
		for range 50 {
			s.publish(small)
		}
	}
	s.replayMu.Lock()
	seen := map[*pooled]bool{}
	pinned := 0
	for _, e := range s.replay {
		if !seen[e.p] {
			seen[e.p] = true
			pinned += cap(e.p.b)
		}
	}
	kept, batches := s.replayBytes, len(s.replay)
	s.replayMu.Unlock()
	if pinned != kept || (kept > replayBytes && batches > 1) {
		t.Fatalf("the replay buffer keeps %d batches in %d bytes of buffers (counted %d), ReplayBytes %d", batches, pinned, kept, replayBytes)
	}
}

// A message larger than SubscriberBytes (a resync of a large node is one
// message) is queued on an empty queue: a subscriber that keeps up is not
// disconnected for it.
func TestOneMessageOverSubscriberBytesReachesASubscriberThatKeepsUp(t *testing.T) {
	tr := newTracker(t, Spec{SubscriberBytes: 16 << 10})
	sub := subscriber(t, tr)
	toks := make([]uint32, 64)
	for i := range toks {
		toks[i] = 1 << 20
	}
	for i := range 64 { // one batch of about 21 KB
		tr.Stored(Key{Hash: abi.BlockHash{byte(i)}}, 0, CPU, record(uint64(100+i), 0, toks...))
	}
	go func() { sub.Recv() }()
	time.Sleep(500 * time.Millisecond)
	if _, st := tr.Stats(); st[0].SubscribersDropped != 0 {
		t.Fatalf("stats %+v: a subscriber with an empty queue was dropped for one message over SubscriberBytes", st[0])
	}
}

// The record slab's free rooms stay within max(minSlabFree, held/4): a
// client that cycles its blocks' token counts does not make the Tracker
// keep the peak of every length once no block is held.
func TestTheRecordSlabKeepsFewFreeRooms(t *testing.T) {
	tr := newTracker(t, Spec{FlushInterval: time.Hour, BatchEvents: 1 << 16})
	const blocks = 1000
	peak := 0
	for c := 1; c <= 64; c++ {
		toks := make([]uint32, c)
		for i := range blocks {
			tr.Stored(Key{Hash: abi.BlockHash{byte(i), byte(i >> 8), byte(c)}}, 0, CPU, record(uint64(c<<20+i), 0, toks...))
		}
		tr.LookupHashes(nil, nil) // applies
		peak = max(peak, blocks*abi.RecordBytes(c))
		for i := range blocks {
			tr.Removed(Key{Hash: abi.BlockHash{byte(i), byte(i >> 8), byte(c)}}, CPU)
		}
		tr.LookupHashes(nil, nil)
	}
	tr.mu.Lock()
	free := 0
	for _, l := range tr.recs.free {
		for _, r := range l {
			free += len(r)
		}
	}
	held := len(tr.blocks)
	tr.mu.Unlock()
	if bound := max(minSlabFree, tr.recs.held/4); free > bound || free != tr.recs.freeBytes || held != 0 {
		t.Fatalf("%d blocks held, %d bytes of free slab rooms (counted %d), bound %d; the peak held was %d bytes", held, free, tr.recs.freeBytes, bound, peak)
	}
}

// Stored of a record slice with bytes after the record (ParseRecord
// accepts them) keeps the record alone.
func TestStoredOfARecordWithTrailingBytesKeepsTheRecord(t *testing.T) {
	tr := newTracker(t, Spec{FlushInterval: time.Hour})
	rec := append(record(11, 0, 1, 2), make([]byte, 4096)...)
	if _, n, err := abi.ParseRecord(rec); err != nil || n != 32 {
		t.Fatalf("ParseRecord %d %v", n, err)
	}
	tr.Stored(key(1), 0, CPU, rec)
	if got := tr.Record(key(1)); !bytes.Equal(got, record(11, 0, 1, 2)) {
		t.Fatalf("kept record %x, want the record without the bytes after it", got)
	}
}

// Stress: one producer's legal Stored/Removed sequence, readers applying
// concurrently, the pending bound small enough that the producer applies
// too; applied in order, the stream shows no impossible transition and
// ends at the Tracker's state.
func TestConcurrentAppliersKeepTheOrder(t *testing.T) {
	for _, q := range []int{48, 4096} {
		t.Run(fmt.Sprint(q), func(t *testing.T) { checkConcurrentAppliers(t, q) })
	}
}

func checkConcurrentAppliers(t *testing.T, queue int) {
	tr := newTracker(t, Spec{QueueEvents: queue, BatchEvents: 16, FlushInterval: time.Millisecond, MinResyncInterval: time.Nanosecond})
	sub := subscriber(t, tr)
	const keys = 200
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				tr.LookupHashes(nil, []uint64{1000})
				tr.Record(key(3))
				tr.Persisted(key(4))
				tr.LookupTokens(nil, []uint32{5}, 1)
				tr.Stats()
			}
		}()
	}
	_, rep := tr.Endpoints()
	wg.Add(1)
	go func() { // replays and snapshots meanwhile: every answer decodes, in sequence order
		defer wg.Done()
		d := zmq4.NewDealer(context.Background())
		defer d.Close()
		if err := d.Dial(rep[0]); err != nil {
			t.Error(err)
			return
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			req := make([]byte, 8)
			if i%4 == 3 {
				req = []byte(SnapshotRequest)
			}
			d.Send(zmq4.NewMsgFrom([]byte{}, req))
			last := int64(-1)
			for {
				msg, err := d.Recv()
				if err != nil {
					t.Error(err)
					return
				}
				seq := int64(binary.BigEndian.Uint64(msg.Frames[2]))
				if seq == -1 {
					break
				}
				if _, err := DecodeBatch(msg.Frames[3]); err != nil {
					t.Errorf("replayed batch %d: %v", seq, err)
				}
				if len(req) == 8 && seq <= last {
					t.Errorf("replayed %d after %d", seq, last)
				}
				last = seq
			}
		}
	}()
	on := make([]bool, keys)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		k := r.IntN(keys)
		kk := Key{Hash: abi.BlockHash{byte(k), byte(k >> 8)}}
		if on[k] {
			tr.Removed(kk, CPU)
		} else {
			tr.Stored(kk, 0, CPU, record(uint64(1000+k), 0, uint32(k)))
		}
		on[k] = !on[k]
	}
	close(stop)
	wg.Wait()
	want := map[uint64]bool{}
	for k, v := range on {
		if v {
			want[uint64(1000+k)] = true
		}
	}
	held := map[uint64]bool{}
	bad := 0
	deadline := time.Now().Add(20 * time.Second)
	same := func() bool {
		if len(held) != len(want) {
			return false
		}
		for h := range want {
			if !held[h] {
				return false
			}
		}
		return true
	}
	for !same() {
		if time.Now().After(deadline) {
			t.Fatalf("the stream holds %d blocks, the producer %d", len(held), len(want))
		}
		_, b := next(t, sub)
		bad += applyBatch(held, b)
	}
	if bad != 0 {
		t.Fatalf("%d impossible transitions in the stream", bad)
	}
	n, st := tr.Stats()
	t.Logf("stats %+v", st[0])
	if n != len(want) {
		t.Fatalf("the Tracker holds %d blocks, want %d", n, len(want))
	}
}

// With domains, a batch's worth of pending changes of domain 1 reaches
// its subscriber without a tick (FlushInterval an hour).
func TestASecondDomainGetsItsBatchWithoutATick(t *testing.T) {
	dir := t.TempDir()
	tr := newTracker(t, Spec{Endpoint: "ipc://" + dir + "/ev", ReplayEndpoint: "ipc://" + dir + "/rep",
		Domains: []Domain{{Name: "a", GID: -1}, {Name: "b", GID: -1}}, FlushInterval: time.Hour, BatchEvents: 4})
	for i := range byte(4) {
		tr.Stored(key(i+1), 1, CPU, record(uint64(20+i), 0, 1))
	}
	deadline := time.Now().Add(5 * time.Second)
	for tr.streams[1].Events.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("domain 1's batch was never published")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
