package bootstrap_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/lifecycle"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

func header(code lifecycle.Code, epoch uint64, length uint32) []byte {
	return lifecycle.NewHeader(code, epoch, length).AppendTo(nil)
}

// A malformed lifecycle frame closes the connection (and so the session)
// with a log line naming the field; another session keeps working.
func TestMalformedFrameClosesTheConnection(t *testing.T) {
	h := newHarness(t)
	other := connect(t, h.path)
	tests := []struct {
		name      string
		send      []byte
		halfClose bool     // shut our write side after sending (truncation)
		log       []string // parts of the log line
	}{
		{name: "an oversized body length is refused before reading it",
			send: header(lifecycle.CodeHealth, testEpoch, lifecycle.MaxBody+1),
			log:  []string{"frame malformed", "body length 16777217 exceeds limit 16777216"}},
		{name: "a header cut short by close is truncated",
			send: header(lifecycle.CodeHealth, testEpoch, 0)[:10], halfClose: true,
			log: []string{"frame malformed", "header ends after 10 of 24"}},
		{name: "a body cut short by close is truncated",
			send: append(header(lifecycle.CodeHealth, testEpoch, 100), make([]byte, 20)...), halfClose: true,
			log: []string{"frame malformed", "body ends after 20 of 100"}},
		{name: "an unknown frame code is refused naming the code",
			send: header(lifecycle.Code(9), testEpoch, 0),
			log:  []string{"frame malformed", "frame code 0x0009 unknown"}},
		{name: "a reply code sent by the client is refused naming the code",
			send: header(lifecycle.CodeHealth.Reply(), testEpoch, 0),
			log:  []string{"frame malformed", "field=code", "only the Manager sends"}},
		{name: "an error frame sent by the client is refused naming the code",
			send: header(lifecycle.CodeError, testEpoch, 0),
			log:  []string{"frame malformed", "field=code", "only the Manager sends"}},
		{name: "a stale epoch is refused naming the epoch",
			send: header(lifecycle.CodeHealth, testEpoch+2, 0),
			log:  []string{"frame malformed", "frame epoch", "differs from Manager epoch"}},
		{name: "a wrong frame magic is refused naming the magic",
			send: func() []byte {
				b := header(lifecycle.CodeHealth, testEpoch, 0)
				b[0] ^= 0xff
				return b
			}(),
			log: []string{"frame malformed", "frame magic"}},
		{name: "a wrong frame version is refused naming the version",
			send: func() []byte {
				hd := lifecycle.NewHeader(lifecycle.CodeHealth, testEpoch, 0)
				hd.Version = 1
				return hd.AppendTo(nil)
			}(),
			log: []string{"frame malformed", "frame version 1"}},
		{name: "nonzero reserved in the header is refused naming it",
			send: func() []byte {
				hd := lifecycle.NewHeader(lifecycle.CodeHealth, testEpoch, 0)
				hd.Reserved = 1
				return hd.AppendTo(nil)
			}(),
			log: []string{"frame malformed", "frame reserved"}},
		{name: "an undecodable protobuf body is refused naming the message",
			send: append(header(lifecycle.CodeHealth, testEpoch, 3), 0xff, 0xff, 0xff),
			log:  []string{"frame malformed", "not a valid orbitkv.lifecycle.v1.HealthRequest"}},
		{name: "an undecodable RegisterInstance body is refused naming the message",
			send: append(header(lifecycle.CodeRegisterInstance, testEpoch, 2), 0x0a, 0x05),
			log:  []string{"frame malformed", "RegisterInstanceRequest"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := connect(t, h.path)
			rc.health(t) // the session is fully up
			mark := h.logs.mark()
			if _, err := rc.c.Write(tc.send); err != nil {
				t.Fatal(err)
			}
			if tc.halfClose {
				rc.c.CloseWrite()
			}
			expectClosed(t, rc.c)
			h.waitLine(t, mark, append([]string{"slot=" + itoa(rc.reply.SlotIndex)}, tc.log...)...)
			// Socket close tears the session down at once.
			h.waitSessions(t, 1)
			other.ping(t, 8)
			other.health(t)
		})
	}
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// newMemfd returns a memfd of size bytes sealed against shrinking (as
// okv_buffer_alloc makes them), closed at cleanup.
func newMemfd(t *testing.T, size int64) *os.File {
	t.Helper()
	f := newUnsealedMemfd(t, size)
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	return f
}

func newUnsealedMemfd(t *testing.T, size int64, name ...string) *os.File {
	t.Helper()
	n := "okv-test-buffer"
	if len(name) > 0 {
		n = name[0]
	}
	fd, err := unix.MemfdCreate(n, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), n)
	t.Cleanup(func() { f.Close() })
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	// Allocated, as okv_buffer_alloc's pre-fault leaves it: a sparse
	// buffer is refused.
	if size > 0 {
		if err := unix.Fallocate(fd, 0, 0, size); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func region(fdIndex uint32, bytes uint64) *lifecyclepb.BufferRegion {
	return &lifecyclepb.BufferRegion{FdIndex: fdIndex, Bytes: bytes, Layers: 2, PageBytes: 4096, PageCount: 16}
}

// An application error is answered with an error frame naming the field,
// logged, and the connection stays usable.
func TestApplicationErrorKeepsTheConnection(t *testing.T) {
	h := newHarness(t)
	const okBytes = 2 * 4096 * 16
	tests := []struct {
		name     string
		register bool // RegisterInstance first
		code     lifecycle.Code
		body     func(rc *rawClient) proto.Message
		files    int   // memfds to attach
		unsealed bool  // attach memfds without F_SEAL_SHRINK
		fileSize int64 // bytes of each
		field    string
	}{
		{name: "RegisterInstance with a wrong client token names client_token",
			code: lifecycle.CodeRegisterInstance,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.RegisterInstanceRequest{ClientToken: rc.reply.ClientToken ^ 1, InstanceId: "x"}
			},
			field: "client_token"},
		{name: "RegisterInstance with an overlong instance id names instance_id",
			code: lifecycle.CodeRegisterInstance,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.RegisterInstanceRequest{ClientToken: rc.reply.ClientToken, InstanceId: strings.Repeat("i", 257)}
			},
			field: "instance_id"},
		{name: "RegisterBuffers before RegisterInstance names code",
			code: lifecycle.CodeRegisterBuffers,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{region(0, okBytes)}}
			},
			files: 1, fileSize: okBytes, field: "code"},
		{name: "RegisterBuffers with a wrong client token names client_token", register: true,
			code: lifecycle.CodeRegisterBuffers,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.RegisterBuffersRequest{ClientToken: 1, Regions: []*lifecyclepb.BufferRegion{region(0, okBytes)}}
			},
			files: 1, fileSize: okBytes, field: "client_token"},
		{name: "RegisterBuffers with fd_index out of range names regions[0].fd_index", register: true,
			code: lifecycle.CodeRegisterBuffers,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{region(1, okBytes)}}
			},
			files: 1, fileSize: okBytes, field: "regions[0].fd_index"},
		{name: "RegisterBuffers with bytes beyond the memfd size names regions[1].bytes", register: true,
			code: lifecycle.CodeRegisterBuffers,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken,
					Regions: []*lifecyclepb.BufferRegion{region(0, okBytes), region(1, 2*okBytes)}}
			},
			files: 2, fileSize: okBytes, field: "regions[1].bytes"},
		{name: "RegisterBuffers with bytes below layers*page_bytes*page_count names regions[0].bytes", register: true,
			code: lifecycle.CodeRegisterBuffers,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{region(0, okBytes-1)}}
			},
			files: 1, fileSize: okBytes, field: "regions[0].bytes"},
		{name: "RegisterBuffers with no regions names regions", register: true,
			code: lifecycle.CodeRegisterBuffers,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken}
			},
			field: "regions"},
		{name: "RegisterBuffers with zero layers names regions[0].layers", register: true,
			code: lifecycle.CodeRegisterBuffers,
			body: func(rc *rawClient) proto.Message {
				r := region(0, okBytes)
				r.Layers = 0
				return &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{r}}
			},
			files: 1, fileSize: okBytes, field: "regions[0].layers"},
		{name: "RegisterBuffers with a memfd that can shrink names regions[0].fd_index", register: true,
			code: lifecycle.CodeRegisterBuffers,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{region(0, okBytes)}}
			},
			files: 1, fileSize: okBytes, unsealed: true, field: "regions[0].fd_index"},
		{name: "Health carrying an fd names fds",
			code:  lifecycle.CodeHealth,
			body:  func(rc *rawClient) proto.Message { return &lifecyclepb.HealthRequest{} },
			files: 1, fileSize: 4096, field: "fds"},
		{name: "Unregister with a wrong client token names client_token",
			code: lifecycle.CodeUnregister,
			body: func(rc *rawClient) proto.Message {
				return &lifecyclepb.UnregisterRequest{ClientToken: rc.reply.ClientToken + 1}
			},
			field: "client_token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := connect(t, h.path)
			if tc.register {
				rc.register(t, "engine")
			}
			var files []*os.File
			for range tc.files {
				if tc.unsealed {
					files = append(files, newUnsealedMemfd(t, tc.fileSize))
				} else {
					files = append(files, newMemfd(t, tc.fileSize))
				}
			}
			mark := h.logs.mark()
			f := rc.frame(t, tc.code, tc.body(rc), files...)
			if f.Header.Code != lifecycle.CodeError {
				t.Fatalf("got %v, want an error frame", f.Header.Code)
			}
			var e lifecyclepb.Error
			if err := f.Unmarshal(&e); err != nil {
				t.Fatal(err)
			}
			if e.GetField() != tc.field || e.GetStatus() != uint32(abi.StatusInvalid) || e.GetMessage() == "" {
				t.Errorf("error frame %v, want field %q status Invalid with a message", &e, tc.field)
			}
			h.waitLine(t, mark, "lifecycle request refused", "field="+tc.field)
			rc.health(t) // the connection stays usable
			rc.ping(t, 4)
			for _, s := range h.table.Sessions() {
				if s.Index == rc.reply.SlotIndex && s.BufferCount() != 0 {
					t.Errorf("a refused RegisterBuffers left %d buffers", s.BufferCount())
				}
			}
		})
		h.waitSessions(t, 0)
	}
}

