package channel

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// A parked dispatcher must not hold up the Go runtime: a stop-the-world
// (here a forced GC) has to finish while no request ever arrives. A first
// version slept in a raw FUTEX_WAIT without a timeout, which the runtime's
// preemption signal restarts (SA_RESTART): every stop-the-world then waited
// for the next channel request, freezing the whole Manager when idle.
//
// A frozen runtime cannot even fire the test's own timers, so the scenario
// runs in a child process that the parent kills after a deadline.
func TestGarbageCollectionCompletesWhileTheDispatcherIsParked(t *testing.T) {
	if mode := os.Getenv("ORBITKV_GC_CHILD"); mode != "" {
		gcWhileParked(t, mode)
		return
	}
	for _, mode := range []string{"park", "adaptive"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGarbageCollectionCompletesWhileTheDispatcherIsParked$", "-test.count=1")
			cmd.Env = append(os.Environ(), "ORBITKV_GC_CHILD="+mode)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the runtime froze: a forced GC did not finish within 20 s while the dispatcher was parked\n%s", out)
			}
			if err != nil {
				t.Fatalf("child failed: %v\n%s", err, out)
			}
		})
	}
}

func gcWhileParked(t *testing.T, mode string) {
	d := newTestDispatcher(t)
	pm, err := ParsePollMode(mode)
	if err != nil {
		t.Fatal(err)
	}
	d.srv.SetMode(pm, 50*time.Microsecond)
	go d.Run()
	defer func() {
		d.Stop()
		<-d.Done()
	}()
	time.Sleep(50 * time.Millisecond) // let it park
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
}
