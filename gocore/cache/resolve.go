package cache

import (
	"slices"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/ticket"
	"github.com/orbitkv/orbitkv/gocore/tier"
)

// The lookup path, one for untracked queries and tickets alike:
//
//	fetch: resident prefix ─► pinned while the SSD run is read or warmed ─► unpinned
//	admit: lease limits and byte budget (gocore/lease) ─► lease granted, queued, or refused
//
// The RAM prefix is pinned while reads make room in RAM, so the eviction
// they cause cannot take a block the caller is about to lease (it would
// then lease, and restore, another block's bytes).

// chain is one lookup: positions [first, end) of a namespace's hash chain.
type chain struct {
	ns         abi.Namespace
	hash       func(int) abi.BlockHash
	first, end int
}

// tail is what fetch does with the part of a chain past its RAM prefix.
type tail uint8

const (
	skipTail tail = iota // nothing
	warmTail             // warm it with no owner: the caller takes the RAM prefix now, the rest is for its next lookup
	readTail             // read it for the caller, who answers Loading meanwhile
)

// fetch finds the resident prefix of c and, when the chain continues on
// SSD, reads the rest for r or warms it, as t says. loading reports that
// the caller must answer Loading (reads run for the block after the
// prefix); started counts the reads begun for r. The hits slice is the
// Service's scratch, valid until the next lookup.
func (s *Service) fetch(c chain, t tail, r tier.Reader) (hits []*index.Block, loading bool, started int) {
	hits = s.idx.Prefix(c.ns, c.end-c.first, func(i int) abi.BlockHash { return c.hash(c.first + i) }, s.hits[:0])
	s.hits = hits[:0]
	miss := c.first + len(hits)
	if miss >= c.end || !s.tiers.HasSSD() || t == skipTail {
		return hits, false, 0
	}
	for _, blk := range hits {
		s.idx.Pin(blk)
	}
	if t == readTail {
		loading, started = s.tiers.Prefetch(r, c.ns, c.hash, miss, c.end)
	} else {
		s.tiers.Warm(c.ns, c.hash, miss, c.end)
	}
	for _, blk := range hits {
		s.idx.Unpin(blk)
	}
	return hits, loading, started
}

// admit leases hits (a copy of them) for o if the lease limits and budget
// allow; queued says the caller already waits in the budget queue.
func (s *Service) admit(o lease.Owner, hits []*index.Block, queued bool) (lease.Verdict, *lease.Lease) {
	var bytes uint64
	for _, blk := range hits {
		bytes += blk.Bytes
	}
	v := s.leases.Admit(o, len(hits), bytes, queued)
	if v != lease.Grant {
		return v, nil
	}
	return v, s.leases.Grant(o, slices.Clone(hits))
}

// ticketReader hears of the SSD reads a ticket started.
type ticketReader struct {
	s *Service
	t *ticket.Ticket
}

func (r ticketReader) ReadDone(blk *index.Block) { r.s.tickets.ReadDone(r.t, blk, r.s.idx.Pin) }

// ReadDone holds a block prefetched for st's untracked query until its next
// query, so another session's prefetch or publish cannot evict the run
// before it is leased; a closed session's reads hold nothing.
func (st *sessState) ReadDone(blk *index.Block) {
	if blk != nil && st.svc.live(st) {
		st.svc.idx.Pin(blk)
		st.holds = append(st.holds, blk)
	}
}

// releaseHolds unpins the blocks prefetched for st's earlier query.
func (s *Service) releaseHolds(st *sessState) {
	for _, blk := range st.holds {
		s.idx.Unpin(blk)
	}
	st.holds = st.holds[:0]
}

// Resolve tries to reach t's result (ticket.Host): the resident prefix (or
// the recovery range), SSD reads awaited when the flags ask, the byte
// budget, then the lease. It leaves t pending, done or ready.
func (s *Service) Resolve(t *ticket.Ticket) {
	if t.State != ticket.Pending || t.Held {
		return
	}
	first, end := t.Range()
	rec := t.Flags&abi.QueryRecovery != 0
	mode := warmTail
	if t.Wants() {
		mode = readTail
		if t.Reloads >= ticket.MaxReloads {
			mode = skipTail
		}
	}
	hits, loading, started := s.fetch(chain{t.NS, t.Hash, first, end}, mode, ticketReader{s, t})
	t.Reads += started
	ramHits := len(hits)
	if loading {
		// Waiting for reads now, not for budget: their completion resolves
		// it again (a queued ticket is skipped there and would wedge the
		// queue).
		t.Reloads++
		s.leaveQueue(t)
		t.Wait(ramHits)
		return
	}
	res := abi.QueryResult{OpID: t.ID, Revision: t.Rev, RAMHits: uint32(ramHits), First: uint32(first)}
	if len(hits) == 0 || (rec && first+len(hits) < end) {
		res.Status, res.Hits, res.First = abi.StatusMiss, 0, 0
		s.settle(t, res, nil)
		return
	}
	if failpoint.Enabled && !t.Passed && s.holdReservation(t) {
		t.Wait(ramHits)
		return
	}
	v, l := s.admit(t.Book.Owner, hits, t.Queued)
	switch v {
	case lease.Refuse:
		// Limits it cannot wait out (a lease larger than the whole budget
		// would wait forever and hold every later ticket behind it).
		res.Status, res.Hits, res.First, res.RAMHits = abi.StatusUnadmitted, 0, 0, 0
		s.settle(t, res, nil)
	case lease.Wait:
		// Wait for the byte budget before touching any page, behind the
		// tickets already waiting: the stored request is borrowed again
		// when budget frees (AdmitWaiting), never cloned.
		if !t.Queued {
			t.Queued = true
			s.leases.Enqueue(t)
		}
		t.Wait(ramHits)
	default:
		res.Status, res.Hits, res.LeaseID, res.LeaseBytes, res.BlockBytes = abi.StatusOK, uint32(len(l.Blocks)), l.ID, l.Bytes, l.Blocks[0].Bytes
		s.settle(t, res, l)
	}
}