func TestRegisterBuffersWithAMemfd(t *testing.T) {
	h := newHarness(t)
	rc := connect(t, h.path)
	rc.register(t, "engine-7")
	const regionBytes = 2 * 4096 * 16
	mfd := newMemfd(t, 4*regionBytes)
	req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{
		region(0, regionBytes),
		{FdIndex: 0, Offset: regionBytes, Bytes: 3 * regionBytes, Layers: 2, PageBytes: 4096, PageCount: 48},
	}}
	var r lifecyclepb.RegisterBuffersReply
	rc.expectReply(t, rc.frame(t, lifecycle.CodeRegisterBuffers, req, mfd), lifecycle.CodeRegisterBuffers, &r)
	if r.GetRegions() != 2 || r.GetTotalBytes() != 4*regionBytes {
		t.Fatalf("reply %v, want 2 regions of %d bytes in total", &r, 4*regionBytes)
	}
	sessions := h.table.Sessions()
	if len(sessions) != 1 || sessions[0].BufferCount() != 2 || !sessions[0].Registered() ||
		sessions[0].InstanceID() != "engine-7" || sessions[0].Peer.UID != uint32(os.Getuid()) {
		t.Fatalf("session state after RegisterBuffers: %+v", sessions)
	}
	// The Manager holds its own duplicate: closing ours leaves the buffer.
	mfd.Close()
	rc.health(t)
	if h.table.Sessions()[0].BufferCount() != 2 {
		t.Fatal("buffers lost when the client closed its fd")
	}
}

