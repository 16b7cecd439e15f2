package peer

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

func TestConnectionsThatNeverHandshakeHoldAtMostMaxConns(t *testing.T) {
	const maxConns = 4
	r := newRig(t, func(s *ServerSpec) { s.MaxConns = maxConns })
	var raw []net.Conn
	for range 3 * maxConns {
		c, err := net.Dial("tcp", r.srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, c) // never a byte of TLS: each waits out HandshakeTimeout
	}
	defer func() {
		for _, c := range raw {
			c.Close()
		}
	}()
	for end := time.Now().Add(30 * time.Second); r.srv.Stats().OpenConns < maxConns; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d connections open after 30 s, want %d", r.srv.Stats().OpenConns, maxConns)
		}
	}
	// The accept loop had every chance to take more: it took the first
	// four at once; watch it a while longer.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if n := r.srv.Stats().OpenConns; n > maxConns {
			t.Fatalf("%d connections open of %d dialled, want at most %d (MaxConns)", n, len(raw), maxConns)
		}
	}
	for _, c := range raw {
		c.Close()
	}
	raw = nil
	// The slots come back: a real peer gets in once the raw ones are gone.
	c := r.dial(t, "req")
	r.src.put(hash(0), 5000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.OpenTransfer(ctx, testNS, []abi.BlockHash{hash(0)}, 1<<20, 7); err != nil {
		t.Fatalf("OpenTransfer after the raw connections closed: %v", err)
	}
}

func TestCallsBeyondMaxConcurrentStreamsWaitOnTheClient(t *testing.T) {
	r := newRig(t, func(s *ServerSpec) { s.MaxConcurrentStreams = 1 })
	r.src.put(hash(0), 5000)
	r.src.gate, r.src.pinning = make(chan struct{}), make(chan struct{}, 2)
	var once sync.Once
	release := func() { once.Do(func() { close(r.src.gate) }) }
	defer release() // a failed test must not leave Pin held: Close waits for the calls
	c := r.dial(t, "req")
	done := make(chan error, 2)
	open := func() {
		_, err := c.OpenTransfer(context.Background(), testNS, []abi.BlockHash{hash(0)}, 1<<20, 7)
		done <- err
	}
	go open()
	select {
	case <-r.src.pinning:
	case <-time.After(30 * time.Second):
		t.Fatal("no Pin within 30 s")
	}
	go open()
	select {
	case <-r.src.pinning:
		t.Fatal("a second call reached the server while the first held the connection's one stream")
	case <-time.After(time.Second):
	}
	release()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("OpenTransfer: %v", err)
		}
	}
}

func TestServerSpecLimitsAreCheckedWithoutAnythingLive(t *testing.T) {
	cases := []struct {
		name string
		spec ServerSpec
		want string // "" : valid
	}{
		{"zero limits take their defaults", ServerSpec{}, ""},
		{"MaxConns past its limit is refused", ServerSpec{MaxConns: 1 << 20}, "peer.MaxConns"},
		{"MaxConcurrentStreams below 1 is refused", ServerSpec{MaxConcurrentStreams: -1}, "peer.MaxConcurrentStreams"},
		{"MaxPeerBytes below MaxTransferBytes is refused", ServerSpec{MaxTransferBytes: 1 << 30, MaxPeerBytes: 1 << 20}, "peer.MaxPeerBytes"},
		{"MaxHandshakes above MaxConns is refused", ServerSpec{MaxConns: 8, MaxHandshakes: 9}, "peer.MaxHandshakes"},
		{"MaxHandshakesPerHost above MaxHandshakes is refused", ServerSpec{MaxHandshakes: 4, MaxHandshakesPerHost: 5}, "peer.MaxHandshakesPerHost"},
		{"a small MaxConns lowers the default handshake caps", ServerSpec{MaxConns: 2}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.CheckLimits()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckLimits: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckLimits = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
