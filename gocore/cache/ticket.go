package cache

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
)

// Query tickets (abi.h "Query tickets"; DESIGN.md §6 rules 1, 5, 6; spec
// "Channel ABI 5"). A ticket is a QueryBundle with op_id ≠ 0. Its life:
//
//	submit ─► resolve ─┬─► terminal answer delivered ─► retired
//	                   ├─► pending (SSD reads, byte budget) ─► resolved ─► delivered on Poll
//	                   └─► ready (PREPARE) ─► delivered on Claim
//	live ─► Cancel / expiry / disconnect ─► revoked (draining while its SSD reads finish)
//
// Every live or draining ticket holds one operation permit (bounds per
// session and per Manager). Op ids only grow within a session, so "retired"
// needs no memory: an id at or below the session's highest that is neither
// live nor tombstoned is retired. Expired ids are remembered in a bounded
// per-session tombstone ring so a late Poll answers Timeout.

// Ticket limits and defaults.
const (
	// DefaultOpExpiry is how long a ticket or an unpolled restore result
	// lives after its latest submission (DESIGN.md §6 rule 5).
	DefaultOpExpiry = 60 * time.Second
	// MaxTombstones bounds the expired ids a session remembers (tickets and
	// restores each); older ones then answer as retired (Invalid op_id).
	MaxTombstones = 256
	// MaxTicketBytes bounds the hash chains all live tickets store (a
	// ticket keeps a private copy of its request); beyond it a new ticket
	// answers Unadmitted. With the default bounds (1024 tickets, 64 KiB
	// descriptor areas) it is never reached.
	MaxTicketBytes = 256 << 20
	// maxReloads bounds how often one ticket restarts SSD reads whose blocks
	// were evicted again before it could lease them.
	maxReloads = 4
)

type tkState uint8

const (
	tkPending  tkState = iota + 1 // SSD reads of its chain in flight, or waiting for byte budget
	tkDone                        // resolved after its submission; delivered by the next Poll
	tkReady                       // PREPARE: resolved, held until Claim
	tkDraining                    // revoked; its SSD reads still run and it keeps its permit
)

// ticket is one live query operation of a session.
type ticket struct {
	id        uint64
	rev       uint32
	flags     uint16
	reqID     uint64
	group     uint64
	ns        [16]byte
	hashes    []byte // private copy of the chain (16 bytes per hash), taken once per revision
	recFirst  uint32
	recCount  uint32
	st        *sessState
	state     tkState
	deadline  time.Time
	reads     int            // SSD reads in flight this ticket started
	holds     []*index.Block // blocks its reads brought in, pinned until it leases or is revoked
	reloads   int
	inBudgetQ bool
	held      bool            // held at the Reservation point: resolve waits for the continuation (failpoint builds)
	passed    bool            // resolving again after that hold: it passes the point
	expired   bool            // revoked by expiry (a later Poll answers Timeout)
	res       abi.QueryResult // tkDone/tkReady: the answer to deliver
	lease     *lease.Lease    // tkDone/tkReady with hits: the undelivered lease
}

func (t *ticket) n() int { return len(t.hashes) / abi.HashSize }

func (t *ticket) hash(i int) (h abi.BlockHash) {
	copy(h[:], t.hashes[i*abi.HashSize:])
	return h
}

// tombs is a bounded set of expired ids (a ring plus a set).
type tombs struct {
	ring []uint64
	next int
	set  map[uint64]struct{}
}

func (t *tombs) add(id uint64) {
	if t.set == nil {
		t.set = make(map[uint64]struct{})
	}
	if len(t.ring) < MaxTombstones {
		t.ring = append(t.ring, id)
	} else {
		delete(t.set, t.ring[t.next])
		t.ring[t.next] = id
		t.next = (t.next + 1) % MaxTombstones
	}
	t.set[id] = struct{}{}
}

func (t *tombs) has(id uint64) bool { _, ok := t.set[id]; return ok }

