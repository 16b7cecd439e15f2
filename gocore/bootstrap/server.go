package bootstrap

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/gocore/unixsock"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// Config configures a Server; a plain value.
type Config struct {
	Path         string         // bootstrap socket path
	Epoch        uint64         // Manager epoch (nonzero)
	ServiceID    [16]byte       // random per incarnation
	HelloTimeout time.Duration  // how long a new connection may take to send its hello; default 5s
	Table        *session.Table // sessions
	Dispatcher   *channel.Dispatcher
	Health       func() *lifecyclepb.HealthReply // fills the Manager-wide part of Health
	// Version is the Manager's build version, sent to every client in the
	// reply's OKV_BOOT_EXT_MANAGER_VERSION record (cut to 64 printable
	// ASCII bytes); "" sends none.
	Version string
	Logger  *slog.Logger
	// MaxBufferBytes bounds the engine buffer bytes all sessions together
	// may have the Manager map (RegisterBuffers); 0 = DefaultMaxBufferBytes.
	// The Manager's virtual address space (128 TiB on x86-64) also holds
	// the Go heap, the RAM tier and the slots: a client must not be able
	// to fill it.
	MaxBufferBytes uint64
	// Discovery answers a MapDiscovery frame: the sealed memfd of the
	// namespace's discovery index (owned by the callee: it stays open),
	// its size and bucket count (gocore/discover, wired by the Manager).
	// An error is sent to the client as Unadmitted naming "namespace"
	// with the error's text. nil: MapDiscovery is refused as Invalid.
	// Every successful call takes a reference that the server gives back
	// through ReleaseDiscovery when the session closes (once per call).
	//
	// ns is the namespace as the Manager keys the session's blocks (mixed
	// with its tenant's domain, tenant.Tenant.Namespace; the client's own
	// without tenants), as the one the client asked for: the table is the
	// index's table of ns, its header and digests are of as
	// (discover.Registry.OpenAs). ReleaseDiscovery takes ns.
	Discovery func(ns, as abi.Namespace) (f *os.File, bytes, buckets uint64, err error)
	// ReleaseDiscovery gives back one reference a successful Discovery
	// call took (gocore/discover Registry.Release: the last one retires
	// the table). nil: nothing to give back.
	ReleaseDiscovery func(ns abi.Namespace)
	// Tenants, when set, replaces the rule that a peer runs as the
	// Manager's uid: the socket is made 0666 and a peer is admitted when
	// exactly one tenant selects it (tenant.Set.Match over SO_PEERCRED,
	// SO_PEERGROUPS and its cgroup), its session is bound to that tenant
	// (session.Peer.Tenant) and holds at most the tenant's share of
	// sessions and of MaxTables discovery tables. nil: one trust domain,
	// the Manager's uid, as docs/security.md states.
	Tenants *tenant.Set
	// MaxBuffers bounds the engine buffers (regions) all sessions together
	// may register: each holds a descriptor and a mapping of the
	// Manager's. 0: DefaultMaxBuffers.
	MaxBuffers int
	// MaxTables is the most discovery tables the Manager keeps at once,
	// the whole that tenants' table shares divide (0: no table is
	// granted to a tenant; the Manager fills it from its registry).
	MaxTables uint32
}

// Limits and defaults of a Config.
const (
	// DefaultMaxBufferBytes is Config.MaxBufferBytes's default: 32 TiB.
	DefaultMaxBufferBytes = 32 << 40
	// DefaultHelloTimeout is Config.HelloTimeout's default.
	DefaultHelloTimeout = 5 * time.Second
)

// Limits of Config fields whose 0 means a default; a front end that
// spells the default out refuses 0 with CheckSet.
var (
	HelloTimeoutRange = limit.Range[time.Duration]{Field: "bootstrap.HelloTimeout", Min: time.Millisecond, Max: time.Minute,
		Zero: limit.Format(DefaultHelloTimeout)}
	// MaxBufferBytesRange: at most half of x86-64's 128 TiB user address
	// space, which also holds the Go heap, the RAM tier and the slots.
	MaxBufferBytesRange = limit.Range[uint64]{Field: "bootstrap.MaxBufferBytes", Min: 4 << 10, Max: 64 << 40, Bytes: true,
		Zero: limit.Size(DefaultMaxBufferBytes), Note: "half of the 128 TiB address space at most"}
)

