package tier

import (
	"context"
	"hash/crc32"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/cluster"
	"github.com/orbitkv/orbitkv/gocore/index"
)

// Limits of the peer tier.
const (
	// DefaultPeerTimeout bounds one fetch from a peer: opening the
	// transfer, the READs and the checks. Past it the fetch is a miss.
	DefaultPeerTimeout = 2 * time.Second
	// DefaultPeerRunBytes bounds the bytes one fetch asks a peer for.
	DefaultPeerRunBytes = 64 << 20
	// MaxPeerRun bounds the blocks one fetch asks a peer for.
	MaxPeerRun = 1024
	// MaxPeerFetches bounds the fetches in flight; a lookup beyond it
	// does not consult the peer tier (a miss).
	MaxPeerFetches = 64
)

// Remote is the peer tier's view of the other Managers: who advertises a
// block, and fetching a run of blocks from one of them. gocore/cluster's
// Fetcher is the one over the network (catalog, peer control, transfer
// engine); tests inject faults through doubles.
type Remote interface {
	// Owners returns the live peers that advertise (ns, h), never this
	// node, from a local index (no network round trip: it runs on the
	// dispatcher goroutine); nil when none. The tier reads the slice only
	// until its next call.
	Owners(ns abi.Namespace, h abi.BlockHash) []cluster.Owner
	// Fetch runs on a goroutine of its own. It asks o for the leading run
	// of hashes it holds, at most maxBytes, and calls place once with that
	// run (possibly shorter than hashes, possibly empty). place returns,
	// per block it takes, the destination frames (chunks in byte order,
	// of total length Served.Length), or fewer blocks, or nil (no room,
	// or the fetch's ctx ended). Fetch reads block i's bytes into dst[i]
	// for the blocks place returned and reports how many leading ones
	// landed whole. It never writes a frame after it returned, never
	// waits past ctx's deadline, and ends the transfer at the peer
	// (release) before or shortly after it returns. The tier checks the
	// CRC32C itself: Fetch need not.
	Fetch(ctx context.Context, o cluster.Owner, ns abi.Namespace, hashes []abi.BlockHash, maxBytes uint64,
		place func(run []cluster.Served) (dst [][][]byte)) (landed int, err error)
}

// peerTier is the peer tier as the tiers drive it (package doc).
type peerTier struct {
	remote   Remote
	timeout  time.Duration
	runBytes uint64
	ring     func()
	events   chan peerEvent // ≤ 2 per fetch in flight: a send never blocks
	loading  map[index.Key]*peerFetch
	inflight int
	seq      uint64
	layouts  map[layoutKey]uint32 // layers of blocks seen on this node, by namespace and length

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	fetches, fetchFails, fetched, corrupt atomic.Uint64
	hit, miss                             atomic.Uint64
	fetchedBytes, fetchNanos              atomic.Uint64
}

type layoutKey struct {
	ns    abi.Namespace
	bytes uint64
}

// peerFetch is one fetch in flight; its fields but reply are owned by the
// dispatcher goroutine.
type peerFetch struct {
	ns     abi.Namespace
	domain index.Domain // the blocks count against it
	keys   []index.Key  // the run asked for
	layers uint32       // layers of the chain's block before the run, if resident (0: none)
	start  time.Time    // when the lookup started it
	reader Reader
	blocks []*index.Block   // frames allocated for the served run (Publishing replicas)
	reply  chan [][][]byte  // place's answer; buffered: the dispatcher never waits
	served []cluster.Served // what the peer serves (written by the fetch goroutine)
	dst    [][][]byte       // what place gave (written by the fetch goroutine)
}

// peerEvent is a fetch goroutine's message to the dispatcher: a run to
// place frames for, or the fetch's end with the blocks that landed and
// passed their check.
type peerEvent struct {
	f      *peerFetch
	place  []cluster.Served // non-nil: a place request
	done   bool
	landed int
	err    error
}

func newPeerTier(r Remote, timeout time.Duration, runBytes uint64, ring func()) *peerTier {
	ctx, cancel := context.WithCancel(context.Background())
	if timeout == 0 {
		timeout = DefaultPeerTimeout
	}
	if runBytes == 0 {
		runBytes = DefaultPeerRunBytes
	}
	return &peerTier{remote: r, timeout: timeout, runBytes: runBytes, ring: ring,
		events: make(chan peerEvent, 2*MaxPeerFetches), loading: make(map[index.Key]*peerFetch),
		layouts: make(map[layoutKey]uint32), ctx: ctx, cancel: cancel}
}

// close ends every fetch (their contexts) and waits for their goroutines:
// after it no fetch writes a RAM frame.
func (p *peerTier) close() {
	p.cancel()
	p.wg.Wait()
}

// HasPeer reports whether the peer tier is configured (Spec.Remote).
func (t *Tiers) HasPeer() bool { return t.peer != nil }

// PeerLoading is the number of peer fetches in flight.
func (t *Tiers) PeerLoading() int {
	if t.peer == nil {
		return 0
	}
	return t.peer.inflight
}

