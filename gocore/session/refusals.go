package session

import "time"

// RefusalEvery is the least time between two refused-request log lines of
// one session.
const RefusalEvery = time.Second

// RefusalLog rate-limits one session's refused-request log lines to one per
// RefusalEvery, so a hostile or broken client cannot flood the log; the
// lines suppressed meanwhile are counted in the next one. Not safe for
// concurrent use: its owner (the dispatcher goroutine) holds it.
type RefusalLog struct {
	last    time.Time
	dropped int
}

// Allow reports whether a line may be logged at now and, when it may, how
// many were suppressed since the last one.
func (r *RefusalLog) Allow(now time.Time) (ok bool, suppressed int) {
	if now.Sub(r.last) < RefusalEvery {
		r.dropped++
		return false, 0
	}
	suppressed = r.dropped
	r.last, r.dropped = now, 0
	return true, suppressed
}
