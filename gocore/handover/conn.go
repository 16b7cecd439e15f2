package handover

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/orbitkv/orbitkv/gocore/unixsock"
)

// ErrClosed is wrapped when the other side closed its end (it exited).
var ErrClosed = errors.New("handover: the other process closed the connection")

// ErrTimeout is wrapped when the other side sent nothing in time.
var ErrTimeout = errors.New("handover: timed out")

// conn is one end of the socket pair.
type conn struct{ fd int }

func (c *conn) close() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

func (c *conn) send(m Message, files ...*os.File) error {
	if err := unix.Sendmsg(c.fd, m.Encode(), unixsock.Rights(files...), nil, 0); err != nil {
		if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) {
			return fmt.Errorf("sending %s: %w", m.Kind, ErrClosed)
		}
		return fmt.Errorf("handover: sending %s: %w", m.Kind, err)
	}
	return nil
}

// recv waits up to timeout for one message of kind want; fds that came
// with it are returned (Hello, State), any others closed.
func (c *conn) recv(want Kind, timeout time.Duration) (Message, []*os.File, error) {
	m, files, _, err := c.recvCred(want, timeout)
	return m, files, err
}

// recvCred is recv that also returns the sender's credentials, which the
// kernel attaches when the socket has SO_PASSCRED (nil otherwise).
func (c *conn) recvCred(want Kind, timeout time.Duration) (Message, []*os.File, *unix.Ucred, error) {
	pfd := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return Message{}, nil, nil, fmt.Errorf("%w after %v waiting for %s", ErrTimeout, timeout, want)
		}
		n, err := unix.Poll(pfd, int(min(left.Milliseconds()+1, 1<<30)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return Message{}, nil, nil, fmt.Errorf("handover: poll: %w", err)
		}
		if n > 0 {
			break
		}
	}
	b, oob := make([]byte, MessageBytes+1), make([]byte, unix.CmsgSpace(4*4)+unix.CmsgSpace(unix.SizeofUcred))
	n, oobn, _, _, err := unix.Recvmsg(c.fd, b, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return Message{}, nil, nil, fmt.Errorf("handover: waiting for %s: %w", want, err)
	}
	var files []*os.File
	var cred *unix.Ucred
	if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, cm := range msgs {
			if fds, err := unix.ParseUnixRights(&cm); err == nil {
				for _, fd := range fds {
					files = append(files, os.NewFile(uintptr(fd), "handover-fd-"+strconv.Itoa(fd)))
				}
			} else if uc, err := unix.ParseUnixCredentials(&cm); err == nil {
				cred = uc
			}
		}
	}
	drop := func() {
		for _, f := range files {
			f.Close()
		}
	}
	if n == 0 && len(files) == 0 {
		return Message{}, nil, nil, fmt.Errorf("waiting for %s: %w", want, ErrClosed)
	}
	m, err := Decode(b[:n], len(files))
	if err == nil && m.Kind != want {
		err = fmt.Errorf("handover: got %s, want %s", m.Kind, want)
	}
	if err != nil {
		drop()
		return Message{}, nil, nil, err
	}
	return m, files, cred, nil
}

// Successor is the predecessor's handle on the Manager it started.
type Successor struct {
	cmd    *exec.Cmd
	c      conn
	exited chan struct{}
	err    error    // cmd.Wait's, once exited is closed
	sock   *os.File // the successor's socket, which c uses after the hello
	layout uint64
}

// Spawn starts the successor: path with args, this process's environment
// plus EnvFD, its stdout and stderr this process's (the same journal),
// one end of a socket pair as fd 3. It waits up to timeout for its Hello,
// which comes once the successor's configuration is valid. The successor outlives this
// process (no parent-death signal). Errors: the successor cannot start,
// exits (its status named; its log says why) or stays silent; it is then
// killed and reaped.
func Spawn(path string, args []string, timeout time.Duration) (*Successor, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("handover: socketpair: %w", err)
	}
	if err := unix.SetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("handover: SO_PASSCRED: %w", err)
	}
	child := os.NewFile(uintptr(fds[1]), "handover")
	cmd := exec.Command(path, args...)
	cmd.Env = append(successorEnv(), EnvFD+"=3")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{child}
	// Its own process group, so that a failed successor is killed with
	// whatever it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	child.Close()
	s := &Successor{cmd: cmd, c: conn{fd: fds[0]}, exited: make(chan struct{})}
	if err != nil {
		s.c.close()
		return nil, fmt.Errorf("handover: starting the successor %s: %w", path, err)
	}
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	m, files, cred, err := s.c.recvCred(Hello, timeout)
	if err == nil {
		err = s.check(cred)
	}
	if err == nil {
		select {
		case <-s.exited: // reaped: its pid may be another process's now
			err = fmt.Errorf("handover: the successor exited before its hello was read (%v)", s.err)
		default:
		}
	}
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, s.fail(err)
	}
	// The rest runs on the socket the successor made once non-dumpable.
	s.c.close()
	s.c = conn{fd: int(files[0].Fd())}
	s.sock = files[0]
	s.layout = m.A
	return s, nil
}

