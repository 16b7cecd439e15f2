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

	"github.com/orbitkv/orbitkv/ebpf"
	"github.com/orbitkv/orbitkv/gocore/bootstrap"
	"github.com/orbitkv/orbitkv/gocore/cache"
	"github.com/orbitkv/orbitkv/gocore/channel"
	"github.com/orbitkv/orbitkv/gocore/cluster"
	"github.com/orbitkv/orbitkv/gocore/failpoint"
	"github.com/orbitkv/orbitkv/gocore/limit"
	"github.com/orbitkv/orbitkv/gocore/profiling"
	"github.com/orbitkv/orbitkv/gocore/session"
	"github.com/orbitkv/orbitkv/proto/lifecyclepb"
	"github.com/orbitkv/orbitkv/proto/operatorpb"
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
	ops       *opDurations  // the cache's observer; nil without a cache
	ssdIO     *ssdDurations // the SSD tier's observer; nil without one
	boot      *bootstrap.Server
	ready     *readiness
	prof      *atomic.Pointer[profiling.Profiler] // the Manager's push; holds nil when off
	ebpf      *ebpf.Probes                        // nil without Spec.EBPF
	cluster   *cluster.Cluster                    // nil without Spec.Cluster
	lookup    *lookups                            // POST /v1/lookup; its events nil while they are off
}

// reply fills the Manager-wide fields; bootstrap adds epoch, sessions, pid.
func (h *health) reply() *lifecyclepb.HealthReply {
	st, _ := h.ready.get()
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

// ssdHealth is the SSD tier's state in GET /health ("ssd") and in the
// operator socket's Health: all zero, configured false, without an SSD
// tier.
func (h *health) ssdHealth() *operatorpb.SSDTier {
	if h.svc == nil {
		return &operatorpb.SSDTier{}
	}
	ss := h.svc.Stats().SSD
	return &operatorpb.SSDTier{Configured: ss.On, Open: ss.Open, Blocks: ss.Blocks, UsedBytes: ss.UsedBytes,
		CapacityBytes: ss.CapacityBytes, ReadErrors: ss.ReadErrors, WriteErrors: ss.WriteErrors, CorruptBlocks: ss.Corrupt}
}

// Bounds of the HTTP port, which any local process can reach: together
// they cap the Manager's descriptors it can hold, so a flood of idle
// keep-alive connections cannot leave none for engines' bootstrap.
const (
	// MaxHTTPConns bounds the connections served at once; later ones
	// wait in the kernel's accept queue, holding no descriptor of the
	// Manager's, until one closes.
	MaxHTTPConns = 32
	// HTTPIdleTimeout closes a keep-alive connection idle this long;
	// HTTPReadHeaderTimeout one whose request headers take longer,
	// HTTPReadTimeout one whose whole request does; HTTPWriteTimeout
	// bounds a response from the end of its request (above pprof's
	// default 30 s CPU profile).
	HTTPIdleTimeout       = 30 * time.Second
	HTTPReadHeaderTimeout = 5 * time.Second
	HTTPReadTimeout       = 10 * time.Second
	HTTPWriteTimeout      = 60 * time.Second
	// HTTPMaxHeaderBytes bounds a request's headers.
	HTTPMaxHeaderBytes = 16 << 10
)

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

// routes is every HTTP endpoint once the cache exists: /livez and /readyz
// (probes), /health, /metrics, POST /v1/lookup (lookup.go), pprof, and
// the failpoint endpoints in test builds. Every one is read-only.
func routes(h *health, r *readiness, pprofOn bool, log *slog.Logger) *http.ServeMux {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newCollector(h, h.ops))
	if h.ebpf != nil {
		reg.MustRegister(h.ebpf)
	}
	mux := http.NewServeMux()
	probes(mux, r)
	mux.HandleFunc("GET /health", h.serveHTTP)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("POST "+LookupPath, h.lookup.serveHTTP)
	if pprofOn {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", profiling.ServeCPUProfile) // works while the Pyroscope push runs
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if failpoint.Enabled {
		// Test builds only (tag failpoints): pause points and the expiry clock.
		mux.Handle("/debug/failpoints/", failpoint.Handler())
		mux.Handle("/debug/clock/", failpoint.Handler())
		log.Warn("failpoint build: /debug/failpoints and /debug/clock are served; never run this binary in production")
	}
	return mux
}

// serveHTTP answers GET /health with a JSON object: 503 unless serving.
// "ssd" is the SSD tier's state (ssdJSON).
// The 64-bit identifiers (epoch, service_id) are strings, since JSON
// readers such as jq hold numbers as doubles (exact only below 2^53).
func (h *health) serveHTTP(w http.ResponseWriter, _ *http.Request) {
	rep := h.reply()
	w.Header().Set("Content-Type", "application/json")
	if rep.Status != "serving" {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(map[string]any{
		"status": rep.Status, "version": rep.Version, "poll_mode": rep.PollMode,
		"uptime_s": time.Duration(rep.UptimeNs).Seconds(), "requests": rep.Requests,
		"sessions": h.table.Len(), "epoch": strconv.FormatUint(h.table.Spec().Epoch, 10),
		"service_id": hex.EncodeToString(h.serviceID[:]),
		"blocks":     rep.Blocks, "ram_used_bytes": rep.RamUsedBytes, "ram_capacity_bytes": rep.RamCapacityBytes,
		"leases": rep.Leases, "pins": rep.Pins, "reserved_bytes": rep.ReservedBytes,
		"operations": rep.Operations, "evictions": rep.Evictions,
		"tickets": rep.Tickets, "lookups": rep.Lookups, "distinct_lookups": rep.DistinctLookups,
		"ssd": ssdJSON(h.ssdHealth()),
	})
}

// ssdJSON is /health's "ssd" object: the fields of operatorpb.SSDTier
// under their proto names, every one present (false and 0 included).
func ssdJSON(t *operatorpb.SSDTier) map[string]any {
	return map[string]any{
		"configured": t.Configured, "open": t.Open, "blocks": t.Blocks, "used_bytes": t.UsedBytes,
		"capacity_bytes": t.CapacityBytes, "read_errors": t.ReadErrors, "write_errors": t.WriteErrors,
		"corrupt_blocks": t.CorruptBlocks,
	}
}

// stopHTTP stops the HTTP endpoints, giving requests in flight 2 s.
func (m *Manager) stopHTTP() {
	defer m.stopProbes()
	if m.http == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m.http.srv.Shutdown(ctx)
	m.http = nil
}
