//go:build cgo

package native

/*
#include <errno.h>
#include <stdlib.h>
#include "server.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// doorbellSeqOffset is offsetof(struct okv_doorbell, seq); TestLayoutMatchesC
// checks it.
const doorbellSeqOffset = 64

// rawParkWindow bounds the dispatcher's raw (P-holding) futex sleep; see
// Step. It covers a scheduler that asks once per step (about a millisecond)
// and bounds how long a stop-the-world can wait for the dispatcher. Measured
// on the 2-vCPU VM at one Ping per ms: 2 ms gave 13.1 µs p50, 10 ms 8.1 µs
// (raw futex ping-pong: 7.2 µs); arming a near timer on every park costs VM
// exits. The dispatcher does not allocate, so a GC pause of up to 10 ms
// delays only the Manager's cold paths (bootstrap, HTTP).
const rawParkWindow = 10 * time.Millisecond

// reschedEvery is how often, at most, Step passes through the Go scheduler
// on its way to a raw sleep. The dispatcher goroutine never blocks in Go,
// so its P's schedule tick never moves; Go's sysmon marks a goroutine
// whose tick is 10 ms old for preemption (forcePreemptNS; sysmon looks
// every 10-20 ms on an idle Manager) and signals its thread. The signal
// mostly ends an idle raw futex sleep with EINTR, and the dispatcher then
// reschedules at its next function call. On a goroutine locked to its
// thread (Dispatcher.Run) that costs two thread handoffs (the P goes to
// another thread, which finds the goroutine and hands the P back), traced
// at 20-40 µs on the 2-vCPU VM and paid by a request that arrives during
// them or is in flight. runtime.Gosched before sleeping takes the same
// handoffs at a moment Step chooses, while nothing is pending, and moves
// the tick, so sysmon sends no preemption to a dispatcher that parks at
// least this often (docs/channel.md, "The dispatcher sleeps outside cgo").
const reschedEvery = 5 * time.Millisecond

// gosched is runtime.Gosched; a test replaces it to ring the doorbell at
// the moment Step reschedules (TestARingDuringTheRescheduleIsNotLost).
var gosched = runtime.Gosched

// Server is the Manager's poll loop over one doorbell. It is owned by a
// single dispatcher goroutine: every method except Ring must be called from
// that goroutine only.
type Server struct {
	s        *C.struct_okvi_server
	db       *C.struct_okv_doorbell
	events   []Event // C memory, len maxBatch
	replies  []Reply // C memory, len maxBatch
	cEvents  *C.struct_okvi_event
	cReplies *C.struct_okvi_reply
	rawPark  unix.Timespec // rawParkWindow, for FUTEX_WAIT
	parks    atomic.Uint64 // times Step went to sleep; read by any goroutine
	resched  time.Time     // the last runtime.Gosched of Step (see reschedEvery)
	// iceoryx2 mode (UseIceoryx2): the raw sleep is epoll_wait on parkFD,
	// the poll loop's epoll over every session's iceoryx2 request listener
	// and its wake eventfd; -1 on the shm transport.
	parkFD int
	epev   [1]unix.EpollEvent
}

// NewServer makes a poll loop over the doorbell mapping db (at least
// abi.DoorbellSize bytes of mmap'd memory that stays mapped until Close).
// maxSessions < abi.MaxSessions; maxBatch ≥ 2 is the largest batch of
// events one Step returns and of replies one Step posts.
func NewServer(db []byte, maxSessions uint32, mode PollMode, spinWindow time.Duration, maxBatch int) (*Server, error) {
	if len(db) < abi.DoorbellSize || maxBatch < 2 {
		return nil, fmt.Errorf("native: doorbell of %d bytes (want >= %d), batch %d (want >= 2)", len(db), abi.DoorbellSize, maxBatch)
	}
	cdb := (*C.struct_okv_doorbell)(unsafe.Pointer(&db[0]))
	s := C.okvi_server_new(cdb, C.uint32_t(maxSessions), C.int(mode), C.uint64_t(spinWindow.Nanoseconds()))
	if s == nil {
		return nil, fmt.Errorf("native: okvi_server_new(max_sessions=%d, mode=%v) refused: max_sessions must be 1..%d", maxSessions, mode, abi.ControlSlot)
	}
	ev := (*C.struct_okvi_event)(C.calloc(C.size_t(maxBatch), C.sizeof_struct_okvi_event))
	// Replies: one per event plus one per copy completion drained in the
	// same step (the dispatcher drains at most maxBatch).
	rp := (*C.struct_okvi_reply)(C.calloc(C.size_t(2*maxBatch), C.sizeof_struct_okvi_reply))
	if ev == nil || rp == nil {
		C.free(unsafe.Pointer(ev))
		C.free(unsafe.Pointer(rp))
		C.okvi_server_free(s)
		return nil, errors.New("native: out of memory for event arrays")
	}
	C.okvi_server_set_caller_parks(s, 1)
	return &Server{
		s: s, db: cdb, cEvents: ev, cReplies: rp, parkFD: -1,
		rawPark: unix.NsecToTimespec(rawParkWindow.Nanoseconds()),
		events:  unsafe.Slice((*Event)(unsafe.Pointer(ev)), maxBatch),
		replies: unsafe.Slice((*Reply)(unsafe.Pointer(rp)), 2*maxBatch),
	}, nil
}

// Replies returns the reply array (C memory, valid until Close; 2*maxBatch
// entries). Fill the first n entries and pass n to the next Step.
func (s *Server) Replies() []Reply { return s.replies }

// SetMode changes the poll mode and spin window for the next Step.
func (s *Server) SetMode(mode PollMode, spinWindow time.Duration) {
	C.okvi_server_set_mode(s.s, C.int(mode), C.uint64_t(spinWindow.Nanoseconds()))
}

// Attach starts polling the slot mapping at index. seenGen is the request
// generation currently in the slot's request line (0 for a fresh slot).
func (s *Server) Attach(index uint32, slot []byte, seenGen uint64) error {
	if len(slot) < abi.SlotDescOffset {
		return fmt.Errorf("native: slot mapping of %d bytes, want >= %d", len(slot), abi.SlotDescOffset)
	}
	rc := C.okvi_server_attach(s.s, C.uint32_t(index), (*C.struct_okv_slot)(unsafe.Pointer(&slot[0])), C.uint64_t(seenGen))
	if rc != 0 {
		return fmt.Errorf("attach slot %d: %w", index, ErrBadSlot)
	}
	return nil
}

// UseIceoryx2 switches the poll loop to iceoryx2 mode (okvi_server_use_iox2,
// native/src/server.h): slots attached with AttachIceoryx2 move their
// requests and responses through their own iceoryx2 service, and Step
// sleeps on an iceoryx2 WaitSet inside C. Call once, before the first
// attach and before NewCopyEngineFor. Errors wrap ErrNoIceoryx2 in a build
// without the transport, else name what failed.
func (s *Server) UseIceoryx2() error {
	var buf [256]C.char
	rc := C.okvi_server_use_iox2(s.s, &buf[0], C.size_t(len(buf)))
	switch {
	case rc == 0:
		s.parkFD = int(C.okvi_server_park_fd(s.s))
		return nil
	case rc == -C.ENOSYS:
		return fmt.Errorf("native: %w", ErrNoIceoryx2)
	default:
		return fmt.Errorf("native: %s", C.GoString(&buf[0]))
	}
}

// Iceoryx2Runtime is where the poll loop's iceoryx2 objects live: the
// runtime string of okv_iox2_runtime_new (a random /dev/shm prefix, then
// the path of a private root directory with a random name), which a
// session's client needs to open its service; "" without the iceoryx2
// transport. Valid until Close.
func (s *Server) Iceoryx2Runtime() string {
	return C.GoString(C.okvi_server_iox2_runtime(s.s))
}

// AttachIceoryx2 attaches like Attach and creates the slot's iceoryx2
// request-response service named name exclusively (one client; objects of
// this uid only). Errors wrap ErrBadSlot for an index out of range or in
// use, os.ErrExist when the name exists, ErrNoIceoryx2 without the
// transport.
func (s *Server) AttachIceoryx2(index uint32, slot []byte, seenGen uint64, name string) error {
	if len(slot) < abi.SlotDescOffset {
		return fmt.Errorf("native: slot mapping of %d bytes, want >= %d", len(slot), abi.SlotDescOffset)
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var buf [512]C.char
	rc := C.okvi_server_attach_iox2(s.s, C.uint32_t(index), (*C.struct_okv_slot)(unsafe.Pointer(&slot[0])),
		C.uint64_t(seenGen), cname, &buf[0], C.size_t(len(buf)))
	switch {
	case rc == 0:
		return nil
	case rc == -C.EINVAL || rc == -C.EBUSY:
		return fmt.Errorf("attach slot %d: %s: %w", index, C.GoString(&buf[0]), ErrBadSlot)
	case rc == -C.EEXIST:
		return fmt.Errorf("attach slot %d: iceoryx2 service %s: %w", index, name, os.ErrExist)
	case rc == -C.ENOSYS:
		return fmt.Errorf("attach slot %d: %w", index, ErrNoIceoryx2)
	default:
		return fmt.Errorf("attach slot %d: iceoryx2 service %s: %s", index, name, C.GoString(&buf[0]))
	}
}

// Detach stops polling index; afterwards the mapping may be unmapped.
func (s *Server) Detach(index uint32) { C.okvi_server_detach(s.s, C.uint32_t(index)) }

// Step posts the first nReplies entries of Replies(), then waits (per poll
// mode) until at least one event arrives, and returns the events. The
// returned slice aliases C memory and is valid until the next Step. No
// allocation.
//
// Parking happens in two stages. First the goroutine sleeps on the doorbell
// futex with a raw system call for at most rawParkWindow: a long cgo call
// gives up its P, and taking it back wakes the runtime's sysmon thread
// (strace showed one futex wake and one 20 µs nanosleep per request), an
// extra cross-CPU wakeup for every request that reaches a parked Manager.
// The raw sleep keeps the P, so GOMAXPROCS must be at least 2
// (Dispatcher.Run ensures it). A preemption signal usually ends the timed
// futex with EINTR (the kernel does not restart it despite SA_RESTART), but
// nothing does when asynchronous preemption is off or a signal is missed,
// so the sleep must stay short, or a stop-the-world (and every goroutine
// with it) would wait for the next request. After rawParkWindow the
// goroutine sleeps inside a cgo call instead, where the runtime can take
// its P.
func (s *Server) Step(nReplies int) []Event {
	for {
		n := C.okvi_server_step(s.s, s.cReplies, C.int(nReplies), s.cEvents, C.int(len(s.events)))
		if n < 0 {
			// Only bad arguments produce this, which NewServer rules out.
			panic(fmt.Sprintf("native: okvi_server_step returned %d", int(n)))
		}
		if n > 0 {
			return s.events[:int(n)]
		}
		nReplies = 0
		if now := time.Now(); now.Sub(s.resched) >= reschedEvery {
			// server_parked stays set meanwhile: a ring bumps seq, and
			// the futex sleep below returns at once (EAGAIN); an iceoryx2
			// listener's epoll is level-triggered, so the next step
			// drains a notification that came meanwhile.
			s.resched = now
			gosched()
		}
		s.parks.Add(1)
		if s.parkFD >= 0 {
			// iceoryx2: the same two stages, the raw one an epoll_wait on
			// the sessions' iceoryx2 listeners (and the wake eventfd), the
			// long one iceoryx2's WaitSet inside C. EINTR (a preemption
			// signal: epoll_wait is never restarted) means step again.
			n, _, errno := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(s.parkFD), uintptr(unsafe.Pointer(&s.epev[0])),
				1, uintptr(rawParkWindow/time.Millisecond), 0, 0)
			if n == 0 && errno == 0 {
				C.okvi_server_park_wait(s.s)
			}
			continue
		}
		seq := s.parkSeq()
		// FUTEX_WAIT (shared: the word is in a MAP_SHARED memfd) on the
		// doorbell's seq (abi.h offset 64). EAGAIN (value changed) and a
		// wake both mean: step again.
		_, _, errno := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(s.db))+doorbellSeqOffset,
			0 /* FUTEX_WAIT */, uintptr(seq), uintptr(unsafe.Pointer(&s.rawPark)), 0, 0)
		if errno == unix.ETIMEDOUT {
			C.okvi_server_park_wait(s.s)
		}
	}
}

