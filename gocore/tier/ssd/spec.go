package ssd

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd/layout"
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

// IOWorkersRange is the limit of Spec.IOWorkers.
var IOWorkersRange = limit.Range[int]{Field: "ssd.IOWorkers", Min: 1, Max: MaxIOWorkers, Zero: strconv.Itoa(DefaultIOWorkers)}

// Key names a block: the namespace fingerprint and the block hash, the
// same fields as gocore/index.Key. A block of one namespace never answers
// for another (the namespace is part of every slot header and record).
type Key = layout.Key

// Meta is a block's size and shape. Read answers ErrMeta when the stored
// Meta differs from the one asked for, so a block written for another
// layout is never served.
type Meta = layout.Meta

// Sizes of the on-disk structures (gocore/tier/ssd/layout draws them).
const (
	// HeaderBytes is the slot header in front of each slot's data: one 4 KiB
	// page, so the data that follows stays aligned for O_DIRECT.
	HeaderBytes = layout.HeaderBytes
	// RecordBytes is the size of every index log record, the file header
	// included.
	RecordBytes = layout.RecordBytes
	// MaxRecordBytes is the most bytes of a block record (Write): 3840,
	// kept in the slot header's page.
	MaxRecordBytes = layout.MaxRecordBytes
)

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
	// CreateDir makes Open create Dir (mode 0700) when it is missing;
	// otherwise a missing Dir is an error.
	CreateDir bool
	// VerifyOnOpen is how many recovered blocks Open reads back and checks
	// in full (0: DefaultVerifyOnOpen; -1: none; a value at or above the
	// block count: all). Half are the oldest blocks, the slots that writes
	// in flight at a crash were overwriting; half are picked at random.
	VerifyOnOpen int
	// Observer hears how long each data-file system call took: the
	// preadv of a Read (write false; Open's verification reads and
	// Record's header reads too) and
	// the pwritev of a Write (write true), from the worker entering it to
	// its return; the fdatasync of a commit is not among them. nil: none.
	Observer IOObserver
	// Blocks hears which blocks become resident and which leave, with
	// their block records (BlockObserver). nil: none.
	Blocks BlockObserver
	// Progress, when set, hears Open's progress through its long steps,
	// done of total in unit ("bytes" or "blocks"): StepPreallocate (bytes
	// of the data file allocated, in steps of PreallocateStep), StepReplay
	// (bytes of the index log replayed: 0 before, all after; not reported
	// when Open made a new MAC key, as nothing is replayed then) and
	// StepVerify (recovered blocks read back and checked, one call per
	// block). Each step reports done == 0 first and done == total last; a
	// step with nothing to do (an empty index, no block to verify) reports
	// 0 of 0 once; done never falls within a step. Called on Open's
	// goroutine, or (StepVerify) on an I/O worker's, one call at a time;
	// it must not block.
	Progress func(step string, done, total uint64, unit string)
}

// The steps Spec.Progress names.
const (
	StepPreallocate = "preallocating the data file"
	StepReplay      = "replaying the index"
	StepVerify      = "verifying recovered blocks"
)

// PreallocateStep is how much of the data file each fallocate call of
// Open allocates, so Spec.Progress hears of a large file every GiB.
const PreallocateStep = 1 << 30

// The units of Spec.Progress.
const (
	UnitBytes  = "bytes"
	UnitBlocks = "blocks"
)

// progress calls s.Progress when set, with the unit of step.
func (s *Spec) progress(step string, done, total uint64) {
	if s.Progress != nil {
		unit := UnitBytes
		if step == StepVerify {
			unit = UnitBlocks
		}
		s.Progress(step, done, total, unit)
	}
}

