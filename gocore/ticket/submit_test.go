package ticket_test

import (
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/ticket"
)

// A new ticket over a chain whose head is resident is answered at once:
// Ok with the RAM prefix under a lease the client now holds, the result
// written for its op id and revision, and the ticket retired.
func TestANewTicketResolvesAtOnceToTheRAMPrefixUnderALease(t *testing.T) {
	r := newRig(t, rigSpec{})
	blks := r.publish(0, 1, 2)
	b := r.open()
	a := r.submit(b, req{id: 5, rev: 2, hashes: []int{0, 1, 2, 9, 3}})
	if a.status() != abi.StatusOK || a.resp.Arg0 != 3 || a.resp.Arg1 == 0 {
		t.Fatalf("submit: %v hits %d lease %d, want Ok 3 and a lease", a.status(), a.resp.Arg0, a.resp.Arg1)
	}
	want := abi.QueryResult{Status: abi.StatusOK, Hits: 3, RAMHits: 3, LeaseID: a.resp.Arg1, LeaseBytes: 3 * blockBytes,
		BlockBytes: blockBytes, OpID: 5, Revision: 2}
	if !a.ok || a.res != want {
		t.Fatalf("result %+v (written %v), want %+v", a.res, a.ok, want)
	}
	got := r.leased(b, a.resp.Arg1)
	for i, blk := range blks {
		if got[i] != blk || blk.Pins() != 1 {
			t.Fatalf("lease block %d is %p with %d pins, want %p pinned once", i, got[i], blk.Pins(), blk)
		}
	}
	if len(r.host.armed) != 1 || !r.host.armed[0].Equal(r.now.Add(expiry)) {
		t.Fatalf("expiry armed %v, want once at now+%v", r.host.armed, expiry)
	}
	st := r.set.Stats()
	if st.Live != 0 || st.Queries != 1 || st.QueryHits != 3 || r.set.Permits() != 0 || b.Live() != 0 {
		t.Fatalf("after delivery: %+v, %d permits, %d live in the book", st, r.set.Permits(), b.Live())
	}
	if r.host.delivered[ns1] != 1 || r.host.deliveredHits[ns1] != 3 {
		t.Fatalf("the host heard %d deliveries with %d hits in ns1, want 1 with 3", r.host.delivered[ns1], r.host.deliveredHits[ns1])
	}
	r.check()
	r.release(b, a.resp.Arg1)
	for i, blk := range blks {
		if blk.Pins() != 0 {
			t.Fatalf("block %d keeps %d pins after its lease ended", i, blk.Pins())
		}
	}
	r.idle()
}

// A chain whose first block is not resident is a Miss: no lease, no
// bytes reserved, and the delivery is counted as a query with no hits.
func TestAChainWithNoResidentHeadIsAMiss(t *testing.T) {
	r := newRig(t, rigSpec{})
	r.publish(1, 2)
	b := r.open()
	a := r.submit(b, req{id: 1, rev: 1, hashes: []int{0, 1, 2}})
	if a.status() != abi.StatusMiss || a.resp.Arg0 != 0 || a.resp.Arg1 != 0 {
		t.Fatalf("submit: %v %d %d, want Miss 0 0", a.status(), a.resp.Arg0, a.resp.Arg1)
	}
	if !a.ok || a.res.Status != abi.StatusMiss || a.res.OpID != 1 || a.res.Revision != 1 || a.res.LeaseID != 0 {
		t.Fatalf("result %+v", a.res)
	}
	if st := r.set.Stats(); st.Queries != 1 || st.QueryHits != 0 || r.leases.Leases() != 0 || r.leases.Reserved() != 0 {
		t.Fatalf("after the miss: %+v, %d leases, %d bytes reserved", st, r.leases.Leases(), r.leases.Reserved())
	}
	if r.host.delivered[ns1] != 1 || r.host.deliveredHits[ns1] != 0 {
		t.Fatalf("the host heard %d deliveries with %d hits in ns1, want the miss with 0", r.host.delivered[ns1], r.host.deliveredHits[ns1])
	}
	r.idle()
}

