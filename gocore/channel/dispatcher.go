package channel

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/session"
)

// PollMode is how the dispatcher waits for requests: spin, adaptive (the
// default) or park; see native/src/server.h.
type PollMode = native.PollMode

// Poll modes.
const (
	PollSpin     = native.PollSpin
	PollAdaptive = native.PollAdaptive
	PollPark     = native.PollPark
)

// ParsePollMode parses the --poll-mode flag value: spin, adaptive or park.
func ParsePollMode(s string) (PollMode, error) { return native.ParsePollMode(s) }

// ErrStopped is returned by Attach after the dispatcher stopped.
var ErrStopped = errors.New("channel: dispatcher stopped")

// Spec configures a Dispatcher; a plain value.
type Spec struct {
	Epoch       uint64
	MaxSessions uint32        // ≤ abi.ControlSlot
	PollMode    PollMode      // spin, adaptive or park (zero value: spin)
	SpinWindow  time.Duration // adaptive: spin this long after the last request
	MaxBatch    int           // events per crossing; default 64
	Logger      *slog.Logger
	// Transport of the 64-byte messages (zero value: shm). Iceoryx2 needs
	// a build with it (Iceoryx2Built).
	Transport Transport
	// ServicePrefix starts every session's iceoryx2 service name
	// (PREFIX/EPOCH/TOKEN); "" means DefaultServicePrefix. Iceoryx2 only.
	ServicePrefix string
}

// Handler serves the cache commands (gocore/cache.Service implements it);
// every method runs on the dispatcher goroutine. Without one (SetHandler
// never called) the dispatcher answers them Unsupported.
type Handler interface {
	// Attach starts serving sess; Detach tears it down and calls drained
	// once nothing of the handler touches sess's memory any more.
	Attach(sess *session.Session)
	Detach(sess *session.Session, drained func())
	// Serve serves one validated request; ok=false defers the response,
	// which Complete posts later. m is passed by value so that the
	// dispatcher's request does not escape to the heap through the
	// interface call (the hot path allocates nothing).
	Serve(sess *session.Session, m abi.Message) (resp abi.Message, ok bool)
	// Complete applies finished work on a control event, posting at most
	// limit deferred responses; true asks to be called again.
	Complete(limit int, post func(slot uint32, m abi.Message)) (more bool)
	// Usage is sess's own share of the handler's state; false when it is
	// not attached.
	Usage(sess *session.Session) (session.Usage, bool)
	// Close waits for the handler's work to finish; the dispatcher calls
	// it once, after Run stopped serving.
	Close()
}

// Validate checks the limits of s; every field out of range is a
// *limit.Error naming it.
func (s Spec) Validate() error {
	var transport error
	switch s.Transport {
	case TransportShm:
	case TransportIceoryx2:
		if !Iceoryx2Built {
			transport = limit.Check(false, "channel.Transport", s.Transport, "shm: "+native.ErrNoIceoryx2.Error())
		}
		if s.ServicePrefix != "" {
			transport = errors.Join(transport, checkServicePrefix(s.ServicePrefix))
		}
	default:
		transport = limit.Check(false, "channel.Transport", s.Transport, "shm or iceoryx2")
	}
	return errors.Join(
		transport,
		limit.Check(s.Epoch != 0, "channel.Epoch", s.Epoch, "nonzero"),
		limit.Range[uint32]{Field: "channel.MaxSessions", Min: 1, Max: abi.ControlSlot}.Check(s.MaxSessions),
		SpinWindowRange.Check(s.SpinWindow),
		limit.Range[int]{Field: "channel.MaxBatch", Min: 2, Max: 4096, Zero: "64"}.Check(s.MaxBatch),
	)
}

// SpinWindowRange is the limit of Spec.SpinWindow.
var SpinWindowRange = limit.Range[time.Duration]{Field: "channel.SpinWindow", Min: 0, Max: time.Second}

