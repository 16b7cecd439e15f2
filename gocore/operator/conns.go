package operator

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/ratelog"
)

// MaxConns bounds the operator socket's open connections, all peers
// together; a connection beyond it is closed at once (the Manager's file
// descriptors are shared with the bootstrap socket and its engines).
const MaxConns = 64

// MaxConnsPerUID bounds the open connections of one peer uid (allowed or
// refused); a connection beyond it is closed at once, so one user cannot
// take all MaxConns.
const MaxConnsPerUID = 16

// refusedLinger is how long a refused peer's connection stays open: long
// enough for its first call to read its PermissionDenied, then it is
// closed whatever the peer does.
const refusedLinger = time.Second

// unknownUID counts the connections whose peer credentials were unreadable.
const unknownUID = ^uint32(0)

// rateLog logs msg at most refusalBurst times a second; the rest are
// counted and reported on the next line logged. Safe for concurrent use.
type rateLog struct {
	log   *slog.Logger
	msg   string
	limit ratelog.Limiter
}

func newRateLog(log *slog.Logger, msg string) *rateLog {
	return &rateLog{log: log, msg: msg, limit: ratelog.Limiter{Burst: refusalBurst, Every: time.Second}}
}

func (r *rateLog) warn(attrs ...any) {
	r.limit.Log(r.log, slog.LevelWarn, r.msg, attrs...)
}

// connLimiter is the operator socket's listener: it reads each accepted
// connection's peer, closes at once a connection beyond MaxConns or
// MaxConnsPerUID, and keeps every other one until it is closed, so that
// closeIdle can cut them off at shutdown. Invariant: total and perUID
// count the tracked connections not yet closed.
type connLimiter struct {
	net.Listener
	over *rateLog

	mu            sync.Mutex
	total, perUID int
	conns         map[*conn]struct{}
	byUID         map[uint32]int
	closed        bool // closeIdle ran: every later connection is closed at once
}

func newConnLimiter(ln net.Listener, log *slog.Logger) *connLimiter {
	return &connLimiter{Listener: ln, total: MaxConns, perUID: MaxConnsPerUID,
		over:  newRateLog(log, "operator socket closed a connection beyond its limit"),
		conns: map[*conn]struct{}{}, byUID: map[uint32]int{}}
}

// Accept returns the next connection within the limits; those beyond are
// closed here and never reach the gRPC server.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		raw, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		c := &conn{Conn: raw, l: l, uid: unknownUID}
		if uc, ok := raw.(*net.UnixConn); ok {
			c.peer, c.peerErr = peerOf(uc)
		} else {
			c.peerErr = errors.New("operator socket: not a Unix connection")
		}
		if c.peerErr == nil {
			c.uid = c.peer.UID
		}
		if why := l.admit(c); why != "" {
			raw.Close()
			l.over.warn(slog.String("reason", why), slog.Int("pid", int(c.peer.PID)), slog.Uint64("uid", uint64(c.uid)),
				slog.Int("max_conns", MaxConns), slog.Int("max_conns_per_uid", MaxConnsPerUID))
			continue
		}
		return c, nil
	}
}

// admit counts c in, or says why it may not be.
func (l *connLimiter) admit(c *conn) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.closed:
		return "the operator socket is closing"
	case len(l.conns) >= l.total:
		return "too many operator connections (MaxConns)"
	case l.byUID[c.uid] >= l.perUID:
		return "too many operator connections of this uid (MaxConnsPerUID)"
	}
	l.conns[c] = struct{}{}
	l.byUID[c.uid]++
	return ""
}

// forget counts c out (once).
func (l *connLimiter) forget(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.conns[c]; !ok {
		return
	}
	delete(l.conns, c)
	if l.byUID[c.uid]--; l.byUID[c.uid] == 0 {
		delete(l.byUID, c.uid)
	}
}

// closeIdle refuses every later connection and closes every connection
// without a call in flight (idle ones, and those still in the handshake
// or before the HTTP/2 preface); busy reports whether some call is left.
func (l *connLimiter) closeIdle() (busy bool) {
	l.mu.Lock()
	l.closed = true
	var idle []*conn
	for c := range l.conns {
		if c.calls.Load() == 0 {
			idle = append(idle, c)
		} else {
			busy = true
		}
	}
	l.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
	return busy
}

// closeAll closes every connection left.
func (l *connLimiter) closeAll() {
	l.mu.Lock()
	l.closed = true
	all := make([]*conn, 0, len(l.conns))
	for c := range l.conns {
		all = append(all, c)
	}
	l.mu.Unlock()
	for _, c := range all {
		c.Close()
	}
}

// open is how many connections are counted in.
func (l *connLimiter) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// conn is one counted connection with its peer (read once, at accept).
type conn struct {
	net.Conn
	l       *connLimiter
	uid     uint32
	peer    Peer
	peerErr error
	calls   atomic.Int64 // calls begun and not ended (stats handler)
	once    sync.Once
	err     error
}

// Close closes the connection once and counts it out.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.err = c.Conn.Close()
		c.l.forget(c)
	})
	return c.err
}