// A session's Health reports the Manager's liveness and its own figures,
// never the Manager-wide ones, which would leak other tenants' load: b's
// traffic does not show in a's Health, and the session count is not given away.
func TestHealthReportsTheManagersLivenessAndTheSessionsOwnFigures(t *testing.T) {
	h := newHarness(t)
	a, b := connect(t, h.path), connect(t, h.path)
	for i := uint64(1); i <= 5; i++ {
		b.ping(t, i)
	}
	a.ping(t, 1)
	hr := a.health(t)
	if hr.GetSessions() != 0 || hr.GetStatus() != "serving" || len(hr.GetServiceId()) != 16 || hr.GetServiceId()[0] != 1 {
		t.Fatalf("health %v: want serving, the service id, no session count", hr)
	}
	if hr.GetRequests() != 1 || hr.GetBlocks() != 0 || hr.GetLookups() != 0 {
		t.Fatalf("a's health counts %d requests, %d blocks, %d lookups; want its own 1 request only", hr.GetRequests(), hr.GetBlocks(), hr.GetLookups())
	}
	if got := b.health(t).GetRequests(); got != 5 {
		t.Fatalf("b's health counts %d requests, want its own 5", got)
	}
	b.close()
	h.waitSessions(t, 1)
	if hr := a.health(t); hr.GetSessions() != 0 || hr.GetStatus() != "serving" {
		t.Fatalf("health after b closed: %v", hr)
	}
}

func TestWatchSessionReportsActiveThenClosing(t *testing.T) {
	h := newHarness(t)
	rc := connect(t, h.path)
	rc.register(t, "watcher")
	var w lifecyclepb.WatchSessionReply
	rc.expectReply(t, rc.frame(t, lifecycle.CodeWatchSession, &lifecyclepb.WatchSessionRequest{}), lifecycle.CodeWatchSession, &w)
	if w.GetState() != "active" || w.GetSlotIndex() != rc.reply.SlotIndex || w.GetEpoch() != testEpoch {
		t.Fatalf("watch reply %v, want active for slot %d", &w, rc.reply.SlotIndex)
	}
	unwatched := connect(t, h.path)
	h.close(t) // Server.Close: watchers hear "closing", every session ends
	rc.expectReply(t, rc.readFrame(t), lifecycle.CodeWatchSession, &w)
	if w.GetState() != "closing" || w.GetReason() == "" || w.GetSlotIndex() != rc.reply.SlotIndex {
		t.Fatalf("watch event %v, want closing with a reason", &w)
	}
	expectClosed(t, rc.c)
	expectClosed(t, unwatched.c) // no frame for a session that did not watch
}

func TestUnregisterClosesTheSession(t *testing.T) {
	h := newHarness(t)
	other := connect(t, h.path)
	rc := connect(t, h.path)
	rc.register(t, "leaving")
	mark := h.logs.mark()
	var r lifecyclepb.UnregisterReply
	rc.expectReply(t, rc.frame(t, lifecycle.CodeUnregister, &lifecyclepb.UnregisterRequest{ClientToken: rc.reply.ClientToken}),
		lifecycle.CodeUnregister, &r)
	expectClosed(t, rc.c)
	h.waitSessions(t, 1)
	h.waitLine(t, mark, "session unregistered", "slot="+itoa(rc.reply.SlotIndex))
	h.waitLine(t, mark, "session closed", "instance=leaving")
	other.ping(t, 1)
}

