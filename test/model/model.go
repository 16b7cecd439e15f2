// Package model is the reference model of the Manager's operation state
// machine (abi.h "Query tickets"; docs/design.md §6 rules 1, 5, 6, 8) and the
// randomized driver that compares a real Manager against it.
//
// The model is deliberately plain: maps and slices, no concurrency, every
// rule written once in the order abi.h states it. Run feeds the same random
// sequence of operations to the model and to a Driver (the cache service in
// process, or a Manager binary through liborbitkv), compares every answer,
// and ends with the idle invariant. It covers the RAM tier (no SSD: answers
// then do not depend on I/O timing), byte budgets, bounds, expiry (the
// driver's fake clock), cancel, claim, revisions, disconnect and Manager
// restart.
package model

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// Kind is one operation.
type Kind uint8

// Operations a Req can carry.
const (
	Submit    Kind = iota + 1 // QueryBundle with a ticket
	Untracked                 // QueryBundle with op_id 0
	Poll
	Claim
	Cancel
	Release
)

func (k Kind) String() string {
	return [...]string{"?", "submit", "untracked", "poll", "claim", "cancel", "release"}[k]
}

// Req is one request as the driver sends it.
type Req struct {
	Kind     Kind
	OpID     uint64
	Rev      uint32
	Flags    uint16
	Chain    int // which chain (namespace-wide hash sequence)
	Len      int // hashes sent: chain[0:Len]
	ReqID    uint64
	Group    uint64
	RecFirst uint32
	RecCount uint32
	LeaseID  uint64
}

// Resp is the answer: status, arg0 (hits; the field for Invalid), arg1
// (lease id on Ok).
type Resp struct {
	Status abi.Status
	Arg0   uint64
	Arg1   uint64
}

// Driver is the system under test.
type Driver interface {
	// Open attaches a new session and returns its handle.
	Open() (int, error)
	// Close detaches a session (its socket closes: docs/design.md §5.1).
	Close(s int) error
	// Publish stores blocks chain[0:n) (all of them resident after).
	Publish(s int, chain, n int) error
	// Do sends one request and returns the answer.
	Do(s int, r Req) (Resp, error)
	// Expire moves the Manager's clock past the operation expiry and
	// returns once the Manager applied it (every ticket and unpolled result
	// expired).
	Expire() error
	// Restart kills the Manager and starts a new one (new epoch); every
	// session handle is gone. Drivers that cannot restart return false.
	Restart() (bool, error)
	// Idle returns an error unless the idle invariant holds (no sessions).
	Idle() error
	// InvalidField reports whether Do reports the Invalid field in Arg0.
	InvalidField() bool
}

// Params sizes a run.
type Params struct {
	Sessions      int    // sessions open at once
	Steps         int    // operations
	Chains        int    // distinct hash chains
	ChainLen      int    // blocks per chain (≤ the driver's pages)
	BlockBytes    uint64 // bytes of one block (the driver's page × layers)
	LeaseBudget   uint64 // bytes (the Manager's --lease-budget)
	MaxOpsSession int
	MaxOps        int
	Restarts      bool // the driver can restart
}

// Hash is block i of chain c (chains share no block).
func Hash(c, i int) abi.BlockHash {
	var h abi.BlockHash
	binary.LittleEndian.PutUint64(h[:], uint64(c+1)<<32|uint64(i+1))
	binary.LittleEndian.PutUint64(h[8:], 0x6f72626974)
	return h
}

type tkState uint8

const (
	pending tkState = iota + 1 // waiting for budget
	done                       // resolved asynchronously, delivered on poll
	ready                      // prepared, delivered on claim
)

type ticket struct {
	id                 uint64
	rev                uint32
	flags              uint16
	chain, n           int
	reqID, group       uint64
	recFirst, recCount uint32
	state              tkState
	res                Resp   // done/ready answer (Arg1: model lease key)
	lease              uint64 // undelivered lease (model key), 0 none
}

type session struct {
	maxOpID  uint64
	tickets  map[uint64]*ticket
	expired  map[uint64]bool
	leases   map[uint64]uint64 // Manager lease id → bytes (delivered)
	epochOld map[uint64]bool   // lease ids of an earlier Manager lifetime
}

