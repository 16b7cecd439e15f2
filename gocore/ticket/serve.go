package ticket

import (
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/tier"
)

// Set is the Manager's tickets: the per-Manager counts and the operations
// of the package doc. Dispatcher goroutine only, but for Stats.
type Set struct {
	host     Host
	leases   *lease.Book[*Ticket]
	look     *tier.Lookup // the read path
	idx      *index.Index // look.Index(): where held blocks are pinned
	epoch    uint64
	expiry   time.Duration
	now      func() time.Time
	live     int    // live tickets of every session
	draining int    // revoked tickets whose reads still run
	bytes    uint64 // hash bytes stored by live tickets (MaxTicketBytes)
	c        counters
}

// NewSet returns an empty set answering with epoch; tickets look up
// through look, lease through leases, and expire expiry after
// their latest submission, by the clock now.
func NewSet(h Host, look *tier.Lookup, leases *lease.Book[*Ticket], epoch uint64, expiry time.Duration, now func() time.Time) *Set {
	return &Set{host: h, look: look, idx: look.Index(), leases: leases, epoch: epoch, expiry: expiry, now: now}
}

// Permits is the number of operation permits tickets hold in all.
func (s *Set) Permits() int { return s.live + s.draining }

// Draining is the number of revoked tickets whose SSD reads still run.
func (s *Set) Draining() int { return s.draining }

// Stats returns the counters.
func (s *Set) Stats() Stats {
	return Stats{Live: s.c.live.Load(), Expired: s.c.expired.Load(), Discoveries: s.c.discoveries.Load(),
		Unadmitted: s.c.unadmitted.Load(), Queries: s.c.queries.Load(), QueryHits: s.c.queryHits.Load()}
}

func (s *Set) unadmitted(m *abi.Message) abi.Message {
	s.c.unadmitted.Add(1)
	return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0)
}

// Submit serves a QueryBundle with a ticket (q.OpID ≠ 0) of b.
func (s *Set) Submit(b *Book, m *abi.Message, q *abi.QueryDesc) (abi.Message, *abi.DescError) {
	if t := b.live[q.OpID]; t != nil {
		if s.expireIfDue(t) {
			return m.Response(s.epoch, abi.StatusTimeout, 0, 0), nil
		}
		return s.revise(t, m, q)
	}
	if q.OpID <= b.maxOpID {
		if b.expired.Has(q.OpID) {
			return m.Response(s.epoch, abi.StatusTimeout, 0, 0), nil
		}
		return abi.Message{}, abi.Invalid(abi.FieldOpID, 0, "%d is retired (ids of this session must grow; the highest so far is %d)", q.OpID, b.maxOpID)
	}
	b.maxOpID = q.OpID
	if !s.host.AdmitOp(b) {
		b.CountUnadmitted()
		return s.unadmitted(m), nil
	}
	if q.Flags&abi.QueryRecovery == 0 && q.Flags&abi.QueryWarmup == 0 {
		s.look.Count(q.NS, q.Hash(q.Len()-1))
	}
	switch {
	case q.Flags&abi.QueryDiscover != 0:
		return s.discover(b, m, q), nil
	case q.Flags&abi.QueryWarmup != 0:
		return s.warmup(b, m, q), nil
	}
	if s.bytes+uint64(len(q.Hashes)) > MaxTicketBytes {
		b.CountUnadmitted()
		return s.unadmitted(m), nil
	}
	// The request is copied only now that its permit is held.
	t := &Ticket{ID: q.OpID, Book: b, deadline: s.now().Add(s.expiry)}
	s.set(t, q)
	b.live[t.ID] = t
	b.CountOps(1)
	s.live++
	s.c.live.Store(uint64(s.live))
	s.host.ArmExpiry(t.deadline)
	s.resolve(t)
	return s.answer(t, m), nil
}

// revise serves a resubmission of live ticket t: the same revision is a
// poll; a newer one replaces the hashes (and recovery range) and the wait
// policy (spec: "A newer revision can replace hashes or wait policy"), and
// whatever the older one held (an undelivered lease, pins, a budget wait)
// goes.
func (s *Set) revise(t *Ticket, m *abi.Message, q *abi.QueryDesc) (abi.Message, *abi.DescError) {
	switch {
	case q.Revision < t.Rev:
		return abi.Message{}, abi.Invalid(abi.FieldRevision, 0, "%d is older than live revision %d of ticket %d", q.Revision, t.Rev, t.ID)
	case q.Revision == t.Rev:
		if !t.same(q) {
			return abi.Message{}, abi.Invalid(abi.FieldRevision, 0, "%d of ticket %d resent with a changed request; a change needs a higher revision", q.Revision, t.ID)
		}
		return s.answer(t, m), nil
	case q.RequestID != t.ReqID || q.Group != t.Group:
		return abi.Message{}, abi.Invalid(abi.FieldRequest, 0, "revision %d changes request %d group %d of ticket %d (request %d group %d)", q.Revision, q.RequestID, q.Group, t.ID, t.ReqID, t.Group)
	case q.Flags&^abi.QueryWaitFullPref != t.Flags&^abi.QueryWaitFullPref:
		return abi.Message{}, abi.Invalid(abi.FieldDescFlags, 0, "revision %d changes flags %#x of ticket %d to %#x: a revision replaces the hashes and wait_for_full_prefix only", q.Revision, t.Flags, t.ID, q.Flags)
	case q.NS != t.NS:
		return abi.Message{}, abi.Invalid(abi.FieldNamespace, 0, "revision %d changes the namespace of ticket %d: a revision replaces the hashes and wait_for_full_prefix only", q.Revision, t.ID)
	}
	s.drop(t)
	s.set(t, q)
	t.deadline = s.now().Add(s.expiry)
	t.reloads = 0
	s.resolve(t)
	s.AdmitWaiting() // what the older revision reserved is free now
	return s.answer(t, m), nil
}

