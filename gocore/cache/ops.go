package cache

import (
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/tier"
)

// query serves QueryBundle: a ticket (op_id ≠ 0) goes to the ticket set;
// op_id 0 is an untracked leased read: the longest resident prefix of the
// chain is pinned under a new lease.
func (s *Service) query(st *sessState, m *abi.Message) (abi.Message, *abi.DescError) {
	b, derr := s.descriptor(st, m)
	if derr != nil {
		return abi.Message{}, derr
	}
	q, derr := abi.DecodeQuery(b)
	if derr != nil {
		return abi.Message{}, derr
	}
	q.NS = st.ns.of(q.NS, &s.nsTab)
	if q.OpID != 0 {
		if failpoint.Enabled && !s.readmit && s.holdAdmission(st, m) {
			s.deferReply = true
			return abi.Message{}, nil
		}
		return s.tickets.Submit(st.book, m, &q)
	}
	start := mono()
	defer func() {
		s.stats.queryNanos.Add(uint64(mono() - start))
		s.stats.queryHashes.Add(uint64(q.Len()))
	}()
	s.stats.queries.Add(1)
	if len(st.holds) >= tier.MaxPrefetchRun {
		s.releaseHolds(st) // a session holds at most one run's worth
	}
	hits, loading, _ := s.look.Fetch(tier.Chain{NS: q.NS, Hashes: q.Hashes, First: 0, End: q.Len(), Domain: st.domain}, tier.ReadTail, st)
	if loading {
		// The chain continues on SSD; keep what earlier prefetches held:
		// this chain is still loading.
		return m.Response(s.epoch, abi.StatusLoading, uint64(len(hits)), 0), nil
	}
	// This query's answer is final: what earlier prefetches held for the
	// session is either leased below or no longer wanted.
	defer s.releaseHolds(st)
	s.look.Count(q.NS, q.Hash(q.Len()-1))
	res := abi.QueryResult{Status: abi.StatusMiss, RAMHits: uint32(len(hits))}
	if len(hits) == 0 {
		st.book.CountQuery(0)
		st.ns.c.queries++
		st.sess.PutResult(m, &res)
		return m.Response(s.epoch, abi.StatusMiss, 0, 0), nil
	}
	v, l := s.leases.Acquire(st.owner, hits, false)
	if v != lease.Grant {
		// An untracked read cannot wait for budget, and does not overtake
		// tickets that do.
		st.book.CountQuery(0)
		st.book.CountUnadmitted()
		return s.unadmitted(m), nil
	}
	st.book.CountQuery(len(l.Blocks))
	st.ns.c.queries++
	st.ns.c.hitBlocks += uint64(len(l.Blocks))
	s.stats.queryHits.Add(uint64(len(l.Blocks)))
	res = abi.QueryResult{Status: abi.StatusOK, Hits: uint32(len(l.Blocks)), RAMHits: res.RAMHits, LeaseID: l.ID, LeaseBytes: l.Bytes, BlockBytes: l.Blocks[0].Bytes}
	st.sess.PutResult(m, &res)
	return m.Response(s.epoch, abi.StatusOK, uint64(len(l.Blocks)), l.ID), nil
}

// release ends a lease of the session.
func (s *Service) release(st *sessState, m *abi.Message) (abi.Message, *abi.DescError) {
	l := s.leases.Get(st.owner, m.Arg0)
	if l == nil {
		if resp, ok := s.revokedLease(st, m, m.Arg0); ok {
			return resp, nil
		}
		return abi.Message{}, abi.Invalid(abi.FieldLeaseID, 0, "%d: no live lease of this session", m.Arg0)
	}
	s.leases.End(l)
	s.tickets.AdmitWaiting()
	return m.Response(s.epoch, abi.StatusOK, 0, 0), nil
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
	p.NS = st.ns.of(p.NS, &s.nsTab)
	buf, derr := st.sess.HostBuffer(p.BufferID)
	if derr != nil {
		return abi.Message{}, true, derr
	}
	if p.LayerFirst != 0 || p.LayerCount != buf.Layers {
		return abi.Message{}, true, abi.Invalid(abi.FieldLayers, 0, "layers [%d, +%d), this build publishes the buffer's full layer set [0, +%d)", p.LayerFirst, p.LayerCount, buf.Layers)
	}
	blockBytes := uint64(buf.Layers) * buf.PageBytes
	n := p.Len()
	for i := 0; i < n; i++ {
		_, page := p.Entry(i)
		if uint64(page) >= buf.PageCount {
			return abi.Message{}, true, abi.Invalid(abi.FieldPage, i, "%d, buffer %d has %d pages", page, p.BufferID, buf.PageCount)
		}
		if busy, ok := st.busy[pageKey{p.BufferID, page}]; ok {
			return abi.Message{}, true, abi.Invalid(abi.FieldPage, i, "%d is the destination of in-flight restore %d: its bytes are not settled", page, busy)
		}
	}
	if derr := copier.CheckBatch(n, &buf, p.BufferID, s.arena.ChunkBytes()); derr != nil {
		return abi.Message{}, true, derr
	}
	key := func(i int) index.Key { h, _ := p.Entry(i); return index.Key{NS: p.NS, Hash: h} }
	clear(s.hits) // a stale block pointer would keep its slab alive (index.Index.newBlock)
	fresh, present, ok := s.tiers.Place(n, key, blockBytes, buf.Layers, st.domain, s.hits[:0])
	s.hits = fresh
	if !ok {
		return s.unadmitted(m), true, nil
	}
	if present == n {
		return m.Response(s.epoch, abi.StatusOK, 0, uint64(n)), true, nil
	}
	o := &op{id: s.nextOp, kind: opPublish, st: st, present: uint32(present), start: s.reqStart, ns: st.ns.c}
	s.nextOp++
	segs := s.segs[:0]
	keep := s.tiers.Announces() && p.Record(0) != nil
	if keep {
		need := 0
		for i, blk := range fresh {
			if blk != nil {
				need += len(p.Record(i))
			}
		}
		o.records = s.recordBuf(need)
	}
	for i, blk := range fresh {
		if blk != nil {
			_, page := p.Entry(i)
			o.blocks = append(o.blocks, blk)
			if keep { // the descriptor copy is reused by the next request
				o.records = append(o.records, p.Record(i)...)
			}
			segs = copier.AppendBlock(segs, s.arena, blk, &buf, page, copier.ToTier)
		}
	}
	o.stored = uint32(len(o.blocks))
	o.bytes = uint64(o.stored) * blockBytes
	o.reply = m.Response(s.epoch, abi.StatusOK, uint64(o.stored), uint64(o.present))
	s.segs = segs[:0]
	if err := s.copier.SubmitLane(o.id, uint64(st.sess.Index), segs); err != nil {
		s.log.Error("copy engine refused a publish job", "err", err, "segments", len(segs))
		s.abortPublish(o)
		return m.Response(s.epoch, abi.StatusInternal, 0, 0), true, nil
	}
	s.ops[o.id] = o
	st.inflight++
	st.publishing++
	return abi.Message{}, false, nil
}

