package cache

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/lease"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/ratelog"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/gocore/ticket"
	"github.com/orbitkv/orbitkv/gocore/tier"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
	"github.com/orbitkv/orbitkv/gocore/tier/ssd"
)

// Operation bounds (docs/design.md §6 rule 5): tickets live or draining and
// restores in flight or awaiting RestorePoll, per session and per Manager;
// beyond them a ticket or Restore answers Unadmitted.
const (
	DefaultMaxOpsPerSession = 128
	DefaultMaxOps           = 1024
	// MaxOpsLimit bounds Spec.MaxOps and Spec.MaxOpsPerSession.
	MaxOpsLimit = 1 << 20
	// maxDrain bounds the completions one Complete call handles; the rest
	// wait for the next control event.
	maxDrain = 4096
)

// Spec configures a Service; a plain value. Zero fields take the defaults
// named beside them.
type Spec struct {
	Epoch uint64 // Manager epoch, stamped on responses
	// Tiers are the RAM tier, eviction policy and optional SSD tier below
	// it (New sets Ring and Logger).
	Tiers       tier.Spec
	CopyWorkers int // native copy threads, 1..copier.MaxWorkers
	// CopyBackend moves the bytes: "" or copier.BackendHost (memcpy),
	// copier.BackendCUDA (the CUDA driver: an error without a device) or
	// copier.BackendAuto (CUDA when the driver loads and has a device).
	// With CUDA the RAM tier is page-locked for DMA (cuMemHostRegister).
	CopyBackend string
	// Operation bounds and expiry (0: DefaultMaxOpsPerSession,
	// DefaultMaxOps, ticket.DefaultOpExpiry).
	MaxOpsPerSession, MaxOps int
	OpExpiry                 time.Duration
	// LeaseBudget bounds the bytes reserved by leases and restores in
	// flight; a ticket beyond it waits (Loading), an untracked query
	// answers Unadmitted. 0: the RAM tier's capacity.
	LeaseBudget uint64
	// Tenants, when set, are the tenants of the Manager's sessions: each
	// session's namespaces are mixed with its tenant's domain
	// (tenant.Tenant.Namespace) and each tenant holds at most its share
	// of MaxOps operation permits and of LeaseBudget leased bytes
	// (tenant.Set.Resolve). nil: one trust domain.
	Tenants *tenant.Set
	// LeaseIdleTimeout is how long a lease handed to a client may go
	// without progress (a Restore started or landed on it, or its
	// Release) before it is revoked (leaseidle.go): 0 takes
	// DefaultLeaseIdleTimeout, LeaseIdleNever keeps it until Release or
	// teardown; else 1s..24h.
	LeaseIdleTimeout time.Duration
	// Clock is the time source of expiry (nil: time.Now); tests inject a
	// fake one (gocore/failpoint in failpoint builds).
	Clock func() time.Time
	// Observer hears each operation's duration (nil: none is measured);
	// see OpObserver.
	Observer OpObserver
	Logger   *slog.Logger
}

// Validate checks the limits of s and of its tiers; every field out of
// range is a *limit.Error naming it.
func (s Spec) Validate() error {
	return errors.Join(
		MaxOpsPerSessionRange.Check(s.MaxOpsPerSession),
		MaxOpsRange.Check(s.MaxOps),
		OpExpiryRange.Check(s.OpExpiry),
		checkLeaseIdle(s.LeaseIdleTimeout),
		limit.Range[int]{Field: "cache.CopyWorkers", Min: 1, Max: copier.MaxWorkers}.Check(s.CopyWorkers),
		limit.Check(s.CopyBackend == "" || s.CopyBackend == copier.BackendHost || s.CopyBackend == copier.BackendCUDA ||
			s.CopyBackend == copier.BackendAuto, "cache.CopyBackend", s.CopyBackend, "host, cuda or auto"),
		s.Tiers.Validate(),
	)
}

// checkLeaseIdle checks Spec.LeaseIdleTimeout: 0, LeaseIdleNever, or
// within LeaseIdleTimeoutRange.
func checkLeaseIdle(d time.Duration) error {
	if d == LeaseIdleNever {
		return nil
	}
	return LeaseIdleTimeoutRange.Check(d)
}

