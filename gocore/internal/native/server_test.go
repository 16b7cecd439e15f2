package native

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
)

// newTestServer is a park-mode Server with no sessions over a fresh
// MAP_SHARED doorbell, as the Manager maps it.
func newTestServer(t *testing.T) (*Server, []byte) {
	t.Helper()
	db, err := unix.Mmap(-1, 0, abi.DoorbellSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(db, 4, PollPark, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); _ = unix.Munmap(db) })
	return s, db
}

// word32 atomically loads the doorbell's 32-bit word at byte offset off.
func word32(db []byte, off int) uint32 {
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&db[off])))
}

// hookGosched makes Step call f where it would call runtime.Gosched, for
// the rest of the test.
func hookGosched(t *testing.T, f func()) {
	old := gosched
	gosched = f
	t.Cleanup(func() { gosched = old })
}

// stepControl runs one Step and fails unless it returned an EventControl.
func stepControl(t *testing.T, s *Server) {
	t.Helper()
	evs := s.Step(0)
	for _, e := range evs {
		if e.Kind == EventControl {
			return
		}
	}
	t.Fatalf("Step returned %d events, none EventControl: the ring made during the reschedule was lost", len(evs))
}

// The reschedule (reschedEvery) runs after the poll loop set
// server_parked and chose the seq value to sleep on, so a ring made
// meanwhile changes seq and the raw futex sleep returns at once (EAGAIN)
// instead of waiting out rawParkWindow.
func TestARingDuringTheRescheduleIsNotLost(t *testing.T) {
	s, db := newTestServer(t)
	parkedOff := 2 * abi.CacheLine // okv_doorbell.server_parked (abi layout test)
	calls := 0
	hookGosched(t, func() {
		calls++
		if word32(db, parkedOff) == 0 {
			t.Error("Step rescheduled with server_parked clear: a client ring meanwhile would skip its futex wake")
		}
		seq := s.parkSeq()
		s.Ring()
		if got := word32(db, doorbellSeqOffset); got == seq {
			t.Errorf("doorbell seq still %d after a ring: the raw sleep on it would not return", got)
		}
	})
	stepControl(t, s)
	if calls != 1 {
		t.Fatalf("Step rescheduled %d times before its first raw sleep, want 1", calls)
	}
	// Within reschedEvery of the last reschedule, Step sleeps without one.
	s.Ring()
	stepControl(t, s)
	if calls != 1 {
		t.Fatalf("Step rescheduled %d times, want 1 (at most once per %v)", calls, reschedEvery)
	}
}

// A hostile session may clear server_parked (client-writable memory) while
// the dispatcher reschedules; the Manager's own control ring still moves
// seq, so its event is not lost.
func TestAClearedParkFlagDuringTheRescheduleDoesNotHideAControlRing(t *testing.T) {
	s, db := newTestServer(t)
	parkedOff := 2 * abi.CacheLine
	hookGosched(t, func() {
		binary.LittleEndian.PutUint32(db[parkedOff:], 0)
		seq := s.parkSeq()
		s.Ring()
		if got := word32(db, doorbellSeqOffset); got == seq {
			t.Errorf("doorbell seq still %d after a control ring with server_parked cleared", got)
		}
	})
	stepControl(t, s)
}
