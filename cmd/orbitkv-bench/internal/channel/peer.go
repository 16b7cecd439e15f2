package channel

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/cmd/orbitkv-bench/internal/suite"
	"github.com/orbitkv/orbitkv/gocore/pingpong"
	"github.com/spf13/pflag"
)

// PeerCommand is the hidden subcommand the bench re-executes itself with to
// run the other end of a baseline in a separate process.
const PeerCommand = "__peer"

// peerFD is where exec.Cmd.ExtraFiles[0] lands in the peer.
const peerFD = 3

// RunPeer is `orbitkv-bench __peer KIND --parent-pid PID --idle D`.
// Raw baselines echo on fd 3 until stopped; grpc serves the health service
// on 127.0.0.1:0, prints its port as one line on stdout and serves until
// stdin reaches EOF. Every peer also exits when its parent is gone
// (PR_SET_PDEATHSIG plus a getppid check) or after --idle without work.
func RunPeer(args []string, stdout, stderr io.Writer) error {
	if len(args) < 1 {
		return suite.Usagef("usage: orbitkv-bench %s KIND --parent-pid PID [--idle D]", PeerCommand)
	}
	kind := args[0]
	fs := pflag.NewFlagSet(PeerCommand, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	parent := fs.Int("parent-pid", 0, "pid of the bench process")
	idle := fs.Duration("idle", 30*time.Second, "exit after this long without a request")
	if err := suite.ParseStandalone(fs, args[1:]); err != nil {
		return err
	}
	if *parent <= 0 {
		return suite.Usagef("--parent-pid is required")
	}
	if kind == subjectGRPC {
		return serveGRPCPeer(*parent, *idle, stdout)
	}
	k, err := pingpong.ParseKind(kind)
	if err != nil {
		return suite.Usagef("%v", err)
	}
	err = pingpong.Peer(k, peerFD, *parent, *idle)
	if errors.Is(err, syscall.ESRCH) {
		return nil // the bench is gone: nothing left to report to
	}
	return err
}

// peerProcess is a started peer.
type peerProcess struct {
	cmd  *exec.Cmd
	done chan error // receives cmd.Wait's result once
}

// startPeer re-executes this binary as `__peer kind`, handing it extra
// (closed here after the start). stdin/stdout may be nil.
func startPeer(kind string, extra *os.File, idle time.Duration, stdin io.Reader, stdout io.Writer) (*peerProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to start a %s peer: %w", kind, err)
	}
	cmd := exec.Command(self, PeerCommand, kind,
		"--parent-pid", strconv.Itoa(os.Getpid()), "--idle", idle.String())
	cmd.Stdin = stdin
	cmd.Stdout = stdout
	cmd.Stderr = os.Stderr
	// Second guard beside the peer's own prctl: dies with this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if extra != nil {
		cmd.ExtraFiles = []*os.File{extra}
	}
	err = cmd.Start()
	if extra != nil {
		extra.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("starting %s peer: %w", kind, err)
	}
	p := &peerProcess{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	return p, nil
}

// wait gives a peer that was told to stop `grace` to exit, then kills it.
// It returns the peer's exit error, if it exited by itself with one.
func (p *peerProcess) wait(grace time.Duration) error {
	select {
	case err := <-p.done:
		return err
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("peer %d did not stop within %v; killed", p.cmd.Process.Pid, grace)
	}
}

// readPortLine reads the first stdout line of a grpc peer: its port.
func readPortLine(r io.Reader, timeout time.Duration) (int, error) {
	type result struct {
		port int
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		if err != nil {
			ch <- result{err: fmt.Errorf("reading the grpc peer's port: %w", err)}
			return
		}
		port, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || port <= 0 || port > 65535 {
			ch <- result{err: fmt.Errorf("grpc peer printed %q, want a port", strings.TrimSpace(line))}
			return
		}
		ch <- result{port: port}
	}()
	select {
	case r := <-ch:
		return r.port, r.err
	case <-time.After(timeout):
		return 0, fmt.Errorf("grpc peer printed no port within %v", timeout)
	}
}