// opsOf is the number of operation permits st holds (live and draining
// tickets, restores in flight or awaiting RestorePoll).
func (st *sessState) opsOf() int { return len(st.tickets) + st.draining + len(st.restores) }

// admitOp reports whether one more operation fits the bounds.
func (s *Service) admitOp(st *sessState) bool {
	return st.opsOf() < s.maxOpsSession && s.opsAll() < s.maxOps
}

// opsAll counts every operation permit held across sessions.
func (s *Service) opsAll() int { return s.tickets + s.drainingAll + s.restoresAll }

// submit serves a QueryBundle with a ticket (q.OpID ≠ 0).
func (s *Service) submit(st *sessState, m *abi.Message, q *abi.QueryDesc) (abi.Message, *abi.DescError) {
	if failpoint.Enabled && !s.readmit && s.holdAdmission(st, m) {
		s.deferReply = true
		return abi.Message{}, nil
	}
	if tk := st.tickets[q.OpID]; tk != nil {
		if s.expireIfDue(tk) {
			return m.Response(s.epoch, abi.StatusTimeout, 0, 0), nil
		}
		switch {
		case q.Revision < tk.rev:
			return abi.Message{}, invalid(abi.FieldRevision, 0, "%d is older than live revision %d of ticket %d", q.Revision, tk.rev, tk.id)
		case q.Revision == tk.rev:
			if !tk.same(q) {
				return abi.Message{}, invalid(abi.FieldRevision, 0, "%d of ticket %d resent with a changed request; a change needs a higher revision", q.Revision, tk.id)
			}
			return s.answer(tk, m), nil
		case q.RequestID != tk.reqID || q.Group != tk.group:
			return abi.Message{}, invalid(abi.FieldRequest, 0, "revision %d changes request %d group %d of ticket %d (request %d group %d)", q.Revision, q.RequestID, q.Group, tk.id, tk.reqID, tk.group)
		case q.Flags&^abi.QueryWaitFullPref != tk.flags&^abi.QueryWaitFullPref:
			return abi.Message{}, invalid(abi.FieldDescFlags, 0, "revision %d changes flags %#x of ticket %d to %#x: a revision replaces the hashes and wait_for_full_prefix only", q.Revision, tk.flags, tk.id, q.Flags)
		case q.NS != tk.ns:
			return abi.Message{}, invalid(abi.FieldNamespace, 0, "revision %d changes the namespace of ticket %d: a revision replaces the hashes and wait_for_full_prefix only", q.Revision, tk.id)
		}
		// A newer revision replaces the hashes (and recovery range) and the
		// wait policy (spec: "A newer revision can replace hashes or wait
		// policy"); whatever the older one held (an undelivered lease, pins,
		// a budget wait) goes.
		s.dropResult(tk)
		s.setTicket(tk, q)
		tk.deadline = s.now().Add(s.expiry)
		tk.reloads = 0
		s.resolve(tk)
		s.admitWaiting() // what the older revision reserved is free now
		return s.answer(tk, m), nil
	}
	if q.OpID <= st.maxOpID {
		if st.expiredTickets.has(q.OpID) {
			return m.Response(s.epoch, abi.StatusTimeout, 0, 0), nil
		}
		return abi.Message{}, invalid(abi.FieldOpID, 0, "%d is retired (ids of this session must grow; the highest so far is %d)", q.OpID, st.maxOpID)
	}
	st.maxOpID = q.OpID
	if !s.admitOp(st) {
		s.stats.unadmitted.Add(1)
		return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0), nil
	}
	if q.Flags&abi.QueryRecovery == 0 && q.Flags&abi.QueryWarmup == 0 {
		s.countLookup(q.NS, q.Hash(q.Len()-1))
	}
	switch {
	case q.Flags&abi.QueryDiscover != 0:
		return s.discover(st, m, q), nil
	case q.Flags&abi.QueryWarmup != 0:
		return s.warmup(st, m, q), nil
	}
	if s.ticketBytes+uint64(len(q.Hashes)) > MaxTicketBytes {
		s.stats.unadmitted.Add(1)
		return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0), nil
	}
	// The request is copied only now that its permit is held.
	tk := &ticket{id: q.OpID, st: st, deadline: s.now().Add(s.expiry)}
	s.setTicket(tk, q)
	st.tickets[tk.id] = tk
	s.tickets++
	s.armExpiry(tk.deadline)
	s.resolve(tk)
	return s.answer(tk, m), nil
}