// Validate checks the limits of the settings of c (Path, HelloTimeout,
// MaxBufferBytes; New checks the parts the Manager fills in); every field
// out of range is a *limit.Error naming it.
func (c Config) Validate() error {
	return errors.Join(
		limit.Check(c.Path != "" && len(c.Path) <= lifecycle.MaxSocketPath, "bootstrap.Path", c.Path,
			fmt.Sprintf("a path of 1..%d bytes (the limit for a Unix socket is %d)", lifecycle.MaxSocketPath, lifecycle.MaxSocketPath)),
		HelloTimeoutRange.Check(c.HelloTimeout),
		MaxBufferBytesRange.Check(c.MaxBufferBytes),
	)
}

// Server accepts bootstrap connections and runs their lifecycle frames.
type Server struct {
	cfg        Config
	log        *slog.Logger
	ln         *net.UnixListener
	removeSock func() // removes the socket path while it is the file bound here
	exts       []byte // extension records of every OK reply (replyExtensions)
	uid        uint32
	// uidAmbiguous: the Manager's own uid reads as the overflow uid of a
	// user namespace without a uid map, as every unmapped peer does, so
	// the peer rule cannot hold and every peer is refused.
	uidAmbiguous bool
	pid          uint32
	gpu          atomic.Pointer[session.GPUMapper] // CUDA memory of RegisterBuffers; nil: refused (SetGPU)

	refusals refusalLog      // rate limit for refusal log lines
	counts   sessionCounters // sessions opened and refused (SessionCounts)

	tenants []tenantUse // by tenant.Tenant.Index, under mu; nil without tenants

	mu      sync.Mutex
	conns   map[*conn]struct{}
	closing bool
	mapped  uint64 // buffer bytes registered by live sessions, under mu
	buffers int    // buffers registered by live sessions, under mu
	wg      sync.WaitGroup
}

// conn is one bootstrap connection and, after a successful hello, its session.
type conn struct {
	c       *net.UnixConn
	sess    *session.Session
	wmu     sync.Mutex // serialises frame writes (watch events vs replies)
	watched bool
	// replyFiles ride with the next reply (MapDiscovery's memfd); set by
	// handleFrame, taken by frameLoop. Not owned: the sender keeps them.
	replyFiles []*os.File
	// discovered are the namespaces whose discovery index this session
	// was sent (one Discovery reference each, given back at close); at
	// most MaxDiscoveryPerSession. Touched by the connection's goroutine
	// only.
	discovered map[abi.Namespace]struct{}
	// heldFds is the fds of the frame being read or handled, counted as
	// buffers (frameLoop's ReadLimits.OnFiles); touched by the
	// connection's goroutine only.
	heldFds int
}

// New listens on cfg.Path (see Listen) and returns a Server ready to Serve.
func New(cfg Config) (*Server, error) {
	if cfg.Epoch == 0 || cfg.Table == nil || cfg.Dispatcher == nil {
		return nil, errors.New("bootstrap: config needs a nonzero epoch, a session table and a dispatcher")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.HelloTimeout == 0 {
		cfg.HelloTimeout = DefaultHelloTimeout
	}
	if cfg.MaxBufferBytes == 0 {
		cfg.MaxBufferBytes = DefaultMaxBufferBytes
	}
	if cfg.MaxBuffers == 0 {
		cfg.MaxBuffers = DefaultMaxBuffers()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	mode := os.FileMode(0o600)
	if cfg.Tenants != nil {
		mode = 0o666 // tenants of other uids connect; SO_PEERCRED decides who stays
	}
	ln, removeSock, err := listen(cfg.Path, mode)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg: cfg, log: cfg.Logger, ln: ln, removeSock: removeSock, exts: replyExtensions(cfg.Version),
		uidAmbiguous: unixsock.UIDIsOverflow(uint32(os.Geteuid())),
		uid:          uint32(os.Geteuid()), pid: uint32(os.Getpid()),
		conns: map[*conn]struct{}{},
	}
	whole := tenant.Share{Sessions: cfg.Table.Spec().MaxSessions, Tables: cfg.MaxTables,
		Buffers: uint32(min(cfg.MaxBuffers, math.MaxUint32)), BufferBytes: cfg.MaxBufferBytes}
	for _, t := range cfg.Tenants.All() {
		s.tenants = append(s.tenants, tenantUse{share: cfg.Tenants.Resolve(t, whole)})
	}
	return s, nil
}

// Path returns the socket path.
func (s *Server) Path() string { return s.cfg.Path }

// SetGPU lets RegisterBuffers map CUDA memory through g (the cache's CUDA
// copy backend); without it CUDA regions are refused naming
// --copy-backend. Safe at any time; connections see it from their next
// RegisterBuffers.
func (s *Server) SetGPU(g session.GPUMapper) {
	if g == nil {
		s.gpu.Store(nil)
		return
	}
	s.gpu.Store(&g)
}

// gpuMapper is SetGPU's mapper, or nil.
func (s *Server) gpuMapper() session.GPUMapper {
	if g := s.gpu.Load(); g != nil {
		return *g
	}
	return nil
}

// Serve accepts connections until Close. It returns nil after Close.
func (s *Server) Serve() error {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
				s.log.Error("bootstrap accept: out of file descriptors; retrying in 100ms", slog.Any("err", err))
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return fmt.Errorf("bootstrap: accept: %w", err)
		}
		cn := &conn{c: c}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conns[cn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(cn)
	}
}

