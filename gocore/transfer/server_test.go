package transfer

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestUnregisterSegmentCutsAWriteInFlightShort(t *testing.T) {
	srv := newServer(t, ServerSpec{})
	src := newSource(t, srv, []int{MaxSliceBytes}, 1<<20, time.Now().Add(time.Minute))
	// A requester that asks for 16 MiB and never reads: the source's write
	// blocks once the socket buffers are full.
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var hdr [HeaderBytes]byte
	(&Header{Op: OpRead, Tag: 1, Segment: src.id, Length: MaxSliceBytes, Capability: src.cap}).Encode(hdr[:])
	c.Write(hdr[:])
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		srv.mu.Lock()
		writing := len(srv.segs[src.id].writers)
		srv.mu.Unlock()
		if writing == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the source never started the write")
		}
	}
	start := time.Now()
	srv.UnregisterSegment(src.id) // returns once the write is cut short
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("UnregisterSegment took %v with a write blocked", d)
	}
	if st := srv.Stats(); st.Segments != 0 || st.Reads != 0 {
		t.Errorf("stats %+v: want no segment and no completed READ", st)
	}
}

func TestASegmentPastItsDeadlineIsRefusedAsExpiredBeforeItsTimerFires(t *testing.T) {
	srv := newServer(t, ServerSpec{})
	s := newSource(t, srv, []int{4096}, 4096, time.Now().Add(time.Hour))
	srv.mu.Lock()
	srv.segs[s.id].timer.Stop()
	srv.segs[s.id].deadline = time.Now().Add(-time.Second)
	srv.mu.Unlock()
	r := dialRaw(t, &net.Dialer{}, srv.Addr())
	h, body, err := r.ask(Header{Tag: 1, Segment: s.id, Length: 16, Capability: s.cap})
	if err != nil || h.Op != OpError || !errors.Is(RemoteError(h.Code, string(body)), ErrExpired) {
		t.Fatalf("answer %+v %q, %v; want ERROR of ErrExpired", h, body, err)
	}
}

func TestServerSpecNamesTheFieldOutsideItsLimit(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"no listen address", (&ServerSpec{}).Validate(), "transfer.ServerSpec.Addr"},
		{"too many connections", (&ServerSpec{Addr: "x:1", MaxConns: 1 << 20}).Validate(), "transfer.ServerSpec.MaxConns"},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused", func(t *testing.T) {
			if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
				t.Fatalf("Validate: %v, want %q", c.err, c.want)
			}
		})
	}
}