// set copies q's request into t (one allocation when the chain grows).
func (s *Service) setTicket(t *ticket, q *abi.QueryDesc) {
	t.rev, t.flags, t.reqID, t.group, t.ns = q.Revision, q.Flags, q.RequestID, q.Group, q.NS
	t.recFirst, t.recCount = q.RecoveryFirst, q.RecoveryCount
	s.ticketBytes -= uint64(len(t.hashes))
	t.hashes = append(t.hashes[:0], q.Hashes...)
	s.ticketBytes += uint64(len(t.hashes))
	t.state = tkPending
}

// same reports whether q repeats t's live revision exactly.
func (t *ticket) same(q *abi.QueryDesc) bool {
	return q.Flags == t.flags && q.NS == t.ns && q.RequestID == t.reqID && q.Group == t.group &&
		q.RecoveryFirst == t.recFirst && q.RecoveryCount == t.recCount && bytes.Equal(q.Hashes, t.hashes)
}

// resolve tries to reach t's result: the resident prefix (or the recovery
// range), SSD reads awaited when the flags ask, the byte budget, then the
// lease. It leaves t pending, done or ready.
func (s *Service) resolve(t *ticket) {
	if t.state != tkPending || t.held {
		return
	}
	st := t.st
	n := t.n()
	first, end := 0, n
	rec := t.flags&abi.QueryRecovery != 0
	if rec {
		first, end = int(t.recFirst), int(t.recFirst+t.recCount)
	}
	hits := s.idx.Prefix(t.ns, end-first, func(i int) abi.BlockHash { return t.hash(first + i) }, s.hits[:0])
	s.hits = hits[:0]
	miss := first + len(hits)
	ramHits := len(hits)
	wait := rec || t.flags&(abi.QueryWaitFullPref|abi.QueryPrepare) != 0
	if miss < end && s.ssd != nil && (!wait || t.reloads < maxReloads) {
		// Reads make room in RAM: the prefix found above is pinned meanwhile,
		// so the eviction cannot take a block this ticket is about to lease
		// (found by a break-it review: an unpinned prefix was evicted by
		// warm and then leased, and restored another block's bytes).
		for _, blk := range hits {
			s.idx.Pin(blk)
		}
		loading := false
		if wait {
			loading = s.prefetch(st, t, t.ns, t.hash, miss, end)
		} else {
			// The caller takes the RAM prefix now; the rest warms for its
			// next lookup, within the warmup budget.
			s.warm(t.ns, t.hash, miss, end)
		}
		for _, blk := range hits {
			s.idx.Unpin(blk)
		}
		if loading {
			t.reloads++
			// Waiting for reads now, not for budget: completeSSD resolves
			// it again (a queued ticket would be skipped there and wedge
			// the queue; found by the break-it review).
			s.leaveBudgetQ(t)
			t.res = abi.QueryResult{Status: abi.StatusLoading, Hits: uint32(ramHits)}
			return
		}
	}
	res := abi.QueryResult{OpID: t.id, Revision: t.rev, RAMHits: uint32(ramHits), First: uint32(first)}
	if len(hits) == 0 || (rec && miss < end) {
		res.Status = abi.StatusMiss
		res.Hits, res.First = 0, 0
		s.settle(t, res, nil)
		return
	}
	var bytes uint64
	for _, blk := range hits {
		bytes += blk.Bytes
	}
	if failpoint.Enabled && !t.passed && s.holdReservation(t) {
		t.res = abi.QueryResult{Status: abi.StatusLoading, Hits: uint32(ramHits)}
		return
	}
	if st.leases >= MaxLeasesPerSession || st.leased+len(hits) > s.maxLeasedSession || s.leased+len(hits) > s.maxLeased ||
		bytes > s.leaseBudget {
		// Limits it cannot wait out (a lease larger than the whole budget
		// would wait forever and hold every later ticket behind it).
		res.Status, res.Hits, res.First, res.RAMHits = abi.StatusUnadmitted, 0, 0, 0
		s.settle(t, res, nil)
		return
	}
	if s.reservedBytes()+bytes > s.leaseBudget || (len(s.budgetQ) > 0 && !t.inBudgetQ) {
		// Wait for the byte budget before touching any page, behind the
		// tickets already waiting: the stored request is borrowed again
		// when budget frees (admitWaiting), never cloned.
		if !t.inBudgetQ {
			t.inBudgetQ = true
			s.budgetQ = append(s.budgetQ, t)
		}
		t.res = abi.QueryResult{Status: abi.StatusLoading, Hits: uint32(ramHits)}
		return
	}
	blocks := slices.Clone(hits)
	l := s.addLease(st, blocks)
	res.Status, res.Hits, res.LeaseID, res.LeaseBytes, res.BlockBytes = abi.StatusOK, uint32(len(blocks)), l.ID, l.Bytes, blocks[0].Bytes
	s.settle(t, res, l)
}

