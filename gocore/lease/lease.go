package lease

import (
	"github.com/orbitkv/orbitkv/gocore/index"
)

// Owner identifies the session that holds a lease: its slot index and its
// client token (slot indexes are reused; tokens are random per session).
type Owner struct {
	Slot  uint32
	Token uint64
}

// Lease pins Blocks (in prefix order) for Owner.
type Lease struct {
	ID     uint64
	Owner  Owner
	Blocks []*index.Block
	Bytes  uint64 // bytes reserved: the sum of the blocks' bytes
}

// Table holds the live leases.
type Table struct {
	next     uint64
	m        map[uint64]*Lease
	reserved uint64
}

// New returns an empty table; ids start at 1.
func New() *Table { return NewFrom(1) }

// NewFrom returns an empty table whose ids start at first (≥ 1). The cache
// starts each Manager lifetime at a base derived from its epoch, so a lease
// id of an earlier lifetime is unknown to a restarted Manager (spec: "a
// Manager restart rejects every old lease and handle").
func NewFrom(first uint64) *Table { return &Table{next: max(first, 1), m: make(map[uint64]*Lease)} }

// Add registers a lease over blocks (already pinned by the caller) and
// returns it with a fresh id.
func (t *Table) Add(o Owner, blocks []*index.Block) *Lease {
	l := &Lease{ID: t.next, Owner: o, Blocks: blocks}
	t.next++
	for _, b := range blocks {
		l.Bytes += b.Bytes
	}
	t.m[l.ID] = l
	t.reserved += l.Bytes
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
}

// Owned returns the leases of o (for teardown).
func (t *Table) Owned(o Owner) []*Lease {
	var out []*Lease
	for _, l := range t.m {
		if l.Owner == o {
			out = append(out, l)
		}
	}
	return out
}

// Len is the number of live leases.
func (t *Table) Len() int { return len(t.m) }

// ReservedBytes is the sum of the live leases' bytes.
func (t *Table) ReservedBytes() uint64 { return t.reserved }
