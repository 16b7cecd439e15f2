package cache

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
)

// Pause points (failpoint builds; every call site is guarded by
// failpoint.Enabled, so the ordinary build has none of this on its paths).
// A point holds one operation while the dispatcher serves everyone else:
// the site parks that operation's state and returns; the continuation it
// registers runs on the dispatcher goroutine, from Complete, once the point
// is resumed (failpoint.Queue). A continuation posts at most one reply, and
// first checks that what it finishes still exists: its session may have
// closed and been torn down meanwhile (Detach does the accounting of
// whatever the session held, and its slot may be unmapped), or its ticket
// may have been revoked.

// postFunc is how a continuation answers: the dispatcher's deferred reply.
type postFunc = func(slot uint32, msg abi.Message)

// holdReply holds reply, the answer to an operation already done, at name
// (CopySubmitted, PublishAck); the continuation posts it (the dispatcher
// drops it if the client sent a newer request meanwhile).
func (s *Service) holdReply(name failpoint.Name, st *sessState, reply abi.Message) bool {
	return s.resumed.Pause(name, func(p postFunc) {
		if s.live(st) {
			p(st.sess.Index, reply)
		}
	})
}

// holdCompletion holds one drained completion at CopyComplete: its
// operation stays in flight (a closing session waits for it to drain) until
// the continuation applies it, closing or not.
func (s *Service) holdCompletion(c copier.Completion) bool {
	return s.resumed.Pause(failpoint.CopyComplete, func(p postFunc) {
		if s.land(c, p) {
			s.tickets.AdmitWaiting()
		}
	})
}

// holdNotification holds a done restore at Notification: it counts as done
// (a closing session's Detach drops it like any unpolled result) but
// RestorePoll answers Loading and the sweep skips it until the continuation
// makes it visible.
func (s *Service) holdNotification(st *sessState, o *op) bool {
	if !s.resumed.Pause(failpoint.Notification, func(postFunc) {
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

// holdAdmission holds the ticket request m of st at TicketAdmission, before
// any check: nothing of it is applied and its reply waits. The
// continuation serves it then, unless st closed or sent a newer request
// meanwhile (serveCommand drops the held one: the client gave up waiting).
func (s *Service) holdAdmission(st *sessState, m *abi.Message) bool {
	req := *m // the event's message is the dispatcher's, reused for the next batch
	if !s.resumed.Pause(failpoint.TicketAdmission, func(p postFunc) {
		if !s.live(st) || st.admitGen != req.Generation {
			return
		}
		st.admitGen = 0
		s.readmit = true
		resp, ok := s.serveCommand(st.sess, &req)
		s.readmit = false
		if ok {
			p(st.sess.Index, resp)
		}
	}) {
		return false
	}
	st.admitGen = m.Generation
	return true
}
