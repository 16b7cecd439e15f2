package cache

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
)

// Pause points (failpoint builds; every call site is guarded by
// failpoint.Enabled, so the ordinary build has none of this on its paths).
// A point holds one operation while the dispatcher serves everyone else:
// the site parks that operation's state and returns; the continuation it
// registers runs on the dispatcher goroutine, from Complete, once the point
// is resumed. A continuation posts at most one reply, and first checks that
// what it finishes still exists: its session may have closed and been torn
// down meanwhile (Detach does the accounting of whatever the session held,
// and its slot may be unmapped), or its ticket may have been revoked.

// pause holds the operation at name when it is armed (true): cont then runs
// on the dispatcher once name is resumed.
func (s *Service) pause(name failpoint.Name, cont func(post func(slot uint32, msg abi.Message))) bool {
	return failpoint.Pause(name, func() {
		s.resumeMu.Lock()
		defer s.resumeMu.Unlock()
		if s.resumeClosed {
			return // the Service closed: its server may be freed, nothing runs any more
		}
		s.resumed = append(s.resumed, cont)
		s.ring() // under resumeMu: Close cannot free the server meanwhile
	})
}

// runResumed runs at most limit resumed continuations, oldest first; it
// returns how many ran and whether more are queued.
func (s *Service) runResumed(limit int, post func(slot uint32, msg abi.Message)) (ran int, more bool) {
	for {
		s.resumeMu.Lock()
		if len(s.resumed) == 0 || ran == limit {
			more = len(s.resumed) > 0
			s.resumeMu.Unlock()
			return ran, more
		}
		cont := s.resumed[0]
		s.resumed[0] = nil
		s.resumed = s.resumed[1:]
		s.resumeMu.Unlock()
		cont(post)
		ran++
	}
}

// live reports whether st is still attached and not closing: only then may
// a continuation answer it or touch its slot.
func (s *Service) live(st *sessState) bool {
	return s.sessions[st.sess.Index] == st && !st.closing
}

// holdReply holds reply, the answer to an operation already done, at name
// (CopySubmitted, PublishAck); the continuation posts it (the dispatcher
// drops it if the client sent a newer request meanwhile).
func (s *Service) holdReply(name failpoint.Name, st *sessState, reply abi.Message) bool {
	return s.pause(name, func(post func(slot uint32, msg abi.Message)) {
		if s.live(st) {
			post(st.sess.Index, reply)
		}
	})
}

// holdCompletion holds one drained completion at CopyComplete: its
// operation stays in flight (a closing session waits for it to drain) until
// the continuation applies it, closing or not.
func (s *Service) holdCompletion(c native.CopyCompletion) bool {
	return s.pause(failpoint.CopyComplete, func(post func(slot uint32, msg abi.Message)) {
		if s.land(c, post) {
			s.admitWaiting()
		}
	})
}

// holdNotification holds a done restore at Notification: it counts as done
// (a closing session's Detach drops it like any unpolled result) but
// RestorePoll answers Loading and the sweep skips it until the continuation
// makes it visible.
func (s *Service) holdNotification(st *sessState, o *op) bool {
	if !s.pause(failpoint.Notification, func(func(uint32, abi.Message)) {
		o.held = false
		if s.live(st) && st.restores[o.id] == o {
			s.notifyDone(st, o)
		}
	}) {
		return false
	}
	o.held = true
	return true
}