// Limits of Spec fields whose 0 means a default; a front end that spells
// the default out refuses 0 with CheckSet.
var (
	MaxOpsPerSessionRange = limit.Range[int]{Field: "cache.MaxOpsPerSession", Min: 1, Max: MaxOpsLimit,
		Zero: strconv.Itoa(DefaultMaxOpsPerSession)}
	MaxOpsRange   = limit.Range[int]{Field: "cache.MaxOps", Min: 1, Max: MaxOpsLimit, Zero: strconv.Itoa(DefaultMaxOps)}
	OpExpiryRange = limit.Range[time.Duration]{Field: "cache.OpExpiry", Min: time.Second, Max: 24 * time.Hour,
		Zero: limit.Format(ticket.DefaultOpExpiry)}
)

// Service is the cache state of one Manager. See the package doc for its
// threading rules.
type Service struct {
	epoch   uint64
	log     *slog.Logger
	tiers   *tier.Tiers
	arena   *ram.Arena   // tiers.Arena()
	idx     *index.Index // tiers.Index()
	leases  *lease.Book[*ticket.Ticket]
	tickets *ticket.Set
	copier  *copier.Engine
	cuda    *copier.CUDA // the CUDA backend of copier, or nil
	pinned  []byte       // the RAM tier's memory page-locked for cuda, or nil

	sessions map[uint32]*sessState // by slot index
	ops      map[uint64]*op        // copies in flight, by token
	nextOp   uint64
	// recordBufs are publishes' block-record buffers for reuse, by
	// size class (recordBuf, putRecords); dispatcher goroutine.
	recordBufs [recordClasses][][]byte
	restores   restoreCounts

	maxOpsSession, maxOps int
	expiry                time.Duration
	now                   func() time.Time
	sweeps                *ticket.Expiry
	heldComps             []copier.Completion // restore completions withheld (failpoint builds)
	look                  *tier.Lookup        // the read path over tiers

	scratch []byte // private copy of a descriptor
	segs    []copier.Seg
	comps   []copier.Completion
	hits    []*index.Block

	// Transfer pins (transferpins.go): blocks pinned for peers, by pin id.
	transferPins map[uint64][]*index.Block
	nextPin      uint64
	pinnedBlocks int // blocks over all transfer pins

	stats    counters
	draining bool // SetDraining: new queries, publishes and restores answer Unadmitted

	observer OpObserver     // nil: durations are not measured
	reqStart time.Duration  // mono() when Serve began the request serveCommand serves (0: not timed)
	opSeq    [NumOps]uint32 // requests of each Op seen, for TimedEvery
	// leaseIdle is the lease idle timeout in force (0: never); revokeLog
	// bounds the revocations' log lines.
	leaseIdle time.Duration
	revokeLog ratelog.Limiter
	// leaseBudget is the byte budget in force (Spec.LeaseBudget, or the
	// RAM tier's capacity); set by New, never changed.
	leaseBudget uint64
	// tenants holds each tenant's operation permits and shares, by
	// tenant.Tenant.Index; nil without tenants. Dispatcher only.
	tenants []tenantOps
	// nsTab counts the namespaces' queries, hits and publishes
	// (namespaces.go). Dispatcher only.
	nsTab nsTable

	// Pause points (failpoint builds only; pause.go): the continuations of
	// held operations, run by Complete.
	resumed    *failpoint.Queue[postFunc]
	deferReply bool // the request serveCommand is serving was held at a pause point: its reply is posted later
	readmit    bool // a held ticket admission runs again: it passes the point
}