// parkSeq is the doorbell seq value the raw futex sleep waits on: the one
// the last Step that set server_parked read (okvi_server_park_seq).
func (s *Server) parkSeq() uint32 { return uint32(C.okvi_server_park_seq(s.s)) }

// Post posts the first nReplies entries of Replies() without waiting for
// requests; the dispatcher uses it once when it stops.
func (s *Server) Post(nReplies int) { C.okvi_server_post(s.s, s.cReplies, C.int(nReplies)) }

// Parks returns how many times Step went to sleep because nothing was
// pending; each costs the next request a wakeup. Safe from any goroutine.
func (s *Server) Parks() uint64 { return s.parks.Load() }

// Ring makes the current or next Step return an EventControl, through a
// private flag a client cannot clear (okvi_server_ring). Safe from any
// goroutine until Close.
func (s *Server) Ring() { C.okvi_server_ring(s.s) }

// ctlWord is the server's private control-pending word (okvi_server_ctl_word)
// for the copy engine.
func (s *Server) ctlWord() *C.uint32_t { return C.okvi_server_ctl_word(s.s) }

// Stats returns the poll loop's counters (dispatcher goroutine only).
func (s *Server) Stats() ServerStats {
	var st C.struct_okvi_server_stats
	C.okvi_server_stats(s.s, &st)
	return ServerStats{uint64(st.requests), uint64(st.replies), uint64(st.parks), uint64(st.steps), uint64(st.stray_rings),
		uint64(st.rescued), uint64(st.rescans)}
}

// Rescued returns how many requests a rescan of the request lines found
// because their doorbell ring had been erased (another session wrote the
// shared doorbell; native/src/server.h). Safe from any goroutine.
func (s *Server) Rescued() uint64 { return uint64(C.okvi_server_rescued(s.s)) }

// Close frees the server and its arrays; the doorbell is not unmapped.
func (s *Server) Close() {
	if s.s == nil {
		return
	}
	C.okvi_server_free(s.s)
	C.free(unsafe.Pointer(s.cEvents))
	C.free(unsafe.Pointer(s.cReplies))
	s.s, s.events, s.replies = nil, nil, nil
}
