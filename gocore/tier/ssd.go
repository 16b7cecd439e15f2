package tier

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// Reader is whoever waits for a prefetch read (an untracked query's
// session, or a ticket): ReadDone runs on the dispatcher goroutine from
// Complete, once per read, with the sealed block, or nil when the read
// failed (a miss).
type Reader interface {
	ReadDone(blk *index.Block)
}

// ssdTier is the SSD tier as the tiers drive it (package doc).
type ssdTier struct {
	store   *ssd.Store
	slot    uint64 // ssd.Spec.SlotBytes: the largest block the tier takes
	staging *staging
	events  chan ssdEvent
	ring    func()
	loading map[index.Key]*index.Block // prefetches in flight
	records func(index.Key) []byte     // Spec.Records; nil: blocks are written without a record

	demoteSkipped atomic.Uint64 // evicted blocks not demoted: no staging buffer, or too big
	prefetches    atomic.Uint64 // blocks read back into RAM
	prefetchFails atomic.Uint64 // prefetches that failed (corrupt, I/O): treated as misses
}

// ssdEvent is a finished prefetch read, queued by a store goroutine.
type ssdEvent struct {
	blk    *index.Block
	reader Reader // nil: a warm-up (no owner; counted in the warmup budget)
	err    error
}

func openSSD(spec ssd.Spec, stagingBytes uint64, log *slog.Logger, ring func()) (*ssdTier, error) {
	if stagingBytes == 0 {
		stagingBytes = DefaultSSDStagingBytes
	}
	// One staging buffer per write in flight: the store's pending-write
	// bound is the pool's size, so a Write never waits for a buffer.
	n := int(max(16, min(stagingBytes/max(spec.SlotBytes, 1), 65536)))
	spec.MaxPendingWrites = n
	st, err := ssd.Open(spec, log)
	if err != nil {
		return nil, err
	}
	stg, err := newStaging(n, spec.SlotBytes)
	if err != nil {
		st.Close()
		return nil, err
	}
	return &ssdTier{store: st, slot: spec.SlotBytes, staging: stg, ring: ring,
		events: make(chan ssdEvent, maxReadsQueued), loading: make(map[index.Key]*index.Block)}, nil
}

// close waits for every queued and issued I/O (reads write RAM tier
// frames, writes read staging buffers), then unmaps the staging buffers.
func (s *ssdTier) close() {
	s.store.Close() // waits for queued I/O: staging and RAM frames are still mapped
	s.staging.close()
}

func (s *ssdTier) stats() SSDStats {
	ss := s.store.Stats()
	return SSDStats{On: true, Open: ss.Open, ReadErrors: ss.ReadErrors, WriteErrors: ss.WriteErrors, Blocks: ss.Blocks, UsedBytes: ss.UsedBytes, CapacityBytes: ss.CapacityBytes,
		Writes: ss.Writes, Reads: ss.Reads, Corrupt: ss.Corrupt, Recovered: ss.Recovered,
		NotAdmitted: ss.NotAdmitted, Evictions: ss.Evictions, DemoteSkipped: s.demoteSkipped.Load() + ss.Busy + ss.RecordTooLong,
		Prefetches: s.prefetches.Load(), PrefetchFails: s.prefetchFails.Load()}
}

// Outstanding returns the SSD tier's I/Os not yet finished (nil without an
// SSD tier); see ssd.Store.Outstanding. A read among them may still write
// into a RAM frame. Safe from any goroutine, also while Close waits.
func (t *Tiers) Outstanding() []ssd.IO {
	if t.ssd == nil {
		return nil
	}
	return t.ssd.store.Outstanding()
}

// Warming is the bytes of warm-up reads in flight (within the warmup budget).
func (t *Tiers) Warming() uint64 { return t.warming }

// Loading is the number of SSD reads in flight.
func (t *Tiers) Loading() int {
	if t.ssd == nil {
		return 0
	}
	return len(t.ssd.loading)
}

func ssdKey(k index.Key) ssd.Key { return ssd.Key{NS: k.NS, Hash: k.Hash} }

// OnSSD reports whether k is on the SSD tier or being read from it.
func (t *Tiers) OnSSD(k index.Key) bool {
	if t.ssd == nil {
		return false
	}
	if _, ok := t.ssd.loading[k]; ok {
		return true
	}
	_, ok := t.ssd.store.Contains(ssdKey(k))
	return ok
}