// A recovery read leases exactly its range, all of it, or misses.
func TestARecoveryRangeIsLeasedWholeOrMissed(t *testing.T) {
	cases := []struct {
		name            string
		published       []int
		first, count    uint32
		status          abi.Status
		hits, wantFirst uint32
	}{
		{"a range wholly resident is leased from its first position", []int{1, 2}, 1, 2, abi.StatusOK, 2, 1},
		{"a range resident but for its last block is a Miss", []int{1}, 1, 2, abi.StatusMiss, 0, 0},
		{"a range whose head is past a missing block is still served", []int{2}, 2, 1, abi.StatusOK, 1, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigSpec{})
			r.publish(c.published...)
			b := r.open()
			a := r.submit(b, req{id: 1, rev: 1, flags: abi.QueryRecovery, recFirst: c.first, recCount: c.count, hashes: []int{0, 1, 2, 3}})
			if a.status() != c.status || a.res.Hits != c.hits || a.res.First != c.wantFirst {
				t.Fatalf("recovery [%d,+%d): %v hits %d first %d, want %v %d %d", c.first, c.count, a.status(), a.res.Hits, a.res.First, c.status, c.hits, c.wantFirst)
			}
			if c.status == abi.StatusOK {
				got := r.leased(b, a.res.LeaseID)
				for i := range got {
					if got[i] != r.block(int(c.first)+i) {
						t.Fatalf("lease block %d is not hash %d", i, int(c.first)+i)
					}
				}
			}
			r.idle()
		})
	}
}

// pendingOnBudget leaves ticket 1 of a new session pending for byte
// budget: another session holds a delivered one-block lease over a
// one-block budget. It returns the waiter's book and the holder's book and
// lease id.
func pendingOnBudget(t *testing.T, r *rig, q req) (waiter, holder *ticketBook, leaseID uint64) {
	t.Helper()
	holder = r.open()
	h := r.submit(holder, req{id: 1, rev: 1, hashes: []int{100}})
	if h.status() != abi.StatusOK {
		t.Fatalf("holder: %v", h.status())
	}
	waiter = r.open()
	if a := r.submit(waiter, q); a.status() != abi.StatusLoading || a.ok {
		t.Fatalf("waiter: %v (result written %v), want Loading with no result", a.status(), a.ok)
	}
	if r.leases.Waiting() != 1 {
		t.Fatalf("%d waiting for budget, want 1", r.leases.Waiting())
	}
	return waiter, holder, h.resp.Arg1
}

type ticketBook = ticket.Book

// The same revision resubmitted with the same request is a poll; with a
// changed request, or an older revision, it is Invalid (revision) and
// changes nothing.
func TestTheSameRevisionResubmittedIsAPoll(t *testing.T) {
	r := newRig(t, rigSpec{budget: blockBytes})
	r.publish(0, 100)
	q := req{id: 1, rev: 2, reqID: 7, hashes: []int{0}}
	b, holder, hl := pendingOnBudget(t, r, q)
	if a := r.submit(b, q); a.status() != abi.StatusLoading {
		t.Fatalf("resubmitted: %v, want Loading", a.status())
	}
	if r.leases.Waiting() != 1 || b.Live() != 1 || r.set.Permits() != 1 {
		t.Fatalf("the poll changed state: %d waiting, %d live, %d permits", r.leases.Waiting(), b.Live(), r.set.Permits())
	}
	changed := q
	changed.hashes = []int{0, 1}
	older := q
	older.rev = 1
	for name, bad := range map[string]req{"a changed request": changed, "an older revision": older} {
		if a := r.submit(b, bad); a.status() != abi.StatusInvalid || a.derr.Field != abi.FieldRevision {
			t.Fatalf("%s: %v, want Invalid revision", name, a.status())
		}
	}
	r.release(holder, hl)
	if r.host.signals[b] != 1 {
		t.Fatalf("the waiter was signalled %d times, want once", r.host.signals[b])
	}
	a := r.submit(b, q) // the resubmission delivers what the release granted
	if a.status() != abi.StatusOK || a.res.Hits != 1 || a.res.OpID != 1 || a.res.Revision != 2 {
		t.Fatalf("resubmitted after the release: %v %+v", a.status(), a.res)
	}
	r.release(b, a.res.LeaseID)
	r.idle()
}

