package channel

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// A parked dispatcher must not hold up the Go runtime: a stop-the-world
// (here a forced GC) has to finish while no request ever arrives. A raw
// FUTEX_WAIT without a timeout would not do: the runtime's preemption
// signal restarts it (SA_RESTART), so every stop-the-world would wait for
// the next channel request and freeze the whole Manager when idle.
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

// The park flag sits in the doorbell, which every client can write. A
// client that clears it must not keep the Manager's own control events
// (here: Stop) from waking the dispatcher.
func TestStopWakesADispatcherWhoseParkFlagAClientCleared(t *testing.T) {
	// Without the direct wakeup every attempt takes the 100 ms park bound;
	// with it, a stop takes microseconds. Three attempts keep a loaded CI
	// machine from turning one slow wakeup into a failure.
	var times []time.Duration
	for attempt := 0; attempt < 3; attempt++ {
		d := newTestDispatcher(t)
		go d.Run()
		time.Sleep(30 * time.Millisecond) // parked, past the raw window
		const serverParkedOffset = 128    // abi.h struct okv_doorbell.server_parked
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&d.db[serverParkedOffset])), 0)
		t0 := time.Now()
		d.Stop()
		select {
		case <-d.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("dispatcher did not stop within 5 s")
		}
		dt := time.Since(t0)
		if dt < 50*time.Millisecond {
			return
		}
		times = append(times, dt)
	}
	t.Errorf("Stop took %v with the park flag cleared, want a direct wakeup (< 50 ms) at least once", times)
}

func TestAnIdleDispatcherCountsItsParks(t *testing.T) {
	d := newTestDispatcher(t)
	if d.Parks() != 0 {
		t.Fatalf("Parks() = %d before Run", d.Parks())
	}
	go d.Run()
	time.Sleep(30 * time.Millisecond)
	n := d.Parks()
	d.Stop()
	<-d.Done()
	if n == 0 {
		t.Error("an idle dispatcher reported no parks")
	}
}