// Model is the reference state machine.
type Model struct {
	p         Params
	published map[[2]int]bool // (chain, block) resident
	sess      map[int]*session
	reserved  uint64
	budgetQ   []*ticket
	owner     map[*ticket]int
	undeliv   map[uint64]uint64 // model key → bytes, undelivered leases
	delivered map[uint64]uint64 // model key → bytes, delivered but not yet bound to a lease id
	nextKey   uint64
}

// New returns an empty model.
func New(p Params) *Model {
	return &Model{p: p, published: map[[2]int]bool{}, sess: map[int]*session{}, owner: map[*ticket]int{},
		undeliv: map[uint64]uint64{}, delivered: map[uint64]uint64{}, nextKey: 1 << 62}
}

func (m *Model) open(s int) {
	m.sess[s] = &session{tickets: map[uint64]*ticket{}, expired: map[uint64]bool{}, leases: map[uint64]uint64{}, epochOld: map[uint64]bool{}}
}

func (m *Model) opsOf(s *session) int { return len(s.tickets) }

func (m *Model) opsAll() int {
	n := 0
	for _, s := range m.sess {
		n += len(s.tickets)
	}
	return n
}

// hits is the resident prefix of chain[0:n) (recovery: the range, all or 0).
func (m *Model) hits(t *ticket) (hits int, first int) {
	if t.flags&abi.QueryRecovery != 0 {
		for i := int(t.recFirst); i < int(t.recFirst+t.recCount); i++ {
			if !m.published[[2]int{t.chain, i}] {
				return 0, 0
			}
		}
		return int(t.recCount), int(t.recFirst)
	}
	for hits < t.n && m.published[[2]int{t.chain, hits}] {
		hits++
	}
	return hits, 0
}

// resolve mirrors cache.Service.resolve for a RAM-only Manager.
func (m *Model) resolve(t *ticket) {
	if t.state != pending {
		return
	}
	h, _ := m.hits(t)
	if h == 0 {
		m.settle(t, Resp{Status: abi.StatusMiss}, 0)
		return
	}
	bytes := uint64(h) * m.p.BlockBytes
	if bytes > m.p.LeaseBudget { // could never be admitted: refused, not queued
		m.settle(t, Resp{Status: abi.StatusUnadmitted}, 0)
		if t.flags&abi.QueryPrepare != 0 {
			t.state = done // an Unadmitted preparation is delivered like any terminal answer
		}
		return
	}
	inQ := slices.Contains(m.budgetQ, t)
	if m.reserved+bytes > m.p.LeaseBudget || (len(m.budgetQ) > 0 && !inQ) {
		if !inQ {
			m.budgetQ = append(m.budgetQ, t)
		}
		return
	}
	m.reserved += bytes
	key := m.nextKey
	m.nextKey++
	m.undeliv[key] = bytes
	m.settle(t, Resp{Status: abi.StatusOK, Arg0: uint64(h), Arg1: key}, key)
}

func (m *Model) settle(t *ticket, r Resp, key uint64) {
	m.leaveQ(t)
	t.res, t.lease = r, key
	if t.flags&abi.QueryPrepare != 0 {
		t.state = ready
	} else {
		t.state = done
	}
}

func (m *Model) leaveQ(t *ticket) {
	if i := slices.Index(m.budgetQ, t); i >= 0 {
		m.budgetQ = slices.Delete(m.budgetQ, i, i+1)
	}
}

func (m *Model) dropResult(t *ticket) {
	if t.lease != 0 {
		m.reserved -= m.undeliv[t.lease]
		delete(m.undeliv, t.lease)
		t.lease = 0
	}
	m.leaveQ(t)
	t.res = Resp{}
}

func (m *Model) admitWaiting() {
	for len(m.budgetQ) > 0 {
		t := m.budgetQ[0]
		m.resolve(t)
		if t.state == pending {
			return
		}
	}
}