// Close stops accepting, tells watchers their sessions are closing, closes
// every connection (tearing each session down) and waits for the teardowns,
// then removes the socket path. Sessions are closed before the caller stops
// the dispatcher.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.closing = true
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	s.ln.Close()
	// One deadline for all: it also ends a write already blocked on a client
	// that stopped reading, so a stuck client delays shutdown by at most 1 s
	// in total, not per client.
	deadline := time.Now().Add(time.Second)
	for _, c := range conns {
		c.c.SetWriteDeadline(deadline)
	}
	for _, c := range conns {
		s.notifyClosing(c, "manager shutting down")
		c.c.Close()
	}
	s.wg.Wait()
	s.RemoveSocket()
}

// RemoveSocket removes the socket path if it is still the file this Server
// bound (same device and inode), never what another process may have put
// there since. Close calls it; a shutdown that cannot wait for Close may
// call it first. Safe from any goroutine.
func (s *Server) RemoveSocket() { s.removeSock() }

func (s *Server) serveConn(cn *conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, cn)
		s.mu.Unlock()
		cn.c.Close()
	}()
	sess, err := s.handshake(cn.c)
	if err != nil {
		return
	}
	cn.wmu.Lock()
	cn.sess = sess
	cn.wmu.Unlock()
	start := time.Now()
	defer func() {
		s.cfg.Dispatcher.Detach(sess)
		s.releaseBuffers(sess.Peer.Tenant, sess.BufferCount(), sess.BufferBytes())
		s.releaseDiscovery(cn)
		s.cfg.Table.Close(sess)
		if t := sess.Peer.Tenant; t != nil {
			s.dropSession(t)
		}
		s.log.Info("session closed", slog.Uint64("slot", uint64(sess.Index)),
			slog.Int("pid", int(sess.Peer.PID)), slog.String("instance", sess.InstanceID()),
			slog.Duration("age", time.Since(start)), slog.Int("sessions", s.cfg.Table.Len()))
	}()
	s.frameLoop(cn)
}

