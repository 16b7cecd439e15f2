package tenant

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Limits of the configuration.
const (
	// MaxTenants is the most tenants one Manager serves.
	MaxTenants = 256
	// MaxNameBytes is the longest tenant or sharing-group name; a name is
	// letters, digits, '-', '_' and '.', starting with a letter or digit.
	MaxNameBytes = 64
	// MaxSelectors is the most selectors of one tenant.
	MaxSelectors = 64
	// MaxCgroupBytes is the longest cgroup path of a selector.
	MaxCgroupBytes = 4096
)

// mixTag starts the hashed bytes of Domain.Namespace (package doc).
const mixTag = "orbitkv.tenant.v1"

// Kind is what a Selector compares.
type Kind uint8

// The selector kinds.
const (
	ByUID Kind = iota + 1
	ByGID
	ByCgroup
)

// Selector is one SEL of --tenant: uid:N, gid:N or cgroup:PATH.
type Selector struct {
	Kind   Kind
	ID     uint32 // ByUID, ByGID
	Cgroup string // ByCgroup: a clean absolute path
}

// String is the selector as it is written: "uid:1001", "cgroup:/a/b".
func (s Selector) String() string {
	switch s.Kind {
	case ByUID:
		return "uid:" + strconv.FormatUint(uint64(s.ID), 10)
	case ByGID:
		return "gid:" + strconv.FormatUint(uint64(s.ID), 10)
	default:
		return "cgroup:" + s.Cgroup
	}
}

// Peer is what the kernel says of a connecting process.
type Peer struct {
	PID    int32
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups
	// Cgroup is its cgroup v2 path ("0::" line of /proc/PID/cgroup); ""
	// when unknown, which no cgroup selector matches.
	Cgroup string
}

func (s Selector) matches(p Peer) bool {
	switch s.Kind {
	case ByUID:
		return p.UID == s.ID
	case ByGID:
		return p.GID == s.ID || slices.Contains(p.Groups, s.ID)
	default:
		return p.Cgroup != "" && (s.Cgroup == "/" || p.Cgroup == s.Cgroup || strings.HasPrefix(p.Cgroup, s.Cgroup+"/"))
	}
}

// Quota is a tenant's share of the Manager's resources. A count of 0 and a
// Pinned of 0 mean the default share (Set.Resolve); a RAMBytes or SSDBytes
// of 0 means none (bounded only by the tier).
type Quota struct {
	Sessions uint32  // live sessions
	Ops      uint32  // operation permits held at once
	Tables   uint32  // discovery tables mapped at once
	Pinned   float64 // fraction of the RAM tier's lease budget, in (0, 1]
	// RAMBytes and SSDBytes bound the bytes of its domain's blocks in the
	// RAM tier (sealed and publishing) and in the SSD tier (Domain.Quota).
	RAMBytes, SSDBytes uint64
}

// Tenant is one configured tenant.
type Tenant struct {
	Name      string
	Selectors []Selector
	// Domain is the namespace domain: the sharing group's when the tenant
	// is in one, else its own.
	Domain *Domain
	// Quota is the tenant's share, as configured (0 fields: default).
	Quota Quota
	// Index is the tenant's position in its Set, 0-based: a dense key for
	// per-tenant counters.
	Index int
}

// NameOrEmpty is t's name, "" for a nil Tenant (no tenants).
func (t *Tenant) NameOrEmpty() string {
	if t == nil {
		return ""
	}
	return t.Name
}

// Domain is a namespace domain: a tenant, or a sharing group of tenants.
// The blocks of its namespaces are its, and the tiers count them per
// domain.
type Domain struct {
	Name string
	// Index is the domain's position in Set.Domains, 0-based: a dense key
	// for per-domain counters.
	Index int
	// RAMBytes and SSDBytes bound the bytes of the domain's blocks in the
	// RAM and SSD tiers: the smallest RAMBytes (SSDBytes) quota of its
	// tenants that set one, 0 when none does (bounded only by the tier).
	// A group is held to its strictest member's quota because its
	// tenants' blocks are one set: a block one member publishes is every
	// member's, and cannot be charged to one of them.
	RAMBytes, SSDBytes uint64
	pre                []byte // mixTag, u32 LE len(Name), Name
}

