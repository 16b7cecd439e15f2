package session

import (
	"log/slog"
)

// WarnRefused logs msg with attrs for s at warning level, naming its slot
// and pid, unless s.Refusals refuses the line (then it is counted in the
// next one).
func (s *Session) WarnRefused(log *slog.Logger, msg string, attrs ...any) {
	s.Refusals.Log(log, slog.LevelWarn, msg, append([]any{slog.Uint64("slot", uint64(s.Index)), slog.Int("pid", int(s.Peer.PID))}, attrs...)...)
}
