// Package sdstub stands in for systemd as the service manager of an
// orbitkv-manager in tests and benches, where no systemd runs as PID 1: it
// binds the NOTIFY_SOCKET datagram socket, records the state lines a
// service sends (READY=1, STOPPING=1, STATUS=...), and keeps a file
// descriptor store the way systemd does (sd_notify(3), systemd 252's
// rules): FDSTORE=1 with FDNAME=NAME and SCM_RIGHTS adds the fds under
// NAME, FDSTOREREMOVE=1 with FDNAME=NAME closes and removes every fd of
// that name. Files gives a restarted service the stored fds, which
// launch.Spec passes as LISTEN_FDS with LISTEN_FDNAMES, as systemd does
// on a restart after a crash (Restart=).
//
// It is a test double for what a real component cannot do here (there is
// no systemd as PID 1 on the machines the tests run on); what it keeps is
// the service's real memfds. Whatever holds the RAM tier's fds could read
// the tier through /proc/PID/fd, so Start makes the calling process
// non-dumpable (PR_SET_DUMPABLE 0): no process of the same uid may then
// open its fds or ptrace it, as for systemd (root) itself.
//
// Who may import it: tests and benches; never the Manager binary.
package sdstub

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Stub is a NOTIFY_SOCKET and file descriptor store. Its methods are safe
// for concurrent use.
type Stub struct {
	path string
	conn *net.UnixConn
	done chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every datagram
	lines   []string      // every state line received, in order
	store   []stored      // the fd store, in the order fds arrived
}

type stored struct {
	name string
	f    *os.File
}

// Start makes the process non-dumpable and binds a notify socket in dir.
func Start(dir string) (*Stub, error) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("sdstub: PR_SET_DUMPABLE 0: %w", err)
	}
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("sdstub: %w", err)
	}
	s := &Stub{path: path, conn: conn, done: make(chan struct{}), changed: make(chan struct{})}
	go s.receive()
	return s, nil
}

// Env is the NOTIFY_SOCKET assignment a service started under the stub
// needs.
func (s *Stub) Env() string { return "NOTIFY_SOCKET=" + s.path }

func (s *Stub) receive() {
	defer close(s.done)
	buf, oob := make([]byte, 4096), make([]byte, unix.CmsgSpace(4*64))
	for {
		n, oobn, _, _, err := s.conn.ReadMsgUnix(buf, oob)
		if err != nil {
			return
		}
		var files []*os.File
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				fds, err := unix.ParseUnixRights(&m)
				if err != nil {
					continue
				}
				for _, fd := range fds {
					unix.CloseOnExec(fd)
					files = append(files, os.NewFile(uintptr(fd), "stored"))
				}
			}
		}
		s.apply(strings.Split(strings.TrimSpace(string(buf[:n])), "\n"), files)
	}
}

// apply records a datagram's lines and applies its fd store commands;
// fds not stored are closed (as systemd closes fds sent without FDSTORE=1).
func (s *Stub) apply(lines []string, files []*os.File) {
	vars := map[string]string{}
	for _, l := range lines {
		if k, v, ok := strings.Cut(l, "="); ok {
			vars[k] = v
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, lines...)
	name := vars["FDNAME"]
	if name == "" {
		name = "stored"
	}
	if vars["FDSTOREREMOVE"] == "1" {
		kept := s.store[:0]
		for _, x := range s.store {
			if x.name == name {
				x.f.Close()
			} else {
				kept = append(kept, x)
			}
		}
		s.store = kept
	}
	for _, f := range files {
		if vars["FDSTORE"] == "1" {
			s.store = append(s.store, stored{name, f})
		} else {
			f.Close()
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// Lines are the state lines received so far.
func (s *Stub) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

// Names are the names of the stored fds, in store order.
func (s *Stub) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, len(s.store))
	for i, x := range s.store {
		names[i] = x.name
	}
	return names
}

// ErrTimeout is wrapped by Wait's error when cond did not hold in time.
var ErrTimeout = errors.New("sdstub: timed out")

// Wait waits up to d until cond, called under the stub's lock with the
// lines received and the stored names, holds.
func (s *Stub) Wait(d time.Duration, what string, cond func(lines, names []string) bool) error {
	deadline := time.After(d)
	for {
		s.mu.Lock()
		names := make([]string, len(s.store))
		for i, x := range s.store {
			names[i] = x.name
		}
		ok, ch := cond(s.lines, names), s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-deadline:
			return fmt.Errorf("%w after %v waiting for %s; stored %q", ErrTimeout, d, what, s.Names())
		}
	}
}

// Files are duplicates of the stored fds, for the next start of the
// service (launch.Spec.ExtraFiles), and the LISTEN_FDNAMES assignment
// naming them; the caller closes the files once the child started.
func (s *Stub) Files() ([]*os.File, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var files []*os.File
	names := make([]string, 0, len(s.store))
	for _, x := range s.store {
		fd, err := unix.FcntlInt(x.f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, "", fmt.Errorf("sdstub: dup: %w", err)
		}
		files = append(files, os.NewFile(uintptr(fd), x.name))
		names = append(names, x.name)
	}
	return files, "LISTEN_FDNAMES=" + strings.Join(names, ":"), nil
}

// Close closes the socket and every stored fd.
func (s *Stub) Close() {
	s.conn.Close()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.store {
		x.f.Close()
	}
	s.store = nil
	os.Remove(s.path)
}

// Dumpable reports the calling process's PR_GET_DUMPABLE (0 after Start).
func Dumpable() (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_PRCTL, unix.PR_GET_DUMPABLE, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
