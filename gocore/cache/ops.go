package cache

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/session"
)

func invalid(f abi.Field, i int, format string, args ...any) *abi.DescError {
	return &abi.DescError{Status: abi.StatusInvalid, Field: f, Index: uint64(i), Detail: fmt.Sprintf(format, args...)}
}

// query serves QueryBundle: a ticket (op_id ≠ 0) goes to submit; op_id 0
// is an untracked leased read: the longest resident prefix of the chain is
// pinned under a new lease.
func (s *Service) query(st *sessState, m *abi.Message) (abi.Message, *abi.DescError) {
	b, derr := s.descriptor(st, m)
	if derr != nil {
		return abi.Message{}, derr
	}
	q, derr := abi.DecodeQuery(b)
	if derr != nil {
		return abi.Message{}, derr
	}
	if q.OpID != 0 {
		return s.submit(st, m, &q)
	}
	start := time.Now()
	defer func() {
		s.stats.queryNanos.Add(uint64(time.Since(start)))
		s.stats.queryHashes.Add(uint64(q.Len()))
	}()
	s.stats.queries.Add(1)
	hits := s.idx.Prefix(q.NS, q.Len(), q.Hash, s.hits[:0])
	s.hits = hits[:0]
	if s.ssd != nil && len(hits) < q.Len() {
		// The chain may continue on SSD: prefetch it and answer Loading.
		// The RAM prefix is pinned meanwhile so making room cannot evict it.
		for _, blk := range hits {
			s.idx.Pin(blk)
		}
		loading := s.prefetch(st, nil, q.NS, q.Hash, len(hits), q.Len())
		for _, blk := range hits {
			s.idx.Unpin(blk)
		}
		if loading {
			// Keep what earlier prefetches held: this chain is still loading.
			return m.Response(s.epoch, abi.StatusLoading, uint64(len(hits)), 0), nil
		}
	}
	// This query's answer is final: what earlier prefetches held for the
	// session is either leased below or no longer wanted.
	defer s.releaseHolds(st)
	s.countLookup(q.NS, q.Hash(q.Len()-1))
	res := abi.QueryResult{Status: abi.StatusMiss, RAMHits: uint32(len(hits))}
	if len(hits) == 0 {
		s.putResult(st, m, &res)
		return m.Response(s.epoch, abi.StatusMiss, 0, 0), nil
	}
	var bytes uint64
	for _, blk := range hits {
		bytes += blk.Bytes
	}
	if st.leases >= MaxLeasesPerSession || st.leased+len(hits) > s.maxLeasedSession || s.leased+len(hits) > s.maxLeased ||
		s.reservedBytes()+bytes > s.leaseBudget || len(s.budgetQ) > 0 {
		// An untracked read cannot wait for budget, and does not overtake
		// tickets that do.
		s.stats.unadmitted.Add(1)
		return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0), nil
	}
	l := s.addLease(st, slices.Clone(hits))
	s.stats.queryHits.Add(uint64(len(l.Blocks)))
	res = abi.QueryResult{Status: abi.StatusOK, Hits: uint32(len(l.Blocks)), RAMHits: res.RAMHits, LeaseID: l.ID, LeaseBytes: l.Bytes, BlockBytes: l.Blocks[0].Bytes}
	s.putResult(st, m, &res)
	return m.Response(s.epoch, abi.StatusOK, uint64(len(l.Blocks)), l.ID), nil
}

// addLease pins blocks under a new lease of st.
func (s *Service) addLease(st *sessState, blocks []*index.Block) *lease.Lease {
	for _, blk := range blocks {
		s.idx.Pin(blk)
	}
	l := s.leases.Add(st.owner, blocks)
	st.leases++
	st.leased += len(blocks)
	s.leased += len(blocks)
	return l
}

// release ends a lease of the session.
func (s *Service) release(st *sessState, m *abi.Message) (abi.Message, *abi.DescError) {
	l := s.leases.Get(st.owner, m.Arg0)
	if l == nil {
		return abi.Message{}, invalid(abi.FieldLeaseID, 0, "%d: no live lease of this session", m.Arg0)
	}
	s.endLease(st, l)
	s.admitWaiting()
	return m.Response(s.epoch, abi.StatusOK, 0, 0), nil
}

func (s *Service) endLease(st *sessState, l *lease.Lease) {
	for _, blk := range l.Blocks {
		s.idx.Unpin(blk)
	}
	s.leases.Remove(l)
	st.leases--
	st.leased -= len(l.Blocks)
	s.leased -= len(l.Blocks)
}