// set copies q's request into t (one allocation when the chain grows).
func (s *Set) set(t *Ticket, q *abi.QueryDesc) {
	t.Rev, t.Flags, t.ReqID, t.Group, t.NS = q.Revision, q.Flags, q.RequestID, q.Group, q.NS
	t.RecFirst, t.RecCount = q.RecoveryFirst, q.RecoveryCount
	s.bytes -= uint64(len(t.hashes))
	t.hashes = append(t.hashes[:0], q.Hashes...)
	s.bytes += uint64(len(t.hashes))
	t.State = Pending
	t.pended = false
	if b := t.Book; b != nil && b.Tenant != nil {
		t.since = s.now()
		b.Tenant.Queries++
	}
}

// answer builds the response to a Submit or Poll of t. A done result is
// delivered (written to the descriptor, t retired); a ready preparation
// answers Candidates without being consumed; pending answers Loading.
func (s *Set) answer(t *Ticket, m *abi.Message) abi.Message {
	switch t.State {
	case Done:
		return s.deliver(t, m)
	case Ready:
		r := t.res
		r.Status, r.LeaseID, r.LeaseBytes = abi.StatusCandidates, 0, 0
		t.Book.Sess.PutResult(m, &r)
		return m.Response(s.epoch, abi.StatusCandidates, uint64(r.Hits), 0)
	default:
		return m.Response(s.epoch, abi.StatusLoading, uint64(t.res.Hits), 0)
	}
}

// deliver answers t's terminal result and retires t; the lease (if any)
// now belongs to the client.
func (s *Set) deliver(t *Ticket, m *abi.Message) abi.Message {
	r := t.res
	r.OpID, r.Revision = t.ID, t.Rev
	t.lease = nil // delivered: the client releases it
	s.retire(t)
	if r.Status == abi.StatusOK || r.Status == abi.StatusMiss {
		s.c.queries.Add(1)
		s.c.queryHits.Add(uint64(r.Hits))
		s.host.Delivered(t.Book, t.NS, r.Hits)
	}
	if r.Status == abi.StatusUnadmitted {
		return s.unadmitted(m)
	}
	t.Book.Sess.PutResult(m, &r)
	return m.Response(s.epoch, r.Status, uint64(r.Hits), r.LeaseID)
}

// drop undoes what t holds and clears its result.
func (s *Set) drop(t *Ticket) {
	s.release(t)
	t.res = abi.QueryResult{}
}

// retire removes a live ticket whose result was delivered.
func (s *Set) retire(t *Ticket) {
	delete(t.Book.live, t.ID)
	t.Book.CountOps(-1)
	s.live--
	s.c.live.Store(uint64(s.live))
	s.bytes -= uint64(len(t.hashes))
	t.hashes = nil
}

// revoke ends a live ticket without delivering it (Cancel, expiry,
// disconnect): its undelivered lease and pins go now; its SSD reads drain
// while it keeps its permit (Draining), and their completion discards it.
func (s *Set) revoke(t *Ticket, expired bool) {
	s.drop(t)
	s.retire(t)
	if expired {
		t.Book.expired.Add(t.ID)
	}
	if t.reads > 0 {
		t.State = Draining
		t.Book.draining++
		t.Book.CountOps(1)
		s.draining++
	}
}

// readDone accounts one finished SSD read of t; blk, when non-nil, is the
// sealed block, held for t while t is pending.
func (s *Set) readDone(t *Ticket, blk *index.Block) {
	t.reads--
	if t.State == Draining {
		if t.reads == 0 {
			t.Book.draining--
			t.Book.CountOps(-1)
			s.draining--
			s.host.Drained(t.Book)
		}
		return
	}
	if blk != nil && t.State == Pending {
		s.idx.Pin(blk)
		t.holds = append(t.holds, blk)
	}
}

// Poll serves Poll (arg0 op id, arg1 revision) of b.
func (s *Set) Poll(b *Book, m *abi.Message) (abi.Message, *abi.DescError) {
	t, resp, derr := s.lookup(b, m, "poll")
	if t == nil {
		return resp, derr
	}
	return s.answer(t, m), nil
}

