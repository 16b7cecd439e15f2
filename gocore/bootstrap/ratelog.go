package bootstrap

import (
	"log/slog"
	"sync"
	"time"

	"github.com/orbitkv/orbitkv/gocore/ratelog"
)

// refusalBurst is how many "bootstrap refused" lines one field may log per
// second; the rest are counted and reported on the next line that is logged.
// A flood of bad connections (thousands per second) must not flood the log.
const refusalBurst = 20

// refusalLog rate-limits refusal log lines per field. Safe for concurrent use.
type refusalLog struct {
	mu     sync.Mutex
	fields map[string]*ratelog.Limiter
}

// warn logs a refusal naming field, unless this field already logged
// refusalBurst lines in the current second.
func (r *refusalLog) warn(log *slog.Logger, field string, attrs ...any) {
	r.warnAt(time.Now(), log, field, attrs...)
}

// warnAt is warn at time now.
func (r *refusalLog) warnAt(now time.Time, log *slog.Logger, field string, attrs ...any) {
	r.mu.Lock()
	if r.fields == nil {
		r.fields = map[string]*ratelog.Limiter{}
	}
	l := r.fields[field]
	if l == nil {
		l = &ratelog.Limiter{Burst: refusalBurst, Every: time.Second}
		r.fields[field] = l
	}
	r.mu.Unlock()
	ok, suppressed := l.Allow(now)
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int(ratelog.SuppressedKey, suppressed))
	}
	log.Warn("bootstrap refused", append([]any{slog.String("field", field)}, attrs...)...)
}
