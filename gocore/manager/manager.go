package manager

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/orbitkv/orbitkv/ebpf"
	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/cluster"
	"github.com/orbitkv/orbitkv/gocore/discover"
	"github.com/orbitkv/orbitkv/gocore/index"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/profiling"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/gocore/tenant"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// DefaultShutdownTimeout is Spec.ShutdownTimeout's default.
const DefaultShutdownTimeout = 10 * time.Second

// ShutdownTimeoutRange is the limit of Spec.ShutdownTimeout.
var ShutdownTimeoutRange = limit.Range[time.Duration]{Field: "manager.ShutdownTimeout", Min: time.Second, Max: 10 * time.Minute,
	Zero: limit.Format(DefaultShutdownTimeout)}

// Spec configures a Manager; a plain value. New fills in Bootstrap.Table,
// .Dispatcher, .Epoch and (when nil) .Health; Cache.Epoch and the Loggers;
// and Channel.MaxSessions from Session.MaxSessions when it is 0.
type Spec struct {
	Epoch     uint64 // nonzero; stamped on every response
	Session   session.Spec
	Channel   channel.Spec
	Cache     *cache.Spec // nil: only Ping and Shutdown are served
	Bootstrap bootstrap.Config
	// HTTPAddr is the loopback host:port of /health, /metrics and
	// /debug/pprof (unauthenticated, so never another address); "" serves
	// none.
	HTTPAddr string
	// HTTPPprof serves /debug/pprof on HTTPAddr too (off: profiles and
	// goroutine dumps show every engine's activity to any local process).
	HTTPPprof bool
	// OperatorSocket is the operator socket's path (gocore/operator; ""
	// : Bootstrap.Path + ".operator"); OperatorGroup, a group name or id,
	// makes it 0660 and lets that group's members in ("": 0600).
	OperatorSocket, OperatorGroup string
	// OperatorAdmitManagerUID admits processes of the Manager's own uid to
	// the operator socket too (off: root and OperatorGroup only; the
	// Manager's engines run as its uid and are not operators).
	OperatorAdmitManagerUID bool
	// ShutdownTimeout bounds Run's shutdown, from the signal to the last
	// step (0: DefaultShutdownTimeout; 1s..10m).
	ShutdownTimeout time.Duration
	// Profiling pushes continuous profiles to a Pyroscope server from Run
	// on (gocore/profiling; zero: off). New fills its Epoch, and its
	// Version from Bootstrap.Version when empty.
	Profiling profiling.Spec
	// EBPF loads the eBPF latency probes (package ebpf) at New and exports
	// their orbitkv_ebpf_*_seconds histograms on /metrics; New fails with
	// the reason when this host cannot load them (root or CAP_BPF with
	// CAP_PERFMON, BTF, the tracepoints). It needs HTTPAddr.
	EBPF bool
	// Cluster, when set, makes this Manager one node of a cluster: its own
	// blocks are advertised in an etcd catalog and served to peers, and a
	// chain that continues into blocks a live peer advertises is fetched
	// from it (gocore/cluster). It needs Cache.
	Cluster *cluster.Spec
	// Discover bounds the shared-memory discovery indexes sessions map
	// read-only (gocore/discover; served with Cache only). New fills in
	// MaxBlocks from the RAM tier.
	Discover discover.Spec
	// Tenants, when set, are the tenants of docs/security.md: the
	// bootstrap socket admits their processes only (of any uid), and each
	// session is bound to its tenant, whose namespaces and shares the
	// bootstrap server and the cache keep apart (gocore/tenant). nil: one
	// trust domain, the Manager's uid. The iceoryx2 transport serves one
	// uid and is refused with tenants.
	Tenants *tenant.Set
	// Events, when its Endpoint is set, publishes the node's KV events
	// (gocore/kvevents, docs/events.md): every block this node produced as
	// it enters and leaves RAM and SSD, in vLLM's wire format. New fills
	// its Domains from Tenants (one stream per tenant domain).
	Events kvevents.Spec
	// FDStore hands the RAM tier's memfds to systemd's file descriptor
	// store when NOTIFY_SOCKET is set (fdstore.go), so a Manager restarted
	// after a crash adopts the tier (Cache.Tiers.RAM.Handed).
	FDStore bool
	// Upgrade is how the operator's Upgrade starts a successor (zero:
	// Upgrade is refused).
	Upgrade UpgradeSpec
	Logger  *slog.Logger
}

