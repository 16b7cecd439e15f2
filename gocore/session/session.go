package session

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/ratelog"
	"github.com/orbitkv/orbitkv/gocore/tenant"
)

// ErrFull is returned by Open when every slot index is in use.
var ErrFull = errors.New("session: no free slot (max sessions reached)")

// Spec is the validated configuration of a Table; a plain value.
type Spec struct {
	Epoch        uint64 // Manager epoch (nonzero)
	MaxSessions  uint32 // 1 .. abi.ControlSlot
	DescCapacity uint32 // descriptor area bytes, 4 KiB .. 64 MiB, multiple of 4 KiB
	// MaxSessionsPerPID bounds the live sessions of one peer pid
	// (SO_PEERCRED); 0: DefaultMaxSessionsPerPID; 1 .. abi.ControlSlot.
	MaxSessionsPerPID uint32
}

// Validate checks the limits of s; every field out of range is a
// *limit.Error naming it.
func (s Spec) Validate() error {
	return errors.Join(
		limit.Check(s.Epoch != 0, "session.Epoch", s.Epoch, "nonzero"),
		MaxSessionsRange.Check(s.MaxSessions),
		MaxSessionsPerPIDRange.Check(s.MaxSessionsPerPID),
		limit.Check(s.DescCapacity >= MinDescBytes && s.DescCapacity <= MaxDescBytes && s.DescCapacity%4096 == 0,
			"session.DescCapacity", s.DescCapacity, "a multiple of 4KiB in 4KiB..64MiB"),
	)
}

// MaxSessionsRange is the limit of Spec.MaxSessions: slot indices below
// the control slot (abi.ControlSlot).
var MaxSessionsRange = limit.Range[uint32]{Field: "session.MaxSessions", Min: 1, Max: abi.ControlSlot}

// Limits of Spec.DescCapacity: whole 4 KiB pages.
const (
	MinDescBytes = 4 << 10
	MaxDescBytes = 64 << 20
)

// Peer is who is behind a connection, from SO_PEERCRED and the hello.
type Peer struct {
	PID        int32
	UID        uint32
	Role       abi.Role
	InstanceID string
	// Tenant is the tenant the kernel's credentials of the peer selected
	// at bootstrap (gocore/tenant); nil when the Manager has no tenants
	// (one trust domain).
	Tenant *tenant.Tenant
}

// Buffer is one engine KV buffer registered by RegisterBuffers. For the host
// backend the Manager keeps the fd and a shared mapping of the region until
// the session closes (Table.Close unmaps it after the dispatcher drained the
// session's copies). The layout is layer-major: page p of layer l starts at
// byte (l*PageCount + p) * PageBytes of the region (liborbitkv's
// okv_buffer).
type Buffer struct {
	File      *os.File // nil for the CUDA backend
	Offset    uint64   // bytes into File
	Bytes     uint64   // region length in bytes
	Layers    uint32   // KV layers in the region
	PageBytes uint64   // bytes of one page of one layer
	PageCount uint64   // pages per layer
	CUDAIPC   []byte
	Device    uint32
	// Mem is the region mapped MAP_SHARED read-write (host backend; nil
	// otherwise); mapping is the whole page-aligned mapping it lies in.
	Mem     []byte
	mapping []byte
	// GPU is the region's CUDA memory mapped into the Manager (nil for host
	// memory); Table.Close unmaps it after the session's copies drained.
	GPU DeviceMapping
}

// DeviceMapping is a client's CUDA memory mapped into the Manager and
// announced to the CUDA copy backend (native.CUDAMapping).
type DeviceMapping interface {
	Addr() uintptr // the region's first byte, as copy segments address it
	Unmap()        // release the mapping; idempotent; copies must have drained
}