// New creates the tiers and the copy engine. p is the dispatcher's poll
// loop, whose control event the copy engine and the SSD tier raise when
// work finishes; it must outlive the Service.
func New(s Spec, p *copier.Poller) (*Service, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	ts := s.Tiers
	ts.Ring, ts.Logger = p.Ring, s.Logger
	tiers, err := tier.New(ts)
	if err != nil {
		return nil, err
	}
	cp, cu, why, err := copier.Open(p, s.CopyWorkers, s.CopyBackend)
	if err != nil {
		tiers.Close()
		return nil, &limit.Refused{Field: "cache.CopyBackend", Value: cmp.Or(s.CopyBackend, copier.BackendHost), Err: err}
	}
	var pinned []byte
	if cu != nil {
		if err := cu.PinHost(tiers.Arena().Mem()); err != nil {
			cp.Close()
			cu.Close()
			tiers.Close()
			return nil, &limit.Refused{Field: "cache.CopyBackend", Value: s.CopyBackend, Err: fmt.Errorf("the RAM tier: %w", err)}
		}
		pinned = tiers.Arena().Mem()
	}
	s.Logger.Info("copy backend", slog.String("backend", cp.Backend()), slog.String("why", why))
	if failpoint.Enabled && cu != nil {
		failpoint.SetDeviceFault(cu.ArmDeviceFault) // tests' device-side fault (docs/design.md §6 rule 9)
	}
	base := lease.FirstID(s.Epoch) // restore ids share the rule
	svc := &Service{
		epoch: s.Epoch, log: s.Logger, tiers: tiers, arena: tiers.Arena(), idx: tiers.Index(), copier: cp, cuda: cu, pinned: pinned,
		sessions: make(map[uint32]*sessState), ops: make(map[uint64]*op), nextOp: base,
		maxOpsSession: cmp.Or(s.MaxOpsPerSession, DefaultMaxOpsPerSession), maxOps: cmp.Or(s.MaxOps, DefaultMaxOps),
		expiry: cmp.Or(s.OpExpiry, ticket.DefaultOpExpiry), now: s.Clock,
		observer: s.Observer,
		comps:    make([]copier.Completion, maxDrain),
		resumed:  failpoint.NewQueue[postFunc](p.Ring),
	}
	if svc.now == nil {
		svc.now = time.Now
	}
	svc.leaseBudget = cmp.Or(s.LeaseBudget, s.Tiers.RAM.CapacityBytes)
	svc.leaseIdle = leaseIdleOf(s.LeaseIdleTimeout)
	svc.revokeLog = ratelog.Limiter{Burst: revokeLogBurst, Every: time.Second}
	svc.look = tier.NewLookup(tiers)
	lim := lease.Limits{Budget: svc.leaseBudget}
	whole := tenant.Share{Ops: uint32(svc.maxOps), PinnedBytes: svc.leaseBudget}
	for _, t := range s.Tenants.All() {
		sh := s.Tenants.Resolve(t, whole)
		svc.tenants = append(svc.tenants, tenantOps{t: t, share: sh})
		lim.TenantBudget = append(lim.TenantBudget, sh.PinnedBytes)
	}
	for _, d := range s.Tenants.Domains() {
		tiers.SetQuota(domainOf(d), d.RAMBytes, d.SSDBytes)
	}
	if s.Tenants.Len() > 0 {
		svc.nsTab.setDomains(s.Tenants.Domains())
	}
	svc.leases = lease.NewBook[*ticket.Ticket](base, tiers.Index(), lim)
	svc.tickets = ticket.NewSet(ticketHost{svc}, svc.look, svc.leases, s.Epoch, svc.expiry, svc.now)
	svc.sweeps = ticket.StartExpiry(p.Ring)
	svc.publishStats() // the blocks a handed-over RAM tier brought (ram.Spec.Handed)
	return svc, nil
}

// Close waits for every copy in flight, then for every SSD I/O, then frees
// the RAM tier; sessions must be detached first. It has no deadline (see
// tier.Tiers.Close): a caller that must stop in bounded time logs
// SSDOutstanding and exits with Close still waiting, freeing nothing.
func (s *Service) Close() {
	s.resumed.Close() // a failpoint Resume from now on must not ring the server
	s.sweeps.Stop()   // it rings the server, which the caller frees after Close
	s.copier.Close()  // every device job drained: the streams are idle
	if s.cuda != nil {
		if failpoint.Enabled {
			failpoint.SetDeviceFault(nil)
		}
		if err := s.cuda.UnpinHost(s.pinned); err != nil {
			s.log.Warn("unpinning the RAM tier", "err", err)
		}
		s.cuda.Close()
	}
	s.tiers.Close()
}

// GPUMapper maps clients' CUDA memory for RegisterBuffers when the copy
// backend is CUDA; nil with the host backend.
func (s *Service) GPUMapper() session.GPUMapper {
	if s.cuda == nil {
		return nil
	}
	return copier.GPU{CU: s.cuda}
}

// SSDOutstanding returns the SSD tier's I/Os not yet finished (nil without
// an SSD tier); see tier.Tiers.Outstanding. Safe from any goroutine, also
// while Close waits for them: it is what a bounded shutdown logs.
func (s *Service) SSDOutstanding() []ssd.IO { return s.tiers.Outstanding() }

