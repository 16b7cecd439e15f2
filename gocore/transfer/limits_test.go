package transfer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// rawConn is a requester that speaks the wire protocol by hand, so a test
// can send READs the Engine never would (no capability, a wrong one).
type rawConn struct {
	t *testing.T
	c net.Conn
}

func dialRaw(t *testing.T, d *net.Dialer, addr string) *rawConn {
	t.Helper()
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// ask sends one READ and returns its answer: the header and the body, or
// the read error (io.EOF: the source closed the connection).
func (r *rawConn) ask(h Header) (Header, []byte, error) {
	r.t.Helper()
	h.Op = OpRead
	if h.Length == 0 {
		h.Length = 1
	}
	_ = r.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.c.Write(encoded(h)); err != nil {
		return Header{}, nil, err
	}
	return r.answer()
}

func (r *rawConn) answer() (Header, []byte, error) {
	var hdr [HeaderBytes]byte
	if _, err := io.ReadFull(r.c, hdr[:]); err != nil {
		return Header{}, nil, err
	}
	h, err := DecodeHeader(hdr[:])
	if err != nil {
		r.t.Fatalf("the source's answer does not decode: %v", err)
	}
	body := make([]byte, h.Length)
	_, err = io.ReadFull(r.c, body)
	return h, body, err
}

// closed reports whether the source has closed the connection: a read
// ends (EOF or reset) within 30 s instead of timing out.
func (r *rawConn) closed() bool {
	_ = r.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var b [1]byte
	_, err := r.c.Read(b[:])
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}

func TestARefusalAloneFailsOnlyItsRead(t *testing.T) {
	srv := newServer(t, ServerSpec{MaxRefusals: 3})
	src := newSource(t, srv, []int{4096}, 4096, time.Now().Add(time.Hour))
	r := dialRaw(t, &net.Dialer{}, srv.Addr())
	for i := range 2 {
		if h, _, err := r.ask(Header{Tag: uint64(i), Segment: src.id}); err != nil || h.Op != OpError {
			t.Fatalf("refused READ %d: %+v, %v; want an ERROR", i, h, err)
		}
	}
	if h, body, err := r.ask(Header{Tag: 9, Segment: src.id, Length: 16, Capability: src.cap}); err != nil || h.Op != OpData || string(body) != string(src.blocks[0][:16]) {
		t.Fatalf("READ after 2 refusals (the limit is 3): %+v, %v; want its DATA", h, err)
	}
	for i := range 2 {
		if h, _, err := r.ask(Header{Tag: uint64(10 + i), Segment: src.id}); err != nil || h.Op != OpError {
			t.Fatalf("refused READ %d after a DATA: %+v, %v; want an ERROR (a DATA starts the count again)", i, h, err)
		}
	}
	if st := srv.Stats(); st.OverRefusals != 0 {
		t.Fatalf("OverRefusals %d, want 0", st.OverRefusals)
	}
}

func TestARequesterThatIsOnlyRefusedLosesItsConnection(t *testing.T) {
	t.Run("after MaxRefusals refusals in a row the connection is closed", func(t *testing.T) {
		srv := newServer(t, ServerSpec{MaxRefusals: 3})
		r := dialRaw(t, &net.Dialer{}, srv.Addr())
		for i := range 3 {
			if h, _, err := r.ask(Header{Tag: uint64(i), Segment: 12345}); err != nil || h.Op != OpError {
				t.Fatalf("READ %d: %+v, %v; want an ERROR before the close", i, h, err)
			}
		}
		if !r.closed() {
			t.Fatal("the connection is open after 3 refusals, the limit")
		}
		if st := srv.Stats(); st.OverRefusals != 1 || st.Refused != 3 {
			t.Fatalf("stats %+v, want OverRefusals 1, Refused 3", st)
		}
	})
	t.Run("refused READs do not put off the idle timeout", func(t *testing.T) {
		srv := newServer(t, ServerSpec{IdleTimeout: time.Second})
		r := dialRaw(t, &net.Dialer{}, srv.Addr())
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; ; i++ {
			if time.Now().After(deadline) {
				t.Fatalf("the connection is open after %d refused READs over 30 s; the idle timeout is 1 s", i)
			}
			if _, _, err := r.ask(Header{Tag: uint64(i), Segment: 12345}); err != nil {
				return // closed: refusals did not keep it
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

func TestOneHostCannotTakeEveryConnection(t *testing.T) {
	srv := newServer(t, ServerSpec{MaxConnsPerHost: 2})
	src := newSource(t, srv, []int{4096}, 4096, time.Now().Add(time.Hour))
	read := Header{Segment: src.id, Length: 8, Capability: src.cap}
	local := &net.Dialer{}
	for i := range 2 { // proven: never closed for a newcomer
		if h, _, err := dialRaw(t, local, srv.Addr()).ask(read); err != nil || h.Op != OpData {
			t.Fatalf("connection %d: %+v, %v; want DATA", i, h, err)
		}
	}
	if !dialRaw(t, local, srv.Addr()).closed() {
		t.Fatal("a third connection from the host is open; MaxConnsPerHost is 2, both proven")
	}
	other := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	if h, _, err := dialRaw(t, other, srv.Addr()).ask(read); err != nil || h.Op != OpData {
		t.Fatalf("a connection from another host: %+v, %v; want DATA (the cap is per host)", h, err)
	}
	if st := srv.Stats(); st.OverHost != 1 || st.OverConns != 0 {
		t.Fatalf("stats %+v, want OverHost 1, OverConns 0", st)
	}
}

func TestRefusalsDoNotTellWhichSegmentsExist(t *testing.T) {
	srv := newServer(t, ServerSpec{})
	ids := map[uint64]bool{}
	var live *source
	for range 64 {
		live = newSource(t, srv, []int{4096}, 4096, time.Now().Add(time.Hour))
		if ids[live.id] || ids[live.id-1] || ids[live.id+1] {
			t.Fatalf("segment id %d next to one drawn before: ids are not drawn at random", live.id)
		}
		ids[live.id] = true
	}
	dead := live.id ^ 1<<63
	r := dialRaw(t, &net.Dialer{}, srv.Addr())
	answer := func(id uint64) (Header, string) {
		h, body, err := r.ask(Header{Tag: 1, Segment: id, Capability: Capability{1}})
		if err != nil || h.Op != OpError {
			t.Fatalf("READ of segment %d with a wrong capability: %+v, %v; want an ERROR", id, h, err)
		}
		return h, string(body)
	}
	lh, ltext := answer(live.id)
	dh, dtext := answer(dead)
	if lh.Code != dh.Code || ltext != fmt.Sprintf("%s: segment %d", ErrUnknownSegment, live.id) || dtext != fmt.Sprintf("%s: segment %d", ErrUnknownSegment, dead) {
		t.Fatalf("a live segment with a wrong capability is answered (%d, %q), one that does not exist (%d, %q): want the same unknown-segment refusal", lh.Code, ltext, dh.Code, dtext)
	}
}