// learnLayout records that blocks of bytes in ns span layers (a peer that
// does not say how many layers a block spans is taken to use this node's
// layout for that namespace and length).
func (t *Tiers) learnLayout(ns abi.Namespace, bytes uint64, layers uint32) {
	if t.peer != nil {
		t.peer.layouts[layoutKey{ns, bytes}] = layers
	}
}

// PeerFetch starts fetching, for r, the run of a chain from hash position
// from on (of n) that one live peer advertises, as Prefetch does from SSD:
// loading reports whether the query must answer Loading (a fetch runs or
// was started for the block at from), started how many blocks were asked
// for, each of which r hears of once (sealed, or nil for a miss). The
// first owner advertised for the block at from is asked for the leading
// blocks it also advertises. Lookup counts: a started fetch counts its
// blocks as peer hits or misses when it ends; blocks past its run (no
// owner) count as misses now; a chain already being fetched counts
// nothing. The fetched blocks count against domain d (within its RAM
// quota: placeRun).
func (t *Tiers) PeerFetch(r Reader, d index.Domain, ns abi.Namespace, hashAt func(int) abi.BlockHash, from, n int) (loading bool, started int) {
	p := t.peer
	if p == nil || from >= n {
		return false, 0
	}
	first := index.Key{NS: ns, Hash: hashAt(from)}
	if _, ok := p.loading[first]; ok {
		return true, 0
	}
	if t.idx.Contains(first) { // being published or read from SSD: not ours to fetch
		return false, 0
	}
	owners := p.remote.Owners(ns, first.Hash)
	if len(owners) == 0 || p.inflight >= MaxPeerFetches {
		p.miss.Add(uint64(n - from))
		return false, 0
	}
	o := owners[int(p.seq%uint64(len(owners)))] // spread fetches over the owners
	p.seq++
	f := &peerFetch{ns: ns, domain: d, reader: r, reply: make(chan [][][]byte, 1), start: time.Now()}
	if from > 0 {
		if prev := t.idx.Lookup(index.Key{NS: ns, Hash: hashAt(from - 1)}); prev != nil {
			f.layers = prev.Layers
		}
	}
	defer clear(t.batch)
	for j := from; j < n && len(f.keys) < MaxPeerRun; j++ {
		k := index.Key{NS: ns, Hash: hashAt(j)}
		if _, dup := t.batch[k]; dup || t.idx.Contains(k) {
			break
		}
		if _, busy := p.loading[k]; busy {
			break
		}
		if j > from && !advertises(p.remote.Owners(ns, k.Hash), o) {
			break
		}
		t.batch[k] = struct{}{}
		f.keys = append(f.keys, k)
	}
	p.miss.Add(uint64(n - from - len(f.keys)))
	for _, k := range f.keys {
		p.loading[k] = f
	}
	hashes := make([]abi.BlockHash, len(f.keys))
	for i, k := range f.keys {
		hashes[i] = k.Hash
	}
	p.inflight++
	p.fetches.Add(1)
	p.wg.Add(1)
	go p.run(f, o, hashes)
	return true, len(f.keys)
}

func advertises(owners []cluster.Owner, o cluster.Owner) bool {
	for _, w := range owners {
		if w.NodeID == o.NodeID && w.Epoch == o.Epoch {
			return true
		}
	}
	return false
}

// run is a fetch's goroutine: the Remote's Fetch, then the CRC32C check of
// what landed, then the end event. Frames are placed by the dispatcher
// (place event); this goroutine only waits for them, never past ctx.
func (p *peerTier) run(f *peerFetch, o cluster.Owner, hashes []abi.BlockHash) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
	defer cancel()
	landed, err := p.remote.Fetch(ctx, o, f.ns, hashes, p.runBytes, func(run []cluster.Served) [][][]byte {
		if len(run) > len(hashes) {
			run = run[:len(hashes)]
		}
		f.served = append([]cluster.Served(nil), run...)
		p.send(peerEvent{f: f, place: append(make([]cluster.Served, 0, len(run)+1), run...)})
		select {
		case dst := <-f.reply:
			f.dst = dst
			return dst
		case <-ctx.Done():
			return nil
		}
	})
	landed = max(0, min(landed, len(f.dst)))
	for i := 0; i < landed; i++ {
		if blockCRC(f.dst[i]) != f.served[i].CRC32C {
			p.corrupt.Add(1)
			landed = i // a block failing its check is a miss, and so is the rest of the run
			break
		}
	}
	p.send(peerEvent{f: f, done: true, landed: landed, err: err})
}

