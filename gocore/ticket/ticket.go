package ticket

import (
	"bytes"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/session"
)

// Limits and defaults.
const (
	// DefaultOpExpiry is how long a ticket or an unpolled restore result
	// lives after its latest submission (docs/design.md §6 rule 5).
	DefaultOpExpiry = 60 * time.Second
	// MaxTombstones bounds the expired ids a session remembers (tickets and
	// restores each); older ones then answer as retired (Invalid op_id).
	MaxTombstones = 256
	// MaxTicketBytes bounds the hash chains all live tickets store (a
	// ticket keeps a private copy of its request); beyond it a new ticket
	// answers Unadmitted. With the default bounds (1024 tickets, 256 KiB
	// descriptor areas: at most 1024 × 262,080 bytes of hashes) it is
	// never reached.
	MaxTicketBytes = 256 << 20
	// MaxReloads bounds how often one waiting ticket restarts SSD reads
	// whose blocks were evicted again before it could lease them.
	MaxReloads = 4
)

// State of a ticket.
type State uint8

// Ticket states.
const (
	Pending  State = iota + 1 // SSD reads of its chain in flight, or waiting for byte budget
	Done                      // resolved after its submission; delivered by the next Poll
	Ready                     // PREPARE: resolved, held until Claim
	Draining                  // revoked; its SSD reads still run and it keeps its permit
)

// Ticket is one live query operation of a session. The request fields are
// a private copy, taken once per revision.
type Ticket struct {
	ID       uint64
	Rev      uint32
	Flags    uint16
	ReqID    uint64
	Group    uint64
	NS       abi.Namespace
	RecFirst uint32
	RecCount uint32
	Book     *Book
	State    State

	reads    int            // SSD reads in flight this ticket started
	holds    []*index.Block // blocks its reads brought in, pinned until it leases or is revoked
	reloads  int
	queued   bool            // waiting in the lease budget queue
	held     bool            // held at the Reservation pause point: resolution waits for Resume
	passed   bool            // resolving again after that hold: it passes the point
	res      abi.QueryResult // Done/Ready: the answer to deliver; Pending: Hits so far
	lease    *lease.Lease    // Done/Ready with hits: the undelivered lease
	hashes   []byte          // 16 bytes per hash
	deadline time.Time
	since    time.Time // latest submission or revision (TenantCounts.WaitNanos)
	pended   bool      // answered Loading since then (TenantCounts.Queued)
}

// N is the number of hashes in the chain.
func (t *Ticket) N() int { return len(t.hashes) / abi.HashSize }

// Hash is the chain's i-th block hash.
func (t *Ticket) Hash(i int) (h abi.BlockHash) {
	copy(h[:], t.hashes[i*abi.HashSize:])
	return h
}

// Wants reports whether the ticket waits for its whole range (recovery,
// wait_for_full_prefix, or PREPARE) rather than taking the RAM prefix.
func (t *Ticket) Wants() bool {
	return t.Flags&(abi.QueryRecovery|abi.QueryWaitFullPref|abi.QueryPrepare) != 0
}

// Range is the hash positions [first, end) the ticket resolves: the
// recovery range, or the whole chain.
func (t *Ticket) Range() (first, end int) {
	if t.Flags&abi.QueryRecovery != 0 {
		return int(t.RecFirst), int(t.RecFirst + t.RecCount)
	}
	return 0, t.N()
}

// same reports whether q repeats t's live revision exactly.
func (t *Ticket) same(q *abi.QueryDesc) bool {
	return q.Flags == t.Flags && q.NS == t.NS && q.RequestID == t.ReqID && q.Group == t.Group &&
		q.RecoveryFirst == t.RecFirst && q.RecoveryCount == t.RecCount && bytes.Equal(q.Hashes, t.hashes)
}

// String names a ticket for logs.
func (t *Ticket) String() string {
	return fmt.Sprintf("ticket %d rev %d (slot %d)", t.ID, t.Rev, t.Book.Sess.Index)
}

// Tombs is a bounded set of expired operation ids: a ring of the newest
// MaxTombstones ids plus a set over it. The zero value is empty.
type Tombs struct {
	ring []uint64
	next int
	set  map[uint64]struct{}
}

