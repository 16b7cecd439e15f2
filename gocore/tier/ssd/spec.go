package ssd

import (
	"fmt"
	"path/filepath"
)

// Admission rules for Spec.Admission.
const (
	AdmitAll       = "all"        // every offered block is written
	AdmitSecondHit = "second-hit" // a block is written the second time it is offered
)

// Limits and defaults of a Spec.
const (
	MaxSlotBytes            = 1 << 30 // 1 GiB: one slot's data
	MaxSlots                = 1 << 31 // slot numbers fit in the index's uint32
	MaxIOWorkers            = 256
	DefaultIOWorkers        = 4
	DefaultMaxPendingWrites = 64
	DefaultVerifyOnOpen     = 64
)

// Key names a block: the namespace fingerprint and the block hash, the
// same fields as gocore/index.Key. A block of one namespace never answers
// for another (the namespace is part of every slot header and record).
type Key struct {
	NS   [16]byte
	Hash [16]byte
}

// Meta is a block's size and shape. Read answers ErrMeta when the stored
// Meta differs from the one asked for, so a block written for another
// layout is never served.
type Meta struct {
	Bytes  uint64 // block bytes, 1 to Spec.SlotBytes
	Layers uint32 // layers the block spans, at least 1
}

// Spec is a plain description of a store; Validate checks it without
// touching the filesystem.
type Spec struct {
	// Dir holds the store's files (blocks.dat, index.log); Open creates it.
	Dir string
	// CapacityBytes bounds the data file: it holds
	// CapacityBytes / (HeaderBytes + SlotBytes) slots.
	CapacityBytes uint64
	// SlotBytes is the largest block, a multiple of 4096 up to MaxSlotBytes.
	// Every block takes one slot of HeaderBytes + SlotBytes on disk.
	SlotBytes uint64
	// IOWorkers is the number of goroutines doing pread/pwrite on the data
	// file, so the number of I/Os in flight (0: DefaultIOWorkers).
	IOWorkers int
	// Admission is AdmitAll or AdmitSecondHit ("": AdmitAll).
	Admission string
	// MaxPendingWrites bounds the Writes queued or in flight; past it Write
	// answers ErrBusy, so a slow disk cannot hold an unbounded amount of the
	// caller's memory (0: DefaultMaxPendingWrites).
	MaxPendingWrites int
	// VerifyOnOpen is how many recovered blocks Open reads back and checks
	// in full (0: DefaultVerifyOnOpen; -1: none; a value at or above the
	// block count: all). Half are the oldest blocks, the slots that writes
	// in flight at a crash were overwriting; half are picked at random.
	VerifyOnOpen int
}

// withDefaults fills the zero fields with their defaults.
func (s Spec) withDefaults() Spec {
	if s.IOWorkers == 0 {
		s.IOWorkers = DefaultIOWorkers
	}
	if s.Admission == "" {
		s.Admission = AdmitAll
	}
	if s.MaxPendingWrites == 0 {
		s.MaxPendingWrites = DefaultMaxPendingWrites
	}
	if s.VerifyOnOpen == 0 {
		s.VerifyOnOpen = DefaultVerifyOnOpen
	}
	return s
}

// Validate names the field and limit that s violates (zero fields take
// their defaults first).
func (s Spec) Validate() error {
	s = s.withDefaults()
	switch {
	case s.Dir == "":
		return fmt.Errorf("ssd tier: Dir is empty")
	case !filepath.IsAbs(s.Dir):
		return fmt.Errorf("ssd tier: Dir %q is not an absolute path", s.Dir)
	case s.SlotBytes == 0 || s.SlotBytes%4096 != 0 || s.SlotBytes > MaxSlotBytes:
		return fmt.Errorf("ssd tier: SlotBytes %d, want a multiple of 4096 in [4096, %d]", s.SlotBytes, uint64(MaxSlotBytes))
	case s.CapacityBytes < s.stride():
		return fmt.Errorf("ssd tier: CapacityBytes %d is less than one slot (%d bytes: a %d-byte header and SlotBytes %d)",
			s.CapacityBytes, s.stride(), HeaderBytes, s.SlotBytes)
	case s.CapacityBytes/s.stride() > MaxSlots:
		return fmt.Errorf("ssd tier: CapacityBytes %d is more than %d slots of %d bytes", s.CapacityBytes, uint64(MaxSlots), s.stride())
	case s.IOWorkers < 1 || s.IOWorkers > MaxIOWorkers:
		return fmt.Errorf("ssd tier: IOWorkers %d, want 1 to %d", s.IOWorkers, MaxIOWorkers)
	case s.Admission != AdmitAll && s.Admission != AdmitSecondHit:
		return fmt.Errorf("ssd tier: Admission %q, want %q or %q", s.Admission, AdmitAll, AdmitSecondHit)
	case s.MaxPendingWrites < 1:
		return fmt.Errorf("ssd tier: MaxPendingWrites %d, want at least 1", s.MaxPendingWrites)
	case s.VerifyOnOpen < -1:
		return fmt.Errorf("ssd tier: VerifyOnOpen %d, want -1 (none), 0 (default) or a count", s.VerifyOnOpen)
	}
	return nil
}

// stride is the bytes one slot takes in the data file.
func (s Spec) stride() uint64 { return HeaderBytes + s.SlotBytes }

// Slots is the number of slots the data file holds.
func (s Spec) Slots() uint32 {
	if s.SlotBytes == 0 {
		return 0
	}
	return uint32(min(s.CapacityBytes/s.stride(), MaxSlots))
}
