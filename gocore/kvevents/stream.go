package kvevents

import (
	"encoding/binary"

	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// item is one event waiting in a stream's queue: a block stored on or
// removed from a medium, or (rec nil, kind cleared) every block gone.
type item struct {
	kind   uint8 // itemStored, itemRemoved, itemCleared
	medium Medium
	rec    []byte // the block record (abi.ParseRecord); immutable
}

const (
	itemStored = iota + 1
	itemRemoved
	itemCleared
)

// endSeq is the sequence number that ends a replay (vLLM's END_SEQ: -1
// as 8 big-endian bytes).
var endSeq = []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// SnapshotRequest is OrbitKV's extension of vLLM's replay protocol: sent
// on the replay socket in place of an 8-byte start sequence, it asks for
// the state of the stream's blocks now (docs/events.md, "Snapshot").
const SnapshotRequest = "orbitkv.snapshot"

// snapshotChunk is the most events one snapshot message carries.
const snapshotChunk = 8192

// Stream is one event endpoint: a PUB socket, an optional ROUTER replay
// socket, its sequence numbers and replay buffer, and the bounded queue
// the Tracker fills on the caller's goroutine. Its goroutine batches the
// queue every FlushInterval, encodes and publishes.
type Stream struct {
	name  string // the domain's name, "" without tenants
	spec  *Spec
	topic []byte
	pub   *zserver
	rep   *zserver // nil without a replay endpoint
	log   *slog.Logger
	t     *Tracker

	// Guarded by the Tracker's mutex: the queue, and lost (items were
	// dropped since the last resync).
	q    []item
	lost bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	nextSeq   int64        // the stream goroutine's
	published atomic.Int64 // the last sequence number sent; -1 before any

	replayMu sync.Mutex
	replay   [][]byte // the last ReplayBatches messages' (seq, payload): seq 8 bytes BE then payload
	head     int      // replay's oldest element when full

	Overflows  atomic.Uint64 // events dropped for a full queue
	Resyncs    atomic.Uint64 // AllBlocksCleared + re-announce after a loss
	Events     atomic.Uint64 // events published
	Batches    atomic.Uint64
	lastResync time.Time
}

func newStream(t *Tracker, name string, pub, rep net.Listener) *Stream {
	s := &Stream{name: name, spec: &t.spec, topic: []byte(t.spec.Topic), log: t.log, t: t,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	s.published.Store(-1)
	s.pub = newZServer("PUB", pub, t.spec.SubscriberQueue, t.log)
	if rep != nil {
		s.rep = newZServer("ROUTER", rep, t.spec.ReplayBatches+2, t.log)
		s.rep.onRequest = s.serveReplay
	}
	return s
}

// start publishes the epoch's first batch, AllBlocksCleared (sequence
// 0), then serves.
func (s *Stream) start() {
	s.publish([]item{{kind: itemCleared}})
	s.pub.serve()
	if s.rep != nil {
		s.rep.serve()
	}
	go s.run()
}

// push queues it; called with the Tracker's mutex held. A full queue
// drops it and marks the stream lost: its goroutine resyncs.
func (s *Stream) push(it item) {
	if len(s.q) >= s.spec.QueueEvents {
		s.Overflows.Add(1)
		if !s.lost {
			s.lost = true
			s.kick()
		}
		return
	}
	s.q = append(s.q, it)
	if len(s.q) == s.spec.BatchEvents {
		s.kick()
	}
}

func (s *Stream) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Stream) run() {
	defer close(s.done)
	tick := time.NewTicker(s.spec.FlushInterval)
	defer tick.Stop()
	var spare []item
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-tick.C:
		}
		var batch []item
		var lost bool
		s.t.mu.Lock()
		if s.lost && time.Since(s.lastResync) >= s.spec.MinResyncInterval {
			s.lost, lost = false, true
			s.lastResync = time.Now()
			s.q = s.q[:0]
			batch = append(spare[:0], item{kind: itemCleared})
			batch = s.t.snapshotLocked(s, batch)
		} else if !s.lost {
			batch, s.q = s.q, spare[:0]
		}
		s.t.mu.Unlock()
		if lost {
			s.Resyncs.Add(1)
			s.log.Warn("kv events: the event queue overflowed; announced AllBlocksCleared and every block held", "stream", s.name, "blocks", len(batch)-1, "queue", s.spec.QueueEvents)
		}
		full := batch
		for len(batch) > 0 {
			n := min(len(batch), s.spec.BatchEvents)
			if lost {
				n = len(batch) // one resync is one message: a subscriber never sees half of it
			}
			s.publish(batch[:n])
			batch = batch[n:]
		}
		clear(full) // the records stay the Tracker's only
		spare = full[:0]
	}
}