// publish allocates frames for the blocks not yet resident, inserts them as
// Publishing (invisible) and submits one copy job; the reply is deferred
// until the job completes (Complete seals them, then answers).
func (s *Service) publish(st *sessState, m *abi.Message) (abi.Message, bool, *abi.DescError) {
	b, derr := s.descriptor(st, m)
	if derr != nil {
		return abi.Message{}, true, derr
	}
	p, derr := abi.DecodePublish(b)
	if derr != nil {
		return abi.Message{}, true, derr
	}
	buf, derr := buffer(st, p.BufferID)
	if derr != nil {
		return abi.Message{}, true, derr
	}
	if p.LayerFirst != 0 || p.LayerCount != buf.Layers {
		return abi.Message{}, true, invalid(abi.FieldLayers, 0, "layers [%d, +%d), this build publishes the buffer's full layer set [0, +%d)", p.LayerFirst, p.LayerCount, buf.Layers)
	}
	blockBytes := uint64(buf.Layers) * buf.PageBytes
	n := p.Len()
	for i := 0; i < n; i++ {
		_, page := p.Entry(i)
		if uint64(page) >= buf.PageCount {
			return abi.Message{}, true, invalid(abi.FieldPage, i, "%d, buffer %d has %d pages", page, p.BufferID, buf.PageCount)
		}
		if busy, ok := st.busy[pageKey{p.BufferID, page}]; ok {
			return abi.Message{}, true, invalid(abi.FieldPage, i, "%d is the destination of in-flight restore %d: its bytes are not settled", page, busy)
		}
	}
	if derr := s.checkSegments(n, &buf, p.BufferID); derr != nil {
		return abi.Message{}, true, derr
	}
	// Pin the batch's resident blocks while room is made, so eviction
	// cannot remove a block this batch counts as present (it would then
	// need a frame nobody reserved).
	fresh := 0
	present := s.hits[:0]
	for i := 0; i < n; i++ {
		h, _ := p.Entry(i)
		k := index.Key{NS: p.NS, Hash: h}
		if blk := s.idx.Lookup(k); blk != nil {
			s.idx.Pin(blk)
			present = append(present, blk)
		} else if !s.idx.Contains(k) {
			if _, dup := s.batch[k]; !dup { // a hash repeated in the batch needs one frame
				s.batch[k] = struct{}{}
				fresh++
			}
		}
	}
	clear(s.batch)
	unpin := func() {
		for _, blk := range present {
			s.idx.Unpin(blk)
		}
		s.hits = present[:0]
	}
	if fresh == 0 {
		unpin()
		return m.Response(s.epoch, abi.StatusOK, 0, uint64(n)), true, nil
	}
	per := s.arena.ChunksFor(blockBytes)
	if !s.makeRoom(uint64(per) * uint64(fresh)) {
		unpin()
		s.stats.unadmitted.Add(1)
		return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0), true, nil
	}
	defer unpin()
	o := &op{id: s.nextOp, kind: opPublish, st: st}
	s.nextOp++
	segs := s.segs[:0]
	for i := 0; i < n; i++ {
		h, page := p.Entry(i)
		k := index.Key{NS: p.NS, Hash: h}
		if s.idx.Contains(k) { // resident, or a repeat within this batch
			o.present++
			continue
		}
		chunks, err := s.arena.Alloc(make([]uint32, 0, per), per)
		if err != nil { // cannot happen: makeRoom freed enough
			panic("cache: allocation after makeRoom failed: " + err.Error())
		}
		blk := s.idx.Insert(k, blockBytes, buf.Layers, uint32(i), chunks)
		o.blocks = append(o.blocks, blk)
		segs = s.blockSegs(segs, blk, &buf, page, true)
	}
	o.stored = uint32(len(o.blocks))
	o.bytes = uint64(o.stored) * blockBytes
	o.reply = m.Response(s.epoch, abi.StatusOK, uint64(o.stored), uint64(o.present))
	s.segs = segs[:0]
	if err := s.copier.Submit(o.id, segs); err != nil {
		s.log.Error("copy engine refused a publish job", "err", err, "segments", len(segs))
		s.abortPublish(o)
		return m.Response(s.epoch, abi.StatusInternal, 0, 0), true, nil
	}
	s.ops[o.id] = o
	st.inflight++
	st.publishing++
	return abi.Message{}, false, nil
}

// checkSegments refuses a batch whose copy job would exceed the copy
// engine's segment limit, before anything is evicted or marked.
func (s *Service) checkSegments(n int, buf *session.Buffer, bufID uint32) *abi.DescError {
	perLayer := (buf.PageBytes+s.arena.ChunkBytes()-1)/s.arena.ChunkBytes() + 1 // a page straddles at most this many chunks
	segs := uint64(n) * uint64(buf.Layers) * perLayer
	if segs > native.MaxCopySegments {
		limit := uint64(native.MaxCopySegments) / (uint64(buf.Layers) * perLayer)
		return invalid(abi.FieldCount, 0, "%d entries of buffer %d need up to %d copy segments, the limit is %d: send at most %d entries per request", n, bufID, segs, native.MaxCopySegments, limit)
	}
	return nil
}

