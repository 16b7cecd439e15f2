package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
)

// manager is the Manager the bench talks to: started by the bench (cmd set)
// or named by --socket.
type manager struct {
	socket  string
	http    string    // its --http-addr (GET /health); "" for an external Manager
	pid     int       // 0 until known (external: from the Health reply)
	cmd     *exec.Cmd // nil for an external Manager
	exited  chan error
	tempDir string
	logPath string
	stopped sync.Once
}

// quoteCommand renders bin and args as a shell-like command line, quoting
// (strconv.Quote) the arguments that are empty or hold white space.
func quoteCommand(bin string, args []string) string {
	parts := make([]string, 0, len(args)+1)
	for _, a := range append([]string{bin}, args...) {
		if a == "" || strings.ContainsAny(a, " \t\n\"'") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// findManagerBin returns --manager-bin, else orbitkv-manager next to this
// binary, else ./bin/orbitkv-manager.
func findManagerBin(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	var tried []string
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "orbitkv-manager")
		tried = append(tried, p)
		if isExecutable(p) {
			return p, nil
		}
	}
	p := filepath.Join("bin", "orbitkv-manager")
	tried = append(tried, p)
	if isExecutable(p) {
		return p, nil
	}
	return "", fmt.Errorf("no Manager binary (tried %s); build it (go build -o bin/ ./cmd/...) or pass --manager-bin or --socket",
		strings.Join(tried, ", "))
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// startManager starts bin/orbitkv-manager for the channel suite: on a
// temporary bootstrap socket with --poll-mode and --manager-args.
func startManager(cfg *channelConfig) (*manager, error) {
	return launchManager(managerSpec{bin: cfg.managerBin,
		args: append([]string{"--poll-mode", cfg.pollMode}, cfg.managerArgs...)})
}

// managerSpec says how to start a Manager for a bench.
type managerSpec struct {
	bin           string        // --manager-bin; "" = findManagerBin's default
	args          []string      // arguments after the bench's own
	acceptTimeout time.Duration // 0 = 10 s; a big pre-faulted RAM tier needs more
}

// launchManager starts a Manager on a temporary bootstrap socket and a
// free loopback HTTP port and waits until the socket accepts connections.
func launchManager(spec managerSpec) (*manager, error) {
	bin, err := findManagerBin(spec.bin)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "orbitkv-bench-")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary directory for the Manager: %w", err)
	}
	m := &manager{socket: filepath.Join(dir, "manager.sock"), tempDir: dir, logPath: filepath.Join(dir, "manager.log")}
	logf, err := os.Create(m.logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("creating the Manager log: %w", err)
	}
	defer logf.Close()
	// A free loopback port, not the default one a Manager already running
	// on this host may hold: its GET /health has the Manager-wide figures
	// (the idle check). spec.args come last and win (Go's flag package
	// keeps the last value).
	if m.http, err = freeLoopbackAddr(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if v, ok := lastFlagValue(spec.args, "http-addr"); ok {
		m.http = v
	}
	args := append([]string{"--bootstrap-socket", m.socket, "--http-addr", m.http}, spec.args...)
	m.cmd = exec.Command(bin, args...)
	// Both streams go straight to the log file (the child gets the fd): no
	// pipe, so nothing in the bench can make the Manager's writes fail with
	// EPIPE (SIGPIPE for a Go program writing to stderr).
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	m.pid = m.cmd.Process.Pid
	m.exited = make(chan error, 1)
	go func() { m.exited <- m.cmd.Wait() }()
	timeout := spec.acceptTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if err := m.waitAccepting(timeout); err != nil {
		tail := m.logTail() // before stop removes the log
		m.stop()
		return nil, fmt.Errorf("%s: %w%s", quoteCommand(bin, args), err, tail)
	}
	return m, nil
}

// waitAccepting polls the bootstrap socket until a connect succeeds.
func (m *manager) waitAccepting(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case err := <-m.exited:
			m.exited <- err
			return fmt.Errorf("the Manager exited before its socket accepted: %v", err)
		default:
		}
		conn, err := net.DialTimeout("unix", m.socket, 100*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bootstrap socket %s did not accept within %v: %w", m.socket, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports an error if a Manager the bench started has exited.
func (m *manager) alive() error {
	if m.cmd == nil {
		return nil
	}
	select {
	case err := <-m.exited:
		m.exited <- err
		return fmt.Errorf("the Manager exited: %v%s", err, m.logTail())
	default:
		return nil
	}
}

// stop ends a Manager the bench started: SIGTERM, then SIGKILL after 5 s,
// and removes its temporary directory. An external Manager is left alone.
// Safe to call more than once and from several goroutines.
func (m *manager) stop() {
	if m.cmd == nil {
		return
	}
	m.stopped.Do(m.stopOnce)
}

func (m *manager) stopOnce() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-m.exited:
		m.exited <- err
	case <-time.After(5 * time.Second):
		_ = m.cmd.Process.Kill()
		err := <-m.exited
		m.exited <- err
	}
	os.RemoveAll(m.tempDir)
}

// stopOnSignal makes SIGINT or SIGTERM run before (if non-nil), stop m (a
// Manager the bench started, with its temporary directory) and exit 130,
// naming suite on stderr. The returned function ends the watch; defer it.
func stopOnSignal(suite string, m *manager, stderr io.Writer, before func()) (cancel func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if sig, ok := <-sigs; ok {
			if before != nil {
				before()
			}
			m.stop()
			fmt.Fprintf(stderr, "orbitkv-bench %s: %v\n", suite, sig)
			os.Exit(130)
		}
	}()
	return func() { signal.Stop(sigs) }
}

// connectBench opens the bench's own session (role bench) to m.
func connectBench(m *manager, suite string) (*client.Client, error) {
	c, err := client.Connect(client.Options{SocketPath: m.socket, InstanceID: fmt.Sprintf("%s-%d", suite, os.Getpid()), Role: uint32(abi.RoleBench)})
	if err != nil {
		return nil, fmt.Errorf("connecting to the Manager at %s: %w", m.socket, err)
	}
	return c, nil
}

func (m *manager) logTail() string {
	if m.logPath == "" {
		return ""
	}
	b, err := os.ReadFile(m.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return "\nManager log (tail):\n" + string(b)
}

// cpuTicks returns utime+stime of process pid from /proc/PID/stat, in
// clock ticks (sysconf(_SC_CLK_TCK) per second).
func cpuTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of the Manager: %w", err)
	}
	return parseStatTicks(string(b))
}

// parseStatTicks extracts utime (field 14) + stime (field 15) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and may
// hold spaces or ')', so fields are counted after the last ')'.
func parseStatTicks(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc/PID/stat: no ')'")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state), so field k is f[k-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("malformed /proc/PID/stat: %d fields after the name, want ≥ 13", len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("malformed /proc/PID/stat utime/stime: %w", err)
	}
	return u + s, nil
}