func newDomain(name string) *Domain {
	pre := make([]byte, 0, len(mixTag)+4+len(name))
	pre = append(pre, mixTag...)
	pre = binary.LittleEndian.AppendUint32(pre, uint32(len(name)))
	pre = append(pre, name...)
	return &Domain{Name: name, pre: pre}
}

// Namespace is ns (the 16 bytes of an abi.Namespace) as the Manager keys
// it for this domain (package doc): the first 16 bytes of SHA-256(tag,
// len(name), name, ns). A nil Domain (no tenants configured) returns ns
// unchanged; the all-zero namespace stays all zero so the decoders'
// refusal of it still applies.
func (d *Domain) Namespace(ns [16]byte) [16]byte {
	if d == nil || ns == ([16]byte{}) {
		return ns
	}
	h := sha256.New()
	h.Write(d.pre)
	h.Write(ns[:])
	var sum [sha256.Size]byte
	var out [16]byte
	copy(out[:], h.Sum(sum[:0]))
	return out
}

// Namespace is ns as the Manager keys it for t's sessions: its domain's
// mix (Domain.Namespace); ns unchanged for a nil Tenant (no tenants).
func (t *Tenant) Namespace(ns [16]byte) [16]byte {
	if t == nil {
		return ns
	}
	return t.Domain.Namespace(ns)
}

// Error is a refused setting: the flag, the value at fault (one item of a
// repeated flag), the reason and what is wanted.
type Error struct {
	Flag  string // "--tenant", "--tenant-share", "--tenant-quota"
	Value string
	Err   error
	Want  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %q: %v; want %s", e.Flag, e.Value, e.Err, e.Want)
}

func (e *Error) Unwrap() error { return e.Err }

// Set is the configured tenants; a nil *Set is "no tenants" (one trust
// domain).
type Set struct {
	Tenants []*Tenant
	domains []*Domain // Domains
}

// ErrNoTenant wraps Match's refusal of a peer no tenant selects.
var ErrNoTenant = errors.New("no tenant selects this process")

// ErrAmbiguous wraps Match's refusal of a peer two tenants select.
var ErrAmbiguous = errors.New("two tenants select this process")

// Match returns the one tenant whose selectors p matches. Errors wrap
// ErrNoTenant (naming the peer's uid, gid and cgroup) or ErrAmbiguous
// (naming both tenants and the selectors that matched).
func (s *Set) Match(p Peer) (*Tenant, error) {
	var found *Tenant
	var foundSel Selector
	for _, t := range s.Tenants {
		for _, sel := range t.Selectors {
			if !sel.matches(p) {
				continue
			}
			if found != nil && found != t {
				return nil, fmt.Errorf("%w: tenant %q (%s) and tenant %q (%s) both select pid %d; make the selectors disjoint",
					ErrAmbiguous, found.Name, foundSel, t.Name, sel, p.PID)
			}
			found, foundSel = t, sel
			break
		}
	}
	if found == nil {
		cg := p.Cgroup
		if cg == "" {
			cg = "unknown"
		}
		return nil, fmt.Errorf("%w: pid %d uid %d gid %d cgroup %s matches no --tenant selector",
			ErrNoTenant, p.PID, p.UID, p.GID, cg)
	}
	return found, nil
}

// Len is the number of tenants (0 for a nil Set).
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.Tenants)
}

// NeedsCgroup reports whether any selector compares cgroups (so the
// bootstrap server must read the peer's).
func (s *Set) NeedsCgroup() bool {
	if s == nil {
		return false
	}
	for _, t := range s.Tenants {
		for _, sel := range t.Selectors {
			if sel.Kind == ByCgroup {
				return true
			}
		}
	}
	return false
}

// Share is a tenant's resolved share of one Manager-wide limit.
type Share struct {
	Sessions, Ops, Tables uint32
	PinnedBytes           uint64
	// Buffers and BufferBytes are the registered engine buffers (each a
	// descriptor and a mapping the Manager holds) and their bytes; no
	// quota key sets them: half each with two or more tenants.
	Buffers     uint32
	BufferBytes uint64
}

