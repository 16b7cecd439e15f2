package kvevents

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// This file is the ZeroMQ side of a stream: a server of ZMTP 3.0 (RFC 23,
// NULL security) in the two roles vLLM's ZmqEventPublisher binds, PUB and
// ROUTER. It is OrbitKV's own because a stream's rule is that no
// subscriber can hold up the others or the Manager: each connection has a
// bounded queue of its own, and a subscriber that falls a whole queue
// behind is disconnected (counted; it resyncs from the replay socket)
// instead of being written to while the others wait.

// ZMTP constants (RFC 23).
const (
	greetingBytes = 64
	flagMore      = 0x01
	flagLong      = 0x02
	flagCommand   = 0x04
	// maxInFrame bounds a frame a peer sends us: subscriptions and replay
	// requests are a few bytes.
	maxInFrame = 4096
	// maxInFrames bounds the frames of one incoming message.
	maxInFrames = 8
	// writeTimeout bounds one message's write to a connection; a peer that
	// takes longer is disconnected.
	writeTimeout = 10 * time.Second
	// handshakeTimeout bounds the greeting and READY exchange.
	handshakeTimeout = 5 * time.Second
	// maxConns bounds the connections of one server.
	maxConns = 256
	// subscribeWithin is how long a PUB peer may stay connected without a
	// subscription; routerIdle how long a ROUTER peer may send no request.
	subscribeWithin = 5 * time.Second
	routerIdle      = 60 * time.Second
	// answerTimeout bounds the writing of one replay or snapshot answer.
	answerTimeout = 2 * time.Minute
	// maxSubscriptions bounds the topic prefixes one PUB connection may
	// hold (each at most maxInFrame bytes, walked for every message); a
	// peer that subscribes past it is disconnected.
	maxSubscriptions = 256
)

// greeting is the 64-byte ZMTP 3.0 greeting of a NULL-mechanism server.
func greeting() []byte {
	g := make([]byte, greetingBytes)
	g[0], g[9] = 0xFF, 0x7F
	g[10], g[11] = 3, 0 // version 3.0: subscriptions are messages, not commands
	copy(g[12:32], "NULL")
	g[32] = 1 // as-server
	return g
}

// readyCommand is the READY command frame naming socket type typ.
func readyCommand(typ string) []byte {
	var body bytes.Buffer
	body.WriteByte(5)
	body.WriteString("READY")
	body.WriteByte(byte(len("Socket-Type")))
	body.WriteString("Socket-Type")
	binary.Write(&body, binary.BigEndian, uint32(len(typ)))
	body.WriteString(typ)
	return appendFrame(nil, body.Bytes(), flagCommand)
}

// appendFrame appends one frame: flags, a 1- or 8-byte size, the body.
func appendFrame(dst, body []byte, flags byte) []byte {
	return append(appendFrameHeader(dst, len(body), flags), body...)
}

// maxFrameHeader is the longest frame header: flags and an 8-byte size.
const maxFrameHeader = 9

// appendFrameHeader appends the header of a frame of n bytes: short (a
// 1-byte size) up to 255 bytes, else long.
func appendFrameHeader(dst []byte, n int, flags byte) []byte {
	if n > 255 {
		return binary.BigEndian.AppendUint64(append(dst, flags|flagLong), uint64(n))
	}
	return append(dst, flags, byte(n))
}

// appendMessage appends a multipart message: every frame but the last
// has the MORE flag.
func appendMessage(dst []byte, frames ...[]byte) []byte {
	for i, f := range frames {
		var fl byte
		if i < len(frames)-1 {
			fl = flagMore
		}
		dst = appendFrame(dst, f, fl)
	}
	return dst
}

// readFrame reads one frame of at most maxInFrame bytes.
func readFrame(r *bufio.Reader) (flags byte, body []byte, err error) {
	return readFrameMax(r, maxInFrame)
}

// readFrameMax reads one frame of at most max bytes into a new slice.
func readFrameMax(r *bufio.Reader, max uint64) (flags byte, body []byte, err error) {
	return readFrameInto(r, max, nil)
}

