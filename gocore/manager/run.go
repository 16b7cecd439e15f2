package manager

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/orbitkv/orbitkv/gocore/profiling"
	"github.com/orbitkv/orbitkv/gocore/tier/ram"
)

// ErrShutdownForced is Run's answer when shutdown ran past
// Spec.ShutdownTimeout. Run then freed nothing: the RAM tier, staging
// buffers and session mappings stay mapped, because an SSD read still in
// the kernel may write them (docs/design.md §6 rule 9). The caller must exit
// the process (cmd/orbitkv-manager exits with status 3).
var ErrShutdownForced = errors.New("manager: shutdown ran past its timeout; memory outstanding reads may write was not freed")

// maxStuckLines bounds the SSD I/Os a forced shutdown logs one by one.
const maxStuckLines = 32

// Run logs the "orbitkv-manager serving" line (the line launchers wait
// for), serves until ctx is done or the bootstrap server fails, and then
// shuts down: /health turns draining, sessions close (each detached and
// released), the dispatcher and cache stop, memory is freed, and the HTTP
// endpoints stop. Every step shares one deadline, Spec.ShutdownTimeout from
// the start of shutdown; past it Run logs each SSD I/O still outstanding
// and returns ErrShutdownForced. Otherwise it returns the bootstrap
// server's error, or nil after ctx was done.
func (m *Manager) Run(ctx context.Context) (err error) {
	if m.closed.Swap(true) {
		return errors.New("manager: Run after Close")
	}
	s := m.spec
	httpAddr := ""
	if m.http != nil {
		httpAddr = m.http.addr // the port bound, when HTTPAddr asked for port 0
	}
	// Serving before the ready line: whoever read it finds /readyz and
	// /health ready (the socket is bound; Serve accepts its backlog).
	m.startWatchdog()
	m.ready.set(PhaseServing)
	m.log.Info("orbitkv-manager serving", slog.String("socket", s.Bootstrap.Path), slog.String("poll_mode", s.Channel.PollMode.String()),
		slog.Duration("spin_window", s.Channel.SpinWindow), slog.String("http", httpAddr),
		slog.Uint64("epoch", s.Epoch), slog.Uint64("max_sessions", uint64(s.Session.MaxSessions)),
		slog.Uint64("desc_bytes", uint64(s.Session.DescCapacity)), slog.String("desc", humanize.IBytes(uint64(s.Session.DescCapacity))), slog.String("version", s.Bootstrap.Version))
	handed := false // the tier went to handOver, which owns kept
	serveErr := make(chan error, 1)
	go func() { serveErr <- m.Server.Serve() }()
	m.startProfiling()
	select {
	case <-ctx.Done():
		m.log.Info("shutdown requested; closing sessions", slog.Int("sessions", m.Table.Len()))
	case <-m.op.drain:
		m.log.Info("drained by the operator; closing sessions", slog.Int("sessions", m.Table.Len()))
	case err = <-serveErr:
		m.log.Error("bootstrap server stopped", slog.Any("err", err))
	}
	// An upgrade keeps the RAM tier's memfds past the cache's Close, for
	// the successor.
	m.op.drainMu.Lock()
	m.op.stopping = true // an Upgrade still starting its successor abandons it
	m.op.drainMu.Unlock()
	succ := m.upgrading()
	var kept ram.Handed
	if succ != nil && ctx.Err() != nil {
		// A stop during the upgrade's drain: the service stops, and the
		// successor with it.
		m.log.Info("upgrade: abandoned for the shutdown requested during its drain")
		succ.Abort()
		succ = nil
		m.ready.upgrading(0)
		m.ready.set(PhaseDraining) // systemd hears STOPPING=1 now
	}
	if succ != nil {
		var kerr error
		if kept, kerr = m.Cache.Tiers().Arena().Dup(); kerr != nil {
			m.log.Error("upgrade: abandoned; shutting down", slog.Any("err", kerr))
			succ.Abort()
			succ = nil
			m.ready.upgrading(0)
			m.ready.set(PhaseDraining) // systemd hears STOPPING=1 now
		}
	}
	defer func() {
		if succ != nil && !handed {
			succ.Abort() // a forced shutdown: no tier to hand
			kept.Close()
		}
	}()
	// An SSD read the disk never answers keeps the cache's Close waiting
	// (its frames may still be written): past the deadline Run gives up
	// rather than wait with it.
	deadline := time.Now().Add(s.ShutdownTimeout)
	// The last profile is pushed while the rest shuts down; a server that
	// does not answer may hold it, but never past the deadline.
	profStopped := m.stopProfiling()
	// The operator socket closes its idle connections at once and gives
	// calls in flight (a Drain's reply) a short grace; it can hold
	// shutdown up to the deadline at worst, and is then named.
	opStopped := make(chan struct{})
	go func() { m.stopOperator(); close(opStopped) }()
	if !waitUntil(deadline, opStopped) {
		m.Server.RemoveSocket()
		return m.forced("the operator socket did not stop (a call on it did not return)")
	}
	closed := make(chan struct{})
	go func() { m.CloseSessions(); close(closed) }()
	if !waitUntil(deadline, closed) {
		m.Server.RemoveSocket() // Close removes it only once every session is detached
		return m.forced("sessions did not finish detaching")
	}
	left := make(chan struct{})
	go func() { m.stopCluster(); close(left) }()
	if !waitUntil(deadline, left) {
		return m.forced("the node did not leave the cluster (catalog, peer control or transfer server)")
	}
	if !waitUntil(deadline, m.StopDispatcher()) {
		return m.forced("the cache did not stop")
	}
	m.Free()
	m.closeEngine()
	if succ == nil {
		m.unstoreTier()
	}
	if !waitUntil(deadline, profStopped) {
		m.log.Warn("profiling: the last push did not finish by the shutdown deadline; it is dropped")
	}
	m.stopHTTP()
	m.log.Info("orbitkv-manager stopped", slog.Uint64("requests", m.Dispatcher.Requests()), slog.Duration("uptime", time.Since(m.health.started)))
	if succ != nil && ctx.Err() != nil {
		// A stop requested during the shutdown: the service stops, and
		// the successor with it (the deferred abort).
		m.log.Info("upgrade: abandoned for the shutdown requested during it")
		notify("STOPPING=1")
		return err
	}
	if succ != nil {
		handed = true
		return m.handOver(succ, kept)
	}
	return err
}

