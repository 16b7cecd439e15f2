package cache

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tenant"
)

// MaxNamespaces bounds the namespaces the Service counts apart (queries,
// hit blocks, published blocks) and the rows of Namespaces besides its
// "other" row: the namespaces first used beyond it are counted together
// as other, so a client that sends ever new namespaces costs the Manager
// one map of at most this many entries.
const MaxNamespaces = 1024

// nsCounts are one namespace key's request figures since start, counted
// on the dispatcher goroutine through the session's memo (nsMemo.c): a
// request costs a comparison of its namespace with the session's last
// and an increment, no map probe.
type nsCounts struct {
	ns        abi.Namespace  // as the client sent it
	domain    *tenant.Domain // whose mix keys it; nil without tenants
	queries   uint64         // untracked queries answered Ok or Miss, tickets delivered Ok or Miss
	hitBlocks uint64         // blocks leased to those
	published uint64         // blocks stored by publishes (those already resident not counted)
}

// nsTable is the Service's nsCounts by namespace key (the namespace as
// the index keys blocks), at most MaxNamespaces of them, and other for
// the rest. Dispatcher goroutine only.
type nsTable struct {
	m     map[abi.Namespace]*nsCounts
	other nsCounts
}

// get returns key's counts, made on first use while the table has room;
// &t.other beyond MaxNamespaces.
func (t *nsTable) get(key, ns abi.Namespace, d *tenant.Domain) *nsCounts {
	if c := t.m[key]; c != nil {
		return c
	}
	if len(t.m) >= MaxNamespaces {
		return &t.other
	}
	if t.m == nil {
		t.m = make(map[abi.Namespace]*nsCounts)
	}
	c := &nsCounts{ns: ns, domain: d}
	t.m[key] = c
	return c
}

// lookup returns key's counts (&t.other for a key the table does not
// hold).
func (t *nsTable) lookup(key abi.Namespace) *nsCounts {
	if c := t.m[key]; c != nil {
		return c
	}
	return &t.other
}

// SessionNamespace returns the last namespace sess queried or published
// in, as its client sent it (ok false before any, or for a session the
// cache does not serve). Dispatcher goroutine only (channel.Dispatcher.Do).
func (s *Service) SessionNamespace(sess *session.Session) (abi.Namespace, bool) {
	st := s.sessions[sess.Index]
	if st == nil || st.sess != sess || !st.ns.valid {
		return abi.Namespace{}, false
	}
	return st.ns.from, true
}

// NamespaceStat is one namespace's figures (Namespaces).
type NamespaceStat struct {
	// Key is the namespace as the Manager keys its blocks: Namespace
	// mixed with Domain's name (tenant.Domain.Namespace), Namespace itself
	// without tenants.
	Key abi.Namespace
	// Namespace is the namespace as the engine sent it, when Known: a
	// session used Key since the Manager started, or there are no tenants
	// (Key is then the namespace). Blocks recovered from the SSD tier, or
	// held in RAM, of a key no session used since start are listed by Key
	// alone under tenants: the mix cannot be undone.
	Namespace abi.Namespace
	Known     bool
	// Domain is the tenant domain the key belongs to: its tenant's name,
	// or its sharing group's; "" without tenants, or when unknown.
	Domain string
	// Other is the row of the namespaces beyond MaxNamespaces, summed
	// (Key and Namespace zero).
	Other bool
	// Resident blocks and their bytes (block bytes, all layers) in the
	// RAM tier (sealed) and the SSD tier (durable).
	RAMBlocks, RAMBytes, SSDBlocks, SSDBytes uint64
	// Since start: queries answered Ok or Miss (untracked, and tickets
	// delivered), the blocks leased to them, and blocks published.
	Queries, HitBlocks, Published uint64
	// Sessions whose last namespace is Key.
	Sessions uint32
}

// NamespaceScan is the dispatcher's part of a namespace listing
// (ScanNamespaces), which Namespaces completes off the dispatcher.
type NamespaceScan struct {
	rows    map[abi.Namespace]*NamespaceStat
	other   NamespaceStat
	tenants bool
}

