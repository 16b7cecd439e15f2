package tier

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// Defaults of a Spec.
const (
	// DefaultWarmupBudget bounds the bytes of SSD reads in flight with no
	// owner (warm-ups, and the tails of queries that do not wait).
	DefaultWarmupBudget = 256 << 20
	// DefaultSSDStagingBytes is the memory holding demoted blocks until the
	// SSD has them: blocks evicted faster than the SSD takes them beyond it
	// are not demoted.
	DefaultSSDStagingBytes = 256 << 20
	// MaxPrefetchRun bounds the blocks one query prefetches.
	MaxPrefetchRun = 1024
	// maxReadsQueued bounds the SSD reads in flight by the completion
	// queue, so a store goroutine never waits to hand its result over.
	maxReadsQueued = 4096
)

// Spec configures the tiers; a plain value.
type Spec struct {
	RAM      ram.Spec
	Eviction string // eviction policy name (gocore/evict); "" = evict.Default
	// SSD, when set, adds the SSD tier below RAM.
	SSD             *ssd.Spec
	SSDStagingBytes uint64 // 0: DefaultSSDStagingBytes
	WarmupBudget    uint64 // 0: DefaultWarmupBudget
	// Records, when set, gives the block record each block demoted to SSD
	// is written with (ssd.Store.WriteAdmitted's record; nil: none): at most
	// ssd.MaxRecordBytes opaque bytes, which the SSD store keeps in the
	// block's slot header and hands to SSD.Blocks when the block is
	// resident (a longer record is refused and the block not demoted,
	// counted in SSDStats.DemoteSkipped). Called on the dispatcher
	// goroutine for each block about to be written, after admission; the
	// slice may be reused once it returns (the store copies it). It must
	// not call back into the Tiers. nil: no records.
	Records func(index.Key) []byte
	// Remote, when set, adds the peer tier below SSD: blocks other nodes
	// advertise are fetched into RAM as replicas (peer.go).
	Remote Remote
	// PeerTimeout bounds one peer fetch (0: DefaultPeerTimeout);
	// PeerRunBytes the bytes it asks for (0: DefaultPeerRunBytes).
	PeerTimeout  time.Duration
	PeerRunBytes uint64
	// Advertiser, when set, hears the blocks this node produced as they
	// enter and leave RAM (advertise.go).
	Advertiser Advertiser
	// Events, when set, hears the blocks this node produced as they enter
	// and leave RAM (medium CPU; replicas are not announced): Seal and
	// SealRecord make them Stored, eviction and drops Removed.
	Events *kvevents.Tracker
	// Ring wakes the dispatcher (safe from any goroutine) when an SSD read
	// or a peer fetch finished; Complete then applies it.
	Ring   func()
	Logger *slog.Logger
}

// PeerTimeoutRange bounds Spec.PeerTimeout.
var PeerTimeoutRange = limit.Range[time.Duration]{Field: "tier.PeerTimeout", Min: 10 * time.Millisecond, Max: time.Minute,
	Zero: limit.Format(DefaultPeerTimeout)}

// Validate checks the limits of s, its RAM spec's and its SSD spec's
// (ssd.Open checks the latter against the filesystem too); every field out
// of range is a *limit.Error naming it.
func (s Spec) Validate() error {
	errs := []error{
		limit.Check(s.Eviction == "" || slices.Contains(evict.Names(), s.Eviction), "tier.Eviction", s.Eviction,
			"one of "+strings.Join(evict.Names(), ", ")),
		s.RAM.Validate(),
		PeerTimeoutRange.Check(s.PeerTimeout),
	}
	if s.SSD != nil {
		errs = append(errs, s.SSD.Validate())
	}
	return errors.Join(errs...)
}