// Socket close is process death: the session is torn down at once, with no
// Unregister and while the dispatcher is parked.
func TestSocketCloseTearsTheSessionDownAtOnce(t *testing.T) {
	h := newHarness(t)
	clients := []*rawClient{connect(t, h.path), connect(t, h.path), connect(t, h.path)}
	for i, rc := range clients {
		rc.register(t, "engine")
		rc.ping(t, uint64(i))
	}
	for i, rc := range clients {
		start := time.Now()
		rc.close()
		h.waitSessions(t, len(clients)-1-i)
		if took := time.Since(start); took > time.Second {
			t.Errorf("teardown of slot %d took %v", rc.reply.SlotIndex, took)
		}
		for _, left := range clients[i+1:] {
			left.ping(t, 100)
		}
	}
}

// Server.Close must finish even when a client stopped reading: its replies
// fill the socket, the connection's frame loop blocks in a write while
// holding the connection's write lock, and Close must still close it.
func TestServerCloseFinishesWhenAClientStopsReading(t *testing.T) {
	h := newHarness(t)
	rc := connect(t, h.path)
	var w lifecyclepb.WatchSessionReply
	rc.expectReply(t, rc.frame(t, lifecycle.CodeWatchSession, &lifecyclepb.WatchSessionRequest{}), lifecycle.CodeWatchSession, &w)
	// Send Health requests without reading any reply until our own writes
	// block: by then the Manager's replies have filled the socket.
	req := header(lifecycle.CodeHealth, testEpoch, 0)
	batch := make([]byte, 0, 4096*len(req))
	for range 4096 {
		batch = append(batch, req...)
	}
	rc.c.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	for {
		if _, err := rc.c.Write(batch); err != nil {
			break
		}
	}
	closed := make(chan struct{})
	go func() {
		h.close(t)
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(3 * time.Second):
		t.Errorf("Server.Close blocked for 3s behind a client that does not read its replies")
		rc.close() // unblocks the Manager's write so the test can end
		<-closed
	}
}

// The Manager's own memfds (the doorbell, this session's slot, another
// live session's slot passed on to this one) and write-sealed memfds are
// not engine buffers.
func TestRegisterBuffersRefusesTheManagersOwnMemfds(t *testing.T) {
	h := newHarness(t)
	rc := connect(t, h.path)
	rc.register(t, "engine")
	other := connect(t, h.path)
	other.register(t, "engine-2")
	writeSealed := newMemfd(t, 4096)
	if _, err := unix.FcntlInt(writeSealed.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		file *os.File
		size uint64
		want string
	}{
		{"the session slot", rc.files[0], uint64(len(rc.slot)), "own memfds"},
		{"the doorbell", rc.files[2], 4096, "own memfds"},
		{"another live session's slot", other.files[0], uint64(len(other.slot)), "own memfds"},
		{"a write-sealed memfd", writeSealed, 4096, "sealed against writes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken,
				Regions: []*lifecyclepb.BufferRegion{{FdIndex: 0, Bytes: c.size, Layers: 1, PageBytes: c.size, PageCount: 1}}}
			f := rc.frame(t, lifecycle.CodeRegisterBuffers, req, c.file)
			var e lifecyclepb.Error
			if f.Header.Code != lifecycle.CodeError || f.Unmarshal(&e) != nil {
				t.Fatalf("got %v, want an error frame", f.Header.Code)
			}
			if e.GetField() != "regions[0].fd_index" || !strings.Contains(e.GetMessage(), c.want) {
				t.Fatalf("error %v, want regions[0].fd_index mentioning %q", &e, c.want)
			}
		})
	}
}

// A hugetlbfs memfd is refused (a punched hole refilled from an empty
// hugepage pool would SIGBUS a copy worker).
func TestRegisterBuffersRefusesHugetlbMemfds(t *testing.T) {
	fd, err := unix.MemfdCreate("okv-test-huge", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_HUGETLB)
	if err != nil {
		t.Skipf("no hugetlb memfd on this host: %v", err)
	}
	f := os.NewFile(uintptr(fd), "okv-test-huge")
	defer f.Close()
	const size = 2 << 20
	if err := f.Truncate(size); err != nil {
		t.Skipf("cannot size a hugetlb memfd: %v", err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Skipf("cannot seal a hugetlb memfd: %v", err)
	}
	h := newHarness(t)
	rc := connect(t, h.path)
	rc.register(t, "engine")
	req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken,
		Regions: []*lifecyclepb.BufferRegion{{FdIndex: 0, Bytes: size, Layers: 1, PageBytes: size, PageCount: 1}}}
	fr := rc.frame(t, lifecycle.CodeRegisterBuffers, req, f)
	var e lifecyclepb.Error
	if fr.Header.Code != lifecycle.CodeError || fr.Unmarshal(&e) != nil {
		t.Fatalf("got %v, want an error frame", fr.Header.Code)
	}
	if e.GetField() != "regions[0].fd_index" || !strings.Contains(e.GetMessage(), "hugetlbfs") {
		t.Fatalf("error %v, want regions[0].fd_index naming hugetlbfs", &e)
	}
}

