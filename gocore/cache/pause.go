package cache

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/ticket"
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
func (s *Service) holdCompletion(c copier.Completion) bool {
	return s.pause(failpoint.CopyComplete, func(post func(slot uint32, msg abi.Message)) {
		if s.land(c, post) {
			s.AdmitWaiting()
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

// holdAdmission holds the ticket request m of st at TicketAdmission, before
// any check: nothing of it is applied and its reply waits. The
// continuation serves it then, unless st closed or sent a newer request
// meanwhile (Handle drops the held one: the client gave up waiting).
func (s *Service) holdAdmission(st *sessState, m *abi.Message) bool {
	req := *m // the event's message is the dispatcher's, reused for the next batch
	if !s.pause(failpoint.TicketAdmission, func(post func(slot uint32, msg abi.Message)) {
		if !s.live(st) || st.admitGen != req.Generation {
			return
		}
		st.admitGen = 0
		s.readmit = true
		resp, ok := s.Handle(st.sess, &req)
		s.readmit = false
		if ok {
			post(st.sess.Index, resp)
		}
	}) {
		return false
	}
	st.admitGen = m.Generation
	return true
}

// holdReservation holds t at Reservation, before it takes its lease and
// bytes: t stays pending (Poll answers Loading) and Resolve leaves it alone
// until the continuation resolves it, unless it was revoked or its session
// closed meanwhile.
func (s *Service) holdReservation(t *ticket.Ticket) bool {
	st := s.sessions[t.Book.Sess.Index]
	if !s.pause(failpoint.Reservation, func(func(uint32, abi.Message)) {
		t.Held = false
		if !s.live(st) || !t.Live() || t.State != ticket.Pending {
			return
		}
		t.Passed = true
		s.Resolve(t)
		t.Passed = false
		if t.State != ticket.Pending {
			st.notify.Signal()
		}
		s.AdmitWaiting()
	}) {
		return false
	}
	t.Held = true
	return true
}
