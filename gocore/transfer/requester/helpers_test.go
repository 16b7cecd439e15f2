package requester

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orbitkv/orbitkv/gocore/transfer"
	"github.com/orbitkv/orbitkv/internal/fdcheck"
)

// TestMain fails the run when the tests leave descriptors open or
// goroutines running (every Server and Engine a test makes is closed).
func TestMain(m *testing.M) {
	code := fdcheck.Run(m, "transfer", 2*time.Second, nil)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("transfer test: goroutines left running: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// pattern is n bytes drawn from seed: two different seeds give different
// bytes, so a block read from the wrong place is caught.
func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newServer(t *testing.T, s transfer.ServerSpec) *transfer.Server {
	t.Helper()
	if s.Addr == "" {
		s.Addr = "127.0.0.1:0"
	}
	srv, err := transfer.Listen(s)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func newEngine(t *testing.T, s EngineSpec) *Engine {
	t.Helper()
	e, err := NewEngine(s)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// source is a segment of blocks, each block one or more chunks of bufs.
type source struct {
	blocks [][]byte // each block's bytes, contiguous (the expected content)
	offs   []uint64 // each block's offset in the segment
	bufs   [][]byte // what was registered: every block cut into chunks
	id     uint64
	cap    transfer.Capability
}

// newSource registers blocks of the given sizes, each cut into chunks of
// at most chunk bytes, as one segment of srv.
func newSource(t *testing.T, srv *transfer.Server, sizes []int, chunk int, deadline time.Time) *source {
	t.Helper()
	src := &source{}
	var off uint64
	for i, n := range sizes {
		b := pattern(n, uint64(i)+1)
		src.blocks, src.offs = append(src.blocks, b), append(src.offs, off)
		for c := 0; c < n; c += chunk {
			src.bufs = append(src.bufs, b[c:min(c+chunk, n)])
		}
		off += uint64(n)
	}
	var err error
	if src.id, src.cap, err = srv.RegisterSegment(src.bufs, deadline); err != nil {
		t.Fatalf("RegisterSegment: %v", err)
	}
	return src
}

// requests are one request per block of src into a fresh registered arena.
func (src *source) requests(t *testing.T, e *Engine, h SegmentHandle) ([]Request, []byte) {
	t.Helper()
	var total int
	for _, b := range src.blocks {
		total += len(b)
	}
	arena := make([]byte, total)
	if err := e.RegisterLocalMemory(arena); err != nil {
		t.Fatalf("RegisterLocalMemory: %v", err)
	}
	var reqs []Request
	for i, b := range src.blocks {
		o := int(src.offs[i])
		reqs = append(reqs, Request{Segment: h, Offset: src.offs[i], Dst: arena[o : o+len(b)]})
	}
	return reqs, arena
}

// scatteredRequests are requests like requests', each Dst at the mirror
// place of the arena (the last block first), so no two consecutive
// requests have adjacent destinations.
func (src *source) scatteredRequests(t *testing.T, e *Engine, h SegmentHandle) []Request {
	t.Helper()
	reqs, arena := src.requests(t, e, h)
	end := len(arena)
	for i := range reqs {
		n := len(reqs[i].Dst)
		reqs[i].Dst = arena[end-n : end]
		end -= n
	}
	return reqs
}

// verify fails t for each request whose Dst differs from its block.
func (src *source) verify(t *testing.T, reqs []Request) {
	t.Helper()
	for i, r := range reqs {
		if string(r.Dst) != string(src.blocks[i]) {
			t.Errorf("block %d (%d bytes at offset %d) arrived with different bytes", i, len(r.Dst), r.Offset)
		}
	}
}

// submitAndWait submits reqs and waits with timeout; it returns Wait's error.
func submitAndWait(t *testing.T, e *Engine, reqs []Request, timeout time.Duration) (BatchID, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	b, err := e.SubmitTransfer(ctx, reqs)
	if err != nil {
		t.Fatalf("SubmitTransfer: %v", err)
	}
	return b, e.Wait(context.Background(), b)
}

// proxy forwards TCP connections to a target; a hook sees the bytes each
// connection carries from the target back to the client and can kill a
// connection, kill everything, or freeze the flow (a hung server).
type proxy struct {
	ln     net.Listener
	target string
	// hook runs after each chunk forwarded towards the client, with the
	// connection and the bytes forwarded over all connections so far.
	hook   func(p *proxy, pc *proxyConn, total int64)
	total  atomic.Int64
	frozen atomic.Bool
	closed atomic.Bool

	mu    sync.Mutex
	conns []*proxyConn
	wg    sync.WaitGroup
}

type proxyConn struct {
	id             int
	client, server net.Conn
	down           atomic.Int64 // bytes forwarded towards the client
	once           sync.Once
}

func (pc *proxyConn) kill() {
	pc.once.Do(func() { pc.client.Close(); pc.server.Close() })
}

func newProxy(t *testing.T, target string, hook func(*proxy, *proxyConn, int64)) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, hook: hook}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		pc := &proxyConn{id: len(p.conns), client: c, server: s}
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		if p.closed.Load() {
			pc.kill()
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			// Hidden behind io.Reader: TCP to TCP would splice(2) through
			// pipes the runtime caches, which the fd check counts as leaked.
			io.Copy(s, struct{ io.Reader }{c})
			pc.kill()
		}()
		go func() {
			defer p.wg.Done()
			p.down(pc)
			pc.kill()
		}()
	}
}

func (p *proxy) down(pc *proxyConn) {
	buf := make([]byte, 32<<10)
	for {
		for p.frozen.Load() {
			if p.closed.Load() {
				return
			}
			time.Sleep(time.Millisecond)
		}
		n, err := pc.server.Read(buf)
		if n > 0 {
			if _, werr := pc.client.Write(buf[:n]); werr != nil {
				return
			}
			pc.down.Add(int64(n))
			if p.hook != nil {
				p.hook(p, pc, p.total.Add(int64(n)))
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops accepting and kills every connection.
func (p *proxy) close() {
	if p.closed.Swap(true) {
		p.wg.Wait()
		return
	}
	p.ln.Close()
	p.mu.Lock()
	for _, pc := range p.conns {
		pc.kill()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// cutAll kills every connection so far and goes on accepting new ones
// (a network blip; safe from a hook).
func (p *proxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.conns {
		pc.kill()
	}
}

// closeAsync is close from a hook (which runs on a proxy goroutine).
func (p *proxy) closeAsync() {
	if p.closed.Swap(true) {
		return
	}
	p.ln.Close()
	p.mu.Lock()
	for _, pc := range p.conns {
		pc.kill()
	}
	p.mu.Unlock()
}

// isErr reports whether err wraps target.
func isErr(err, target error) bool { return errors.Is(err, target) }
