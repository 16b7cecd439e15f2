package bootstrap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse means a live Manager already serves the socket path.
var ErrInUse = errors.New("bootstrap: socket path is served by a live process")

// ErrNotSocket means the path exists and is not a socket; it is never deleted.
var ErrNotSocket = errors.New("bootstrap: path exists and is not a socket; refusing to delete it")

// Listen creates the bootstrap socket at path with mode 0600 set before
// listen(2). An existing live socket gives ErrInUse, a dead one is removed, a
// non-socket gives ErrNotSocket.
func Listen(path string) (*net.UnixListener, error) {
	if err := reclaim(path); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: socket: %w", err)
	}
	closeFD := true
	defer func() {
		if closeFD {
			unix.Close(fd)
		}
	}()
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return nil, fmt.Errorf("bootstrap: bind %s: %w", path, err)
	}
	// Before listen: a connect to a bound socket that is not listening is
	// refused (ECONNREFUSED), so nobody can get in through the umask mode.
	if err := os.Chmod(path, 0o600); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("bootstrap: chmod 0600 %s: %w", path, err)
	}
	if err := unix.Listen(fd, 128); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("bootstrap: listen %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	closeFD = false
	defer f.Close() // FileListener dups the fd
	l, err := net.FileListener(f)
	if err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("bootstrap: listener %s: %w", path, err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // Server.Close removes the path itself
	return ul, nil
}

// reclaim applies the existing-path rules of DESIGN.md §5.1.
func reclaim(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bootstrap: stat %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%w: %s (mode %v)", ErrNotSocket, path, fi.Mode())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%w: %s", ErrInUse, path)
	}
	if !errors.Is(err, unix.ECONNREFUSED) {
		return fmt.Errorf("bootstrap: probing existing socket %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("bootstrap: removing dead socket %s: %w", path, err)
	}
	return nil
}
