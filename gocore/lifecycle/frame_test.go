package lifecycle

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/internal/fdcheck"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// tempFiles creates n regular files whose content is "file <i>".
func tempFiles(t *testing.T, n int) []*os.File {
	t.Helper()
	dir := t.TempDir()
	files := make([]*os.File, n)
	for i := range files {
		f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(f, "file %d", i); err != nil {
			t.Fatal(err)
		}
		files[i] = f
	}
	t.Cleanup(func() { closeFiles(files) })
	return files
}

// sendRaw writes b with files attached as SCM_RIGHTS to its first byte.
func sendRaw(t *testing.T, c *net.UnixConn, b []byte, files []*os.File) {
	t.Helper()
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	n, _, err := c.WriteMsgUnix(b, oob, nil)
	if err != nil || n != len(b) {
		t.Fatalf("WriteMsgUnix wrote %d of %d bytes: %v", n, len(b), err)
	}
}

func readDeadline(t *testing.T, c *net.UnixConn) {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
}

func TestFrameRoundTrip(t *testing.T) {
	labels := map[string]string{"engine": "vllm", "tp": "1"}
	tests := []struct {
		name  string
		code  Code
		body  proto.Message
		files int
	}{
		{name: "an empty body without fds round trips", code: CodeHealth, body: &lifecyclepb.HealthRequest{}},
		{name: "a nil body round trips as zero bytes", code: CodeWatchSession, body: nil},
		{name: "a RegisterInstance request round trips", code: CodeRegisterInstance,
			body: &lifecyclepb.RegisterInstanceRequest{ClientToken: 42, InstanceId: "vllm-0/tp1", Labels: labels}},
		{name: "a RegisterBuffers request round trips with three fds", code: CodeRegisterBuffers, files: 3,
			body: &lifecyclepb.RegisterBuffersRequest{ClientToken: 7, Regions: []*lifecyclepb.BufferRegion{
				{FdIndex: 0, Bytes: 1 << 20}, {FdIndex: 1, Bytes: 2 << 20}, {FdIndex: 2, Bytes: 4096}}}},
		{name: "a frame with the maximum of 64 fds round trips", code: CodeRegisterBuffers, files: MaxFiles,
			body: &lifecyclepb.RegisterBuffersRequest{ClientToken: 9}},
		{name: "a reply round trips", code: CodeHealth.Reply(),
			body: &lifecyclepb.HealthReply{Status: "serving", Epoch: testEpoch, ServiceId: make([]byte, 16), ManagerPid: 1}},
		{name: "a body larger than the socket buffer round trips", code: CodeRegisterBuffers,
			body: &lifecyclepb.RegisterBuffersRequest{Regions: []*lifecyclepb.BufferRegion{{CudaIpcHandle: bytes.Repeat([]byte{0xA5}, 3<<20)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := socketpair(t)
			files := tempFiles(t, tt.files)
			werr := make(chan error, 1)
			go func() { werr <- WriteFrame(a, tt.code, testEpoch, tt.body, files) }()
			readDeadline(t, b)
			f, err := ReadFrame(b, testEpoch)
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			defer f.Close()
			if err := <-werr; err != nil {
				t.Fatalf("WriteFrame: %v", err)
			}
			var want []byte
			if tt.body != nil {
				want, _ = proto.MarshalOptions{Deterministic: true}.Marshal(tt.body)
			}
			if f.Header != NewHeader(tt.code, testEpoch, uint32(len(want))) {
				t.Errorf("header %+v, want code %v epoch %d length %d", f.Header, tt.code, uint64(testEpoch), len(want))
			}
			if !bytes.Equal(f.Body, want) {
				t.Errorf("body %d bytes differs from the %d marshalled bytes", len(f.Body), len(want))
			}
			if tt.body != nil {
				got := tt.body.ProtoReflect().New().Interface()
				if err := f.Unmarshal(got); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(got, tt.body) {
					t.Errorf("decoded body %v, want %v", got, tt.body)
				}
			}
			if len(f.Files) != tt.files {
				t.Fatalf("received %d fds, want %d", len(f.Files), tt.files)
			}
			for i, rf := range f.Files {
				content, err := io.ReadAll(io.NewSectionReader(rf, 0, 64))
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("file %d", i); string(content) != want {
					t.Errorf("fd %d holds %q, want %q (fd order must be kept)", i, content, want)
				}
			}
		})
	}
}

func TestWriteErrorRoundTrip(t *testing.T) {
	a, b := socketpair(t)
	if err := WriteError(a, testEpoch, 5, "regions[2].bytes", "bytes 0 below limit 1"); err != nil {
		t.Fatal(err)
	}
	readDeadline(t, b)
	f, err := ReadFrame(b, testEpoch)
	if err != nil {
		t.Fatal(err)
	}
	if f.Header.Code != CodeError {
		t.Fatalf("code %v, want Error", f.Header.Code)
	}
	var e lifecyclepb.Error
	if err := f.Unmarshal(&e); err != nil {
		t.Fatal(err)
	}
	if e.Status != 5 || e.Field != "regions[2].bytes" || e.Message != "bytes 0 below limit 1" {
		t.Errorf("error body %v, want status 5 field regions[2].bytes", &e)
	}
}

func TestReadFrameRejects(t *testing.T) {
	tests := []struct {
		name      string
		send      []byte // bytes written before the writer shuts down
		files     int
		eof       bool // the error is io.EOF
		truncated bool // the error wraps io.ErrUnexpectedEOF
		stale     bool
		wantMsg   string
	}{
		{name: "a stream that ends before any byte is a clean io.EOF", send: nil, eof: true},
		{name: "a stream that ends inside the header is truncated", send: rawHeader(CodeHealth, testEpoch, 0)[:10],
			truncated: true, wantMsg: "frame header ends after 10 of 24 bytes"},
		{name: "a truncated header with fds closes the fds", send: rawHeader(CodeHealth, testEpoch, 0)[:1], files: 2,
			truncated: true, wantMsg: "frame header ends after 1 of 24 bytes"},
		{name: "a stream that ends inside the body is truncated",
			send:      append(rawHeader(CodeHealth, testEpoch, 100), make([]byte, 40)...),
			truncated: true, wantMsg: "frame body ends after 40 of 100 bytes"},
		{name: "a stream that ends before the body is truncated", send: rawHeader(CodeHealth, testEpoch, 1), files: 1,
			truncated: true, wantMsg: "frame body ends after 0 of 1 bytes"},
		{name: "an unknown code is malformed", send: rawHeader(9, testEpoch, 0), files: 1,
			wantMsg: "frame code 0x0009 unknown"},
		{name: "a wrong magic is malformed", send: append([]byte("OKV1"), rawHeader(CodeHealth, testEpoch, 0)[4:]...),
			wantMsg: "frame magic 0x31564b4f differs"},
		{name: "a wrong version is malformed", send: NewHeaderBytes(func(h *Header) { h.Version = 3 }),
			wantMsg: "frame version 3 differs from protocol version 2"},
		{name: "another epoch is stale", send: rawHeader(CodeHealth, testEpoch^1, 0), files: 3, stale: true,
			wantMsg: "differs from Manager epoch"},
		{name: "a nonzero reserved field is malformed", send: NewHeaderBytes(func(h *Header) { h.Reserved = 0xdead }),
			wantMsg: "frame reserved 0xdead must be zero"},
		{name: "65 fds exceed the limit of 64", send: rawHeader(CodeRegisterBuffers, testEpoch, 0), files: MaxFiles + 1,
			wantMsg: "exceed limit 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := socketpair(t)
			files := tempFiles(t, tt.files)
			before, _ := fdcheck.Count()
			if len(tt.send) > 0 {
				sendRaw(t, a, tt.send, files)
			}
			if err := a.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			readDeadline(t, b)
			f, err := ReadFrame(b, testEpoch)
			if err == nil {
				f.Close()
				t.Fatalf("ReadFrame accepted %d bytes: %+v", len(tt.send), f.Header)
			}
			if after, _ := fdcheck.Count(); after != before {
				t.Errorf("%d fds open before ReadFrame, %d after: received fds leaked", before, after)
			}
			if tt.eof {
				if err != io.EOF {
					t.Fatalf("error %v, want io.EOF itself", err)
				}
				return
			}
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
			if got := errors.Is(err, io.ErrUnexpectedEOF); got != tt.truncated {
				t.Errorf("errors.Is(%v, io.ErrUnexpectedEOF) = %v, want %v", err, got, tt.truncated)
			}
			if got := errors.Is(err, ErrStaleEpoch); got != tt.stale {
				t.Errorf("errors.Is(%v, ErrStaleEpoch) = %v, want %v", err, got, tt.stale)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
		})
	}
}

// NewHeaderBytes encodes a valid Health header after mutate changed it.
func NewHeaderBytes(mutate func(*Header)) []byte {
	h := NewHeader(CodeHealth, testEpoch, 0)
	mutate(&h)
	return h.AppendTo(nil)
}

func TestReadFrameRejectsOversizeBodyWithoutReadingIt(t *testing.T) {
	a, b := socketpair(t)
	sentinel := []byte("next bytes stay in the socket")
	sendRaw(t, a, append(rawHeader(CodeRegisterBuffers, testEpoch, MaxBody+1), sentinel...), nil)
	readDeadline(t, b)
	_, err := ReadFrame(b, testEpoch)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "frame body length 16777217 exceeds limit 16777216") {
		t.Fatalf("ReadFrame error %v, want the body length limit named", err)
	}
	got := make([]byte, len(sentinel))
	if _, err := io.ReadFull(b, got); err != nil || !bytes.Equal(got, sentinel) {
		t.Fatalf("bytes after the header: %q, %v; want %q unread by ReadFrame", got, err, sentinel)
	}
}

// chunkReader is an in-memory msgReader that returns at most chunk bytes a
// read, so headers and bodies arrive split.
type chunkReader struct {
	data  []byte
	chunk int
}

func (r *chunkReader) ReadMsgUnix(b, oob []byte) (int, int, int, *net.UnixAddr, error) {
	if len(r.data) == 0 {
		return 0, 0, 0, nil, io.EOF
	}
	n := copy(b[:min(len(b), r.chunk)], r.data)
	r.data = r.data[n:]
	return n, 0, 0, nil, nil
}

func TestReadFrameAllocatesNothingForAnOversizeLength(t *testing.T) {
	hdr := rawHeader(CodeRegisterBuffers, testEpoch, ^uint32(0))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := readFrame(&chunkReader{data: hdr, chunk: HeaderSize}, testEpoch, ReadLimits{}); !errors.Is(err, ErrMalformed) {
			t.Fatalf("readFrame error %v, want ErrMalformed", err)
		}
	}
	runtime.ReadMemStats(&after)
	// 100 rejected frames of a claimed 4 GiB each: a body allocation would
	// show as gigabytes; the header and control buffers are a few KiB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("100 oversize frames allocated %d bytes; the body must not be allocated before its length is checked", got)
	}
}

