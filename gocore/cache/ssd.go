package cache

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// ssdTier is the SSD tier as the cache service drives it (DESIGN.md §7):
//
//   - demotion, write-behind: a block the RAM tier evicts is copied into a
//     page-aligned staging buffer (so its frames can be reused at once) and
//     handed to ssd.Store.Write; the staging buffer returns to its pool when
//     the write is durable or refused. No staging buffer free: the block is
//     not demoted (counted).
//   - prefetch: a query whose chain continues on SSD past its RAM prefix
//     answers Loading and starts reading that run into newly allocated RAM
//     frames (Publishing blocks, invisible); the reads complete on store
//     goroutines, which queue the result and raise the dispatcher's control
//     event; Complete seals the blocks (visible) or, on ErrCorrupt or an I/O
//     error, discards them: a block that fails its checksum is a miss, never
//     served.
type ssdTier struct {
	store   *ssd.Store
	slot    uint64 // ssd.Spec.SlotBytes: the largest block the tier takes
	staging *staging
	events  chan ssdEvent
	ring    func()
	loading map[index.Key]*index.Block // prefetches in flight

	demoteSkipped atomic.Uint64 // evicted blocks not demoted: no staging buffer, or too big
	prefetches    atomic.Uint64 // blocks read back into RAM
	prefetchFails atomic.Uint64 // prefetches that failed (corrupt, I/O): treated as misses
}

// ssdEvent is a finished prefetch read, queued by a store goroutine.
type ssdEvent struct {
	blk  *index.Block
	st   *sessState // the session whose untracked query asked for the block
	tk   *ticket    // or the ticket that did
	warm bool       // or a warmup (no owner; counted in the warmup budget)
	err  error
}

// maxPrefetchRun bounds the blocks one query prefetches.
const maxPrefetchRun = 1024

// DefaultSSDStagingBytes is the default memory for demotions in flight
// (Spec.SSDStagingBytes): blocks evicted faster than the SSD takes them
// beyond it are not demoted.
const DefaultSSDStagingBytes = 256 << 20

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
		events: make(chan ssdEvent, maxDrain), loading: make(map[index.Key]*index.Block)}, nil
}

// close waits for every queued and issued I/O (reads write RAM tier
// frames, writes read staging buffers), then unmaps the staging buffers.
// It has no deadline: see Service.Close.
func (t *ssdTier) close() {
	t.store.Close() // waits for queued I/O: staging and RAM frames are still mapped
	t.staging.close()
}

// SSDOutstanding returns the SSD tier's I/Os not yet finished (nil without
// an SSD tier): those a worker is in the system call for, then those
// queued; see ssd.Store.Outstanding. A read among them may still write
// into a RAM tier frame. Safe from any goroutine, also while Close waits
// for them: it is what a bounded shutdown logs before it exits.
func (s *Service) SSDOutstanding() []ssd.IO {
	if s.ssd == nil {
		return nil
	}
	return s.ssd.store.Outstanding()
}

func ssdKey(k index.Key) ssd.Key { return ssd.Key{NS: k.NS, Hash: k.Hash} }

// demote offers an evicted block to the SSD tier; the caller releases its
// chunks right after (the bytes are copied into a staging buffer first).
func (s *Service) demote(blk *index.Block) {
	t := s.ssd
	if blk.Bytes > t.slot {
		t.demoteSkipped.Add(1)
		return
	}
	k := ssdKey(blk.Key)
	if m, ok := t.store.Contains(k); ok && m.Bytes == blk.Bytes && m.Layers == blk.Layers {
		return // already on SSD
	}
	if !t.store.Admit(k) {
		return // declined by the admission rule: no copy spent on it
	}
	i, buf := t.staging.get()
	if buf == nil {
		t.demoteSkipped.Add(1)
		return
	}
	off := uint64(0)
	for _, c := range blk.Chunks {
		off += uint64(copy(buf[off:blk.Bytes], s.arena.Chunk(c)))
	}
	n := (blk.Bytes + 4095) &^ 4095
	clear(buf[blk.Bytes:n])
	t.store.WriteAdmitted(k, ssd.Meta{Bytes: blk.Bytes, Layers: blk.Layers}, [][]byte{buf[:n]}, func(error) {
		t.staging.put(i) // durable or refused (counted by the store): the buffer is free
	})
}

