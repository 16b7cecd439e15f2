package managerproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orbitkv/orbitkv/gocore/abi"
	"github.com/orbitkv/orbitkv/gocore/client"
	"github.com/orbitkv/orbitkv/internal/launch"
)

// StopGrace is how long stop waits after SIGTERM before it SIGKILLs a
// Manager the bench started.
const StopGrace = 5 * time.Second

// Manager is the Manager the bench talks to: started by the bench through
// internal/launch (proc set) or named by --socket (proc nil).
type Manager struct {
	Socket string
	Http   string          // its --http-addr (GET /health); "" for an external Manager
	Pid    int             // 0 until known (external: from the Health reply)
	proc   *launch.Manager // nil for an external Manager
}

// External is the Manager already serving socket.
func External(socket string) *Manager { return &Manager{Socket: socket} }

// Started reports whether the bench started m (and so stops it).
func (m *Manager) Started() bool { return m.proc != nil }

// Launch starts a Manager as spec says (spec.Bin "" = launch.Find's
// default; a temporary bootstrap socket and a free loopback HTTP port
// unless spec.Args name others) and waits until it serves.
func Launch(spec launch.Spec) (*Manager, error) {
	bin, err := launch.Find(spec.Bin)
	if err != nil {
		return nil, err
	}
	spec.Bin = bin
	p, err := launch.Start(spec)
	if err != nil {
		return nil, err
	}
	return &Manager{Socket: p.Socket(), Http: p.HTTPAddr(), Pid: p.Pid(), proc: p}, nil
}

// RAMSpec is a Manager with a RAM tier of capacity bytes; --manager-args
// (extra) come last and win. The Manager pre-faults its RAM tier before it
// serves (seconds per GiB on a small VM), so the wait for it grows with the
// capacity.
func RAMSpec(bin string, capacity uint64, extra []string) launch.Spec {
	return launch.Spec{Bin: bin,
		Args:         append([]string{"--ram-capacity", fmt.Sprint(capacity)}, extra...),
		ReadyTimeout: 30*time.Second + time.Duration(capacity>>30)*15*time.Second}
}

// Alive reports an error, ending with the tail of its log, if a Manager
// the bench started has exited.
func (m *Manager) Alive() error {
	if m.proc == nil || !m.proc.Exited() {
		return nil
	}
	return fmt.Errorf("the Manager exited: %v\nManager log (tail):\n%s", m.proc.Err(), m.proc.Tail(2000))
}

// ExitNote is "" while m runs (or is external), else a new line and why it
// is gone: the suffix of a suite's error.
func (m *Manager) ExitNote() string {
	if err := m.Alive(); err != nil {
		return "\n" + err.Error()
	}
	return ""
}

// Stop ends a Manager the bench started (SIGTERM, SIGKILL after
// stopGrace) and removes its temporary directory. An external Manager is
// left alone. Safe to call more than once and from several goroutines.
func (m *Manager) Stop() {
	if m.proc != nil {
		m.proc.Stop(StopGrace)
	}
}

// StopOnSignal makes SIGINT or SIGTERM run before (if non-nil), stop m (a
// Manager the bench started, with its temporary directory) and exit 130,
// naming suite on stderr. The returned function ends the watch; defer it.
func StopOnSignal(suite string, m *Manager, stderr io.Writer, before func()) (cancel func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if sig, ok := <-sigs; ok {
			if before != nil {
				before()
			}
			m.Stop()
			fmt.Fprintf(stderr, "orbitkv-bench %s: %v\n", suite, sig)
			os.Exit(130)
		}
	}()
	return func() { signal.Stop(sigs) }
}

// Connect opens the bench's own session (role bench) to m.
func Connect(m *Manager, suite string) (*client.Client, error) {
	c, err := client.Connect(client.Options{SocketPath: m.Socket, InstanceID: fmt.Sprintf("%s-%d", suite, os.Getpid()), Role: uint32(abi.RoleBench)})
	if err != nil {
		return nil, fmt.Errorf("connecting to the Manager at %s: %w", m.Socket, err)
	}
	return c, nil
}

// CPUTicks returns utime+stime of process pid from /proc/PID/stat, in
// clock ticks (sysconf(_SC_CLK_TCK) per second).
func CPUTicks(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("reading CPU time of the Manager: %w", err)
	}
	return ParseStatTicks(string(b))
}

// ParseStatTicks extracts utime (field 14) + stime (field 15) of a
// /proc/PID/stat line. The command name (field 2) is in parentheses and may
// hold spaces or ')', so fields are counted after the last ')'.
func ParseStatTicks(stat string) (uint64, error) {
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

// Kill SIGKILLs a Manager the bench started and waits for it to exit (its
// temporary directory, if it has one of its own, is removed).
func (m *Manager) Kill() {
	if m.proc != nil {
		m.proc.Kill()
	}
}

// Log is the output of a Manager the bench started ("" for an external
// one): its log, and the logs of successors it started (they inherit it).
func (m *Manager) Log() string {
	if m.proc == nil {
		return ""
	}
	return m.proc.Output()
}

// LogTail is the last n bytes of Log ("" for an external Manager).
func (m *Manager) LogTail(n int) string {
	if m.proc == nil {
		return ""
	}
	return m.proc.Tail(n)
}
