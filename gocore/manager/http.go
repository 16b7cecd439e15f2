package manager

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
)

// health answers Health frames (the Manager-wide part) and GET /health.
type health struct {
	disp      *channel.Dispatcher
	svc       *cache.Service // nil without a cache
	table     *session.Table
	mode      channel.PollMode
	version   string
	serviceID [16]byte
	started   time.Time
	draining  atomic.Bool
}

// reply fills the Manager-wide fields; bootstrap adds epoch, sessions, pid.
func (h *health) reply() *lifecyclepb.HealthReply {
	st := "serving"
	if h.draining.Load() {
		st = "draining"
	}
	r := &lifecyclepb.HealthReply{
		Status: st, UptimeNs: uint64(time.Since(h.started)), Version: h.version,
		PollMode: h.mode.String(), Requests: h.disp.Requests(),
	}
	if svc := h.svc; svc != nil {
		cs := svc.Stats()
		r.Blocks, r.RamUsedBytes, r.RamCapacityBytes = cs.Blocks, cs.UsedBytes, cs.CapacityBytes
		r.Leases, r.Pins, r.ReservedBytes, r.Operations, r.Evictions = cs.Leases, cs.Pins, cs.ReservedBytes, cs.Operations, cs.Evictions
		r.Tickets, r.Lookups, r.DistinctLookups = cs.Tickets, cs.Lookups, cs.DistinctLookups
	}
	return r
}

// httpServer serves /health, /metrics and /debug/pprof on a loopback port.
type httpServer struct {
	srv  *http.Server
	addr string // the address bound
}

// checkLoopback refuses an HTTP address that is not host:port on a
// loopback host: the endpoints are unauthenticated.
func checkLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	ip := net.ParseIP(host)
	_, perr := strconv.ParseUint(port, 10, 16)
	ok := err == nil && perr == nil && (host == "localhost" || (ip != nil && ip.IsLoopback()))
	return limit.Check(ok, "manager.HTTPAddr", addr,
		"a loopback host:port such as 127.0.0.1:7471, port 0..65535 (health, metrics and pprof are unauthenticated)")
}