// settle records t's result and releases what its reads held (the lease,
// if any, pins the blocks now).
func (s *Service) settle(t *ticket, res abi.QueryResult, l *lease.Lease) {
	s.unholdTicket(t)
	s.leaveBudgetQ(t)
	t.res, t.lease = res, l
	if t.flags&abi.QueryPrepare != 0 && res.Status != abi.StatusUnadmitted {
		t.state = tkReady
	} else {
		t.state = tkDone
	}
}

// answer builds the response to a Submit or Poll of t. A done result is
// delivered (written to the descriptor, t retired); a ready preparation
// answers Candidates without being consumed; pending answers Loading.
func (s *Service) answer(t *ticket, m *abi.Message) abi.Message {
	switch t.state {
	case tkDone:
		return s.deliver(t, m)
	case tkReady:
		r := t.res
		r.Status, r.LeaseID, r.LeaseBytes = abi.StatusCandidates, 0, 0
		s.putResult(t.st, m, &r)
		return m.Response(s.epoch, abi.StatusCandidates, uint64(r.Hits), 0)
	default:
		return m.Response(s.epoch, abi.StatusLoading, uint64(t.res.Hits), 0)
	}
}

// deliver answers t's terminal result and retires t; the lease (if any)
// now belongs to the client.
func (s *Service) deliver(t *ticket, m *abi.Message) abi.Message {
	r := t.res
	r.OpID, r.Revision = t.id, t.rev
	t.lease = nil // delivered: the client releases it
	s.retire(t)
	if r.Status == abi.StatusOK || r.Status == abi.StatusMiss {
		s.stats.queries.Add(1)
		s.stats.queryHits.Add(uint64(r.Hits))
	}
	if r.Status == abi.StatusUnadmitted {
		s.stats.unadmitted.Add(1)
		return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0)
	}
	s.putResult(t.st, m, &r)
	return m.Response(s.epoch, r.Status, uint64(r.Hits), r.LeaseID)
}

// putResult writes r where m's descriptor is (QueryBundle: over the query;
// Poll/Claim: the optional 64-byte result area).
func (s *Service) putResult(st *sessState, m *abi.Message, r *abi.QueryResult) {
	if m.DescLength < abi.QueryResultSize {
		return
	}
	abi.PutQueryResult(st.sess.Slot()[m.DescOffset:], r)
}

// dropResult undoes what t holds: an undelivered lease, read pins, a place
// in the budget queue.
func (s *Service) dropResult(t *ticket) {
	if t.lease != nil {
		s.endLease(t.st, t.lease)
		t.lease = nil
	}
	s.unholdTicket(t)
	s.leaveBudgetQ(t)
	t.res = abi.QueryResult{}
}

