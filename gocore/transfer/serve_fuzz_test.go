package transfer

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// fuzzCap is the capability FuzzServe's segment is given, so that seeds
// (and inputs the fuzzer derives from them) can name it.
var fuzzCap = Capability{0xca, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}

// FuzzServe feeds arbitrary bytes to a Server's connection loop (over
// net.Pipe) and checks what comes back: every frame the source writes
// decodes, a DATA frame carries exactly the segment's bytes at its offset,
// and the source neither panics nor reads past its segment (the race
// detector and the bounds checks would say).
func FuzzServe(f *testing.F) {
	srv, err := Listen(ServerSpec{Addr: "127.0.0.1:0", IdleTimeout: 50 * time.Millisecond, WriteTimeout: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	seg := pattern(100000, 42)
	id, _, err := srv.RegisterSegment([][]byte{seg[:3000], seg[3000:70000], seg[70000:]}, time.Now().Add(24*time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	srv.mu.Lock()
	srv.segs[id].cap = fuzzCap
	srv.mu.Unlock()
	read := func(off uint64, n uint32, c Capability) []byte {
		return encoded(Header{Op: OpRead, Tag: off, Segment: id, Offset: off, Length: n, Capability: c})
	}
	f.Add(read(0, 100000, fuzzCap))
	f.Add(append(read(2999, 2, fuzzCap), read(69999, 30001, fuzzCap)...))
	f.Add(read(0, 10, Capability{}))
	f.Add(read(99999, 2, fuzzCap))
	f.Add(append(read(5, 5, fuzzCap), []byte("garbage after a good READ")...))
	f.Add([]byte("OKVT\x01\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, b := net.Pipe()
		srv.mu.Lock()
		srv.conns[a] = struct{}{}
		srv.wg.Add(1)
		srv.mu.Unlock()
		go srv.serve(a)
		bad := make(chan error, 1)
		go func() { bad <- checkAnswers(b, id, seg) }()
		b.SetWriteDeadline(time.Now().Add(2 * time.Second))
		b.Write(in) // returns once the source read it all, or closed
		time.Sleep(time.Millisecond)
		b.Close()
		if err := <-bad; err != nil {
			t.Fatal(err)
		}
	})
}

// checkAnswers reads frames from c until it fails and returns the first
// answer that breaks FuzzServe's properties.
func checkAnswers(c net.Conn, id uint64, seg []byte) error {
	var hdr [HeaderBytes]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return nil
		}
		h, err := DecodeHeader(hdr[:])
		if err != nil {
			return errors.New("the source wrote a frame that does not decode: " + err.Error())
		}
		body := make([]byte, h.Length)
		if _, err := io.ReadFull(c, body); err != nil {
			return nil
		}
		switch h.Op {
		case OpData:
			if h.Segment != id || h.Offset+uint64(h.Length) > uint64(len(seg)) {
				return errors.New("DATA outside the segment")
			}
			if !bytes.Equal(body, seg[h.Offset:h.Offset+uint64(h.Length)]) {
				return errors.New("DATA bytes differ from the segment's")
			}
		case OpError:
		default:
			return errors.New("the source wrote a READ")
		}
	}
}