// demote offers an evicted block to the SSD tier; the caller releases its
// chunks right after (the bytes are copied into a staging buffer first).
func (t *Tiers) demote(blk *index.Block) {
	s := t.ssd
	if blk.Bytes > s.slot {
		s.demoteSkipped.Add(1)
		return
	}
	k := ssdKey(blk.Key)
	if m, ok := s.store.Contains(k); ok && m.Bytes == blk.Bytes && m.Layers == blk.Layers {
		return // already on SSD
	}
	if !s.store.Admit(k) {
		return // declined by the admission rule: no copy spent on it
	}
	i, buf := s.staging.get()
	if buf == nil {
		s.demoteSkipped.Add(1)
		return
	}
	if !t.ssdRoom(blk) {
		s.staging.put(i) // over its domain's SSD quota: not admitted, counted
		return
	}
	off := uint64(0)
	for _, c := range blk.Chunks {
		off += uint64(copy(buf[off:blk.Bytes], t.arena.Chunk(c)))
	}
	n := (blk.Bytes + 4095) &^ 4095
	clear(buf[blk.Bytes:n])
	var rec []byte
	if s.records != nil {
		rec = s.records(blk.Key)
	}
	s.store.WriteAdmitted(k, ssd.Meta{Bytes: blk.Bytes, Layers: blk.Layers}, ssd.Class(blk.DomainOf()), [][]byte{buf[:n]}, rec, func(error) {
		s.staging.put(i) // durable or refused (counted by the store): the buffer is free
	})
}

// Prefetch starts reading the SSD run of a chain from hash position from
// on (of n) for r, into blocks of domain d (within its RAM quota: see
// quota.go). loading reports whether the query must answer Loading (a
// read runs or was started for the block at from); started is how many
// reads it started, each of which r hears of once.
func (t *Tiers) Prefetch(r Reader, d index.Domain, ns abi.Namespace, hashAt func(int) abi.BlockHash, from, n int) (loading bool, started int) {
	if t.ssd == nil {
		return false, 0
	}
	first := index.Key{NS: ns, Hash: hashAt(from)}
	if _, ok := t.ssd.loading[first]; ok {
		return true, 0
	}
	if t.idx.Contains(first) { // being published by a client: not ours to load
		return false, 0
	}
	run := t.ssdRun(d, ns, hashAt, from, n, ^uint64(0))
	if len(run) == 0 {
		return false, 0
	}
	t.startReads(d, run, r)
	return true, len(run)
}

// Warm starts reading the SSD run of a chain from position from on into
// RAM with no owner (docs/design.md §7, spec "warmup ... skips on warmup-budget
// pressure"): at most the warmup budget is read at a time. It returns the
// blocks started (0: no SSD tier, nothing on SSD, already loading, or no
// budget). The blocks count against domain d, as Prefetch's do.
func (t *Tiers) Warm(d index.Domain, ns abi.Namespace, hashAt func(int) abi.BlockHash, from, n int) int {
	if t.ssd == nil {
		return 0
	}
	first := index.Key{NS: ns, Hash: hashAt(from)}
	if t.warming >= t.warmupBudget {
		t.warmupSkipped.Add(1)
		return 0
	}
	if _, ok := t.ssd.loading[first]; ok || t.idx.Contains(first) {
		return 0
	}
	run := t.ssdRun(d, ns, hashAt, from, n, t.warmupBudget-t.warming)
	t.startReads(d, run, nil)
	for _, it := range run {
		t.warming += it.m.Bytes
	}
	return len(run)
}

type ssdItem struct {
	k index.Key
	m ssd.Meta
}

// ssdRun returns the leading blocks of positions [from, n) that are on SSD
// and in no RAM state, within maxBytes, as many as the completion queue,
// RAM (after eviction) and domain d's RAM quota take; room for them is
// made.
func (t *Tiers) ssdRun(d index.Domain, ns abi.Namespace, hashAt func(int) abi.BlockHash, from, n int, maxBytes uint64) []ssdItem {
	s := t.ssd
	var run []ssdItem
	var bytes uint64
	defer clear(t.batch)
	for j := from; j < n && len(run) < MaxPrefetchRun; j++ {
		k := index.Key{NS: ns, Hash: hashAt(j)}
		if t.idx.Contains(k) {
			break
		}
		if _, dup := t.batch[k]; dup { // a hash repeated in the chain: load it once
			break
		}
		t.batch[k] = struct{}{}
		m, ok := s.store.Contains(ssdKey(k))
		if !ok || bytes+m.Bytes > maxBytes {
			break
		}
		bytes += m.Bytes
		run = append(run, ssdItem{k, m})
	}
	if room := cap(s.events) - len(s.loading); len(run) > room {
		run = run[:max(room, 0)]
	}
	if len(run) == 0 {
		return nil
	}
	var need uint64 // chunks
	for _, it := range run {
		need += uint64(t.arena.ChunksFor(it.m.Bytes))
	}
	// Not room for the whole run: load as much of its head as fits.
	for len(run) > 0 && !(t.canRoom(need) && t.domainRoom(d, need) && t.MakeRoom(need)) {
		need -= uint64(t.arena.ChunksFor(run[len(run)-1].m.Bytes))
		run = run[:len(run)-1]
	}
	return run
}

