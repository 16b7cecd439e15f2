package cache

import (
	"testing"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// namespaces lists r's namespaces as the operator's listing does: the
// dispatcher's scan, then the SSD part.
func (r *rig) namespaces() map[abi.Namespace]NamespaceStat {
	out := map[abi.Namespace]NamespaceStat{}
	for _, n := range r.svc.Namespaces(r.svc.ScanNamespaces()) {
		if n.Other {
			n.Key = abi.Namespace{0xff} // the test's name for the other row
		}
		out[n.Key] = n
	}
	return out
}

// Each namespace's figures: resident blocks and bytes, blocks published,
// queries and the blocks leased to them, and the sessions whose last
// namespace it is; each session's last namespace as its client sent it.
func TestNamespacesCountEachNamespacesBlocksQueriesAndSessions(t *testing.T) {
	r := newRig(t, 1<<20)
	a, _ := r.open()
	b, _ := r.open()
	if _, ok := r.svc.SessionNamespace(a); ok {
		t.Fatal("a session that sent no namespace has one")
	}
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2)}, []uint32{0, 1, 2}), 0)
	lease := r.call(b, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(1), hash(5)), 0)
	if status(lease) != abi.StatusOK || lease.Arg0 != 2 {
		t.Fatalf("query: %v hits %d, want Ok 2", status(lease), lease.Arg0)
	}
	if resp := r.call(a, abi.CmdQueryBundle, queryDesc(ns2, hash(0)), 0); status(resp) != abi.StatusMiss {
		t.Fatalf("query of ns2: %v, want Miss", status(resp))
	}
	if ns, ok := r.svc.SessionNamespace(a); !ok || ns != ns2 {
		t.Errorf("a's last namespace = %v %v, want ns2", ns, ok)
	}
	if ns, ok := r.svc.SessionNamespace(b); !ok || ns != ns1 {
		t.Errorf("b's last namespace = %v %v, want ns1", ns, ok)
	}
	got := r.namespaces()
	want1 := NamespaceStat{Key: ns1, Namespace: ns1, Known: true, RAMBlocks: 3, RAMBytes: 3 * tLayers * tPageBytes,
		Queries: 1, HitBlocks: 2, Published: 3, Sessions: 1}
	want2 := NamespaceStat{Key: ns2, Namespace: ns2, Known: true, Queries: 1, Sessions: 1}
	if len(got) != 2 || got[ns1] != want1 || got[ns2] != want2 {
		t.Fatalf("Namespaces = %+v\nwant ns1 %+v\nand ns2 %+v", got, want1, want2)
	}
	r.call(b, abi.CmdRelease, nil, lease.Arg1)
	r.close(a)
	r.close(b)
	if got := r.namespaces(); got[ns1].Sessions != 0 || got[ns1].RAMBlocks != 3 || got[ns2].Queries != 1 {
		t.Errorf("after the sessions closed: %+v, want the figures kept and no sessions", got)
	}
	r.idle()
}

// Beyond MaxNamespaces a new namespace is counted in the other row, which
// appears only then.
func TestNamespacesBeyondTheBoundAreCountedAsOther(t *testing.T) {
	r := newRig(t, 1<<20)
	a, _ := r.open()
	for i := range MaxNamespaces - 1 {
		r.svc.nsTab.get(abi.Namespace{0xee, byte(i), byte(i >> 8)}, abi.Namespace{}, nil)
	}
	r.call(a, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0) // the last counted one
	if got := r.namespaces(); len(got) != MaxNamespaces || got[ns1].Queries != 1 {
		t.Fatalf("%d rows, ns1 %+v; want %d rows and ns1's query", len(got), got[ns1], MaxNamespaces)
	}
	r.call(a, abi.CmdQueryBundle, queryDesc(ns2, hash(0)), 0)
	r.call(a, abi.CmdQueryBundle, queryDesc(ns2, hash(1)), 0)
	got := r.namespaces()
	other := got[abi.Namespace{0xff}]
	if len(got) != MaxNamespaces+1 || other.Queries != 2 || other.Sessions != 1 || got[ns1].Sessions != 0 {
		t.Fatalf("%d rows, other %+v, ns1 %+v; want %d rows and ns2's 2 queries and session in other", len(got), other, got[ns1], MaxNamespaces+1)
	}
	if _, ok := got[ns2]; ok {
		t.Error("ns2 has a row of its own beyond the bound")
	}
	r.close(a)
}

// Under tenants a namespace is listed by its key (mixed with the
// tenant's domain) with the namespace its client sent and the domain.
func TestNamespacesOfATenantShowItsNamespaceKeyAndDomain(t *testing.T) {
	set, err := tenant.Parse([]string{"alpha=uid:4242"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20}}, Tenants: set})
	alpha := set.ByName("alpha")
	s, err := r.table.Open(session.Peer{PID: 1, UID: 4242, InstanceID: "tenant", Tenant: alpha})
	if err != nil {
		t.Fatal(err)
	}
	r.svc.Attach(s)
	r.gen[s] = s.InitialGeneration
	if resp := r.call(s, abi.CmdQueryBundle, queryDesc(ns1, hash(0)), 0); status(resp) != abi.StatusMiss {
		t.Fatalf("query: %v, want Miss", status(resp))
	}
	key := abi.Namespace(alpha.Namespace(ns1))
	got := r.namespaces()
	want := NamespaceStat{Key: key, Namespace: ns1, Known: true, Domain: "alpha", Queries: 1, Sessions: 1}
	if len(got) != 1 || got[key] != want {
		t.Fatalf("Namespaces = %+v, want %+v", got, want)
	}
	if ns, ok := r.svc.SessionNamespace(s); !ok || ns != ns1 {
		t.Errorf("the session's last namespace = %v %v, want ns1 as its client sent it", ns, ok)
	}
	r.close(s)
}

