package session

import (
	"errors"
	"strings"
	"testing"
)

// One process cannot take every slot: past DefaultMaxSessionsPerPID live
// sessions of its pid, Open refuses it naming the limit, while another
// process still opens one; a closed session gives its place back.
func TestOneProcessCannotTakeEverySlot(t *testing.T) {
	tb, err := NewTable(Spec{Epoch: 1, MaxSessions: DefaultMaxSessionsPerPID + 8, DescCapacity: 4096})
	if err != nil {
		t.Fatal(err)
	}
	hog := Peer{PID: 4242, InstanceID: "hog"}
	var held []*Session
	defer func() {
		for _, s := range held {
			tb.Close(s)
		}
	}()
	for i := 0; i < DefaultMaxSessionsPerPID; i++ {
		s, err := tb.Open(hog)
		if err != nil {
			t.Fatalf("session %d of one process: %v", i, err)
		}
		held = append(held, s)
	}
	_, err = tb.Open(hog)
	var le *PIDLimitError
	if !errors.As(err, &le) || !errors.Is(err, ErrPIDLimit) || le.PID != 4242 || le.Limit != DefaultMaxSessionsPerPID ||
		!strings.Contains(err.Error(), "--max-sessions-per-pid 64") {
		t.Fatalf("session %d of one process: %v, want a PIDLimitError naming --max-sessions-per-pid 64", DefaultMaxSessionsPerPID+1, err)
	}
	if tb.PIDRefusals() != 1 {
		t.Fatalf("refusals counted %d, want 1", tb.PIDRefusals())
	}
	other, err := tb.Open(Peer{PID: 4343})
	if err != nil {
		t.Fatalf("another process: %v", err)
	}
	held = append(held, other)
	tb.Close(held[0])
	held = held[1:]
	s, err := tb.Open(hog)
	if err != nil {
		t.Fatalf("after one of its sessions closed: %v", err)
	}
	held = append(held, s)
}

func TestMaxSessionsPerPIDIsConfigurableAndPidZeroIsNotCounted(t *testing.T) {
	tb, err := NewTable(Spec{Epoch: 1, MaxSessions: 8, DescCapacity: 4096, MaxSessionsPerPID: 2})
	if err != nil {
		t.Fatal(err)
	}
	var held []*Session
	defer func() {
		for _, s := range held {
			tb.Close(s)
		}
	}()
	for i, tc := range []struct {
		pid int32
		ok  bool
	}{{7, true}, {7, true}, {7, false}, {0, true}, {0, true}, {0, true}} {
		s, err := tb.Open(Peer{PID: tc.pid})
		if (err == nil) != tc.ok {
			t.Fatalf("open %d (pid %d): %v, want ok=%v", i, tc.pid, err, tc.ok)
		}
		if s != nil {
			held = append(held, s)
		}
	}
	if _, err := NewTable(Spec{Epoch: 1, MaxSessions: 8, DescCapacity: 4096, MaxSessionsPerPID: 4096}); err == nil {
		t.Fatal("MaxSessionsPerPID 4096 accepted, want at most 4095")
	}
}
