package admission

import (
	"net"
	"slices"
	"testing"
)

// conn is a test connection: a name, with its host the part before "/".
type conn string

func admitAll(t *testing.T, p *Pool[conn], host string, names ...conn) {
	t.Helper()
	for _, c := range names {
		if v, victims := p.Admit(c, host); v != Admitted || len(victims) != 0 {
			t.Fatalf("Admit(%s) = %v, %v; want Admitted with no victim", c, v, victims)
		}
	}
}

func TestAdmit(t *testing.T) {
	lim := Limits{MaxConns: 4, MaxConnsPerHost: 3, MaxUnproven: 3, MaxUnprovenPerHost: 2}
	tests := []struct {
		name        string
		setup       func(p *Pool[conn])
		host        string
		want        Verdict
		wantVictims []conn
	}{
		{
			name:  "a newcomer under every bound is admitted",
			setup: func(p *Pool[conn]) {},
			host:  "a", want: Admitted,
		},
		{
			name: "at its unproven bound a host loses its own oldest unproven",
			setup: func(p *Pool[conn]) {
				p.Admit("a1", "a")
				p.Admit("a2", "a")
			},
			host: "a", want: Admitted, wantVictims: []conn{"a1"},
		},
		{
			name: "at the unproven bound the busiest host loses its oldest",
			setup: func(p *Pool[conn]) {
				p.Admit("b1", "b")
				p.Admit("c1", "c")
				p.Admit("c2", "c")
			},
			host: "a", want: Admitted, wantVictims: []conn{"c1"},
		},
		{
			name: "of hosts with as many unproven, the one with the oldest loses it",
			setup: func(p *Pool[conn]) {
				p.Admit("c1", "c")
				p.Admit("b1", "b")
				p.Admit("b2", "b")
				p.Admit("c2", "c")
			},
			host: "a", want: Admitted, wantVictims: []conn{"c1"},
		},
		{
			name: "at MaxConns with none unproven the newcomer is refused",
			setup: func(p *Pool[conn]) {
				for _, c := range []conn{"b1", "b2", "c1", "c2"} {
					p.Admit(c, string(c[:1]))
					p.Prove(c)
				}
			},
			host: "a", want: OverConns,
		},
		{
			name: "at MaxConns an unproven connection makes room",
			setup: func(p *Pool[conn]) {
				for _, c := range []conn{"b1", "b2", "c1"} {
					p.Admit(c, string(c[:1]))
					p.Prove(c)
				}
				p.Admit("c2", "c")
			},
			host: "a", want: Admitted, wantVictims: []conn{"c2"},
		},
		{
			name: "at MaxConnsPerHost with none unproven the host's newcomer is refused",
			setup: func(p *Pool[conn]) {
				for _, c := range []conn{"a1", "a2", "a3"} {
					p.Admit(c, "a")
					p.Prove(c)
				}
			},
			host: "a", want: OverConnsPerHost,
		},
		{
			name: "at MaxConnsPerHost the host's own unproven makes room under every bound",
			setup: func(p *Pool[conn]) {
				for _, c := range []conn{"a1", "a2"} {
					p.Admit(c, "a")
					p.Prove(c)
				}
				p.Admit("a3", "a")
				p.Admit("b1", "b")
			},
			host: "a", want: Admitted, wantVictims: []conn{"a3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := New[conn](lim, nil)
			tt.setup(p)
			n := p.Len()
			v, victims := p.Admit("new", tt.host)
			if v != tt.want || !slices.Equal(victims, tt.wantVictims) {
				t.Fatalf("Admit = %v, %v; want %v, %v", v, victims, tt.want, tt.wantVictims)
			}
			for _, c := range victims {
				if p.Contains(c) {
					t.Errorf("victim %s is still in the pool", c)
				}
			}
			want := n - len(victims)
			if v == Admitted {
				want++
			}
			if p.Len() != want || p.Contains("new") != (v == Admitted) {
				t.Errorf("Len = %d (newcomer in: %v), want %d", p.Len(), p.Contains("new"), want)
			}
		})
	}
}

func TestQuietConnectionsAreClosedFirst(t *testing.T) {
	spoke := map[conn]bool{"a1": true}
	p := New(Limits{MaxConns: 8, MaxUnproven: 8, MaxUnprovenPerHost: 2}, func(c conn) bool { return !spoke[c] })
	admitAll(t, p, "a", "a1", "a2")
	if _, victims := p.Admit("a3", "a"); !slices.Equal(victims, []conn{"a2"}) {
		t.Fatalf("victims %v, want the oldest quiet one, a2", victims)
	}
	spoke["a3"] = true
	if _, victims := p.Admit("a4", "a"); !slices.Equal(victims, []conn{"a1"}) {
		t.Fatalf("victims %v, want the oldest when none is quiet, a1", victims)
	}
}

func TestProvenConnectionsAreNeverVictims(t *testing.T) {
	p := New[conn](Limits{MaxConns: 3, MaxUnproven: 3, MaxUnprovenPerHost: 3}, nil)
	admitAll(t, p, "a", "a1", "a2", "a3")
	for _, c := range []conn{"a1", "a2", "a3"} {
		if !p.Prove(c) {
			t.Fatalf("Prove(%s) = false for a connection in the pool", c)
		}
	}
	if p.Unproven() != 0 {
		t.Fatalf("Unproven = %d after proving all, want 0", p.Unproven())
	}
	for range 10 {
		if v, victims := p.Admit("x", "x"); v != OverConns || len(victims) != 0 {
			t.Fatalf("Admit with only proven connections = %v, %v; want OverConns, none", v, victims)
		}
	}
	p.Drop("a2")
	p.Drop("a2") // a second Drop does nothing
	if p.Len() != 2 || p.Prove("a2") {
		t.Fatalf("after Drop: Len %d, Prove(a2) true; want 2 and false", p.Len())
	}
	admitAll(t, p, "x", "x1")
	var all []conn
	for c := range p.All() {
		all = append(all, c)
	}
	slices.Sort(all)
	if !slices.Equal(all, []conn{"a1", "a3", "x1"}) {
		t.Fatalf("All = %v, want a1 a3 x1", all)
	}
}

func TestHostOf(t *testing.T) {
	for _, tt := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 9}, "10.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:10.0.0.1"), Port: 9}, "10.0.0.1"},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 9}, "fe80::1"},
		{&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}, "/run/x.sock"},
	} {
		if got := HostOf(tt.addr); got != tt.want {
			t.Errorf("HostOf(%v) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}