func (s *Service) unholdTicket(t *ticket) {
	for _, blk := range t.holds {
		s.idx.Unpin(blk)
	}
	t.holds = t.holds[:0]
}

func (s *Service) leaveBudgetQ(t *ticket) {
	if t.inBudgetQ {
		t.inBudgetQ = false
		if i := slices.Index(s.budgetQ, t); i >= 0 {
			s.budgetQ = slices.Delete(s.budgetQ, i, i+1)
		}
	}
}

// retire removes a live ticket whose result was delivered.
func (s *Service) retire(t *ticket) {
	delete(t.st.tickets, t.id)
	s.tickets--
	s.ticketBytes -= uint64(len(t.hashes))
	t.hashes = nil
}

// revoke ends a live ticket without delivering it (Cancel, expiry,
// disconnect): its undelivered lease and pins go now; its SSD reads drain
// while it keeps its permit (tkDraining), and their completion discards it.
func (s *Service) revoke(t *ticket, expired bool) {
	s.dropResult(t)
	s.retire(t)
	t.expired = expired
	if expired {
		t.st.expiredTickets.add(t.id)
	}
	if t.reads > 0 {
		t.state = tkDraining
		t.st.draining++
		s.drainingAll++
	}
}

// readDone accounts one finished SSD read of t (its block, when blk is
// non-nil and sealed, is held for t while t is pending).
func (s *Service) readDone(t *ticket, blk *index.Block) {
	t.reads--
	if t.state == tkDraining {
		if t.reads == 0 {
			t.st.draining--
			s.drainingAll--
			s.maybeFinish(t.st)
		}
		return
	}
	if blk != nil && t.state == tkPending {
		s.idx.Pin(blk)
		t.holds = append(t.holds, blk)
	}
}

// poll serves Poll (arg0 op id, arg1 revision).
func (s *Service) poll(st *sessState, m *abi.Message) (abi.Message, *abi.DescError) {
	if _, derr := abi.DecodeTicketRef(m); derr != nil {
		return abi.Message{}, derr
	}
	tk, resp, derr := s.lookupTicket(st, m, "poll")
	if tk == nil {
		return resp, derr
	}
	return s.answer(tk, m), nil
}

// claim serves Claim: only the exact live revision of a ready preparation
// is consumed; every other case answers Unadmitted (the client then submits
// a fresh ordinary query).
func (s *Service) claim(st *sessState, m *abi.Message) (abi.Message, *abi.DescError) {
	if _, derr := abi.DecodeTicketRef(m); derr != nil {
		return abi.Message{}, derr
	}
	tk := st.tickets[m.Arg0]
	if tk == nil || s.expireIfDue(tk) || tk.flags&abi.QueryPrepare == 0 || uint64(tk.rev) != m.Arg1 {
		s.stats.unadmitted.Add(1)
		return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0), nil
	}
	if tk.state == tkPending {
		return m.Response(s.epoch, abi.StatusLoading, uint64(tk.res.Hits), 0), nil
	}
	// Ready, or settled Unadmitted (it could not be leased): delivered.
	return s.deliver(tk, m), nil
}

// cancel serves CancelQuery.
func (s *Service) cancel(st *sessState, m *abi.Message) (abi.Message, *abi.DescError) {
	if _, derr := abi.DecodeTicketRef(m); derr != nil {
		return abi.Message{}, derr
	}
	tk, resp, derr := s.lookupTicket(st, m, "cancel")
	if tk == nil {
		return resp, derr
	}
	s.revoke(tk, false)
	s.admitWaiting()
	return m.Response(s.epoch, abi.StatusOK, 1, 0), nil
}

