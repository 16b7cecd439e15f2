package ticket_test

import (
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// The SSD paths: mostly a RAM tier of 4 blocks over an SSD tier, hash 0..3
// demoted to SSD and hash 4..7 in RAM (rig.demote).

// wait_for_full_prefix: Loading while the chain's SSD run is read, pinned
// for the ticket as the reads land; the completion resolves it and wakes
// its client; the next poll leases the whole chain.
func TestWaitForFullPrefixLoadsTheSSDRunThenLeasesTheWholeChain(t *testing.T) {
	r := newRig(t, rigSpec{ramBlocks: 4, ssd: true})
	r.demote(4)
	b := r.open()
	x := r.submit(b, req{id: 1, rev: 1, flags: abi.QueryWaitFullPref, hashes: []int{0, 1, 2, 3}})
	if x.status() != abi.StatusLoading || r.tiers.Loading() != 4 {
		t.Fatalf("submit: %v, %d reads; want Loading and 4 reads", x.status(), r.tiers.Loading())
	}
	r.completeSSD(64)
	if r.host.signals[b] != 1 || r.leases.Leases() != 1 {
		t.Fatalf("after the reads: %d signals, %d leases; want 1 and 1", r.host.signals[b], r.leases.Leases())
	}
	p := r.poll(b, 1, 1)
	if p.status() != abi.StatusOK || p.res.Hits != 4 || p.res.RAMHits != 4 {
		t.Fatalf("poll: %v %+v, want Ok 4", p.status(), p.res)
	}
	for i, blk := range r.leased(b, p.res.LeaseID) {
		if blk != r.block(i) || blk.Pins() != 1 {
			t.Fatalf("lease block %d: %p with %d pins, want hash %d's pinned once (the reads' holds went)", i, blk, blk.Pins(), i)
		}
	}
	r.release(b, p.res.LeaseID)
	r.idle()
}

// A ticket waiting for the full prefix whose chain another ticket's reads
// are loading waits for them to land, however many completion rounds they
// take: it must not give up and lease a partial prefix (its reloads bound
// restarts of its own reads, not rounds of someone else's).
func TestAWaiterOnAnotherTicketsReadsGetsTheWholeChain(t *testing.T) {
	r := newRig(t, rigSpec{ramBlocks: 8, ssd: true})
	r.demote(8)
	a, b := r.open(), r.open()
	chain := []int{0, 1, 2, 3, 4, 5, 6, 7}
	if x := r.submit(a, req{id: 1, rev: 1, flags: abi.QueryWaitFullPref, hashes: chain}); x.status() != abi.StatusLoading || r.tiers.Loading() != 8 {
		t.Fatalf("a: %v, %d reads; want Loading and 8 reads", x.status(), r.tiers.Loading())
	}
	if x := r.submit(b, req{id: 1, rev: 1, flags: abi.QueryWaitFullPref, hashes: chain}); x.status() != abi.StatusLoading || r.tiers.Loading() != 8 {
		t.Fatalf("b: %v, %d reads; want Loading on a's 8 reads", x.status(), r.tiers.Loading())
	}
	r.waitReadsFinished(8)
	r.completeSSD(1) // one read lands per round, as a slow disk delivers them
	for _, bk := range []*ticketBook{a, b} {
		p := r.poll(bk, 1, 1)
		if p.status() != abi.StatusOK || p.res.Hits != 8 {
			t.Fatalf("poll: %v hits %d, want Ok 8 (the whole chain it waited for)", p.status(), p.res.Hits)
		}
	}
	r.idle()
}

// Without the wait flag a ticket takes the RAM prefix now and the SSD tail
// is warmed for its next lookup, with no owner; the warming reads make room
// in RAM without evicting the prefix the ticket leases.
func TestWithoutWaitTheRAMPrefixAnswersNowAndTheTailWarms(t *testing.T) {
	r := newRig(t, rigSpec{ramBlocks: 4, ssd: true})
	r.demote(4)
	b := r.open()
	x := r.submit(b, req{id: 1, rev: 1, hashes: []int{4, 0, 1}})
	if x.status() != abi.StatusOK || x.res.Hits != 1 || r.tiers.Warming() != 2*blockBytes || r.set.Permits() != 0 {
		t.Fatalf("submit: %v %+v, %d bytes warming, %d permits; want Ok 1, 2 blocks warming, no permit", x.status(), x.res, r.tiers.Warming(), r.set.Permits())
	}
	if got := r.leased(b, x.res.LeaseID); got[0] != r.block(4) {
		t.Fatal("the leased prefix is not hash 4's block")
	}
	r.completeSSD(64)
	y := r.submit(b, req{id: 2, rev: 1, hashes: []int{4, 0, 1}})
	if y.status() != abi.StatusOK || y.res.Hits != 3 {
		t.Fatalf("the next lookup: %v %+v, want Ok 3", y.status(), y.res)
	}
	r.idle()
}

// A ticket cancelled while its SSD reads run keeps its permit (Draining)
// until they finish; then the host hears Drained exactly once, and the
// blocks the reads brought in are in RAM, unpinned.
func TestADrainingTicketKeepsItsPermitUntilItsReadsFinish(t *testing.T) {
	for _, how := range []string{"cancel", "teardown", "expiry"} {
		t.Run("revoked by "+how, func(t *testing.T) {
			r := newRig(t, rigSpec{ramBlocks: 4, ssd: true})
			r.demote(4)
			r.host.perSession = 1
			b := r.open()
			if x := r.submit(b, req{id: 1, rev: 1, flags: abi.QueryWaitFullPref, hashes: []int{0, 1, 2, 3}}); x.status() != abi.StatusLoading {
				t.Fatalf("submit: %v", x.status())
			}
			switch how {
			case "cancel":
				if c := r.cancel(b, 1, 1); c.status() != abi.StatusOK {
					t.Fatalf("cancel: %v", c.status())
				}
			case "teardown":
				r.set.RevokeAll(b)
			default:
				r.now = r.now.Add(expiry)
				r.set.Sweep(b)
				if p := r.poll(b, 1, 1); p.status() != abi.StatusTimeout {
					t.Fatalf("poll after expiry: %v", p.status())
				}
			}
			if r.set.Draining() != 1 || r.set.Permits() != 1 || b.Permits() != 1 || b.Live() != 0 {
				t.Fatalf("revoked with reads in flight: %d draining, %d permits (book %d), %d live", r.set.Draining(), r.set.Permits(), b.Permits(), b.Live())
			}
			if x := r.submit(b, req{id: 2, rev: 1, hashes: []int{4}}); x.status() != abi.StatusUnadmitted {
				t.Fatalf("a ticket while the permit drains: %v, want Unadmitted", x.status())
			}
			if len(r.host.drained) != 0 {
				t.Fatal("Drained before the reads finished")
			}
			r.completeSSD(1)
			if r.host.drained[b] != 1 || len(r.host.drained) != 1 {
				t.Fatalf("Drained %v, want once for the book", r.host.drained)
			}
			if r.set.Draining() != 0 || b.Permits() != 0 || r.pins() != 0 {
				t.Fatalf("after the drain: %d draining, %d permits, %d pins", r.set.Draining(), b.Permits(), r.pins())
			}
			for i := 0; i < 4; i++ {
				if r.block(i) == nil {
					t.Fatalf("hash %d is not in RAM after its read landed", i)
				}
			}
			if x := r.submit(b, req{id: 3, rev: 1, hashes: []int{0, 1, 2, 3}}); x.status() != abi.StatusOK || x.res.Hits != 4 {
				t.Fatalf("a ticket after the drain: %v %+v, want Ok 4 from RAM", x.status(), x.res)
			}
			if r.host.drained[b] != 1 {
				t.Fatal("Drained heard again")
			}
			r.idle()
		})
	}
}

// Discovery answers Candidates with the leading blocks held locally, RAM
// then SSD, leasing and reserving nothing, and is retired at once.
func TestDiscoveryCountsRAMThenSSDBlocksWithoutALease(t *testing.T) {
	r := newRig(t, rigSpec{ramBlocks: 4, ssd: true})
	r.demote(4)
	b := r.open()
	x := r.submit(b, req{id: 1, rev: 1, flags: abi.QueryDiscover, hashes: []int{4, 5, 0, 1, 9, 2}})
	if x.status() != abi.StatusCandidates || x.resp.Arg0 != 4 || x.resp.Arg1 != 0 {
		t.Fatalf("discover: %v %d %d, want Candidates 4 and no lease", x.status(), x.resp.Arg0, x.resp.Arg1)
	}
	if want := (abi.QueryResult{Status: abi.StatusCandidates, Hits: 4, RAMHits: 2, OpID: 1, Revision: 1}); x.res != want {
		t.Fatalf("result %+v, want %+v", x.res, want)
	}
	if st := r.set.Stats(); st.Discoveries != 1 || st.Live != 0 || r.set.Permits() != 0 || r.leases.Leases() != 0 || r.tiers.Loading() != 0 {
		t.Fatalf("discovery left state: %+v, %d permits, %d leases, %d reads", st, r.set.Permits(), r.leases.Leases(), r.tiers.Loading())
	}
	if p := r.poll(b, 1, 1); p.status() != abi.StatusInvalid {
		t.Fatalf("poll of a discovery: %v, want Invalid (retired)", p.status())
	}
	r.idle()
}

// Warm-up starts reading the chain's SSD run past its RAM prefix with no
// lease and no owner, within the warmup budget, and is retired at once:
// Ok with the blocks warming, 0 when the budget is spent.
func TestWarmupReadsWithoutALeaseWithinItsBudget(t *testing.T) {
	r := newRig(t, rigSpec{ramBlocks: 4, ssd: true, warmup: blockBytes})
	r.demote(4)
	b := r.open()
	x := r.submit(b, req{id: 1, rev: 1, flags: abi.QueryWarmup, hashes: []int{0, 1, 2, 3}})
	if x.status() != abi.StatusOK || x.resp.Arg0 != 1 || x.res.Hits != 1 || x.res.LeaseID != 0 {
		t.Fatalf("warmup: %v %d %+v, want Ok 1 (the budget holds one block) and no lease", x.status(), x.resp.Arg0, x.res)
	}
	if y := r.submit(b, req{id: 2, rev: 1, flags: abi.QueryWarmup, hashes: []int{1, 2}}); y.status() != abi.StatusOK || y.resp.Arg0 != 0 {
		t.Fatalf("warmup over budget: %v %d, want Ok 0", y.status(), y.resp.Arg0)
	}
	if st := r.set.Stats(); st.Live != 0 || r.set.Permits() != 0 || r.leases.Leases() != 0 || r.tiers.Counters().WarmupSkipped != 1 {
		t.Fatalf("warm-ups left state: %+v, %d permits, %d leases, %d skipped", st, r.set.Permits(), r.leases.Leases(), r.tiers.Counters().WarmupSkipped)
	}
	r.completeSSD(64)
	if r.block(0) == nil || r.block(0).Pins() != 0 {
		t.Fatal("the warmed block is not in RAM, unpinned")
	}
	if total, _ := r.look.Logical(); total != 0 {
		t.Fatalf("%d logical lookups counted for warm-ups, want none", total)
	}
	r.idle()
}
