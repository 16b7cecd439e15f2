package kvevents

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// record is an abi block record of engine hash h, parent p (none when
// p is 0) and the given tokens.
func record(h, p uint64, tokens ...uint32) []byte {
	b := make([]byte, abi.RecordBytes(len(tokens)))
	le := binary.LittleEndian
	le.PutUint64(b[0:], h)
	if p != 0 {
		le.PutUint64(b[8:], p)
		le.PutUint32(b[16:], abi.RecordParent)
	}
	le.PutUint32(b[20:], uint32(len(tokens)))
	for i, t := range tokens {
		le.PutUint32(b[abi.RecordHeaderSize+4*i:], t)
	}
	return b
}

func key(i byte) Key { return Key{NS: abi.Namespace{1}, Hash: abi.BlockHash{i}} }

func newTracker(t *testing.T, spec Spec) *Tracker {
	t.Helper()
	if spec.Endpoint == "" {
		spec.Endpoint = "tcp://127.0.0.1:0"
	}
	if spec.ReplayEndpoint == "" {
		spec.ReplayEndpoint = "tcp://127.0.0.1:0"
	}
	tr, err := New(spec, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// subscriber is a go-zeromq SUB socket (a ZeroMQ implementation we did
// not write) subscribed to every topic.
func subscriber(t *testing.T, tr *Tracker) zmq4.Socket {
	t.Helper()
	pub, _ := tr.Endpoints()
	sub := zmq4.NewSub(context.Background())
	t.Cleanup(func() { sub.Close() })
	if err := sub.Dial(pub[0]); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		t.Fatal(err)
	}
	// A PUB drops what it sends before the subscription arrives: wait
	// for the server to see it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, st := tr.Stats()
		if st[0].Subscribers > 0 && tr.streams[0].pub.anySubscribed() {
			return sub
		}
		if time.Now().After(deadline) {
			t.Fatal("the subscription never reached the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// applyBatch applies b's events in order to held (engine hash → held on
// some medium) and returns how many were impossible there: a store of a
// block held, a removal of one not held.
func applyBatch(held map[uint64]bool, b Batch) (impossible int) {
	for _, e := range b.Events {
		switch e.Kind {
		case KindCleared:
			clear(held)
		case KindStored:
			for _, h := range e.Hashes {
				if held[h] {
					impossible++
				}
				held[h] = true
			}
		case KindRemoved:
			for _, h := range e.Hashes {
				if !held[h] {
					impossible++
				}
				delete(held, h)
			}
		}
	}
	return impossible
}

// waitSubscribed waits until n connections of tr's node stream hold a
// subscription (a PUB drops what it sends before then).
func waitSubscribed(t *testing.T, tr *Tracker, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); tr.streams[0].pub.subscribedCount() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions never reached the server", n)
		}
	}
}

// next receives one message and decodes it.
func next(t *testing.T, sub zmq4.Socket) (int64, Batch) {
	t.Helper()
	msg, err := sub.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Frames) != 3 || len(msg.Frames[1]) != 8 {
		t.Fatalf("message of %d frames, want topic, 8-byte sequence, payload", len(msg.Frames))
	}
	b, err := DecodeBatch(msg.Frames[2])
	if err != nil {
		t.Fatal(err)
	}
	return int64(binary.BigEndian.Uint64(msg.Frames[1])), b
}

// replay asks the replay socket with a go-zeromq DEALER and returns the
// messages until the end marker.
func replay(t *testing.T, tr *Tracker, req []byte) (seqs []int64, batches []Batch) {
	t.Helper()
	_, rep := tr.Endpoints()
	d := zmq4.NewDealer(context.Background())
	defer d.Close()
	if err := d.Dial(rep[0]); err != nil {
		t.Fatal(err)
	}
	if err := d.Send(zmq4.NewMsgFrom([]byte{}, req)); err != nil {
		t.Fatal(err)
	}
	for {
		msg, err := d.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Frames) != 4 || len(msg.Frames[0]) != 0 {
			t.Fatalf("replay message of %d frames, want empty, topic, sequence, payload", len(msg.Frames))
		}
		seq := int64(binary.BigEndian.Uint64(msg.Frames[2]))
		if seq == -1 {
			return seqs, batches
		}
		b, err := DecodeBatch(msg.Frames[3])
		if err != nil {
			t.Fatal(err)
		}
		seqs, batches = append(seqs, seq), append(batches, b)
	}
}

