package transfer

import (
	"bufio"
	"cmp"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/admission"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/limit"
)

// Limits of ServerSpec; 0 stands for the default in each.
var (
	MaxConnsRange        = limit.Range[int]{Field: "transfer.ServerSpec.MaxConns", Min: 1, Max: 65536, Zero: limit.Format(DefaultMaxConns)}
	MaxConnsPerHostRange = limit.Range[int]{Field: "transfer.ServerSpec.MaxConnsPerHost", Min: 1, Max: 65536, Zero: limit.Format(DefaultMaxConnsPerHost)}
	MaxRefusalsRange     = limit.Range[int]{Field: "transfer.ServerSpec.MaxRefusals", Min: 1, Max: 1 << 20, Zero: limit.Format(DefaultMaxRefusals)}
	MaxUnprovenRange     = limit.Range[int]{Field: "transfer.ServerSpec.MaxUnproven", Min: 1, Max: 65536, Zero: "half of MaxConns"}
	MaxUnprovenHostRange = limit.Range[int]{Field: "transfer.ServerSpec.MaxUnprovenPerHost", Min: 1, Max: 65536, Zero: "MaxConnsPerHost"}
	ProveTimeoutRange    = limit.Range[time.Duration]{Field: "transfer.ServerSpec.ProveTimeout", Min: time.Millisecond, Max: time.Hour, Zero: limit.Format(DefaultProveTimeout)}
	MaxSegmentsRange     = limit.Range[int]{Field: "transfer.ServerSpec.MaxSegments", Min: 1, Max: 1 << 20, Zero: limit.Format(DefaultMaxSegments)}
	IdleTimeoutRange     = limit.Range[time.Duration]{Field: "transfer.ServerSpec.IdleTimeout", Min: time.Millisecond, Max: 24 * time.Hour, Zero: limit.Format(DefaultIdleTimeout)}
	WriteTimeoutRange    = limit.Range[time.Duration]{Field: "transfer.ServerSpec.WriteTimeout", Min: time.Millisecond, Max: time.Hour, Zero: limit.Format(DefaultWriteTimeout)}
)

// The defaults of ServerSpec's limits, each what a 0 there stands for
// (MaxUnproven and MaxUnprovenPerHost default to values derived from
// MaxConns and MaxConnsPerHost).
const (
	// DefaultMaxConns is the default ServerSpec.MaxConns: 256 open data
	// connections.
	DefaultMaxConns = 256
	// DefaultMaxConnsPerHost is the default ServerSpec.MaxConnsPerHost:
	// 64 connections from one IP address, the most rails one requester
	// dials.
	DefaultMaxConnsPerHost = 64
	// DefaultMaxRefusals is the default ServerSpec.MaxRefusals: 128 READs
	// refused in a row on one connection.
	DefaultMaxRefusals = 128
	// DefaultProveTimeout is the default ServerSpec.ProveTimeout: 5 s.
	DefaultProveTimeout = 5 * time.Second
	// DefaultMaxSegments is the default ServerSpec.MaxSegments: 4096 live
	// segments.
	DefaultMaxSegments = 4096
	// DefaultIdleTimeout is the default ServerSpec.IdleTimeout: 2 min.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultWriteTimeout is the default ServerSpec.WriteTimeout: 10 s
	// per DATA frame.
	DefaultWriteTimeout = 10 * time.Second
)

