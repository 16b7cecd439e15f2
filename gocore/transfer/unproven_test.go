package transfer

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// from is a dialer whose connections come from the loopback address ip,
// a host of its own for the per-host limits.
func from(ip string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 30 * time.Second}
}

// hold dials n connections from ip that never send a byte and keeps them
// until the test ends.
func hold(t *testing.T, ip, addr string, n int) {
	t.Helper()
	for range n {
		dialRaw(t, from(ip), addr)
	}
}

// readOnce dials from ip and sends one READ of src's first 16 bytes,
// as a requester does right after it connects; nil when DATA with the
// right bytes came back.
func readOnce(t *testing.T, ip string, srv *Server, src *source) error {
	t.Helper()
	c, err := from(ip).Dial("tcp", srv.Addr())
	if err != nil {
		return err
	}
	defer c.Close()
	h, body, err := (&rawConn{t: t, c: c}).ask(Header{Tag: 7, Segment: src.id, Length: 16, Capability: src.cap})
	switch {
	case err != nil:
		return err
	case h.Op != OpData || string(body) != string(src.blocks[0][:16]):
		return fmt.Errorf("answer %+v, want DATA of the first 16 bytes", h)
	}
	return nil
}

// waitStats polls srv's stats until ok holds, for at most 30 s.
func waitStats(t *testing.T, srv *Server, what string, ok func(ServerStats) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !ok(srv.Stats()); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, stats %+v: want %s", srv.Stats(), what)
		}
	}
}

func TestIdleConnectionsWithoutACapabilityDoNotLockARequesterOut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		attackers []string // 64 idle connections from each
		requester string
	}{
		{"64 idle connections from the requester's own host do not keep it out", []string{"127.0.0.1"}, "127.0.0.1"},
		{"idle connections filling MaxConns from four hosts do not keep a fifth out", []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"}, "127.0.0.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, ServerSpec{})
			src := newSource(t, srv, []int{4096}, 4096, time.Now().Add(time.Hour))
			for _, ip := range tc.attackers {
				hold(t, ip, srv.Addr(), 64)
			}
			waitStats(t, srv, "every idle connection accepted", func(st ServerStats) bool { return st.Accepted == uint64(64*len(tc.attackers)) })
			if err := readOnce(t, tc.requester, srv, src); err != nil {
				t.Fatalf("the requester's READ: %v; want its DATA", err)
			}
			// Reads counts a READ once its DATA write returns, which can be
			// after the requester has read the answer: wait for it.
			waitStats(t, srv, "an unproven connection closed for the requester's, and its READ answered", func(st ServerStats) bool { return st.Evicted != 0 && st.Reads == 1 })
		})
	}
}

