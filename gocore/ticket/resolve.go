package ticket

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/tier"
)

// reader hears of the SSD reads a ticket started (tier.Reader).
type reader struct {
	s *Set
	t *Ticket
}

func (r reader) ReadDone(blk *index.Block) { r.s.readDone(r.t, blk) }

// resolve tries to reach t's result: the resident prefix (or the recovery
// range), SSD reads awaited when the flags ask, the byte budget, then the
// lease (the lookup path of gocore/lease). It leaves t pending, done or
// ready.
func (s *Set) resolve(t *Ticket) {
	if t.State != Pending || t.held {
		return
	}
	first, end := t.Range()
	tail := tier.WarmTail
	if t.Wants() {
		tail = tier.ReadTail
		if t.reloads >= MaxReloads {
			tail = tier.SkipTail
		}
	}
	hits, loading, started := s.look.Fetch(tier.Chain{NS: t.NS, Hashes: t.hashes, First: first, End: end, Domain: t.Book.Domain}, tail, reader{s, t})
	t.reads += started
	ramHits := len(hits)
	if loading {
		// Waiting for reads now, not for budget: their completion resolves
		// it again (a queued ticket is skipped there and would wedge the
		// queue). Only reads this ticket started count against
		// MaxReloads: waiting on reads another lookup started (the chain's
		// next block already loading) restarts nothing, and counting each
		// of their completion rounds would lease a partial prefix to a
		// ticket that asked for the whole one.
		if started > 0 {
			t.reloads++
		}
		s.leaveQueue(t)
		t.wait(ramHits)
		return
	}
	res := abi.QueryResult{OpID: t.ID, Revision: t.Rev, RAMHits: uint32(ramHits), First: uint32(first)}
	if len(hits) == 0 || (t.Flags&abi.QueryRecovery != 0 && first+len(hits) < end) {
		res.Status, res.Hits, res.First = abi.StatusMiss, 0, 0
		s.settle(t, res, nil)
		return
	}
	if !t.passed && s.host.HoldReservation(t) {
		t.held = true
		t.wait(ramHits)
		return
	}
	v, l := s.leases.Acquire(t.Book.Owner, hits, t.queued)
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
		if !t.queued {
			t.queued = true
			s.leases.Enqueue(t)
		}
		t.wait(ramHits)
	default:
		res.Status, res.Hits, res.LeaseID, res.LeaseBytes, res.BlockBytes = abi.StatusOK, uint32(len(l.Blocks)), l.ID, l.Bytes, l.Blocks[0].Bytes
		s.settle(t, res, l)
	}
}

// settle records t's result and releases what its reads held (the lease,
// if any, pins the blocks now).
func (s *Set) settle(t *Ticket, res abi.QueryResult, l *lease.Lease) {
	s.unhold(t)
	s.leaveQueue(t)
	t.res, t.lease = res, l
	if tc := t.Book.Tenant; tc != nil {
		w := uint64(max(s.now().Sub(t.since), 0))
		tc.Answered++
		tc.WaitNanos += w
		if t.pended {
			tc.Queued++
			tc.QueueNanos += w
		}
		tc.HitBlocks += uint64(res.Hits)
		if res.Status == abi.StatusUnadmitted {
			tc.Unadmitted++
		}
	}
	if t.Flags&abi.QueryPrepare != 0 && res.Status != abi.StatusUnadmitted {
		t.State = Ready
	} else {
		t.State = Done
	}
}

// wait leaves t pending with hits blocks found so far (Poll answers Loading).
func (t *Ticket) wait(hits int) {
	t.pended = true
	t.res = abi.QueryResult{Status: abi.StatusLoading, Hits: uint32(hits)}
}

func (s *Set) unhold(t *Ticket) {
	for _, blk := range t.holds {
		s.idx.Unpin(blk)
	}
	clear(t.holds) // a stale block pointer would keep its slab alive (index.Index.newBlock)
	t.holds = t.holds[:0]
}

func (s *Set) leaveQueue(t *Ticket) {
	if t.queued {
		t.queued = false
		s.leases.Dequeue(t)
	}
}

// release undoes what t holds: an undelivered lease, read pins, a place in
// the budget queue.
func (s *Set) release(t *Ticket) {
	if t.lease != nil {
		s.leases.End(t.lease)
		t.lease = nil
	}
	s.unhold(t)
	s.leaveQueue(t)
}

// AdmitWaiting retries tickets waiting for byte budget, oldest first; the
// first that still does not fit stops the round (no overtaking). Call it
// whenever reserved bytes were freed.
func (s *Set) AdmitWaiting() {
	for {
		t, ok := s.leases.Head()
		if !ok {
			return
		}
		s.resolve(t)
		if t.queued {
			return // still short of budget: nobody behind it goes first
		}
		if t.State != Pending { // else it left the queue to read SSD blocks
			s.host.Signal(t.Book)
		}
	}
}

// Resume resolves t again after the Host's Reservation hold let it go
// (failpoint builds), unless it was revoked meanwhile; a settled t wakes
// its client.
func (s *Set) Resume(t *Ticket) {
	t.held = false
	if !t.Live() || t.State != Pending {
		return
	}
	t.passed = true
	s.resolve(t)
	t.passed = false
	if t.State != Pending {
		s.host.Signal(t.Book)
	}
	s.AdmitWaiting()
}

// chain is q's whole chain as a lookup of b's session.
func chain(b *Book, q *abi.QueryDesc) tier.Chain {
	return tier.Chain{NS: q.NS, Hashes: q.Hashes, First: 0, End: q.Len(), Domain: b.Domain}
}
