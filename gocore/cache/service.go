package cache

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/evict"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
	"github.com/orbitkv/orbitkv/hugepages"
)

// Limits.
const (
	// MaxLeasesPerSession bounds the leases one session may hold; more
	// queries answer Unadmitted until it releases some.
	MaxLeasesPerSession = 4096
	// MaxLeasedBlocksPerSession and MaxLeasedBlocks bound the block
	// references leases hold (each costs the Manager a pointer and a pin),
	// per session and per Manager; a query that would pass either answers
	// Unadmitted. 2^20 references are 8 MiB of lease memory.
	MaxLeasedBlocksPerSession = 1 << 20
	MaxLeasedBlocks           = 1 << 24
	// DefaultMaxOpsPerSession and DefaultMaxOps bound the operations
	// (tickets live or draining, restores in flight or awaiting
	// RestorePoll) per session and per Manager (DESIGN.md §6 rule 5);
	// beyond them a ticket or Restore answers Unadmitted.
	DefaultMaxOpsPerSession = 128
	DefaultMaxOps           = 1024
	// MaxOpsLimit bounds Spec.MaxOps and Spec.MaxOpsPerSession.
	MaxOpsLimit = 1 << 20
	// MaxCopyWorkers bounds Spec.CopyWorkers.
	MaxCopyWorkers = 64
	// maxDrain bounds the completions one Complete call handles; the rest
	// wait for the next control event.
	maxDrain = 4096
)

// Spec configures a Service; a plain value.
type Spec struct {
	Epoch       uint64         // Manager epoch, stamped on responses
	RAMCapacity uint64         // bytes of the RAM tier
	ChunkBytes  uint64         // RAM tier chunk size (ram.Spec.ChunkBytes)
	Prefault    bool           // pre-fault the RAM tier at start
	Hugepages   hugepages.Mode // RAM tier backing (ram.Spec.Hugepages); the zero value is Off
	CopyWorkers int            // native copy threads, 1..MaxCopyWorkers
	Eviction    string         // eviction policy name (gocore/evict); "" = evict.Default
	// SSD, when set, adds the SSD tier (gocore/tier/ssd) below RAM: blocks
	// the RAM tier evicts are demoted to it, and queries prefetch from it.
	SSD *ssd.Spec
	// SSDStagingBytes is the memory holding demoted blocks until the SSD
	// has them (0: DefaultSSDStagingBytes).
	SSDStagingBytes uint64
	// Operation bounds and expiry (0: DefaultMaxOpsPerSession,
	// DefaultMaxOps, DefaultOpExpiry).
	MaxOpsPerSession int
	MaxOps           int
	OpExpiry         time.Duration
	// LeaseBudget bounds the bytes reserved by leases and restores in
	// flight; a ticket beyond it waits (Loading), an untracked query
	// answers Unadmitted. 0: RAMCapacity.
	LeaseBudget uint64
	// WarmupBudget bounds the bytes of SSD reads in flight with no owner
	// (warmup queries, and the tail of queries that do not wait); beyond it
	// warming is skipped. 0: DefaultWarmupBudget.
	WarmupBudget uint64
	// Clock is the time source of expiry (nil: time.Now); tests inject a
	// fake one (gocore/failpoint in failpoint builds).
	Clock  func() time.Time
	Logger *slog.Logger
}

// DefaultWarmupBudget is the default Spec.WarmupBudget.
const DefaultWarmupBudget = 256 << 20

