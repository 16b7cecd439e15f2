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
// other rows, so a client that sends ever new namespaces costs the
// Manager one map of at most this many entries. Without tenants the
// namespaces first used beyond it are counted together in one other row.
// Under tenants each domain (a tenant, or a sharing group) holds at most
// its share of the rows, nsShare: MaxNamespaces / the number of domains,
// reserved, so the shares sum to at most MaxNamespaces and one domain's
// namespaces, however many, never take another's rows; a domain's
// namespaces beyond its share are counted in an other row of its own.
const MaxNamespaces = 1024

// nsShare is the rows each of domains tenant domains may hold:
// MaxNamespaces / domains (at least 1; tenant.MaxTenants keeps it at 4 or
// more), MaxNamespaces without tenants (domains 0).
func nsShare(domains int) int {
	if domains <= 1 {
		return MaxNamespaces
	}
	return max(MaxNamespaces/domains, 1)
}

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
// the index keys blocks): without tenants at most MaxNamespaces of them
// and other for the rest; under tenants at most share per domain (held,
// by tenant.Domain.Index) and the rest of a domain in others[its Index].
// Dispatcher goroutine only.
type nsTable struct {
	m      map[abi.Namespace]*nsCounts
	other  nsCounts   // beyond MaxNamespaces; namespaces of no domain
	share  int        // rows a domain may hold (nsShare); 0 until setDomains
	held   []int      // rows held, by domain Index
	others []nsCounts // beyond share, by domain Index (domain set)
}

// setDomains sizes the table for the tenants' domains (tenant.Set.Domains,
// in Index order); without tenants it is not called.
func (t *nsTable) setDomains(ds []*tenant.Domain) {
	t.share = nsShare(len(ds))
	t.held = make([]int, len(ds))
	t.others = make([]nsCounts, len(ds))
	for i, d := range ds {
		t.others[i].domain = d
	}
}

// get returns key's counts, made on first use while the table has room:
// without a domain (d nil), while it holds fewer than MaxNamespaces rows,
// else &t.other; with one, while d holds fewer than its share, else d's
// other counts.
func (t *nsTable) get(key, ns abi.Namespace, d *tenant.Domain) *nsCounts {
	if c := t.m[key]; c != nil {
		return c
	}
	tenanted := d != nil && d.Index < len(t.held)
	switch {
	case tenanted && t.held[d.Index] >= t.share:
		return &t.others[d.Index]
	case !tenanted && len(t.m) >= MaxNamespaces:
		return &t.other
	}
	if t.m == nil {
		t.m = make(map[abi.Namespace]*nsCounts)
	}
	c := &nsCounts{ns: ns, domain: d}
	t.m[key] = c
	if tenanted {
		t.held[d.Index]++
	}
	return c
}

