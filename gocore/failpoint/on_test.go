//go:build failpoints

package failpoint

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Run with -tags failpoints (make test-go does).

// reset lets go whatever an earlier test left held or armed.
func reset(t *testing.T) {
	t.Helper()
	for _, n := range All {
		Resume(n)
	}
}

func TestPauseHoldsOnlyWhileArmed(t *testing.T) {
	t.Run("an unarmed point holds nothing and never calls resume", func(t *testing.T) {
		reset(t)
		if Pause(Reservation, func() { t.Error("resume called for an operation that was not held") }) {
			t.Fatal("Pause held an operation at an unarmed point")
		}
		Resume(Reservation)
		if WaitPaused(Reservation, 10*time.Millisecond) {
			t.Fatal("WaitPaused saw a held operation at an unarmed point")
		}
	})
	t.Run("an arm holds exactly one operation", func(t *testing.T) {
		reset(t)
		if err := Arm(CopyComplete); err != nil {
			t.Fatal(err)
		}
		var resumed atomic.Int32
		if !Pause(CopyComplete, func() { resumed.Add(1) }) {
			t.Fatal("Pause did not hold the operation at an armed point")
		}
		if Pause(CopyComplete, func() { t.Error("the second operation's resume was called") }) {
			t.Fatal("one arm held two operations")
		}
		if !WaitPaused(CopyComplete, time.Second) {
			t.Fatal("WaitPaused did not see the held operation")
		}
		if resumed.Load() != 0 {
			t.Fatal("resume ran before Resume")
		}
		Resume(CopyComplete)
		if resumed.Load() != 1 {
			t.Fatalf("resume ran %d times after Resume, want 1", resumed.Load())
		}
		if WaitPaused(CopyComplete, 10*time.Millisecond) {
			t.Fatal("the point still reads paused after Resume")
		}
	})
	t.Run("Resume of an armed point that holds nothing disarms it", func(t *testing.T) {
		reset(t)
		if err := Arm(PublishAck); err != nil {
			t.Fatal(err)
		}
		Resume(PublishAck)
		if Pause(PublishAck, func() {}) {
			t.Fatal("a disarmed point held an operation")
		}
	})
	t.Run("Arm is refused while an operation is held, and accepted after Resume", func(t *testing.T) {
		reset(t)
		if err := Arm(Notification); err != nil {
			t.Fatal(err)
		}
		Pause(Notification, func() {})
		if err := Arm(Notification); err == nil {
			t.Fatal("Arm accepted while an operation is held")
		}
		Resume(Notification)
		if err := Arm(Notification); err != nil {
			t.Fatalf("Arm after Resume: %v", err)
		}
		Resume(Notification)
	})
	t.Run("Arm names the point it does not know", func(t *testing.T) {
		if err := Arm("no-such-point"); err == nil {
			t.Fatal("Arm accepted an unknown point")
		}
	})
}

// resume runs outside the package lock: a resume function that arms the
// point again (as a test driving one operation after another may) must not
// deadlock.
func TestResumeCallsTheResumeFunctionOutsideTheLock(t *testing.T) {
	reset(t)
	if err := Arm(CopySubmitted); err != nil {
		t.Fatal(err)
	}
	Pause(CopySubmitted, func() {
		if err := Arm(CopySubmitted); err != nil {
			t.Errorf("Arm from the resume function: %v", err)
		}
	})
	done := make(chan struct{})
	go func() { Resume(CopySubmitted); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Resume deadlocked calling the resume function")
	}
	Resume(CopySubmitted)
}

// Two Resume calls in a row (two HTTP requests, possibly concurrent) let the
// held operation go once: a second Resume is a no-op, never a second
// release (which would panic the handler).
func TestASecondResumeIsANoOp(t *testing.T) {
	reset(t)
	for i := 0; i < 1000; i++ {
		if err := Arm(TicketAdmission); err != nil {
			t.Fatal(err)
		}
		var resumed atomic.Int32
		held := make(chan bool)
		go func() { held <- Pause(TicketAdmission, func() { resumed.Add(1) }) }()
		if !WaitPaused(TicketAdmission, time.Second) || !<-held {
			t.Fatal("not paused")
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("iteration %d: Resume panicked: %v", i, p)
					}
				}()
				Resume(TicketAdmission)
			}()
		}
		wg.Wait()
		if n := resumed.Load(); n != 1 {
			t.Fatalf("iteration %d: two Resumes ran the resume function %d times, want 1", i, n)
		}
	}
}
