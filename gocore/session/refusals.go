package session

import (
	"log/slog"
	"time"
)

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

// Warn logs msg with attrs for session s at warning level, naming its slot
// and pid and the lines suppressed since the last, unless Allow refuses.
func (r *RefusalLog) Warn(log *slog.Logger, s *Session, msg string, attrs ...any) {
	ok, suppressed := r.Allow(time.Now())
	if !ok {
		return
	}
	log.Warn(msg, append([]any{slog.Uint64("slot", uint64(s.Index)), slog.Int("pid", int(s.Peer.PID))},
		append(attrs, slog.Int("suppressed_since_last", suppressed))...)...)
}
