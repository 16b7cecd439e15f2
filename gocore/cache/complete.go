package cache

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
)

// Complete applies finished work on a control event: resumed pause points
// (failpoint builds), due expiries, finished copies (one cgo crossing;
// publishes answered through post, at most limit times) and SSD reads (the
// tickets waiting for them resolved again). true: more may be pending, and
// the caller should come back (ring the control slot).
func (s *Service) Complete(limit int, post func(slot uint32, msg abi.Message)) (more bool) {
	limit = max(1, min(limit, len(s.comps)))
	ssdLimit := limit // SSD completions post nothing
	if failpoint.Enabled {
		ran, left := s.resumed.Run(limit, post)
		limit -= ran
		more = left
	}
	s.sweep()
	released := false
	if len(s.heldComps) > 0 && !failpoint.Holding(failpoint.RestoreDone) {
		for _, c := range s.heldComps {
			released = s.applyCompletion(c, post) || released
		}
		s.heldComps = s.heldComps[:0]
	}
	n := 0
	if limit > 0 {
		n = s.copier.Drain(s.comps[:limit])
	}
	for i := 0; i < n; i++ {
		c := s.comps[i]
		if failpoint.Enabled && i == 0 && s.holdCompletion(c) {
			continue // held at CopyComplete; the rest of the batch applies
		}
		released = s.land(c, post) || released
	}
	if released {
		s.tickets.AdmitWaiting()
	}
	more = more || n == limit
	got, left := s.tiers.Complete(ssdLimit)
	if got > 0 {
		for _, st := range s.sessions {
			s.tickets.ResolvePending(st.book)
		}
	}
	s.publishStats()
	return more || left
}

// land applies one drained completion, or withholds a restore's while the
// RestoreDone hold is on (failpoint builds: RestorePoll answers Loading, so
// the e2e gate catches a client that reads pages before the terminal
// result). It reports whether a restore released its reserved bytes.
func (s *Service) land(c copier.Completion, post func(slot uint32, msg abi.Message)) (released bool) {
	if o := s.ops[c.Token]; o != nil && o.kind == opRestore && failpoint.Holding(failpoint.RestoreDone) {
		s.heldComps = append(s.heldComps, c)
		s.sweeps.Keep() // the ticker applies them once released
		failpoint.NoteHeld(failpoint.RestoreDone)
		return false
	}
	return s.applyCompletion(c, post)
}

// applyCompletion applies one finished copy: a publish is sealed (or
// discarded) and answered through post; a restore is marked done and
// signalled. It reports whether a restore released its reserved bytes.
func (s *Service) applyCompletion(c copier.Completion, post func(slot uint32, msg abi.Message)) (released bool) {
	o := s.ops[c.Token]
	if o == nil {
		s.log.Error("copy completion for an unknown job", "token", c.Token)
		return false
	}
	delete(s.ops, c.Token)
	st := o.st
	st.inflight--
	switch o.kind {
	case opPublish:
		st.publishing--
		switch {
		case c.Status != 0:
			s.log.Error("publish copy failed", "slot", st.sess.Index, "errno", -c.Status)
			s.abortPublish(o)
			if !st.closing {
				post(st.sess.Index, o.reply.WithStatus(abi.StatusInternal))
				s.observePublish(o)
			}
		case st.closing:
			s.abortPublish(o) // the publisher went away: never half-visible
		default:
			recs := o.records
			for _, blk := range o.blocks {
				var rec []byte
				if len(recs) > 0 { // checked by the descriptor's decoder
					_, n, _ := abi.ParseRecord(recs)
					rec, recs = recs[:n], recs[n:]
				}
				s.tiers.SealRecord(blk, rec) // advertised to peers (tier.Advertiser), announced (kvevents)
			}
			s.putRecords(o)
			s.stats.published.Add(uint64(o.stored))
			o.ns.published += uint64(o.stored)
			s.stats.publishBytes.Add(o.bytes)
			if failpoint.Enabled && s.holdReply(failpoint.PublishAck, st, o.reply) {
				break // sealed and visible; only the answer waits
			}
			post(st.sess.Index, o.reply)
			s.observePublish(o)
		}
	case opRestore:
		for _, blk := range o.blocks {
			s.idx.Unpin(blk)
		}
		st.clearBusy(o)
		released = true
		o.status = c.Status
		s.restores.landed(st, o, s.leases)
		s.touchLease(o.lease)
		if c.Status == 0 {
			s.stats.restored.Add(uint64(len(o.blocks)))
			s.stats.restoreBytes.Add(o.bytes)
		} else {
			s.log.Error("restore copy failed", "slot", st.sess.Index, "errno", -c.Status)
		}
		if !st.closing && (!failpoint.Enabled || !s.holdNotification(st, o)) {
			s.notifyDone(st, o)
		}
	}
	s.maybeFinish(st)
	return released
}

// notifyDone makes a done restore's terminal state visible: its result
// expires after the operation expiry unless RestorePoll consumes it first,
// and the session eventfd is signalled.
func (s *Service) notifyDone(st *sessState, o *op) {
	o.deadline = s.now().Add(s.expiry)
	s.sweeps.Arm(o.deadline)
	st.notify.Signal()
}

// observePublish reports a timed publish answered now.
func (s *Service) observePublish(o *op) {
	if s.observer != nil && o.start != 0 {
		s.observer.ObserveOp(OpPublish, mono()-o.start)
	}
}