// makeRoom evicts the eviction policy's victims (never pinned blocks) until
// need chunks are free; false (nothing evicted) when even evicting every
// unpinned block would not do.
func (s *Service) makeRoom(need uint64) bool {
	free := uint64(s.arena.Free())
	if free >= need {
		return true
	}
	if free+s.idx.EvictableChunks() < need {
		return false
	}
	for uint64(s.arena.Free()) < need {
		blk := s.idx.Evict()
		if s.ssd != nil {
			s.demote(blk) // copies the bytes out first: the chunks are free after
		}
		s.arena.Release(blk.Chunks)
		s.stats.evictions.Add(1)
	}
	return true
}

func (s *Service) abortPublish(o *op) {
	for _, blk := range o.blocks {
		s.idx.Abort(blk)
		s.arena.Release(blk.Chunks)
	}
	o.blocks = nil
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
		return abi.Message{}, invalid(abi.FieldLeaseID, 0, "%d: no live lease of this session", r.LeaseID)
	}
	buf, derr := buffer(st, r.BufferID)
	if derr != nil {
		return abi.Message{}, derr
	}
	blockBytes := uint64(buf.Layers) * buf.PageBytes
	n := r.Len()
	if derr := s.checkSegments(n, &buf, r.BufferID); derr != nil {
		return abi.Message{}, derr
	}
	if !s.admitOp(st) {
		s.stats.unadmitted.Add(1)
		return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0), nil
	}
	o := &op{id: s.nextOp, kind: opRestore, st: st, blocks: make([]*index.Block, 0, n), pages: make([]pageKey, 0, n)}
	if derr := s.restoreEntries(st, o, l, &r, &buf, blockBytes); derr != nil {
		st.clearBusy(o) // undo the pages marked so far
		return abi.Message{}, derr
	}
	s.nextOp++
	segs := s.segs[:0]
	for i, blk := range o.blocks {
		segs = s.blockSegs(segs, blk, &buf, o.pages[i].page, false)
		s.idx.Pin(blk)
	}
	o.bytes = uint64(n) * blockBytes
	s.segs = segs[:0]
	if err := s.copier.Submit(o.id, segs); err != nil {
		s.log.Error("copy engine refused a restore job", "err", err, "segments", len(segs))
		for _, blk := range o.blocks {
			s.idx.Unpin(blk)
		}
		st.clearBusy(o)
		return m.Response(s.epoch, abi.StatusInternal, 0, 0), nil
	}
	s.ops[o.id] = o
	st.restores[o.id] = o
	s.restoresAll++
	s.restoreReserved += o.bytes // the lease's bytes stay reserved until the copy lands
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
func (s *Service) restoreEntries(st *sessState, o *op, l *lease.Lease, r *abi.RestoreDesc, buf *session.Buffer, blockBytes uint64) *abi.DescError {
	for i, n := 0, r.Len(); i < n; i++ {
		blkIdx, page := r.Entry(i)
		switch {
		case uint64(blkIdx) >= uint64(len(l.Blocks)):
			return invalid(abi.FieldBlock, i, "%d, lease %d holds %d blocks", blkIdx, l.ID, len(l.Blocks))
		case uint64(page) >= buf.PageCount:
			return invalid(abi.FieldPage, i, "%d, buffer %d has %d pages", page, r.BufferID, buf.PageCount)
		case l.Blocks[blkIdx].Bytes != blockBytes || l.Blocks[blkIdx].Layers != buf.Layers:
			return invalid(abi.FieldBlockBytes, i, "block holds %d bytes over %d layers, a page of buffer %d holds %d bytes over %d layers", l.Blocks[blkIdx].Bytes, l.Blocks[blkIdx].Layers, r.BufferID, blockBytes, buf.Layers)
		}
		pk := pageKey{r.BufferID, page}
		if busy, ok := st.busy[pk]; ok {
			if busy == o.id {
				return invalid(abi.FieldPage, i, "%d appears twice in this restore", page)
			}
			return invalid(abi.FieldPage, i, "%d is the destination of in-flight restore %d", page, busy)
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
		if st.expiredRestores.has(m.Arg0) {
			return m.Response(s.epoch, abi.StatusTimeout, 0, 0), nil
		}
		return abi.Message{}, invalid(abi.FieldOpID, 0, "%d: no restore of this session awaits a poll", m.Arg0)
	}
	if !o.done || o.held {
		return m.Response(s.epoch, abi.StatusLoading, 0, 0), nil
	}
	delete(st.restores, o.id)
	s.restoresAll--
	s.done--
	if o.status != 0 {
		return m.Response(s.epoch, abi.StatusInternal, uint64(-int64(o.status)), 0), nil
	}
	return m.Response(s.epoch, abi.StatusOK, o.bytes, 0), nil
}

// blockSegs appends the copy segments between blk's chunks and page `page`
// of every layer of buf: toArena = publish (engine → tier), else restore.
// The block's bytes are the layers in order, each PageBytes long, laid over
// its chunks in order; segments split at chunk boundaries.
func (s *Service) blockSegs(segs []native.CopySeg, blk *index.Block, buf *session.Buffer, page uint32, toArena bool) []native.CopySeg {
	cb := s.arena.ChunkBytes()
	base := uintptr(unsafe.Pointer(&buf.Mem[0]))
	var off uint64 // byte offset in the block
	for l := uint64(0); l < uint64(buf.Layers); l++ {
		pageAddr := base + uintptr((l*buf.PageCount+uint64(page))*buf.PageBytes)
		for done := uint64(0); done < buf.PageBytes; {
			c := off / cb
			in := off % cb
			n := min(cb-in, buf.PageBytes-done)
			tier := s.arena.Addr(blk.Chunks[c]) + uintptr(in)
			eng := pageAddr + uintptr(done)
			if toArena {
				segs = append(segs, native.CopySeg{Src: eng, Dst: tier, Len: n})
			} else {
				segs = append(segs, native.CopySeg{Src: tier, Dst: eng, Len: n})
			}
			done += n
			off += n
		}
	}
	return segs
}

// Complete drains finished copies (one cgo crossing): publishes are sealed
// (or discarded when their session is closing or the copy failed) and
// answered through post; restores are marked done and signalled on the
// session eventfd. In failpoint builds it first finishes the operations let
// go from pause points. It handles at most limit completions and resumed
// operations (post is called at most limit times) and returns true if more
// may be pending (the caller should come back, for example by ringing the
// control slot).
func (s *Service) Complete(limit int, post func(slot uint32, msg abi.Message)) (more bool) {
	limit = max(1, min(limit, len(s.comps)))
	ssdLimit := limit // SSD completions post nothing
	if failpoint.Enabled {
		ran, left := s.runResumed(limit, post)
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
		s.admitWaiting()
	}
	more = more || n == limit
	if s.ssd != nil && s.completeSSD(ssdLimit) {
		more = true
	}
	s.publishStats()
	return more
}

// land applies one drained completion, or withholds a restore's while the
// RestoreDone hold is on (failpoint builds): the copy landed, but its
// terminal state waits (RestorePoll answers Loading) while the dispatcher
// keeps serving, so a client that reads pages before the terminal result
// is caught by the e2e gate. It reports whether a restore released its
// reserved bytes.
func (s *Service) land(c native.CopyCompletion, post func(slot uint32, msg abi.Message)) (released bool) {
	if o := s.ops[c.Token]; o != nil && o.kind == opRestore && failpoint.Holding(failpoint.RestoreDone) {
		s.heldComps = append(s.heldComps, c)
		s.tickWanted.Store(true) // the ticker applies them once released
		failpoint.NoteHeld(failpoint.RestoreDone)
		return false
	}
	return s.applyCompletion(c, post)
}

// applyCompletion applies one finished copy: a publish is sealed (or
// discarded) and answered through post; a restore is marked done and
// signalled. It reports whether a restore released its reserved bytes.
func (s *Service) applyCompletion(comp native.CopyCompletion, post func(slot uint32, msg abi.Message)) (released bool) {
	c := &comp
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
			}
		case st.closing:
			s.abortPublish(o) // the publisher went away: never half-visible
		default:
			for _, blk := range o.blocks {
				s.idx.Seal(blk)
			}
			s.stats.published.Add(uint64(o.stored))
			s.stats.publishBytes.Add(o.bytes)
			if failpoint.Enabled && s.holdReply(failpoint.PublishAck, st, o.reply) {
				break // sealed and visible; only the answer waits
			}
			post(st.sess.Index, o.reply)
		}
	case opRestore:
		for _, blk := range o.blocks {
			s.idx.Unpin(blk)
		}
		st.clearBusy(o)
		s.restoreReserved -= o.bytes
		released = true
		o.done, o.status = true, c.Status
		if c.Status == 0 {
			s.stats.restored.Add(uint64(len(o.blocks)))
			s.stats.restoreBytes.Add(o.bytes)
		} else {
			s.log.Error("restore copy failed", "slot", st.sess.Index, "errno", -c.Status)
		}
		if st.closing {
			delete(st.restores, o.id)
			s.restoresAll--
		} else {
			s.done++
			if !failpoint.Enabled || !s.holdNotification(st, o) {
				s.notifyDone(st, o)
			}
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
	s.armExpiry(o.deadline)
	st.notify.signal()
}
