package lifecycle

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// errTruncated is wrapped by the errors for a header or body cut short by
// the end of the stream: it wraps both ErrMalformed and io.ErrUnexpectedEOF.
var errTruncated = fmt.Errorf("%w: %w", ErrMalformed, io.ErrUnexpectedEOF)

// oobSize is the control buffer of one read: room for MaxFiles fds plus the
// SCM_CREDENTIALS a socket with SO_PASSCRED receives. More fds either set
// MSG_CTRUNC (the kernel closes the fds that do not fit) or exceed the count;
// both are malformed.
var oobSize = syscall.CmsgSpace(MaxFiles*4) + syscall.CmsgSpace(syscall.SizeofUcred)

// Frame is one decoded lifecycle frame.
//
// Body is a fresh slice owned by the caller. Files are the fds that came
// with the frame, in the sender's order; the caller owns them and must close
// them (Frame.Close) whatever the body says.
type Frame struct {
	Header Header
	Body   []byte
	Files  []*os.File
	// FilesRefused is ReadLimits.OnFiles's error when it refused fds of
	// this frame: every fd of the frame was closed as it arrived from then
	// on (Files is empty), the frame was still read whole, and the reader
	// answers it with that error.
	FilesRefused error
}

// Close closes every file of f and sets f.Files to nil. It returns the first
// close error.
func (f *Frame) Close() error {
	err := closeFiles(f.Files)
	f.Files = nil
	return err
}

// Unmarshal decodes f.Body into m. A body that is not a valid m wraps
// ErrMalformed and names the code and the message type.
func (f *Frame) Unmarshal(m proto.Message) error {
	if err := proto.Unmarshal(f.Body, m); err != nil {
		return fmt.Errorf("lifecycle: %s frame body (%d bytes) is not a valid %s: %v: %w",
			f.Header.Code, len(f.Body), m.ProtoReflect().Descriptor().FullName(), err, ErrMalformed)
	}
	return nil
}

// msgReader is the part of *net.UnixConn that ReadFrame uses; tests and
// fuzzers substitute an in-memory stream.
type msgReader interface {
	ReadMsgUnix(b, oob []byte) (n, oobn, flags int, addr *net.UnixAddr, err error)
}

// ReadFrame reads one frame from c: the header, validated by DecodeHeader
// against the current Manager epoch before the body is allocated, then
// exactly Length body bytes, collecting the fds of every SCM_RIGHTS control
// message that arrives meanwhile (the peer attaches them to the first header
// byte). Received fds are close-on-exec.
//
// Errors:
//   - io.EOF itself (not wrapped) when the stream ends cleanly before the
//     first byte of a frame;
//   - errors wrapping ErrMalformed for a bad header (see DecodeHeader), a
//     stream that ends inside the frame (also wraps io.ErrUnexpectedEOF),
//     more than MaxFiles fds, or a control message other than SCM_RIGHTS
//     and SCM_CREDENTIALS;
//   - the socket's own error (deadline, reset) otherwise, wrapped.
//
// After any error but io.EOF the stream position is unknown: close c.
// On every error each received fd has been closed. Deadlines are the
// caller's: set c.SetReadDeadline before calling. Not safe for concurrent
// readers of one connection.
func ReadFrame(c *net.UnixConn, epoch uint64) (Frame, error) {
	return readFrame(c, epoch, ReadLimits{})
}

// ReadLimits bound what a peer may make a reader hold while a frame
// arrives (the Manager reading its clients' frames). The zero value
// bounds nothing beyond MaxBody and MaxFiles.
type ReadLimits struct {
	// MaxBody, when nonzero, is the largest body accepted (≤ MaxBody): a
	// header announcing more is malformed, before any body byte is read.
	MaxBody uint32
	// FrameTimeout, when nonzero, bounds the time from a frame's first
	// byte or fd to its last body byte (a read deadline, set when the
	// first byte or fd arrives and cleared after): a peer that starts a
	// frame and stalls, inside its header or its body, holds its fds and
	// the bytes it sent for at most this long. Waiting for a frame's first
	// byte is not bounded (a session is idle between frames).
	FrameTimeout time.Duration
	// OnFiles, when set, is told of every fd as it arrives (added, the
	// count of one control message) and may refuse it: every fd of the
	// frame is then closed, at once and as later ones arrive, and the
	// frame comes back whole with the error in Frame.FilesRefused.
	OnFiles func(added int) error

	started func() // arms FrameTimeout at the frame's first byte or fd (readFrame's)
	refused *error // where readFull records OnFiles's refusal (readFrame's)
}

// ReadFrameLimited is ReadFrame under lim.
func ReadFrameLimited(c *net.UnixConn, epoch uint64, lim ReadLimits) (Frame, error) {
	return readFrame(c, epoch, lim)
}

