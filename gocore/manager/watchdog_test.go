package manager

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/internal/syncbuf"
)

// The watchdog sends WATCHDOG=1 every interval/4 while each probe returns,
// sends nothing while a probe is stuck (logging one error), resumes with
// an info line when the probe returns, and returns when a probe fails (the
// dispatcher stopped) or stop closes.
func TestWatchdogFollowsTheDispatchersHealth(t *testing.T) {
	const period = 20 * time.Millisecond // interval/4
	var sent atomic.Int64
	send := func(state string) {
		if state != "WATCHDOG=1" {
			t.Errorf("watchdog sent %q, want WATCHDOG=1", state)
		}
		sent.Add(1)
	}
	var stall atomic.Pointer[chan struct{}] // non-nil: probes block on it
	var fail atomic.Bool
	probe := func() error {
		if c := stall.Load(); c != nil {
			<-*c
		}
		if fail.Load() {
			return errors.New("stopped")
		}
		return nil
	}
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { watchdog(4*period, probe, send, stop, log); close(done) }()

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 5 s: %s; sent %d, log:\n%s", what, sent.Load(), logs.String())
			}
		}
	}
	waitFor("3 WATCHDOG=1 from a healthy dispatcher", func() bool { return sent.Load() >= 3 })

	release := make(chan struct{})
	stall.Store(&release)
	waitFor("the stall logged", func() bool { return strings.Contains(logs.String(), "WATCHDOG=1 withheld") })
	before := sent.Load()
	time.Sleep(10 * period)
	if got := sent.Load(); got != before {
		t.Fatalf("a stalled dispatcher got %d WATCHDOG=1 in %v; want none", got-before, 10*period)
	}
	if n := strings.Count(logs.String(), "WATCHDOG=1 withheld"); n != 1 {
		t.Errorf("the stall was logged %d times, want once:\n%s", n, logs.String())
	}

	stall.Store(nil)
	close(release)
	waitFor("WATCHDOG=1 resumed", func() bool { return sent.Load() >= before+2 })
	if !strings.Contains(logs.String(), "the dispatcher answers again") {
		t.Errorf("no line says the dispatcher answers again:\n%s", logs.String())
	}

	fail.Store(true)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not return after a probe failed (the dispatcher stopped)")
	}

	fail.Store(false)
	done = make(chan struct{})
	go func() { watchdog(4*period, probe, send, stop, log); close(done) }()
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not return after stop closed")
	}
}

// stalledDispatcher is a probe of a dispatcher that runs nothing between
// stall's start and end: a probe made then returns at the end.
type stalledDispatcher struct {
	mu         sync.Mutex
	from, till time.Time
}

func (d *stalledDispatcher) stall(s time.Duration) (from time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.from = time.Now()
	d.till = d.from.Add(s)
	return d.from
}

func (d *stalledDispatcher) probe() error {
	d.mu.Lock()
	till := d.till
	d.mu.Unlock()
	time.Sleep(time.Until(till))
	return nil
}

// sendTimes records when each WATCHDOG=1 went.
type sendTimes struct {
	mu sync.Mutex
	at []time.Time
}

func (s *sendTimes) send(string) { s.mu.Lock(); s.at = append(s.at, time.Now()); s.mu.Unlock() }

func (s *sendTimes) all() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.at)
}

// A dispatcher stall of S < WatchdogSec never leaves WatchdogSec between
// two WATCHDOG=1 (the stall of WatchdogSec/2 + 10% included, which once
// left a whole WatchdogSec), and one of WatchdogSec or more stops
// WATCHDOG=1 less than WatchdogSec/2 after it began, so that systemd
// kills the Manager.
func TestWatchdogSurvivesAStallShorterThanWatchdogSecAndNotALongOne(t *testing.T) {
	const interval = 400 * time.Millisecond // WatchdogSec
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	// run stalls the dispatcher for stall, phase after the third
	// WATCHDOG=1 (0: at once, as a probe starts).
	run := func(stall, phase time.Duration) (sends []time.Time, from time.Time) {
		var d stalledDispatcher
		var s sendTimes
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { watchdog(interval, d.probe, s.send, stop, log); close(done) }()
		for len(s.all()) < 3 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(phase)
		from = d.stall(stall)
		time.Sleep(stall + interval)
		close(stop)
		<-done
		return s.all(), from
	}
	widest := func(at []time.Time) time.Duration {
		var w time.Duration
		for i := 1; i < len(at); i++ {
			w = max(w, at[i].Sub(at[i-1]))
		}
		return w
	}
	for _, stall := range []time.Duration{interval/2 + interval/20, interval * 3 / 4, interval * 9 / 10} {
		for _, phase := range []time.Duration{0, interval / 7} {
			sends, _ := run(stall, phase)
			if w := widest(sends); w >= interval {
				t.Errorf("stall %v at phase %v: %v without WATCHDOG=1, >= WatchdogSec %v: systemd would kill the Manager", stall, phase, w, interval)
			} else {
				t.Logf("stall %v at phase %v: widest gap between WATCHDOG=1 %v (WatchdogSec %v)", stall, phase, w, interval)
			}
		}
	}

	stall := 2 * interval
	sends, from := run(stall, interval/7)
	var last time.Time // the last WATCHDOG=1 in the stall
	for _, at := range sends {
		if at.Before(from.Add(stall)) {
			last = at
		}
	}
	if last.Sub(from) >= interval/2+interval/8 { // the bound, and slack for this host's scheduling
		t.Errorf("stall %v: WATCHDOG=1 went on %v into it; want it stopped within WatchdogSec/2 %v", stall, last.Sub(from), interval/2)
	}
	if !sends[len(sends)-1].After(from.Add(stall)) {
		t.Errorf("stall %v: no WATCHDOG=1 after it ended", stall)
	}
	if w := widest(sends); w < interval {
		t.Errorf("stall %v: widest gap between WATCHDOG=1 %v, want WatchdogSec %v or more (systemd kills)", stall, w, interval)
	}
}

// The start's sd_notify states extend systemd's start timeout with each
// STATUS=, by StartExtendTimeout in microseconds.
func TestStartStatusExtendsTheStartTimeout(t *testing.T) {
	got := startStatus("opening the SSD tier: verifying recovered blocks: 3 of 4 blocks (75%)")
	want := "STATUS=opening the SSD tier: verifying recovered blocks: 3 of 4 blocks (75%)\nEXTEND_TIMEOUT_USEC=60000000"
	if got != want {
		t.Fatalf("startStatus = %q, want %q", got, want)
	}
}
