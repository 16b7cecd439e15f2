package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/latency"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/managerproc"
	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// Bounds of the replay's process handling.
const (
	workerReadyTimeout = 60 * time.Second // connect, allocate and register
	idleCheckTimeout   = 5 * time.Second  // sessions of exited workers torn down
	pageMargin         = 8                // engine pages beyond the longest request
	stderrKeep         = 8 << 10          // bytes of a worker's stderr kept for an error
)

// replayRun is one run of the replay: the plan, the Manager and the workers.
type replayRun struct {
	cfg     replayConfig
	plan    *replayPlan
	manager *managerproc.Manager
	// nodes, when set, are the Managers of a cluster run (manager is the
	// first): client i talks to nodes[i % len(nodes)].
	nodes  []*managerproc.Manager
	stderr io.Writer
	salt   string // tenant salt of this run's namespace (replayNamespace)

	// recordTokens > 0 makes the clients publish block records of that
	// many token ids; events, with --route events, are the nodes' event
	// endpoints the clients route by; watch is the bench's own
	// subscriber (--kv-events on), nil without.
	recordTokens int
	events       []string
	watch        *eventsSeen

	progress *suite.Progress                // the requests of every repeat (runReplay); nil: none shown
	prog     atomic.Pointer[suite.Progress] // progress from the workers' release on; their pipes count into it

	// done counts the requests the workers reported done (their progress
	// pipes); at, when set, runs once on its own goroutine when done
	// reaches at.after (orbitkv-bench restart's event).
	done atomic.Int64
	at   *halfway
	// reconnect makes the workers reconnect across a Manager restart
	// (workerInput.Reconnect), counting from afterFrom on apart.
	reconnect bool
	afterFrom int

	mu      sync.Mutex // guards workers and killed against the signal handler
	workers []*workerProc
	killed  bool
}

// workerProc is one started worker process.
type workerProc struct {
	index    int
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	stdout   *bufio.Reader
	stderr   *tailBuffer
	progress *os.File // read end of the worker's progress pipe (workerInput.ProgressFD)
}

// workerEvent is what a worker's reader goroutine reports: ready (res nil,
// err nil), a result with its decoded histograms, or a failure.
type workerEvent struct {
	index int
	res   *workerResult
	hists [numOps]*latency.Hist
	at    time.Time // when the result line arrived
	err   error
}