// Validate names the field and limit that s violates.
func (s Spec) Validate() error {
	if s.MaxOpsPerSession < 0 || s.MaxOpsPerSession > MaxOpsLimit || s.MaxOps < 0 || s.MaxOps > MaxOpsLimit {
		return fmt.Errorf("cache spec: operation bounds %d per session, %d in all: want 1..%d (0: default)", s.MaxOpsPerSession, s.MaxOps, MaxOpsLimit)
	}
	if s.OpExpiry < 0 || (s.OpExpiry != 0 && s.OpExpiry < time.Second) || s.OpExpiry > 24*time.Hour {
		return fmt.Errorf("cache spec: operation expiry %v, want 1s..24h (0: %v)", s.OpExpiry, DefaultOpExpiry)
	}
	if s.CopyWorkers < 1 || s.CopyWorkers > MaxCopyWorkers {
		return fmt.Errorf("cache spec: copy workers %d, want 1..%d", s.CopyWorkers, MaxCopyWorkers)
	}
	if s.Eviction != "" && !slices.Contains(evict.Names(), s.Eviction) {
		return fmt.Errorf("cache spec: eviction policy %q, want one of %s", s.Eviction, strings.Join(evict.Names(), ", "))
	}
	return ram.Spec{CapacityBytes: s.RAMCapacity, ChunkBytes: s.ChunkBytes, Hugepages: s.Hugepages}.Validate()
}

// Service is the cache state of one Manager. See the package doc for its
// threading rules.
type Service struct {
	epoch  uint64
	log    *slog.Logger
	arena  *ram.Arena
	idx    *index.Index
	leases *lease.Table
	copier *native.CopyEngine
	ssd    *ssdTier // nil without Spec.SSD

	sessions map[uint32]*sessState // by slot index
	ops      map[uint64]*op        // copies in flight, by token
	nextOp   uint64
	done     int // restore operations completed but not yet polled
	leased   int // block references held by all leases

	// Operation bounds (DESIGN.md §6 rule 5) and their counts.
	maxOpsSession, maxOps int
	tickets, drainingAll  int // live tickets; revoked ones whose SSD reads still run
	restoresAll           int // restore ops in flight or awaiting RestorePoll
	expiry                time.Duration
	now                   func() time.Time
	nextSweep             time.Time // zero: nothing to expire
	stopTick, tickDone    chan struct{}
	tickWanted            atomic.Bool // the ticker should ring: something can expire, or completions are withheld
	// Byte budgets.
	leaseBudget, restoreReserved uint64
	budgetQ                      []*ticket               // tickets waiting for lease budget, oldest first
	ticketBytes                  uint64                  // hash bytes stored by live tickets (MaxTicketBytes)
	heldComps                    []native.CopyCompletion // restore completions withheld (failpoint builds only)
	warmupBudget, warming        uint64
	lookups                      lookupStats
	// lease limits (MaxLeasedBlocksPerSession, MaxLeasedBlocks); fields so
	// tests can lower them
	maxLeasedSession, maxLeased int

	scratch []byte // private copy of a descriptor
	segs    []native.CopySeg
	comps   []native.CopyCompletion
	hits    []*index.Block
	batch   map[index.Key]struct{} // fresh keys of the publish being admitted

	stats counters

	// Pause points (failpoint builds only; see pause in ops.go). ring rings
	// the dispatcher's control slot (native.Server.Ring, safe from any
	// goroutine) so Complete runs the resumed operations.
	ring         func()
	deferReply   bool // the request Handle is serving was held at a pause point: its reply is posted later
	readmit      bool // a held ticket admission runs again: it passes the point
	resumeMu     sync.Mutex
	resumeClosed bool                                            // guarded by resumeMu: Close ran, resumed points are dropped
	resumed      []func(post func(slot uint32, msg abi.Message)) // guarded by resumeMu: held operations let go, oldest first
}

