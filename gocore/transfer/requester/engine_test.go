package requester

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/transfer"
)

func TestRoundTripLandsEveryByte(t *testing.T) {
	sizes := func(n, size int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = size
		}
		return out
	}
	cases := []struct {
		name  string
		sizes []int
		chunk int
		spec  EngineSpec
	}{
		{"128 blocks of 64 KiB arrive over the default rails", sizes(128, 64<<10), 16 << 10, EngineSpec{}},
		{"8 blocks of 4 MiB arrive cut into default slices", sizes(8, 4<<20), 1 << 20, EngineSpec{}},
		{"blocks of odd sizes straddle chunk and slice boundaries", []int{1, 4095, 4097, 65537, 300000, 1<<20 + 3, 17}, 7777, EngineSpec{SliceBytes: 64 << 10}},
		{"one rail with one slice in flight still moves everything", sizes(32, 256<<10), 64 << 10, EngineSpec{Rails: 1, Window: 1}},
		{"the smallest slices (4 KiB) over 8 rails", sizes(16, 100000), 50000, EngineSpec{Rails: 8, SliceBytes: 4 << 10, Window: 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, transfer.ServerSpec{})
			e := newEngine(t, c.spec)
			src := newSource(t, srv, c.sizes, c.chunk, time.Now().Add(time.Minute))
			h, err := e.OpenSegment(srv.Addr(), src.id, src.cap)
			if err != nil {
				t.Fatal(err)
			}
			reqs, _ := src.requests(t, e, h)
			b, err := submitAndWait(t, e, reqs, 20*time.Second)
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			for i, st := range e.Status(b) {
				if st.State != Done || st.Err != nil {
					t.Errorf("request %d: %v %v, want done", i, st.State, st.Err)
				}
			}
			src.verify(t, reqs)
			e.FreeBatch(b)
			if e.Status(b) != nil {
				t.Error("Status of a freed batch is not nil")
			}
		})
	}
}

func TestConsecutiveRequestsTravelPackedIntoFullSlices(t *testing.T) {
	cases := []struct {
		name       string
		sizes      []int
		scatter    bool
		wantSlices uint64
	}{
		{"128 blocks of 64 KiB in a row make 32 slices of 256 KiB", repeat(128, 64<<10), false, 32},
		{"they do so with destinations scattered over the arena", repeat(128, 64<<10), true, 32},
		{"blocks of 100,000 bytes share slices across their boundaries", repeat(10, 100000), true, 4},
		{"one block larger than a slice is cut, not packed", []int{1<<20 + 1}, false, 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, transfer.ServerSpec{})
			e := newEngine(t, EngineSpec{})
			src := newSource(t, srv, c.sizes, 32<<10, time.Now().Add(time.Minute))
			h, _ := e.OpenSegment(srv.Addr(), src.id, src.cap)
			var reqs []Request
			if c.scatter {
				reqs = src.scatteredRequests(t, e, h)
			} else {
				reqs, _ = src.requests(t, e, h)
			}
			b, err := submitAndWait(t, e, reqs, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			e.FreeBatch(b)
			src.verify(t, reqs)
			if n := e.Stats().Slices; n != c.wantSlices {
				t.Errorf("%d slices, want %d", n, c.wantSlices)
			}
		})
	}
}

func repeat(n, size int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = size
	}
	return out
}