// check refuses a hello that is not the successor's own, sent once it
// could no longer be traced: the kernel's word on the sender's pid must be
// the pid started, its uid this process's, and nothing may trace it.
func (s *Successor) check(cred *unix.Ucred) error {
	pid := s.cmd.Process.Pid
	switch {
	case cred == nil:
		return errors.New("handover: the hello came without the sender's credentials")
	case int(cred.Pid) != pid || int(cred.Uid) != os.Getuid():
		return fmt.Errorf("handover: the hello came from pid %d uid %d, not from the successor (pid %d, uid %d): another process holds its socket",
			cred.Pid, cred.Uid, pid, os.Getuid())
	}
	if tracer, err := tracerPid(pid); err != nil || tracer != 0 {
		return fmt.Errorf("handover: the successor (pid %d) is traced by pid %d (%v)", pid, tracer, err)
	}
	return nil
}

// tracerPid is /proc/PID/status's TracerPid.
func tracerPid(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, errors.New("no TracerPid in /proc/PID/status")
}

// successorEnv is this process's environment for the successor, less
// WATCHDOG_PID: systemd's watchdog names this process there, and the
// successor, with WATCHDOG_USEC alone, feeds it once it is the service's
// main process.
func successorEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WATCHDOG_PID=") {
			env = append(env, kv)
		}
	}
	return env
}

// Layout is the RAM ledger layout version the successor reads (its
// Hello). One other than this Manager's means the successor will refuse
// the tier by name and start with an empty one.
func (s *Successor) Layout() uint64 { return s.layout }

// Pid is the successor's pid.
func (s *Successor) Pid() int { return s.cmd.Process.Pid }

// fail kills the successor, waits until it is reaped, and returns err
// with its exit status.
func (s *Successor) fail(err error) error {
	syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // its process group
	<-s.exited
	if s.sock != nil { // c runs on it
		s.sock.Close()
		s.sock, s.c = nil, conn{fd: -1}
	} else {
		s.c.close()
	}
	return fmt.Errorf("%w (successor pid %d: %v)", err, s.cmd.Process.Pid, s.err)
}

// Hand sends the tier's memfds (the predecessor has stopped writing it)
// and waits up to timeout for Adopted. On any error the successor has
// been killed and reaped: the caller may serve the tier again.
func (s *Successor) Hand(arena, ledger *os.File, epoch uint64, timeout time.Duration) (Message, error) {
	if err := s.c.send(Message{Kind: State, PID: uint32(os.Getpid()), A: epoch}, arena, ledger); err != nil {
		return Message{}, s.fail(err)
	}
	m, _, err := s.c.recv(Adopted, timeout)
	if err != nil {
		return Message{}, s.fail(err)
	}
	return m, nil
}

// Finish sends Done (the caller told the service manager about the
// successor) and closes the connection; the successor runs on.
func (s *Successor) Finish() error {
	err := s.c.send(Message{Kind: Done, PID: uint32(os.Getpid())})
	s.sock.Close() // its fd is s.c's
	s.sock, s.c = nil, conn{fd: -1}
	return err
}

// Abort kills the successor and waits until it is reaped (an upgrade
// abandoned before Hand).
func (s *Successor) Abort() { s.fail(nil) }

// Predecessor is the successor's handle on the Manager that started it.
type Predecessor struct{ c conn }

// Join takes the connection EnvFD names (nil, nil when the variable is
// unset: no handover) and sends Hello with layout, the ledger layout
// version this process reads, and one end of a new socket pair, over which
// the rest runs. The variable is unset. Call it only once this process is
// non-dumpable (see the package doc).
func Join(layout uint32) (*Predecessor, error) {
	v, ok := os.LookupEnv(EnvFD)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(EnvFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("handover: %s=%q, want a descriptor number of 3 or more", EnvFD, v)
	}
	if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_SEQPACKET {
		return nil, fmt.Errorf("handover: %s=%d is not a seqpacket socket (%v)", EnvFD, fd, err)
	}
	unix.CloseOnExec(fd)
	first := conn{fd: fd}
	defer first.close() // nothing more goes over it
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("handover: socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "handover")
	defer theirs.Close()
	p := &Predecessor{c: conn{fd: pair[0]}}
	if err := first.send(Message{Kind: Hello, PID: uint32(os.Getpid()), A: uint64(layout)}, theirs); err != nil {
		p.c.close()
		return nil, err
	}
	return p, nil
}

// Receive waits up to timeout for the tier: the arena's and the ledger's
// memfds, in that order, and the predecessor's epoch.
func (p *Predecessor) Receive(timeout time.Duration) (arena, ledger *os.File, epoch uint64, err error) {
	m, files, err := p.c.recv(State, timeout)
	if err != nil {
		return nil, nil, 0, err
	}
	return files[0], files[1], m.A, nil
}

// Adopted reports what was adopted and waits up to timeout for Done (the
// predecessor is about to exit); then the connection is closed. A
// predecessor that exits without Done is no error.
func (p *Predecessor) Adopted(blocks, bytes uint64, timeout time.Duration) error {
	defer p.c.close()
	if err := p.c.send(Message{Kind: Adopted, PID: uint32(os.Getpid()), A: blocks, B: bytes}); err != nil {
		return err
	}
	if _, _, err := p.c.recv(Done, timeout); err != nil && !errors.Is(err, ErrClosed) {
		return err
	}
	return nil
}

// Close closes the connection (a successor that will not adopt).
func (p *Predecessor) Close() { p.c.close() }