// A newer revision replaces the hashes and the wait policy; what the older
// one held (its place in the budget queue) goes, and older polls and
// cancels cannot touch the replacement.
func TestANewerRevisionReplacesTheHashes(t *testing.T) {
	r := newRig(t, rigSpec{budget: 2 * blockBytes})
	r.publish(0, 1, 2, 100)
	holder := r.open()
	h := r.submit(holder, req{id: 1, rev: 1, hashes: []int{100}}) // one of the two blocks of budget
	b := r.open()
	if a := r.submit(b, req{id: 1, rev: 1, reqID: 3, hashes: []int{0, 1}}); a.status() != abi.StatusLoading {
		t.Fatalf("two blocks over one left: %v, want Loading", a.status())
	}
	// Revision 2 asks one block, with wait_for_full_prefix: it fits now,
	// and leaves the queue it waited in.
	a := r.submit(b, req{id: 1, rev: 2, reqID: 3, flags: abi.QueryWaitFullPref, hashes: []int{2}})
	if a.status() != abi.StatusOK || a.res.Hits != 1 || a.res.Revision != 2 || r.leases.Waiting() != 0 {
		t.Fatalf("revision 2: %v %+v, %d waiting; want Ok 1 of revision 2, nobody waiting", a.status(), a.res, r.leases.Waiting())
	}
	if got := r.leased(b, a.res.LeaseID); len(got) != 1 || got[0] != r.block(2) {
		t.Fatalf("revision 2 leased %v, want hash 2's block", got)
	}
	// Delivered: the older revision's poll and cancel find nothing live.
	for _, x := range []answer{r.poll(b, 1, 1), r.cancel(b, 1, 1)} {
		if x.status() != abi.StatusInvalid || x.derr.Field != abi.FieldOpID {
			t.Fatalf("old revision after delivery: %v", x.status())
		}
	}
	r.release(b, a.res.LeaseID)
	r.release(holder, h.res.LeaseID)
	r.idle()
}

// Poll and Cancel name the live revision exactly: after a revision, the
// older one's cannot consume or cancel the replacement.
func TestOlderPollsAndCancelsCannotTouchTheReplacement(t *testing.T) {
	r := newRig(t, rigSpec{budget: blockBytes})
	r.publish(0, 1, 100)
	b, holder, hl := pendingOnBudget(t, r, req{id: 4, rev: 1, hashes: []int{0}})
	if a := r.submit(b, req{id: 4, rev: 3, hashes: []int{1}}); a.status() != abi.StatusLoading {
		t.Fatalf("revision 3: %v", a.status())
	}
	for name, x := range map[string]answer{"poll": r.poll(b, 4, 1), "cancel": r.cancel(b, 4, 1), "poll of a future revision": r.poll(b, 4, 4)} {
		if x.status() != abi.StatusInvalid || x.derr.Field != abi.FieldRevision {
			t.Fatalf("%s of another revision: %v, want Invalid revision", name, x.status())
		}
	}
	if b.Live() != 1 || r.leases.Waiting() != 1 {
		t.Fatalf("the replacement was touched: %d live, %d waiting", b.Live(), r.leases.Waiting())
	}
	r.release(holder, hl)
	a := r.poll(b, 4, 3)
	if a.status() != abi.StatusOK || a.res.Revision != 3 || r.leased(b, a.res.LeaseID)[0] != r.block(1) {
		t.Fatalf("poll of revision 3: %v %+v, want Ok over hash 1", a.status(), a.res)
	}
	r.release(b, a.res.LeaseID)
	r.idle()
}