// BlockObserver hears which blocks are resident (Spec.Blocks). Resident
// runs when a written block becomes visible (after its commit: its data
// and put record are durable), with the class and the block record it was
// written with (nil if none; the slice is the observer's to keep: the
// store keeps no other copy in memory). Gone runs when a resident block
// leaves: evicted by a later write (FIFO), deleted (Delete, and so a
// namespace's flush), dropped after a failed Read or Record, deleted by
// MakeClassRoom, or displaced by a newer write of the same key.
//
// Each Resident is followed by at most one Gone for the same residency,
// and a key's calls alternate: a key rewritten with another Meta hears
// Gone (the old block) and then Resident (the new one), in that order
// under one hold of the lock. A Write that finds the block resident with
// the same Meta writes nothing and hears nothing (the stored record
// stays); a Write that joins one in flight shares its record.
//
// Blocks recovered at Open are not heard through Resident (the caller
// walks Keys and asks Record for each), but their Gone is heard like any
// other's once Open has returned; a recovered block dropped by Open's own
// verification (Spec.VerifyOnOpen) is not heard at all (Keys never lists
// it). So a Gone may name a key the observer never heard Resident for.
//
// Both run with the store's lock held, on the store's goroutines (the
// committer, an I/O worker) or the caller's (Write, Delete,
// MakeClassRoom): they must be quick, must not block, and must never call
// back into the Store.
type BlockObserver interface {
	Resident(k Key, c Class, record []byte)
	Gone(k Key)
}

// IOObserver hears the data file's I/O durations (Spec.Observer). It is
// called on the store's I/O goroutines, concurrently, and must not block.
type IOObserver interface {
	ObserveIO(write bool, took time.Duration)
}

// withDefaults fills the zero fields with their defaults.
func (s Spec) withDefaults() Spec {
	s.IOWorkers = cmp.Or(s.IOWorkers, DefaultIOWorkers)
	s.Admission = cmp.Or(s.Admission, AdmitAll)
	s.MaxPendingWrites = cmp.Or(s.MaxPendingWrites, DefaultMaxPendingWrites)
	s.VerifyOnOpen = cmp.Or(s.VerifyOnOpen, DefaultVerifyOnOpen)
	return s
}

// Validate checks the limits of s (zero fields take their defaults
// first); every field out of range is a *limit.Error naming it.
func (s Spec) Validate() error {
	s = s.withDefaults()
	errs := []error{
		limit.Check(s.Dir != "" && filepath.IsAbs(s.Dir), "ssd.Dir", s.Dir, "an absolute path"),
		IOWorkersRange.Check(s.IOWorkers),
		limit.Check(s.Admission == AdmitAll || s.Admission == AdmitSecondHit, "ssd.Admission", s.Admission,
			fmt.Sprintf("%q or %q", AdmitAll, AdmitSecondHit)),
		limit.Check(s.MaxPendingWrites >= 1, "ssd.MaxPendingWrites", s.MaxPendingWrites, "at least 1"),
		limit.Check(s.VerifyOnOpen >= -1, "ssd.VerifyOnOpen", s.VerifyOnOpen, "-1 (none), 0 (default) or a count"),
	}
	switch {
	case s.SlotBytes == 0 || s.SlotBytes%4096 != 0 || s.SlotBytes > MaxSlotBytes:
		errs = append(errs, &limit.Error{Field: "ssd.SlotBytes", Value: s.SlotBytes, Want: "a multiple of 4KiB in 4KiB.." + limit.Size(MaxSlotBytes)})
	case s.CapacityBytes < s.stride():
		errs = append(errs, &limit.Error{Field: "ssd.CapacityBytes", Value: s.CapacityBytes,
			Want: fmt.Sprintf("at least one slot (%s: a %d-byte header and SlotBytes %d)", limit.Size(s.stride()), HeaderBytes, s.SlotBytes)})
	case s.CapacityBytes/s.stride() > MaxSlots:
		errs = append(errs, &limit.Error{Field: "ssd.CapacityBytes", Value: s.CapacityBytes,
			Want: fmt.Sprintf("at most %d slots of %s", uint64(MaxSlots), limit.Size(s.stride()))})
	}
	return errors.Join(errs...)
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