// New creates the RAM tier and the copy engine. srv is the dispatcher's poll
// loop, whose control event the copy engine raises when copies finish; it
// must outlive the Service.
func New(s Spec, srv *native.Server) (*Service, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	arena, err := ram.New(ram.Spec{CapacityBytes: s.RAMCapacity, ChunkBytes: s.ChunkBytes, Prefault: s.Prefault, Hugepages: s.Hugepages})
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
	var st *ssdTier
	if s.SSD != nil {
		if st, err = openSSD(*s.SSD, s.SSDStagingBytes, s.Logger, srv.Ring); err != nil {
			arena.Close()
			return nil, fmt.Errorf("ssd tier: %w", err)
		}
	}
	cp, err := native.NewCopyEngineFor(srv, s.CopyWorkers)
	if err != nil {
		if st != nil {
			st.close()
		}
		arena.Close()
		return nil, fmt.Errorf("copy engine: %w", err)
	}
	base := idBase(s.Epoch)
	svc := &Service{
		epoch: s.Epoch, log: s.Logger, arena: arena, idx: index.New(pol), leases: lease.NewFrom(base), copier: cp, ssd: st,
		sessions: make(map[uint32]*sessState), ops: make(map[uint64]*op), nextOp: base,
		maxOpsSession: orDefault(s.MaxOpsPerSession, DefaultMaxOpsPerSession), maxOps: orDefault(s.MaxOps, DefaultMaxOps),
		expiry: orDefault(s.OpExpiry, DefaultOpExpiry), now: s.Clock,
		leaseBudget: orDefault(s.LeaseBudget, s.RAMCapacity), warmupBudget: orDefault(s.WarmupBudget, DefaultWarmupBudget),
		stopTick: make(chan struct{}), tickDone: make(chan struct{}),
		comps: make([]native.CopyCompletion, maxDrain), batch: make(map[index.Key]struct{}),
		maxLeasedSession: MaxLeasedBlocksPerSession, maxLeased: MaxLeasedBlocks,
		ring: srv.Ring,
	}
	if svc.now == nil {
		svc.now = time.Now
	}
	svc.lookups.init()
	go svc.tick(srv.Ring)
	svc.stats.capacity.Store(arena.CapacityBytes())
	svc.stats.ramHuge, svc.stats.ramFallback = arena.Huge(), arena.Fallback()
	return svc, nil
}

// Close waits for every copy in flight to finish (the copy engine drains its
// queue), then for every SSD I/O, then frees the RAM tier. Sessions must be
// detached first; after Close no memory of any session is touched.
//
// Close has no deadline: an SSD read the disk does not answer keeps it
// waiting, because the read may still write into RAM tier frames, and
// freeing or reusing them before it returns is what DESIGN.md §6 rule 9
// forbids. A caller that must stop in bounded time waits for Close only
// that long, then logs SSDOutstanding and exits the process with Close
// still waiting (the Manager's --shutdown-timeout); nothing is freed.
func (s *Service) Close() {
	s.resumeMu.Lock()
	s.resumeClosed = true // a failpoint Resume from now on must not ring the server
	s.resumeMu.Unlock()
	close(s.stopTick)
	<-s.tickDone // it rings the server, which the caller frees after Close
	s.copier.Close()
	if s.ssd != nil {
		s.ssd.close() // its reads write into RAM tier frames
	}
	s.arena.Close()
}

// sessState is the cache's view of one attached session.
type sessState struct {
	sess                            *session.Session
	owner                           lease.Owner
	notify                          *notifier
	leases                          int                // live leases owned
	leased                          int                // block references held by those leases
	restores                        map[uint64]*op     // restore ops by id until RestorePoll consumes them
	busy                            map[pageKey]uint64 // destination pages of in-flight restores → op id
	inflight                        int                // copies in flight
	publishing                      int                // publishes in flight (deferred replies)
	admitGen                        uint64             // generation of the request held at TicketAdmission (0: none)
	holds                           []*index.Block     // prefetched for this session's last Loading query, pinned until its next answer
	tickets                         map[uint64]*ticket // live tickets by op id
	maxOpID                         uint64             // highest ticket op id seen (ids only grow)
	draining                        int                // revoked tickets whose SSD reads still run
	expiredTickets, expiredRestores tombs
	lastLog                         time.Time // rate limit of refusal logs
	dropped                         int
	closing                         bool
	onDrained                       func()
}

type pageKey struct {
	buffer uint32
	page   uint32
}

type opKind uint8

const (
	opPublish opKind = iota + 1
	opRestore
)

// op is one copy job.
type op struct {
	id              uint64
	kind            opKind
	st              *sessState
	blocks          []*index.Block // publish: new blocks; restore: blocks pinned for the copy
	pages           []pageKey      // restore: busy destination pages
	reply           abi.Message    // publish: the response posted on completion
	stored, present uint32
	done            bool
	held            bool // restore: done, but held at the Notification point (RestorePoll answers Loading)
	status          int32
	bytes           uint64
	deadline        time.Time // restore: when an unpolled result expires
}

