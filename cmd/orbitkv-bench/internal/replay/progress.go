package replay

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// progressPipe makes w's progress pipe: the write end becomes the
// worker's workerProgressFD (close it in the parent once the worker
// started), the read end is w.progress.
func (w *workerProc) progressPipe() (*os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("progress pipe: %w", err)
	}
	w.progress, w.cmd.ExtraFiles = pr, []*os.File{pw}
	return pw, nil
}

// readProgress adds the worker's progress lines to the run's progress
// (nil until the workers are released, and for --progress off) until the
// worker exits, then closes the pipe.
func (w *workerProc) readProgress(to *atomic.Pointer[suite.Progress], done *atomic.Int64) {
	defer w.progress.Close()
	sc := bufio.NewScanner(w.progress)
	var prev int64
	for sc.Scan() {
		n, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil || n < prev {
			continue // not a count: the bar is only a display
		}
		to.Load().Add(n - prev)
		done.Add(n - prev)
		prev = n
	}
}

// workerProgress is a replay worker's end of its progress pipe; nil (no
// pipe) reports nothing.
type workerProgress struct {
	f    *os.File
	last time.Time
	done int // requests finished, reported or not
	sent int // the count last written
}

// openWorkerProgress opens fd (workerInput.ProgressFD; 0: none).
func openWorkerProgress(fd int) *workerProgress {
	if fd == 0 {
		return nil
	}
	return &workerProgress{f: os.NewFile(uintptr(fd), "progress"), last: time.Now()}
}

// report records done requests finished and writes the count when
// workerProgressEvery passed since the last write; a failed write (the
// parent is gone) ends the reports.
func (p *workerProgress) report(done int) {
	if p == nil || p.f == nil {
		return
	}
	p.done = done
	if now := time.Now(); now.Sub(p.last) >= suite.WorkerProgressEvery {
		p.last = now
		p.flush()
	}
}

func (p *workerProgress) flush() {
	if p.done == p.sent || p.f == nil {
		return
	}
	if _, err := fmt.Fprintf(p.f, "%d\n", p.done); err != nil {
		p.f.Close()
		p.f = nil
		return
	}
	p.sent = p.done
}

// close writes the final count and closes the pipe.
func (p *workerProgress) close() {
	if p == nil || p.f == nil {
		return
	}
	p.flush()
	p.f.Close()
	p.f = nil
}