func TestSlicesSpreadOverEveryRail(t *testing.T) {
	srv := newServer(t, transfer.ServerSpec{})
	e := newEngine(t, EngineSpec{Rails: 4, SliceBytes: 64 << 10})
	src := newSource(t, srv, []int{16 << 20}, 1<<20, time.Now().Add(time.Minute))
	h, _ := e.OpenSegment(srv.Addr(), src.id, src.cap)
	reqs, _ := src.requests(t, e, h)
	b, err := submitAndWait(t, e, reqs, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer e.FreeBatch(b)
	src.verify(t, reqs)
	rails := e.batches[b].eps[0].rails
	if len(rails) != 4 {
		t.Fatalf("%d rails open, want 4", len(rails))
	}
	var sum uint64
	for i, r := range rails {
		n := r.count.Load()
		sum += n
		if n == 0 {
			t.Errorf("rail %d carried no slice of 256 (each carried %v)", i, railCounts(rails))
		}
	}
	if sum != 256 {
		t.Errorf("rails carried %d slices in all, want 256 (16 MiB / 64 KiB)", sum)
	}
}

func railCounts(rails []*rail) []uint64 {
	var out []uint64
	for _, r := range rails {
		out = append(out, r.count.Load())
	}
	return out
}

func TestARailKilledMidTransferIsRetriedOnAnother(t *testing.T) {
	srv := newServer(t, transfer.ServerSpec{})
	var killed atomic.Bool
	// The first data connection to carry 1 MiB + 128 KiB towards the
	// requester dies: in the middle of the DATA of its fifth 256 KiB slice
	// (the proxy forwards at most 32 KiB at a time).
	p := newProxy(t, srv.Addr(), func(p *proxy, pc *proxyConn, total int64) {
		if pc.down.Load() >= 1<<20+128<<10 && !killed.Swap(true) {
			pc.kill()
		}
	})
	e := newEngine(t, EngineSpec{Rails: 4})
	src := newSource(t, srv, []int{4 << 20, 4 << 20, 4 << 20, 4 << 20}, 1<<20, time.Now().Add(time.Minute))
	h, _ := e.OpenSegment(p.addr(), src.id, src.cap)
	reqs, _ := src.requests(t, e, h)
	b, err := submitAndWait(t, e, reqs, 20*time.Second)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	defer e.FreeBatch(b)
	src.verify(t, reqs)
	if !killed.Load() {
		t.Fatal("the proxy never killed a rail: the test did not test anything")
	}
	st := e.Stats()
	if st.RailFailures != 1 || st.Retries == 0 {
		t.Errorf("stats %+v: want 1 rail failure and its slices retried", st)
	}
}

func TestLosingEveryRailAtOnceRedialsThem(t *testing.T) {
	t.Run("every rail cut mid-transfer, the source still listening: the batch completes on new rails", func(t *testing.T) {
		srv := newServer(t, transfer.ServerSpec{})
		var cut atomic.Bool
		p := newProxy(t, srv.Addr(), func(p *proxy, pc *proxyConn, total int64) {
			if total >= 3<<20 && !cut.Swap(true) {
				p.cutAll()
			}
		})
		e := newEngine(t, EngineSpec{Rails: 4})
		src := newSource(t, srv, repeat(8, 2<<20), 1<<20, time.Now().Add(time.Minute))
		h, _ := e.OpenSegment(p.addr(), src.id, src.cap)
		reqs, _ := src.requests(t, e, h)
		b, err := submitAndWait(t, e, reqs, 10*time.Second)
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		defer e.FreeBatch(b)
		if !cut.Load() {
			t.Fatal("the proxy never cut the rails")
		}
		src.verify(t, reqs)
		if st := e.Stats(); st.Dials < 8 || st.RailFailures < 4 {
			t.Errorf("stats %+v: want 4 rails lost and dialled again", st)
		}
	})
	t.Run("rails the source closed as idle are dialled again by the next batch", func(t *testing.T) {
		srv := newServer(t, transfer.ServerSpec{IdleTimeout: 20 * time.Millisecond})
		e := newEngine(t, EngineSpec{Rails: 2})
		src := newSource(t, srv, repeat(4, 256<<10), 256<<10, time.Now().Add(time.Minute))
		h, _ := e.OpenSegment(srv.Addr(), src.id, src.cap)
		for round := range 2 {
			reqs, _ := src.requests(t, e, h)
			b, err := submitAndWait(t, e, reqs, 5*time.Second)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			src.verify(t, reqs)
			e.FreeBatch(b)
			time.Sleep(100 * time.Millisecond) // the source closes the idle rails
		}
		if st := e.Stats(); st.Dials != 4 {
			t.Errorf("%d rails dialled, want 2 per round", st.Dials)
		}
	})
}

func TestAServerThatDiesMidTransferFailsTheBatchInTime(t *testing.T) {
	cases := []struct {
		name string
		// hook acts once the proxy forwarded 2 MiB
		act     func(p *proxy)
		timeout time.Duration
		want    error
	}{
		{"a killed server (every connection cut, nothing listening) fails at once with a rail error",
			func(p *proxy) { p.closeAsync() }, 10 * time.Second, ErrRail},
		{"a hung server (nothing more arrives) fails at the ctx deadline",
			func(p *proxy) { p.frozen.Store(true) }, 300 * time.Millisecond, context.DeadlineExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(t, transfer.ServerSpec{})
			var acted atomic.Bool
			p := newProxy(t, srv.Addr(), func(p *proxy, pc *proxyConn, total int64) {
				if total >= 2<<20 && !acted.Swap(true) {
					c.act(p)
				}
			})
			e := newEngine(t, EngineSpec{})
			src := newSource(t, srv, []int{8 << 20, 8 << 20, 8 << 20, 8 << 20}, 1<<20, time.Now().Add(time.Minute))
			h, _ := e.OpenSegment(p.addr(), src.id, src.cap)
			reqs, arena := src.requests(t, e, h)
			start := time.Now()
			b, err := submitAndWait(t, e, reqs, c.timeout)
			took := time.Since(start)
			if !errors.Is(err, c.want) {
				t.Fatalf("Wait: %v, want %v", err, c.want)
			}
			if took > c.timeout+time.Second {
				t.Errorf("Wait returned after %v, the deadline was %v", took, c.timeout)
			}
			failed := 0
			for _, st := range e.Status(b) {
				if st.State == Failed {
					failed++
				}
			}
			if failed == 0 {
				t.Error("no request is Failed after Wait returned an error")
			}
			// Dst is never written after Wait: thaw the proxy, give any
			// stray bytes time to arrive, and compare.
			snap := string(arena)
			p.frozen.Store(false)
			time.Sleep(100 * time.Millisecond)
			if string(arena) != snap {
				t.Error("Dst changed after Wait returned")
			}
			e.FreeBatch(b)
		})
	}
}