// publish encodes items as one batch, sends it with the next sequence
// number and keeps it for replay. Each message is a new slice: the
// subscribers' writers hold it until they have written it.
func (s *Stream) publish(items []item) {
	b := Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: toEvents(items)}
	payload := AppendBatch(nil, &b)
	seq := s.nextSeq
	s.nextSeq++
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], uint64(seq))
	s.pub.broadcast(s.topic, appendMessage(make([]byte, 0, len(s.topic)+len(payload)+32), s.topic, sb[:], payload))
	s.published.Store(seq)
	s.Batches.Add(1)
	s.Events.Add(uint64(len(b.Events)))
	if s.rep != nil {
		e := append(sb[:], payload...)
		s.replayMu.Lock()
		if len(s.replay) < s.spec.ReplayBatches {
			s.replay = append(s.replay, e)
		} else {
			s.replay[s.head] = e
			s.head = (s.head + 1) % len(s.replay)
		}
		s.replayMu.Unlock()
	}
}

// toEvents turns queued items into wire events, a run of stores of one
// medium that chain (each block's parent the one before) into one
// BlockStored, and removals of one medium into one BlockRemoved.
func toEvents(items []item) []Event {
	out := make([]Event, 0, len(items))
	var lastHash uint64
	for _, it := range items {
		switch it.kind {
		case itemCleared:
			out = append(out, Event{Kind: KindCleared})
			continue
		}
		r, _, err := abi.ParseRecord(it.rec)
		if err != nil {
			continue // checked when it was kept: unreachable
		}
		prev := len(out) - 1
		switch it.kind {
		case itemStored:
			if prev >= 0 && out[prev].Kind == KindStored && out[prev].Medium == it.medium && r.HasParent && r.ParentHash == lastHash && out[prev].BlockSize == r.TokenCount() {
				out[prev].Hashes = append(out[prev].Hashes, r.EngineHash)
				out[prev].Tokens = appendTokens(out[prev].Tokens, r)
			} else {
				out = append(out, Event{Kind: KindStored, Hashes: []uint64{r.EngineHash}, HasParent: r.HasParent, Parent: r.ParentHash,
					Tokens: appendTokens(nil, r), BlockSize: r.TokenCount(), Medium: it.medium})
			}
			lastHash = r.EngineHash
		case itemRemoved:
			if prev >= 0 && out[prev].Kind == KindRemoved && out[prev].Medium == it.medium {
				out[prev].Hashes = append(out[prev].Hashes, r.EngineHash)
			} else {
				out = append(out, Event{Kind: KindRemoved, Hashes: []uint64{r.EngineHash}, Medium: it.medium})
			}
		}
	}
	return out
}

// serveReplay answers a ROUTER request on its connection's reader
// goroutine: ["", start] (8 bytes big-endian) replays every kept batch of
// sequence ≥ start, then the end marker; ["", SnapshotRequest] sends the
// state now (see SnapshotRequest). Other requests get the end marker
// alone.
func (s *Stream) serveReplay(frames [][]byte, reply func([]byte) bool) {
	if len(frames) == 2 && len(frames[0]) == 0 {
		frames = frames[1:]
	} else if len(frames) != 1 {
		reply(appendMessage(nil, nil, nil, endSeq, nil))
		return
	}
	req := frames[0]
	switch {
	case len(req) == 8:
		start := int64(binary.BigEndian.Uint64(req))
		s.replayMu.Lock()
		var out [][]byte
		for i := range s.replay {
			e := s.replay[(s.head+i)%len(s.replay)]
			if int64(binary.BigEndian.Uint64(e)) >= start {
				out = append(out, e)
			}
		}
		s.replayMu.Unlock()
		for _, e := range out {
			if !reply(appendMessage(nil, nil, s.topic, e[:8], e[8:])) {
				return
			}
		}
	case string(req) == SnapshotRequest:
		s.t.mu.Lock()
		seq := s.published.Load()
		items := s.t.snapshotLocked(s, []item{{kind: itemCleared}})
		s.t.mu.Unlock()
		var sb [8]byte
		binary.BigEndian.PutUint64(sb[:], uint64(seq))
		for len(items) > 0 {
			n := min(len(items), snapshotChunk)
			b := Batch{TS: float64(time.Now().UnixNano()) / 1e9, Events: toEvents(items[:n])}
			if !reply(appendMessage(nil, nil, s.topic, sb[:], AppendBatch(nil, &b))) {
				return
			}
			items = items[n:]
		}
	}
	reply(appendMessage(nil, nil, nil, endSeq, nil))
}

func (s *Stream) close() {
	close(s.stop)
	<-s.done
	s.pub.close()
	if s.rep != nil {
		s.rep.close()
	}
}

func appendTokens(dst []uint32, r abi.BlockRecord) []uint32 {
	for i := range r.TokenCount() {
		dst = append(dst, r.Token(i))
	}
	return dst
}
