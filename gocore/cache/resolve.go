package cache

import (
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/ticket"
)

// The cache's side of tickets (ticket.Host) and of SSD reads held for an
// untracked query's session (tier.Reader).

// ReadDone holds a block prefetched for st's untracked query until its next
// query, so another session's prefetch or publish cannot evict the run
// before it is leased; a closed session's reads hold nothing.
func (st *sessState) ReadDone(blk *index.Block) {
	if blk != nil && st.svc.live(st) {
		st.svc.idx.Pin(blk)
		st.holds = append(st.holds, blk)
	}
}

// releaseHolds unpins the blocks prefetched for st's earlier query.
func (s *Service) releaseHolds(st *sessState) {
	for _, blk := range st.holds {
		s.idx.Unpin(blk)
	}
	clear(st.holds) // a stale block pointer would keep its slab alive (index.Index.newBlock)
	st.holds = st.holds[:0]
}

// AdmitOp reports whether one more operation permit fits the bounds
// (ticket.Host): tickets live or draining plus restores, per session and
// in all.
func (s *Service) AdmitOp(b *ticket.Book) bool {
	st := s.sessions[b.Sess.Index]
	return st.opsOf() < s.maxOpsSession && s.tickets.Permits()+s.restores.all < s.maxOps
}

// opsOf is the number of operation permits st holds.
func (st *sessState) opsOf() int { return st.book.Permits() + len(st.restores) }

// Drained tells that a closing session's last draining ticket finished
// (ticket.Host).
func (s *Service) Drained(b *ticket.Book) {
	if st := s.sessions[b.Sess.Index]; st != nil && st.book == b {
		s.maybeFinish(st)
	}
}

// Signal wakes b's client (ticket.Host).
func (s *Service) Signal(b *ticket.Book) {
	if st := s.sessions[b.Sess.Index]; st != nil && st.book == b {
		st.notify.Signal()
	}
}

// ArmExpiry makes sure the sweep runs by deadline d (ticket.Host).
func (s *Service) ArmExpiry(d time.Time) {
	s.sweeps.Arm(d)
}

// CountLookup counts one logical lookup of the chain ending in last
// (ticket.Host).
func (s *Service) CountLookup(ns abi.Namespace, last abi.BlockHash) { s.lookups.Add(ns, last) }