// sessState is the cache's part of one attached session.
type sessState struct {
	svc             *Service
	sess            *session.Session
	owner           lease.Owner
	notify          *session.Notifier
	book            *ticket.Book
	restores        map[uint64]*op     // restore ops by id until RestorePoll consumes them
	busy            map[pageKey]uint64 // destination pages of in-flight restores → op id
	inflight        int                // copies in flight
	publishing      int                // publishes in flight (deferred replies)
	admitGen        uint64             // generation of the request held at TicketAdmission (0: none)
	holds           []*index.Block     // prefetched for this session's last Loading query, pinned until its next answer
	expiredRestores ticket.Tombs
	revokedLeases   ticket.Tombs // leases the idle sweep revoked (leaseidle.go)
	closing         bool
	onDrained       func()
	ns              nsMemo       // the session's namespaces as its tenant's blocks are keyed
	domain          index.Domain // the tiers' domain of its tenant (domainOf); index.NoDomain without tenants
}

// nsMemo maps a session's namespaces to the keys of its tenant's domain
// (tenant.Tenant.Namespace), remembering the last one and its counts in
// the Service's nsTable: an engine sends one namespace per session (per
// TP rank), so the SHA-256 of the mix and the table's probe run once, not
// per request. A session without a tenant (t nil) keys every namespace
// unchanged. from is the session's last namespace as the client sent it
// (orbitkvctl sessions shows it).
type nsMemo struct {
	t        *tenant.Tenant
	from, to abi.Namespace
	valid    bool
	c        *nsCounts // the counts of to
}

// of returns ns as the Manager keys it for the session and makes it the
// session's last namespace.
func (m *nsMemo) of(ns abi.Namespace, tab *nsTable) abi.Namespace {
	if !m.valid || ns != m.from {
		to, d := ns, (*tenant.Domain)(nil)
		if m.t != nil {
			to, d = m.t.Namespace(ns), m.t.Domain
		}
		m.from, m.to, m.valid, m.c = ns, to, true, tab.get(to, ns, d)
	}
	return m.to
}

// domainOf is the tiers' domain of a tenant domain: its Index + 1
// (index.NoDomain is no tenant's). tenant.MaxTenants bounds it well below
// the range of an index.Domain.
func domainOf(d *tenant.Domain) index.Domain { return index.Domain(d.Index + 1) }

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
	records         []byte         // publish: blocks' block records back to back (abi.ParseRecord), when kept for the event stream; from Service.recordBufs
	pages           []pageKey      // restore: busy destination pages
	reply           abi.Message    // publish: the response posted on completion
	stored, present uint32
	done            bool
	held            bool // restore: done, but held at the Notification point (RestorePoll answers Loading)
	status          int32
	bytes           uint64
	start           time.Duration // publish: mono() when Serve began it (0: not timed)
	deadline        time.Time     // restore: when an unpolled result expires
	lease           *lease.Lease  // restore: the lease it copies from (touched when it lands)
	ns              *nsCounts     // publish: the counts of its namespace
}

// Attach starts serving s's cache commands.
func (s *Service) Attach(sess *session.Session) {
	st := &sessState{
		svc: s, sess: sess, owner: lease.Owner{Slot: sess.Index, Token: sess.Token},
		notify: sess.NewNotifier(s.log), book: ticket.NewBook(sess),
		restores: make(map[uint64]*op), busy: make(map[pageKey]uint64),
	}
	if t := sess.Peer.Tenant; t != nil && t.Index < len(s.tenants) {
		st.ns.t = t
		st.owner.Tenant = uint32(t.Index) + 1
		st.book.Owner.Tenant = st.owner.Tenant
		st.book.Tenant = &s.tenants[t.Index].c
		st.domain = domainOf(t.Domain)
		st.book.Domain = st.domain
	}
	s.sessions[sess.Index] = st
	s.publishStats()
}

// Detach tears s down (docs/design.md §5.1): its tickets are revoked, its
// leases end and their pins and reservations are released now; copies
// already accepted keep their own pins and run to completion. drained is
// called (on the dispatcher goroutine) once no copy of s is in flight,
// possibly before Detach returns; only then may s's buffers be
// unmapped. Half-published blocks of s are discarded, never sealed.
func (s *Service) Detach(sess *session.Session, drained func()) {
	st := s.sessions[sess.Index]
	if st == nil || st.sess != sess {
		drained()
		return
	}
	st.closing = true
	s.releaseHolds(st)
	s.tickets.RevokeAll(st.book)
	s.leases.EndAll(st.owner)
	s.restores.dropPolled(st)
	st.onDrained = drained
	s.tickets.AdmitWaiting()
	s.maybeFinish(st)
	s.publishStats()
}