type controlOp struct {
	attach   *session.Session
	detach   *session.Session
	stats    *session.Session // SessionHealth: fill statsOut
	statsOut *SessionHealth
	fn       func() // Do: run on the dispatcher goroutine
	done     chan error
}

// SessionHealth is one session's own figures for its Health frame.
type SessionHealth struct {
	Requests uint64 // channel requests of this session handled
	session.Usage
}

// ErrNotAttached is returned by SessionHealth for a session the dispatcher
// does not serve (never attached, detached, or closing).
var ErrNotAttached = errors.New("channel: session not attached")

// SessionHealth returns s's own figures, read on the dispatcher goroutine
// (one control event: microseconds; for Health frames, not hot paths).
// Errors: ErrNotAttached, ErrStopped.
func (d *Dispatcher) SessionHealth(s *session.Session) (SessionHealth, error) {
	var out SessionHealth
	err := d.control(controlOp{stats: s, statsOut: &out})
	return out, err
}

// Dispatcher serves every session's slot from one goroutine.
type Dispatcher struct {
	spec   Spec
	log    *slog.Logger
	dbFile *os.File
	db     []byte
	srv    *native.Server

	mu      sync.Mutex
	ops     []controlOp
	stopped bool

	requests atomic.Uint64      // requests handled, for Health and metrics
	invalid  atomic.Uint64      // requests refused
	attached []*session.Session // attached sessions by slot; nil: none
	// counts are the requests by command and answer (opcounts.go); deferred
	// is, by slot, 1 + the op index of the request whose answer is
	// deferred, 0 for none. Dispatcher goroutine only.
	counts   OpCounts
	deferred []uint8
	done     chan struct{}
	svc      Handler // nil: cache commands answer Unsupported
	svcOpen  bool    // svc not yet closed
}

// New creates the doorbell memfd (sealed against grow, shrink and further
// seals), maps it and makes the poll loop. Close releases them.
func New(spec Spec) (*Dispatcher, error) {
	if spec.MaxBatch == 0 {
		spec.MaxBatch = 64
	}
	if spec.Logger == nil {
		spec.Logger = slog.Default()
	}
	if spec.ServicePrefix == "" {
		spec.ServicePrefix = DefaultServicePrefix
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	size := (abi.DoorbellSize + 4095) &^ 4095
	fd, err := unix.MemfdCreate("orbitkv-doorbell", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create doorbell: %w", err)
	}
	f := os.NewFile(uintptr(fd), "orbitkv-doorbell")
	fail := func(err error) (*Dispatcher, error) { f.Close(); return nil, err }
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail(fmt.Errorf("ftruncate doorbell: %w", err))
	}
	db, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fail(fmt.Errorf("mmap doorbell: %w", err))
	}
	writeDoorbellHeader(db, spec)
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		unix.Munmap(db)
		return fail(fmt.Errorf("seal doorbell memfd: %w", err))
	}
	srv, err := native.NewServer(db, spec.MaxSessions, spec.PollMode, spec.SpinWindow, spec.MaxBatch)
	if err != nil {
		unix.Munmap(db)
		return fail(err)
	}
	if spec.Transport == TransportIceoryx2 {
		if err := srv.UseIceoryx2(); err != nil {
			srv.Close()
			unix.Munmap(db)
			return fail(fmt.Errorf("channel transport iceoryx2: %w", err))
		}
	}
	return &Dispatcher{
		spec: spec, log: spec.Logger, dbFile: f, db: db, srv: srv,
		attached: make([]*session.Session, spec.MaxSessions),
		deferred: make([]uint8, spec.MaxSessions),
		done:     make(chan struct{}),
	}, nil
}

// SetHandler makes the dispatcher serve the cache commands through h; call
// it before Run. The dispatcher closes h when it stops.
func (d *Dispatcher) SetHandler(h Handler) { d.svc, d.svcOpen = h, h != nil }

