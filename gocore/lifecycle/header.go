package lifecycle

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Sizes and limits of a frame (abi.h).
const (
	// HeaderSize is the size of struct okv_frame_header in bytes.
	HeaderSize = 24
	// MaxBody is the largest body length in bytes (OKV_FRAME_MAX_BODY, 16 MiB;
	// spec: "16 MiB metadata limit").
	MaxBody = 16 << 20
	// MaxFiles is the largest number of fds that travel with one frame
	// (OKV_FRAME_MAX_FDS).
	MaxFiles = 64
)

// Wire constants of the header (abi.h).
const (
	// Magic is OKV_FRAME_MAGIC, "OKVF" read as little-endian bytes.
	Magic uint32 = 0x46564B4F
	// Version is OKV_FRAME_VERSION, compared for equality (client and
	// Manager are upgraded together): the frame layout of the spec's
	// bootstrap protocol version 2, which version 3 (extension records
	// after the hello reply, abi.BootstrapVersion) left unchanged.
	Version uint16 = 2
)

// ErrMalformed is wrapped by every error that rejects bytes read from the
// peer. The Manager closes a connection that sent a malformed frame
// (docs/design.md §5.1).
var ErrMalformed = errors.New("lifecycle: malformed frame")

// ErrStaleEpoch is wrapped by the error for a frame whose epoch is not the
// current Manager epoch: the peer talks to another Manager incarnation. It
// wraps ErrMalformed too, so the connection is closed (docs/design.md §6 rule 7).
var ErrStaleEpoch = fmt.Errorf("lifecycle: stale epoch: %w", ErrMalformed)

// Header is struct okv_frame_header (see the package doc for the layout).
// The zero value is not valid; NewHeader fills Magic and Version.
type Header struct {
	Magic    uint32 // OKV_FRAME_MAGIC
	Version  uint16 // OKV_FRAME_VERSION
	Code     Code   // request, reply or error code
	Epoch    uint64 // Manager epoch
	Length   uint32 // body bytes, <= MaxBody
	Reserved uint32 // zero
}

// NewHeader returns a valid header for a frame of code, epoch and body
// length bytes. It does not check its arguments; DecodeHeader does.
func NewHeader(code Code, epoch uint64, length uint32) Header {
	return Header{Magic: Magic, Version: Version, Code: code, Epoch: epoch, Length: length}
}

// AppendTo appends the HeaderSize little-endian bytes of h to b and returns
// the extended slice. It encodes h as is, valid or not.
func (h Header) AppendTo(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, h.Magic)
	b = binary.LittleEndian.AppendUint16(b, h.Version)
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Code))
	b = binary.LittleEndian.AppendUint64(b, h.Epoch)
	b = binary.LittleEndian.AppendUint32(b, h.Length)
	b = binary.LittleEndian.AppendUint32(b, h.Reserved)
	return b
}

// DecodeHeader decodes the first HeaderSize bytes of b and validates them
// against the current Manager epoch, in wire order: magic, version, code
// (Code.Known), epoch, length (<= MaxBody) and reserved (zero). Bytes of b
// beyond HeaderSize are ignored.
//
// Errors wrap ErrMalformed and name the field and the limit, for example
// "lifecycle: frame body length 17000000 exceeds limit 16777216"; a short b
// also wraps io.ErrUnexpectedEOF, an epoch mismatch also wraps ErrStaleEpoch.
// On error the partially decoded header is returned for logging.
func DecodeHeader(b []byte, epoch uint64) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fmt.Errorf("lifecycle: frame header length %d below %d: %w", len(b), HeaderSize, errTruncated)
	}
	h := Header{
		Magic:    binary.LittleEndian.Uint32(b[0:]),
		Version:  binary.LittleEndian.Uint16(b[4:]),
		Code:     Code(binary.LittleEndian.Uint16(b[6:])),
		Epoch:    binary.LittleEndian.Uint64(b[8:]),
		Length:   binary.LittleEndian.Uint32(b[16:]),
		Reserved: binary.LittleEndian.Uint32(b[20:]),
	}
	return h, h.Validate(epoch)
}

// Validate checks h as DecodeHeader does; see there for the rules and errors.
func (h Header) Validate(epoch uint64) error {
	switch {
	case h.Magic != Magic:
		return fmt.Errorf("lifecycle: frame magic %#08x differs from OKV_FRAME_MAGIC %#08x: %w", h.Magic, Magic, ErrMalformed)
	case h.Version != Version:
		return fmt.Errorf("lifecycle: frame version %d differs from protocol version %d: %w", h.Version, Version, ErrMalformed)
	case !h.Code.Known():
		return fmt.Errorf("lifecycle: frame code %#04x unknown (requests 1..%d, their replies |0x8000, error 0xffff): %w",
			uint16(h.Code), codeMax, ErrMalformed)
	case h.Epoch != epoch:
		return fmt.Errorf("lifecycle: frame epoch %d differs from Manager epoch %d: %w", h.Epoch, epoch, ErrStaleEpoch)
	case h.Length > MaxBody:
		return fmt.Errorf("lifecycle: frame body length %d exceeds limit %d: %w", h.Length, MaxBody, ErrMalformed)
	case h.Reserved != 0:
		return fmt.Errorf("lifecycle: frame reserved %#x must be zero: %w", h.Reserved, ErrMalformed)
	}
	return nil
}