// waitUntil waits for done until deadline; it reports whether done closed.
func waitUntil(deadline time.Time, done <-chan struct{}) bool {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// forced logs what still runs when shutdown ran past its deadline (each
// SSD I/O not finished: op, slot, file offset, bytes, age; at most
// maxStuckLines of them) and returns ErrShutdownForced. The kernel may
// hold the process until an uninterruptible read returns; nothing waits
// for it.
func (m *Manager) forced(why string) error {
	var reads, issued, total int
	if m.Cache != nil {
		ios := m.Cache.SSDOutstanding()
		total = len(ios)
		for i, x := range ios {
			if x.Op != "write" {
				reads++
			}
			if x.Issued {
				issued++
			}
			if i < maxStuckLines {
				m.log.Error("shutdown: ssd i/o still outstanding", slog.String("op", x.Op), slog.Bool("in_kernel", x.Issued),
					slog.Uint64("slot", uint64(x.Slot)), slog.Int64("offset", x.Offset), slog.Uint64("bytes", x.Bytes),
					slog.Duration("age", x.Age.Round(time.Millisecond)))
			}
		}
	}
	m.log.Error("shutdown forced: exiting without freeing memory outstanding reads may write",
		slog.String("reason", why), slog.Duration("shutdown_timeout", m.spec.ShutdownTimeout),
		slog.Int("stuck_reads", reads), slog.Int("ssd_ios", total), slog.Int("in_kernel", issued),
		slog.Int("not_logged", max(0, total-maxStuckLines)))
	return ErrShutdownForced
}

// startProfiling starts the push of Spec.Profiling when it is enabled. A
// push that cannot start is logged and the Manager serves without it:
// profiling never stops the Manager.
func (m *Manager) startProfiling() {
	if !m.spec.Profiling.Enabled() {
		return
	}
	p, err := profiling.Start(m.spec.Profiling, m.log)
	if err != nil {
		m.log.Error("profiling: not pushing", slog.Any("err", err))
		return
	}
	m.prof.Store(p)
}

// stopProfiling stops the push on its own goroutine; the channel closes
// once it stopped (at once without one).
func (m *Manager) stopProfiling() <-chan struct{} {
	done := make(chan struct{})
	p := m.prof.Load()
	if p == nil {
		close(done)
		return done
	}
	go func() { p.Stop(); close(done) }()
	return done
}
