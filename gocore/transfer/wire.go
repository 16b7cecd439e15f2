package transfer

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// HeaderBytes is the size of every frame header on a data connection, in
// bytes (the layout is in doc.go).
const HeaderBytes = 64

// MaxSliceBytes is the most payload bytes one READ may ask for and one DATA
// frame may carry: 16 MiB. It bounds what a malformed or hostile header can
// make either side read or write.
const MaxSliceBytes = 16 << 20

// MaxErrorTextBytes is the most bytes of text an ERROR frame carries.
const MaxErrorTextBytes = 256

// Wire constants (doc.go).
const (
	wireMagic   = 0x54564B4F // "OKVT" little-endian
	wireVersion = 1
)

// Op is the operation of a frame.
type Op uint8

// The ops of the wire protocol.
const (
	// OpRead asks the source for Length bytes at Offset of Segment; it
	// carries the segment's Capability and no payload. Requester → source.
	OpRead Op = 1
	// OpData answers the READ of the same Tag with Length payload bytes.
	// Source → requester.
	OpData Op = 2
	// OpError refuses the READ of the same Tag: Code says why and Length
	// bytes of text follow (at most MaxErrorTextBytes). Source → requester.
	OpError Op = 3
)

// Header is one decoded frame header (doc.go has its byte layout).
type Header struct {
	Op         Op
	Code       Code   // why, in ERROR; 0 otherwise
	Tag        uint64 // the requester's slice id; echoed in the answer
	Segment    uint64 // segment id (READ); echoed in the answer
	Offset     uint64 // byte offset in the segment (READ); echoed
	Length     uint32 // payload bytes asked for (READ) or following (DATA, ERROR)
	Capability Capability
}

// ErrMalformed is wrapped by every decoding error of a frame header.
var ErrMalformed = errors.New("transfer: malformed frame")

// Encode writes h into b[:HeaderBytes]; b must hold HeaderBytes bytes.
func (h *Header) Encode(b []byte) {
	_ = b[HeaderBytes-1]
	binary.LittleEndian.PutUint32(b[0:], wireMagic)
	b[4] = wireVersion
	b[5] = byte(h.Op)
	binary.LittleEndian.PutUint16(b[6:], uint16(h.Code))
	binary.LittleEndian.PutUint64(b[8:], h.Tag)
	binary.LittleEndian.PutUint64(b[16:], h.Segment)
	binary.LittleEndian.PutUint64(b[24:], h.Offset)
	binary.LittleEndian.PutUint32(b[32:], h.Length)
	binary.LittleEndian.PutUint32(b[36:], 0)
	copy(b[40:56], h.Capability[:])
	binary.LittleEndian.PutUint64(b[56:], 0)
}

// DecodeHeader decodes one frame header from b (outside bytes). It checks
// everything a header alone can tell: magic, version, a known op, zero
// reserved fields, a segment id ≠ 0, offset+length within 2^64, a length
// bound per op (READ and DATA 1..MaxSliceBytes, ERROR 0..MaxErrorTextBytes),
// a Code of 0 except in ERROR, and a zero capability except in READ.
// Whether the segment exists and holds [offset, offset+length) is the
// server's check (CheckRange). Errors wrap ErrMalformed and name the field
// and its limit.
func DecodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderBytes {
		return h, fmt.Errorf("%w: header is %d bytes, want %d", ErrMalformed, len(b), HeaderBytes)
	}
	if m := binary.LittleEndian.Uint32(b[0:]); m != wireMagic {
		return h, fmt.Errorf("%w: magic %#08x, want %#08x", ErrMalformed, m, wireMagic)
	}
	if b[4] != wireVersion {
		return h, fmt.Errorf("%w: version %d, want %d", ErrMalformed, b[4], wireVersion)
	}
	h.Op = Op(b[5])
	h.Code = Code(binary.LittleEndian.Uint16(b[6:]))
	h.Tag = binary.LittleEndian.Uint64(b[8:])
	h.Segment = binary.LittleEndian.Uint64(b[16:])
	h.Offset = binary.LittleEndian.Uint64(b[24:])
	h.Length = binary.LittleEndian.Uint32(b[32:])
	copy(h.Capability[:], b[40:56])
	if r := binary.LittleEndian.Uint32(b[36:]); r != 0 {
		return h, fmt.Errorf("%w: reserved bytes 36..40 are %#x, want 0", ErrMalformed, r)
	}
	if r := binary.LittleEndian.Uint64(b[56:]); r != 0 {
		return h, fmt.Errorf("%w: reserved bytes 56..64 are %#x, want 0", ErrMalformed, r)
	}
	var maxLen, minLen uint32
	switch h.Op {
	case OpRead, OpData:
		minLen, maxLen = 1, MaxSliceBytes
	case OpError:
		minLen, maxLen = 0, MaxErrorTextBytes
	default:
		return h, fmt.Errorf("%w: op %d is unknown, want %d (READ), %d (DATA) or %d (ERROR)", ErrMalformed, h.Op, OpRead, OpData, OpError)
	}
	if h.Length < minLen || h.Length > maxLen {
		return h, fmt.Errorf("%w: length %d of op %s, want %d..%d", ErrMalformed, h.Length, h.Op, minLen, maxLen)
	}
	if h.Segment == 0 {
		return h, fmt.Errorf("%w: segment id 0, want ≥ 1", ErrMalformed)
	}
	if h.Offset > ^uint64(0)-uint64(h.Length) {
		return h, fmt.Errorf("%w: offset %d + length %d overflows 2^64", ErrMalformed, h.Offset, h.Length)
	}
	if h.Op != OpError && h.Code != 0 {
		return h, fmt.Errorf("%w: code %d in op %s, want 0", ErrMalformed, h.Code, h.Op)
	}
	if h.Op == OpError && (h.Code == 0 || h.Code >= codeEnd) {
		return h, fmt.Errorf("%w: code %d in op ERROR, want 1..%d", ErrMalformed, h.Code, codeEnd-1)
	}
	if h.Op != OpRead && h.Capability != (Capability{}) {
		return h, fmt.Errorf("%w: capability set in op %s, want zero", ErrMalformed, h.Op)
	}
	return h, nil
}

// CheckRange is the server's check of a decoded READ against the segment
// it names, of size segBytes: [Offset, Offset+Length) must lie inside it.
// The error wraps ErrOutOfRange and names the fields and the limit.
func CheckRange(h *Header, segBytes uint64) error {
	if h.Offset > segBytes || uint64(h.Length) > segBytes-h.Offset {
		return fmt.Errorf("%w: offset %d + length %d is beyond the %d bytes of segment %d", ErrOutOfRange, h.Offset, h.Length, segBytes, h.Segment)
	}
	return nil
}

// String names the op.
func (o Op) String() string {
	switch o {
	case OpRead:
		return "READ"
	case OpData:
		return "DATA"
	case OpError:
		return "ERROR"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}
