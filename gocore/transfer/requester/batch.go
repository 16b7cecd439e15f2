package requester

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/orbitkv/orbitkv/gocore/transfer"
)

// sliceState is where one slice stands; guarded by its batch's mu.
type sliceState uint8

const (
	sQueued   sliceState = iota // in its endpoint's queue
	sAwaiting                   // READ sent (or being sent) on rail; no byte of DATA read
	sReading                    // rail's reader is reading the DATA into dst
	sDone                       // dst holds the bytes
	sFailed                     // terminal; dst is never written again
)

// slice is one READ of at most SliceBytes: [off, off+n) of its segment,
// landing in parts, each a piece of one request's Dst, in order.
type slice struct {
	b        *batch
	tag      uint64
	seg      segRef
	off      uint64
	n        int
	parts    []part
	state    sliceState // guarded by b.mu
	rail     *rail      // the rail it is on while sAwaiting or sReading; guarded by b.mu
	attempts int        // READs sent; guarded by b.mu
}

// part is where a piece of a slice's DATA lands.
type part struct {
	req int
	dst []byte
}

// batch is one SubmitTransfer.
type batch struct {
	id     BatchID
	cancel context.CancelFunc // the batch's own context (a default deadline)
	stop   func() bool        // stops the abort at ctx's end
	eps    []*endpoint        // the endpoints it holds until FreeBatch

	mu        sync.Mutex
	slices    []*slice
	reqs      []Status
	left      []int // slices not terminal, per request
	remaining int   // slices not terminal
	firstErr  error
	aborted   bool
	done      chan struct{} // closed when remaining reaches 0
}

// finish makes s terminal with err (nil: done); b.mu is held.
func (b *batch) finish(s *slice, err error) {
	if s.state == sDone || s.state == sFailed {
		return
	}
	s.state, s.rail = sDone, nil
	if err != nil {
		s.state = sFailed
		if b.firstErr == nil {
			b.firstErr = fmt.Errorf("request %d: %w", s.parts[0].req, err)
		}
	}
	for _, p := range s.parts { // a request appears once in a slice
		st := &b.reqs[p.req]
		if err != nil && st.Err == nil {
			st.Err = err
		}
		if b.left[p.req]--; b.left[p.req] == 0 {
			st.State = Done
			if st.Err != nil {
				st.State = Failed
			}
		}
	}
	if b.remaining--; b.remaining == 0 {
		close(b.done)
	}
}

// abort fails every slice not yet terminal with err and closes the rails
// that hold one of them in flight, so that a reader in the middle of a
// slice's DATA stops at once; the batch ends when those readers have
// let go of their slices (b.done).
func (b *batch) abort(err error) {
	var kill []*rail
	b.mu.Lock()
	b.aborted = true
	for _, s := range b.slices {
		switch s.state {
		case sQueued, sAwaiting:
			if s.rail != nil {
				kill = append(kill, s.rail)
			}
			b.finish(s, err)
		case sReading:
			kill = append(kill, s.rail) // finished by the rail's reader when the read fails
		}
	}
	b.mu.Unlock()
	for _, r := range kill {
		r.kill(fmt.Errorf("batch %d ended: %w", b.id, err))
	}
}