// Attach starts serving s's cache commands.
func (s *Service) Attach(sess *session.Session) {
	s.sessions[sess.Index] = &sessState{
		sess: sess, owner: lease.Owner{Slot: sess.Index, Token: sess.Token},
		notify:   newNotifier(sess.EventFile(), s.log),
		restores: make(map[uint64]*op), busy: make(map[pageKey]uint64), tickets: make(map[uint64]*ticket),
	}
	s.publishStats()
}

// Detach tears s down (DESIGN.md §5.1): its leases end and their pins and
// reservations are released now; copies already accepted keep their own
// pins and run to completion. drained is called (on the dispatcher
// goroutine) once no copy of s is in flight, possibly before Detach
// returns; only then may s's buffers be unmapped. Half-published blocks of
// s are discarded, never sealed.
func (s *Service) Detach(sess *session.Session, drained func()) {
	st := s.sessions[sess.Index]
	if st == nil || st.sess != sess {
		drained()
		return
	}
	st.closing = true
	s.releaseHolds(st)
	s.revokeAll(st)
	if st.leases > 0 {
		for _, l := range s.leases.Owned(st.owner) {
			s.endLease(st, l)
		}
	}
	for id, o := range st.restores {
		if o.done {
			delete(st.restores, id)
			s.done--
			s.restoresAll--
		}
	}
	st.onDrained = drained
	s.admitWaiting()
	s.maybeFinish(st)
	s.publishStats()
}

func (s *Service) maybeFinish(st *sessState) {
	if !st.closing || st.inflight > 0 || st.onDrained == nil {
		return
	}
	delete(s.sessions, st.sess.Index)
	st.notify.stop()
	f := st.onDrained
	st.onDrained = nil
	f()
}

// Handle serves one cache command of sess (the message already passed
// abi.ValidateRequest). It returns the response, or ok=false when the
// response is deferred: until a copy completes (Publish), or, in failpoint
// builds, while the request is held at a pause point. Complete posts it.
func (s *Service) Handle(sess *session.Session, m *abi.Message) (resp abi.Message, ok bool) {
	st := s.sessions[sess.Index]
	if st == nil || st.sess != sess || st.closing {
		return m.Response(s.epoch, abi.StatusStaleSession, 0, 0), true
	}
	if failpoint.Enabled && !s.readmit {
		// A client sends while a request is held only after it gave up
		// waiting for the answer: the held ticket admission is dropped
		// unserved, as a request never read (its late answer would be
		// dropped anyway, and a lease delivered with it would be lost).
		st.admitGen = 0
	}
	if st.publishing > 0 {
		// A client only sends while a Publish is deferred after it timed
		// out waiting: until that copy finishes its source pages are still
		// being read, so no cache operation of this session succeeds
		// (client.h, okv_publish).
		s.stats.unadmitted.Add(1)
		return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0), true
	}
	var derr *abi.DescError
	switch abi.Command(m.Code) {
	case abi.CmdQueryBundle:
		resp, derr = s.query(st, m)
	case abi.CmdPublish:
		resp, ok, derr = s.publish(st, m)
		if derr == nil && !ok {
			s.publishStats()
			return resp, false
		}
	case abi.CmdRestore:
		resp, derr = s.restore(st, m)
	case abi.CmdRestorePoll:
		resp, derr = s.restorePoll(st, m)
	case abi.CmdRelease:
		resp, derr = s.release(st, m)
	case abi.CmdPoll:
		resp, derr = s.poll(st, m)
	case abi.CmdClaim:
		resp, derr = s.claim(st, m)
	case abi.CmdCancelQuery:
		resp, derr = s.cancel(st, m)
	default:
		return m.Response(s.epoch, abi.StatusUnsupported, 0, 0), true
	}
	if failpoint.Enabled && s.deferReply {
		s.deferReply = false
		s.publishStats()
		return abi.Message{}, false
	}
	if derr != nil {
		s.stats.invalid.Add(1)
		s.logRefused(st, m, derr)
		return m.Response(s.epoch, derr.Status, uint64(derr.Field), derr.Index), true
	}
	s.publishStats()
	return resp, true
}

