package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/hugepages"
)

// Table hands out slot indexes and creates and destroys sessions. Safe for
// concurrent use.
type Table struct {
	spec Spec

	mu      sync.Mutex
	free    []uint32 // free indexes, lowest last
	highGen []uint64 // per index: highest generation any session used
	live    map[uint32]*Session
	refuse  error // non-nil: Open refuses with it (Refuse)
	perPID  pidCount
}

// NewTable validates spec and makes an empty table.
func NewTable(spec Spec) (*Table, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	t := &Table{spec: spec, highGen: make([]uint64, spec.MaxSessions), live: map[uint32]*Session{}}
	for i := int(spec.MaxSessions) - 1; i >= 0; i-- {
		t.free = append(t.free, uint32(i))
	}
	return t, nil
}

// Spec returns the table's spec.
func (t *Table) Spec() Spec { return t.spec }

// Len returns the number of live sessions.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.live)
}

// Sessions returns a snapshot of the live sessions.
func (t *Table) Sessions() []*Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*Session, 0, len(t.live))
	for _, s := range t.live {
		out = append(out, s)
	}
	return out
}

// ErrDraining is the refusal of a new session while the Manager drains
// (orbitkvctl drain): it is shutting down once the operations in flight
// finished.
var ErrDraining = errors.New("session: the Manager is draining (orbitkvctl drain) and admits no new session; it shuts down once operations in flight finish")

// Refuse makes every later Open fail with err (nil admits again); live
// sessions are untouched. Safe for concurrent use.
func (t *Table) Refuse(err error) {
	t.mu.Lock()
	t.refuse = err
	t.mu.Unlock()
}

// Open allocates a slot index and creates the session's sealed slot memfd
// (mapped, header written) and eventfd. Errors: ErrFull, a *PIDLimitError
// (p.PID holds Spec.MaxSessionsPerPID live sessions), the error given to
// Refuse, or a wrapped system error from memfd_create/ftruncate/mmap/fcntl/eventfd.
func (t *Table) Open(p Peer) (*Session, error) {
	t.mu.Lock()
	if t.refuse != nil {
		t.mu.Unlock()
		return nil, t.refuse
	}
	if len(t.free) == 0 {
		t.mu.Unlock()
		return nil, ErrFull
	}
	if err := t.perPID.take(p.PID, t.pidLimit()); err != nil {
		t.mu.Unlock()
		return nil, err
	}
	idx := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	// First generation: odd and beyond everything the index has seen.
	gen := (t.highGen[idx] + 2) | 1
	t.mu.Unlock()

	s, err := t.create(idx, gen, p)
	if err != nil {
		t.mu.Lock()
		t.free = append(t.free, idx)
		t.perPID.give(p.PID)
		t.mu.Unlock()
		return nil, err
	}
	t.mu.Lock()
	t.live[idx] = s
	t.mu.Unlock()
	return s, nil
}

func (t *Table) create(idx uint32, gen uint64, p Peer) (s *Session, err error) {
	size := int(abi.SlotDescOffset + t.spec.DescCapacity)
	fd, err := unix.MemfdCreate(fmt.Sprintf("orbitkv-slot-%d", idx), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create slot: %w", err)
	}
	slotFile := os.NewFile(uintptr(fd), "orbitkv-slot")
	defer func() {
		if err != nil {
			slotFile.Close()
		}
	}()
	if err = unix.Ftruncate(fd, int64(size)); err != nil {
		return nil, fmt.Errorf("ftruncate slot to %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap slot: %w", err)
	}
	defer func() {
		if err != nil {
			unix.Munmap(mem)
		}
	}()
	if err = hugepages.Populate(mem[:min(size, abi.SlotDescOffset+PopulatedDescBytes)], uint64(os.Getpagesize()), nil); err != nil {
		return nil, fmt.Errorf("populate slot: %w", err)
	}
	writeSlotHeader(mem, idx, t.spec, gen)
	if _, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		return nil, fmt.Errorf("seal slot memfd: %w", err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &Session{
		Index: idx, Token: randomUint64(), Epoch: t.spec.Epoch, InitialGeneration: gen,
		Peer: p, Opened: time.Now(),
		slotFile: slotFile, slot: mem, eventFile: os.NewFile(uintptr(efd), "orbitkv-eventfd"),
	}, nil
}

// PopulatedDescBytes is how much of a slot's descriptor area the Manager
// commits at the session's start, beside the control page, so the request
// path never faults on them. The rest of the area is committed by whoever
// first writes it: the client's descriptors, charged to the client's
// memory cgroup, so an idle session commits at most 68 KiB of the
// Manager's memory whatever --desc-bytes is.
const PopulatedDescBytes = 64 << 10

// writeSlotHeader fills line 0 of the slot (struct okv_slot_header).
func writeSlotHeader(mem []byte, idx uint32, spec Spec, gen uint64) {
	le := binary.LittleEndian
	le.PutUint32(mem[0:], abi.SlotMagic)
	le.PutUint16(mem[4:], abi.Version)
	le.PutUint32(mem[8:], uint32(len(mem)))
	le.PutUint32(mem[12:], idx)
	le.PutUint32(mem[16:], abi.SlotDescOffset)
	le.PutUint32(mem[20:], spec.DescCapacity)
	le.PutUint64(mem[24:], spec.Epoch)
	le.PutUint64(mem[32:], gen)
}

// Close releases everything s owns: unmaps the slot (the caller must have
// detached it from the dispatcher first), closes the memfd, the eventfd and
// registered buffer files, and frees the index, remembering the highest
// generation the slot used. Idempotent.
func (t *Table) Close(s *Session) {
	t.mu.Lock()
	if t.live[s.Index] != s {
		t.mu.Unlock()
		return
	}
	delete(t.live, s.Index)
	t.mu.Unlock()

	// Only generations the dispatcher accepted count: the raw request line is
	// client-written and could hold anything.
	high := max(s.InitialGeneration, s.lastGen.Load()+1)
	if s.slot != nil {
		unix.Munmap(s.slot)
		s.slot = nil
	}
	s.slotFile.Close()
	s.eventFile.Close()
	s.mu.Lock()
	for _, b := range s.buffers {
		if b.mapping != nil {
			unix.Munmap(b.mapping)
		}
		if b.GPU != nil {
			b.GPU.Unmap() // the session's copies drained: its streams hold none
		}
		if b.File != nil {
			b.File.Close()
		}
	}
	s.buffers = nil
	s.mu.Unlock()

	t.mu.Lock()
	t.highGen[s.Index] = max(t.highGen[s.Index], high)
	t.free = append(t.free, s.Index)
	t.perPID.give(s.Peer.PID)
	t.mu.Unlock()
}