func TestNoGoroutineOutlivesAClosedEngineAndServer(t *testing.T) {
	// A goroutine leak shows up in TestMain (goleak) too; this test makes
	// it visible here, after a failed transfer, the hardest case.
	before := runtime.NumGoroutine()
	srv, err := transfer.Listen(transfer.ServerSpec{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine(EngineSpec{Rails: 4})
	if err != nil {
		t.Fatal(err)
	}
	src := newSource(t, srv, []int{8 << 20}, 1<<20, time.Now().Add(time.Minute))
	h, _ := e.OpenSegment(srv.Addr(), src.id, src.cap)
	reqs, _ := src.requests(t, e, h)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := e.SubmitTransfer(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close() // mid-transfer or just after: either way Wait returns
	_ = e.Wait(ctx, b)
	e.FreeBatch(b)
	e.Close()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after closing, %d before", n, before)
	}
}

func TestTheSourceRefusesBadReads(t *testing.T) {
	srv := newServer(t, transfer.ServerSpec{})
	src := newSource(t, srv, []int{64 << 10}, 64<<10, time.Now().Add(time.Minute))
	short := newSource(t, srv, []int{64 << 10}, 64<<10, time.Now().Add(50*time.Millisecond))
	time.Sleep(100 * time.Millisecond)
	wrong := src.cap
	wrong[0] ^= 1
	cases := []struct {
		name string
		id   uint64
		cap  transfer.Capability
		off  uint64
		want []error
	}{
		{"a wrong capability is refused as an unknown segment", src.id, wrong, 0, []error{transfer.ErrUnknownSegment}},
		{"an unknown segment is refused", 999, src.cap, 0, []error{transfer.ErrUnknownSegment}},
		{"an expired segment is refused", short.id, short.cap, 0, []error{transfer.ErrExpired, transfer.ErrUnknownSegment}},
		{"a range past the segment's end is refused", src.id, src.cap, 1, []error{transfer.ErrOutOfRange}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, EngineSpec{})
			h, _ := e.OpenSegment(srv.Addr(), c.id, c.cap)
			arena := make([]byte, 64<<10)
			e.RegisterLocalMemory(arena)
			b, err := submitAndWait(t, e, []Request{{Segment: h, Offset: c.off, Dst: arena}}, 5*time.Second)
			ok := false
			for _, w := range c.want {
				ok = ok || errors.Is(err, w)
			}
			if !ok {
				t.Fatalf("Wait: %v, want one of %v", err, c.want)
			}
			if st := e.Status(b); st[0].State != Failed {
				t.Errorf("request is %v, want failed", st[0].State)
			}
			if e.Stats().RailFailures != 0 {
				t.Error("a refusal killed the rail; it should only fail the request")
			}
			e.FreeBatch(b)
		})
	}
}