// ServerSpec describes the source side of the transfer engine: one TCP
// listener for data connections. Zero limits take their defaults.
type ServerSpec struct {
	// Addr is the TCP address to listen on ("127.0.0.1:0" picks a port).
	Addr string
	// Logger gets refused READs and failed connections at Debug level;
	// nil discards.
	Logger *slog.Logger
	// OnConn, when set, is called with each accepted data connection
	// before it is served (the Manager registers it with the eBPF probes).
	// It runs on the connection's goroutine and must not keep conn.
	OnConn func(conn net.Conn)
	// MaxConns bounds the open data connections; one more is closed at
	// accept. Default 256.
	MaxConns int
	// MaxConnsPerHost bounds the open data connections from one remote IP
	// address (IPv4-mapped IPv6 counts as IPv4), so that one host cannot
	// take all MaxConns; one more is closed at accept. Default 64, the
	// most rails (EngineSpec.Rails) one requester dials.
	MaxConnsPerHost int
	// MaxRefusals is how many READs in a row one connection may have
	// refused (ERROR) without one answered with DATA in between: the
	// connection is closed after the ERROR of the last one. A refusal
	// alone fails only its READ; the budget ends connections that only
	// ever get refused (a requester without a capability). Default 128,
	// twice the most READs a requester pipelines on a rail
	// (EngineSpec.Window) that a segment's end refuses at once.
	MaxRefusals int
	// MaxUnproven bounds the open connections not yet proven: a connection
	// is proven once one of its READs passed the capability check (it is
	// answered with DATA), and stays proven until it closes. When
	// MaxUnproven are open, an unproven one is closed to admit a new one:
	// the oldest of the host with the most unproven; the same happens
	// instead of a refusal when MaxConns are open and one is unproven
	// (for MaxConnsPerHost, the host's own oldest). So idle connections
	// without a capability never lock a requester out: to close the
	// requester's connection an attacker must, between its connect and
	// its first READ's admission (microseconds on a LAN), dial
	// MaxUnprovenPerHost from its address or leave no host with more
	// unproven than the requester's. Proven connections are never closed
	// for a new one. At most MaxConns. Default MaxConns/2 (128).
	MaxUnproven int
	// MaxUnprovenPerHost bounds the unproven connections from one remote
	// IP address (as MaxConnsPerHost): when that many are open the host's
	// oldest unproven one is closed to admit its new one. At most
	// MaxConnsPerHost. Default MaxConnsPerHost, so that a requester that
	// dials all its rails at once (up to 64, EngineSpec.Rails) never
	// closes its own.
	MaxUnprovenPerHost int
	// ProveTimeout closes a connection that is still unproven this long
	// after accept: a requester sends its first READ right after it
	// connects, so only a connection without a capability (or a rail its
	// requester left unused; it dials again when it needs one) waits that
	// long. Proven connections keep IdleTimeout. Default 5 seconds.
	ProveTimeout time.Duration
	// MaxSegments bounds the live segments; RegisterSegment fails with
	// ErrTooManySegments beyond it. Default 4096.
	MaxSegments int
	// IdleTimeout closes a data connection that has had no READ answered
	// with DATA for this long (since accept, or since its last DATA): a
	// refused READ does not extend it, so a connection that is only ever
	// refused lives at most this long. Default 2 minutes.
	IdleTimeout time.Duration
	// WriteTimeout bounds the write of one DATA frame: a requester that
	// stops reading loses the connection. Default 10 seconds.
	WriteTimeout time.Duration
}

// Validate checks the spec; each error names the field and its limit.
func (s *ServerSpec) Validate() error {
	return errors.Join(
		limit.Check(s.Addr != "", "transfer.ServerSpec.Addr", s.Addr, "a TCP host:port"),
		MaxConnsRange.Check(s.MaxConns), MaxConnsPerHostRange.Check(s.MaxConnsPerHost),
		MaxRefusalsRange.Check(s.MaxRefusals), MaxSegmentsRange.Check(s.MaxSegments),
		MaxUnprovenRange.Check(s.MaxUnproven), MaxUnprovenHostRange.Check(s.MaxUnprovenPerHost),
		ProveTimeoutRange.Check(s.ProveTimeout),
		IdleTimeoutRange.Check(s.IdleTimeout), WriteTimeoutRange.Check(s.WriteTimeout),
		limit.Check(s.MaxUnproven <= cmp.Or(s.MaxConns, DefaultMaxConns), "transfer.ServerSpec.MaxUnproven", s.MaxUnproven, "at most MaxConns"),
		limit.Check(s.MaxUnprovenPerHost <= cmp.Or(s.MaxConnsPerHost, DefaultMaxConnsPerHost), "transfer.ServerSpec.MaxUnprovenPerHost", s.MaxUnprovenPerHost, "at most MaxConnsPerHost"))
}

