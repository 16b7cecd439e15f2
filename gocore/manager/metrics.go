package manager

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/buildinfo"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/catalog"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/kvevents"
	"github.com/orbitkv/orbitkv/gocore/peer"
	"github.com/orbitkv/orbitkv/gocore/transfer"
)

// opDurations is the cache's OpObserver: one histogram per cache.Op, each
// resolved once (WithLabelValues at start) so that recording a sample on
// the dispatcher goroutine allocates nothing.
type opDurations struct {
	vec *prometheus.HistogramVec
	obs [cache.NumOps]prometheus.Observer
}

// opDurationBuckets are the classic buckets, seconds: the channel's round
// trip is about a microsecond, an SSD-bound restore or a large publish
// tens of milliseconds.
var opDurationBuckets = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 1}

func newOpDurations() *opDurations {
	d := &opDurations{vec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "orbitkv_op_duration_seconds",
		Help: "Seconds the Manager took to answer a cache operation, from the dispatcher reading the request to its response, " +
			"for one operation in 8 of each kind (every 8th: _count is an eighth of the operations; the per-command counters count all): " +
			"query (QueryBundle; a ticket's submission), poll (each Poll of a ticket is one sample, so a ticket answered Loading then Ok is two), " +
			"claim, publish (until its copy completed and the deferred response was posted), " +
			"restore (until the Restore was accepted; the copy completes later and RestorePoll, not measured, sees it), release.",
		Buckets:                         opDurationBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"op"})}
	for op := range cache.NumOps {
		d.obs[op] = d.vec.WithLabelValues(op.String())
	}
	return d
}

// ObserveOp records one sample (cache.OpObserver); dispatcher goroutine.
func (d *opDurations) ObserveOp(op cache.Op, took time.Duration) {
	if op < cache.NumOps {
		d.obs[op].Observe(took.Seconds())
	}
}

// ssdDurations is the SSD tier's ssd.IOObserver: the read and the write
// histograms, resolved once at start.
type ssdDurations struct {
	vec         *prometheus.HistogramVec
	read, write prometheus.Observer
}

// ssdDurationBuckets are seconds from an NVMe read of a few KiB (10 µs)
// to a busy HDD's seek queue (1 s).
var ssdDurationBuckets = []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1}

func newSSDDurations() *ssdDurations {
	d := &ssdDurations{vec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "orbitkv_ssd_io_duration_seconds",
		Help: "Seconds each system call on the SSD tier's data file took, every one counted, by op: read (a preadv of a slot's header and block: " +
			"prefetches, and the verification reads at start) and write (a pwritev of a demoted block); the fdatasync of each commit is not included.",
		Buckets: ssdDurationBuckets,
	}, []string{"op"})}
	d.read, d.write = d.vec.WithLabelValues("read"), d.vec.WithLabelValues("write")
	return d
}

// ObserveIO records one system call (ssd.IOObserver); the SSD tier's I/O
// goroutines.
func (d *ssdDurations) ObserveIO(write bool, took time.Duration) {
	if write {
		d.write.Observe(took.Seconds())
	} else {
		d.read.Observe(took.Seconds())
	}
}

// snapshot is everything one scrape emits, read once.
type snapshot struct {
	ready                              bool
	sessions                           int
	pidRefused                         uint64 // sessions refused for --max-sessions-per-pid
	requests, invalid, parks, rescue   uint64
	ops                                channel.OpCounts
	boot                               bootstrap.SessionCounts
	cache                              cache.Stats
	catalog                            catalog.Stats        // zero until the catalog is open
	peer                               peer.Stats           // zero until peer control serves
	transfer                           transfer.ServerStats // the data port's; zero until peer control serves
	uploadsOK, uploadsFailed           uint64               // the Pyroscope push's; 0 when off
	eventBlocks                        int                  // block records the events' Tracker keeps; 0 when off
	eventStreams                       []kvevents.StreamStats
	unannounced                        uint64
	lookupOK, lookupInvalid, lookupOff uint64 // POST /v1/lookup's requests
}

// series is one metric drawn from a snapshot.
type series struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*snapshot) float64
}

// collector is the Manager's one prometheus.Collector: each scrape takes
// one snapshot (cache.Service.Stats once, the dispatcher's counters once,
// the session count once) and emits every series from it, so figures of
// one scrape are consistent with each other; the op-duration histograms
// and the constant series (build_info, hugepages) are emitted beside them.
type collector struct {
	h        *health
	series   []series
	ops      *opDurations  // nil without a cache
	ssdIO    *ssdDurations // nil without an SSD tier
	opsDesc  *prometheus.Desc
	constant []prometheus.Metric
}