func (p *peerTier) send(ev peerEvent) {
	p.events <- ev // never blocks: ≤ 2 events per fetch in flight
	p.ring()
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func blockCRC(frames [][]byte) uint32 {
	var c uint32
	for _, b := range frames {
		c = crc32.Update(c, castagnoli, b)
	}
	return c
}

// placeRun allocates frames for the leading blocks of a served run that
// are still in no RAM state and whose layout is known, as many as RAM
// and the fetch's domain's RAM quota take after eviction, and inserts
// them as Publishing replicas of that domain.
func (t *Tiers) placeRun(f *peerFetch, run []cluster.Served) [][][]byte {
	p := t.peer
	if p.ctx.Err() != nil || f.blocks != nil {
		return nil
	}
	type item struct {
		bytes  uint64
		layers uint32
	}
	var items []item
	var need uint64 // chunks
	for i, s := range run {
		if i >= len(f.keys) || s.Length == 0 || t.idx.Contains(f.keys[i]) {
			break
		}
		layers := s.Layers
		if layers == 0 {
			layers = p.layouts[layoutKey{f.ns, s.Length}]
		}
		if layers == 0 {
			layers = f.layers
		}
		if layers != 0 && s.Length%uint64(layers) != 0 {
			layers = 0
		}
		items = append(items, item{s.Length, layers})
		need += uint64(t.arena.ChunksFor(s.Length))
	}
	for len(items) > 0 && !(t.canRoom(need) && t.domainRoom(f.domain, need) && t.MakeRoom(need)) {
		need -= uint64(t.arena.ChunksFor(items[len(items)-1].bytes))
		items = items[:len(items)-1]
	}
	if len(items) == 0 {
		f.blocks = []*index.Block{}
		return nil
	}
	dst := make([][][]byte, len(items))
	for i, it := range items {
		per := t.arena.ChunksFor(it.bytes)
		chunks, err := t.arena.Alloc(make([]uint32, 0, per), per)
		if err != nil {
			panic("tier: allocation after MakeRoom failed: " + err.Error())
		}
		blk := t.idx.InsertReplica(f.keys[i], it.bytes, it.layers, uint32(i), chunks)
		t.idx.Assign(blk, f.domain)
		f.blocks = append(f.blocks, blk)
		left := it.bytes
		for _, c := range chunks {
			b := t.arena.Chunk(c)
			b = b[:min(uint64(len(b)), left)]
			left -= uint64(len(b))
			dst[i] = append(dst[i], b)
		}
	}
	return dst
}

// completePeer applies one peer event (dispatcher goroutine); it reports
// whether a fetch ended (readers were told).
func (t *Tiers) completePeer(ev peerEvent) bool {
	p, f := t.peer, ev.f
	if !ev.done {
		select {
		case f.reply <- t.placeRun(f, ev.place): // buffered: room for place's one answer
		default: // a Remote that called place twice gets nothing the second time
		}
		return false
	}
	p.inflight--
	for _, k := range f.keys {
		delete(p.loading, k)
	}
	landed := min(ev.landed, len(f.blocks))
	if ev.err != nil || landed < len(f.keys) {
		p.fetchFails.Add(1)
		if ev.err != nil && p.ctx.Err() == nil {
			t.log.Debug("peer fetch failed; its blocks are misses", slog.Any("err", ev.err),
				slog.Int("blocks", len(f.keys)), slog.Int("landed", landed))
		}
	}
	p.fetched.Add(uint64(landed))
	p.hit.Add(uint64(landed))
	if landed > 0 {
		var bytes uint64
		for _, blk := range f.blocks[:landed] {
			bytes += blk.Bytes
		}
		p.fetchedBytes.Add(bytes)
		p.fetchNanos.Add(uint64(time.Since(f.start)))
	}
	p.miss.Add(uint64(len(f.keys) - landed))
	for i, blk := range f.blocks {
		if i < landed {
			t.idx.Seal(blk) // a replica: not advertised (Advertiser)
		} else {
			t.Discard(blk)
		}
	}
	if f.reader != nil {
		for i := range f.keys {
			if i < landed {
				f.reader.ReadDone(f.blocks[i])
			} else {
				f.reader.ReadDone(nil)
			}
		}
	}
	return true
}

// PeerStats are the peer tier's counters (zero without one).
type PeerStats struct {
	On              bool
	Fetches, Fails  uint64 // fetches started; fetches that landed less than they asked for (or failed)
	Blocks, Corrupt uint64 // blocks fetched, sealed and visible; blocks that failed their CRC32C check (misses)
	// Lookup blocks of the peer tier (see Tiers.PeerFetch): fetched and
	// sealed, and not (no owner, past a run, failed, late or corrupt).
	LookupHit, LookupMiss uint64
	// Bytes of the blocks fetched (sealed), and the time of the fetches
	// that landed any, from the lookup to the seal, summed (ns): their
	// quotient is the peer tier's transfer rate.
	FetchedBytes, FetchNanos uint64
}

func (p *peerTier) stats() PeerStats {
	return PeerStats{On: true, Fetches: p.fetches.Load(), Fails: p.fetchFails.Load(), Blocks: p.fetched.Load(),
		Corrupt: p.corrupt.Load(), LookupHit: p.hit.Load(), LookupMiss: p.miss.Load(),
		FetchedBytes: p.fetchedBytes.Load(), FetchNanos: p.fetchNanos.Load()}
}