// BenchmarkNamespaceMemo is what the per-namespace figures add to a
// request of a session that stays in its namespace: the memo's
// comparison and the counter's increments (the SHA-256 of a tenant's mix
// and the table's probe run only when the namespace changes).
// BenchmarkUntrackedQuery is a whole untracked query (1 hit, leased and
// released) through the Service, for scale.
func BenchmarkNamespaceMemo(b *testing.B) {
	var tab nsTable
	var m nsMemo
	ns := abi.Namespace{7}
	for range b.N {
		m.of(ns, &tab)
		m.c.queries++
		m.c.hitBlocks += 2
	}
	if tab.m[ns].queries != uint64(b.N) {
		b.Fatalf("%d queries counted, want %d", tab.m[ns].queries, b.N)
	}
}

func BenchmarkUntrackedQuery(b *testing.B) {
	r := newRigWith(b, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20}}})
	a, _ := r.open()
	r.call(a, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0)}, []uint32{0}), 0)
	q := queryDesc(ns1, hash(0))
	b.ResetTimer()
	for range b.N {
		resp := r.call(a, abi.CmdQueryBundle, q, 0)
		if status(resp) != abi.StatusOK {
			b.Fatalf("query: %v", status(resp))
		}
		r.call(a, abi.CmdRelease, nil, resp.Arg1)
	}
	b.StopTimer()
	r.close(a)
}

// Under tenants each domain holds at most its share of the rows
// (MaxNamespaces / domains): a domain that uses more namespaces has the
// rest counted in an other row of its own (its Domain set), so another
// domain keeps its own row with exact figures, and no other row mixes
// two domains. Resident blocks of a domain's namespaces beyond its share
// are summed in that domain's other row.
func TestNamespacesATenantsFloodStaysInItsShare(t *testing.T) {
	set, err := tenant.Parse([]string{"evil=uid:4242", "victim=uid:4343"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRigWith(t, Spec{Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20}}, Tenants: set})
	open := func(name string, uid uint32) *session.Session {
		s, _ := r.openAs(session.Peer{PID: int32(uid), UID: uid, InstanceID: name, Tenant: set.ByName(name)})
		return s
	}
	evil, victim := open("evil", 4242), open("victim", 4343)
	share := MaxNamespaces / 2
	const flood = 1100
	for i := range flood {
		if resp := r.call(evil, abi.CmdQueryBundle, queryDesc(abi.Namespace{0xee, byte(i), byte(i >> 8)}, hash(0)), 0); status(resp) != abi.StatusMiss {
			t.Fatalf("evil's query %d: %v, want Miss", i, status(resp))
		}
	}
	// One publish beyond evil's share: its blocks are resident under a
	// key of no row of its own.
	r.call(evil, abi.CmdPublish, publishDesc(ns2, tLayers, []abi.BlockHash{hash(7)}, []uint32{0}), 0)
	r.call(victim, abi.CmdPublish, publishDesc(ns1, tLayers, []abi.BlockHash{hash(0), hash(1), hash(2), hash(3)}, []uint32{0, 1, 2, 3}), 0)
	lease := r.call(victim, abi.CmdQueryBundle, queryDesc(ns1, hash(0), hash(1), hash(2), hash(3)), 0)
	if status(lease) != abi.StatusOK || lease.Arg0 != 4 {
		t.Fatalf("victim's query: %v hits %d, want Ok 4", status(lease), lease.Arg0)
	}

	rows := r.svc.Namespaces(r.svc.ScanNamespaces())
	vkey := abi.Namespace(set.ByName("victim").Namespace(ns1))
	var evilRows, victimRows int
	var evilOther *NamespaceStat
	for i, n := range rows {
		switch {
		case n.Other && n.Domain == "evil":
			evilOther = &rows[i]
		case n.Other:
			t.Errorf("an other row of domain %q: %+v; want evil's alone", n.Domain, n)
		case n.Domain == "evil":
			evilRows++
		case n.Domain == "victim":
			victimRows++
			want := NamespaceStat{Key: vkey, Namespace: ns1, Known: true, Domain: "victim", RAMBlocks: 4, RAMBytes: 4 * tLayers * tPageBytes,
				Queries: 1, HitBlocks: 4, Published: 4, Sessions: 1}
			if n != want {
				t.Errorf("victim's row = %+v\nwant %+v", n, want)
			}
		default:
			t.Errorf("a row of domain %q: %+v", n.Domain, n)
		}
	}
	if victimRows != 1 {
		t.Errorf("victim has %d rows, want 1", victimRows)
	}
	if evilRows != share {
		t.Errorf("evil holds %d rows, want its share %d", evilRows, share)
	}
	want := NamespaceStat{Other: true, Domain: "evil", RAMBlocks: 1, RAMBytes: tLayers * tPageBytes, Queries: flood - uint64(share), Published: 1, Sessions: 1}
	if evilOther == nil || *evilOther != want {
		t.Errorf("evil's other row = %+v, want %+v", evilOther, want)
	}
	r.call(victim, abi.CmdRelease, nil, lease.Arg1)
	r.close(evil)
	r.close(victim)
}
