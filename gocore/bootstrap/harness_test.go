package bootstrap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/discover"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/gocore/manager"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// waitFor bounds every wait of these tests: long enough for a loaded CI VM
// under -race, short enough that a hang fails rather than stalls.
const waitFor = 5 * time.Second

const testEpoch = 0x5eed0000cafe0001

// ---- log capture ------------------------------------------------------------

// logSink records the Manager's log lines (slog text format) so tests can
// assert that a refusal names the field.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		s.lines = append(s.lines, l)
	}
	return len(p), nil
}

// mark returns a position; waitLine looks only at lines logged after it.
func (s *logSink) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}

func (s *logSink) find(from int, parts []string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
next:
	for _, l := range s.lines[min(from, len(s.lines)):] {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		return l, true
	}
	return "", false
}

func (s *logSink) count(from int, parts []string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
next:
	for _, l := range s.lines[min(from, len(s.lines)):] {
		for _, p := range parts {
			if !strings.Contains(l, p) {
				continue next
			}
		}
		n++
	}
	return n
}

func (s *logSink) dump() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// ---- in-process Manager --------------------------------------------------

type harnessOptions struct {
	helloTimeout time.Duration
	maxSessions  uint32
	pollMode     channel.PollMode
	maxBufBytes  uint64 // Config.MaxBufferBytes; 0 = default
	maxBuffers   int    // Config.MaxBuffers; 0 = default
	tenants      *tenant.Set
	// discoverBytes > 0 runs the cache service on a 1 MiB RAM tier of
	// 4 KiB chunks with discovery indexes of that budget (--discover-bytes).
	discoverBytes uint64
}

// harness is an in-process Manager: session.Table + channel.Dispatcher
// (running) + bootstrap.Server (serving) on a socket in a fresh directory.
type harness struct {
	m     *manager.Manager
	path  string
	dir   string
	table *session.Table
	disp  *channel.Dispatcher
	srv   *bootstrap.Server
	logs  *logSink

	closeOnce sync.Once
	serveErr  chan error
}

