package lifecycle

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// Seeds beyond these live in testdata/fuzz/<FuzzName>/ (crashers are kept there).

func FuzzDecodeHeader(f *testing.F) {
	f.Add(rawHeader(CodeHealth, testEpoch, 0), uint64(testEpoch))
	f.Add(rawHeader(CodeRegisterBuffers.Reply(), 1, MaxBody), uint64(1))
	f.Add(rawHeader(CodeError, 7, MaxBody+1), uint64(7))
	f.Add(rawHeader(0x8007, 7, 3), uint64(7))
	f.Add([]byte("OKVF"), uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, epoch uint64) {
		h, err := DecodeHeader(b, epoch)
		if len(b) < HeaderSize {
			if !errors.Is(err, ErrMalformed) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%d bytes: error %v, want ErrMalformed and io.ErrUnexpectedEOF", len(b), err)
			}
			return
		}
		// Decode then encode is the identity on the 24 header bytes,
		// whether or not the header is valid.
		if enc := h.AppendTo(nil); !bytes.Equal(enc, b[:HeaderSize]) {
			t.Fatalf("AppendTo(DecodeHeader(% x)) = % x", b[:HeaderSize], enc)
		}
		// Encode then decode is the identity on the Header value.
		h2, err2 := DecodeHeader(h.AppendTo(nil), epoch)
		if h2 != h || (err == nil) != (err2 == nil) {
			t.Fatalf("round trip of %+v gave %+v (errors %v, %v)", h, h2, err, err2)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			if errors.Is(err, ErrStaleEpoch) != (h.Magic == Magic && h.Version == Version && h.Code.Known() && h.Epoch != epoch) {
				t.Fatalf("ErrStaleEpoch = %v for %+v at epoch %d", errors.Is(err, ErrStaleEpoch), h, epoch)
			}
			return
		}
		if h.Magic != Magic || h.Version != Version || !h.Code.Known() || h.Epoch != epoch || h.Length > MaxBody || h.Reserved != 0 {
			t.Fatalf("DecodeHeader accepted an invalid header %+v at epoch %d", h, epoch)
		}
	})
}

var (
	devNullOnce sync.Once
	devNull     *os.File
)

// fuzzFile returns one open file shared by every fuzz input, sent as many
// times as an input asks; the receiver gets fresh duplicates. TestMain
// closes it.
func fuzzFile(t *testing.T) *os.File {
	devNullOnce.Do(func() {
		var err error
		if devNull, err = os.Open(os.DevNull); err != nil {
			t.Fatal(err)
		}
	})
	return devNull
}

func FuzzReadFrame(f *testing.F) {
	hb, _ := proto.Marshal(&lifecyclepb.HealthReply{Status: "serving", Epoch: testEpoch, ServiceId: make([]byte, 16)})
	two := append(NewHeader(CodeHealth.Reply(), testEpoch, uint32(len(hb))).AppendTo(nil), hb...)
	two = NewHeader(CodeHealth, testEpoch, 0).AppendTo(two)
	f.Add(two, uint8(0), uint64(testEpoch))
	f.Add(rawHeader(CodeRegisterBuffers, testEpoch, 0), uint8(3), uint64(testEpoch))
	f.Add(rawHeader(CodeRegisterBuffers, testEpoch, 0), uint8(MaxFiles+1), uint64(testEpoch))
	f.Add(rawHeader(CodeHealth, testEpoch, 100)[:30], uint8(1), uint64(testEpoch))
	f.Add(rawHeader(CodeHealth, 5, 0), uint8(0), uint64(6))
	f.Add([]byte{}, uint8(0), uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, nfds uint8, epoch uint64) {
		b, werr := sendFuzzFrames(t, data, nfds)
		if err := b.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		consumed := 0
		for {
			fr, err := ReadFrame(b, epoch)
			if err != nil {
				switch {
				case err == io.EOF:
					if consumed != len(data) {
						t.Fatalf("io.EOF after %d of %d bytes", consumed, len(data))
					}
				case errors.Is(err, ErrMalformed):
				default:
					t.Fatalf("ReadFrame error %v neither io.EOF nor ErrMalformed", err)
				}
				break
			}
			// A decoded frame re-encodes to exactly the bytes it came from.
			enc := append(fr.Header.AppendTo(nil), fr.Body...)
			if !bytes.Equal(enc, data[consumed:consumed+len(enc)]) {
				t.Fatalf("frame at offset %d re-encodes differently", consumed)
			}
			if consumed > 0 && len(fr.Files) > 0 {
				t.Fatalf("frame at offset %d got %d fds sent with byte 0", consumed, len(fr.Files))
			}
			if len(fr.Files) > MaxFiles {
				t.Fatalf("frame carries %d fds, over %d", len(fr.Files), MaxFiles)
			}
			if err := fr.Header.Validate(epoch); err != nil {
				t.Fatalf("ReadFrame returned an invalid header: %v", err)
			}
			fr.Close()
			consumed += len(enc)
		}
		b.Close() // unblock a writer stuck on a frame the reader refused
		if err := <-werr; err != nil && consumed == len(data) {
			t.Fatalf("writer: %v", err)
		}
	})
}