// withDefaults fills the fields New derives from others.
func (s Spec) withDefaults() Spec {
	s.Session.Epoch, s.Channel.Epoch, s.Profiling.Epoch = s.Epoch, s.Epoch, s.Epoch
	if s.Profiling.Version == "" {
		s.Profiling.Version = s.Bootstrap.Version
	}
	if s.Channel.MaxSessions == 0 {
		s.Channel.MaxSessions = s.Session.MaxSessions
	}
	if s.ShutdownTimeout == 0 {
		s.ShutdownTimeout = DefaultShutdownTimeout
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return s
}

// Validate checks every part of s. Each field outside its limit is a
// *limit.Error naming it (limit.Errors lists them); errors.Join joins them.
func (s Spec) Validate() error {
	s = s.withDefaults()
	errs := []error{
		limit.Check(s.Epoch != 0, "manager.Epoch", s.Epoch, "nonzero"),
		s.Session.Validate(), s.Channel.Validate(), s.Bootstrap.Validate(), s.Discover.Validate(),
		ShutdownTimeoutRange.Check(s.ShutdownTimeout), s.Profiling.Validate(),
		limit.Check(s.Tenants == nil || s.Channel.Transport != channel.TransportIceoryx2, "channel.Transport", "iceoryx2",
			"shm when tenants are configured (the iceoryx2 runtime's objects belong to one uid)"),
		limit.Check(s.Channel.MaxSessions == s.Session.MaxSessions, "manager.Channel.MaxSessions", s.Channel.MaxSessions,
			fmt.Sprintf("the session table's maximum, %d (0: the same)", s.Session.MaxSessions)),
	}
	if s.Cache != nil {
		errs = append(errs, s.Cache.Validate())
	}
	if s.HTTPAddr != "" {
		errs = append(errs, checkLoopback(s.HTTPAddr))
	}
	// The probes cost every context switch of the host a few instructions
	// and are read only by /metrics: without it they would run for nothing.
	errs = append(errs, limit.Check(!s.EBPF || s.HTTPAddr != "", "manager.EBPF", s.EBPF,
		"an HTTP endpoint (--http-addr): the probes' histograms are read only on its /metrics"))
	errs = append(errs, s.validateOperator())
	if s.Cluster != nil {
		errs = append(errs, limit.Check(s.Cache != nil, "manager.Cluster", "set", "a cache: peers fetch from and into its RAM tier"),
			s.Cluster.Validate())
	}
	return errors.Join(errs...)
}

// Manager is one running Manager: its dispatcher runs on its own
// goroutine from New on; Serve (or Run) accepts clients; Close stops
// everything.
type Manager struct {
	Table      *session.Table
	Dispatcher *channel.Dispatcher
	Cache      *cache.Service // nil without Spec.Cache
	Server     *bootstrap.Server
	spec       Spec
	log        *slog.Logger
	health     *health
	ready      *readiness
	http       *httpServer        // nil without Spec.HTTPAddr
	probes     *ebpf.Probes       // nil without Spec.EBPF
	cluster    *cluster.Cluster   // nil without Spec.Cluster
	discover   *discover.Registry // nil without Spec.Cache or with Spec.Discover.Disabled
	events     *kvevents.Tracker  // nil without Spec.Events.Endpoint
	stopEvents chan struct{}      // closed to stop the SSD tier's re-announcement
	eventsDone chan struct{}      // closed when it ended
	op         operatorState
	prof       atomic.Pointer[profiling.Profiler] // set by Run when it pushes profiles
	closed     atomic.Bool                        // Close or Run's shutdown began
}

// New validates s and makes the Manager, each step before the next
// commits more: it takes the HTTP port and serves /livez and /readyz at
// once (every other endpoint answers 503 "starting" until New returns),
// binds the bootstrap socket, then creates the RAM tier (committing its
// memory; the pre-fault's progress goes to /readyz, the log and systemd),
// the SSD tier, the copy engine and the dispatcher. It logs each step.
// Errors name the part that failed: a port, socket path, memory size or
// directory the system refused is a *limit.Refused naming the Spec field;
// on any error nothing New made is left behind.
func New(s Spec) (*Manager, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.withDefaults()
	if s.Channel.Logger == nil {
		s.Channel.Logger = s.Logger
	}
	m := &Manager{spec: s, log: s.Logger, ready: newReadiness(s.Logger), op: operatorState{drain: make(chan struct{})}}
	var sw *swapHandler
	if s.HTTPAddr != "" {
		ln, err := listenTCP("manager.HTTPAddr", s.HTTPAddr)
		if err != nil {
			return nil, err
		}
		m.http, sw = serveEarly(ln, m.ready, s.Logger)
		m.log.Info("start: http endpoints serving /livez and /readyz", slog.String("addr", m.http.addr))
	}
	if err := m.loadProbes(s); err != nil {
		m.stopHTTP()
		return nil, err
	}
	if err := m.build(s); err != nil {
		m.stopHTTP()
		return nil, err
	}
	m.health.ebpf = m.probes
	m.health.lookup = &lookups{events: m.events, tenants: s.Tenants, counts: &lookupCounts{}}
	if m.cluster != nil {
		m.health.lookup.peers = m.lookupPeers
	}
	if sw != nil {
		sw.store(routes(m.health, m.ready, s.HTTPPprof, s.Logger))
	}
	return m, nil
}

// build makes the session table, the dispatcher, the bootstrap socket and
// then the cache; on an error it undoes what it made, newest first.
func (m *Manager) build(s Spec) (err error) {
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	table, err := session.NewTable(s.Session)
	if err != nil {
		return err
	}
	disp, err := channel.New(s.Channel)
	if err != nil {
		return err
	}
	undo = append(undo, disp.Close)
	m.Table, m.Dispatcher = table, disp
	m.health = &health{disp: disp, table: table, mode: s.Channel.PollMode, version: s.Bootstrap.Version,
		serviceID: s.Bootstrap.ServiceID, ready: m.ready, prof: &m.prof}
	bc := s.Bootstrap
	bc.Epoch, bc.Table, bc.Dispatcher = s.Epoch, table, disp
	if bc.Logger == nil {
		bc.Logger = s.Logger
	}
	if bc.Health == nil {
		bc.Health = m.health.reply
	}
	if s.Cache != nil && !s.Discover.Disabled {
		if err := m.newDiscovery(s); err != nil {
			return err
		}
		undo = append(undo, m.discover.Close)
		bc.Discovery = m.openDiscovery
		bc.ReleaseDiscovery = m.discover.Release
		bc.MaxTables = uint32(m.discover.Capacity())
	}
	bc.Tenants = s.Tenants
	// The socket is bound (not yet served: Serve accepts) before the RAM
	// tier is committed, so a squatted or unsafe path fails at once.
	if m.Server, err = bootstrap.New(bc); err != nil {
		return &limit.Refused{Field: "bootstrap.Path", Value: bc.Path, Err: err}
	}
	undo = append(undo, m.Server.Close)
	m.health.boot = m.Server
	m.log.Info("start: bootstrap socket bound", slog.String("socket", bc.Path))
	if err := m.startOperator(); err != nil {
		return err
	}
	undo = append(undo, m.stopOperator)
	m.log.Info("start: operator socket bound", slog.String("socket", s.OperatorSocketPath()))
	if s.Cache != nil {
		if err := m.newCache(s); err != nil {
			return err
		}
	}
	m.health.started = time.Now()
	go disp.Run()
	if m.cluster != nil {
		// Undone first: the cache stops with the dispatcher, and only then
		// may the cluster's engine close (a fetch writes RAM frames).
		undo = append(undo, m.closeEngine, func() { <-m.StopDispatcher() })
		// Peer control pins through the dispatcher: it runs first.
		m.ready.starting("joining the cluster")
		if err := m.startCluster(s); err != nil {
			return err
		}
	}
	m.ready.starting("made; waiting to serve")
	return nil
}

// newDiscovery makes the discovery indexes' registry (with a cache, unless
// Spec.Discover.Disabled), sized for the RAM tier.
func (m *Manager) newDiscovery(s Spec) error {
	ds := s.Discover
	ds.Complete = s.Cache.Tiers.SSD == nil && s.Cluster == nil
	if ram := s.Cache.Tiers.RAM; ram.ChunkBytes > 0 {
		ds.MaxBlocks = max(ram.CapacityBytes/ram.ChunkBytes, 1)
	} else {
		ds.MaxBlocks = 1
	}
	if tb := discover.TableBytes(discover.BucketsFor(ds.MaxBlocks)); ds.Bytes == discover.DefaultBytes && tb > ds.Bytes/4 {
		// The default budget holds 4 tables whatever the RAM tier's size; a
		// budget the operator chose is kept (and refused below when it
		// holds no table).
		ds.Bytes = 4 * tb
		s.Logger.Info("discovery: the default --discover-bytes raised to 4 namespaces' indexes for this RAM tier",
			slog.String("discover_bytes", humanize.IBytes(ds.Bytes)), slog.String("table_bytes", humanize.IBytes(tb)))
	}
	var err error
	m.discover, err = discover.New(ds, m.Dispatcher.Do)
	return err
}

// newCache makes the cluster's requester side (with Spec.Cluster: the
// tiers take its Fetcher and Advertiser) and the cache, and hands the
// cache to the dispatcher (not running yet). On an error nothing of
// either is left.
func (m *Manager) newCache(s Spec) (err error) {
	cs := *s.Cache
	cs.Epoch, cs.Tenants = s.Epoch, s.Tenants
	cs.Tiers.RAM.Tag = domainsTag(s.Tenants)
	if cs.Logger == nil {
		cs.Logger = s.Logger
	}
	if cs.Observer == nil {
		m.health.ops = newOpDurations()
		cs.Observer = m.health.ops
	}
	if cs.Tiers.SSD != nil && cs.Tiers.SSD.Observer == nil {
		sp := *cs.Tiers.SSD
		m.health.ssdIO = newSSDDurations()
		sp.Observer = m.health.ssdIO
		cs.Tiers.SSD = &sp
	}
	if user := cs.Tiers.RAM.Progress; user != nil {
		cs.Tiers.RAM.Progress = func(done, total uint64) { m.ready.prefault(done, total); user(done, total) }
	} else {
		cs.Tiers.RAM.Progress = m.ready.prefault
	}
	if cs.Tiers.SSD != nil {
		sp := *cs.Tiers.SSD // the caller's Spec is not written
		if user := sp.Progress; user != nil {
			sp.Progress = func(step string, done, total uint64, unit string) {
				m.ready.ssdOpen(step, done, total, unit)
				user(step, done, total, unit)
			}
		} else {
			sp.Progress = m.ready.ssdOpen
		}
		cs.Tiers.SSD = &sp
	}
	if m.events, err = m.newEvents(s); err != nil {
		return err
	}
	if t := m.events; t != nil {
		cs.Tiers.Events = t
		cs.Tiers.Records = func(k index.Key) []byte { return t.Persisted(kvevents.Key(k)) }
		if cs.Tiers.SSD != nil {
			sp := *cs.Tiers.SSD
			sp.Blocks = ssdEvents{t}
			cs.Tiers.SSD = &sp
		}
	}
	if s.Cluster != nil {
		if m.cluster, err = m.newCluster(s); err != nil {
			m.closeEngine()
			return err
		}
		cs.Tiers.Remote, cs.Tiers.Advertiser = m.cluster.Fetcher(), m.cluster.Advertiser()
		m.health.cluster = m.cluster
	}
	m.ready.starting("making the RAM tier (" + humanize.IBytes(cs.Tiers.RAM.CapacityBytes) + ")")
	start := time.Now()
	if m.Cache, err = cache.New(cs, m.Dispatcher.Poller()); err != nil {
		m.closeEngine()
		return err
	}
	m.Dispatcher.SetHandler(m.Cache)
	if g := m.Cache.GPUMapper(); g != nil {
		m.Server.SetGPU(g) // RegisterBuffers maps CUDA memory from now on
	}
	if m.discover != nil {
		m.discover.Attach(m.Cache.Index()) // before the dispatcher runs
	}
	m.health.svc = m.Cache
	m.logTiers(cs, time.Since(start))
	m.StoreTier()
	if m.events != nil && cs.Tiers.SSD != nil {
		m.stopEvents, m.eventsDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(m.eventsDone)
			start := time.Now()
			n := m.Cache.Tiers().AnnounceSSD(m.stopEvents)
			m.log.Info("kv events: announced the blocks the SSD tier holds", "blocks", n, "took", time.Since(start))
		}()
	}
	return nil
}