// startReads inserts run as Publishing blocks in newly allocated frames and
// queues their SSD reads; each completion reaches r (nil: a warm-up). The
// blocks count against domain d.
func (t *Tiers) startReads(d index.Domain, run []ssdItem, r Reader) {
	s := t.ssd
	for depth, it := range run {
		blk := t.Insert(it.k, it.m.Bytes, it.m.Layers, uint32(depth), d)
		s.loading[it.k] = blk
		dst := make([][]byte, len(blk.Chunks))
		for i, c := range blk.Chunks {
			dst[i] = t.arena.Chunk(c)
		}
		e := ssdEvent{blk: blk, reader: r}
		s.store.Read(ssdKey(it.k), it.m, dst, func(err error) {
			e.err = err
			s.events <- e // never blocks: reads in flight ≤ cap(events)
			s.ring()
		})
	}
}

// Complete applies the verdicts of an adopted tier's verification
// (adopt.go), then at most limit finished prefetches and peer events
// (dispatcher goroutine): each block is sealed, or discarded when its read
// or fetch failed, and its Reader told; then queued advertisements are
// handed over. It returns how many reads and fetches ended and whether
// more may be queued.
func (t *Tiers) Complete(limit int) (got int, more bool) {
	defer t.FlushAdverts()
	got = t.completeAdoption() // blocks now visible may resolve waiting tickets
	n := 0                     // events applied, within limit
	if t.peer != nil {
	peer:
		for ; n < limit; n++ {
			select {
			case ev := <-t.peer.events:
				if t.completePeer(ev) {
					got++
				}
			default:
				break peer
			}
		}
		more = len(t.peer.events) > 0
	}
	if t.ssd == nil {
		return got, more
	}
	s := t.ssd
	for ; n < limit; n++ {
		var ev ssdEvent
		select {
		case ev = <-s.events:
		default:
			return got, more
		}
		got++
		delete(s.loading, ev.blk.Key)
		if ev.reader == nil {
			t.warming -= ev.blk.Bytes
		}
		if ev.err != nil {
			s.prefetchFails.Add(1)
			if !errors.Is(ev.err, ssd.ErrNotFound) {
				t.log.Warn("ssd prefetch failed; the block is a miss", slog.Any("err", ev.err))
			}
			t.Discard(ev.blk)
			if ev.reader != nil {
				ev.reader.ReadDone(nil)
			}
			continue
		}
		s.prefetches.Add(1)
		t.Seal(ev.blk) // produced here: read back from this node's SSD
		if ev.reader != nil {
			ev.reader.ReadDone(ev.blk)
		}
	}
	return got, true
}

// AnnounceSSD hands the event stream (Spec.Events) every block the SSD
// tier holds, with the record its slot header keeps (one 4 KiB read each,
// ssd.Store.Record), until stop closes; it returns how many it handed
// over. Safe on any goroutine: a block evicted meanwhile is skipped or
// withdrawn again. Blocks without a record are counted as unannounced.
func (t *Tiers) AnnounceSSD(stop <-chan struct{}) int {
	if t.ssd == nil || t.ev == nil {
		return 0
	}
	n := 0
	for _, k := range t.ssd.store.Keys() {
		select {
		case <-stop:
			return n
		default:
		}
		rec, err := t.ssd.store.Record(k)
		if err != nil {
			continue // gone, closed, or dropped as corrupt (and withdrawn)
		}
		key := kvevents.Key{NS: k.NS, Hash: k.Hash}
		t.ev.StoredPersisted(key, kvevents.Storage, rec)
		if _, ok := t.ssd.store.Contains(k); !ok {
			t.ev.Removed(key, kvevents.Storage) // its Gone may have come before the Stored
		}
		n++
	}
	return n
}