// The Manager-wide budget of mapped buffer bytes holds across sessions and
// is returned when a session closes.
func TestRegisteredBufferBytesAreBoundedAcrossSessions(t *testing.T) {
	const regionBytes = 2 * 4096 * 16
	h := newHarness(t, func(o *harnessOptions) { o.maxBufBytes = 3 * regionBytes })
	register := func(rc *rawClient) *lifecycle.Frame {
		req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken,
			Regions: []*lifecyclepb.BufferRegion{region(0, regionBytes), region(1, regionBytes)}}
		f := rc.frame(t, lifecycle.CodeRegisterBuffers, req, newMemfd(t, regionBytes), newMemfd(t, regionBytes))
		return &f
	}
	a := connect(t, h.path)
	a.register(t, "a")
	if f := register(a); f.Header.Code == lifecycle.CodeError {
		t.Fatal("first session's 2 regions refused under a 3-region budget")
	}
	b := connect(t, h.path)
	b.register(t, "b")
	f := register(b)
	var e lifecyclepb.Error
	if f.Header.Code != lifecycle.CodeError || f.Unmarshal(&e) != nil || e.GetField() != "regions" || !strings.Contains(e.GetMessage(), "Manager-wide") {
		t.Fatalf("second session's 2 regions: %v %v, want an error naming the Manager-wide limit", f.Header.Code, &e)
	}
	a.close()
	h.waitSessions(t, 1)
	if f := register(b); f.Header.Code == lifecycle.CodeError {
		t.Fatal("budget not returned when the first session closed")
	}
}

// The Manager-wide count of registered buffers (each a descriptor and a
// mapping of the Manager's) holds across sessions, however small each
// region: regions of one small memfd registered over and over cannot run
// the Manager out of descriptors. The count is returned when a session
// closes.
func TestRegisteredBuffersAreCountedAcrossSessions(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.maxBuffers = 6 })
	register := func(rc *rawClient) *lifecycle.Frame {
		regions := make([]*lifecyclepb.BufferRegion, 4)
		const regionBytes = 2 * 4096 * 16
		for i := range regions {
			regions[i] = region(0, regionBytes)
		}
		req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: regions}
		f := rc.frame(t, lifecycle.CodeRegisterBuffers, req, newMemfd(t, regionBytes))
		return &f
	}
	a := connect(t, h.path)
	a.register(t, "a")
	if f := register(a); f.Header.Code == lifecycle.CodeError {
		t.Fatal("first session's 4 regions refused under a 6-buffer limit")
	}
	b := connect(t, h.path)
	b.register(t, "b")
	f := register(b)
	var e lifecyclepb.Error
	if f.Header.Code != lifecycle.CodeError || f.Unmarshal(&e) != nil || e.GetField() != "regions" || !strings.Contains(e.GetMessage(), "the Manager's limit of 6") {
		t.Fatalf("second session's 4 regions: %v %v, want an error naming the limit of 6 buffers", f.Header.Code, &e)
	}
	a.close()
	h.waitSessions(t, 1)
	if f := register(b); f.Header.Code == lifecycle.CodeError {
		t.Fatal("buffers not returned when the first session closed")
	}
}

// A tenant registers at most its share of the buffers (half with two
// tenants), counting the fds a frame brings while it is handled, so one
// tenant cannot take the descriptors and mappings every other tenant's
// buffers need.
func TestATenantRegistersAtMostItsShareOfBuffers(t *testing.T) {
	ts, err := tenant.Parse([]string{"self=uid:" + strconv.Itoa(os.Geteuid()), "other=uid:4242"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(o *harnessOptions) { o.maxBuffers = 10; o.tenants = ts })
	const regionBytes = 2 * 4096 * 16
	a := connect(t, h.path)
	a.register(t, "a")
	register := func(n int) (*lifecycle.Frame, *lifecyclepb.Error) {
		regions := make([]*lifecyclepb.BufferRegion, n)
		for i := range regions {
			regions[i] = region(0, regionBytes)
		}
		f := a.frame(t, lifecycle.CodeRegisterBuffers, &lifecyclepb.RegisterBuffersRequest{ClientToken: a.reply.ClientToken, Regions: regions},
			newMemfd(t, regionBytes))
		var e lifecyclepb.Error
		if f.Header.Code == lifecycle.CodeError {
			f.Unmarshal(&e)
		}
		return &f, &e
	}
	// Share 5, filled exactly: the frames' fds are counted while they are
	// read, and their regions take that count over.
	if f, e := register(4); f.Header.Code == lifecycle.CodeError {
		t.Fatalf("4 buffers of a share of 5 refused: %v", e)
	}
	if f, e := register(1); f.Header.Code == lifecycle.CodeError {
		t.Fatalf("the fifth buffer of a share of 5 refused: %v", e)
	}
	if f, e := register(1); f.Header.Code != lifecycle.CodeError || !strings.Contains(e.GetMessage(), `tenant "self" holds 5 buffers, its share of the Manager's 10`) {
		t.Fatalf("a sixth buffer: %v %v, want the tenant's share named", f.Header.Code, e)
	}
}

// A frame's fds count as buffers from the moment they arrive: fds past
// the Manager's buffer limit are closed as they come, and the frame,
// read whole, is answered Unadmitted naming the limit (field "fds"),
// whatever its code; the connection stays usable.
func TestAFramesFdsCountAgainstTheBufferLimit(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.maxBuffers = 4 })
	a := connect(t, h.path)
	a.register(t, "a")
	files := make([]*os.File, 6)
	for i := range files {
		files[i] = newMemfd(t, 4096)
	}
	f := a.frame(t, lifecycle.CodeHealth, &lifecyclepb.HealthRequest{}, files...)
	var e lifecyclepb.Error
	if f.Header.Code != lifecycle.CodeError || f.Unmarshal(&e) != nil || e.GetField() != "fds" || !strings.Contains(e.GetMessage(), "the Manager's limit of 4") {
		t.Fatalf("a frame with 6 fds past a limit of 4 buffers: %v %v, want an error naming the limit", f.Header.Code, &e)
	}
	if f := a.frame(t, lifecycle.CodeHealth, &lifecyclepb.HealthRequest{}); f.Header.Code != lifecycle.CodeHealth.Reply() {
		t.Fatalf("the next frame on the connection: %v, want a Health reply", f.Header.Code)
	}
}

