package lease

import (
	"fmt"
	"slices"

	"github.com/orbitkv/orbitkv/gocore/index"
)

// Limits bound the leases of one Manager; a plain value. Zero fields take
// the defaults below (Budget has none: Book requires it).
type Limits struct {
	PerSession       int    // live leases one session may hold (MaxLeasesPerSession)
	BlocksPerSession int    // block references one session's leases may hold (MaxLeasedBlocksPerSession)
	Blocks           int    // block references all leases may hold (MaxLeasedBlocks)
	Budget           uint64 // bytes leases and restores in flight may reserve (> 0)
	// TenantBudget[i] is the bytes the leases of tenant i (Owner.Tenant
	// i+1) may hold at once, its share of Budget; nil: no tenants. A
	// lease beyond its tenant's share is refused, not queued: a tenant
	// at its share must not hold the queue's head, which would stop
	// every other tenant's tickets behind it.
	TenantBudget []uint64
}

// Default limits. A block reference costs the Manager a pointer and a pin:
// 2^20 references are 8 MiB of lease memory.
const (
	MaxLeasesPerSession       = 4096
	MaxLeasedBlocksPerSession = 1 << 20
	MaxLeasedBlocks           = 1 << 24
)

// Verdict is Book.Admit's answer.
type Verdict uint8

// Verdicts.
const (
	Grant  Verdict = iota + 1 // within every limit: Book.Grant may lease now
	Wait                      // short of budget, or others wait first: queue (tickets) or refuse (untracked reads)
	Refuse                    // beyond a limit waiting cannot cure: a count limit, or more bytes than the whole budget
)

// Book is the lease table plus admission: limits, byte budget and the FIFO
// queue of W (the operations that wait for budget; tickets). See the
// package doc for its invariants.
type Book[W comparable] struct {
	t         *Table
	idx       *index.Index // the pins of leases are this index's
	lim       Limits
	blocks    int         // block references held by all leases
	restoring uint64      // bytes restores in flight reserve
	queue     []W         // waiting for budget, oldest first
	slices    blockSlices // Acquire's lease slices, taken back by End
	tenant    []uint64    // bytes leased per tenant (Owner.Tenant-1), len(lim.TenantBudget)
	idle      idleList    // handed leases, oldest progress first (idle.go)
}

// NewBook returns an empty book whose lease ids start at first (see
// NewFrom); its leases pin and unpin blocks of idx.
func NewBook[W comparable](first uint64, idx *index.Index, lim Limits) *Book[W] {
	if lim.PerSession == 0 {
		lim.PerSession = MaxLeasesPerSession
	}
	if lim.BlocksPerSession == 0 {
		lim.BlocksPerSession = MaxLeasedBlocksPerSession
	}
	if lim.Blocks == 0 {
		lim.Blocks = MaxLeasedBlocks
	}
	return &Book[W]{t: NewFrom(first), idx: idx, lim: lim, tenant: make([]uint64, len(lim.TenantBudget))}
}

// TenantLeased is the bytes the leases of tenant i (Owner.Tenant i+1)
// hold; 0 for a tenant the limits do not know.
func (b *Book[W]) TenantLeased(i int) uint64 {
	if i < 0 || i >= len(b.tenant) {
		return 0
	}
	return b.tenant[i]
}

// Limits returns the limits in force.
func (b *Book[W]) Limits() Limits { return b.lim }

// SetLimits replaces the limits (tests lower the block limits).
func (b *Book[W]) SetLimits(lim Limits) {
	b.lim = lim
	if len(b.tenant) != len(lim.TenantBudget) {
		b.tenant = append(b.tenant, make([]uint64, max(len(lim.TenantBudget)-len(b.tenant), 0))...)[:len(lim.TenantBudget)]
	}
}

// Admit says whether o may lease n blocks of bytes total now. queued says
// whether the asking operation already waits in the queue: only the head
// of the queue, or anyone when nobody waits, is granted (no overtaking).
func (b *Book[W]) Admit(o Owner, n int, bytes uint64, queued bool) Verdict {
	return b.admit(o, b.t.byOwner[o], n, bytes, queued)
}

// admit is Admit with the owner's record (nil: none) already looked up.
func (b *Book[W]) admit(o Owner, ow *owned, n int, bytes uint64, queued bool) Verdict {
	leases, blocks := 0, 0
	if ow != nil {
		leases, blocks = len(ow.leases), ow.blocks
	}
	if leases >= b.lim.PerSession || blocks+n > b.lim.BlocksPerSession || b.blocks+n > b.lim.Blocks || bytes > b.lim.Budget {
		return Refuse
	}
	if i := int(o.Tenant) - 1; i >= 0 && i < len(b.tenant) && b.tenant[i]+bytes > b.lim.TenantBudget[i] {
		return Refuse
	}
	if b.Reserved()+bytes > b.lim.Budget || (len(b.queue) > 0 && !queued) {
		return Wait
	}
	return Grant
}

// Grant pins blocks (prefix order; the slice is kept) under a new lease of
// o. The caller asked Admit first.
func (b *Book[W]) Grant(o Owner, blocks []*index.Block) *Lease {
	return b.grant(o, b.t.byOwner[o], blocks, sumBytes(blocks))
}

// grant is Grant with the owner's record (nil: none) already looked up
// and the blocks' bytes summed.
func (b *Book[W]) grant(o Owner, ow *owned, blocks []*index.Block, bytes uint64) *Lease {
	b.idx.PinAll(blocks)
	b.blocks += len(blocks)
	if i := int(o.Tenant) - 1; i >= 0 && i < len(b.tenant) {
		b.tenant[i] += bytes
	}
	return b.t.add(o, ow, blocks, bytes)
}

