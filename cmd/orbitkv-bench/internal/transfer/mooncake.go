package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
)

// mooncakeSpec says how `orbitkv-bench transfer --mooncake-bench` runs
// Mooncake's Transfer Engine as a peer: the wheel's transfer_engine_bench
// (docs/mooncake.md), a target and an initiator process on loopback with
// P2PHANDSHAKE metadata and the TCP transport, the initiator READing
// batches of the run's block size and blocks per batch from the target's
// buffer.
type mooncakeSpec struct {
	bin      string        // path of transfer_engine_bench; "" leaves Mooncake out
	duration time.Duration // one initiator run, whole seconds (its --duration)
	threads  int           // the initiator's submitting threads (its --threads)
}

// Bounds of the Mooncake flags.
const (
	mooncakeMinDuration = time.Second
	mooncakeMaxDuration = time.Minute
	mooncakeMaxThreads  = 64
	// mooncakeMaxBufferBytes bounds the buffer each Mooncake process
	// allocates and registers (block × blocks × threads).
	mooncakeMaxBufferBytes = 4 << 30
	// mooncakeStartTimeout bounds how long the target may take to log its
	// handshake address, and the initiator its start, beyond --duration.
	mooncakeStartTimeout = 30 * time.Second
	// mooncakeTailLines of a process's output go into an error about it.
	mooncakeTailLines = 6
)

// check validates the Mooncake flags: the binary must be an
// executable regular file, the duration whole seconds within bounds.
func (m mooncakeSpec) check() error {
	if m.bin == "" {
		return nil
	}
	st, err := os.Stat(m.bin)
	switch {
	case err != nil:
		return suite.Usagef("--mooncake-bench %q: %v (the wheel's transfer_engine_bench: `engines/deps.sh mooncake` installs it under build/venv/mooncake/lib/python3.11/site-packages/mooncake/)", m.bin, errors.Unwrap(err))
	case !st.Mode().IsRegular():
		return suite.Usagef("--mooncake-bench %q: not a regular file", m.bin)
	case st.Mode().Perm()&0o111 == 0:
		return suite.Usagef("--mooncake-bench %q: not executable", m.bin)
	}
	if m.duration < mooncakeMinDuration || m.duration > mooncakeMaxDuration || m.duration%time.Second != 0 {
		return suite.Usagef("--mooncake-duration %s: want whole seconds, %s..%s", m.duration, mooncakeMinDuration, mooncakeMaxDuration)
	}
	return suite.Between("mooncake-threads", m.threads, 1, mooncakeMaxThreads)
}

// mooncakeTarget is a running transfer_engine_bench --mode=target: its
// segment name (the handshake listener's host:port) and its process
// group, killed by close.
type mooncakeTarget struct {
	segment string
	cmd     *exec.Cmd
	out     *lineTail
	done    chan struct{} // closed once its output has ended
}

// startMooncakeTarget starts the target process with a buffer of
// bufBytes and waits (mooncakeStartTimeout at most) until it logs the
// address of its handshake listener, which Mooncake picks itself.
func startMooncakeTarget(m mooncakeSpec, bufBytes uint64) (*mooncakeTarget, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	t := &mooncakeTarget{out: newLineTail(mooncakeTailLines), done: make(chan struct{})}
	t.cmd = exec.Command(m.bin, "--mode=target", "--metadata_server=P2PHANDSHAKE", "--protocol=tcp",
		"--local_server_name=127.0.0.1:"+strconv.Itoa(port), "--buffer_size="+strconv.FormatUint(bufBytes, 10))
	// Its own process group: the wheel's bin/transfer_engine_bench is a
	// Python wrapper whose child, the real binary, must die with it.
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := t.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	t.cmd.Stdout = t.cmd.Stderr
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the Mooncake target (--mooncake-bench %s): %w", m.bin, err)
	}
	found := make(chan string, 1)
	go func() {
		defer close(t.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			t.out.add(line)
			if seg, ok := parseMooncakeListening(line); ok {
				select {
				case found <- seg:
				default:
				}
			}
		}
		io.Copy(io.Discard, pipe)
	}()
	select {
	case t.segment = <-found:
		return t, nil
	case <-t.done:
		err = errors.New("exited before logging its handshake address")
	case <-time.After(mooncakeStartTimeout):
		err = fmt.Errorf("logged no handshake address in %s", mooncakeStartTimeout)
	}
	t.close()
	return nil, fmt.Errorf("the Mooncake target %s; its last output:\n%s", err, t.out)
}

// close kills the target's process group and reaps it.
func (t *mooncakeTarget) close() {
	syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
	t.cmd.Wait()
	<-t.done
}