// answer is the response to a submit or poll of live ticket t (s owns it).
func (m *Model) answer(s *session, t *ticket) Resp {
	switch t.state {
	case done:
		return m.deliver(s, t)
	case ready:
		return Resp{Status: abi.StatusCandidates, Arg0: t.res.Arg0}
	}
	return Resp{Status: abi.StatusLoading}
}

func (m *Model) deliver(s *session, t *ticket) Resp {
	r := t.res
	if t.lease != 0 {
		m.delivered[t.lease] = m.undeliv[t.lease] // the reservation stays, now on a delivered lease
		delete(m.undeliv, t.lease)
		t.lease = 0
	}
	delete(s.tickets, t.id)
	return r
}

func (m *Model) revoke(s *session, t *ticket, expired bool) {
	m.dropResult(t)
	delete(s.tickets, t.id)
	if expired {
		s.expired[t.id] = true
	}
}

func invalid(f abi.Field) Resp { return Resp{Status: abi.StatusInvalid, Arg0: uint64(f)} }

// Step applies r from session sid to the model and returns the expected
// answer. For an Ok with a lease, Arg1 is a model key; Bind maps it to the
// Manager's lease id once the driver answered.
func (m *Model) Step(sid int, r Req) Resp {
	s := m.sess[sid]
	switch r.Kind {
	case Untracked:
		t := &ticket{chain: r.Chain, n: r.Len}
		h, _ := m.hits(t)
		if h == 0 {
			return Resp{Status: abi.StatusMiss}
		}
		bytes := uint64(h) * m.p.BlockBytes
		if m.reserved+bytes > m.p.LeaseBudget || len(m.budgetQ) > 0 {
			return Resp{Status: abi.StatusUnadmitted}
		}
		m.reserved += bytes
		key := m.nextKey
		m.nextKey++
		m.delivered[key] = bytes
		return Resp{Status: abi.StatusOK, Arg0: uint64(h), Arg1: key}
	case Submit:
		return m.submit(s, r)
	case Poll, Cancel, Claim:
		// Malformed references are refused before any state is read
		// (abi.DecodeTicketRef).
		switch {
		case r.OpID == 0:
			return invalid(abi.FieldOpID)
		case r.Rev == 0:
			return invalid(abi.FieldRevision)
		}
	}
	switch r.Kind {
	case Poll, Cancel:
		t := s.tickets[r.OpID]
		if t == nil {
			switch {
			case s.expired[r.OpID]:
				return Resp{Status: abi.StatusTimeout}
			default:
				return invalid(abi.FieldOpID)
			}
		}
		if uint64(r.Rev) != uint64(t.rev) {
			return invalid(abi.FieldRevision)
		}
		if r.Kind == Cancel {
			m.revoke(s, t, false)
			m.admitWaiting()
			return Resp{Status: abi.StatusOK, Arg0: 1}
		}
		return m.answer(s, t)
	case Claim:
		t := s.tickets[r.OpID]
		if t == nil || t.flags&abi.QueryPrepare == 0 || t.rev != r.Rev {
			return Resp{Status: abi.StatusUnadmitted}
		}
		if t.state == pending {
			return Resp{Status: abi.StatusLoading}
		}
		return m.deliver(s, t) // ready, or settled Unadmitted
	case Release:
		if b, ok := s.leases[r.LeaseID]; ok {
			delete(s.leases, r.LeaseID)
			m.reserved -= b
			m.admitWaiting()
			return Resp{Status: abi.StatusOK}
		}
		return invalid(abi.FieldLeaseID)
	}
	panic("model: unknown request kind")
}