// descriptor copies the request's descriptor out of the shared slot.
func (s *Service) descriptor(st *sessState, m *abi.Message) ([]byte, *abi.DescError) {
	if m.DescLength == 0 {
		return nil, &abi.DescError{Status: abi.StatusInvalid, Field: abi.FieldDescLength, Detail: "this command needs a descriptor"}
	}
	slot := st.sess.Slot()
	s.scratch = append(s.scratch[:0], slot[m.DescOffset:m.DescOffset+m.DescLength]...)
	return s.scratch, nil
}

// logRefused logs a refused cache request, at most once per second per
// session; the lines suppressed meanwhile are counted in the next one.
func (s *Service) logRefused(st *sessState, m *abi.Message, e *abi.DescError) {
	now := time.Now()
	if now.Sub(st.lastLog) < time.Second {
		st.dropped++
		return
	}
	s.log.Warn("cache request refused", slog.Uint64("slot", uint64(st.sess.Index)),
		slog.Int("pid", int(st.sess.Peer.PID)),
		slog.String("command", abi.Command(m.Code).String()), slog.String("status", e.Status.String()),
		slog.String("field", e.Field.String()), slog.Uint64("entry", e.Index), slog.String("detail", e.Detail),
		slog.Int("suppressed_since_last", st.dropped))
	st.lastLog, st.dropped = now, 0
}

// buffer returns the session's host buffer id or a DescError.
func buffer(st *sessState, id uint32) (session.Buffer, *abi.DescError) {
	b, ok := st.sess.Buffer(id)
	if !ok {
		return b, &abi.DescError{Status: abi.StatusInvalid, Field: abi.FieldBufferID, Detail: fmt.Sprintf("%d: no registered buffer with this id", id)}
	}
	if b.Mem == nil {
		return b, &abi.DescError{Status: abi.StatusUnsupported, Field: abi.FieldBufferID, Detail: fmt.Sprintf("%d is a CUDA buffer; this build copies host memory only", id)}
	}
	return b, nil
}

// counters are published for Stats (read from any goroutine).
type counters struct {
	blocks, usedBytes, capacity, leases, pins, reserved, operations atomic.Uint64
	evictions, published, restored, unadmitted, invalid             atomic.Uint64
	publishBytes, restoreBytes, queries, queryHits                  atomic.Uint64
	tickets, budgetWaiting, expired, discoveries, warmupSkipped     atomic.Uint64
	queryNanos, queryHashes                                         atomic.Uint64
	ramHuge                                                         bool   // set in New, then read-only
	ramFallback                                                     string // set in New, then read-only
}

func (s *Service) publishStats() {
	is := s.idx.Stats()
	s.stats.blocks.Store(uint64(is.Blocks))
	s.stats.usedBytes.Store(uint64(s.arena.Chunks()-s.arena.Free()) * s.arena.ChunkBytes())
	s.stats.leases.Store(uint64(s.leases.Len()))
	s.stats.pins.Store(uint64(is.Pins))
	s.stats.reserved.Store(s.reservedBytes())
	ops := len(s.ops) + s.done + s.tickets + s.drainingAll
	if s.ssd != nil {
		ops += len(s.ssd.loading)
	}
	s.stats.operations.Store(uint64(ops))
	s.stats.tickets.Store(uint64(s.tickets))
	s.stats.budgetWaiting.Store(uint64(len(s.budgetQ)))
}

