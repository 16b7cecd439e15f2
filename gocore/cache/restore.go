package cache

import (
	"fmt"
	"log/slog"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/ticket"
)

// restoreCounts owns the accounting of restore operations. A restore is
//
//	submitted ─► in flight (its bytes reserved, its pages busy) ─► landed ─► done, awaiting RestorePoll ─► polled or expired
//
// and a landed restore of a closing session is dropped at once. Every
// transition goes through one method here, and check states the relation
// the counters keep: all = in flight + done; each attached session's
// restores map holds exactly its restores in flight and done; the bytes
// the lease book reserves for restores are those of the ended leases
// that restores in flight came from (lease.Book.RestoreStarted), each
// once.
type restoreCounts struct {
	all      int // restore operations in flight or awaiting RestorePoll (operation permits)
	done     int // landed and awaiting RestorePoll
	inFlight int // submitted, not landed
}

func (r *restoreCounts) submitted(st *sessState, o *op, l *lease.Lease, b *lease.Book[*ticket.Ticket]) {
	st.restores[o.id] = o
	st.book.CountOps(1)
	r.all++
	r.inFlight++
	o.lease = l
	b.RestoreStarted(l) // the lease's bytes stay reserved until the copy lands
}

// landed marks o's copy finished; a closing session's result is dropped.
func (r *restoreCounts) landed(st *sessState, o *op, b *lease.Book[*ticket.Ticket]) {
	r.inFlight--
	b.RestoreLanded(o.lease)
	o.done = true
	if st.closing {
		delete(st.restores, o.id)
		st.book.CountOps(-1)
		r.all--
		return
	}
	r.done++
}

// consumed removes a done result (polled, expired, or its session closed).
func (r *restoreCounts) consumed(st *sessState, o *op) {
	delete(st.restores, o.id)
	st.book.CountOps(-1)
	r.all--
	r.done--
}

// dropPolled drops the done results of a closing session.
func (r *restoreCounts) dropPolled(st *sessState) {
	for _, o := range st.restores {
		if o.done {
			r.consumed(st, o)
		}
	}
}

// check verifies the relation of the type doc against sessions; reserved
// is what the lease book holds for restores.
func (r *restoreCounts) check(sessions map[uint32]*sessState, reserved uint64) error {
	all, done := 0, 0
	var bytes uint64
	ended := map[*lease.Lease]bool{}
	for _, st := range sessions {
		for _, o := range st.restores {
			all++
			if o.done {
				done++
			} else if o.lease.Ended() && !ended[o.lease] {
				ended[o.lease] = true
				bytes += o.lease.Bytes
			}
		}
	}
	if r.all != r.inFlight+r.done || all != r.all || done != r.done || bytes != reserved {
		return fmt.Errorf("cache: restores counted %d (%d in flight, %d done, %d bytes reserved), found %d (%d done, %d bytes)",
			r.all, r.inFlight, r.done, reserved, all, done, bytes)
	}
	return nil
}