func (m *Model) submit(s *session, r Req) Resp {
	if t := s.tickets[r.OpID]; t != nil {
		switch {
		case r.Rev < t.rev:
			return invalid(abi.FieldRevision)
		case r.Rev == t.rev:
			if r.Flags != t.flags || r.Chain != t.chain || r.Len != t.n || r.ReqID != t.reqID || r.Group != t.group ||
				r.RecFirst != t.recFirst || r.RecCount != t.recCount {
				return invalid(abi.FieldRevision)
			}
			return m.answer(s, t)
		case r.ReqID != t.reqID || r.Group != t.group:
			return invalid(abi.FieldRequest)
		case r.Flags&^abi.QueryWaitFullPref != t.flags&^abi.QueryWaitFullPref:
			return invalid(abi.FieldDescFlags)
		}
		m.dropResult(t)
		t.rev, t.flags, t.chain, t.n, t.recFirst, t.recCount = r.Rev, r.Flags, r.Chain, r.Len, r.RecFirst, r.RecCount
		t.state = pending
		m.resolve(t)
		m.admitWaiting()
		return m.answer(s, t)
	}
	if r.OpID <= s.maxOpID {
		if s.expired[r.OpID] {
			return Resp{Status: abi.StatusTimeout}
		}
		return invalid(abi.FieldOpID)
	}
	s.maxOpID = r.OpID
	if m.opsOf(s) >= m.p.MaxOpsSession || m.opsAll() >= m.p.MaxOps {
		return Resp{Status: abi.StatusUnadmitted}
	}
	switch {
	case r.Flags&abi.QueryDiscover != 0:
		h, _ := m.hits(&ticket{chain: r.Chain, n: r.Len})
		return Resp{Status: abi.StatusCandidates, Arg0: uint64(h)}
	case r.Flags&abi.QueryWarmup != 0:
		return Resp{Status: abi.StatusOK} // no SSD tier: nothing to warm
	}
	t := &ticket{id: r.OpID, rev: r.Rev, flags: r.Flags, chain: r.Chain, n: r.Len, reqID: r.ReqID, group: r.Group,
		recFirst: r.RecFirst, recCount: r.RecCount, state: pending}
	s.tickets[t.id] = t
	m.resolve(t)
	return m.answer(s, t)
}

// Bind records that the Manager named the lease of model key `key` leaseID.
func (m *Model) Bind(sid int, key, leaseID uint64) {
	m.sess[sid].leases[leaseID] = m.delivered[key]
	delete(m.delivered, key)
}

// Close models a disconnect: tickets revoked, delivered leases released.
func (m *Model) Close(sid int) {
	s := m.sess[sid]
	for _, t := range s.tickets {
		m.revoke(s, t, false)
	}
	for _, b := range s.leases {
		m.reserved -= b
	}
	delete(m.sess, sid)
	m.admitWaiting()
}

// Expire models the clock passing every ticket's deadline.
func (m *Model) Expire() {
	for _, s := range m.sess {
		for _, t := range s.tickets {
			m.revoke(s, t, true)
		}
	}
	m.admitWaiting()
}

// Publish records chain[0:n) as resident. Tickets waiting for budget keep
// waiting: a publish changes no reservation.
func (m *Model) Publish(chain, n int) {
	for i := 0; i < n; i++ {
		m.published[[2]int{chain, i}] = true
	}
}

// Restart models a new Manager: nothing survives (RAM tier only).
func (m *Model) Restart() {
	*m = *New(m.p)
}