// A frame that does not arrive whole within the hello timeout of its
// first byte, in its header or in its body, ends the connection (its fds
// and the bytes it sent are freed), and a body past the clients' limit is
// refused before it is read.
func TestAStalledOrOversizedFrameBodyEndsTheConnection(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.helloTimeout = 200 * time.Millisecond })
	for _, tc := range []struct {
		name   string
		length uint32
		sent   int // header bytes sent
		want   string
	}{
		{"a header begun and never finished", 1000, 1, "i/o timeout"},
		{"a body announced and never sent", 1000, lifecycle.HeaderSize, "i/o timeout"},
		{"a body past the limit", 1 << 20, lifecycle.HeaderSize, "exceeds this reader's limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := connect(t, h.path)
			a.register(t, "a")
			hdr := lifecycle.NewHeader(lifecycle.CodeHealth, testEpoch, tc.length).AppendTo(nil)[:tc.sent]
			if _, _, err := a.c.WriteMsgUnix(hdr, unix.UnixRights(int(newMemfd(t, 4096).Fd())), nil); err != nil {
				t.Fatal(err)
			}
			a.c.SetReadDeadline(time.Now().Add(waitFor))
			var b [1]byte
			if _, err := a.c.Read(b[:]); err == nil {
				t.Fatal("the Manager answered a frame whose body never came")
			}
			h.waitSessions(t, 0)
			if _, ok := h.logs.find(0, []string{tc.want}); !ok {
				t.Fatalf("no log line says %q", tc.want)
			}
		})
	}
}

// cudaDoubleGPU opens the CUDA copy backend over the fault-injecting driver
// double CMake builds (build/native/libokv_cuda_double.so), whose "device
// memory" is host memory of this process and whose VMM fd is any memfd,
// skipping with the reason when it is not built.
func cudaDoubleGPU(t *testing.T) (*native.CUDA, [16]byte) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	lib := filepath.Join(filepath.Dir(file), "../../build/native/libokv_cuda_double.so")
	if _, err := os.Stat(lib); err != nil {
		t.Skipf("the CUDA driver double is not built (make native builds it): %v", err)
	}
	cu, err := native.OpenCUDA(lib)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cu.Close)
	uuid, err := cu.DeviceUUID(0)
	if err != nil {
		t.Fatal(err)
	}
	return cu, uuid
}