// prefetch starts reading the SSD run of a chain from hash position from
// on, for an untracked query of st (tk nil: the blocks are held for st's
// next query) or for ticket tk (held for it); it returns true if the query
// must answer Loading (a read runs or was started for the block at from).
func (s *Service) prefetch(st *sessState, tk *ticket, ns [16]byte, hashAt func(int) abi.BlockHash, from, n int) bool {
	t := s.ssd
	if tk == nil && len(st.holds) >= maxPrefetchRun {
		s.releaseHolds(st) // a session holds at most one run's worth
	}
	first := index.Key{NS: ns, Hash: hashAt(from)}
	if _, ok := t.loading[first]; ok {
		return true
	}
	if s.idx.Contains(first) { // being published by a client: not ours to load
		return false
	}
	run := s.ssdRun(ns, hashAt, from, n, ^uint64(0))
	if len(run) == 0 {
		return false
	}
	s.startReads(run, ssdEvent{st: st, tk: tk})
	return true
}

// warm starts reading the SSD run of a chain from position from on into RAM
// with no owner (DESIGN.md §7, spec "warmup ... skips on warmup-budget
// pressure"): at most the warmup budget is read at a time; returns the
// blocks started (0: nothing on SSD, already loading, or no budget).
func (s *Service) warm(ns [16]byte, hashAt func(int) abi.BlockHash, from, n int) int {
	t := s.ssd
	first := index.Key{NS: ns, Hash: hashAt(from)}
	if _, ok := t.loading[first]; ok || s.idx.Contains(first) || s.warming >= s.warmupBudget {
		if s.warming >= s.warmupBudget {
			s.stats.warmupSkipped.Add(1)
		}
		return 0
	}
	run := s.ssdRun(ns, hashAt, from, n, s.warmupBudget-s.warming)
	s.startReads(run, ssdEvent{warm: true})
	for _, it := range run {
		s.warming += it.m.Bytes
	}
	return len(run)
}

type ssdItem struct {
	k index.Key
	m ssd.Meta
}

// ssdRun returns the leading blocks of positions [from, n) that are on SSD
// and in no RAM state, within maxBytes, as many as the completion queue and
// RAM (after eviction) take; room for them is made.
func (s *Service) ssdRun(ns [16]byte, hashAt func(int) abi.BlockHash, from, n int, maxBytes uint64) []ssdItem {
	t := s.ssd
	var run []ssdItem
	var bytes uint64
	defer clear(s.batch)
	for j := from; j < n && len(run) < maxPrefetchRun; j++ {
		k := index.Key{NS: ns, Hash: hashAt(j)}
		if s.idx.Contains(k) {
			break
		}
		if _, dup := s.batch[k]; dup { // a hash repeated in the chain: load it once
			break
		}
		s.batch[k] = struct{}{}
		m, ok := t.store.Contains(ssdKey(k))
		if !ok || bytes+m.Bytes > maxBytes {
			break
		}
		bytes += m.Bytes
		run = append(run, ssdItem{k, m})
	}
	// Bound the reads in flight by the completion queue, so a store
	// goroutine never waits long to hand its result over.
	if room := cap(t.events) - len(t.loading); len(run) > room {
		run = run[:max(room, 0)]
	}
	if len(run) == 0 {
		return nil
	}
	var need uint64
	for _, it := range run {
		need += uint64(s.arena.ChunksFor(it.m.Bytes))
	}
	// Not room for the whole run: load as much of its head as fits.
	for len(run) > 0 && !s.makeRoom(need) {
		need -= uint64(s.arena.ChunksFor(run[len(run)-1].m.Bytes))
		run = run[:len(run)-1]
	}
	return run
}