// Resolve returns t's share of the Manager-wide limits (sessions, ops,
// tables, pinned bytes of the lease budget): its Quota's, where set, else
// half of each when the set has two or more tenants and all of it when
// one. A share is at least 1 (and at least 1 byte) and at most the whole.
func (s *Set) Resolve(t *Tenant, whole Share) Share {
	half := s.Len() >= 2
	part := func(q uint32, w uint32) uint32 {
		v := w
		if q != 0 {
			v = q
		} else if half {
			v = w / 2
		}
		return min(max(v, 1), max(w, 1))
	}
	sh := Share{
		Sessions: part(t.Quota.Sessions, whole.Sessions),
		Ops:      part(t.Quota.Ops, whole.Ops),
		Tables:   part(t.Quota.Tables, whole.Tables),
		Buffers:  part(0, whole.Buffers),
	}
	sh.BufferBytes = whole.BufferBytes
	if half {
		sh.BufferBytes = max(whole.BufferBytes/2, 1)
	}
	frac := t.Quota.Pinned
	if frac == 0 {
		frac = 1
		if half {
			frac = 0.5
		}
	}
	sh.PinnedBytes = max(uint64(math.Floor(frac*float64(whole.PinnedBytes))), 1)
	return sh
}

// All returns the tenants in the order they were given (nil for a nil
// Set).
func (s *Set) All() []*Tenant {
	if s == nil {
		return nil
	}
	return s.Tenants
}

// Domains returns the tenants' domains, each once, in the order of their
// first tenant (Domain.Index); nil for a nil Set.
func (s *Set) Domains() []*Domain {
	if s == nil {
		return nil
	}
	return s.domains
}