// Stats is a snapshot of the cache counters; safe from any goroutine.
type Stats struct {
	Blocks        uint64 // sealed blocks resident
	UsedBytes     uint64 // bytes of allocated chunks (sealed and publishing)
	CapacityBytes uint64
	Leases        uint64
	Pins          uint64
	ReservedBytes uint64
	Operations    uint64 // copies in flight plus restores awaiting RestorePoll
	Evictions     uint64
	Published     uint64 // blocks stored
	Restored      uint64 // blocks restored
	PublishBytes  uint64
	RestoreBytes  uint64
	Unadmitted    uint64 // publishes and queries refused for capacity
	Invalid       uint64 // cache requests refused as invalid
	Queries       uint64
	QueryHits     uint64 // blocks leased by queries
	QueryNanos    uint64 // dispatcher time in untracked QueryBundles (decode, lookups, lease), ns
	QueryHashes   uint64 // hashes those queries carried

	// Operation semantics (abi.h "Query tickets").
	Tickets         uint64 // live tickets
	BudgetWaiting   uint64 // tickets waiting for lease byte budget
	Expired         uint64 // tickets and restore results expired (tombstoned)
	Discoveries     uint64 // discovery queries answered
	WarmupSkipped   uint64 // warm-ups skipped for the warmup budget
	Lookups         uint64 // logical lookups (untracked queries, tickets except recovery and warmup)
	DistinctLookups uint64 // distinct (namespace, chain) lookups, HyperLogLog estimate

	// SSD tier (zero without one).
	SSD              bool
	SSDBlocks        uint64 // blocks resident on SSD
	SSDUsedBytes     uint64
	SSDCapacityBytes uint64
	SSDWrites        uint64 // blocks demoted (durable)
	SSDReads         uint64 // blocks read back and verified
	SSDCorrupt       uint64 // blocks that failed their checksum (dropped, never served)
	SSDRecovered     uint64 // blocks the index gave back at start (warm restart)
	SSDNotAdmitted   uint64 // demotions declined by the admission rule
	SSDEvictions     uint64 // blocks the SSD tier evicted (FIFO) to make room
	SSDDemoteSkipped uint64 // evicted blocks not demoted: no staging buffer, too big, or the tier busy
	SSDPrefetches    uint64 // blocks prefetched into RAM
	SSDPrefetchFails uint64 // prefetches that failed (corrupt or I/O): misses
	RAMHuge          bool   // the RAM tier is backed by 2 MiB hugetlb pages
	RAMFallback      string // why not ("" when RAMHuge); see ram.Arena.Fallback
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	c := &s.stats
	st := Stats{
		Blocks: c.blocks.Load(), UsedBytes: c.usedBytes.Load(), CapacityBytes: c.capacity.Load(),
		Leases: c.leases.Load(), Pins: c.pins.Load(), ReservedBytes: c.reserved.Load(),
		Operations: c.operations.Load(), Evictions: c.evictions.Load(), Published: c.published.Load(),
		Restored: c.restored.Load(), PublishBytes: c.publishBytes.Load(), RestoreBytes: c.restoreBytes.Load(),
		Unadmitted: c.unadmitted.Load(), Invalid: c.invalid.Load(), Queries: c.queries.Load(), QueryHits: c.queryHits.Load(),
		RAMHuge: c.ramHuge, RAMFallback: c.ramFallback,
		QueryNanos: c.queryNanos.Load(), QueryHashes: c.queryHashes.Load(),
		Tickets: c.tickets.Load(), BudgetWaiting: c.budgetWaiting.Load(), Expired: c.expired.Load(),
		Discoveries: c.discoveries.Load(), WarmupSkipped: c.warmupSkipped.Load(),
	}
	st.Lookups, st.DistinctLookups = s.lookups.snapshot()
	if s.ssd != nil {
		ss := s.ssd.store.Stats()
		st.SSD = true
		st.SSDBlocks, st.SSDUsedBytes, st.SSDCapacityBytes = ss.Blocks, ss.UsedBytes, ss.CapacityBytes
		st.SSDWrites, st.SSDReads, st.SSDCorrupt, st.SSDRecovered = ss.Writes, ss.Reads, ss.Corrupt, ss.Recovered
		st.SSDNotAdmitted, st.SSDEvictions = ss.NotAdmitted, ss.Evictions
		st.SSDDemoteSkipped = s.ssd.demoteSkipped.Load() + ss.Busy
		st.SSDPrefetches, st.SSDPrefetchFails = s.ssd.prefetches.Load(), s.ssd.prefetchFails.Load()
	}
	return st
}

// Idle reports whether the idle invariant of DESIGN.md §6 rule 8 holds for
// this snapshot (meaningful when no session is attached).
func (st Stats) Idle() bool {
	return st.Leases == 0 && st.Pins == 0 && st.ReservedBytes == 0 && st.Operations == 0
}
