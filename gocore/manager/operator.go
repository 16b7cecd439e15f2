package manager

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/orbitkv/orbitkv/gocore/handover"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/buildinfo"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/operator"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
)

// DefaultDrainTimeout is how long Drain waits for operations in flight
// when the request names no timeout; MaxDrainTimeout bounds the timeout.
const (
	DefaultDrainTimeout = 30 * time.Second
	MaxDrainTimeout     = time.Hour
)

// OperatorSocketPath is the operator socket's path for s: s.OperatorSocket,
// or the bootstrap socket's path plus operator.Suffix.
func (s Spec) OperatorSocketPath() string {
	if s.OperatorSocket != "" {
		return s.OperatorSocket
	}
	return s.Bootstrap.Path + operator.Suffix
}

// operatorGID resolves Spec.OperatorGroup (a group name or number; ""
// none: -1).
func (s Spec) operatorGID() (int, error) {
	g := s.OperatorGroup
	if g == "" {
		return -1, nil
	}
	if n, err := strconv.ParseUint(g, 10, 31); err == nil {
		return int(n), nil
	}
	grp, err := user.LookupGroup(g)
	if err != nil {
		return -1, limit.Check(false, "manager.OperatorGroup", g, "a group name or id of this host")
	}
	n, err := strconv.Atoi(grp.Gid)
	if err != nil {
		return -1, limit.Check(false, "manager.OperatorGroup", g, fmt.Sprintf("a group whose id is a number (the group database gives %q)", grp.Gid))
	}
	return n, nil
}

// validateOperator checks the operator socket's fields.
func (s Spec) validateOperator() error {
	p := s.OperatorSocketPath()
	_, gerr := s.operatorGID()
	return errors.Join(gerr,
		limit.Check(len(p) <= operator.MaxPathBytes, "manager.OperatorSocket", p,
			fmt.Sprintf("a path of at most %d bytes (the default adds %q to the bootstrap socket's)", operator.MaxPathBytes, operator.Suffix)),
		limit.Check(p != s.Bootstrap.Path, "manager.OperatorSocket", p, "a path other than the bootstrap socket's"))
}

// operatorService answers the operator socket (operatorpb.OperatorServer);
// whatever touches cache state runs on the dispatcher (channel.Dispatcher.Do).
type operatorService struct {
	operatorpb.UnimplementedOperatorServer
	m *Manager
}

// operatorState is the Manager's part of the operator socket.
type operatorState struct {
	srv *operator.Server
	// drain is closed when a drain finished waiting (drainReply is set
	// before): Run shuts down.
	drain      chan struct{}
	drainReply *operatorpb.DrainReply
	drainMu    sync.Mutex
	drainBegun bool // under drainMu
	// upgrade is the successor an Upgrade started, which Run hands the
	// RAM tier to after the drain; upgradeBegun is set from the start of
	// an Upgrade (both under drainMu).
	upgrade      *handover.Successor
	upgradeBegun bool
	// stopping is set once Run's shutdown began (under drainMu): an
	// Upgrade whose successor said hello after it abandons it.
	stopping bool
	// nsScan is the namespace listing in flight (Namespaces), shared by
	// the calls that arrive while it runs.
	nsScan flight[*operatorpb.NamespacesReply]
}

// flight runs one call of a function at a time and hands its result to
// every caller that arrived while it ran: of N concurrent callers one
// runs it and the others wait for and share its result, which is then at
// most one run's time older than their call (singleflight, one key).
type flight[T any] struct{ g singleflight.Group }

// do returns run's result: of the run in flight when there is one, else
// of a run it starts. A caller whose ctx ends first returns ctx's error;
// the run goes on for the others.
func (f *flight[T]) do(ctx context.Context, run func() (T, error)) (T, error) {
	ch := f.g.DoChan("", func() (any, error) { return run() })
	select {
	case r := <-ch:
		v, _ := r.Val.(T)
		return v, r.Err
	case <-ctx.Done():
		var zero T
		return zero, status.FromContextError(ctx.Err()).Err()
	}
}

// startOperator binds the operator socket and serves it.
func (m *Manager) startOperator() error {
	gid, err := m.spec.operatorGID()
	if err != nil {
		return err
	}
	path := m.spec.OperatorSocketPath()
	srv, err := operator.Listen(operator.Config{Path: path, GID: gid, AdmitManagerUID: m.spec.OperatorAdmitManagerUID, Service: &operatorService{m: m}, Gate: m.ready.operatorGate, Logger: m.log})
	if err != nil {
		return &limit.Refused{Field: "manager.OperatorSocket", Value: path, Err: err}
	}
	m.op.srv = srv
	return nil
}