// startHTTP serves the endpoints on ln (its address checked by
// checkLoopback) on their own goroutine until stopHTTP.
func startHTTP(ln net.Listener, h *health, log *slog.Logger) *httpServer {
	table, d, svc := h.table, h.disp, h.svc
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "orbitkv_sessions", Help: "Live sessions."},
			func() float64 { return float64(table.Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orbitkv_channel_requests_total", Help: "Channel requests handled by the dispatcher."},
			func() float64 { return float64(d.Requests()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orbitkv_channel_invalid_requests_total", Help: "Channel requests refused as invalid, stale-session or stale-generation."},
			func() float64 { return float64(d.Invalid()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orbitkv_channel_parks_total", Help: "Times the dispatcher slept for lack of requests; the next request after each pays a futex wakeup."},
			func() float64 { return float64(d.Parks()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "orbitkv_channel_lost_rings_total", Help: "Requests found only by the periodic rescan of request lines because their doorbell ring was erased (a session wrote the shared doorbell); each waited up to 100 ms."},
			func() float64 { return float64(d.LostRings()) }),
	)
	if svc != nil {
		registerCacheMetrics(reg, svc)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		rep := h.reply()
		w.Header().Set("Content-Type", "application/json")
		if rep.Status != "serving" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(map[string]any{
			"status": rep.Status, "version": rep.Version, "poll_mode": rep.PollMode,
			"uptime_s": time.Duration(rep.UptimeNs).Seconds(), "requests": rep.Requests,
			"sessions": table.Len(), "epoch": table.Spec().Epoch,
			"service_id": hex.EncodeToString(h.serviceID[:]),
			"blocks":     rep.Blocks, "ram_used_bytes": rep.RamUsedBytes, "ram_capacity_bytes": rep.RamCapacityBytes,
			"leases": rep.Leases, "pins": rep.Pins, "reserved_bytes": rep.ReservedBytes,
			"operations": rep.Operations, "evictions": rep.Evictions,
			"tickets": rep.Tickets, "lookups": rep.Lookups, "distinct_lookups": rep.DistinctLookups,
		})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if failpoint.Enabled {
		// Test builds only (tag failpoints): pause points and the expiry clock.
		mux.Handle("/debug/failpoints/", failpoint.Handler())
		mux.Handle("/debug/clock/", failpoint.Handler())
		log.Warn("failpoint build: /debug/failpoints and /debug/clock are served; never run this binary in production")
	}
	s := &httpServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, addr: ln.Addr().String()}
	go func() {
		if err := s.srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("http server stopped", slog.Any("err", err))
		}
	}()
	return s
}

// stopHTTP stops the HTTP endpoints, giving requests in flight 2 s.
func (m *Manager) stopHTTP() {
	if m.http == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m.http.srv.Shutdown(ctx)
	m.http = nil
}

// registerCacheMetrics exposes the cache counters an operator graphs: RAM
// tier fill, eviction rate, lease and pin counts, copy throughput, and
// whether the tier got hugepages.
func registerCacheMetrics(reg *prometheus.Registry, svc *cache.Service) {
	gauge := func(name, help string, f func(cache.Stats) uint64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(f(svc.Stats())) }))
	}
	counter := func(name, help string, f func(cache.Stats) uint64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(svc.Stats())) }))
	}
	gauge("orbitkv_ram_blocks", "Sealed blocks resident in the RAM tier.", func(s cache.Stats) uint64 { return s.Blocks })
	gauge("orbitkv_ram_used_bytes", "Bytes of RAM tier chunks holding blocks (sealed or publishing).", func(s cache.Stats) uint64 { return s.UsedBytes })
	gauge("orbitkv_ram_capacity_bytes", "Usable bytes of the RAM tier.", func(s cache.Stats) uint64 { return s.CapacityBytes })
	gauge("orbitkv_leases", "Live leases.", func(s cache.Stats) uint64 { return s.Leases })
	gauge("orbitkv_block_pins", "Block pins held by leases and in-flight copies.", func(s cache.Stats) uint64 { return s.Pins })
	gauge("orbitkv_reserved_bytes", "Bytes reserved by live leases.", func(s cache.Stats) uint64 { return s.ReservedBytes })
	gauge("orbitkv_operations", "Copies in flight plus restores awaiting RestorePoll.", func(s cache.Stats) uint64 { return s.Operations })
	counter("orbitkv_evictions_total", "Blocks evicted from the RAM tier.", func(s cache.Stats) uint64 { return s.Evictions })
	counter("orbitkv_published_blocks_total", "Blocks published (copied in and sealed).", func(s cache.Stats) uint64 { return s.Published })
	counter("orbitkv_published_bytes_total", "Bytes copied by publishes.", func(s cache.Stats) uint64 { return s.PublishBytes })
	counter("orbitkv_restored_blocks_total", "Blocks restored into engine buffers.", func(s cache.Stats) uint64 { return s.Restored })
	counter("orbitkv_restored_bytes_total", "Bytes copied by restores.", func(s cache.Stats) uint64 { return s.RestoreBytes })
	counter("orbitkv_queries_total", "QueryBundle requests served.", func(s cache.Stats) uint64 { return s.Queries })
	counter("orbitkv_query_hit_blocks_total", "Blocks leased by queries (prefix hits).", func(s cache.Stats) uint64 { return s.QueryHits })
	counter("orbitkv_unadmitted_total", "Publishes and queries refused for capacity.", func(s cache.Stats) uint64 { return s.Unadmitted })
	counter("orbitkv_query_server_nanoseconds_total", "Dispatcher time spent serving untracked QueryBundles (decode, lookups, lease); divide by orbitkv_query_hashes_total for the cost per hash.", func(s cache.Stats) uint64 { return s.QueryNanos })
	counter("orbitkv_query_hashes_total", "Hashes carried by untracked QueryBundles.", func(s cache.Stats) uint64 { return s.QueryHashes })
	gauge("orbitkv_tickets", "Live query tickets (abi.h \"Query tickets\").", func(s cache.Stats) uint64 { return s.Tickets })
	gauge("orbitkv_tickets_budget_waiting", "Tickets waiting for lease byte budget (--lease-budget).", func(s cache.Stats) uint64 { return s.BudgetWaiting })
	counter("orbitkv_operations_expired_total", "Tickets and unpolled restore results expired (--op-expiry); late polls answer Timeout.", func(s cache.Stats) uint64 { return s.Expired })
	counter("orbitkv_discoveries_total", "Discovery queries answered (Candidates, no lease).", func(s cache.Stats) uint64 { return s.Discoveries })
	counter("orbitkv_warmups_skipped_total", "Warm-ups skipped for the warmup budget (--warmup-budget).", func(s cache.Stats) uint64 { return s.WarmupSkipped })
	counter("orbitkv_lookups_total", "Logical lookups (queries; tickets except recovery reads and warm-ups).", func(s cache.Stats) uint64 { return s.Lookups })
	gauge("orbitkv_lookups_distinct", "Distinct logical lookups since start, HyperLogLog estimate (~1% error); lookups_total / this = reuse.", func(s cache.Stats) uint64 { return s.DistinctLookups })
	if svc.Stats().SSD.On {
		gauge("orbitkv_ssd_blocks", "Blocks resident on the SSD tier.", func(s cache.Stats) uint64 { return s.SSD.Blocks })
		gauge("orbitkv_ssd_used_bytes", "Bytes of SSD tier slots in use.", func(s cache.Stats) uint64 { return s.SSD.UsedBytes })
		gauge("orbitkv_ssd_capacity_bytes", "Bytes of the SSD tier's data file.", func(s cache.Stats) uint64 { return s.SSD.CapacityBytes })
		gauge("orbitkv_ssd_recovered_blocks", "Blocks the SSD tier's index gave back at start (warm restart).", func(s cache.Stats) uint64 { return s.SSD.Recovered })
		counter("orbitkv_ssd_writes_total", "Blocks demoted from RAM to SSD (durable).", func(s cache.Stats) uint64 { return s.SSD.Writes })
		counter("orbitkv_ssd_reads_total", "Blocks read back from SSD and verified.", func(s cache.Stats) uint64 { return s.SSD.Reads })
		counter("orbitkv_ssd_corrupt_total", "SSD blocks that failed their CRC32C check: dropped and treated as misses, never served.", func(s cache.Stats) uint64 { return s.SSD.Corrupt })
		counter("orbitkv_ssd_not_admitted_total", "Evicted blocks the SSD admission rule declined.", func(s cache.Stats) uint64 { return s.SSD.NotAdmitted })
		counter("orbitkv_ssd_evictions_total", "Blocks the SSD tier evicted (FIFO) to make room.", func(s cache.Stats) uint64 { return s.SSD.Evictions })
		counter("orbitkv_ssd_demote_skipped_total", "Evicted blocks not demoted: no staging buffer, larger than a slot, or the tier busy.", func(s cache.Stats) uint64 { return s.SSD.DemoteSkipped })
		counter("orbitkv_ssd_prefetch_total", "Blocks prefetched from SSD into RAM for a query.", func(s cache.Stats) uint64 { return s.SSD.Prefetches })
		counter("orbitkv_ssd_prefetch_failures_total", "Prefetches that failed (corrupt or I/O error) and became misses.", func(s cache.Stats) uint64 { return s.SSD.PrefetchFails })
	}
	counter("orbitkv_cache_invalid_requests_total", "Cache requests refused as invalid.", func(s cache.Stats) uint64 { return s.Invalid })
	// The tier's backing is fixed at start: one series, set once.
	huge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "orbitkv_ram_hugepages",
		Help: "1 when the RAM tier is backed by 2 MiB hugetlb pages, 0 when not; the label fallback says why not (empty when 1)."},
		[]string{"fallback"})
	st := svc.Stats()
	if st.RAMHuge {
		huge.WithLabelValues("").Set(1)
	} else {
		huge.WithLabelValues(st.RAMFallback).Set(0)
	}
	reg.MustRegister(huge)
}
