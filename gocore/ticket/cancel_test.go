package ticket_test

import (
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// A ticket the host holds at the Reservation point stays pending, holding
// no lease, until Resume; then it resolves, its client is woken, and the
// next poll delivers it.
func TestAReservationHoldKeepsTheTicketPendingUntilResume(t *testing.T) {
	r := newRig(t, rigSpec{})
	r.publish(0, 1)
	b := r.open()
	r.host.hold = true
	if x := r.submit(b, req{id: 1, rev: 1, hashes: []int{0, 1}}); x.status() != abi.StatusLoading || x.resp.Arg0 != 2 {
		t.Fatalf("held: %v %d, want Loading with 2 found", x.status(), x.resp.Arg0)
	}
	if len(r.host.held) != 1 || r.leases.Leases() != 0 || r.pins() != 0 || r.set.Permits() != 1 {
		t.Fatalf("%d held, %d leases, %d pins, %d permits; want 1, 0, 0, 1", len(r.host.held), r.leases.Leases(), r.pins(), r.set.Permits())
	}
	if x := r.poll(b, 1, 1); x.status() != abi.StatusLoading || len(r.host.held) != 1 {
		t.Fatalf("poll while held: %v, %d holds; want Loading and no second hold", x.status(), len(r.host.held))
	}
	// A miss never reaches the Reservation point.
	if x := r.submit(b, req{id: 2, rev: 1, hashes: []int{9}}); x.status() != abi.StatusMiss || len(r.host.held) != 1 {
		t.Fatalf("a miss: %v, %d holds", x.status(), len(r.host.held))
	}
	r.set.Resume(r.host.held[0])
	if r.host.signals[b] != 1 || r.leases.Leases() != 1 {
		t.Fatalf("after Resume: %d signals, %d leases; want 1 and 1", r.host.signals[b], r.leases.Leases())
	}
	x := r.poll(b, 1, 1)
	if x.status() != abi.StatusOK || x.res.Hits != 2 || x.res.OpID != 1 {
		t.Fatalf("poll after Resume: %v %+v", x.status(), x.res)
	}
	r.release(b, x.res.LeaseID)
	r.idle()
}

// A held ticket revoked meanwhile is left alone by Resume: no lease, no
// wake-up.
func TestResumeOfARevokedTicketDoesNothing(t *testing.T) {
	r := newRig(t, rigSpec{})
	r.publish(0)
	b := r.open()
	r.host.hold = true
	r.submit(b, req{id: 1, rev: 1, hashes: []int{0}})
	if c := r.cancel(b, 1, 1); c.status() != abi.StatusOK {
		t.Fatalf("cancel: %v", c.status())
	}
	r.set.Resume(r.host.held[0])
	if r.leases.Leases() != 0 || r.host.signals[b] != 0 || r.pins() != 0 || r.set.Permits() != 0 {
		t.Fatalf("Resume of a cancelled ticket: %d leases, %d signals, %d pins, %d permits", r.leases.Leases(), r.host.signals[b], r.pins(), r.set.Permits())
	}
	r.idle()
}

// Cancel revokes a live ticket: its undelivered lease and pins go at once,
// its permit is released, and the id is retired.
func TestCancelRevokesALiveTicketAndItsUndeliveredLease(t *testing.T) {
	r := newRig(t, rigSpec{})
	blks := r.publish(0, 1)
	b := r.open()
	if x := r.submit(b, req{id: 3, rev: 1, flags: abi.QueryPrepare, hashes: []int{0, 1}}); x.status() != abi.StatusCandidates || x.res.LeaseID != 0 {
		t.Fatalf("preparation: %v %+v, want Candidates with no lease id shown", x.status(), x.res)
	}
	if blks[0].Pins() != 1 || r.set.Permits() != 1 {
		t.Fatalf("the ready preparation: %d pins, %d permits", blks[0].Pins(), r.set.Permits())
	}
	c := r.cancel(b, 3, 1)
	if c.status() != abi.StatusOK || c.resp.Arg0 != 1 {
		t.Fatalf("cancel: %v %d, want Ok 1", c.status(), c.resp.Arg0)
	}
	if r.leases.Leases() != 0 || blks[0].Pins() != 0 || blks[1].Pins() != 0 || r.set.Permits() != 0 || r.set.Draining() != 0 {
		t.Fatalf("after cancel: %d leases, pins %d %d, %d permits, %d draining", r.leases.Leases(), blks[0].Pins(), blks[1].Pins(), r.set.Permits(), r.set.Draining())
	}
	for name, x := range map[string]answer{"poll": r.poll(b, 3, 1), "cancel": r.cancel(b, 3, 1)} {
		if x.status() != abi.StatusInvalid || x.derr.Field != abi.FieldOpID {
			t.Fatalf("%s after cancel: %v, want Invalid op_id", name, x.status())
		}
	}
	if x := r.claim(b, 3, 1); x.status() != abi.StatusUnadmitted {
		t.Fatalf("claim after cancel: %v, want Unadmitted", x.status())
	}
	r.idle()
}

// Cancelling the head of the budget queue admits the waiter behind it.
func TestCancelOfTheHeadWaiterAdmitsTheNext(t *testing.T) {
	r := newRig(t, rigSpec{budget: 2 * blockBytes})
	r.publish(0, 1, 2, 100)
	holder := r.open()
	r.submit(holder, req{id: 1, rev: 1, hashes: []int{100}})
	a, b := r.open(), r.open()
	r.submit(a, req{id: 1, rev: 1, hashes: []int{0, 1}})
	r.submit(b, req{id: 1, rev: 1, hashes: []int{2}})
	if r.leases.Waiting() != 2 {
		t.Fatalf("%d waiting, want 2", r.leases.Waiting())
	}
	r.cancel(a, 1, 1)
	if r.leases.Waiting() != 0 || r.host.signals[b] != 1 {
		t.Fatalf("after cancelling the head: %d waiting, b signalled %d", r.leases.Waiting(), r.host.signals[b])
	}
	if x := r.poll(b, 1, 1); x.status() != abi.StatusOK {
		t.Fatalf("b: %v", x.status())
	}
	r.idle()
}

// Claim consumes only the exact live revision of a ready preparation;
// anything else answers Unadmitted and leaves the ticket as it was.
func TestClaimConsumesOnlyTheExactRevisionOfAReadyPreparation(t *testing.T) {
	r := newRig(t, rigSpec{})
	r.publish(0)
	b := r.open()
	r.submit(b, req{id: 1, rev: 2, flags: abi.QueryPrepare, hashes: []int{0}})
	r.submit(b, req{id: 2, rev: 1, hashes: []int{5}}) // a Miss, retired
	if x := r.poll(b, 1, 2); x.status() != abi.StatusCandidates || x.res.Hits != 1 || x.res.LeaseID != 0 || b.Live() != 1 {
		t.Fatalf("poll of the preparation: %v %+v, %d live; want Candidates without consuming it", x.status(), x.res, b.Live())
	}
	for name, x := range map[string]answer{"an older revision": r.claim(b, 1, 1), "a retired id": r.claim(b, 2, 1)} {
		if x.status() != abi.StatusUnadmitted {
			t.Fatalf("claim of %s: %v, want Unadmitted", name, x.status())
		}
	}
	if b.Live() != 1 || r.leases.Leases() != 1 {
		t.Fatal("a wrong claim touched the preparation")
	}
	x := r.claim(b, 1, 2)
	if x.status() != abi.StatusOK || x.res.Hits != 1 || x.res.LeaseID == 0 || b.Live() != 0 {
		t.Fatalf("claim: %v %+v, %d live", x.status(), x.res, b.Live())
	}
	if st := r.set.Stats(); st.Queries != 2 || st.QueryHits != 1 || st.Unadmitted != 2 {
		t.Fatalf("stats %+v", st)
	}
	r.idle()
}

// Session teardown revokes every ticket of the session, whatever its
// state — ready with a lease, waiting for budget, held — and leaves other
// sessions' tickets alone.
func TestTeardownRevokesEveryTicketOfTheSession(t *testing.T) {
	r := newRig(t, rigSpec{budget: 2 * blockBytes})
	r.publish(0, 1, 2, 3)
	b, other := r.open(), r.open()
	r.submit(b, req{id: 1, rev: 1, flags: abi.QueryPrepare, hashes: []int{0}})     // ready, leased
	r.submit(other, req{id: 1, rev: 1, flags: abi.QueryPrepare, hashes: []int{1}}) // ready, leased: the budget is full
	r.submit(b, req{id: 2, rev: 1, hashes: []int{2}})                              // waiting for budget
	r.host.hold = true
	r.submit(b, req{id: 3, rev: 1, hashes: []int{3}}) // held at Reservation
	if b.Live() != 3 || b.Permits() != 3 || r.leases.Waiting() != 1 || len(r.host.held) != 1 {
		t.Fatalf("before teardown: %d live, %d permits, %d waiting, %d held", b.Live(), b.Permits(), r.leases.Waiting(), len(r.host.held))
	}
	r.set.RevokeAll(b)
	if b.Live() != 0 || b.Permits() != 0 || r.leases.Waiting() != 0 || r.leases.Leases() != 1 {
		t.Fatalf("after teardown: %d live, %d permits, %d waiting, %d leases", b.Live(), b.Permits(), r.leases.Waiting(), r.leases.Leases())
	}
	if other.Live() != 1 || r.set.Permits() != 1 {
		t.Fatal("teardown touched another session's ticket")
	}
	r.set.Resume(r.host.held[0]) // the continuation of a revoked ticket finds it gone
	if r.leases.Leases() != 1 || r.host.signals[b] != 0 {
		t.Fatalf("Resume after teardown: %d leases, %d signals", r.leases.Leases(), r.host.signals[b])
	}
	r.check()
	r.idle()
}
