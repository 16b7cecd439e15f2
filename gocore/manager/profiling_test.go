package manager

import (
	"context"
	"errors"
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
	s := testSpec(t, "")
	s.Epoch, s.Bootstrap.Version = 77, "v9.9.9-test"
	s.Profiling = profiling.Spec{URL: rcv.URL(), UploadInterval: time.Second, NodeID: "test-node"}
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
