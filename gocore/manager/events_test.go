package manager

import (
	"os/user"
	"strconv"
	"strings"
	"testing"

	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/tenant"
)

func TestEventDomainsGiveEachDomainTheGroupOfItsOnePrincipal(t *testing.T) {
	size := func(s string) (uint64, error) { return limit.ParseSize("size", s) }
	root, err := user.LookupId("0")
	if err != nil {
		t.Skip("no user database entry for uid 0:", err)
	}
	rootGID, _ := strconv.Atoi(root.Gid)
	set, err := tenant.Parse([]string{"a=uid:0", "b=gid:4242", "c=gid:7"}, nil, nil, size)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := eventDomains(set)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name string
		gid  int
	}{{"a", rootGID}, {"b", 4242}, {"c", 7}}
	if len(ds) != len(want) {
		t.Fatalf("%+v", ds)
	}
	for i, w := range want {
		if ds[i].Name != w.name || ds[i].GID != w.gid {
			t.Errorf("domain %d: %+v, want %s in group %d", i, ds[i], w.name, w.gid)
		}
	}
	for _, tc := range []struct{ tenants, shares []string }{
		{[]string{"a=gid:1,gid:2"}, nil},
		{[]string{"a=cgroup:/x"}, nil},
		{[]string{"a=gid:1", "b=gid:2"}, []string{"g=a,b"}},
		// Two domains in one group (a user's, and the group's as a gid
		// selector): each could read the other's stream.
		{[]string{"a=uid:0", "b=gid:" + root.Gid}, nil},
	} {
		set, err := tenant.Parse(tc.tenants, tc.shares, nil, size)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eventDomains(set); err == nil || !strings.Contains(err.Error(), "one group") {
			t.Errorf("tenants %v shares %v: %v, want a refusal naming the one group", tc.tenants, tc.shares, err)
		}
	}
}

// A uid:N selector whose primary group is shared (not a group of the
// user's own name, as "nobody" in "nogroup") is refused: the group's
// other members could read the tenant's stream.
func TestEventDomainsRefuseAUIDWhosePrimaryGroupIsShared(t *testing.T) {
	size := func(s string) (uint64, error) { return limit.ParseSize("size", s) }
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody:", err)
	}
	g, err := user.LookupGroupId(u.Gid)
	if err != nil || g.Name == u.Username {
		t.Skipf("nobody's primary group %s (%v) is its own", u.Gid, err)
	}
	set, err := tenant.Parse([]string{"a=uid:" + u.Uid}, nil, nil, size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eventDomains(set); err == nil || !strings.Contains(err.Error(), "private group") {
		t.Errorf("uid %s in group %s: %v, want a refusal naming the private group", u.Uid, g.Name, err)
	}
}