func (s *ServerSpec) withDefaults() ServerSpec {
	o := *s
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.MaxConns = cmp.Or(o.MaxConns, DefaultMaxConns)
	o.MaxConnsPerHost = cmp.Or(o.MaxConnsPerHost, DefaultMaxConnsPerHost)
	o.MaxRefusals = cmp.Or(o.MaxRefusals, DefaultMaxRefusals)
	o.MaxUnproven = cmp.Or(o.MaxUnproven, max(1, o.MaxConns/2))
	o.MaxUnprovenPerHost = cmp.Or(o.MaxUnprovenPerHost, o.MaxConnsPerHost)
	o.ProveTimeout = cmp.Or(o.ProveTimeout, DefaultProveTimeout)
	o.MaxSegments = cmp.Or(o.MaxSegments, DefaultMaxSegments)
	o.IdleTimeout = cmp.Or(o.IdleTimeout, DefaultIdleTimeout)
	o.WriteTimeout = cmp.Or(o.WriteTimeout, DefaultWriteTimeout)
	return o
}

// Capability is the unguessable 128-bit secret (crypto/rand) that admits
// READs of one segment; peer control hands it to the authenticated peer.
type Capability [16]byte

// Server serves READs of registered segments over plain TCP data
// connections. Safe for concurrent use.
type Server struct {
	spec ServerSpec
	ln   net.Listener
	wg   sync.WaitGroup // the accept loop and every connection's goroutine

	mu     sync.Mutex
	closed bool
	segs   map[uint64]*segment
	conns  *admission.Pool[net.Conn] // each open connection; proven once a READ is admitted

	reads, bytes, refused, accepted   atomic.Uint64
	overConns, overHost, overRefusals atomic.Uint64
	evicted, proveTimeouts            atomic.Uint64
}

// segment is the concatenation of bufs; ends[i] is the segment offset just
// past bufs[i].
type segment struct {
	id       uint64
	cap      Capability
	bufs     [][]byte
	ends     []uint64
	size     uint64
	deadline time.Time
	timer    *time.Timer
	// inflight counts DATA writes reading bufs; writers holds their
	// connections (guarded by Server.mu) so that UnregisterSegment can cut
	// a write short.
	inflight sync.WaitGroup
	writers  map[net.Conn]int
}

// Listen validates s and starts serving on s.Addr. Errors: a field error
// (limit.Error), or the listen error (limit.Refused on Addr).
func Listen(s ServerSpec) (*Server, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return nil, &limit.Refused{Field: "transfer.ServerSpec.Addr", Value: s.Addr, Err: err}
	}
	spec := s.withDefaults()
	srv := &Server{spec: spec, ln: ln, segs: map[uint64]*segment{}, conns: admission.New[net.Conn](admission.Limits{
		MaxConns: spec.MaxConns, MaxConnsPerHost: spec.MaxConnsPerHost,
		MaxUnproven: spec.MaxUnproven, MaxUnprovenPerHost: spec.MaxUnprovenPerHost,
	}, nil)}
	srv.wg.Add(1)
	go srv.accept()
	return srv, nil
}

// Addr is the listener's address (host:port), to be handed to requesters.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// ServerStats are counters since Listen.
type ServerStats struct {
	Conns    int    // data connections open now
	Segments int    // live segments now
	Accepted uint64 // data connections accepted
	Reads    uint64 // READs answered with DATA
	Bytes    uint64 // payload bytes sent in DATA frames
	Refused  uint64 // READs answered with ERROR
	// Connections closed by a limit: at accept, MaxConns open (OverConns)
	// or MaxConnsPerHost open from the same host (OverHost), none of
	// them unproven; after MaxRefusals refusals in a row (OverRefusals).
	OverConns, OverHost, OverRefusals uint64
	// Unproven connections closed: the oldest, to admit a new one
	// (Evicted: MaxUnproven, MaxUnprovenPerHost, MaxConns or
	// MaxConnsPerHost was reached), or ProveTimeout after accept with no
	// READ admitted (ProveTimeouts).
	Evicted, ProveTimeouts uint64
}

// Stats returns the counters.
func (s *Server) Stats() ServerStats {
	s.mu.Lock()
	st := ServerStats{Conns: s.conns.Len(), Segments: len(s.segs)}
	s.mu.Unlock()
	st.Accepted, st.Reads, st.Bytes, st.Refused = s.accepted.Load(), s.reads.Load(), s.bytes.Load(), s.refused.Load()
	st.OverConns, st.OverHost, st.OverRefusals = s.overConns.Load(), s.overHost.Load(), s.overRefusals.Load()
	st.Evicted, st.ProveTimeouts = s.evicted.Load(), s.proveTimeouts.Load()
	return st
}