// readFrameInto reads one frame of at most max bytes into buf's array
// when its capacity holds it, else into a new one.
func readFrameInto(r *bufio.Reader, max uint64, buf []byte) (flags byte, body []byte, err error) {
	if flags, err = r.ReadByte(); err != nil {
		return 0, nil, err
	}
	if flags&^(flagMore|flagLong|flagCommand) != 0 {
		return 0, nil, fmt.Errorf("frame flags 0x%02x: reserved bits set", flags)
	}
	var n uint64
	if flags&flagLong != 0 {
		var b [8]byte
		if _, err = io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	} else {
		c, err := r.ReadByte()
		if err != nil {
			return 0, nil, err
		}
		n = uint64(c)
	}
	if n > max {
		return 0, nil, fmt.Errorf("frame of %d bytes, limit %d", n, max)
	}
	if buf == nil {
		body = make([]byte, n)
	} else {
		body = slices.Grow(buf[:0], int(n))[:n]
	}
	_, err = io.ReadFull(r, body)
	return flags, body, err
}

// readMessage reads one message (commands are returned alone, with
// command true).
func readMessage(r *bufio.Reader) (frames [][]byte, command bool, err error) {
	for {
		fl, body, err := readFrame(r)
		if err != nil {
			return nil, false, err
		}
		if fl&flagCommand != 0 {
			if len(frames) != 0 {
				return nil, false, errors.New("a command frame inside a message")
			}
			return [][]byte{body}, true, nil
		}
		if frames = append(frames, body); len(frames) > maxInFrames {
			return nil, false, fmt.Errorf("message of more than %d frames", maxInFrames)
		}
		if fl&flagMore == 0 {
			return frames, false, nil
		}
	}
}

// zserver serves one ZMTP socket role on one listener.
type zserver struct {
	role     string // "PUB" or "ROUTER"
	ln       net.Listener
	queue    int   // messages a connection may have queued
	maxBytes int64 // bytes a connection may have queued (0: no bound but queue)
	log      *slog.Logger
	// onRequest handles a ROUTER message (frames without the routing id)
	// on the connection's reader goroutine; reply queues its answers.
	onRequest func(frames [][]byte, reply func(msg []byte) bool)

	mu    sync.Mutex
	conns map[*zconn]struct{}
	done  bool
	wg    sync.WaitGroup

	dropped    atomic.Uint64 // connections closed for falling a queue behind
	idleClosed atomic.Uint64 // connections closed for not subscribing or asking in time
	accepted   atomic.Uint64
}

// zconn is one peer connection.
type zconn struct {
	nc     net.Conn
	out    chan outMsg  // encoded messages
	queued atomic.Int64 // the bytes of the messages in out
	stop   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	subs   [][]byte // PUB: subscribed topic prefixes
}

func (c *zconn) close() {
	c.once.Do(func() { close(c.stop); c.nc.Close() })
}

// subscribed reports whether a message of topic t goes to c.
func (c *zconn) subscribed(t []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.subs {
		if bytes.HasPrefix(t, s) {
			return true
		}
	}
	return false
}

func newZServer(role string, ln net.Listener, queue int, maxBytes int64, log *slog.Logger) *zserver {
	return &zserver{role: role, ln: ln, queue: queue, maxBytes: maxBytes, log: log, conns: map[*zconn]struct{}{}}
}

func (s *zserver) serve() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := s.ln.Accept()
			if err != nil {
				return // closed
			}
			s.accepted.Add(1)
			c := &zconn{nc: nc, out: make(chan outMsg, s.queue), stop: make(chan struct{})}
			s.mu.Lock()
			if s.done || len(s.conns) >= maxConns {
				s.mu.Unlock()
				nc.Close()
				continue
			}
			s.conns[c] = struct{}{}
			s.wg.Add(2)
			s.mu.Unlock()
			go s.read(c)
			go s.write(c)
		}
	}()
}

