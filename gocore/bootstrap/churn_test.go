package bootstrap_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
)

// The C client (liborbitkv through gocore/client) against the in-process
// Manager: connect, RegisterInstance, pings, Health, close (Unregister).
func TestLiborbitkvClientAgainstTheManager(t *testing.T) {
	h := newHarness(t)
	c, err := client.Connect(client.Options{SocketPath: h.path, InstanceID: "c-client", Role: uint32(abi.RoleWorker)})
	if errors.Is(err, native.ErrNoCgo) {
		t.Skip("built without cgo: no liborbitkv client")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Epoch() != testEpoch {
		t.Fatalf("client epoch %#x", c.Epoch())
	}
	for i := range uint64(100) {
		if v, err := c.Ping(i); err != nil || v != i {
			t.Fatalf("ping %d = %d, %v", i, v, err)
		}
	}
	hr, err := c.Health()
	// A session's Health carries its own figures (100 pings), never the
	// Manager-wide ones such as the session count.
	if err != nil || hr.Sessions != 0 || hr.Requests != 100 || hr.Status != "serving" {
		t.Fatalf("health %+v, %v; want serving, this session's 100 requests, no session count", hr, err)
	}
	s := h.table.Sessions()
	if len(s) != 1 || !s[0].Registered() || s[0].Peer.InstanceID != "c-client" || s[0].Peer.Role != abi.RoleWorker {
		t.Fatalf("session %+v", s)
	}
	mark := h.logs.mark()
	c.Close()
	h.waitSessions(t, 0)
	h.waitLine(t, mark, "session unregistered")
}

// A client that sends its hello and goes away before reading the reply
// leaves no session behind.
func TestClientGoneBeforeTheReplyLeavesNoSession(t *testing.T) {
	// More slots than clients: every handshake gets a session (none is
	// refused as Full while the others are still being torn down).
	h := newHarness(t, func(o *harnessOptions) { o.maxSessions = 32 })
	mark := h.logs.mark()
	const gone = 20
	for range gone {
		c := dial(t, h.path)
		c.Write(validHello().AppendTo(nil))
		c.Close()
	}
	// Each handshake opens a session and then either fails to send the
	// reply (EPIPE: the client closed first) or sends it just before the
	// close and tears the session down from the frame loop. Only when every
	// handshake got that far is the table a meaningful witness.
	deadline := time.Now().Add(waitFor)
	for h.logs.count(mark, []string{"bootstrap reply failed"})+h.logs.count(mark, []string{"session opened"}) < gone {
		if time.Now().After(deadline) {
			t.Fatalf("%d handshakes did not all finish within %v", gone, waitFor)
		}
		time.Sleep(time.Millisecond)
	}
	h.waitSessions(t, 0)
	connect(t, h.path).ping(t, 1)
}

// Sessions opening, pinging and closing concurrently, more of them than
// slots: each either works or is refused with Full, and the table ends idle.
func TestConcurrentSessionChurnEndsIdle(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.maxSessions = 4 })
	var wg sync.WaitGroup
	var mu sync.Mutex
	served, full := 0, 0
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 15 {
				c, err := client.Connect(client.Options{SocketPath: h.path, InstanceID: "churn"})
				if errors.Is(err, native.ErrNoCgo) {
					return
				}
				if err != nil {
					var ce *client.Error
					if errors.As(err, &ce) && ce.Code == native.CodeRefused {
						mu.Lock()
						full++
						mu.Unlock()
						continue
					}
					t.Errorf("goroutine %d connect %d: %v", g, i, err)
					return
				}
				if v, err := c.Ping(uint64(g*100 + i)); err != nil || v != uint64(g*100+i) {
					t.Errorf("ping = %d, %v", v, err)
				}
				c.Close()
				mu.Lock()
				served++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	h.waitSessions(t, 0)
	t.Logf("%d sessions served, %d refused as full", served, full)
	if served == 0 {
		t.Skip("built without cgo: no liborbitkv client")
	}
}
