package abi

import (
	"encoding/binary"
	"fmt"
)

// Wire constants; each equals the macro of the same meaning in abi.h.
const (
	MsgMagic         = 0x31564B4F // OKV_MSG_MAGIC
	Version          = 3          // OKV_ABI_VERSION
	MessageSize      = 64         // sizeof(struct okv_msg)
	CacheLine        = 64         // OKV_CACHE_LINE
	SlotDescOffset   = 4096       // OKV_SLOT_DESC_OFFSET
	DefaultDescBytes = 256 << 10  // OKV_DEFAULT_DESC_CAPACITY
	DoorbellWords    = 64         // OKV_DOORBELL_WORDS
	MaxSessions      = 64 * 64    // OKV_MAX_SESSIONS
	ControlSlot      = MaxSessions - 1
	SlotMagic        = 0x53564B4F // OKV_SLOT_MAGIC
	DoorbellMagic    = 0x44564B4F // OKV_DOORBELL_MAGIC
	DoorbellSize     = 256 + 8*DoorbellWords
)

// Command is the code of a request message (enum okv_command).
type Command uint16

// Commands of docs/design.md §5.2.
const (
	CmdPing        Command = 1
	CmdQueryBundle Command = 2
	CmdPoll        Command = 3
	CmdClaim       Command = 4
	CmdCancelQuery Command = 5
	CmdPublish     Command = 6
	CmdRestore     Command = 7
	CmdRestorePoll Command = 8
	CmdRelease     Command = 9
	CmdShutdown    Command = 10
	cmdMax                 = CmdShutdown
)

var commandNames = [...]string{"", "Ping", "QueryBundle", "Poll", "Claim", "CancelQuery",
	"Publish", "Restore", "RestorePoll", "Release", "Shutdown"}

// String returns the command name, or "Command(N)" for an unknown code.
func (c Command) String() string { return enumName(commandNames[:], c, "Command") }

// Status is the code of a response message (enum okv_status).
type Status uint16

// Statuses of docs/design.md §5.2, plus Unsupported for known commands this build
// does not serve yet.
const (
	StatusOK              Status = 0
	StatusLoading         Status = 1
	StatusMiss            Status = 2
	StatusCandidates      Status = 3
	StatusUnadmitted      Status = 4
	StatusInvalid         Status = 5
	StatusStaleSession    Status = 6
	StatusStaleGeneration Status = 7
	StatusTimeout         Status = 8
	StatusInternal        Status = 9
	StatusUnsupported     Status = 10
)

var statusNames = [...]string{"Ok", "Loading", "Miss", "Candidates", "Unadmitted", "Invalid",
	"StaleSession", "StaleGeneration", "Timeout", "Internal", "Unsupported"}

// String returns the status name, or "Status(N)".
func (s Status) String() string { return enumName(statusNames[:], s, "Status") }

// Field names the message field that made a request invalid (enum okv_field).
// An Invalid response carries it in arg0.
type Field uint64

// Fields of enum okv_field.
const (
	FieldNone       Field = 0
	FieldMagic      Field = 1
	FieldABIVersion Field = 2
	FieldCode       Field = 3
	FieldEpoch      Field = 4
	FieldDescOffset Field = 5
	FieldDescLength Field = 6
	FieldGeneration Field = 7
	FieldReserved   Field = 8
)

var fieldNames = [...]string{"none", "magic", "abi_version", "code", "epoch", "desc_offset",
	"desc_length", "generation", "reserved", "desc_magic", "desc_schema", "desc_flags",
	"desc_reserved", "count", "buffer_id", "page", "layers", "lease_id", "block",
	"block_bytes", "op_id", "namespace", "revision", "request", "recovery_range", "record"}

// String returns the C field name ("desc_offset"), or "Field(N)".
func (f Field) String() string { return enumName(fieldNames[:], f, "Field") }

// enumName returns names[v], or "typ(v)" when v has no name there (past the
// table, or an empty entry).
func enumName[T ~uint16 | ~uint32 | ~uint64](names []string, v T, typ string) string {
	if uint64(v) < uint64(len(names)) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint64(v))
}

// Message mirrors struct okv_msg: 64 bytes, same offsets (checked by
// layout_test.go). Values of this type may alias shared memory only through
// gocore/internal/native, which copies lines out before Go reads them.
type Message struct {
	Magic      uint32
	ABIVersion uint16
	Code       uint16
	RequestID  uint64
	Epoch      uint64
	DescOffset uint32
	DescLength uint32
	Generation uint64
	Arg0       uint64
	Arg1       uint64
	Reserved   uint64
}

// DecodeMessage reads a message from exactly MessageSize little-endian bytes.
// It checks only the length; use ValidateRequest for the contents.
func DecodeMessage(b []byte) (Message, error) {
	if len(b) != MessageSize {
		return Message{}, fmt.Errorf("abi: message is %d bytes, want exactly %d", len(b), MessageSize)
	}
	le := binary.LittleEndian
	return Message{
		Magic:      le.Uint32(b[0:]),
		ABIVersion: le.Uint16(b[4:]),
		Code:       le.Uint16(b[6:]),
		RequestID:  le.Uint64(b[8:]),
		Epoch:      le.Uint64(b[16:]),
		DescOffset: le.Uint32(b[24:]),
		DescLength: le.Uint32(b[28:]),
		Generation: le.Uint64(b[32:]),
		Arg0:       le.Uint64(b[40:]),
		Arg1:       le.Uint64(b[48:]),
		Reserved:   le.Uint64(b[56:]),
	}, nil
}

