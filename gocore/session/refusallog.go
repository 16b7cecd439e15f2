package session

import (
	"log/slog"
	"time"

	"github.com/orbitkv/orbitkv/gocore/ratelog"
)

// RefusalEvery is the least time between two refused-request log lines of
// one session.
const RefusalEvery = time.Second

// RefusalLog rate-limits one session's refused-request log lines to one per
// RefusalEvery, so a hostile or broken client cannot flood the log; the
// lines suppressed meanwhile are counted in the next one. Safe for
// concurrent use, though its owner (the dispatcher goroutine) is its only
// user. It must not be copied after first use.
type RefusalLog struct {
	limit ratelog.Limiter // Burst 0 and Every 0: one line a second, RefusalEvery
}

// Allow reports whether a line may be logged at now and, when it may, how
// many were suppressed since the last one.
func (r *RefusalLog) Allow(now time.Time) (ok bool, suppressed int) {
	return r.limit.Allow(now)
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
