package requester

import "errors"

// Errors of the Engine. A READ the source refused comes back as the
// source's sentinel (gocore/transfer: ErrUnknownSegment, ErrExpired,
// ErrOutOfRange, ErrMalformed, through transfer.RemoteError); a closed
// Engine answers transfer.ErrClosed.
var (
	// ErrRail: a data connection failed (dial, read, write, or a frame
	// that does not match what was asked); the slices on it were retried
	// on other rails until Retries ran out.
	ErrRail = errors.New("transfer: data connection failed")
	// ErrUnknownBatch: the BatchID is not (or no longer) the Engine's.
	ErrUnknownBatch = errors.New("transfer: unknown batch")
	// ErrUnknownHandle: the SegmentHandle is not (or no longer) open.
	ErrUnknownHandle = errors.New("transfer: unknown segment handle")
	// ErrUnregistered: a request's Dst does not lie inside memory given to
	// RegisterLocalMemory.
	ErrUnregistered = errors.New("transfer: destination outside registered memory")
)