func (s *Service) abortPublish(o *op) {
	for _, blk := range o.blocks {
		s.tiers.Discard(blk)
	}
	o.blocks = nil
	s.putRecords(o)
}

// recordBuf is an empty buffer of at least need bytes for a publish's
// block records: need rounded up to a size class (minRecordBuf doubled
// up to maxRecordBuf), reused from an earlier publish that gave one of
// that class back (putRecords), else allocated. The Tracker copies the
// records it keeps, so a publish holds them only from its request to its
// completion; reusing the buffers spares the dispatcher the allocation
// and the page faults of fresh memory on every publish.
func (s *Service) recordBuf(need int) []byte {
	c := recordClass(need)
	if c == len(s.recordBufs) {
		return make([]byte, 0, need) // over maxRecordBuf: not kept
	}
	if free := s.recordBufs[c]; len(free) > 0 {
		b := free[len(free)-1]
		free[len(free)-1] = nil
		s.recordBufs[c] = free[:len(free)-1]
		return b
	}
	return make([]byte, 0, minRecordBuf<<c)
}

// recordClass is the size class of a buffer of need bytes: the least c
// with minRecordBuf<<c ≥ need, len(Service.recordBufs) when none is.
func recordClass(need int) int {
	c := 0
	for c < recordClasses && minRecordBuf<<c < need {
		c++
	}
	return c
}

// putRecords gives o's record buffer back for reuse while its class
// keeps at most maxRecordKept bytes, so a burst of one size cannot stop
// the reuse of the others (a buffer over maxRecordBuf is left to the
// garbage collector).
func (s *Service) putRecords(o *op) {
	b := o.records
	o.records = nil
	if b == nil {
		return
	}
	c := recordClass(cap(b))
	if c == recordClasses || minRecordBuf<<c != cap(b) || (len(s.recordBufs[c])+1)*cap(b) > maxRecordKept {
		return
	}
	s.recordBufs[c] = append(s.recordBufs[c], b[:0])
}

// The record buffers' size classes, 16 KiB to 1 MiB (a publish of 128
// blocks of 128 token ids takes 67 KiB, of 512 ids 259 KiB; a larger
// need gets a buffer of its own), and the bytes each class keeps for
// reuse: 4 MiB (28 MiB in all; 16 publishes in flight at once of the
// 256 KiB class, 256 of the 16 KiB one).
const (
	minRecordBuf  = 16 << 10
	recordClasses = 7
	maxRecordBuf  = minRecordBuf << (recordClasses - 1)
	maxRecordKept = 4 << 20
)

// SSD reads and peer fetches held for an untracked query's session
// (sessState is the query's tier.Reader).

// ReadDone holds a block prefetched for st's untracked query until its next
// query, so another session's prefetch or publish cannot evict the run
// before it is leased; a closed session's reads hold nothing.
func (st *sessState) ReadDone(blk *index.Block) {
	if blk != nil && st.svc.live(st) {
		st.svc.idx.Pin(blk)
		st.holds = append(st.holds, blk)
	}
}

// releaseHolds unpins the blocks prefetched for st's earlier query.
func (s *Service) releaseHolds(st *sessState) {
	for _, blk := range st.holds {
		s.idx.Unpin(blk)
	}
	clear(st.holds) // a stale block pointer would keep its slab alive (index.Index.newBlock)
	st.holds = st.holds[:0]
}
