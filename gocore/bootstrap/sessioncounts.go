package bootstrap

import (
	"errors"
	"sync/atomic"

	"github.com/orbitkv/orbitkv/gocore/session"
)

// Why a bootstrap connection got no session; the indexes of
// SessionCounts.Refused and of RefusalReasons.
const (
	RefusedPeerCredentials   = iota // SO_PEERCRED failed on the connection
	RefusedTenant                   // no tenant matches the peer, or its tenant holds its share of sessions
	RefusedUID                      // without tenants: the peer's uid is not the Manager's
	RefusedHelloIncomplete          // the hello did not arrive whole within Config.HelloTimeout (or the peer closed mid-hello)
	RefusedHelloInvalid             // the hello's magic, version or a field is refused
	RefusedMaxSessions              // every slot in use (--max-sessions)
	RefusedMaxSessionsPerPID        // the peer process holds --max-sessions-per-pid sessions
	RefusedDraining                 // the Manager drains (orbitkvctl drain)
	RefusedInternal                 // the session could not be made, attached or its reply sent
	NumRefusalReasons
)

// RefusalReasons are the metric label values of the refusal reasons, by
// index. A connection closed before its first hello byte (a liveness probe)
// is not a refusal and is not counted.
var RefusalReasons = [NumRefusalReasons]string{"peer_credentials", "tenant", "uid", "hello_incomplete",
	"hello_invalid", "max_sessions", "max_sessions_per_pid", "draining", "internal"}

// SessionCounts are the bootstrap's outcomes since the Server was made.
type SessionCounts struct {
	Opened  uint64                    // sessions handed out (the OK reply sent)
	Refused [NumRefusalReasons]uint64 // connections refused, by reason
}

// sessionCounters are SessionCounts, written by connection goroutines.
type sessionCounters struct {
	opened  atomic.Uint64
	refused [NumRefusalReasons]atomic.Uint64
}

// SessionCounts returns the counts; safe from any goroutine.
func (s *Server) SessionCounts() SessionCounts {
	out := SessionCounts{Opened: s.counts.opened.Load()}
	for i := range out.Refused {
		out.Refused[i] = s.counts.refused[i].Load()
	}
	return out
}

// refused counts one refusal for reason.
func (s *Server) refused(reason int) { s.counts.refused[reason].Add(1) }

// tableRefusal is the reason of an error of session.Table.Open.
func tableRefusal(err error) int {
	switch {
	case errors.Is(err, session.ErrFull):
		return RefusedMaxSessions
	case errors.Is(err, session.ErrPIDLimit):
		return RefusedMaxSessionsPerPID
	case errors.Is(err, session.ErrDraining):
		return RefusedDraining
	}
	return RefusedInternal
}
