package requester

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/orbitkv/orbitkv/gocore/transfer"
)

// endpoint is one peer (a Server's address): its rails and the queue of
// slices waiting for a rail. Every rail's sender takes the next slice
// when its window has room, so slices spread over the rails by how fast
// each drains.
//
// Lock order: Engine.mu → endpoint.mu → batch.mu; rail.mu is never held
// with another of them.
type endpoint struct {
	e    *Engine
	addr string
	// refs and evicted are guarded by Engine.mu: batches holding the
	// endpoint, and whether the pool has let go of it (it closes at
	// refs 0).
	refs    int
	evicted bool

	dialMu sync.Mutex // one ensure at a time

	mu      sync.Mutex
	cond    *sync.Cond // queue grew, a rail died, or the endpoint closed
	queue   []*slice
	rails   []*rail
	closed  bool
	lastErr error // why the last rail failed or the last dial did
	// redials counts the redials of every rail at once since a slice last
	// landed (bounded by Retries).
	redials atomic.Int32
}

var errEvicted = errors.New("transfer: endpoint evicted from the pool")

// acquire returns addr's endpoint, adding one to the pool (evicting by
// SIEVE when full) if it has none, and counts a batch on it. e.mu is held.
func (e *Engine) acquire(addr string) *endpoint {
	ep, ok := e.pool.Get(addr)
	if !ok {
		ep = &endpoint{e: e, addr: addr}
		ep.cond = sync.NewCond(&ep.mu)
		if old, ok := e.pool.Add(addr, ep); ok {
			old.evicted = true
			if old.refs == 0 {
				delete(e.live, old)
				old.close(errEvicted)
			}
		}
		e.live[ep] = struct{}{}
	}
	ep.refs++
	return ep
}

// release ends a batch's hold on ep; e.mu is held.
func (e *Engine) release(ep *endpoint) {
	if ep.refs--; ep.refs == 0 && ep.evicted {
		delete(e.live, ep)
		ep.close(errEvicted)
	}
}

