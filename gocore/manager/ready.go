package manager

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/dustin/go-humanize"
	"golang.org/x/net/netutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Phases of a Manager's life, as /readyz, /health, the log and systemd
// hear them.
const (
	PhaseStarting = "starting" // New is making the tiers; /readyz says what it is doing
	PhaseServing  = "serving"  // Run accepts sessions; /readyz answers 200
	PhaseDraining = "draining" // shutdown began; /readyz answers 503
)

// readiness is the Manager's phase and, while starting, what it is doing
// ("pre-faulting the RAM tier: 3.1 GiB of 8.0 GiB"). It tells systemd
// (sd_notify STATUS= with EXTEND_TIMEOUT_USEC= while starting, READY=1,
// STOPPING=1) when NOTIFY_SOCKET is set; WATCHDOG=1 comes from watchdog.
// Safe from any goroutine.
type readiness struct {
	mu    sync.Mutex
	phase string
	why   string
	// successor, while an upgrade hands the service to that pid, keeps
	// STOPPING=1 from systemd: the service is not stopping, and a stop
	// systemd began would kill the successor.
	successor int
	log       *slog.Logger
	// lastLog bounds the pre-fault progress lines to one every 2 s.
	lastLog time.Time
}

func newReadiness(log *slog.Logger) *readiness {
	return &readiness{phase: PhaseStarting, why: "starting", log: log}
}

// get returns the phase and what it is doing.
func (r *readiness) get() (phase, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase, r.why
}

// StartExtendTimeout is how long past each start step or progress report
// the Manager asks systemd to wait before it counts the start as hung
// (EXTEND_TIMEOUT_USEC, sent with every STATUS= while starting): a start
// that keeps reporting progress (a large RAM tier's pre-fault, the SSD
// tier's preallocation, index replay and verification) may outlast the
// unit's TimeoutStartSec=, and one that reports nothing for this long
// after TimeoutStartSec= has passed is killed. Progress is reported at
// least every 256 MiB pre-faulted, every GiB preallocated and every block
// verified, far more often than this.
const StartExtendTimeout = 60 * time.Second

// startStatus is the sd_notify state of a start step: STATUS= and the
// start timeout's extension.
func startStatus(why string) string {
	return fmt.Sprintf("STATUS=%s\nEXTEND_TIMEOUT_USEC=%d", why, StartExtendTimeout.Microseconds())
}

// starting records a start step, logs it and tells systemd.
func (r *readiness) starting(why string) {
	r.mu.Lock()
	r.why = why
	r.mu.Unlock()
	r.log.Info("start: " + why)
	notify(startStatus(why))
}

// prefault records pre-fault progress (bytes done of total); it logs at
// most one line every 2 s, and the last.
func (r *readiness) prefault(done, total uint64) {
	why := fmt.Sprintf("pre-faulting the RAM tier: %s of %s", humanize.IBytes(done), humanize.IBytes(total))
	r.mu.Lock()
	r.why = why
	logIt := done == total || time.Since(r.lastLog) >= 2*time.Second
	if logIt {
		r.lastLog = time.Now()
	}
	r.mu.Unlock()
	if logIt {
		r.log.Info("start: pre-faulting the RAM tier", slog.Uint64("done_bytes", done), slog.Uint64("total_bytes", total),
			slog.String("done", humanize.IBytes(done)), slog.String("total", humanize.IBytes(total)))
	}
	notify(startStatus(why))
}

// ssdOpen records the SSD tier's open progress (ssd.Spec.Progress): step
// is what it does ("preallocating the data file", "replaying the index",
// "verifying recovered blocks"), done of total in unit ("bytes", printed
// as IEC sizes, or "blocks"). Like prefault it logs at most one line every
// 2 s plus each step's first and last, with a percentage, and tells
// systemd (STATUS=, EXTEND_TIMEOUT_USEC=).
func (r *readiness) ssdOpen(step string, done, total uint64, unit string) {
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(done) / float64(total)
	}
	figures := fmt.Sprintf("%d of %d %s", done, total, unit)
	if unit == "bytes" {
		figures = fmt.Sprintf("%s of %s", humanize.IBytes(done), humanize.IBytes(total))
	}
	why := fmt.Sprintf("opening the SSD tier: %s: %s (%.0f%%)", step, figures, pct)
	r.mu.Lock()
	r.why = why
	logIt := done == 0 || done == total || time.Since(r.lastLog) >= 2*time.Second
	if logIt {
		r.lastLog = time.Now()
	}
	r.mu.Unlock()
	if logIt {
		r.log.Info("start: opening the SSD tier", slog.String("step", step), slog.Uint64("done", done), slog.Uint64("total", total),
			slog.String("progress", figures), slog.String("percent", fmt.Sprintf("%.0f%%", pct)))
	}
	notify(startStatus(why))
}

