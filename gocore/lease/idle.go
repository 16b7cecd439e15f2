package lease

import (
	"fmt"
	"time"
)

// Idle tracking: a lease handed to its session's client (Hand) keeps the
// time of the last progress its holder made on it (Hand, then each Touch:
// a Restore started or landed on it), in a list ordered by that time, so
// the lease idle longest is found in O(1) and a sweep that revokes the
// stalled ones costs O(revoked). A lease not handed (a ticket's
// undelivered lease, bounded by the ticket's own expiry) is not in the
// list and never stalls. End takes a lease out of the list.

// idleLink is a lease's place in the Book's idle list.
type idleLink struct {
	handed     bool
	progress   time.Time // last progress: Hand or the latest Touch
	prev, next *Lease    // neighbours, oldest progress first
}

// idleList is the handed leases, oldest progress first.
type idleList struct {
	head, tail *Lease
	n          int
}

func (q *idleList) pushBack(l *Lease) {
	l.idle.prev, l.idle.next = q.tail, nil
	if q.tail != nil {
		q.tail.idle.next = l
	} else {
		q.head = l
	}
	q.tail = l
	q.n++
}

func (q *idleList) remove(l *Lease) {
	if l.idle.prev != nil {
		l.idle.prev.idle.next = l.idle.next
	} else {
		q.head = l.idle.next
	}
	if l.idle.next != nil {
		l.idle.next.idle.prev = l.idle.prev
	} else {
		q.tail = l.idle.prev
	}
	l.idle.prev, l.idle.next = nil, nil
	q.n--
}

// Hand records that live lease l now belongs to its session's client (an
// untracked query's answer, a ticket's delivery) and starts its idle
// clock at now. Handing a lease twice, or an ended one, is a no-op.
func (b *Book[W]) Hand(l *Lease, now time.Time) {
	if b.t.m[l.ID] != l || l.idle.handed {
		return
	}
	l.idle.handed, l.idle.progress = true, now
	b.idle.pushBack(l)
}

// Touch records progress on handed lease l at now (a Restore started or
// landed on it); a lease not handed, or ended, is left alone. now must
// not be earlier than the previous Hand or Touch of any lease (the list
// stays ordered by appending).
func (b *Book[W]) Touch(l *Lease, now time.Time) {
	if b.t.m[l.ID] != l || !l.idle.handed {
		return
	}
	l.idle.progress = now
	if b.idle.tail != l {
		b.idle.remove(l)
		b.idle.pushBack(l)
	}
}

// Stalled returns the handed lease whose last progress is oldest, if that
// is before cutoff (now less the idle timeout), else nil. The caller ends
// it (End) before asking again.
func (b *Book[W]) Stalled(cutoff time.Time) *Lease {
	if l := b.idle.head; l != nil && l.idle.progress.Before(cutoff) {
		return l
	}
	return nil
}

// OldestProgress is the last progress of the handed lease idle longest;
// false when no lease is handed. A sweep re-arms itself for this time plus
// the idle timeout.
func (b *Book[W]) OldestProgress() (time.Time, bool) {
	if b.idle.head == nil {
		return time.Time{}, false
	}
	return b.idle.head.idle.progress, true
}

// Progress is l's last progress (Hand or Touch); zero when l was never
// handed.
func (l *Lease) Progress() time.Time { return l.idle.progress }

// unhand takes an ending lease out of the idle list.
func (b *Book[W]) unhand(l *Lease) {
	if l.idle.handed {
		b.idle.remove(l)
		l.idle.handed = false
	}
}

// checkIdle verifies the idle list: only live handed leases, each once,
// oldest progress first, as many as counted.
func (b *Book[W]) checkIdle() error {
	n := 0
	var prev *Lease
	for l := b.idle.head; l != nil; prev, l = l, l.idle.next {
		n++
		switch {
		case b.t.m[l.ID] != l || !l.idle.handed:
			return fmt.Errorf("lease: idle list holds lease %d, which is ended or not handed", l.ID)
		case l.idle.prev != prev:
			return fmt.Errorf("lease: idle list link of lease %d is broken", l.ID)
		case prev != nil && l.idle.progress.Before(prev.idle.progress):
			return fmt.Errorf("lease: idle list has lease %d (progress %v) after lease %d (progress %v)", l.ID, l.idle.progress, prev.ID, prev.idle.progress)
		case n > b.idle.n:
			return fmt.Errorf("lease: idle list is longer than its count %d", b.idle.n)
		}
	}
	if n != b.idle.n || b.idle.tail != prev {
		return fmt.Errorf("lease: idle list holds %d leases, counted %d", n, b.idle.n)
	}
	return nil
}
