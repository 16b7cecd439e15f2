package cache

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/ticket"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// ssdRigClock is demoteFour with a fake expiry clock: 4 blocks of RAM over
// an SSD tier; hash(0..3) are published, then hash(4..7) push them to SSD.
func ssdRigClock(t *testing.T, spec Spec) (*rig, *fakeClock) {
	t.Helper()
	blockBytes := uint64(tLayers * tPageBytes)
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	spec.Tiers.RAM.CapacityBytes = 4 * blockBytes
	spec.Tiers.SSD = &ssd.Spec{Dir: ssdDir(t), CapacityBytes: 64 * (ssd.HeaderBytes + blockBytes), SlotBytes: blockBytes}
	spec.Clock = clock.Now
	r := newRigWith(t, spec)
	a, amem := r.open()
	for p := 0; p < 8; p++ {
		fill(amem, p, byte(40+p))
	}
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 4), pg(4)), 0)
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(4, 4), []uint32{4, 5, 6, 7}), 0)
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Counters().SSD.Writes < 4 {
		if time.Now().After(deadline) {
			t.Fatal("demotions not durable")
		}
		time.Sleep(time.Millisecond)
	}
	r.close(a)
	return r, clock
}

// drainSSD completes every SSD read in flight.
func drainSSD(t *testing.T, r *rig) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Loading() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("SSD reads never completed")
		}
		r.svc.Complete(64, func(uint32, abi.Message) {})
	}
}

func TestWaitForFullPrefixAnswersLoadingThenTheWholeChainOnPoll(t *testing.T) {
	r, _ := ssdRigClock(t, Spec{})
	b, bmem := r.open()
	resp := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryWaitFullPref, 7, 0, 0, 0, hs(0, 4)...), 0)
	if status(resp) != abi.StatusLoading {
		t.Fatalf("submit: %v, want Loading (hash 0..3 are on SSD)", status(resp))
	}
	// The dispatcher does not wait: a poll before the reads land is Loading.
	if p := r.call2(b, abi.CmdPoll, make([]byte, 64), 1, 1); status(p) != abi.StatusLoading && status(p) != abi.StatusOK {
		t.Fatalf("early poll: %v", status(p))
	}
	drainSSD(t, r)
	p := r.call2(b, abi.CmdPoll, make([]byte, 64), 1, 1)
	if status(p) != abi.StatusOK || p.Arg0 != 4 || p.Arg1 == 0 {
		t.Fatalf("poll after the reads: %v hits %d lease %d, want Ok 4", status(p), p.Arg0, p.Arg1)
	}
	res := b.Slot()[abi.SlotDescOffset:]
	if le := binary.LittleEndian.Uint64(res[40:]); le != 1 {
		t.Fatalf("result op_id %d, want 1", le)
	}
	// The lease restores the SSD bytes exactly.
	op := r.call(b, abi.CmdRestore, restoreDesc(p.Arg1, []uint32{0, 3}, []uint32{0, 1}), 0)
	if done := r.wait(b, op.Arg0); status(done) != abi.StatusOK {
		t.Fatalf("restore: %v", status(done))
	}
	check(t, bmem, 0, 40)
	check(t, bmem, 1, 43)
	// Delivered: the ticket is retired; a second poll submits nothing.
	if again := r.call2(b, abi.CmdPoll, nil, 1, 1); status(again) != abi.StatusInvalid || abi.Field(again.Arg0) != abi.FieldOpID {
		t.Fatalf("poll of a retired ticket: %v %v", status(again), abi.Field(again.Arg0))
	}
	r.call(b, abi.CmdRelease, nil, p.Arg1)
	r.close(b)
	r.idle()
}

func TestWithoutWaitTheRAMPrefixAnswersAtOnceAndTheRestWarms(t *testing.T) {
	r, _ := ssdRigClock(t, Spec{})
	b, _ := r.open()
	// hash 4..7 are in RAM, 0..3 on SSD: a chain 4,5 then SSD-only blocks
	// is not a real chain, so ask for 0..3 (all SSD): a Miss now ...
	resp := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, 0, 0, 0, 0, 0, hs(0, 4)...), 0)
	if status(resp) != abi.StatusMiss {
		t.Fatalf("submit: %v, want Miss (no wait: the RAM prefix is empty)", status(resp))
	}
	if r.svc.tiers.Warming() == 0 {
		t.Fatal("the SSD run was not warmed")
	}
	drainSSD(t, r)
	if r.svc.tiers.Warming() != 0 {
		t.Fatalf("warming bytes %d after the reads", r.svc.tiers.Warming())
	}
	// ... and hits on the next lookup.
	resp = r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 2, 1, 0, 0, 0, 0, 0, hs(0, 4)...), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 4 {
		t.Fatalf("second lookup: %v hits %d, want Ok 4", status(resp), resp.Arg0)
	}
	r.call(b, abi.CmdRelease, nil, resp.Arg1)
	r.close(b)
	r.idle()
}