// set moves to phase (serving or draining) and tells systemd.
func (r *readiness) set(phase string) {
	r.mu.Lock()
	r.phase, r.why = phase, phase
	succ := r.successor
	r.mu.Unlock()
	switch {
	case phase == PhaseServing:
		notify("READY=1\nSTATUS=serving")
	case phase == PhaseDraining && succ != 0:
		notify(fmt.Sprintf("STATUS=upgrading: draining, then handing the RAM tier to pid %d", succ))
	case phase == PhaseDraining:
		notify("STOPPING=1\nSTATUS=draining")
	}
}

// upgrading marks an upgrade to successor under way (0: none, or
// abandoned), which set tells systemd instead of STOPPING=1.
func (r *readiness) upgrading(successor int) {
	r.mu.Lock()
	r.successor = successor
	r.mu.Unlock()
}

// watchdog keeps systemd's watchdog (WatchdogSec=, WATCHDOG_USEC: interval
// W) fed from the dispatcher's health. Every W/4 it starts a probe (a no-op
// run on the dispatcher goroutine through channel.Dispatcher.Do) unless one
// is in flight, and sends WATCHDOG=1 if the last probe to return did so
// less than W/2 ago; a probe that returns after WATCHDOG=1 was withheld
// gets one at once. Hence, for a dispatcher that stops running control
// events (stuck in a handler, a copy completion or a kernel call) for S:
//
//   - S < W is survived: the last WATCHDOG=1 before the stall is sent after
//     it began (the tick after its start finds the last return less than W/4
//     old) and the next when it ends, so no two are W apart (short of this
//     goroutine's scheduling delay);
//   - WATCHDOG=1 stops once the last return is W/2 old, so the last one is
//     sent less than W/2 after the stall began and systemd kills and
//     restarts the Manager less than 3W/2 after it began if it lasts that
//     long. A stall between W and 3W/2 may be either.
//
// One error line says WATCHDOG=1 is withheld, and an info line when the
// dispatcher answers again. It returns when stop is closed or a probe
// fails (the dispatcher stopped: shutdown).
func watchdog(interval time.Duration, probe func() error, send func(string), stop <-chan struct{}, log *slog.Logger) {
	tick, allowed := interval/4, interval/2
	t := time.NewTicker(tick)
	defer t.Stop()
	var pending chan error // the probe in flight
	answered := time.Now() // when the last probe returned (the start counts as one)
	var withheld bool
	start := func() {
		pending = make(chan error, 1)
		go func(c chan<- error) { c <- probe() }(pending)
	}
	start()
	for {
		select {
		case <-stop:
			return
		case err := <-pending:
			pending = nil
			if err != nil {
				return
			}
			now := time.Now()
			if withheld {
				log.Info("watchdog: the dispatcher answers again; WATCHDOG=1 resumed", slog.Duration("stalled", now.Sub(answered).Round(time.Millisecond)))
				withheld = false
				send("WATCHDOG=1")
			}
			answered = now
		case <-t.C:
			if pending == nil {
				start()
			}
			if time.Since(answered) < allowed {
				send("WATCHDOG=1")
				continue
			}
			if !withheld {
				withheld = true
				log.Error("watchdog: the dispatcher has not run a control event for half the watchdog interval; WATCHDOG=1 withheld, so systemd restarts the Manager if it stays stalled",
					slog.Duration("watchdog_usec", interval), slog.Duration("stalled", time.Since(answered).Round(time.Millisecond)))
			}
		}
	}
}