// restore validates (lease block, destination page) pairs, pins the blocks
// for the copy, marks the pages busy and submits one copy job.
func (s *Service) restore(st *sessState, m *abi.Message) (abi.Message, *abi.DescError) {
	b, derr := s.descriptor(st, m)
	if derr != nil {
		return abi.Message{}, derr
	}
	r, derr := abi.DecodeRestore(b)
	if derr != nil {
		return abi.Message{}, derr
	}
	l := s.leases.Get(st.owner, r.LeaseID)
	if l == nil {
		if resp, ok := s.revokedLease(st, m, r.LeaseID); ok {
			return resp, nil
		}
		return abi.Message{}, abi.Invalid(abi.FieldLeaseID, 0, "%d: no live lease of this session", r.LeaseID)
	}
	buf, derr := st.sess.HostBuffer(r.BufferID)
	if derr != nil {
		return abi.Message{}, derr
	}
	if resp, holed := s.refuseHoles(st, m, &buf, r.BufferID); holed {
		return resp, nil
	}
	blockBytes := uint64(buf.Layers) * buf.PageBytes
	n := r.Len()
	if derr := copier.CheckBatch(n, &buf, r.BufferID, s.arena.ChunkBytes()); derr != nil {
		return abi.Message{}, derr
	}
	if !s.admitOp(st.book) {
		st.book.CountUnadmitted()
		return s.unadmitted(m), nil
	}
	o := &op{id: s.nextOp, kind: opRestore, st: st, blocks: make([]*index.Block, 0, n), pages: make([]pageKey, 0, n)}
	if derr := restoreEntries(st, o, l, &r, &buf, blockBytes); derr != nil {
		st.clearBusy(o) // undo the pages marked so far
		return abi.Message{}, derr
	}
	s.nextOp++
	segs := s.segs[:0]
	for i, blk := range o.blocks {
		segs = copier.AppendBlock(segs, s.arena, blk, &buf, o.pages[i].page, copier.FromTier)
		s.idx.Pin(blk)
	}
	o.bytes = uint64(n) * blockBytes
	s.segs = segs[:0]
	if err := s.copier.SubmitLane(o.id, uint64(st.sess.Index), segs); err != nil {
		s.log.Error("copy engine refused a restore job", "err", err, "segments", len(segs))
		for _, blk := range o.blocks {
			s.idx.Unpin(blk)
		}
		st.clearBusy(o)
		return m.Response(s.epoch, abi.StatusInternal, 0, 0), nil
	}
	s.ops[o.id] = o
	s.restores.submitted(st, o, l, s.leases)
	s.touchLease(l)
	st.inflight++
	resp := m.Response(s.epoch, abi.StatusOK, o.id, 0)
	if failpoint.Enabled && s.holdReply(failpoint.CopySubmitted, st, resp) {
		// The copy runs and may complete; only the answer naming it waits.
		s.deferReply = true
		return abi.Message{}, nil
	}
	return resp, nil
}

// restoreEntries validates r's entries against lease l and buffer buf and
// marks each destination page busy under o (the caller clears them on an
// error).
func restoreEntries(st *sessState, o *op, l *lease.Lease, r *abi.RestoreDesc, buf *session.Buffer, blockBytes uint64) *abi.DescError {
	for i, n := 0, r.Len(); i < n; i++ {
		blkIdx, page := r.Entry(i)
		switch {
		case uint64(blkIdx) >= uint64(len(l.Blocks)):
			return abi.Invalid(abi.FieldBlock, i, "%d, lease %d holds %d blocks", blkIdx, l.ID, len(l.Blocks))
		case uint64(page) >= buf.PageCount:
			return abi.Invalid(abi.FieldPage, i, "%d, buffer %d has %d pages", page, r.BufferID, buf.PageCount)
		// Layers 0: a replica whose source did not say (cluster.Served): a
		// namespace has one layout, so its bytes decide.
		case l.Blocks[blkIdx].Bytes != blockBytes || l.Blocks[blkIdx].Layers != buf.Layers && l.Blocks[blkIdx].Layers != 0:
			return abi.Invalid(abi.FieldBlockBytes, i, "block holds %d bytes over %d layers, a page of buffer %d holds %d bytes over %d layers", l.Blocks[blkIdx].Bytes, l.Blocks[blkIdx].Layers, r.BufferID, blockBytes, buf.Layers)
		}
		pk := pageKey{r.BufferID, page}
		if busy, ok := st.busy[pk]; ok {
			if busy == o.id {
				return abi.Invalid(abi.FieldPage, i, "%d appears twice in this restore", page)
			}
			return abi.Invalid(abi.FieldPage, i, "%d is the destination of in-flight restore %d", page, busy)
		}
		st.busy[pk] = o.id
		o.pages = append(o.pages, pk)
		o.blocks = append(o.blocks, l.Blocks[blkIdx])
	}
	return nil
}