func TestWarmupIsRetiredAtOnceAndSkipsBeyondItsBudget(t *testing.T) {
	r, _ := ssdRigClock(t, Spec{Tiers: tier.Spec{WarmupBudget: uint64(tLayers * tPageBytes)}}) // one block
	b, _ := r.open()
	resp := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryWarmup, 0, 0, 0, 0, hs(0, 4)...), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 1 {
		t.Fatalf("warmup: %v warming %d, want Ok 1 (the budget holds one block)", status(resp), resp.Arg0)
	}
	if p := r.call2(b, abi.CmdPoll, nil, 1, 1); status(p) != abi.StatusInvalid {
		t.Fatalf("poll of a warmup: %v, want Invalid (retired without polling)", status(p))
	}
	resp = r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 2, 1, abi.QueryWarmup, 0, 0, 0, 0, hs(1, 3)...), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 0 || r.svc.Stats().WarmupSkipped != 1 {
		t.Fatalf("warmup over budget: %v warming %d skipped %d, want Ok 0 and one skip", status(resp), resp.Arg0, r.svc.Stats().WarmupSkipped)
	}
	drainSSD(t, r)
	r.close(b)
	r.idle()
}

func TestDiscoveryCountsSSDBlocksWithoutALease(t *testing.T) {
	r, _ := ssdRigClock(t, Spec{})
	b, _ := r.open()
	resp := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryDiscover, 0, 0, 0, 0, hs(0, 6)...), 0)
	if status(resp) != abi.StatusCandidates || resp.Arg0 != 4 || resp.Arg1 != 0 {
		t.Fatalf("discover: %v %d %d, want Candidates 4 (SSD) and no lease", status(resp), resp.Arg0, resp.Arg1)
	}
	if st := r.svc.Stats(); st.Leases != 0 || st.ReservedBytes != 0 || st.Tickets != 0 {
		t.Fatalf("discovery left state: %+v", st)
	}
	r.close(b)
	r.idle()
}

// Cancel while the ticket's SSD reads run: its permit is held until they
// finish, then released without another poll; nothing stays pinned.
func TestCancelledReadsDrainHoldingTheirPermit(t *testing.T) {
	r, _ := ssdRigClock(t, Spec{MaxOpsPerSession: 1})
	b, _ := r.open()
	resp := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryWaitFullPref, 0, 0, 0, 0, hs(0, 4)...), 0)
	if status(resp) != abi.StatusLoading {
		t.Fatalf("submit: %v", status(resp))
	}
	if c := r.call2(b, abi.CmdCancelQuery, nil, 1, 1); status(c) != abi.StatusOK {
		t.Fatalf("cancel: %v", status(c))
	}
	if r.svc.tickets.Draining() != 1 {
		t.Fatalf("draining %d, want 1 (reads still in flight hold the permit)", r.svc.tickets.Draining())
	}
	// The permit is held: a new ticket is refused while the reads run.
	if resp := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 2, 1, 0, 0, 0, 0, 0, hash(9)), 0); status(resp) != abi.StatusUnadmitted {
		t.Fatalf("ticket during the drain: %v, want Unadmitted", status(resp))
	}
	// A cancelled ticket is retired: old polls and cancels never touch it.
	if p := r.call2(b, abi.CmdPoll, nil, 1, 1); status(p) != abi.StatusInvalid || abi.Field(p.Arg0) != abi.FieldOpID {
		t.Fatalf("poll after cancel: %v %v", status(p), abi.Field(p.Arg0))
	}
	drainSSD(t, r)
	if r.svc.tickets.Draining() != 0 || r.svc.Stats().Pins != 0 {
		t.Fatalf("after the drain: draining %d pins %d", r.svc.tickets.Draining(), r.svc.Stats().Pins)
	}
	if resp := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 3, 1, 0, 0, 0, 0, 0, hash(9)), 0); status(resp) != abi.StatusMiss {
		t.Fatalf("ticket after the drain: %v, want Miss", status(resp))
	}
	r.close(b)
	r.idle()
}