func readFrame(r msgReader, epoch uint64, lim ReadLimits) (Frame, error) {
	var (
		hdr   [HeaderSize]byte
		oob   = make([]byte, oobSize)
		files []*os.File
	)
	fail := func(err error) (Frame, error) {
		closeFiles(files)
		return Frame{}, err
	}
	started := func() {}
	if d, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok && lim.FrameTimeout > 0 {
		armed := false
		started = func() {
			if !armed {
				armed = true
				d.SetReadDeadline(time.Now().Add(lim.FrameTimeout))
			}
		}
		defer func() {
			if armed {
				d.SetReadDeadline(time.Time{})
			}
		}()
	}
	var refused error
	lim.started, lim.refused = started, &refused
	if err := readFull(r, hdr[:], oob, &files, "header", 0, HeaderSize, lim); err != nil {
		return fail(err)
	}
	h, err := DecodeHeader(hdr[:], epoch)
	if err != nil {
		return fail(err)
	}
	if lim.MaxBody != 0 && h.Length > lim.MaxBody {
		return fail(fmt.Errorf("lifecycle: frame body of %d bytes exceeds this reader's limit %d: %w", h.Length, lim.MaxBody, ErrMalformed))
	}
	// Length is validated (<= MaxBody), and the body grows as its bytes
	// arrive (bodyChunk at a time): a peer that announces 16 MiB and stalls
	// pins only what it actually sent.
	total := int(h.Length)
	body := make([]byte, 0, min(total, bodyChunk))
	for len(body) < total {
		n := min(total-len(body), bodyChunk)
		body = slices.Grow(body, n)
		if err := readFull(r, body[len(body):len(body)+n], oob, &files, "body", len(body), total, lim); err != nil {
			return fail(err)
		}
		body = body[:len(body)+n]
	}
	return Frame{Header: h, Body: body, Files: files, FilesRefused: refused}, nil
}

// bodyChunk is the step in which ReadFrame grows a body buffer.
const bodyChunk = 64 << 10

// readFull reads len(b) bytes, appending received fds to *files. b is the
// part of a header or body that starts after `before` of its `total` bytes
// (for error messages). It returns plain io.EOF when the stream ends before
// the first header byte, a truncation error naming part when it ends later,
// a malformed error for bad or excess control data, and the reader's error
// otherwise.
func readFull(r msgReader, b, oob []byte, files *[]*os.File, part string, before, total int, lim ReadLimits) error {
	got := 0
	for got < len(b) {
		n, oobn, flags, _, err := r.ReadMsgUnix(b[got:], oob)
		got += n
		if (n > 0 || oobn > 0) && lim.started != nil {
			lim.started()
		}
		if oobn > 0 {
			had := len(*files)
			if perr := appendRights(oob[:oobn], files); perr != nil {
				return perr
			}
			if added := len(*files) - had; added > 0 && lim.OnFiles != nil {
				refused := lim.refused != nil && *lim.refused != nil
				if !refused {
					if ferr := lim.OnFiles(added); ferr != nil && lim.refused != nil {
						*lim.refused, refused = ferr, true
					}
				}
				if refused {
					closeFiles(*files)
					*files = (*files)[:0]
				}
			}
		}
		if flags&syscall.MSG_CTRUNC != 0 {
			return fmt.Errorf("lifecycle: frame fds exceed limit %d (control data truncated): %w", MaxFiles, ErrMalformed)
		}
		if len(*files) > MaxFiles {
			return fmt.Errorf("lifecycle: frame fds %d exceed limit %d: %w", len(*files), MaxFiles, ErrMalformed)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if got == 0 && before == 0 && part == "header" {
					return io.EOF
				}
				return fmt.Errorf("lifecycle: frame %s ends after %d of %d bytes: %w", part, before+got, total, errTruncated)
			}
			return fmt.Errorf("lifecycle: reading frame %s: %w", part, err)
		}
		if n == 0 {
			// A stream read of zero bytes without error is end of stream.
			if got == 0 && before == 0 && part == "header" {
				return io.EOF
			}
			return fmt.Errorf("lifecycle: frame %s ends after %d of %d bytes: %w", part, before+got, total, errTruncated)
		}
	}
	return nil
}