// Run drives d and a model with the same random sequence from seed; it
// returns the first disagreement (naming the step, the request and both
// answers) or nil. logf receives one line per step when non-nil.
func Run(d Driver, p Params, seed uint64, logf func(string, ...any)) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	m := New(p)
	type sref struct{ model, drv int }
	var open []sref
	next := 0
	var staleLeases []uint64
	newSession := func() error {
		h, err := d.Open()
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		m.open(next)
		open = append(open, sref{next, h})
		next++
		return nil
	}
	for len(open) < p.Sessions {
		if err := newSession(); err != nil {
			return err
		}
	}
	pick := func() sref { return open[rng.IntN(len(open))] }
	for step := 0; step < p.Steps; step++ {
		sr := pick()
		s := m.sess[sr.model]
		var r Req
		op := rng.IntN(100)
		switch {
		case op < 8: // publish a prefix of a chain
			c, n := rng.IntN(p.Chains), 1+rng.IntN(p.ChainLen)
			if logf != nil {
				logf("step %d s%d publish chain %d [0,%d)", step, sr.model, c, n)
			}
			if err := d.Publish(sr.drv, c, n); err != nil {
				return fmt.Errorf("step %d: publish: %w", step, err)
			}
			m.Publish(c, n)
			continue
		case op < 10:
			if logf != nil {
				logf("step %d expire", step)
			}
			if err := d.Expire(); err != nil {
				return fmt.Errorf("step %d: expire: %w", step, err)
			}
			m.Expire()
			continue
		case op < 13: // disconnect, then a fresh session
			if logf != nil {
				logf("step %d s%d disconnect", step, sr.model)
			}
			for id := range s.leases {
				staleLeases = append(staleLeases, id)
			}
			if err := d.Close(sr.drv); err != nil {
				return fmt.Errorf("step %d: close: %w", step, err)
			}
			m.Close(sr.model)
			open = slices.DeleteFunc(open, func(x sref) bool { return x == sr })
			if err := newSession(); err != nil {
				return err
			}
			continue
		case op < 14 && p.Restarts:
			if logf != nil {
				logf("step %d restart", step)
			}
			for _, x := range open {
				for id := range m.sess[x.model].leases {
					staleLeases = append(staleLeases, id)
				}
			}
			ok, err := d.Restart()
			if err != nil {
				return fmt.Errorf("step %d: restart: %w", step, err)
			}
			if ok {
				m.Restart()
				open = open[:0]
				for len(open) < p.Sessions {
					if err := newSession(); err != nil {
						return err
					}
				}
			}
			continue
		case op < 40: // a new ticket
			r = m.randomSubmit(rng, s)
		case op < 52: // an untracked leased read
			r = Req{Kind: Untracked, Chain: rng.IntN(p.Chains), Len: 1 + rng.IntN(p.ChainLen)}
		case op < 64: // revise (or resend) a live ticket
			r = m.randomRevise(rng, s)
		case op < 78:
			r = m.randomRef(rng, s, Poll)
		case op < 84:
			r = m.randomRef(rng, s, Claim)
		case op < 88:
			r = m.randomRef(rng, s, Cancel)
		default: // release a lease (sometimes a stale or unknown one)
			r = Req{Kind: Release, LeaseID: 1 + rng.Uint64N(1<<40)}
			if len(s.leases) > 0 && rng.IntN(8) != 0 {
				ids := make([]uint64, 0, len(s.leases))
				for id := range s.leases {
					ids = append(ids, id)
				}
				slices.Sort(ids)
				r.LeaseID = ids[rng.IntN(len(ids))]
			} else if len(staleLeases) > 0 {
				r.LeaseID = staleLeases[rng.IntN(len(staleLeases))]
			}
		}
		want := m.Step(sr.model, r)
		got, err := d.Do(sr.drv, r)
		if err != nil {
			return fmt.Errorf("step %d (seed %d): s%d %+v: driver: %w", step, seed, sr.model, r, err)
		}
		if logf != nil {
			logf("step %d s%d %v %+v → %v %d %d (model %v %d)", step, sr.model, r.Kind, r, got.Status, got.Arg0, got.Arg1, want.Status, want.Arg0)
		}
		if !agree(want, got, d.InvalidField()) {
			return fmt.Errorf("step %d (seed %d): s%d %v %+v: Manager answered %v arg0 %d arg1 %d, the model %v arg0 %d",
				step, seed, sr.model, r.Kind, r, got.Status, got.Arg0, got.Arg1, want.Status, want.Arg0)
		}
		if want.Status == abi.StatusOK && want.Arg1 != 0 {
			if got.Arg1 == 0 {
				return fmt.Errorf("step %d (seed %d): %v Ok without a lease id", step, seed, r.Kind)
			}
			m.Bind(sr.model, want.Arg1, got.Arg1)
		}
	}
	for _, x := range open {
		if err := d.Close(x.drv); err != nil {
			return fmt.Errorf("final close: %w", err)
		}
		m.Close(x.model)
	}
	if m.reserved != 0 || len(m.budgetQ) != 0 || len(m.undeliv) != 0 {
		return fmt.Errorf("model broke its own idle invariant: reserved %d, %d waiting, %d undelivered", m.reserved, len(m.budgetQ), len(m.undeliv))
	}
	return d.Idle()
}

