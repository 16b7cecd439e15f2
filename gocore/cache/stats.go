package cache

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tier"
)

// counters are published for Stats (read from any goroutine).
type counters struct {
	blocks, usedBytes, leases, pins, reserved, operations atomic.Uint64
	published, restored, unadmitted, invalid              atomic.Uint64
	publishBytes, restoreBytes, queries, queryHits        atomic.Uint64
	budgetWaiting, expired                                atomic.Uint64
	transfers, transferPins, replicas                     atomic.Uint64
	queryNanos, queryHashes                               atomic.Uint64
	leasesRevoked, bufferHoles                            atomic.Uint64
}

// publishStats samples the dispatcher-owned figures for Stats.
func (s *Service) publishStats() {
	blocks, pins, used := s.tiers.Resident()
	s.stats.blocks.Store(blocks)
	s.stats.usedBytes.Store(used)
	s.stats.pins.Store(pins)
	s.stats.leases.Store(uint64(s.leases.Leases()))
	s.stats.reserved.Store(s.leases.Reserved())
	s.stats.operations.Store(uint64(len(s.ops) + s.restores.done + s.tickets.Permits() + s.tiers.Loading() + s.tiers.PeerLoading()))
	s.stats.budgetWaiting.Store(uint64(s.leases.Waiting()))
	s.stats.transfers.Store(uint64(len(s.transferPins)))
	s.stats.transferPins.Store(uint64(s.pinnedBlocks))
	s.stats.replicas.Store(uint64(s.idx.Stats().Replicas))
}

// Stats is a snapshot of the cache counters; safe from any goroutine.
type Stats struct {
	Blocks        uint64 // sealed blocks resident
	UsedBytes     uint64 // bytes of allocated chunks (sealed and publishing)
	CapacityBytes uint64
	Leases        uint64
	Pins          uint64
	ReservedBytes uint64
	Operations    uint64 // copies in flight, restores awaiting RestorePoll, tickets live or draining, SSD reads, peer fetches
	Evictions     uint64
	Published     uint64 // blocks stored
	Restored      uint64 // blocks restored
	PublishBytes  uint64
	RestoreBytes  uint64
	Unadmitted    uint64 // publishes, queries, tickets and restores refused for capacity
	Invalid       uint64 // cache requests refused as invalid
	Queries       uint64 // untracked queries served, plus tickets delivered Ok or Miss
	QueryHits     uint64 // blocks leased by those
	QueryNanos    uint64 // dispatcher time in untracked QueryBundles (decode, lookups, lease), ns
	QueryHashes   uint64 // hashes those queries carried
	// ByAddress counts the blocks index.Index.Prefix found by address (the
	// slab-mate after the chain's previous block, no table probe), over
	// every Prefix call: the RAM lookups of queries and tickets (each time
	// a ticket is looked up again), and peer transfer pins (PinRun).
	// Restores work from their lease and add nothing.
	ByAddress uint64

	// Operation semantics (abi.h "Query tickets").
	Tickets         uint64 // live tickets
	BudgetWaiting   uint64 // tickets waiting for lease byte budget
	Expired         uint64 // tickets and restore results expired (tombstoned)
	Discoveries     uint64 // discovery queries answered
	WarmupSkipped   uint64 // warm-ups skipped for the warmup budget
	Lookups         uint64 // logical lookups (untracked queries, tickets except recovery and warmup)
	DistinctLookups uint64 // distinct (namespace, chain) lookups, HyperLogLog estimate

	// Blocks looked up, per tier and result (see tier.LookupBlocks; the
	// peer tier's are Peer.LookupHit and Peer.LookupMiss).
	LookupBlocks tier.LookupBlocks

	// Peer transfers: this node as a source (Transfers pins held, pinning
	// TransferPins blocks; counted in Pins) and as a requester (Replicas:
	// sealed blocks fetched from peers, among Blocks; Peer: the peer tier,
	// zero without one).
	Transfers, TransferPins, Replicas uint64
	Peer                              tier.PeerStats

	// SSD tier (zero without one: SSD.On false).
	SSD tier.SSDStats
	// LeasesRevoked counts leases ended for making no progress within
	// the lease idle timeout (Spec.LeaseIdleTimeout).
	LeasesRevoked uint64
	// BufferHoles counts restores refused because their destination
	// buffer's memfd had pages missing (punched after registration).
	BufferHoles uint64

	RAMHuge     bool   // the RAM tier is backed by 2 MiB hugetlb pages
	RAMFallback string // why not ("" when RAMHuge); see ram.Arena.Fallback
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	c := &s.stats
	ts := s.tiers.Counters()
	tk := s.tickets.Stats()
	st := Stats{
		Blocks: c.blocks.Load(), UsedBytes: c.usedBytes.Load(), CapacityBytes: ts.CapacityBytes,
		Leases: c.leases.Load(), Pins: c.pins.Load(), ReservedBytes: c.reserved.Load(),
		Operations: c.operations.Load(), Evictions: ts.Evictions, Published: c.published.Load(),
		Restored: c.restored.Load(), PublishBytes: c.publishBytes.Load(), RestoreBytes: c.restoreBytes.Load(),
		Unadmitted: c.unadmitted.Load() + tk.Unadmitted, Invalid: c.invalid.Load(),
		Queries: c.queries.Load() + tk.Queries, QueryHits: c.queryHits.Load() + tk.QueryHits,
		RAMHuge: ts.RAMHuge, RAMFallback: ts.RAMFallback,
		QueryNanos: c.queryNanos.Load(), QueryHashes: c.queryHashes.Load(), ByAddress: s.idx.ByAddress(),
		Tickets: tk.Live, BudgetWaiting: c.budgetWaiting.Load(), Expired: c.expired.Load() + tk.Expired,
		Discoveries: tk.Discoveries, WarmupSkipped: ts.WarmupSkipped,
	}
	st.Lookups, st.DistinctLookups = s.look.Logical()
	st.SSD = ts.SSD
	st.LookupBlocks = s.look.Blocks()
	st.Transfers, st.TransferPins, st.Replicas = c.transfers.Load(), c.transferPins.Load(), c.replicas.Load()
	st.Peer = ts.Peer
	st.LeasesRevoked, st.BufferHoles = c.leasesRevoked.Load(), c.bufferHoles.Load()
	return st
}