// ByName returns the tenant called name, or nil.
func (s *Set) ByName(name string) *Tenant {
	if s == nil {
		return nil
	}
	for _, t := range s.Tenants {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Parse builds a Set from the values of --tenant (NAME=SEL[,SEL...]),
// --tenant-share (GROUP=NAME,NAME...) and --tenant-quota
// (NAME:key=value,...). No tenants gives a nil Set and nil error; shares
// or quotas without tenants are an error. Every error is an *Error naming the flag, the value and what is wanted.
//
// size reads the sizes of ram= and ssd= by the Manager's size rule (the
// caller passes gocore/limit's ParseSize, which this package does not
// import: it sits below it).
func Parse(tenants, shares, quotas []string, size func(text string) (uint64, error)) (*Set, error) {
	if len(tenants) == 0 {
		if len(shares)+len(quotas) > 0 {
			return nil, &Error{Flag: "--tenant", Value: "", Err: errors.New("--tenant-share and --tenant-quota name tenants"),
				Want: "at least one --tenant NAME=SEL when --tenant-share or --tenant-quota is given"}
		}
		return nil, nil
	}
	if len(tenants) > MaxTenants {
		return nil, &Error{Flag: "--tenant", Value: strconv.Itoa(len(tenants)) + " tenants",
			Err: errors.New("too many tenants"), Want: fmt.Sprintf("at most %d", MaxTenants)}
	}
	s := &Set{}
	for _, v := range tenants {
		t, err := parseTenant(v)
		if err != nil {
			return nil, err
		}
		if s.ByName(t.Name) != nil {
			return nil, &Error{Flag: "--tenant", Value: v, Err: fmt.Errorf("tenant %q is given twice", t.Name),
				Want: "one --tenant per name, with all its selectors"}
		}
		t.Index = len(s.Tenants)
		s.Tenants = append(s.Tenants, t)
	}
	if err := s.checkDisjoint(); err != nil {
		return nil, err
	}
	groups := map[string]bool{}
	for _, v := range shares {
		name, members, ok := strings.Cut(v, "=")
		bad := func(err error, want string) error {
			return &Error{Flag: "--tenant-share", Value: v, Err: err, Want: want}
		}
		if !ok || members == "" {
			return nil, bad(errors.New("no '=' or no members"), "GROUP=TENANT,TENANT[,...]")
		}
		if err := checkName(name); err != nil {
			return nil, bad(err, nameWant)
		}
		if groups[name] || s.ByName(name) != nil {
			return nil, bad(fmt.Errorf("group name %q is already a group or a tenant", name), "a group name of its own")
		}
		groups[name] = true
		d := newDomain(name)
		for m := range strings.SplitSeq(members, ",") {
			t := s.ByName(m)
			switch {
			case t == nil:
				return nil, bad(fmt.Errorf("no tenant %q", m), "names given by --tenant")
			case t.Domain != nil:
				return nil, bad(fmt.Errorf("tenant %q is already in group %q", m, t.Domain.Name), "each tenant in at most one group")
			}
			t.Domain = d
		}
	}
	for _, t := range s.Tenants {
		if t.Domain == nil {
			t.Domain = newDomain(t.Name)
		}
	}
	seen := map[string]bool{} // "tenant:key" given by any --tenant-quota
	for _, v := range quotas {
		if err := s.parseQuota(v, size, seen); err != nil {
			return nil, err
		}
	}
	for _, t := range s.Tenants {
		d := t.Domain
		if !slices.Contains(s.domains, d) {
			d.Index = len(s.domains)
			s.domains = append(s.domains, d)
		}
		d.RAMBytes = stricter(d.RAMBytes, t.Quota.RAMBytes)
		d.SSDBytes = stricter(d.SSDBytes, t.Quota.SSDBytes)
	}
	return s, nil
}

// stricter is the smaller of two byte quotas, 0 being none.
func stricter(a, b uint64) uint64 {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

const nameWant = "1..64 letters, digits, '-', '_' or '.', starting with a letter or digit"

func checkName(n string) error {
	if n == "" || len(n) > MaxNameBytes {
		return fmt.Errorf("name %q is %d bytes", n, len(n))
	}
	for i, r := range n {
		alnum := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !alnum && (i == 0 || r != '-' && r != '_' && r != '.') {
			return fmt.Errorf("name %q has %q at byte %d", n, r, i)
		}
	}
	return nil
}

func parseTenant(v string) (*Tenant, error) {
	bad := func(err error, want string) error {
		return &Error{Flag: "--tenant", Value: v, Err: err, Want: want}
	}
	const want = "NAME=SEL[,SEL...] with SEL uid:N, gid:N or cgroup:/PATH"
	name, sels, ok := strings.Cut(v, "=")
	if !ok || sels == "" {
		return nil, bad(errors.New("no '=' or no selectors"), want)
	}
	if err := checkName(name); err != nil {
		return nil, bad(err, nameWant)
	}
	t := &Tenant{Name: name}
	for sv := range strings.SplitSeq(sels, ",") {
		if len(t.Selectors) == MaxSelectors {
			return nil, bad(errors.New("too many selectors"), fmt.Sprintf("at most %d", MaxSelectors))
		}
		kind, arg, _ := strings.Cut(sv, ":")
		var sel Selector
		switch kind {
		case "uid", "gid":
			n, err := strconv.ParseUint(arg, 10, 32)
			if err != nil || n == math.MaxUint32 {
				return nil, bad(fmt.Errorf("selector %q: %q is not an id", sv, arg), "a decimal id 0..4294967294")
			}
			sel = Selector{Kind: ByUID, ID: uint32(n)}
			if kind == "gid" {
				sel.Kind = ByGID
			}
		case "cgroup":
			if !strings.HasPrefix(arg, "/") || len(arg) > MaxCgroupBytes || path.Clean(arg) != arg {
				return nil, bad(fmt.Errorf("selector %q: the path is not clean and absolute", sv),
					fmt.Sprintf("an absolute cgroup v2 path as /proc/PID/cgroup prints it, without '..', '//' or a trailing '/', at most %d bytes", MaxCgroupBytes))
			}
			sel = Selector{Kind: ByCgroup, Cgroup: arg}
		default:
			return nil, bad(fmt.Errorf("selector %q has no known kind", sv), want)
		}
		if slices.Contains(t.Selectors, sel) {
			return nil, bad(fmt.Errorf("selector %q is given twice", sv), "each selector once")
		}
		t.Selectors = append(t.Selectors, sel)
	}
	return t, nil
}

// checkDisjoint refuses two tenants with the same uid or gid selector (a
// process would match both); overlaps of cgroup paths, and of a uid with
// a gid or a cgroup, cannot be seen here and are refused per process by
// Match.
func (s *Set) checkDisjoint() error {
	seen := map[Selector]string{}
	for _, t := range s.Tenants {
		for _, sel := range t.Selectors {
			if sel.Kind == ByCgroup && sel.Cgroup == "/" && len(s.Tenants) > 1 {
				return &Error{Flag: "--tenant", Value: t.Name + "=" + sel.String(),
					Err:  fmt.Errorf("cgroup:/ selects every process, also those of the other %d tenants", len(s.Tenants)-1),
					Want: "disjoint selectors: a process is one tenant"}
			}
			key := sel
			if sel.Kind == ByCgroup {
				for other, name := range seen {
					if other.Kind == ByCgroup && name != t.Name && (sel.matches(Peer{Cgroup: other.Cgroup}) || other.matches(Peer{Cgroup: sel.Cgroup})) {
						return &Error{Flag: "--tenant", Value: t.Name + "=" + sel.String(),
							Err:  fmt.Errorf("tenant %q's %s overlaps tenant %q's %s", t.Name, sel, name, other),
							Want: "disjoint selectors: a process is one tenant"}
					}
				}
			}
			if name, dup := seen[key]; dup && name != t.Name {
				return &Error{Flag: "--tenant", Value: t.Name + "=" + sel.String(),
					Err: fmt.Errorf("tenant %q has the same selector", name), Want: "disjoint selectors: a process is one tenant"}
			}
			seen[key] = t.Name
		}
	}
	return nil
}

func (s *Set) parseQuota(v string, size func(string) (uint64, error), seen map[string]bool) error {
	bad := func(err error, want string) error {
		return &Error{Flag: "--tenant-quota", Value: v, Err: err, Want: want}
	}
	const want = "NAME:key=value[,key=value...] with keys sessions, ops, tables (counts ≥ 1), pinned (a fraction in (0, 1]), ram and ssd (sizes ≥ 1 byte: 65536, 512MiB, 1.5GiB)"
	name, kvs, ok := strings.Cut(v, ":")
	if !ok || kvs == "" {
		return bad(errors.New("no ':' or no settings"), want)
	}
	t := s.ByName(name)
	if t == nil {
		return bad(fmt.Errorf("no tenant %q", name), "a name given by --tenant")
	}
	for kv := range strings.SplitSeq(kvs, ",") {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return bad(fmt.Errorf("%q has no '='", kv), want)
		}
		if seen[name+":"+k] {
			return bad(fmt.Errorf("key %q of tenant %q is given twice", k, name), "each key of a tenant once, in one --tenant-quota or across several")
		}
		seen[name+":"+k] = true
		switch k {
		case "sessions", "ops", "tables":
			n, err := strconv.ParseUint(val, 10, 32)
			if err != nil || n == 0 {
				return bad(fmt.Errorf("%s=%q is not a count ≥ 1", k, val), want)
			}
			*map[string]*uint32{"sessions": &t.Quota.Sessions, "ops": &t.Quota.Ops, "tables": &t.Quota.Tables}[k] = uint32(n)
		case "pinned":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil || !(f > 0 && f <= 1) {
				return bad(fmt.Errorf("pinned=%q is not a fraction in (0, 1]", val), want)
			}
			t.Quota.Pinned = f
		case "ram", "ssd":
			n, err := size(val)
			if err == nil && n == 0 {
				err = errors.New("0 bytes")
			}
			if err != nil {
				return bad(fmt.Errorf("%s=%q: %w", k, val, err), want)
			}
			*map[string]*uint64{"ram": &t.Quota.RAMBytes, "ssd": &t.Quota.SSDBytes}[k] = n
		default:
			return bad(fmt.Errorf("unknown key %q", k), want)
		}
	}
	return nil
}