// AnyField is the Arg0 a driver reports for an Invalid answer whose field
// it cannot tell; it agrees with every field.
const AnyField = ^uint64(0)

func agree(want, got Resp, fields bool) bool {
	if want.Status != got.Status {
		return false
	}
	switch want.Status {
	case abi.StatusInvalid:
		return !fields || got.Arg0 == AnyField || want.Arg0 == got.Arg0
	case abi.StatusOK, abi.StatusCandidates, abi.StatusMiss:
		return want.Arg0 == got.Arg0
	}
	return true
}

var flagSets = []uint16{0, 0, abi.QueryWaitFullPref, abi.QueryDiscover, abi.QueryWarmup, abi.QueryRecovery,
	abi.QueryPrepare, abi.QueryPrepare, abi.QueryPrepare | abi.QueryRecovery}

func (m *Model) randomView(rng *rand.Rand, r *Req) {
	r.Flags = flagSets[rng.IntN(len(flagSets))]
	r.Chain, r.Len = rng.IntN(m.p.Chains), 1+rng.IntN(m.p.ChainLen)
	if r.Flags&abi.QueryRecovery != 0 {
		r.RecFirst = uint32(rng.IntN(r.Len))
		r.RecCount = 1 + uint32(rng.IntN(r.Len-int(r.RecFirst)))
	} else {
		r.RecFirst, r.RecCount = 0, 0
	}
}

func (m *Model) randomSubmit(rng *rand.Rand, s *session) Req {
	r := Req{Kind: Submit, Rev: 1, ReqID: rng.Uint64N(4), Group: rng.Uint64N(2)}
	switch rng.IntN(10) {
	case 0: // a retired, expired or reused id
		r.OpID = 1 + rng.Uint64N(s.maxOpID+1)
	default:
		r.OpID = s.maxOpID + 1 + rng.Uint64N(3)
	}
	m.randomView(rng, &r)
	return r
}

func (m *Model) liveIDs(s *session) []uint64 {
	ids := make([]uint64, 0, len(s.tickets))
	for id := range s.tickets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (m *Model) randomRevise(rng *rand.Rand, s *session) Req {
	ids := m.liveIDs(s)
	if len(ids) == 0 {
		return m.randomSubmit(rng, s)
	}
	t := s.tickets[ids[rng.IntN(len(ids))]]
	r := Req{Kind: Submit, OpID: t.id, Rev: t.rev, Flags: t.flags, Chain: t.chain, Len: t.n, ReqID: t.reqID, Group: t.group,
		RecFirst: t.recFirst, RecCount: t.recCount}
	switch rng.IntN(6) {
	case 0: // resend the live revision unchanged (a poll)
	case 1: // same revision, changed request
		m.randomView(rng, &r)
		r.Len = t.n%m.p.ChainLen + 1
		if r.Flags&abi.QueryRecovery != 0 {
			r.RecFirst, r.RecCount = 0, 1
		}
	case 2: // an older revision
		r.Rev = t.rev - 1
		if r.Rev == 0 {
			r.Rev = t.rev + 1
			r.Group++ // then: a changed group
		}
	case 3: // a newer revision with a changed group
		r.Rev, r.Group = t.rev+1, t.group+1
	default: // a newer revision with a new view
		r.Rev = t.rev + 1 + uint32(rng.IntN(2))
		m.randomView(rng, &r)
	}
	return r
}

func (m *Model) randomRef(rng *rand.Rand, s *session, k Kind) Req {
	r := Req{Kind: k}
	ids := m.liveIDs(s)
	switch {
	case len(ids) > 0 && rng.IntN(4) != 0:
		t := s.tickets[ids[rng.IntN(len(ids))]]
		r.OpID, r.Rev = t.id, t.rev
		if rng.IntN(5) == 0 {
			r.Rev = t.rev - 1 + 2*uint32(rng.IntN(2)) // one below or above
		}
	default: // a retired, expired or unknown id
		r.OpID, r.Rev = 1+rng.Uint64N(s.maxOpID+2), 1
	}
	return r
}