func (c *collector) take() snapshot {
	h := c.h
	phase, _ := h.ready.get()
	s := snapshot{
		ready: phase == PhaseServing, sessions: h.table.Len(), pidRefused: h.table.PIDRefusals(),
		requests: h.disp.Requests(), invalid: h.disp.Invalid(), parks: h.disp.Parks(), rescue: h.disp.LostRings(),
	}
	h.disp.Operations(&s.ops)
	if h.boot != nil {
		s.boot = h.boot.SessionCounts()
	}
	if h.svc != nil {
		s.cache = h.svc.Stats()
	}
	if cl := h.cluster; cl != nil {
		cs := cl.Stats()
		s.catalog, s.peer, s.transfer = cs.Catalog, cs.Peer, cs.Transfer
	}
	if h.prof != nil {
		if p := h.prof.Load(); p != nil {
			s.uploadsOK, s.uploadsFailed = p.Uploads()
		}
	}
	if l := h.lookup; l != nil {
		s.lookupOK, s.lookupInvalid, s.lookupOff = l.counts.OK.Load(), l.counts.Invalid.Load(), l.counts.Off.Load()
		if l.events != nil {
			s.eventBlocks, s.eventStreams = l.events.Stats()
			s.unannounced = l.events.Unannounced.Load()
		}
	}
	return s
}

// Describe sends every series' Desc (prometheus.Collector).
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, s := range c.series {
		ch <- s.desc
	}
	for _, m := range c.constant {
		ch <- m.Desc()
	}
	ch <- c.opsDesc
	if c.ops != nil {
		c.ops.vec.Describe(ch)
	}
	if c.ssdIO != nil {
		c.ssdIO.vec.Describe(ch)
	}
}

// Collect sends every series from one snapshot (prometheus.Collector).
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	snap := c.take()
	for _, s := range c.series {
		ch <- prometheus.MustNewConstMetric(s.desc, s.kind, s.value(&snap))
	}
	for _, m := range c.constant {
		ch <- m
	}
	c.collectOperations(ch, &snap)
	if c.ops != nil {
		c.ops.vec.Collect(ch)
	}
	if c.ssdIO != nil {
		c.ssdIO.vec.Collect(ch)
	}
}

// newCollector builds the series of the Manager h describes; ops is the
// cache's observer (nil without a cache).
func newCollector(h *health, ops *opDurations) *collector {
	c := &collector{h: h, ops: ops, ssdIO: h.ssdIO,
		opsDesc: prometheus.NewDesc("orbitkv_operations_total", operationsHelp, []string{"op", "result"}, nil)}
	add := func(kind prometheus.ValueType, name, help string, f func(*snapshot) float64, labels ...string) {
		c.series = append(c.series, series{desc: prometheus.NewDesc(name, help, nil, labelPairs(labels)), kind: kind, value: f})
	}
	gauge := func(name, help string, f func(*snapshot) float64) { add(prometheus.GaugeValue, name, help, f) }
	counter := func(name, help string, f func(*snapshot) float64) { add(prometheus.CounterValue, name, help, f) }
	u := func(f func(*snapshot) uint64) func(*snapshot) float64 {
		return func(s *snapshot) float64 { return float64(f(s)) }
	}
	gauge("orbitkv_ready", "1 while the Manager serves, 0 while it starts or drains.", func(s *snapshot) float64 {
		if s.ready {
			return 1
		}
		return 0
	})
	gauge("orbitkv_sessions", "Live sessions.", func(s *snapshot) float64 { return float64(s.sessions) })
	counter("orbitkv_sessions_refused_per_pid_total", "Bootstraps refused because the peer process already held --max-sessions-per-pid live sessions.", func(s *snapshot) float64 { return float64(s.pidRefused) })
	counter("orbitkv_sessions_opened_total", "Sessions the bootstrap socket handed out (the OK reply sent).", u(func(s *snapshot) uint64 { return s.boot.Opened }))
	const refusedHelp = "Bootstrap connections refused a session, by reason: peer_credentials (SO_PEERCRED failed), tenant (no tenant matches the peer, or its tenant holds its session share), " +
		"uid (without tenants, a peer of another uid), hello_incomplete (no whole hello within --hello-timeout, or the peer closed mid-hello), hello_invalid (a refused hello field), " +
		"max_sessions (every slot in use), max_sessions_per_pid (--max-sessions-per-pid), draining (orbitkvctl drain), internal (the session could not be made or its reply sent). " +
		"A connection closed before its first byte (a liveness probe) is not counted."
	for i, reason := range bootstrap.RefusalReasons {
		add(prometheus.CounterValue, "orbitkv_sessions_refused_total", refusedHelp, u(func(s *snapshot) uint64 { return s.boot.Refused[i] }), "reason", reason)
	}
	counter("orbitkv_channel_requests_total", "Channel requests handled by the dispatcher.", u(func(s *snapshot) uint64 { return s.requests }))
	counter("orbitkv_channel_invalid_requests_total", "Channel requests refused as invalid, stale-session or stale-generation.", u(func(s *snapshot) uint64 { return s.invalid }))
	counter("orbitkv_channel_parks_total", "Times the dispatcher slept for lack of requests; the next request after each pays a futex wakeup.", u(func(s *snapshot) uint64 { return s.parks }))
	counter("orbitkv_channel_lost_rings_total", "Requests found only by the periodic rescan of request lines because their doorbell ring was erased (a session wrote the shared doorbell); each waited up to 100 ms.", u(func(s *snapshot) uint64 { return s.rescue }))
	const uploadsHelp = "Profile uploads to Pyroscope (--pyroscope-url) the server accepted (result ok) or that failed (no answer or another status than 200: the profile was dropped); 0 without the push."
	add(prometheus.CounterValue, "orbitkv_profiling_uploads_total", uploadsHelp, u(func(s *snapshot) uint64 { return s.uploadsOK }), "result", "ok")
	add(prometheus.CounterValue, "orbitkv_profiling_uploads_total", uploadsHelp, u(func(s *snapshot) uint64 { return s.uploadsFailed }), "result", "failed")
	build := buildinfo.Get()
	failpoints := "false"
	if build.Failpoints {
		failpoints = "true"
	}
	c.constant = append(c.constant, prometheus.MustNewConstMetric(prometheus.NewDesc("orbitkv_build_info",
		"1; the labels name the build: version (git describe), commit, go (the Go version), failpoints (true only in a test build).",
		nil, prometheus.Labels{"version": build.Version, "commit": build.Commit, "go": build.GoVersion, "failpoints": failpoints}),
		prometheus.GaugeValue, 1))
	if h.svc != nil {
		c.addCache(gauge, counter, u, add)
	}
	if h.cluster != nil {
		addCluster(gauge, counter, u, add)
	}
	if h.lookup != nil {
		addEvents(h.lookup, gauge, counter, u, add)
	}
	return c
}