func newHarness(t *testing.T, opts ...func(*harnessOptions)) *harness {
	t.Helper()
	o := harnessOptions{helloTimeout: 2 * time.Second, maxSessions: 8, pollMode: channel.PollPark}
	for _, f := range opts {
		f(&o)
	}
	// Not t.TempDir: sentence-long test names overflow sun_path (108 bytes).
	dir, err := os.MkdirTemp("", "okvb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	logs := &logSink{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	path := filepath.Join(dir, "m.sock")
	spec := manager.Spec{Epoch: testEpoch, Logger: log,
		Session: session.Spec{MaxSessions: o.maxSessions, DescCapacity: 64 << 10},
		Channel: channel.Spec{MaxSessions: o.maxSessions, PollMode: o.pollMode, SpinWindow: 20 * time.Microsecond},
		Bootstrap: bootstrap.Config{Path: path, ServiceID: [16]byte{1, 2, 3}, HelloTimeout: o.helloTimeout,
			MaxBufferBytes: o.maxBufBytes, MaxBuffers: o.maxBuffers, Version: harnessVersion},
		Tenants: o.tenants}
	if o.discoverBytes > 0 {
		spec.Cache = &cache.Spec{CopyWorkers: 1, Tiers: tier.Spec{RAM: ram.Spec{CapacityBytes: 1 << 20, ChunkBytes: 4096}}}
		spec.Discover = discover.Spec{Bytes: o.discoverBytes}
	}
	m, err := manager.New(spec)
	if errors.Is(err, native.ErrNoCgo) {
		t.Skip("built without cgo: the channel dispatcher needs the C poll loop")
	}
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{m: m, path: path, dir: dir, table: m.Table, disp: m.Dispatcher, srv: m.Server, logs: logs,
		serveErr: make(chan error, 1)}
	go func() { h.serveErr <- m.Serve() }() // the Manager's Serve: it marks the Manager serving
	t.Cleanup(func() {
		// Client cleanups ran first (LIFO): the idle invariant must hold
		// before the Manager shuts down (docs/design.md §6 rule 8).
		h.waitSessions(t, 0)
		h.close(t)
		if t.Failed() {
			t.Logf("Manager log:\n%s", logs.dump())
		}
	})
	return h
}

// close shuts the Manager down as cmd/orbitkv-manager does: server first
// (sessions torn down), then the dispatcher. Idempotent.
func (h *harness) close(t *testing.T) {
	t.Helper()
	h.closeOnce.Do(func() {
		h.srv.Close()
		select {
		case err := <-h.serveErr:
			if err != nil {
				t.Errorf("Serve returned %v after Close, want nil", err)
			}
		case <-time.After(waitFor):
			t.Error("Serve did not return after Close")
		}
		if n := h.table.Len(); n != 0 {
			t.Errorf("after Server.Close %d sessions are live, want 0", n)
		}
		h.disp.Stop()
		<-h.disp.Done()
		h.m.Free() // the dispatcher's poll loop and doorbell, and the operator socket
		if _, err := os.Lstat(h.path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket path still there after Close: %v", err)
		}
	})
}

// waitSessions waits until the table holds exactly n live sessions.
func (h *harness) waitSessions(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for h.table.Len() != n {
		if time.Now().After(deadline) {
			t.Fatalf("table holds %d sessions, want %d (idle invariant)", h.table.Len(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitLine waits for a log line logged after mark that contains every part.
func (h *harness) waitLine(t *testing.T, mark int, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		if l, ok := h.logs.find(mark, parts); ok {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line containing %q; log since mark:\n%s", parts, h.logs.dump())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitLines waits for n log lines logged after mark that contain every part.
func (h *harness) waitLines(t *testing.T, mark, n int, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for h.logs.count(mark, parts) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d log lines containing %q, want %d; log:\n%s", h.logs.count(mark, parts), parts, n, h.logs.dump())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// ---- raw bootstrap client ----------------------------------------------

func validHello() abi.Hello {
	h := abi.Hello{Magic: abi.BootstrapMagic, ProtocolVersion: abi.BootstrapVersion, ABIVersion: abi.Version,
		PID: uint32(os.Getpid()), Role: abi.RoleTool}
	copy(h.InstanceID[:], "bootstrap-test")
	return h
}

// dial connects to the socket; the connection is closed at cleanup.
func dial(t *testing.T, path string) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(waitFor))
	return c
}

// harnessVersion is the Manager version the harness announces; every OK
// reply must carry it as its one extension record.
const harnessVersion = "harness-test 1.0"

// readReply reads the 208-byte hello reply, its extension records (checked:
// exactly the OKV_BOOT_EXT_MANAGER_VERSION record of harnessVersion) and the
// fds that came with it.
func readReply(c *net.UnixConn) (abi.HelloReply, []*os.File, error) {
	var r abi.HelloReply
	var files []*os.File
	buf := make([]byte, abi.HelloReplySize)
	oob := make([]byte, unix.CmsgSpace(4*8))
	got := 0
	for got < len(buf) {
		n, oobn, _, _, err := c.ReadMsgUnix(buf[got:], oob)
		got += n
		if oobn > 0 {
			msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
			if perr != nil {
				return r, files, perr
			}
			for i := range msgs {
				fds, perr := unix.ParseUnixRights(&msgs[i])
				if perr != nil {
					return r, files, perr
				}
				for _, fd := range fds {
					files = append(files, os.NewFile(uintptr(fd), fmt.Sprintf("reply-fd-%d", len(files))))
				}
			}
		}
		if err != nil {
			return r, files, fmt.Errorf("reply: read %d of %d bytes: %w", got, len(buf), err)
		}
		if n == 0 {
			return r, files, fmt.Errorf("reply: read %d of %d bytes: %w", got, len(buf), io.ErrUnexpectedEOF)
		}
	}
	le := binary.LittleEndian
	r.Magic = le.Uint32(buf[0:])
	r.ProtocolVersion = le.Uint16(buf[4:])
	r.Status = abi.BootStatus(le.Uint16(buf[6:]))
	r.Epoch = le.Uint64(buf[8:])
	copy(r.ServiceID[:], buf[16:32])
	r.ClientToken = le.Uint64(buf[32:])
	r.InitialGeneration = le.Uint64(buf[40:])
	r.SlotIndex = le.Uint32(buf[48:])
	r.SlotBytes = le.Uint32(buf[52:])
	r.DescOffset = le.Uint32(buf[56:])
	r.DescCapacity = le.Uint32(buf[60:])
	r.MaxFrameBody = le.Uint32(buf[64:])
	r.ManagerPID = le.Uint32(buf[68:])
	r.MaxSessions = le.Uint32(buf[72:])
	r.ExtBytes = le.Uint16(buf[76:])
	r.ExtFDs = le.Uint16(buf[78:])
	copy(r.Error[:], buf[80:])
	if !bytes.Equal(r.AppendTo(nil), buf) {
		return r, files, errors.New("reply: decode/encode round trip differs")
	}
	if r.Status != abi.BootOK {
		if r.ExtBytes != 0 || r.ExtFDs != 0 {
			return r, files, fmt.Errorf("refused reply announces %d extension bytes and %d fds", r.ExtBytes, r.ExtFDs)
		}
		return r, files, nil
	}
	ext := make([]byte, r.ExtBytes)
	if _, err := io.ReadFull(c, ext); err != nil {
		return r, files, fmt.Errorf("reply extensions: %w", err)
	}
	want := abi.AppendBootExt(nil, abi.BootExtManagerVersion, 0, []byte(harnessVersion))
	if r.ExtFDs != 0 || !bytes.Equal(ext, want) {
		return r, files, fmt.Errorf("reply extensions %x (%d fds), want the manager_version record %x", ext, r.ExtFDs, want)
	}
	return r, files, nil
}

func replyError(r abi.HelloReply) string {
	b := r.Error[:]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// expectClosed asserts the Manager closed c: a read ends with EOF (or a
// reset, when the Manager left bytes of ours unread).
func expectClosed(t *testing.T, c *net.UnixConn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitFor))
	var b [256]byte
	for {
		n, err := c.Read(b[:])
		if n > 0 && err == nil {
			continue // e.g. a frame sent before the close
		}
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return
		}
		t.Fatalf("connection not closed by the Manager: read %d bytes, err %v", n, err)
	}
}

// rawClient is a session driven byte by byte from Go: the hello, the
// mapped slot and doorbell, requests written into the slot, the doorbell
// rung as native/src/channel.c okvi_doorbell_ring does, and lifecycle
// frames written with gocore/lifecycle.
type rawClient struct {
	c        *net.UnixConn
	reply    abi.HelloReply
	files    []*os.File // slot memfd, eventfd, doorbell memfd
	slot, db []byte
	nextGen  uint64
	nextID   uint64
	closed   bool
}

// connect runs a successful handshake and maps the slot and the doorbell.
func connect(t *testing.T, path string) *rawClient {
	t.Helper()
	c := dial(t, path)
	if _, err := c.Write(validHello().AppendTo(nil)); err != nil {
		t.Fatalf("write hello: %v", err)
	}
	r, files, err := readReply(c)
	rc := &rawClient{c: c, reply: r, files: files}
	t.Cleanup(rc.close)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != abi.BootOK || len(files) != 3 {
		t.Fatalf("hello refused: status %d, %d fds, error %q", r.Status, len(files), replyError(r))
	}
	if r.Epoch != testEpoch || r.MaxFrameBody != abi.MaxFrameBody || r.DescOffset != abi.SlotDescOffset ||
		r.SlotBytes != abi.SlotDescOffset+r.DescCapacity || r.InitialGeneration&1 != 1 || r.ManagerPID != uint32(os.Getpid()) {
		t.Fatalf("reply fields wrong: %+v", r)
	}
	if seals, err := unix.FcntlInt(files[0].Fd(), unix.F_GET_SEALS, 0); err != nil ||
		seals&(unix.F_SEAL_GROW|unix.F_SEAL_SHRINK) != unix.F_SEAL_GROW|unix.F_SEAL_SHRINK {
		t.Fatalf("slot memfd seals %#x (%v), want grow and shrink sealed", seals, err)
	}
	rc.slot, err = unix.Mmap(int(files[0].Fd()), 0, int(r.SlotBytes), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap slot: %v", err)
	}
	rc.db, err = unix.Mmap(int(files[2].Fd()), 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap doorbell: %v", err)
	}
	le := binary.LittleEndian
	if le.Uint32(rc.slot[0:]) != abi.SlotMagic || le.Uint32(rc.slot[12:]) != r.SlotIndex ||
		le.Uint64(rc.slot[24:]) != testEpoch || le.Uint64(rc.slot[32:]) != r.InitialGeneration {
		t.Fatalf("slot header disagrees with the reply: %x", rc.slot[:64])
	}
	if le.Uint32(rc.db[0:]) != abi.DoorbellMagic || le.Uint64(rc.db[16:]) != testEpoch {
		t.Fatalf("doorbell header wrong: %x", rc.db[:64])
	}
	rc.nextGen = r.InitialGeneration
	return rc
}

func (rc *rawClient) close() {
	if rc.closed {
		return
	}
	rc.closed = true
	if rc.slot != nil {
		unix.Munmap(rc.slot)
	}
	if rc.db != nil {
		unix.Munmap(rc.db)
	}
	for _, f := range rc.files {
		f.Close()
	}
	rc.c.Close()
}

func word64(b []byte, off int) *uint64 { return (*uint64)(unsafe.Pointer(&b[off])) }
func word32(b []byte, off int) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

// Offsets of struct okv_slot and struct okv_doorbell (abi.h).
const (
	slotRequest      = 64
	slotResponse     = 128
	msgGeneration    = 32
	dbSeq            = 64
	dbServerParked   = 128
	dbSummary        = 192
	dbPending        = 256
	responseDeadline = waitFor
	futexWake        = 1 // FUTEX_WAKE (linux/futex.h); shared, not _PRIVATE: the word is in a memfd
)

// post writes m into the request line, every field but the generation
// first and the generation last (a sequentially consistent store, at least
// the release the protocol needs), then rings the doorbell.
func (rc *rawClient) post(m abi.Message) {
	b := m.AppendTo(make([]byte, 0, abi.MessageSize))
	line := rc.slot[slotRequest : slotRequest+abi.MessageSize]
	copy(line[:msgGeneration], b[:msgGeneration])
	copy(line[msgGeneration+8:], b[msgGeneration+8:])
	atomic.StoreUint64(word64(line, msgGeneration), m.Generation)
	rc.ring()
}

// ring is okvi_doorbell_ring: pending bit, then summary bit (both
// sequentially consistent RMWs), then if the Manager is parked bump seq and
// FUTEX_WAKE it.
func (rc *rawClient) ring() {
	idx := rc.reply.SlotIndex
	w, bit := idx/64, idx%64
	atomic.OrUint64(word64(rc.db, dbPending+8*int(w)), 1<<bit)
	atomic.OrUint64(word64(rc.db, dbSummary), 1<<w)
	if atomic.LoadUint32(word32(rc.db, dbServerParked)) != 0 {
		seq := word32(rc.db, dbSeq)
		atomic.AddUint32(seq, 1)
		unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(seq)), futexWake, 1, 0, 0, 0)
	}
}

// await polls the response line until its generation is gen, then copies
// the line out.
func (rc *rawClient) await(gen uint64) (abi.Message, error) {
	g := word64(rc.slot, slotResponse+msgGeneration)
	deadline := time.Now().Add(responseDeadline)
	for i := 0; atomic.LoadUint64(g) != gen; i++ {
		if i < 1000 {
			runtime.Gosched()
			continue
		}
		if time.Now().After(deadline) {
			return abi.Message{}, fmt.Errorf("no response generation %d within %v (line holds %d)", gen, responseDeadline, atomic.LoadUint64(g))
		}
		time.Sleep(50 * time.Microsecond)
	}
	return abi.DecodeMessage(append([]byte(nil), rc.slot[slotResponse:slotResponse+abi.MessageSize]...))
}

// request returns a valid request of code with the next generation.
func (rc *rawClient) request(code abi.Command, arg0 uint64) abi.Message {
	rc.nextID++
	m := abi.Message{Magic: abi.MsgMagic, ABIVersion: abi.Version, Code: uint16(code), RequestID: rc.nextID,
		Epoch: rc.reply.Epoch, Generation: rc.nextGen, Arg0: arg0}
	rc.nextGen += 2
	return m
}

// call posts m and waits for its response (generation m.Generation+1).
func (rc *rawClient) call(t *testing.T, m abi.Message) abi.Message {
	t.Helper()
	rc.post(m)
	r, err := rc.await(m.Generation + 1)
	if err != nil {
		t.Fatalf("slot %d: %v", rc.reply.SlotIndex, err)
	}
	if r.Magic != abi.MsgMagic || r.ABIVersion != abi.Version || r.RequestID != m.RequestID ||
		r.Epoch != testEpoch || r.Reserved != 0 {
		t.Fatalf("slot %d: malformed response %+v to %+v", rc.reply.SlotIndex, r, m)
	}
	return r
}

// ping does one valid Ping and checks the echo.
func (rc *rawClient) ping(t *testing.T, v uint64) {
	t.Helper()
	r := rc.call(t, rc.request(abi.CmdPing, v))
	if abi.Status(r.Code) != abi.StatusOK || r.Arg0 != v {
		t.Fatalf("slot %d: ping %d answered %v arg0 %d", rc.reply.SlotIndex, v, abi.Status(r.Code), r.Arg0)
	}
}

// frame sends one lifecycle request and reads one frame back.
func (rc *rawClient) frame(t *testing.T, code lifecycle.Code, body proto.Message, files ...*os.File) lifecycle.Frame {
	t.Helper()
	if err := lifecycle.WriteFrame(rc.c, code, testEpoch, body, files); err != nil {
		t.Fatalf("write %v frame: %v", code, err)
	}
	return rc.readFrame(t)
}

func (rc *rawClient) readFrame(t *testing.T) lifecycle.Frame {
	t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(waitFor))
	f, err := lifecycle.ReadFrame(rc.c, testEpoch)
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// expectReply reads the reply of code into m (fails on an error frame).
func (rc *rawClient) expectReply(t *testing.T, f lifecycle.Frame, code lifecycle.Code, m proto.Message) {
	t.Helper()
	if f.Header.Code == lifecycle.CodeError {
		var e lifecyclepb.Error
		f.Unmarshal(&e)
		t.Fatalf("%v answered with an error frame: %v", code, &e)
	}
	if f.Header.Code != code.Reply() {
		t.Fatalf("got frame %v, want %v", f.Header.Code, code.Reply())
	}
	if err := f.Unmarshal(m); err != nil {
		t.Fatal(err)
	}
}

// health asserts the connection still answers a Health frame.
func (rc *rawClient) health(t *testing.T) *lifecyclepb.HealthReply {
	t.Helper()
	var h lifecyclepb.HealthReply
	rc.expectReply(t, rc.frame(t, lifecycle.CodeHealth, &lifecyclepb.HealthRequest{}), lifecycle.CodeHealth, &h)
	if h.GetEpoch() != testEpoch || h.GetAbiVersion() != abi.Version || h.GetManagerPid() != uint32(os.Getpid()) {
		t.Fatalf("health reply %v", &h)
	}
	return &h
}

// register sends RegisterInstance with the session's token.
func (rc *rawClient) register(t *testing.T, id string) {
	t.Helper()
	var r lifecyclepb.RegisterInstanceReply
	rc.expectReply(t, rc.frame(t, lifecycle.CodeRegisterInstance,
		&lifecyclepb.RegisterInstanceRequest{ClientToken: rc.reply.ClientToken, InstanceId: id}),
		lifecycle.CodeRegisterInstance, &r)
	if r.GetSlotIndex() != rc.reply.SlotIndex {
		t.Fatalf("RegisterInstance reply slot %d, want %d", r.GetSlotIndex(), rc.reply.SlotIndex)
	}
}
