package copy

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/copier"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// maxCopyThreads bounds the baseline's threads: the Manager's --copy-workers
// limit.
const maxCopyThreads = copier.MaxWorkers

// copyWorkers is the copy engine's thread count for a Manager started with
// --copy-workers def followed by managerArgs (which come last and win).
func copyWorkers(def int, managerArgs []string) (int, error) {
	v, ok := launch.LastFlagValue(managerArgs, "copy-workers")
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxCopyThreads {
		return 0, suite.Usagef("--manager-args: --copy-workers %q must be a count 1..%d (the memcpy baseline uses as many threads)", v, maxCopyThreads)
	}
	return n, nil
}

// parallelMemcpy is the copy suite's baseline: memcpy(3) of one batch split
// into threads contiguous parts, each copied by its own OS thread at once,
// as the copy engine's workers split a batch. The calling goroutine copies
// part 0; threads-1 helper goroutines, each locked to an OS thread for the
// pool's life, copy the others. A batch's time runs from handing the parts
// out to the last part done, so it includes the wake-up of the helpers
// (parked on a channel between batches), as a publish includes the wake-up
// of the engine's parked workers.
type parallelMemcpy struct {
	threads int
	start   []chan memcpyPart // one per helper
	done    chan struct{}
	wg      sync.WaitGroup
}

// memcpyPart is one helper's share of a batch.
type memcpyPart struct {
	dst, src unsafe.Pointer
	n        uint64
}

// newParallelMemcpy starts threads-1 helpers (threads ≥ 1); Close stops them.
func newParallelMemcpy(threads int) *parallelMemcpy {
	p := &parallelMemcpy{threads: threads, done: make(chan struct{}, threads)}
	for range threads - 1 {
		ch := make(chan memcpyPart)
		p.start = append(p.start, ch)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			runtime.LockOSThread() // a thread of its own, as an engine worker
			for part := range ch {
				memcpyOnce(part.dst, part.src, part.n)
				p.done <- struct{}{}
			}
		}()
	}
	return p
}

// partBytes is the byte count of each of threads parts of n: equal shares
// rounded up to 4 KiB (a page: no two threads write one page), the last
// part taking what is left.
func partBytes(n uint64, threads int) uint64 {
	per := (n + uint64(threads) - 1) / uint64(threads)
	return (per + 4095) &^ 4095
}

// copy copies n bytes from src to dst split over the pool's threads and
// returns how long the whole batch took.
func (p *parallelMemcpy) copy(dst, src unsafe.Pointer, n uint64) time.Duration {
	per := partBytes(n, p.threads)
	t := time.Now()
	sent := 0
	for i, ch := range p.start {
		off := uint64(i+1) * per
		if off >= n {
			break
		}
		ch <- memcpyPart{unsafe.Add(dst, off), unsafe.Add(src, off), min(per, n-off)}
		sent++
	}
	memcpyOnce(dst, src, min(per, n))
	for range sent {
		<-p.done
	}
	return time.Since(t)
}

// Close stops the helpers and waits for them.
func (p *parallelMemcpy) Close() {
	for _, ch := range p.start {
		close(ch)
	}
	p.wg.Wait()
}

// baselineText says how the baseline was measured, for the report.
func (p *parallelMemcpy) baselineText() string {
	return fmt.Sprintf("memcpy(3) of the batch bytes split into %d contiguous parts copied at once by %d threads (the Manager's --copy-workers), from the engine buffer into the next batch-sized slice of a destination as large as the Manager's RAM tier (as the tier's frames rotate), one C call per part (native.MemcpyBench)", p.threads, p.threads)
}