// addEvents adds POST /v1/lookup's request counter and, while the KV
// events are on, the streams' series: one per stream, labelled by its
// name (the tenant domain's; "node" for the one stream without tenants),
// and the Tracker's block records.
func addEvents(l *lookups, gauge, counter seriesFunc, u uintFunc, add addFunc) {
	const lookupHelp = "POST /v1/lookup requests, by result: ok (answered), invalid (400: a refused body; the error names the field), events_off (409: --kv-events is off)."
	add(prometheus.CounterValue, "orbitkv_kv_lookup_requests_total", lookupHelp, u(func(s *snapshot) uint64 { return s.lookupOK }), "result", "ok")
	add(prometheus.CounterValue, "orbitkv_kv_lookup_requests_total", lookupHelp, u(func(s *snapshot) uint64 { return s.lookupInvalid }), "result", "invalid")
	add(prometheus.CounterValue, "orbitkv_kv_lookup_requests_total", lookupHelp, u(func(s *snapshot) uint64 { return s.lookupOff }), "result", "events_off")
	if l.events == nil {
		return
	}
	gauge("orbitkv_kv_event_blocks", "Blocks whose record the KV events keep: held on a medium (RAM or SSD) and published with a record.", func(s *snapshot) float64 { return float64(s.eventBlocks) })
	counter("orbitkv_kv_event_unannounced_blocks_total", "Blocks stored on a medium without a block record (published without records, or recovered from SSD without one): never announced.", u(func(s *snapshot) uint64 { return s.unannounced }))
	_, streams := l.events.Stats() // the streams are fixed at start
	for i, st := range streams {
		name := st.Name
		if name == "" {
			name = "node"
		}
		ss := func(f func(kvevents.StreamStats) uint64) func(*snapshot) float64 {
			return func(s *snapshot) float64 {
				if i >= len(s.eventStreams) {
					return 0
				}
				return float64(f(s.eventStreams[i]))
			}
		}
		add(prometheus.CounterValue, "orbitkv_kv_events_total", "KV events published (BlockStored, BlockRemoved, AllBlocksCleared), by stream.", ss(func(s kvevents.StreamStats) uint64 { return s.Events }), "stream", name)
		add(prometheus.CounterValue, "orbitkv_kv_event_batches_total", "KV event batches (ZeroMQ messages, one sequence number each) published, by stream.", ss(func(s kvevents.StreamStats) uint64 { return s.Batches }), "stream", name)
		add(prometheus.CounterValue, "orbitkv_kv_events_dropped_total", "KV events dropped because the stream's queue was full (--kv-events-queue); each loss is followed by a resync.", ss(func(s kvevents.StreamStats) uint64 { return s.Overflows }), "stream", name)
		add(prometheus.CounterValue, "orbitkv_kv_event_resyncs_total", "Resyncs after dropped events: AllBlocksCleared, then every block held, announced again.", ss(func(s kvevents.StreamStats) uint64 { return s.Resyncs }), "stream", name)
		add(prometheus.GaugeValue, "orbitkv_kv_event_subscribers", "Connections to the stream's event (PUB) socket now.", ss(func(s kvevents.StreamStats) uint64 { return s.Subscribers }), "stream", name)
		add(prometheus.CounterValue, "orbitkv_kv_event_subscribers_dropped_total", "Subscribers and replay clients disconnected for falling behind (more queued messages than the stream allows).", ss(func(s kvevents.StreamStats) uint64 { return s.SubscribersDropped }), "stream", name)
	}
}