// GPUMapper maps a client's CUDA memory (the cache's CUDA copy backend;
// copier.GPU). Errors wrap unix.ENODEV (no device with that UUID),
// unix.ERANGE (the region does not lie inside the allocation) or carry the
// driver's error.
type GPUMapper interface {
	// MapIPC opens a 64-byte legacy IPC handle on the device uuid and maps
	// [offset, offset+n) of its base allocation.
	MapIPC(uuid [16]byte, handle []byte, offset, n uint64) (DeviceMapping, error)
	// MapVMM imports a VMM POSIX-fd handle (fd borrowed) of allocBytes and
	// maps [offset, offset+n) of it.
	MapVMM(uuid [16]byte, fd int, allocBytes, offset, n uint64) (DeviceMapping, error)
}

// Addr is the address of the region's first byte in the Manager: of Mem,
// or of the GPU mapping; 0 when neither is mapped.
func (b *Buffer) Addr() uintptr {
	switch {
	case b.Mem != nil:
		return uintptr(unsafe.Pointer(&b.Mem[0]))
	case b.GPU != nil:
		return b.GPU.Addr()
	}
	return 0
}

// SetMapping records the page-aligned mapping m of which the region is
// m[delta:delta+Bytes]; Table.Close unmaps m.
func (b *Buffer) SetMapping(m []byte, delta uint64) {
	b.mapping = m
	b.Mem = m[delta : delta+b.Bytes : delta+b.Bytes]
}

// Session is one connected process. Fields set by Open are immutable; the
// mutable parts (buffers, registration) are guarded by mu.
type Session struct {
	Index uint32
	Token uint64 // client token: random, proves lifecycle frames come from the owner
	// IceoryxService is the name of the session's iceoryx2 service when the
	// channel runs on iceoryx2 (set by the dispatcher's Attach, before it
	// returns; "" on the shm transport). It carries 128 random bits: it is
	// the session's capability, sent only in its bootstrap reply.
	IceoryxService string
	// IceoryxRuntime is the runtime string of the Manager's iceoryx2 objects
	// (native.Server.Iceoryx2Runtime), set with IceoryxService.
	IceoryxRuntime    string
	Epoch             uint64
	InitialGeneration uint64
	Peer              Peer
	Opened            time.Time

	slotFile  *os.File
	slot      []byte
	eventFile *os.File

	lastGen atomic.Uint64 // highest accepted request generation, published by the dispatcher at Detach

	// The channel's part, touched by the dispatcher goroutine only, from
	// its Attach (which sets Limits and zeroes Requests) to its Detach:
	// the limits requests are validated against (Limits.LastGen advances
	// with each accepted request) and the requests handled. The cache
	// keeps its operations of the session (restores, copies, tickets) in
	// its own record, keyed by Index and dropped at Detach.
	Limits   abi.RequestLimits
	Requests uint64
	// Refusals bounds the session's refused-request log lines, the
	// channel's and the cache's together, to one a second (the zero
	// Limiter), so a hostile or broken client cannot flood the log.
	Refusals ratelog.Limiter

	mu         sync.Mutex
	registered bool
	instanceID string // from RegisterInstance; Peer.InstanceID is the hello's
	buffers    []Buffer
}

// SlotFile is the sealed slot memfd (borrowed; closed by Table.Close).
func (s *Session) SlotFile() *os.File { return s.slotFile }

// EventFile is the session eventfd (borrowed; closed by Table.Close).
func (s *Session) EventFile() *os.File { return s.eventFile }

// Slot is the Manager's mapping of the slot; valid until Table.Close. Only
// the dispatcher reads the request and writes the response through it.
func (s *Session) Slot() []byte { return s.slot }

// SlotBytes is the memfd size: the control page plus the descriptor area.
func (s *Session) SlotBytes() uint32 { return uint32(len(s.slot)) }

// DescCapacity is the descriptor area size in bytes.
func (s *Session) DescCapacity() uint32 { return uint32(len(s.slot)) - abi.SlotDescOffset }

// SetLastGeneration records the highest request generation the dispatcher
// accepted; Table.Close starts the next session at this index beyond it.
func (s *Session) SetLastGeneration(g uint64) { s.lastGen.Store(g) }

// MarkRegistered records a successful RegisterInstance with its instance id.
func (s *Session) MarkRegistered(instanceID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registered = true
	s.instanceID = instanceID
}

