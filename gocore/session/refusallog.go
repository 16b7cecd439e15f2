package session

import (
	"log/slog"
	"time"

	"github.com/orbitkv/orbitkv/gocore/ratelog"
)

// RefusalLogged reports whether a refused-request line of s may be logged
// now (s.Refusals: one a second) and, when it may, how many were refused
// since the last one. Callers ask before building the line, so a flood of
// refused requests costs no allocation.
func (s *Session) RefusalLogged() (ok bool, suppressed int) {
	return s.Refusals.Allow(time.Now())
}

// WarnRefused logs msg with attrs for s at warning level, naming its slot,
// its pid and the lines suppressed before it (from RefusalLogged).
func (s *Session) WarnRefused(log *slog.Logger, suppressed int, msg string, attrs ...any) {
	all := make([]any, 0, len(attrs)+3)
	all = append(all, slog.Uint64("slot", uint64(s.Index)), slog.Int("pid", int(s.Peer.PID)))
	all = append(all, attrs...)
	if suppressed > 0 {
		all = append(all, slog.Int(ratelog.SuppressedKey, suppressed))
	}
	log.Warn(msg, all...)
}