// startWatchdog runs watchdog on its own goroutine when systemd asked for
// one (WATCHDOG_USEC set, and WATCHDOG_PID, when set, naming this process);
// otherwise it does nothing.
func (m *Manager) startWatchdog() {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		m.log.Warn("watchdog: WATCHDOG_USEC is not understood; no WATCHDOG=1 is sent", slog.Any("err", err))
		return
	}
	if interval <= 0 {
		return
	}
	m.log.Info("watchdog: sending WATCHDOG=1 while the dispatcher answers", slog.Duration("watchdog_usec", interval),
		slog.Duration("probe_every", interval/4), slog.Duration("allowed_stall", interval/2))
	disp := m.Dispatcher
	go watchdog(interval, func() error { return disp.Do(func() {}) }, notify, disp.Done(), m.log)
}

// notify sends state to systemd's NOTIFY_SOCKET; without one (not started
// by systemd with Type=notify) it does nothing. A failed send is not an
// error of the Manager's: systemd then reports the unit as not ready.
func notify(state string) { daemon.SdNotify(false, state) }

// swapHandler serves whichever handler was stored last: the HTTP port
// answers /livez and /readyz from New's first step, and the full set of
// endpoints once the cache exists.
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) store(h http.Handler) { s.h.Store(&h) }

// ServeHTTP refuses a request that declares a body (every endpoint but
// POST /v1/lookup reads none: a body declared and never sent would hold
// the connection until HTTPReadTimeout) and closes its connection; the
// rest go to the current handler. The lookup's body is bounded by
// LookupMaxBodyBytes and, like every request, by HTTPReadTimeout.
func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if (r.ContentLength != 0 || len(r.TransferEncoding) > 0) && !(r.Method == http.MethodPost && r.URL.Path == LookupPath) {
		refuseBody(w)
		return
	}
	(*s.h.Load()).ServeHTTP(w, r)
}

// refuseBody answers 400 and closes the connection at once, without
// waiting for the body (the server would otherwise read it, up to
// HTTPReadTimeout, before closing).
func refuseBody(w http.ResponseWriter) {
	const msg = "request bodies are not accepted: every endpoint but POST " + LookupPath + " takes its arguments in the URL\n"
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		w.Header().Set("Connection", "close")
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	defer conn.Close()
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(buf, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
	buf.Flush()
}

// probes adds /livez and /readyz to mux. /livez answers 200 "ok" while the
// process answers at all; /readyz answers 200 "ready" only while serving,
// else 503 with the phase and what the Manager is doing.
func probes(mux *http.ServeMux, r *readiness) {
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		phase, why := r.get()
		if phase == PhaseServing {
			fmt.Fprintln(w, "ready")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		if why != phase {
			fmt.Fprintf(w, "not ready: %s: %s\n", phase, why)
		} else {
			fmt.Fprintf(w, "not ready: %s\n", phase)
		}
	})
}

// serveEarly serves ln at once with /livez, /readyz and, for every other
// path, 503 "starting"; New stores the full endpoints later.
func serveEarly(ln net.Listener, r *readiness, log *slog.Logger) (*httpServer, *swapHandler) {
	mux := http.NewServeMux()
	probes(mux, r)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		_, why := r.get()
		http.Error(w, "starting: "+why, http.StatusServiceUnavailable)
	})
	sw := &swapHandler{}
	sw.store(mux)
	s := &httpServer{srv: &http.Server{Handler: sw, ReadHeaderTimeout: HTTPReadHeaderTimeout, ReadTimeout: HTTPReadTimeout,
		WriteTimeout: HTTPWriteTimeout, IdleTimeout: HTTPIdleTimeout, MaxHeaderBytes: HTTPMaxHeaderBytes}, addr: ln.Addr().String()}
	go func() {
		if err := s.srv.Serve(netutil.LimitListener(ln, MaxHTTPConns)); err != nil && err != http.ErrServerClosed {
			log.Error("http server stopped", slog.Any("err", err))
		}
	}()
	return s, sw
}

// operatorGate answers every operator call Unavailable, saying what the
// Manager is doing, until it serves: the socket is bound from New's first
// steps (so a bad --operator-socket fails before the RAM tier is
// committed), but the commands read the cache New is still making. The
// readiness lock orders New's writes before the first call that passes.
func (r *readiness) operatorGate() error {
	if phase, why := r.get(); phase == PhaseStarting {
		return status.Errorf(codes.Unavailable, "the Manager is starting: %s", why)
	}
	return nil
}
