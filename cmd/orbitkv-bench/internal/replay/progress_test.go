package replay

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/benchtest"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// A worker's progress pipe carries its counts to the parent, which adds
// the differences up; the pipe's end stops the reader.
func TestWorkerProgressReachesTheParentsCount(t *testing.T) {
	w := &workerProc{cmd: &exec.Cmd{}}
	pw, err := w.progressPipe()
	if err != nil {
		t.Fatal(err)
	}
	if len(w.cmd.ExtraFiles) != 1 || w.cmd.ExtraFiles[0] != pw || suite.WorkerProgressFD != 3 {
		t.Fatalf("the pipe is not the worker's first extra file (fd 3)")
	}
	clock := &benchtest.FakeClock{T: time.Unix(1000, 0)}
	var out bytes.Buffer
	var to atomic.Pointer[suite.Progress]
	to.Store(suite.NewProgress(&out, "replay", "requests", 50, clock.Now))
	read := make(chan struct{})
	var done atomic.Int64
	go func() { w.readProgress(&to, &done); close(read) }()
	wp := &workerProgress{f: pw}
	for i := 1; i <= 30; i++ {
		wp.last = time.Now().Add(-time.Second) // due for a write each time
		wp.report(i)
	}
	wp.report(31) // not due (30 was just written): close writes it
	wp.close()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("readProgress did not return after the pipe closed")
	}
	if got := to.Load().Done.Load(); got != 31 || done.Load() != 31 {
		t.Fatalf("the parent counted %d requests (%d in the run's count), want 31", got, done.Load())
	}
	if _, err := w.progress.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("the read end is still open after the worker's end closed: %v", err)
	}
}
