package cache

import (
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/gocore/ticket"
	"github.com/orbitkv/orbitkv/gocore/tier"
)

// The cache's side of tickets (ticketHost, the ticket.Host).

// ticketHost is the cache as tickets see it (ticket.Host): operation
// permits, expiry, and the sessions' wake-ups and teardown. Dispatcher
// goroutine only.
type ticketHost struct{ s *Service }

// AdmitOp reports whether one more operation permit fits the bounds:
// tickets live or draining plus restores, per session and in all.
func (h ticketHost) AdmitOp(b *ticket.Book) bool { return h.s.admitOp(b) }

func (s *Service) admitOp(b *ticket.Book) bool {
	st := s.sessions[b.Sess.Index]
	if b.Tenant != nil && st.ns.t != nil && b.Tenant.Ops >= int(s.tenants[st.ns.t.Index].share.Ops) {
		return false
	}
	return st.opsOf() < s.maxOpsSession && s.tickets.Permits()+s.restores.all < s.maxOps
}

// tenantOps is one tenant's operation permits (tickets and restores of
// its sessions) and its resolved shares.
type tenantOps struct {
	t     *tenant.Tenant
	c     ticket.TenantCounts // ticket.Book.Tenant of its sessions points here
	share tenant.Share
}

// opsOf is the number of operation permits st holds.
func (st *sessState) opsOf() int { return st.book.Permits() + len(st.restores) }

// Drained tells that a closing session's last draining ticket finished.
func (h ticketHost) Drained(b *ticket.Book) {
	if st := h.s.sessions[b.Sess.Index]; st != nil && st.book == b {
		h.s.maybeFinish(st)
	}
}

// Delivered counts a ticket of b delivered Ok or Miss, in namespace key
// ns, with hits blocks leased, in its namespace's figures.
func (h ticketHost) Delivered(b *ticket.Book, ns abi.Namespace, hits uint32) {
	var c *nsCounts
	if st := h.s.sessions[b.Sess.Index]; st != nil && st.book == b && st.ns.valid && st.ns.to == ns {
		c = st.ns.c
	} else {
		c = h.s.nsTab.lookup(ns, b.Domain)
	}
	c.queries++
	c.hitBlocks += uint64(hits)
}

// Signal wakes b's client.
func (h ticketHost) Signal(b *ticket.Book) {
	if st := h.s.sessions[b.Sess.Index]; st != nil && st.book == b {
		st.notify.Signal()
	}
}

// ArmExpiry makes sure the sweep runs by deadline d.
func (h ticketHost) ArmExpiry(d time.Time) { h.s.sweeps.Arm(d) }

// HoldReservation holds t at Reservation, before it takes its lease and
// bytes: t stays pending (Poll answers Loading) until the continuation
// resumes it; a ticket revoked meanwhile (its session closed, or
// cancelled) is left alone. Always false in builds without failpoints.
func (h ticketHost) HoldReservation(t *ticket.Ticket) bool {
	s := h.s
	return failpoint.Enabled && s.resumed.Pause(failpoint.Reservation, func(postFunc) { s.tickets.Resume(t) })
}

// TenantStat is one tenant's figures and shares (the operator's Stats).
type TenantStat struct {
	Name   string
	Domain string
	Share  tenant.Share
	ticket.TenantCounts
	LeasedBytes uint64
	// Tier is its domain's blocks in the tiers, quotas and refusals; the
	// tenants of one sharing group have the same.
	Tier tier.DomainStats
}

// TenantStats returns every tenant's figures in the order of Spec.Tenants;
// nil without tenants. Dispatcher goroutine only (channel.Dispatcher.Do).
func (s *Service) TenantStats() []TenantStat {
	out := make([]TenantStat, 0, len(s.tenants))
	for i, t := range s.tenants {
		out = append(out, TenantStat{Name: t.t.Name, Domain: t.t.Domain.Name, Share: t.share, TenantCounts: t.c,
			LeasedBytes: s.leases.TenantLeased(i), Tier: s.tiers.DomainStats(domainOf(t.t.Domain))})
	}
	return out
}
