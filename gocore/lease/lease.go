package lease

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/orbitkv/orbitkv/gocore/index"
)

// FirstID is the first lease (and restore) id of a Manager lifetime: the
// top 16 bits come from a hash of the epoch, so an id issued by an earlier
// lifetime is, but for a 2^-16 chance, unknown to this one (spec: "a
// Manager restart ... rejects every old lease and handle"); 2^48 ids per
// lifetime.
func FirstID(epoch uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], epoch)
	h := sha256.Sum256(b[:])
	return uint64(binary.LittleEndian.Uint16(h[:]))<<48 | 1
}

// Owner identifies the session that holds a lease: its slot index and its
// client token (slot indexes are reused; tokens are random per session).
type Owner struct {
	Slot  uint32
	Token uint64
	// Tenant is 1 + the index of the session's tenant (gocore/tenant), 0
	// when the Manager has no tenants: the leases of one tenant share its
	// byte budget (Limits.TenantBudget).
	Tenant uint32
}

// Lease pins Blocks (in prefix order) for Owner.
type Lease struct {
	ID     uint64
	Owner  Owner
	Blocks []*index.Block
	Bytes  uint64 // bytes reserved: the sum of the blocks' bytes
	pooled bool   // Blocks came from the Book's blockSlices (Acquire), and go back at End
	idle   idleLink
	// restores is the restores in flight from this lease; ended, that the
	// lease ended while some were (Book.RestoreStarted).
	restores int
	ended    bool
}

// Ended reports whether l ended while restores from it were in flight
// and some still are (its bytes stay reserved: Book.RestoreLanded).
func (l *Lease) Ended() bool { return l.ended && l.restores > 0 }

// Table holds the live leases, by id and by owner (so one owner's leases
// are found in time proportional to its own, never to every session's).
type Table struct {
	next     uint64
	m        map[uint64]*Lease
	byOwner  map[Owner]*owned
	reserved uint64
}

// owned is one owner's leases, the bytes they reserve and the block
// references they hold.
type owned struct {
	leases map[uint64]*Lease
	bytes  uint64
	blocks int
}

// New returns an empty table; ids start at 1.
func New() *Table { return NewFrom(1) }

// NewFrom returns an empty table whose ids start at first (≥ 1). The cache
// starts each Manager lifetime at a base derived from its epoch, so a lease
// id of an earlier lifetime is unknown to a restarted Manager (spec: "a
// Manager restart rejects every old lease and handle").
func NewFrom(first uint64) *Table {
	return &Table{next: max(first, 1), m: make(map[uint64]*Lease), byOwner: make(map[Owner]*owned)}
}

// Add registers a lease over blocks (already pinned by the caller) and
// returns it with a fresh id.
func (t *Table) Add(o Owner, blocks []*index.Block) *Lease {
	return t.add(o, t.byOwner[o], blocks, sumBytes(blocks))
}

// sumBytes is the bytes of blocks.
func sumBytes(blocks []*index.Block) (n uint64) {
	for _, b := range blocks {
		n += b.Bytes
	}
	return n
}

// add is Add with o's record (nil: none yet) already looked up and the
// blocks' bytes already summed (a query's path walks its blocks once for
// the budget; a second pass over 10,000 blocks costs ~2 ns each).
func (t *Table) add(o Owner, ow *owned, blocks []*index.Block, bytes uint64) *Lease {
	l := &Lease{ID: t.next, Owner: o, Blocks: blocks, Bytes: bytes}
	t.next++
	t.m[l.ID] = l
	t.reserved += l.Bytes
	if ow == nil {
		ow = &owned{leases: make(map[uint64]*Lease)}
		t.byOwner[o] = ow
	}
	ow.leases[l.ID] = l
	ow.bytes += l.Bytes
	ow.blocks += len(blocks)
	return l
}

// Get returns lease id if o owns it, else nil (unknown, released, or
// another session's: the caller cannot tell which, by design).
func (t *Table) Get(o Owner, id uint64) *Lease {
	l := t.m[id]
	if l == nil || l.Owner != o {
		return nil
	}
	return l
}

// Remove ends l; the caller unpins its blocks.
func (t *Table) Remove(l *Lease) {
	if t.m[l.ID] != l {
		return
	}
	delete(t.m, l.ID)
	t.reserved -= l.Bytes
	if ow := t.byOwner[l.Owner]; ow != nil {
		delete(ow.leases, l.ID)
		ow.bytes -= l.Bytes
		ow.blocks -= len(l.Blocks)
		if len(ow.leases) == 0 {
			delete(t.byOwner, l.Owner)
		}
	}
}

// Owned returns the leases of o (for teardown), in no particular order; it
// costs O(o's leases).
func (t *Table) Owned(o Owner) []*Lease {
	ow := t.byOwner[o]
	if ow == nil {
		return nil
	}
	out := make([]*Lease, 0, len(ow.leases))
	for _, l := range ow.leases {
		out = append(out, l)
	}
	return out
}

// OwnedBytes is the sum of o's live leases' bytes, in O(1).
func (t *Table) OwnedBytes(o Owner) uint64 {
	if ow := t.byOwner[o]; ow != nil {
		return ow.bytes
	}
	return 0
}

// Len is the number of live leases.
func (t *Table) Len() int { return len(t.m) }

// ReservedBytes is the sum of the live leases' bytes.
func (t *Table) ReservedBytes() uint64 { return t.reserved }