// InstanceID is the id from RegisterInstance, or the hello's when the
// session has not registered one.
func (s *Session) InstanceID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.instanceID != "" {
		return s.instanceID
	}
	return s.Peer.InstanceID
}

// Registered reports whether RegisterInstance succeeded.
func (s *Session) Registered() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.registered
}

// Unmap unmaps the buffer's mapping (idempotent); only for buffers not
// handed to a session, whose mappings Table.Close unmaps.
func (b *Buffer) Unmap() {
	if b.mapping != nil {
		unix.Munmap(b.mapping)
		b.mapping, b.Mem = nil, nil
	}
	if b.GPU != nil {
		b.GPU.Unmap()
		b.GPU = nil
	}
}

// AddBuffers takes ownership of the buffers (their files and mappings) and
// returns the id of the first: ids count from 0 in registration order.
func (s *Session) AddBuffers(b []Buffer) uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := uint32(len(s.buffers))
	s.buffers = append(s.buffers, b...)
	return first
}

// Buffer returns a copy of buffer id's description (its Mem aliases the
// mapping, valid until Table.Close), or false for an unknown id.
func (s *Session) Buffer(id uint32) (Buffer, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if uint64(id) >= uint64(len(s.buffers)) {
		return Buffer{}, false
	}
	return s.buffers[id], true
}

// BufferBytes returns the bytes of all registered buffers.
func (s *Session) BufferBytes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n uint64
	for _, b := range s.buffers {
		n += b.Bytes
	}
	return n
}

// BufferCount returns the number of registered buffers.
func (s *Session) BufferCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buffers)
}

func randomUint64() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("session: crypto/rand failed: " + err.Error()) // rand.Read never fails on Linux ≥ 3.17
	}
	return binary.LittleEndian.Uint64(b[:])
}

// HostBuffer returns buffer id for a copy, or the DescError a request
// naming it gets: Invalid for an unknown id, Unsupported for a buffer
// mapped neither as host memory nor as CUDA memory.
func (s *Session) HostBuffer(id uint32) (Buffer, *abi.DescError) {
	b, ok := s.Buffer(id)
	if !ok {
		return b, abi.Invalid(abi.FieldBufferID, 0, "%d: no registered buffer with this id", id)
	}
	if b.Mem == nil && b.GPU == nil {
		return b, &abi.DescError{Status: abi.StatusUnsupported, Field: abi.FieldBufferID, Detail: fmt.Sprintf("%d is a CUDA buffer; this build copies host memory only", id)}
	}
	return b, nil
}

// Descriptor appends the request's descriptor, copied out of the shared
// slot, to scratch[:0]: a client rewriting its slot meanwhile cannot change
// what is checked. m already passed abi.ValidateRequest (its descriptor
// lies inside the slot); a command without one is Invalid.
func (s *Session) Descriptor(m *abi.Message, scratch []byte) ([]byte, *abi.DescError) {
	if m.DescLength == 0 {
		return scratch[:0], abi.Invalid(abi.FieldDescLength, 0, "this command needs a descriptor")
	}
	return append(scratch[:0], s.slot[m.DescOffset:m.DescOffset+m.DescLength]...), nil
}

// PutResult writes r over m's descriptor area when it has room for one
// (QueryBundle: over the query; Poll and Claim: the optional 64-byte
// result area).
func (s *Session) PutResult(m *abi.Message, r *abi.QueryResult) {
	if m.DescLength >= abi.QueryResultSize {
		abi.PutQueryResult(s.slot[m.DescOffset:], r)
	}
}

// Usage is one session's share of the cache state: what its own Health
// frame reports. Manager-wide figures (blocks, RAM used, lookups, other
// sessions) tell one tenant about another's traffic, so they go only to
// the operator's endpoints (GET /health, /metrics); see docs/cache.md,
// "Health".
type Usage struct {
	Leases        uint64 // live leases the session owns
	LeasedBlocks  uint64 // block references those leases hold (each pins its block)
	ReservedBytes uint64 // bytes of the byte budget its leases and in-flight restores reserve
	Operations    uint64 // operation permits it holds: tickets live or draining, restores
	Tickets       uint64 // its live query tickets
}