// stopOperator stops the operator socket (a Drain's reply is written first).
func (m *Manager) stopOperator() {
	if m.op.srv != nil {
		m.op.srv.Close()
		m.op.srv = nil
	}
}

// Drained is closed once an operator's Drain finished waiting; Run then
// shuts down as on SIGTERM.
func (m *Manager) Drained() <-chan struct{} { return m.op.drain }

// onDispatcher runs f on the dispatcher; a stopped one is Unavailable.
func (o *operatorService) onDispatcher(f func()) error {
	if err := o.m.Dispatcher.Do(f); err != nil {
		if errors.Is(err, channel.ErrStopped) {
			return status.Error(codes.Unavailable, "the Manager is shutting down")
		}
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

func (o *operatorService) Sessions(context.Context, *operatorpb.SessionsRequest) (*operatorpb.SessionsReply, error) {
	m := o.m
	sess := m.Table.Sessions()
	slices.SortFunc(sess, func(a, b *session.Session) int { return int(a.Index) - int(b.Index) })
	out := &operatorpb.SessionsReply{}
	now := time.Now()
	var nss map[*session.Session]abi.Namespace
	if m.Cache != nil {
		if err := o.onDispatcher(func() {
			nss = make(map[*session.Session]abi.Namespace, len(sess))
			for _, s := range sess {
				if ns, ok := m.Cache.SessionNamespace(s); ok {
					nss[s] = ns
				}
			}
		}); err != nil {
			return nil, err
		}
	}
	for _, s := range sess {
		r := &operatorpb.Session{Index: s.Index, Pid: s.Peer.PID, Uid: s.Peer.UID, Instance: s.InstanceID(), Tenant: s.Peer.Tenant.NameOrEmpty(),
			Role: s.Peer.Role.String(), AgeNs: uint64(now.Sub(s.Opened)), BufferBytes: s.BufferBytes(), Buffers: uint32(s.BufferCount())}
		if ns, ok := nss[s]; ok {
			r.Namespace = ns.String()
		}
		if h, err := m.Dispatcher.SessionHealth(s); err == nil {
			r.Attached = true
			r.Requests, r.Operations, r.Tickets = h.Requests, h.Operations, h.Tickets
			r.Leases, r.LeasedBlocks, r.ReservedBytes = h.Leases, h.LeasedBlocks, h.ReservedBytes
		} else if errors.Is(err, channel.ErrStopped) {
			return nil, status.Error(codes.Unavailable, "the Manager is shutting down")
		}
		out.Sessions = append(out.Sessions, r)
	}
	return out, nil
}

func (o *operatorService) Stats(context.Context, *operatorpb.StatsRequest) (*operatorpb.StatsReply, error) {
	m := o.m
	if m.Cache == nil {
		return &operatorpb.StatsReply{}, nil
	}
	var tenants []cache.TenantStat
	if err := o.onDispatcher(func() { m.Cache.InFlight(); tenants = m.Cache.TenantStats() }); err != nil { // publishes the dispatcher's figures
		return nil, err
	}
	cs := m.Cache.Stats()
	lb := cs.LookupBlocks
	ratio := func(a, b uint64) float64 {
		if b == 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	ram := &operatorpb.RamTier{CapacityBytes: cs.CapacityBytes, UsedBytes: cs.UsedBytes, Blocks: cs.Blocks, Pins: cs.Pins,
		Evictions: cs.Evictions, Hugepages: cs.RAMHuge, HugepagesFallback: cs.RAMFallback,
		HitBlocks: lb.RAMHit, MissBlocks: lb.RAMMiss, HitRatio: ratio(lb.RAMHit, lb.RAMHit+lb.RAMMiss),
		PublishedBlocks: cs.Published, RestoredBlocks: cs.Restored}
	x := cs.SSD
	ssd := &operatorpb.SsdTier{On: x.On, CapacityBytes: x.CapacityBytes, UsedBytes: x.UsedBytes, Blocks: x.Blocks,
		Writes: x.Writes, Reads: x.Reads, Corrupt: x.Corrupt, Recovered: x.Recovered, NotAdmitted: x.NotAdmitted,
		Evictions: x.Evictions, DemoteSkipped: x.DemoteSkipped, Prefetches: x.Prefetches, PrefetchFailures: x.PrefetchFails,
		HitBlocks: lb.SSDHit, MissBlocks: lb.SSDMiss, HitRatio: ratio(lb.SSDHit, lb.SSDHit+lb.SSDMiss)}
	spec := m.spec.Cache
	b := &operatorpb.Budgets{LeaseBudgetBytes: m.Cache.LeaseBudget(), ReservedBytes: cs.ReservedBytes, BudgetWaiting: cs.BudgetWaiting,
		WarmupBudgetBytes: spec.Tiers.WarmupBudget, WarmupsSkipped: cs.WarmupSkipped, Operations: cs.Operations,
		Leases: cs.Leases, Tickets: cs.Tickets, Unadmitted: cs.Unadmitted, Expired: cs.Expired}
	out := &operatorpb.StatsReply{Cache: true, Ram: ram, Ssd: ssd, Budgets: b, Lookups: cs.Lookups, DistinctLookups: cs.DistinctLookups}
	uses := m.Server.TenantUses()
	for i, t := range tenants {
		pt := &operatorpb.Tenant{Name: t.Name, Domain: t.Domain, Operations: uint64(t.Ops), OperationsShare: uint64(t.Share.Ops),
			LeasedBytes: t.LeasedBytes, LeasedBytesShare: t.Share.PinnedBytes, Queries: t.Queries, HitBlocks: t.HitBlocks,
			Unadmitted: t.Unadmitted, TicketsAnswered: t.Answered, TicketWaitNs: t.WaitNanos,
			TicketsQueued: t.Queued, TicketQueueNs: t.QueueNanos,
			RamBytes: t.Tier.RAMBytes, RamQuotaBytes: t.Tier.RAMQuota, SsdBytes: t.Tier.SSDBytes, SsdQuotaBytes: t.Tier.SSDQuota,
			RamRefused: t.Tier.RAMRefused, SsdRefused: t.Tier.SSDRefused}
		if i < len(uses) {
			u := uses[i]
			pt.Sessions, pt.SessionsShare, pt.Tables, pt.TablesShare = u.Sessions, u.SessionsShare, u.Tables, u.TablesShare
			pt.Buffers, pt.BuffersShare, pt.BufferBytes, pt.BufferBytesShare = u.Buffers, u.BuffersShare, u.BufferBytes, u.BufferBytesShare
		}
		out.Tenants = append(out.Tenants, pt)
	}
	return out, nil
}

func (o *operatorService) Health(context.Context, *operatorpb.HealthRequest) (*operatorpb.HealthReply, error) {
	m := o.m
	h := m.health.reply()
	return &operatorpb.HealthReply{Status: h.Status, Version: h.Version, PollMode: h.PollMode, UptimeNs: h.UptimeNs,
		Requests: h.Requests, Sessions: uint32(m.Table.Len()), Epoch: m.spec.Epoch, ServiceId: hex.EncodeToString(m.health.serviceID[:]),
		ManagerPid: int32(os.Getpid()), Blocks: h.Blocks, RamUsedBytes: h.RamUsedBytes, RamCapacityBytes: h.RamCapacityBytes,
		Leases: h.Leases, Pins: h.Pins, ReservedBytes: h.ReservedBytes, Operations: h.Operations, Evictions: h.Evictions,
		Tickets: h.Tickets, Lookups: h.Lookups, DistinctLookups: h.DistinctLookups, Ssd: m.health.ssdHealth(), Build: BuildInfo(),
		Events: m.health.eventStreams()}, nil
}

// eventStreams are the KV event streams' names and sockets (nil while the
// events are off), in domain order.
func (h *health) eventStreams() []*operatorpb.EventStream {
	if h.lookup == nil || h.lookup.events == nil {
		return nil
	}
	t := h.lookup.events
	pub, rep := t.Endpoints()
	_, st := t.Stats()
	var out []*operatorpb.EventStream
	for i := range min(len(pub), len(st)) {
		out = append(out, &operatorpb.EventStream{Name: st[i].Name, Endpoint: pub[i], Replay: rep[i]})
	}
	return out
}

// BuildInfo is this binary's build as the operator API reports it.
func BuildInfo() *operatorpb.BuildInfo {
	b := buildinfo.Get()
	return &operatorpb.BuildInfo{Version: b.Version, Commit: b.Commit, Date: b.Date, GoVersion: b.GoVersion,
		AbiVersion: abi.Version, BootstrapVersion: abi.BootstrapVersion, Failpoints: b.Failpoints}
}

// Namespaces lists the namespaces (cache.Service.Namespaces): the
// counters and the RAM tier's walk on the dispatcher, the SSD tier's walk
// off it. One listing runs at a time (operatorState.nsScan): calls that
// arrive while one runs share its reply, so the dispatcher holds at most
// one walk queued or running and a ping waits for at most one walk's time.
func (o *operatorService) Namespaces(ctx context.Context, _ *operatorpb.NamespacesRequest) (*operatorpb.NamespacesReply, error) {
	if o.m.Cache == nil {
		return &operatorpb.NamespacesReply{}, nil
	}
	r, err := o.m.op.nsScan.do(ctx, o.namespaces)
	if err != nil {
		return nil, err
	}
	return proto.Clone(r).(*operatorpb.NamespacesReply), nil // each call's reply is its own to marshal
}

// namespaces is one namespace listing.
func (o *operatorService) namespaces() (*operatorpb.NamespacesReply, error) {
	m := o.m
	var sc *cache.NamespaceScan
	var took time.Duration
	if err := o.onDispatcher(func() {
		start := time.Now()
		sc = m.Cache.ScanNamespaces()
		took = time.Since(start)
	}); err != nil {
		return nil, err
	}
	out := &operatorpb.NamespacesReply{ScanNs: uint64(took)}
	for _, n := range m.Cache.Namespaces(sc) {
		r := &operatorpb.Namespace{Tenant: n.Domain, Other: n.Other, RamBlocks: n.RAMBlocks, RamBytes: n.RAMBytes,
			SsdBlocks: n.SSDBlocks, SsdBytes: n.SSDBytes, Queries: n.Queries, HitBlocks: n.HitBlocks,
			PublishedBlocks: n.Published, Sessions: n.Sessions}
		if !n.Other {
			r.Key = n.Key.String()
			if n.Known {
				r.Namespace = n.Namespace.String()
			}
		}
		out.Namespaces = append(out.Namespaces, r)
	}
	return out, nil
}

func (o *operatorService) Evict(_ context.Context, r *operatorpb.EvictRequest) (*operatorpb.EvictReply, error) {
	return o.drop(r, false)
}

func (o *operatorService) Flush(_ context.Context, r *operatorpb.EvictRequest) (*operatorpb.EvictReply, error) {
	return o.drop(r, true)
}

// parseNamespace reads a namespace of 32 hex digits; field names it in
// the error.
func parseNamespace(field, text string) (abi.Namespace, error) {
	var ns abi.Namespace
	b, err := hex.DecodeString(text)
	if err != nil || len(b) != len(ns) {
		return ns, status.Errorf(codes.InvalidArgument, "%s %q: want %d hex digits", field, text, 2*len(ns))
	}
	return abi.Namespace(b), nil
}

// dropKey is the namespace key an EvictRequest names (nil: all): key as
// given, or namespace mixed with the domain of tenant (a tenant's name or
// a sharing group's), which tenants require and no tenants refuse.
func (o *operatorService) dropKey(r *operatorpb.EvictRequest) (*abi.Namespace, error) {
	given := 0
	for _, set := range []bool{r.All, r.Namespace != "", r.Key != ""} {
		if set {
			given++
		}
	}
	if given != 1 {
		return nil, status.Error(codes.InvalidArgument, "give one of namespace, key and all")
	}
	tenants := o.m.spec.Tenants
	switch {
	case r.All:
		if r.Tenant != "" {
			return nil, status.Error(codes.InvalidArgument, "tenant goes with namespace only")
		}
		return nil, nil
	case r.Key != "":
		if r.Tenant != "" {
			return nil, status.Error(codes.InvalidArgument, "tenant goes with namespace only: a key is already mixed with its tenant's domain")
		}
		k, err := parseNamespace("key", r.Key)
		return &k, err
	}
	ns, err := parseNamespace("namespace", r.Namespace)
	if err != nil {
		return nil, err
	}
	if tenants.Len() == 0 {
		if r.Tenant != "" {
			return nil, status.Errorf(codes.InvalidArgument, "tenant %q: the Manager has no tenants (no --tenant)", r.Tenant)
		}
		return &ns, nil
	}
	if r.Tenant == "" {
		return nil, status.Error(codes.InvalidArgument, "the Manager has tenants, which key a namespace each their own way: "+
			"name the tenant (or sharing group) with the namespace, or give the key orbitkvctl namespaces lists")
	}
	var d *tenant.Domain
	if t := tenants.ByName(r.Tenant); t != nil {
		d = t.Domain
	} else {
		for _, x := range tenants.Domains() {
			if x.Name == r.Tenant {
				d = x
			}
		}
	}
	if d == nil {
		return nil, status.Errorf(codes.InvalidArgument, "tenant %q: no tenant or sharing group of that name", r.Tenant)
	}
	k := abi.Namespace(d.Namespace(ns))
	return &k, nil
}

// drop serves Evict (flush false) and Flush.
func (o *operatorService) drop(r *operatorpb.EvictRequest, flush bool) (*operatorpb.EvictReply, error) {
	ns, err := o.dropKey(r)
	if err != nil {
		return nil, err
	}
	m := o.m
	if m.Cache == nil {
		return nil, status.Error(codes.FailedPrecondition, "the Manager serves no cache")
	}
	var out *operatorpb.EvictReply
	err = o.onDispatcher(func() {
		d := m.Cache.Drop(ns, flush)
		out = &operatorpb.EvictReply{RamBlocks: d.RAMBlocks, RamBytes: d.RAMBytes, SsdBlocks: d.SSDBlocks,
			PinnedKept: d.Pinned, PublishingKept: d.Publishing}
	})
	if err != nil {
		return nil, err
	}
	what := "evict"
	if flush {
		what = "flush"
	}
	keyText := "all"
	if ns != nil {
		keyText = ns.String()
	}
	m.log.Info("operator "+what, slog.String("key", keyText), slog.String("namespace", r.Namespace), slog.String("tenant", r.Tenant), slog.Uint64("ram_blocks", out.RamBlocks),
		slog.Uint64("ram_bytes", out.RamBytes), slog.Uint64("ssd_blocks", out.SsdBlocks), slog.Uint64("pinned_kept", out.PinnedKept))
	return out, nil
}

// Drain begins the drain (once: a later call waits for the same one) and
// reports it when it ended. The drain runs on its own goroutine to its end
// whatever becomes of the call: a client gone does not cut its wait short.
func (o *operatorService) Drain(ctx context.Context, r *operatorpb.DrainRequest) (*operatorpb.DrainReply, error) {
	timeout := time.Duration(r.TimeoutNs)
	if r.TimeoutNs > uint64(MaxDrainTimeout) {
		return nil, status.Errorf(codes.InvalidArgument, "timeout %v: at most %v", timeout, MaxDrainTimeout)
	}
	if timeout == 0 {
		timeout = DefaultDrainTimeout
	}
	if err := o.beginDrain(timeout, false); err != nil {
		return nil, err
	}
	select {
	case <-o.m.op.drain:
		return o.m.op.drainReply, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// beginDrain refuses new sessions and operations and starts the wait for
// those in flight (at most timeout) unless a drain already began; a Drain
// (upgrade false) is refused while an upgrade is under way.
func (o *operatorService) beginDrain(timeout time.Duration, upgrade bool) error {
	m := o.m
	m.op.drainMu.Lock()
	defer m.op.drainMu.Unlock()
	if m.op.upgradeBegun && !upgrade {
		return status.Error(codes.FailedPrecondition, "an upgrade is under way: it drains this Manager itself")
	}
	if m.op.drainBegun {
		return nil
	}
	m.Table.Refuse(session.ErrDraining)
	m.ready.set(PhaseDraining)
	if m.Cache != nil {
		if err := o.onDispatcher(func() { m.Cache.SetDraining(true) }); err != nil {
			return err
		}
	}
	m.op.drainBegun = true
	m.log.Info("draining: no new sessions or operations; waiting for operations in flight", slog.Duration("timeout", timeout))
	go o.drain(timeout)
	return nil
}

// drain waits for the operations in flight, at most timeout (or until the
// dispatcher stopped), records the reply, and closes Drained.
func (o *operatorService) drain(timeout time.Duration) {
	m := o.m
	start := time.Now()
	deadline := start.Add(timeout)
	var left uint64
	for {
		if m.Cache != nil {
			if err := o.onDispatcher(func() { left = m.Cache.InFlight() }); err != nil {
				break
			}
		}
		if left == 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := &operatorpb.DrainReply{OperationsLeft: left, TimedOut: left != 0, WaitedNs: uint64(time.Since(start)), Sessions: uint32(m.Table.Len())}
	m.log.Info("drain finished; shutting down", slog.Uint64("operations_left", left), slog.Bool("timed_out", out.TimedOut),
		slog.Duration("waited", time.Duration(out.WaitedNs)))
	m.op.drainReply = out
	close(m.op.drain)
}
