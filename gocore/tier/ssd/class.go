package ssd

// Class is a group of blocks the store counts apart: the Manager's tenant
// domains. A block's class is given by the WriteAdmitted that stores it;
// NoClass (0) is counted against none, and is the class of every block
// Write stores and of every block recovered at Open (the index log does
// not keep classes).
type Class uint16

// NoClass is the class of blocks counted against none.
const NoClass Class = 0

// classBlocks is one class's blocks: the bytes of the slots its resident
// blocks and its Writes in flight occupy (slotCost each, whatever their
// Meta.Bytes), and a FIFO of its resident blocks, oldest first, linked
// through entry.cprev/cnext. Guarded by Store.mu.
type classBlocks struct {
	bytes      uint64
	head, tail *entry
}

// slotCost is the bytes one block of any size occupies in the data file:
// a slot, HeaderBytes + Spec.SlotBytes. A class is counted in it.
func (s *Store) slotCost() uint64 { return HeaderBytes + s.spec.SlotBytes }

// class returns c's record, growing the table; c is not NoClass. Called
// with s.mu held.
func (s *Store) class(c Class) *classBlocks {
	if int(c) >= len(s.classes) {
		s.classes = append(s.classes, make([]classBlocks, int(c)+1-len(s.classes))...)
	}
	return &s.classes[c]
}

// linkClass appends a resident entry to its class's FIFO. Called with
// s.mu held.
func (s *Store) linkClass(e *entry) {
	if e.class == NoClass {
		return
	}
	cb := s.class(e.class)
	e.cprev = cb.tail
	if cb.tail != nil {
		cb.tail.cnext = e
	} else {
		cb.head = e
	}
	cb.tail = e
}

// unlinkClass takes a resident entry out of its class's FIFO and bytes.
// Called with s.mu held.
func (s *Store) unlinkClass(e *entry) {
	if e.class == NoClass {
		return
	}
	cb := s.class(e.class)
	if e.cprev != nil {
		e.cprev.cnext = e.cnext
	} else {
		cb.head = e.cnext
	}
	if e.cnext != nil {
		e.cnext.cprev = e.cprev
	} else {
		cb.tail = e.cprev
	}
	e.cprev, e.cnext = nil, nil
	cb.bytes -= s.slotCost()
}

// ClassBytes is the bytes of the slots (HeaderBytes + Spec.SlotBytes each)
// of class c's resident blocks and of its Writes in flight; 0 for NoClass.
func (s *Store) ClassBytes(c Class) uint64 {
	if c == NoClass {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.class(c).bytes
}

// MakeClassRoom makes room within quota (bytes) for one more block of
// class c, which takes a slot (HeaderBytes + Spec.SlotBytes) whatever its
// size: while ClassBytes(c) plus that slot exceeds quota it deletes c's
// oldest resident block that no read pins (as Delete does: a delete
// record goes to the index with the next commit), counted in
// Stats.ClassEvictions. It reports whether the block fits; when it cannot
// (a slot > quota, or c's unpinned blocks are too few) it deletes nothing
// and counts the refusal in Stats.NotAdmitted, as the admission rule
// counts its refusals. The room holds only until the next Write: the
// caller that asks is the one that writes (the Manager's dispatcher).
// NoClass always fits.
func (s *Store) MakeClassRoom(c Class, quota uint64) bool {
	if c == NoClass {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	slot := s.slotCost()
	cb := s.class(c)
	if cb.bytes+slot <= quota {
		return true
	}
	over := cb.bytes + slot - quota
	var free uint64
	for e := cb.head; e != nil && free < over && slot <= quota; e = e.cnext {
		if e.pins == 0 {
			free += slot
		}
	}
	if s.closed || slot > quota || free < over {
		s.st.NotAdmitted++
		return false
	}
	for e := cb.head; cb.bytes+slot > quota; {
		next := e.cnext
		if e.pins == 0 {
			s.drop(e)
			s.st.ClassEvictions++
			s.commitQ.push(getOp(opDelete, e, nil, nil))
		}
		e = next
	}
	return true
}