// A revision replaces only the hashes (and recovery range) and the wait
// policy: any other change is Invalid naming the field, and the live
// revision stays as it was.
func TestARevisionMayChangeOnlyTheHashesAndTheWaitPolicy(t *testing.T) {
	base := req{id: 1, rev: 1, reqID: 7, group: 2, flags: abi.QueryPrepare, hashes: []int{0}}
	cases := []struct {
		name  string
		edit  func(*req)
		field abi.Field
	}{
		{"a changed request id is Invalid request", func(q *req) { q.reqID = 8 }, abi.FieldRequest},
		{"a changed group is Invalid request", func(q *req) { q.group = 3 }, abi.FieldRequest},
		{"a dropped prepare flag is Invalid flags", func(q *req) { q.flags = 0 }, abi.FieldDescFlags},
		{"a changed namespace is Invalid namespace", func(q *req) { q.ns = ns2 }, abi.FieldNamespace},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, rigSpec{})
			r.publish(0, 1)
			b := r.open()
			if a := r.submit(b, base); a.status() != abi.StatusCandidates {
				t.Fatalf("preparation: %v", a.status())
			}
			q := base
			q.rev, q.hashes = 2, []int{0, 1}
			c.edit(&q)
			if a := r.submit(b, q); a.status() != abi.StatusInvalid || a.derr.Field != c.field {
				t.Fatalf("revision 2: %v %v, want Invalid %v", a.status(), a.derr, c.field)
			}
			if a := r.claim(b, 1, 1); a.status() != abi.StatusOK || a.res.Hits != 1 {
				t.Fatalf("claim of revision 1 after the refused revision: %v %+v", a.status(), a.res)
			}
			r.idle()
		})
	}
	t.Run("adding wait_for_full_prefix is a revision", func(t *testing.T) {
		r := newRig(t, rigSpec{})
		r.publish(0, 1)
		b := r.open()
		r.submit(b, base)
		q := base
		q.rev, q.flags, q.hashes = 2, abi.QueryPrepare|abi.QueryWaitFullPref, []int{0, 1}
		if a := r.submit(b, q); a.status() != abi.StatusCandidates || a.res.Hits != 2 || a.res.Revision != 2 {
			t.Fatalf("revision 2: %v %+v, want Candidates 2", a.status(), a.res)
		}
		if r.leases.Leases() != 1 || r.pins() != 2 {
			t.Fatalf("%d leases, %d pins: the older revision's lease was not dropped", r.leases.Leases(), r.pins())
		}
		r.idle()
	})
}

// Op ids only grow: an id at or below the highest is retired (Invalid
// op_id) and submits nothing; Poll and Cancel of an id never used are
// Invalid op_id too.
func TestARetiredOpIDIsInvalidAndSubmitsNothing(t *testing.T) {
	r := newRig(t, rigSpec{})
	r.publish(0)
	b := r.open()
	a := r.submit(b, req{id: 10, rev: 1, hashes: []int{0}})
	if a.status() != abi.StatusOK {
		t.Fatalf("ticket 10: %v", a.status())
	}
	admits := r.host.admits
	for _, id := range []uint64{10, 9, 1} {
		x := r.submit(b, req{id: id, rev: 2, hashes: []int{0}})
		if x.status() != abi.StatusInvalid || x.derr.Field != abi.FieldOpID || x.ok {
			t.Fatalf("resubmitted id %d: %v (result written %v), want Invalid op_id", id, x.status(), x.ok)
		}
	}
	for _, x := range []answer{r.poll(b, 10, 1), r.poll(b, 11, 1), r.cancel(b, 12, 1), r.claim(b, 13, 1)} {
		if s := x.status(); s != abi.StatusInvalid && s != abi.StatusUnadmitted {
			t.Fatalf("reference to a retired or unknown id: %v", s)
		}
	}
	if r.host.admits != admits || r.leases.Leases() != 1 || b.Live() != 0 {
		t.Fatalf("a retired id submitted work: %d permits asked, %d leases, %d live", r.host.admits-admits, r.leases.Leases(), b.Live())
	}
	// Every session counts its own ids.
	if x := r.submit(r.open(), req{id: 1, rev: 1, hashes: []int{0}}); x.status() != abi.StatusOK {
		t.Fatalf("id 1 of another session: %v", x.status())
	}
	r.idle()
}