// Claim serves Claim: only the exact live revision of a ready preparation
// is consumed; every other case answers Unadmitted (the client then submits
// a fresh ordinary query).
func (s *Set) Claim(b *Book, m *abi.Message) (abi.Message, *abi.DescError) {
	if _, derr := abi.DecodeTicketRef(m); derr != nil {
		return abi.Message{}, derr
	}
	t := b.live[m.Arg0]
	if t == nil || s.expireIfDue(t) || t.Flags&abi.QueryPrepare == 0 || uint64(t.Rev) != m.Arg1 {
		return s.unadmitted(m), nil
	}
	if t.State == Pending {
		return m.Response(s.epoch, abi.StatusLoading, uint64(t.res.Hits), 0), nil
	}
	// Ready, or settled Unadmitted (it could not be leased): delivered.
	return s.deliver(t, m), nil
}

// Cancel serves CancelQuery.
func (s *Set) Cancel(b *Book, m *abi.Message) (abi.Message, *abi.DescError) {
	t, resp, derr := s.lookup(b, m, "cancel")
	if t == nil {
		return resp, derr
	}
	s.revoke(t, false)
	s.AdmitWaiting()
	return m.Response(s.epoch, abi.StatusOK, 1, 0), nil
}

// lookup opens the ticket a Poll or Cancel names: it checks the reference,
// and finds the live ticket (arg0, arg1) of m, or the answer for an
// expired, retired or unknown id, or a wrong revision.
func (s *Set) lookup(b *Book, m *abi.Message, what string) (*Ticket, abi.Message, *abi.DescError) {
	if _, derr := abi.DecodeTicketRef(m); derr != nil {
		return nil, abi.Message{}, derr
	}
	id, rev := m.Arg0, m.Arg1
	t := b.live[id]
	if t != nil && s.expireIfDue(t) {
		t = nil
	}
	if t == nil {
		switch {
		case b.expired.Has(id):
			return nil, m.Response(s.epoch, abi.StatusTimeout, 0, 0), nil
		case id == 0 || id > b.maxOpID:
			return nil, abi.Message{}, abi.Invalid(abi.FieldOpID, 0, "%d: no ticket of this session has it (a %s never submits work)", id, what)
		default:
			return nil, abi.Message{}, abi.Invalid(abi.FieldOpID, 0, "%d is retired (its result was delivered or it was cancelled)", id)
		}
	}
	if rev != uint64(t.Rev) {
		return nil, abi.Message{}, abi.Invalid(abi.FieldRevision, 0, "%d, ticket %d is at revision %d: a %s names the live revision exactly", rev, id, t.Rev, what)
	}
	return t, abi.Message{}, nil
}

// discover answers Candidates: how many leading blocks of the chain this
// Manager holds (RAM, then SSD), with no lease and no bytes reserved; the
// operation's permit is released as it answers.
func (s *Set) discover(b *Book, m *abi.Message, q *abi.QueryDesc) abi.Message {
	ram, avail := s.look.Extent(chain(b, q))
	s.c.discoveries.Add(1)
	r := abi.QueryResult{Status: abi.StatusCandidates, Hits: uint32(avail), RAMHits: uint32(ram), OpID: q.OpID, Revision: q.Revision}
	b.Sess.PutResult(m, &r)
	return m.Response(s.epoch, abi.StatusCandidates, uint64(avail), 0)
}

// warmup prefetches the chain's SSD run into RAM without a lease, within
// the warmup budget (skipped, hit count 0, beyond it), and is retired as it
// answers: Ok with arg0 = blocks being read.
func (s *Set) warmup(b *Book, m *abi.Message, q *abi.QueryDesc) abi.Message {
	ram, warming := s.look.Warm(chain(b, q))
	r := abi.QueryResult{Status: abi.StatusOK, Hits: uint32(warming), RAMHits: uint32(ram), OpID: q.OpID, Revision: q.Revision}
	b.Sess.PutResult(m, &r)
	return m.Response(s.epoch, abi.StatusOK, uint64(warming), 0)
}

// expireIfDue revokes t if its deadline passed; true when it did.
func (s *Set) expireIfDue(t *Ticket) bool {
	if s.now().Before(t.deadline) {
		return false
	}
	s.revoke(t, true)
	s.c.expired.Add(1)
	s.AdmitWaiting() // what it reserved or queued for is free for the waiters now
	return true
}

// Sweep expires b's due tickets and arms the sweep for the others.
func (s *Set) Sweep(b *Book) {
	for _, t := range b.live {
		if !s.expireIfDue(t) {
			s.host.ArmExpiry(t.deadline)
		}
	}
}

// ResolvePending resolves again every pending ticket of b that neither
// waits for budget nor for its own reads (a read may complete a chain
// another session's ticket waits for); resolved ones wake their client.
func (s *Set) ResolvePending(b *Book) {
	for _, t := range b.live {
		if t.State == Pending && !t.queued && t.reads == 0 {
			s.resolve(t)
			if t.State != Pending {
				s.host.Signal(b)
			}
		}
	}
}

// RevokeAll revokes every ticket of a closing session.
func (s *Set) RevokeAll(b *Book) {
	for _, t := range b.live {
		s.revoke(t, false)
	}
}

// Live reports whether t is still b's live ticket, not revoked or retired.
func (t *Ticket) Live() bool { return t.Book.live[t.ID] == t }
