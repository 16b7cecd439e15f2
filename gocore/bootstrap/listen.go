package bootstrap

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse means a live Manager already serves the socket path.
var ErrInUse = errors.New("bootstrap: socket path is served by a live process")

// ErrNotSocket means the path exists and is not a socket; it is never deleted.
var ErrNotSocket = errors.New("bootstrap: path exists and is not a socket; refusing to delete it")

// ErrUnsafeDir means the socket's directory, or one above it, lets another
// user replace the socket: it is owned by a uid other than root and the
// Manager's, or group- or world-writable without the sticky bit. In such a
// directory another user can rename the live socket away and bind their
// own in its place, and receive the engines' KV buffers.
var ErrUnsafeDir = errors.New("bootstrap: another user could replace the socket in this directory")

// ErrNotOurs means the path, after bind(2), is not a socket of the
// Manager's uid with mode 0600: something swapped it meanwhile.
var ErrNotOurs = errors.New("bootstrap: socket path is not the Manager's own 0600 socket after bind")

// Listen creates the bootstrap socket at path with mode 0600 set before
// listen(2). The directory must be safe (ErrUnsafeDir: see checkDir), an
// existing live socket gives ErrInUse, a dead one is removed, a non-socket
// gives ErrNotSocket, and after bind the path must be this process's own
// 0600 socket (ErrNotOurs).
func Listen(path string) (*net.UnixListener, error) {
	if err := checkDir(path, uint32(os.Geteuid())); err != nil {
		return nil, err
	}
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
	if err := checkOwn(path, uint32(os.Geteuid())); err != nil {
		return nil, err // not removed: the path may not be ours
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

// checkDir applies the directory rule of ErrUnsafeDir to the socket's
// directory and every directory above it, after resolving symbolic links
// (the rule ssh's StrictModes applies to key files): each must be owned by
// root or uid, and if group or others may write it, it must be sticky (as
// /tmp is), so nobody but its owner can rename or remove what uid created
// in it. A 0700 directory of the Manager's user is the safe choice
// (docs/channel.md, "The bootstrap socket").
func checkDir(path string, uid uint32) error {
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("bootstrap: socket directory of %s: %w", path, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("bootstrap: socket directory %s: %w", dir, err)
	}
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("bootstrap: socket directory %s: %w", d, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("bootstrap: socket directory %s: no owner information", d)
		}
		switch {
		case st.Uid != 0 && st.Uid != uid:
			return fmt.Errorf("%w: %s is owned by uid %d, not by root or the Manager's uid %d; put the socket in a 0700 directory of uid %d (--bootstrap-socket)", ErrUnsafeDir, d, st.Uid, uid, uid)
		case fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0:
			return fmt.Errorf("%w: %s has mode %v, writable by group or others without the sticky bit; use a 0700 directory (--bootstrap-socket) or chmod +t it", ErrUnsafeDir, d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// checkOwn reports ErrNotOurs unless path is a socket owned by uid with
// mode 0600.
func checkOwn(path string, uid uint32) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("bootstrap: checking %s after bind: %w", path, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return fmt.Errorf("%w: %s: no owner information", ErrNotOurs, path)
	case fi.Mode()&os.ModeSocket == 0:
		return fmt.Errorf("%w: %s is %v, not a socket", ErrNotOurs, path, fi.Mode())
	case st.Uid != uid:
		return fmt.Errorf("%w: %s is owned by uid %d, not %d", ErrNotOurs, path, st.Uid, uid)
	case fi.Mode().Perm() != 0o600:
		return fmt.Errorf("%w: %s has mode %v, want 0600", ErrNotOurs, path, fi.Mode().Perm())
	}
	return nil
}
