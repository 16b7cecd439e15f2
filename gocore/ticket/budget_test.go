package ticket_test

import (
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/ticket"
)

// Tickets short of byte budget wait in FIFO order: freed budget goes to
// the oldest waiter first, a later one never overtakes it even when it
// alone would fit, and a new ticket queues behind them.
func TestBudgetWaitersAreGrantedInFIFOOrderWithoutOvertaking(t *testing.T) {
	r := newRig(t, rigSpec{budget: 2 * blockBytes})
	r.publish(0, 1, 2, 3, 4, 100, 101)
	h1, h2 := r.open(), r.open()
	l1 := r.submit(h1, req{id: 1, rev: 1, hashes: []int{100}}).res.LeaseID
	l2 := r.submit(h2, req{id: 1, rev: 1, hashes: []int{101}}).res.LeaseID
	if l1 == 0 || l2 == 0 || r.leases.Reserved() != 2*blockBytes {
		t.Fatalf("holders: leases %d %d, %d bytes reserved", l1, l2, r.leases.Reserved())
	}
	a, b, c := r.open(), r.open(), r.open()
	if x := r.submit(a, req{id: 1, rev: 1, hashes: []int{0, 1}}); x.status() != abi.StatusLoading || x.resp.Arg0 != 2 {
		t.Fatalf("a (two blocks): %v %d, want Loading with 2 found", x.status(), x.resp.Arg0)
	}
	if x := r.submit(b, req{id: 1, rev: 1, hashes: []int{2}}); x.status() != abi.StatusLoading {
		t.Fatalf("b (one block): %v, want Loading", x.status())
	}
	r.check()
	// One block frees: a (two blocks) still does not fit; b would, but
	// must not go first, and neither may a newcomer.
	r.release(h1, l1)
	if x := r.poll(b, 1, 1); x.status() != abi.StatusLoading {
		t.Fatalf("b after one block freed: %v, want Loading (a is ahead of it)", x.status())
	}
	if x := r.submit(c, req{id: 1, rev: 1, hashes: []int{3}}); x.status() != abi.StatusLoading {
		t.Fatalf("a newcomer with room for it: %v, want Loading behind the waiters", x.status())
	}
	if r.leases.Waiting() != 3 || r.leases.Leases() != 1 || len(r.host.signals) != 0 {
		t.Fatalf("%d waiting, %d leases, signals %v; want 3, 1, none", r.leases.Waiting(), r.leases.Leases(), r.host.signals)
	}
	// Two blocks free: a is granted and woken; b and c wait on.
	r.release(h2, l2)
	if r.host.signals[a] != 1 || r.host.signals[b] != 0 || r.host.signals[c] != 0 || r.leases.Waiting() != 2 {
		t.Fatalf("signals a %d b %d c %d, %d waiting; want 1 0 0 and 2", r.host.signals[a], r.host.signals[b], r.host.signals[c], r.leases.Waiting())
	}
	xa := r.poll(a, 1, 1)
	if xa.status() != abi.StatusOK || xa.res.Hits != 2 {
		t.Fatalf("a: %v %+v", xa.status(), xa.res)
	}
	if x := r.poll(b, 1, 1); x.status() != abi.StatusLoading {
		t.Fatalf("b while a holds the budget: %v", x.status())
	}
	// a's release admits b and c in one round, in order.
	r.release(a, xa.res.LeaseID)
	if r.host.signals[b] != 1 || r.host.signals[c] != 1 || r.leases.Waiting() != 0 {
		t.Fatalf("after a's release: signals b %d c %d, %d waiting", r.host.signals[b], r.host.signals[c], r.leases.Waiting())
	}
	for i, bk := range []*ticketBook{b, c} {
		x := r.poll(bk, 1, 1)
		if x.status() != abi.StatusOK || x.res.Hits != 1 || r.leased(bk, x.res.LeaseID)[0] != r.block(2+i) {
			t.Fatalf("waiter %d: %v %+v", i, x.status(), x.res)
		}
	}
	r.check()
	r.idle()
}

