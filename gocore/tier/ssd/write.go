package ssd

import (
	"bytes"
	"fmt"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
	"golang.org/x/sys/unix"
)

// Write stores block k, of Meta m, from src asynchronously (write-behind
// demotion). src is the source: page-aligned buffers of whole 4 KiB pages
// (the RAM tier's chunks), together at least m.Bytes rounded up to 4 KiB;
// the block is their first m.Bytes bytes. The caller keeps src (the slice
// and the memory) unchanged until done.
//
// record is the block record: at most MaxRecordBytes opaque bytes kept in
// the slot header with the block (nil or empty: none). The store copies it
// (the caller may reuse record once Write returns), writes it with the
// header, hands the copy to Spec.Blocks's Resident when the block becomes
// visible and keeps no copy in memory after that; Record reads it back
// from the disk. A longer record is refused: done(ErrRecordTooLong),
// naming the limit, nothing written, counted in Stats.RecordTooLong.
//
// The block goes to a free slot, or to the oldest block's slot (FIFO
// eviction) when none is free. A worker computes the MAC of the header and
// the bytes and writes the slot header and the data with one pwritev; the committer
// fdatasyncs the data file, then appends the put record to the index log
// and fdatasyncs it (data before index), then makes the block visible to
// Contains and Read and calls done(nil). So when done(nil) runs, the block
// survives a crash.
//
// done(err) is called exactly once: from a store goroutine when the write
// finished, or before Write returns, on the caller's goroutine, for nil
// (the block is already resident with the same Meta: its stored record
// stays), ErrNotAdmitted (the first offer under AdmitSecondHit), ErrBusy,
// ErrMeta (m outside the Spec), ErrAlign, ErrRecordTooLong and ErrClosed.
// done must not block. A Write of a key whose Write with the same Meta is
// in flight shares that write's outcome, and its record (the later
// record is dropped). A resident block with another Meta is replaced when
// the new one is durable.
func (s *Store) Write(k Key, m Meta, src [][]byte, record []byte, done func(error)) {
	s.write(k, m, NoClass, src, record, done, false)
}

// Admit records an offer of k under the admission rule and reports whether
// the block is to be written now: true under AdmitAll, for a block already
// resident or being written, and for a second-hit offer the filter
// remembers. A caller that must copy the block before it can Write (the
// Manager's demotion) asks first, so a declined block costs no copy; it then
// writes with WriteAdmitted, which does not apply the rule again.
func (s *Store) Admit(k Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.resident[k] != nil || s.writing[k] != nil || s.admit == nil {
		return true
	}
	if !s.admit.offer(k) {
		s.st.NotAdmitted++
		return false
	}
	return true
}

// WriteAdmitted is Write for a block Admit accepted, of class c (its
// bytes count in ClassBytes(c) from now until it is dropped, or until the
// write fails): the admission rule is not applied again. A block of the
// key already resident or in flight keeps the class it has. record is as
// for Write.
func (s *Store) WriteAdmitted(k Key, m Meta, c Class, src [][]byte, record []byte, done func(error)) {
	s.write(k, m, c, src, record, done, true)
}

func (s *Store) write(k Key, m Meta, c Class, src [][]byte, record []byte, done func(error), admitted bool) {
	if err := s.checkMeta(m); err != nil {
		done(err)
		return
	}
	if err := checkBufs(src, roundUp(m.Bytes)); err != nil {
		done(err)
		return
	}
	if len(record) > MaxRecordBytes {
		s.mu.Lock()
		s.st.RecordTooLong++
		s.mu.Unlock()
		done(fmt.Errorf("%w: %d bytes, the most is MaxRecordBytes (%d)", ErrRecordTooLong, len(record), MaxRecordBytes))
		return
	}
	s.mu.Lock()
	err := s.startWrite(k, m, c, src, record, done, admitted)
	s.mu.Unlock()
	if err != errQueued {
		done(err)
	}
}

// errQueued is startWrite's answer when done will be called later.
var errQueued = fmt.Errorf("queued")

// startWrite decides a Write under s.mu: it returns the immediate answer,
// or errQueued after queuing the write (with a copy of record) or joining
// one in flight.
func (s *Store) startWrite(k Key, m Meta, c Class, src [][]byte, record []byte, done func(error), admitted bool) error {
	if s.closed {
		return ErrClosed
	}
	if e := s.resident[k]; e != nil && e.meta == m {
		s.st.Present++
		return nil
	}
	if e := s.writing[k]; e != nil {
		if e.meta != m {
			s.st.Busy++
			return ErrBusy
		}
		e.waiters = append(e.waiters, done)
		return errQueued
	}
	if !admitted && s.admit != nil && !s.admit.offer(k) {
		s.st.NotAdmitted++
		return ErrNotAdmitted
	}
	if s.pending >= s.spec.MaxPendingWrites {
		s.st.Busy++
		return ErrBusy
	}
	slot, ok := s.takeSlot()
	if !ok {
		s.st.Busy++
		return ErrBusy
	}
	e := &entry{key: k, meta: m, gen: s.nextGen, slot: slot, state: stateWriting, class: c}
	if c != NoClass {
		s.class(c).bytes += s.slotCost()
	}
	s.nextGen++
	s.slots[slot] = e
	s.writing[k] = e
	s.pending++
	o := getOp(opWrite, e, src, done)
	if len(record) > 0 {
		o.record = bytes.Clone(record)
	}
	s.q.push(o)
	return errQueued
}

func (s *Store) checkMeta(m Meta) error {
	switch {
	case m.Bytes == 0 || m.Bytes > s.spec.SlotBytes:
		return fmt.Errorf("%w: Bytes %d, want 1 to SlotBytes %d", ErrMeta, m.Bytes, s.spec.SlotBytes)
	case m.Layers == 0:
		return fmt.Errorf("%w: Layers 0, want at least 1", ErrMeta)
	}
	return nil
}

// writeSlot seals the slot header in w.hdr (its fields, the block
// record, the block tag over the fields and the block, and the record tag
// over the fields and the record) and writes it and the data with one
// pwritev.
func (s *Store) writeSlot(w *worker, o *op) error {
	e := o.e
	w.mac.SealSlotHeader(w.hdr, layout.SlotHeader{Key: e.key, Meta: e.meta, Gen: e.gen, Slot: e.slot, Record: o.record}, o.bufs)
	o.iov = buildIov(o.iov[:0], w.hdr, o.bufs, roundUp(e.meta.Bytes))
	if err := rwv(unix.SYS_PWRITEV, s.dataFd, o.iov, s.slotOff(e.slot)); err != nil {
		return fmt.Errorf("ssd tier: writing slot %d of %s: %w", e.slot, s.dataPath, err)
	}
	return nil
}