// addCluster adds the catalog's and peer control's series (a node in a
// cluster only): membership, advertising, the Watch-fed index and the
// transfers this node serves, by how they ended.
func addCluster(gauge, counter seriesFunc, u uintFunc, add addFunc) {
	cat := func(f func(catalog.Stats) uint64) func(*snapshot) float64 {
		return func(s *snapshot) float64 { return float64(f(s.catalog)) }
	}
	gauge("orbitkv_catalog_registered", "1 while this node holds a live membership lease in etcd, 0 while it registers again (etcd unreachable, lease lost).", cat(func(s catalog.Stats) uint64 {
		if s.Registered {
			return 1
		}
		return 0
	}))
	counter("orbitkv_catalog_register_errors_total", "Failed registration attempts (etcd unreachable); retried in the background.", cat(func(s catalog.Stats) uint64 { return s.RegisterErrors }))
	gauge("orbitkv_catalog_members", "Live members (other nodes and this one) the Watch-fed index knows.", cat(func(s catalog.Stats) uint64 { return s.Members }))
	gauge("orbitkv_catalog_advertised_blocks", "Blocks this node advertises as their owner (written to etcd or about to be).", cat(func(s catalog.Stats) uint64 { return s.AdvertisedBlocks }))
	gauge("orbitkv_catalog_pending_shards", "Inventory shards whose changes etcd does not have yet (0 once advertising has caught up).", cat(func(s catalog.Stats) uint64 { return s.PendingShards }))
	counter("orbitkv_catalog_flushes_total", "Inventory transactions written to etcd.", cat(func(s catalog.Stats) uint64 { return s.Flushes }))
	counter("orbitkv_catalog_flush_errors_total", "Inventory transactions that failed (their shards are retried).", cat(func(s catalog.Stats) uint64 { return s.FlushErrors }))
	gauge("orbitkv_catalog_indexed_entries", "(block, owner) pairs in the Watch-fed index.", cat(func(s catalog.Stats) uint64 { return s.IndexedEntries }))
	pc := func(f func(peer.Stats) uint64) func(*snapshot) float64 {
		return func(s *snapshot) float64 { return float64(f(s.peer)) }
	}
	counter("orbitkv_peer_transfers_opened_total", "Transfers peer control opened for peers (blocks pinned, a segment registered).", pc(func(s peer.Stats) uint64 { return s.Opened }))
	counter("orbitkv_peer_epoch_mismatches_total", "OpenTransfer requests for another epoch of this node (refused FAILED_PRECONDITION).", pc(func(s peer.Stats) uint64 { return s.EpochMismatches }))
	const endedHelp = "Transfers served to peers that ended, by how: released (ReleaseTransfer), expired (their lease's deadline), dropped (the requester's connection went), closed (this node stopped)."
	for _, e := range []struct {
		how string
		f   func(peer.Stats) uint64
	}{
		{"released", func(s peer.Stats) uint64 { return s.Released }},
		{"expired", func(s peer.Stats) uint64 { return s.Expired }},
		{"dropped", func(s peer.Stats) uint64 { return s.Dropped }},
		{"closed", func(s peer.Stats) uint64 { return s.ClosedAtShutdown }},
	} {
		add(prometheus.CounterValue, "orbitkv_peer_transfers_ended_total", endedHelp, pc(e.f), "how", e.how)
	}
	gauge("orbitkv_peer_transfers_open", "Transfers open now that this node serves to peers.", pc(func(s peer.Stats) uint64 { return s.Open }))
	counter("orbitkv_peer_handshakes_evicted_total", "Peer control connections closed in their TLS handshake, the oldest of the busiest host, to admit a new one (--peer-max-handshakes, --peer-max-handshakes-per-host or --peer-max-conns reached).", pc(func(s peer.Stats) uint64 { return s.HandshakesEvicted }))
	gauge("orbitkv_peer_control_conns", "Peer control (gRPC) connections open now, TLS handshakes included; at most --peer-max-conns.", pc(func(s peer.Stats) uint64 { return s.OpenConns }))
	ts := func(f func(transfer.ServerStats) uint64) func(*snapshot) float64 {
		return func(s *snapshot) float64 { return float64(f(s.transfer)) }
	}
	gauge("orbitkv_transfer_data_conns", "Data connections to this node's transfer port open now.", ts(func(s transfer.ServerStats) uint64 { return uint64(s.Conns) }))
	gauge("orbitkv_transfer_segments", "Segments (transfers' block runs) readable on the transfer port now.", ts(func(s transfer.ServerStats) uint64 { return uint64(s.Segments) }))
	counter("orbitkv_transfer_reads_total", "READs on the transfer port answered with DATA.", ts(func(s transfer.ServerStats) uint64 { return s.Reads }))
	counter("orbitkv_transfer_sent_bytes_total", "Payload bytes the transfer port sent in DATA frames.", ts(func(s transfer.ServerStats) uint64 { return s.Bytes }))
	counter("orbitkv_transfer_refused_reads_total", "READs on the transfer port answered with ERROR (unknown segment or capability, out of range, malformed).", ts(func(s transfer.ServerStats) uint64 { return s.Refused }))
	const closedHelp = "Transfer port connections closed by a limit, by which: max_conns (transfer.ServerSpec.MaxConns, 256 by default, open at accept), max_conns_per_host (--transfer-max-conns-per-host from one host), max_refusals (refusals in a row with no DATA), unproven_evicted (a connection with no READ admitted yet, the oldest, closed to admit a new one), prove_timeout (no READ admitted within --transfer-prove-timeout of accept)."
	for _, e := range []struct {
		why string
		f   func(transfer.ServerStats) uint64
	}{
		{"max_conns", func(s transfer.ServerStats) uint64 { return s.OverConns }},
		{"max_conns_per_host", func(s transfer.ServerStats) uint64 { return s.OverHost }},
		{"max_refusals", func(s transfer.ServerStats) uint64 { return s.OverRefusals }},
		{"unproven_evicted", func(s transfer.ServerStats) uint64 { return s.Evicted }},
		{"prove_timeout", func(s transfer.ServerStats) uint64 { return s.ProveTimeouts }},
	} {
		add(prometheus.CounterValue, "orbitkv_transfer_conns_limited_total", closedHelp, ts(e.f), "limit", e.why)
	}
}