// TestRegisterBuffersWithCUDAMemory: CUDA regions (a legacy IPC handle, a
// VMM fd) are mapped through the CUDA backend and released when the
// session ends; each bad CUDA field is refused naming it; a Manager on the
// host backend refuses CUDA memory naming --copy-backend.
func TestRegisterBuffersWithCUDAMemory(t *testing.T) {
	const layers, pageBytes, pages = 2, 4096, 8
	const n = layers * pageBytes * pages
	t.Run("a host-backend Manager refuses CUDA memory naming the flag", func(t *testing.T) {
		h := newHarness(t)
		rc := connect(t, h.path)
		rc.register(t, "engine")
		req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{{
			HandleKind: lifecyclepb.BufferHandleKind_BUFFER_HANDLE_CUDA_IPC, CudaIpcHandle: make([]byte, 64), DeviceUuid: make([]byte, 16),
			Bytes: n, Layers: layers, PageBytes: pageBytes, PageCount: pages}}}
		expectFieldError(t, rc.frame(t, lifecycle.CodeRegisterBuffers, req), "regions[0].handle_kind", "--copy-backend cuda")
	})

	cu, uuid := cudaDoubleGPU(t)
	h := newHarness(t)
	h.srv.SetGPU(copier.GPU{CU: cu})
	// The double's IPC handle names a memfd of the exporting process (here
	// this one): the magic "OKVDIPC1", then pid, fd and size, little-endian
	// uint64s (cuda_double.c); the Manager side opens /proc/<pid>/fd/<fd>,
	// and only the double's own "device memory": a memfd of its name,
	// sealed against shrinking (as its cuMemAlloc makes them).
	alloc := newUnsealedMemfd(t, 2*n, "okv-cuda-double")
	if _, err := unix.FcntlInt(alloc.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	ipc := make([]byte, 64)
	copy(ipc, "OKVDIPC1")
	binary.LittleEndian.PutUint64(ipc[8:], uint64(os.Getpid()))
	binary.LittleEndian.PutUint64(ipc[16:], uint64(alloc.Fd()))
	binary.LittleEndian.PutUint64(ipc[24:], 2*n)
	vmm := newMemfd(t, 4*n)
	ipcRegion := func() *lifecyclepb.BufferRegion {
		return &lifecyclepb.BufferRegion{HandleKind: lifecyclepb.BufferHandleKind_BUFFER_HANDLE_CUDA_IPC, CudaIpcHandle: ipc,
			DeviceUuid: uuid[:], Offset: n, Bytes: n, Layers: layers, PageBytes: pageBytes, PageCount: pages}
	}
	vmmRegion := func() *lifecyclepb.BufferRegion {
		return &lifecyclepb.BufferRegion{HandleKind: lifecyclepb.BufferHandleKind_BUFFER_HANDLE_CUDA_VMM_FD, FdIndex: 0, AllocBytes: 4 * n,
			DeviceUuid: uuid[:], Offset: 2 * n, Bytes: n, Layers: layers, PageBytes: pageBytes, PageCount: pages}
	}
	wrongUUID := append([]byte(nil), uuid[:]...)
	wrongUUID[0] ^= 0xff
	for _, c := range []struct {
		name   string
		region func() *lifecyclepb.BufferRegion
		field  string
		want   string
	}{
		{"an unknown handle kind names handle_kind", func() *lifecyclepb.BufferRegion { r := ipcRegion(); r.HandleKind = 7; return r }, "regions[0].handle_kind", "want 0 (memfd)"},
		{"a short device UUID names device_uuid", func() *lifecyclepb.BufferRegion { r := ipcRegion(); r.DeviceUuid = uuid[:8]; return r }, "regions[0].device_uuid", "want 16"},
		{"a UUID of no device here names device_uuid", func() *lifecyclepb.BufferRegion { r := ipcRegion(); r.DeviceUuid = wrongUUID; return r }, "regions[0].device_uuid", "no CUDA device with UUID"},
		{"a short IPC handle names cuda_ipc_handle", func() *lifecyclepb.BufferRegion { r := ipcRegion(); r.CudaIpcHandle = ipc[:32]; return r }, "regions[0].cuda_ipc_handle", "want 64"},
		{"a region past the IPC allocation names bytes", func() *lifecyclepb.BufferRegion { r := ipcRegion(); r.Offset = 2*n - 8; return r }, "regions[0].bytes", "exceeds the allocation"},
		{"a VMM fd without alloc_bytes names alloc_bytes", func() *lifecyclepb.BufferRegion { r := vmmRegion(); r.AllocBytes = 0; return r }, "regions[0].alloc_bytes", "size of its allocation"},
		{"a region past alloc_bytes names bytes", func() *lifecyclepb.BufferRegion { r := vmmRegion(); r.AllocBytes = 2 * n; return r }, "regions[0].bytes", "exceeds alloc_bytes"},
		{"a memfd region with IPC bytes names cuda_ipc_handle", func() *lifecyclepb.BufferRegion {
			return &lifecyclepb.BufferRegion{Bytes: n, Layers: layers, PageBytes: pageBytes, PageCount: pages, CudaIpcHandle: ipc}
		}, "regions[0].cuda_ipc_handle", "handle_kind"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := connect(t, h.path)
			rc.register(t, "engine")
			req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{c.region()}}
			expectFieldError(t, rc.frame(t, lifecycle.CodeRegisterBuffers, req, vmm), c.field, c.want)
			rc.close()
			h.waitSessions(t, 0)
		})
	}
	t.Run("an IPC handle and a VMM fd are mapped, and released with the session", func(t *testing.T) {
		rc := connect(t, h.path)
		rc.register(t, "engine")
		req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{ipcRegion(), vmmRegion()}}
		var r lifecyclepb.RegisterBuffersReply
		rc.expectReply(t, rc.frame(t, lifecycle.CodeRegisterBuffers, req, vmm), lifecycle.CodeRegisterBuffers, &r)
		if r.GetRegions() != 2 || r.GetTotalBytes() != 2*n {
			t.Fatalf("reply %v, want 2 regions of %d bytes", &r, 2*n)
		}
		sess := h.table.Sessions()[0]
		b0, _ := sess.Buffer(r.GetFirstBufferId())
		b1, _ := sess.Buffer(r.GetFirstBufferId() + 1)
		if b0.GPU == nil || b0.Addr() == 0 {
			t.Fatal("IPC region not mapped")
		}
		if b1.GPU == nil || b1.Addr() == 0 {
			t.Fatal("VMM region not mapped")
		}
		// Each mapping shows its memory's bytes: the IPC one from the
		// region's offset in the exported allocation, the VMM one from the
		// region's offset in the fd.
		if _, err := alloc.WriteAt([]byte("ipc!"), n); err != nil {
			t.Fatal(err)
		}
		if _, err := vmm.WriteAt([]byte("vmm!"), 2*n); err != nil {
			t.Fatal(err)
		}
		mem, err := os.Open("/proc/self/mem")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			addr uintptr
			want string
		}{{b0.Addr(), "ipc!"}, {b1.Addr(), "vmm!"}} {
			got := make([]byte, 4)
			if _, err := mem.ReadAt(got, int64(c.addr)); err != nil || string(got) != c.want {
				t.Fatalf("mapping at %#x reads %q (%v), want %q from its memory", c.addr, got, err, c.want)
			}
		}
		mem.Close()
		rc.close()
		h.waitSessions(t, 0)
		// Released: the backend no longer knows either range.
		if cu.RemoveRange(b0.Addr()) == nil || cu.RemoveRange(b1.Addr()) == nil {
			t.Fatal("a mapping outlived its session")
		}
	})
}

