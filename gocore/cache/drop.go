package cache

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/tier"
)

// Drop removes the unpinned blocks of namespace ns (every namespace when
// ns is nil) from the RAM tier: demoted to the SSD tier first without
// flush, and deleted from the SSD tier too with flush (tier.Tiers.Drop).
// Pinned and publishing blocks stay and are counted. Dispatcher goroutine
// only (channel.Dispatcher.Do); Stats shows the result at once.
func (s *Service) Drop(ns *abi.Namespace, flush bool) tier.Dropped {
	match := func(abi.Namespace) bool { return true }
	if ns != nil {
		want := *ns
		match = func(n abi.Namespace) bool { return n == want }
	}
	d := s.tiers.Drop(match, flush)
	s.publishStats()
	return d
}

// SetDraining makes every later QueryBundle, Publish and Restore answer
// Unadmitted (counted in Stats.Unadmitted) while on; Release, RestorePoll,
// Poll, Claim and CancelQuery are served as before, so the operations in
// flight can finish. Dispatcher goroutine only.
func (s *Service) SetDraining(on bool) { s.draining = on }

// opensWork reports whether c starts a new operation (refused while
// draining) rather than continuing or ending one.
func opensWork(c abi.Command) bool {
	return c == abi.CmdQueryBundle || c == abi.CmdPublish || c == abi.CmdRestore
}

// InFlight publishes the dispatcher's figures for Stats and returns the
// operations in flight (Stats.Operations). Dispatcher goroutine only.
func (s *Service) InFlight() uint64 {
	s.publishStats()
	return s.stats.operations.Load()
}