// RegisterSegment makes the concatenation of bufs readable, until
// UnregisterSegment or deadline, by requesters that present the returned
// capability with the returned id. Ids are drawn at random (crypto/rand,
// never 0, unique among the live segments), so an id tells nothing of the
// others. bufs must stay unchanged and allocated
// until then; the Server keeps them but never writes them. Errors: bufs
// holding no bytes, a deadline not in the future, ErrTooManySegments,
// ErrClosed.
func (s *Server) RegisterSegment(bufs [][]byte, deadline time.Time) (uint64, Capability, error) {
	seg := &segment{bufs: bufs, ends: make([]uint64, len(bufs)), deadline: deadline, writers: map[net.Conn]int{}}
	for i, b := range bufs {
		seg.size += uint64(len(b))
		seg.ends[i] = seg.size
	}
	var c Capability
	if seg.size == 0 {
		return 0, c, limit.Check(false, "transfer.RegisterSegment bufs", 0, "≥ 1 byte in all")
	}
	d := time.Until(deadline)
	if d <= 0 {
		return 0, c, limit.Check(false, "transfer.RegisterSegment deadline", deadline.Format(time.RFC3339Nano), "a time in the future")
	}
	var draw [16 + 8]byte
	if _, err := rand.Read(draw[:]); err != nil {
		return 0, c, fmt.Errorf("drawing a capability: %w", err)
	}
	copy(c[:], draw[:16])
	seg.cap = c
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, Capability{}, ErrClosed
	}
	if len(s.segs) >= s.spec.MaxSegments {
		return 0, Capability{}, fmt.Errorf("%w: %d live, the limit (transfer.ServerSpec.MaxSegments) is %d", ErrTooManySegments, len(s.segs), s.spec.MaxSegments)
	}
	seg.id = binary.LittleEndian.Uint64(draw[16:])
	for _, taken := s.segs[seg.id]; seg.id == 0 || taken; _, taken = s.segs[seg.id] {
		seg.id++ // 0 is never an id, and a live id is not drawn twice
	}
	s.segs[seg.id] = seg
	id := seg.id
	seg.timer = time.AfterFunc(d, func() { s.UnregisterSegment(id) })
	return id, c, nil
}

// UnregisterSegment ends segment id (a no-op when it is gone already).
// When it returns no READ reads the segment's bufs any more: later READs
// are refused with ErrUnknownSegment, and a DATA write in flight is cut
// short (its connection closes) and waited for. Expiry at the deadline
// does the same.
func (s *Server) UnregisterSegment(id uint64) {
	s.mu.Lock()
	seg, ok := s.segs[id]
	if ok {
		delete(s.segs, id)
		seg.timer.Stop()
		for c := range seg.writers {
			_ = c.SetWriteDeadline(time.Unix(1, 0))
		}
	}
	s.mu.Unlock()
	if ok {
		seg.inflight.Wait()
	}
}

// Close stops listening, closes every data connection, unregisters every
// segment (waiting for writes in flight, as UnregisterSegment) and waits
// for the Server's goroutines. Later calls return nil.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.ln.Close()
	for c := range s.conns.All() {
		c.Close()
	}
	ids := make([]uint64, 0, len(s.segs))
	for id := range s.segs {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.UnregisterSegment(id)
	}
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, or an aborted handshake: wait and go on,
			// as net/http does, rather than stop serving for good.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.spec.Logger.Warn("transfer: accept failed; retrying", "err", err, "in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		s.mu.Lock()
		over, victims := s.makeRoom(c)
		if over == "" {
			s.wg.Add(1)
		}
		s.mu.Unlock()
		for _, v := range victims {
			s.spec.Logger.Debug("transfer: unproven data connection closed for a new one", "remote", v.RemoteAddr(), "new", c.RemoteAddr())
			v.Close()
		}
		if over != "" {
			s.spec.Logger.Debug("transfer: data connection refused", "remote", c.RemoteAddr(), "limit", over)
			c.Close()
			continue
		}
		s.accepted.Add(1)
		go s.serve(c)
	}
}