func TestReadFrameReassemblesSplitReads(t *testing.T) {
	body, _ := proto.Marshal(&lifecyclepb.UnregisterRequest{ClientToken: 0xfeed})
	var stream []byte
	stream = append(NewHeader(CodeUnregister, testEpoch, uint32(len(body))).AppendTo(stream), body...)
	stream = NewHeader(CodeHealth, testEpoch, 0).AppendTo(stream)
	for _, chunk := range []int{1, 3, 7, 24, 1000} {
		t.Run(fmt.Sprintf("frames read %d bytes at a time decode in order", chunk), func(t *testing.T) {
			r := &chunkReader{data: stream, chunk: chunk}
			f, err := readFrame(r, testEpoch, ReadLimits{})
			if err != nil || f.Header.Code != CodeUnregister || !bytes.Equal(f.Body, body) {
				t.Fatalf("first frame %+v %x, %v; want Unregister with its body", f.Header, f.Body, err)
			}
			f, err = readFrame(r, testEpoch, ReadLimits{})
			if err != nil || f.Header.Code != CodeHealth || len(f.Body) != 0 {
				t.Fatalf("second frame %+v, %v; want an empty Health", f.Header, err)
			}
			if _, err := readFrame(r, testEpoch, ReadLimits{}); err != io.EOF {
				t.Fatalf("after the last frame: %v, want io.EOF", err)
			}
		})
	}
}

