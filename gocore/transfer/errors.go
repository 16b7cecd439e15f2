package transfer

import (
	"errors"
	"fmt"
)

// Errors of a READ and of the Server. A READ the source refuses comes back
// to the requester as the same sentinel (through the Code table below,
// RemoteError), so errors.Is works across the wire. The requester's own
// errors are gocore/transfer/requester's.
var (
	// ErrUnknownSegment: no live segment has the READ's id (never
	// registered, unregistered, or expired and removed).
	ErrUnknownSegment = errors.New("transfer: unknown segment")
	// ErrBadCapability: the READ's capability is not its segment's. The
	// Server answers it on the wire as ErrUnknownSegment (CodeBadCapability
	// stays in the table for sources that send it), so a requester without
	// the capability cannot tell a live segment id from a dead one.
	ErrBadCapability = errors.New("transfer: wrong capability for the segment")
	// ErrExpired: the segment's deadline has passed.
	ErrExpired = errors.New("transfer: segment expired")
	// ErrOutOfRange: [offset, offset+length) is not inside the segment.
	ErrOutOfRange = errors.New("transfer: range beyond the segment")
	// ErrClosed: the Server, or a requester.Engine, is closed.
	ErrClosed = errors.New("transfer: closed")
	// ErrTooManySegments: the Server holds ServerSpec.MaxSegments segments.
	ErrTooManySegments = errors.New("transfer: too many segments")
)

// Code is the reason code of an ERROR frame (the table codeErrors maps
// it to and from the sentinel errors).
type Code uint16

// The status codes of ERROR frames; 0 is "no error" and never sent.
const (
	CodeUnknownSegment Code = 1
	CodeBadCapability  Code = 2
	CodeExpired        Code = 3
	CodeOutOfRange     Code = 4
	CodeMalformed      Code = 5 // the source closes the connection after it
	codeEnd            Code = 6 // one past the last code
)

// codeErrors is the one table between ERROR statuses and errors.
var codeErrors = [codeEnd]error{
	CodeUnknownSegment: ErrUnknownSegment,
	CodeBadCapability:  ErrBadCapability,
	CodeExpired:        ErrExpired,
	CodeOutOfRange:     ErrOutOfRange,
	CodeMalformed:      ErrMalformed,
}

// codeOf is the status that carries err over the wire; err must wrap one
// of the table's errors (CodeMalformed otherwise).
func codeOf(err error) Code {
	for s, e := range codeErrors {
		if e != nil && errors.Is(err, e) {
			return Code(s)
		}
	}
	return CodeMalformed
}

// RemoteError is the requester's error for an ERROR frame of status s: the
// sentinel of s (ErrMalformed for a status outside the table) wrapped with
// the source's text.
func RemoteError(s Code, text string) error {
	e := ErrMalformed
	if s < codeEnd && codeErrors[s] != nil {
		e = codeErrors[s]
	}
	return fmt.Errorf("%w (the source says %q)", e, text)
}
