package ticket_test

import (
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/gocore/ticket"
)

// The expiry schedule keeps the earliest armed deadline, is due from it
// on, clears itself when due, and the ticker rings the dispatcher only
// while something is armed (or Keep asks), never after Stop.
func TestTheExpiryScheduleRingsOnlyWhileSomethingCanExpire(t *testing.T) {
	rang := make(chan struct{}, 16)
	e := ticket.StartExpiry(func() { rang <- struct{}{} })
	t0 := time.Unix(1_800_000_000, 0)
	if e.Due(t0.Add(time.Hour)) {
		t.Fatal("due with nothing armed")
	}
	e.Arm(t0.Add(2 * time.Second))
	e.Arm(t0.Add(time.Second)) // the earlier deadline wins
	e.Arm(t0.Add(3 * time.Second))
	if e.Due(t0.Add(time.Second - 1)) {
		t.Fatal("due before the earliest deadline")
	}
	select {
	case <-rang:
	case <-time.After(3 * ticket.ExpiryTick):
		t.Fatal("the ticker never rang while a deadline was armed")
	}
	if !e.Due(t0.Add(time.Second)) || e.Due(t0.Add(time.Second)) {
		t.Fatal("a due schedule is not due exactly once")
	}
	e.Settle(false) // the sweep re-armed nothing: the ticker goes quiet
	e.Stop()
	for len(rang) > 0 {
		<-rang
	}
	time.Sleep(ticket.ExpiryTick + 100*time.Millisecond)
	if len(rang) != 0 {
		t.Fatal("the ticker rang after Stop")
	}
}
