package abi

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Bootstrap constants (abi.h, docs/design.md §5.1).
const (
	BootstrapMagic   = 0x42564B4F // OKV_BOOTSTRAP_MAGIC
	BootstrapVersion = 3          // OKV_BOOTSTRAP_VERSION
	HelloSize        = 96         // sizeof(struct okv_hello)
	HelloReplySize   = 208        // sizeof(struct okv_hello_reply)
	InstanceIDBytes  = 64
	ServiceIDBytes   = 16
	ReplyErrorBytes  = 128
	MaxFrameBody     = 16 << 20 // OKV_FRAME_MAX_BODY
)

// Role is the kind of process behind a session (enum okv_role).
type Role uint32

// Roles of enum okv_role.
const (
	RoleUnspecified Role = 0
	RoleScheduler   Role = 1
	RoleWorker      Role = 2
	RoleTool        Role = 3
	RoleBench       Role = 4
	roleMax              = RoleBench
)

var roleNames = [...]string{"unspecified", "scheduler", "worker", "tool", "bench"}

// String returns the role name, or "Role(N)".
func (r Role) String() string { return enumName(roleNames[:], r, "Role") }

// BootStatus is the status of a bootstrap reply (enum okv_bootstrap_status).
type BootStatus uint16

// Bootstrap statuses.
const (
	BootOK         BootStatus = 0
	BootBadMagic   BootStatus = 1
	BootBadVersion BootStatus = 2
	BootBadField   BootStatus = 3
	BootFull       BootStatus = 4
	BootInternal   BootStatus = 5
)

// Hello mirrors struct okv_hello, the client's first 96 bytes.
type Hello struct {
	Magic           uint32
	ProtocolVersion uint16
	ABIVersion      uint16
	PID             uint32 // informational; SO_PEERCRED is authoritative
	Role            Role
	InstanceID      [InstanceIDBytes]byte
	Reserved        [2]uint64
}

// HelloError is a refused hello: the status for the reply and a message that
// names the field and the limit.
type HelloError struct {
	Status BootStatus
	Field  string
	Detail string
}

// Error implements error: the field and the detail.
func (e *HelloError) Error() string { return fmt.Sprintf("abi: hello %s: %s", e.Field, e.Detail) }

// DecodeHello parses and validates a hello of exactly HelloSize bytes: magic,
// protocol version 2, ABI version, role, instance id (printable ASCII
// followed only by NUL padding), reserved zero. Errors are *HelloError.
func DecodeHello(b []byte) (Hello, error) {
	var h Hello
	if len(b) != HelloSize {
		return h, &HelloError{BootBadField, "length", fmt.Sprintf("%d bytes, want exactly %d", len(b), HelloSize)}
	}
	le := binary.LittleEndian
	h.Magic = le.Uint32(b[0:])
	h.ProtocolVersion = le.Uint16(b[4:])
	h.ABIVersion = le.Uint16(b[6:])
	h.PID = le.Uint32(b[8:])
	h.Role = Role(le.Uint32(b[12:]))
	copy(h.InstanceID[:], b[16:80])
	h.Reserved[0] = le.Uint64(b[80:])
	h.Reserved[1] = le.Uint64(b[88:])
	switch {
	case h.Magic != BootstrapMagic:
		return h, &HelloError{BootBadMagic, "magic", fmt.Sprintf("0x%08x, want 0x%08x", h.Magic, BootstrapMagic)}
	case h.ProtocolVersion != BootstrapVersion:
		return h, &HelloError{BootBadVersion, "protocol_version", fmt.Sprintf("%d, want exactly %d", h.ProtocolVersion, BootstrapVersion)}
	case h.ABIVersion != Version:
		return h, &HelloError{BootBadVersion, "abi_version", fmt.Sprintf("%d, want exactly %d", h.ABIVersion, Version)}
	case h.Role > roleMax:
		return h, &HelloError{BootBadField, "role", fmt.Sprintf("%d, roles are 0..%d", h.Role, roleMax)}
	case h.Reserved != [2]uint64{}:
		return h, &HelloError{BootBadField, "reserved", "must be zero"}
	}
	id := h.InstanceID[:]
	if n := bytes.IndexByte(id, 0); n >= 0 {
		if bytes.IndexFunc(id[n:], func(r rune) bool { return r != 0 }) >= 0 {
			return h, &HelloError{BootBadField, "instance_id", "bytes after the NUL terminator must be zero"}
		}
		id = id[:n]
	}
	for i, c := range id {
		if c < 0x20 || c > 0x7e {
			return h, &HelloError{BootBadField, "instance_id", fmt.Sprintf("byte %d is 0x%02x, want printable ASCII", i, c)}
		}
	}
	return h, nil
}