// expectFieldError fails unless f is an error frame naming field with a
// message containing want.
func expectFieldError(t *testing.T, f lifecycle.Frame, field, want string) {
	t.Helper()
	var e lifecyclepb.Error
	if f.Header.Code != lifecycle.CodeError || f.Unmarshal(&e) != nil {
		t.Fatalf("got %v, want an error frame", f.Header.Code)
	}
	if e.GetField() != field || !strings.Contains(e.GetMessage(), want) {
		t.Fatalf("error %v, want %s mentioning %q", &e, field, want)
	}
}

// A sparse memfd is refused: a restore into its holes would allocate the
// engine's buffer in the Manager's memory cgroup. The same memfd, once
// allocated, is accepted.
func TestRegisterBuffersRefusesASparseMemfd(t *testing.T) {
	h := newHarness(t)
	rc := connect(t, h.path)
	rc.register(t, "engine")
	const size = 2 * 16 * 4096
	fd, err := unix.MemfdCreate("okv-test-sparse", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "okv-test-sparse")
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(fd, 0, 0, size/2); err != nil { // the first half only
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{region(0, size)}}
	fr := rc.frame(t, lifecycle.CodeRegisterBuffers, req, f)
	var e lifecyclepb.Error
	if fr.Header.Code != lifecycle.CodeError || fr.Unmarshal(&e) != nil {
		t.Fatalf("got %v, want an error frame", fr.Header.Code)
	}
	if e.GetField() != "regions[0].fd_index" || !strings.Contains(e.GetMessage(), "is sparse: 65536 of its 131072 bytes") {
		t.Fatalf("error %v, want regions[0].fd_index naming the 65536 bytes without a page", &e)
	}
	if err := unix.Fallocate(fd, 0, 0, size); err != nil {
		t.Fatal(err)
	}
	fr = rc.frame(t, lifecycle.CodeRegisterBuffers, req, f)
	if fr.Header.Code != lifecycle.CodeRegisterBuffers.Reply() {
		t.Fatalf("the allocated memfd got %v, want a RegisterBuffers reply", fr.Header.Code)
	}
}

// A memfd that could still grow, or that holds pages past its size, is
// refused: either would let an engine offset holes it punches inside the
// buffer with pages outside it, and st_blocks, which each restore checks,
// would not fall short.
func TestRegisterBuffersRefusesAGrowableMemfdOrPagesPastItsSize(t *testing.T) {
	h := newHarness(t)
	rc := connect(t, h.path)
	rc.register(t, "engine")
	const size = 2 * 16 * 4096
	for _, tc := range []struct {
		name  string
		setup func(fd int) error
		want  string
	}{
		{"a memfd without F_SEAL_GROW", func(fd int) error {
			_, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
			return err
		}, "must be sealed with F_SEAL_GROW"},
		{"a memfd with pages past its size", func(fd int) error {
			if err := unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, size, 3*4096); err != nil {
				return err
			}
			_, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
			return err
		}, "has 3 pages allocated past its size 131072"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := unix.MemfdCreate("okv-test-grow", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
			if err != nil {
				t.Fatal(err)
			}
			f := os.NewFile(uintptr(fd), "okv-test-grow")
			defer f.Close()
			if err := f.Truncate(size); err != nil {
				t.Fatal(err)
			}
			if err := unix.Fallocate(fd, 0, 0, size); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(fd); err != nil {
				t.Fatal(err)
			}
			req := &lifecyclepb.RegisterBuffersRequest{ClientToken: rc.reply.ClientToken, Regions: []*lifecyclepb.BufferRegion{region(0, size)}}
			expectFieldError(t, rc.frame(t, lifecycle.CodeRegisterBuffers, req, f), "regions[0].fd_index", tc.want)
		})
	}
}
