package ticket_test

import (
	"encoding/binary"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/ticket"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// The tests drive ticket.Set directly, as the cache's dispatcher does, over
// the real lower components (tier.Tiers, tier.Lookup, lease.Book, real
// sessions); only the cache itself is replaced, by fakeHost.

const (
	tEpoch     = 77
	blockBytes = 4096 // one RAM chunk per block
)

var ns1 = abi.Namespace{1}
var ns2 = abi.Namespace{2}

// hash is the i-th block hash of the tests' chains.
func hash(i int) abi.BlockHash {
	var h abi.BlockHash
	binary.LittleEndian.PutUint64(h[:], uint64(i)+1000)
	return h
}

// fakeHost is a test double of the cache's side of tickets (ticket.Host).
// It records every call — permits asked for, expiry deadlines armed,
// wake-ups, drains, reservation holds — and injects the answers the real
// cache (gocore/cache's ticketHost) cannot be made to give on demand:
// AdmitOp refusals (a flat refusal, or a per-session bound on the book's
// permits, as the real bound counts them) and HoldReservation holds (in
// the real cache only a failpoint build holds, and only at a paused
// failpoint).
type fakeHost struct {
	refuse     bool // AdmitOp answers false
	perSession int  // AdmitOp answers false when the book holds this many permits (0: no bound)
	hold       bool // HoldReservation holds every ticket that reaches it

	admits  int // AdmitOp calls
	armed   []time.Time
	held    []*ticket.Ticket
	signals map[*ticket.Book]int
	drained map[*ticket.Book]int
	// delivered counts the tickets delivered Ok or Miss, and the hit
	// blocks of those, by namespace.
	delivered, deliveredHits map[abi.Namespace]uint64
}

func newFakeHost() *fakeHost {
	return &fakeHost{signals: map[*ticket.Book]int{}, drained: map[*ticket.Book]int{},
		delivered: map[abi.Namespace]uint64{}, deliveredHits: map[abi.Namespace]uint64{}}
}

func (h *fakeHost) AdmitOp(b *ticket.Book) bool {
	h.admits++
	return !h.refuse && (h.perSession == 0 || b.Permits() < h.perSession)
}

func (h *fakeHost) ArmExpiry(d time.Time)  { h.armed = append(h.armed, d) }
func (h *fakeHost) Drained(b *ticket.Book) { h.drained[b]++ }
func (h *fakeHost) Signal(b *ticket.Book)  { h.signals[b]++ }

func (h *fakeHost) Delivered(_ *ticket.Book, ns abi.Namespace, hits uint32) {
	h.delivered[ns]++
	h.deliveredHits[ns] += uint64(hits)
}

func (h *fakeHost) HoldReservation(t *ticket.Ticket) bool {
	if h.hold {
		h.held = append(h.held, t)
	}
	return h.hold
}

// rigSpec configures a rig; zero fields take the defaults of newRig.
type rigSpec struct {
	ramBlocks int    // RAM tier capacity in blocks (default 16)
	budget    uint64 // lease byte budget (default 1 GiB)
	ssd       bool   // add an SSD tier
	warmup    uint64 // tier warmup budget (0: the tier's default)
}

// rig is a ticket.Set over real tiers, lookup, lease book and sessions,
// with a fake host and a clock the test moves.
type rig struct {
	t      *testing.T
	host   *fakeHost
	tiers  *tier.Tiers
	look   *tier.Lookup
	leases *lease.Book[*ticket.Ticket]
	set    *ticket.Set
	table  *session.Table
	now    time.Time
	ring   chan struct{}
	rang   atomic.Int64 // SSD reads finished on their I/O goroutines (tier.Spec.Ring calls)
	gen    uint64
	books  []*ticket.Book
}

const expiry = ticket.DefaultOpExpiry

func newRig(t *testing.T, spec rigSpec) *rig {
	t.Helper()
	if spec.ramBlocks == 0 {
		spec.ramBlocks = 16
	}
	if spec.budget == 0 {
		spec.budget = 1 << 30
	}
	r := &rig{t: t, host: newFakeHost(), now: time.Unix(1_800_000_000, 0), ring: make(chan struct{}, 1<<16), gen: 1}
	ts := tier.Spec{RAM: ram.Spec{CapacityBytes: uint64(spec.ramBlocks) * blockBytes, ChunkBytes: blockBytes},
		Eviction: "lru", WarmupBudget: spec.warmup,
		Ring: func() {
			r.rang.Add(1)
			select {
			case r.ring <- struct{}{}:
			default:
			}
		}}
	var err error
	if spec.ssd {
		r.tiers, err = newSSDTiers(t, ts)
	} else {
		r.tiers, err = tier.New(ts)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.tiers.Close)
	r.look = tier.NewLookup(r.tiers)
	r.leases = lease.NewBook[*ticket.Ticket](lease.FirstID(tEpoch), r.tiers.Index(), lease.Limits{Budget: spec.budget})
	r.set = ticket.NewSet(r.host, r.look, r.leases, tEpoch, expiry, func() time.Time { return r.now })
	if r.table, err = session.NewTable(session.Spec{Epoch: tEpoch, MaxSessions: 8, DescCapacity: 4096}); err != nil {
		t.Fatal(err)
	}
	return r
}

// newSSDTiers makes the tiers with an SSD tier of 64 slots in a temporary
// directory; the store uses O_DIRECT, which tmpfs refuses, so /var/tmp is
// tried when t.TempDir() is on one; neither working skips the test.
func newSSDTiers(t *testing.T, ts tier.Spec) (*tier.Tiers, error) {
	t.Helper()
	try := func(dir string) (*tier.Tiers, error) {
		ts.SSD = &ssd.Spec{Dir: dir, CapacityBytes: 64 * (ssd.HeaderBytes + blockBytes), SlotBytes: blockBytes}
		return tier.New(ts)
	}
	tiers, err := try(t.TempDir())
	if err == nil {
		return tiers, nil
	}
	dir, err2 := os.MkdirTemp("/var/tmp", "orbitkv-ticket-ssd-")
	if err2 != nil {
		t.Skipf("no directory for the SSD tier: %v; /var/tmp: %v", err, err2)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if tiers, err2 = try(dir); err2 != nil {
		t.Skipf("no SSD tier in %s (%v) nor in /var/tmp (%v)", t.TempDir(), err, err2)
	}
	return tiers, nil
}

// open attaches a new session's book.
func (r *rig) open() *ticket.Book {
	r.t.Helper()
	s, err := r.table.Open(session.Peer{PID: 1, InstanceID: "ticket-test"})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { r.table.Close(s) })
	b := ticket.NewBook(s)
	r.books = append(r.books, b)
	return b
}

// publish inserts and seals blocks of ns1 named hash(i) for each i, as a
// completed Publish leaves them; it returns them in order.
func (r *rig) publish(hs ...int) []*index.Block {
	r.t.Helper()
	return r.publishNS(ns1, hs...)
}

func (r *rig) publishNS(ns abi.Namespace, hs ...int) []*index.Block {
	r.t.Helper()
	key := func(i int) index.Key { return index.Key{NS: ns, Hash: hash(hs[i])} }
	fresh, _, ok := r.tiers.Place(len(hs), key, blockBytes, 1, index.NoDomain, nil)
	if !ok {
		r.t.Fatalf("no room to publish %v", hs)
	}
	for _, blk := range fresh {
		if blk != nil {
			r.tiers.Seal(blk)
		}
	}
	out := make([]*index.Block, len(hs))
	for i := range hs {
		if out[i] = r.tiers.Index().Lookup(key(i)); out[i] == nil {
			r.t.Fatalf("block %d not sealed after publish", hs[i])
		}
	}
	return out
}

// block returns the sealed RAM block of ns1 hash(i), or nil.
func (r *rig) block(i int) *index.Block {
	return r.tiers.Index().Lookup(index.Key{NS: ns1, Hash: hash(i)})
}

// demote fills a RAM tier of n blocks over SSD: hash(0..n-1) are
// published, then hash(n..2n-1) push them out to the SSD tier; it waits
// until the first n are durable there.
func (r *rig) demote(n int) {
	r.t.Helper()
	first, second := make([]int, n), make([]int, n)
	for i := range n {
		first[i], second[i] = i, n+i
	}
	r.publish(first...)
	r.publish(second...)
	deadline := time.Now().Add(10 * time.Second)
	for r.tiers.Counters().SSD.Writes < uint64(n) {
		if time.Now().After(deadline) {
			r.t.Fatalf("demotions not durable: %+v", r.tiers.Counters().SSD)
		}
		time.Sleep(time.Millisecond)
	}
	for i := range n {
		if r.block(i) != nil || !r.tiers.OnSSD(index.Key{NS: ns1, Hash: hash(i)}) {
			r.t.Fatalf("hash %d is not (only) on SSD", i)
		}
	}
}

// completeSSD applies finished SSD reads, at most limit per round, and
// resolves the pending tickets after each round that applied some, as the
// cache's Complete does; it returns when no read is in flight.
func (r *rig) completeSSD(limit int) {
	r.t.Helper()
	deadline := time.After(10 * time.Second)
	for r.tiers.Loading() > 0 {
		got, _ := r.tiers.Complete(limit)
		if got > 0 {
			for _, b := range r.books {
				r.set.ResolvePending(b)
			}
			continue
		}
		select {
		case <-r.ring:
		case <-time.After(time.Millisecond):
		case <-deadline:
			r.t.Fatalf("%d SSD reads still in flight after 10 s", r.tiers.Loading())
		}
	}
}

// waitReadsFinished waits until n SSD reads in all finished on their I/O
// goroutines (queued for Complete, not necessarily applied).
func (r *rig) waitReadsFinished(n int64) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.rang.Load() < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d of %d SSD reads finished after 10 s", r.rang.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// req is a QueryBundle with a ticket.
type req struct {
	id       uint64
	rev      uint32
	flags    uint16
	reqID    uint64
	group    uint64
	recFirst uint32
	recCount uint32
	ns       abi.Namespace // zero: ns1
	hashes   []int
}

func (q req) desc() abi.QueryDesc {
	hs := make([]abi.BlockHash, len(q.hashes))
	for i, h := range q.hashes {
		hs[i] = hash(h)
	}
	ns := q.ns
	if ns == (abi.Namespace{}) {
		ns = ns1
	}
	return abi.QueryDesc{Flags: q.flags, OpID: q.id, Revision: q.rev, RequestID: q.reqID, Group: q.group,
		RecoveryFirst: q.recFirst, RecoveryCount: q.recCount, NS: ns, Hashes: abi.HashBytes(hs)}
}

// msg is a request of cmd naming (arg0, arg1); with result, its
// descriptor is a 64-byte result area at the slot's descriptor offset,
// cleared first so that a call that writes no result leaves it zero.
func (r *rig) msg(b *ticket.Book, cmd abi.Command, arg0, arg1 uint64, result bool) abi.Message {
	m := abi.Message{Magic: abi.MsgMagic, ABIVersion: abi.Version, Code: uint16(cmd), Epoch: tEpoch, Generation: r.gen, Arg0: arg0, Arg1: arg1}
	r.gen += 2
	if result {
		m.DescOffset, m.DescLength = abi.SlotDescOffset, abi.QueryResultSize
		clear(b.Sess.Slot()[abi.SlotDescOffset : abi.SlotDescOffset+abi.QueryResultSize])
	}
	return m
}

// answer is a response with the result the call wrote (ok false: none).
type answer struct {
	resp abi.Message
	derr *abi.DescError
	res  abi.QueryResult
	ok   bool // a result was written
}

func (a answer) status() abi.Status {
	if a.derr != nil {
		return a.derr.Status
	}
	return abi.Status(a.resp.Code)
}

func (r *rig) answer(b *ticket.Book, resp abi.Message, derr *abi.DescError) answer {
	a := answer{resp: resp, derr: derr}
	a.res, a.ok = readResult(b.Sess.Slot()[abi.SlotDescOffset:])
	return a
}

// readResult decodes a struct okv_query_result at the offsets abi uses.
func readResult(p []byte) (abi.QueryResult, bool) {
	le := binary.LittleEndian
	if le.Uint32(p) != abi.QueryResultMagic {
		return abi.QueryResult{}, false
	}
	o := abi.DescOffsets
	return abi.QueryResult{
		Status:     abi.Status(le.Uint16(p[o["okv_query_result.status"]:])),
		Hits:       le.Uint32(p[o["okv_query_result.hit_count"]:]),
		RAMHits:    le.Uint32(p[o["okv_query_result.ram_hits"]:]),
		LeaseID:    le.Uint64(p[o["okv_query_result.lease_id"]:]),
		LeaseBytes: le.Uint64(p[o["okv_query_result.lease_bytes"]:]),
		BlockBytes: le.Uint64(p[o["okv_query_result.block_bytes"]:]),
		OpID:       le.Uint64(p[o["okv_query_result.op_id"]:]),
		Revision:   le.Uint32(p[o["okv_query_result.revision"]:]),
		First:      le.Uint32(p[o["okv_query_result.first"]:]),
	}, true
}

func (r *rig) submit(b *ticket.Book, q req) answer {
	r.t.Helper()
	d := q.desc()
	m := r.msg(b, abi.CmdQueryBundle, 0, 0, true)
	resp, derr := r.set.Submit(b, &m, &d)
	return r.answer(b, resp, derr)
}

func (r *rig) poll(b *ticket.Book, id uint64, rev uint32) answer {
	m := r.msg(b, abi.CmdPoll, id, uint64(rev), true)
	resp, derr := r.set.Poll(b, &m)
	return r.answer(b, resp, derr)
}

func (r *rig) claim(b *ticket.Book, id uint64, rev uint32) answer {
	m := r.msg(b, abi.CmdClaim, id, uint64(rev), true)
	resp, derr := r.set.Claim(b, &m)
	return r.answer(b, resp, derr)
}

func (r *rig) cancel(b *ticket.Book, id uint64, rev uint32) answer {
	m := r.msg(b, abi.CmdCancelQuery, id, uint64(rev), false)
	resp, derr := r.set.Cancel(b, &m)
	return answer{resp: resp, derr: derr}
}

// release ends the delivered lease id of b, as the client's Release does.
func (r *rig) release(b *ticket.Book, id uint64) {
	r.t.Helper()
	l := r.leases.Get(b.Owner, id)
	if l == nil {
		r.t.Fatalf("lease %d is not b's live lease", id)
	}
	r.leases.End(l)
	r.set.AdmitWaiting()
}

// leased returns the blocks of b's live lease id, or fails.
func (r *rig) leased(b *ticket.Book, id uint64) []*index.Block {
	r.t.Helper()
	l := r.leases.Get(b.Owner, id)
	if l == nil {
		r.t.Fatalf("lease %d is not b's live lease", id)
	}
	return l.Blocks
}

// pins is the index's pin count.
func (r *rig) pins() uint64 {
	_, pins, _ := r.tiers.Resident()
	return pins
}

// check fails unless the lease book's invariants hold.
func (r *rig) check() {
	r.t.Helper()
	if err := r.leases.Check(); err != nil {
		r.t.Fatal(err)
	}
}

// idle tears every session down as the cache's Detach does (tickets
// revoked, leases ended, waiters admitted), lets SSD reads finish, and
// checks the idle invariant (docs/design.md §6 rule 8): no permits, tickets,
// leases, reserved bytes, waiters or pins.
func (r *rig) idle() {
	r.t.Helper()
	for _, b := range r.books {
		r.set.RevokeAll(b)
		r.leases.EndAll(b.Owner)
	}
	r.set.AdmitWaiting()
	r.completeSSD(64)
	r.check()
	st := r.set.Stats()
	if r.set.Permits() != 0 || r.set.Draining() != 0 || st.Live != 0 {
		r.t.Fatalf("idle: %d permits, %d draining, %d live tickets", r.set.Permits(), r.set.Draining(), st.Live)
	}
	for _, b := range r.books {
		if b.Live() != 0 || b.Permits() != 0 {
			r.t.Fatalf("idle: a book has %d live tickets and %d permits", b.Live(), b.Permits())
		}
	}
	if r.leases.Leases() != 0 || r.leases.Reserved() != 0 || r.leases.Waiting() != 0 {
		r.t.Fatalf("idle: %d leases, %d bytes reserved, %d waiting", r.leases.Leases(), r.leases.Reserved(), r.leases.Waiting())
	}
	if p := r.pins(); p != 0 || r.tiers.Warming() != 0 {
		r.t.Fatalf("idle: %d pins, %d bytes warming", p, r.tiers.Warming())
	}
}