// makeRoom decides new connection c (s.mu held): over names the limit
// that refuses it ("" admits it), and victims are the unproven connections
// taken out of the Server to make room (the caller closes them; their
// goroutines then end). Room under MaxConns and MaxConnsPerHost is made
// from unproven connections only (admission.Pool), so proven ones are
// never closed for a newcomer.
func (s *Server) makeRoom(c net.Conn) (over string, victims []net.Conn) {
	if s.closed {
		return "closed", nil
	}
	v, victims := s.conns.Admit(c, admission.HostOf(c.RemoteAddr()))
	s.evicted.Add(uint64(len(victims)))
	switch v {
	case admission.OverConnsPerHost:
		s.overHost.Add(1)
		return "transfer.ServerSpec.MaxConnsPerHost", victims
	case admission.OverConns:
		s.overConns.Add(1)
		return "transfer.ServerSpec.MaxConns", victims
	}
	return "", victims
}

// serve answers the READs of one connection in order, until it fails or
// the Server closes.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		s.conns.Drop(c)
		s.mu.Unlock()
		c.Close()
	}()
	if s.spec.OnConn != nil {
		s.spec.OnConn(c)
	}
	var hdr, out [HeaderBytes]byte
	var pieces [][]byte
	// Only headers come from the requester, often several in one segment:
	// a small buffer reads them with one syscall.
	in := bufio.NewReaderSize(c, 16*HeaderBytes)
	// Only DATA moves the idle deadline, and refusals counts the ERRORs
	// since the last DATA: a connection that is only ever refused ends
	// after IdleTimeout or MaxRefusals, whichever comes first.
	// Until a READ is admitted the connection is unproven and must be so
	// by proveBy as well.
	idle := time.Now().Add(s.spec.IdleTimeout)
	proveBy := time.Now().Add(s.spec.ProveTimeout)
	proven, refusals := false, 0
	for {
		deadline := idle
		if !proven && proveBy.Before(idle) {
			deadline = proveBy
		}
		_ = c.SetReadDeadline(deadline)
		if _, err := io.ReadFull(in, hdr[:]); err != nil {
			if !proven && deadline.Equal(proveBy) && errors.Is(err, os.ErrDeadlineExceeded) {
				s.proveTimeouts.Add(1)
				s.spec.Logger.Debug("transfer: unproven data connection closed", "remote", c.RemoteAddr(), "limit", "transfer.ServerSpec.ProveTimeout")
				return
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.spec.Logger.Debug("transfer: data connection ends", "remote", c.RemoteAddr(), "err", err)
			}
			return
		}
		h, err := DecodeHeader(hdr[:])
		if err == nil && h.Op != OpRead {
			err = fmt.Errorf("%w: op %s from a requester, want READ", ErrMalformed, h.Op)
		}
		if err != nil {
			// The framing cannot be trusted past a bad header: refuse and close.
			s.refuse(c, &h, err)
			return
		}
		if failpoint.Enabled && failpoint.Holding(failpoint.TransferServe) {
			s.hold()
		}
		// The write deadline is set before admit makes this write visible
		// to UnregisterSegment: once admitted, UnregisterSegment may move
		// it to the past to cut the write short, and nothing here may move
		// it back.
		_ = c.SetWriteDeadline(time.Now().Add(s.spec.WriteTimeout))
		seg, err := s.admit(c, &h)
		if errors.Is(err, net.ErrClosed) {
			return // closed for a newcomer while unproven
		}
		proven = proven || err == nil
		if err != nil {
			if s.refuse(c, &h, err) != nil {
				return
			}
			if refusals++; refusals >= s.spec.MaxRefusals {
				s.overRefusals.Add(1)
				s.spec.Logger.Debug("transfer: data connection closed after refusals", "remote", c.RemoteAddr(), "refusals", refusals, "limit", "transfer.ServerSpec.MaxRefusals")
				return
			}
			continue
		}
		pieces = seg.slice(pieces[:0], h.Offset, uint64(h.Length))
		reply := Header{Op: OpData, Tag: h.Tag, Segment: h.Segment, Offset: h.Offset, Length: h.Length}
		reply.Encode(out[:])
		bufs := net.Buffers(append([][]byte{out[:]}, pieces...))
		_, err = bufs.WriteTo(c) // writev: the payload goes from bufs to the socket, no copy here
		s.release(c, seg)
		if err != nil {
			s.spec.Logger.Debug("transfer: DATA write failed; the connection closes", "remote", c.RemoteAddr(), "segment", h.Segment, "err", err)
			return
		}
		s.reads.Add(1)
		s.bytes.Add(uint64(h.Length))
		refusals, idle = 0, time.Now().Add(s.spec.IdleTimeout)
	}
}

