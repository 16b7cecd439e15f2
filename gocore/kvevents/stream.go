package kvevents

import (
	"encoding/binary"
	"math"

	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// item is one event waiting in a stream's queue: a block stored on or
// removed from a medium, or (kind cleared) every block gone.
type item struct {
	kind   uint8 // itemStored, itemRemoved, itemCleared
	medium Medium
	hash   uint64 // the block's engine hash
	rec    []byte // stored: the block record (abi.ParseRecord), a copy the item owns
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

// maxAnswers is how many replay or snapshot answers a stream writes at
// once; a request past them waits for one to end.
const maxAnswers = 4

// routerQueue is how many answers a replay connection may have queued: a
// replay or snapshot waits for room (up to the write timeout) instead of
// queueing all of its answer at once.
const routerQueue = 16

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

	// Guarded by the Tracker's mutex: the queue, the bytes of its items'
	// records, and lost (items were dropped since the last resync).
	q    []item
	qrec []byte
	lost bool

	wake      chan struct{}
	stop      chan struct{}
	answering chan struct{} // a token per answer being written (maxAnswers)
	done      chan struct{}

	nextSeq   int64        // the stream goroutine's
	published atomic.Int64 // the last sequence number sent; -1 before any

	pool bufPool // the published messages' buffers

	replayMu    sync.Mutex
	replay      []replayed // the batches kept, oldest first: at most ReplayBatches, of at most ReplayBytes
	replayBytes int        // their buffers' bytes (capacity)

	Overflows  atomic.Uint64 // events dropped for a full queue
	Resyncs    atomic.Uint64 // AllBlocksCleared + re-announce after a loss
	Events     atomic.Uint64 // events published
	Batches    atomic.Uint64
	lastResync time.Time
}

func newStream(t *Tracker, name string, pub, rep net.Listener) *Stream {
	s := &Stream{name: name, spec: &t.spec, topic: []byte(t.spec.Topic), log: t.log, t: t,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), answering: make(chan struct{}, maxAnswers)}
	s.published.Store(-1)
	s.pub = newZServer("PUB", pub, t.spec.SubscriberQueue, int64(t.spec.SubscriberBytes), t.log)
	if rep != nil {
		s.rep = newZServer("ROUTER", rep, routerQueue, 0, t.log)
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

// push queues it, copying its record into the queue's record bytes (the
// Tracker reuses its own once the block is forgotten); called with the
// Tracker's mutex held. A full queue drops it and marks the stream lost:
// its goroutine resyncs.
func (s *Stream) push(it item) {
	if len(s.q) >= s.spec.QueueEvents {
		s.Overflows.Add(1)
		if !s.lost {
			s.lost = true
			s.kick()
		}
		return
	}
	if it.rec != nil {
		s.qrec, it.rec = appendCopy(s.qrec, it.rec)
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
	var spareRec []byte
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-tick.C:
		}
		var batch []item
		var recs []byte
		var lost bool
		s.t.mu.Lock()
		s.t.applyLocked()
		if s.lost && time.Since(s.lastResync) >= s.spec.MinResyncInterval {
			s.lost, lost = false, true
			s.lastResync = time.Now()
			s.q, s.qrec = s.q[:0], s.qrec[:0]
			batch = append(spare[:0], item{kind: itemCleared})
			batch = s.t.snapshotLocked(s, batch)
		} else if !s.lost {
			batch, s.q = s.q, spare[:0]
			recs, s.qrec = s.qrec, spareRec[:0]
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
		clear(full) // a grown qrec's old arrays go with the items
		spare, spareRec = full[:0], recs[:0]
	}
}

// publish encodes items as one batch, sends it with the next sequence
// number and keeps it for replay. The message is built in one pooled
// buffer (the payload encoded after room for the frame headers, which
// are then written in front of it), held by every subscriber's writer
// until it has written it and by the replay buffer while it keeps the
// batch; the last to let go gives it back to the pool.
func (s *Stream) publish(items []item) {
	room := len(s.topic) + 3*maxFrameHeader + 8
	p := s.pool.get()
	buf, events := appendItems(slices.Grow(p.b[:0], room)[:room], float64(time.Now().UnixNano())/1e9, items)
	p.b = buf
	payload := buf[room:]
	seq := s.nextSeq
	s.nextSeq++
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], uint64(seq))
	head := appendFrameHeader(appendFrame(appendFrame(make([]byte, 0, room), s.topic, flagMore), sb[:], flagMore), len(payload), 0)
	msg := buf[room-len(head):]
	copy(msg, head)
	s.pub.broadcast(s.topic, msg, p)
	s.published.Store(seq)
	s.Batches.Add(1)
	s.Events.Add(uint64(events))
	if s.rep != nil {
		p.hold()
		e := replayed{seq: seq, payload: payload, p: p}
		s.replayMu.Lock()
		s.replay = append(s.replay, e)
		s.replayBytes += cap(buf) // what the kept buffer takes, not only its payload
		var old []*pooled
		for len(s.replay) > s.spec.ReplayBatches || (s.replayBytes > s.spec.ReplayBytes && len(s.replay) > 1) {
			old = append(old, s.replay[0].p)
			s.replayBytes -= cap(s.replay[0].p.b)
			s.replay[0] = replayed{}
			s.replay = s.replay[1:] // append moves the live part to a new array once the front's room is used up
		}
		s.replayMu.Unlock()
		for _, p := range old {
			p.release()
		}
	}
	p.release()
}