// operationsHelp is orbitkv_operations_total's help.
const operationsHelp = "Channel requests, every one counted, by op (the command: query is QueryBundle, poll, claim, cancel is CancelQuery, publish, restore, restore_poll, release, ping, shutdown; other: an unknown code, answered invalid) " +
	"and result (the status answered: ok, loading, miss, candidates, unadmitted, invalid, stale_session, stale_generation, timeout, internal, unsupported; " +
	"unanswered: a deferred Publish whose session ended before its copy completed). A Publish counts when its copy completed and the answer was posted. " +
	"Every op with every status is exposed from start (other only with invalid, unanswered only with publish, or once counted)."

// collectOperations sends the series of orbitkv_operations_total from
// snap: every op but other with every status, other with invalid and
// publish with unanswered always (at 0 until counted), any other pair
// once it counted one.
func (c *collector) collectOperations(ch chan<- prometheus.Metric, snap *snapshot) {
	for op := range channel.NumOps {
		for res := range channel.NumResults {
			n := snap.ops[op][res]
			if n == 0 && !alwaysExposed(op, res) {
				continue
			}
			ch <- prometheus.MustNewConstMetric(c.opsDesc, prometheus.CounterValue, float64(n), channel.OpNames[op], channel.ResultNames[res])
		}
	}
}

// alwaysExposed reports whether orbitkv_operations_total's series for
// (op, res) is exposed at 0.
func alwaysExposed(op, res int) bool {
	switch {
	case op == channel.OpOther:
		return res == int(abi.StatusInvalid)
	case res == channel.ResultUnanswered:
		return op == int(abi.CmdPublish)
	}
	return true
}

// labelPairs turns "k", "v", ... into constant labels (nil for none).
func labelPairs(kv []string) prometheus.Labels {
	if len(kv) == 0 {
		return nil
	}
	l := prometheus.Labels{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[kv[i]] = kv[i+1]
	}
	return l
}

type (
	seriesFunc = func(name, help string, f func(*snapshot) float64)
	addFunc    = func(kind prometheus.ValueType, name, help string, f func(*snapshot) float64, labels ...string)
	uintFunc   = func(f func(*snapshot) uint64) func(*snapshot) float64
)