// Tiers is the RAM tier, its index and the optional SSD tier.
type Tiers struct {
	log   *slog.Logger
	arena *ram.Arena
	idx   *index.Index
	ssd   *ssdTier          // nil without Spec.SSD
	peer  *peerTier         // nil without Spec.Remote
	adv   *adverts          // nil without Spec.Advertiser
	ev    *kvevents.Tracker // nil without Spec.Events
	// records gives the record of a block sealed without one (Spec.Records).
	records func(index.Key) []byte
	// adopting verifies the blocks of a handed-over RAM tier (adopt.go;
	// nil when none is left); adopted is what it did once it ended.
	adopting *adoption
	adopted  AdoptedStats
	batch    map[index.Key]struct{}
	// quotas are the domains' quotas and refusals, by index.Domain
	// (quota.go); dispatcher goroutine only.
	quotas []domainQuota

	warmupBudget, warming uint64

	evictions, warmupSkipped atomic.Uint64
}

// New creates the RAM tier (committing its memory), the index and the SSD
// tier; errors name the tier.
func New(s Spec) (*Tiers, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	// The SSD tier's place is checked before the RAM tier commits its
	// memory: a mistake there fails in milliseconds, not after a pre-fault.
	if s.SSD != nil {
		if err := ssd.CheckPlace(*s.SSD); err != nil {
			return nil, err
		}
	}
	arena, err := ram.New(s.RAM)
	if err != nil {
		return nil, err
	}
	name := s.Eviction
	if name == "" {
		name = evict.Default
	}
	// The policy sizes its queues in blocks; the tier knows chunks, and a
	// block takes at least one.
	pol, err := evict.New(name, int(arena.Chunks()))
	if err != nil {
		arena.Close()
		return nil, err
	}
	t := &Tiers{log: s.Logger, arena: arena, idx: index.New(pol), batch: make(map[index.Key]struct{}),
		warmupBudget: s.WarmupBudget}
	if t.warmupBudget == 0 {
		t.warmupBudget = DefaultWarmupBudget
	}
	if s.SSD != nil {
		if t.ssd, err = openSSD(*s.SSD, s.SSDStagingBytes, s.Logger, s.Ring); err != nil {
			arena.Close()
			return nil, err
		}
		t.ssd.records = s.Records
	}
	if s.Remote != nil {
		t.peer = newPeerTier(s.Remote, s.PeerTimeout, s.PeerRunBytes, s.Ring)
	}
	if s.Advertiser != nil {
		t.adv = &adverts{to: s.Advertiser}
	}
	if s.Events != nil {
		t.ev = s.Events
	}
	t.records = s.Records
	t.adopt(s.Ring)
	return t, nil
}

// Close stops the verification of an adopted tier, ends every peer fetch
// and waits for its goroutine, waits for every SSD I/O (both write RAM
// frames), then frees the RAM tier. The copy
// engine must have drained first.
func (t *Tiers) Close() {
	t.stopAdoption()
	if t.peer != nil {
		t.peer.close()
	}
	if t.ssd != nil {
		t.ssd.close()
	}
	t.arena.Close()
}

// Arena is the RAM tier; Index is the block index over it.
func (t *Tiers) Arena() *ram.Arena   { return t.arena }
func (t *Tiers) Index() *index.Index { return t.idx }

// HasSSD reports whether the SSD tier is configured.
func (t *Tiers) HasSSD() bool { return t.ssd != nil }

// MakeRoom evicts the policy's victims (never pinned blocks; replicas
// first), demoting each block this node produced to SSD first and
// withdrawing its advertisement, until need chunks are free; false
// (nothing evicted) when even evicting every unpinned block would not do.
func (t *Tiers) MakeRoom(need uint64) bool {
	free := uint64(t.arena.Free())
	if free >= need {
		return true
	}
	if free+t.idx.EvictableChunks() < need {
		return false
	}
	for uint64(t.arena.Free()) < need {
		t.evictOne(t.idx.Evict())
	}
	return true
}

// canRoom reports whether MakeRoom(need) would succeed.
func (t *Tiers) canRoom(need uint64) bool {
	return uint64(t.arena.Free())+t.idx.EvictableChunks() >= need
}