func TestStoredAndRemovedReachASubscriberInOrder(t *testing.T) {
	tr := newTracker(t, Spec{})
	sub := subscriber(t, tr)
	tr.Stored(key(1), 0, CPU, record(11, 0, 1, 2))
	tr.Stored(key(2), 0, CPU, record(12, 11, 3, 4))
	tr.Stored(key(2), 0, CPU, nil) // already on CPU: no event
	tr.Stored(key(1), 0, Storage, nil)
	tr.Removed(key(1), CPU)
	tr.Stored(key(3), 0, CPU, nil) // no record: not announced
	// Per block: a chain run may come as one event or, if a flush fell
	// between its stores, as several.
	var got []Event
	for len(got) < 4 {
		_, b := next(t, sub)
		got = append(got, perBlock(b.Events)...)
	}
	want := []Event{
		{Kind: KindStored, Hashes: []uint64{11}, Tokens: []uint32{1, 2}, BlockSize: 2, Medium: CPU},
		{Kind: KindStored, Hashes: []uint64{12}, HasParent: true, Parent: 11, Tokens: []uint32{3, 4}, BlockSize: 2, Medium: CPU},
		{Kind: KindStored, Hashes: []uint64{11}, Tokens: []uint32{1, 2}, BlockSize: 2, Medium: Storage},
		{Kind: KindRemoved, Hashes: []uint64{11}, Medium: CPU},
	}
	for i := range want {
		if !sameEvent(got[i], want[i]) {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	// One chain run in one batch is one event.
	payload, n := appendItems(nil, 1, []item{{kind: itemStored, medium: CPU, hash: 11, rec: record(11, 0, 1, 2)}, {kind: itemStored, medium: CPU, hash: 12, rec: record(12, 11, 3, 4)}})
	one, err := DecodeBatch(payload)
	if err != nil || n != 1 || len(one.Events) != 1 || !sameEvent(one.Events[0], Event{Kind: KindStored, Hashes: []uint64{11, 12}, Tokens: []uint32{1, 2, 3, 4}, BlockSize: 2, Medium: CPU}) {
		t.Fatalf("a chain run of two blocks: %+v (%d events, %v), want one BlockStored", one, n, err)
	}
	if tr.Unannounced.Load() != 1 {
		t.Fatalf("Unannounced %d, want 1", tr.Unannounced.Load())
	}
	if rec := tr.Record(key(1)); rec == nil {
		t.Fatal("the record of a block still on STORAGE is gone")
	}
	tr.Removed(key(1), Storage)
	if tr.Record(key(1)) != nil {
		t.Fatal("the record of a block on no medium is kept")
	}
}

// The Tracker reuses a forgotten block's record room and entry at once;
// the events queued before still carry the records they were made of,
// and a caller may reuse its record buffer after Stored returns.
func TestReusedRecordsDoNotChangeQueuedEvents(t *testing.T) {
	tr := newTracker(t, Spec{FlushInterval: time.Hour, BatchEvents: 6})
	sub := subscriber(t, tr)
	buf := record(11, 0, 1, 2)
	tr.Stored(key(1), 0, CPU, buf)
	copy(buf, record(99, 0, 9, 9)) // the caller's buffer, reused
	tr.Removed(key(1), CPU)        // key 1's room and entry are free
	tr.Stored(key(2), 0, CPU, record(12, 0, 3, 4))
	tr.Removed(key(2), CPU)
	tr.Stored(key(3), 0, CPU, record(13, 0, 5, 6))
	tr.Stored(key(4), 0, CPU, record(14, 0, 7, 8)) // the 6th event: the batch goes
	var got []Event
	for len(got) < 6 {
		_, b := next(t, sub)
		got = append(got, perBlock(b.Events)...)
	}
	want := []Event{
		{Kind: KindStored, Hashes: []uint64{11}, Tokens: []uint32{1, 2}, BlockSize: 2, Medium: CPU},
		{Kind: KindRemoved, Hashes: []uint64{11}, Medium: CPU},
		{Kind: KindStored, Hashes: []uint64{12}, Tokens: []uint32{3, 4}, BlockSize: 2, Medium: CPU},
		{Kind: KindRemoved, Hashes: []uint64{12}, Medium: CPU},
		{Kind: KindStored, Hashes: []uint64{13}, Tokens: []uint32{5, 6}, BlockSize: 2, Medium: CPU},
		{Kind: KindStored, Hashes: []uint64{14}, Tokens: []uint32{7, 8}, BlockSize: 2, Medium: CPU},
	}
	for i := range want {
		if !sameEvent(got[i], want[i]) {
			t.Fatalf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if h := tr.LookupHashes(nil, []uint64{13}); h.CPU != 1 {
		t.Fatalf("block 3 after reuse: %+v", h)
	}
	if rec := tr.Record(key(4)); !bytes.Equal(rec, record(14, 0, 7, 8)) {
		t.Fatalf("block 4's record %x", rec)
	}
}

// Published batches share pooled buffers that come back once every
// subscriber wrote them and the replay buffer let go: two subscribers
// (with and without a replay socket) and a replay of every batch kept
// see each block exactly as it was stored, while later batches reuse
// the buffers.
func TestPooledBuffersAreReusedOnlyWhenEveryHolderLetGo(t *testing.T) {
	for _, withReplay := range []bool{false, true} {
		spec := Spec{Endpoint: "tcp://127.0.0.1:0", BatchEvents: 4, ReplayBatches: 8}
		if withReplay {
			spec.ReplayEndpoint = "tcp://127.0.0.1:0"
		}
		tr, err := New(spec, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		checkPooledBuffers(t, tr, withReplay)
	}
}

func checkPooledBuffers(t *testing.T, tr *Tracker, withReplay bool) {
	subs := []zmq4.Socket{subscriber(t, tr), subscriber(t, tr)}
	waitSubscribed(t, tr, 2)
	const blocks = 200
	want := func(i int) Event {
		return Event{Kind: KindStored, Hashes: []uint64{uint64(1000 + i)}, Tokens: []uint32{uint32(i), uint32(i * 7)}, BlockSize: 2, Medium: CPU}
	}
	for i := range blocks {
		tr.Stored(Key{Hash: abi.BlockHash{byte(i), byte(i >> 8)}}, 0, CPU, record(uint64(1000+i), 0, uint32(i), uint32(i*7)))
	}
	for n, sub := range subs {
		var got []Event
		for len(got) < blocks {
			_, b := next(t, sub)
			got = append(got, perBlock(b.Events)...)
		}
		for i := range blocks {
			if !sameEvent(got[i], want(i)) {
				t.Fatalf("replay socket %v, subscriber %d, block %d: %+v, want %+v", withReplay, n, i, got[i], want(i))
			}
		}
	}
	if !withReplay {
		return
	}
	_, batches := replay(t, tr, make([]byte, 8))
	var got []Event
	for _, b := range batches {
		got = append(got, perBlock(b.Events)...)
	}
	if len(got) == 0 || len(got) > 8*4 {
		t.Fatalf("replay of %d blocks, want the last 8 batches' (at most 32)", len(got))
	}
	first := int(got[0].Hashes[0] - 1000)
	for i, e := range got {
		if !sameEvent(e, want(first+i)) {
			t.Fatalf("replayed block %d: %+v, want %+v", i, e, want(first+i))
		}
	}
	if first+len(got) != blocks {
		t.Fatalf("the replay ends at block %d, want %d", first+len(got), blocks)
	}
}

// perBlock splits events into one per block (a BlockStored's parent is
// then the block before it in its run).
func perBlock(evs []Event) []Event {
	var out []Event
	for _, e := range evs {
		for i, h := range e.Hashes {
			one := Event{Kind: e.Kind, Hashes: []uint64{h}, Medium: e.Medium, BlockSize: e.BlockSize}
			if e.Kind == KindStored {
				one.HasParent, one.Parent = e.HasParent, e.Parent
				if i > 0 {
					one.HasParent, one.Parent = true, e.Hashes[i-1]
				}
				one.Tokens = e.Tokens[i*e.BlockSize : (i+1)*e.BlockSize]
			}
			out = append(out, one)
		}
	}
	return out
}

func sameEvent(a, b Event) bool {
	return a.Kind == b.Kind && slices.Equal(a.Hashes, b.Hashes) && a.HasParent == b.HasParent && a.Parent == b.Parent &&
		slices.Equal(a.Tokens, b.Tokens) && a.BlockSize == b.BlockSize && a.Medium == b.Medium
}

func TestReplayFromASequenceAndTheEpochStart(t *testing.T) {
	tr := newTracker(t, Spec{})
	sub := subscriber(t, tr)
	tr.Stored(key(1), 0, CPU, record(11, 0, 1))
	seq, _ := next(t, sub)
	tr.Stored(key(2), 0, CPU, record(12, 11, 2))
	next(t, sub)
	seqs, batches := replay(t, tr, binary.BigEndian.AppendUint64(nil, 0))
	if len(seqs) != 3 || seqs[0] != 0 || seqs[1] != seq || seqs[2] != seq+1 {
		t.Fatalf("replay from 0: sequences %v, want 0, %d, %d", seqs, seq, seq+1)
	}
	if len(batches[0].Events) != 1 || batches[0].Events[0].Kind != KindCleared {
		t.Fatalf("the epoch's first batch: %+v, want AllBlocksCleared", batches[0].Events)
	}
	seqs, _ = replay(t, tr, binary.BigEndian.AppendUint64(nil, uint64(seq+1)))
	if len(seqs) != 1 || seqs[0] != seq+1 {
		t.Fatalf("replay from %d: %v", seq+1, seqs)
	}
}

func TestASnapshotRequestAnswersTheStateNow(t *testing.T) {
	tr := newTracker(t, Spec{})
	tr.Stored(key(1), 0, CPU, record(11, 0, 1))
	tr.Stored(key(1), 0, Storage, nil)
	tr.Stored(key(2), 0, Storage, record(12, 11, 2))
	tr.Stored(key(3), 0, CPU, record(13, 0, 3))
	tr.Removed(key(3), CPU)
	_, batches := replay(t, tr, []byte(SnapshotRequest))
	var evs []Event
	for _, b := range batches {
		evs = append(evs, b.Events...)
	}
	if len(evs) == 0 || evs[0].Kind != KindCleared {
		t.Fatalf("snapshot %+v: want AllBlocksCleared first", evs)
	}
	held := map[uint64]Medium{}
	for _, e := range evs[1:] {
		for _, h := range e.Hashes {
			held[h] |= e.Medium
		}
	}
	if len(held) != 2 || held[11] != CPU|Storage || held[12] != Storage {
		t.Fatalf("snapshot holds %v, want 11 on CPU and STORAGE, 12 on STORAGE", held)
	}
}

func TestAFullQueueResyncsWithAllBlocksClearedAndTheBlocksHeld(t *testing.T) {
	tr := newTracker(t, Spec{QueueEvents: 4, FlushInterval: 20 * time.Millisecond, MinResyncInterval: time.Nanosecond})
	sub := subscriber(t, tr)
	for i := range byte(10) {
		tr.Stored(key(i+1), 0, CPU, record(uint64(100+i), 0, uint32(i)))
	}
	tr.Removed(key(1), CPU)
	// The resync may be taken at any point of the burst; what follows it
	// is published after it. Applied in order, the stream ends at the
	// blocks held.
	held := map[uint64]bool{}
	resynced := false
	want := func() bool { return resynced && len(held) == 9 && !held[100] }
	for deadline := time.Now().Add(10 * time.Second); !want(); {
		if time.Now().After(deadline) {
			t.Fatalf("the stream applied in order holds %v (resync seen: %v), want a resync and the 9 blocks held (101..109)", held, resynced)
		}
		_, b := next(t, sub)
		resynced = resynced || b.Events[0].Kind == KindCleared // a resync is one message that starts so
		applyBatch(held, b)
	}
	if _, st := tr.Stats(); st[0].Overflows == 0 || st[0].Resyncs == 0 {
		t.Fatalf("stats %+v, want overflows counted and a resync", st[0])
	}
}

func TestASubscriberThatStopsReadingIsDroppedAndOthersKeepUp(t *testing.T) {
	t.Run("messages", func(t *testing.T) { checkStuckSubscriberDropped(t, Spec{SubscriberQueue: 8}) })
	t.Run("bytes", func(t *testing.T) { checkStuckSubscriberDropped(t, Spec{SubscriberBytes: 1 << 20}) })
}

// checkStuckSubscriberDropped: a subscriber that stops reading is
// disconnected once it falls spec's bound behind, and a live one keeps
// every event.
func checkStuckSubscriberDropped(t *testing.T, spec Spec) {
	tr := newTracker(t, spec)
	pub, _ := tr.Endpoints()
	// A raw ZMTP subscriber that subscribes and then never reads.
	nc, err := net.Dial("tcp", pub[0][len("tcp://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write(greeting()[:64])
	nc.Write(readyCommand("SUB"))
	nc.Write(appendFrame(nil, []byte{1}, 0))
	r := bufio.NewReader(nc)
	io.ReadFull(r, make([]byte, 64))
	sub := subscriber(t, tr)
	waitSubscribed(t, tr, 2)
	// 32 MiB of events in rounds the live subscriber keeps up with: more
	// than loopback's socket buffers hold for the stuck one.
	var tokens [512]uint32
	for round := range 250 {
		for i := range 64 {
			n := round*64 + i
			tr.Stored(Key{NS: abi.Namespace{2}, Hash: abi.BlockHash{byte(n), byte(n >> 8)}}, 0, CPU, record(uint64(1000+n), 0, tokens[:]...))
		}
		for got := 0; got < 64; {
			_, b := next(t, sub)
			for _, e := range b.Events {
				got += len(e.Hashes)
			}
		}
	}
	if _, st := tr.Stats(); st[0].SubscribersDropped != 1 {
		t.Fatalf("stats %+v: want the stuck subscriber dropped", st[0])
	}
}

// The replay socket keeps the newest batches whose payloads fit in
// ReplayBytes (at least the last one), and a replay answers exactly those.
func TestTheReplayBufferIsBoundedInBytes(t *testing.T) {
	tr := newTracker(t, Spec{BatchEvents: 1, ReplayBytes: 4000})
	sub := subscriber(t, tr)
	var tokens [64]uint32
	const blocks = 40
	for i := range blocks {
		tr.Stored(Key{Hash: abi.BlockHash{byte(i)}}, 0, CPU, record(uint64(100+i), 0, tokens[:]...))
		next(t, sub) // one batch a block, published
	}
	seqs, batches := replay(t, tr, make([]byte, 8))
	if len(batches) == 0 || len(batches) >= blocks {
		t.Fatalf("replay of %d batches, want some but not all %d", len(batches), blocks)
	}
	for i, b := range batches {
		if seqs[i] != int64(blocks-len(batches)+1+i) || len(b.Events) != 1 || b.Events[0].Hashes[0] != uint64(100+blocks-len(batches)+i) {
			t.Fatalf("replayed batch %d: seq %d, %+v; want the newest %d batches in order", i, seqs[i], b.Events, len(batches))
		}
	}
	tr.streams[0].replayMu.Lock()
	kept := tr.streams[0].replayBytes
	tr.streams[0].replayMu.Unlock()
	if kept > 4000 {
		t.Fatalf("the replay buffer keeps %d bytes, over ReplayBytes 4000", kept)
	}
}

func TestLookupByEngineHashesAndByTokens(t *testing.T) {
	tr := newTracker(t, Spec{})
	ns := abi.Namespace{1}
	tr.Stored(key(1), 0, CPU, record(11, 0, 1, 2))
	tr.Stored(key(1), 0, Storage, nil)
	tr.Stored(key(2), 0, CPU, record(12, 11, 3, 4))
	tr.Stored(key(3), 0, Storage, record(13, 12, 5, 6))
	for _, tc := range []struct {
		name string
		got  Held
		want Held
	}{
		{"hashes", tr.LookupHashes(nil, []uint64{11, 12, 13, 14}), Held{CPU: 2, Storage: 1, Any: 3}},
		{"hashes in the namespace", tr.LookupHashes(&ns, []uint64{11, 12}), Held{CPU: 2, Storage: 1, Any: 2}},
		{"hashes in another namespace", tr.LookupHashes(&abi.Namespace{9}, []uint64{11}), Held{}},
		{"a chain not from its start", tr.LookupHashes(nil, []uint64{12, 11}), Held{CPU: 2, Any: 2}},
		{"tokens", tr.LookupTokens(nil, []uint32{1, 2, 3, 4, 5, 6, 7}, 2), Held{CPU: 2, Storage: 1, Any: 3}},
		{"tokens that differ in block 1", tr.LookupTokens(nil, []uint32{1, 2, 3, 9, 5, 6}, 2), Held{CPU: 1, Storage: 1, Any: 1}},
		{"tokens of block 1 alone", tr.LookupTokens(nil, []uint32{3, 4}, 2), Held{}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
}

// The token index is built by the first LookupTokens and kept from then
// on: blocks stored and removed after it are found and forgotten, and a
// block with the same token ids under another parent is not a match.
func TestTheTokenIndexFollowsStoresAndRemovalsAfterItIsBuilt(t *testing.T) {
	tr := newTracker(t, Spec{})
	tr.Stored(key(1), 0, CPU, record(11, 0, 1, 2))
	if h := tr.LookupTokens(nil, []uint32{1, 2, 3, 4}, 2); h != (Held{CPU: 1, Any: 1}) {
		t.Fatalf("before: %+v", h)
	}
	tr.Stored(key(2), 0, CPU, record(12, 11, 3, 4))
	tr.Stored(key(3), 0, CPU, record(13, 99, 5, 6)) // block 2's tokens, another parent
	if h := tr.LookupTokens(nil, []uint32{1, 2, 3, 4, 5, 6}, 2); h != (Held{CPU: 2, Any: 2}) {
		t.Fatalf("after two stores: %+v, want the chain's 2 blocks (block 3's parent is not block 2)", h)
	}
	tr.Removed(key(1), CPU)
	if h := tr.LookupTokens(nil, []uint32{1, 2, 3, 4}, 2); h != (Held{}) {
		t.Fatalf("after removing block 1: %+v", h)
	}
	if h := tr.LookupHashes(nil, []uint64{11, 12}); h != (Held{}) {
		t.Fatalf("hashes after removing block 1: %+v", h)
	}
}

// The engine-hash index is built by the first LookupHashes and kept from
// then on: blocks stored and removed after it are found and forgotten,
// one engine hash in two namespaces (two TP ranks) is chained, and the
// removal of one leaves the other.
func TestTheHashIndexFollowsStoresAndRemovalsAfterItIsBuilt(t *testing.T) {
	tr := newTracker(t, Spec{})
	indexed := func() (built bool, hashes int) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return tr.byHash != nil, len(tr.byHash)
	}
	tr.Stored(key(1), 0, CPU, record(11, 0, 1, 2))
	if built, _ := indexed(); built {
		t.Fatal("the hash index was built before any hash lookup")
	}
	if h := tr.LookupHashes(nil, []uint64{11, 12}); h != (Held{CPU: 1, Any: 1}) {
		t.Fatalf("before: %+v", h)
	}
	rank1 := Key{NS: abi.Namespace{2}, Hash: key(1).Hash}
	tr.Stored(key(2), 0, CPU, record(12, 11, 3, 4))
	tr.Stored(rank1, 0, Storage, record(11, 0, 1, 2))
	if h := tr.LookupHashes(nil, []uint64{11, 12}); h != (Held{CPU: 2, Storage: 1, Any: 2}) {
		t.Fatalf("after two stores: %+v", h)
	}
	tr.Removed(key(1), CPU)
	if h := tr.LookupHashes(nil, []uint64{11, 12}); h != (Held{Storage: 1, Any: 2}) {
		t.Fatalf("after removing namespace 1's block 11: %+v, want namespace 2's on storage, then block 12 in RAM", h)
	}
	ns1 := key(1).NS
	if h := tr.LookupHashes(&ns1, []uint64{11}); h != (Held{}) {
		t.Fatalf("namespace 1 after removing its block 11: %+v", h)
	}
	tr.Removed(rank1, Storage)
	tr.Removed(key(2), CPU)
	h := tr.LookupHashes(nil, []uint64{11})
	if _, n := indexed(); h != (Held{}) || n != 0 {
		t.Fatalf("after removing every block: %+v, %d hashes indexed", h, n)
	}
}

// With domains, each gets its own ipc sockets at PATH.NAME, mode 0660 in
// its group, and a block's events reach its domain's stream only.
func TestEachDomainHasItsOwnSocketsAndSeesOnlyItsBlocks(t *testing.T) {
	dir := t.TempDir()
	gid := os.Getgid()
	tr := newTracker(t, Spec{Endpoint: "ipc://" + filepath.Join(dir, "ev"), ReplayEndpoint: "ipc://" + filepath.Join(dir, "rep"),
		Domains: []Domain{{Name: "alice", GID: gid}, {Name: "bob", GID: gid}}})
	pub, rep := tr.Endpoints()
	for i, name := range []string{"alice", "bob"} {
		for _, p := range []string{filepath.Join(dir, "ev."+name), filepath.Join(dir, "rep."+name)} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o660 || st.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
				t.Fatalf("%s: mode %v gid %d, want a socket of mode 0660 in group %d", p, st.Mode(), st.Sys().(*syscall.Stat_t).Gid, gid)
			}
		}
		if pub[i] != "ipc://"+filepath.Join(dir, "ev."+name) || rep[i] != "ipc://"+filepath.Join(dir, "rep."+name) {
			t.Fatalf("endpoints %v %v", pub, rep)
		}
	}
	tr.Stored(key(1), 0, CPU, record(11, 0, 1))
	tr.Stored(key(2), 1, CPU, record(22, 0, 2))
	tr.Stored(key(3), NoStream, CPU, record(33, 0, 3))
	for i, want := range []uint64{11, 22} {
		d := zmq4.NewDealer(context.Background())
		if err := d.Dial(rep[i]); err != nil {
			t.Fatal(err)
		}
		d.Send(zmq4.NewMsgFrom([]byte{}, []byte(SnapshotRequest)))
		var got []uint64
		for {
			msg, err := d.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if int64(binary.BigEndian.Uint64(msg.Frames[2])) == -1 {
				break
			}
			b, err := DecodeBatch(msg.Frames[3])
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range b.Events {
				got = append(got, e.Hashes...)
			}
		}
		d.Close()
		if len(got) != 1 || got[0] != want {
			t.Fatalf("domain %d's snapshot holds %v, want only %d", i, got, want)
		}
	}
}

// BenchmarkStoredRemoved is the dispatcher's cost of announcing one block
// stored and then removed (two events queued, records of 128 tokens),
// with the stream's goroutine draining meanwhile.
func BenchmarkStoredRemoved(b *testing.B) {
	tr, err := New(Spec{Endpoint: "tcp://127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	tokens := make([]uint32, 128)
	recs := make([][]byte, 1024)
	for i := range recs {
		recs[i] = record(uint64(i+1), uint64(i), tokens...)
	}
	b.ResetTimer()
	for i := range b.N {
		k := Key{Hash: abi.BlockHash{byte(i), byte(i >> 8), byte(i >> 16)}}
		tr.Stored(k, 0, CPU, recs[i%len(recs)])
		tr.Removed(k, CPU)
	}
}

// A closed Tracker still answers what an HTTP request or a scrape during
// the Manager's shutdown asks (stats, endpoints, lookups), takes the
// tiers' last stores without publishing them, and closes once.
func TestAClosedTrackerStaysReadable(t *testing.T) {
	tr := newTracker(t, Spec{})
	tr.Stored(key(1), 0, CPU, record(11, 0, 1))
	tr.Close()
	tr.Stored(key(2), 0, CPU, record(12, 11, 2))
	tr.Removed(key(1), CPU)
	if blocks, st := tr.Stats(); blocks != 1 || len(st) != 1 {
		t.Fatalf("Stats after Close = %d blocks, %d streams; want 1 and 1", blocks, len(st))
	}
	if pub, _ := tr.Endpoints(); len(pub) != 1 {
		t.Fatalf("Endpoints after Close = %v", pub)
	}
	if h := tr.LookupHashes(nil, []uint64{11}); h.Any != 0 {
		t.Fatalf("LookupHashes of a removed block = %+v", h)
	}
	if h := tr.LookupHashes(nil, []uint64{12}); h.CPU != 1 {
		t.Fatalf("LookupHashes of a block stored after Close = %+v, want it held", h)
	}
	tr.Close()
}

// The Subscriber reads the stream as a ZeroMQ SUB does: every message's
// sequence and payload, in order, from the epoch's start on.
func TestSubscriberReadsTheStreamInOrder(t *testing.T) {
	tr := newTracker(t, Spec{})
	pub, _ := tr.Endpoints()
	sub, err := Subscribe(pub[0], 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for deadline := time.Now().Add(10 * time.Second); !tr.streams[0].pub.anySubscribed(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the subscription never reached the server")
		}
	}
	tr.Stored(key(1), 0, CPU, record(11, 0, 1))
	tr.Removed(key(1), CPU)
	var got []Event
	last := int64(0)
	for len(got) < 2 {
		seq, payload, err := sub.Next()
		if err != nil {
			t.Fatal(err)
		}
		if seq <= last {
			t.Fatalf("sequence %d after %d", seq, last)
		}
		last = seq
		b, err := DecodeBatch(payload)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Events...)
	}
	if got[0].Kind != KindStored || got[1].Kind != KindRemoved || got[0].Hashes[0] != 11 {
		t.Fatalf("events %+v", got)
	}
	if _, err := Subscribe("tcp://127.0.0.1:1", time.Second); err == nil {
		t.Fatal("a subscription to a closed port succeeded")
	}
}

// A peer that sends subscription after subscription (each a distinct
// prefix of up to maxInFrame bytes) is disconnected at maxSubscriptions:
// the list is kept per connection and walked for every message sent, so
// without a bound one peer grows the Manager's memory and the
// broadcast's work without end.
func TestAPeerSubscribingWithoutEndIsDisconnected(t *testing.T) {
	tr := newTracker(t, Spec{})
	nc := rawSub(t, tr)
	r := bufio.NewReader(nc)
	if _, err := io.ReadFull(r, make([]byte, greetingBytes)); err != nil {
		t.Fatal(err)
	}
	go func() {
		topic := make([]byte, 1+1024)
		topic[0] = 1
		for i := range 4 * maxSubscriptions {
			binary.BigEndian.PutUint32(topic[1:], uint32(i))
			if _, err := nc.Write(appendFrame(nil, topic, 0)); err != nil {
				return
			}
		}
	}()
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	// The server's close ends the stream (EOF, or a reset while the
	// peer's writes are unread); only the deadline means it stayed.
	if _, err := io.Copy(io.Discard, r); os.IsTimeout(err) {
		t.Fatalf("the server kept the connection of a peer sending %d subscriptions: %v", 4*maxSubscriptions, err)
	}
	for deadline := time.Now().Add(10 * time.Second); tr.streams[0].pub.subscribers() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the peer's connection is still counted")
		}
	}
}

// A peer that finishes the handshake and never subscribes gives its slot
// back within subscribeWithin, so idle strangers cannot hold them all.
func TestAPeerThatDoesNotSubscribeIsClosed(t *testing.T) {
	tr := newTracker(t, Spec{})
	nc := rawSub(t, tr)
	start := time.Now()
	nc.SetReadDeadline(start.Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, nc); err != nil {
		t.Fatalf("reading until the server closes: %v", err)
	}
	if d := time.Since(start); d < subscribeWithin-time.Second || d > subscribeWithin+10*time.Second {
		t.Fatalf("closed after %v, want about %v", d, subscribeWithin)
	}
	if n := tr.streams[0].pub.idleClosed.Load(); n != 1 {
		t.Fatalf("idle closes %d, want 1", n)
	}
}

// appendItems writes what AppendBatch writes for the same events: every
// kind, chain runs and their breaks (a parent that is not the block
// before, another medium, another block size, a removal between).
func TestAppendItemsIsAppendBatchOfTheRuns(t *testing.T) {
	items := []item{
		{kind: itemCleared},
		{kind: itemStored, medium: CPU, hash: 1, rec: record(1, 0, 1, 2)},
		{kind: itemStored, medium: CPU, hash: 2, rec: record(2, 1, 3, 4)},
		{kind: itemStored, medium: CPU, hash: 3, rec: record(3, 9, 5, 6)},
		{kind: itemStored, medium: Storage, hash: 4, rec: record(4, 3, 7, 8)},
		{kind: itemStored, medium: Storage, hash: 5, rec: record(5, 4, 9)},
		{kind: itemRemoved, medium: CPU, hash: 1},
		{kind: itemRemoved, medium: CPU, hash: 2},
		{kind: itemRemoved, medium: Storage, hash: 4},
		{kind: itemStored, medium: CPU, hash: 1 << 40, rec: record(1<<40, 0, 1<<31)},
		{kind: itemStored, medium: Storage, hash: 6, rec: record(6, 0, 0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 1<<32-1)},
	}
	want := &Batch{TS: 2.5, Events: []Event{
		{Kind: KindCleared},
		{Kind: KindStored, Hashes: []uint64{1, 2}, Tokens: []uint32{1, 2, 3, 4}, BlockSize: 2, Medium: CPU},
		{Kind: KindStored, Hashes: []uint64{3}, HasParent: true, Parent: 9, Tokens: []uint32{5, 6}, BlockSize: 2, Medium: CPU},
		{Kind: KindStored, Hashes: []uint64{4}, HasParent: true, Parent: 3, Tokens: []uint32{7, 8}, BlockSize: 2, Medium: Storage},
		{Kind: KindStored, Hashes: []uint64{5}, HasParent: true, Parent: 4, Tokens: []uint32{9}, BlockSize: 1, Medium: Storage},
		{Kind: KindRemoved, Hashes: []uint64{1, 2}, Medium: CPU},
		{Kind: KindRemoved, Hashes: []uint64{4}, Medium: Storage},
		{Kind: KindStored, Hashes: []uint64{1 << 40}, Tokens: []uint32{1 << 31}, BlockSize: 1, Medium: CPU},
		{Kind: KindStored, Hashes: []uint64{6}, Tokens: []uint32{0x7f, 0x80, 0xff, 0x100, 0xffff, 0x10000, 1<<32 - 1}, BlockSize: 7, Medium: Storage},
	}}
	got, n := appendItems(nil, 2.5, items)
	if bound := itemsBound(items, runs(items, nil)); len(got) > bound {
		t.Fatalf("appendItems wrote %d bytes, over itemsBound's %d", len(got), bound)
	}
	if wantBytes := AppendBatch(nil, want); !bytes.Equal(got, wantBytes) || n != len(want.Events) {
		b, err := DecodeBatch(got)
		t.Fatalf("%d events %+v (%v), want %+v", n, b.Events, err, want.Events)
	}
}

// rawSub is a ZMTP peer of tr's PUB socket that has sent its greeting and
// READY as a SUB, and nothing else; closed when the test ends.
func rawSub(t *testing.T, tr *Tracker) net.Conn {
	t.Helper()
	pub, _ := tr.Endpoints()
	nc, err := net.Dial("tcp", pub[0][len("tcp://"):])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if _, err := nc.Write(append(greeting(), readyCommand("SUB")...)); err != nil {
		t.Fatal(err)
	}
	return nc
}

// The stream's encoding of a full batch: 1024 blocks stored in chains of
// 16, records of 128 token ids of 1 to 5 bytes each.
func BenchmarkAppendItems(b *testing.B) {
	items := make([]item, 1024)
	tokens := make([]uint32, 128)
	for i := range items {
		for j := range tokens {
			tokens[j] = uint32(i*2654435761) + uint32(j)
		}
		parent := uint64(0)
		if i%16 != 0 {
			parent = uint64(i)
		}
		items[i] = item{kind: itemStored, medium: CPU, hash: uint64(i + 1), rec: record(uint64(i+1), parent, tokens...)}
	}
	for range b.N {
		appendItems(nil, 1, items)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/block")
}