// Get returns o's live lease id, or nil (unknown, ended, or another
// session's: the caller cannot tell which, by design).
func (b *Book[W]) Get(o Owner, id uint64) *Lease { return b.t.Get(o, id) }

// End ends l and unpins its blocks; a lease already ended is left alone.
// A lease from Acquire has nil Blocks afterwards: its slice may serve a
// later lease.
func (b *Book[W]) End(l *Lease) {
	if b.t.m[l.ID] != l {
		return
	}
	b.unhand(l)
	b.idx.UnpinAll(l.Blocks)
	b.blocks -= len(l.Blocks)
	if l.restores > 0 {
		// Its restores in flight keep its bytes reserved, for the budget
		// and for its tenant, until the last one lands (RestoreLanded).
		l.ended = true
		b.restoring += l.Bytes
	} else if i := int(l.Owner.Tenant) - 1; i >= 0 && i < len(b.tenant) {
		b.tenant[i] -= l.Bytes
	}
	b.t.Remove(l)
	if l.pooled {
		b.slices.put(l.Blocks)
		l.Blocks = nil
	}
}

// EndAll ends every lease of o (session teardown), in O(o's leases).
func (b *Book[W]) EndAll(o Owner) {
	for _, l := range b.t.Owned(o) {
		b.End(l)
	}
}

// RestoreStarted and RestoreLanded account a restore in flight from l.
// A restore reserves no bytes of its own: l's bytes, reserved while l
// lives, cover its blocks however many entries name them (a restore of
// one block into many pages, or many restores of one lease, reserve l's
// bytes once). When l ends with restores in flight its bytes stay
// reserved, for the budget and its tenant, until the last one lands.
func (b *Book[W]) RestoreStarted(l *Lease) { l.restores++ }

// RestoreLanded: see RestoreStarted.
func (b *Book[W]) RestoreLanded(l *Lease) {
	if l.restores--; l.ended && l.restores == 0 {
		b.restoring -= l.Bytes
		if i := int(l.Owner.Tenant) - 1; i >= 0 && i < len(b.tenant) {
			b.tenant[i] -= l.Bytes
		}
	}
}

// Restoring is the bytes ended leases keep reserved for their restores in
// flight.
func (b *Book[W]) Restoring() uint64 { return b.restoring }

// Reserved is what the budget counts: live leases' bytes plus those of
// ended leases whose restores are still in flight.
func (b *Book[W]) Reserved() uint64 { return b.t.ReservedBytes() + b.restoring }

// Leases is the number of live leases.
func (b *Book[W]) Leases() int { return b.t.Len() }

// Owned returns o's live leases, block references and reserved bytes in
// O(1): nothing of other owners is walked.
func (b *Book[W]) Owned(o Owner) (leases, blocks int, bytes uint64) {
	if ow := b.t.byOwner[o]; ow != nil {
		return len(ow.leases), ow.blocks, ow.bytes
	}
	return 0, 0, 0
}

// Enqueue appends w to the budget queue; Dequeue removes it (a no-op when
// absent). Head is the oldest waiter.
func (b *Book[W]) Enqueue(w W) { b.queue = append(b.queue, w) }

// Dequeue removes w from the budget queue, wherever it is.
func (b *Book[W]) Dequeue(w W) {
	if i := slices.Index(b.queue, w); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
}

// Head returns the oldest waiter; false when nobody waits.
func (b *Book[W]) Head() (w W, ok bool) {
	if len(b.queue) == 0 {
		return w, false
	}
	return b.queue[0], true
}

// Waiting is the number of operations waiting for budget.
func (b *Book[W]) Waiting() int { return len(b.queue) }

// Check verifies the invariants of the package doc by walking every lease
// (O(leases): for tests and idle checks, never the hot path).
func (b *Book[W]) Check() error {
	var bytes uint64
	blocks := 0
	for _, l := range b.t.m {
		bytes += l.Bytes
		blocks += len(l.Blocks)
		for _, blk := range l.Blocks {
			if blk.Pins() < 1 {
				return fmt.Errorf("lease: lease %d names block %x with %d pins", l.ID, blk.Key.Hash, blk.Pins())
			}
		}
	}
	if bytes != b.t.ReservedBytes() || blocks != b.blocks {
		return fmt.Errorf("lease: leases hold %d bytes and %d block references, the book counts %d and %d", bytes, blocks, b.t.ReservedBytes(), b.blocks)
	}
	if err := b.checkIdle(); err != nil {
		return err
	}
	for o, ow := range b.t.byOwner {
		var ob uint64
		on := 0
		for _, l := range ow.leases {
			ob += l.Bytes
			on += len(l.Blocks)
		}
		if ob != ow.bytes || on != ow.blocks {
			return fmt.Errorf("lease: owner slot %d holds %d bytes and %d blocks, counted %d and %d", o.Slot, ob, on, ow.bytes, ow.blocks)
		}
	}
	return nil
}

// Acquire leases hits (copied into a slice of the Book's, which End takes
// back) for o if Admit grants it; queued says the caller already waits in
// the budget queue.
func (b *Book[W]) Acquire(o Owner, hits []*index.Block, queued bool) (Verdict, *Lease) {
	bytes := sumBytes(hits)
	ow := b.t.byOwner[o] // one lookup serves the limits and the grant: this is every query's path
	v := b.admit(o, ow, len(hits), bytes, queued)
	if v != Grant {
		return v, nil
	}
	blocks := b.slices.get(len(hits))
	copy(blocks, hits)
	l := b.grant(o, ow, blocks, bytes)
	l.pooled = true
	return v, l
}