// InstanceIDString returns the instance id without NUL padding.
func (h *Hello) InstanceIDString() string {
	id := h.InstanceID[:]
	if n := bytes.IndexByte(id, 0); n >= 0 {
		id = id[:n]
	}
	return string(id)
}

// AppendTo appends the 96-byte encoding of h (used by tests and Go clients).
func (h Hello) AppendTo(b []byte) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, h.Magic)
	b = le.AppendUint16(b, h.ProtocolVersion)
	b = le.AppendUint16(b, h.ABIVersion)
	b = le.AppendUint32(b, h.PID)
	b = le.AppendUint32(b, uint32(h.Role))
	b = append(b, h.InstanceID[:]...)
	b = le.AppendUint64(b, h.Reserved[0])
	return le.AppendUint64(b, h.Reserved[1])
}

// HelloReply mirrors struct okv_hello_reply (208 bytes).
type HelloReply struct {
	Magic             uint32
	ProtocolVersion   uint16
	Status            BootStatus
	Epoch             uint64
	ServiceID         [ServiceIDBytes]byte
	ClientToken       uint64
	InitialGeneration uint64
	SlotIndex         uint32
	SlotBytes         uint32
	DescOffset        uint32
	DescCapacity      uint32
	MaxFrameBody      uint32
	ManagerPID        uint32
	MaxSessions       uint32
	ExtBytes          uint16 // bytes of extension records after the reply (AppendBootExt)
	ExtFDs            uint16 // fds those records own, after the fixed three
	Error             [ReplyErrorBytes]byte
}

// Extension records after a hello reply (abi.h struct okv_boot_ext).
const (
	BootExtHeaderSize = 8
	BootExtMaxBytes   = 4096 // OKV_BOOT_EXT_MAX_BYTES
	BootExtMaxFDs     = 16   // OKV_BOOT_EXT_MAX_FDS
	BootExtRequired   = 0x8000
	// BootExtManagerVersion carries the Manager's build version, 1..64
	// printable ASCII bytes, no fds.
	BootExtManagerVersion = 1
	BootExtVersionMax     = 64
	// BootExtIceoryx2Service carries the session's iceoryx2 service name,
	// 1..BootExtServiceMax printable ASCII bytes, no fds; always sent with
	// BootExtRequired (OKV_BOOT_EXT_IOX2_SERVICE).
	BootExtIceoryx2Service = 2
	BootExtServiceMax      = 240
	// BootExtIceoryx2Runtime carries where the Manager's iceoryx2 objects
	// live (native.Server.Iceoryx2Runtime), 1..BootExtRuntimeMax printable
	// ASCII bytes, no fds; sent with every BootExtIceoryx2Service record,
	// with BootExtRequired (OKV_BOOT_EXT_IOX2_RUNTIME).
	BootExtIceoryx2Runtime = 3
	BootExtRuntimeMax      = 255
)

// AppendBootExt appends one extension record: header (type, nfds, length),
// val, zero padding to a multiple of 8. The record owns the next nfds fds
// after those of earlier records; the caller sets HelloReply.ExtBytes and
// ExtFDs to the totals and sends the fds in order after the fixed three.
func AppendBootExt(b []byte, typ, nfds uint16, val []byte) []byte {
	le := binary.LittleEndian
	b = le.AppendUint16(b, typ)
	b = le.AppendUint16(b, nfds)
	b = le.AppendUint32(b, uint32(len(val)))
	b = append(b, val...)
	for i := len(val); i%8 != 0; i++ {
		b = append(b, 0)
	}
	return b
}

// AppendTo appends the 208-byte encoding of r.
func (r HelloReply) AppendTo(b []byte) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, r.Magic)
	b = le.AppendUint16(b, r.ProtocolVersion)
	b = le.AppendUint16(b, uint16(r.Status))
	b = le.AppendUint64(b, r.Epoch)
	b = append(b, r.ServiceID[:]...)
	b = le.AppendUint64(b, r.ClientToken)
	b = le.AppendUint64(b, r.InitialGeneration)
	for _, v := range []uint32{r.SlotIndex, r.SlotBytes, r.DescOffset, r.DescCapacity,
		r.MaxFrameBody, r.ManagerPID, r.MaxSessions} {
		b = le.AppendUint32(b, v)
	}
	b = le.AppendUint16(b, r.ExtBytes)
	b = le.AppendUint16(b, r.ExtFDs)
	return append(b, r.Error[:]...)
}

// RefusedReply builds a reply that refuses a hello with the error text
// (truncated to fit, always NUL-terminated).
func RefusedReply(st BootStatus, msg string) HelloReply {
	r := HelloReply{Magic: BootstrapMagic, ProtocolVersion: BootstrapVersion, Status: st}
	copy(r.Error[:ReplyErrorBytes-1], msg)
	return r
}
