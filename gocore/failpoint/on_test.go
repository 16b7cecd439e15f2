//go:build failpoints

package failpoint

import (
	"testing"
	"time"
)

// Two Resume calls in a row (two HTTP requests) must not close the resume
// channel twice (it panicked the handler; review finding). Run with
// -tags failpoints (make test-go does).
func TestASecondResumeIsANoOp(t *testing.T) {
	for i := 0; i < 1000; i++ {
		if err := Arm(TicketAdmission); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { Hit(TicketAdmission); close(done) }()
		if !WaitPaused(TicketAdmission, time.Second) {
			t.Fatal("not paused")
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("iteration %d: second Resume panicked: %v", i, p)
				}
			}()
			Resume(TicketAdmission)
			Resume(TicketAdmission)
		}()
		<-done
	}
}