// FuzzReadFrameLimited: the Manager's read of its clients' frames. Any
// bytes and fds either decode to frames within the limits (a body of at
// most MaxBody bytes; fds past OnFiles's budget of 8 refused, closed and
// reported in FilesRefused, never returned) or fail with ErrMalformed or
// io.EOF; the fds OnFiles accepted are exactly those returned.
func FuzzReadFrameLimited(f *testing.F) {
	f.Add(rawHeader(CodeRegisterBuffers, testEpoch, 0), uint8(3), uint64(testEpoch))
	f.Add(rawHeader(CodeRegisterBuffers, testEpoch, 0), uint8(20), uint64(testEpoch))
	f.Add(rawHeader(CodeHealth, testEpoch, 5000), uint8(1), uint64(testEpoch))
	f.Add(rawHeader(CodeHealth, testEpoch, 100)[:30], uint8(1), uint64(testEpoch))
	f.Fuzz(func(t *testing.T, data []byte, nfds uint8, epoch uint64) {
		b, werr := sendFuzzFrames(t, data, nfds)
		const budget, maxBody = 8, 4096
		accepted := 0
		lim := ReadLimits{MaxBody: maxBody, FrameTimeout: 10 * time.Second, OnFiles: func(k int) error {
			if accepted+k > budget {
				return errors.New("over budget")
			}
			accepted += k
			return nil
		}}
		consumed := 0
		for {
			fr, err := ReadFrameLimited(b, epoch, lim)
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrMalformed) {
					t.Fatalf("ReadFrameLimited error %v neither io.EOF nor ErrMalformed", err)
				}
				break
			}
			if len(fr.Body) > maxBody {
				t.Fatalf("a body of %d bytes past the limit %d", len(fr.Body), maxBody)
			}
			if fr.FilesRefused != nil && len(fr.Files) > 0 {
				t.Fatalf("a frame whose fds were refused carries %d fds", len(fr.Files))
			}
			if fr.FilesRefused == nil && len(fr.Files) != accepted {
				t.Fatalf("OnFiles accepted %d fds, the frame carries %d", accepted, len(fr.Files))
			}
			consumed += HeaderSize + len(fr.Body)
			fr.Close()
			accepted = 0
		}
		b.Close()
		if err := <-werr; err != nil && consumed == len(data) {
			t.Fatalf("writer: %v", err)
		}
	})
}

// sendFuzzFrames writes data to one end of a new socket pair with
// nfds%70 fds (up to 69: beyond MaxFiles, within SCM_MAX_FD) attached to
// its first byte, then shuts that end's writing; it returns the other end
// and a channel with the writer's error.
func sendFuzzFrames(t *testing.T, data []byte, nfds uint8) (*net.UnixConn, <-chan error) {
	a, b := socketpair(t)
	n := int(nfds) % 70
	if len(data) == 0 {
		n = 0 // fds need at least one byte to travel with
	}
	var file *os.File
	if n > 0 {
		file = fuzzFile(t)
	}
	werr := make(chan error, 1)
	go func() {
		var oob []byte
		if n > 0 {
			fds := make([]int, n)
			for i := range fds {
				fds[i] = int(file.Fd())
			}
			oob = syscall.UnixRights(fds...)
		}
		var err error
		if len(data) > 0 {
			var w int
			w, _, err = a.WriteMsgUnix(data, oob, nil)
			if err == nil && w < len(data) {
				_, err = a.Write(data[w:])
			}
		}
		if cerr := a.CloseWrite(); err == nil {
			err = cerr
		}
		werr <- err
	}()
	return b, werr
}