// appendRights parses control data, turning every SCM_RIGHTS fd into an
// *os.File appended to *files. SCM_CREDENTIALS (present when the socket has
// SO_PASSCRED) is skipped; any other control message is malformed. Every fd
// parsed is in *files for the caller to close, even on error.
func appendRights(oob []byte, files *[]*os.File) error {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return fmt.Errorf("lifecycle: frame control data (%d bytes) unparsable: %v: %w", len(oob), err, ErrMalformed)
	}
	var bad error
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_CREDENTIALS {
			continue
		}
		if m.Header.Level != syscall.SOL_SOCKET || m.Header.Type != syscall.SCM_RIGHTS {
			if bad == nil {
				bad = fmt.Errorf("lifecycle: frame control message level %d type %d is not SCM_RIGHTS: %w",
					m.Header.Level, m.Header.Type, ErrMalformed)
			}
			continue
		}
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			if bad == nil {
				bad = fmt.Errorf("lifecycle: frame SCM_RIGHTS unparsable: %v: %w", err, ErrMalformed)
			}
			continue
		}
		for _, fd := range fds {
			*files = append(*files, os.NewFile(uintptr(fd), fmt.Sprintf("lifecycle-fd-%d", len(*files))))
		}
	}
	return bad
}

// WriteFrame marshals body deterministically (nil = empty body) and writes
// one frame of code and epoch to c, with files attached as one SCM_RIGHTS
// message on the first header byte. It writes the whole frame or returns an error (after a
// partial write the stream is unusable; close c). The caller keeps
// ownership of files; the peer receives duplicates.
//
// Errors: a marshalled body over MaxBody, more than MaxFiles files, a nil
// file, or an unknown code are refused before anything is written, naming
// the field and the limit; socket errors are returned wrapped. Not safe for
// concurrent writers of one connection.
func WriteFrame(c *net.UnixConn, code Code, epoch uint64, body proto.Message, files []*os.File) error {
	buf, oob, err := encodeFrame(code, epoch, body, files)
	if err != nil {
		return err
	}
	n, _, err := c.WriteMsgUnix(buf, oob, nil)
	// The fd numbers in oob belong to files; keep them open until sent.
	runtime.KeepAlive(files)
	if err != nil {
		return fmt.Errorf("lifecycle: writing %s frame: %w", code, err)
	}
	if n < len(buf) {
		// The fds went with the first bytes; Write loops over the rest.
		if _, err := c.Write(buf[n:]); err != nil {
			return fmt.Errorf("lifecycle: writing %s frame after %d of %d bytes: %w", code, n, len(buf), err)
		}
	}
	return nil
}

// encodeFrame builds the bytes and control data of a frame; see WriteFrame.
func encodeFrame(code Code, epoch uint64, body proto.Message, files []*os.File) (buf, oob []byte, err error) {
	if !code.Known() {
		return nil, nil, fmt.Errorf("lifecycle: frame code %#04x unknown", uint16(code))
	}
	if len(files) > MaxFiles {
		return nil, nil, fmt.Errorf("lifecycle: frame files %d exceed limit %d", len(files), MaxFiles)
	}
	size := 0
	if body != nil {
		size = proto.MarshalOptions{Deterministic: true}.Size(body)
	}
	if size > MaxBody {
		return nil, nil, fmt.Errorf("lifecycle: frame body length %d exceeds limit %d", size, MaxBody)
	}
	buf = make([]byte, 0, HeaderSize+size)
	buf = NewHeader(code, epoch, uint32(size)).AppendTo(buf)
	if body != nil {
		buf, err = proto.MarshalOptions{UseCachedSize: true, Deterministic: true}.MarshalAppend(buf, body)
		if err != nil {
			return nil, nil, fmt.Errorf("lifecycle: marshalling %s frame body: %w", code, err)
		}
		if len(buf) != HeaderSize+size {
			return nil, nil, fmt.Errorf("lifecycle: %s frame body changed size while marshalling (%d, then %d bytes)", code, size, len(buf)-HeaderSize)
		}
	}
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			if f == nil {
				return nil, nil, fmt.Errorf("lifecycle: frame files[%d] is nil", i)
			}
			// SyscallConn, unlike Fd, leaves the file's blocking mode alone.
			rc, err := f.SyscallConn()
			if err != nil {
				return nil, nil, fmt.Errorf("lifecycle: frame files[%d]: %w", i, err)
			}
			if err := rc.Control(func(fd uintptr) { fds[i] = int(fd) }); err != nil {
				return nil, nil, fmt.Errorf("lifecycle: frame files[%d]: %w", i, err)
			}
		}
		oob = syscall.UnixRights(fds...)
	}
	return buf, oob, nil
}

// WriteError writes an error frame (CodeError) whose body is a
// lifecyclepb.Error with status (an okv_status of abi.h, e.g. 5 = Invalid),
// the refused request field (e.g. "regions[2].bytes") and a message that
// names the limit. The connection stays usable (docs/design.md §5.1). Errors as
// WriteFrame.
func WriteError(c *net.UnixConn, epoch uint64, status uint32, field, msg string) error {
	return WriteFrame(c, CodeError, epoch, &lifecyclepb.Error{Status: status, Field: field, Message: msg}, nil)
}

func closeFiles(files []*os.File) error {
	var first error
	for _, f := range files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
