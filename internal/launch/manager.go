package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ReadyLine is the message the Manager logs once its bootstrap socket
// listens and its HTTP listener, when it has one, serves
// (cmd/orbitkv-manager). Start waits for it.
const ReadyLine = "orbitkv-manager serving"

// NoHTTP as Spec.HTTPAddr starts the Manager without an HTTP listener
// (--http-addr "").
const NoHTTP = "-"

// DefaultReadyTimeout is how long Start waits for ReadyLine when
// Spec.ReadyTimeout is 0.
const DefaultReadyTimeout = 10 * time.Second

// Spec says how to start a Manager. The zero value starts Find's binary on
// a fresh temporary directory and a free loopback HTTP port.
type Spec struct {
	// Bin is the Manager binary; "" = Find("").
	Bin string
	// Dir holds the socket (unless Socket is set) and the log. "" = a fresh
	// temporary directory that Stop and Kill remove; a given Dir is left.
	Dir string
	// Socket is the --bootstrap-socket path; "" = Dir/manager.sock.
	Socket string
	// HTTPAddr is the --http-addr (host:port); "" = a free loopback port
	// (FreeLoopbackAddr), NoHTTP = none.
	HTTPAddr string
	// Args come after --bootstrap-socket and --http-addr and win over them
	// (Go's flag package keeps the last value); HTTPAddr reports an
	// --http-addr given here.
	Args []string
	// ReadyTimeout bounds the wait for ReadyLine; 0 = DefaultReadyTimeout.
	// A large pre-faulted RAM tier needs more.
	ReadyTimeout time.Duration
	// Env, ExtraFiles and ListenFDs are ProcessSpec's: what a stand-in for
	// systemd passes (internal/sdstub).
	Env        []string
	ExtraFiles []*os.File
	ListenFDs  bool
}

// Manager is a started orbitkv-manager process. Its methods, including
// those of the embedded Process, are safe for concurrent use.
type Manager struct {
	*Process
	socket string
	http   string
	dir    string // removed by Stop and Kill when ownDir
	ownDir bool
}

// Start starts a Manager as spec says and waits until it logs ReadyLine.
// Errors: no binary (Find), no temporary directory or free port, the
// binary does not start, or the Manager exits or stays silent past
// ReadyTimeout; the last two name the command line and end with the
// tail of its log, and the Manager is killed and its own directory removed.
func Start(spec Spec) (*Manager, error) {
	m, err := start(spec)
	if err != nil {
		return nil, err
	}
	timeout := spec.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	if err := m.WaitOutput(ReadyLine, timeout); err != nil {
		tail := m.Tail(2000) // before Kill removes the log
		m.Kill()
		return nil, fmt.Errorf("%s: %w\nManager log (tail):\n%s", m.Command(), err, tail)
	}
	return m, nil
}

// Run starts a Manager as spec says without waiting for ReadyLine, waits up
// to timeout for it to exit, and returns its output and exit status (nil,
// or an *exec.ExitError): for flags the Manager must refuse. If it is
// still running after timeout it is killed and the error wraps ErrRunning.
func Run(spec Spec, timeout time.Duration) (string, error) {
	m, err := start(spec)
	if err != nil {
		return "", err
	}
	werr := m.Wait(timeout)
	out := m.Output()
	if errors.Is(werr, ErrRunning) {
		m.Kill()
	} else {
		m.removeDir()
	}
	return out, werr
}

func start(spec Spec) (*Manager, error) {
	bin := spec.Bin
	if bin == "" {
		var err error
		if bin, err = Find(""); err != nil {
			return nil, err
		}
	}
	m := &Manager{dir: spec.Dir, socket: spec.Socket, http: spec.HTTPAddr}
	if m.dir == "" {
		var err error
		if m.dir, err = os.MkdirTemp("", "orbitkv-manager-"); err != nil {
			return nil, fmt.Errorf("creating a temporary directory for the Manager: %w", err)
		}
		m.ownDir = true
	}
	if m.socket == "" {
		m.socket = filepath.Join(m.dir, "manager.sock")
	}
	switch m.http {
	case NoHTTP:
		m.http = ""
	case "":
		var err error
		if m.http, err = FreeLoopbackAddr(); err != nil {
			m.removeDir()
			return nil, err
		}
	}
	args := append([]string{"--bootstrap-socket", m.socket, "--http-addr", m.http}, spec.Args...)
	if v, ok := LastFlagValue(spec.Args, "http-addr"); ok {
		m.http = v
	}
	if v, ok := LastFlagValue(spec.Args, "bootstrap-socket"); ok {
		m.socket = v
	}
	p, err := StartProcess(ProcessSpec{Path: bin, Args: args, Dir: m.dir, Env: spec.Env, ExtraFiles: spec.ExtraFiles, ListenFDs: spec.ListenFDs})
	if err != nil {
		m.removeDir()
		return nil, err
	}
	m.Process = p
	return m, nil
}

// Socket is the Manager's bootstrap socket path.
func (m *Manager) Socket() string { return m.socket }

// HTTPAddr is the Manager's --http-addr (GET /health, /metrics); "" when it
// has none.
func (m *Manager) HTTPAddr() string { return m.http }

// Stop ends the Manager as Process.Stop does (SIGTERM, SIGKILL after
// grace) and then removes its directory if Start made it. It returns the
// exit status; safe to call more than once and concurrently.
func (m *Manager) Stop(grace time.Duration) error {
	err := m.Process.Stop(grace)
	m.removeDir()
	return err
}

// Kill ends the Manager with SIGKILL, waits for it and removes its
// directory if Start made it. It returns the exit status.
func (m *Manager) Kill() error {
	err := m.Process.Kill()
	m.removeDir()
	return err
}

func (m *Manager) removeDir() {
	if m.ownDir {
		os.RemoveAll(m.dir)
	}
}