// close stops accepting, closes every connection and waits for their
// goroutines.
func (s *zserver) close() {
	s.ln.Close()
	s.mu.Lock()
	s.done = true
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *zserver) forget(c *zconn) {
	c.close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// handshake exchanges greetings and READY commands; the peer's socket
// type must fit ours (SUB or XSUB for PUB; REQ, DEALER or ROUTER for
// ROUTER).
func (s *zserver) handshake(c *zconn, r *bufio.Reader) error {
	c.nc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.nc.SetDeadline(time.Time{})
	if _, err := c.nc.Write(greeting()); err != nil {
		return err
	}
	var g [greetingBytes]byte
	if _, err := io.ReadFull(r, g[:]); err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	if g[0] != 0xFF || g[9] != 0x7F || g[10] < 3 {
		return fmt.Errorf("greeting: not ZMTP 3 (signature %x, version %d)", g[:10], g[10])
	}
	if mech := string(bytes.TrimRight(g[12:32], "\x00")); mech != "NULL" {
		return fmt.Errorf("greeting: security mechanism %q, this server speaks NULL only", mech)
	}
	if _, err := c.nc.Write(readyCommand(s.role)); err != nil {
		return err
	}
	msg, cmd, err := readMessage(r)
	if err != nil || !cmd {
		return fmt.Errorf("READY: %v (command %v)", err, cmd)
	}
	typ, err := peerType(msg[0])
	if err != nil {
		return err
	}
	ok := map[string][]string{"PUB": {"SUB", "XSUB"}, "ROUTER": {"REQ", "DEALER", "ROUTER"}}[s.role]
	for _, t := range ok {
		if typ == t {
			return nil
		}
	}
	return fmt.Errorf("peer socket type %s cannot talk to a %s socket", typ, s.role)
}

// peerType reads Socket-Type from a READY command body.
func peerType(b []byte) (string, error) {
	if len(b) < 6 || b[0] != 5 || string(b[1:6]) != "READY" {
		return "", errors.New("READY: the first command is not READY")
	}
	b = b[6:]
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n+4 {
			return "", errors.New("READY: truncated property")
		}
		name := string(b[1 : 1+n])
		vn := binary.BigEndian.Uint32(b[1+n:])
		b = b[1+n+4:]
		if uint64(vn) > uint64(len(b)) {
			return "", errors.New("READY: truncated property value")
		}
		if bytes.EqualFold([]byte(name), []byte("Socket-Type")) {
			return string(b[:vn]), nil
		}
		b = b[vn:]
	}
	return "", errors.New("READY: no Socket-Type")
}

func (s *zserver) read(c *zconn) {
	defer s.wg.Done()
	defer s.forget(c)
	r := bufio.NewReader(c.nc)
	if err := s.handshake(c, r); err != nil {
		s.log.Debug("kv events: handshake refused", "role", s.role, "remote", c.nc.RemoteAddr(), "err", err)
		return
	}
	subscribeBy := time.Now().Add(subscribeWithin)
	for {
		// A connection holds one of maxConns slots: a PUB peer must
		// subscribe within subscribeWithin of its handshake, whatever else
		// it sends, and a ROUTER peer that sends
		// no request for routerIdle is closed (ZeroMQ clients reconnect
		// by themselves), so idle strangers cannot keep the slots.
		switch {
		case s.role == "ROUTER":
			c.nc.SetReadDeadline(time.Now().Add(routerIdle))
		case !c.hasSubscription():
			c.nc.SetReadDeadline(subscribeBy)
		default:
			c.nc.SetReadDeadline(time.Time{})
		}
		frames, cmd, err := readMessage(r)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.idleClosed.Add(1)
				s.log.Debug("kv events: an idle connection was closed", "role", s.role, "remote", c.nc.RemoteAddr())
			}
			return
		}
		switch {
		case s.role == "PUB" && cmd:
			// ZMTP 3.1 peers may send SUBSCRIBE / CANCEL commands.
			if b := frames[0]; len(b) >= 1 && int(b[0])+1 <= len(b) {
				name, topic := string(b[1:1+b[0]]), b[1+b[0]:]
				if (name == "SUBSCRIBE" || name == "CANCEL") && !c.subscribe(topic, name == "SUBSCRIBE") {
					s.log.Debug("kv events: a peer subscribed past the limit and was disconnected", "remote", c.nc.RemoteAddr(), "limit", maxSubscriptions)
					return
				}
			}
		case s.role == "PUB":
			if f := frames[0]; len(f) >= 1 && (f[0] == 0 || f[0] == 1) && !c.subscribe(f[1:], f[0] == 1) {
				s.log.Debug("kv events: a peer subscribed past the limit and was disconnected", "remote", c.nc.RemoteAddr(), "limit", maxSubscriptions)
				return
			}
		case !cmd && s.onRequest != nil:
			deadline := time.Now().Add(answerTimeout)
			s.onRequest(frames, func(msg []byte) bool { return s.reply(c, msg, deadline) })
		}
	}
}