func TestARequesterGetsThroughWhileAnAttackerRedials(t *testing.T) {
	srv := newServer(t, ServerSpec{})
	src := newSource(t, srv, []int{4096}, 4096, time.Now().Add(time.Hour))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"} {
		wg.Add(1)
		go func() { // dials as fast as it can, holding its last 128
			defer wg.Done()
			var held []net.Conn
			defer func() {
				for _, c := range held {
					c.Close()
				}
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := from(ip).Dial("tcp", srv.Addr())
				if err != nil {
					continue
				}
				if held = append(held, c); len(held) > 128 {
					held[0].Close()
					held = held[1:]
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	waitStats(t, srv, "the attacker evicting its own connections", func(st ServerStats) bool { return st.Evicted >= 256 })
	// The requester's READ follows its connect at once, so the attacker
	// would have to dial MaxUnproven connections in between to close it;
	// a few tries allow for a loaded machine's scheduling.
	for i := range 20 {
		var err error
		for try := 1; ; try++ {
			if err = readOnce(t, "127.0.0.9", srv, src); err == nil {
				break
			}
			if try == 5 {
				t.Fatalf("request %d: 5 tries failed while the attacker redials, the last: %v", i, err)
			}
			t.Logf("request %d, try %d: %v", i, try, err)
		}
	}
	t.Logf("stats %+v", srv.Stats())
}

func TestUnprovenConnectionsAreClosedFirst(t *testing.T) {
	t.Run("the oldest unproven connection is closed past MaxUnproven", func(t *testing.T) {
		srv := newServer(t, ServerSpec{MaxUnproven: 2})
		a := dialRaw(t, &net.Dialer{}, srv.Addr())
		waitStats(t, srv, "1 accepted", func(st ServerStats) bool { return st.Accepted == 1 })
		hold(t, "127.0.0.1", srv.Addr(), 2)
		if !a.closed() {
			t.Fatal("the oldest of 3 unproven connections is open; MaxUnproven is 2")
		}
		waitStats(t, srv, "Evicted 1, 2 open", func(st ServerStats) bool { return st.Evicted == 1 && st.Conns == 2 })
	})
	t.Run("past MaxUnproven the host with the most loses its oldest", func(t *testing.T) {
		srv := newServer(t, ServerSpec{MaxUnproven: 4})
		lone := dialRaw(t, from("127.0.0.3"), srv.Addr())
		waitStats(t, srv, "1 accepted", func(st ServerStats) bool { return st.Accepted == 1 })
		hold(t, "127.0.0.2", srv.Addr(), 8)
		waitStats(t, srv, "5 evicted (all from 127.0.0.2), 4 open", func(st ServerStats) bool { return st.Evicted == 5 && st.Conns == 4 })
		_ = lone.c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := lone.c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the oldest connection, alone from its host: %v; want it open", err)
		}
	})
	t.Run("a proven connection is never closed for a newcomer", func(t *testing.T) {
		srv := newServer(t, ServerSpec{MaxConns: 2, MaxUnproven: 1})
		src := newSource(t, srv, []int{4096}, 4096, time.Now().Add(time.Hour))
		read := Header{Segment: src.id, Length: 8, Capability: src.cap}
		var proven []*rawConn
		for i := range 2 {
			r := dialRaw(t, &net.Dialer{}, srv.Addr())
			if h, _, err := r.ask(read); err != nil || h.Op != OpData {
				t.Fatalf("connection %d: %+v, %v; want DATA", i, h, err)
			}
			proven = append(proven, r)
		}
		if !dialRaw(t, from("127.0.0.2"), srv.Addr()).closed() {
			t.Fatal("a third connection is open; MaxConns is 2, both proven")
		}
		for i, r := range proven {
			if h, _, err := r.ask(read); err != nil || h.Op != OpData {
				t.Fatalf("proven connection %d after the newcomer: %+v, %v; want DATA", i, h, err)
			}
		}
		if st := srv.Stats(); st.OverConns != 1 || st.Evicted != 0 {
			t.Fatalf("stats %+v, want OverConns 1, Evicted 0", st)
		}
	})
}

func TestProveTimeout(t *testing.T) {
	t.Run("a connection that sends no READ is closed after ProveTimeout", func(t *testing.T) {
		srv := newServer(t, ServerSpec{ProveTimeout: 100 * time.Millisecond})
		if !dialRaw(t, &net.Dialer{}, srv.Addr()).closed() {
			t.Fatal("an idle unproven connection is open after 30 s; ProveTimeout is 100 ms")
		}
		waitStats(t, srv, "ProveTimeouts 1", func(st ServerStats) bool { return st.ProveTimeouts == 1 && st.Conns == 0 })
	})
	t.Run("refused READs do not prove a connection", func(t *testing.T) {
		srv := newServer(t, ServerSpec{ProveTimeout: 100 * time.Millisecond})
		r := dialRaw(t, &net.Dialer{}, srv.Addr())
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; ; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("open after %d refused READs over 30 s; ProveTimeout is 100 ms", i)
			}
			if _, _, err := r.ask(Header{Tag: uint64(i), Segment: 12345}); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		waitStats(t, srv, "ProveTimeouts 1", func(st ServerStats) bool { return st.ProveTimeouts == 1 })
	})
	t.Run("a proven connection keeps IdleTimeout", func(t *testing.T) {
		srv := newServer(t, ServerSpec{ProveTimeout: 50 * time.Millisecond})
		src := newSource(t, srv, []int{4096}, 4096, time.Now().Add(time.Hour))
		r := dialRaw(t, &net.Dialer{}, srv.Addr())
		read := Header{Segment: src.id, Length: 8, Capability: src.cap}
		if h, _, err := r.ask(read); err != nil || h.Op != OpData {
			t.Fatalf("first READ: %+v, %v; want DATA", h, err)
		}
		time.Sleep(time.Second) // 20 ProveTimeouts: far past it however loaded the machine
		if h, _, err := r.ask(read); err != nil || h.Op != OpData {
			t.Fatalf("READ a second after the first: %+v, %v; want DATA (proven, IdleTimeout is 2 min)", h, err)
		}
		if st := srv.Stats(); st.ProveTimeouts != 0 {
			t.Fatalf("stats %+v, want ProveTimeouts 0", st)
		}
	})
}

func TestUnprovenLimitsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spec  ServerSpec
		field string
	}{
		{"MaxUnproven above MaxConns is refused", ServerSpec{Addr: "127.0.0.1:0", MaxConns: 8, MaxUnproven: 9}, "transfer.ServerSpec.MaxUnproven"},
		{"MaxUnprovenPerHost above MaxConnsPerHost is refused", ServerSpec{Addr: "127.0.0.1:0", MaxUnprovenPerHost: 65}, "transfer.ServerSpec.MaxUnprovenPerHost"},
		{"a negative ProveTimeout is refused", ServerSpec{Addr: "127.0.0.1:0", ProveTimeout: -time.Second}, "transfer.ServerSpec.ProveTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.field+" ") {
				t.Fatalf("Validate: %v; want an error naming %s", err, tc.field)
			}
		})
	}
}
