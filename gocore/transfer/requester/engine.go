package requester

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/transfer"
)

// DefaultSliceBytes is the default EngineSpec.SliceBytes: 256 KiB, the
// smaller of the two best slice sizes measured for 1–4 MiB blocks on
// loopback (bench/transfer/README.md has the sweep): smaller slices pay a
// 64-byte header, a READ's trip and two goroutine wake-ups per slice and
// lose to a plain stream; larger ones gain nothing and leave a batch fewer
// slices to spread over the rails, and a slice is the unit a failed rail
// sends again.
const DefaultSliceBytes = 256 << 10

// Limits of EngineSpec; 0 stands for the default in each.
var (
	RailsRange          = limit.Range[int]{Field: "requester.EngineSpec.Rails", Min: 1, Max: 64, Zero: limit.Format(DefaultRails)}
	SliceBytesRange     = limit.Range[int]{Field: "requester.EngineSpec.SliceBytes", Min: 4 << 10, Max: transfer.MaxSliceBytes, Bytes: true, Zero: limit.Size(DefaultSliceBytes)}
	WindowRange         = limit.Range[int]{Field: "requester.EngineSpec.Window", Min: 1, Max: 64, Zero: limit.Format(DefaultWindow)}
	MaxEndpointsRange   = limit.Range[int]{Field: "requester.EngineSpec.MaxEndpoints", Min: 1, Max: 4096, Zero: limit.Format(DefaultMaxEndpoints)}
	RetriesRange        = limit.Range[int]{Field: "requester.EngineSpec.Retries", Min: 1, Max: 16, Zero: limit.Format(DefaultRetries)}
	DialTimeoutRange    = limit.Range[time.Duration]{Field: "requester.EngineSpec.DialTimeout", Min: time.Millisecond, Max: time.Minute, Zero: limit.Format(DefaultDialTimeout)}
	DefaultTimeoutRange = limit.Range[time.Duration]{Field: "requester.EngineSpec.DefaultTimeout", Min: time.Millisecond, Max: time.Hour, Zero: limit.Format(DefaultBatchTimeout)}
)

// The defaults of the other EngineSpec fields, each what a 0 there stands
// for.
const (
	// DefaultRails is the default EngineSpec.Rails: 4 data connections
	// per peer.
	DefaultRails = 4
	// DefaultWindow is the default EngineSpec.Window: 2 slices in flight
	// per rail, so a rail has the next slice's READ sent while the DATA
	// of one is read.
	DefaultWindow = 2
	// DefaultMaxEndpoints is the default EngineSpec.MaxEndpoints: 64
	// peers with open rails.
	DefaultMaxEndpoints = 64
	// DefaultRetries is the default EngineSpec.Retries: a slice is sent
	// again at most 3 times.
	DefaultRetries = 3
	// DefaultDialTimeout is the default EngineSpec.DialTimeout: 3 s per
	// rail dialled.
	DefaultDialTimeout = 3 * time.Second
	// DefaultBatchTimeout is the default EngineSpec.DefaultTimeout: 10 s
	// for a batch whose ctx has no deadline.
	DefaultBatchTimeout = 10 * time.Second
)

// MaxBatchRequests bounds the requests of one SubmitTransfer.
const MaxBatchRequests = 1 << 16

// EngineSpec describes the requester side. Zero fields take their
// defaults.
type EngineSpec struct {
	// Rails is the number of data connections per peer. Default
	// DefaultRails (4).
	Rails int
	// SliceBytes is the most bytes one READ asks for: a request's Dst is
	// cut into slices of this size, spread over the rails. Default
	// DefaultSliceBytes (256 KiB).
	SliceBytes int
	// Window is the number of slices in flight on one rail (READs sent,
	// their DATA not yet read). Default DefaultWindow (2). Rails × Window slices of one
	// peer are in flight at most.
	Window int
	// MaxEndpoints bounds the pool of peers with open rails; the SIEVE
	// policy evicts one beyond it (its rails close once the batches using
	// it are freed). Default 64.
	MaxEndpoints int
	// Retries is how many times a slice whose rail failed is sent again,
	// on another rail. Default 3.
	Retries int
	// DialTimeout bounds the dial of one rail. Default 3 s.
	DialTimeout time.Duration
	// DefaultTimeout is the deadline of a batch whose ctx has none.
	// Default 10 s.
	DefaultTimeout time.Duration
	// OnConn, when set, is called with each data connection right after
	// it is dialled, and peer, the address dialled (the Manager registers
	// it with the eBPF probes). It must not keep or use conn for I/O.
	OnConn func(conn net.Conn, peer string)
	// Logger gets rail failures at Debug level; nil discards.
	Logger *slog.Logger
}

