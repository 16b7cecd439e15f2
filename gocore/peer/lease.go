package peer

import (
	"fmt"
	"sync/atomic"
	"time"
)

// hold is one open transfer: a pin of the Source and the segment that
// serves it, owned by the peer that opened it.
type hold struct {
	id    uint64
	node  string // the peer that opened it
	conn  *peerConn
	pin   uint64 // Source token
	seg   uint64 // transfer server segment
	bytes uint64
	timer *time.Timer // the lease's end
}

// usage is one peer's share: its open transfers (and opens in progress)
// and the bytes they hold or reserved.
type usage struct {
	transfers int
	bytes     uint64
}

// endReason is how a transfer ended.
type endReason int

const (
	endReleased endReason = iota // ReleaseTransfer
	endExpired                   // the lease's deadline
	endDropped                   // its connection ended
	endClosed                    // Server.Close
)

// reserve takes one transfer and up to want bytes of node's share (at most
// MaxTransferBytes and what the peer has left) for an open in progress.
func (s *Server) reserve(node string, want uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, fmt.Errorf("%w: peer control is closing", ErrUnavailable)
	}
	u := s.peers[node]
	if u == nil {
		u = &usage{}
		s.peers[node] = u
	}
	if u.transfers >= s.spec.MaxPeerTransfers {
		s.st.limited.Add(1)
		return 0, fmt.Errorf("%w: peer %q holds %d transfers, the most peer.MaxPeerTransfers allows", ErrPeerLimit, node, u.transfers)
	}
	left := s.spec.MaxPeerBytes - u.bytes
	if left == 0 {
		s.st.limited.Add(1)
		return 0, fmt.Errorf("%w: peer %q holds %d bytes, the most peer.MaxPeerBytes allows", ErrPeerLimit, node, u.bytes)
	}
	got := min(want, s.spec.MaxTransferBytes, left)
	u.transfers++
	u.bytes += got
	return got, nil
}

// unreserve gives back an open's transfer and its bytes.
func (s *Server) unreserve(node string, bytes uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.give(node, 1, bytes)
}

// unreserveSome gives back bytes an open reserved and did not pin.
func (s *Server) unreserveSome(node string, bytes uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.give(node, 0, bytes)
}

// give returns transfers and bytes to node's share; s.mu is held.
func (s *Server) give(node string, transfers int, bytes uint64) {
	u := s.peers[node]
	u.transfers -= transfers
	u.bytes -= bytes
	if u.transfers == 0 && u.bytes == 0 {
		delete(s.peers, node)
	}
}

// add makes t open until deadline, on its connection; it refuses (with
// ErrUnavailable) when the connection already ended or the server closes,
// and the caller then releases what t holds.
func (s *Server) add(t *hold, deadline time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("%w: peer control is closing", ErrUnavailable)
	case t.conn.ended:
		return fmt.Errorf("%w: the connection of peer %q ended", ErrUnavailable, t.node)
	}
	s.transfers[t.id] = t
	t.conn.transfers[t.id] = struct{}{}
	id := t.id
	t.timer = time.AfterFunc(time.Until(deadline), func() { s.end(id, "", endExpired) })
	return nil
}

// end ends transfer id, once: the segment is unregistered (no READ touches
// the blocks after), then the Source unpins them. A release (endReleased)
// ends only a transfer of node. It reports whether it ended one.
func (s *Server) end(id uint64, node string, why endReason) bool {
	s.mu.Lock()
	t, ok := s.transfers[id]
	if !ok || (why == endReleased && t.node != node) {
		s.mu.Unlock()
		return false
	}
	delete(s.transfers, id)
	delete(t.conn.transfers, id)
	s.give(t.node, 1, t.bytes)
	t.timer.Stop()
	s.st.ended[why].Add(1)
	s.ending.Add(1)
	s.mu.Unlock()
	defer s.ending.Done()
	s.spec.Transfer.UnregisterSegment(t.seg)
	s.spec.Source.Unpin(t.pin)
	return true
}

// endConn marks c ended and ends every transfer opened on it; it returns
// how many.
func (s *Server) endConn(c *peerConn) int {
	s.mu.Lock()
	c.ended = true
	ids := make([]uint64, 0, len(c.transfers))
	for id := range c.transfers {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	n := 0
	for _, id := range ids {
		if s.end(id, "", endDropped) {
			n++
		}
	}
	return n
}

// counters are the server's running totals.
type counters struct {
	open              atomic.Int64  // connections accepted and not closed
	handshakesEvicted atomic.Uint64 // connections closed in their TLS handshake for a newer one
	connections       atomic.Uint64
	refusedHandshakes atomic.Uint64
	invalid           atomic.Uint64
	epochMismatches   atomic.Uint64
	limited           atomic.Uint64
	empty             atomic.Uint64
	opened            atomic.Uint64
	openedBytes       atomic.Uint64
	ended             [endClosed + 1]atomic.Uint64
}

// Stats are a peer control server's figures: totals since Serve, and what
// is open now.
type Stats struct {
	Connections       uint64 // authenticated connections accepted
	OpenConns         uint64 // connections open now, TLS handshakes included (at most MaxConns)
	RefusedHandshakes uint64 // handshakes refused (no or a foreign certificate, no node id)
	// HandshakesEvicted counts connections closed in their TLS handshake,
	// the oldest, to admit a new one (MaxHandshakes, MaxHandshakesPerHost
	// or MaxConns reached).
	HandshakesEvicted uint64
	Invalid           uint64 // OpenTransfer requests refused as invalid
	EpochMismatches   uint64 // OpenTransfer requests of another epoch
	Limited           uint64 // OpenTransfer requests refused by a peer's bounds
	Empty             uint64 // OpenTransfer answered with an empty run
	Opened            uint64 // transfers opened
	OpenedBytes       uint64 // bytes of the transfers opened
	Released          uint64 // transfers ended by ReleaseTransfer
	Expired           uint64 // transfers ended at their lease's deadline
	Dropped           uint64 // transfers ended with their connection
	ClosedAtShutdown  uint64 // transfers ended by Close
	Open              uint64 // transfers open now
	OpenBytes         uint64 // bytes they pin now
	Peers             uint64 // peers holding transfers now
}

// Stats returns the server's figures; safe from any goroutine.
func (s *Server) Stats() Stats {
	st := Stats{
		Connections:       s.st.connections.Load(),
		OpenConns:         uint64(max(s.st.open.Load(), 0)),
		RefusedHandshakes: s.st.refusedHandshakes.Load(),
		HandshakesEvicted: s.st.handshakesEvicted.Load(),
		Invalid:           s.st.invalid.Load(),
		EpochMismatches:   s.st.epochMismatches.Load(),
		Limited:           s.st.limited.Load(),
		Empty:             s.st.empty.Load(),
		Opened:            s.st.opened.Load(),
		OpenedBytes:       s.st.openedBytes.Load(),
		Released:          s.st.ended[endReleased].Load(),
		Expired:           s.st.ended[endExpired].Load(),
		Dropped:           s.st.ended[endDropped].Load(),
		ClosedAtShutdown:  s.st.ended[endClosed].Load(),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Open = uint64(len(s.transfers))
	for _, t := range s.transfers {
		st.OpenBytes += t.bytes
	}
	st.Peers = uint64(len(s.peers))
	return st
}