// Idle reports whether the idle invariant of docs/design.md §6 rule 8 holds for
// this snapshot (meaningful when no session is attached).
func (st Stats) Idle() bool {
	return st.Leases == 0 && st.Pins == 0 && st.ReservedBytes == 0 && st.Operations == 0 && st.Transfers == 0
}

// Check verifies the accounting relations the cache keeps (dispatcher
// goroutine only; it walks every lease and restore): the lease book's
// (gocore/lease), the restores' (restoreCounts), and that the index's pins
// are what leases, copies and holds account for when no session is
// attached: then the only pins left are the transfer pins peers hold.
// Every idle-invariant test calls it; the Manager calls it when its last
// session detached.
func (s *Service) Check() error {
	errs := []error{s.leases.Check(), s.restores.check(s.sessions, s.leases.Restoring())}
	held := 0
	for _, blocks := range s.transferPins {
		held += len(blocks)
	}
	if held != s.pinnedBlocks {
		errs = append(errs, fmt.Errorf("cache: transfer pins hold %d blocks, counted %d", held, s.pinnedBlocks))
	}
	if len(s.sessions) == 0 {
		if _, pins, _ := s.tiers.Resident(); pins != uint64(held) || s.leases.Leases() != 0 || s.leases.Reserved() != 0 || s.tickets.Permits() != 0 || s.restores.all != 0 {
			errs = append(errs, errors.New("cache: no session attached, yet pins (beyond transfer pins), leases, reserved bytes or operations remain"))
		}
	}
	return errors.Join(errs...)
}

// Usage returns sess's figures (channel.Handler); false when sess is not attached (or
// already closing). Dispatcher goroutine only (channel.Dispatcher asks for
// it through a control event). It costs O(the session's restores), never
// anything proportional to other sessions' state: a session asking for its
// Health in a loop must not slow the dispatcher for the others, nor learn
// their load from its own latency.
func (s *Service) Usage(sess *session.Session) (session.Usage, bool) {
	st := s.sessions[sess.Index]
	if st == nil || st.sess != sess || st.closing {
		return session.Usage{}, false
	}
	leases, blocks, bytes := s.leases.Owned(st.owner) // O(1): nothing of other sessions is walked
	out := session.Usage{
		Leases: uint64(leases), LeasedBlocks: uint64(blocks), ReservedBytes: bytes,
		Operations: uint64(st.opsOf()), Tickets: uint64(st.book.Live()),
	}
	for _, o := range st.restores { // at most its own operation bound
		if !o.done {
			out.ReservedBytes += o.bytes // reserved until the copy lands
		}
	}
	return out, true
}