// An expired ticket with an undelivered lease (resolved asynchronously)
// drops it and leaves a tombstone: a late poll is Timeout.
func TestExpiryDropsTheUndeliveredLeaseAndTombstones(t *testing.T) {
	r, clock := ssdRigClock(t, Spec{})
	b, _ := r.open()
	r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryWaitFullPref, 0, 0, 0, 0, hs(0, 4)...), 0)
	drainSSD(t, r)
	if st := r.svc.Stats(); st.Leases != 1 {
		t.Fatalf("leases %d, want the undelivered one", st.Leases)
	}
	clock.Advance(ticket.DefaultOpExpiry)
	r.svc.Complete(64, func(uint32, abi.Message) {})
	if st := r.svc.Stats(); st.Leases != 0 || st.Pins != 0 || st.Tickets != 0 || st.Expired != 1 {
		t.Fatalf("after expiry: %+v", st)
	}
	for _, cmd := range []abi.Command{abi.CmdPoll, abi.CmdCancelQuery} {
		if p := r.call2(b, cmd, nil, 1, 1); status(p) != abi.StatusTimeout {
			t.Fatalf("%v after expiry: %v, want Timeout", cmd, status(p))
		}
	}
	if p := r.call2(b, abi.CmdClaim, nil, 1, 1); status(p) != abi.StatusUnadmitted {
		t.Fatalf("claim after expiry: %v, want Unadmitted", status(p))
	}
	// Resubmitting the expired id submits nothing.
	if p := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 2, 0, 0, 0, 0, 0, hash(0)), 0); status(p) != abi.StatusTimeout {
		t.Fatalf("resubmit after expiry: %v, want Timeout", status(p))
	}
	r.close(b)
	r.idle()
}

func TestAnUnpolledRestoreResultExpiresToATombstone(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20}}, Clock: clock.Now})
	a, _ := r.open()
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 1), pg(1)), 0)
	q := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0)
	op := r.call(a, abi.CmdRestore, restoreDesc(q.Arg1, []uint32{0}, []uint32{3}), 0)
	for r.svc.restores.done == 0 {
		r.svc.Complete(64, func(uint32, abi.Message) {})
	}
	clock.Advance(ticket.DefaultOpExpiry)
	if p := r.call(a, abi.CmdRestorePoll, nil, op.Arg0); status(p) != abi.StatusTimeout {
		t.Fatalf("restore poll after expiry: %v, want Timeout", status(p))
	}
	if st := r.svc.Stats(); st.Operations != 0 || st.Expired != 1 {
		t.Fatalf("after expiry: %+v", st)
	}
	r.call(a, abi.CmdRelease, nil, q.Arg1)
	r.close(a)
	r.idle()
}

// Lease and restore ids of one Manager lifetime are unknown to the next.
func TestIDsOfAnotherEpochAreUnknown(t *testing.T) {
	a, b := lease.FirstID(1), lease.FirstID(2)
	if a == b || a&0xffff_ffff_ffff != 1 || b&0xffff_ffff_ffff != 1 {
		t.Fatalf("id bases %#x %#x", a, b)
	}
	r := newRig(t, 1<<20)
	s, _ := r.open()
	r.call(s, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 1), pg(1)), 0)
	q := r.call(s, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0)
	if q.Arg1 < lease.FirstID(tEpoch) {
		t.Fatalf("lease id %#x below this epoch's base %#x", q.Arg1, lease.FirstID(tEpoch))
	}
	if p := r.call(s, abi.CmdRelease, nil, q.Arg1^1<<50); status(p) != abi.StatusInvalid {
		t.Fatalf("release of another lifetime's id: %v", status(p))
	}
	r.call(s, abi.CmdRelease, nil, q.Arg1)
	r.close(s)
	r.idle()
}

func TestDistinctLookupsAreEstimated(t *testing.T) {
	r := newRig(t, 1<<20)
	s, _ := r.open()
	for i := 0; i < 300; i++ {
		r.call(s, abi.CmdQueryBundle, queryDesc(ns1, hash(i%100)), 0) // 100 distinct, each 3 times
	}
	// Recovery reads are not counted again.
	r.call(s, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryRecovery, 0, 0, 0, 1, hash(500)), 0)
	st := r.svc.Stats()
	if st.Lookups != 300 || st.DistinctLookups < 95 || st.DistinctLookups > 105 {
		t.Fatalf("lookups %d distinct %d, want 300 and about 100", st.Lookups, st.DistinctLookups)
	}
	r.close(s)
	r.idle()
}

