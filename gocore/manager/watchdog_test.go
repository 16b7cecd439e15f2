package manager

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// syncBuffer is a log destination safe for the watchdog's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The watchdog sends WATCHDOG=1 once per period while each probe returns,
// sends nothing while a probe is stuck (logging one error), resumes with
// an info line when the probe returns, and returns when a probe fails (the
// dispatcher stopped) or stop closes.
func TestWatchdogFollowsTheDispatchersHealth(t *testing.T) {
	const period = 20 * time.Millisecond
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
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { watchdog(period, probe, send, stop, log); close(done) }()

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
	go func() { watchdog(period, probe, send, stop, log); close(done) }()
	close(stop)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not return after stop closed")
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