// replayed is one published batch the replay socket keeps: its sequence
// number and payload, in p's buffer (held while kept).
type replayed struct {
	seq     int64
	payload []byte
	p       *pooled
}

// pooled is a buffer of published messages shared by the connections it
// is queued on, the replay buffer and the publisher: each holds a
// reference while it uses the bytes, and the last release gives the
// buffer back to its pool for the next batch. A nil *pooled is a
// message of its own: hold and release do nothing.
type pooled struct {
	b    []byte
	refs atomic.Int32
	pool *bufPool
}

func (p *pooled) hold() {
	if p != nil {
		p.refs.Add(1)
	}
}

func (p *pooled) release() {
	if p != nil && p.refs.Add(-1) == 0 {
		p.pool.put(p)
	}
}

// bufPool keeps up to maxPooled released buffers of a stream's
// messages, so a batch's buffer (hundreds of KiB for a full batch of
// records) is reused instead of allocated and zeroed anew.
type bufPool struct {
	mu   sync.Mutex
	free []*pooled
}

// maxPooled bounds the buffers a bufPool keeps, and maxPooledBytes the
// capacity of one it keeps: a full batch of DefaultBatchEvents records of
// 512 token ids takes about 2.7 MB.
const (
	maxPooled      = 8
	maxPooledBytes = 4 << 20
)

// get is a buffer with one reference (the caller's).
func (b *bufPool) get() *pooled {
	b.mu.Lock()
	var p *pooled
	if n := len(b.free); n > 0 {
		p = b.free[n-1]
		b.free = b.free[:n-1]
	}
	b.mu.Unlock()
	if p == nil {
		p = &pooled{pool: b}
	}
	p.refs.Store(1)
	return p
}

func (b *bufPool) put(p *pooled) {
	if cap(p.b) > maxPooledBytes {
		return // a resync's buffer: left to the garbage collector
	}
	b.mu.Lock()
	if len(b.free) < maxPooled {
		b.free = append(b.free, p)
	}
	b.mu.Unlock()
}

// runs appends to starts the index of the first item of each event the
// items make: a run of stores of one medium that chain (each block's
// parent the one before, blocks of one size) is one BlockStored,
// consecutive removals of one medium one BlockRemoved; and returns it
// with len(items) last.
func runs(items []item, starts []int) []int {
	var prev abi.BlockRecord
	for i, it := range items {
		var r abi.BlockRecord
		if it.kind == itemStored {
			r, _, _ = abi.ParseRecord(it.rec) // checked when it was kept
		}
		if i > 0 {
			p := items[i-1]
			same := it.kind == p.kind && it.medium == p.medium && it.kind != itemCleared
			if same && it.kind == itemStored {
				same = r.HasParent && r.ParentHash == prev.EngineHash && r.TokenCount() == prev.TokenCount()
			}
			if same {
				prev = r
				continue
			}
		}
		starts = append(starts, i)
		prev = r
	}
	return append(starts, len(items))
}

// storedHead bounds the bytes of an event's map beside its hashes and
// token ids: a BlockStored's keys, array headers, parent, block size,
// lora fields and medium take at most 133.
const storedHead = 192

// itemsBound bounds appendItems' bytes for items cut into the runs of
// starts: a 9-byte uint per hash, 5 per token id, storedHead per event
// and the batch's own header.
func itemsBound(items []item, starts []int) int {
	n := 32
	for k := 0; k+1 < len(starts); k++ {
		n += storedHead
		for _, it := range items[starts[k]:starts[k+1]] {
			n += 9
			if it.kind == itemStored {
				n += 5 * (len(it.rec) - abi.RecordHeaderSize) / 4
			}
		}
	}
	return n
}