// logTiers logs the tiers New made, with how long making them took (the
// RAM tier's prefault dominates).
func (m *Manager) logTiers(cs cache.Spec, took time.Duration) {
	rs := m.Cache.Stats()
	ram := cs.Tiers.RAM
	m.log.Info("ram tier ready", slog.Uint64("capacity_bytes", ram.CapacityBytes), slog.String("capacity", humanize.IBytes(ram.CapacityBytes)),
		slog.Uint64("chunk_bytes", ram.ChunkBytes), slog.String("chunk", humanize.IBytes(ram.ChunkBytes)), slog.Bool("prefault", ram.Prefault),
		slog.String("hugepages", ram.Hugepages.String()), slog.Bool("huge", rs.RAMHuge), slog.String("hugepages_fallback", rs.RAMFallback),
		slog.Duration("took", took), slog.Int("copy_workers", cs.CopyWorkers), slog.String("eviction", cs.Tiers.Eviction))
	if sp := cs.Tiers.SSD; sp != nil {
		m.log.Info("ssd tier ready", slog.String("dir", sp.Dir), slog.Uint64("capacity_bytes", rs.SSD.CapacityBytes),
			slog.String("capacity", humanize.IBytes(rs.SSD.CapacityBytes)), slog.Uint64("slot_bytes", sp.SlotBytes), slog.String("slot", humanize.IBytes(sp.SlotBytes)), slog.Uint64("recovered_blocks", rs.SSD.Recovered),
			slog.String("admission", sp.Admission))
	}
}

