package ssd

import (
	"errors"
	"fmt"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
	"golang.org/x/sys/unix"
)

// Read reads block k into dst and verifies it, asynchronously. dst is the
// destination: page-aligned buffers of whole 4 KiB pages (the RAM tier's
// chunks), together at least m.Bytes rounded up to 4 KiB; the block's
// bytes land in its first m.Bytes bytes. m must equal the block's stored
// Meta (else ErrMeta: a block of another size or shape is a miss).
//
// done(err) is called exactly once: from a store goroutine when the read
// finished, or before Read returns, on the caller's goroutine, for
// ErrNotFound, ErrMeta, ErrAlign and ErrClosed. done must not block; the
// caller keeps dst (the slice and the memory) unchanged until done. On
// err == nil dst holds the block, verified: the slot header names k, m,
// the slot and the generation of the index record, and its MAC over those
// fields and the bytes checks under the store's secret. On ErrCorrupt (or an I/O error) the
// block is dropped from the store, logged and counted, and dst holds
// unspecified bytes: the caller treats it as a miss and never serves them.
func (s *Store) Read(k Key, m Meta, dst [][]byte, done func(error)) {
	s.mu.Lock()
	e := s.resident[k]
	var err error
	switch {
	case s.closed:
		err = ErrClosed
	case e == nil:
		err = ErrNotFound
	case e.meta != m:
		err = ErrMeta
	default:
		err = checkBufs(dst, roundUp(m.Bytes))
	}
	if err != nil {
		s.mu.Unlock()
		done(err)
		return
	}
	e.pins++
	s.q.push(getOp(opRead, e, dst, done))
	s.mu.Unlock()
}

// readSlot reads o.e's slot header into w.hdr and its data into o.bufs
// with one preadv, and checks both: the header must name the index's key,
// Meta, slot and generation, and its MAC must check over them and the
// data.
func (s *Store) readSlot(w *worker, o *op) error {
	e := o.e
	o.iov = buildIov(o.iov[:0], w.hdr, o.bufs, roundUp(e.meta.Bytes))
	if err := rwv(unix.SYS_PREADV, s.dataFd, o.iov, s.slotOff(e.slot)); err != nil {
		return fmt.Errorf("ssd tier: reading slot %d of %s: %w", e.slot, s.dataPath, err)
	}
	h, ok := layout.ParseSlotHeader(w.hdr)
	switch {
	case !ok:
		return fmt.Errorf("%w: slot %d: the header is damaged, of another layout version, or was never written", ErrCorrupt, e.slot)
	case h.Key != e.key || h.Gen != e.gen || h.Meta != e.meta || h.Slot != e.slot:
		return fmt.Errorf("%w: slot %d: the header names slot %d generation %d, not the index's slot %d generation %d (the slot was overwritten)",
			ErrCorrupt, e.slot, h.Slot, h.Gen, e.slot, e.gen)
	case !w.mac.CheckSlot(w.hdr, o.bufs):
		return fmt.Errorf("%w: slot %d: the MAC of the header and data does not check: damaged, torn, or written without this store's %s",
			ErrCorrupt, e.slot, keyName)
	}
	return nil
}

// finishRead unpins the block, drops it if the read (a Read's, a
// verification's or a Record's) failed, and calls done.
func (s *Store) finishRead(o *op, err error) {
	e, done, verify := o.e, o.done, o.kind == opVerify
	s.mu.Lock()
	e.pins--
	switch {
	case err == nil && o.kind == opRead:
		s.st.Reads++
		s.st.ReadBytes += e.meta.Bytes
	case err != nil:
		switch {
		case verify:
			// Expected after a crash: see verifyOnOpen.
			s.st.DroppedAtOpen++
		case errors.Is(err, ErrCorrupt):
			s.st.Corrupt++
		default:
			s.st.ReadErrors++
		}
		if e.state == stateResident {
			// The delete record keeps the block gone after a restart.
			if verify {
				s.detach(e)
			} else {
				s.unlink(e)
			}
			s.commitQ.push(getOp(opDelete, e, nil, nil))
		}
	}
	if e.state == stateDead && e.pins == 0 && s.slots[e.slot] == e {
		s.freeSlot(e.slot)
	}
	s.mu.Unlock()
	switch {
	case err != nil && verify:
		s.log.Warn("ssd tier: recovered block dropped: it failed its check at open", "slot", e.slot, "err", err)
	case err != nil:
		s.log.Warn("ssd tier: block dropped: it failed its read; answered as a miss", "slot", e.slot, "err", err)
	}
	putOp(o)
	done(err)
}