// Poller is the poll loop, whose control slot the handler's workers ring
// when work finishes (gocore/copier.New, gocore/tier's SSD reads).
func (d *Dispatcher) Poller() *native.Server { return d.srv }

// DoorbellFile is the doorbell memfd sent to every client (borrowed).
func (d *Dispatcher) DoorbellFile() *os.File { return d.dbFile }

// Requests returns how many channel requests were handled since start.
func (d *Dispatcher) Requests() uint64 { return d.requests.Load() }

// Parks returns how many times the dispatcher went to sleep for lack of
// requests (each makes the next request pay a wakeup).
func (d *Dispatcher) Parks() uint64 { return d.srv.Parks() }

// LostRings returns how many requests were found only by the periodic
// rescan of request lines, because their doorbell ring had been erased:
// another session wrote the shared doorbell (docs/channel.md). Each waited
// at most 100 ms. Safe from any goroutine.
func (d *Dispatcher) LostRings() uint64 { return d.srv.Rescued() }

// Transport returns the transport the dispatcher serves.
func (d *Dispatcher) Transport() Transport { return d.spec.Transport }

// Invalid returns how many channel requests were refused as invalid or stale.
func (d *Dispatcher) Invalid() uint64 { return d.invalid.Load() }

// Attach makes the dispatcher serve s. It returns once the dispatcher has
// applied it (Run must have been started): nil, ErrStopped, or an error
// wrapping native.ErrBadSlot for an index out of range or already attached.
func (d *Dispatcher) Attach(s *session.Session) error {
	return d.control(controlOp{attach: s})
}

// Detach stops serving s and records its last accepted generation; its cache
// state is torn down (docs/design.md §5.1) and Detach waits until the copies it
// had in flight drained. When it returns the dispatcher and the copy engine
// no longer touch s's slot or buffer mappings: either the detach completed,
// or Run has returned. Run must have been started.
func (d *Dispatcher) Detach(s *session.Session) {
	d.control(controlOp{detach: s})
}

func (d *Dispatcher) control(op controlOp) error {
	op.done = make(chan error, 1)
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		// Run may not have seen the stop yet and may still read slots:
		// wait until it has returned, so a detached slot can be unmapped.
		<-d.done
		return ErrStopped
	}
	d.ops = append(d.ops, op)
	d.mu.Unlock()
	d.srv.Ring()
	select {
	case err := <-op.done:
		return err
	case <-d.done:
		return ErrStopped
	}
}

// Stop makes Run return after posting the replies of its current batch.
// Sessions still attached are no longer served. Safe from any goroutine.
func (d *Dispatcher) Stop() {
	d.mu.Lock()
	d.stopped = true
	d.mu.Unlock()
	d.srv.Ring()
}

// Done is closed when Run has returned.
func (d *Dispatcher) Done() <-chan struct{} { return d.done }