// A ticket expires DefaultOpExpiry after its latest submission: the sweep
// (or a Poll that finds it due) revokes it, drops its undelivered lease and
// leaves a tombstone, so Poll, Cancel and a resubmission answer Timeout
// and Claim Unadmitted.
func TestAnExpiredTicketAnswersTimeout(t *testing.T) {
	r := newRig(t, rigSpec{})
	r.publish(0, 1)
	b := r.open()
	if a := r.submit(b, req{id: 1, rev: 1, flags: abi.QueryPrepare, hashes: []int{0, 1}}); a.status() != abi.StatusCandidates {
		t.Fatalf("preparation: %v", a.status())
	}
	if r.leases.Leases() != 1 || r.pins() != 2 {
		t.Fatalf("the ready preparation holds %d leases, %d pins; want 1 and 2", r.leases.Leases(), r.pins())
	}
	r.now = r.now.Add(expiry - 1)
	r.set.Sweep(b)
	if b.Live() != 1 || r.set.Stats().Expired != 0 {
		t.Fatal("expired before its deadline")
	}
	if n := len(r.host.armed); n < 2 || !r.host.armed[n-1].Equal(r.now.Add(1)) {
		t.Fatalf("the sweep re-armed %v, want the deadline", r.host.armed)
	}
	r.now = r.now.Add(1)
	r.set.Sweep(b)
	if st := r.set.Stats(); st.Expired != 1 || st.Live != 0 || r.leases.Leases() != 0 || r.pins() != 0 || r.set.Permits() != 0 {
		t.Fatalf("after expiry: %+v, %d leases, %d pins, %d permits", st, r.leases.Leases(), r.pins(), r.set.Permits())
	}
	r.check()
	for name, x := range map[string]answer{"poll": r.poll(b, 1, 1), "cancel": r.cancel(b, 1, 1),
		"resubmission": r.submit(b, req{id: 1, rev: 2, flags: abi.QueryPrepare, hashes: []int{0}})} {
		if x.status() != abi.StatusTimeout {
			t.Fatalf("%s after expiry: %v, want Timeout", name, x.status())
		}
	}
	if x := r.claim(b, 1, 1); x.status() != abi.StatusUnadmitted {
		t.Fatalf("claim after expiry: %v, want Unadmitted", x.status())
	}
	if r.set.Stats().Expired != 1 || b.Live() != 0 {
		t.Fatal("a late reference revived or re-expired the ticket")
	}
	r.idle()
}

// A due ticket is expired by whatever reaches it first, not only by the
// sweep: a resubmission or a poll of it answers Timeout.
func TestADueTicketIsExpiredByTheNextReferenceToIt(t *testing.T) {
	for _, how := range []string{"resubmission", "poll", "claim"} {
		t.Run("a "+how+" past the deadline expires it", func(t *testing.T) {
			r := newRig(t, rigSpec{})
			r.publish(0)
			b := r.open()
			q := req{id: 1, rev: 1, flags: abi.QueryPrepare, hashes: []int{0}}
			r.submit(b, q)
			r.now = r.now.Add(expiry)
			var x answer
			want := abi.StatusTimeout
			switch how {
			case "resubmission":
				x = r.submit(b, q)
			case "poll":
				x = r.poll(b, 1, 1)
			default:
				x, want = r.claim(b, 1, 1), abi.StatusUnadmitted
			}
			if x.status() != want || r.set.Stats().Expired != 1 || r.leases.Leases() != 0 {
				t.Fatalf("%s: %v, %d expired, %d leases; want %v, 1, 0", how, x.status(), r.set.Stats().Expired, r.leases.Leases(), want)
			}
			if p := r.poll(b, 1, 1); p.status() != abi.StatusTimeout {
				t.Fatalf("poll after: %v, want Timeout (tombstone)", p.status())
			}
			r.idle()
		})
	}
}

// A newer revision restarts the ticket's expiry.
func TestARevisionRestartsTheExpiry(t *testing.T) {
	r := newRig(t, rigSpec{})
	r.publish(0)
	b := r.open()
	r.submit(b, req{id: 1, rev: 1, flags: abi.QueryPrepare, hashes: []int{0}})
	r.now = r.now.Add(expiry - 1)
	if a := r.submit(b, req{id: 1, rev: 2, flags: abi.QueryPrepare, hashes: []int{0}}); a.status() != abi.StatusCandidates {
		t.Fatalf("revision 2: %v", a.status())
	}
	r.now = r.now.Add(expiry - 1)
	r.set.Sweep(b)
	if b.Live() != 1 {
		t.Fatal("revision 2 expired by revision 1's deadline")
	}
	r.now = r.now.Add(1)
	r.set.Sweep(b)
	if b.Live() != 0 || r.set.Stats().Expired != 1 {
		t.Fatal("revision 2 outlived its own deadline")
	}
	r.idle()
}