// lookupTicket finds the live ticket (arg0, arg1) of m, or the answer for
// an expired, retired or unknown id, or a wrong revision.
func (s *Service) lookupTicket(st *sessState, m *abi.Message, what string) (*ticket, abi.Message, *abi.DescError) {
	id, rev := m.Arg0, m.Arg1
	tk := st.tickets[id]
	if tk != nil && s.expireIfDue(tk) {
		tk = nil
	}
	if tk == nil {
		switch {
		case st.expiredTickets.has(id):
			return nil, m.Response(s.epoch, abi.StatusTimeout, 0, 0), nil
		case id == 0 || id > st.maxOpID:
			return nil, abi.Message{}, invalid(abi.FieldOpID, 0, "%d: no ticket of this session has it (a %s never submits work)", id, what)
		default:
			return nil, abi.Message{}, invalid(abi.FieldOpID, 0, "%d is retired (its result was delivered or it was cancelled)", id)
		}
	}
	if rev != uint64(tk.rev) {
		return nil, abi.Message{}, invalid(abi.FieldRevision, 0, "%d, ticket %d is at revision %d: a %s names the live revision exactly", rev, id, tk.rev, what)
	}
	return tk, abi.Message{}, nil
}

// ramPrefix is how many leading blocks of q's chain are sealed in RAM.
func (s *Service) ramPrefix(q *abi.QueryDesc) int {
	hits := s.idx.Prefix(q.NS, q.Len(), q.Hash, s.hits[:0])
	s.hits = hits[:0]
	return len(hits)
}

// discover answers Candidates: how many leading blocks of the chain this
// Manager holds (RAM, then SSD), with no lease and no bytes reserved; the
// operation's permit is released as it answers.
func (s *Service) discover(st *sessState, m *abi.Message, q *abi.QueryDesc) abi.Message {
	n := q.Len()
	ram := s.ramPrefix(q)
	avail := ram
	if s.ssd != nil {
		for avail < n {
			k := index.Key{NS: q.NS, Hash: q.Hash(avail)}
			if _, ok := s.ssd.loading[k]; !ok {
				if _, ok := s.ssd.store.Contains(ssdKey(k)); !ok {
					break
				}
			}
			avail++
		}
	}
	s.stats.discoveries.Add(1)
	r := abi.QueryResult{Status: abi.StatusCandidates, Hits: uint32(avail), RAMHits: uint32(ram), OpID: q.OpID, Revision: q.Revision}
	s.putResult(st, m, &r)
	return m.Response(s.epoch, abi.StatusCandidates, uint64(avail), 0)
}

// warmup prefetches the chain's SSD run into RAM without a lease, within
// the warmup budget (skipped, hit count 0, beyond it), and is retired as it
// answers: Ok with arg0 = blocks being read.
func (s *Service) warmup(st *sessState, m *abi.Message, q *abi.QueryDesc) abi.Message {
	n := q.Len()
	ram := s.ramPrefix(q)
	warming := 0
	if s.ssd != nil && ram < n {
		warming = s.warm(q.NS, q.Hash, ram, n)
	}
	r := abi.QueryResult{Status: abi.StatusOK, Hits: uint32(warming), RAMHits: uint32(ram), OpID: q.OpID, Revision: q.Revision}
	s.putResult(st, m, &r)
	return m.Response(s.epoch, abi.StatusOK, uint64(warming), 0)
}

// expireIfDue revokes t if its deadline passed; true when it did.
func (s *Service) expireIfDue(t *ticket) bool {
	if s.now().Before(t.deadline) {
		return false
	}
	s.revoke(t, true)
	s.stats.expired.Add(1)
	s.admitWaiting() // what it reserved or queued for is free for the waiters now
	return true
}

// armExpiry makes sure the sweep runs by deadline d.
func (s *Service) armExpiry(d time.Time) {
	if s.nextSweep.IsZero() || d.Before(s.nextSweep) {
		s.nextSweep = d
	}
	s.tickWanted.Store(true)
}