// Serve marks the Manager serving (/readyz answers 200; systemd hears
// READY=1) and accepts bootstrap connections until Close; see
// bootstrap.Server.Serve.
func (m *Manager) Serve() error {
	m.ready.set(PhaseServing)
	return m.Server.Serve()
}

// Health is the Manager-wide health of GET /health: status (serving or
// draining), uptime, version, poll mode, requests and the cache figures.
func (m *Manager) Health() *lifecyclepb.HealthReply { return m.health.reply() }

// Close shuts down in the order docs/design.md §5.1 needs: every session is
// detached and released first, then the node leaves the cluster (peer
// control releases every transfer it serves, through the dispatcher),
// then the dispatcher stops and the cache
// waits for its copies and SSD I/O and frees the RAM tier; the HTTP
// endpoints stop last. It has no deadline (see cache.Service.Close); Run
// bounds each step by Spec.ShutdownTimeout.
// Close after Close, or after Run returned, does nothing.
func (m *Manager) Close() {
	if m.closed.Swap(true) {
		return
	}
	m.stopOperator()
	m.CloseSessions()
	m.stopCluster()
	m.stopDispatcher()
	m.closeEngine()
	m.stopHTTP()
}

// CloseSessions closes the bootstrap server and every session; /health
// and /readyz read "draining" from then on, and systemd hears STOPPING=1.
func (m *Manager) CloseSessions() {
	m.ready.set(PhaseDraining)
	m.Server.Close()
}

// StopDispatcher asks the dispatcher to stop; Done is closed once it (and
// with it the cache service) stopped; then call Free.
func (m *Manager) StopDispatcher() <-chan struct{} {
	m.Dispatcher.Stop()
	return m.Dispatcher.Done()
}

// Free releases the dispatcher's poll loop and doorbell after it stopped,
// and stops the operator socket if Run or Close did not.
func (m *Manager) Free() {
	m.stopOperator()
	m.Dispatcher.Close()
	if m.discover != nil {
		m.discover.Close()
	}
}

// openDiscovery is the bootstrap server's Config.Discovery: the
// namespace's discovery index, made on first use, with one reference taken
// (Config.ReleaseDiscovery gives it back).
func (m *Manager) openDiscovery(ns, as abi.Namespace) (*os.File, uint64, uint64, error) {
	t, err := m.discover.OpenAs(ns, as)
	if err != nil {
		return nil, 0, 0, err
	}
	return t.File(), t.Bytes(), t.Buckets(), nil
}

func (m *Manager) stopDispatcher() {
	<-m.StopDispatcher()
	m.Free()
}