// settle records t's result and releases what its reads held (the lease,
// if any, pins the blocks now).
func (s *Service) settle(t *ticket.Ticket, res abi.QueryResult, l *lease.Lease) {
	s.unhold(t)
	s.leaveQueue(t)
	t.Settle(res, l)
}

func (s *Service) unhold(t *ticket.Ticket) {
	for _, blk := range t.Holds {
		s.idx.Unpin(blk)
	}
	t.Holds = t.Holds[:0]
}

func (s *Service) leaveQueue(t *ticket.Ticket) {
	if t.Queued {
		t.Queued = false
		s.leases.Dequeue(t)
	}
}

// Release undoes what t holds (ticket.Host): an undelivered lease, read
// pins, a place in the budget queue.
func (s *Service) Release(t *ticket.Ticket) {
	if t.Lease != nil {
		s.leases.End(t.Lease)
		t.Lease = nil
	}
	s.unhold(t)
	s.leaveQueue(t)
}

// AdmitWaiting retries tickets waiting for byte budget, oldest first
// (ticket.Host); the first that still does not fit stops the round (no
// overtaking).
func (s *Service) AdmitWaiting() {
	for {
		t, ok := s.leases.Head()
		if !ok {
			return
		}
		s.Resolve(t)
		if t.Queued {
			return // still short of budget: nobody behind it goes first
		}
		if t.State != ticket.Pending { // else it left the queue to read SSD blocks
			s.Signal(t.Book)
		}
	}
}

// AdmitOp reports whether one more operation permit fits the bounds
// (ticket.Host): tickets live or draining plus restores, per session and
// in all.
func (s *Service) AdmitOp(b *ticket.Book) bool {
	st := s.sessions[b.Sess.Index]
	return st.opsOf() < s.maxOpsSession && s.tickets.Permits()+s.restores.all < s.maxOps
}

// opsOf is the number of operation permits st holds.
func (st *sessState) opsOf() int { return st.book.Permits() + len(st.restores) }

// ramPrefix is how many leading blocks of q's chain are sealed in RAM.
func (s *Service) ramPrefix(q *abi.QueryDesc) int {
	hits := s.idx.Prefix(q.NS, q.Len(), q.Hash, s.hits[:0])
	s.hits = hits[:0]
	return len(hits)
}

// Discover is how many leading blocks of q's chain are in RAM and then on
// SSD (ticket.Host).
func (s *Service) Discover(q *abi.QueryDesc) (avail, ram int) {
	ram = s.ramPrefix(q)
	avail = ram
	for avail < q.Len() && s.tiers.OnSSD(index.Key{NS: q.NS, Hash: q.Hash(avail)}) {
		avail++
	}
	return avail, ram
}

// Warm starts reading q's SSD run past its RAM prefix (ticket.Host).
func (s *Service) Warm(q *abi.QueryDesc) (warming, ram int) {
	ram = s.ramPrefix(q)
	if ram < q.Len() {
		warming = s.tiers.Warm(q.NS, q.Hash, ram, q.Len())
	}
	return warming, ram
}

// Drained tells that a closing session's last draining ticket finished
// (ticket.Host).
func (s *Service) Drained(b *ticket.Book) {
	if st := s.sessions[b.Sess.Index]; st != nil && st.book == b {
		s.maybeFinish(st)
	}
}

// Signal wakes b's client (ticket.Host).
func (s *Service) Signal(b *ticket.Book) {
	if st := s.sessions[b.Sess.Index]; st != nil && st.book == b {
		st.notify.Signal()
	}
}

// ArmExpiry makes sure the sweep runs by deadline d (ticket.Host).
func (s *Service) ArmExpiry(d time.Time) {
	if s.nextSweep.IsZero() || d.Before(s.nextSweep) {
		s.nextSweep = d
	}
	s.tickWanted.Store(true)
}
