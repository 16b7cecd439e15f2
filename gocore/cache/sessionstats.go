package cache

import "github.com/orbitkv/orbitkv/gocore/session"

// SessionStats is one session's share of the cache state: what a session's
// own Health frame reports. Manager-wide figures (blocks, RAM used,
// lookups, other sessions) tell one tenant about another's traffic, so they
// go only to the operator's endpoints (GET /health, /metrics); see
// docs/cache.md, "Health".
type SessionStats struct {
	Leases        uint64 // live leases the session owns
	LeasedBlocks  uint64 // block references those leases hold (each pins its block)
	ReservedBytes uint64 // bytes of the byte budget its leases and in-flight restores reserve
	Operations    uint64 // operation permits it holds: tickets live or draining, restores
	Tickets       uint64 // its live query tickets
}

// SessionStats returns sess's figures; false when sess is not attached (or
// already closing). Dispatcher goroutine only (channel.Dispatcher asks for
// it through a control event). It costs O(the session's restores), never
// anything proportional to other sessions' state: a session asking for its
// Health in a loop must not slow the dispatcher for the others, nor learn
// their load from its own latency.
func (s *Service) SessionStats(sess *session.Session) (SessionStats, bool) {
	st := s.sessions[sess.Index]
	if st == nil || st.sess != sess || st.closing {
		return SessionStats{}, false
	}
	leases, blocks, bytes := s.leases.Owned(st.owner) // O(1): nothing of other sessions is walked
	out := SessionStats{
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
