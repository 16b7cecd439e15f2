package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrRunning is wrapped by the errors of Wait and WaitOutput when the
// process has not exited, or has not printed what was waited for, in time.
var ErrRunning = errors.New("process still running")

// ProcessSpec says how to start a Process.
type ProcessSpec struct {
	Path  string   // the binary
	Args  []string // its arguments
	Dir   string   // folder of the output file; "" = os.TempDir()
	Stdin bool     // give the process a pipe as its stdin (Process.Stdin); otherwise /dev/null
	// Env is added to this process's environment for the child.
	Env []string
	// ExtraFiles become the child's fds 3, 4, ... (exec.Cmd.ExtraFiles).
	// With ListenFDs the child also gets LISTEN_FDS=len(ExtraFiles) and
	// LISTEN_PID set to its own pid, as systemd passes fds (sd_listen_fds(3)):
	// it is started through /bin/sh, which sets LISTEN_PID=$$ and execs the
	// binary in its place (the pid stays).
	ExtraFiles []*os.File
	ListenFDs  bool
}

// Process is a started child process whose stdout and stderr both go to
// one file. Its methods are safe for concurrent use.
type Process struct {
	cmd     *exec.Cmd
	outPath string
	stdin   io.WriteCloser
	done    chan struct{} // closed once the process has exited and err is set
	err     error         // cmd.Wait's result: nil, or *exec.ExitError
	stopped sync.Once
}

// StartProcess starts spec.Path with spec.Args. Its output file is created
// in spec.Dir (named after the binary, with a random suffix) and is left
// there when the process ends. Errors: the output file cannot be created,
// or the binary cannot be started (wrapped *exec.Error or *fs.PathError).
func StartProcess(spec ProcessSpec) (*Process, error) {
	dir := spec.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	out, err := os.CreateTemp(dir, filepath.Base(spec.Path)+"-*.log")
	if err != nil {
		return nil, fmt.Errorf("creating the output file of %s: %w", spec.Path, err)
	}
	defer out.Close() // the child has its own descriptor once started
	cmd := exec.Command(spec.Path, spec.Args...)
	if spec.ListenFDs {
		cmd = exec.Command("/bin/sh", append([]string{"-c", `LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"`, spec.Path}, spec.Args...)...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("LISTEN_FDS=%d", len(spec.ExtraFiles)))
	}
	if len(spec.Env) > 0 {
		cmd.Env = append(cmd.Environ(), spec.Env...)
	}
	cmd.ExtraFiles = spec.ExtraFiles
	p := &Process{cmd: cmd, outPath: out.Name(), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if spec.Stdin {
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			return nil, fmt.Errorf("stdin pipe of %s: %w", spec.Path, err)
		}
	}
	if err := p.cmd.Start(); err != nil {
		if p.stdin != nil {
			p.stdin.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", QuoteCommand(spec.Path, spec.Args), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Command is the command line, quoted as by QuoteCommand.
func (p *Process) Command() string { return QuoteCommand(p.cmd.Path, p.cmd.Args[1:]) }

// Stdin is the write end of the process's stdin pipe; nil unless
// ProcessSpec.Stdin was set. Closing it gives the process end of file.
func (p *Process) Stdin() io.WriteCloser { return p.stdin }

// Signal sends sig. After the process has exited it returns
// os.ErrProcessDone.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Done is closed once the process has exited; Err then has its status.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit status once Done is closed: nil for exit 0, else an
// *exec.ExitError (a nonzero code or a signal). Before that it is nil.
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to d for the process to exit and returns its status as
// Err does; if it is still running after d, an error wrapping ErrRunning.
func (p *Process) Wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("%s did not exit within %v: %w", p.cmd.Path, d, ErrRunning)
	}
}

// OutputPath is the file holding the process's stdout and stderr.
func (p *Process) OutputPath() string { return p.outPath }

// Output is everything the process has written to stdout and stderr so
// far ("" if the file cannot be read, e.g. once a Manager's own directory
// is removed).
func (p *Process) Output() string {
	b, _ := os.ReadFile(p.outPath)
	return string(b)
}

// Tail is the last n bytes of Output.
func (p *Process) Tail(n int) string {
	out := p.Output()
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// WaitOutput polls Output every 5 ms until it contains want. It returns an
// error wrapping ErrRunning if d passes first, or one saying the process
// exited (with its status) if it ends without printing want.
func (p *Process) WaitOutput(want string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		if strings.Contains(p.Output(), want) {
			return nil
		}
		if p.Exited() {
			if strings.Contains(p.Output(), want) { // written just before the exit
				return nil
			}
			return fmt.Errorf("%s exited (%v) without printing %q", p.cmd.Path, p.err, want)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not print %q within %v: %w", p.cmd.Path, want, d, ErrRunning)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Kill sends SIGKILL (unless the process has exited) and waits for the
// exit; it returns the exit status as Err does.
func (p *Process) Kill() error {
	if !p.Exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
	return p.err
}

// Stop ends the process: SIGTERM, then SIGKILL if it has not exited after
// grace. It returns the exit status as Err does (a process that exits on
// SIGTERM by itself usually returns nil). Safe to call more than once and
// from several goroutines: only the first call signals; all wait.
func (p *Process) Stop(grace time.Duration) error {
	p.stopped.Do(func() {
		if p.Exited() {
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
		}
	})
	<-p.done
	return p.err
}