// AppendTo appends the 64-byte little-endian encoding of m to b.
func (m Message) AppendTo(b []byte) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, m.Magic)
	b = le.AppendUint16(b, m.ABIVersion)
	b = le.AppendUint16(b, m.Code)
	b = le.AppendUint64(b, m.RequestID)
	b = le.AppendUint64(b, m.Epoch)
	b = le.AppendUint32(b, m.DescOffset)
	b = le.AppendUint32(b, m.DescLength)
	b = le.AppendUint64(b, m.Generation)
	b = le.AppendUint64(b, m.Arg0)
	b = le.AppendUint64(b, m.Arg1)
	return le.AppendUint64(b, m.Reserved)
}

// MaxGenerationStep bounds how far one request may move a slot's
// generation past the last accepted one, so a client cannot push a reused
// slot index toward wrap-around.
const MaxGenerationStep = 1 << 32

// RequestLimits is what a request is checked against: the session's view of
// the Manager epoch, its slot geometry and the last accepted generation.
type RequestLimits struct {
	Epoch        uint64 // Manager epoch; any other is StaleSession
	DescOffset   uint32 // start of the descriptor area in the slot
	DescCapacity uint32 // bytes of the descriptor area
	LastGen      uint64 // highest accepted request generation (0 = none yet)
}

// RequestError says why a request was refused: the status to answer with and
// the field to name in arg0 and in logs.
type RequestError struct {
	Status Status
	Field  Field
	Detail string // includes the value and the limit
}

// Error implements error: the field and the detail.
func (e *RequestError) Error() string {
	return fmt.Sprintf("abi: request %s: %s", e.Field, e.Detail)
}

// ValidateRequest checks a request message in the order a reader needs:
// magic, ABI version, epoch (StaleSession), generation odd and above
// LastGen by at most MaxGenerationStep (StaleGeneration), known command, reserved zero, descriptor inside
// the descriptor area. It returns nil or a *RequestError. It never allocates
// on success (the dispatcher hot path; see TestValidateRequestAllocs).
func (m *Message) ValidateRequest(l RequestLimits) *RequestError {
	switch {
	case m.Magic != MsgMagic:
		return &RequestError{StatusInvalid, FieldMagic, fmt.Sprintf("0x%08x, want 0x%08x", m.Magic, MsgMagic)}
	case m.ABIVersion != Version:
		return &RequestError{StatusInvalid, FieldABIVersion, fmt.Sprintf("%d, want exactly %d", m.ABIVersion, Version)}
	case m.Epoch != l.Epoch:
		return &RequestError{StatusStaleSession, FieldEpoch, fmt.Sprintf("%d, Manager epoch is %d", m.Epoch, l.Epoch)}
	case m.Generation&1 == 0:
		return &RequestError{StatusStaleGeneration, FieldGeneration, fmt.Sprintf("%d is even; requests carry odd generations", m.Generation)}
	case m.Generation <= l.LastGen:
		return &RequestError{StatusStaleGeneration, FieldGeneration, fmt.Sprintf("%d, must exceed the last accepted %d", m.Generation, l.LastGen)}
	case m.Generation-l.LastGen > MaxGenerationStep:
		return &RequestError{StatusStaleGeneration, FieldGeneration, fmt.Sprintf("%d jumps more than %d past the last accepted %d", m.Generation, uint64(MaxGenerationStep), l.LastGen)}
	case m.Code == 0 || Command(m.Code) > cmdMax:
		return &RequestError{StatusInvalid, FieldCode, fmt.Sprintf("%d, commands are 1..%d", m.Code, uint16(cmdMax))}
	case m.Reserved != 0:
		return &RequestError{StatusInvalid, FieldReserved, fmt.Sprintf("0x%x, must be zero", m.Reserved)}
	}
	if m.DescLength == 0 {
		if m.DescOffset != 0 {
			return &RequestError{StatusInvalid, FieldDescOffset, fmt.Sprintf("%d with desc_length 0, must be 0", m.DescOffset)}
		}
		return nil
	}
	end := uint64(l.DescOffset) + uint64(l.DescCapacity)
	if m.DescOffset < l.DescOffset || uint64(m.DescOffset) >= end {
		return &RequestError{StatusInvalid, FieldDescOffset, fmt.Sprintf("%d outside the descriptor area [%d, %d)", m.DescOffset, l.DescOffset, end)}
	}
	if uint64(m.DescOffset)+uint64(m.DescLength) > end {
		return &RequestError{StatusInvalid, FieldDescLength, fmt.Sprintf("%d at offset %d passes the area end %d", m.DescLength, m.DescOffset, end)}
	}
	return nil
}

// WithStatus returns a copy of response m with status st.
func (m Message) WithStatus(st Status) Message {
	m.Code = uint16(st)
	return m
}

// Response builds the response to request m: same request id, the given
// epoch and status, generation m.Generation+1.
func (m *Message) Response(epoch uint64, st Status, arg0, arg1 uint64) Message {
	return Message{
		Magic:      MsgMagic,
		ABIVersion: Version,
		Code:       uint16(st),
		RequestID:  m.RequestID,
		Epoch:      epoch,
		Generation: m.Generation + 1,
		Arg0:       arg0,
		Arg1:       arg1,
	}
}
