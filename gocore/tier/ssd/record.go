package ssd

import (
	"bytes"
	"fmt"

	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
	"golang.org/x/sys/unix"
)

// Record returns the block record resident block k was written with (nil
// if none), read back from its slot header on the disk: one 4 KiB
// O_DIRECT pread by an I/O worker, which Record waits for (it blocks its
// caller on that read, unlike Read). The header must name k and the
// index's Meta, slot and generation, and its record tag must be the MAC
// of its fields and the record under the store's secret; the block's
// bytes are neither read nor checked (the record tag does not cover them:
// Read checks them). The returned slice is the caller's.
//
// It is how a caller learns the records of the blocks recovered at Open
// (Keys), which Spec.Blocks does not hear. Safe for concurrent use with
// everything else the store does: the slot is pinned while the worker
// reads it, as a Read pins it, so an eviction in the meantime does not
// reuse it until the read ends.
//
// Errors: ErrNotFound (k is not resident; a Write in flight is not),
// ErrClosed, ErrCorrupt (the header is damaged, names another block or
// generation, or its record tag does not check) or an I/O error naming
// the slot. On ErrCorrupt or an I/O error the block is dropped, counted
// (Stats.Corrupt, Stats.ReadErrors), logged and heard as Gone, as after a
// failed Read.
func (s *Store) Record(k Key) ([]byte, error) {
	s.mu.Lock()
	e := s.resident[k]
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, ErrClosed
	case e == nil:
		s.mu.Unlock()
		return nil, ErrNotFound
	}
	var rec []byte
	ch := make(chan error, 1)
	e.pins++
	o := getOp(opRecord, e, nil, func(err error) { ch <- err })
	o.out = &rec
	s.q.push(o)
	s.mu.Unlock()
	err := <-ch
	return rec, err
}

// readRecord reads o.e's slot header into w.hdr with one pread and checks
// it: it must name the index's key, Meta, slot and generation, and its
// record tag must check. The record goes to *o.out, copied out of w.hdr.
func (s *Store) readRecord(w *worker, o *op) error {
	e := o.e
	o.iov = buildIov(o.iov[:0], w.hdr, nil, 0)
	if err := rwv(unix.SYS_PREADV, s.dataFd, o.iov, s.slotOff(e.slot)); err != nil {
		return fmt.Errorf("ssd tier: reading the header of slot %d of %s: %w", e.slot, s.dataPath, err)
	}
	h, ok := layout.ParseSlotHeader(w.hdr)
	switch {
	case !ok:
		return fmt.Errorf("%w: slot %d: the header is damaged, of another layout version, or was never written", ErrCorrupt, e.slot)
	case h.Key != e.key || h.Gen != e.gen || h.Meta != e.meta || h.Slot != e.slot:
		return fmt.Errorf("%w: slot %d: the header names slot %d generation %d, not the index's slot %d generation %d (the slot was overwritten)",
			ErrCorrupt, e.slot, h.Slot, h.Gen, e.slot, e.gen)
	}
	rec, ok := w.mac.CheckRecord(w.hdr)
	if !ok {
		return fmt.Errorf("%w: slot %d: the MAC of the header and its block record does not check: damaged, torn, or written without this store's %s",
			ErrCorrupt, e.slot, keyName)
	}
	if rec != nil {
		*o.out = bytes.Clone(rec)
	}
	return nil
}
