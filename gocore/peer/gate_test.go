package peer

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// rawFrom dials the rig's server from the loopback address ip, a host of
// its own for the per-host caps, and never sends a byte.
func rawFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 30 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c within 30 s.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [1]byte
	_, err := c.Read(b[:])
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// waitFor polls ok for at most 30 s.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("not within 30 s: %s", what)
		}
	}
}

func TestRawConnectionsDoNotKeepAPeerOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts int // attacking addresses, 127.0.0.10 on
	}{
		{"320 raw connections redialling from 4 hosts do not keep a peer out", 4},
		{"320 raw connections redialling from 16 hosts, past MaxHandshakes, do not keep a peer out", 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, nil) // MaxConns 256, MaxHandshakes 64, 32 per host
			r.src.put(hash(0), 5000)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for i := range 320 { // more than MaxConns: LimitListener alone let them lock the port
				ip := fmt.Sprintf("127.0.0.%d", 10+i%tc.hosts)
				wg.Add(1)
				go func() {
					defer wg.Done()
					d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
					for {
						select {
						case <-stop:
							return
						default:
						}
						c, err := d.Dial("tcp", r.srv.Addr())
						if err != nil {
							time.Sleep(time.Millisecond)
							continue
						}
						closedByServer(c) // never a TLS byte; redial once the server drops it
						c.Close()
					}
				}()
			}
			defer func() { close(stop); wg.Wait() }()
			waitFor(t, "the attack evicting handshakes", func() bool { return r.srv.Stats().HandshakesEvicted >= 320 })
			c := r.dial(t, "req") // from 127.0.0.1
			var err error
			for try := 1; try <= 3; try++ {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err = c.OpenTransfer(ctx, testNS, []abi.BlockHash{hash(0)}, 1<<20, 7)
				cancel()
				if err == nil {
					break
				}
				t.Logf("OpenTransfer try %d under attack: %v", try, err)
			}
			if err != nil {
				t.Fatalf("OpenTransfer under attack, 3 tries: %v", err)
			}
			if st := r.srv.Stats(); st.OpenConns > 256 {
				t.Fatalf("%d connections open, MaxConns is 256", st.OpenConns)
			}
		})
	}
}

func TestTheHandshakePoolClosesTheOldestFirst(t *testing.T) {
	t.Run("a host past MaxHandshakesPerHost loses its own oldest", func(t *testing.T) {
		r := newRig(t, func(s *ServerSpec) { s.MaxHandshakesPerHost = 2 })
		first := rawFrom(t, "127.0.0.2", r.srv.Addr())
		other := rawFrom(t, "127.0.0.3", r.srv.Addr())
		waitFor(t, "2 open", func() bool { return r.srv.Stats().OpenConns == 2 })
		rawFrom(t, "127.0.0.2", r.srv.Addr())
		rawFrom(t, "127.0.0.2", r.srv.Addr())
		if !closedByServer(first) {
			t.Fatal("the host's first connection is open; 3 in their handshake, MaxHandshakesPerHost 2")
		}
		waitFor(t, "HandshakesEvicted 1, 3 open", func() bool {
			st := r.srv.Stats()
			return st.HandshakesEvicted == 1 && st.OpenConns == 3
		})
		_ = other.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := other.Read(make([]byte, 1)); !isTimeout(err) {
			t.Fatalf("the other host's connection: %v; want it open", err)
		}
	})
	t.Run("past MaxHandshakes the busiest host loses its oldest", func(t *testing.T) {
		r := newRig(t, func(s *ServerSpec) { s.MaxHandshakes, s.MaxHandshakesPerHost = 3, 3 })
		lone := rawFrom(t, "127.0.0.3", r.srv.Addr())
		waitFor(t, "1 open", func() bool { return r.srv.Stats().OpenConns == 1 })
		busy := rawFrom(t, "127.0.0.2", r.srv.Addr())
		rawFrom(t, "127.0.0.2", r.srv.Addr())
		waitFor(t, "3 open", func() bool { return r.srv.Stats().OpenConns == 3 })
		rawFrom(t, "127.0.0.4", r.srv.Addr())
		if !closedByServer(busy) {
			t.Fatal("the busiest host's oldest connection is open; MaxHandshakes is 3")
		}
		_ = lone.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := lone.Read(make([]byte, 1)); !isTimeout(err) {
			t.Fatalf("the oldest connection, alone from its host: %v; want it open", err)
		}
	})
	t.Run("an authenticated connection is never closed for a newcomer", func(t *testing.T) {
		r := newRig(t, func(s *ServerSpec) { s.MaxConns, s.MaxHandshakes = 2, 1 })
		r.src.put(hash(0), 5000)
		c := r.dial(t, "req")
		if _, err := c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7); err != nil {
			t.Fatal(err)
		}
		for range 10 {
			rawFrom(t, "127.0.0.2", r.srv.Addr())
		}
		waitFor(t, "9 handshakes evicted", func() bool { return r.srv.Stats().HandshakesEvicted == 9 })
		if _, err := c.OpenTransfer(ctx5(t), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7); err != nil {
			t.Fatalf("OpenTransfer after 10 raw connections: %v", err)
		}
		if st := r.srv.Stats(); st.Connections != 1 {
			t.Fatalf("%d authenticated connections, want the first one alone (never closed)", st.Connections)
		}
	})
}