// startReads inserts run as Publishing blocks in newly allocated frames and
// queues their SSD reads; each completion is reported as ev with its block.
func (s *Service) startReads(run []ssdItem, ev ssdEvent) {
	t := s.ssd
	for d, it := range run {
		per := s.arena.ChunksFor(it.m.Bytes)
		chunks, err := s.arena.Alloc(make([]uint32, 0, per), per)
		if err != nil {
			panic("cache: allocation after makeRoom failed: " + err.Error())
		}
		blk := s.idx.Insert(it.k, it.m.Bytes, it.m.Layers, uint32(d), chunks)
		t.loading[it.k] = blk
		dst := make([][]byte, len(chunks))
		for i, c := range chunks {
			dst[i] = s.arena.Chunk(c)
		}
		e := ev
		e.blk = blk
		if e.tk != nil {
			e.tk.reads++
		}
		t.store.Read(ssdKey(it.k), it.m, dst, func(err error) {
			e.err = err
			t.events <- e // never blocks: reads in flight ≤ cap(events)
			t.ring()
		})
	}
}

// completeSSD applies finished prefetches (dispatcher goroutine); then
// tickets waiting for SSD blocks are resolved again.
func (s *Service) completeSSD(limit int) (more bool) {
	t := s.ssd
	got := 0
	defer func() {
		if got > 0 {
			s.resolvePending()
		}
	}()
	for i := 0; i < limit; i++ {
		select {
		case ev := <-t.events:
			got++
			delete(t.loading, ev.blk.Key)
			if ev.warm {
				s.warming -= ev.blk.Bytes
			}
			if ev.err != nil {
				t.prefetchFails.Add(1)
				if !errors.Is(ev.err, ssd.ErrNotFound) {
					s.log.Warn("ssd prefetch failed; the block is a miss", slog.Any("err", ev.err))
				}
				s.idx.Abort(ev.blk)
				s.arena.Release(ev.blk.Chunks)
				if ev.tk != nil {
					s.readDone(ev.tk, nil)
				}
				continue
			}
			t.prefetches.Add(1)
			s.idx.Seal(ev.blk)
			switch st := ev.st; {
			case ev.tk != nil:
				s.readDone(ev.tk, ev.blk)
			case st != nil && !st.closing && s.sessions[st.sess.Index] == st:
				// Held for the asking session until its next query, so
				// another session's prefetch or publish cannot evict the run
				// before it is leased (found starving two clients).
				s.idx.Pin(ev.blk)
				st.holds = append(st.holds, ev.blk)
			}
		default:
			return false
		}
	}
	return true
}

// staging is a pool of page-aligned buffers (one anonymous mapping) that
// hold demoted blocks until the SSD write finished. Safe for concurrent use:
// store goroutines return buffers.
type staging struct {
	mu   sync.Mutex
	mem  []byte
	size uint64
	free []int
}

func newStaging(n int, size uint64) (*staging, error) {
	mem, err := unix.Mmap(-1, 0, n*int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("ssd staging buffers (%d × %d bytes): %w", n, size, err)
	}
	s := &staging{mem: mem, size: size}
	for i := n - 1; i >= 0; i-- {
		s.free = append(s.free, i)
	}
	return s, nil
}

func (s *staging) get() (int, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.free) == 0 {
		return -1, nil
	}
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	off := uint64(i) * s.size
	return i, s.mem[off : off+s.size : off+s.size]
}

func (s *staging) put(i int) {
	s.mu.Lock()
	s.free = append(s.free, i)
	s.mu.Unlock()
}

func (s *staging) close() { unix.Munmap(s.mem) }

// releaseHolds unpins the blocks prefetched for st's earlier query.
func (s *Service) releaseHolds(st *sessState) {
	for _, blk := range st.holds {
		s.idx.Unpin(blk)
	}
	st.holds = st.holds[:0]
}