// subscribe adds (on) or cancels a topic prefix; it reports false, and
// adds nothing, when c already holds maxSubscriptions.
func (c *zconn) subscribe(topic []byte, on bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range c.subs {
		if bytes.Equal(t, topic) {
			if !on {
				c.subs = append(c.subs[:i], c.subs[i+1:]...)
			}
			return true
		}
	}
	if on {
		if len(c.subs) >= maxSubscriptions {
			return false
		}
		c.subs = append(c.subs, bytes.Clone(topic))
	}
	return true
}

func (s *zserver) write(c *zconn) {
	defer s.wg.Done()
	defer s.forget(c)
	for {
		select {
		case <-c.stop:
			return
		case msg := <-c.out:
			c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
			_, err := c.nc.Write(msg.b)
			c.queued.Add(-int64(len(msg.b)))
			msg.p.release()
			if err != nil {
				return
			}
		}
	}
}

// outMsg is a message queued on a connection: its bytes and, for a
// published batch, the pooled buffer they are in, released once written.
// A message never written (its connection closed first) is never
// released: its buffer is left to the garbage collector.
type outMsg struct {
	b []byte
	p *pooled
}

// enqueue queues msg on c, taking a reference on its pooled buffer; a
// full queue (maxBytes queued bytes, or queue messages) closes c
// (counted) and reports false.
func (s *zserver) enqueue(c *zconn, msg outMsg) bool {
	n := int64(len(msg.b))
	q := c.queued.Add(n)
	if s.maxBytes <= 0 || q <= s.maxBytes || q == n { // an empty queue takes any one message
		msg.p.hold()
		select {
		case c.out <- msg:
			return true
		case <-c.stop:
			c.queued.Add(-n)
			msg.p.release()
			return false
		default:
			msg.p.release()
		}
	}
	c.queued.Add(-n)
	s.dropped.Add(1)
	s.log.Warn("kv events: a subscriber fell a whole queue (messages or bytes) behind and was disconnected; it resyncs from the replay socket", "role", s.role, "remote", c.nc.RemoteAddr(), "queue", s.queue, "bytes", s.maxBytes)
	c.close()
	return false
}

// reply queues a ROUTER answer on c (a replay connection's own reader
// goroutine calls it), waiting up to writeTimeout for room, and no later
// than the answer's deadline: a replay or a snapshot is written as the
// peer reads it. It reports false, and closes c, when the peer does not
// make room in time or c closed.
func (s *zserver) reply(c *zconn, msg []byte, deadline time.Time) bool {
	t := time.NewTimer(min(writeTimeout, time.Until(deadline)))
	defer t.Stop()
	c.queued.Add(int64(len(msg)))
	select {
	case c.out <- outMsg{b: msg}:
		return true
	case <-c.stop:
	case <-t.C:
		s.dropped.Add(1)
		s.log.Warn("kv events: a replay peer did not read its answer in time and was disconnected", "remote", c.nc.RemoteAddr(), "timeout", writeTimeout)
		c.close()
	}
	c.queued.Add(-int64(len(msg)))
	return false
}

// broadcast queues the message (topic first; its bytes in p's buffer)
// on every PUB connection subscribed to topic. It never waits.
func (s *zserver) broadcast(topic, msg []byte, p *pooled) {
	s.mu.Lock()
	conns := make([]*zconn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		if c.subscribed(topic) {
			s.enqueue(c, outMsg{msg, p})
		}
	}
}

// subscribers is the number of open connections.
func (s *zserver) subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// hasSubscription reports whether c subscribed to some topic.
func (c *zconn) hasSubscription() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs) > 0
}

// subscribedCount is the number of connections with a subscription.
func (s *zserver) subscribedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		c.mu.Lock()
		if len(c.subs) > 0 {
			n++
		}
		c.mu.Unlock()
	}
	return n
}

// anySubscribed reports whether some connection has a subscription.
func (s *zserver) anySubscribed() bool { return s.subscribedCount() > 0 }