// Run serves the channel until Stop. Call it on its own goroutine; it locks
// that goroutine to its OS thread.
func (d *Dispatcher) Run() {
	// The dispatcher sleeps holding its P (native.Server.Step); the rest of
	// the Manager needs at least one more.
	if runtime.GOMAXPROCS(0) < 2 {
		runtime.GOMAXPROCS(2)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(d.done)
	nrep := 0
	replies := d.srv.Replies() // room for a batch of events plus a batch of completions
	// post queues a deferred reply (a Publish whose copy completed). It is
	// dropped when the client has since sent a newer request (it gave up
	// waiting, OKV_ETIMEDOUT): a late answer must not overwrite the newer
	// request's response in the line.
	post := func(slot uint32, m abi.Message) {
		if op := d.deferred[slot]; op != 0 {
			d.counts[op-1][resultIndex(m.Code)]++
			d.deferred[slot] = 0
		}
		if sess := d.attached[slot]; sess == nil || m.Generation != sess.Limits.LastGen+1 {
			return
		}
		replies[nrep] = native.Reply{Slot: slot, Msg: m}
		nrep++
	}
	for {
		events := d.srv.Step(nrep)
		nrep = 0
		var handled uint64
		for i := range events {
			e := &events[i]
			if e.Kind == native.EventControl {
				stop := d.applyControl()
				if d.svc != nil && d.svc.Complete(d.spec.MaxBatch, post) {
					d.srv.Ring() // more completions: come back next step
				}
				if stop {
					d.srv.Post(nrep)
					d.closeCache()
					return
				}
				continue
			}
			sess := d.attached[e.Slot]
			if sess == nil {
				continue // detached between ring and step
			}
			if m, ok := d.handle(sess, &e.Msg); ok {
				replies[nrep] = native.Reply{Slot: e.Slot, Msg: m}
				nrep++
				d.counts[opIndex(e.Msg.Code)][resultIndex(m.Code)]++
			} else {
				d.deferred[e.Slot] = uint8(opIndex(e.Msg.Code)) + 1
			}
			sess.Requests++
			handled++
		}
		d.requests.Add(handled)
	}
}

// closeCache waits for the copy engine to finish every queued copy and frees
// the RAM tier; after it, no session memory is touched.
func (d *Dispatcher) closeCache() {
	if d.svcOpen {
		d.svc.Close()
		d.svcOpen = false
	}
}

// applyControl applies queued attach/detach operations; reports whether the
// dispatcher must stop.
func (d *Dispatcher) applyControl() (stop bool) {
	d.mu.Lock()
	ops := d.ops
	d.ops = nil
	stop = d.stopped
	d.mu.Unlock()
	for _, op := range ops {
		switch {
		case op.attach != nil:
			s := op.attach
			var err error
			if d.spec.Transport == TransportIceoryx2 {
				// Created here, on the dispatcher's thread, which alone
				// uses the poll loop's iceoryx2 ports.
				s.IceoryxService = serviceName(d.spec.ServicePrefix, d.spec.Epoch)
				s.IceoryxRuntime = d.srv.Iceoryx2Runtime()
				err = d.srv.AttachIceoryx2(s.Index, s.Slot(), 0, s.IceoryxService)
			} else {
				err = d.srv.Attach(s.Index, s.Slot(), 0)
			}
			if err == nil {
				s.Limits = abi.RequestLimits{
					Epoch: d.spec.Epoch, DescOffset: abi.SlotDescOffset,
					DescCapacity: s.DescCapacity(), LastGen: s.InitialGeneration - 1,
				}
				s.Requests = 0
				d.attached[s.Index] = s
				if d.svc != nil {
					d.svc.Attach(s)
				}
			}
			op.done <- err
		case op.fn != nil:
			op.fn()
			op.done <- nil
		case op.stats != nil:
			sess := d.attached[op.stats.Index]
			if sess != op.stats {
				op.done <- ErrNotAttached
				continue
			}
			op.statsOut.Requests = sess.Requests
			if d.svc != nil {
				u, ok := d.svc.Usage(op.stats)
				if !ok {
					op.done <- ErrNotAttached
					continue
				}
				op.statsOut.Usage = u
			}
			op.done <- nil
		case op.detach != nil:
			s := op.detach
			if d.attached[s.Index] != s {
				op.done <- nil
				continue
			}
			s.SetLastGeneration(s.Limits.LastGen)
			d.srv.Detach(s.Index)
			d.attached[s.Index] = nil
			if op := d.deferred[s.Index]; op != 0 {
				d.counts[op-1][ResultUnanswered]++
				d.deferred[s.Index] = 0
			}
			if d.svc == nil {
				op.done <- nil
				continue
			}
			done := op.done
			d.svc.Detach(s, func() { done <- nil })
		}
	}
	return stop
}

// Close frees the poll loop and the doorbell. Call after Run returned (or
// when Run was never started).
func (d *Dispatcher) Close() {
	d.closeCache()
	d.srv.Close()
	if d.db != nil {
		unix.Munmap(d.db)
		d.db = nil
	}
	d.dbFile.Close()
}
