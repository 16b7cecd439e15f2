package catalog

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// indexStripes is how many locks the local index is split over: a reader
// (Owners) waits at most for one stripe's update of one entry.
const indexStripes = 64

// owner is one other Manager's incarnation that advertises blocks: its
// node and the epoch of the records it wrote. Interned and immutable.
type owner struct {
	node  string
	epoch uint64
}

type indexStripe struct {
	mu sync.RWMutex
	m  map[entry][]*owner
	_  [64]byte // keeps neighbouring stripes' locks off one cache line
}

// memberView is the live members, each at its current (largest live)
// epoch; immutable once published.
type memberView struct {
	byNode map[string]Member
	list   []Member // sorted by NodeID
}

// index is what the Watch has seen of the other Managers. Only the watch
// goroutine writes it; Owners and Members read it from any goroutine.
type index struct {
	stripes [indexStripes]indexStripe
	members atomic.Pointer[memberView]
	entries atomic.Int64 // (entry, owner) pairs in the stripes
}

func (x *index) init() {
	for i := range x.stripes {
		x.stripes[i].m = map[entry][]*owner{}
	}
	x.members.Store(&memberView{byNode: map[string]Member{}})
}

func (x *index) stripe(e entry) *indexStripe { return &x.stripes[mix64(e.ns, e.h)%indexStripes] }

// Owners returns the other live Managers that advertise (ns, h), each at
// its current epoch: advertisements of an older epoch of a node, and of a
// node whose member record is gone (lease expired, revoked), are never
// returned, nor is this Manager. It reads the local index only (no etcd
// round trip), so while etcd is unreachable it answers from what the
// Watch saw last: the result is a list of candidates, which peer control
// confirms (a stale one costs one refused transfer, a miss). It does not
// allocate when there is no live owner (nil, also when the index holds
// only older epochs); else it allocates the one slice, the caller's.
// Safe from any goroutine; O(owners of h).
func (c *Catalog) Owners(ns abi.Namespace, h abi.BlockHash) []Member {
	e := entry{ns, h}
	s := c.stripe(e)
	s.mu.RLock()
	owners := s.m[e]
	if len(owners) == 0 {
		s.mu.RUnlock()
		return nil
	}
	view := c.members.Load()
	var out []Member
	for _, o := range owners {
		if m, ok := view.byNode[o.node]; ok && m.Epoch == o.epoch {
			if out == nil {
				out = make([]Member, 0, len(owners)) // the only allocation, and only with an owner
			}
			out = append(out, m)
		}
	}
	s.mu.RUnlock()
	return out
}

// Members returns the live members (this Manager too, once its record is
// seen), sorted by NodeID, each at its current epoch; a new slice.
func (c *Catalog) Members() []Member { return slices.Clone(c.members.Load().list) }

func (x *index) add(o *owner, e entry) {
	s := x.stripe(e)
	s.mu.Lock()
	l := s.m[e]
	if !slices.Contains(l, o) {
		s.m[e] = append(l, o)
		x.entries.Add(1)
	}
	s.mu.Unlock()
}

func (x *index) remove(o *owner, e entry) {
	s := x.stripe(e)
	s.mu.Lock()
	l := s.m[e]
	if i := slices.Index(l, o); i >= 0 {
		if len(l) == 1 {
			delete(s.m, e)
		} else {
			s.m[e] = slices.Delete(l, i, i+1)
		}
		x.entries.Add(-1)
	}
	s.mu.Unlock()
}

// publishMembers makes the member view of epochs (node → live epochs →
// record) current: each node at its largest live epoch.
func (x *index) publishMembers(epochs map[string]map[uint64]Member) {
	v := &memberView{byNode: make(map[string]Member, len(epochs))}
	for node, es := range epochs {
		var best Member
		for ep, m := range es {
			if ep > best.Epoch {
				best = m
			}
		}
		if best.Epoch != 0 {
			v.byNode[node] = best
			v.list = append(v.list, best)
		}
	}
	slices.SortFunc(v.list, func(a, b Member) int { return strings.Compare(a.NodeID, b.NodeID) })
	x.members.Store(v)
}
