package bootstrap

import (
	"log/slog"
	"sync"
	"time"
)

// refusalBurst is how many "bootstrap refused" lines one field may log per
// second; the rest are counted and reported on the next line that is logged.
// A flood of bad connections (thousands per second) must not flood the log.
const refusalBurst = 20

// refusalLog rate-limits refusal log lines per field. Safe for concurrent use.
type refusalLog struct {
	mu     sync.Mutex
	window map[string]*refusalWindow
}

type refusalWindow struct {
	start      time.Time
	logged     int
	suppressed int
}

// warn logs a refusal naming field, unless this field already logged
// refusalBurst lines in the current second.
func (r *refusalLog) warn(log *slog.Logger, field string, attrs ...any) {
	now := time.Now()
	r.mu.Lock()
	if r.window == nil {
		r.window = map[string]*refusalWindow{}
	}
	w := r.window[field]
	if w == nil || now.Sub(w.start) >= time.Second {
		if w != nil && w.suppressed > 0 {
			attrs = append(attrs, slog.Int("suppressed_last_second", w.suppressed))
		}
		w = &refusalWindow{start: now}
		r.window[field] = w
	}
	if w.logged >= refusalBurst {
		w.suppressed++
		r.mu.Unlock()
		return
	}
	w.logged++
	r.mu.Unlock()
	log.Warn("bootstrap refused", append([]any{slog.String("field", field)}, attrs...)...)
}
