package peer

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/orbitkv/orbitkv/gocore/admission"
)

// gate is peer control's listener: it bounds the connections open
// (MaxConns, TLS handshakes included) and those still in their TLS
// handshake (MaxHandshakes, MaxHandshakesPerHost), which anyone who can
// reach the port may open without a certificate. At MaxConns a new
// connection waits in the kernel's accept queue, holding no descriptor
// here, unless one in its handshake can make room. At the per-host cap
// the host's own oldest connection in its handshake is closed to admit
// the new one (its handshake fails); at MaxHandshakes, or MaxConns, the
// oldest of the host with the most in their handshake. A connection
// leaves the handshake pool when mtls has authenticated it, so
// authenticated connections are never closed for a newcomer.
// Connections that never send a TLS byte thus hold at most MaxHandshakes
// descriptors. Of a host's connections the oldest that has sent nothing
// yet is closed first, so a peer's handshake fails only when, from its
// own host, MaxHandshakesPerHost newer ones arrive before its hello is
// read (microseconds) or ones that sent bytes fill the cap, or when no
// host has more connections in their handshake than the peer's (an
// attacker would need MaxHandshakes addresses). The bookkeeping is an
// admission.Pool with MaxHandshakes and MaxHandshakesPerHost as its
// unproven bounds and no per-host bound on open connections.
type gate struct {
	net.Listener
	maxConns int
	open     *atomic.Int64 // Stats.OpenConns
	evicted  *atomic.Uint64

	mu     sync.Mutex
	room   *sync.Cond // a connection closed or authenticated, or the gate closed
	closed bool
	// conns counts the open connections and holds those in their
	// handshake (unproven until mtls authenticates them).
	conns *admission.Pool[*gateConn]
}

func newGate(ln net.Listener, maxConns, shakes, perHost int, open *atomic.Int64, evicted *atomic.Uint64) *gate {
	g := &gate{Listener: ln, maxConns: maxConns, open: open, evicted: evicted,
		conns: admission.New(admission.Limits{MaxConns: maxConns, MaxUnproven: shakes, MaxUnprovenPerHost: perHost}, (*gateConn).silent)}
	g.room = sync.NewCond(&g.mu)
	return g
}

// Accept waits while MaxConns are open and none is in its handshake, then
// accepts the next connection, closing the oldest in their handshake as
// the caps require. Errors: the inner listener's; net.ErrClosed after
// Close.
func (g *gate) Accept() (net.Conn, error) {
	for {
		g.mu.Lock()
		for g.conns.Len() >= g.maxConns && g.conns.Unproven() == 0 && !g.closed {
			g.room.Wait()
		}
		closed := g.closed
		g.mu.Unlock()
		if closed {
			return nil, net.ErrClosed
		}
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		gc := &gateConn{Conn: c, g: g}
		g.mu.Lock()
		// Victims leave the pool here; their room is this connection's, so
		// the descriptors open may pass MaxConns by the victims until the
		// Close below.
		v, victims := g.conns.Admit(gc, admission.HostOf(c.RemoteAddr()))
		if len(victims) > 0 {
			g.room.Broadcast()
		}
		g.mu.Unlock()
		g.evicted.Add(uint64(len(victims)))
		for _, v := range victims {
			v.Close()
		}
		if v == admission.Admitted {
			g.open.Add(1) // after the victims' Close: OpenConns never passes MaxConns
			return gc, nil
		}
		c.Close() // the ones in their handshake were authenticated meanwhile: wait for room
	}
}

// Close closes the inner listener and wakes an Accept waiting for room.
func (g *gate) Close() error {
	g.mu.Lock()
	g.closed = true
	g.room.Broadcast()
	g.mu.Unlock()
	return g.Listener.Close()
}

// gateConn is a connection the gate accepted.
type gateConn struct {
	net.Conn
	g     *gate
	spoke atomic.Bool // a Read returned bytes
	once  sync.Once
}

// silent reports whether c has sent nothing yet: such a connection is
// closed first for a newcomer. A peer's client sends its TLS hello right
// after it connects, so only a connection read before that is silent, for
// microseconds.
func (c *gateConn) silent() bool { return !c.spoke.Load() }

// Read is the connection's Read, noting the first bytes.
func (c *gateConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.spoke.Load() {
		c.spoke.Store(true)
	}
	return n, err
}

// authenticated takes c out of the handshake pool: mtls calls it once the
// peer's certificate and node id are verified.
func (c *gateConn) authenticated() {
	c.g.mu.Lock()
	c.g.conns.Prove(c)
	c.g.room.Broadcast()
	c.g.mu.Unlock()
}

// Close closes the connection; the first call gives its room back.
func (c *gateConn) Close() error {
	c.once.Do(func() {
		c.g.mu.Lock()
		c.g.conns.Drop(c)
		c.g.room.Broadcast()
		c.g.mu.Unlock()
		c.g.open.Add(-1)
	})
	return c.Conn.Close()
}
