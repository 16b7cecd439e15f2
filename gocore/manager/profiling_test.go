package manager

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/gocore/internal/native"
	"github.com/orbitkv/orbitkv/gocore/profiling"
	"github.com/orbitkv/orbitkv/internal/pyroscopetest"
	"github.com/orbitkv/orbitkv/internal/syncbuf"
)

// dispatcherFunc is the prefix of the dispatcher's functions in a profile.
const dispatcherFunc = "github.com/orbitkv/orbitkv/gocore/channel.(*Dispatcher)."

// dispatcherSamples counts the CPU samples of p whose stack runs through
// a function of the dispatcher.
func dispatcherSamples(p *profile.Profile) int64 {
	var n int64
	for _, s := range p.Sample {
		if slices.ContainsFunc(s.Location, func(l *profile.Location) bool {
			return slices.ContainsFunc(l.Line, func(ln profile.Line) bool {
				return ln.Function != nil && strings.HasPrefix(ln.Function.Name, dispatcherFunc)
			})
		}) {
			n += s.Value[0]
		}
	}
	return n
}

// A Manager with Spec.Profiling set pushes, from Run on, CPU profiles
// tagged with its node id, epoch and version in which the dispatcher's
// functions serve a client's pings; shutdown stops the push and restores
// the runtime's profile rates.
func TestRunPushesProfilesInWhichTheDispatcherServesPings(t *testing.T) {
	rcv := pyroscopetest.New(t)
	s := testSpec(t, "127.0.0.1:0")
	s.Epoch, s.Bootstrap.Version = 77, "v9.9.9-test"
	s.Profiling = profiling.Spec{URL: rcv.URL(), UploadInterval: time.Second, NodeID: "test-node"}
	s.HTTPPprof = true
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	shutdown := sync.OnceValue(func() error { cancel(); return <-ran })
	defer shutdown()
	c, err := client.Connect(client.Options{SocketPath: s.Bootstrap.Path, InstanceID: "profiled"})
	if errors.Is(err, native.ErrNoCgo) {
		t.Skip("built without cgo: no liborbitkv client")
	}
	if err != nil {
		t.Fatal(err)
	}
	stop, pinged := make(chan struct{}), make(chan error, 1)
	go func() {
		defer c.Close()
		for i := uint64(0); ; i++ {
			select {
			case <-stop:
				pinged <- nil
				return
			default:
			}
			if v, err := c.Ping(i); err != nil || v != i {
				pinged <- err
				return
			}
		}
	}()
	var tagged *pyroscopetest.Push
	found := rcv.Wait(30*time.Second, func(ps []pyroscopetest.Push) bool {
		for i, p := range ps {
			if slices.Contains(p.Types(), "cpu") && dispatcherSamples(p.Profile) > 0 {
				tagged = &ps[i]
				return true
			}
		}
		return false
	})
	// /debug/pprof/profile shares the push's CPU profiler rather than
	// failing with "cpu profiling already in use".
	resp, err := http.Get("http://" + m.http.addr + "/debug/pprof/profile?seconds=1")
	if err != nil {
		t.Fatal(err)
	}
	cpu, perr := profile.Parse(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || perr != nil {
		t.Errorf("GET /debug/pprof/profile while pushing = %d, %v; want 200 and a profile", resp.StatusCode, perr)
	} else if dispatcherSamples(cpu) == 0 {
		t.Errorf("the /debug/pprof/profile taken while pushing has no dispatcher samples")
	}
	if ok, failed := uploadsMetric(t, m); ok == 0 || failed != 0 {
		t.Errorf("orbitkv_profiling_uploads_total: ok %v, failed %v; want some ok and none failed", ok, failed)
	}
	close(stop)
	if err := <-pinged; err != nil {
		t.Fatalf("ping: %v", err)
	}
	if !found {
		t.Fatalf("no CPU profile with samples in %s* within 30 s (%d pushes)", dispatcherFunc, len(rcv.Pushes()))
	}
	for k, v := range map[string]string{"node_id": "test-node", "epoch": "77", "version": "v9.9.9-test"} {
		if tagged.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, tagged.Labels[k], v, tagged.Labels)
		}
	}
	if err := shutdown(); err != nil {
		t.Errorf("Run = %v", err)
	}
	if got := runtime.SetMutexProfileFraction(-1); got != 0 {
		t.Errorf("mutex profile fraction after Run returned = %d, want 0 as before", got)
	}
}

// A Pyroscope server that is down neither holds the start nor the
// shutdown, and costs one log line however many uploads fail.
func TestADownPyroscopeServerCostsOneLineAndHoldsNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: every upload is refused
	var logs syncbuf.Buffer
	s := testSpec(t, "127.0.0.1:0")
	s.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s.Profiling = profiling.Spec{URL: down, UploadInterval: time.Second}
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	c, err := client.Connect(client.Options{SocketPath: s.Bootstrap.Path, InstanceID: "served"})
	if errors.Is(err, native.ErrNoCgo) {
		cancel()
		<-ran
		t.Skip("built without cgo: no liborbitkv client")
	}
	if err != nil {
		cancel()
		<-ran
		t.Fatalf("connecting while the push fails: %v", err)
	}
	if v, err := c.Ping(7); err != nil || v != 7 {
		t.Errorf("Ping = %d, %v", v, err)
	}
	c.Close()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, failed := uploadsMetric(t, m); failed >= 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("fewer than 3 failed uploads within 20 s:\n%s", logs.String())
		}
	}
	began := time.Now()
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("Run = %v", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("shutdown took %v with the Pyroscope server down", took)
	}
	if n := strings.Count(logs.String(), "upload to pyroscope failed"); n != 1 {
		t.Errorf("%d failure lines for 3 or more failed uploads, want 1:\n%s", n, logs.String())
	}
}

// uploadsMetric reads orbitkv_profiling_uploads_total{result} of m's
// GET /metrics.
func uploadsMetric(t *testing.T, m *Manager) (ok, failed float64) {
	t.Helper()
	f := scrape(t, m)["orbitkv_profiling_uploads_total"]
	if f == nil || len(f.GetMetric()) != 2 {
		t.Fatalf("orbitkv_profiling_uploads_total = %v, want the series ok and failed", f)
	}
	for _, s := range f.GetMetric() {
		switch labels(s)["result"] {
		case "ok":
			ok = s.GetCounter().GetValue()
		case "failed":
			failed = s.GetCounter().GetValue()
		}
	}
	return ok, failed
}

// Without --pyroscope-url the upload counters are there, at 0, so an
// alert on their rate needs no absent().
func TestUploadCountersAreZeroWithoutThePush(t *testing.T) {
	m := newMetricsManager(t, 1)
	if ok, failed := uploadsMetric(t, m); ok != 0 || failed != 0 {
		t.Fatalf("orbitkv_profiling_uploads_total: ok %v, failed %v without a push; want 0 and 0", ok, failed)
	}
}