func TestWriteFrameRefuses(t *testing.T) {
	a, _ := socketpair(t)
	tests := []struct {
		name    string
		code    Code
		body    proto.Message
		files   []*os.File
		wantMsg string
	}{
		{name: "an unknown code is refused", code: 7, wantMsg: "frame code 0x0007 unknown"},
		{name: "65 files are refused", code: CodeRegisterBuffers, files: make([]*os.File, MaxFiles+1),
			wantMsg: "frame files 65 exceed limit 64"},
		{name: "a nil file is refused", code: CodeRegisterBuffers, files: []*os.File{nil}, wantMsg: "frame files[0] is nil"},
		{name: "a body over 16 MiB is refused", code: CodeRegisterBuffers,
			body:    &lifecyclepb.BufferRegion{CudaIpcHandle: make([]byte, MaxBody)},
			wantMsg: "frame body length 16777221 exceeds limit 16777216"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteFrame(a, tt.code, testEpoch, tt.body, tt.files)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("WriteFrame error %v, want %q", err, tt.wantMsg)
			}
		})
	}
}

func TestFrameUnmarshalRejectsAnInvalidBody(t *testing.T) {
	f := Frame{Header: NewHeader(CodeHealth.Reply(), testEpoch, 2), Body: []byte{0x0a, 0x05}} // string field, length 5, 0 bytes
	err := f.Unmarshal(&lifecyclepb.HealthReply{})
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "orbitkv.lifecycle.v1.HealthReply") {
		t.Fatalf("Unmarshal error %v, want ErrMalformed naming HealthReply", err)
	}
}

func TestReadFrameSkipsCredentialsOfSOPassCred(t *testing.T) {
	a, b := socketpair(t)
	rc, err := b.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	}); err != nil || serr != nil {
		t.Fatalf("SO_PASSCRED: %v %v", err, serr)
	}
	files := tempFiles(t, MaxFiles)
	if err := WriteFrame(a, CodeRegisterBuffers, testEpoch, &lifecyclepb.RegisterBuffersRequest{ClientToken: 1}, files); err != nil {
		t.Fatal(err)
	}
	readDeadline(t, b)
	f, err := ReadFrame(b, testEpoch)
	if err != nil {
		t.Fatalf("ReadFrame with SO_PASSCRED: %v", err)
	}
	defer f.Close()
	if len(f.Files) != MaxFiles {
		t.Fatalf("received %d fds next to the credentials, want %d", len(f.Files), MaxFiles)
	}
}