// Add remembers id, forgetting the oldest beyond MaxTombstones.
func (t *Tombs) Add(id uint64) {
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

// Has reports whether id is remembered.
func (t *Tombs) Has(id uint64) bool { _, ok := t.set[id]; return ok }

// Book is one session's tickets.
type Book struct {
	Sess     *session.Session
	Owner    lease.Owner // its leases' owner
	live     map[uint64]*Ticket
	maxOpID  uint64 // highest ticket op id seen (ids only grow)
	draining int    // revoked tickets whose SSD reads still run
	expired  Tombs
	// Tenant is what the session's tenant counts over all its sessions;
	// nil when the session has no tenant. Shared by the Books of the
	// tenant's sessions; dispatcher goroutine only.
	Tenant *TenantCounts
	// Domain is the tiers' domain of the session's tenant: the blocks its
	// tickets read from SSD or a peer count against it (tier.Chain.Domain;
	// index.NoDomain without tenants).
	Domain index.Domain
}

// TenantCounts are one tenant's figures, summed over its sessions' Books
// (and the cache's restores and untracked queries, which it counts in).
type TenantCounts struct {
	// Ops is the operation permits held: tickets live or draining, and
	// restores.
	Ops int
	// Answered is the tickets that reached their final answer (a lease, a
	// miss or Unadmitted); WaitNanos sums, over them, the time from the
	// ticket's latest submission (or revision) to that answer: the time
	// it queued inside the Manager for SSD reads, the byte budget or
	// permits, on the Set's clock.
	Answered, WaitNanos uint64
	// Queued is the answered tickets that queued: not answered in the
	// request that submitted or revised them; QueueNanos sums their
	// WaitNanos. A ticket answered at once counts in Answered only.
	Queued, QueueNanos uint64
	// Queries is the queries asked (tickets submitted and untracked
	// queries); HitBlocks the blocks leased to them; Unadmitted the
	// requests refused for capacity, the tenant's shares included.
	Queries, HitBlocks, Unadmitted uint64
}

// CountUnadmitted counts a request of the tenant's refused for capacity.
func (b *Book) CountUnadmitted() {
	if b.Tenant != nil {
		b.Tenant.Unadmitted++
	}
}

// CountQuery counts an untracked query of the tenant and the blocks
// leased to it.
func (b *Book) CountQuery(hits int) {
	if b.Tenant != nil {
		b.Tenant.Queries++
		b.Tenant.HitBlocks += uint64(hits)
	}
}

// CountOps adds d to the tenant's permits, if any.
func (b *Book) CountOps(d int) {
	if b.Tenant != nil {
		b.Tenant.Ops += d
	}
}

// NewBook returns sess's empty book.
func NewBook(sess *session.Session) *Book {
	return &Book{Sess: sess, Owner: lease.Owner{Slot: sess.Index, Token: sess.Token}, live: make(map[uint64]*Ticket)}
}

// Live is the number of live tickets; Permits adds the draining ones.
func (b *Book) Live() int    { return len(b.live) }
func (b *Book) Permits() int { return len(b.live) + b.draining }

// Host is what tickets need of the cache (gocore/cache implements it);
// every method runs on the dispatcher goroutine.
type Host interface {
	// AdmitOp reports whether b's session may take one more operation
	// permit (the bounds count restores too).
	AdmitOp(b *Book) bool
	// ArmExpiry makes sure the expiry sweep runs by d.
	ArmExpiry(d time.Time)
	// Drained tells that b's last draining ticket finished.
	Drained(b *Book)
	// Signal wakes b's client (its session eventfd).
	Signal(b *Book)
	// Delivered tells that a ticket of b in namespace ns (as the index
	// keys it) was delivered Ok or Miss with hits blocks leased.
	Delivered(b *Book, ns abi.Namespace, hits uint32)
	// HoldReservation holds t at the Reservation pause point (failpoint
	// builds; false elsewhere): t stays pending until the Host calls
	// Set.Resume.
	HoldReservation(t *Ticket) bool
}

// Stats are the tickets' counters; safe from any goroutine.
type Stats struct {
	Live        uint64 // live tickets
	Expired     uint64 // tickets expired (tombstoned)
	Discoveries uint64 // discovery queries answered
	Unadmitted  uint64 // tickets, claims and deliveries answered Unadmitted
	Queries     uint64 // deliveries of Ok or Miss
	QueryHits   uint64 // blocks those deliveries leased
}

type counters struct {
	live, expired, discoveries, unadmitted, queries, queryHits atomic.Uint64
}