func TestTheEndpointPoolStaysWithinItsBound(t *testing.T) {
	e := newEngine(t, EngineSpec{Rails: 2, MaxEndpoints: 2})
	var srvs []*transfer.Server
	for i := range 4 {
		srv := newServer(t, transfer.ServerSpec{})
		srvs = append(srvs, srv)
		src := newSource(t, srv, []int{64 << 10}, 64<<10, time.Now().Add(time.Minute))
		h, _ := e.OpenSegment(srv.Addr(), src.id, src.cap)
		reqs, _ := src.requests(t, e, h)
		b, err := submitAndWait(t, e, reqs, 5*time.Second)
		if err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
		src.verify(t, reqs)
		e.FreeBatch(b)
		if st := e.Stats(); st.Endpoints > 2 || st.Rails > 4 {
			t.Fatalf("after server %d: %d endpoints, %d rails; the bound is 2 endpoints of 2 rails", i, st.Endpoints, st.Rails)
		}
	}
	// The evicted servers' connections were closed by the requester.
	deadline := time.Now().Add(2 * time.Second)
	for _, srv := range srvs[:2] {
		for srv.Stats().Conns != 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if n := srv.Stats().Conns; n != 0 {
			t.Errorf("an evicted peer still has %d data connections", n)
		}
	}
}