// appendTokens appends the little-endian uint32 token ids of toks as
// msgpack uints (appendUint's encoding), writing into dst's capacity
// (grown when it lacks 5 bytes a token).
func appendTokens(dst, toks []byte) []byte {
	p := len(dst)
	b := slices.Grow(dst, 5*(len(toks)/4))[:p+5*(len(toks)/4)]
	for ; len(toks) >= 4; toks = toks[4:] {
		switch v := binary.LittleEndian.Uint32(toks); {
		case v < 0x80:
			b[p] = byte(v)
			p++
		case v <= math.MaxUint8:
			b[p], b[p+1] = 0xcc, byte(v)
			p += 2
		case v <= math.MaxUint16:
			b[p] = 0xcd
			binary.BigEndian.PutUint16(b[p+1:], uint16(v))
			p += 3
		default:
			b[p] = 0xce
			binary.BigEndian.PutUint32(b[p+1:], v)
			p += 5
		}
	}
	return b[:p]
}

// appendItems appends the msgpack payload of one batch of items to dst:
// AppendBatch's encoding of the events runs makes, written straight from
// the records' bytes (the stream's hot path: no Event is made).
func appendItems(dst []byte, ts float64, items []item) (out []byte, events int) {
	starts := runs(items, make([]int, 0, 16))
	dst = slices.Grow(dst, itemsBound(items, starts))
	dst = append(dst, 0x93, 0xcb)
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(ts))
	dst = appendArrayLen(dst, len(starts)-1)
	for k := 0; k+1 < len(starts); k++ {
		run := items[starts[k]:starts[k+1]]
		switch first := run[0]; first.kind {
		case itemCleared:
			dst = append(dst, 0x81)
			dst = appendStr(appendStr(dst, "type"), KindCleared)
		case itemStored:
			r0, _, _ := abi.ParseRecord(first.rec)
			dst = append(dst, 0x88)
			dst = appendStr(appendStr(dst, "type"), KindStored)
			dst = appendArrayLen(appendStr(dst, "block_hashes"), len(run))
			for _, it := range run {
				dst = appendUint(dst, it.hash)
			}
			dst = appendStr(dst, "parent_block_hash")
			if r0.HasParent {
				dst = appendUint(dst, r0.ParentHash)
			} else {
				dst = append(dst, 0xc0)
			}
			dst = appendArrayLen(appendStr(dst, "token_ids"), len(run)*r0.TokenCount())
			for _, it := range run {
				dst = appendTokens(dst, it.rec[abi.RecordHeaderSize:abi.RecordHeaderSize+4*r0.TokenCount()])
			}
			dst = appendUint(appendStr(dst, "block_size"), uint64(r0.TokenCount()))
			dst = append(appendStr(dst, "lora_id"), 0xc0)
			dst = appendStr(appendStr(dst, "medium"), first.medium.String())
			dst = append(appendStr(dst, "lora_name"), 0xc0)
		case itemRemoved:
			dst = append(dst, 0x83)
			dst = appendStr(appendStr(dst, "type"), KindRemoved)
			dst = appendArrayLen(appendStr(dst, "block_hashes"), len(run))
			for _, it := range run {
				dst = appendUint(dst, it.hash)
			}
			dst = appendStr(appendStr(dst, "medium"), first.medium.String())
		}
	}
	return append(dst, 0xc0), len(starts) - 1
}

// serveReplay answers a ROUTER request on its connection's reader
// goroutine: ["", start] (8 bytes big-endian) replays every kept batch of
// sequence ≥ start, then the end marker; ["", SnapshotRequest] sends the
// state now (see SnapshotRequest). Other requests get the end marker
// alone.
func (s *Stream) serveReplay(frames [][]byte, reply func([]byte) bool) {
	select { // at most maxAnswers answers at once hold batches or a snapshot's copy
	case s.answering <- struct{}{}:
		defer func() { <-s.answering }()
	case <-s.stop:
		return
	}
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
		var out []replayed
		for _, e := range s.replay {
			if e.seq >= start {
				e.p.hold() // until copied into its reply
				out = append(out, e)
			}
		}
		s.replayMu.Unlock()
		var sb [8]byte
		sent := true
		for _, e := range out {
			binary.BigEndian.PutUint64(sb[:], uint64(e.seq))
			if sent {
				sent = reply(appendMessage(nil, nil, s.topic, sb[:], e.payload))
			}
			e.p.release()
		}
		if !sent {
			return
		}
	case string(req) == SnapshotRequest:
		s.t.mu.Lock()
		s.t.applyLocked()
		seq := s.published.Load()
		items := s.t.snapshotLocked(s, []item{{kind: itemCleared}})
		s.t.mu.Unlock()
		var sb [8]byte
		binary.BigEndian.PutUint64(sb[:], uint64(seq))
		for len(items) > 0 {
			n := min(len(items), snapshotChunk)
			payload, _ := appendItems(nil, float64(time.Now().UnixNano())/1e9, items[:n])
			if !reply(appendMessage(nil, nil, s.topic, sb[:], payload)) {
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