func (s *Service) maybeFinish(st *sessState) {
	if !st.closing || st.inflight > 0 || st.onDrained == nil {
		return
	}
	delete(s.sessions, st.sess.Index)
	st.notify.Stop()
	f := st.onDrained
	st.onDrained = nil
	f()
}

// live reports whether st is still attached and not closing: only then may
// a continuation or a finished read answer it or touch its slot.
func (s *Service) live(st *sessState) bool {
	return s.sessions[st.sess.Index] == st && !st.closing
}

// Serve serves one request for channel.Handler (m by value; serveCommand
// does the work). With an OpObserver it
// times one request in TimedEvery of each Op (a deferred Publish is
// reported when it is answered).
func (s *Service) Serve(sess *session.Session, m abi.Message) (abi.Message, bool) {
	op, timed := opOf(m.Code)
	if s.observer == nil || !timed {
		return s.serveCommand(sess, &m)
	}
	if s.opSeq[op]++; s.opSeq[op]%TimedEvery != 0 {
		return s.serveCommand(sess, &m)
	}
	s.reqStart = mono()
	resp, ok := s.serveCommand(sess, &m)
	if ok {
		s.observer.ObserveOp(op, mono()-s.reqStart)
	}
	s.reqStart = 0
	return resp, ok
}

// serveCommand serves one cache command of sess (the message already passed
// abi.ValidateRequest). It returns the response, or ok=false when the
// response is deferred: until a copy completes (Publish), or, in failpoint
// builds, while the request is held at a pause point. Complete posts it.
func (s *Service) serveCommand(sess *session.Session, m *abi.Message) (resp abi.Message, ok bool) {
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
		return s.unadmitted(m), true
	}
	if s.draining && opensWork(abi.Command(m.Code)) {
		return s.unadmitted(m), true
	}
	var derr *abi.DescError
	switch abi.Command(m.Code) {
	case abi.CmdQueryBundle:
		resp, derr = s.query(st, m)
		s.handLease(st, &resp)
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
		resp, derr = s.tickets.Poll(st.book, m)
		s.handLease(st, &resp)
	case abi.CmdClaim:
		resp, derr = s.tickets.Claim(st.book, m)
		s.handLease(st, &resp)
	case abi.CmdCancelQuery:
		resp, derr = s.tickets.Cancel(st.book, m)
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

// unadmitted counts and answers a request refused for capacity.
func (s *Service) unadmitted(m *abi.Message) abi.Message {
	s.stats.unadmitted.Add(1)
	return m.Response(s.epoch, abi.StatusUnadmitted, 0, 0)
}

// descriptor copies the request's descriptor out of the shared slot.
func (s *Service) descriptor(st *sessState, m *abi.Message) ([]byte, *abi.DescError) {
	b, derr := st.sess.Descriptor(m, s.scratch)
	s.scratch = b[:0]
	return b, derr
}

// logRefused logs a refused cache request (rate-limited per session).
func (s *Service) logRefused(st *sessState, m *abi.Message, e *abi.DescError) {
	ok, suppressed := st.sess.RefusalLogged()
	if !ok {
		return
	}
	st.sess.WarnRefused(s.log, suppressed, "cache request refused", slog.String("command", abi.Command(m.Code).String()),
		slog.String("status", e.Status.String()), slog.String("field", e.Field.String()), slog.Uint64("entry", e.Index),
		slog.String("detail", e.Detail))
}

// LeaseBudget is the byte budget leases and restores in flight may
// reserve: Spec.LeaseBudget, or the RAM tier's capacity when that is 0.
// Safe from any goroutine (fixed at New).
func (s *Service) LeaseBudget() uint64 { return s.leaseBudget }

// Index is the block index of the RAM tier (dispatcher goroutine only):
// what gocore/discover observes.
func (s *Service) Index() *index.Index { return s.idx }

// Tiers is the cache's tiers (for the Manager's wiring: what they hold,
// safe from any goroutine, like Tiers.AnnounceSSD).
func (s *Service) Tiers() *tier.Tiers { return s.tiers }