// addCache adds the cache's series: RAM tier fill, eviction rate, lease
// and pin counts, copy throughput, lookups per tier, the SSD tier's (when
// it has one) and whether the RAM tier got hugepages.
func (c *collector) addCache(gauge, counter seriesFunc, u uintFunc, add addFunc) {
	cs := func(f func(cache.Stats) uint64) func(*snapshot) float64 {
		return func(s *snapshot) float64 { return float64(f(s.cache)) }
	}
	gauge("orbitkv_ram_blocks", "Sealed blocks resident in the RAM tier.", cs(func(s cache.Stats) uint64 { return s.Blocks }))
	gauge("orbitkv_ram_used_bytes", "Bytes of RAM tier chunks holding blocks (sealed or publishing).", cs(func(s cache.Stats) uint64 { return s.UsedBytes }))
	gauge("orbitkv_ram_capacity_bytes", "Usable bytes of the RAM tier.", cs(func(s cache.Stats) uint64 { return s.CapacityBytes }))
	gauge("orbitkv_leases", "Live leases.", cs(func(s cache.Stats) uint64 { return s.Leases }))
	gauge("orbitkv_block_pins", "Block pins held by leases and in-flight copies.", cs(func(s cache.Stats) uint64 { return s.Pins }))
	gauge("orbitkv_reserved_bytes", "Bytes of the lease budget in use: reserved by live leases and by restores in flight.", cs(func(s cache.Stats) uint64 { return s.ReservedBytes }))
	budget := float64(c.h.svc.LeaseBudget())
	gauge("orbitkv_lease_budget_capacity_bytes", "Bytes leases and restores in flight may reserve in all (--lease-budget, or the RAM tier's capacity when 0); orbitkv_reserved_bytes is the part in use. Fixed at start.",
		func(*snapshot) float64 { return budget })
	gauge("orbitkv_operations_in_progress", "Operations in progress now: copies in flight, restores awaiting RestorePoll, live tickets, SSD reads and peer fetches (orbitkv_operations_total counts requests).", cs(func(s cache.Stats) uint64 { return s.Operations }))
	counter("orbitkv_evictions_total", "Blocks evicted from the RAM tier.", cs(func(s cache.Stats) uint64 { return s.Evictions }))
	counter("orbitkv_published_blocks_total", "Blocks published (copied in and sealed).", cs(func(s cache.Stats) uint64 { return s.Published }))
	counter("orbitkv_published_bytes_total", "Bytes copied by publishes.", cs(func(s cache.Stats) uint64 { return s.PublishBytes }))
	counter("orbitkv_restored_blocks_total", "Blocks restored into engine buffers.", cs(func(s cache.Stats) uint64 { return s.Restored }))
	counter("orbitkv_restored_bytes_total", "Bytes copied by restores.", cs(func(s cache.Stats) uint64 { return s.RestoreBytes }))
	counter("orbitkv_queries_total", "QueryBundle requests served.", cs(func(s cache.Stats) uint64 { return s.Queries }))
	counter("orbitkv_query_hit_blocks_total", "Blocks leased by queries (prefix hits).", cs(func(s cache.Stats) uint64 { return s.QueryHits }))
	counter("orbitkv_unadmitted_total", "Publishes and queries refused for capacity.", cs(func(s cache.Stats) uint64 { return s.Unadmitted }))
	counter("orbitkv_query_server_seconds_total", "Dispatcher seconds spent serving untracked QueryBundles (decode, lookups, lease); divide by orbitkv_query_hashes_total for the cost per hash.",
		func(s *snapshot) float64 { return time.Duration(s.cache.QueryNanos).Seconds() })
	counter("orbitkv_query_hashes_total", "Hashes carried by untracked QueryBundles.", cs(func(s cache.Stats) uint64 { return s.QueryHashes }))
	counter("orbitkv_index_blocks_by_address_total", "Blocks the index's chain lookups found by address, as the slab-mate after the chain's previous block, without a table probe: chains published in order are found this way. Counted per lookup (queries, each lookup of a ticket, peer transfer pins); restores add nothing.", cs(func(s cache.Stats) uint64 { return s.ByAddress }))
	gauge("orbitkv_tickets", "Live query tickets (abi.h \"Query tickets\").", cs(func(s cache.Stats) uint64 { return s.Tickets }))
	gauge("orbitkv_tickets_budget_waiting", "Tickets waiting for lease byte budget (--lease-budget).", cs(func(s cache.Stats) uint64 { return s.BudgetWaiting }))
	counter("orbitkv_operations_expired_total", "Tickets and unpolled restore results expired (--op-expiry); late polls answer Timeout.", cs(func(s cache.Stats) uint64 { return s.Expired }))
	counter("orbitkv_leases_revoked_total", "Leases revoked because their holder started no Restore on them, saw none land and did not Release them within --lease-idle-timeout; later Restores and Releases naming them answer Timeout.", cs(func(s cache.Stats) uint64 { return s.LeasesRevoked }))
	counter("orbitkv_restore_buffer_holes_total", "Restores refused because their destination buffer's memfd had pages missing (punched after registration): the copy would have allocated them in the Manager's memory.", cs(func(s cache.Stats) uint64 { return s.BufferHoles }))
	counter("orbitkv_discoveries_total", "Discovery queries answered (Candidates, no lease).", cs(func(s cache.Stats) uint64 { return s.Discoveries }))
	counter("orbitkv_warmups_skipped_total", "Warm-ups skipped for the warmup budget (--warmup-budget).", cs(func(s cache.Stats) uint64 { return s.WarmupSkipped }))
	counter("orbitkv_lookups_total", "Logical lookups (queries; tickets except recovery reads and warm-ups).", cs(func(s cache.Stats) uint64 { return s.Lookups }))
	gauge("orbitkv_lookups_distinct", "Distinct logical lookups since start, HyperLogLog estimate (~1% error); lookups_total / this = reuse.", cs(func(s cache.Stats) uint64 { return s.DistinctLookups }))
	const lookupHelp = "Blocks looked up, by tier and result. ram: every lookup of a chain (queries, tickets each time they resolve, discovery); its resident prefix is hits, the rest misses. " +
		"ssd: lookups that consult the SSD tier past a RAM miss; blocks whose read the lookup started are hits, the rest misses; a tail already loading counts nothing. " +
		"peer: lookups that consult the peer tier past the RAM and SSD misses (ReadTail only, never warm-ups); blocks fetched from a peer, checked and sealed are hits, the rest misses (no live owner advertises them, past a fetched run, a failed, late or corrupt fetch); a chain already being fetched counts nothing. Hit ratio of a tier: hit / (hit + miss)."
	lookups := []struct {
		tier, result string
		f            func(cache.Stats) uint64
	}{
		{"ram", "hit", func(s cache.Stats) uint64 { return s.LookupBlocks.RAMHit }},
		{"ram", "miss", func(s cache.Stats) uint64 { return s.LookupBlocks.RAMMiss }},
		{"ssd", "hit", func(s cache.Stats) uint64 { return s.LookupBlocks.SSDHit }},
		{"ssd", "miss", func(s cache.Stats) uint64 { return s.LookupBlocks.SSDMiss }},
		{"peer", "hit", func(s cache.Stats) uint64 { return s.Peer.LookupHit }},
		{"peer", "miss", func(s cache.Stats) uint64 { return s.Peer.LookupMiss }},
	}
	for _, l := range lookups {
		add(prometheus.CounterValue, "orbitkv_lookup_blocks_total", lookupHelp, cs(l.f), "tier", l.tier, "result", l.result)
	}
	st := c.h.svc.Stats()
	if st.SSD.On {
		gauge("orbitkv_ssd_blocks", "Blocks resident on the SSD tier.", cs(func(s cache.Stats) uint64 { return s.SSD.Blocks }))
		gauge("orbitkv_ssd_used_bytes", "Bytes of SSD tier slots in use.", cs(func(s cache.Stats) uint64 { return s.SSD.UsedBytes }))
		gauge("orbitkv_ssd_capacity_bytes", "Bytes of the SSD tier's data file.", cs(func(s cache.Stats) uint64 { return s.SSD.CapacityBytes }))
		gauge("orbitkv_ssd_recovered_blocks", "Blocks the SSD tier's index gave back at start (warm restart).", cs(func(s cache.Stats) uint64 { return s.SSD.Recovered }))
		counter("orbitkv_ssd_writes_total", "Blocks demoted from RAM to SSD (durable).", cs(func(s cache.Stats) uint64 { return s.SSD.Writes }))
		counter("orbitkv_ssd_reads_total", "Blocks read back from SSD and verified.", cs(func(s cache.Stats) uint64 { return s.SSD.Reads }))
		counter("orbitkv_ssd_corrupt_total", "SSD blocks that failed their integrity check (slot header, or its HMAC-SHA256 over header and data): dropped and treated as misses, never served.", cs(func(s cache.Stats) uint64 { return s.SSD.Corrupt }))
		counter("orbitkv_ssd_not_admitted_total", "Evicted blocks the SSD admission rule declined.", cs(func(s cache.Stats) uint64 { return s.SSD.NotAdmitted }))
		counter("orbitkv_ssd_evictions_total", "Blocks the SSD tier evicted (FIFO) to make room.", cs(func(s cache.Stats) uint64 { return s.SSD.Evictions }))
		counter("orbitkv_ssd_demote_skipped_total", "Evicted blocks not demoted: no staging buffer, larger than a slot, or the tier busy.", cs(func(s cache.Stats) uint64 { return s.SSD.DemoteSkipped }))
		counter("orbitkv_ssd_prefetch_total", "Blocks prefetched from SSD into RAM for a query.", cs(func(s cache.Stats) uint64 { return s.SSD.Prefetches }))
		counter("orbitkv_ssd_prefetch_failures_total", "Prefetches that failed (corrupt or I/O error) and became misses.", cs(func(s cache.Stats) uint64 { return s.SSD.PrefetchFails }))
	}
	gauge("orbitkv_transfer_pins", "Transfers this node serves to peers whose blocks are pinned (counted in orbitkv_block_pins).", cs(func(s cache.Stats) uint64 { return s.Transfers }))
	gauge("orbitkv_transfer_pinned_blocks", "Blocks pinned for transfers to peers.", cs(func(s cache.Stats) uint64 { return s.TransferPins }))
	if st.Peer.On {
		gauge("orbitkv_ram_replica_blocks", "Sealed RAM blocks fetched from peers (replicas: evicted first, not advertised).", cs(func(s cache.Stats) uint64 { return s.Replicas }))
		counter("orbitkv_peer_fetches_total", "Fetches of block runs from peers started.", cs(func(s cache.Stats) uint64 { return s.Peer.Fetches }))
		counter("orbitkv_peer_fetch_failures_total", "Peer fetches that landed fewer blocks than asked (failed, late, corrupt or a shorter run): the rest were misses.", cs(func(s cache.Stats) uint64 { return s.Peer.Fails }))
		counter("orbitkv_peer_fetched_blocks_total", "Blocks fetched from peers, checked (CRC32C) and sealed.", cs(func(s cache.Stats) uint64 { return s.Peer.Blocks }))
		counter("orbitkv_peer_fetched_bytes_total", "Bytes of the blocks fetched from peers and sealed.", cs(func(s cache.Stats) uint64 { return s.Peer.FetchedBytes }))
		counter("orbitkv_peer_fetch_seconds_total", "Seconds of the peer fetches that landed blocks, from the lookup to the seal, summed; fetched bytes / this = the transfer rate.",
			func(s *snapshot) float64 { return time.Duration(s.cache.Peer.FetchNanos).Seconds() })
		counter("orbitkv_peer_corrupt_total", "Blocks from peers that failed their CRC32C check: discarded, misses, never served.", cs(func(s cache.Stats) uint64 { return s.Peer.Corrupt }))
	}
	counter("orbitkv_cache_invalid_requests_total", "Cache requests refused as invalid.", cs(func(s cache.Stats) uint64 { return s.Invalid }))
	// The tier's backing is fixed at start: one series, its value constant.
	huge := 0.0
	if st.RAMHuge {
		huge = 1
	}
	c.constant = append(c.constant, prometheus.MustNewConstMetric(prometheus.NewDesc("orbitkv_ram_hugepages",
		"1 when the RAM tier is backed by 2 MiB hugetlb pages, 0 when not; fallback is why not, one of "+strings.Join(hugepageReasons, ", ")+
			" (none when 1); the start log's \"ram tier ready\" line has the whole sentence.",
		nil, prometheus.Labels{"fallback": hugepageReason(st.RAMHuge, st.RAMFallback)}), prometheus.GaugeValue, huge))
}

// hugepageReasons are the values of orbitkv_ram_hugepages' fallback label.
var hugepageReasons = []string{"none", "off", "no_pool", "no_free_pages", "memfd_refused", "allocation_failed", "other"}

// hugepageReason maps the RAM tier's fallback sentence
// (hugepages.Arena.Fallback) to a label value of hugepageReasons.
func hugepageReason(huge bool, fallback string) string {
	if huge {
		return "none"
	}
	reason, _, _ := strings.Cut(fallback, ";") // the hugetlb failure; the shmem part follows
	switch {
	case strings.HasPrefix(reason, "mode off"):
		return "off"
	case strings.Contains(reason, "no 2 MiB hugepage pool"):
		return "no_pool"
	case strings.Contains(reason, "free 2 MiB hugepages"):
		return "no_free_pages"
	case strings.Contains(reason, "memfd_create"):
		return "memfd_refused"
	case strings.Contains(reason, "ftruncate"), strings.Contains(reason, "fallocate"), strings.Contains(reason, "mmap"):
		return "allocation_failed"
	}
	return "other"
}
