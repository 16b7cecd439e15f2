package transfer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// fuzzID and fuzzCap are the id and capability FuzzServe's segment is
// given, the same in every process, so that seeds (and the inputs the
// fuzzer derives from them and caches between runs) can name it.
const fuzzID = 7

var fuzzCap = Capability{0xca, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}

// fuzzMaxHeaders bounds the READs of one input that reach the source: each
// may be answered with up to the whole 100000-byte segment, and the fuzzer
// kills a worker whose input runs 10 s, so an input's work is kept to a
// few MiB (the fuzzer finds long inputs with nothing new past a few frames).
const fuzzMaxHeaders = 64

// fuzzMaxRefusals is FuzzServe's ServerSpec.MaxRefusals, small so that
// inputs reach the close it makes.
const fuzzMaxRefusals = 4

// FuzzServe feeds arbitrary bytes to a Server over a real loopback TCP
// connection and checks every answer against the READ it answers: the
// requester writes the input and half-closes, so the source reads all of
// it, answers every whole header and closes at EOF; nothing waits on a
// timer (the idle, prove and write timeouts are a minute, longer than the
// fuzzer's own 10 s limit of one input), so a slow machine checks the
// same answers as a fast one. Properties: every frame the source writes
// decodes; the i-th answer echoes the i-th header's tag; a DATA frame
// answers a READ of exactly its segment, offset and length and carries
// the segment's bytes there; nothing follows a CodeMalformed ERROR; no
// answer is written for bytes that are not a whole header; nothing follows
// the fuzzMaxRefusals-th ERROR in a row (no DATA between). The source
// must not panic or read past its segment (the bounds checks would say).
func FuzzServe(f *testing.F) {
	srv, err := Listen(ServerSpec{Addr: "127.0.0.1:0", IdleTimeout: time.Minute, ProveTimeout: time.Minute, WriteTimeout: time.Minute, MaxRefusals: fuzzMaxRefusals})
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
	g := srv.segs[id]
	delete(srv.segs, id)
	g.id, g.cap = fuzzID, fuzzCap
	srv.segs[fuzzID] = g
	srv.mu.Unlock()
	read := func(off uint64, n uint32, c Capability) []byte {
		return encoded(Header{Op: OpRead, Tag: off, Segment: fuzzID, Offset: off, Length: n, Capability: c})
	}
	f.Add(read(0, 100000, fuzzCap))
	f.Add(append(read(2999, 2, fuzzCap), read(69999, 30001, fuzzCap)...))
	f.Add(read(0, 10, Capability{}))
	f.Add(append(read(1, 1, fuzzCap), read(0, 10, Capability{})...))
	f.Add(read(99999, 2, fuzzCap))
	f.Add(append(read(5, 5, fuzzCap), []byte("garbage after a good READ")...))
	f.Add([]byte("OKVT\x01\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > fuzzMaxHeaders*HeaderBytes {
			in = in[:fuzzMaxHeaders*HeaderBytes]
		}
		d, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c := d.(*net.TCPConn)
		// An abortive close leaves no TIME_WAIT behind: a long run dials
		// hundreds of thousands of connections.
		_ = c.SetLinger(0)
		wrote := make(chan struct{})
		defer func() { c.Close(); <-wrote }()
		go func() {
			defer close(wrote)
			// Fails only when the source closed first (a refusal that ends
			// the connection): the answers say what it did.
			if _, err := c.Write(in); err == nil {
				_ = c.CloseWrite()
			}
		}()
		if err := checkAnswers(c, in, seg); err != nil {
			t.Fatal(err)
		}
	})
}

// checkAnswers reads the source's frames from c until EOF and returns the
// first that breaks FuzzServe's properties for the input in. A clean end
// (FIN) in the middle of a frame breaks them; a reset ends the check: the
// source closes a connection it stops reading (a refusal that ends it)
// with input unread, and the kernel then answers with a reset.
func checkAnswers(c net.Conn, in, seg []byte) error {
	var hdr [HeaderBytes]byte
	refusals := 0 // ERRORs since the last DATA
	for i := 0; ; i++ {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("answer %d: the source closed mid-header", i)
			}
			return nil
		}
		h, err := DecodeHeader(hdr[:])
		if err != nil {
			return fmt.Errorf("answer %d does not decode: %v", i, err)
		}
		if (i+1)*HeaderBytes > len(in) {
			return fmt.Errorf("answer %d (%s) has no whole header of the %d input bytes to answer", i, h.Op, len(in))
		}
		ask, _ := DecodeHeader(in[i*HeaderBytes : (i+1)*HeaderBytes])
		if h.Tag != ask.Tag {
			return fmt.Errorf("answer %d has tag %d, its READ %d", i, h.Tag, ask.Tag)
		}
		body := make([]byte, h.Length)
		if n, err := io.ReadFull(c, body); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("answer %d: the source closed after %d of %d body bytes", i, n, h.Length)
			}
			return nil
		}
		switch h.Op {
		case OpData:
			if h.Segment != fuzzID || h.Segment != ask.Segment || h.Offset != ask.Offset || h.Length != ask.Length || ask.Capability != fuzzCap {
				return fmt.Errorf("answer %d: DATA %+v for READ %+v", i, h, ask)
			}
			if h.Offset+uint64(h.Length) > uint64(len(seg)) {
				return fmt.Errorf("answer %d: DATA [%d, +%d) outside the %d-byte segment", i, h.Offset, h.Length, len(seg))
			}
			if !bytes.Equal(body, seg[h.Offset:h.Offset+uint64(h.Length)]) {
				return fmt.Errorf("answer %d: DATA bytes differ from the segment's", i)
			}
			refusals = 0
		case OpError:
			if refusals++; h.Code == CodeMalformed || refusals == fuzzMaxRefusals {
				if n, err := c.Read(hdr[:1]); n > 0 || err == nil {
					return fmt.Errorf("answer %d: bytes after ERROR %d in a row, code %d (%q): the source must close", i, refusals, h.Code, body)
				}
				return nil
			}
		default:
			return fmt.Errorf("answer %d is a %s", i, h.Op)
		}
	}
}