// evictOne finishes the eviction of blk, just taken out of the index:
// demoted to SSD when this node produced it, its advertisement withdrawn,
// its chunks freed, counted.
func (t *Tiers) evictOne(blk *index.Block) {
	if t.ssd != nil && !blk.Replica() {
		t.demote(blk) // copies the bytes out first: the chunks are free after
	}
	t.gone(blk)
	t.arena.Release(blk.Chunks)
	t.evictions.Add(1)
}

// Insert allocates frames for a block of bytes and inserts it Publishing
// (invisible) under k at chain depth depth, counted against domain d
// (index.Index.Assign). The caller made room first (MakeRoom, and
// domainRoom for a domain's quota); an allocation failure then is a bug
// and panics.
func (t *Tiers) Insert(k index.Key, bytes uint64, layers, depth uint32, d index.Domain) *index.Block {
	per := t.arena.ChunksFor(bytes)
	chunks, err := t.arena.Alloc(make([]uint32, 0, per), per)
	if err != nil {
		panic("tier: allocation after MakeRoom failed: " + err.Error())
	}
	t.learnLayout(k.NS, bytes, layers)
	b := t.idx.Insert(k, bytes, layers, depth, chunks)
	t.idx.Assign(b, d)
	return b
}

// Discard removes a Publishing block (its copy failed or its publisher
// left) and frees its frames: it never becomes visible.
func (t *Tiers) Discard(blk *index.Block) {
	t.idx.Abort(blk)
	t.arena.Release(blk.Chunks)
}

// Stats are the tiers' counters; safe from any goroutine but for the
// index figures (Blocks, Pins, UsedBytes), which the caller samples on the
// dispatcher goroutine.
type Stats struct {
	Blocks, Pins             uint64
	UsedBytes, CapacityBytes uint64
	Evictions                uint64
	WarmupSkipped            uint64 // warm-ups skipped for the warmup budget
	RAMHuge                  bool   // the RAM tier is backed by 2 MiB hugetlb pages
	RAMFallback              string // why not ("" when RAMHuge); see ram.Arena.Fallback
	SSD                      SSDStats
	Peer                     PeerStats
}

// SSDStats are the SSD tier's counters (zero without one).
type SSDStats struct {
	On                                    bool // the tier is configured (and was opened at start)
	Open                                  bool // the store serves: true from start until the cache closes it
	Blocks, UsedBytes, CapacityBytes      uint64
	Writes, Reads, Corrupt, Recovered     uint64 // demoted (durable), read back and verified, failed checksum, recovered at start
	ReadErrors, WriteErrors               uint64 // reads and writes of the data file that failed with an I/O error
	NotAdmitted, Evictions, DemoteSkipped uint64 // declined by admission, evicted (FIFO), not demoted (no staging, too big, busy, record too long)
	Prefetches, PrefetchFails             uint64 // blocks read into RAM, prefetches failed (misses)
}

// Counters returns the counters safe from any goroutine (everything but
// Blocks, Pins and UsedBytes).
func (t *Tiers) Counters() Stats {
	st := Stats{CapacityBytes: t.arena.CapacityBytes(), Evictions: t.evictions.Load(), WarmupSkipped: t.warmupSkipped.Load(),
		RAMHuge: t.arena.Huge(), RAMFallback: t.arena.Fallback()}
	if t.ssd != nil {
		st.SSD = t.ssd.stats()
	}
	if t.peer != nil {
		st.Peer = t.peer.stats()
	}
	return st
}

// Resident samples the index figures (dispatcher goroutine only): sealed
// blocks (replicas among them: Index().Stats().Replicas), pins, and bytes
// of allocated chunks (sealed and publishing).
func (t *Tiers) Resident() (blocks, pins, usedBytes uint64) {
	is := t.idx.Stats()
	return uint64(is.Blocks), uint64(is.Pins), uint64(t.arena.Chunks()-t.arena.Free()) * t.arena.ChunkBytes()
}
