package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/limit"
)

func mustParse(t *testing.T, tenants, shares, quotas []string) *Set {
	t.Helper()
	s, err := Parse(tenants, shares, quotas, sizeOf)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestMatchPicksTheOneTenantTheKernelSays(t *testing.T) {
	s := mustParse(t, []string{"a=uid:1001,uid:1002", "b=gid:2000", "c=cgroup:/kubepods/pod1"}, nil, nil)
	for _, tc := range []struct {
		p    Peer
		want string // tenant name, or the error's text
	}{
		{Peer{PID: 1, UID: 1002, GID: 5}, "a"},
		{Peer{PID: 2, UID: 7, GID: 2000}, "b"},
		{Peer{PID: 3, UID: 7, GID: 5, Groups: []uint32{9, 2000}}, "b"},
		{Peer{PID: 4, UID: 7, GID: 5, Cgroup: "/kubepods/pod1"}, "c"},
		{Peer{PID: 5, UID: 7, GID: 5, Cgroup: "/kubepods/pod1/ctr"}, "c"},
		{Peer{PID: 6, UID: 7, GID: 5, Cgroup: "/kubepods/pod10"}, "pid 6 uid 7 gid 5 cgroup /kubepods/pod10 matches no --tenant selector"},
		{Peer{PID: 7, UID: 7, GID: 5}, "cgroup unknown matches no"},
		{Peer{PID: 8, UID: 1001, GID: 2000}, `tenant "a" (uid:1001) and tenant "b" (gid:2000) both select pid 8`},
	} {
		got, err := s.Match(tc.p)
		if err != nil {
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Match(%+v) = %v, want %q", tc.p, err, tc.want)
			}
			if !errors.Is(err, ErrNoTenant) && !errors.Is(err, ErrAmbiguous) {
				t.Errorf("Match(%+v) error %v wraps neither sentinel", tc.p, err)
			}
			continue
		}
		if got.Name != tc.want {
			t.Errorf("Match(%+v) = %s, want %s", tc.p, got.Name, tc.want)
		}
	}
}

func TestNamespacesOfTwoTenantsNeverMeet(t *testing.T) {
	s := mustParse(t, []string{"a=uid:1", "b=uid:2", "c=uid:3", "d=uid:4"}, []string{"cd=c,d"}, nil)
	ns := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	a, b := s.ByName("a").Domain.Namespace(ns), s.ByName("b").Domain.Namespace(ns)
	c, d := s.ByName("c").Domain.Namespace(ns), s.ByName("d").Domain.Namespace(ns)
	if a == b || a == ns || b == ns {
		t.Fatalf("same namespace bytes of two tenants: a %v b %v engine %v", a, b, ns)
	}
	if c != d || c == a {
		t.Fatalf("a sharing group's tenants got %v and %v (a: %v)", c, d, a)
	}
	// The encoding the package doc states, by hand.
	h := sha256.Sum256(append([]byte("orbitkv.tenant.v1\x01\x00\x00\x00a"), ns[:]...))
	if hex.EncodeToString(a[:]) != hex.EncodeToString(h[:16]) {
		t.Fatalf("mix of a = %x, want %x", a, h[:16])
	}
	var none *Domain
	if none.Namespace(ns) != ns {
		t.Fatal("no tenants changed the namespace")
	}
	if s.ByName("a").Domain.Namespace([16]byte{}) != ([16]byte{}) {
		t.Fatal("the all-zero namespace must stay all zero (the decoders refuse it)")
	}
}

func TestParseNamesTheFlagAndWhatIsWanted(t *testing.T) {
	for _, tc := range []struct {
		tenants, shares, quotas []string
		field, want             string
	}{
		{[]string{"a"}, nil, nil, "--tenant", "no '='"},
		{[]string{"-a=uid:1"}, nil, nil, "--tenant", "starting with a letter or digit"},
		{[]string{"a=user:1"}, nil, nil, "--tenant", `selector "user:1" has no known kind`},
		{[]string{"a=uid:x"}, nil, nil, "--tenant", "not an id"},
		{[]string{"a=uid:4294967295"}, nil, nil, "--tenant", "not an id"},
		{[]string{"a=cgroup:kube"}, nil, nil, "--tenant", "clean and absolute"},
		{[]string{"a=cgroup:/k/../x"}, nil, nil, "--tenant", "clean and absolute"},
		{[]string{"a=uid:1", "a=uid:2"}, nil, nil, "--tenant", "given twice"},
		{[]string{"a=uid:1", "b=uid:1"}, nil, nil, "--tenant", "same selector"},
		{[]string{"a=cgroup:/k", "b=cgroup:/k/p"}, nil, nil, "--tenant", "overlaps"},
		{nil, []string{"g=a"}, nil, "--tenant", "at least one --tenant"},
		{[]string{"a=cgroup:/", "b=uid:2"}, nil, nil, "--tenant", "cgroup:/ selects every process"},
		{[]string{"a=uid:1"}, nil, []string{"a:ops=1,ops=9"}, "--tenant-quota", `key "ops" of tenant "a" is given twice`},
		{[]string{"a=uid:1"}, nil, []string{"a:ram=1MiB", "a:ram=64GiB"}, "--tenant-quota", `key "ram" of tenant "a" is given twice`},
		{[]string{"a=uid:1"}, []string{"g=z"}, nil, "--tenant-share", `no tenant "z"`},
		{[]string{"a=uid:1"}, []string{"a=a"}, nil, "--tenant-share", "already a group or a tenant"},
		{[]string{"a=uid:1", "b=uid:2"}, []string{"g=a", "h=a,b"}, nil, "--tenant-share", "already in group"},
		{[]string{"a=uid:1"}, nil, []string{"a:pinned=1.5"}, "--tenant-quota", "fraction in (0, 1]"},
		{[]string{"a=uid:1"}, nil, []string{"a:sessions=0"}, "--tenant-quota", "count ≥ 1"},
		{[]string{"a=uid:1"}, nil, []string{"a:disk=1GiB"}, "--tenant-quota", `unknown key "disk"`},
		{[]string{"a=uid:1"}, nil, []string{"a:ram=1G"}, "--tenant-quota", "ambiguous unit"},
		{[]string{"a=uid:1"}, nil, []string{"a:ssd=0"}, "--tenant-quota", "0 bytes"},
		{[]string{"a=uid:1"}, nil, []string{"a:ram=lots"}, "--tenant-quota", "not a size"},
		{[]string{"a=uid:1"}, nil, []string{"b:ops=3"}, "--tenant-quota", `no tenant "b"`},
	} {
		_, err := Parse(tc.tenants, tc.shares, tc.quotas, sizeOf)
		var le *Error
		if !errors.As(err, &le) || le.Flag != tc.field || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q, %q, %q) = %v, want a %s error saying %q", tc.tenants, tc.shares, tc.quotas, err, tc.field, tc.want)
		}
	}
	if s, err := Parse(nil, nil, nil, sizeOf); s != nil || err != nil {
		t.Fatalf("no tenants: %v, %v; want nil, nil", s, err)
	}
}