// A ticket whose lease alone exceeds the whole byte budget could never be
// admitted: it answers Unadmitted instead of waiting at the head of the
// queue (where it would hold every later ticket until it expired).
func TestALeaseLargerThanTheBudgetIsRefusedNotQueued(t *testing.T) {
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20}}, LeaseBudget: tLayers * tPageBytes})
	s, _ := r.open()
	r.call(s, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 2), pg(2)), 0)
	if resp := r.call(s, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, 0, 0, 0, 0, 0, hs(0, 2)...), 0); status(resp) != abi.StatusUnadmitted {
		t.Fatalf("two blocks over a one-block budget: %v, want Unadmitted", status(resp))
	}
	resp := r.call(s, abi.CmdQueryBundle, ticketDesc(ns1, 2, 1, 0, 0, 0, 0, 0, hs(0, 1)...), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 1 {
		t.Fatalf("one block: %v %d, want Ok 1 (nothing queued ahead of it)", status(resp), resp.Arg0)
	}
	// The budget is full now: the next one waits, and is admitted on release.
	if w := r.call(s, abi.CmdQueryBundle, ticketDesc(ns1, 3, 1, 0, 0, 0, 0, 0, hs(0, 1)...), 0); status(w) != abi.StatusLoading {
		t.Fatalf("over the budget: %v, want Loading", status(w))
	}
	r.call(s, abi.CmdRelease, nil, resp.Arg1)
	p := r.call2(s, abi.CmdPoll, make([]byte, 64), 3, 1)
	if status(p) != abi.StatusOK || p.Arg0 != 1 {
		t.Fatalf("after the release: %v %d, want Ok 1", status(p), p.Arg0)
	}
	r.call(s, abi.CmdRelease, nil, p.Arg1)
	r.close(s)
	r.idle()
}

// A ticket without the wait flag warms its chain's SSD tail; the reads make
// room in RAM and must not evict the RAM prefix the ticket then leases
// (the restore would return other bytes).
func TestWarmingNeverEvictsThePrefixATicketLeases(t *testing.T) {
	r, _ := ssdRigClock(t, Spec{Tiers: tier.Spec{Eviction: "lru"}}) // RAM: hash 4..7 (LRU order); SSD: hash 0..3
	b, bmem := r.open()
	chain := []abi.BlockHash{hash(4), hash(5), hash(0), hash(1)}
	resp := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, 0, 0, 0, 0, 0, chain...), 0)
	if status(resp) != abi.StatusOK || resp.Arg0 != 2 {
		t.Fatalf("submit: %v hits %d, want Ok 2 (the RAM prefix)", status(resp), resp.Arg0)
	}
	drainSSD(t, r) // the warming reads land first: in frames they must not share with the lease
	op := r.call(b, abi.CmdRestore, restoreDesc(resp.Arg1, []uint32{0, 1}, []uint32{0, 1}), 0)
	if done := r.wait(b, op.Arg0); status(done) != abi.StatusOK {
		t.Fatalf("restore: %v", status(done))
	}
	check(t, bmem, 0, 44)
	check(t, bmem, 1, 45)
	r.call(b, abi.CmdRelease, nil, resp.Arg1)
	r.close(b)
	r.idle()
}