// SubmitTransfer starts reading every request and returns its batch; it
// first dials the rails a peer lacks (bounded by ctx and DialTimeout),
// then returns without waiting for bytes. The requests run until done,
// failed, or ctx's end (its deadline,
// or the EngineSpec.DefaultTimeout when it has none), whichever comes
// first. Errors (no batch made): no requests or more than
// MaxBatchRequests, an unknown handle (ErrUnknownHandle), an empty Dst or
// one outside registered memory (ErrUnregistered), Offset+len(Dst) past
// 2^64, ctx already ended, ErrClosed. A peer that cannot be dialled fails
// its requests in the batch (Status, Wait), not the call.
func (e *Engine) SubmitTransfer(ctx context.Context, reqs []Request) (BatchID, error) {
	if len(reqs) == 0 || len(reqs) > MaxBatchRequests {
		return 0, fmt.Errorf("transfer: SubmitTransfer with %d requests, want 1..%d", len(reqs), MaxBatchRequests)
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("transfer: SubmitTransfer: %w", err)
	}
	b := &batch{reqs: make([]Status, len(reqs)), left: make([]int, len(reqs)), done: make(chan struct{})}
	// The batch's own context: its deadline, and the end FreeBatch and
	// Close give it. Set before the batch is visible to Close.
	var bctx context.Context
	if _, ok := ctx.Deadline(); !ok {
		bctx, b.cancel = context.WithTimeout(ctx, e.spec.DefaultTimeout)
	} else {
		bctx, b.cancel = context.WithCancel(ctx)
	}
	refuse := func(err error) (BatchID, error) {
		e.mu.Unlock()
		b.cancel()
		return 0, err
	}
	byEP := map[string][]*slice{}
	var order []string
	e.mu.Lock()
	if e.closed {
		return refuse(transfer.ErrClosed)
	}
	for i, r := range reqs {
		ref, ok := e.handles[r.Segment]
		switch {
		case !ok:
			return refuse(fmt.Errorf("%w: request %d names handle %d", ErrUnknownHandle, i, r.Segment))
		case len(r.Dst) == 0:
			return refuse(fmt.Errorf("transfer: request %d: Dst is empty, want ≥ 1 byte", i))
		case !e.registered(r.Dst):
			return refuse(fmt.Errorf("%w: request %d: Dst of %d bytes", ErrUnregistered, i, len(r.Dst)))
		case r.Offset > ^uint64(0)-uint64(len(r.Dst)):
			return refuse(fmt.Errorf("transfer: request %d: Offset %d + %d bytes overflows 2^64", i, r.Offset, len(r.Dst)))
		}
		if _, ok := byEP[ref.addr]; !ok {
			order = append(order, ref.addr)
		}
		// Cut Dst into slices; a request that continues the segment range
		// of the one before it fills that one's last slice first, so that
		// small blocks of one run travel as full slices.
		for off := 0; off < len(r.Dst); {
			var s *slice
			if k := len(b.slices); k > 0 {
				last := b.slices[k-1]
				if last.seg == ref && last.off+uint64(last.n) == r.Offset+uint64(off) && last.n < e.spec.SliceBytes {
					s = last
				}
			}
			if s == nil {
				s = &slice{b: b, tag: e.nextTag.Add(1), seg: ref, off: r.Offset + uint64(off)}
				b.slices = append(b.slices, s)
				byEP[ref.addr] = append(byEP[ref.addr], s)
			}
			take := min(e.spec.SliceBytes-s.n, len(r.Dst)-off)
			s.parts = append(s.parts, part{req: i, dst: r.Dst[off : off+take : off+take]})
			s.n += take
			off += take
			b.left[i]++
		}
	}
	b.remaining = len(b.slices)
	for _, addr := range order {
		b.eps = append(b.eps, e.acquire(addr))
	}
	e.nextBatch++
	b.id = e.nextBatch
	b.stop = context.AfterFunc(bctx, func() { b.abort(fmt.Errorf("transfer batch %d: %w", b.id, bctx.Err())) })
	e.batches[b.id] = b
	e.mu.Unlock()

	for i, addr := range order {
		ep := b.eps[i]
		if err := ep.ensure(bctx); err != nil {
			b.failAll(byEP[addr], err)
			continue
		}
		ep.enqueue(byEP[addr], false)
	}
	return b.id, nil
}

// failAll fails ss (slices of b) with err.
func (b *batch) failAll(ss []*slice, err error) {
	b.mu.Lock()
	for _, s := range ss {
		b.finish(s, err)
	}
	b.mu.Unlock()
}

func (e *Engine) batch(id BatchID) (*batch, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, ok := e.batches[id]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownBatch, id)
	}
	return b, nil
}

// Status returns each request's state, in request order; nil for an
// unknown batch.
func (e *Engine) Status(id BatchID) []Status {
	b, err := e.batch(id)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Status, len(b.reqs))
	copy(out, b.reqs)
	return out
}

// Done returns a channel closed when batch id has ended (every request
// done or failed): the batch's notification. Nil for an unknown batch.
func (e *Engine) Done(id BatchID) <-chan struct{} {
	b, err := e.batch(id)
	if err != nil {
		return nil
	}
	return b.done
}

// Wait blocks until batch id has ended and returns its first error (nil:
// every byte landed). When ctx ends first, the batch is aborted with
// ctx's error and Wait returns once no slice of it can write its Dst any
// more. After Wait returns, the batch's Dst are never written. Errors:
// ErrUnknownBatch, the first failed request's error (ErrRail, a refusal
// of the source: ErrUnknownSegment, ErrBadCapability, ErrExpired,
// ErrOutOfRange; ctx's error; ErrClosed).
func (e *Engine) Wait(ctx context.Context, id BatchID) error {
	b, err := e.batch(id)
	if err != nil {
		return err
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		b.abort(fmt.Errorf("transfer: Wait for batch %d: %w", id, ctx.Err()))
		<-b.done
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.firstErr
}

// FreeBatch forgets batch id, aborting it first if it has not ended (and
// waiting, as Wait does, until none of its Dst can be written); it
// releases the endpoints the batch held. A no-op for an unknown batch.
func (e *Engine) FreeBatch(id BatchID) {
	e.mu.Lock()
	b, ok := e.batches[id]
	delete(e.batches, id)
	e.mu.Unlock()
	if !ok {
		return
	}
	b.abort(errors.New("transfer: batch freed before it ended"))
	<-b.done
	b.stop()
	b.cancel()
	e.mu.Lock()
	for _, ep := range b.eps {
		e.release(ep)
	}
	e.mu.Unlock()
}