func TestOnConnSeesEveryDataConnectionOnBothSides(t *testing.T) {
	var served atomic.Int32
	srv := newServer(t, transfer.ServerSpec{OnConn: func(net.Conn) { served.Add(1) }})
	var dialled atomic.Int32
	var peers atomic.Value
	e := newEngine(t, EngineSpec{Rails: 3, OnConn: func(c net.Conn, peer string) {
		if _, ok := c.(*net.TCPConn); ok {
			dialled.Add(1)
		}
		peers.Store(peer)
	}})
	src := newSource(t, srv, []int{1 << 20}, 1<<20, time.Now().Add(time.Minute))
	h, _ := e.OpenSegment(srv.Addr(), src.id, src.cap)
	reqs, _ := src.requests(t, e, h)
	b, err := submitAndWait(t, e, reqs, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e.FreeBatch(b)
	if dialled.Load() != 3 || peers.Load() != srv.Addr() {
		t.Errorf("requester OnConn saw %d TCP connections to %v, want 3 to %s", dialled.Load(), peers.Load(), srv.Addr())
	}
	for deadline := time.Now().Add(2 * time.Second); served.Load() != 3 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if served.Load() != 3 {
		t.Errorf("source OnConn saw %d connections, want 3", served.Load())
	}
}

func TestSubmitTransferRefusesBadRequests(t *testing.T) {
	srv := newServer(t, transfer.ServerSpec{})
	e := newEngine(t, EngineSpec{})
	h, _ := e.OpenSegment(srv.Addr(), 1, transfer.Capability{})
	arena := make([]byte, 4096)
	e.RegisterLocalMemory(arena)
	outside := make([]byte, 10)
	cases := []struct {
		name string
		reqs []Request
		want string
	}{
		{"no requests", nil, "0 requests"},
		{"an unknown handle", []Request{{Segment: 99, Dst: arena}}, "unknown segment handle"},
		{"an empty Dst", []Request{{Segment: h, Dst: arena[:0]}}, "Dst is empty"},
		{"a Dst outside registered memory", []Request{{Segment: h, Dst: outside}}, "outside registered memory"},
		{"a Dst that runs past registered memory", []Request{{Segment: h, Dst: append(arena[:4096:4096], 1)}}, "outside registered memory"},
		{"an offset that overflows", []Request{{Segment: h, Offset: ^uint64(0), Dst: arena}}, "overflows"},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused", func(t *testing.T) {
			_, err := e.SubmitTransfer(context.Background(), c.reqs)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("SubmitTransfer: %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestSpecsNameTheFieldOutsideItsLimit(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"zero rails cannot be negative", (&EngineSpec{Rails: -1}).Validate(), "requester.EngineSpec.Rails -1: want 1..64"},
		{"a slice below 4 KiB", (&EngineSpec{SliceBytes: 100}).Validate(), "requester.EngineSpec.SliceBytes 100 bytes: want 4KiB..16MiB"},
		{"a slice above the wire's bound", (&EngineSpec{SliceBytes: 32 << 20}).Validate(), "requester.EngineSpec.SliceBytes 32MiB"},
		{"a window of 100", (&EngineSpec{Window: 100}).Validate(), "requester.EngineSpec.Window 100: want 1..64"},
	}
	for _, c := range cases {
		t.Run(c.name+" is refused", func(t *testing.T) {
			if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
				t.Fatalf("Validate: %v, want %q", c.err, c.want)
			}
		})
	}
}

func TestCloseDuringBatchesEndsThemAndWritesNothingAfter(t *testing.T) {
	srv := newServer(t, transfer.ServerSpec{})
	e, err := NewEngine(EngineSpec{})
	if err != nil {
		t.Fatal(err)
	}
	src := newSource(t, srv, repeat(16, 1<<20), 1<<20, time.Now().Add(time.Minute))
	h, _ := e.OpenSegment(srv.Addr(), src.id, src.cap)
	type worker struct {
		reqs  []Request
		arena []byte
	}
	var ws []worker
	for range 4 {
		reqs, arena := src.requests(t, e, h)
		ws = append(ws, worker{reqs, arena})
	}
	done := make(chan error, len(ws))
	for _, w := range ws {
		go func() {
			for {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				b, err := e.SubmitTransfer(ctx, w.reqs)
				if err == nil {
					err = e.Wait(ctx, b)
					e.FreeBatch(b)
				}
				cancel()
				if errors.Is(err, transfer.ErrClosed) {
					done <- nil
					return
				}
				if err != nil && !errors.Is(err, ErrRail) && !errors.Is(err, ErrUnknownBatch) {
					done <- err
					return
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	snaps := make([]string, len(ws))
	for i, w := range ws {
		snaps[i] = string(w.arena)
	}
	for range ws {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("a worker saw %v, want transfer.ErrClosed (or a rail error from the close)", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a worker is still running 5 s after Close")
		}
	}
	time.Sleep(20 * time.Millisecond)
	for i, w := range ws {
		if string(w.arena) != snaps[i] {
			t.Errorf("arena %d changed after Close returned", i)
		}
	}
}

func TestFreeBatchOfARunningBatchReturnsAndWritesNothingAfter(t *testing.T) {
	srv := newServer(t, transfer.ServerSpec{})
	var froze atomic.Bool
	p := newProxy(t, srv.Addr(), func(p *proxy, pc *proxyConn, total int64) {
		if total >= 1<<20 && !froze.Swap(true) {
			p.frozen.Store(true)
		}
	})
	e := newEngine(t, EngineSpec{})
	src := newSource(t, srv, repeat(8, 1<<20), 1<<20, time.Now().Add(time.Minute))
	h, _ := e.OpenSegment(p.addr(), src.id, src.cap)
	reqs, arena := src.requests(t, e, h)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := e.SubmitTransfer(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); !froze.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the transfer never reached the freeze")
		}
	}
	done := e.Done(b)
	select {
	case <-done:
		t.Fatal("the batch ended while its source was frozen")
	default:
	}
	start := time.Now()
	e.FreeBatch(b)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("FreeBatch of a running batch took %v", d)
	}
	select {
	case <-done:
	default:
		t.Error("the batch's Done channel is open after FreeBatch")
	}
	snap := string(arena)
	p.frozen.Store(false)
	time.Sleep(100 * time.Millisecond)
	if string(arena) != snap {
		t.Error("Dst changed after FreeBatch returned")
	}
	if err := e.Wait(context.Background(), b); !errors.Is(err, ErrUnknownBatch) {
		t.Errorf("Wait after FreeBatch: %v, want ErrUnknownBatch", err)
	}
}
