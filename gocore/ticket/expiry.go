package ticket

import (
	"sync/atomic"
	"time"
)

// ExpiryTick is how often the expiry sweep is offered a control event
// while something can expire.
const ExpiryTick = time.Second

// Expiry schedules the sweep that expires tickets and unpolled restore
// results: Arm records the earliest deadline, Due tells the dispatcher
// when to sweep, and a ticker goroutine rings the dispatcher every
// ExpiryTick while anything is armed (or Keep asks), so expiry runs
// without traffic; an idle Manager is not woken. Arm, Due and Settle run
// on the dispatcher goroutine; Keep from any.
type Expiry struct {
	next       time.Time   // zero: nothing to expire
	wanted     atomic.Bool // the ticker should ring
	stop, done chan struct{}
}

// StartExpiry starts the ticker; ring (safe from any goroutine) wakes the
// dispatcher. Stop ends it.
func StartExpiry(ring func()) *Expiry {
	e := &Expiry{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(e.done)
		t := time.NewTicker(ExpiryTick)
		defer t.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-t.C:
				if e.wanted.Load() {
					ring()
				}
			}
		}
	}()
	return e
}

// Stop ends the ticker; after it returns ring is never called again.
func (e *Expiry) Stop() {
	close(e.stop)
	<-e.done
}

// Arm makes sure the sweep runs by deadline d.
func (e *Expiry) Arm(d time.Time) {
	if e.next.IsZero() || d.Before(e.next) {
		e.next = d
	}
	e.wanted.Store(true)
}

// Due reports whether a sweep is due at now; when it is, the schedule is
// cleared and the sweep re-arms what stays live, then calls Settle.
func (e *Expiry) Due(now time.Time) bool {
	if e.next.IsZero() || now.Before(e.next) {
		return false
	}
	e.next = time.Time{}
	return true
}

// Settle ends a sweep: the ticker keeps ringing while something is armed
// or keep says the dispatcher wants to come back (withheld completions).
func (e *Expiry) Settle(keep bool) { e.wanted.Store(!e.next.IsZero() || keep) }

// Keep makes the ticker ring until the next Settle.
func (e *Expiry) Keep() { e.wanted.Store(true) }