// Validate checks the spec; each error names the field and its limit.
func (s *EngineSpec) Validate() error {
	return errors.Join(RailsRange.Check(s.Rails), SliceBytesRange.Check(s.SliceBytes), WindowRange.Check(s.Window),
		MaxEndpointsRange.Check(s.MaxEndpoints), RetriesRange.Check(s.Retries),
		DialTimeoutRange.Check(s.DialTimeout), DefaultTimeoutRange.Check(s.DefaultTimeout))
}

func (s *EngineSpec) withDefaults() EngineSpec {
	o := *s
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Rails = cmp.Or(o.Rails, DefaultRails)
	o.SliceBytes = cmp.Or(o.SliceBytes, DefaultSliceBytes)
	o.Window = cmp.Or(o.Window, DefaultWindow)
	o.MaxEndpoints = cmp.Or(o.MaxEndpoints, DefaultMaxEndpoints)
	o.Retries = cmp.Or(o.Retries, DefaultRetries)
	o.DialTimeout = cmp.Or(o.DialTimeout, DefaultDialTimeout)
	o.DefaultTimeout = cmp.Or(o.DefaultTimeout, DefaultBatchTimeout)
	return o
}

// SegmentHandle names a segment opened with OpenSegment; 0 is none.
type SegmentHandle uint64

// BatchID names a submitted batch; 0 is none.
type BatchID uint64

// State is where one request of a batch stands.
type State uint8

// The states of a request.
const (
	Pending State = iota // slices still in flight
	Done                 // every byte of Dst written
	Failed               // Status.Err says why; Dst holds unspecified bytes
)

// String names the state.
func (s State) String() string {
	return [...]string{"pending", "done", "failed"}[min(int(s), 2)]
}

// Status is one request's state; Err is set when Failed.
type Status struct {
	State State
	Err   error
}

// Request is one READ of a transfer batch: len(Dst) bytes at Offset of
// the segment land in Dst, which must lie in registered local memory.
type Request struct {
	Segment SegmentHandle
	Offset  uint64
	Dst     []byte
}

// segRef is what an open SegmentHandle stands for.
type segRef struct {
	addr string
	id   uint64
	cap  transfer.Capability
}

// Engine is the requester side: it reads registered segments of peers
// into registered local memory over a pool of endpoints, each a set of
// rails. Safe for concurrent use.
type Engine struct {
	spec   EngineSpec
	wg     sync.WaitGroup     // every rail's two goroutines, and redials
	ctx    context.Context    // ends at Close: bounds redials
	cancel context.CancelFunc // ends ctx

	mu         sync.Mutex
	closed     bool
	pool       *sieve[string, *endpoint]
	live       map[*endpoint]struct{} // pooled, and evicted ones still in use
	handles    map[SegmentHandle]segRef
	nextHandle SegmentHandle
	batches    map[BatchID]*batch
	nextBatch  BatchID
	regions    []region

	nextTag                         atomic.Uint64
	slices, retries, dials, failure atomic.Uint64
}

// region is registered local memory [start, end).
type region struct{ start, end uintptr }

func span(b []byte) region {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return region{p, p + uintptr(len(b))}
}

// NewEngine validates s and makes an Engine; rails are dialled on the
// first batch that reads a peer.
func NewEngine(s EngineSpec) (*Engine, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	sp := s.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Engine{spec: sp, ctx: ctx, cancel: cancel, pool: newSieve[string, *endpoint](sp.MaxEndpoints), live: map[*endpoint]struct{}{},
		handles: map[SegmentHandle]segRef{}, batches: map[BatchID]*batch{}}, nil
}

