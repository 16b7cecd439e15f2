package ssd

import (
	"sync"
	"time"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
	"golang.org/x/sys/unix"
)

// opKind is what an op asks of a worker or the committer.
type opKind uint8

const (
	opRead   opKind = iota // a worker reads and verifies a block
	opWrite                // a worker writes a block; the committer appends its put record
	opDelete               // the committer appends a delete record
	opVerify               // a worker reads and verifies a block for Open (not counted as a Read)
	opRecord               // a worker reads and checks a slot header and its block record (Record)
)

// op is one queued operation. Ops are pooled so that Read allocates
// nothing in the steady state.
type op struct {
	kind opKind
	e    *entry
	bufs [][]byte // the caller's src or dst; not copied
	done func(error)
	err  error
	iov  []unix.Iovec // scratch for buildIov, kept with the pooled op
	// record is a Write's block record (a copy the store made; handed to
	// Spec.Blocks when the block becomes resident, then dropped); out is
	// where a Record op leaves the record it read (a fresh copy).
	record []byte
	out    *[]byte
	// queued is when the op entered the worker queue (Outstanding reports
	// the age of ops no worker has taken yet); set under queue.mu.
	queued time.Time
}

var opPool = sync.Pool{New: func() any { return new(op) }}

func getOp(kind opKind, e *entry, bufs [][]byte, done func(error)) *op {
	o := opPool.Get().(*op)
	o.kind, o.e, o.bufs, o.done, o.err = kind, e, bufs, done, nil
	return o
}

func putOp(o *op) {
	o.e, o.bufs, o.done, o.err, o.record, o.out = nil, nil, nil, nil, nil, nil
	o.iov = o.iov[:0]
	opPool.Put(o)
}

// ring is a growable FIFO of ops.
type ring struct {
	buf        []*op
	head, size int
}

func (r *ring) push(o *op) {
	if r.size == len(r.buf) {
		nb := make([]*op, max(16, 2*len(r.buf)))
		for i := range r.size {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.size)%len(r.buf)] = o
	r.size++
}

func (r *ring) pop() *op {
	o := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return o
}

// queue holds the ops waiting for a worker. Reads go first: they are a
// client's restore or prefetch, while writes are background demotion.
// Record's header reads go with them: one page each, and each caller of
// Record has at most one queued.
type queue struct {
	mu     sync.Mutex
	cond   sync.Cond
	reads  ring
	writes ring
	closed bool
}

func (q *queue) init() { q.cond.L = &q.mu }

func (q *queue) push(o *op) {
	q.mu.Lock()
	o.queued = time.Now()
	if o.kind == opRead || o.kind == opVerify || o.kind == opRecord {
		q.reads.push(o)
	} else {
		q.writes.push(o)
	}
	q.mu.Unlock()
	q.cond.Signal()
}

// pop waits for an op; nil once the queue is closed and empty.
func (q *queue) pop() *op {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		switch {
		case q.reads.size > 0:
			return q.reads.pop()
		case q.writes.size > 0:
			return q.writes.pop()
		case q.closed:
			return nil
		}
		q.cond.Wait()
	}
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// worker is one I/O goroutine. hdr is its page-aligned slot-header buffer
// (an anonymous mapping, so O_DIRECT can use it), reused for every op;
// mac is its own MAC under the store's secret (a MAC serves one goroutine).
// cur is the system call it is in, for Outstanding; guarded by
// Store.ioMu, valid while busy.
type worker struct {
	hdr   []byte
	mac   *layout.MAC
	busy  bool
	cur   IO
	since time.Time
}

func (s *Store) runWorker(w *worker) {
	defer s.workers.Done()
	for {
		o := s.q.pop()
		if o == nil {
			return
		}
		s.issue(w, o)
		switch o.kind {
		case opRead, opVerify:
			err := s.readSlot(w, o)
			s.retire(w, false)
			s.finishRead(o, err)
		case opRecord:
			err := s.readRecord(w, o)
			s.retire(w, false)
			s.finishRead(o, err)
		case opWrite:
			o.err = s.writeSlot(w, o)
			s.retire(w, true)
			s.commitQ.push(o)
		}
	}
}

// issue records that w is about to enter o's system call; retire that it
// returned. One uncontended lock each: noise beside a 4 KiB+ O_DIRECT
// transfer, and what lets a shutdown name a read the disk never answered.
func (s *Store) issue(w *worker, o *op) {
	io := s.ioOf(o)
	io.Issued, io.Age = true, 0
	s.ioMu.Lock()
	w.busy, w.cur, w.since = true, io, time.Now()
	s.ioMu.Unlock()
}

// retire also tells Spec.Observer how long the call took (w.since is
// written by w's own goroutine, which calls retire).
func (s *Store) retire(w *worker, write bool) {
	s.ioMu.Lock()
	w.busy = false
	s.ioMu.Unlock()
	if obs := s.spec.Observer; obs != nil {
		obs.ObserveIO(write, time.Since(w.since))
	}
}