// A ticket waiting for byte budget whose blocks went to SSD meanwhile
// starts reads when the budget frees; it must be resolved when they land,
// not left at the head of the budget queue, where it would block every
// waiter behind it.
func TestABudgetWaiterWhoseBlocksWereDemotedResolvesAfterItsReads(t *testing.T) {
	blockBytes := uint64(tLayers * tPageBytes)
	r, _ := ssdRigClock(t, Spec{LeaseBudget: 2 * blockBytes, Tiers: tier.Spec{Eviction: "lru"}}) // RAM: hash 4..7; SSD: hash 0..3
	y, ymem := r.open()
	x, _ := r.open()
	hold := r.call(y, abi.CmdQueryBundle, queryDesc(ns1, hash(6)), 0)
	if status(hold) != abi.StatusOK {
		t.Fatalf("hold: %v", status(hold))
	}
	if w := r.call(x, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryWaitFullPref, 0, 0, 0, 0, hash(4), hash(5)), 0); status(w) != abi.StatusLoading {
		t.Fatalf("waiter: %v, want Loading (budget)", status(w))
	}
	// Push hash 4 and 5 out of RAM (to SSD) while the ticket waits.
	fill(ymem, 0, 88)
	fill(ymem, 1, 89)
	r.call(y, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(8), hash(9)}, pg(2)), 0)
	deadline := time.Now().Add(10 * time.Second)
	for r.svc.tiers.Counters().SSD.Writes < 6 {
		if time.Now().After(deadline) {
			t.Fatal("demotions not durable")
		}
		time.Sleep(time.Millisecond)
	}
	if r.svc.idx.Lookup(index.Key{NS: ns1, Hash: hash(4)}) != nil {
		t.Skip("hash 4 stayed in RAM: the eviction order differs from what this test arranges")
	}
	r.call(y, abi.CmdRelease, nil, hold.Arg1) // budget frees: the waiter starts reads
	drainSSD(t, r)
	p := r.call2(x, abi.CmdPoll, make([]byte, 64), 1, 1)
	if status(p) != abi.StatusOK || p.Arg0 != 2 {
		t.Fatalf("after the reads: %v hits %d, want Ok 2", status(p), p.Arg0)
	}
	r.call(x, abi.CmdRelease, nil, p.Arg1)
	r.close(x)
	r.close(y)
	r.idle()
}

// A preparation that settled Unadmitted (its lease exceeds the budget) is
// not preparing: Claim delivers the Unadmitted and retires it rather than
// answering Loading until expiry. The test prepares four SSD blocks under
// a one-block budget and checks that the Claim answers Unadmitted and
// leaves no ticket live.
func TestClaimOfAPreparationSettledUnadmittedDeliversIt(t *testing.T) {
	r, _ := ssdRigClock(t, Spec{LeaseBudget: tLayers * tPageBytes})
	b, _ := r.open()
	resp := r.call(b, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryPrepare|abi.QueryWaitFullPref, 0, 0, 0, 0, hs(0, 4)...), 0)
	if status(resp) != abi.StatusLoading {
		t.Fatalf("submit: %v", status(resp))
	}
	drainSSD(t, r)
	if c := r.call2(b, abi.CmdClaim, make([]byte, 64), 1, 1); status(c) != abi.StatusUnadmitted {
		t.Fatalf("claim: %v, want Unadmitted (four blocks never fit a one-block budget)", status(c))
	}
	if st := r.svc.Stats(); st.Tickets != 0 {
		t.Fatalf("%d tickets live after the claim", st.Tickets)
	}
	r.close(b)
	r.idle()
}

// An expiry found by a Poll frees what the ticket reserved, and budget
// waiters are admitted at once, not at the next sweep: with a one-block
// budget held by an expired preparation, the waiting ticket's Poll right
// after the preparation's Timeout answers Ok.
func TestExpiryFoundByAPollAdmitsBudgetWaiters(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20}}, LeaseBudget: tLayers * tPageBytes, Clock: clock.Now})
	a, _ := r.open()
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 2), pg(2)), 0)
	if x := r.call(a, abi.CmdQueryBundle, ticketDesc(ns1, 1, 1, abi.QueryPrepare, 0, 0, 0, 0, hash(0)), 0); status(x) != abi.StatusCandidates {
		t.Fatalf("preparation: %v", status(x))
	}
	clock.Advance(ticket.DefaultOpExpiry / 2)
	if x := r.call(a, abi.CmdQueryBundle, ticketDesc(ns1, 2, 1, 0, 0, 0, 0, 0, hash(1)), 0); status(x) != abi.StatusLoading {
		t.Fatalf("waiter: %v", status(x))
	}
	clock.Advance(ticket.DefaultOpExpiry/2 + time.Second) // the preparation expired, the waiter not
	if x := r.call2(a, abi.CmdPoll, nil, 1, 1); status(x) != abi.StatusTimeout {
		t.Fatalf("poll of the preparation: %v", status(x))
	}
	x := r.call2(a, abi.CmdPoll, make([]byte, 64), 2, 1)
	if status(x) != abi.StatusOK {
		t.Fatalf("waiter after the expiry: %v, want Ok without waiting for a sweep", status(x))
	}
	r.call(a, abi.CmdRelease, nil, x.Arg1)
	r.close(a)
	r.idle()
}