// execute starts the workers, releases them together, merges their results
// and checks the Manager's idle invariant.
func (r *replayRun) execute() (*replayReport, error) {
	n := r.cfg.clients
	pageCount := uint64(r.plan.maxBlocks + pageMargin)
	ready := make(chan workerEvent, n)
	done := make(chan workerEvent, n)
	defer r.killWorkers()
	order := ""
	if r.cfg.ordered {
		var err error
		if order, err = newOrderFile(); err != nil {
			return nil, err
		}
		defer os.Remove(order)
	}
	for i := range n {
		w, err := r.startWorker(i)
		if err != nil {
			return nil, err
		}
		in := workerInput{Socket: r.managerOf(i).Socket, Index: i, Clients: n, BlockBytes: r.cfg.blockBytes,
			Layers: r.cfg.layers, PageCount: pageCount, RunSalt: r.salt, Requests: partition(r.plan.requests, i, n), ProgressFD: suite.WorkerProgressFD,
			RecordTokens: r.recordTokens, StartOrder: order, Reconnect: r.reconnect, AfterFrom: r.afterFrom}
		if r.events != nil {
			in.Events = r.events
			for _, m := range r.nodes {
				in.Nodes = append(in.Nodes, m.Socket)
			}
		}
		go w.talk(in, ready, done)
	}
	for range n {
		select {
		case ev := <-ready:
			if ev.err != nil {
				return nil, r.failure(ev)
			}
		case <-time.After(workerReadyTimeout):
			return nil, fmt.Errorf("the clients were not ready within %v%s", workerReadyTimeout, r.manager.ExitNote())
		}
	}
	start := time.Now()
	r.prog.Store(r.progress)
	for _, w := range r.workers {
		if _, err := io.WriteString(w.stdin, "go\n"); err != nil {
			return nil, fmt.Errorf("client %d: releasing it: %w", w.index, err)
		}
		w.stdin.Close()
	}
	if r.at != nil {
		go r.at.watch(&r.done)
		defer r.at.stop()
	}
	results := make([]*workerResult, n)
	hists := make([][numOps]*latency.Hist, n)
	var last time.Time
	for range n {
		ev := <-done
		if ev.err != nil {
			return nil, r.failure(ev)
		}
		results[ev.index], hists[ev.index] = ev.res, ev.hists
		if ev.at.After(last) {
			last = ev.at
		}
	}
	rep := r.merge(results, hists, last.Sub(start))
	rep.results = results
	if r.at != nil {
		if err := r.at.wait(); err != nil {
			return nil, err
		}
	}
	if err := r.checkIdle(rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// managerOf is the Manager client i talks to.
func (r *replayRun) managerOf(i int) *managerproc.Manager {
	if len(r.nodes) > 0 {
		return r.nodes[i%len(r.nodes)]
	}
	return r.manager
}

// managers are every Manager of the run.
func (r *replayRun) managers() []*managerproc.Manager {
	if len(r.nodes) > 0 {
		return r.nodes
	}
	return []*managerproc.Manager{r.manager}
}

// startWorker re-executes this binary as the hidden worker subcommand.
func (r *replayRun) startWorker(i int) (*workerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to start client %d: %w", i, err)
	}
	w := &workerProc{index: i, cmd: exec.Command(self, WorkerCommand), stderr: &tailBuffer{max: stderrKeep}}
	w.cmd.Stderr = w.stderr
	// A worker dies with the bench, whatever kills the bench.
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w.stdout = bufio.NewReader(out)
	pw, err := w.progressPipe()
	if err != nil {
		return nil, fmt.Errorf("client %d: %w", i, err)
	}
	defer pw.Close() // the worker holds its own copy once started
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killed {
		w.progress.Close()
		return nil, errors.New("interrupted")
	}
	if err := w.cmd.Start(); err != nil {
		w.progress.Close()
		return nil, fmt.Errorf("starting client %d: %w", i, err)
	}
	go w.readProgress(&r.prog, &r.done)
	r.workers = append(r.workers, w)
	return w, nil
}

// talk runs the parent's side of the worker protocol (see workerInput) and
// reaps the process; it reports on ready and then on done.
func (w *workerProc) talk(in workerInput, ready, done chan<- workerEvent) {
	fail := func(ch chan<- workerEvent, err error) {
		werr := w.cmd.Wait()
		ch <- workerEvent{index: w.index, err: errors.Join(err, werr)}
	}
	line, err := json.Marshal(&in)
	if err == nil {
		_, err = w.stdin.Write(append(line, '\n'))
	}
	if err != nil {
		fail(ready, fmt.Errorf("sending the work: %w", err))
		return
	}
	s, err := w.stdout.ReadString('\n')
	if err != nil || s != "ready\n" {
		fail(ready, fmt.Errorf("waiting for ready: got %q (%v)", s, err))
		return
	}
	ready <- workerEvent{index: w.index}
	b, err := readResultLine(w.stdout, maxWorkerResultBytes)
	at := time.Now()
	if err != nil {
		fail(done, fmt.Errorf("reading the result: %w", err))
		return
	}
	res, hists, err := decodeWorkerResult(b)
	if err != nil {
		fail(done, fmt.Errorf("decoding the result: %w", err))
		return
	}
	if err := w.cmd.Wait(); err != nil {
		done <- workerEvent{index: w.index, err: err}
		return
	}
	done <- workerEvent{index: w.index, res: res, hists: hists, at: at}
}

// failure describes a failed worker with its stderr and the Manager's state.
func (r *replayRun) failure(ev workerEvent) error {
	w := r.workers[ev.index]
	msg := fmt.Sprintf("client %d (pid %d) failed: %v", ev.index, w.cmd.Process.Pid, ev.err)
	if s := strings.TrimSpace(w.stderr.String()); s != "" {
		msg += "\nits stderr:\n" + s
	}
	return errors.New(msg + r.manager.ExitNote())
}

// killWorkers SIGKILLs every worker still running. Safe from any goroutine
// and more than once.
func (r *replayRun) killWorkers() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killed = true
	for _, w := range r.workers {
		if w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Kill()
		}
	}
}