func TestResolveGivesHalfByDefaultAndTheQuotaWhenSet(t *testing.T) {
	whole := Share{Sessions: 1024, Ops: 1024, Tables: 32, PinnedBytes: 1 << 30, Buffers: 1000, BufferBytes: 1 << 40}
	one := mustParse(t, []string{"a=uid:1"}, nil, nil)
	if got := one.Resolve(one.Tenants[0], whole); got != whole {
		t.Fatalf("one tenant gets %+v, want the whole %+v", got, whole)
	}
	two := mustParse(t, []string{"a=uid:1", "b=uid:2"}, nil, []string{"b:sessions=8,ops=3,tables=1,pinned=0.25"})
	if got, want := two.Resolve(two.Tenants[0], whole), (Share{512, 512, 16, 1 << 29, 500, 1 << 39}); got != want {
		t.Fatalf("default share %+v, want %+v", got, want)
	}
	if got, want := two.Resolve(two.Tenants[1], whole), (Share{8, 3, 1, 1 << 28, 500, 1 << 39}); got != want {
		t.Fatalf("quota share %+v, want %+v", got, want)
	}
	if got := two.Resolve(two.Tenants[0], Share{Sessions: 1, Ops: 1, Tables: 1, PinnedBytes: 1, Buffers: 1, BufferBytes: 1}); got != (Share{1, 1, 1, 1, 1, 1}) {
		t.Fatalf("share of a whole of 1: %+v, want 1 each", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("a=uid:1,gid:2,cgroup:/x", "g=a", "a:sessions=2,pinned=0.5")
	f.Fuzz(func(t *testing.T, tenant, share, quota string) {
		s, err := Parse(strings.Split(tenant, ";"), strings.Split(share, ";"), strings.Split(quota, ";"), sizeOf)
		if err != nil {
			var le *Error
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		for _, tn := range s.Tenants {
			if tn.Domain == nil || len(tn.Selectors) == 0 {
				t.Fatalf("tenant %+v without domain or selectors", tn)
			}
		}
	})
}

func TestRAMAndSSDQuotasAreSizesAndAGroupTakesItsStrictestMembers(t *testing.T) {
	s := mustParse(t, []string{"a=uid:1", "b=uid:2", "c=uid:3", "d=uid:4"}, []string{"g=a,b"},
		[]string{"a:ram=4MiB,ssd=1GiB", "b:ram=1.5MiB", "c:ssd=65536"})
	if q := s.ByName("a").Quota; q.RAMBytes != 4<<20 || q.SSDBytes != 1<<30 {
		t.Fatalf("a's quota %+v, want ram 4 MiB, ssd 1 GiB", q)
	}
	g, c, d := s.ByName("a").Domain, s.ByName("c").Domain, s.ByName("d").Domain
	if g.RAMBytes != 3<<19 || g.SSDBytes != 1<<30 {
		t.Fatalf("group g bounds ram %d ssd %d, want its strictest member's: %d and %d", g.RAMBytes, g.SSDBytes, 3<<19, 1<<30)
	}
	if c.RAMBytes != 0 || c.SSDBytes != 65536 || d.RAMBytes != 0 || d.SSDBytes != 0 {
		t.Fatalf("c bounds %d/%d, d %d/%d; want 0/65536 and none", c.RAMBytes, c.SSDBytes, d.RAMBytes, d.SSDBytes)
	}
	if ds := s.Domains(); len(ds) != 3 || ds[0] != g || ds[1] != c || ds[2] != d || d.Index != 2 {
		t.Fatalf("domains %v, want g, c, d in order of their first tenant", ds)
	}
}

// sizeOf is the size rule the Manager passes to Parse.
func sizeOf(text string) (uint64, error) { return limit.ParseSize("--tenant-quota", text) }