// A lease larger than the whole budget could never be granted: it is
// refused (Unadmitted), not queued, where it would hold every later
// ticket behind it until it expired.
func TestALeaseLargerThanTheWholeBudgetIsRefusedNotQueued(t *testing.T) {
	r := newRig(t, rigSpec{budget: blockBytes})
	r.publish(0, 1)
	b := r.open()
	x := r.submit(b, req{id: 1, rev: 1, hashes: []int{0, 1}})
	if x.status() != abi.StatusUnadmitted || r.leases.Waiting() != 0 || r.set.Permits() != 0 || b.Live() != 0 {
		t.Fatalf("two blocks over a one-block budget: %v, %d waiting, %d permits, %d live", x.status(), r.leases.Waiting(), r.set.Permits(), b.Live())
	}
	if st := r.set.Stats(); st.Unadmitted != 1 || st.Queries != 0 {
		t.Fatalf("stats %+v, want one Unadmitted and no query", st)
	}
	if y := r.submit(b, req{id: 2, rev: 1, hashes: []int{0}}); y.status() != abi.StatusOK {
		t.Fatalf("one block after: %v, want Ok (nothing queued ahead)", y.status())
	}
	r.idle()
}

// A waiter pins nothing, so its chain can leave RAM while it waits; when
// budget frees it settles Miss and leaves the queue, and the waiter behind
// it is admitted in the same round.
func TestAWaiterWhoseChainLeftRAMMissesAndUnblocksTheQueue(t *testing.T) {
	r := newRig(t, rigSpec{budget: blockBytes})
	r.publish(100)
	r.publishNS(ns2, 0)
	r.publish(1)
	holder := r.open()
	hl := r.submit(holder, req{id: 1, rev: 1, hashes: []int{100}}).res.LeaseID
	a, b := r.open(), r.open()
	if x := r.submit(a, req{id: 1, rev: 1, ns: ns2, hashes: []int{0}}); x.status() != abi.StatusLoading {
		t.Fatalf("a: %v", x.status())
	}
	if x := r.submit(b, req{id: 1, rev: 1, hashes: []int{1}}); x.status() != abi.StatusLoading {
		t.Fatalf("b: %v", x.status())
	}
	// A waiter pins nothing: its block can leave RAM while it waits.
	if d := r.tiers.Drop(func(ns abi.Namespace) bool { return ns == ns2 }, true); d.RAMBlocks != 1 {
		t.Fatalf("drop: %+v, want a's block dropped (a waiter holds no pin)", d)
	}
	r.release(holder, hl)
	if x := r.poll(a, 1, 1); x.status() != abi.StatusMiss {
		t.Fatalf("a after its block left: %v, want Miss", x.status())
	}
	x := r.poll(b, 1, 1)
	if x.status() != abi.StatusOK || r.host.signals[a] != 1 || r.host.signals[b] != 1 {
		t.Fatalf("b: %v, signals a %d b %d; want Ok and both woken", x.status(), r.host.signals[a], r.host.signals[b])
	}
	r.idle()
}

// A tenant's figures count its tickets: every answer, and the ones that
// queued (answered Loading first) apart, with their time from submission
// to the answer on the Set's clock.
func TestATenantsTicketsThatQueuedAreCountedApart(t *testing.T) {
	r := newRig(t, rigSpec{budget: blockBytes})
	r.publish(0, 1)
	var tc ticket.TenantCounts
	h, w := r.open(), r.open()
	h.Tenant, w.Tenant = &tc, &tc
	l := r.submit(h, req{id: 1, rev: 1, hashes: []int{0}}).res.LeaseID
	if l == 0 || tc.Answered != 1 || tc.Queued != 0 || tc.Queries != 1 {
		t.Fatalf("a ticket answered at once: lease %d, counts %+v; want 1 answered, none queued", l, tc)
	}
	if x := r.submit(w, req{id: 1, rev: 1, hashes: []int{1}}); x.status() != abi.StatusLoading {
		t.Fatalf("a second ticket over the budget: %v, want Loading", x.status())
	}
	r.now = r.now.Add(3 * time.Millisecond)
	r.release(h, l)
	if x := r.poll(w, 1, 1); x.status() != abi.StatusOK {
		t.Fatalf("the waiter after the release: %v", x.status())
	}
	if tc.Answered != 2 || tc.Queued != 1 || tc.QueueNanos < uint64(3*time.Millisecond) || tc.WaitNanos < tc.QueueNanos {
		t.Fatalf("counts %+v; want 2 answered, 1 queued for at least 3 ms", tc)
	}
}
