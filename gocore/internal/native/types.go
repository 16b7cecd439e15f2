package native

import (
	"errors"
	"fmt"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// ErrNoCgo is returned by every constructor of a build without cgo: the
// OrbitKV channel is C code and cannot run without it.
var ErrNoCgo = errors.New("native: built without cgo; the OrbitKV channel needs cgo and a C compiler")

// ErrBadSlot is returned by Attach for an index out of range or in use.
var ErrBadSlot = errors.New("native: slot index out of range or already attached")

// PollMode is how the dispatcher waits for requests (server.h enum
// okvi_poll_mode; values checked against C by TestEnumsMatchC).
type PollMode int

// Poll modes.
const (
	PollSpin     PollMode = 0 // never park; one core busy
	PollAdaptive PollMode = 1 // spin for the window after the last request, then park
	PollPark     PollMode = 2 // park whenever nothing is pending
)

// ParsePollMode parses "spin", "adaptive" or "park".
func ParsePollMode(s string) (PollMode, error) {
	switch s {
	case "spin":
		return PollSpin, nil
	case "adaptive":
		return PollAdaptive, nil
	case "park":
		return PollPark, nil
	}
	return 0, fmt.Errorf("poll mode %q: want spin, adaptive or park", s)
}

// String returns the flag spelling of m.
func (m PollMode) String() string {
	switch m {
	case PollSpin:
		return "spin"
	case PollAdaptive:
		return "adaptive"
	case PollPark:
		return "park"
	}
	return fmt.Sprintf("PollMode(%d)", int(m))
}

// EventKind says what a returned Event is (enum okvi_event_kind).
type EventKind uint32

// Event kinds.
const (
	EventRequest EventKind = 1 // a new request line
	EventControl EventKind = 2 // the control slot rang
)

// Event mirrors struct okvi_event (80 bytes): a private copy of one request
// line and the generation seen before it.
type Event struct {
	Slot    uint32
	Kind    EventKind
	PrevGen uint64
	Msg     abi.Message
}

// Reply mirrors struct okvi_reply (80 bytes): one response to post.
type Reply struct {
	Slot      uint32
	Reserved0 uint32
	Reserved1 uint64
	Msg       abi.Message
}

// ServerStats mirrors struct okvi_server_stats.
type ServerStats struct {
	Requests   uint64 // request events returned
	Replies    uint64 // responses posted
	Parks      uint64 // futex sleeps
	Steps      uint64 // Step calls (cgo crossings)
	StrayRings uint64 // doorbell bits of unattached slots
	Rescued    uint64 // requests found by a rescan: their doorbell ring was erased
	Rescans    uint64 // rescans of every attached slot's request line
}

// ConnectOptions mirrors struct okv_connect_options.
type ConnectOptions struct {
	SocketPath  string        // bootstrap socket; "" = derive from ManagerAddr
	ManagerAddr string        // "host:port"; "" with SocketPath "" = okv_resolve_socket_path's default rule
	InstanceID  string        // ≤ 64 bytes of printable ASCII
	Role        uint32        // abi.Role
	Spin        time.Duration // spin before parking; 0 = 50 µs
	Timeout     time.Duration // control-call deadline; 0 = 5 s
	// ManagerUID is the uid of a Manager trusted besides this process's
	// own (struct okv_connect_options.manager_uid_plus1); nil: none, or
	// ORBITKV_MANAGER_UID.
	ManagerUID *uint32
}

// Health mirrors struct okv_health.
type Health struct {
	Status     string
	Epoch      uint64
	ServiceID  [16]byte
	Sessions   uint32
	ManagerPID uint32
	Uptime     time.Duration
	Requests   uint64
	PollMode   string
	Version    string

	// Cache state; on an idle Manager Leases, Pins, ReservedBytes and
	// Operations are zero.
	Blocks           uint64 // sealed blocks resident in RAM
	RAMUsedBytes     uint64 // bytes of frames holding blocks
	RAMCapacityBytes uint64 // the Manager's --ram-capacity
	Leases           uint64 // live leases
	Pins             uint64 // block pins (leases + copies)
	ReservedBytes    uint64 // bytes reserved by live leases
	Operations       uint64 // copies in flight or awaiting RestorePoll
	Evictions        uint64 // blocks evicted since the Manager started
	Tickets          uint64 // live query tickets
	Lookups          uint64 // logical lookups since start
	DistinctLookups  uint64 // distinct lookups, HyperLogLog estimate
}

// ClientError is an error code of liborbitkv (a negative okv_error or
// -errno) with its okv_strerror text and the client's okv_last_error detail.
type ClientError struct {
	Code   int
	Text   string // okv_strerror(Code)
	Detail string // okv_last_error, may be empty
}

// Error implements error: the field and the detail.
func (e *ClientError) Error() string {
	if e.Detail != "" {
		return "liborbitkv: " + e.Text + ": " + e.Detail
	}
	return "liborbitkv: " + e.Text
}

// Error codes of liborbitkv (client.h enum okv_error; checked against C by
// TestEnumsMatchC), for comparisons with ClientError.Code.
const (
	CodeProto        = -1001
	CodeVersion      = -1002
	CodeRefused      = -1003
	CodeStaleSession = -1004
	CodeStaleGen     = -1005
	CodeInvalid      = -1006
	CodeTimedOut     = -1007
	CodeManagerDied  = -1008
	CodeClosed       = -1009
	CodeInternal     = -1010
	CodeUnsupported  = -1011
	CodeApplication  = -1012
	CodePending      = -1013 // restore still copying (RestorePoll maps it to done = false)
	CodeUnadmitted   = -1014 // no capacity now, nothing done; retry later
	Code2Big         = -1015 // batch does not fit the session's descriptor area
)