// RegisterLocalMemory makes buf a destination of requests (the RAM tier's
// arena): every request's Dst must lie inside one registered buffer. buf
// must stay allocated until UnregisterLocalMemory or Close. Errors: an
// empty buf, one that overlaps a registered buffer, ErrClosed.
func (e *Engine) RegisterLocalMemory(buf []byte) error {
	if len(buf) == 0 {
		return limit.Check(false, "transfer.RegisterLocalMemory buf (bytes)", 0, "≥ 1")
	}
	r := span(buf)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return transfer.ErrClosed
	}
	for _, o := range e.regions {
		if r.start < o.end && o.start < r.end {
			return fmt.Errorf("transfer: RegisterLocalMemory: [%#x, %#x) overlaps registered [%#x, %#x)", r.start, r.end, o.start, o.end)
		}
	}
	e.regions = append(e.regions, r)
	return nil
}

// UnregisterLocalMemory forgets buf, registered before; batches submitted
// later may not write it. Batches already submitted are the caller's to
// wait for or free first.
func (e *Engine) UnregisterLocalMemory(buf []byte) error {
	r := span(buf)
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, o := range e.regions {
		if o == r {
			e.regions = append(e.regions[:i], e.regions[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("%w: [%#x, %#x) was not registered", ErrUnregistered, r.start, r.end)
}

func (e *Engine) registered(dst []byte) bool {
	r := span(dst)
	for _, o := range e.regions {
		if r.start >= o.start && r.end <= o.end {
			return true
		}
	}
	return false
}

// OpenSegment names segment id of the Server at addr (host:port), readable
// with cap, for requests; nothing is dialled until a batch reads it.
// Errors: a malformed addr, id 0, ErrClosed.
func (e *Engine) OpenSegment(addr string, id uint64, cap transfer.Capability) (SegmentHandle, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return 0, limit.Check(false, "transfer.OpenSegment addr", addr, "host:port")
	}
	if id == 0 {
		return 0, limit.Check(false, "transfer.OpenSegment id", id, "≥ 1")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return 0, transfer.ErrClosed
	}
	e.nextHandle++
	e.handles[e.nextHandle] = segRef{addr: addr, id: id, cap: cap}
	return e.nextHandle, nil
}

// CloseSegment forgets h; batches already submitted on it go on.
func (e *Engine) CloseSegment(h SegmentHandle) {
	e.mu.Lock()
	delete(e.handles, h)
	e.mu.Unlock()
}

// EngineStats are counters since NewEngine.
type EngineStats struct {
	Endpoints    int    // endpoints in the pool now
	Rails        int    // rails open now, over every endpoint
	Slices       uint64 // slices read into Dst
	Retries      uint64 // slices sent again after their rail failed
	Dials        uint64 // rails dialled
	RailFailures uint64 // rails that failed (read, write, a frame out of order)
}

// Stats returns the counters.
func (e *Engine) Stats() EngineStats {
	e.mu.Lock()
	st := EngineStats{Endpoints: e.pool.Len()}
	for ep := range e.live {
		ep.mu.Lock()
		st.Rails += len(ep.rails)
		ep.mu.Unlock()
	}
	e.mu.Unlock()
	st.Slices, st.Retries, st.Dials, st.RailFailures = e.slices.Load(), e.retries.Load(), e.dials.Load(), e.failure.Load()
	return st
}

// Close fails every batch not ended (ErrClosed), closes every rail and
// waits for the Engine's goroutines: after it returns no Dst is written.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.cancel()
	bs := make([]*batch, 0, len(e.batches))
	for _, b := range e.batches {
		bs = append(bs, b)
	}
	eps := make([]*endpoint, 0, len(e.live))
	for ep := range e.live {
		eps = append(eps, ep)
	}
	e.mu.Unlock()
	for _, b := range bs {
		b.abort(transfer.ErrClosed)
	}
	for _, ep := range eps {
		ep.close(transfer.ErrClosed)
	}
	for _, b := range bs {
		<-b.done
		b.cancel()
	}
	e.wg.Wait()
	return nil
}
