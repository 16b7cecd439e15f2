package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Limiter admits at most Burst log lines in each window of Every and
// counts the lines it refuses. A window starts at the first line admitted
// after the previous window ended, so lines are never admitted more often
// than Burst per Every. The zero value admits one line a second. Safe for
// concurrent use; it must not be copied after first use.
type Limiter struct {
	// Burst is how many lines one window admits; 0 or less stands for 1.
	Burst int
	// Every is the length of a window; 0 or less stands for one second.
	Every time.Duration

	mu         sync.Mutex
	start      time.Time // start of the current window; zero before the first line
	admitted   int       // lines admitted in the current window
	suppressed int       // lines refused since the last line admitted
}

// Allow reports whether a line may be logged at now and, when it may, how
// many lines were refused since the last one admitted (0 when none was);
// the count restarts at every admitted line.
func (l *Limiter) Allow(now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start.IsZero() || now.Sub(l.start) >= l.every() {
		l.start, l.admitted = now, 0
	}
	if l.admitted >= max(l.Burst, 1) {
		l.suppressed++
		return false, 0
	}
	l.admitted++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// SuppressedKey is the attribute Log adds: the lines refused since the
// last one logged.
const SuppressedKey = "suppressed"

// Log logs msg with attrs at level unless Allow refuses it now; when lines
// were refused since the last one logged it adds their count under
// SuppressedKey.
func (l *Limiter) Log(log *slog.Logger, level slog.Level, msg string, attrs ...any) {
	ok, suppressed := l.Allow(time.Now())
	if !ok {
		return
	}
	if suppressed > 0 {
		attrs = append(attrs, slog.Int(SuppressedKey, suppressed))
	}
	log.Log(context.Background(), level, msg, attrs...)
}

func (l *Limiter) every() time.Duration {
	if l.Every <= 0 {
		return time.Second
	}
	return l.Every
}
