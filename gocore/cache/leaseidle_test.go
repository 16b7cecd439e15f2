package cache

import (
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// A session that leases the whole RAM tier and then goes idle loses its
// lease after the lease idle timeout (DefaultLeaseIdleTimeout, the zero
// Spec's): another session can then lease the RAM, and the idle session's
// Restore and Release of the revoked lease answer Timeout.
func TestAStalledLeaseIsRevokedAndItsRAMLeasedByAnother(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	const blockBytes = tLayers * tPageBytes
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 4 * blockBytes}}, Clock: clock.Now}) // budget: 4 blocks
	a, _ := r.open()
	b, _ := r.open()
	if p := r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 4), pg(4)), 0); status(p) != abi.StatusOK || p.Arg0 != 4 {
		t.Fatalf("publish: %v stored %d", status(p), p.Arg0)
	}
	q := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hs(0, 4)...), 0)
	if status(q) != abi.StatusOK || q.Arg0 != 4 {
		t.Fatalf("a's query: %v %d hits", status(q), q.Arg0)
	}
	if p := r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hs(0, 4)...), 0); status(p) != abi.StatusUnadmitted {
		t.Fatalf("b's query while a holds the budget: %v, want Unadmitted", status(p))
	}

	// Progress keeps the lease: a restore just before the timeout restarts it.
	clock.Advance(DefaultLeaseIdleTimeout - time.Second)
	op := r.call(a, abi.CmdRestore, restoreDesc(q.Arg1, []uint32{0}, []uint32{5}), 0)
	if status(op) != abi.StatusOK {
		t.Fatalf("restore: %v", status(op))
	}
	if p := r.wait(a, op.Arg0); status(p) != abi.StatusOK {
		t.Fatalf("restore poll: %v", status(p))
	}
	clock.Advance(2 * time.Second)
	r.svc.Complete(64, func(uint32, abi.Message) {})
	if st := r.svc.Stats(); st.Leases != 1 || st.LeasesRevoked != 0 {
		t.Fatalf("a lease with a restore a second ago: %d leases, %d revoked; want it kept", st.Leases, st.LeasesRevoked)
	}

	// Then a goes idle.
	clock.Advance(DefaultLeaseIdleTimeout)
	r.svc.Complete(64, func(uint32, abi.Message) {})
	if st := r.svc.Stats(); st.Leases != 0 || st.ReservedBytes != 0 || st.Pins != 0 || st.LeasesRevoked != 1 {
		t.Fatalf("after a's idle timeout: %d leases, %d bytes reserved, %d pins, %d revoked; want 0, 0, 0, 1",
			st.Leases, st.ReservedBytes, st.Pins, st.LeasesRevoked)
	}
	qb := r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hs(0, 4)...), 0)
	if status(qb) != abi.StatusOK || qb.Arg0 != 4 {
		t.Fatalf("b's query after a's lease was revoked: %v %d hits, want Ok 4", status(qb), qb.Arg0)
	}
	if p := r.call(a, abi.CmdRestore, restoreDesc(q.Arg1, []uint32{0}, []uint32{5}), 0); status(p) != abi.StatusTimeout || abi.Field(p.Arg0) != abi.FieldLeaseID {
		t.Fatalf("restore of the revoked lease: %v field %v, want Timeout lease_id", status(p), abi.Field(p.Arg0))
	}
	if p := r.call(a, abi.CmdRelease, nil, q.Arg1); status(p) != abi.StatusTimeout {
		t.Fatalf("release of the revoked lease: %v, want Timeout", status(p))
	}
	if p := r.call(b, abi.CmdRelease, nil, qb.Arg1); status(p) != abi.StatusOK {
		t.Fatalf("b's release: %v", status(p))
	}
	r.close(a)
	r.close(b)
	r.idle()
}

// LeaseIdleNever keeps an idle lease.
func TestLeaseIdleNeverKeepsAnIdleLease(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20}}, LeaseIdleTimeout: LeaseIdleNever, Clock: clock.Now})
	a, _ := r.open()
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, hs(0, 1), pg(1)), 0)
	q := r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0)
	clock.Advance(24 * time.Hour)
	r.svc.Complete(64, func(uint32, abi.Message) {})
	if st := r.svc.Stats(); st.Leases != 1 || st.LeasesRevoked != 0 {
		t.Fatalf("%d leases, %d revoked; want the lease kept", st.Leases, st.LeasesRevoked)
	}
	if p := r.call(a, abi.CmdRelease, nil, q.Arg1); status(p) != abi.StatusOK {
		t.Fatalf("release: %v", status(p))
	}
	r.close(a)
	r.idle()
}

func TestLeaseIdleTimeoutLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    time.Duration
		ok   bool
	}{
		{"0 takes the default", 0, true},
		{"LeaseIdleNever is accepted", LeaseIdleNever, true},
		{"a second is the least", time.Second, true},
		{"under a second is refused", time.Second - 1, false},
		{"over a day is refused", 24*time.Hour + 1, false},
		{"another negative value is refused", -2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkLeaseIdle(tc.d); (err == nil) != tc.ok {
				t.Fatalf("checkLeaseIdle(%v) = %v", tc.d, err)
			}
		})
	}
}