// hold withholds a READ's answer while the failpoint TransferServe is held
// (tests only), before admit: the segment is not in use meanwhile.
func (s *Server) hold() {
	failpoint.NoteHeld(failpoint.TransferServe)
	for failpoint.Holding(failpoint.TransferServe) {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// admit checks a decoded READ against its segment and, when it may be
// served, counts the write in flight (release ends it). The capability is
// checked before the deadline and the range, so only its holder hears of
// an expired segment or a range beyond it (refuse answers a wrong
// capability as an unknown segment). Admitting a READ proves c. Errors:
// net.ErrClosed when c was closed for a newcomer (makeRoom), else the
// refusal to answer.
func (s *Server) admit(c net.Conn, h *Header) (*segment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.conns.Contains(c) {
		return nil, net.ErrClosed
	}
	seg, ok := s.segs[h.Segment]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: segment %d", ErrUnknownSegment, h.Segment)
	case subtle.ConstantTimeCompare(seg.cap[:], h.Capability[:]) != 1:
		return nil, fmt.Errorf("%w: segment %d", ErrBadCapability, h.Segment)
	case !time.Now().Before(seg.deadline):
		return nil, fmt.Errorf("%w: segment %d at %s", ErrExpired, h.Segment, seg.deadline.Format(time.RFC3339Nano))
	}
	if err := CheckRange(h, seg.size); err != nil {
		return nil, err
	}
	s.conns.Prove(c) // admitted: the connection holds a capability
	seg.inflight.Add(1)
	seg.writers[c]++
	return seg, nil
}

func (s *Server) release(c net.Conn, seg *segment) {
	s.mu.Lock()
	if seg.writers[c]--; seg.writers[c] == 0 {
		delete(seg.writers, c)
	}
	s.mu.Unlock()
	seg.inflight.Done()
}

// refuse answers h with an ERROR frame carrying err's status and text,
// except that a wrong capability is answered exactly as a segment that
// does not exist (the log keeps the reason): a requester without the
// capability cannot tell which segment ids are live.
func (s *Server) refuse(c net.Conn, h *Header, err error) error {
	s.refused.Add(1)
	s.spec.Logger.Debug("transfer: READ refused", "remote", c.RemoteAddr(), "segment", h.Segment, "err", err)
	if errors.Is(err, ErrBadCapability) {
		err = fmt.Errorf("%w: segment %d", ErrUnknownSegment, h.Segment)
	}
	text := err.Error()
	if len(text) > MaxErrorTextBytes {
		text = text[:MaxErrorTextBytes]
	}
	seg := h.Segment
	if seg == 0 {
		seg = 1 // DecodeHeader wants ≥ 1; the tag is what the requester matches
	}
	var out [HeaderBytes + MaxErrorTextBytes]byte
	reply := Header{Op: OpError, Code: codeOf(err), Tag: h.Tag, Segment: seg, Offset: 0, Length: uint32(len(text))}
	reply.Encode(out[:])
	n := copy(out[HeaderBytes:], text)
	_ = c.SetWriteDeadline(time.Now().Add(s.spec.WriteTimeout))
	_, werr := c.Write(out[:HeaderBytes+n])
	return werr
}

// slice appends to dst the pieces of bufs that make [off, off+n) of the
// segment (CheckRange has admitted it).
func (g *segment) slice(dst [][]byte, off, n uint64) [][]byte {
	i := sort.Search(len(g.ends), func(i int) bool { return g.ends[i] > off })
	for ; n > 0 && i < len(g.bufs); i++ {
		start := off - (g.ends[i] - uint64(len(g.bufs[i])))
		take := min(n, uint64(len(g.bufs[i]))-start)
		dst = append(dst, g.bufs[i][start:start+take])
		off += take
		n -= take
	}
	return dst
}
