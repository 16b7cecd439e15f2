package ssd

// entryState is where a block is in its life.
type entryState uint8

const (
	// stateWriting: its slot is reserved and its data is being written; it
	// is in Store.writing, not visible to Contains or Read.
	stateWriting entryState = iota
	// stateResident: its put record is durable; it is in Store.resident and
	// on the FIFO.
	stateResident
	// stateDead: dropped (deleted, evicted, replaced, corrupt or failed);
	// its slot returns to the free list once no read pins it.
	stateDead
)

// entry is one block. key, meta, gen and slot never change after the
// entry is made, so readers use them without the lock; state, pins and
// the FIFO links are guarded by Store.mu.
type entry struct {
	key   Key
	meta  Meta
	gen   uint64
	slot  uint32
	state entryState
	pins  int32 // reads in flight on the slot

	prev, next *entry        // FIFO of resident entries, oldest first
	waiters    []func(error) // Writes of the same key and Meta while this one is in flight

	class        Class  // set when the entry is made (class.go)
	cprev, cnext *entry // its class's FIFO of resident entries, oldest first
}

// fifo links the resident entries in generation order, the order of the
// Writes that made them (replay rebuilds the same order from the records'
// generations); the head is the next eviction victim.
type fifo struct {
	head, tail *entry
	n          int
}

// insert links e after the last entry of a lower generation. Writes
// complete nearly in order, so the walk from the tail is short.
func (f *fifo) insert(e *entry) {
	after := f.tail
	for after != nil && after.gen > e.gen {
		after = after.prev
	}
	e.prev = after
	if after != nil {
		e.next = after.next
		after.next = e
	} else {
		e.next = f.head
		f.head = e
	}
	if e.next != nil {
		e.next.prev = e
	} else {
		f.tail = e
	}
	f.n++
}

func (f *fifo) remove(e *entry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		f.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		f.tail = e.prev
	}
	e.prev, e.next = nil, nil
	f.n--
}

// takeSlot reserves a slot for a new block: a free one, else the oldest
// resident block's that no read pins (it is evicted: no record is written,
// because the put record of the block that reuses the slot displaces it
// on replay). ok is false when every slot is being written or read.
// Called with s.mu held.
func (s *Store) takeSlot() (slot uint32, ok bool) {
	if n := len(s.free); n > 0 {
		slot = s.free[n-1]
		s.free = s.free[:n-1]
		return slot, true
	}
	for e := s.fifo.head; e != nil; e = e.next {
		if e.pins == 0 {
			s.unlink(e)
			s.st.Evictions++
			return e.slot, true
		}
	}
	return 0, false
}

// unlink takes a resident entry out of the index and the FIFO, marks it
// dead and tells Spec.Blocks it is gone; the caller decides what becomes
// of its slot. Called with s.mu held.
func (s *Store) unlink(e *entry) {
	s.detach(e)
	if s.spec.Blocks != nil {
		s.spec.Blocks.Gone(e.key)
	}
}

// detach is unlink without telling Spec.Blocks: for a recovered block
// dropped while Open verifies it, which no caller has heard of yet.
// Called with s.mu held.
func (s *Store) detach(e *entry) {
	delete(s.resident, e.key)
	s.fifo.remove(e)
	s.unlinkClass(e)
	s.dataBytes -= e.meta.Bytes
	e.state = stateDead
}

// drop unlinks a resident entry and frees its slot, now or when the last
// read pinning it ends. Called with s.mu held.
func (s *Store) drop(e *entry) {
	s.unlink(e)
	if e.pins == 0 {
		s.freeSlot(e.slot)
	}
}

// freeSlot returns a slot to the free list. Called with s.mu held.
func (s *Store) freeSlot(slot uint32) {
	s.slots[slot] = nil
	s.free = append(s.free, slot)
}

// makeResident publishes a written entry, displacing an older block of
// the same key. Called with s.mu held.
func (s *Store) makeResident(e *entry) {
	if old := s.resident[e.key]; old != nil {
		s.drop(old)
	}
	e.state = stateResident
	s.resident[e.key] = e
	s.fifo.insert(e)
	s.linkClass(e)
	s.dataBytes += e.meta.Bytes
}