// merge sums the workers' counters and merges their histograms, op by op
// (hists[i] is worker i's, indexed like opNames), into the report's.
func (r *replayRun) merge(results []*workerResult, hists [][numOps]*latency.Hist, wall time.Duration) *replayReport {
	rep := &replayReport{
		Trace: r.plan.tracePath, BoundBlocks: r.plan.bound.Blocks, BoundHitBlocks: r.plan.bound.HitBlocks,
		BoundHitRatio: r.plan.bound.HitRatio(), WorkingSetBytes: r.plan.unique * r.cfg.blockBytes,
		Clients: r.cfg.clients, BlockBytes: r.cfg.blockBytes, Layers: r.cfg.layers,
		WallS: suite.ElapsedSeconds(wall), RTT: map[string]rttStats{}, hists: map[string]*latency.Hist{},
	}
	if r.manager.Started() {
		rep.RAMCapacityBytes = r.cfg.ramCapacity
	}
	var restoreNS, publishNS uint64
	var merged [numOps]*latency.Hist
	for op := range merged {
		merged[op] = latency.NewHist()
	}
	for i, res := range results {
		rep.Requests += res.Requests
		rep.Blocks += res.Blocks
		rep.HitBlocks += res.HitBlocks
		rep.Mismatches += res.Mismatches
		rep.Unadmitted += res.Unadmitted
		rep.UnadmittedBlocks += res.UnadmittedBlocks
		rep.LoadingWaits += res.LoadingWaits
		if res.remote != nil {
			if rep.remoteHist == nil {
				rep.remoteHist = latency.NewHist()
			}
			rep.remoteHist.Merge(res.remote)
		}
		rep.StoredBlocks += res.StoredBlocks
		rep.PresentBlocks += res.PresentBlocks
		rep.RestoredBytes += res.RestoredBytes
		rep.PublishedBytes += res.PublishedBytes
		restoreNS += res.RestoreNS
		publishNS += res.PublishNS
		for op, h := range hists[i] {
			merged[op].Merge(h)
		}
	}
	if rep.Blocks > 0 {
		rep.HitRatio = float64(rep.HitBlocks) / float64(rep.Blocks)
	}
	rep.restoreNS, rep.publishNS = restoreNS, publishNS
	rep.RestoreGBps = suite.GBps(rep.RestoredBytes, restoreNS)
	rep.PublishGBps = suite.GBps(rep.PublishedBytes, publishNS)
	for op, name := range opNames {
		st := merged[op].Stats()
		rep.RTT[name] = rttStats{P50: st.P50, P99: st.P99, P999: st.P999, N: st.N}
		rep.hists[name] = merged[op]
	}
	rep.header = r.header()
	return rep
}

// checkIdle asks the Manager's GET /health, once the workers have exited,
// whether it is idle (docs/design.md §6 rule 8): no session, and no leases, pins, reserved
// bytes or operations. Session teardown runs after the disconnect, so it
// polls for idleCheckTimeout. An external Manager is not checked: the bench
// knows only its socket, and its other sessions' leases are not ours.
func (r *replayRun) checkIdle(rep *replayReport) error {
	if r.manager.Http == "" {
		// A session's own Health shows only its own figures; the
		// Manager-wide ones are on the external Manager's GET /health.
		rep.IdleInvariant = "not checked: an external Manager's idle state is on its GET /health"
		return nil
	}
	deadline := time.Now().Add(idleCheckTimeout)
	for {
		var blocks, used, capacity uint64
		var busy []string
		for k, m := range r.managers() {
			h, err := managerproc.ReadHealth(m.Http)
			if err != nil {
				return fmt.Errorf("health after the run: %w%s", err, m.ExitNote())
			}
			blocks, used, capacity = blocks+h.Blocks, used+h.RAMUsedBytes, capacity+h.RAMCapacityBytes
			if h.Sessions != 0 || h.Leases != 0 || h.Pins != 0 || h.ReservedBytes != 0 || h.Operations != 0 {
				b := fmt.Sprintf("%d sessions, %d leases, %d pins, %d reserved bytes, %d operations",
					h.Sessions, h.Leases, h.Pins, h.ReservedBytes, h.Operations)
				if len(r.nodes) > 0 {
					b = fmt.Sprintf("node %d: %s", k, b)
				}
				busy = append(busy, b)
			}
		}
		rep.ManagerBlocks, rep.ManagerRAMUsedBytes = blocks, used
		if capacity != 0 {
			rep.RAMCapacityBytes = capacity
		}
		if len(busy) == 0 {
			rep.IdleInvariant = "ok"
			return nil
		}
		if time.Now().After(deadline) {
			rep.IdleInvariant = "violated: " + strings.Join(busy, "; ")
			rep.idleViolation = rep.IdleInvariant[len("violated: "):]
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
