package ssd

import "errors"

// Errors of the store; callers test them with errors.Is. A wrapped error
// names the slot, file or field.
var (
	// ErrCorrupt: a block read back does not match the index, or its slot
	// header's MAC does not check over the header and the data (Read) or
	// over the header and its block record (Record). The block is dropped
	// from the store; the caller treats it as a miss and must not use the
	// bytes Read wrote into its buffers.
	ErrCorrupt = errors.New("ssd tier: block failed its integrity check")
	// ErrNotAdmitted: Write declined the block under the second-hit rule
	// (first offer); nothing was written.
	ErrNotAdmitted = errors.New("ssd tier: block not admitted")
	// ErrNotFound: Read or Record of a key the store does not hold.
	ErrNotFound = errors.New("ssd tier: block not found")
	// ErrMeta: Read asked for another size or shape than the block stored
	// under the key, or Write got a Meta outside the Spec's limits.
	ErrMeta = errors.New("ssd tier: block meta mismatch")
	// ErrAlign: the caller's buffers are not whole 4 KiB pages on page
	// boundaries, or hold fewer bytes than the block.
	ErrAlign = errors.New("ssd tier: buffers not page-aligned or too short")
	// ErrBusy: Write found MaxPendingWrites writes pending, every slot in
	// flight or pinned by reads, or the same key being written with
	// another Meta; nothing was written and the caller may offer it later.
	ErrBusy = errors.New("ssd tier: busy")
	// ErrRecordTooLong: Write got a block record over MaxRecordBytes;
	// nothing was written (counted in Stats.RecordTooLong).
	ErrRecordTooLong = errors.New("ssd tier: block record too long")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("ssd tier: closed")
	// ErrNoDirectIO: the filesystem under Spec.Dir refuses O_DIRECT.
	ErrNoDirectIO = errors.New("ssd tier: filesystem refuses O_DIRECT")
	// ErrLocked: another Store (in this or another process) has Spec.Dir open.
	ErrLocked = errors.New("ssd tier: directory in use by another store")
)
