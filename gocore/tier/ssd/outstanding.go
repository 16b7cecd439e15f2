package ssd

import "time"

// IO is one operation the store accepted and has not finished: a Read (or
// a verify of Open) still to write into its caller's buffers, a Record
// still to read a slot header into a worker's page, or a Write still to
// read from its caller's buffers.
type IO struct {
	Op     string // "read", "write", "verify" (Open's check of a recovered block) or "record" (Record's header read)
	Key    Key
	Slot   uint32
	Offset int64  // byte offset of the slot header in the data file
	Bytes  uint64 // bytes the system call moves: the 4 KiB header and the block rounded up to 4 KiB (the header alone for "record")
	// Issued: a worker is inside the preadv/pwritev for it (the disk has
	// not answered); false: it waits in the queue behind busy workers.
	Issued bool
	// Age is how long it has been in the system call (Issued), or waiting
	// in the queue (not Issued).
	Age time.Duration
}

// Outstanding returns the operations workers are executing, then those
// still queued, reads before writes; a snapshot taken without waiting for
// any I/O. Safe for concurrent use, also during and after Close (then the
// queue drains: once Close has returned it is empty). Writes the committer
// holds (written, awaiting their fdatasync) are not included: they no
// longer touch the caller's buffers. It allocates; it is for diagnostics,
// not for the I/O path.
func (s *Store) Outstanding() []IO {
	now := time.Now()
	var ios []IO
	s.ioMu.Lock()
	for _, w := range s.wks {
		if w.busy {
			io := w.cur
			io.Age = now.Sub(w.since)
			ios = append(ios, io)
		}
	}
	s.ioMu.Unlock()
	s.q.mu.Lock()
	for _, r := range []*ring{&s.q.reads, &s.q.writes} {
		for i := range r.size {
			o := r.buf[(r.head+i)%len(r.buf)]
			io := s.ioOf(o)
			io.Age = now.Sub(o.queued)
			ios = append(ios, io)
		}
	}
	s.q.mu.Unlock()
	return ios
}

// ioOf describes o. An entry's key, meta and slot never change after it is
// made (see entry), so no lock is needed.
func (s *Store) ioOf(o *op) IO {
	e := o.e
	name := "read"
	switch o.kind {
	case opWrite:
		name = "write"
	case opVerify:
		name = "verify"
	case opRecord:
		return IO{Op: "record", Key: e.key, Slot: e.slot, Offset: s.slotOff(e.slot), Bytes: HeaderBytes}
	}
	return IO{Op: name, Key: e.key, Slot: e.slot, Offset: s.slotOff(e.slot), Bytes: HeaderBytes + roundUp(e.meta.Bytes)}
}
