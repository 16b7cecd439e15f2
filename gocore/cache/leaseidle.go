package cache

import (
	"log/slog"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/limit"
)

// Leases that make no progress are revoked (docs/security.md). A lease
// handed to a client (an untracked query's answer, a ticket delivered by
// Poll or Claim) whose holder starts no Restore on it, sees none land and
// does not Release it for the lease idle timeout is ended by the sweep:
// its blocks are unpinned and its bytes go back to the budget, its id is
// tombstoned in the session (Restore and Release naming it answer
// Timeout, as a late poll of an expired operation does), it is counted
// (Stats.LeasesRevoked) and logged, at most revokeLogBurst lines a second.

// DefaultLeaseIdleTimeout is Spec.LeaseIdleTimeout's default.
const DefaultLeaseIdleTimeout = 60 * time.Second

// LeaseIdleNever as Spec.LeaseIdleTimeout keeps idle leases until Release
// or session teardown.
const LeaseIdleNever time.Duration = -1

// LeaseIdleTimeoutRange is the limit of Spec.LeaseIdleTimeout other than
// 0 (the default) and LeaseIdleNever.
var LeaseIdleTimeoutRange = limit.Range[time.Duration]{Field: "cache.LeaseIdleTimeout", Min: time.Second, Max: 24 * time.Hour,
	Zero: limit.Format(DefaultLeaseIdleTimeout)}

// revokeLogBurst bounds the revocation log lines per second, all sessions
// together.
const revokeLogBurst = 10

// leaseIdleOf is the idle timeout in force for spec value d (0: never).
func leaseIdleOf(d time.Duration) time.Duration {
	switch {
	case d == LeaseIdleNever:
		return 0
	case d == 0:
		return DefaultLeaseIdleTimeout
	}
	return d
}

// handLease starts the idle clock of the lease a response to st hands its
// client: an Ok answer of QueryBundle, Poll or Claim naming a lease in arg1.
func (s *Service) handLease(st *sessState, resp *abi.Message) {
	if s.leaseIdle == 0 || abi.Status(resp.Code) != abi.StatusOK || resp.Arg1 == 0 {
		return
	}
	if l := s.leases.Get(st.owner, resp.Arg1); l != nil {
		now := s.now()
		s.leases.Hand(l, now)
		s.sweeps.Arm(now.Add(s.leaseIdle))
	}
}

// touchLease records progress on l (a Restore started or landed on it).
func (s *Service) touchLease(l *lease.Lease) {
	if s.leaseIdle != 0 {
		s.leases.Touch(l, s.now())
	}
}

// revokeStalled ends every handed lease idle for the timeout at now and
// arms the sweep for the next one; the caller admits waiting tickets.
func (s *Service) revokeStalled(now time.Time) {
	if s.leaseIdle == 0 {
		return
	}
	cutoff := now.Add(-s.leaseIdle)
	for l := s.leases.Stalled(cutoff); l != nil; l = s.leases.Stalled(cutoff) {
		s.revoke(l, now)
	}
	if t, ok := s.leases.OldestProgress(); ok {
		s.sweeps.Arm(t.Add(s.leaseIdle))
	}
}

// revoke ends stalled lease l, tombstones its id in its session and logs it.
func (s *Service) revoke(l *lease.Lease, now time.Time) {
	id, blocks, bytes, idle := l.ID, len(l.Blocks), l.Bytes, now.Sub(l.Progress())
	pid := -1
	if st := s.sessions[l.Owner.Slot]; st != nil && st.owner == l.Owner {
		st.revokedLeases.Add(id)
		pid = int(st.sess.Peer.PID)
	}
	s.leases.End(l)
	s.stats.leasesRevoked.Add(1)
	if ok, suppressed := s.revokeLog.Allow(time.Now()); ok {
		attrs := []any{slog.Int("pid", pid), slog.Uint64("slot", uint64(l.Owner.Slot)), slog.Uint64("lease", id),
			slog.Int("blocks", blocks), slog.Uint64("bytes", bytes), slog.Duration("idle", idle),
			slog.Duration("lease_idle_timeout", s.leaseIdle)}
		if suppressed > 0 {
			attrs = append(attrs, slog.Int("suppressed", suppressed))
		}
		s.log.Warn("lease revoked: no Restore or Release on it within the lease idle timeout", attrs...)
	}
}

// revokedLease answers a request naming lease id of st that the sweep
// revoked: Timeout; ok is false when id was not revoked (or its tombstone
// is forgotten, beyond ticket.MaxTombstones later revocations).
func (s *Service) revokedLease(st *sessState, m *abi.Message, id uint64) (abi.Message, bool) {
	if !st.revokedLeases.Has(id) {
		return abi.Message{}, false
	}
	return m.Response(s.epoch, abi.StatusTimeout, uint64(abi.FieldLeaseID), 0), true
}
