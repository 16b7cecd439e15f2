package peer

import (
	"container/list"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
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
// attacker would need MaxHandshakes addresses).
type gate struct {
	net.Listener
	max, shakes, shakesPerHost int
	open                       *atomic.Int64 // Stats.OpenConns
	evicted                    *atomic.Uint64

	mu     sync.Mutex
	room   *sync.Cond // a connection closed or authenticated, or the gate closed
	n      int        // connections open
	seq    uint64     // connections accepted: each one's gateConn.seq
	closed bool
	// shaking holds the connections in their handshake oldest first, and
	// shakingOf those of each host (a host with none has no entry).
	shaking   *list.List
	shakingOf map[string]*list.List
}

func newGate(ln net.Listener, maxConns, shakes, perHost int, open *atomic.Int64, evicted *atomic.Uint64) *gate {
	g := &gate{Listener: ln, max: maxConns, shakes: shakes, shakesPerHost: perHost, open: open, evicted: evicted,
		shaking: list.New(), shakingOf: map[string]*list.List{}}
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
		for g.n >= g.max && g.shaking.Len() == 0 && !g.closed {
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
		gc := &gateConn{Conn: c, g: g, host: hostOf(c.RemoteAddr())}
		g.mu.Lock()
		g.seq++
		gc.seq = g.seq
		var victims []*gateConn
		evict := func(e *list.Element) {
			v := e.Value.(*gateConn)
			g.authenticated(v)
			victims = append(victims, v)
		}
		if mine := g.shakingOf[gc.host]; mine != nil && mine.Len() >= g.shakesPerHost {
			evict(victim(mine))
		}
		if g.shaking.Len() > 0 && (g.shaking.Len() >= g.shakes || g.n >= g.max) {
			evict(victim(g.busiest()))
		}
		// Victims still count in n until their Close; their room is this
		// connection's, so n may pass max by the victims for that while.
		admit := g.n-len(victims) < g.max
		if admit {
			g.n++
			gc.all = g.shaking.PushBack(gc)
			mine := g.shakingOf[gc.host]
			if mine == nil {
				mine = list.New()
				g.shakingOf[gc.host] = mine
			}
			gc.mine = mine.PushBack(gc)
		}
		g.mu.Unlock()
		g.evicted.Add(uint64(len(victims)))
		for _, v := range victims {
			v.Close()
		}
		if admit {
			g.open.Add(1) // after the victims' Close: OpenConns never passes MaxConns
			return gc, nil
		}
		c.Close() // the one in its handshake was authenticated meanwhile: wait for room
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

// victim is the element of l (not empty) to close for a newcomer: the
// oldest connection that has not sent a byte yet, else the oldest. A
// peer's client sends its TLS hello right after it connects, so only a
// connection read before that is silent, for microseconds.
func victim(l *list.List) *list.Element {
	for e := l.Front(); e != nil; e = e.Next() {
		if !e.Value.(*gateConn).spoke.Load() {
			return e
		}
	}
	return l.Front()
}

// busiest is the handshake list of the host with the most connections in
// their handshake, of those the one whose oldest is oldest (g.mu held,
// g.shaking not empty).
func (g *gate) busiest() *list.List {
	var best *list.List
	for _, l := range g.shakingOf {
		if best == nil || l.Len() > best.Len() || l.Len() == best.Len() && l.Front().Value.(*gateConn).seq < best.Front().Value.(*gateConn).seq {
			best = l
		}
	}
	return best
}

// authenticated takes c out of the handshake pool (g.mu held; a no-op
// when it is out already).
func (g *gate) authenticated(c *gateConn) {
	if c.all == nil {
		return
	}
	g.shaking.Remove(c.all)
	mine := g.shakingOf[c.host]
	mine.Remove(c.mine)
	if mine.Len() == 0 {
		delete(g.shakingOf, c.host)
	}
	c.all, c.mine = nil, nil
	g.room.Broadcast()
}

// gateConn is a connection the gate accepted; all and mine are its
// elements in gate.shaking and gate.shakingOf[host] while it is in its
// handshake (guarded by gate.mu).
type gateConn struct {
	net.Conn
	g         *gate
	host      string
	all, mine *list.Element
	seq       uint64      // order of accept
	spoke     atomic.Bool // a Read returned bytes
	once      sync.Once
}

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
	c.g.authenticated(c)
	c.g.mu.Unlock()
}

// Close closes the connection; the first call gives its room back.
func (c *gateConn) Close() error {
	c.once.Do(func() {
		c.g.mu.Lock()
		c.g.authenticated(c)
		c.g.n--
		c.g.room.Broadcast()
		c.g.mu.Unlock()
		c.g.open.Add(-1)
	})
	return c.Conn.Close()
}

// hostOf is the IP address of a remote address (an IPv4-mapped IPv6
// address as IPv4), the key of MaxHandshakesPerHost; the whole address
// when it has no IP.
func hostOf(a net.Addr) string {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap().String()
	}
	return a.String()
}