// ScanNamespaces gathers the request figures of every counted namespace,
// the sessions by last namespace, and the RAM tier's resident blocks by
// namespace (index.Index.ByNamespace: a walk of the whole index, which
// holds the dispatcher for its time; BenchmarkByNamespace). Dispatcher
// goroutine only.
func (s *Service) ScanNamespaces() *NamespaceScan {
	sc := &NamespaceScan{rows: make(map[abi.Namespace]*NamespaceStat, len(s.nsTab.m)), tenants: len(s.tenants) > 0}
	sc.other = NamespaceStat{Other: true}
	addCounts(&sc.other, &s.nsTab.other)
	for key, c := range s.nsTab.m {
		r := &NamespaceStat{Key: key, Namespace: c.ns, Known: true}
		if c.domain != nil {
			r.Domain = c.domain.Name
		}
		addCounts(r, c)
		sc.rows[key] = r
	}
	for _, st := range s.sessions {
		if !st.ns.valid || st.closing {
			continue
		}
		if r := sc.rows[st.ns.to]; r != nil {
			r.Sessions++
		} else {
			sc.other.Sessions++
		}
	}
	for key, u := range s.idx.ByNamespace() {
		r := sc.row(key)
		r.RAMBlocks += u.Blocks
		r.RAMBytes += u.Bytes
		if r.Domain == "" && u.Domain != index.NoDomain {
			r.Domain = s.domainName(u.Domain)
		}
	}
	return sc
}

// domainName is the name of the tenant domain of index domain d.
func (s *Service) domainName(d index.Domain) string {
	for _, t := range s.tenants {
		if domainOf(t.t.Domain) == d {
			return t.t.Domain.Name
		}
	}
	return ""
}

func addCounts(r *NamespaceStat, c *nsCounts) {
	r.Queries += c.queries
	r.HitBlocks += c.hitBlocks
	r.Published += c.published
}

// row is key's row, made for a key of no counted namespace (its
// namespace is known without tenants only).
func (sc *NamespaceScan) row(key abi.Namespace) *NamespaceStat {
	r := sc.rows[key]
	if r == nil {
		r = &NamespaceStat{Key: key}
		if !sc.tenants {
			r.Namespace, r.Known = key, true
		}
		sc.rows[key] = r
	}
	return r
}

// Namespaces completes sc with the SSD tier's resident blocks by
// namespace (a walk of the SSD tier's entries under its lock, off the
// dispatcher) and returns the rows: the counted namespaces, then those
// only resident, largest first, up to MaxNamespaces rows in all; the
// rest summed into a last row with Other set, present only when it
// counts something. Rows are sorted by domain, namespace and key. Safe
// from any goroutine.
func (s *Service) Namespaces(sc *NamespaceScan) []NamespaceStat {
	for key, u := range s.tiers.SSDByNamespace() {
		r := sc.row(key)
		r.SSDBlocks += u.Blocks
		r.SSDBytes += u.Bytes
	}
	rows := make([]*NamespaceStat, 0, len(sc.rows))
	for _, r := range sc.rows {
		rows = append(rows, r)
	}
	// The counted namespaces first (at most MaxNamespaces), then the
	// largest of the others.
	slices.SortFunc(rows, func(a, b *NamespaceStat) int {
		if a.Known != b.Known && sc.tenants {
			if a.Known {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.RAMBytes+b.SSDBytes, a.RAMBytes+a.SSDBytes)
	})
	out := make([]NamespaceStat, 0, min(len(rows), MaxNamespaces)+1)
	other := sc.other
	for i, r := range rows {
		if i < MaxNamespaces {
			out = append(out, *r)
			continue
		}
		other.RAMBlocks += r.RAMBlocks
		other.RAMBytes += r.RAMBytes
		other.SSDBlocks += r.SSDBlocks
		other.SSDBytes += r.SSDBytes
		other.Queries += r.Queries
		other.HitBlocks += r.HitBlocks
		other.Published += r.Published
		other.Sessions += r.Sessions
	}
	slices.SortFunc(out, func(a, b NamespaceStat) int {
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(b2i(a.Known), b2i(b.Known)),
			bytes.Compare(a.Namespace[:], b.Namespace[:]), bytes.Compare(a.Key[:], b.Key[:]))
	})
	if other != (NamespaceStat{Other: true}) {
		out = append(out, other)
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 0
	}
	return 1
}