// sweep expires due tickets and unpolled restore results of every session
// (called on each control event; the ticker rings one at least every
// second). Cheap when nothing is due.
func (s *Service) sweep() {
	now := s.now()
	if s.nextSweep.IsZero() || now.Before(s.nextSweep) {
		return
	}
	s.nextSweep = time.Time{}
	defer func() { s.tickWanted.Store(!s.nextSweep.IsZero() || len(s.heldComps) > 0) }()
	for _, st := range s.sessions {
		for _, tk := range st.tickets {
			if !s.expireIfDue(tk) {
				s.armExpiry(tk.deadline)
			}
		}
		for _, o := range st.restores {
			if !o.done || o.held {
				continue
			}
			if now.Before(o.deadline) {
				s.armExpiry(o.deadline)
				continue
			}
			s.expireRestore(st, o)
		}
	}
	s.admitWaiting()
}

// expireRestore drops a completed, unpolled restore result past its
// deadline and tombstones its id (RestorePoll then answers Timeout).
func (s *Service) expireRestore(st *sessState, o *op) {
	delete(st.restores, o.id)
	s.restoresAll--
	s.done--
	st.expiredRestores.add(o.id)
	s.stats.expired.Add(1)
}

// admitWaiting retries tickets waiting for byte budget, oldest first; the
// first that still does not fit stops the round (no overtaking).
func (s *Service) admitWaiting() {
	for len(s.budgetQ) > 0 {
		t := s.budgetQ[0]
		s.resolve(t)
		if t.inBudgetQ {
			return // still short of budget: nobody behind it goes first
		}
		if t.state != tkPending { // else it left the queue to read SSD blocks
			t.st.notify.signal()
		}
	}
}

// resolvePending re-evaluates every pending ticket after SSD reads finished
// (a read may complete a chain another session's ticket waits for).
func (s *Service) resolvePending() {
	for _, st := range s.sessions {
		for _, t := range st.tickets {
			if t.state == tkPending && !t.inBudgetQ && t.reads == 0 {
				s.resolve(t)
				if t.state != tkPending {
					st.notify.signal()
				}
			}
		}
	}
}

// revokeAll revokes every ticket of a closing session.
func (s *Service) revokeAll(st *sessState) {
	for _, t := range st.tickets {
		s.revoke(t, false)
	}
}

// holdAdmission holds the ticket request m of st at TicketAdmission (failpoint
// builds), before any check: nothing of it is applied and its reply waits.
// The continuation serves it then, unless st closed or sent a newer request
// meanwhile (Handle drops the held one: the client gave up waiting).
func (s *Service) holdAdmission(st *sessState, m *abi.Message) bool {
	req := *m // the event's message is the dispatcher's, reused for the next batch
	if !s.pause(failpoint.TicketAdmission, func(post func(slot uint32, msg abi.Message)) {
		if !s.live(st) || st.admitGen != req.Generation {
			return
		}
		st.admitGen = 0
		s.readmit = true
		resp, ok := s.Handle(st.sess, &req)
		s.readmit = false
		if ok {
			post(st.sess.Index, resp)
		}
	}) {
		return false
	}
	st.admitGen = m.Generation
	return true
}

// holdReservation holds t at Reservation (failpoint builds), before it takes
// its lease and bytes: t stays pending (Poll answers Loading) and resolve
// leaves it alone until the continuation resolves it, unless it was revoked
// or its session closed meanwhile.
func (s *Service) holdReservation(t *ticket) bool {
	if !s.pause(failpoint.Reservation, func(func(uint32, abi.Message)) {
		t.held = false
		st := t.st
		if !s.live(st) || st.tickets[t.id] != t || t.state != tkPending {
			return
		}
		t.passed = true
		s.resolve(t)
		t.passed = false
		if t.state != tkPending {
			st.notify.signal()
		}
		s.admitWaiting()
	}) {
		return false
	}
	t.held = true
	return true
}

// describe names a ticket for logs.
func (t *ticket) String() string {
	return fmt.Sprintf("ticket %d rev %d (slot %d)", t.id, t.rev, t.st.sess.Index)
}