// ensure dials the rails ep lacks (all of them the first time, or after
// rails failed) within ctx and DialTimeout. It fails only when ep is left
// with no rail at all.
func (ep *endpoint) ensure(ctx context.Context) error {
	ep.dialMu.Lock()
	defer ep.dialMu.Unlock()
	e := ep.e
	ep.mu.Lock()
	n, closed := e.spec.Rails-len(ep.rails), ep.closed
	ep.mu.Unlock()
	if closed {
		return fmt.Errorf("%w: endpoint %s", transfer.ErrClosed, ep.addr)
	}
	if n <= 0 {
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, e.spec.DialTimeout)
	defer cancel()
	type dialed struct {
		c   net.Conn
		err error
	}
	out := make(chan dialed, n)
	for range n {
		go func() {
			var d net.Dialer
			c, err := d.DialContext(dctx, "tcp", ep.addr)
			out <- dialed{c, err}
		}()
	}
	var firstErr error
	for range n {
		r := <-out
		if r.err != nil {
			firstErr = cmp.Or(firstErr, r.err)
			continue
		}
		e.dials.Add(1)
		if e.spec.OnConn != nil {
			e.spec.OnConn(r.c, ep.addr)
		}
		ep.mu.Lock()
		if ep.closed {
			ep.mu.Unlock()
			r.c.Close()
			continue
		}
		rl := &rail{ep: ep, conn: r.c, tokens: make(chan struct{}, e.spec.Window), deadCh: make(chan struct{})}
		ep.rails = append(ep.rails, rl)
		e.wg.Add(2) // under ep.mu: ordered before Close's Wait, which follows ep.close
		ep.mu.Unlock()
		go rl.send()
		go rl.read()
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if len(ep.rails) == 0 {
		if firstErr == nil {
			firstErr = cmp.Or(ep.lastErr, error(transfer.ErrClosed))
		}
		ep.lastErr = firstErr
		return fmt.Errorf("%w: dialling %s: %v", ErrRail, ep.addr, firstErr)
	}
	return nil
}

// enqueue queues ss for the rails (at the front: slices sent again go
// first); with no rail left, or a closed endpoint, it fails them.
func (ep *endpoint) enqueue(ss []*slice, front bool) {
	ep.mu.Lock()
	if ep.closed || len(ep.rails) == 0 {
		err := fmt.Errorf("%w: no data connection to %s is left: %v", ErrRail, ep.addr, cmp.Or(ep.lastErr, error(transfer.ErrClosed)))
		ep.mu.Unlock()
		for _, s := range ss {
			s.b.failAll([]*slice{s}, err)
		}
		return
	}
	if front {
		ep.queue = append(slices.Clip(ss), ep.queue...)
	} else {
		ep.queue = append(ep.queue, ss...)
	}
	ep.cond.Broadcast()
	ep.mu.Unlock()
}

// close fails the queue with err and closes every rail (their readers
// send the slices in flight nowhere: enqueue fails them).
func (ep *endpoint) close(err error) {
	ep.mu.Lock()
	if ep.closed {
		ep.mu.Unlock()
		return
	}
	ep.closed, ep.lastErr = true, err
	q, rails := ep.queue, slices.Clone(ep.rails)
	ep.queue = nil
	ep.cond.Broadcast()
	ep.mu.Unlock()
	for _, r := range rails {
		r.kill(err)
	}
	for _, s := range q {
		s.b.failAll([]*slice{s}, fmt.Errorf("%w: endpoint %s: %v", ErrRail, ep.addr, err))
	}
}

// rail is one data connection: send writes READs of queued slices while
// fewer than Window are in flight; read reads the answers, in order, the
// DATA straight into each slice's dst.
type rail struct {
	ep     *endpoint
	conn   net.Conn
	tokens chan struct{} // a slot per slice in flight: send fills, read empties
	deadCh chan struct{} // closed when the rail has died
	dead   atomic.Bool   // set under mu, with fifo taken
	count  atomic.Uint64 // slices this rail read into dst

	mu    sync.Mutex
	fifo  []*slice // READs sent, in order, their answers not read
	cause error
}

// kill closes the connection: the reader fails and the rail dies.
func (r *rail) kill(err error) {
	r.mu.Lock()
	r.cause = cmp.Or(r.cause, err)
	r.mu.Unlock()
	r.conn.Close()
}

// send writes READs while the window has room: it takes one slice
// (waiting for a slot and for the queue), then every further slice the
// queue holds and the window has a slot for, and writes their headers in
// one write.
func (r *rail) send() {
	defer r.ep.e.wg.Done()
	ep := r.ep
	hdrs := make([]byte, 0, transfer.HeaderBytes*cap(r.tokens))
	taken := make([]*slice, 0, cap(r.tokens))
	for {
		select {
		case r.tokens <- struct{}{}:
		case <-r.deadCh:
			return
		}
		ep.mu.Lock()
		for len(ep.queue) == 0 && !ep.closed && !r.dead.Load() {
			ep.cond.Wait()
		}
		if r.dead.Load() || len(ep.queue) == 0 {
			ep.mu.Unlock()
			return
		}
		taken = append(taken[:0], ep.pop())
	more:
		for len(ep.queue) > 0 {
			select {
			case r.tokens <- struct{}{}:
				taken = append(taken, ep.pop())
			default:
				break more
			}
		}
		ep.mu.Unlock()

		claimed := taken[:0]
		for _, s := range taken {
			b := s.b
			b.mu.Lock()
			if s.state != sQueued { // failed while queued (its batch ended)
				b.mu.Unlock()
				<-r.tokens
				continue
			}
			s.state, s.rail = sAwaiting, r
			s.attempts++
			b.mu.Unlock()
			claimed = append(claimed, s)
		}
		if len(claimed) == 0 {
			continue
		}
		r.mu.Lock()
		if r.dead.Load() {
			r.mu.Unlock()
			for _, s := range claimed {
				r.putBack(s)
			}
			return
		}
		r.fifo = append(r.fifo, claimed...)
		r.mu.Unlock()
		hdrs = hdrs[:0]
		for _, s := range claimed {
			h := transfer.Header{Op: transfer.OpRead, Tag: s.tag, Segment: s.seg.id, Offset: s.off, Length: uint32(s.n), Capability: s.seg.cap}
			hdrs = hdrs[:len(hdrs)+transfer.HeaderBytes]
			h.Encode(hdrs[len(hdrs)-transfer.HeaderBytes:])
		}
		clear(taken[:cap(taken)]) // drop the references until the next round
		if _, err := r.conn.Write(hdrs); err != nil {
			r.kill(fmt.Errorf("writing a READ: %w", err))
			return
		}
	}
}

// pop takes the head of the queue; ep.mu is held and the queue is not
// empty.
func (ep *endpoint) pop() *slice {
	s := ep.queue[0]
	ep.queue[0] = nil
	ep.queue = ep.queue[1:]
	return s
}

// putBack queues s again after the rail died before s was on it.
func (r *rail) putBack(s *slice) {
	b := s.b
	b.mu.Lock()
	again := s.state == sAwaiting && s.rail == r
	if again {
		s.state, s.rail = sQueued, nil
		s.attempts--
	}
	b.mu.Unlock()
	if again {
		r.ep.enqueue([]*slice{s}, true)
	}
}

func (r *rail) read() {
	defer r.ep.e.wg.Done()
	var hdr [transfer.HeaderBytes]byte
	var text [transfer.MaxErrorTextBytes]byte
	for {
		if _, err := io.ReadFull(r.conn, hdr[:]); err != nil {
			r.die(err)
			return
		}
		h, err := transfer.DecodeHeader(hdr[:])
		if err != nil {
			r.die(err)
			return
		}
		r.mu.Lock()
		var s *slice
		if len(r.fifo) > 0 {
			s = r.fifo[0]
		}
		r.mu.Unlock()
		switch {
		case s == nil:
			r.die(fmt.Errorf("%w: %s frame with tag %d and no READ in flight", transfer.ErrMalformed, h.Op, h.Tag))
			return
		case h.Op == transfer.OpRead || h.Tag != s.tag || h.Segment != s.seg.id:
			r.die(fmt.Errorf("%w: %s frame of tag %d segment %d answers READ tag %d segment %d", transfer.ErrMalformed, h.Op, h.Tag, h.Segment, s.tag, s.seg.id))
			return
		case h.Op == transfer.OpData && (h.Offset != s.off || int(h.Length) != s.n):
			r.die(fmt.Errorf("%w: DATA of offset %d length %d answers READ of offset %d length %d", transfer.ErrMalformed, h.Offset, h.Length, s.off, s.n))
			return
		}
		b := s.b
		if h.Op == transfer.OpError {
			if _, err := io.ReadFull(r.conn, text[:h.Length]); err != nil {
				r.die(err)
				return
			}
			r.pop()
			b.mu.Lock()
			if s.state == sAwaiting && s.rail == r {
				b.finish(s, transfer.RemoteError(h.Code, string(text[:h.Length])))
			}
			b.mu.Unlock()
			continue
		}
		b.mu.Lock()
		mine := s.state == sAwaiting && s.rail == r
		if mine {
			s.state = sReading
		}
		b.mu.Unlock()
		if mine {
			for _, p := range s.parts {
				if _, err = io.ReadFull(r.conn, p.dst); err != nil { // the bytes land in Dst: no copy
					break
				}
			}
		} else {
			_, err = io.CopyN(io.Discard, r.conn, int64(h.Length)) // its batch ended: never touch dst
		}
		if err != nil {
			r.die(err) // s is still in the fifo: sent again or failed there
			return
		}
		r.pop()
		if mine {
			r.count.Add(1) // before finish: a Stats after Wait counts this slice
			r.ep.e.slices.Add(1)
			if r.ep.redials.Load() != 0 {
				r.ep.redials.Store(0)
			}
			b.mu.Lock()
			b.finish(s, nil)
			b.mu.Unlock()
		}
	}
}

// pop drops the answered head of the fifo and frees its window slot.
func (r *rail) pop() {
	r.mu.Lock()
	r.fifo[0] = nil
	r.fifo = r.fifo[1:]
	r.mu.Unlock()
	<-r.tokens
}

// die ends the rail after its reader failed: the slices in flight on it
// are sent again on the other rails (up to Retries times each), or
// failed.
func (r *rail) die(err error) {
	ep, e := r.ep, r.ep.e
	r.mu.Lock()
	r.dead.Store(true)
	r.cause = cmp.Or(r.cause, err)
	cause, fifo := r.cause, r.fifo
	r.fifo = nil
	r.mu.Unlock()
	close(r.deadCh)
	r.conn.Close()
	e.failure.Add(1)
	e.spec.Logger.Debug("transfer: rail failed", "peer", ep.addr, "err", cause, "in_flight", len(fifo))

	ep.mu.Lock()
	if i := slices.Index(ep.rails, r); i >= 0 {
		ep.rails = slices.Delete(ep.rails, i, i+1)
	}
	ep.lastErr = cause
	var stranded []*slice // the last rail is gone: nothing would take the queue
	last := len(ep.rails) == 0
	if last {
		stranded, ep.queue = ep.queue, nil
	}
	ep.cond.Broadcast()
	ep.mu.Unlock()

	var again []*slice
	for _, s := range fifo {
		b := s.b
		b.mu.Lock()
		if (s.state == sAwaiting || s.state == sReading) && s.rail == r {
			if s.attempts <= e.spec.Retries && !b.aborted {
				s.state, s.rail = sQueued, nil
				again = append(again, s)
			} else {
				b.finish(s, fmt.Errorf("%w: %s: %v (%d attempts)", ErrRail, ep.addr, cause, s.attempts))
			}
		}
		b.mu.Unlock()
	}
	e.retries.Add(uint64(len(again)))
	if !last {
		if len(again) > 0 {
			ep.enqueue(again, true)
		}
		return
	}
	// Every rail is gone at once (the source restarted, a connection
	// blip, its idle timeout): dial them again for the slices left, at
	// most Retries times in a row without a slice landing in between.
	pending := append(again, stranded...)
	if len(pending) == 0 {
		return
	}
	ep.mu.Lock()
	redial := !ep.closed && int(ep.redials.Load()) < e.spec.Retries
	if redial {
		ep.redials.Add(1)
		e.wg.Add(1) // under ep.mu: ordered before Close's Wait, which follows ep.close
	}
	ep.mu.Unlock()
	if !redial {
		err := fmt.Errorf("%w: no data connection to %s is left: %v", ErrRail, ep.addr, cause)
		for _, s := range pending {
			s.b.failAll([]*slice{s}, err)
		}
		return
	}
	go ep.redial(pending)
}

// redial dials the endpoint's rails again and queues pending on them, or
// fails pending when no rail can be dialled within DialTimeout.
func (ep *endpoint) redial(pending []*slice) {
	e := ep.e
	defer e.wg.Done()
	ctx, cancel := context.WithTimeout(e.ctx, e.spec.DialTimeout)
	defer cancel()
	if err := ep.ensure(ctx); err != nil {
		for _, s := range pending {
			s.b.failAll([]*slice{s}, err)
		}
		return
	}
	ep.enqueue(pending, true)
}