// handshake runs steps 1–3 of doc.go; on failure it has logged and replied.
func (s *Server) handshake(c *net.UnixConn) (sess *session.Session, err error) {
	cred, err := unixsock.PeerCred(c)
	if err != nil {
		s.refused(RefusedPeerCredentials)
		s.log.Warn("bootstrap refused: SO_PEERCRED failed", slog.Any("err", err))
		return nil, err
	}
	log := s.log.With(slog.Int("pid", int(cred.PID)), slog.Uint64("uid", uint64(cred.UID)))
	var tn *tenant.Tenant
	if s.cfg.Tenants != nil {
		if tn, err = s.admitTenant(c, cred); err == nil {
			err = s.takeSession(tn)
		}
		if err != nil {
			s.refused(RefusedTenant)
			s.refusals.warn(log, "tenant", slog.String("detail", err.Error()))
			s.writeReply(c, abi.RefusedReply(abi.BootBadField, err.Error()), nil, nil)
			return nil, err
		}
		log = log.With(slog.String("tenant", tn.Name))
		defer func() {
			if sess == nil {
				s.dropSession(tn)
			}
		}()
	} else if cred.UID != s.uid || s.uidAmbiguous {
		msg := fmt.Sprintf("peer uid %d differs from the Manager's uid %d", cred.UID, s.uid)
		if cred.UID == s.uid {
			msg = fmt.Sprintf("peer uid and the Manager's both read as the overflow uid %d (the Manager runs in a user namespace without a uid map): they cannot be compared", s.uid)
		}
		s.refused(RefusedUID)
		s.refusals.warn(log, "uid", slog.String("detail", msg))
		s.writeReply(c, abi.RefusedReply(abi.BootBadField, msg), nil, nil)
		return nil, errors.New(msg)
	}
	c.SetReadDeadline(time.Now().Add(s.cfg.HelloTimeout))
	buf := make([]byte, abi.HelloSize)
	if n, err := io.ReadFull(c, buf); err != nil {
		detail := fmt.Sprintf("read %d of %d hello bytes: %v", n, abi.HelloSize, err)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			detail = fmt.Sprintf("no hello within %v (got %d of %d bytes)", s.cfg.HelloTimeout, n, abi.HelloSize)
		}
		if n == 0 && errors.Is(err, io.EOF) {
			// Connected and closed without a byte: a liveness probe (for
			// example another Manager checking the path), not an attack.
			log.Debug("bootstrap connection closed before its hello")
			return nil, errors.New(detail)
		}
		s.refused(RefusedHelloIncomplete)
		s.refusals.warn(log, "hello", slog.String("detail", detail))
		return nil, errors.New(detail)
	}
	c.SetReadDeadline(time.Time{})
	hello, err := abi.DecodeHello(buf)
	if err != nil {
		var he *abi.HelloError
		errors.As(err, &he)
		s.refused(RefusedHelloInvalid)
		s.refusals.warn(log, he.Field, slog.String("detail", he.Detail))
		s.writeReply(c, abi.RefusedReply(he.Status, err.Error()), nil, nil)
		return nil, err
	}
	peer := session.Peer{PID: cred.PID, UID: cred.UID, Role: hello.Role, InstanceID: hello.InstanceIDString(), Tenant: tn}
	sess, err = s.cfg.Table.Open(peer)
	if err != nil {
		st := abi.BootInternal
		if errors.Is(err, session.ErrFull) || errors.Is(err, session.ErrPIDLimit) {
			st = abi.BootFull
		}
		s.refused(tableRefusal(err))
		s.refusals.warn(log, "session", slog.Any("err", err))
		s.writeReply(c, abi.RefusedReply(st, err.Error()), nil, nil)
		return nil, err
	}
	if err := s.cfg.Dispatcher.Attach(sess); err != nil {
		s.refused(RefusedInternal)
		s.refusals.warn(log, "session", slog.Any("err", err))
		s.cfg.Table.Close(sess)
		s.writeReply(c, abi.RefusedReply(abi.BootInternal, err.Error()), nil, nil)
		return nil, err
	}
	spec := s.cfg.Table.Spec()
	reply := abi.HelloReply{
		Magic: abi.BootstrapMagic, ProtocolVersion: abi.BootstrapVersion, Status: abi.BootOK,
		Epoch: s.cfg.Epoch, ServiceID: s.cfg.ServiceID, ClientToken: sess.Token,
		InitialGeneration: sess.InitialGeneration, SlotIndex: sess.Index,
		SlotBytes: sess.SlotBytes(), DescOffset: abi.SlotDescOffset, DescCapacity: sess.DescCapacity(),
		MaxFrameBody: abi.MaxFrameBody, ManagerPID: s.pid, MaxSessions: spec.MaxSessions,
	}
	files := []*os.File{sess.SlotFile(), sess.EventFile(), s.cfg.Dispatcher.DoorbellFile()}
	exts := s.exts
	if sess.IceoryxService != "" {
		// Required: a liborbitkv that cannot use it must refuse the reply,
		// not write requests into a slot nobody reads.
		exts = abi.AppendBootExt(slices.Clip(s.exts), abi.BootExtIceoryx2Service|abi.BootExtRequired, 0, []byte(sess.IceoryxService))
		exts = abi.AppendBootExt(exts, abi.BootExtIceoryx2Runtime|abi.BootExtRequired, 0, []byte(sess.IceoryxRuntime))
	}
	reply.ExtBytes = uint16(len(exts))
	if err := s.writeReply(c, reply, exts, files); err != nil {
		s.refused(RefusedInternal)
		log.Warn("bootstrap reply failed", slog.Any("err", err))
		s.cfg.Dispatcher.Detach(sess)
		s.cfg.Table.Close(sess)
		return nil, err
	}
	s.counts.opened.Add(1)
	log.Info("session opened", slog.Uint64("slot", uint64(sess.Index)),
		slog.String("role", hello.Role.String()), slog.String("instance", peer.InstanceID),
		slog.Int("sessions", s.cfg.Table.Len()))
	return sess, nil
}