func (st *sessState) clearBusy(o *op) {
	for _, pk := range o.pages {
		if st.busy[pk] == o.id {
			delete(st.busy, pk)
		}
	}
}

// restorePoll reports a restore's state and consumes a terminal one.
func (s *Service) restorePoll(st *sessState, m *abi.Message) (abi.Message, *abi.DescError) {
	o := st.restores[m.Arg0]
	if o != nil && o.done && !o.held && !s.now().Before(o.deadline) {
		s.expireRestore(st, o) // found before the sweep did
		o = nil
	}
	if o == nil {
		if st.expiredRestores.Has(m.Arg0) {
			return m.Response(s.epoch, abi.StatusTimeout, 0, 0), nil
		}
		return abi.Message{}, abi.Invalid(abi.FieldOpID, 0, "%d: no restore of this session awaits a poll", m.Arg0)
	}
	if !o.done || o.held {
		return m.Response(s.epoch, abi.StatusLoading, 0, 0), nil
	}
	s.restores.consumed(st, o)
	if o.status != 0 {
		return m.Response(s.epoch, abi.StatusInternal, uint64(-int64(o.status)), 0), nil
	}
	return m.Response(s.epoch, abi.StatusOK, o.bytes, 0), nil
}

// expireRestore drops a completed, unpolled restore result past its
// deadline and tombstones its id (RestorePoll then answers Timeout).
func (s *Service) expireRestore(st *sessState, o *op) {
	s.restores.consumed(st, o)
	st.expiredRestores.Add(o.id)
	s.stats.expired.Add(1)
}

// sweep expires due tickets and unpolled restore results of every session
// (called on each control event; the ticker rings one at least every
// second). Cheap when nothing is due.
func (s *Service) sweep() {
	now := s.now()
	if !s.sweeps.Due(now) {
		return
	}
	defer func() { s.sweeps.Settle(len(s.heldComps) > 0) }()
	s.revokeStalled(now)
	for _, st := range s.sessions {
		s.tickets.Sweep(st.book)
		for _, o := range st.restores {
			if !o.done || o.held {
				continue
			}
			if now.Before(o.deadline) {
				s.sweeps.Arm(o.deadline)
				continue
			}
			s.expireRestore(st, o)
		}
	}
	s.tickets.AdmitWaiting()
}

// refuseHoles refuses a restore into buffer id (buf) of st when its memfd
// lacks pages (session.Buffer.Unallocated): the copy would allocate them
// in the Manager's memory cgroup. The answer is Invalid naming buffer_id;
// it is counted (Stats.BufferHoles, Stats.Invalid) and logged under the
// session's refusal limit, with the first hole of the region when the
// kernel can tell (session.Buffer.FirstHole). holed is false when every
// page is there; one fstat(2) per restore.
func (s *Service) refuseHoles(st *sessState, m *abi.Message, buf *session.Buffer, id uint32) (resp abi.Message, holed bool) {
	missing, size, err := buf.Unallocated()
	if err == nil && missing == 0 {
		return abi.Message{}, false
	}
	s.stats.bufferHoles.Add(1)
	s.stats.invalid.Add(1)
	if ok, suppressed := st.sess.RefusalLogged(); ok {
		attrs := []any{slog.String("command", abi.CmdRestore.String()), slog.Uint64("buffer", uint64(id)),
			slog.Uint64("memfd_bytes", size), slog.Uint64("bytes_without_page", missing)}
		if err != nil {
			attrs = append(attrs, slog.Any("err", err))
		} else if off, n, found := buf.FirstHole(); found {
			attrs = append(attrs, slog.String("first_hole", fmt.Sprintf("[%d, %d) of the registered region", off, off+n)))
		}
		st.sess.WarnRefused(s.log, suppressed, "restore refused: the destination buffer has pages missing (punched after registration); the copy would allocate them in the Manager's memory", attrs...)
	}
	return m.Response(s.epoch, abi.StatusInvalid, uint64(abi.FieldBufferID), 0), true
}