// lookup returns key's counts; for a key the table does not hold, the
// other counts of the tiers' domain dom (index.NoDomain: &t.other).
func (t *nsTable) lookup(key abi.Namespace, dom index.Domain) *nsCounts {
	if c := t.m[key]; c != nil {
		return c
	}
	if i := int(dom) - 1; dom != index.NoDomain && i < len(t.others) {
		return &t.others[i]
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
	// Other is a row of the namespaces beyond the rows a domain may hold,
	// summed (Key and Namespace zero): without tenants the one of those
	// beyond MaxNamespaces; under tenants one per domain, Domain naming
	// it, beyond its share (MaxNamespaces / domains), and one with Domain
	// "" for blocks of no known domain beyond that share.
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
	others  map[string]*NamespaceStat // by Domain: the table's other counts
	share   int                       // the rows a domain may list (nsShare)
	tenants bool
}

// ScanNamespaces gathers the request figures of every counted namespace,
// the sessions by last namespace, and the RAM tier's resident blocks by
// namespace (index.Index.ByNamespace: a walk of the whole index, which
// holds the dispatcher for its time; BenchmarkByNamespace). Dispatcher
// goroutine only.
func (s *Service) ScanNamespaces() *NamespaceScan {
	sc := &NamespaceScan{rows: make(map[abi.Namespace]*NamespaceStat, len(s.nsTab.m)), others: map[string]*NamespaceStat{},
		share: MaxNamespaces, tenants: len(s.tenants) > 0}
	if sc.tenants {
		sc.share = s.nsTab.share
	}
	addCounts(sc.other(""), &s.nsTab.other)
	for i := range s.nsTab.others {
		c := &s.nsTab.others[i]
		addCounts(sc.other(c.domain.Name), c)
	}
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
		} else if st.ns.t != nil {
			sc.other(st.ns.t.Domain.Name).Sessions++
		} else {
			sc.other("").Sessions++
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

// addRow adds r's figures to the other row o.
func addRow(o, r *NamespaceStat) {
	o.RAMBlocks += r.RAMBlocks
	o.RAMBytes += r.RAMBytes
	o.SSDBlocks += r.SSDBlocks
	o.SSDBytes += r.SSDBytes
	o.Queries += r.Queries
	o.HitBlocks += r.HitBlocks
	o.Published += r.Published
	o.Sessions += r.Sessions
}

// other is domain's other row ("" without tenants, or of no known domain).
func (sc *NamespaceScan) other(domain string) *NamespaceStat {
	o := sc.others[domain]
	if o == nil {
		o = &NamespaceStat{Other: true, Domain: domain}
		sc.others[domain] = o
	}
	return o
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
// dispatcher) and returns the rows. Rows are taken per domain (one group
// without tenants; under tenants one per domain, and one of the keys of
// no known domain, Domain ""): a group's counted namespaces first (under
// tenants), then those only resident, largest first, up to the group's
// share of rows (MaxNamespaces without tenants, MaxNamespaces / domains
// under them; a domain counts at most that many namespaces, so its
// counted ones are all listed); the rest of the group is summed into its
// other row, listed only when it counts something. A domain's namespaces
// never take another domain's rows nor go into its other row. Rows are
// sorted by domain, then namespaces counted, resident, and the other row,
// each by namespace and key. Safe from any goroutine.
func (s *Service) Namespaces(sc *NamespaceScan) []NamespaceStat {
	for key, u := range s.tiers.SSDByNamespace() {
		r := sc.row(key)
		r.SSDBlocks += u.Blocks
		r.SSDBytes += u.Bytes
	}
	groups := map[string][]*NamespaceStat{}
	for _, r := range sc.rows {
		groups[r.Domain] = append(groups[r.Domain], r)
	}
	out := make([]NamespaceStat, 0, min(len(sc.rows), MaxNamespaces)+len(sc.others))
	for domain, rows := range groups {
		slices.SortFunc(rows, func(a, b *NamespaceStat) int {
			if a.Known != b.Known && sc.tenants {
				if a.Known {
					return -1
				}
				return 1
			}
			return cmp.Compare(b.RAMBytes+b.SSDBytes, a.RAMBytes+a.SSDBytes)
		})
		for i, r := range rows {
			if i < sc.share {
				out = append(out, *r)
			} else {
				addRow(sc.other(domain), r)
			}
		}
	}
	for domain, o := range sc.others {
		if *o != (NamespaceStat{Other: true, Domain: domain}) {
			out = append(out, *o)
		}
	}
	slices.SortFunc(out, func(a, b NamespaceStat) int {
		return cmp.Or(cmp.Compare(a.Domain, b.Domain), cmp.Compare(b2i(!a.Other), b2i(!b.Other)), cmp.Compare(b2i(a.Known), b2i(b.Known)),
			bytes.Compare(a.Namespace[:], b.Namespace[:]), bytes.Compare(a.Key[:], b.Key[:]))
	})
	return out
}

func b2i(b bool) int {
	if b {
		return 0
	}
	return 1
}