// replyExtensions encodes the extension records every OK reply carries
// (abi.h struct okv_boot_ext) for a Manager of this version; none of them
// owns an fd yet.
func replyExtensions(version string) []byte {
	v := []byte(version)
	if len(v) > abi.BootExtVersionMax {
		v = v[:abi.BootExtVersionMax]
	}
	for i, c := range v {
		if c < 0x20 || c > 0x7e {
			v[i] = '?'
		}
	}
	if len(v) == 0 {
		return nil
	}
	return abi.AppendBootExt(nil, abi.BootExtManagerVersion, 0, v)
}

// writeReply sends r, then its extension records ext, in one message with
// files (the fixed three, then the records' fds) attached.
func (s *Server) writeReply(c *net.UnixConn, r abi.HelloReply, ext []byte, files []*os.File) error {
	b := append(r.AppendTo(make([]byte, 0, abi.HelloReplySize+len(ext))), ext...)
	oob := unixsock.Rights(files...)
	c.SetWriteDeadline(time.Now().Add(s.cfg.HelloTimeout))
	defer c.SetWriteDeadline(time.Time{})
	n, _, err := c.WriteMsgUnix(b, oob, nil)
	if err == nil && n != len(b) {
		err = fmt.Errorf("short reply write: %d of %d bytes", n, len(b))
	}
	return err
}

// reserveBuffers takes n buffers and bytes bytes of the Manager-wide
// limits and of tn's shares (tn nil: no tenants); the error says which
// limit they would pass.
func (s *Server) reserveBuffers(tn *tenant.Tenant, n int, bytes uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.buffers+n > s.cfg.MaxBuffers:
		return fmt.Errorf("%d buffers on top of the %d all sessions hold would pass the Manager's limit of %d (each holds a descriptor and a mapping: half the Manager's RLIMIT_NOFILE and of vm.max_map_count)",
			n, s.buffers, s.cfg.MaxBuffers)
	case bytes > s.cfg.MaxBufferBytes-s.mapped:
		return fmt.Errorf("%d bytes would pass the Manager-wide limit of %d bytes of registered buffers (--max-buffer-bytes)", bytes, s.cfg.MaxBufferBytes)
	}
	if tn != nil {
		u := &s.tenants[tn.Index]
		switch {
		case u.buffers+uint32(n) > u.share.Buffers:
			return fmt.Errorf("tenant %q holds %d buffers, its share of the Manager's %d; %d more do not fit", tn.Name, u.buffers, s.cfg.MaxBuffers, n)
		case u.bufferBytes+bytes > u.share.BufferBytes:
			return fmt.Errorf("tenant %q holds %d bytes of buffers, its share of the Manager's %d (--max-buffer-bytes); %d more do not fit", tn.Name, u.bufferBytes, s.cfg.MaxBufferBytes, bytes)
		}
		u.buffers += uint32(n)
		u.bufferBytes += bytes
	}
	s.buffers += n
	s.mapped += bytes
	return nil
}

// releaseBuffers gives back n buffers and bytes bytes reserveBuffers took.
func (s *Server) releaseBuffers(tn *tenant.Tenant, n int, bytes uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buffers -= min(n, s.buffers)
	s.mapped -= min(bytes, s.mapped)
	if tn != nil {
		u := &s.tenants[tn.Index]
		u.buffers -= min(uint32(n), u.buffers)
		u.bufferBytes -= min(bytes, u.bufferBytes)
	}
}

// DefaultMaxBuffers is Config.MaxBuffers's default: half the process's
// soft RLIMIT_NOFILE and half of vm.max_map_count (each buffer holds a
// descriptor and a mapping; the rest is for sessions, discovery tables,
// the tiers and the Go runtime), at least 64 and at most 1<<20.
func DefaultMaxBuffers() int {
	n := 1 << 20
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Cur != unix.RLIM_INFINITY {
		n = min(n, int(rl.Cur/2))
	}
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		if m, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			n = min(n, m/2)
		}
	}
	return max(n, 64)
}