// When the host refuses the permit, the ticket answers Unadmitted, holds
// nothing and is counted; with a per-session bound, a pending ticket's
// permit is what refuses the next.
func TestARefusedPermitAnswersUnadmittedAndIsCounted(t *testing.T) {
	r := newRig(t, rigSpec{budget: blockBytes})
	r.publish(0, 100)
	b := r.open()
	r.host.refuse = true
	a := r.submit(b, req{id: 1, rev: 1, hashes: []int{0}})
	if a.status() != abi.StatusUnadmitted || a.ok {
		t.Fatalf("refused: %v (result written %v), want Unadmitted with no result", a.status(), a.ok)
	}
	if st := r.set.Stats(); st.Unadmitted != 1 || st.Live != 0 || st.Queries != 0 || r.set.Permits() != 0 || r.leases.Leases() != 0 || len(r.host.armed) != 0 {
		t.Fatalf("after the refusal: %+v, %d permits, %d leases, %d armed", st, r.set.Permits(), r.leases.Leases(), len(r.host.armed))
	}
	r.host.refuse = false
	r.host.perSession = 1
	w, holder, hl := pendingOnBudget(t, r, req{id: 1, rev: 1, hashes: []int{0}}) // holder's delivered ticket held no permit after delivery
	if x := r.submit(w, req{id: 2, rev: 1, hashes: []int{0}}); x.status() != abi.StatusUnadmitted {
		t.Fatalf("a second ticket past the bound: %v, want Unadmitted", x.status())
	}
	if st := r.set.Stats(); st.Unadmitted != 2 || w.Permits() != 1 {
		t.Fatalf("%d unadmitted, %d permits of the session; want 2 and 1", st.Unadmitted, w.Permits())
	}
	r.release(holder, hl)
	if p := r.poll(w, 1, 1); p.status() != abi.StatusOK {
		t.Fatalf("the pending ticket after the release: %v", p.status())
	}
	if x := r.submit(w, req{id: 3, rev: 1, hashes: []int{9}}); x.status() != abi.StatusMiss {
		t.Fatalf("a ticket after the permit came back: %v, want Miss", x.status())
	}
	r.idle()
}

// Tombs remembers the newest MaxTombstones ids and forgets the oldest.
func TestTombstonesForgetTheOldestBeyondTheirBound(t *testing.T) {
	var tb ticket.Tombs
	if tb.Has(1) {
		t.Fatal("the zero Tombs has an id")
	}
	for id := uint64(1); id <= ticket.MaxTombstones+10; id++ {
		tb.Add(id)
	}
	for id := uint64(1); id <= ticket.MaxTombstones+10; id++ {
		if want := id > 10; tb.Has(id) != want {
			t.Fatalf("id %d remembered %v, want %v", id, tb.Has(id), want)
		}
	}
}

// A late reference to a ticket expired longer ago than MaxTombstones
// expiries is retired (Invalid op_id), no longer Timeout.
func TestAnExpiryBeyondTheTombstoneRingIsForgotten(t *testing.T) {
	r := newRig(t, rigSpec{})
	r.publish(0)
	b := r.open()
	for id := uint64(1); id <= ticket.MaxTombstones+1; id++ {
		r.submit(b, req{id: id, rev: 1, flags: abi.QueryPrepare, hashes: []int{0}})
		r.now = r.now.Add(expiry)
		r.set.Sweep(b)
	}
	if p := r.poll(b, 1, 1); p.status() != abi.StatusInvalid || p.derr.Field != abi.FieldOpID {
		t.Fatalf("poll of the oldest: %v, want Invalid op_id", p.status())
	}
	if p := r.poll(b, 2, 1); p.status() != abi.StatusTimeout {
		t.Fatalf("poll of the second oldest: %v, want Timeout", p.status())
	}
	r.idle()
}