// mooncakeResult is one initiator run, from its "Test completed" line.
type mooncakeResult struct {
	seconds float64 // the run's duration as Mooncake measured it
	batches uint64  // batches completed, over all threads
}

// gbps is the run's bytes (batches × batchBytes) over its duration, in 10^9 bytes per second.
func (r mooncakeResult) gbps(batchBytes uint64) float64 {
	return float64(r.batches) * float64(batchBytes) / r.seconds / 1e9
}

// runMooncakeInitiator runs one initiator against target for m.duration:
// READs of blocks × blockBytes per batch, and returns its result.
func runMooncakeInitiator(m mooncakeSpec, target *mooncakeTarget, blockBytes uint64, blocks int) (mooncakeResult, error) {
	port, err := freePort()
	if err != nil {
		return mooncakeResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.duration+mooncakeStartTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.bin, "--mode=initiator", "--metadata_server=P2PHANDSHAKE", "--protocol=tcp", "--operation=read",
		"--local_server_name=127.0.0.1:"+strconv.Itoa(port), "--segment_id="+target.segment,
		"--block_size="+strconv.FormatUint(blockBytes, 10), "--batch_size="+strconv.Itoa(blocks),
		"--threads="+strconv.Itoa(m.threads), "--duration="+strconv.Itoa(int(m.duration/time.Second)),
		"--buffer_size="+strconv.FormatUint(mooncakeBufferBytes(blockBytes, blocks, m.threads), 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	out, err := cmd.CombinedOutput()
	tail := newLineTail(mooncakeTailLines)
	var res mooncakeResult
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		tail.add(line)
		if r, ok := parseMooncakeCompleted(line); ok {
			res, found = r, true
		}
	}
	switch {
	case err != nil:
		return res, fmt.Errorf("the Mooncake initiator: %w; its last output:\n%s", err, tail)
	case !found:
		return res, fmt.Errorf("the Mooncake initiator printed no \"Test completed\" line; its last output:\n%s", tail)
	case res.batches == 0:
		return res, fmt.Errorf("the Mooncake initiator completed no batch in %.2f s; its last output:\n%s", res.seconds, tail)
	}
	return res, nil
}

// mooncakeBufferBytes is the buffer both processes register: the
// initiator's threads address disjoint blocks × blockBytes runs of it.
func mooncakeBufferBytes(blockBytes uint64, blocks, threads int) uint64 {
	return blockBytes * uint64(blocks) * uint64(threads)
}

var (
	mooncakeListeningRe = regexp.MustCompile(`Transfer Engine RPC using P2P handshake, listening on (\S+:\d+)`)
	mooncakeCompletedRe = regexp.MustCompile(`Test completed: duration ([0-9.]+), batch count (\d+), throughput`)
)

// parseMooncakeListening returns the host:port of a target's
// "listening on" log line (transfer_engine_impl.cpp), its segment name
// under P2PHANDSHAKE metadata.
func parseMooncakeListening(line string) (string, bool) {
	m := mooncakeListeningRe.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// parseMooncakeCompleted parses an initiator's final line
// (transfer_engine_bench.cpp: "Test completed: duration 3.01, batch count
// 329, throughput 0.23 GB/s"); a duration that is not positive is refused.
func parseMooncakeCompleted(line string) (mooncakeResult, bool) {
	m := mooncakeCompletedRe.FindStringSubmatch(line)
	if m == nil {
		return mooncakeResult{}, false
	}
	s, err1 := strconv.ParseFloat(m[1], 64)
	n, err2 := strconv.ParseUint(m[2], 10, 64)
	if err1 != nil || err2 != nil || s <= 0 {
		return mooncakeResult{}, false
	}
	return mooncakeResult{seconds: s, batches: n}, true
}

// mooncakeEnv is the MC_* variables of this process's environment, sorted:
// Mooncake's tunables, which its processes inherit.
func mooncakeEnv() []string {
	out := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MC_") {
			out = append(out, kv)
		}
	}
	slices.Sort(out)
	return out
}

// freePort is a loopback TCP port free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lineTail keeps the last n lines added (blank ones skipped), safe for concurrent use.
type lineTail struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newLineTail(n int) *lineTail { return &lineTail{n: n} }

func (b *lineTail) add(line string) {
	if strings.TrimSpace(line) == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
	if len(b.lines) > b.n {
		b.lines = b.lines[len(b.lines)-b.n:]
	}
}

func (b *lineTail) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.lines) == 0 {
		return "  (nothing)"
	}
	return "  " + strings.Join(b.lines, "\n  ")
}
